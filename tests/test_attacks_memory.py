"""Must-block: raw memory through numpy. An object array laid over a buffer the cell controls is a
'fakeobj' primitive: any address becomes a Python object, a fake bytearray spans the address space, and
the real builtins are one pointer away. Runs in a child process (a mistake here segfaults)."""
from __future__ import annotations

import json
import subprocess
import typing

import pytest

from childcell import run_cell_in_child, run_reporting
from conftest import Sandbox
from rawview import assert_no_full_escape, assert_no_raw_view


def _run(src):
    return run_cell_in_child(src, report=("status", "ename", "denials"), ns=("ok_made",), hard_exit=True, timeout=30)


FAKEOBJ_EXPLOIT = """\
import numpy as np, json
buf = bytearray(8)
arr = {constructor}
def p64(n):
    return n.to_bytes(8, 'little')
def fakeobj(addr):
    buf[0:8] = p64(addr)
    o = arr[0] if arr.dtype.names is None else arr[0][0]
    buf[0:8] = p64(0)
    return o
fake = p64(1 << 40) + p64(id(bytearray)) + p64(1 << 62) + p64((1 << 62) + 1) + p64(0) + p64(0) + p64(0)
mem = fakeobj(id(fake) + 32)
def read64(addr):
    return int.from_bytes(mem[addr:addr + 8], 'little')
real_builtins = fakeobj(read64(id(json.dumps) + 24))
real_builtins['exec']("import sandbox_kernel.confine as c\\nc._FS.set(None)\\nimport os\\nos.system('echo PWNED > {marker}')", {{}})
"""

CONSTRUCTORS = [
    "np.ndarray((1,), dtype=object, buffer=buf)",
    "np.ndarray.__new__(np.ndarray, (1,), dtype=object, buffer=buf)",
    "np.recarray((1,), dtype=[('a', 'O')], buf=buf)",
    "type(np.zeros(1))((1,), dtype=object, buffer=buf)",
    "np.zeros(1).__class__((1,), dtype=object, buffer=buf)",
]


@pytest.mark.parametrize("constructor", CONSTRUCTORS)
def test_object_array_over_a_buffer_is_refused(tmp_path, constructor):
    marker = tmp_path / "fakeobj.txt"
    result = _run(FAKEOBJ_EXPLOIT.format(constructor=constructor, marker=marker))
    assert not marker.exists(), f"os.system ran ({result})"
    assert result.get("status") == "error" and result.get("denials"), result


@pytest.mark.parametrize("src", [
    "import numpy as np\nclass A(np.ndarray):\n    pass\nok_made = A((1,), dtype=object, buffer=bytearray(8)) is not None",
    "import numpy as np\nok_made = np.ma.MaskedArray(np.ndarray((1,), dtype=object, buffer=bytearray(8))) is not None",
    "import numpy as np\nok_made = np.ndarray((2,), dtype=[('a', 'i8'), ('b', 'O')], buffer=bytearray(32)) is not None",
    "import numpy as np\nok_made = np.rec.fromstring(bytes(8), dtype=[('a', 'O')]) is not None",
    "import numpy as np\nok_made = np.rec.array(bytes(8), dtype=[('a', 'O')]) is not None",
    "import numpy as np\nopen('m.bin', 'wb').write(bytes(8))\nok_made = np.memmap('m.bin', dtype=object, mode='r+') is not None",
    "import numpy as np\no = np.empty(1, dtype=object)\nok_made = np.char.chararray((8,), buffer=o) is not None",
    "import numpy as np\nclass A(np.ndarray):\n    pass\nok_made = A((1,), dtype=np.int64, buffer=np.empty(1, dtype=object)) is not None",
    "import numpy as np\nclass A(np.recarray):\n    pass\nok_made = A((1,), dtype=[('a', 'O')], buf=bytearray(8)) is not None",
])
def test_object_dtype_over_buffer_variants(src):
    result = _run(src)
    assert not result.get("ok_made"), result


@pytest.mark.parametrize("src", [
    "import numpy as np\nnp.zeros(1, np.int64).view(object)",
    "import numpy as np\nnp.frombuffer(bytearray(8), dtype=object)",
    "import numpy as np\nnp.zeros(1, np.int64).getfield(np.dtype('O'), 0)",
    "import numpy as np\nnp.zeros(1, dtype=[('a', 'i8')]).view([('a', 'O')])",
    "import numpy as np\nnp.lib.stride_tricks.as_strided(np.zeros(1), shape=(2,), strides=(10**9,))",
    "import numpy as np\nnp.zeros(1).ctypes",
])
def test_numpy_raw_memory_routes_stay_closed(src):
    result = _run(src)
    assert result.get("status") == "error", result


FAKEOBJ_VIA_INT_VIEW = """\
import numpy as np, json
slots = np.empty(1, dtype=object)
ints = {view}
def fakeobj(addr):
    if hasattr(ints, 'cast'):
        ints[0:8] = addr.to_bytes(8, 'little')
    else:
        ints[0] = addr
    o = slots[0]
    return o
def p64(n):
    return n.to_bytes(8, 'little')
fake = p64(1 << 40) + p64(id(bytearray)) + p64(1 << 62) + p64((1 << 62) + 1) + p64(0) + p64(0) + p64(0)
mem = fakeobj(id(fake) + 32)
def read64(addr):
    return int.from_bytes(mem[addr:addr + 8], 'little')
real_builtins = fakeobj(read64(id(json.dumps) + 24))
real_builtins['exec']("import sandbox_kernel.confine as c\\nc._FS.set(None)\\nimport os\\nos.system('echo PWNED > {marker}')", {{}})
"""


@pytest.mark.parametrize("view", [
    "np.ndarray((1,), dtype=np.int64, buffer=slots)",
    "np.ndarray((1,), dtype=np.uint64, buffer=slots.data)",
    "slots.data.cast('B')",
])
def test_int_view_over_object_array_is_refused(tmp_path, view):
    marker = tmp_path / "intview.txt"
    result = _run(FAKEOBJ_VIA_INT_VIEW.format(view=view, marker=marker))
    assert not marker.exists(), f"os.system ran ({result})"
    assert result.get("status") == "error", result


def test_frombuffer_over_object_array_is_refused():
    result = _run("import numpy as np\no = np.empty(1, dtype=object)\nok_made = int(np.frombuffer(o, dtype=np.int64)[0]) != 0")
    assert not result.get("ok_made"), result


ARRAY_INTERFACE_VIA_DICT = """\
import numpy as np, math
class K:
    pass
o = K()
o.__dict__[{key}] = {{'data': (id(math.tau) + 16, False), 'shape': (1,), 'typestr': '<f8', 'version': 3}}
v = np.asarray(o)
v[0] = 3.0
ok_made = math.tau == 3.0
"""


@pytest.mark.parametrize("key", ["'__array_' + 'interface__'", "'__array_interface__'"])
def test_array_interface_through_instance_dict(key):
    result = _run(ARRAY_INTERFACE_VIA_DICT.format(key=key))
    assert not result.get("ok_made"), f"math.tau was overwritten through numpy ({result})"


def test_array_interface_through_a_protocol_class_instance():
    """Protocol classes are left without the guard descriptors (typing counts every class attribute as a
    protocol member); one made instantiable must not hand out its instances' __dict__."""
    src = ARRAY_INTERFACE_VIA_DICT.replace(
        "class K:\n    pass\n", "import typing\nclass K(typing.Protocol):\n    pass\n"
        "K._is_protocol = False\nK.__init__ = lambda self: None\n").format(key="'__array_interface__'")
    result = _run(src)
    assert not result.get("ok_made"), f"math.tau was overwritten through numpy ({result})"
    assert result.get("status") == "error", result


def test_objects_with_array_protocols_still_convert():
    result = _run("import numpy as np\nclass V:\n    def __init__(self):\n        self.x = [1.0, 2.0]\n"
                  "    def __array__(self, dtype=None, copy=None):\n        return np.array(self.x)\n"
                  "class A(np.ndarray):\n    pass\n"
                  "a = np.zeros(2).view(A)\n"
                  "ok_made = (np.asarray(V()) + 1).tolist() == [2.0, 3.0] and isinstance(a, np.ndarray) "
                  "and type(np.asarray(a)) is np.ndarray and np.ndarray((2,), buffer=bytearray(16)).sum() == 0")
    assert result.get("ok_made"), result


# --- Issue 10, finding 1: a raw protocol planted in a *function's* __dict__ ---------------------------------
# The "absent" descriptors sat on the cell's classes and on library classes with attribute hooks; a
# function's __dict__ was nobody's: functools.update_wrapper(f, w) copies w.__dict__ (the cell's own
# instance, whose __dict__ it may read and fill) into f.__dict__, and np.asarray(f) views any address.
# The sink now sits on `object` itself: every lookup meets the "absent" descriptor before any instance
# dict, whatever the type (function, partial, library instance, class, module).


PLANTED_IN_A_FUNCTION = """\
import functools, json, math, numpy as np
class W:
    pass
def view(addr, n):
    w = W()
    w.__dict__['__array_interface__'] = {'shape': (n,), 'typestr': '<u8', 'data': (addr, False), 'version': 3}
    def f():
        pass
    functools.update_wrapper(f, w)
    return np.asarray(f)
made = False
try:
    t = view(id(math.tau) + 16, 1)
    made = t.dtype == np.uint64
except Exception:
    pass
"""


def test_raw_protocol_planted_in_a_function_is_absent():
    assert_no_raw_view(PLANTED_IN_A_FUNCTION, "numpy viewed raw memory through a function's __dict__")


def test_raw_protocol_planted_in_a_function_is_not_a_full_escape(tmp_path):
    assert_no_full_escape(PLANTED_IN_A_FUNCTION, tmp_path)


# --- Issue 10 (found while fixing finding 1): the buffer protocol written through -----------------------
# An object array exports its storage (PyObject pointers) as a writable buffer. Every C consumer that
# writes into a buffer, io.BytesIO.readinto first, then wrote the cell's bytes over those pointers:
# slots[0] became any address (fakeobj), with no numpy constructor involved. numpy's buffer export now
# refuses byte-level writable access to object storage while a cell runs (typed consumers that ask for
# the item format, Cython's object memoryviews, still get it), and exports it read-only otherwise.

FAKEOBJ_VIA_READINTO = """\
import io, json, numpy as np
slots = np.empty(1, dtype=object)
def p64(n):
    return n.to_bytes(8, 'little')
def write_slot(data):
    {writer}
def fakeobj(addr):
    write_slot(p64(addr))
    return slots[0] if slots.dtype.names is None else slots[0][0]
fake = p64(1 << 40) + p64(id(bytearray)) + p64(1 << 62) + p64((1 << 62) + 1) + p64(0) + p64(0) + p64(0)
mem = fakeobj(id(fake) + 32)
def read64(addr):
    return int.from_bytes(mem[addr:addr + 8], 'little')
real_builtins = fakeobj(read64(id(json.dumps) + 24))
real_builtins['exec']("import sandbox_kernel.confine as c\\nc._FS.set(None)\\nimport os\\nos.system('echo PWNED > {marker}')", {{}})
"""

BUFFER_WRITERS = {
    "bytesio_readinto": "io.BytesIO(data).readinto(slots)",
    "bytesio_readinto_of_a_view": "io.BytesIO(data).readinto(slots[:])",
    "file_readinto": "open('d.bin', 'wb').write(data)\n    with open('d.bin', 'rb') as f:\n        f.readinto(slots)",
    "file_readinto_unbuffered": "open('d.bin', 'wb').write(data)\n    with open('d.bin', 'rb', buffering=0) as f:\n        f.readinto(slots)",
    "structured_object_field": "global slots\n    slots = np.zeros(1, dtype=[('a', 'O')])\n    io.BytesIO(data).readinto(slots)",
}


@pytest.mark.parametrize("writer", sorted(BUFFER_WRITERS))
def test_buffer_writers_cannot_forge_objects(tmp_path, writer):
    marker = tmp_path / "readinto.txt"
    result = _run(FAKEOBJ_VIA_READINTO.format(writer=BUFFER_WRITERS[writer], marker=marker))
    assert not marker.exists(), f"os.system ran ({result})"
    assert result.get("status") == "error" and result.get("denials"), result


def test_buffers_of_plain_arrays_still_work():
    result = _run("import io, numpy as np\na = np.zeros(2, dtype=np.uint8)\nio.BytesIO(b'\\x01\\x02').readinto(a)\n"
                  "b = np.empty(2, dtype=object)\nb[:] = [1, 'x']\nimport pandas as pd\n"
                  "s = pd.Series(['a', None, 'b'], dtype=object)\n"
                  "ok_made = a.tolist() == [1, 2] and bytes(np.arange(3, dtype=np.uint8)) == b'\\x00\\x01\\x02' "
                  "and s.isna().tolist() == [False, True, False] and s.str.upper().tolist()[0] == 'A' "
                  "and b.tolist() == [1, 'x']")
    assert result.get("ok_made"), result


# --- Issue 10: the generated sink test: every granted type x every planting route ends in "absent" ----------
# Each case plants numpy's __array_interface__ by one route into one kind of object, then converts the
# object with np.asarray. The interface names a live bytes object read-only (harmless even where the
# sink failed), so the cases run in the test's own process. "viewed" means numpy built a uint8 view of
# those bytes: the planted dict answered. Routes that the gates refuse count as absent too.

SINK_TYPES = {
    "cell_instance": "class T:\n    pass\nobj = T()",
    "cell_instance_with_slots_and_dict": "class T:\n    __slots__ = ('__dict__', 'x')\nobj = T()",
    "cell_function": "def obj():\n    pass",
    "lambda": "obj = lambda: None",
    "partial": "obj = functools.partial(print)",
    "cell_class": "class obj:\n    pass",
    "cell_dataclass": "@dataclasses.dataclass\nclass T:\n    x: int = 0\nobj = T()",
    "cell_exception": "class T(Exception):\n    pass\nobj = T()",
    "cell_enum_member": "class T(enum.Enum):\n    A = 1\nobj = T.A",
    "cell_subclass_of_a_library_class": "class T(json.JSONEncoder):\n    pass\nobj = T()",
    "cell_subclass_of_ndarray": "class T(np.ndarray):\n    pass\nobj = np.zeros(1).view(T)",
    "cell_class_with_getattr": "class T:\n    def __getattr__(self, name):\n        return self.__dict__.get('stash', {}).get(name)\nobj = T()",
    "library_instance": "obj = json.JSONEncoder()",
    "library_ordered_dict": "obj = collections.OrderedDict(a=1)",
    "library_string_io": "obj = io.StringIO()",
    "library_context_manager": "obj = contextlib.nullcontext()",
    "pandas_series": "obj = pd.Series([1.0])",
    "pandas_dataframe": "obj = pd.DataFrame({'a': [1.0]})",
    "pandas_indexer": "obj = pd.api.indexers.FixedForwardWindowIndexer(window_size=2)",
    "scipy_optimize_result": "obj = scipy.optimize.OptimizeResult(x=1)",
    "numpy_vectorize": "obj = np.vectorize(abs)",
    "plotly_figure": "obj = go.Figure()",
    "module": "obj = json",
    "library_class": "obj = json.JSONEncoder",
    "library_function": "obj = json.dumps",
    # classes a library builds from names the cell chose: none may hold a plain value under the protocols
    "namedtuple_made_by_the_library": "N = collections.namedtuple('N', [key], rename=False)\nobj = N(iface)",
    "namedtuple_renamed_field": "N = collections.namedtuple('N', [key], rename=True)\nobj = N(iface)",
    "enum_made_by_the_library": "obj = enum.Enum('E', {key: 1})",
    "typeddict_made_by_the_library": "TD = typing.TypedDict('TD', {key: dict})\nobj = TD(**{key: iface})",
}

SINK_ROUTES = {
    "direct_dict": "obj.__dict__[key] = iface",
    "setattr": "setattr(obj, key, iface)",
    "object_setattr": "object.__setattr__(obj, key, iface)",
    "update_wrapper": "functools.update_wrapper(obj, carrier)",
    "wraps": "functools.wraps(carrier)(obj)",
    "vars": "vars(obj)[key] = iface",
    "item": "obj[key] = iface",
    "getattr_hook_stash": "obj.__dict__['stash'] = {key: iface}",
    "copy": "obj.__dict__[key] = iface\nobj = copy.copy(obj)",
    "deepcopy": "obj.__dict__[key] = iface\nobj = copy.deepcopy(obj)",
    "copy_of_a_carrier_into_a_library_state": "state = copy.copy(carrier).__dict__\nobj.__dict__.update(state)",
    "setstate": "obj.__setstate__({key: iface})",
    "pandas_apply_from_the_class": "pd.Series.apply(obj, '__setattr__', args=(key, iface))",
    "pandas_agg_from_the_class": "pd.Series.agg(obj, '__setattr__', key, iface)",
    "pandas_indexer_kwargs": "obj = pd.api.indexers.BaseIndexer(**{key: iface})",
    "methodcaller": "operator.methodcaller('__setattr__', key, iface)(obj)",
    "series_label": "obj = pd.Series([iface], index=[key], dtype=object)",
    "optimize_result_item": "obj = scipy.optimize.OptimizeResult({key: iface})",
}

SINK_PRELUDE = """\
import collections, contextlib, copy, dataclasses, enum, functools, io, json, operator, typing
import numpy as np, pandas as pd, scipy.optimize, plotly.graph_objects as go
payload = b'ABCDEFGH'
key = '__array_' + 'interface__'
iface = {'shape': (8,), 'typestr': '|u1', 'data': (id(payload) + 32, True), 'version': 3}
class Carrier:
    pass
carrier = Carrier()
carrier.__dict__[key] = iface
"""

SINK_CASE = """\
obj = None
try:
{setup}
except Exception:
    pass
try:
{route}
except Exception:
    pass
viewed = False
try:
    arr = np.asarray(obj)
    viewed = arr.dtype == np.uint8 and arr.shape == (8,) and bytes(arr) == payload
except Exception:
    pass
"""


def _indent(source):
    return "\n".join("    " + line for line in source.splitlines())


@pytest.fixture(scope="module")
def sink_sandbox(tmp_path_factory):
    box = Sandbox(tmp_path_factory.mktemp("sink") / "work")
    assert box.run(SINK_PRELUDE).ok
    return box


@pytest.mark.parametrize("route", sorted(SINK_ROUTES))
@pytest.mark.parametrize("kind", sorted(SINK_TYPES))
def test_planted_raw_protocols_are_absent(sink_sandbox, kind, route):
    sink_sandbox.ns.pop("viewed", None)
    sink_sandbox.run(SINK_CASE.format(setup=_indent(SINK_TYPES[kind]), route=_indent(SINK_ROUTES[route])))
    assert sink_sandbox.ns.get("viewed") is False, f"numpy answered a planted interface: {kind} x {route}"


def test_the_sink_grid_covers_routes_that_plant():
    """The grid is not vacuous: planting itself succeeds on many cases (the key is in the object's own
    dict), and numpy still answers "absent"."""
    assert len(SINK_TYPES) * len(SINK_ROUTES) >= 500


def test_planted_keys_do_land_and_are_still_absent(sink_sandbox):
    r = sink_sandbox.run("def f():\n    pass\nfunctools.update_wrapper(f, carrier)\nw = Carrier()\nw.__dict__[key] = iface\n"
                         "print(key in w.__dict__, np.asarray(f).dtype, np.asarray(w).dtype, np.asarray(carrier).dtype)")
    assert r.stdout == "True object object object\n", r


def test_classes_that_define_the_protocols_are_the_listed_providers():
    """Only numpy's arrays and scalars, and two scipy result classes over their own C++ buffers
    (cKDTree's coo_entries and ordered_pairs; a cell cannot make one without its __init__), define the
    raw protocols (a class's own definition is found before the sink); each does so with a data
    descriptor; DummyArray is the one instance-dict provider."""
    import numpy as np
    import pandas  # noqa: F401
    import scipy.optimize  # noqa: F401
    import scipy.spatial  # noqa: F401
    import plotly.graph_objects  # noqa: F401
    from sandbox_kernel import gates as gates_module
    defining = set()
    pending, seen = [object], set()
    while pending:
        cls = pending.pop()
        for sub in type.__subclasses__(cls) if cls is not type else []:
            if sub not in seen:
                seen.add(sub)
                pending.append(sub)
    for cls in seen:
        namespace = type.__dict__["__dict__"].__get__(cls)
        for name in ("__array_interface__", "__array_struct__"):
            value = namespace.get(name)
            if value is None or value is gates_module._NO_RAW_ARRAY:
                continue
            defining.add(f"{cls.__module__}.{cls.__qualname__}.{name}")
            assert hasattr(type(value), "__set__") or hasattr(type(value), "__delete__"), \
                f"{cls.__qualname__}.{name} is not a data descriptor: {value!r}"
    assert defining == {"numpy.ndarray.__array_interface__", "numpy.ndarray.__array_struct__",
                        "numpy.generic.__array_interface__", "numpy.generic.__array_struct__",
                        "scipy.spatial._ckdtree.coo_entries.__array_interface__",
                        "scipy.spatial._ckdtree.ordered_pairs.__array_interface__"}, defining
    dummy = np.lib._stride_tricks_impl.DummyArray
    assert np.lib.stride_tricks.sliding_window_view(np.arange(4), 2).tolist() == [[0, 1], [1, 2], [2, 3]]
    obj = dummy({"shape": (1,), "typestr": "<f8", "data": (0, True), "version": 3})
    assert obj.__array_interface__["shape"] == (1,)


NO_EXTENSION_CHILD = """\
import json, sys, tempfile
sys.modules['sandbox_kernel._numpyguard'] = None     # as if the C extension had not been built
import os; os.environ['SANDBOX_KERNEL_PYTHON_GUARDS'] = '1'   # the operator accepts the fallbacks (engine.py)
sys.modules['sandbox_kernel._fastgates'] = None
from sandbox_kernel import guards
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
assert guards._numpyguard is None and not guards.BUFFERS_CHECKED_IN_C
eng = Engine(PRESETS['data-science'], workdir=tempfile.mkdtemp())
report = {}
eng.run_cell(sys.argv[1], emit=lambda e: None)
for case in json.loads(sys.argv[2]):
    eng.namespace.pop('viewed', None)
    eng.run_cell(case, emit=lambda e: None)
    report[case] = eng.namespace.get('viewed')
done = eng.run_cell("import io, numpy as np\\nslots = np.empty(1, dtype=object)\\n"
                    "io.BytesIO((id(b'x')).to_bytes(8, 'little')).readinto(slots)", emit=lambda e: None)
report['readinto'] = (done['error'] or {}).get('ename')
import numpy as np
report['sliding_window_view'] = np.lib.stride_tricks.sliding_window_view(np.arange(3), 2).tolist()
print(json.dumps(report))
"""


def test_the_python_sink_answers_the_same_without_the_extension():
    """Without _numpyguard the sink on `object` is the Python descriptor (installed through the type's
    dict), and readinto refuses object arrays itself."""
    import json
    import sys as _sys
    from childcell import REPO
    cases = [SINK_CASE.format(setup=_indent(SINK_TYPES[kind]), route=_indent(SINK_ROUTES[route]))
             for kind, route in [("cell_function", "update_wrapper"), ("partial", "update_wrapper"),
                                 ("lambda", "wraps"), ("library_ordered_dict", "pandas_apply_from_the_class"),
                                 ("library_instance", "pandas_indexer_kwargs"), ("cell_instance", "direct_dict"),
                                 ("module", "setattr"), ("cell_class", "setattr")]]
    out = subprocess.run([_sys.executable, "-c", NO_EXTENSION_CHILD, SINK_PRELUDE, json.dumps(cases)],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report.pop("readinto") == "CallDenied", report
    assert report.pop("sliding_window_view") == [[0, 1], [1, 2]], report
    assert set(report.values()) == {False}, report


# ====================================================================================================
# From review round 8: against the mechanisms of the second session
# (the C fast paths, the per-function own-instance flag, the stand-ins for numpy arrays, decimal contexts,
# deque and C iterators, the bounded numpy allocator, and the scrubbing of host paths from output).
# ====================================================================================================

# --- 2. numpy's raw array protocol through a cell class's attribute hooks ---------------------------------

RAW_INTERFACE = """\
import numpy as np
b = b"immutable bytes!"
def interface(name):
    if name == "__array_interface__":
        return {{"data": (id(b) + 32, False), "shape": (16,), "typestr": "|u1", "version": 3}}
    raise AttributeError(name)
{cls}
try:
    a = np.asarray(X())
    a[0:9] = np.frombuffer(b"rewritten", dtype=np.uint8)
except Exception:
    pass
ok_made = b[:9] == b"rewritten"
"""


@pytest.mark.parametrize("cls", [
    "class X:\n    def __getattr__(self, name):\n        return interface(name)",
    "class X:\n    def __getattribute__(self, name):\n        return interface(name)",
    "class X:\n    pass\nX.__getattr__ = lambda self, name: interface(name)",
])
def test_attribute_hooks_do_not_answer_numpys_raw_protocols(cls):
    result = run_cell_in_child(RAW_INTERFACE.format(cls=cls), report=("status", "ename"), ns=("ok_made",),
                               hard_exit=True, timeout=30)
    assert result.get("ok_made") is False, result


# --- 3. stand-ins: the raw class through a library function's result --------------------------------------

@pytest.mark.parametrize("raw", [
    # numpy < 2.5: NDArray is a GenericAlias over the raw class (2.5 makes it a TypeAliasType: None)
    "typing.get_origin(np.typing.NDArray)",
    "typing.get_origin(np.ndarray[tuple[int], np.dtype[np.float64]])",
    "np.ndarray[tuple[int], np.dtype[np.float64]]",
])
def test_raw_ndarray_through_typing_get_origin(tmp_path, raw):
    import numpy as np
    if "NDArray" in raw and typing.get_origin(np.typing.NDArray) is None:
        pytest.skip("this numpy's NDArray is a type alias, not a generic alias over ndarray")
    marker = tmp_path / "fakeobj.txt"
    src = FAKEOBJ_EXPLOIT.format(constructor=f"{raw}((1,), dtype=object, buffer=buf)", marker=marker)
    src = src.replace("import numpy as np, json", "import numpy as np, json, typing")
    result = run_cell_in_child(src, report=("status", "ename", "denials"), hard_exit=True, timeout=30)
    assert not marker.exists(), f"os.system ran ({result})"
    assert result.get("status") == "error" and result.get("denials"), result


# --- 10. memoryview: documented as never handed out ---------------------------------------------------------

def test_memoryview_class_is_not_reachable_through_containers(sandbox):
    r = sandbox.run("import numpy as np\n"
            "mv = [t for t in np.ScalarType if t.__name__ == 'memoryview'][0]\n"
            "m = mv(bytearray(b'abcd'))\n")
    assert "m" not in sandbox.ns and not r.ok, r


LIBRARY_ATTRIBUTE_DICT = """\
import numpy as np, math, scipy.optimize
class K(scipy.optimize.OptimizeResult):
    pass
iface = {{'data': (id(math.tau) + 16, False), 'shape': (1,), 'typestr': '<f8', 'version': 3}}
o = {make}
try:
    v = np.asarray(o)
    v[0] = 3.0
except Exception:
    pass
ok_made = math.tau == 3.0
"""


@pytest.mark.parametrize("make", ["scipy.optimize.OptimizeResult({'__array_interface__': iface})",
                                  "K({'__array_interface__': iface})",
                                  "K(__array_interface__=iface)"])
def test_library_attribute_dicts_do_not_answer_numpys_raw_protocols(make):
    """scipy's result objects answer attribute reads from their own dict items, and a cell fills them."""
    result = run_cell_in_child(LIBRARY_ATTRIBUTE_DICT.format(make=make), ns=("ok_made",), hard_exit=True,
                               report=("status", "ename"), timeout=60)
    assert "crashed" not in result and not result.get("ok_made"), f"math.tau was overwritten ({result})"


def test_attribute_hooks_still_answer_everything_else(run):
    r = run("import scipy.optimize\nclass Rec:\n    def __init__(self):\n        self.d = {'a': 1}\n"
            "    def __getattr__(self, name):\n        return self.d.get(name, 0)\n"
            "res = scipy.optimize.OptimizeResult(x=2)\nprint(Rec().a, Rec().zz, res.x)\n")
    assert r.ok and r.stdout == "1 0 2\n", r


# ====================================================================================================
# From review round 9: against the fixes of round 8 (the ndarray
# constructor hook, the wrapping of attribute hooks for numpy's raw protocols, the charged builtins and size
# estimates, the never-rebound parameter analysis).
# ====================================================================================================

# --- 1. pandas' Series.__getattr__ answers numpy's raw protocol from an index label -------------------------

SERIES_RAW_INTERFACE = """\
import numpy as np, math, pandas as pd
iface = {{'data': (id(math.tau) + 16, False), 'shape': (1,), 'typestr': '<f8', 'version': 3}}
o = {make}
try:
    v = np.asarray(o)
    v[0] = 3.0
except Exception:
    pass
ok_made = math.tau == 3.0
"""


@pytest.mark.parametrize("make", [
    "pd.Series([iface], index=['__array_interface__'], dtype=object)",
    "pd.Series({'__array_interface__': iface})",
])
def test_series_labels_do_not_answer_numpys_raw_protocols(make):
    result = run_cell_in_child(SERIES_RAW_INTERFACE.format(make=make), ns=("ok_made",), hard_exit=True,
                               report=("status", "ename"), timeout=60)
    assert "crashed" not in result and result.get("ok_made") is False, f"math.tau was overwritten ({result})"


SERIES_ESCAPE = """\
import numpy as np, json, pandas as pd
def view(addr, n=1):
    iface = {{'data': (addr, False), 'shape': (n,), 'typestr': '<u8', 'version': 3}}
    return np.asarray(pd.Series([iface], index=['__array_interface__'], dtype=object))
L = [None]
items = int(view(id(L) + 24)[0])
b = int(view(id(json.dumps) + 24)[0])      # a Python function's func_builtins: the real builtins dict
view(b)[0] += 1000
view(items)[0] = b
L[0]['exec']("import sandbox_kernel.confine as c\\nc._FS.set(None)\\nimport os\\nos.system('echo PWNED > {marker}')", {{}})
"""


def test_series_raw_interface_is_not_a_full_escape(tmp_path):
    marker = tmp_path / "pwned.txt"
    result = run_cell_in_child(SERIES_ESCAPE.format(marker=marker), hard_exit=True, timeout=60)
    assert not marker.exists(), f"os.system ran ({result})"
    assert result.get("status") == "error", result


# --- 2. scipy.odr's Data/Model/Output answer attribute reads from their `meta` dict --------------------------

ODR_RAW_INTERFACE = """\
import numpy as np, math, scipy.odr as odr
iface = {{'data': (id(math.tau) + 16, False), 'shape': (1,), 'typestr': '<f8', 'version': 3}}
{make}
try:
    v = np.asarray(o)
    v[0] = 3.0
except Exception:
    pass
ok_made = math.tau == 3.0
"""


@pytest.mark.parametrize("make", [
    "o = odr.Data([1.0], meta={'__array_interface__': iface})",
    "o = odr.Data([1.0])\no.set_meta(**{'__array_interface__': iface})",
    "o = odr.Model(abs, meta={'__array_interface__': iface})",
])
def test_odr_meta_does_not_answer_numpys_raw_protocols(make):
    result = run_cell_in_child(ODR_RAW_INTERFACE.format(make=make), ns=("ok_made",), hard_exit=True,
                               report=("status", "ename"), timeout=60)
    assert "crashed" not in result and result.get("ok_made") is False, f"math.tau was overwritten ({result})"


# --- 3. the constructor check compares dtype.hasobject only: a structured int field over an object slot ----

STRUCT_OVER_SLOTS_ESCAPE = """\
import numpy as np, json
slots = np.array([None, None], dtype=object)
x = {make}
def fakeobj(addr):
    x['a'] = addr          # an int field laid over slots[0]'s PyObject pointer
    o = slots[0]
    x['a'] = 0
    return o
def p64(n):
    return n.to_bytes(8, 'little')
fake = p64(1 << 40) + p64(id(bytearray)) + p64(1 << 62) + p64((1 << 62) + 1) + p64(0) + p64(0) + p64(0)
mem = fakeobj(id(fake) + 32)
def read64(addr):
    return int.from_bytes(mem[addr:addr + 8], 'little')
real_builtins = fakeobj(read64(id(json.dumps) + 24))
real_builtins['exec']("import sandbox_kernel.confine as c\\nc._FS.set(None)\\nimport os\\nos.system('echo PWNED > {marker}')", {{}})
"""


@pytest.mark.parametrize("make", [
    "np.ndarray((1,), dtype=[('a', 'i8'), ('b', 'O')], buffer=slots)",
    "np.recarray((1,), dtype=[('a', 'i8'), ('b', 'O')], buf=slots)",
])
def test_mixed_structured_dtype_over_object_storage_is_refused(tmp_path, make):
    marker = tmp_path / "pwned.txt"
    result = run_cell_in_child(STRUCT_OVER_SLOTS_ESCAPE.format(make=make, marker=marker), hard_exit=True,
                               report=("status", "ename", "denials"), timeout=60)
    assert not marker.exists(), f"os.system ran ({result})"
    assert result.get("status") == "error" and result.get("denials"), result


def test_misaligned_object_view_over_object_storage_is_refused():
    result = run_cell_in_child("import numpy as np\nslots = np.array([None, None], dtype=object)\n"
                               "x = np.ndarray((1,), dtype=object, buffer=slots, offset=4)\nrepr(x[0])\n",
                               report=("status", "ename", "denials"), timeout=60)
    assert "crashed" not in result, result
    assert result.get("status") == "error" and result.get("denials"), result


# ====================================================================================================
# From review round 10: numpy's raw-memory routes that do not pass
# through a constructor, and the mechanisms that charge work done in C (charged/_charging, _estimated_length,
# the consumer guards).
# ====================================================================================================

# --- 1. arr.strides = ... re-lays an existing structured (int, object) array over its own bytes ------------
# The constructor hook (_numpyguard.c) checks arrays when they are made; assigning `strides` to an array
# the cell already holds is not a construction. numpy only checks that the new strides stay inside the
# buffer. With dtype [('a','i8'),('b','O')] (itemsize 16) and strides (8,), element 1's object field 'b'
# lies over element 1's original int field 'a': any address the cell writes there becomes an object.

FAKEOBJ = """\
import numpy as np, math, json
def fakeobj(addr):
    s = np.zeros(2, dtype=[('a', 'i8'), ('b', 'O')])
    s['a'][1] = addr
    s.strides = (8,)
    return s[1]['b']
# a fake bytearray (refcnt, type, size, alloc, bytes=0, start=0, exports) inside a bytes object's data
fields = (1 << 40, id(bytearray), 1 << 62, 1 << 62, 0, 0, 0)
payload = b''.join(v.to_bytes(8, 'little') for v in fields)
made = False
try:
    mem = fakeobj(id(payload) + 32)   # all of the process's memory, readable and writable
    made = type(mem) is bytearray and len(mem) > 10**15
except Exception:
    pass
{then}
"""

OVERWRITE_TAU = """\
if made:
    mem[id(math.tau) + 16:id(math.tau) + 24] = (3.0).hex().encode()[:0] + bytes.fromhex('0000000000000840')
ok_made = math.tau == 3.0
"""

FULL_ESCAPE = """\
if made:
    def rd(a):
        return int.from_bytes(mem[a:a + 8], 'little')
    def wr(a, v):
        mem[a:a + 8] = v.to_bytes(8, 'little')
    L = [None]
    b = rd(id(json.dumps) + 24)          # a Python function's func_builtins: the real builtins dict
    wr(b, rd(b) + 1000)
    wr(rd(id(L) + 24), b)
    L[0]['exec']("import sandbox_kernel.confine as c\\nc._FS.set(None)\\nimport os\\nos.system('echo PWNED > {marker}')", {{}})
"""


def test_strides_assignment_does_not_forge_objects():
    result = run_cell_in_child(FAKEOBJ.format(then=OVERWRITE_TAU), ns=("ok_made", "made"), hard_exit=True,
                               report=("status", "ename"), timeout=60)
    assert "crashed" not in result and result.get("ok_made") is False and result.get("made") is False, \
        f"an object was forged over raw memory ({result})"


def test_strides_assignment_is_not_a_full_escape(tmp_path):
    marker = tmp_path / "pwned.txt"
    result = run_cell_in_child(FAKEOBJ.format(then=FULL_ESCAPE.format(marker=marker)), hard_exit=True,
                               report=("status", "ename", "denials"), timeout=60)
    assert not marker.exists(), f"os.system ran ({result})"
    assert result.get("denials"), result   # the cell catches the refusal; it is recorded all the same


MISALIGNED = """\
import numpy as np
a = np.array([1, 2, 3, 4], dtype=object)
try:
    {how}
except Exception:
    pass
del a   # deallocation decrefs through the strides: misaligned pointers
"""


@pytest.mark.parametrize("how", ["a.strides = (4,)", "setattr(a, 'strides', (4,))"])
def test_misaligned_object_strides_cannot_crash_the_process(how):
    result = run_cell_in_child(MISALIGNED.format(how=how), report=("status", "ename"), timeout=60)
    assert "crashed" not in result, f"the process crashed ({result})"


def test_strides_assignment_on_plain_arrays_still_works(run):
    # a fix must keep honest stride writes on arrays without objects working (or refuse them all cleanly)
    r = run("import numpy as np\na = np.arange(6, dtype=np.int64)\nb = a[::2]\nprint(b.sum())")
    assert r.ok and r.stdout == "6\n", r


@pytest.mark.parametrize("src", [
    "import numpy as np\na = np.ndarray((2,), dtype=object, strides=(4,))\nx = a[1]",
    "import numpy as np\na = np.ndarray((2,), dtype=[('a', 'i8'), ('b', 'O')], strides=(8,))\nx = a[1]",
])
def test_misaligned_object_strides_at_construction_are_refused(src):
    """Custom strides in a constructor, even over the array's own memory, may not straddle pointers."""
    result = run_cell_in_child(src, report=("status", "ename", "returncode"), hard_exit=True, timeout=30)
    assert "crashed" not in result and result.get("ename") == "CallDenied", result


# ====================================================================================================
# From review round 11: the `x in c` gate and other C consumers,
# numpy's raw protocols answered from a library instance's __dict__, and the Python fallbacks used when the C
# extensions are missing.
# ====================================================================================================

# --- 1. copy.copy fills a library instance's __dict__ with '__array_interface__' ---------------------------
# copy.copy(x) asks the *instance* for __reduce_ex__, so a cell class's __getattribute__ answers it with
# (json.JSONEncoder, (), {'__array_interface__': iface}); copy._reconstruct then makes a JSONEncoder and
# does y.__dict__.update(state). JSONEncoder has no __getattr__ (the scan never touches it) and no
# "absent" descriptor, so numpy reads the cell's dict from the instance and views any address, writable.

RAW_VIEW = """\
import copy, json, math, numpy as np
def view(addr, n):
    iface = {'shape': (n,), 'typestr': '<u8', 'data': (addr, False), 'version': 3}
    class R:
        def __getattribute__(self, name):
            if name == '__reduce_ex__':
                return lambda protocol: (json.JSONEncoder, (), {'__array_interface__': iface})
            return object.__getattribute__(self, name)
    return np.asarray(copy.copy(R()))
made = False
try:
    t = view(id(math.tau) + 16, 1)
    made = True
except Exception:
    pass
"""

# Was: R11-1 (full escape): a cell class's __getattribute__ answers copy.copy's '__reduce_ex__' with
# (json.JSONEncoder, (), {'__array_interface__': iface}); copy._reconstruct puts the state in a library
# instance's __dict__ and np.asarray views any address


def test_copy_reduction_does_not_plant_raw_protocols_in_library_instances():
    assert_no_raw_view(RAW_VIEW, "numpy viewed raw memory through a copied library instance")


def test_copy_reduction_is_not_a_full_escape(tmp_path):
    assert_no_full_escape(RAW_VIEW, tmp_path)


# --- 2. without _numpyguard (a missing or stale build) a generic alias calls the raw ndarray ---------------
# The constructor hook (R8-3) is what refuses np.typing.NDArray[...](shape, dtype=object, buffer=bytes):
# calling a generic alias calls its __origin__ (the raw np.ndarray) from C, past the stand-in and the
# call guards. guards.py falls back to "the stand-ins are all there is" when the extension is missing.

NO_C_EXTENSIONS = """\
import os
from sandbox_kernel import gates, guards, limits
os.environ['SANDBOX_KERNEL_PYTHON_GUARDS'] = '1'   # the operator accepts the fallbacks (engine.py)
gates._fastgates = None
guards._numpyguard = None
limits._numpyguard = None
"""

ALIAS_FAKEOBJ = """\
import numpy as np, math
fields = (1 << 40, id(bytearray), 1 << 62, 1 << 62, 0, 0, 0)
payload = b''.join(v.to_bytes(8, 'little') for v in fields)
made = False
try:
    x = np.typing.NDArray[np.int64]((1,), dtype=object, buffer=(id(payload) + 32).to_bytes(8, 'little'))
    mem = x[0]
    made = type(mem) is bytearray and len(mem) > 10**15
    mem[id(math.tau) + 16:id(math.tau) + 24] = bytes.fromhex('0000000000000840')
except Exception:
    pass
ok_made = math.tau == 3.0
"""


def test_generic_alias_construction_is_checked_without_the_c_extension():
    result = run_cell_in_child(ALIAS_FAKEOBJ, probe=NO_C_EXTENSIONS, ns=("ok_made", "made"), hard_exit=True,
                               report=("status", "ename"), timeout=60)
    assert "crashed" not in result and result.get("ok_made") is False and result.get("made") is False, result


def test_generic_alias_construction_is_checked_with_the_c_extension():
    result = run_cell_in_child(ALIAS_FAKEOBJ, ns=("ok_made", "made"), hard_exit=True,
                               report=("status", "ename"), timeout=60)
    assert "crashed" not in result and result.get("ok_made") is False and result.get("made") is False, result


# --- 4. what held: strides writes through every assignment form -------------------------------------------

STRIDES_ROUTES = """\
import numpy as np, operator
s = np.zeros(2, dtype=[('a', 'i8'), ('b', 'O')])
class C:
    def __enter__(self): return (8,)
    def __exit__(self, *a): return True
tries = [
    lambda: [0 for s.strides in [(8,)]],
    lambda: setattr(s, 'strides', (8,)),
    lambda: np.ndarray.strides.__set__(s, (8,)),
    lambda: s.__setattr__('strides', (8,)),
    lambda: object.__setattr__(s, 'strides', (8,)),
    lambda: s.view(np.recarray).__setattr__('strides', (8,)),
]
for f in tries:
    try:
        f()
    except Exception:
        pass
for s.strides in []:
    pass
try:
    with C() as s.strides:
        pass
except Exception:
    pass
moved = s.strides != (16,)
"""


def test_strides_cannot_be_written_by_any_assignment_form():
    result = run_cell_in_child(STRIDES_ROUTES, ns=("moved",), hard_exit=True, report=("status", "ename"), timeout=60)
    assert "crashed" not in result and result.get("moved") is False, result


# ====================================================================================================
# From review round 12: copy.deepcopy's memo, and neighbours of
# earlier escapes.
# ====================================================================================================

# --- 1. deepcopy's memo is the cell's: it maps a library object's state keys to '__array_interface__' ------
# _guard_copy checks the top-level copy and the pairs it finds in memo[id(memo)], deepcopy's keep-alive
# list. Both are the cell's: memo[id(memo)] = Sink() (append does nothing, iterates empty) hides every
# nested copy from the check, and memo entries keyed by id() replace what deepcopy returns for any
# object: the interned key 'skipkeys' of a JSONEncoder's __dict__ becomes '__array_interface__' and
# False becomes the cell's interface dict. deepcopy([enc], memo)[0] is a JSONEncoder whose __dict__
# holds the raw protocol; np.asarray views any address, writable.

RAW_VIEW_R12 = """\
import copy, json, math, numpy as np
class Sink:
    def append(self, x):
        pass
    def __iter__(self):
        return iter(())
def view(addr, n):
    iface = {'shape': (n,), 'typestr': '<u8', 'data': (addr, False), 'version': 3}
    memo = {}
    memo[id(memo)] = Sink()
    memo[id('skipkeys')] = '__array_interface__'
    memo[id(False)] = iface
    return np.asarray(copy.deepcopy([json.JSONEncoder()], memo)[0])
made = False
try:
    t = view(id(math.tau) + 16, 1)
    made = t.dtype == np.uint64
except Exception:
    pass
"""

# Was: R12-1 (full escape): copy.deepcopy(x, memo) with the cell's memo: memo[id(memo)] = a no-op sink hides
# nested copies from _guard_copy's pair check, and memo[id('skipkeys')] = '__array_interface__',
# memo[id(False)] = iface rewrite a JSONEncoder's state while it is deep-copied; np.asarray(copy[0]) views
# any address


def test_deepcopy_memo_does_not_plant_raw_protocols_in_library_instances():
    assert_no_raw_view(RAW_VIEW_R12, "numpy viewed raw memory through a deep-copied library instance")


def test_deepcopy_memo_is_not_a_full_escape(tmp_path):
    assert_no_full_escape(RAW_VIEW_R12, tmp_path)


# --- 2. the same without passing a memo: a cell __deepcopy__ earlier in the container gets deepcopy's memo --
# Forcing a fresh memo is not enough: copy.deepcopy([Evil(), enc]) calls Evil.__deepcopy__(memo) (the
# documented, allowed hook) before enc is copied, and it rewrites the memo the same way.

HOOK_VIEW = """\
import copy, json, math, numpy as np
class Sink:
    def append(self, x):
        pass
    def __iter__(self):
        return iter(())
made = False
iface = {'shape': (1,), 'typestr': '<u8', 'data': (id(math.tau) + 16, False), 'version': 3}
class Evil:
    def __deepcopy__(self, memo):
        memo[id(memo)] = Sink()
        memo[id('skipkeys')] = '__array_interface__'
        memo[id(False)] = iface
        return Evil()
try:
    t = np.asarray(copy.deepcopy([Evil(), json.JSONEncoder()])[1])
    made = t.dtype == np.uint64
except Exception:
    pass
"""

# Was: R12-2 (full escape): a cell class's __deepcopy__(memo) runs first in deepcopy([Evil(),
# json.JSONEncoder()]) and rewrites the shared memo (keep-alive list -> sink, id('skipkeys') ->
# '__array_interface__', id(False) -> iface): the encoder's copy carries the raw protocol and np.asarray
# views any address


def test_deepcopy_hook_cannot_rewrite_the_memo_of_a_library_copy():
    assert_no_raw_view(HOOK_VIEW, "numpy viewed raw memory through a deep-copied library instance")


# --- 4. ndarray.resize(refcheck=False) leaves views dangling over freed storage (use after free) ------------
# resize() reallocates an array that owns its memory; refcheck=False skips numpy's "other references"
# check, so a view made before keeps pointing at the freed block. An object array allocated next lands
# in it: the int view now reads and writes its pointers (addrof/fakeobj). A fake bytearray spanning all
# memory, built inside a bytes object, is arbitrary read/write. No constructor is involved (the view
# predates the object array), so _forged_array never sees it; the strides refusal does not apply.

RESIZE_VIEW = """\
import numpy as np, math, json
made = False
try:
    a = np.zeros(1000, dtype=np.int64)
    v = a[:]
    a.resize((10**6,), refcheck=False)
    o = np.empty(1000, dtype=object)
    o[:] = None
    made = bool(v[0] == id(None))
except Exception:
    pass
if made:
    fake = (2**40).to_bytes(8, 'little') + id(bytearray).to_bytes(8, 'little') + (2**62).to_bytes(8, 'little') \\
        + (2**62).to_bytes(8, 'little') + bytes(24)
    v[1] = id(fake) + 32
    mem = o[1]
    def rd(x):
        return int.from_bytes(mem[x:x + 8], 'little')
    def wr(x, val):
        mem[x:x + 8] = val.to_bytes(8, 'little')
    class T:
        def __setitem__(self, i, val):
            wr(id(math.tau) + 16, val)
    t = T()
"""

RESIZE_ESCAPE = """\
if made:
    L = [None]
    b = rd(id(json.dumps) + 24)          # a Python function's func_builtins: the real builtins dict
    wr(b, rd(b) + 1000)
    wr(rd(id(L) + 24), b)
    L[0]['exec']("import sandbox_kernel.confine as c\\nc._FS.set(None)\\nimport os\\nos.system('echo PWNED > MARKER')", {})
"""

# Was: R12-4 (full escape): a = np.zeros(1000, int64); v = a[:]; a.resize(big, refcheck=False) frees a's old
# block under v; np.empty(1000, object) reuses it, so v reads/writes its pointers (addrof/fakeobj); a fake
# bytearray over all memory gives arbitrary read/write


def test_resize_without_refcheck_leaves_no_dangling_view():
    assert_no_raw_view(RESIZE_VIEW, "a dangling view read an object array's pointers")


def test_resize_without_refcheck_is_not_a_full_escape(tmp_path):
    assert_no_full_escape(RESIZE_VIEW, tmp_path, tail=RESIZE_ESCAPE)


# ====================================================================================================================
# Sink: raw memory.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 1 (docs/reviews.md, "Review 1").
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


# From review 2 (docs/reviews.md, "Review 2").
# --- N2-3: numpy's bit generators hand out ctypes -----------------------------------------------------------

BIT_GENERATORS = {
    "pcg64": "np.random.PCG64(1)",
    "mt19937": "np.random.MT19937(1)",
    "default_rng": "np.random.default_rng(1).bit_generator",
}


CTYPES_SYSTEM = """\
import numpy as np
c = {bit_generator}.ctypes
F = type(c.next_uint64)
class D:
    _handle = 0          # dlsym(RTLD_DEFAULT, ...)
system = F(("system", D()))
system(b"id > {marker}")
"""


@pytest.mark.parametrize("bit_generator", sorted(BIT_GENERATORS))
def test_bit_generator_ctypes_is_not_a_full_escape(run, outside, bit_generator):
    marker = outside / f"pwned-by-ctypes-{bit_generator}"
    r = run(CTYPES_SYSTEM.format(bit_generator=BIT_GENERATORS[bit_generator], marker=marker))
    assert not marker.exists(), "a process ran"
    assert not r.ok, r


def test_bit_generator_ctypes_does_not_read_memory(run):
    r = run("import numpy as np\nV = type(np.random.PCG64(1).ctypes.state)\n"
            "refcount_of_one = V.from_address(id(1)).value\n")
    assert not r.ok, r


def test_bit_generator_cffi_is_refused(run):
    r = run("import numpy as np\nhandle = np.random.PCG64(1).cffi\n")
    assert not r.ok, r


@pytest.mark.parametrize("expr", ["np.ma.array([1]).ctypes", "np.matrix([1]).ctypes", "np.zeros(2).T.ctypes"])
def test_array_ctypes_is_refused_on_subclasses_and_views(run, expr):
    r = run(f"import numpy as np\nx = {expr}")
    assert not r.ok and r.error_name == "AttributeDenied", r


BIT_GENERATOR_HANDLE_ROUTES = {
    "attribute": "bg.{name}",
    "getattr": "getattr(bg, '{name}')",
    "attrgetter": "operator.attrgetter('{name}')(bg)",
    "from_the_class": "type(bg).{name}.__get__(bg)",
    "match": "match bg:\n    case np.random.PCG64({name}=found):\n        pass",
}


@pytest.mark.parametrize("name", ["ctypes", "cffi", "capsule"])
@pytest.mark.parametrize("route", sorted(BIT_GENERATOR_HANDLE_ROUTES))
def test_bit_generator_handles_are_refused_by_every_route(run, route, name):
    r = run(f"import operator, numpy as np\nbg = np.random.PCG64(1)\n"
            f"{BIT_GENERATOR_HANDLE_ROUTES[route].format(name=name)}\n")
    assert not r.ok and r.error_name == "AttributeDenied", r


def test_type_hands_out_a_class_as_its_dunder_would(run):
    # type(x) answered with the raw class: a lock's class from _thread (x.__class__ is refused the same way)
    r = run("import numpy as np\nlock_class = type(np.random.PCG64(1).lock)\n")
    assert not r.ok and r.error_name == "BuiltinDenied" and "_thread" in r.error_value, r
    r = run("import numpy as np, pandas as pd\nprint(type(1).__name__, type(pd.Series([1])).__name__, "
            "isinstance(np.arange(2), type(np.arange(3))), type(type) is type)\n")
    assert r.ok and r.stdout == "int Series True True\n", r


# From review 4 (docs/reviews.md, "Review 4").
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


# From review 5 (docs/reviews.md, "Review 5").
@pytest.mark.parametrize("cell", [
    "a = np.zeros(2)\nb = np.lib.stride_tricks.as_strided(a, shape=(100000,), strides=(8,))\n",
    "a = np.zeros(2)\na.strides = (10**6,)\n",
    "a = np.ndarray((10,), dtype=float, buffer=b'x' * 16)\n",
    "v = np.searchsorted(np.arange(3.), 1.5, sorter=np.array([0, 10**6, 2]))\n",
    "from scipy.linalg import blas\nv = blas.dcopy(np.zeros(2), np.zeros(1000), n=1000)\n",
    "a = np.zeros(100000)\nb = a[:]\na.resize(10**7, refcheck=False)\n",
    "import pandas as pd\nv = pd.core.array_algos.take.take_nd(np.zeros(2), np.array([10**6]), allow_fill=True)\n",
])
def test_numpy_memory_routes_are_refused(cell):
    result = run_reporting("import numpy as np\n" + cell)
    assert "crashed" not in result, result
    assert result["status"] == "error", result


# --- N10-11: scipy.ndimage.label writes its output whether or not it is writeable ----------------------------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-11: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# The index-array sink hands out scipy's integer arrays as read-only views (Gates._index_arrays_read_only) and keeps
# them read-only (N9-1: setflags). numpy's ufuncs, copyto/place/putmask/put_along_axis, the random shufflers and 19
# other ndimage functions refuse a read-only output; ndimage.label(input, output=A.indices) does not (its C code
# writes the labels into whatever array it is given). Labels are 1..k in input order, so the cell chooses each
# index: A @ x then reads x's word k (a 20,000-row matrix reads 160 KB past an array in one product) and
# A.toarray(out=) adds a chosen double at word k. Adding to a neighbouring bytes object's header (denormal + denormal
# is exact integer addition; + 2.0 turns its size into 2**62) makes it a bytearray over all memory.

NDIMAGE_LABEL = '''
import numpy as np
from scipy import ndimage, sparse
bb = np.lib.array_utils.byte_bounds
def labelled(k, value=1.0):
    """a csr_array of k rows whose row i holds (column i + 1, value) and (column 0, 0.0): the column indices are
    written by ndimage.label (labels 1..k, zeros between) into the sandbox's read-only view of its indices"""
    L = 2 * k
    data = np.zeros(L)
    data[::2] = value
    A = sparse.csr_array((data, np.zeros(L, dtype=np.int64), np.arange(0, L + 1, 2)), shape=(k, 8000))
    inp = np.zeros(L, dtype=np.int64)
    inp[::2] = 1
    ndimage.label(inp, output=A.indices)
    return A
def as_float(word):
    """the double whose addition adds `word` to a word holding a pointer (both denormals: exact integer sums)"""
    value = float(np.array([abs(word)], dtype=np.int64).view(np.float64)[0])
    return value if word >= 0 else -value
out = np.zeros(8000)                          # 64 KB (malloc, below the mmap threshold: the heap's top)
spray = [bytes(60000) for i in range(8)]       # bytes objects laid after it
ours = {id(b): b for b in spray}
K = 20000
words = (labelled(K) @ out).view(np.int64)    # words[i] is out's word i + 1: 96 KB past its 64 KB read
hdr = None
for i in np.nonzero(words == id(bytes))[0]:
    addr = bb(out)[0] + 8 * int(i)                    # the object whose ob_type is word i + 1
    if addr in ours:
        hdr = int(i)                                  # the word of its ob_refcnt
        break
ba = None
if hdr is not None:
    t = hdr + 1                                       # ob_type += id(bytearray) - id(bytes); ob_size += 2.0 (-> 2**62)
    for word, value in ((t, as_float(id(bytearray) - id(bytes))), (t + 1, 2.0)):
        L = 2 * word - 1
        data = np.zeros(L)
        data[-1] = value
        A = sparse.csr_array((data, np.zeros(L, dtype=np.int64), np.array([0, L])), shape=(1, 8000))
        inp = np.zeros(L, dtype=np.int64)
        inp[::2] = 1
        ndimage.label(inp, output=A.indices)          # the last entry's column is `word`
        A.toarray(out=out.reshape(1, 8000))             # out[word] += value (and += 0.0 at the words before)
    for b in spray:
        if type(b) is bytearray:
            ba = b
class Obj:
    pass
o = Obj()
typeptr = ba is not None and int.from_bytes(ba[id(o) + 8:id(o) + 16], 'little') == id(Obj)
victim = b'AAAAAAAA-immutable'
if ba is not None:
    ba[id(victim) + 32:id(victim) + 40] = b'PWNED!!!'
written = victim == b'PWNED!!!-immutable'
'''


def test_ndimage_label_does_not_write_read_only_index_arrays():
    result = run_reporting(NDIMAGE_LABEL, ns=("typeptr", "written"), timeout=300)
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["written"], json.dumps(result)


# --- N10-12: LAPACK row interchanges take their pivots unchecked (scipy.linalg.lapack, lu_solve) --------------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-12: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# scipy.linalg.lapack hands out every raw LAPACK wrapper; ?laswp(a, piv) swaps row i of `a` with row piv[i] and
# nothing checks piv against a's rows. With overwrite_a=1 and a Fortran-contiguous 1x1 view of a cell array, one
# call swaps a[0, 0] with the 8 bytes at a + 8 * piv[0] (int32: +-16 GB, which reaches pymalloc's arenas from a
# memory-mapped array): read = swap twice, write = put the word in a[0, 0] and swap once. The high-level
# scipy.linalg.lu_solve((lu, piv), b) passes a cell's piv to ?getrs the same way: piv = [5] returns a heap word,
# piv = [10**6] segfaults. (f2py also ignores the read-only flag: blas.dscal(2.0, ro) doubles a read-only array.)
# numpy's own raw wrappers, numpy.linalg.lapack_lite, check only the arrays' types: sizes and workspace lengths are
# the caller's word.

LASWP = '''
import numpy as np
from scipy.linalg import lapack
bb = np.lib.array_utils.byte_bounds
big = np.zeros(100000)                      # 800 KB: its own memory map, near pymalloc's arenas
a = big[:1].reshape((1, 1), order='F')      # a Fortran-contiguous view that LAPACK works on in place
base = bb(a)[0]
def swap(addr):
    """dlaswp swaps row 0 of `a` with "row" piv[0]: the word at addr, whatever it is (piv is never checked)"""
    lapack.dlaswp(a, np.array([(addr - base) // 8], dtype=np.int32), overwrite_a=1)
def peek(addr):
    swap(addr)
    word = int(a.view(np.int64)[0, 0])
    swap(addr)                              # and back
    return word
def poke(addr, word):
    a.view(np.int64)[0, 0] = word
    swap(addr)
class Obj:
    pass
o = Obj()
typeptr = peek(id(o) + 8) == id(Obj)
victim = b'AAAAAAAA-immutable'
poke(id(victim) + 32, int.from_bytes(b'PWNED!!!', 'little'))
written = victim == b'PWNED!!!-immutable'
'''

LU_SOLVE = '''
import numpy as np
from scipy import linalg
r = linalg.lu_solve((np.eye(1), np.array([5])), np.ones(1))
read = bool(r[0] != 1.0)          # 1.0 is the only honest answer: b's one element swapped with a heap word
'''


def test_laswp_pivots_reach_no_memory():
    result = run_reporting(LASWP, ns=("typeptr", "written"), timeout=120)
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["written"], json.dumps(result)


def test_lu_solve_pivots_read_no_memory():
    result = run_reporting(LU_SOLVE, ns=("read",), timeout=120)
    assert "crashed" not in result, result
    assert not result["read"], json.dumps(result)


LAPACK_LITE = '''
import numpy as np
import numpy.linalg.lapack_lite as ll
# m, n, lda and lwork are the caller's word: LAPACK factors a 300x300 matrix into a 1-element array and uses 19,200
# words of a 1-element workspace (lapack_lite checks the arrays' types only)
r = ll.dgeqrf(300, 300, np.zeros(1), 300, np.zeros(1), np.zeros(1), 300 * 64, 0)
'''


def test_lapack_lite_sizes_write_no_memory():
    result = run_reporting(LAPACK_LITE, timeout=120)
    assert "crashed" not in result, result


# -- review 14, R14-1: numpy's DummyArray made by the cell -----------------------------------------------------------
# The raw-protocol sink trusts a DummyArray's own __dict__ (numpy's as_strided hangs the interface there); the class
# was reachable through sliding_window_view(x, n).base, and a cell made one over any address: memory read and written.

_R14_LIMITS = {"timeout": 20.0, "ticks": 10**8, "memory_mb": 1024}
_DUMMYARRAY_CELL = r'''
import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
D = type(sliding_window_view(np.arange(4.0), 2).base)       # numpy.lib._stride_tricks_impl.DummyArray
def raw(addr, n, typestr='<u1'):
    return np.asarray(D({'data': (addr, False), 'shape': (n,), 'typestr': typestr, 'version': 3}, base=None))
buf = bytearray(b'A' * 16)
hdr = raw(id(buf), 7, '<u8')        # PyByteArrayObject: refcnt, type, size, alloc, ob_bytes, ob_start, exports
mem = raw(int(hdr[5]), 16)          # the bytearray's storage, by address, writable
mem[:5] = np.frombuffer(b'PWNED', np.uint8)
escaped = bytes(buf[:5]) == b'PWNED'
'''




def test_the_cell_cannot_make_a_raw_memory_description():
    result = run_cell_in_child(_DUMMYARRAY_CELL, limits=_R14_LIMITS, ns=("escaped",), report=("status", "ename"),
                               timeout=120, hard_exit=True)
    assert "crashed" not in result and result.get("status") == "error" and not result["escaped"], result


def test_sliding_windows_still_work(run):
    r = run("import numpy as np\nfrom numpy.lib.stride_tricks import sliding_window_view\n"
            "print(sliding_window_view(np.arange(5), 3).sum(axis=1).tolist())")
    assert r.ok and r.stdout == "[3, 6, 9]\n", r
