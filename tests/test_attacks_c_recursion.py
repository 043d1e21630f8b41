"""Recursion in C without a check: code that recurses through an object's contents in C (tuple's hash of a
deeply nested tuple, numpy's object loops over an array that holds itself, next() of C iterators nested through
`itertools.cycle` and `chain.from_iterable`) must end in a clean error, never a crashed process.

Sink: docs/security.md, "Inventory of sinks", row *recursion in C without a check*. The attacks come from the
independent reviews at level none (docs/reviews.md): review 4 (N4-11, N4-12), review 5 (N5-6) and review 18 (R18-10:
generators resumed from C; R18-11: deallocators that free what they hold directly).
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child, run_reporting

# From review 4 (docs/reviews.md, "Review 4").
# --- N4-11: hash() of a deeply nested tuple overflows the C stack -------------------------------------------------
# Pure Python, no library: a tuple nested a million deep is cheap to build in a loop (one tick per level, a
# few tens of MB), and CPython 3.11's tuplehash calls PyObject_Hash on its item without Py_EnterRecursiveCall
# (unlike repr, ==, isinstance). Any hashing use (hash(), a set, a dict key) recurses in C off the end of the
# stack: the kernel process dies at level none. The sandbox bounds map/zip nesting for the same reason.

NESTED_TUPLE_CELLS = {
    "hash": "t = ()\nfor i in range(1000000):\n    t = (t,)\nh = hash(t)\n",
    "set_member": "t = ()\nfor i in range(1000000):\n    t = (t,)\ns = {t}\n",
    "dict_key": "t = ()\nfor i in range(1000000):\n    t = (t,)\nd = {}\nd[t] = 1\n",
    "object_array_holding_itself_negated": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = -a\n",
    "object_array_holding_itself_abs": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = abs(a)\n",
    "object_array_holding_itself_added": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = a + a\n",
    # variants (added with the fix)
    "object_array_holding_itself_float": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = float(a)\n",
    "object_array_holding_itself_bool": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = bool(a)\n",
    "object_array_holding_itself_power": "import numpy as np\na = np.empty(1, dtype=object)\na[0] = a\nr = a ** 2\n",
    "object_array_holding_itself_sum": "import numpy as np\na = np.empty(2, dtype=object)\na[0] = a\na[1] = a\nr = a.sum()\n",
    "frozenset_of_nested_tuple": "t = ()\nfor i in range(1000000):\n    t = (t,)\ns = frozenset([t])\n",
}


# FINDING N4-11, fixed: tuple's hash and ndarray's number slots check the recursion depth (_numpyguard.c).
@pytest.mark.parametrize("route", sorted(NESTED_TUPLE_CELLS))
def test_hashing_a_deeply_nested_tuple_does_not_crash_the_process(route):
    result = run_cell_in_child(NESTED_TUPLE_CELLS[route], report=("status", "ename", "returncode"), hard_exit=True)
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "error", result


# --- N4-12 (lesser): a deeply nested cell is an internal error --------------------------------------------------
# A cell whose expression nests a few thousand deep parses in CPython (its parser allows it) but the engine
# reports "the sandbox failed while it finished this cell" instead of the RecursionError/SyntaxError the same
# text gets through exec().

DEEP_CELLS = {
    "unary_minus": "x = " + "-" * 2900 + "1",
    "not_chain": "x = " + "not " * 2900 + "1",
    "long_sum": "x = 1" + " + 1" * 100000,
    "attribute_chain": "x = " + "a." * 5000 + "b",
}


# FINDING N4-12, fixed by f6579b1.
@pytest.mark.parametrize("route", sorted(DEEP_CELLS))
def test_a_deeply_nested_cell_is_not_an_internal_error(sandbox, route):
    r = sandbox.run(DEEP_CELLS[route])
    assert r.error_name != "SandboxInternalError", r
    assert sandbox.run("print(6 * 7)").stdout == "42\n"


def test_deeply_nested_text_through_exec_is_a_clean_error(sandbox):
    r = sandbox.run("exec('x = 1' + ' + 1' * 100000)")
    assert r.error_name == "RecursionError", r


def test_nested_callable_iterators_are_a_recursion_error(sandbox):
    r = sandbox.run("import functools\nit = iter([1])\nfor i in range(300000):\n"
                    "    it = iter(functools.partial(next, it), None)\nv = next(it)\n")
    assert r.error_name == "RecursionError", r


# From review 5 (docs/reviews.md, "Review 5").
# --- N5-6: iterator nesting through itertools.cycle and chain.from_iterable ----------------------------------------
# The nesting stand-ins count map/zip/enumerate/filter/chain/islice/tee/... (2,000 deep at most); cycle and
# chain.from_iterable are not counted, and next() on 300,000 of them recurses in C off the end of the stack.

NESTED_ITERATORS = {
    "cycle": "it = iter([1])\nfor i in range(300000):\n    it = itertools.cycle(it)\nx = next(it)\n",
    "chain_from_iterable": ("it = iter([1])\nfor i in range(300000):\n    it = itertools.chain.from_iterable([it])\n"
                            "x = next(it)\n"),
    "chain_from_iterable_consumed_by_pandas": ("import pandas as pd\nit = iter([1])\nfor i in range(300000):\n"
                                               "    it = itertools.chain.from_iterable([it])\nx = pd.Series(it)\n"),
}


@pytest.mark.parametrize("route", sorted(NESTED_ITERATORS))
def test_iterators_nested_through_cycle_and_chain_from_iterable_are_bounded(route):
    result = run_reporting("import itertools\n" + NESTED_ITERATORS[route])
    assert "crashed" not in result, f"the process died: {result}"


@pytest.mark.parametrize("wrapper", ["itertools.chain(it)", "itertools.takewhile(bool, it)", "itertools.tee(it, 1)[0]",
                                     "itertools.pairwise(it)", "itertools.groupby(it)", "zip(it, strict=True)",
                                     "itertools.starmap(tuple, it)", "itertools.accumulate(it)"])
def test_counted_iterator_nesting_is_refused(wrapper):
    result = run_reporting(f"import itertools\nit = iter([(1,)])\nfor i in range(300000):\n    it = {wrapper}\nx = next(it)\n")
    assert result.get("ename") == "SizeDenied", result


# From review 18 (docs/reviews.md, "Review 18").
# --- R18-10: resuming nested generators from C ---------------------------------------------------------------------
# CPython 3.11 does not count a generator resumed from C (next(), a loop's FOR_ITER, `yield from`'s send) against the
# recursion limit: next() on 100,000 nested generator expressions overflowed the C stack. Both ways in now count.
NESTED_GENERATORS = {
    "generator_expressions": "it = iter([1])\nfor i in range(100000):\n    it = (x for x in it)\nnext(it)\n",
    "yield_from": "def deep(it):\n    yield from it\nj = iter([1])\nfor i in range(100000):\n    j = deep(j)\nnext(j)\n",
    "for_loops": "def deep(it):\n    for x in it:\n        yield x\nj = iter([1])\nfor i in range(100000):\n    j = deep(j)\n"
                 "list(j)\n",
    "send": "def deep(it):\n    x = yield from it\nj = iter([1])\nfor i in range(100000):\n    j = deep(j)\nj.send(None)\n",
}


@pytest.mark.parametrize("route", sorted(NESTED_GENERATORS))
def test_nested_generators_end_in_a_recursion_error(route):
    result = run_cell_in_child(NESTED_GENERATORS[route] + "\n#CELL\nprint('after')", report=("status", "ename", "returncode"),
                               timeout=120)
    assert "crashed" not in result and result["returncode"] == 0, result
    assert result["status"] == "ok", result   # the second cell ran: the process is alive


def test_recursive_generators_still_reach_a_useful_depth(sandbox):
    r = sandbox.run("def walk(n):\n    if n:\n        yield n\n        yield from walk(n - 1)\nprint(sum(walk(400)))")
    assert r.ok and r.stdout == "80200\n", r


# --- R18-11: freeing objects nested a million deep ------------------------------------------------------------------
# slice, staticmethod, classmethod, property, operator's getters, deque, super, generators and numpy's arrays free what they hold
# directly (no trashcan): dropping a chain of a million killed the host. They free at most 500 deep on the C stack now
# and park the rest (_numpyguard.guard_deallocation).
NESTED_FREES = {
    "slice": "x = slice(1)\nfor i in range(10**6):\n    x = slice(x)\ndel x\n",
    "staticmethod": "x = 1\nfor i in range(10**6):\n    x = staticmethod(x)\ndel x\n",
    "classmethod": "x = print\nfor i in range(10**6):\n    x = classmethod(x)\ndel x\n",
    "property": "x = None\nfor i in range(10**6):\n    x = property(x)\ndel x\n",
    "itemgetter": "import operator\nx = 0\nfor i in range(10**6):\n    x = operator.itemgetter(x)\ndel x\n",
    "deque": "import collections\nx = collections.deque()\nfor i in range(10**6):\n    x = collections.deque([x])\ndel x\n",
    # a cell's subclass, its class in the chain too (the class may lose its last reference while an instance waits)
    "deque_subclass": "import collections\nclass S(collections.deque):\n    pass\nx = S()\nfor i in range(10**5):\n"
                      "    x = S([x, S])\ndel x, S\n",
    "numpy_object_arrays": "import numpy as np\na = np.empty(1, object)\nfor i in range(300000):\n"
                           "    b = np.empty(1, object)\n    b[0] = a\n    a = b\ndel a, b\n",
    "mixed": "import collections\nx = None\nfor i in range(300000):\n    x = slice(collections.deque([property(x)]))\n"
             "del x\n",
}


@pytest.mark.parametrize("route", sorted(NESTED_FREES))
def test_freeing_deeply_nested_objects_does_not_crash_the_process(route):
    result = run_cell_in_child(NESTED_FREES[route] + "#CELL\nprint('after')", report=("status", "ename", "returncode"),
                               limits={"timeout": 60.0}, timeout=180)
    assert "crashed" not in result and result["returncode"] == 0, result
    assert result["status"] == "ok", result
