"""A library's objects take data and the cell's own code, never a library callable (review none4, N4-1/2/3).

A library keeps its objects and calls what it finds on them whenever it next runs: after the cell, for
the host, for the output wall. scipy.stats.norm is one object for the process, numpy.ma's operations are
module-level instances, pandas' Holiday rules and holiday-calendar registry are module-level, plotly keeps
one validator per property. A library callable stored there with the cell's arguments
(functools.partial(np.savetxt, '/outside', ...)) runs with no cell code to stop it. The sink is the write:
an attribute write on any library object (gates.Gates._library_object_write) takes data, the cell's own
functions and objects, and Python's own types; process-wide singletons and caches are read-only; state a
library shares by design (pandas' options, plotly's defaults, the holiday registry and federal rules) is
kept per engine (guards.LIBRARY_STATE). The attacks that reached the host are in
test_attacks_review_none4.py; these are the variants of the write, and the honest writes that must go on.
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child

WRITER = "functools.partial(np.savetxt, 'planted.txt', np.array(['x'], dtype=object), '%s')"
SETUP = "import functools, operator, numpy as np, pandas as pd, pandas.tseries.holiday as h\n"

# (cell, the object whose attribute must be unchanged afterwards, attribute)
LIBRARY_CALLABLES = {
    "partial_on_a_numpy_ma_operation": (f"np.ma.sqrt.f = {WRITER}", "np.ma.sqrt", "f"),
    "setattr_builtin": (f"setattr(np.ma.sqrt, 'f', {WRITER})", "np.ma.sqrt", "f"),
    "plain_library_function": ("h.USMemorialDay.observance = np.savetxt",
                               "h.USMemorialDay", "observance"),
    "bound_method_of_a_library_object": ("h.USMemorialDay.observance = pd.DataFrame({'a': [1]}).to_csv",
                                         "h.USMemorialDay",
                                         "observance"),
    "methodcaller": ("h.USMemorialDay.observance = operator.methodcaller('to_csv', 'planted.txt')",
                     "h.USMemorialDay", "observance"),
    "library_class": ("h.USMemorialDay.observance = pd.ExcelWriter",
                      "h.USMemorialDay", "observance"),
    "runtime_print": ("np.ma.sqrt.f = print", "np.ma.sqrt", "f"),
    # an object of the cell's class is the cell's code only if its __call__ is (review 5, N5-8)
    "partial_subclass": (f"class P(functools.partial):\n    pass\nnp.ma.sqrt.f = P{WRITER[len('functools.partial'):]}",
                         "np.ma.sqrt", "f"),
    # an object of the cell's class: the library calls whatever methods it looks up on it (review 6, N6-2)
    "cell_object_even_with_its_own_call": ("class Doubler:\n    def __call__(self, x):\n        return 2 * x\n"
                                           "h.USMemorialDay.observance = Doubler()", "h.USMemorialDay", "observance"),
    # a class, even the cell's, runs the __init__ it inherits (review 6, N6-1)
    "cell_class": ("import collections\nclass C(collections.UserDict):\n    pass\nnp.ma.sqrt.f = C",
                   "np.ma.sqrt", "f"),
    "cell_class_inheriting_a_library_call": ("class V(np.vectorize):\n    pass\nnp.ma.sqrt.f = V(np.savetxt)",
                                             "np.ma.sqrt", "f"),
    # deleting breaks the library for the whole process (the host's np.ma.sqrt), and makes room for a write
    "deleted": ("del np.ma.sqrt.f", "np.ma.sqrt", "f"),
}


@pytest.mark.parametrize("route", sorted(LIBRARY_CALLABLES))
def test_a_library_object_takes_no_library_callable(sandbox, run, route):
    cell, owner, attribute = LIBRARY_CALLABLES[route]
    before = run(f"{SETUP}before = {owner}.{attribute}")
    assert before.ok, before
    kept = sandbox.ns["before"]
    r = run(SETUP + cell)
    assert r.error_name == "AttributeDenied" and r.error_line is not None, r
    assert "library" in r.error_value, r.error_value
    check = run(f"{SETUP}after = {owner}.{attribute}")
    assert check.ok and sandbox.ns["after"] is kept, "the library object was changed"
    assert not (sandbox.workdir / "planted.txt").exists()


READ_ONLY = {
    "scipy_distribution": "import scipy.stats as st\nst.norm.badvalue = 42.0",
    "scipy_distribution_method": f"import scipy.stats as st\nst.norm.pdf = {WRITER}",
    "numpy_finfo_cache": "np.finfo(np.float64).eps = 0.5",
    "pandas_extension_dtype": "pd.array([1.5, None]).dtype.na_value = 0.0",
    "plotly_validator": ("from plotly.validator_cache import ValidatorCache\n"
                         "ValidatorCache.get_validator('scatter.marker', 'symbol').values = ['nothing']"),
}


@pytest.mark.parametrize("route", sorted(READ_ONLY))
def test_process_wide_singletons_and_caches_are_read_only(run, route):
    r = run(SETUP + READ_ONLY[route])
    assert r.error_name == "AttributeDenied" and "shared by the process" in r.error_value, r


def test_the_output_wall_reads_plotly_validators_the_cell_cannot_change(run):
    """At level none the kernel's Plotly schema is built from the same validator objects cells use."""
    r = run(SETUP + READ_ONLY["plotly_validator"] + "\n")
    assert r.error_name == "AttributeDenied"
    r = run("import plotly.graph_objects as go\n"
            "fig = go.Figure(go.Scatter(x=[1], y=[2], mode='markers', marker={'symbol': 'diamond'}))\nfig")
    assert r.ok, r


HONEST = {
    "dataframe_columns": "df = pd.DataFrame({'a': [1], 'b': [2]})\ndf.columns = ['x', 'y']\nv = list(df.columns)",
    "series_and_index_names": "s = pd.Series([1, 2])\ns.name = 'n'\ns.index.name = 'i'\nv = (s.name, s.index.name)",
    "figure_title": ("import plotly.graph_objects as go\nfig = go.Figure()\nfig.layout.title.text = 't'\n"
                     "v = fig.layout.title.text"),
    "pandas_float_format_callable": ("pd.options.display.float_format = '{:.1f}'.format\n"
                                     "v = repr(pd.DataFrame({'a': [1.25]}))"),
    "defaultdict_factory": ("import collections\nd = collections.defaultdict(list)\nd.default_factory = int\n"
                            "v = d['k']"),
    "text_wrapper_width": "import textwrap\nw = textwrap.TextWrapper()\nw.width = 5\nv = w.wrap('aaa bbb ccc')",
    "masked_fill_value": "m = np.ma.masked_array([1, 2], mask=[0, 1])\nm.fill_value = 7\nv = int(m.filled()[1])",
    "cell_function_on_a_library_object": ("from scipy.stats import gaussian_kde\n"
                                          "kde = gaussian_kde(np.random.rand(20))\n"
                                          "def narrow():\n    return 0.25\n"
                                          "kde.covariance_factor = narrow\nkde.set_bandwidth()\nv = float(kde.factor)"),
    "library_callable_given_to_a_constructor": ("import pandas.tseries.holiday as h\n"
                                                "v = str(h.Holiday('x', month=1, day=2, observance=h.nearest_workday)"
                                                ".dates('2021-01-01', '2021-12-31')[0].date())"),
    "sparse_data_in_place_and_replaced": ("import scipy.sparse as sp\n"
                                          "A = sp.csr_array((np.array([1.0, 2.0]), np.array([0, 1]), np.array([0, 2])), "
                                          "shape=(1, 2))\nA.data *= 2\nA.data = np.log1p(A.data)\nv = float(A.sum())"),
    "scipy_objects_read_and_copied": ("from scipy.spatial import Delaunay\ntri = Delaunay(np.random.rand(10, 2))\n"
                                      "s = tri.simplices.copy()\ns[0, 0] = 0\nv = s.shape"),
    "plotly_template_default": "import plotly.io as pio\npio.templates.default = 'plotly_white'\nv = pio.templates.default",
    "plotly_express_default": "import plotly.express as px\npx.defaults.width = 300\nv = px.defaults.width",
}


@pytest.mark.parametrize("route", sorted(HONEST))
def test_honest_writes_on_library_objects_still_work(sandbox, run, route):
    r = run(SETUP + HONEST[route])
    assert r.ok, r
    assert sandbox.ns["v"] not in (None, "")


SHARED_BY_DESIGN = {
    "plotly_express_defaults": ("import plotly.express as px\npx.defaults.template = 'plotly_dark'",
                                "import plotly.express as px\n    report['cell'] = px.defaults.template"),
    "holiday_registry": ("from pandas.tseries.holiday import AbstractHolidayCalendar, Holiday\n"
                         "class USFederalHolidayCalendar(AbstractHolidayCalendar):\n"
                         "    rules = [Holiday('mine', month=1, day=3)]",
                         "from pandas.tseries.holiday import get_calendar\n"
                         "    report['cell'] = type(get_calendar('USFederalHolidayCalendar')).__module__"),
    "federal_rules_list": ("from pandas.tseries.holiday import USFederalHolidayCalendar, Holiday\n"
                           "USFederalHolidayCalendar.rules.append(Holiday('mine', month=1, day=3))",
                           "from pandas.tseries.holiday import USFederalHolidayCalendar\n"
                           "    report['cell'] = [r.name for r in USFederalHolidayCalendar.rules][-1]"),
}


@pytest.mark.parametrize("route", sorted(SHARED_BY_DESIGN))
def test_state_a_library_shares_is_the_engines_own(route):
    """The cell keeps what it set in its later cells; the host (after the cell) sees the library's own."""
    cell, read = SHARED_BY_DESIGN[route]
    probe = f"def probe_host(report):\n    {read}\n"
    result = run_cell_in_child(cell + "\n#CELL\nkept = 1\n", report=("status", "ename"), probe=probe)
    assert result["status"] == "ok", result
    assert result["cell"] not in ("plotly_dark", "__main__", "mine"), result
