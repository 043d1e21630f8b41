"""Independent review at level `none` (issue 10): attacks by an outsider told only the threat model.

Each test performs the real attack in an Engine with the data-science policy and asserts that it failed
and nothing happened: no process ran (no file it would write exists), no host secret (a host module's
attribute, a file outside the working directory) reached the cell's output, host modules unchanged.
The four findings (R10-1 .. R10-4) succeeded when this file was written; each is now closed at its sink
(docs/security.md, "Inventory of sinks") and runs here as a plain test, with the variants in the sink's file.
"""
from __future__ import annotations

import json

import pytest

# --- Finding 1: jinja2's Environment reached through pandas' Styler is an ungated getattr ----------------
# df.style.env (a class attribute of pandas' Styler) and df.style.template_html.environment hand the
# cell a jinja2.Environment. Its getattr/getitem methods look up any name, dunders included, in Python
# outside the attribute gate, and return the object: pd.read_csv.__globals__ gives the real os, sys and
# builtins (eval, exec, __import__). The audit hook reads a ContextVar, so os.system run through a fresh
# contextvars.Context().run(...) (contextvars is in sys.modules) is not refused: `id` ran, and a file
# outside the working directory was read with os.open/os.read.

JINJA_ROUTES = {
    "styler_env": "pd.DataFrame({'a': [1]}).style.env",
    "template_environment": "pd.DataFrame({'a': [1]}).style.template_html.environment",
}

JINJA_ESCAPE = """\
import pandas as pd
env = {route}
G = env.getattr
I = env.getitem
gl = G(pd.read_csv, "__globals__")
os = I(gl, "os")
cv = I(G(I(gl, "sys"), "modules"), "contextvars")
run = G(G(cv, "Context")(), "run")
run(G(os, "system"), "id > {marker}")
fd = run(G(os, "open"), "{secret_file}", 0)
print(run(G(os, "read"), fd, 200))
"""


@pytest.mark.parametrize("route", sorted(JINJA_ROUTES))
def test_jinja_environment_from_styler_is_not_a_full_escape(run, tmp_path, outside, host_secret, route):
    marker = outside / "pwned-by-jinja"
    r = run(JINJA_ESCAPE.format(route=JINJA_ROUTES[route], marker=marker, secret_file=tmp_path / "secret.txt"))
    escaped = [what for what, happened in (("a process ran", marker.exists()),
                                           ("a file outside the working directory was read", r.leaked(host_secret)))
               if happened]
    assert not escaped, escaped
    assert not r.ok, r


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


# --- Finding 2: str.format fields run by pandas on a caller's format string ---------------------------------
# Styler.format / format_index / relabel_index take a format string and call formatter.format(value)
# inside pandas, where the attribute gate does not run: '{0.__globals__[codecs].sys.modules[...]}' walks
# from any function in a cell to any host object and prints it (host module attributes, os.environ).
# Read-only (format fields cannot call), but every value of the host process is readable.

FORMAT_ROUTES = {
    "styler_format": "pd.DataFrame({'a': [json.dumps]}, dtype=object).style.format(FIELD).to_html()",
    "styler_format_index": "pd.DataFrame({'a': [1]}, index=[json.dumps]).style.format_index(FIELD).to_html()",
    "styler_relabel_index": "pd.DataFrame({'a': [1]}, index=[json.dumps]).style.relabel_index([FIELD]).to_html()",
}

FORMAT_READ = """\
import json, pandas as pd
FIELD = "{0.__globals__[codecs].sys.modules[%s].SECRET}"
print({route})
"""


@pytest.mark.parametrize("route", sorted(FORMAT_ROUTES))
def test_styler_format_strings_do_not_read_host_objects(run, host_secret, route):
    from conftest import HOST_SECRET_MODULE
    r = run(FORMAT_READ.replace("{route}", FORMAT_ROUTES[route]) % HOST_SECRET_MODULE)
    assert not r.leaked(host_secret), "a host module's attribute was read"


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


def test_reduce_cannot_replace_a_module_function_through_copy(run):
    r = run("""\
import copy, json
def getmod(): return json
class A:
    def __reduce__(self):
        return (getmod, (), {"dumps": len})
copy.copy(A())
""")
    assert not r.ok and r.error_name == "NameDenied", r
    assert json.dumps.__module__ == "json" and json.dumps.__name__ == "dumps"


def test_sliding_window_view_of_a_subclass_that_lies_about_strides_is_no_raw_view(sandbox):
    # sliding_window_view(subok=True) takes strides and shape from the subclass' Python properties and
    # hands them to as_strided, which lays a DummyArray's interface over the base's memory.
    r = sandbox.run("""\
import numpy as np
class Evil(np.ndarray):
    @property
    def strides(self):
        return (1,)
    @property
    def shape(self):
        return (1 << 20,)
x = np.zeros(16, dtype=np.uint8).view(Evil)
v = np.lib.stride_tricks.sliding_window_view(x, 1, subok=True, writeable=True)
big = np.asarray(v).view(np.ndarray)
n = big.size
""")
    assert not r.ok and "raw array protocols" in r.error_value, r
    assert "n" not in sandbox.ns


def test_jinja_module_and_private_numpy_helpers_are_not_importable(run):
    r = run("import jinja2")
    assert not r.ok and r.error_name == "ImportDenied", r
    r = run("import numpy as np\nD = np.lib._stride_tricks_impl.DummyArray")
    assert not r.ok and r.error_name == "AttributeDenied", r


# C consumers of an endless iterator, reached as an outsider would try them: each ends at a limit or a
# size denial instead of running past it (in a child: a miss would fill or hang the test process).
UNBOUNDED_CONSUMERS = {
    "bytearray_extend": "import itertools\nb = bytearray()\nb.extend(itertools.repeat(1, 10**10))",
    "super_list_extend": "import itertools\nclass L(list): pass\nl = L()\nsuper(L, l).extend(itertools.repeat(1, 10**10))",
    "numpy_fromiter": "import itertools, numpy as np\na = np.fromiter(itertools.repeat(1, 10**10), dtype=np.int8)",
    "set_update_from_the_class": "import itertools\ns = set()\nset.update(s, itertools.count())",
    "statistics_fmean": "import itertools, statistics\nx = statistics.fmean(itertools.repeat(1.0, 10**10))",
}


@pytest.mark.parametrize("name", sorted(UNBOUNDED_CONSUMERS))
def test_c_consumers_of_endless_iterators_stop_at_a_limit(name):
    from childcell import run_cell_in_child
    result = run_cell_in_child(UNBOUNDED_CONSUMERS[name], limits={"timeout": 1.0, "memory_mb": 256},
                               rlimits={"RLIMIT_AS": 3 << 30}, timeout=30)
    assert result.get("status") == "error", result
    assert result["ename"] in ("SizeDenied", "MemoryLimitExceeded", "TimeLimitExceeded", "TickLimitExceeded"), result
