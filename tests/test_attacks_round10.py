"""Must-block, tenth round: numpy's raw-memory routes that do not pass through a constructor, and the
mechanisms that charge work done in C (charged/_charging, _estimated_length, the consumer guards).

Every test performs the real attack and asserts that it failed and that nothing happened. Tests of
findings that are not fixed are strict xfails whose reason says how the bypass works. Attacks that can
corrupt memory or hold the process past its limits run in a child process.
"""
from __future__ import annotations

import subprocess

import pytest

from childcell import run_cell_in_child


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


# --- 2. the nesting stand-ins (map/filter/zip/enumerate as cells see them) hide their length ------------------
# _estimated_length looks through map/filter/enumerate/zip by `type(it) in (map, filter, enumerate)`; in a
# cell `map` is the nesting stand-in (a subclass), so the estimate is 0 and sum/min/max/any/all/sorted
# are never charged: sum(map(abs, range(10**10))) runs in C past the time limit (level `none`).

CPU_TIGHT = {"timeout": 1.0, "ticks": 10**7, "memory_mb": 256}


def _ends_within_limits(source):
    try:
        return run_cell_in_child(source, limits=CPU_TIGHT, rlimits={"RLIMIT_AS": 3 << 30}, timeout=4,
                                 report=("status", "ename"))
    except subprocess.TimeoutExpired:
        return {"hang": True}


@pytest.mark.parametrize("source", [
    "x = sum(map(abs, range(10**10)))",
    "x = max(enumerate(range(10**10)))",
    "x = sum(filter(None, range(10**10)))",
    "f = min\nx = f(zip(range(10**10)), default=0)",
])
def test_consumers_of_stand_in_iterators_are_charged(source):
    result = _ends_within_limits(source)
    assert result.get("status") == "error" and result.get("ename") in ("TickLimitExceeded", "TimeLimitExceeded",
                                                                       "SizeDenied"), result


# --- 3. C consumers that are not guarded at all ------------------------------------------------------------

def test_containment_in_an_iterator_ends_within_limits():
    result = _ends_within_limits("r = -1 in map(abs, range(10**10))")
    assert result.get("status") == "error", result


@pytest.mark.parametrize("source", [
    "import operator\nr = operator.countOf(range(10**10), -1)",
    "import operator\nr = operator.indexOf(map(abs, range(10**10)), -1)",
])
def test_unguarded_c_consumers_end_within_limits(source):
    result = _ends_within_limits(source)
    assert result.get("status") == "error" and "hang" not in result, result


@pytest.mark.parametrize("src", [
    "import numpy as np\na = np.ndarray((2,), dtype=object, strides=(4,))\nx = a[1]",
    "import numpy as np\na = np.ndarray((2,), dtype=[('a', 'i8'), ('b', 'O')], strides=(8,))\nx = a[1]",
])
def test_misaligned_object_strides_at_construction_are_refused(src):
    """Custom strides in a constructor, even over the array's own memory, may not straddle pointers."""
    result = run_cell_in_child(src, report=("status", "ename", "returncode"), hard_exit=True, timeout=30)
    assert "crashed" not in result and result.get("ename") == "CallDenied", result


def test_chained_comparisons_with_in_are_refused_clearly(run):
    r = run("x = 1 < 2 in [2]")
    assert not r.ok and r.denied("syntax", line=1), r
    r = run("print(1 < 2 and 2 in [2], 'a' not in 'bc')")
    assert r.ok and r.stdout == "True True\n", r
