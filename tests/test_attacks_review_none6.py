"""Sixth independent review at level `none`: attacks by an outsider told only the threat model.

Start 2026-11-26 17:20 UTC, end 17:27 UTC (by `date`), against HEAD ba22066 plus the uncommitted gates.py/guards.py changes
others had in the working tree at the time (N5-8 fixed: an object of a cell class is the cell's callable only by its
__call__; pandas' extension dtypes read-only). Each test performs the real attack in an Engine with the
data-science policy, in a child process (tests/childcell.py): the cell plants, then the probe acts as the
unconfined host. Findings are strict xfails named FINDING N6-k; attempts that were held are plain regression
tests. N6-1 to N6-5 were fixed right after the review: regression tests now.

Log of what was tried (one line per attempt class) and the result:
  a cell CLASS as the callable stored on a library object (gates._cell_or_builtin_callable accepts any class
    the cell made: "isinstance(value, type) -> is_sandbox_class"). Calling a class runs the __new__/__init__
    it inherits, and those call the class's own non-special attributes, which the class-statement rule
    never checks (only special methods are): class C(collections.UserDict): update = partial(np.savetxt,
    outside, ...) (UserDict.__init__ calls self.update(arg)); class E(enum.Enum): A = 1; _missing_ =
    partial(...) (EnumType.__call__ calls cls._missing_(value)). No cell function at all. Stored as
    np.ma.sqrt.f / pandas' USMemorialDay.observance, the host's next np.ma.sqrt(...) / CustomBusinessDay(
    calendar=USFederalHolidayCalendar()) writes the file outside, unconfined       file written  FINDING N6-1 (fixed)
  a NON-CALLABLE cell object carrying a library callable: the library-object write check looks at
    callable(value) only, so an instance of a cell class passes whatever it holds; the library later calls
    a method it looks up on it. USMemorialDay.start_date = S() where S has tz_localize = partial(np.savetxt,
    outside, ...) as a class attribute, as an instance attribute (s.tz_localize = partial(...): the cell's
    own object takes anything), or as property(partial(...)); Holiday._reference_dates calls
    self.start_date.tz_localize(tz) when the host builds a custom business day      file written  FINDING N6-2 (fixed)
  process-wide caches keyed by a cell's str subclass: zoneinfo.ZoneInfo(S('Europe/Paris')) (ZoneInfo is
    granted) fills the interpreter's ZoneInfo cache; every later ZoneInfo('Europe/Paris') in the process
    returns that object, whose .key and str() are the cell's S (S == 'Europe/Paris', same hash). S's class
    body holds split = partial(np.savetxt, outside, ...) (zoneinfo's loader calls only startswith on the key,
    so the cell's own creation writes nothing); the host's tz.key.split('/') / str(tz).split('/') writes
    the file                                                                    file written  FINDING N6-3 (fixed)
    (pandas/plotly tz-aware repr, to_json, to_csv, astype(str), DatetimeTZDtype parsing, tz_convert: no str
    method of the key called)                                                                  not reached
  plotly's ValidatorCache (class-level dict, filled on first use, read by every figure and by the kernel's
    output wall, plotlyfigure._build_schema): get_validator('scatter', S('x')) where S.__format__ (the
    cell's function, it runs in the cell) answers 'mode': the lookup f"{parent}.{name}" fetches scatter.mode's
    FlaglistValidator and caches it under ('scatter', 'x'). After the cell the host's ValidatorCache hands
    that validator out for scatter.x: the kernel's output wall classifies scatter.x as a flaglist (the
    validators were made read-only in N4-2 because the wall reads them; the cache itself is not), and the
    host's go.Scatter(x=[1, 2]) raises LimitExceeded (a BaseException: `except Exception` in host code does
    not stop it) from the planted __format__                 wall schema changed / host fails  FINDING N6-4 (fixed)
  the random module's process-wide generator (random._inst): random.seed(n) in a cell is the host's state
    afterwards (not in guards.LIBRARY_STATE); the host's random draws are the cell's to predict
                                                                  process-wide change  FINDING N6-5 (lesser, fixed)
  the cell's own functions as the planted callable (lambda d: W(d), def f(d, w=W): return w(d)):
    LimitExceeded('sandboxed code cannot run outside a cell') in the host, nothing written     held
  library callables as special methods in a class body (__init__ = partial(...), __new__ = partial(...)):
    AttributeDenied                                                                            held
  item writes into module-level dicts of granted libraries (np.ma.core.ufunc_domain[np.sqrt] = partial):
    module dicts are handed out as mappingproxy (TypeError)                                    held
  scipy.fft.set_global_backend / register_backend of a class with __ua_function__ = partial(np.savez,
    outside): kept per engine (guards._UarrayBackends), the host's fft is its own               held
  np.ma.vstack.__name__ = 'savetxt' (numpy.ma's _fromnxfunction looks the numpy function up by its
    __name__): AttributeDenied                                                                 held
  pd.tseries.frequencies.to_offset('B') (offsets are cached): no instance dict, AttributeError    held
  (a cell subclass of pd.DateOffset with _apply/_apply_array = partial(...) as Holiday.offset: the
    business-day path did not call them; not pursued further)
"""
from __future__ import annotations

import json

import pytest

from childcell import host_probe, run_cell_in_child, savetxt_writer

PAYLOAD = "echo PWNED-BY-REVIEW6"


def _writer(path) -> str:
    return savetxt_writer(path, PAYLOAD)


def _probe(use: str) -> str:
    return host_probe(use, catch="BaseException")


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
    cell = ("import functools, numpy as np\n" + CLASS_CALLABLES[klass].format(writer=_writer(target))
            + plant.format(target="C"))
    result = run_cell_in_child(cell, report=("status", "ename"), probe=_probe(use), hard_exit=True)
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
            + CARRIERS[carrier].format(writer=_writer(target)) + "h.USMemorialDay.start_date = carrier\n")
    result = run_cell_in_child(cell, report=("status", "ename"), probe=_probe(HOST_BUSINESS_DAY), hard_exit=True)
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
    result = run_cell_in_child(ZONE_CELL.format(writer=_writer(target)), report=("status", "ename"),
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


# --- N6-5 (lesser): the random module's generator is the process's -------------------------------------------------

RANDOM_HOST = """
def probe_host(report):
    import random
    first = random.random()
    random.seed(12345)
    report['seeded_by_cell'] = first == random.random()
"""


def test_random_seed_in_a_cell_is_not_the_hosts():
    result = run_cell_in_child("import random\nrandom.seed(12345)\n", report=("status",), probe=RANDOM_HOST,
                               hard_exit=True)
    assert result["status"] == "ok", result
    assert result["seeded_by_cell"] is False, result


# --- held ----------------------------------------------------------------------------------------------------------

CELL_WRAPPERS = {
    "lambda": "W = {writer}\nnp.ma.sqrt.f = lambda d: W(d)\n",
    "def_with_default": "def f(d, w={writer}):\n    return w(d)\nnp.ma.sqrt.f = f\n",
}


@pytest.mark.parametrize("route", sorted(CELL_WRAPPERS))
def test_the_cells_own_function_refuses_to_run_in_the_host(outside, route):
    target = outside / f"wrapper-{route}.sh"
    cell = "import functools, numpy as np\n" + CELL_WRAPPERS[route].format(writer=_writer(target))
    result = run_cell_in_child(cell, report=("status", "ename"), probe=_probe(HOST_MA_SQRT), hard_exit=True)
    assert "crashed" not in result, result
    assert result.get("host_error") == "LimitExceeded", result
    assert not target.exists(), result


@pytest.mark.parametrize("name", ["__init__", "__new__"])
def test_a_library_callable_as_a_constructor_special_method_is_refused(outside, name):
    target = outside / f"special-{name}.sh"
    cell = f"import functools, numpy as np\nclass C:\n    {name} = {_writer(target)}\nnp.ma.sqrt.f = C\n"
    result = run_cell_in_child(cell, report=("status", "ename"), probe=_probe(HOST_MA_SQRT), hard_exit=True)
    assert result["ename"] == "AttributeDenied", result
    assert not target.exists(), result


def test_module_level_dicts_take_no_item_writes(outside):
    target = outside / "ufunc-domain.sh"
    cell = f"import functools, numpy as np\nnp.ma.core.ufunc_domain[np.sqrt] = {_writer(target)}\n"
    result = run_cell_in_child(cell, report=("status", "ename"),
                               probe=_probe("import numpy as np\nnp.sqrt(np.ma.array([4.0]))"), hard_exit=True)
    assert result["ename"] == "TypeError", result
    assert not target.exists(), result


@pytest.mark.parametrize("how", ["set_global_backend(B)", "register_backend(B)", "set_global_backend(B())"])
def test_scipy_fft_backends_are_kept_per_engine(outside, how):
    target = outside / "fft-backend"
    cell = ("import functools, numpy as np, scipy.fft\nclass B:\n    __ua_domain__ = 'numpy.scipy.fft'\n"
            f"    __ua_function__ = staticmethod(functools.partial(np.savez, {str(target)!r}))\n"
            f"scipy.fft.{how}\n")
    result = run_cell_in_child(cell, report=("status", "ename"),
                               probe=_probe("import numpy as np, scipy.fft\nscipy.fft.fft(np.arange(4.0))"),
                               hard_exit=True)
    assert "crashed" not in result and "host_error" not in result, result
    assert not list(outside.iterdir()), result


def test_numpy_ma_nx_function_name_is_not_writable():
    result = run_cell_in_child("import numpy as np\nnp.ma.vstack.__name__ = 'savetxt'\n",
                               report=("status", "ename"),
                               probe=_probe("import numpy as np\nreport['name'] = np.ma.vstack.__name__"),
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
