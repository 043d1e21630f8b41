"""C loops over an object array the cell's code rewrites: numpy's in-place sorts and partitions keep element
pointers in pivots and merge buffers without references, and pandas' hash tables borrow their keys, while the
elements' `__lt__`/`__eq__` (cell code) put new objects into the array. No freed or duplicated pointer may be left
in the array, and the process must survive.

Sink: docs/security.md, "Inventory of sinks", row *C loops over an object array the cell's code rewrites*. The
attacks come from the independent review 5 at level none (N5-11; docs/reviews.md).
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child, run_in_engine, run_reporting

# From review 5 (docs/reviews.md, "Review 5").
# --- N5-11: numpy sorts an object array in place while the cell's __lt__ rewrites it ------------------------------
# ndarray.sort / ndarray.partition on an object array compare with the elements' __lt__ (cell code) while the sort
# holds raw element pointers in its own temporaries (pivots, the merge buffer, the heap) without references. A
# __lt__ that assigns new objects to the array's slots frees the old ones; the sort then writes the dangling
# pointers back: quicksort/heapsort/partition segfault, the stable sort leaves the same pointer in two slots and
# freed objects in the array (a later allocation of the same size shows through: use after free, the classic
# start of a type confusion). np.sort(a) sorts a copy and is not affected.

OBJECT_SORT_CELL = """
import numpy as np
class K:
    def __init__(self, v):
        self.v = v
    def __lt__(self, other):
        global calls
        calls += 1
        if calls % 200 == 0 and calls <= 1000:
            for i in range(len(a)):
                a[i] = K(-i)
            junk.extend([K(12345) for i in range(3000)])
        return self.v < other.v
calls = 0
junk = []
N = 2000
a = np.empty(N, dtype=object)
for i in range(N):
    a[i] = K((i * 7919) % N)
broken = False
try:
    {sort}
except AttributeError:
    broken = True
junk.extend([K(12345) for i in range(100000)])
broken = broken or len(set(map(id, a))) != N or any(not hasattr(x, 'v') or x.v == 12345 for x in a)
"""


OBJECT_SORTS = {"quicksort": "a.sort(kind='quicksort')", "heapsort": "a.sort(kind='heapsort')",
                "stable": "a.sort(kind='stable')", "partition": "a.partition(3)",
                # variants (added with the fix): read from the class, a structured array with an object field
                "from_the_class": "np.ndarray.sort(a)", "partition_from_the_class": "np.ndarray.partition(a, 5)"}


@pytest.mark.parametrize("kind", sorted(OBJECT_SORTS))
def test_object_array_sorts_survive_a_comparison_that_rewrites_the_array(kind):
    result = run_cell_in_child(OBJECT_SORT_CELL.replace("{sort}", OBJECT_SORTS[kind]), report=("status", "ename"),
                               ns=("broken",), hard_exit=True)
    assert "crashed" not in result, f"the process died: {result}"
    assert result["broken"] is False, f"the array holds freed or duplicated pointers: {result}"


def test_honest_in_place_sorts_of_object_arrays_still_sort(tmp_path):
    done, _ = run_in_engine("import numpy as np, pandas as pd\n"
                         "a = np.array([3, 1, 2, 'x'][:3], dtype=object)\na.sort()\n"
                         "b = np.array([5, 4, 3, 2, 1], dtype=object)\nb.partition(2)\n"
                         "c = np.array([(2, 'b'), (1, 'a')], dtype=[('n', 'i8'), ('s', 'O')])\nc.sort(order='n')\n"
                         "d = np.array([3.0, 1.0, 2.0])\nd.sort()\n"
                         "s = pd.Series(['a', 'b', 'a'])\n"
                         "ok = list(a) == [1, 2, 3] and b[2] == 3 and list(c['s']) == ['a', 'b'] and list(d) == [1, 2, 3]"
                         " and list(s.duplicated()) == [False, False, True]\n"
                         "assert ok\n", tmp_path)
    assert done["status"] == "ok", done


@pytest.mark.parametrize("call", ["b = np.sort(a)", "b = np.argsort(a, kind='stable')", "b = np.unique(a)",
                                  "b = np.lexsort([a])"])
def test_object_array_sorts_of_a_copy_are_unaffected(call):
    result = run_cell_in_child(OBJECT_SORT_CELL.replace("{sort}", call), report=("status", "ename"),
                               ns=("broken",), hard_exit=True)
    assert "crashed" not in result, result
    assert result["broken"] is False, result


# The same in pandas' object hash tables (N5-11): duplicated() keeps the array's elements in its khash table as
# borrowed pointers while calling the keys' __eq__ (every key hashes alike); an __eq__ that replaces the array's
# elements frees the keys the table still compares with. The process segfaults.

HASHTABLE_CELL = """
import numpy as np, pandas as pd
class K:
    def __init__(self, v):
        self.v = v
    def __hash__(self):
        return 7
    def __eq__(self, other):
        global calls
        calls += 1
        if calls % 200 == 0 and calls <= 1000:
            for i in range(len(a)):
                a[i] = K(-i - 10**6)
            junk.extend([K(12345) for i in range(3000)])
        return self.v == other.v
calls = 0
junk = []
a = np.empty(400, dtype=object)
for i in range(400):
    a[i] = K(i)
r = {call}
"""


HASHTABLE_CALLS = {"series_duplicated": "pd.Series(a, copy=False).duplicated()",
                   "drop_duplicates": "pd.Series(a, copy=False).drop_duplicates()",
                   "frame_duplicated": "pd.DataFrame({'c': a}, copy=False).duplicated()"}


@pytest.mark.parametrize("call", sorted(HASHTABLE_CALLS))
def test_pandas_object_hash_tables_survive_an_eq_that_rewrites_the_array(call):
    result = run_reporting(HASHTABLE_CELL.replace("{call}", HASHTABLE_CALLS[call]))
    assert "crashed" not in result, f"the process died: {result}"


# From review 9 (docs/reviews.md): an object-array sort through super() in an ndarray subclass (held).
def test_object_sort_through_super_in_an_ndarray_subclass_survives():
    cell = ("import numpy as np\nclass K:\n    def __init__(self, v):\n        self.v = v\n"
            "    def __lt__(self, other):\n        global calls\n        calls += 1\n"
            "        if calls % 200 == 0 and calls <= 1000:\n            for i in range(len(a)):\n"
            "                a[i] = K(-i)\n            junk.extend([K(12345) for i in range(3000)])\n"
            "        return self.v < other.v\ncalls = 0\njunk = []\nN = 2000\n"
            "class S(np.ndarray):\n    def srt(self):\n        super().sort(kind='quicksort')\n"
            "a = np.empty(N, dtype=object).view(S)\nfor i in range(N):\n    a[i] = K((i * 7919) % N)\n"
            "a.srt()\njunk.extend([K(12345) for i in range(100000)])\n"
            "broken = len(set(map(id, a))) != N or any(not hasattr(x, 'v') or x.v == 12345 for x in a)\n")
    result = run_reporting(cell, ns=("broken",), timeout=120)
    assert "crashed" not in result and result["status"] == "ok" and not result["broken"], result
