"""The source-to-code sink: text turned into code while a cell runs.

compile(), exec() and eval() of a string run Python the rewriter never saw, with real builtins. Reviews
R10-3 and R10-4 fed cell-chosen text to library code generators (dataclasses builds __init__ from field
names; scipy exec()s a distribution's _parse_arg_template). While a cell runs, the audit hook now
refuses every 'compile' and 'exec' event except imports of installed modules, the cell's own code, and a
short list of library helpers whose text the cell cannot steer (confine._SOURCE_CALLERS_SPEC).

"Ungated Python" (what an escape would reach) is simulated by host functions placed in the namespace.
"""
from __future__ import annotations

import os

import pytest

UNGATED_SOURCE = {
    "exec": lambda marker: exec(f"open({str(marker)!r}, 'w').write('x')", {}),
    "eval": lambda marker: eval(f"open({str(marker)!r}, 'w').write('x')", {}),
    "compile": lambda marker: compile(f"open({str(marker)!r}, 'w')", "<x>", "exec"),
    "compile_as_a_cell": lambda marker: compile(f"open({str(marker)!r}, 'w')", "<cell-99>", "exec"),
    "exec_bytes": lambda marker: exec(f"open({str(marker)!r}, 'w').write('x')".encode(), {}),
    "exec_code_made_outside": lambda marker: exec(_PRECOMPILED(marker), {}),
}


def _PRECOMPILED(marker):
    # compiled by the host before the cell: still refused when executed during one
    return _CODE.setdefault(marker, compile(f"open({str(marker)!r}, 'w').write('x')", "<host>", "exec"))


_CODE: dict = {}


@pytest.mark.parametrize("name", sorted(UNGATED_SOURCE))
def test_ungated_python_cannot_turn_text_into_code(sandbox, outside, name):
    marker = outside / f"pwned-{name}"
    if name == "exec_code_made_outside":
        _PRECOMPILED(marker)
    sandbox.ns["run_text"] = lambda: UNGATED_SOURCE[name](marker)
    r = sandbox.run("run_text()")
    assert not r.ok and r.error_name == "OperationDenied", r
    assert not marker.exists()


def test_the_host_compiles_and_runs_text_between_cells(sandbox, outside):
    sandbox.run("x = 1")
    marker = outside / "host-exec"
    exec(f"open({str(marker)!r}, 'w').write('fine')", {})
    assert marker.read_text() == "fine"


# --- dataclasses: field names are the text of the generated methods -------------------------------------

# what the injected text does once it runs: print a host module's secret, and run a process from a fresh
# contextvars.Context (which the confinement sink refuses on its own: the secret proves the text ran)
PAYLOAD = ("import sys, contextvars, os\nprint(sys.modules['sandbox_test_host_secret'].SECRET)\n"
           "contextvars.Context().run(os.system, 'id > {marker}')\n")
INJECTED_NAME = "a):\n  pass\n" + PAYLOAD + "def b(c"

DATACLASS_ROUTES = {
    # the setattr gate refuses names that are not identifiers
    "setattr_field": "class C:\n    pass\nsetattr(C, NAME, dataclasses.field(init=False))\n"
                     "C.__annotations__ = {NAME: int}\ndataclasses.dataclass(C)",
    # annotations written by the cell itself (a cell may write its own class's __annotations__)
    "annotations_written": "class C:\n    pass\nC.__annotations__ = {NAME: int}\ndataclasses.dataclass(C)",
    # update_wrapper copying a cell object's answer onto the class (the reviewer's route, without setattr)
    "update_wrapper": "class W:\n    def __getattr__(self, n):\n        if n == '__annotations__':\n"
                      "            return {NAME: int}\n        return 'C' if n in ('__name__', '__qualname__') else None\n"
                      "class C:\n    pass\ntry:\n    functools.update_wrapper(C, W())\nexcept Exception:\n    pass\n"
                      "dataclasses.dataclass(C)",
    # a base whose __dataclass_fields__ holds a real Field renamed by the cell
    "renamed_base_field": "@dataclasses.dataclass\nclass B:\n    x: int = 0\nf = dataclasses.fields(B)[0]\n"
                          "f.name = NAME\nclass D(B):\n    y: int = 1\ndataclasses.dataclass(D)",
    # a str subclass as a key, whose repr() would be pasted into the generated text
    "str_subclass_key": "class S(str):\n    def __repr__(self):\n        return NAME\n"
                        "class C:\n    pass\nC.__annotations__ = {S('a'): int}\ndataclasses.dataclass(C, frozen=True)",
}


@pytest.mark.parametrize("route", sorted(DATACLASS_ROUTES))
def test_dataclass_text_is_built_from_identifiers_only(run, outside, host_secret, route):
    marker = outside / f"pwned-dataclass-{route}"
    r = run(f"import dataclasses, functools\nNAME = {INJECTED_NAME.format(marker=marker)!r}\n" +
            DATACLASS_ROUTES[route])
    assert not r.ok and r.error_name in ("OperationDenied", "AttributeDenied", "CallDenied"), r
    assert not marker.exists() and not r.leaked(host_secret), r


def test_the_sink_refuses_dataclass_text_a_library_builds_from_cell_names(sandbox, outside, host_secret):
    """The guarded dataclass() refuses such names before it starts; a library applying the real dataclass
    to a cell class (simulated: the host's dataclass in the namespace) meets the sink itself."""
    import dataclasses
    marker = outside / "pwned-unguarded-dataclass"
    sandbox.ns["library_dataclass"] = dataclasses.dataclass
    r = sandbox.run(f"NAME = {INJECTED_NAME.format(marker=marker)!r}\n"
                    "class C:\n    pass\nC.__annotations__ = {NAME: int}\nlibrary_dataclass(C)")
    assert not r.ok and r.error_name == "OperationDenied", r
    assert not marker.exists() and not r.leaked(host_secret), r
    r = sandbox.run("class P:\n    pass\nP.__annotations__ = {'x': int}\nprint(library_dataclass(P)(1))")
    assert r.ok and r.stdout == "P(x=1)\n", r


def test_forward_references_are_compiled_but_never_evaluated(sandbox, host_secret):
    """typing compiles a string annotation into a ForwardRef (harmless: NamedTuple does it for every string
    annotation) and evaluates it with eval() when someone asks for type hints: a library doing that for a
    cell class (simulated by the host's get_type_hints) runs the cell's text, which the sink refuses."""
    import typing
    sandbox.ns["library_type_hints"] = typing.get_type_hints
    r = sandbox.run("class C:\n    x: \"__import__('sys').modules['sandbox_test_host_secret'].SECRET\"\n"
                    "print(library_type_hints(C))")
    assert not r.ok and r.error_name == "OperationDenied", r
    assert not r.leaked(host_secret)


def test_a_module_the_cell_wrote_is_not_imported_by_a_library(sandbox, outside, host_secret, monkeypatch):
    """A library that imports a name the cell chose (an optional backend, a plugin) from a sys.path entry the
    cell can write would run the cell's file: the import system compiles and runs installed files only
    while a cell runs."""
    import importlib
    import sys
    marker = outside / "pwned-by-import"
    monkeypatch.syspath_prepend(str(sandbox.workdir))
    sandbox.ns["library_import"] = importlib.import_module
    r = sandbox.run(f"with open('cellplugin.py', 'w') as f:\n"
                    f"    f.write({PAYLOAD.format(marker=marker)!r})\n"
                    "library_import('cellplugin')")
    sys.modules.pop("cellplugin", None)
    assert not r.ok and r.error_name == "OperationDenied", r
    assert not marker.exists() and not r.leaked(host_secret), r


def test_a_cells_text_signature_names_no_host_value(sandbox, host_secret):
    """inspect.signature evaluates the dotted names of a builtin's text signature; a cell object posing as
    a method descriptor with its own __text_signature__ would read any module's constant."""
    import inspect
    sandbox.ns["library_signature"] = lambda obj: str(inspect.signature(obj))
    r = sandbox.run("class F:\n    __text_signature__ = '(x=sandbox_test_host_secret.SECRET)'\n"
                    "    def __get__(self, obj, owner=None):\n        return self\n"
                    "    def __call__(self, x):\n        return x\nprint(library_signature(F()))")
    assert not r.leaked(host_secret), r
    r = sandbox.run("print(library_signature(list.index))")
    assert r.ok and "9223372036854775807" in r.stdout, r


def test_setattr_refuses_names_that_are_not_identifiers(run):
    for src in ("class C:\n    pass\nsetattr(C, 'a b', 1)",
                "class C:\n    pass\nc = C()\nsetattr(c, 'x-y', 1)",
                "class C:\n    def __init__(self):\n        object.__setattr__(self, '1x', 1)\nC()"):
        r = run(src)
        assert not r.ok and r.error_name == "AttributeDenied" and "identifier" in r.error_value, r
    assert run("class C:\n    pass\nsetattr(C, 'ok_name', 1)\nprint(C.ok_name)").stdout == "1\n"


# --- scipy: rv_generic exec()s _parse_arg_template ------------------------------------------------------

SCIPY_TEMPLATE_ROUTES = {
    # the reviewer's route: the cell's template, scipy's builder skipped
    "class_template_and_no_builder": "    _parse_arg_template = EVIL\n"
                                     "    def _construct_argparser(self, *args, **kwargs):\n        pass\n",
    # the builder left alone would overwrite the template from validated shape names; a cell class that
    # names the template at all is refused (an honest subclass never does)
    "class_template_only": "    _parse_arg_template = EVIL\n",
}


@pytest.mark.parametrize("route", sorted(SCIPY_TEMPLATE_ROUTES))
def test_scipy_runs_only_its_own_argument_parser_template(run, outside, host_secret, route):
    marker = outside / f"pwned-scipy-{route}"
    evil = PAYLOAD.format(marker=marker) + ("def _parse_args(self, *a, **k): return a, 0, 1\n"
                                            "_parse_args_stats = _parse_args_rvs = _parse_args\n")
    r = run(f"from scipy import stats\nEVIL = {evil!r}\n"
            "class D(stats.rv_continuous):\n" + SCIPY_TEMPLATE_ROUTES[route] +
            "    def _pdf(self, x):\n        return 1.0\nD(name='d')")
    assert not r.ok and r.error_name == "OperationDenied", r
    assert not marker.exists() and not r.leaked(host_secret), r


# --- honest code generation keeps working ---------------------------------------------------------------

HONEST = {
    "dataclass": ("import dataclasses\n@dataclasses.dataclass(frozen=True, order=True)\nclass P:\n    x: int\n"
                  "    y: float = 2.0\n    tags: list = dataclasses.field(default_factory=list)\nprint(P(1) < P(2), P(1))",
                  "True P(x=1, y=2.0, tags=[])\n"),
    "dataclass_inheritance": ("from dataclasses import dataclass\n@dataclass\nclass A:\n    a: int\n@dataclass\n"
                              "class B(A):\n    b: str = 'x'\nprint(B(1))", "B(a=1, b='x')\n"),
    "namedtuple": ("import collections\nP = collections.namedtuple('P', 'x y', defaults=[0])\nprint(P(1), P._fields)",
                   "P(x=1, y=0) ('x', 'y')\n"),
    "typing_namedtuple_string_annotation": ("from typing import NamedTuple\nclass Q(NamedTuple):\n    a: 'int'\n"
                                            "    b: str = 'z'\nprint(Q(1))", "Q(a=1, b='z')\n"),
    "scipy_custom_distribution": ("from scipy import stats\nclass U(stats.rv_continuous):\n    def _pdf(self, x):\n"
                                  "        return 1.0\nu = U(a=0, b=1, name='u')\nprint(round(float(u.cdf(0.25)), 3))",
                                  "0.25\n"),
    "scipy_shapes": ("from scipy import stats\nclass G(stats.rv_continuous):\n    def _pdf(self, x, k):\n"
                     "        return k * x ** (k - 1)\ng = G(a=0, b=1, shapes='k', name='g')\n"
                     "print(round(float(g.cdf(0.5, 2)), 3))", "0.25\n"),
    "styler_html": ("import pandas as pd\nh = pd.DataFrame({'a': [1.5]}).style.format('{:.2f}').to_html()\n"
                    "print('1.50' in h)", "True\n"),
}


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_code_generation_still_works(run, name):
    src, expected = HONEST[name]
    r = run(src)
    assert r.ok, r
    if expected is not None:
        assert r.stdout == expected, r
