"""A library's objects take data and the cell's own code, never a library callable (review none4, N4-1/2/3).

A library keeps its objects and calls what it finds on them whenever it next runs: after the cell, for
the host, for the output wall. scipy.stats.norm is one object for the process, numpy.ma's operations are
module-level instances, pandas' Holiday rules and holiday-calendar registry are module-level, plotly keeps
one validator per property. A library callable stored there with the cell's arguments
(functools.partial(np.savetxt, '/outside', ...)) runs with no cell code to stop it. The sink is the write:
an attribute write on any library object (gates.Gates._library_object_write) takes data, the cell's own
functions and objects, and Python's own types; process-wide singletons and caches are read-only; state a
library shares by design (pandas' options, plotly's defaults, the holiday registry and federal rules) is
kept per engine (guards.LIBRARY_STATE). The variants of the write and the honest writes that must go on come
first; the attacks of the independent reviews that reached the host (N4-1/2/3, N5-8, N6-1 to N6-4, N7-1 to N7-3;
docs/reviews.md) follow in their own section.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from childcell import (REPO, host_probe, host_probe_any, run_cell_in_child, run_reporting, run_with_host,
                       savetxt_writer)

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


# ====================================================================================================================
# Sink: a library's objects.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 4 (docs/reviews.md, "Review 4").
# --- N4-1: pandas' holiday-calendar registry ---------------------------------------------------------------
# pandas.tseries.holiday keeps a module-level dict, holiday_calendars, that HolidayCalendarMetaClass fills
# with every subclass of AbstractHolidayCalendar when the class is made, by class name. A cell's class named
# USFederalHolidayCalendar replaces pandas' own. Its rules are Holiday objects whose observance= (a plain
# attribute the library calls with each date) is a library callable: not cell code, so no idle tick stops it,
# and outside the cell no confinement holds. Whoever calls get_calendar('USFederalHolidayCalendar').holidays()
# after the cell (the kernel's host code, another engine's session) runs it.

HOLIDAY_CELL = """
import functools, numpy as np
from pandas.tseries.holiday import AbstractHolidayCalendar, Holiday
class USFederalHolidayCalendar(AbstractHolidayCalendar):
    rules = [Holiday('planted', month=1, day=1, observance={writer})]
"""


HOST_USES_THE_CALENDAR = """
def probe_host(report):
    import pandas as pd
    from pandas.tseries.holiday import get_calendar
    calendar = get_calendar('USFederalHolidayCalendar')
    report['calendar_module'] = type(calendar).__module__
    try:
        calendar.holidays(pd.Timestamp('2020-01-01'), pd.Timestamp('2020-12-31'))
    except Exception as exc:
        report['host_error'] = type(exc).__name__
"""


def test_holiday_calendar_registry_does_not_carry_a_cells_calendar_to_the_host(outside):
    target = outside / "holiday-observance.sh"
    result = run_cell_in_child(HOLIDAY_CELL.format(writer=savetxt_writer(target)),
                               report=("status", "ename"), probe=HOST_USES_THE_CALENDAR)
    assert not target.exists(), f"the host ran the cell's observance unconfined: {json.dumps(result)}"
    assert result.get("calendar_module") == "pandas.tseries.holiday", result


# --- N4-2: module-level instances of granted libraries are writable ------------------------------------------
# The write gate makes modules, library classes and dateutil's instances read-only, but not the *instances*
# numpy, pandas, scipy and plotly keep at module level and share with the whole process: scipy.stats' ~100
# distribution objects, pandas' Holiday rules (USMemorialDay ...), and the class-level rules list of
# USFederalHolidayCalendar (a list: item writes and append are not attribute writes). A library callable
# stored there as an attribute shadows the method, or is the callable the library calls (observance), and
# runs whenever the host uses the library after the cell.

SINGLETON_ROUTES = {
    "scipy_stats_norm_pdf": (
        "import functools, numpy as np, scipy.stats as st\nst.norm.pdf = {writer}\n",
        "import scipy.stats as st\nst.norm.pdf(0.5)"),
    "pandas_holiday_instance_observance": (
        "import functools, numpy as np\nimport pandas.tseries.holiday as h\nh.USMemorialDay.observance = {writer}\n",
        "import pandas as pd\nfrom pandas.tseries.holiday import USFederalHolidayCalendar\n"
        "pd.offsets.CustomBusinessDay(calendar=USFederalHolidayCalendar())"),
    "pandas_holiday_class_rules_list": (
        "import functools, numpy as np\nfrom pandas.tseries.holiday import USFederalHolidayCalendar, Holiday\n"
        "USFederalHolidayCalendar.rules.append(Holiday('planted', month=1, day=1, observance={writer}))\n",
        "import pandas as pd\nfrom pandas.tseries.holiday import USFederalHolidayCalendar\n"
        "pd.offsets.CustomBusinessDay(calendar=USFederalHolidayCalendar())"),
    "plotly_validator_cache": (
        "import functools, numpy as np\nfrom plotly.validator_cache import ValidatorCache\n"
        "ValidatorCache.get_validator('scatter', 'x').validate_coerce = {writer7}\n",
        "import plotly.graph_objects as go\ngo.Figure(go.Scatter(x=[1, 2], y=[3, 4]))"),
    "numpy_ma_operation_ufunc": (
        "import functools, numpy as np\nnp.ma.sqrt.f = {writer}\n",
        "import numpy as np\nnp.ma.sqrt(np.ma.array([4.0]))"),
}


@pytest.mark.parametrize("route", sorted(SINGLETON_ROUTES))
def test_module_level_library_instances_do_not_carry_a_library_callable_to_the_host(outside, route):
    cell, use = SINGLETON_ROUTES[route]
    target = outside / f"singleton-{route}.sh"
    writer = savetxt_writer(target)
    writer7 = writer[:-1] + ", '')"   # one more positional: validate_coerce(v) lands in `comments`
    result = run_cell_in_child(cell.format(writer=writer, writer7=writer7), report=("status", "ename"),
                               probe=host_probe(use))
    assert "crashed" not in result, result
    assert not target.exists(), f"the host ran the cell's planted callable unconfined: {json.dumps(result)}"


# --- N4-3 (lesser): process-wide data on the same singletons --------------------------------------------------

SINGLETON_DATA = {
    "scipy_stats_badvalue": ("import scipy.stats as st\nst.norm.badvalue = 42.0\n",
                             "import scipy.stats as st\n    report['changed'] = st.norm.badvalue == 42.0"),
    "numpy_finfo_cache": ("import numpy as np\nnp.finfo(np.float64).eps = 0.5\n",
                          "import numpy as np\n    report['changed'] = bool(np.finfo(np.float64).eps == 0.5)"),
    "plotly_io_defaults_urls": ("import plotly.io as pio\npio.defaults.plotlyjs = 'https://attacker.example/p.js'\n",
                                "import plotly.io as pio\n    report['changed'] = pio.defaults.plotlyjs is not None"),
    "plotly_json_config": ("import plotly.io as pio\npio.json.config.default_engine = 'json'\n",
                           "import plotly.io as pio\n    report['changed'] = pio.json.config.default_engine == 'json'"),
    "scipy_special_error_state": ("import scipy.special as sc\nsc.seterr(all='raise')\n",
                                  "import scipy.special as sc\n"
                                  "    report['changed'] = sc.geterr()['singular'] == 'raise'"),
    "plotly_express_defaults": ("import plotly.express as px\npx.defaults.width = 5\n",
                                "import plotly.express as px\n    report['changed'] = px.defaults.width == 5"),
}


HOST_READS = """
def probe_host(report):
    {use}
"""


N4_3_OPEN = pytest.mark.xfail(strict=True, reason="FINDING N4-3 (lesser): a cell changes process-wide data on "
                              "module-level instances of granted libraries (scipy.stats.norm.badvalue, "
                              "plotly.express.defaults)")


KEPT_PER_ENGINE = ("scipy_special_error_state",)   # guards.LIBRARY_STATE since 9cf239f


@pytest.mark.parametrize("route", sorted(SINGLETON_DATA))
def test_module_level_library_instances_keep_their_data_after_the_cell(route):
    cell, use = SINGLETON_DATA[route]
    result = run_cell_in_child(cell, report=("status", "ename"), probe=HOST_READS.replace("{use}", use))
    assert "crashed" not in result, result
    assert result.get("changed") is False, result


def test_plotly_renderers_default_is_not_writable():
    probe = "def probe_host(report):\n    import plotly.io as pio\n    report['default'] = pio.renderers.default\n"
    before = run_cell_in_child("x = 1\n", report=("status",), probe=probe)
    after = run_cell_in_child("import plotly.io as pio\npio.renderers.default = 'browser'\n",
                              report=("status", "ename"), probe=probe)
    assert after["ename"] == "AttributeDenied", after
    assert after["default"] == before["default"], (before, after)


# From review 5 (docs/reviews.md, "Review 5").
# --- N5-8: a cell subclass of functools.partial is "the cell's own callable" -------------------------------------
# The library-object write check (in the working tree as this review ran, for N4-2: `libobj.name = v` takes data
# and the cell's own functions only; gates._library_object_write / _cell_or_builtin_callable) counts any object
# of a class the cell made as the cell's code: "its __call__ the special-method rule makes the cell's". A
# class P(functools.partial): pass has no __call__ of its own; it inherits partial's C tp_call, which calls the
# wrapped library function with the stored arguments and runs no cell code. P(np.savetxt, outside, ...) is
# accepted as Holiday.observance, np.ma.sqrt.f (the N4-2 routes), and on pandas' process-wide Float64Dtype
# instance (reached as a returned value: pd.array([1.5, None]).dtype is the one instance pandas keeps in a
# module-level table) as construct_array_type. The host's next use (a custom business day, np.ma.sqrt, and
# Series.convert_dtypes() / astype('Float64') / pd.concat of masked floats) writes the file, unconfined.
# (At HEAD, without that check, a plain partial does the same through every route.) The class-statement rule
# for special methods refuses P objects (held below).

PARTIAL_SUBCLASS = ("import functools, numpy as np, pandas as pd\nclass P(functools.partial):\n    pass\n"
                    "W = P(np.savetxt, {target!r}, np.array(['echo PWNED-BY-REVIEW5'], dtype=object), "
                    "'%s', ' ', '\\n', '')\n")


PARTIAL_SUBCLASS_ROUTES = {
    "shared_float64_dtype": ("pd.array([1.5, None]).dtype.construct_array_type = W\n",
                             "import pandas as pd\npd.Series([1.5, None]).convert_dtypes()"),
    "holiday_observance": ("import pandas.tseries.holiday as h\nh.USMemorialDay.observance = W\n",
                           "import pandas as pd\nfrom pandas.tseries.holiday import USFederalHolidayCalendar\n"
                           "pd.offsets.CustomBusinessDay(calendar=USFederalHolidayCalendar())"),
    "numpy_ma_operation": ("np.ma.sqrt.f = W\n", "import numpy as np\nnp.ma.sqrt(np.ma.array([4.0]))"),
}


# FINDING N5-8, fixed: an object of a cell class is the cell's callable only if its __call__ is the cell's
# function (gates._cell_or_builtin_callable), and pandas' extension dtypes are read-only (shared by the process).
@pytest.mark.parametrize("route", sorted(PARTIAL_SUBCLASS_ROUTES))
def test_partial_subclass_on_a_library_object_does_not_reach_the_host(outside, route):
    target = outside / f"partial-subclass-{route}.sh"
    plant, use = PARTIAL_SUBCLASS_ROUTES[route]
    result = run_cell_in_child(PARTIAL_SUBCLASS.format(target=str(target)) + plant, report=("status", "ename"),
                               probe=host_probe(use))
    assert "crashed" not in result, result
    assert not target.exists(), f"the host ran the cell's planted callable unconfined: {json.dumps(result)}"


# From review 6 (docs/reviews.md, "Review 6").
HOST_MA_SQRT = "import numpy as np\nnp.ma.sqrt(np.ma.array([4.0]))"


HOST_BUSINESS_DAY = ("import pandas as pd\nfrom pandas.tseries.holiday import USFederalHolidayCalendar\n"
                     "pd.offsets.CustomBusinessDay(calendar=USFederalHolidayCalendar())")


PLANT_MA = "np.ma.sqrt.f = {target}\n"


PLANT_OBSERVANCE = "import pandas.tseries.holiday as h\nh.USMemorialDay.observance = {target}\n"


# --- N6-1: a cell class is "the cell's callable", though calling it runs only library code -----------------------
# gates._cell_or_builtin_callable accepts any class the cell defined as a value for a library object's attribute.
# Calling a class runs the __new__/__init__ it inherits; the class-statement rule checks special methods only, so
# a non-special class attribute may be any library callable, and the inherited library code calls it:
# collections.UserDict.__init__(arg) calls self.update(arg); enum's EnumType.__call__(value) calls
# cls._missing_(value) for a value that is not a member. The cell defines no function; nothing ticks or refuses.

CLASS_CALLABLES = {
    "userdict_update": "import collections\nclass C(collections.UserDict):\n    update = {writer}\n",
    "enum_missing": "import enum\nclass C(enum.Enum):\n    A = 1\n    _missing_ = {writer}\n",
}


CLASS_SINKS = {
    "numpy_ma_operation": (PLANT_MA, HOST_MA_SQRT),
    "holiday_observance": (PLANT_OBSERVANCE, HOST_BUSINESS_DAY),
}


@pytest.mark.parametrize("sink", sorted(CLASS_SINKS))
@pytest.mark.parametrize("klass", sorted(CLASS_CALLABLES))
def test_a_cell_class_on_a_library_object_runs_no_library_callable_in_the_host(outside, klass, sink):
    target = outside / f"class-{klass}-{sink}.sh"
    plant, use = CLASS_SINKS[sink]
    cell = ("import functools, numpy as np\n" + CLASS_CALLABLES[klass].format(writer=savetxt_writer(target))
            + plant.format(target="C"))
    result = run_cell_in_child(cell, report=("status", "ename"), probe=host_probe_any(use), hard_exit=True)
    assert "crashed" not in result, result
    assert result["ename"] == "AttributeDenied", result   # the plant is refused (it was accepted, and the host wrote)
    assert not target.exists(), f"the host ran the cell's planted callable unconfined: {json.dumps(result)}"


# --- N6-2: a non-callable cell object carries a library callable ----------------------------------------------------
# The library-object write check (gates._library_object_write) refuses a value only when callable(value) and it is
# not the cell's; an instance of a cell class with no __call__ is data to it, whatever it holds. pandas' Holiday
# calls self.start_date.tz_localize(tz) (Holiday._reference_dates) when the holiday's dates are computed: the
# cell's S with tz_localize = partial(np.savetxt, outside, ...) as a class attribute, an instance attribute (the
# cell's own objects take any value), or a property whose getter is the partial.

CARRIERS = {
    "class_attribute": "class S:\n    tz_localize = {writer}\ncarrier = S()\n",
    "instance_attribute": "class S:\n    pass\ncarrier = S()\ncarrier.tz_localize = {writer}\n",
    "property": "class S:\n    tz_localize = property({writer})\ncarrier = S()\n",
}


@pytest.mark.parametrize("carrier", sorted(CARRIERS))
def test_a_cell_object_on_a_library_object_carries_no_library_callable_to_the_host(outside, carrier):
    target = outside / f"carrier-{carrier}.sh"
    cell = ("import functools, numpy as np\nimport pandas.tseries.holiday as h\n"
            + CARRIERS[carrier].format(writer=savetxt_writer(target)) + "h.USMemorialDay.start_date = carrier\n")
    result = run_cell_in_child(cell, report=("status", "ename"), probe=host_probe_any(HOST_BUSINESS_DAY), hard_exit=True)
    assert "crashed" not in result, result
    assert result["ename"] == "AttributeDenied", result   # the plant is refused (it was accepted, and the host wrote)
    assert not target.exists(), f"the host ran the cell's planted callable unconfined: {json.dumps(result)}"


# --- N6-3: the interpreter's ZoneInfo cache keeps the cell's key object ---------------------------------------------
# ZoneInfo instances are cached by key for the whole process. A str subclass equal to 'Europe/Paris' (same hash)
# fills the cache entry; every later ZoneInfo('Europe/Paris') returns that instance, and its .key and str() are
# the cell's object. The class body holds split = partial(np.savetxt, outside, ...) (zoneinfo's own loading calls
# only startswith, so nothing runs in the cell); host code splitting the zone name writes the file.

ZONE_CELL = ("import functools, zoneinfo, numpy as np\nclass S(str):\n    split = {writer}\n"
             "z = zoneinfo.ZoneInfo(S('Europe/Paris'))\n")


ZONE_HOST = """
def probe_host(report):
    import zoneinfo
    tz = zoneinfo.ZoneInfo('Europe/Paris')
    report['key_type'] = type(tz.key).__name__
    try:
        report['region'] = str(tz.key.split('/')[0])
    except BaseException as exc:
        report['host_error'] = type(exc).__name__
"""


# FINDING N6-3, fixed: the cell's zoneinfo.ZoneInfo passes an exact str to the real one (guards._guard_zoneinfo).
def test_the_zoneinfo_cache_hands_the_host_no_cell_key(outside):
    target = outside / "zoneinfo-key.sh"
    result = run_cell_in_child(ZONE_CELL.format(writer=savetxt_writer(target)), report=("status", "ename"),
                               probe=ZONE_HOST, hard_exit=True)
    assert "crashed" not in result, result
    # (the class S itself is refused now: split = partial(...) overrides str's own method with a library
    # callable; the ZoneInfo guard is tested alone below)
    assert not target.exists(), f"the host ran the cell's planted callable unconfined: {json.dumps(result)}"
    assert result["key_type"] == "str", result


# --- N6-4: plotly's ValidatorCache filled under a key the cell chose ------------------------------------------------
# ValidatorCache.get_validator(parent, name) looks the validator up by f"{parent}.{name}" and caches it under
# (parent, name). With name = S('x') whose __format__ (the cell's function, run in the cell) answers 'mode', the
# cache entry ('scatter', 'x') (S == 'x') holds scatter.mode's FlaglistValidator for everyone after the cell: the
# kernel's output wall (plotlyfigure._build_schema, lazily in the host) classifies scatter.x by it, and the host's
# next go.Scatter(x=...) raises LimitExceeded, a BaseException, from the planted __format__.

VALIDATOR_CELL = ("from plotly.validator_cache import ValidatorCache\nclass S(str):\n"
                  "    def __format__(self, spec):\n        return 'mode' if str(self) == 'x' else str(self)\n"
                  "v = ValidatorCache.get_validator('scatter', S('x'))\n")


VALIDATOR_HOST = """
def probe_host(report):
    try:
        from sandbox_kernel import plotlyfigure
        report['wall_x'] = repr(plotlyfigure.schema().traces['scatter'].field('x'))
    except BaseException as exc:
        report['wall_error'] = type(exc).__name__
    try:
        import plotly.graph_objects as go
        go.Scatter(x=[1, 2], y=[3, 4])
        report['scatter'] = 'ok'
    except BaseException as exc:
        report['scatter'] = type(exc).__name__
"""


def test_the_output_wall_classifies_scatter_x_as_data_after_an_honest_cell():
    result = run_cell_in_child("x = 1\n", report=("status",), probe=VALIDATOR_HOST, hard_exit=True)
    assert result["wall_x"] == "Leaf('array', 'scatter.x')" and result["scatter"] == "ok", result


def test_the_validator_cache_keeps_no_validator_the_cell_chose():
    result = run_cell_in_child(VALIDATOR_CELL, report=("status", "ename"), probe=VALIDATOR_HOST, hard_exit=True)
    assert "crashed" not in result, result
    assert result["status"] == "ok", result
    assert result.get("wall_x") == "Leaf('array', 'scatter.x')", result
    assert result["scatter"] == "ok", result


# --- held ----------------------------------------------------------------------------------------------------------

CELL_WRAPPERS = {
    "lambda": "W = {writer}\nnp.ma.sqrt.f = lambda d: W(d)\n",
    "def_with_default": "def f(d, w={writer}):\n    return w(d)\nnp.ma.sqrt.f = f\n",
}


@pytest.mark.parametrize("route", sorted(CELL_WRAPPERS))
def test_the_cells_own_function_refuses_to_run_in_the_host(outside, route):
    target = outside / f"wrapper-{route}.sh"
    cell = "import functools, numpy as np\n" + CELL_WRAPPERS[route].format(writer=savetxt_writer(target))
    result = run_cell_in_child(cell, report=("status", "ename"), probe=host_probe_any(HOST_MA_SQRT), hard_exit=True)
    assert "crashed" not in result, result
    # np.ma.sqrt is kept by numpy.ma's module: since review 10 (N10-10) the write itself is refused; before, the
    # cell's function stored there refused to run in the host
    assert result.get("ename") == "AttributeDenied" or result.get("host_error") == "LimitExceeded", result
    assert not target.exists(), result


@pytest.mark.parametrize("name", ["__init__", "__new__"])
def test_a_library_callable_as_a_constructor_special_method_is_refused(outside, name):
    target = outside / f"special-{name}.sh"
    cell = f"import functools, numpy as np\nclass C:\n    {name} = {savetxt_writer(target)}\nnp.ma.sqrt.f = C\n"
    result = run_cell_in_child(cell, report=("status", "ename"), probe=host_probe_any(HOST_MA_SQRT), hard_exit=True)
    assert result["ename"] == "AttributeDenied", result
    assert not target.exists(), result


def test_numpy_ma_nx_function_name_is_not_writable():
    result = run_cell_in_child("import numpy as np\nnp.ma.vstack.__name__ = 'savetxt'\n",
                               report=("status", "ename"),
                               probe=host_probe_any("import numpy as np\nreport['name'] = np.ma.vstack.__name__"),
                               hard_exit=True)
    assert result["ename"] == "AttributeDenied" and result["name"] == "vstack", result


def test_cached_date_offsets_take_no_attributes():
    result = run_cell_in_child("import pandas as pd\npd.tseries.frequencies.to_offset('B').planted = 1\n",
                               report=("status", "ename"), hard_exit=True)
    assert result["ename"] == "AttributeError", result


def test_the_cells_zoneinfo_gives_the_cache_an_exact_str_key():
    """(N6-3's second half: a str subclass the class rules allow, with a method of its own.)"""
    cell = ("import zoneinfo\nclass S(str):\n    def shout(self):\n        return self.upper()\n"
            "z = zoneinfo.ZoneInfo(S('Europe/Paris'))\n")
    result = run_cell_in_child(cell, report=("status", "ename"), probe=ZONE_HOST, hard_exit=True)
    assert result["status"] == "ok" and result["key_type"] == "str", result


# From review 7 (docs/reviews.md, "Review 7").
# --- N7-1: class-level containers of granted classes, and lists nested in module-level dicts ------------------------

STDLIB_CONTAINERS = {
    "textwrap_whitespace_table": (
        "import textwrap\ntextwrap.TextWrapper.unicode_whitespace_trans[ord('a')] = 'PWNED'\n",
        "import textwrap\nreport['host'] = textwrap.fill('banana')",
        "banana"),
    "calendar_css_classes": (
        "import calendar\ncalendar.HTMLCalendar.cssclasses[0] = '\"><script>alert(1)</script>'\n",
        "import calendar\nreport['host'] = 'script' in calendar.HTMLCalendar().formatmonth(2026, 1)",
        False),
    "plotly_scales_nested_list": (
        "import plotly.colors as pc\npc.PLOTLY_SCALES['Greys'].append([1, 'PWNED'])\n",
        "import plotly.colors as pc\nreport['host'] = len(pc.PLOTLY_SCALES['Greys'])",
        2),
}


@pytest.mark.parametrize("case", sorted(STDLIB_CONTAINERS))
def test_library_class_containers_are_not_changed_for_the_host(case):
    cell, use, expected = STDLIB_CONTAINERS[case]
    result = run_with_host(cell, use)
    assert result.get("host") == expected, json.dumps(result)


# --- N7-2: pandas' module-level Holiday rules keep their offsets in a list ------------------------------------------

HOST_EASTER = ("from pandas.tseries.holiday import EasterMonday, GoodFriday\n"
               "report['host'] = [str(d.date()) for d in EasterMonday.dates('2020-01-01', '2022-01-01')]"
               " + [str(d.date()) for d in GoodFriday.dates('2020-01-01', '2022-01-01')]")


EASTER_TRUE = ["2020-04-13", "2021-04-05", "2020-04-10", "2021-04-02"]


def test_the_host_holidays_are_right_without_a_cell():
    result = run_with_host("x = 1\n", HOST_EASTER)
    assert result.get("host") == EASTER_TRUE, result


def test_holiday_offset_lists_are_not_changed_for_the_host():
    cell = ("import pandas as pd\nfrom pandas.tseries.holiday import EasterMonday, GoodFriday\n"
            "EasterMonday.offset.append(pd.DateOffset(days=1))\n"
            "GoodFriday.offset[1] = pd.DateOffset(days=-1)\n")
    result = run_with_host(cell, HOST_EASTER)
    assert result.get("host") == EASTER_TRUE, json.dumps(result)


def test_a_cell_offset_in_the_holiday_list_runs_no_library_callable_in_the_host(outside):
    target = outside / "easter-apply.txt"
    cell = ("import functools, numpy as np, pandas as pd\nfrom pandas.tseries.holiday import EasterMonday\n"
            f"W = {savetxt_writer(target)}\n"
            "class Off(pd.DateOffset):\n    _apply_array = W\n    _apply = W\n"
            "EasterMonday.offset.append(Off(days=1))\n")
    result = run_with_host(cell, HOST_EASTER)
    assert not target.exists(), f"the host ran the cell's planted callable: {json.dumps(result)}"


def test_a_cell_offset_overriding_add_datetime_ndarray_with_a_partial_is_refused(outside):
    target = outside / "easter-add.txt"
    cell = ("import functools, numpy as np, pandas as pd\nfrom pandas.tseries.holiday import EasterMonday\n"
            f"W = {savetxt_writer(target)}\n"
            "class Off(pd.DateOffset):\n    _add_datetime_ndarray = W\n"
            "EasterMonday.offset.append(Off(days=1))\n")
    result = run_with_host(cell, HOST_EASTER)
    # refused at the library override (AttributeDenied), and since review 8 already at the class: a cell may not
    # subclass pandas' _libs classes (BuiltinDenied)
    assert result["ename"] in ("AttributeDenied", "BuiltinDenied"), result
    assert result.get("host") == EASTER_TRUE, result
    assert not target.exists()


# --- N7-3: plotly validators' value lists, read by plotly and by the kernel's output wall ---------------------------

PLANT_VALIDATORS = ("from plotly.validator_cache import ValidatorCache\n"
                    "ValidatorCache.get_validator('scatter', 'mode').flags.append('PWN')\n"
                    "ValidatorCache.get_validator('scatter', 'fill').values.append('/.*/')\n")


XSS = "<img src=x onerror=alert(1)>"


HOST_WALL = f"""
from sandbox_kernel import plotlyfigure
try:
    out = plotlyfigure.validate_figure({{'data': [{{'type': 'scatter', 'x': [1], 'y': [1], 'fill': {XSS!r},
                                                    'mode': 'PWN'}}], 'layout': {{}}}})
    trace = out['data'][0]
    report['wall'] = [trace.get('fill'), trace.get('mode')]
except plotlyfigure.FigureRejected:
    report['wall'] = 'rejected'
"""


HOST_PLOTLY = """
import plotly.graph_objects as go
try:
    go.Scatter(mode='PWN+lines')
    report['plotly'] = 'accepted'
except ValueError:
    report['plotly'] = 'refused'
"""


def test_the_wall_removes_an_unknown_fill_and_mode_without_a_cell():
    result = run_with_host("x = 1\n", HOST_WALL + HOST_PLOTLY)
    assert result.get("wall") in ("rejected", [None, None]), result
    assert result.get("plotly") == "refused", result


def test_plotly_validator_lists_do_not_widen_the_output_wall():
    result = run_with_host(PLANT_VALIDATORS, HOST_WALL)
    assert result.get("wall") in ("rejected", [None, None]), json.dumps(result)


def test_plotly_validator_lists_are_not_changed_for_the_host():
    result = run_with_host(PLANT_VALIDATORS, HOST_PLOTLY)
    assert result.get("plotly") == "refused", json.dumps(result)


# Through the kernel's own backend (added with the fix): the validators' lists a cell reads are its own copies
# (gates.Gates._containers_copied: validators are process-wide objects), so the wall the kernel builds after
# the cell is plotly's own.
KERNEL_WALL = textwrap.dedent("""
    import json, sys, tempfile
    from sandbox_kernel.isolation import make_backend
    from sandbox_kernel.policy import PRESETS
    backend = make_backend("none", PRESETS["data-science"], tempfile.mkdtemp())
    done = backend.run_cell(sys.argv[1], emit=lambda e: None)
    report = {"status": done["status"]}
""") + HOST_WALL + "\nprint(json.dumps(report))\n"


def test_the_kernels_wall_at_level_none_is_not_widened_by_a_cell():
    out = subprocess.run([sys.executable, "-c", KERNEL_WALL, PLANT_VALIDATORS], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok", result   # the cell changed its own copies
    assert result["wall"] in ("rejected", [None, None]), result


LIBRARY_WRITES = [
    "json.JSONEncoder.default = W", "json.JSONEncoder.iterencode = W", "json.JSONEncoder.item_separator = 'x'",
    "json.JSONDecoder.object_hook = W", "json.encoder.INFINITY = 'x'", "np.ndarray.foo = 1",
    "pd.DataFrame.foo = 1", "collections.OrderedDict.foo = 1", "json.dumps.__defaults__ = (W,)",
    "json.dump.__kwdefaults__ = {}",
]


@pytest.mark.parametrize("stmt", LIBRARY_WRITES)
def test_library_class_and_function_writes_are_refused(outside, stmt):
    cell = ("import json, json.encoder, collections, functools, numpy as np, pandas as pd\n"
            f"W = {savetxt_writer(outside / 'w.txt')}\n{stmt}\n")
    result = run_with_host(cell, "")
    assert result["ename"] == "AttributeDenied", result


def test_module_level_containers_are_copies_or_read_only():
    cell = ("import numpy as np, plotly.colors as pc\nout = []\n"
            "try:\n    np.sctypeDict['float64'] = np.int8\n    out.append('written')\n"
            "except TypeError:\n    out.append('refused')\n"
            "try:\n    np.typecodes['All'] = 'x'\n    out.append('written')\n"
            "except TypeError:\n    out.append('refused')\n"
            "pc.qualitative.Plotly[0] = '#123456'\npc.sequential.Viridis.append('#000000')\n"
            "assert out == ['refused', 'refused'], out\n")
    use = ("import numpy as np, plotly.colors as pc\n"
           "report['host'] = [str(np.dtype('float64')), pc.qualitative.Plotly[0], pc.sequential.Viridis[-1]]")
    result = run_with_host(cell, use)
    assert result["status"] == "ok", result
    assert result.get("host") == ["float64", "#636EFA", "#fde725"], result


# --- a library class's containers read through an instance, a cell subclass or super() ----------------------
# The copy rule (review 7) covered reads on the library class itself; an instance reads the same class-level
# list (HTMLCalendar().cssclasses is HTMLCalendar.cssclasses), and so do a cell subclass and super(): found in
# this session's own review of the read path, closed in the same rule (Gates._class_container_copied).

CLASS_CONTAINER_ROUTES = {
    "an instance": "calendar.HTMLCalendar().cssclasses.append('planted')",
    "a cell subclass": "class C(calendar.HTMLCalendar):\n    pass\nC.cssclasses.append('planted')",
    "a cell subclass's instance": "class C(calendar.HTMLCalendar):\n    pass\nC().cssclasses.append('planted')",
    "super()": "class C(calendar.HTMLCalendar):\n    def grab(self):\n        return super().cssclasses\n"
               "C().grab().append('planted')",
    "a dict through an instance": "textwrap.TextWrapper().unicode_whitespace_trans[65] = 66",
}


@pytest.mark.parametrize("route", sorted(CLASS_CONTAINER_ROUTES))
def test_a_library_classs_containers_stay_the_hosts_whatever_reads_them(run, route):
    import calendar
    import textwrap as host_textwrap
    css, trans = list(calendar.HTMLCalendar.cssclasses), dict(host_textwrap.TextWrapper.unicode_whitespace_trans)
    r = run("import calendar, textwrap\n" + CLASS_CONTAINER_ROUTES[route])
    assert r.ok, r   # the cell changed its own copy
    assert calendar.HTMLCalendar.cssclasses == css
    assert host_textwrap.TextWrapper.unicode_whitespace_trans == trans


def test_what_an_instance_holds_itself_stays_its_own(run):
    r = run("import calendar\nh = calendar.HTMLCalendar()\nh.cssclasses = ['mine']\nh.cssclasses.append('kept')\n"
            "class C(calendar.HTMLCalendar):\n    extra = [1]\nC.extra.append(2)\nc = C()\nc.extra.append(3)\n"
            "print(h.cssclasses, C.extra)")
    assert r.ok and r.stdout == "['mine', 'kept'] [1, 2, 3]\n", r


# --- N10-5 (lesser): library arrays shared with the host are writable from a cell ----------------------------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-5: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# Review 7 made lists, dicts and sets read from library classes and module tables the cell's own copies
# (Gates._containers_copied, _class_container_copied); numpy arrays held there are handed out as they are,
# writable. numpy.polynomial's module constants (polyone, polyx ...) and its classes' default domain/window, and
# scipy.integrate's Runge-Kutta tableaux (RK45.A/B/C/E/P, RK23, DOP853) are one array for the process: a cell's
# item assignment changes every later Polynomial and every later solve_ivp, the host's included.

SHARED_ARRAYS = {
    "numpy.polynomial constants": ("np.polynomial.polynomial.polyone[0] = 7",
                                   "report['changed'] = int(np.polynomial.polynomial.polyone[0]) != 1"),
    "Polynomial.domain (class)": ("np.polynomial.Polynomial.domain[0] = 100.0",
                                  "report['changed'] = float(np.polynomial.Polynomial([1.0, 2.0]).domain[0]) != -1.0"),
    "RK45 tableau (class)": ("from scipy import integrate\nintegrate.RK45.B[:] = 0.0",
                             "from scipy import integrate\nr = integrate.solve_ivp(lambda t, y: -y, (0, 1), [1.0])\n"
                             "report['changed'] = abs(float(r.y[0, -1]) - 0.36788) > 1e-3"),
}


@pytest.mark.parametrize("route", sorted(SHARED_ARRAYS))
def test_library_arrays_are_not_the_hosts(route):
    write, use = SHARED_ARRAYS[route]
    result = run_reporting("import numpy as np\n" + write, timeout=120,
                           probe=host_probe_any("import numpy as np\n" + use))
    assert "crashed" not in result and "host_error" not in result, result
    assert not result["changed"], json.dumps(result)


# --- N10-6: a library object's own __init__, called again by the cell, rewrites it past the write gate -------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-6: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# The attribute gate hands out `__init__` (getattr(obj, "__init__"), operator.methodcaller("__init__"), df.eval's
# "a.__init__"). Calling a library object's __init__ again makes the library's own code assign its attributes, so
# neither the library-object write gate (no library callable, no object of a cell class) nor the read-only
# singletons (gates._read_only_instances: dateutil's default parser, scipy.stats' distributions) see the write.
# dateutil's DEFAULTPARSER.__init__(info) takes a cell object whose methods are partial(np.savetxt, outside, ...):
# the host's next dateutil.parser.parse() calls info.weekday(token) unconfined and writes the file outside; pandas'
# USMemorialDay rule re-initialised with observance=partial(np.savetxt, outside, ...) writes it when the host next
# asks USFederalHolidayCalendar for its holidays (N4-1's host path).
# stats.norm.__init__(a=3.0) moves the host's standard normal's support: norm.cdf(0) is 0.0 for the host.

INIT_PARSER = '''
import functools
import numpy as np
from dateutil import parser
class Info:
    pass
info = Info()
info.dayfirst = False
info.yearfirst = False
for name in ("weekday", "month", "jump", "hms", "ampm", "pertain", "utczone", "tzoffset"):
    setattr(info, name, WRITER)
CALL
'''

INIT_ROUTES = {
    "getattr": "getattr(parser.DEFAULTPARSER, '__init__')(info)",
    "methodcaller": "import operator\noperator.methodcaller('__init__', info)(parser.DEFAULTPARSER)",
}


@pytest.mark.parametrize("route", sorted(INIT_ROUTES))
def test_library_init_does_not_plant_host_callables(route, tmp_path):
    outside = tmp_path / "outside.txt"
    cell = INIT_PARSER.replace("WRITER", savetxt_writer(outside)).replace("CALL", INIT_ROUTES[route])
    result = run_reporting(cell, timeout=120,
                           probe=host_probe_any("from dateutil import parser\nparser.parse('Monday')"))
    assert "crashed" not in result, result
    assert not outside.exists(), f"the host wrote {outside}: {outside.read_text()!r}"


INIT_HOLIDAY = '''
import functools
import numpy as np
from pandas.tseries import holiday
getattr(holiday.USMemorialDay, "__init__")("Memorial Day", month=5, day=31, observance=WRITER)
'''


def test_holiday_init_does_not_plant_host_callables(tmp_path):
    outside = tmp_path / "outside.txt"
    result = run_reporting(INIT_HOLIDAY.replace("WRITER", savetxt_writer(outside)), timeout=120,
                           probe=host_probe_any("from pandas.tseries.holiday import USFederalHolidayCalendar\n"
                                                "USFederalHolidayCalendar().holidays('2020-01-01', '2020-12-31')"))
    assert "crashed" not in result, result
    assert not outside.exists(), f"the host wrote {outside}: {outside.read_text()!r}"


SINGLETON_INITS = {
    "scipy.stats.norm": ("from scipy import stats\ngetattr(stats.norm, '__init__')(a=3.0)",
                         "from scipy import stats\nreport['changed'] = float(stats.norm.cdf(0.0)) != 0.5"),
    "uuid.NAMESPACE_DNS": ("import uuid\ngetattr(uuid.NAMESPACE_DNS, '__init__')(int=0)",
                           "import uuid\nreport['changed'] = str(uuid.NAMESPACE_DNS) != "
                           "'6ba7b810-9dad-11d1-80b4-00c04fd430c8'"),
}


@pytest.mark.parametrize("target", sorted(SINGLETON_INITS))
def test_library_init_does_not_change_process_wide_objects(target):
    cell, use = SINGLETON_INITS[target]
    result = run_reporting(cell, timeout=120, probe=host_probe_any(use))
    assert "crashed" not in result and "host_error" not in result, result
    assert not result["changed"], json.dumps(result)


# --- N10-10 (lesser): data written on module-level library instances that are not on the read-only list ------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-10: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# The library-object write gate takes plain data on any object that is not the cell's unless the object is one of the
# listed process-wide singletons (gates._read_only_instances: dateutil, plotly validators, scipy.stats, finfo, pandas'
# Holiday rules ...). calendar's month_name/day_name/month_abbr/day_abbr (one _localized_month/_localized_day each,
# read by the host's calendar.month_name[i]) and typing's module TypeVars are not listed: a cell's
# `calendar.month_name.format = '%d'` makes the host's calendar.month_name[1] '01'.

MODULE_INSTANCES = {
    "calendar.month_name": ("import calendar\ncalendar.month_name.format = '%d'",
                            "import calendar\nreport['changed'] = calendar.month_name[1] != 'January'"),
    "calendar.day_abbr": ("import calendar\ncalendar.day_abbr.format = '%A!'",
                          "import calendar\nreport['changed'] = calendar.day_abbr[0] != 'Mon'"),
    "typing.T": ("import typing\ntyping.T.planted = 1", "import typing\nreport['changed'] = hasattr(typing.T, 'planted')"),
}


@pytest.mark.parametrize("target", sorted(MODULE_INSTANCES))
def test_module_level_library_instances_are_not_written(target):
    cell, use = MODULE_INSTANCES[target]
    result = run_reporting(cell, timeout=120, probe=host_probe_any(use))
    assert "crashed" not in result and "host_error" not in result, result
    assert not result["changed"], json.dumps(result)


# -- review 12, R12-4: descriptors a library class holds -----------------------------------------------------------

@pytest.mark.parametrize("write", [
    "np.finfo.epsneg.attrname = 'eps'",
    "np.finfo.epsneg.__doc__ = 'x'",
    "setattr(np.finfo.epsneg, 'attrname', 'eps')",
])
def test_a_descriptor_of_a_library_class_takes_no_write(write):
    """np.finfo.epsneg is a functools.cached_property shared by the process: a new attrname made the host's later
    np.finfo(t).epsneg answer eps."""
    from childcell import host_probe_any, run_cell_in_child

    probe = "import numpy as np\n" + host_probe_any(
        "report['epsneg'] = float(np.finfo(np.float16).epsneg)\nreport['eps'] = float(np.finfo(np.float16).eps)")
    result = run_cell_in_child(f"import numpy as np\n{write}\n", report=("status", "ename"), probe=probe,
                               hard_exit=True, limits={"timeout": 30.0})
    assert "crashed" not in result and result["status"] == "error", result
    assert result["epsneg"] == 2.0 ** -11 and result["eps"] == 2.0 ** -10, result
