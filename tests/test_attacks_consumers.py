"""Must-block: C consumers of an iterable or a size (the consumer sink).

Work done inside one C call cannot be interrupted at level `none`: the alarm only runs between bytecodes.
So every C function a cell can reach that consumes an iterable (list(it), set.update, deque(it),
math.fsum ...) or builds a result whose size an argument chooses (s * n, '%10000000000d' % 1,
''.join(parts), arr.tolist()) is charged or size-checked *before* C starts, however the cell reaches it:
by name, as a value, read from the class (str.join(sep, parts)), or through a container's __init__. The
tests give the cell a small tick or memory budget and a generous time limit: an uncharged consumer
runs to the end in C and the cell finishes "ok" (or ends on the time limit after the C call returned);
a charged one is refused before it starts.
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child

# A tick budget far below the work, and time enough for an uncharged C loop to finish.
FEW_TICKS = {"timeout": 60.0, "ticks": 10**6, "memory_mb": 1024}
SMALL_MEMORY = {"timeout": 60.0, "ticks": 10**8, "memory_mb": 128}


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


SIZED_RESULTS = {
    "str_join": "s = 'x' * 1000\nparts = [s] * 10**6\nr = ''.join(parts)",
    "bytes_join": "s = b'x' * 1000\nparts = [s] * 10**6\nr = b''.join(parts)",
    "bytearray_join": "s = b'x' * 1000\nparts = [s] * 10**6\nr = bytearray().join(parts)",
    "str_join_from_the_class": "s = 'x' * 1000\nparts = [s] * 10**6\nr = str.join('', parts)",
    "str_join_separator": "parts = ['a'] * 10**6\nr = ('y' * 1000).join(parts)",
    "str_join_generator": "s = 'x' * 1000\nr = ''.join(s for _ in range(10**6))",
    "tolist_from_the_class": "import numpy as np\na = np.zeros(10**7)\nr = np.ndarray.tolist(a)",
    "tolist_of_a_scalar_class": "import numpy as np\na = np.zeros(10**7)\nr = type(a).tolist(a)",
}


@pytest.mark.parametrize("variant", sorted(SIZED_RESULTS))
def test_results_built_in_one_c_call_are_size_checked(variant):
    result = _run(SIZED_RESULTS[variant], SMALL_MEMORY)
    assert result.get("ename") == "SizeDenied", f"{variant}: {result}"


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
