"""Objects built on index arrays: scipy's splines, kernel density estimates, interpolators, triangulations,
trees and sparse arrays, pandas' sparse indexes, categoricals, window indexers and group labels. Their constructors
check the arrays against each other, and their C/Cython code indexes by them without bounds checks: an array
replaced after construction, an index array written in place, a cell subclass answering index data through a
property or a hook (`get_window_bounds`, `factorize`, `indices`) must not read or write memory past the buffers.

Sink: docs/security.md, "Inventory of sinks", row *objects built on index arrays*. The attacks come from the
independent reviews at level none (docs/reviews.md): review 4 (N4-9), review 5 (N5-1, N5-2), review 8 (N8-1 to
N8-3), with the attempts that held.
"""
from __future__ import annotations

import json

import pytest

from childcell import run_cell_in_child, run_reporting

# From review 4 (docs/reviews.md, "Review 4").
# --- N4-9: scipy.sparse trusts the cell's index arrays: an out-of-bounds write in C ------------------------------
# csr_array((data, indices, indptr), shape=...) runs check_format(full_check=False): lengths and dtypes, not
# whether each column index is below the number of columns. toarray() (csr_todense in C++) then writes
# data[k] at row offset + indices[k]: a chosen value at a chosen distance from a heap buffer, before or
# after it. A memory-write primitive in the kernel's process; here it only crashes it.

SPARSE_OOB_CELL = """
import numpy as np, scipy.sparse as sp
a = sp.csr_array((np.array([1.0]), np.array([100000000]), np.array([0, 1])), shape=(1, 2))
dense = a.toarray()
"""


def test_sparse_arrays_with_out_of_range_indices_do_not_write_out_of_bounds():
    result = run_cell_in_child(SPARSE_OOB_CELL, report=("status", "ename", "returncode"), hard_exit=True)
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "error", result


SPARSE_OOB_READS = {
    "constructed": "a = sp.csr_array((np.array([1.0]), np.array([5]), np.array([0, 1])), shape=(1, 2))\n",
    "indices_written_after": ("a = sp.csr_array((np.array([1.0]), np.array([0]), np.array([0, 1])), shape=(1, 2))\n"
                              "a.indices[0] = 5\n"),
}


@pytest.mark.parametrize("route", sorted(SPARSE_OOB_READS))
def test_sparse_products_do_not_read_out_of_bounds(sandbox, route):
    r = sandbox.run("import numpy as np, scipy.sparse as sp\n" + SPARSE_OOB_READS[route] +
                    "x = np.zeros(2)\nleaked = (a @ x)[0]\n")
    assert not r.ok, f"the product read past x: {sandbox.ns.get('leaked')!r}"


@pytest.mark.parametrize("validate", ["validate=False", "None, None, False", "dtype=None, validate=False"])
def test_categorical_codes_past_the_categories_do_not_read_out_of_bounds(sandbox, validate):
    """(FINDING N4-9 sibling, fixed: from_codes always validates while a cell runs.)"""
    r = sandbox.run("import pandas as pd, numpy as np\n"
                    "cat = pd.Categorical.from_codes([2, 3, 4, 5], pd.Index([1, 2], dtype='int64'), "
                    f"{validate})\nleaked = np.asarray(cat)\n")
    assert not r.ok, f"codes past the categories read memory: {sandbox.ns.get('leaked')!r}"


def test_bspline_construct_fast_does_not_read_past_its_coefficients(sandbox):
    r = sandbox.run("import numpy as np\nfrom scipy.interpolate import BSpline\n"
                    "knots = np.array([0., 0., 0., 0., 1., 1., 1., 1.])\n"
                    "leaked = BSpline.construct_fast(knots, np.array([1.0]), 3)(np.linspace(0, 1, 5))\n")
    assert not r.ok, f"evaluation read past the coefficients: {sandbox.ns.get('leaked')!r}"


def test_multiindex_codes_past_the_levels_are_checked_where_used(sandbox):
    r = sandbox.run("import pandas as pd, numpy as np\n"
                    "mi = pd.MultiIndex(levels=[pd.Index([1, 2], dtype='int64')], codes=[[0, 5, 6, 7]], "
                    "verify_integrity=False)\nleaked = np.asarray(mi.get_level_values(0))\n")
    # refused where used (IndexError) before review 19; since R19-3 the codes are verified when the index is made
    assert r.error_name in ("ValueError", "IndexError") and "leaked" not in sandbox.ns, r


# From review 5 (docs/reviews.md, "Review 5").
# --- N5-1: scipy objects checked by their constructor, changed afterwards ----------------------------------------
# The write gate lets a cell set attributes on the library instances it made itself (only module-level
# instances were under review in N4-2). Several scipy classes check their arrays' shapes in __init__ and
# then hand them to Cython/C kernels compiled with boundscheck(False) at every call: BSpline (t, c, k; the
# constructor-free route, construct_fast, was refused by name after N4-9), gaussian_kde (dataset against
# the weights), LinearNDInterpolator (values against the triangulation). After `obj.attr = smaller`, each
# call reads past the array: heap words come back as results (a chosen offset: one data point near the query
# point in the KDE reads one word), or the process segfaults.

ATTRIBUTE_ROUTES = {
    "bspline_c": ("import numpy as np\nfrom scipy.interpolate import BSpline\n"
                  "b = BSpline(np.arange(100000.), np.zeros(100000 - 4), 3)\nb.c = np.zeros(1)\n"
                  "v = b(np.arange(4.5, 99990, 1.0))\nleaked = bool((v != 0).any())\n"),
    "bspline_t": ("import numpy as np\nfrom scipy.interpolate import BSpline\n"
                  "b = BSpline(np.arange(8.), np.zeros(4), 3)\nb.t = np.arange(100000.)\n"
                  "v = b(np.arange(4.5, 99990, 1.0))\nleaked = bool((v != 0).any())\n"),
    "bspline_k": ("import numpy as np\nfrom scipy.interpolate import BSpline\n"
                  "b = BSpline(np.arange(8.), np.zeros(4), 3)\nb.k = 100000\n"
                  "v = b(np.arange(4.5, 5, 0.1))\nleaked = True\n"),
    "gaussian_kde_dataset": ("import numpy as np\nfrom scipy.stats import gaussian_kde\n"
                             "k = gaussian_kde(np.random.rand(10), weights=np.ones(10))\n"
                             "k.dataset = np.zeros((1, 10**8))\nv = k(np.array([0.0]))\nleaked = True\n"),
    "spherical_voronoi_regions": ("import numpy as np\nfrom scipy.spatial import SphericalVoronoi\n"
                                  "p = np.random.randn(50, 3)\np /= np.linalg.norm(p, axis=1)[:, None]\n"
                                  "sv = SphericalVoronoi(p)\nsv.regions = [[10**9, 10**9 + 1, 10**9 + 2]] * 50\n"
                                  "sv.sort_vertices_of_regions()\nleaked = True\n"),
    "linearnd_values": ("import numpy as np\nfrom scipy.interpolate import LinearNDInterpolator\n"
                        "ip = LinearNDInterpolator(np.random.rand(1000, 2), np.zeros(1000))\n"
                        "ip.values = np.zeros((1, 1))\nv = ip(np.random.rand(1000, 2) * 0.5 + 0.25)\n"
                        "leaked = bool((v != 0).any())\n"),
}


@pytest.mark.parametrize("route", sorted(ATTRIBUTE_ROUTES))
def test_scipy_objects_changed_after_construction_do_not_read_out_of_bounds(route):
    result = run_cell_in_child(ATTRIBUTE_ROUTES[route], report=("status", "ename"), ns=("leaked",),
                               hard_exit=True)
    assert "crashed" not in result, f"the process died: {result}"
    assert result["leaked"] is False, f"the evaluation read past the arrays: {result}"


HELD_ATTRIBUTE_ROUTES = {
    "ppoly_construct_fast": "from scipy.interpolate import PPoly\np = PPoly.construct_fast(np.zeros((1, 1)), "
                            "np.arange(100000.))\nv = p(np.arange(0.5, 99999, 1.0))\n",
    "ppoly_c": "from scipy.interpolate import PPoly\np = PPoly(np.zeros((1, 99999)), np.arange(100000.))\n"
               "p.c = np.zeros((1, 1))\nv = p(np.arange(0.5, 99999, 1.0))\n",
    "cubic_spline_x": "from scipy.interpolate import CubicSpline\ns = CubicSpline(np.arange(10.), np.arange(10.))\n"
                      "s.x = np.arange(100000.)\nv = s(np.arange(0.5, 99990, 1.0))\n",
    "ndbspline_c": "from scipy.interpolate import NdBSpline\nb = NdBSpline((np.arange(1000.),), "
                   "np.zeros(996), 3)\nb.c = np.zeros(1)\n",
    "regular_grid_values": "from scipy.interpolate import RegularGridInterpolator\n"
                           "r = RegularGridInterpolator((np.arange(9.), np.arange(9.)), np.zeros((9, 9)))\n"
                           "r.values = np.zeros((2, 2))\n",
    "splev_short_c": "from scipy.interpolate import splev\nv = splev(np.arange(4.5, 99990, 1.0), "
                     "(np.arange(100000.), np.zeros(1), 3))\n",
}


@pytest.mark.parametrize("route", sorted(HELD_ATTRIBUTE_ROUTES))
def test_scipy_objects_that_check_at_evaluation_refuse(route):
    result = run_reporting("import numpy as np\n" + HELD_ATTRIBUTE_ROUTES[route])
    assert "crashed" not in result, result
    assert result["status"] == "error", result


# --- N5-2: arrays a scipy object hands out and keeps using ------------------------------------------------------
# Delaunay.simplices, cKDTree.indices and pandas' SparseArray(kind='block').sp_index.blengths are the objects'
# own writable arrays; the Cython consumers (LinearNDInterpolator's evaluation, Delaunay.transform, the KD-tree's
# query, pandas' sparse block arithmetic) index other arrays with them unchecked.

INTERNAL_ARRAY_ROUTES = {
    "delaunay_simplices": ("import numpy as np\nfrom scipy.spatial import Delaunay\n"
                           "from scipy.interpolate import LinearNDInterpolator\n"
                           "tri = Delaunay(np.random.rand(100, 2))\ntri.simplices[:, 0] = 10**9\n"
                           "v = LinearNDInterpolator(tri, np.zeros(100))(np.random.rand(100, 2) * 0.5 + 0.25)\n"),
    "delaunay_transform": ("import numpy as np\nfrom scipy.spatial import Delaunay\n"
                           "tri = Delaunay(np.random.rand(100, 2))\ntri.simplices[:, 0] = 10**7\nv = tri.transform\n"),
    "pandas_sparse_block_lengths": ("import numpy as np, pandas as pd\nx = np.zeros(10**6)\nx[1] = 1.0\n"
                                    "sa = pd.arrays.SparseArray(x, kind='block', fill_value=0.0)\n"
                                    "sa.sp_index.blengths[:] = 10**6 - 2\n"
                                    "sb = pd.arrays.SparseArray(np.zeros(10**6), kind='block', fill_value=np.nan)\n"
                                    "v = np.asarray(sa + sb)\n"),
    "ckdtree_indices": ("import numpy as np\nfrom scipy.spatial import cKDTree\n"
                        "t = cKDTree(np.random.rand(100, 2))\nt.indices[:] = 10**8\n"
                        "v = t.query(np.array([0.5, 0.5]), k=3)\n"),
}


@pytest.mark.parametrize("route", sorted(INTERNAL_ARRAY_ROUTES))
def test_scipy_internal_index_arrays_written_by_the_cell_do_not_reach_c(route):
    result = run_reporting(INTERNAL_ARRAY_ROUTES[route])
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "error", result


def test_delaunay_neighbors_written_by_the_cell_stay_in_bounds():
    result = run_reporting("import numpy as np\nfrom scipy.spatial import Delaunay\ntri = Delaunay(np.random.rand(100, 2))\n"
                  "tri.neighbors[:] = 10**8\nv = tri.find_simplex(np.array([[5.0, 5.0]]), bruteforce=False)\n")
    assert "crashed" not in result, result


# From review 8 (docs/reviews.md, "Review 8").
def _run(cell: str, use: str = "", ns=()) -> dict:
    probe = ""
    if use:
        probe = "def probe_host(report):\n" + "\n".join("    " + line for line in use.splitlines()) + "\n"
    return run_cell_in_child(cell, report=("status", "ename", "evalue"), probe=probe, hard_exit=True, ns=ns)


# --- N8-1: pandas' custom window indexers: the cell's start/end bounds index the values in Cython ----------------

PEEK = '''
import numpy as np, pandas as pd
from pandas.api.indexers import BaseIndexer
def peek(addr):
    s = pd.Series(np.zeros(1))
    base = np.lib.array_utils.byte_bounds(s.to_numpy())[0]
    class Idx(BaseIndexer):
        def get_window_bounds(self, num_values=0, min_periods=None, center=None, closed=None, step=None):
            start = np.array([(addr - base) // 8], dtype=np.int64)
            return start, start + 1
    r = s.rolling(Idx(window_size=1), min_periods=1).sum()
    return int(np.array([r.iloc[0]]).view(np.int64)[0])
'''


def test_rolling_window_bounds_read_no_memory_by_address():
    cell = PEEK + (
        "class Obj:\n    pass\no = Obj()\n"
        "typeptr = peek(id(o) + 8) == id(Obj)\n"
        "b = b'SECRET-BYTES-IN-HOST'\n"
        "text = bytes(np.array([peek(id(b) + 32)]).view('S8')[0]) == b'SECRET-B'\n")
    result = _run(cell, ns=("typeptr", "text"))
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["text"], json.dumps(result)


def test_rolling_window_bounds_far_away_do_not_crash():
    cell = ("import numpy as np, pandas as pd\nfrom pandas.api.indexers import BaseIndexer\n"
            "class Idx(BaseIndexer):\n"
            "    def get_window_bounds(self, num_values=0, min_periods=None, center=None, closed=None, step=None):\n"
            "        start = np.full(num_values, 10**12, dtype=np.int64)\n"
            "        return start, start + 1\n"
            "r = pd.Series(np.arange(4.0)).rolling(Idx(window_size=1), min_periods=1).max()\n")
    result = _run(cell)
    assert "crashed" not in result, result


# --- N8-2: group labels from a cell ExtensionArray's factorize() index the Cython group kernels' buffers -----------

GROUPS = '''
import numpy as np, pandas as pd
class K(pd.arrays.IntegerArray):
    def factorize(self, use_na_sentinel=True):
        return np.array([0, LABEL], dtype=np.intp), pd.array([1], dtype='Int64')
k = K(np.array([1, 2]), np.array([False, False]))
r = pd.Series([1.5, 2.5]).groupby(k, sort=False).METHOD()
'''


@pytest.mark.parametrize("method", ["last", "cumsum", "var", "count"])
def test_groupby_labels_from_a_cell_factorize_do_not_write_memory(method):
    result = _run(GROUPS.replace("LABEL", "10**7").replace("METHOD", method))
    assert "crashed" not in result, result


# --- N8-3: a cell subclass of a scipy sparse class overrides `indices` with a property --------------------------

SPARSE = '''
import numpy as np
from scipy.sparse import csr_array
EVIL = []
class M(csr_array):
    @property
    def indices(self):
        if EVIL:
            return np.array(EVIL, dtype=np.int64)
        return self.saved
    @indices.setter
    def indices(self, v):
        self.saved = v
a = M((np.array([1.0]), np.array([0], dtype=np.int64), np.array([0, 1], dtype=np.int64)), shape=(1, 1))
bb = np.lib.array_utils.byte_bounds
'''


def test_sparse_subclass_indices_property_reads_no_memory_by_address():
    cell = SPARSE + (
        "x = np.zeros(1)\nclass Obj:\n    pass\no = Obj()\n"
        "EVIL.append((id(o) + 8 - bb(x)[0]) // 8)\n"
        "typeptr = int((a @ x).view(np.int64)[0]) == id(Obj)\n")
    result = _run(cell, ns=("typeptr",))
    assert "crashed" not in result, result
    assert not result["typeptr"], json.dumps(result)


def test_sparse_subclass_indices_property_writes_no_memory_by_address():
    cell = SPARSE + (
        "out = np.zeros((1, 1))\nvictim = np.zeros(4)\nb = bytes(16)\n"
        "EVIL.append((bb(victim)[0] + 16 - bb(out)[0]) // 8)\n"
        "try:\n    a.toarray(out=out)\nexcept Exception:\n    pass\n"
        "EVIL[0] = (id(b) + 32 - bb(out)[0]) // 8\n"
        "try:\n    a.toarray(out=out)\nexcept Exception:\n    pass\n"
        "array_written = victim[2] == 1.0\nbytes_written = b != bytes(16)\n")
    result = _run(cell, ns=("array_written", "bytes_written"))
    assert "crashed" not in result, result
    assert not result["array_written"] and not result["bytes_written"], json.dumps(result)


# --- held ---------------------------------------------------------------------------------------------------------

def test_sparse_int_index_without_integrity_check_is_bounds_checked_where_used():
    """IntIndex(..., check_integrity=False) (the class is reachable by type()) with an index past the length, made
    the SparseArray's sparse_index: to_dense, astype, cumsum, np.asarray, + a block array index with numpy's
    checks (IndexError), to_block_index refuses, int_op cannot run past its inputs."""
    cell = ("import numpy as np, pandas as pd\n"
            "sa = pd.arrays.SparseArray([0.0, 1.0, 0.0, 2.0], kind='integer')\nII = type(sa.sp_index)\n"
            "idx = II(4, np.array([1, 10**8], dtype=np.int32), check_integrity=False)\n"
            "s = pd.arrays.SparseArray(np.array([5.0, 6.0]), sparse_index=idx, fill_value=0.0)\n"
            "for f in (lambda: s.to_dense(), lambda: s.astype('Sparse[float32]'), lambda: s.cumsum(),\n"
            "          lambda: np.asarray(s), lambda: s + pd.arrays.SparseArray([0.0, 1, 0, 2], kind='block'),\n"
            "          lambda: idx.to_block_index(), lambda: s + s, lambda: s.take([0, 1, 2, 3])):\n"
            "    try:\n        f()\n    except (IndexError, ValueError):\n        pass\n")
    result = _run(cell)
    assert result.get("status") == "ok", result


def test_sparse_index_mismatched_with_its_values_is_refused():
    cell = ("import numpy as np, pandas as pd\n"
            "sa = pd.arrays.SparseArray([0.0, 1.0], kind='integer')\nII = type(sa.sp_index)\n"
            "idx = II(100000, np.arange(0, 100000, 2, dtype=np.int32), check_integrity=False)\n"
            "s = pd.arrays.SparseArray(np.array([5.0, 6.0]), sparse_index=idx, fill_value=0.0)\n")
    result = _run(cell)
    assert result["ename"] == "AssertionError", result


def test_csgraph_predecessor_arrays_are_checked():
    cell = ("import numpy as np\nfrom scipy.sparse import csgraph, csr_array\n"
            "g = csr_array(np.array([[0, 1.0, 0], [0, 0, 1.0], [0, 0, 0]]))\n"
            "try:\n    csgraph.reconstruct_path(g, np.array([-9999, 10**8, 1], dtype=np.int32))\n"
            "except IndexError:\n    pass\n"
            "d = csgraph.construct_dist_matrix(g.toarray(), np.array([[-9999, 10**8, 1]] * 3, dtype=np.int32))\n")
    result = _run(cell)
    assert result.get("status") == "ok", result


def test_bspline_subclass_coefficient_property_is_not_read_past():
    cell = ("import numpy as np\nfrom scipy.interpolate import BSpline\nEVIL = []\n"
            "class B(BSpline):\n    @property\n    def c(self):\n        return np.zeros(1) if EVIL else self.saved\n"
            "    @c.setter\n    def c(self, v):\n        self.saved = v\n"
            "b = B(np.arange(12.0), np.ones(8), 3)\nEVIL.append(1)\nr = b(np.linspace(3, 8, 1000))\n"
            "ones = bool(np.allclose(r, 1.0))\n")
    result = _run(cell, ns=("ones",))
    # held by evaluation (c is not read), and since review 8 refused at the class (gates._C_INDEX_DATA_MODULES)
    assert result["status"] == "ok" and result["ones"] or result["ename"] == "BuiltinDenied", result


# --- read-only views made writeable again (review 9, N9-1 and N9-2) ------------------------------------------
# The sandbox's read-only views of index arrays, and pandas' own read-only views of its codes, were views of
# writeable arrays: numpy let flags.writeable = True, flags['W'] = True or setflags(write=True) make them
# writeable again, and .base gave the writeable array itself. Closed where every route ends: ndarray.setflags
# is replaced for the process and refuses read-only -> writeable at a cell's request (guards._guard_array_unlock),
# and the base of a read-only array is read-only (Gates._base_of_read_only_arrays).

SPARSE_PEEK_POKE = '''
import numpy as np
from scipy.sparse import csr_array
bb = np.lib.array_utils.byte_bounds
A = csr_array((np.array([1.0]), np.array([0]), np.array([0, 1])), shape=(1, 1))
ix = A.indices            # the sandbox's read-only view of the real indices (Gates._index_arrays_read_only)
UNLOCK
def peek(addr):
    x = np.zeros(1)
    ix[0] = (addr - bb(x)[0]) // 8
    return int(np.array([(A @ x)[0]]).view(np.int64)[0])
def poke(addr, word):
    cur = np.array([peek(addr)], dtype=np.int64).view(np.float64)[0]
    new = np.array([word], dtype=np.int64).view(np.float64)[0]
    for add in (-cur, new):            # toarray(out=) adds data[k] at out + 8 * indices[k]
        A.data[0] = add
        out = np.zeros((1, 1))
        ix[0] = (addr - bb(out)[0]) // 8
        A.toarray(out=out)
class Obj:
    pass
o = Obj()
typeptr = peek(id(o) + 8) == id(Obj)
victim = b'AAAAAAAA-immutable'
poke(id(victim) + 32, int.from_bytes(b'PWNED!!!', 'little'))
written = victim == b'PWNED!!!-immutable'
'''

UNLOCKS = {
    "flags.writeable = True": "ix.flags.writeable = True",
    "setflags(write=True)": "ix.setflags(write=True)",
    "the view's .base": "ix = ix.base",
}


@pytest.mark.parametrize("unlock", sorted(UNLOCKS))
def test_index_array_views_stay_read_only(unlock):
    """N9-1 (FULL ESCAPE when found): A @ x read and A.toarray(out=) wrote any address through the unlocked indices."""
    result = run_reporting(SPARSE_PEEK_POKE.replace("UNLOCK", UNLOCKS[unlock]), ns=("typeptr", "written"), timeout=120)
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["written"], json.dumps(result)


DELAUNAY = '''
import numpy as np
from scipy.spatial import Delaunay
tri = Delaunay(np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
s = tri.simplices
s.flags.writeable = True
s[:, :] = 10**9
r = tri.find_simplex(np.array([[0.2, 0.2]]))
from scipy.interpolate import LinearNDInterpolator
v = LinearNDInterpolator(tri, np.arange(4.0))(np.array([[0.2, 0.2]]))
'''


def test_delaunay_simplices_view_stays_read_only():
    """N9-1 (the same view, Delaunay.simplices): pointed far away, the interpolator read them in C (segfault)."""
    result = run_reporting(DELAUNAY, timeout=120)
    assert "crashed" not in result, result
    assert result["ename"] == "CallDenied", result


CODES = '''
import numpy as np, pandas as pd
c = pd.Categorical([0, 1, 0], categories=np.arange(40000))
k = c.codes                # pandas' read-only view of c._codes (int32 here)
k.flags.writeable = True
k[0] = LABEL
r = pd.Series([1.5, 2.5, 3.5]).groupby(c, observed=False).METHOD()
'''


@pytest.mark.parametrize("method", ["cumsum", "cummax", "shift"])
def test_categorical_codes_stay_read_only(method):
    """N9-2: codes past the categories reached the Cython group kernels as labels (writes past their buffer)."""
    result = run_reporting(CODES.replace("LABEL", "10**9").replace("METHOD", method), timeout=120)
    assert "crashed" not in result, result
    assert result["ename"] == "CallDenied", result


MULTIINDEX = '''
import numpy as np, pandas as pd
mi = pd.MultiIndex.from_arrays([np.arange(40000), np.arange(40000)])
c = mi.codes[0]            # pandas' read-only view of the level's codes
c.flags.writeable = True
c[0] = 10**9
v = mi.values
'''


def test_multiindex_codes_stay_read_only():
    """N9-2 (MultiIndex.codes): MultiIndex.values read levels[code] in C (segfault)."""
    result = run_reporting(MULTIINDEX, timeout=120)
    assert "crashed" not in result, result
    assert result["ename"] == "CallDenied", result


def test_library_code_still_unlocks_its_own_arrays(run):
    """What numpy and pandas unlock themselves (broadcast_arrays of a writeable source, read_csv's dates) still works;
    a cell's own read-only array stays read-only (copy it instead)."""
    r = run("import io, numpy as np, pandas as pd\n"
            "b = np.broadcast_arrays(np.arange(3), np.zeros((2, 1)))[0]\n"
            "df = pd.read_csv(io.StringIO('a,b\\n2020-01-01,1\\n'), parse_dates=['a'])\n"
            "v = np.arange(3)[:2]\nv.flags.writeable = False\nc = v.copy()\nc[0] = 7\n"
            "print(b.flags.writeable, str(df['a'].dtype)[:10], c.tolist(), v.base.flags.writeable)\n"
            "v.flags.writeable = True\n")
    assert r.stdout.startswith("True datetime64 [7, 1] False"), r
    assert r.error_name == "CallDenied" and r.denied(line=9), r


# --- N10-2: a cell subclass of pandas.api.extensions.ExtensionArray: factorize() labels index Cython buffers --------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-2: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# N8-2's fix refuses cell subclasses of classes from "pandas.core.arrays", "pandas._libs" ... by the __module__ of
# each class in the MRO (gates._C_INDEX_DATA_MODULES). pandas 3 re-labels its public classes with set_module:
# ExtensionArray.__module__ is "pandas.api.extensions", so a direct subclass of the base is allowed. Its
# factorize() hands groupby labels that the Cython group kernels use unchecked (accum[lab] += val, out[i] =
# accum[lab]): memory past the buffer is read back into the result and written at a chosen offset.

EA = '''
import numpy as np, pandas as pd
class K(pd.api.extensions.ExtensionArray):
    def __init__(self, codes):
        self.codes = codes
    def __len__(self):
        return len(self.codes)
    @property
    def dtype(self):
        return pd.Int64Dtype()
    def __getitem__(self, i):
        return 1
    def isna(self):
        return np.zeros(len(self.codes), dtype=bool)
    def copy(self):
        return self
    def factorize(self, use_na_sentinel=True):
        return self.codes, pd.array([1], dtype='Int64')
'''

EA_READ = EA + '''
codes = np.arange(40, dtype=np.intp)       # one group: every label past 0 is past the 8-byte accumulator
r = pd.Series(np.zeros(40)).groupby(K(codes), sort=False).cumsum()
read = bool((r.to_numpy().view(np.int64)[1:] != 0).any())   # heap words past the buffer came back
'''

EA_WRITE = EA + '''
codes = np.array([0, 10**7], dtype=np.intp)
r = pd.Series([1.5, 2.5]).groupby(K(codes), sort=False).METHOD()
'''


def test_extension_array_factorize_labels_read_no_memory():
    result = run_reporting(EA_READ, ns=("read",), timeout=120)
    assert not result.get("read"), json.dumps(result)
    assert "crashed" not in result and result["ename"] == "BuiltinDenied", json.dumps(result)


@pytest.mark.parametrize("method", ["cumsum", "last"])
def test_extension_array_factorize_labels_write_no_memory(method):
    result = run_reporting(EA_WRITE.replace("METHOD", method), timeout=120)
    assert "crashed" not in result, result
    assert result["ename"] == "BuiltinDenied", json.dumps(result)


# --- N10-3: a cell subclass of pd.MultiIndex answers `codes` with a property ---------------------------------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-3: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# The subclass rule (gates._C_INDEX_DATA_MODULES) lists pandas' arrays, indexers and _libs but not its indexes.
# MultiIndex checks codes against levels when it is built (through the property: so the property answers honestly
# then); MultiIndex._values later reads self.codes[i] and hands it to algos.take_nd, whose Cython take (no bounds
# check, no wraparound) reads values[code] anywhere relative to the level's storage. Over an object level, the word
# read is taken as an object pointer: a bytes object holding the address of a fake bytearray header (the data of
# another bytes object) comes back as a bytearray over all memory.

MULTI = '''
import numpy as np, pandas as pd
bb = np.lib.array_utils.byte_bounds
EVIL = []
class Obj:
    pass
lev = pd.Index([Obj(), Obj()], dtype=object)
class M(pd.MultiIndex):
    @property
    def codes(self):
        return EVIL if EVIL else super().codes
    @property
    def levels(self):
        return [lev]
m = M(levels=[lev], codes=[[0, 1]])
data = bb(np.asarray(lev))[0]
fake = (2**40).to_bytes(8, 'little') + id(bytearray).to_bytes(8, 'little') + (2**62).to_bytes(8, 'little') * 2 + bytes(24)
ptr = (id(fake) + 32).to_bytes(8, 'little')
EVIL.append(np.array([(id(ptr) + 32 - data) // 8], dtype=np.intp))
ba = m.values[0][0]
o = Obj()
typeptr = int.from_bytes(ba[id(o) + 8:id(o) + 16], 'little') == id(Obj)
victim = b'AAAAAAAA-immutable'
ba[id(victim) + 32:id(victim) + 40] = b'PWNED!!!'
written = victim == b'PWNED!!!-immutable'
'''


def test_multiindex_subclass_codes_reach_no_memory():
    result = run_reporting(MULTI, ns=("typeptr", "written"), timeout=120)
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["written"], json.dumps(result)
    assert result["ename"] == "BuiltinDenied", json.dumps(result)


# --- N10-4: a cell subclass of scipy.stats.gaussian_kde answers `weights` with a property --------------------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-4: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# N5-1 guarded attribute writes on scipy objects, N8-3 refused subclasses of scipy.sparse/spatial/interpolate; scipy.stats
# is in neither list for subclasses. gaussian_kde.evaluate hands self.dataset and self.weights to the Cython
# gaussian_kernel_estimate, which loops over the dataset's points and reads values_[i] with no bounds check: a
# 1-element weights array under a 5,000-point dataset reads 39,992 bytes past it into the estimate (nan or heap-
# derived values come back; no error).

KDE = '''
import numpy as np
from scipy import stats
W = []
class G(stats.gaussian_kde):
    @property
    def weights(self):
        return W[0] if W else np.ones(self.n) / self.n
g = G(np.random.default_rng(0).normal(size=5000))
W.append(np.ones(1))
r = g.evaluate(np.array([0.0]))
computed = True          # an estimate from memory past the 8-byte weights came back
'''


def test_gaussian_kde_subclass_weights_read_no_memory():
    result = run_reporting(KDE, ns=("computed",), timeout=120)
    assert "crashed" not in result, result
    assert not result["computed"], json.dumps(result)


# --- N10-7: a library object half re-initialised by its own __init__, which fails after assigning --------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-7: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# Same door as N10-6 (`__init__` is a SAFE_DUNDER, read from any object), another sink: library constructors assign
# the new structure first and check it after; called again on a built object with inconsistent data, they raise
# half-way and the object keeps the unchecked structure, past every check of the index-array sink (attribute writes,
# subclasses, the sparse format check that runs while a cell runs raises, but only after `self.indices` was set):
#  - csr_array.__init__((data, [k], [0, 1]), shape=(1, 1)) raises "indices must be < 1" with indices = [k] in place:
#    A @ x reads x[k] at any address (id(o) + 8 gives id(type(o))), A.toarray(out=) adds at any address (an
#    immutable bytes object rewritten): the N9-1 primitives again;
#  - BSpline.__init__(4000 knots, 4 coefficients, 3) raises "inconsistent" with _t and _c in place (construct_fast's
#    N4-9 state): b(x) reads heap words past c;
#  - RegularGridInterpolator.__init__(3000x3000 grid, 2x2 values) raises after assigning both: the Cython linear
#    kernel indexes the 2x2 values by the grid's indices (heap words come back);
#  - a Categorical's own dtype object re-initialised (cat.dtype.__init__(categories=[10])): the codes 0..2 now index
#    a 1-element categories buffer (N9-2's sink: np.asarray(cat) returns heap words);
#  - cKDTree.__init__(3 points, leafsize=0) raises after replacing data: the old 2,000-index tree over 3 points,
#    query() reads past (or after) the data buffer (10**5 points: segfault).

SPARSE_REINIT = '''
import numpy as np
from scipy.sparse import csr_array
bb = np.lib.array_utils.byte_bounds
A = csr_array((np.array([1.0]), np.array([0]), np.array([0, 1])), shape=(1, 1))
def point(k, value=1.0):
    try:
        INIT((np.array([value]), np.array([k], dtype=np.int64), np.array([0, 1], dtype=np.int64)), shape=(1, 1))
    except ValueError:
        pass
def peek(addr):
    x = np.zeros(1)
    point((addr - bb(x)[0]) // 8)
    return int(np.array([(A @ x)[0]]).view(np.int64)[0])
class Obj:
    pass
o = Obj()
typeptr = peek(id(o) + 8) == id(Obj)
b = bytes(16)
out = np.zeros((1, 1))
point((id(b) + 32 - bb(out)[0]) // 8)
A.toarray(out=out)
bytes_written = b != bytes(16)
'''


def test_sparse_reinit_reads_and_writes_no_memory_by_address():
    result = run_reporting(SPARSE_REINIT.replace("INIT", "getattr(A, '__init__')"), ns=("typeptr", "bytes_written"),
                           timeout=120)
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["bytes_written"], json.dumps(result)


BSPLINE_REINIT = '''
import numpy as np
from scipy.interpolate import BSpline
b = BSpline(np.arange(8.0), np.ones(4), 3)
try:
    getattr(b, "__init__")(np.arange(4000.0), np.ones(4), 3)
except ValueError:
    pass
v = b(np.array([1000.5, 2500.5, 3500.5]))
read = bool(np.any(v != 0))    # 4 coefficients of 1.0 are all there is; anything else is memory past them
'''

RGI_REINIT = '''
import numpy as np
from scipy.interpolate import RegularGridInterpolator
r = RegularGridInterpolator((np.arange(2.0), np.arange(2.0)), np.zeros((2, 2)))
try:
    getattr(r, "__init__")((np.arange(3000.0), np.arange(3000.0)), np.zeros((2, 2)))
except ValueError:
    pass
v = r(np.array([[2500.5, 2500.5], [1000.2, 1500.7]]))
read = bool(np.any(v != 0))    # the 2x2 values are zeros; the 3000x3000 grid's indices read past them in Cython
'''

CATDTYPE_REINIT = '''
import numpy as np, pandas as pd
cat = pd.Categorical(np.array([10, 20, 30] * 100))
getattr(cat.dtype, "__init__")(categories=[10])     # the Categorical's own dtype object: its categories shrink
v = np.asarray(cat)                                  # take_nd(categories, codes 0..2) past the 1-element buffer
read = bool(np.any((v != 10) & (v != 20) & (v != 30)))
'''

KDTREE = '''
import numpy as np
from scipy.spatial import cKDTree
t = cKDTree(np.random.default_rng(0).random((2000, 2)))
try:
    getattr(t, "__init__")(np.zeros((3, 2)), leafsize=0)
except ValueError:
    pass
d, i = t.query(np.array([0.5, 0.5]), k=5)
read = bool(i.max() >= 3)      # neighbours found at indices past the 3-point data
'''


@pytest.mark.parametrize("cell", ["BSPLINE_REINIT", "RGI_REINIT", "CATDTYPE_REINIT", "KDTREE"])
def test_half_reinitialised_objects_read_no_memory(cell):
    result = run_reporting(globals()[cell], ns=("read",), timeout=120)
    assert "crashed" not in result, result
    assert not result["read"], json.dumps(result)


# --- N10-9: copy.deepcopy's memo, the cell's dict, answers a library object's state --------------------------------
# Review 10 (level none, 2026-11-26, against 0abcd2d), finding N10-9: fixed at e282dcb: its strict xfail is now a
# plain test (same attack, same assertions).
# deepcopy(x, memo) asks memo.get(id(obj)) before copying every object it meets, the values of a library object's
# state included, and uses what memo answers. The copy guards check that the copy is of the original's class and
# carries no raw protocols (guards._guard_copy, _guard_copy_reconstruct); nothing checks the state that goes into
# it. A dict subclass whose get() answers a cell array right after the key 'maxprint' (a dict's values are copied
# before their keys, so that is the next value: `indices`) makes a csr_array whose indices the cell keeps writable
# and unchecked: A @ x reads any address, toarray(out=) writes any address (the N9-1 primitives).

DEEPCOPY_MEMO = '''
import copy
import numpy as np
from scipy.sparse import csr_array
bb = np.lib.array_utils.byte_bounds
A = csr_array((np.array([1.0]), np.array([0]), np.array([0, 1])), shape=(1, 1))
EVIL = np.array([0], dtype=np.int64)
class Memo(dict):
    armed = False
    def get(self, key, default=None):
        if Memo.armed:
            Memo.armed = False
            return EVIL                     # the value deep-copied right after the key 'maxprint': indices
        if key == id('maxprint'):
            Memo.armed = True
        return default
B = copy.deepcopy(A, Memo())
def peek(addr):
    x = np.zeros(1)
    EVIL[0] = (addr - bb(x)[0]) // 8
    return int(np.array([(B @ x)[0]]).view(np.int64)[0])
class Obj:
    pass
o = Obj()
typeptr = peek(id(o) + 8) == id(Obj)
b = bytes(16)
out = np.zeros((1, 1))
EVIL[0] = (id(b) + 32 - bb(out)[0]) // 8
B.toarray(out=out)
bytes_written = b != bytes(16)
'''


def test_deepcopy_memo_plants_no_index_arrays():
    result = run_reporting(DEEPCOPY_MEMO, ns=("typeptr", "bytes_written"), timeout=120)
    assert "crashed" not in result, result
    assert not result["typeptr"] and not result["bytes_written"], json.dumps(result)


# -- review 14, R14-2 / R14-3: codes the cell still holds ------------------------------------------------------------
# pandas kept the codes array it was given (Categorical.from_codes validated it once; MultiIndex marked it read-only,
# but a view taken before stayed writable): codes written after the check indexed the categories/levels in C without
# bounds. While a cell runs both get copies.

_R14_LIMITS = {"timeout": 20.0, "ticks": 10**8, "memory_mb": 1024}
_R14_CATEGORICAL = r"""
import pandas as pd, numpy as np
codes = np.array([0, 1, 0, 1], dtype=np.int8)
c = pd.Categorical.from_codes(codes, categories=[1.5, 2.5])   # validated here, but codes is kept, not copied
codes[:] = [100, 110, 120, 127]                                # now past the 2 categories
try:
    got = np.asarray(c)
    leaked = not all(v in (1.5, 2.5) or v != v for v in got.tolist())   # anything but a category or NaN
except Exception:
    leaked = False
"""


# A view taken before pandas marks `codes` read-only, codes past the level written through it; over an object
# level the words read past the level are taken as object pointers.
_R14_MULTIINDEX = r"""
import pandas as pd, numpy as np
codes = np.array([0, 1], dtype=np.int8)
alias = codes[:]
mi = pd.MultiIndex(levels=[LEVEL], codes=[codes])
alias[:] = [100, 120]
try:
    got = [t[0] for t in list(mi)]
    FLAG = not all(v in VALUES or v != v for v in got)
except Exception:
    FLAG = False
"""
_R14_MULTIINDEX_FLOAT = (_R14_MULTIINDEX.replace("LEVEL", "[1.5, 2.5]").replace("VALUES", "(1.5, 2.5)")
                         .replace("FLAG", "leaked"))
_R14_MULTIINDEX_OBJECT = (_R14_MULTIINDEX.replace("LEVEL", 'np.array(["a", "b"], dtype=object)')
                          .replace("VALUES", '("a", "b")').replace("FLAG", "forged"))


@pytest.mark.parametrize("cell, flag", [("_R14_CATEGORICAL", "leaked"), ("_R14_MULTIINDEX_FLOAT", "leaked"),
                                        ("_R14_MULTIINDEX_OBJECT", "forged")])
def test_codes_the_cell_still_holds_are_not_the_ones_pandas_indexes_by(cell, flag):
    from childcell import run_cell_in_child

    result = run_cell_in_child(globals()[cell], limits=_R14_LIMITS, ns=(flag,), timeout=120, hard_exit=True)
    assert "crashed" not in result and not result[flag], (cell, result)
