"""Must-block, eleventh round: the `x in c` gate and other C consumers, numpy's raw protocols answered from
a library instance's __dict__, and the Python fallbacks used when the C extensions are missing.

Every test performs the real attack and asserts that it failed and that nothing happened. Tests of
findings that are not fixed are strict xfails whose reason says how the bypass works. Attacks that can
corrupt memory or hold the process past its limits run in a child process.
"""
from __future__ import annotations

import subprocess

import pytest

from childcell import run_cell_in_child
from rawview import assert_no_full_escape, assert_no_raw_view


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
from sandbox_kernel import gates, guards, limits
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


# --- 3. C consumers still uncharged -------------------------------------------------------------------------
# The `in` gate's fast path (C and Python) treats range as a plain container, but range.__contains__ is
# O(1) only for an exact int: 1.5 in range(10**18) walks the range in C. Others consume iterables in C.

CPU_TIGHT = {"timeout": 1.0, "ticks": 10**7, "memory_mb": 256}
LIMIT_ERRORS = ("TickLimitExceeded", "TimeLimitExceeded", "SizeDenied", "MemoryLimitExceeded")


def _ends_within_limits(source):
    try:
        return run_cell_in_child(source, limits=CPU_TIGHT, rlimits={"RLIMIT_AS": 3 << 30}, timeout=4,
                                 report=("status", "ename"))
    except subprocess.TimeoutExpired:
        return {"hang": True}


@pytest.mark.parametrize("source", [
    "x = 1.5 in range(10**18)",
    "x = [i for i in [1] if 1.5 not in range(10**18)]",
    "x = range(10**18).count(1.5)",
    "x = range(10**18).index(1.5)",
    "x = set().isdisjoint(range(10**18))",
    "x = set().issubset(range(10**18))",
    "import heapq\nx = heapq.nlargest(1, range(10**18))",
    "x = dict.fromkeys(range(10**10))",
    "import collections\nx = collections.Counter(range(10**18))",
    "import array\nx = array.array('q', map(abs, range(10**10)))",
    "x = [*range(10**9)]",
    "a, *b = range(10**9)",
    "x = print(*range(10**9))",
    "x = {*map(abs, range(10**9))}",
    "for a, *b in [range(10**9)]:\n    x = b",
    "x = [b for a, *b in [range(10**9)]]",
])
def test_c_consumers_end_within_limits(source):
    result = _ends_within_limits(source)
    assert result.get("status") == "error" and result.get("ename") in LIMIT_ERRORS, result


def test_in_gate_still_fast_for_int_in_range(run):
    r = run("print(10**17 in range(10**18), 5 not in range(3), 'a' in 'abc')")
    assert r.ok and r.stdout == "True True True\n", r


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


def test_newly_charged_consumers_keep_their_results(run):
    r = run("import heapq, collections, array, copy\n"
            "print(range(10).count(3), range(10).index(4), [1, 2, 1].count(1), 'abca'.index('c'), (1, 2).index(2),"
            " {1}.isdisjoint([2]), {1}.issubset(range(3)), dict.fromkeys('ab', 0), heapq.nlargest(2, [3, 1, 2]),"
            " collections.Counter('aab').most_common(1), array.array('b', [1, 2]).tolist(),"
            " 3 in range(5), 2.0 in range(5), copy.deepcopy({'a': [1]}))")
    assert r.ok, r
    assert r.stdout == ("1 4 2 2 1 True True {'a': 0, 'b': 0} [3, 2] [('a', 2)] [1, 2] True True {'a': [1]}\n"), r
