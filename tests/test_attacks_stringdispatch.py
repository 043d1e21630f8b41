"""Must-block: attribute lookup by string inside granted libraries (the string-dispatch sink).

pandas' apply/agg/transform (Series, DataFrame, GroupBy, Resampler, windows, pivot_table's aggfunc) look
a *name* up on an object with getattr inside pandas, and fall back to getattr(numpy, name). A name the
cell chose reached dunders (__setattr__ on any object), private state and policy-denied methods. The
lookup itself is the sink: inside the library modules that turn a caller's string into an attribute
lookup (inventory in docs/security.md, "Inventory of sinks"), a name that is not the library's own
constant goes through the attribute gate while a cell runs: public names only, object rules, the value
checked. Every test performs the real attack and asserts nothing happened.
"""
from __future__ import annotations

import pytest

from rawview import assert_no_full_escape, assert_no_raw_view

# --- Issue 10, finding 2: string dispatch read from the *class*, on any object -----------------------------
# The string-dispatch guard wrapped apply/agg/transform only when read from a pandas *instance*.
# pd.Series.apply(box, "__setattr__", args=(name, value)) runs pandas' apply with self=box (any object):
# _apply_str calls getattr(box, "__setattr__")(*args), planting numpy's raw protocol in a library
# instance's __dict__ (an OrderedDict's); np.asarray(box) then viewed any address.

SETATTR_THROUGH_APPLY = """\
import collections, json, math, numpy as np, pandas as pd
def view(addr, n):
    box = collections.OrderedDict(a=1)
    iface = {'shape': (n,), 'typestr': '<u8', 'data': (addr, False), 'version': 3}
    try:
        {route}
    except Exception:
        pass
    return np.asarray(box)
made = False
try:
    t = view(id(math.tau) + 16, 1)
    made = t.dtype == np.uint64
except Exception:
    pass
"""

SETATTR_ROUTES = {
    "series_apply_from_the_class": "pd.Series.apply(box, '__setattr__', args=('__array_interface__', iface))",
    "series_agg_from_the_class": "pd.Series.agg(box, '__setattr__', '__array_interface__', iface)",
    "dataframe_apply_from_the_class": "pd.DataFrame.apply(box, '__setattr__', args=('__array_interface__', iface))",
    "series_transform_from_the_class": "pd.Series.transform(box, '__setattr__', '__array_interface__', iface)",
}


@pytest.mark.parametrize("route", sorted(SETATTR_ROUTES))
def test_string_dispatch_cannot_set_raw_protocols(route):
    assert_no_raw_view(SETATTR_THROUGH_APPLY.replace("{route}", SETATTR_ROUTES[route]),
                       f"pandas' string dispatch planted a raw protocol ({route})")


def test_string_dispatch_from_the_class_is_not_a_full_escape(tmp_path):
    assert_no_full_escape(SETATTR_THROUGH_APPLY.replace("{route}", SETATTR_ROUTES["series_apply_from_the_class"]),
                          tmp_path)


# Names pandas must not resolve for a cell, however the dispatch is reached: dunders, private state
# (s.agg('_mgr') handed out pandas' BlockManager), policy-denied methods, private or denied numpy
# functions through the getattr(np, name) fallback.
REFUSED_NAMES = {
    "dunder_on_a_series": "s.apply('__setattr__', args=('x', 1))",
    "private_state": "s.agg('_mgr')",
    "private_state_by_transform": "df.transform('_mgr')",
    "denied_method": "df.agg('to_pickle', 0, 'x.pkl')",
    "numpy_fallback_denied": "s.apply('fromfile')",
    "numpy_fallback_private": "s.apply('_get_promotion_state')",
    "groupby_agg_private": "df.groupby('a').agg('_selected_obj')",
    "groupby_agg_dunder": "df.groupby('a').agg('__reduce_ex__', 2)",
    "groupby_apply_dunder": "df.groupby('a')['b'].apply('__reduce_ex__', 2)",
    "resample_agg_private": "ts.resample('D').agg('_selected_obj')",
    "rolling_agg_private": "s.rolling(2).agg('_selected_obj')",
    "pivot_table_aggfunc": "df.pivot_table(index='a', values='b', aggfunc='__reduce_ex__', margins=True)",
    "window_type_dunder": "s.rolling(2, win_type='__class__').sum()",
    "class_level_groupby": "type(df.groupby('a')).agg(df.groupby('a'), '_selected_obj')",
    "str_subclass_name": "s.agg(S('_mgr'))",
    "plotly_trendline_function": "px.scatter(df, x='a', y='b', trendline='rolling', "
                                 "trendline_options=dict(window=2, function='_get_window'))",
    "scipy_kstest_distribution_name": "scipy.stats.kstest([0.1, 0.2], '__loader__')",
    "scipy_root_scalar_method": "scipy.optimize.root_scalar(abs, bracket=[-1, 1], method='_bisect_private')",
}

PANDAS_OBJECTS = """\
import pandas as pd, numpy as np, plotly.express as px, scipy.stats, scipy.optimize
s = pd.Series([1.0, 2.0])
df = pd.DataFrame({'a': [1, 1, 2], 'b': [1.0, 2.0, 3.0]})
ts = pd.Series([1.0, 2.0], index=pd.date_range('2020-01-01', periods=2))
class S(str):
    pass
"""


@pytest.mark.parametrize("name", sorted(REFUSED_NAMES))
def test_string_dispatch_resolves_names_through_the_gate(sandbox, name):
    """The name is refused where pandas looks it up (a denial is recorded); pandas may wrap the refusal
    in its own error ('Transform function failed'), but the cell never gets the value."""
    sandbox.run(PANDAS_OBJECTS)
    r = sandbox.run(f"got = {REFUSED_NAMES[name]}")
    assert not r.ok and "got" not in sandbox.ns, r
    assert r.denials, r


def test_string_dispatch_of_public_names_still_works(run):
    run(PANDAS_OBJECTS)
    r = run("print(s.agg('sum'), s.apply('sqrt').round(3).tolist(), df.groupby('a').agg('sum')['b'].tolist(),\n"
            "      df.transform('cumsum')['b'].tolist(), s.agg(['min', 'max']).tolist(),\n"
            "      df.agg({'b': 'mean'}).tolist(), ts.resample('D').agg('sum').tolist(),\n"
            "      s.rolling(2).agg('sum').tolist()[1], df.pivot_table(index='a', values='b', aggfunc='sum')['b'].tolist(),\n"
            "      df.groupby('a')['b'].transform('max').tolist(), s.rolling(2, win_type='boxcar').sum().tolist()[1],\n"
            "      df.groupby('a').agg(total=('b', 'sum'))['total'].tolist(), pd.Series.agg(s, 'max'))\n"
            "fig = px.scatter(df, x='a', y='b', trendline='rolling', trendline_options=dict(window=2, function='max'))\n"
            "t = scipy.stats.kstest([0.1, 0.2, 0.7], 'uniform')\n"
            "z = scipy.optimize.root_scalar(lambda x: x - 0.5, bracket=[0, 1], method='brentq')")
    assert r.ok, r
    assert r.stdout.split() == ["3.0", "[1.0,", "1.414]", "[3.0,", "3.0]", "[1.0,", "3.0,", "6.0]", "[1.0,", "2.0]",
                                "[2.0]", "[1.0,", "2.0]", "3.0", "[3.0,", "3.0]", "[2.0,", "2.0,", "3.0]", "3.0",
                                "[3.0,", "3.0]", "2.0"], r.stdout


# ====================================================================================================
# From review round 2: the sandbox's own runtime objects and library
# frames reached through builtins that C code calls on the cell's behalf; output floods through rich display.
# ====================================================================================================

# --- pandas' expression evaluator is an unsandboxed interpreter ------------------------------------------

PANDAS_EVAL_RCE = """\
import pandas as pd
df = pd.DataFrame({{'a': [1, 2]}})
def ev(expr):
    try:
        return {route}
    except Exception as e:
        return e
ev("@inspect.sys.modules.get('sandbox_kernel.confine')._FS.set(None)")
ev("@inspect.os.system('echo PWNED > {marker}')")
"""


@pytest.mark.parametrize("route", [
    "pd.core.apply.frame_apply(df, 'eval', args=(), kwargs={'expr': expr, 'engine': 'python'}).apply()",
])
def test_pandas_eval_is_not_reachable(sandbox, outside, route):
    marker = outside / "pdeval.txt"
    sandbox.run(PANDAS_EVAL_RCE.format(route=route, marker=marker))
    assert not marker.exists(), "os.system ran"


@pytest.mark.parametrize("route", [
    "df.apply('eval', expr=expr, engine='python')",
    "df.agg('eval', expr=expr, engine='python')",
    "df.transform('query', expr=expr)",
    "pd.core.frame.DataFrame.eval(df, expr, engine='python')",
    "pd.core.computation.eval.eval(expr, engine='python')",
    "df.groupby('a').apply('eval', expr=expr)",
])
def test_pandas_eval_routes_are_refused(sandbox, outside, route):
    marker = outside / "pdeval.txt"
    r = sandbox.run(PANDAS_EVAL_RCE.format(route=route, marker=marker))
    assert not marker.exists(), "os.system ran"
    assert r.denials, r


@pytest.mark.parametrize("route", [
    "df.eval(expr, engine='python')",
    "df.query(expr, engine='python')",
    "pd.eval(expr, engine='python', level=1)",
    "getattr(df, 'eval')(expr, engine='python')",
    "df.a.to_frame().eval(expr, engine='python')",
    "df.pipe(pd.DataFrame.query, expr)",
])
def test_pandas_eval_routes_are_evaluated_by_the_sandbox(sandbox, outside, route):
    """DataFrame.query/eval and pandas.eval are the sandbox's own evaluator (pandas_query.py): '@name' is
    the cell's name, never a library's, so the old route finds no 'inspect' at all."""
    marker = outside / "pdeval.txt"
    r = sandbox.run(PANDAS_EVAL_RCE.format(route=route, marker=marker) + "print(type(ev('@inspect')).__name__)")
    assert not marker.exists(), "os.system ran"
    assert r.ok and r.stdout == "UndefinedVariableError\n", r


def test_pipe_does_not_look_names_up(sandbox, outside):
    """df.pipe('eval', ...) was refused by name by the old string-dispatch guard; pipe never resolves a
    string (it calls its argument: 'str' object is not callable), so since issue 10 there is nothing to
    refuse and nothing happens."""
    marker = outside / "pdeval.txt"
    sandbox.run(PANDAS_EVAL_RCE.format(route="df.pipe('eval', expr=expr)", marker=marker))
    assert not marker.exists(), "os.system ran"
    r = sandbox.run("import pandas as pd\ntry:\n    pd.DataFrame({'a': [1]}).pipe('eval', expr='a')\n"
                    "except TypeError as e:\n    print(e)")
    assert r.ok and "not callable" in r.stdout, r


STATEFUL_STR = """\
class S(str):
    n = 0
    def __eq__(self, o):
        S.n += 1
        return S.n > 2 and str.__eq__(self, o)
    __hash__ = str.__hash__
    def startswith(self, *a):
        return False
"""


def test_string_dispatch_guard_with_str_subclass(sandbox, outside):
    marker = outside / "dispatch.txt"
    sandbox.run(STATEFUL_STR)
    sandbox.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\n"
                "def ev(expr):\n    S.n = 0\n    try:\n        return df.apply(S('eval'), expr=expr, engine='python')\n"
                "    except Exception as e:\n        return e\n"
                "ev(\"@inspect.sys.modules.get('sandbox_kernel.confine')._FS.set(None)\")\n"
                f"ev(\"@inspect.os.system('echo PWNED > {marker}')\")\n")
    assert not marker.exists(), "os.system ran"


# ====================================================================================================
# From review round 4: variants of the fixes in fef0bc7 (string
# dispatch reached through the class, not the instance).
# ====================================================================================================

RCE = """\
import pandas as pd
import functools
df = pd.DataFrame({{'a': [1, 2]}})
def ev(expr):
    try:
        return {route}
    except Exception as e:
        return e
ev("@inspect.sys.modules.get('sandbox_kernel.confine')._FS.set(None)")
ev("@inspect.os.system('echo PWNED > {marker}')")
"""

CLASS_ROUTES = [
    "pd.DataFrame.apply(df, 'eval', expr=expr, engine='python')",
    "type(df).apply(df, 'eval', expr=expr, engine='python')",
    "type(df).agg(df, 'eval', expr=expr, engine='python')",
    "pd.DataFrame.aggregate(df, 'eval', expr=expr, engine='python')",
    "pd.DataFrame.transform(df, 'eval', expr=expr, engine='python')",
    "functools.partial(pd.DataFrame.apply, df)('eval', expr=expr, engine='python')",
]


@pytest.mark.parametrize("route", CLASS_ROUTES)
def test_string_dispatch_through_the_class(sandbox, outside, route):
    marker = outside / "class_dispatch.txt"
    sandbox.run(RCE.format(route=route, marker=marker))
    assert not marker.exists(), "os.system ran"


def test_string_dispatch_through_the_instance_is_refused(sandbox, outside):
    marker = outside / "instance_dispatch.txt"
    r = sandbox.run(RCE.format(route="df.apply('eval', expr=expr, engine='python')", marker=marker))
    assert not marker.exists()
    assert r.denials, r


# ====================================================================================================
# From review round 6: C consumers of huge iterators that are not among
# the sized builtins.
# ====================================================================================================

def test_bmat_cannot_read_gate_globals(sandbox):
    r = sandbox.run("import numpy as np\ntry:\n    m = list(map(np.bmat, ['_KEEP']))\nexcept Exception:\n    m = None\n")
    m = sandbox.ns.get("m")
    import numpy as np
    leaked = [] if m is None else list(np.asarray(m[0]).ravel())
    assert not any(getattr(x, "__module__", "").startswith(("numpy", "plotly", "sandbox_kernel")) for x in leaked), r


def test_every_listed_string_lookup_module_is_closed(run):
    """Each module of the inventory exists in the installed libraries and has the gated builtins once
    loaded (a library upgrade that moves the lookups elsewhere fails here, and needs a new review)."""
    import importlib
    import sys
    from sandbox_kernel import guards
    for name in guards.STRING_LOOKUP_MODULES:
        importlib.import_module(name)
    assert run("x = 1").ok   # the next decision catches up with the loaded modules
    assert run("import pandas\ny = pandas.Series([1]).agg('sum')").ok
    for name in guards.STRING_LOOKUP_MODULES:
        namespace = vars(sys.modules[name])
        for builtin in ("getattr", "hasattr", "setattr"):
            assert getattr(namespace.get(builtin), "__st_closed__", False), f"{name}.{builtin} is not gated"


# ====================================================================================================================
# Sink: attribute lookup by string inside granted libraries.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 2 (docs/reviews.md, "Review 2").
# Sibling (found in this round): a granted library's import helpers import any module by the caller's name
# and hand back the module or one of its attributes, past every gate (a call's result is not an attribute
# read): plotly.relative_import('x', [], ['ctypes.CDLL']) gave a cell ctypes.CDLL, and CDLL(None)['system']
# ran a process.

IMPORT_HELPER_ROUTES = {
    "plotly_relative_import": ("import plotly\nhelper = plotly.relative_import", "relative"),
    "importers_relative_import": ("import _plotly_utils.importers as importers\nhelper = importers.relative_import",
                                  "relative"),
    "optional_imports_get_module": ("import plotly.optional_imports as optional\nhelper = optional.get_module",
                                    "module"),
    "from_import": ("from _plotly_utils.optional_imports import get_module as helper", "module"),
}


IMPORT_HELPER_USES = {
    # CDLL(None)['system'] is a pointer to libc's system(): item access, no attribute read to gate
    "relative": "_, get, _ = helper('x', [], ['ctypes.CDLL'])\nget('CDLL')(None)['system'](b'id > {marker}')",
    # the module itself: held by the cell, handed to the next library that reads it
    "module": "held = helper('os')\nprint(held)",
}


@pytest.mark.parametrize("route", sorted(IMPORT_HELPER_ROUTES))
def test_import_helpers_that_take_the_callers_module_name_are_refused(run, outside, route):
    marker = outside / f"pwned-by-{route}"
    setup, use = IMPORT_HELPER_ROUTES[route]
    r = run(f"{setup}\n{IMPORT_HELPER_USES[use].format(marker=marker)}\n")
    assert not r.ok and r.error_name == "AttributeDenied" and r.error_line <= 2, r
    assert not marker.exists() and "<module 'os'" not in r.stdout


# From review 4 (docs/reviews.md, "Review 4").
# --- held: pandas' expression language refuses what the cell's own code is refused -------------------------------

PANDAS_EVAL_REFUSALS = {
    "function_globals": ("def g():\n    pass\nv = pd.eval('f.__globals__', local_dict={'f': g})", "AttributeDenied"),
    "class_base": ("v = pd.eval('x.__class__.__base__', local_dict={'x': 1})", "AttributeDenied"),
    "subclasses": ("v = pd.eval('o.__subclasses__()', local_dict={'o': object})", "AttributeDenied"),
    "module_dict": ("v = pd.eval('m.__dict__', local_dict={'m': np})", "AttributeDenied"),
    "gate_name": ("v = pd.eval('__st_getattr__')", "NameDenied"),
    "str_repeat": ("v = pd.eval('s * 1000000000', local_dict={'s': 'abc'})", "SizeDenied"),
    "percent_width": ("v = pd.eval('s % 1', local_dict={'s': '%999999999d'})", "SizeDenied"),
    "iterator_membership": ("v = pd.eval('5 in r', local_dict={'r': iter(range(10**12))})", "TickLimitExceeded"),
}


@pytest.mark.parametrize("route", sorted(PANDAS_EVAL_REFUSALS))
def test_pandas_eval_refuses_what_a_cell_is_refused(sandbox, route):
    cell, refusal = PANDAS_EVAL_REFUSALS[route]
    r = sandbox.run("import pandas as pd, numpy as np\n" + cell, ticks=10**6)
    assert r.error_name == refusal, r
    assert "v" not in sandbox.ns
