"""Must-block, ninth round: against the fixes of round 8 (the ndarray constructor hook, the wrapping of
attribute hooks for numpy's raw protocols, the charged builtins and size estimates, the never-rebound
parameter analysis).

Every test performs the real attack and asserts that it failed and that nothing happened. Tests of
findings that are not fixed are strict xfails whose reason says how the bypass works. Attacks that can
corrupt memory run in a child process.
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child


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


# --- 4. the never-rebound analysis mangles with the enclosing class only: a nested class mangles differently --

NESTED_CLASS_MANGLED_ESCAPE = """\
import collections
def go(_J__m, start, target):
    class J:                       # inside J, '__m' is mangled to '_J__m': the parameter of go
        def set(self, v):
            nonlocal __m
            __m = v
    s = J().set
    s(start)
    s(_J__m._sys)                  # read raw: the entry flag was computed for an O()
    mods = _J__m.modules
    s(mods["sandbox_kernel.confine"])
    s(_J__m._FS)
    _J__m.set(None)
    s(mods["os"])
    fd = _J__m.open(target, _J__m.O_WRONLY | _J__m.O_CREAT, 0o600)
    _J__m.write(fd, b"PWNED")
    _J__m.close(fd)
    return True
class O:
    pass
escaped = go(O(), collections, {target!r})
"""


def test_parameter_rebound_through_a_nested_class_mangling(strict, outside):
    target = outside / "pwned.txt"
    r = strict.run(NESTED_CLASS_MANGLED_ESCAPE.format(target=str(target)))
    assert not target.exists(), "a file was written outside the working directory"
    assert not strict.ns.get("escaped"), r
    assert not r.ok and r.denials, r


@pytest.mark.parametrize("rebind", [
    "    class J:\n        nonlocal __m\n        __m = other\n",
    "    class J:\n        def f(self):\n            nonlocal __m\n            __m = other\n    J().f()\n",
])
def test_nested_class_rebinding_does_not_read_library_privates_raw(sandbox, rebind):
    r = sandbox.run("import pandas as pd\n"
                    "def go(_J__m, other):\n" + rebind +
                    "    return _J__m._mgr\n"
                    "class O:\n    pass\n"
                    "mgr = go(O(), pd.DataFrame({'a': [1]}))\n")
    assert "mgr" not in sandbox.ns, type(sandbox.ns.get("mgr"))
    assert not r.ok and r.denied("attribute"), r
