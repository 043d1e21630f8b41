"""Must-block: raw memory through numpy. An object array laid over a buffer the cell controls is a
'fakeobj' primitive: any address becomes a Python object, a fake bytearray spans the address space, and
the real builtins are one pointer away. Runs in a child process (a mistake here segfaults)."""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child


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

from rawview import assert_no_full_escape, assert_no_raw_view  # noqa: E402

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
    from conftest import Sandbox
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
