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
