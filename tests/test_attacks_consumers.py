"""Must-block: C consumers of an iterable (the consumer sink, first half; results sized by an argument
are the other half: test_attacks_sizes.py).

Work done inside one C call cannot be interrupted at level `none`: the alarm only runs between bytecodes.
So every C function a cell can reach that consumes an iterable (list(it), set.update, deque(it),
math.fsum, x in it ...) is charged *before* C starts, however the cell reaches it: by name, as a value,
read from the class (set.update(s, it)), through super() or through a container's __init__. The tests
give the cell a small tick budget and a generous time limit: an uncharged consumer runs to the end in C
and the cell finishes "ok" (or ends on the time limit after the C call returned); a charged one is
refused before it starts.
"""
from __future__ import annotations

import subprocess

import pytest

from childcell import GIVE_UP, TIGHT, ended_near_its_limit, run_cell_in_child

# A tick budget far below the work, and time enough for an uncharged C loop to finish.
FEW_TICKS = {"timeout": 60.0, "ticks": 10**6, "memory_mb": 1024}


def _run(source, limits):
    return run_cell_in_child(source, limits=limits, rlimits={"RLIMIT_AS": 6 << 30}, timeout=120,
                             report=("status", "ename"))


# --- Issue 10, finding 4: C loops reached through __init__, class-level reads, and join ---------------------
# set().__init__(itertools.repeat(1, 3*10**8)) ran 19.6 s past a 3 s limit (dict/list/bytearray.__init__
# too): only deque's __init__ was charged. range.count(range(10**8), 1.5) and np.ndarray.tolist(a) read
# from the *class* skipped the instance-only stand-ins. ''.join([s] * N) and b''.join built the whole
# result in one C call with no size check (3 GB under --memory 512).

N = 10**8
CHARGED_LOOPS = {
    "set_init": f"import itertools\nset().__init__(itertools.repeat(1, {N}))",
    "list_init": f"import itertools\nlist().__init__(itertools.repeat(1, {N}))",
    "dict_init": f"import itertools\ndict().__init__(zip(range({N}), itertools.repeat(1)))",
    "bytearray_init": f"import itertools\nbytearray().__init__(itertools.repeat(1, {N}))",
    "set_init_from_the_class": f"import itertools\nset.__init__(set(), itertools.repeat(1, {N}))",
    "list_init_through_super": f"import itertools\nclass L(list):\n    def __init__(self, it):\n"
                               f"        super().__init__(it)\nL(itertools.repeat(1, {N}))",
    "range_count_from_the_class": f"range.count(range({N}), 1.5)",
    "range_index_from_the_class": f"range.index(range({N}), -1.5)",
    "counter_update_from_the_class": f"import collections, itertools\n"
                                     f"collections.Counter.update(collections.Counter(), itertools.repeat(1, {N}))",
}


@pytest.mark.parametrize("variant", sorted(CHARGED_LOOPS))
def test_c_loops_are_charged_before_they_start(variant):
    result = _run(CHARGED_LOOPS[variant], FEW_TICKS)
    assert result.get("ename") in ("TickLimitExceeded", "SizeDenied"), f"{variant}: {result}"


def test_charged_consumers_keep_their_results(run):
    r = run("import collections\ns = set()\ns.__init__([1, 2, 2])\nl = []\nl.__init__('ab')\nd = {}\n"
            "d.__init__([(1, 2)], x=3)\nb = bytearray()\nb.__init__(b'hi')\nset.__init__(s, [5])\n"
            "c = collections.Counter()\ncollections.Counter.update(c, 'aab')\n"
            "print(sorted(s), l, d, bytes(b), range.count(range(10), 3), range.index(range(10), 4), "
            "'-'.join(['a', 'b']), str.join(',', ['x', 'y']), b'+'.join([b'p', bytearray(b'q')]), "
            "bytearray(b'.').join([b'1', b'2']), c['a'], ''.join(x for x in 'hey'))")
    assert r.ok, r
    assert r.stdout == "[5] ['a', 'b'] {1: 2, 'x': 3} b'hi' 1 4 a-b x,y b'p+q' bytearray(b'1.2') 2 hey\n", r.stdout
    r = run("import numpy as np\na = np.arange(3)\nprint(np.ndarray.tolist(a), a.tolist(), type(a).tolist(a))")
    assert r.ok and r.stdout == "[0, 1, 2] [0, 1, 2] [0, 1, 2]\n", r


# ====================================================================================================
# From review round 5: variants of the in-progress fixes (printf widths
# that are not literals).
# ====================================================================================================

# --- C loops that feed a list from its own iterator ---------------------------------------------------

@pytest.mark.parametrize("src", [
    "x = [0]\nx.extend(iter(x))",
    "x = [0]\nx += iter(x)",
])
def test_self_feeding_extend(src):
    result = run_cell_in_child(src, limits=TIGHT, rlimits={"RLIMIT_AS": 400 << 20}, timeout=20)
    # ending at all is the point: a snapshot of the iterator (status ok) or a limit
    assert result["status"] == "ok" or result["ename"] in (
        "TimeLimitExceeded", "TickLimitExceeded", "SizeDenied", "MemoryLimitExceeded"), \
        f"{result} (in-process without an address-space cap this fills the host's memory)"


# ====================================================================================================
# From review round 6: C consumers of huge iterators that are not among
# the sized builtins.
# ====================================================================================================

@pytest.mark.parametrize("src", [
    "import collections\ncollections.deque(range(10**18), maxlen=0)",
    "import math\nmath.fsum(range(10**18))",
])
def test_c_consumers_of_huge_ranges_end(src):
    try:
        result = run_cell_in_child(src, limits=TIGHT, rlimits={"RLIMIT_AS": 2 << 30}, timeout=GIVE_UP,
                                   report=("status", "ename", "elapsed_ms"))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the cell ran past its 1 s limit (no report after {GIVE_UP:g} s)")
    assert result["ename"] in ("TimeLimitExceeded", "TickLimitExceeded", "SizeDenied"), result
    assert ended_near_its_limit(result), result


# ====================================================================================================
# From review round 8: against the mechanisms of the second session
# (the C fast paths, the per-function own-instance flag, the stand-ins for numpy arrays, decimal contexts,
# deque and C iterators, the bounded numpy allocator, and the scrubbing of host paths from output).
# ====================================================================================================

# --- 5. the sized builtins and deque's charge, reached as values or through __init__ ----------------------

@pytest.mark.parametrize("src", [
    "x = next(map(list, [range(10**7)]))",
])
def test_c_consumers_are_charged_however_reached(strict, src):
    r = strict.run(src, ticks=10**6)
    assert r.error_name in ("TickLimitExceeded", "SizeDenied"), r
    assert "x" not in strict.ns


@pytest.mark.parametrize("src", [
    "x = next(map(sum, [range(10**7)]))",
    "x = sorted([range(10**7)], key=sum)",
    "x = max([range(10**7)], key=any)",
    "import collections\nd = collections.deque()\nd.__init__(range(10**7), 0)\nx = d",
    "import collections\nd = collections.deque()\ncollections.deque.__init__(d, range(10**7), 0)\nx = d",
    "import collections\nclass Q(collections.deque):\n    def __init__(self, it):\n        super().__init__(it, 0)\n"
    "x = Q(range(10**7))",
])
def test_c_consumers_passed_as_values_are_charged(strict, src):
    r = strict.run(src, ticks=10**6)
    assert r.error_name in ("TickLimitExceeded", "SizeDenied"), r
    assert "x" not in strict.ns


def test_charging_builtins_and_deque_init_keep_their_results(run):
    r = run("import collections\nclass Q(collections.deque):\n    def __init__(self, it):\n        super().__init__(it, 3)\n"
            "d = collections.deque()\nd.__init__([1, 2])\n"
            "print(list(map(sum, [[1, 2], [3]])), sorted([[3], [1, 2]], key=sum), max([1, 5, 2]), Q(range(9)), d,"
            " sum.__name__, any([0, 1]), min(3, 1))")
    assert r.ok and r.stdout == "[3, 3] [[3], [1, 2]] 5 Q([6, 7, 8], maxlen=3) deque([1, 2]) sum True 1\n", r


@pytest.mark.parametrize("src", [
    "import typing\nx = typing.get_origin(typing.Deque[int])(range(10**7), maxlen=0)",
    "import typing\nx = typing.Deque(range(10**7), maxlen=0)",
])
def test_typing_hands_out_the_guarded_deque(strict, src):
    r = strict.run(src, ticks=10**6)
    assert r.error_name in ("TickLimitExceeded", "SizeDenied"), r
    assert "x" not in strict.ns


def test_c_consumers_by_name_are_charged(strict):
    r = strict.run("import collections\nx = collections.deque(range(10**7), maxlen=0)", ticks=10**6)
    assert r.error_name == "TickLimitExceeded", r
    r = strict.run("x = sum(range(10**7))", ticks=10**6)
    assert r.error_name == "TickLimitExceeded", r


# --- 7. C iterator nesting through callables and unlisted C iterators ----------------------------------------

@pytest.mark.parametrize("policy, src", [
    ("strict", "x = iter([1])\nfor i in range(300000):\n    x = map(list, [x])\nn = next(x)\n"),
    ("data-science", "import csv\nx = iter(['a'])\nfor i in range(300000):\n    x = csv.reader(x)\nn = next(x)\n"),
])
def test_c_iterator_nesting_cannot_crash_the_process(policy, src):
    try:
        result = run_cell_in_child(src, policy, limits={"timeout": 20.0}, timeout=60,
                                   report=("status", "ename", "returncode"))
    except subprocess.TimeoutExpired:
        pytest.fail("the cell ran past its limit")
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "error" and result["ename"] in ("SizeDenied", "RecursionError"), result


# ====================================================================================================
# From review round 10: numpy's raw-memory routes that do not pass
# through a constructor, and the mechanisms that charge work done in C (charged/_charging, _estimated_length,
# the consumer guards).
# ====================================================================================================

# --- 2. the nesting stand-ins (map/filter/zip/enumerate as cells see them) hide their length ------------------
# _estimated_length looks through map/filter/enumerate/zip by `type(it) in (map, filter, enumerate)`; in a
# cell `map` is the nesting stand-in (a subclass), so the estimate is 0 and sum/min/max/any/all/sorted
# are never charged: sum(map(abs, range(10**10))) runs in C past the time limit (level `none`).

CPU_TIGHT = {"timeout": 1.0, "ticks": 10**7, "memory_mb": 256}


def _ends_within_limits(source):
    try:
        result = run_cell_in_child(source, limits=CPU_TIGHT, rlimits={"RLIMIT_AS": 3 << 30}, timeout=GIVE_UP,
                                   report=("status", "ename", "elapsed_ms"))
    except subprocess.TimeoutExpired:
        return {"hang": True}
    return result if ended_near_its_limit(result, CPU_TIGHT) else {"ran_past_its_limit": result}


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


def test_chained_comparisons_with_in_are_refused_clearly(run):
    r = run("x = 1 < 2 in [2]")
    assert not r.ok and r.denied("syntax", line=1), r
    r = run("print(1 < 2 and 2 in [2], 'a' not in 'bc')")
    assert r.ok and r.stdout == "True True\n", r


# ====================================================================================================
# From review round 11: the `x in c` gate and other C consumers,
# numpy's raw protocols answered from a library instance's __dict__, and the Python fallbacks used when the C
# extensions are missing.
# ====================================================================================================

# --- 3. C consumers still uncharged -------------------------------------------------------------------------
# The `in` gate's fast path (C and Python) treats range as a plain container, but range.__contains__ is
# O(1) only for an exact int: 1.5 in range(10**18) walks the range in C. Others consume iterables in C.

CPU_TIGHT_R11 = {"timeout": 1.0, "ticks": 10**7, "memory_mb": 256}
LIMIT_ERRORS = ("TickLimitExceeded", "TimeLimitExceeded", "SizeDenied", "MemoryLimitExceeded")


def _ends_within_limits_R11(source):
    try:
        result = run_cell_in_child(source, limits=CPU_TIGHT_R11, rlimits={"RLIMIT_AS": 3 << 30}, timeout=GIVE_UP,
                                   report=("status", "ename", "elapsed_ms"))
    except subprocess.TimeoutExpired:
        return {"hang": True}
    return result if ended_near_its_limit(result, CPU_TIGHT_R11) else {"ran_past_its_limit": result}


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
    result = _ends_within_limits_R11(source)
    assert result.get("status") == "error" and result.get("ename") in LIMIT_ERRORS, result


def test_in_gate_still_fast_for_int_in_range(run):
    r = run("print(10**17 in range(10**18), 5 not in range(3), 'a' in 'abc')")
    assert r.ok and r.stdout == "True True True\n", r


def test_newly_charged_consumers_keep_their_results(run):
    r = run("import heapq, collections, array, copy\n"
            "print(range(10).count(3), range(10).index(4), [1, 2, 1].count(1), 'abca'.index('c'), (1, 2).index(2),"
            " {1}.isdisjoint([2]), {1}.issubset(range(3)), dict.fromkeys('ab', 0), heapq.nlargest(2, [3, 1, 2]),"
            " collections.Counter('aab').most_common(1), array.array('b', [1, 2]).tolist(),"
            " 3 in range(5), 2.0 in range(5), copy.deepcopy({'a': [1]}))")
    assert r.ok, r
    assert r.stdout == ("1 4 2 2 1 True True {'a': 0, 'b': 0} [3, 2] [('a', 2)] [1, 2] True True {'a': [1]}\n"), r


# ====================================================================================================
# From review round 12: copy.deepcopy's memo, and neighbours of
# earlier escapes.
# ====================================================================================================

# --- 3. starred targets below the top level are built in C uncharged ----------------------------------------
# R11-5 routes 'a, *b = it' and 'for a, *b in rows' through the sized gate, but only a starred target at
# the top of the target list. A nested one ('(a, *b), c = (it, 1)', the same in for/comprehension/with
# targets) and a match star capture ('case [a, *rest]' on a range) make C's UNPACK_EX consume the whole
# iterable into a list with no tick charged: a 1 s / 10**7-tick cell over range(2*10**8) ran 4-13 s and
# stopped only at RLIMIT_AS (MemoryError); at level none nothing bounds it but the machine's memory.

N_R12 = 3 * 10**6
NESTED_STARRED = {
    "nested_assign": f"(a, *b), c = (bytes({N_R12}), 1)",
    "nested_list_target": f"[[a, *b]] = [bytes({N_R12})]",
    "for_target": f"for (a, *b), c in [(bytes({N_R12}), 1)]:\n    pass",
    "comprehension_target": f"x = [0 for (a, *b), c in [(bytes({N_R12}), 1)]]",
    "with_target": f"import contextlib\nwith contextlib.nullcontext((bytes({N_R12}), 1)) as ((a, *b), c):\n    pass",
    "match_star_capture": f"match range({N_R12}):\n    case [a, *rest]:\n        pass",
}


@pytest.mark.parametrize("variant", sorted(NESTED_STARRED))   # match_star_capture: R12-3, charged by its case guard
def test_nested_starred_targets_are_charged(variant):
    result = run_cell_in_child(NESTED_STARRED[variant], limits={"timeout": 5.0, "ticks": 10**6, "memory_mb": 1024},
                               timeout=60)
    assert result.get("ename") == "TickLimitExceeded", result


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


# ====================================================================================================================
# Sink: C consumers of an iterable.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 1 (docs/reviews.md, "Review 1").
# C consumers of an endless iterator, reached as an outsider would try them: each ends at a limit or a
# size denial instead of running past it (in a child: a miss would fill or hang the test process).
UNBOUNDED_CONSUMERS = {
    "bytearray_extend": "import itertools\nb = bytearray()\nb.extend(itertools.repeat(1, 10**10))",
    "super_list_extend": "import itertools\nclass L(list): pass\nl = L()\nsuper(L, l).extend(itertools.repeat(1, 10**10))",
    "numpy_fromiter": "import itertools, numpy as np\na = np.fromiter(itertools.repeat(1, 10**10), dtype=np.int8)",
    "set_update_from_the_class": "import itertools\ns = set()\nset.update(s, itertools.count())",
    "statistics_fmean": "import itertools, statistics\nx = statistics.fmean(itertools.repeat(1.0, 10**10))",
}


@pytest.mark.parametrize("name", sorted(UNBOUNDED_CONSUMERS))
def test_c_consumers_of_endless_iterators_stop_at_a_limit(name):
    from childcell import run_cell_in_child
    result = run_cell_in_child(UNBOUNDED_CONSUMERS[name], limits={"timeout": 1.0, "memory_mb": 256},
                               rlimits={"RLIMIT_AS": 3 << 30}, timeout=30)
    assert result.get("status") == "error", result
    assert result["ename"] in ("SizeDenied", "MemoryLimitExceeded", "TimeLimitExceeded", "TickLimitExceeded"), result


# --- a cell object whose __iter__ answers a C iterator ----------------------------------------------------------
# The consumer's estimate looked at the cell's object (no length: 0) while C consumed the iterator its __iter__
# answered: sum(B()) over iter(range(10**11)) ran past every limit (found in this session's own review). The gate
# now iterates such an object itself, once, and charges the iterator (Gates.consumable); a cell's __len__ is
# never asked (it may raise, lie or have effects).

LAZY_ITER = "class B:\n    def __iter__(self):\n        return iter(range(10**11))\n"
CELL_ITERABLE_CONSUMERS = {
    "sum": "sum(B())", "max": "max(B())", "in": "-1 in B()", "frozenset": "frozenset(B())",
    "list.extend": "[1].extend(B())", "list.__init__": "x = []\nx.__init__(B())", "set.update": "set().update(B())",
    "dict.fromkeys": "dict.fromkeys(B())", "math.fsum": "import math\nmath.fsum(B())",
    "deque": "import collections\ncollections.deque(B(), maxlen=1)", "Counter": "import collections\ncollections.Counter(B())",
    "array": "import array\narray.array('d', B())", "reduce": "import functools, operator\nfunctools.reduce(operator.add, B())",
    "zip": "list(zip(B(), B()))",
}


@pytest.mark.parametrize("consumer", sorted(CELL_ITERABLE_CONSUMERS))
def test_a_cell_iterable_answering_a_c_iterator_is_charged(consumer):
    result = run_cell_in_child(LAZY_ITER + CELL_ITERABLE_CONSUMERS[consumer], limits=TIGHT, timeout=GIVE_UP,
                               report=("status", "ename", "elapsed_ms"))
    assert result.get("ename") == "TickLimitExceeded", result
    assert ended_near_its_limit(result), result


def test_consumers_of_cell_objects_keep_python_semantics(run):
    r = run("class Bag:\n    def __contains__(self, x):\n        return x == 1\n    def __iter__(self):\n"
            "        return iter([1, 2])\n    def __len__(self):\n        raise RuntimeError('size unknown')\n"
            "class M:\n    def keys(self):\n        return ['a']\n    def __getitem__(self, k):\n        return k * 2\n"
            "    def __iter__(self):\n        return iter(range(10**11))\n"
            "class Bt:\n    def __bytes__(self):\n        return b'xy'\n    def __iter__(self):\n        return iter(range(10**11))\n"
            "class L(list):\n    def __len__(self):\n        return 0\n"
            "import collections\nd = {}\nd.__init__(M())\n"
            "print(1 in Bag(), sum(Bag()), max(Bag()), sorted(Bag()), dict(M()), d, collections.OrderedDict(M()),"
            " bytes(Bt()), sum(L(range(5))))\n")
    assert r.ok, r
    assert r.stdout == ("True 3 2 [1, 2] {'a': 'aa'} {'a': 'aa'} OrderedDict([('a', 'aa')]) b'xy' 10\n"), r


def test_join_keeps_its_own_errors(run):
    r = run("for parts in (5, ['a', 1], iter(range(3))):\n    try:\n        ','.join(parts)\n"
            "    except TypeError as e:\n        print(e)\n")
    assert r.ok, r
    assert r.stdout == ("can only join an iterable\nsequence item 1: expected str instance, int found\n"
                        "sequence item 0: expected str instance, int found\n"), r


# -- review 11: `in` by another name, and augmented assignment -------------------------------------------------
# A budget of 10**6 ticks against a walk of 5*10**7 steps: the limit that fires is ticks, charged before C starts,
# so nothing here depends on the machine's speed.
_WALK = dict(TIGHT, ticks=10**6, timeout=60.0)


@pytest.mark.parametrize("walk", [
    "operator.contains(range(5 * 10**7), 1.5)",
    "range(5 * 10**7).__contains__(1.5)",
    "range.__contains__(range(5 * 10**7), 1.5)",
    "operator.contains(map(abs, range(5 * 10**7)), -1)",
    "operator.contains(itertools.repeat(1), 2)",
    "operator.methodcaller('__contains__', 1.5)(range(5 * 10**7))",
])
def test_contains_by_another_name_is_charged(walk):
    """R11-4: `1.5 in range(N)` is charged N ticks; operator.contains and range's __contains__ walked it in C
    uncharged (N = 10**14 held the kernel for hours)."""
    result = run_cell_in_child(f"import operator, itertools\nx = {walk}\nleaked = True\n", limits=_WALK,
                               ns=("leaked",), report=("status", "ename"), timeout=GIVE_UP)
    assert result.get("ename") == "TickLimitExceeded" and not result["leaked"], (walk, result)


def test_contains_by_another_name_keeps_its_answers(run):
    r = run("import operator\nprint(operator.contains(range(10), 3), operator.contains([1, 2], 5), "
            "range(10).__contains__(2.0), operator.contains('abc', 'b'), operator.contains({1: 2}, 1))")
    assert r.ok and r.stdout == "True False True True True\n", r


@pytest.mark.parametrize("cell", [
    "d = collections.deque(maxlen=1)\nd += range(5 * 10**7)",
    "d = collections.deque(maxlen=0)\nd += map(abs, range(5 * 10**7))",
    "d = collections.deque(maxlen=1)\noperator.iadd(d, range(5 * 10**7))",
    "d = collections.deque(maxlen=1)\noperator.iconcat(d, range(5 * 10**7))",
    "class D(collections.deque):\n    pass\nd = D(maxlen=1)\nd += range(5 * 10**7)",
    "d = collections.deque(maxlen=1)\nd += iter(int, 1)",
])
def test_augmented_add_on_a_bounded_deque_is_charged(cell):
    """R11-6: `d += it` on a deque with a maxlen consumed `it` in C keeping nothing (no tick, no allocation: hours
    at level none). The rewriter leaves `+=` alone; deque's in-place concatenation slot charges it instead."""
    result = run_cell_in_child(f"import collections, operator\n{cell}\nleaked = True\n", limits=_WALK,
                               ns=("leaked",), report=("status", "ename"), timeout=GIVE_UP,
                               rlimits={"RLIMIT_AS": 4 << 30})
    assert result.get("ename") in ("TickLimitExceeded", "MemoryLimitExceeded") and not result["leaked"], (cell, result)


def test_augmented_add_on_a_deque_keeps_its_answers(run):
    r = run("import collections\nd = collections.deque([1], maxlen=3)\nd += [2, 3, 4]\nd += (x for x in [5])\n"
            "e = collections.deque()\ne += range(3)\nprint(list(d), list(e))")
    assert r.ok and r.stdout == "[3, 4, 5] [0, 1, 2]\n", r
