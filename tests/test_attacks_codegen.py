"""The source-to-code sink: text turned into code while a cell runs.

compile(), exec() and eval() of a string run Python the rewriter never saw, with real builtins. Reviews
R10-3 and R10-4 fed cell-chosen text to library code generators (dataclasses builds __init__ from field
names; scipy exec()s a distribution's _parse_arg_template). While a cell runs, the audit hook now
refuses every 'compile' and 'exec' event except imports of installed modules, the cell's own code, and a
short list of library helpers whose text the cell cannot steer (confine._SOURCE_CALLERS_SPEC).

"Ungated Python" (what an escape would reach) is simulated by host functions placed in the namespace.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from childcell import REPO, run_in_engine, run_with_host

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
    # the builder left alone overwrites the template from validated shape names: scipy's own text runs
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
    if route == "class_template_only":
        assert r.ok, r
    else:
        assert not r.ok and r.error_name == "OperationDenied", r
    assert not marker.exists() and not r.leaked(host_secret), r


# The template is an instance attribute: whatever puts the cell's text there, the text exec() gets is vetted as
# text (scipy's template filled with distinct identifiers: confine._is_scipy_argparser_text), review 17.
SCIPY_INSTANCE_ROUTES = {
    # R17-2: copy.copy() restores the cell's __getstate__ answer through rv_generic.__setstate__, which exec()s it
    "getstate_then_copy": ("import copy\nclass D(stats.rv_continuous):\n    def _pdf(self, x):\n        return 1.0\n"
                           "    def __getstate__(self):\n        return {'_parse_arg_template': EVIL}\n"
                           "copy.copy(D(a=0, b=1))"),
    # a library writing the attribute by name (simulated by host functions), then scipy attaching the parsers
    "library_setattr_then_attach": ("class D(stats.rv_continuous):\n    def _pdf(self, x):\n        return 1.0\n"
                                    "d = D(a=0, b=1)\nlibrary_setattr(d, '_parse_arg_template', EVIL)\n"
                                    "library_attach(d)"),
    # scipy's own template with a statement smuggled in as a shape name
    "template_with_a_statement_for_a_shape": ("class D(stats.rv_continuous):\n    def _pdf(self, x):\n"
                                              "        return 1.0\nd = D(a=0, b=1)\n"
                                              "library_setattr(d, '_parse_arg_template', "
                                              "SCIPY_TEMPLATE % {'shape_arg_str': 'a=open(MARKER, \"w\"), ', "
                                              "'locscale_in': 'loc=0, scale=1', 'locscale_out': 'loc, scale'})\n"
                                              "library_attach(d)"),
}


@pytest.mark.parametrize("route", sorted(SCIPY_INSTANCE_ROUTES))
def test_scipy_execs_only_its_template_whatever_sets_it(sandbox, outside, host_secret, route):
    from scipy.stats import _distn_infrastructure
    marker = outside / f"pwned-scipy-{route}"
    sandbox.ns["library_setattr"] = setattr
    sandbox.ns["library_attach"] = lambda d: d._attach_argparser_methods()
    sandbox.ns["SCIPY_TEMPLATE"] = _distn_infrastructure.parse_arg_template
    sandbox.ns["MARKER"] = str(marker)
    evil = PAYLOAD.format(marker=marker) + ("def _parse_args(self, *a, **k): return a, 0, 1\n"
                                            "_parse_args_stats = _parse_args_rvs = _parse_args\n")
    r = sandbox.run(f"from scipy import stats\nEVIL = {evil!r}\n" + SCIPY_INSTANCE_ROUTES[route])
    # (copy refuses the cell's state for a library subclass before scipy sees it: test_attacks_library_writes)
    assert not r.ok and r.error_name == ("CallDenied" if route == "getstate_then_copy" else "OperationDenied"), r
    assert not marker.exists() and not r.leaked(host_secret), r


def test_scipy_reattaches_its_own_template(sandbox):
    """copy.copy() of a distribution with shapes exec()s scipy's own text again: allowed."""
    r = sandbox.run("import copy\nfrom scipy import stats\nclass G(stats.rv_continuous):\n    def _pdf(self, x, k):\n"
                    "        return k * x ** (k - 1)\ng = copy.copy(G(a=0, b=1, name='g'))\n"
                    "print(round(float(g.cdf(0.5, 2)), 3), copy.copy(stats.norm).shapes)")
    assert r.ok and r.stdout == "0.25 None\n", r


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


# ====================================================================================================================
# Sink: text turned into code.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 1 (docs/reviews.md, "Review 1").
def test_jinja_templates_made_from_cell_files_are_not_compiled(run, outside):
    # Styler.from_custom_template compiles a template the cell wrote into the working directory: jinja's
    # template syntax is ungated Python. Refused when the code object is made.
    marker = outside / "pwned-by-template"
    r = run(f"""\
import pandas as pd
with open("evil.tpl", "w") as f:
    f.write("{{% extends 'html.tpl' %}}{{% block table %}}"
            "{{{{ cycler.__init__.__globals__.os.system('id > {marker}') }}}}{{% endblock table %}}")
df = pd.DataFrame({{"a": [1]}})
E = type(df.style).from_custom_template(".", "evil.tpl")
print(E(df).to_html())
""")
    assert not r.ok and r.error_name == "OperationDenied", r
    assert not marker.exists()


# --- Finding 3: dataclass source built from a name planted by functools.update_wrapper ----------------------
# update_wrapper(C, w) copies w.__annotations__ onto the cell's class C with the library's setattr (a cell
# object's __getattr__ answers any dict); setattr(C, name, field(init=False)) takes any string as a name.
# @dataclass then builds __init__'s source text from the annotation keys and exec()s it: a key that closes
# the parameter list runs its own statements, ungated, with real builtins. compile/exec of a string is not
# an audit-hook refusal (only code.__new__ is), and the fresh-Context trick of finding 1 runs a process.

DATACLASS_INJECTION = """\
import dataclasses, functools
NAME = "a):\\n  pass\\nimport contextvars, os\\ncontextvars.Context().run(os.system, 'id > {marker}')\\ndef b(c"
class W:
    def __getattr__(self, n):
        if n == "__annotations__":
            return {{NAME: int}}
        if n in ("__name__", "__qualname__"):
            return "C"
        if n == "__module__":
            return "m"
        return None
class C:
    pass
try:
    functools.update_wrapper(C, W())
except Exception:
    pass
setattr(C, NAME, dataclasses.field(init=False))
dataclasses.dataclass(C, repr=False, eq=False)
"""


def test_dataclass_source_cannot_be_injected_through_annotations(run, outside):
    marker = outside / "pwned-by-dataclass"
    run(DATACLASS_INJECTION.format(marker=marker))
    assert not marker.exists(), "code injected into dataclass' generated source ran a process"


# --- Finding 4: scipy exec()s a distribution's _parse_arg_template, which a cell subclass supplies ----------
# rv_generic._attach_argparser_methods runs exec(self._parse_arg_template, ns) when a distribution is made.
# A cell subclass of rv_continuous sets the template as a class attribute and makes _construct_argparser
# (which would have overwritten it from the validated `shapes`) a no-op: the string runs ungated with real
# builtins, in scipy's frame, and the fresh-Context trick of finding 1 runs a process.

SCIPY_TEMPLATE_INJECTION = """\
from scipy import stats
EVIL = ("import contextvars, os\\n"
        "contextvars.Context().run(os.system, 'id > {marker}')\\n"
        "def _parse_args(self, *a, **k): return a, 0, 1\\n"
        "_parse_args_stats = _parse_args_rvs = _parse_args\\n")
class D(stats.rv_continuous):
    _parse_arg_template = EVIL
    def _construct_argparser(self, *args, **kwargs):
        pass
    def _pdf(self, x):
        return 1.0
D(name="d")
"""


def test_scipy_distribution_template_is_not_executed_from_a_cell_subclass(run, outside):
    marker = outside / "pwned-by-scipy-template"
    run(SCIPY_TEMPLATE_INJECTION.format(marker=marker))
    assert not marker.exists(), "code injected into scipy's argument-parser template ran a process"


def test_update_wrapper_onto_a_cell_class_leaves_host_dataclasses_intact(run):
    import dataclasses
    before = dataclasses.dataclass
    run(DATACLASS_INJECTION.format(marker="/dev/null").replace("dataclasses.dataclass(C, repr=False, eq=False)", ""))
    assert dataclasses.dataclass is before


# --- Attempts that failed (kept as regressions) ----------------------------------------------------------


def test_metaclass_prepare_cannot_plant_annotations(run, outside):
    marker = outside / "pwned-by-prepare"
    r = run(f"""\
import dataclasses
EVIL = {{"a):\\n  pass\\nimport os\\nos.system('id > {marker}')\\ndef b(c": int}}
class NS(dict):
    def __getitem__(self, k):
        return EVIL if k == "__annotations__" else dict.__getitem__(self, k)
class M(type):
    @classmethod
    def __prepare__(mcls, name, bases):
        return NS()
class C(metaclass=M):
    y: int
dataclasses.dataclass(C)
""")
    assert not r.ok and r.error_name == "BuiltinDenied", r
    assert not marker.exists()


def test_singledispatch_register_does_not_evaluate_string_annotations(run):
    r = run("""\
import functools
@functools.singledispatch
def f(x): return 0
@f.register
def _(x: "print('EVALUATED') or int"): return 1
""")
    assert not r.ok and r.error_name == "CallDenied", r
    assert "EVALUATED" not in r.stdout


# From review 4 (docs/reviews.md, "Review 4").
# --- N4-4: np.test() runs pytest in the kernel process, which executes the cell's conftest.py unrewritten ----
# numpy's and scipy's `test` attributes (PytestTester instances) are handed out; calling one runs pytest.main
# in the kernel's process with the cell's extra_argv and test paths. pytest imports conftest.py files (and
# test modules) through its assertion-rewriting loader: it reads the file, compiles it itself and executes it.
# The audit hook lets that compile through (an import, only installed code on the stack); the working-directory
# check applies to importlib's own loader only. The cell's file then runs as plain Python: `import sys`,
# frames, the sandbox's own modules; replacing sandbox_kernel.confine._confinement switches the confinement
# off for the whole process, and os.system and writes outside follow. At level none the kernel's cwd is the
# working directory, so relative paths name the cell's files (the child below runs there, as the kernel does).

PYTEST_CELL = """
import numpy as np, scipy, pandas as pd
open('pytest.ini', 'w').write('[pytest]\\n')
open('conftest.py', 'w').write({conftest!r})
open('test_planted.py', 'w').write('def test_a():\\n    pass\\n')
ARGS = ['-c', 'pytest.ini', '--rootdir', '.', '-p', 'no:cacheprovider', '-p', 'no:faulthandler', '-s']
{runner}
"""


PYTEST_RUNNERS = {
    "numpy_test": "np.test(extra_argv=ARGS, tests=['test_planted.py'])",
    "scipy_test": "scipy.test(extra_argv=ARGS, tests=['test_planted.py'])",
    "pandas_test": "pd.test(extra_args=ARGS + ['test_planted.py'])",
}


CONFTEST = """
import subprocess
import sys
sys.modules['sandbox_kernel.confine']._confinement = lambda: None
import os
open({target!r}, 'w').write('frame: ' + type(sys._getframe()).__name__)
os.system('echo PROCESS > ' + {marker!r})
"""


KERNEL_CWD_CHILD = textwrap.dedent("""
    import json, os, sys
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS
    eng = Engine(PRESETS["data-science"], workdir=os.getcwd())
    done = eng.run_cell(sys.argv[1], emit=lambda e: None)
    report = {"status": done["status"], "ename": (done["error"] or {}).get("ename")}
    if len(sys.argv) > 2:   # the host's own code after the cell
        try:
            exec(sys.argv[2])
        except Exception as exc:
            report["host_error"] = type(exc).__name__
    print(json.dumps(report))
""")


def _run_in_a_kernel_like_child(source: str, workdir, host: str | None = None, python_flags=()) -> dict:
    env = dict(os.environ, PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, *python_flags, "-c", KERNEL_CWD_CHILD, source] + ([host] if host else []),
                         capture_output=True, text=True,
                         timeout=180, cwd=str(workdir), env=env)
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"crashed": out.returncode, "stderr": out.stderr[-500:]}


# FINDING N4-4, fixed in a2b9494 (the test runners are refused by module and object rule).
@pytest.mark.parametrize("runner", sorted(PYTEST_RUNNERS))
def test_library_test_runners_do_not_execute_a_cells_conftest(tmp_path, outside, runner):
    workdir = tmp_path / "work"
    workdir.mkdir()
    target, marker = outside / "conftest-wrote.txt", outside / "conftest-process.txt"
    conftest = CONFTEST.format(target=str(target), marker=str(marker))
    result = _run_in_a_kernel_like_child(PYTEST_CELL.format(conftest=conftest, runner=PYTEST_RUNNERS[runner]),
                                         workdir)
    assert "crashed" not in result, result
    assert not marker.exists(), f"a process ran: {result}"
    assert not target.exists(), f"the cell's conftest wrote outside: {result}"


# --- N4-6: pytest leaves the working directory on sys.path; the host's next import runs the cell's file --------
# Even where pytest's own compile of the cell's files is refused, pytest.main (import mode 'prepend') inserts
# the test file's directory, the working directory, at sys.path[0] and never takes it out. Every later import
# of a name not yet imported (the kernel's lazy imports: completion, help, a library's optional module) then
# finds the cell's file first, and imports it outside any cell: no confinement at all.

PYTEST_NO_CONFTEST_CELL = """
import numpy as np
open('pytest.ini', 'w').write('[pytest]\\n')
open('test_planted.py', 'w').write('def test_a():\\n    pass\\n')
open('zz_planted_module.py', 'w').write({module!r})
try:
    np.test(extra_argv=['-c', 'pytest.ini', '--rootdir', '.', '-p', 'no:cacheprovider', '-p', 'no:faulthandler',
                        '-p', 'no:logging', '-s'], tests=['test_planted.py'])
except Exception as exc:
    runner = type(exc).__name__
"""


PLANTED_MODULE = """
import os
import sys
import textwrap
open({target!r}, 'w').write('imported by the host')
os.system('echo PROCESS > ' + {marker!r})
"""


# FINDING N4-6, route closed by a2b9494 (np.test refused). The child runs with -P like the kernel: without it
# '' (the cwd, the working directory) is sys.path[0] and the host's import finds the cell's module anyway.
def test_library_test_runner_leaves_sys_path_alone(tmp_path, outside):
    workdir = tmp_path / "work"
    workdir.mkdir()
    target, marker = outside / "planted-import.txt", outside / "planted-process.txt"
    module = PLANTED_MODULE.format(target=str(target), marker=str(marker))
    host = "import sys\nreport['workdir_on_path'] = os.getcwd() in sys.path\nimport zz_planted_module\n"
    result = _run_in_a_kernel_like_child(PYTEST_NO_CONFTEST_CELL.format(module=module), workdir, host=host,
                                         python_flags=["-P"])
    assert "crashed" not in result, result
    assert not marker.exists(), f"the host's import ran the cell's module: {result}"
    assert not target.exists(), f"the host's import ran the cell's module: {result}"
    assert result.get("workdir_on_path") is False, result


# --- N4-7: pytest's sys.path insert makes the parent directory readable -------------------------------------
# The confinement reads every sys.path directory like the installation (confine._import_roots, recomputed
# whenever sys.path changes). With an __init__.py in the working directory, pytest's 'prepend' import mode
# inserts the package root, the working directory's parent, at sys.path[0]: from then on a library reads any
# file under the parent by absolute path (the path is printed by pytest itself: 'rootdir: ...'). The kernel
# runs with -P, like the child below.

PARENT_READ_CELL = """
import numpy as np
def read_secret():
    try:
        return str(np.loadtxt({secret!r}, dtype=str))
    except Exception as exc:
        return type(exc).__name__
before = read_secret()
open('pytest.ini', 'w').write('[pytest]\\n')
open('__init__.py', 'w').write('')
open('test_planted.py', 'w').write('def test_a():\\n    pass\\n')
try:
    np.test(extra_argv=['-c', 'pytest.ini', '--rootdir', '.', '-p', 'no:cacheprovider', '-p', 'no:faulthandler',
                        '-p', 'no:logging', '-s'], tests=['test_planted.py'])
except Exception as exc:
    runner = type(exc).__name__
after = read_secret()
"""


# FINDING N4-7, route closed by a2b9494 (np.test refused); the confinement still trusts whatever sys.path
# holds at the time (confine._import_roots), so any other way to extend sys.path reopens it.
def test_library_test_runner_does_not_make_the_parent_directory_readable(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    secret = "PARENT-SECRET-" + tmp_path.name
    (tmp_path / "secret.txt").write_text(secret + "\n")
    host = "report['before'] = eng.namespace.get('before')\nreport['after'] = eng.namespace.get('after')\n"
    result = _run_in_a_kernel_like_child(PARENT_READ_CELL.format(secret=str(tmp_path / "secret.txt")), workdir,
                                         host=host, python_flags=["-P"])
    assert result.get("before") in ("FileNotFoundError", "FileDenied"), result
    assert secret not in json.dumps(result), f"the cell read a secret in the working directory's parent: {result}"


# --- N4-4 through a real kernel at level none (its cwd is the working directory, as by default) ---------------

# FINDING N4-4 through a real kernel (confirmed at 8cd38d5: the conftest printed a frame and ran a process);
# fixed in a2b9494.
def test_kernel_np_test_does_not_execute_a_cells_conftest(tmp_path, outside):
    from kernel_helpers import start_client

    workdir = tmp_path / "kernel-work"
    workdir.mkdir()
    target, marker = outside / "kernel-conftest-wrote.txt", outside / "kernel-conftest-process.txt"
    conftest = CONFTEST.format(target=str(target), marker=str(marker))
    client = start_client(cwd=str(workdir), isolation="none")
    try:
        reply = client.run(PYTEST_CELL.format(conftest=conftest, runner=PYTEST_RUNNERS["numpy_test"]), timeout=120)
        after = client.run("print(6 * 7)", timeout=30)["output"]
    finally:
        client.shutdown()
    assert after == "42\n", (reply, after)
    assert not marker.exists(), f"the kernel ran a process for the cell: {reply.get('status')}"
    assert not target.exists(), f"the kernel wrote outside for the cell: {reply.get('status')}"


# From review 5 (docs/reviews.md, "Review 5").
def test_help_on_a_cell_object_posing_as_a_builtin_evaluates_no_text_signature(tmp_path):
    done, stdout = run_in_engine("class D:\n    __text_signature__ = '(a=sys.version)'\n    def __get__(self, obj, typ=None):\n"
            "        return self\n    def __call__(self, a=1):\n        pass\nhelp(D())\n", tmp_path)
    assert done["status"] == "ok", done
    assert "3.11" not in stdout and "a=" not in stdout, stdout


# From review 7 (docs/reviews.md, "Review 7").
@pytest.mark.parametrize("stmt", [
    "compile('1', '/usr/lib/python3.11/os.py', 'eval')",
    "exec('def f(): return 1', globals()); f.__code__",
])
def test_code_objects_under_an_installed_name_are_refused(stmt):
    result = run_with_host(stmt + "\n", "")
    assert result["ename"] in ("BuiltinDenied", "AttributeDenied"), result
