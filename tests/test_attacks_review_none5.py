"""Fifth independent review at level `none`: attacks by an outsider told only the threat model.

Start 2026-11-26 16:43 UTC, end 17:16 UTC (by `date`), against HEAD 6875679 plus the uncommitted
gates.py/guards.py changes in the working tree at the time (the library-object write check for N4-2, which
N5-8 gets past). Each test performs the real attack in an Engine with the
data-science policy, in a child process (tests/childcell.py: the attack may crash the process, or needs the
host to act after the cell), and asserts that it failed and nothing happened. Open findings are strict
xfails named FINDING N5-k; attempts that were held are plain regression tests. N5-8 and N5-10 were
fixed by ba22066, N5-3 by a67866d, N5-11 by 8c1592b, N5-1 and N5-2 by the commit after it: regression tests now, with the variants found while fixing.

Log of what was tried (one line per attempt class) and the result:
  scipy objects whose invariants are checked by the constructor only, changed afterwards by attribute
    writes on the cell's own library instances (allowed: only module-level instances were reviewed):
    BSpline(t, c, k) then b.c = np.zeros(1) / b.t = np.arange(1e5): _bspl.evaluate_spline reads past
    c (heap words and pointers come back); b.k = 100000: the process segfaults (construct_fast, the
    N4-9 route, is refused by name; the same sink stays open by assignment); gaussian_kde(...,
    weights=) then k.dataset = <10**8 points>: gaussian_kernel_estimate reads past the weights (one
    point near the query reads one word; 10**8 points: segfault); LinearNDInterpolator(...).values =
    np.zeros((1, 1)): the Cython evaluation reads past values (997 of 1000 results are heap words);
    SphericalVoronoi(...).regions = [[10**9, ...]] then sort_vertices_of_regions(): segfault
                                                                  memory read / segfault   FINDING N5-1 (fixed)
    (PPoly/BPoly/NdPPoly construct_fast and .c/.x writes: checked at evaluation; NdBSpline.c,
    RegularGridInterpolator.values/.grid: read-only properties; splev/splint/bisplev with a short c:
    f2py checks)                                                                                held
  arrays that scipy/pandas objects hand out and keep using, written item by item: Delaunay(...).simplices
    [:, 0] = 10**9 then LinearNDInterpolator(tri, values) or tri.transform: segfault; cKDTree(...).indices[:]
    = 10**8 then query(): segfault; SparseArray(x, kind='block').sp_index.blengths[:] = n - 2 then sa + sb:
    segfault (10**6 points)                                      memory read / segfault   FINDING N5-2 (fixed)
    (Delaunay.neighbors garbage: find_simplex walks, returns -1; cKDTree.data rewritten: in bounds;
    SparseArray(kind='integer').sp_index.indices: a copy)                                      held
  numpy.random bit generators' state setters take positions unchecked: MT19937.state with pos=700 reads
    key[700...] (tempered heap words, invertible); Philox.state with buffer_pos=-100 returns raw 64-bit
    heap words before the buffer (heap addresses among them); RandomState.set_state((..., pos=10**5))
    segfaults; np.random.set_state(...) puts the bad position into the process-wide legacy RandomState:
    the host's next np.random draw after the cell segfaults the kernel
                                                   memory read / host crash after the cell FINDING N5-3 (fixed)
  a cell subclass of numpy.random.BitGenerator (class B(np.random.BitGenerator): pass): B(0) passes
    Generator's capsule check with NULL function pointers; the first draw segfaults        FINDING N5-7 (fixed)
    (Generator/RandomState/MT19937 subclasses skipping __init__: clean errors)                 held
  np.load(mmap_mode='r'), scipy.io.wavfile.read(mmap=True), netcdf_file(mmap=True): arrays over an mmap of a
    working-directory file (numpy.memmap itself is refused); open(name, 'w') truncates the file and the
    next read of the array kills the process with SIGBUS                        process crash  FINDING N5-5 (fixed)
  itertools.cycle(it) and itertools.chain.from_iterable([it]) nested 300,000 deep: not counted by the
    2,000-deep C-iterator rule; next() (or list, sum, pd.Series of it) segfaults           FINDING N5-6 (fixed)
    (chain, takewhile, tee, pairwise, groupby, zip(strict), starmap, accumulate, islice, dropwhile,
    compress, filterfalse: SizeDenied; csv.reader nesting: RecursionError)                     held
  class P(functools.partial): pass; P(np.savetxt, outside, ...) is "the cell's own callable" for the
    library-object write check in the working tree (gates._cell_or_builtin_callable: any object of a cell
    class), though its __call__ is partial's C tp_call and no cell code runs: stored as pandas' shared
    Float64Dtype's construct_array_type (pd.array([1.5, None]).dtype is one instance for the process),
    Holiday.observance, np.ma.sqrt.f; the host's next Series.convert_dtypes()/astype('Float64'), custom
    business day, np.ma.sqrt writes the file outside, unconfined (at HEAD a plain partial does it)
                                                                  file written by the host  FINDING N5-8 (fixed)
    (P objects, cached_property and custom descriptors as special methods: refused)            held
  np.info('x', toplevel=NAME) imports any installed module (recorded as information only in none4):
    unguarded __main__ modules run their programs in the kernel process: IPython.__main__ replaces the
    host's sys.excepthook with IPython's crash handler (kept after the cell), jupyterlab/nbconvert/
    jsonschema.__main__ grow sys.meta_path, f2py/coverage/tornado.test/jupyter_core main() run with the
    process's argv and end in SystemExit                      process-wide change  FINDING N5-9 (lesser, fixed)
  object arrays whose elements' __lt__/__eq__ (cell code) replace the array's elements during a C loop that
    keeps raw element pointers: ndarray.sort (quicksort, heapsort, stable) and ndarray.partition write
    freed pointers back (objects allocated afterwards show through the array's slots; quicksort, heapsort
    and partition mostly segfault); pandas Series/DataFrame.duplicated and drop_duplicates (khash keys
    borrowed from the array) segfault                              use after free / segfault  FINDING N5-11 (fixed)
    (np.sort(a), argsort, np.unique, lexsort, pd.unique/factorize/value_counts: no corruption seen)
                                                                                               held
  str repetition: gates._check_repeat counts one byte a character whatever the string's kind:
    '\\U0001F600' * 200_000_000 (800 MB) passes a 256 MB policy, C allocates it in one step
    (MemoryLimitExceeded afterwards); 2 GB policy: '\\U0001F600' * 2e9 asks for 8 GB
                                                                  allocation not refused   FINDING N5-10 (fixed)
    (padding, join, replace, translate of wide strings: counted at 4 bytes)                    held
  pandas' .str accessor pads and joins with Python's str methods inside pandas, past the size gates:
    pd.Series(['a']).str.pad(3e9, fillchar='\\U0001F600') (12 GB in one C call), .str.center(3e9),
    .str.zfill(3e9) (3 GB each under a 256 MB policy), Series.str.cat(sep='x' * 10**7) over 1000 rows
    (10 GB): MemoryError under a 4 GB RLIMIT_AS, nothing bounds it at level none
                                                                  allocation not refused   FINDING N5-4 (fixed)
    (bytes/bytearray.expandtabs, textwrap.indent, pandas float_format specs: SizeDenied; np.char.center/
    np.strings.expandtabs: numpy refuses the dtype)                                             held
  %timeit/%time: the statement becomes the body of a function the engine calls: 'yield 1' / 'return "x"'
    make the engine's helper fail with TypeError (a plain error, not an internal one); -p/-n past C int:
    OverflowError; -r 10**20: MemoryLimitExceeded; -v NAME parsed as an assignment target: rewritten like
    the cell ('__builtins__' refused)                                           clean errors    held
  help() / obj? on a cell object posing as a builtin (__get__ and a __text_signature__ naming
    sys.version): not evaluated (rendered as a class)                                          held
  process-wide state a cell may change: warnings.simplefilter('error'), decimal getcontext/setcontext/
    DefaultContext, np.seterr/seterrcall/set_printoptions, pandas options: the host sees its own;
    warnings.filters, json._default_encoder, pprint._dispatch, copy._deepcopy_dispatch, typing._cleanups,
    np.random.mtrand._rand: refused; csv Dialect attributes read-only                           held
  registries: register_extension_dtype (construct_from_string = staticmethod(partial(np.savetxt, ...))),
    register_dataframe_accessor: refused by object rule; Callable.register(str), Number.register(str):
    CallDenied                                                                                  held
  files: pd.read_csv('file:///...'), read_json file URL, pio.read_json, np.loadtxt/genfromtxt of a file
    URL, /proc/self/cwd/.., /proc/self/root/..., /proc/self/fd/0, dateutil.tz.tzfile, io.open/io.FileIO,
    glob of an absolute directory and root_dir=, read_xml with an external entity (expat does not load
    it), NumPy DataSource                                                                       held
  memory: as_strided, ndarray.strides write, ndarray(buffer=too small), np.searchsorted(sorter=bad),
    scipy.linalg.blas.dcopy(n=) past x, ndarray.resize(refcheck=False) with a live view,
    pandas.core take_nd (module not granted), np.ctypeslib, structured dtypes with overlapping object
    fields, np.void/rec/recarray over bytes with object fields                                  held
  pandas eval/query: str padding/expandtabs/replace/join/format/%-format through '@x.ljust(...)',
    locals, bytes.center: SizeDenied; type() with three arguments: refused                    held
  exceptions: __exit__'s traceback argument (tb_frame, tb_next refused), gi_frame/gi_code refused,
    a 300,000-long __cause__ chain rendered cleanly                                             held
  multiprocessing through scipy workers=2 (differential_evolution, quad_vec, brute, shgo): FileDenied
                                                                                               held
  %%writefile with '.', '', NUL, /dev/stdout, /proc/self/fd/1, .hidden, __pycache__, ~, $HOME: clean
    errors or FileDenied                                                                       held
"""
from __future__ import annotations

import json

import pytest

from childcell import host_probe, run_cell_in_child


def _run(cell: str, **kwargs) -> dict:
    return run_cell_in_child(cell, report=("status", "ename", "evalue"), hard_exit=True, **kwargs)


def _in_engine(source: str, workdir) -> tuple[dict, str]:
    """One cell in an Engine of this process (for cells that cannot crash it): the done record and stdout."""
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS
    events = []
    done = Engine(PRESETS["data-science"], workdir=str(workdir)).run_cell(source, emit=events.append)
    return done, "".join(e.get("text", "") for e in events if e.get("type") == "stream")


@pytest.fixture
def workdir(tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    return d


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
    result = _run("import numpy as np\n" + HELD_ATTRIBUTE_ROUTES[route])
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
    result = _run(INTERNAL_ARRAY_ROUTES[route])
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "error", result


def test_delaunay_neighbors_written_by_the_cell_stay_in_bounds():
    result = _run("import numpy as np\nfrom scipy.spatial import Delaunay\ntri = Delaunay(np.random.rand(100, 2))\n"
                  "tri.neighbors[:] = 10**8\nv = tri.find_simplex(np.array([[5.0, 5.0]]), bruteforce=False)\n")
    assert "crashed" not in result, result


# --- N5-3: numpy.random's state setters take a position past the state ------------------------------------------
# MT19937.state = {..., 'pos': 700} and Philox.state = {..., 'buffer_pos': -100} are stored unchecked; each draw
# then reads key[pos++] / buffer[buffer_pos++] past the state struct: MT19937's output is the heap word
# tempered (invertible), Philox's is the raw 64-bit word (heap addresses come back). RandomState.set_state with
# pos=10**5 segfaults. np.random.set_state does the same to the process-wide legacy RandomState: the host's
# next np.random draw after the cell crashes the kernel.

RNG_READS = {
    # variants of the same setters (added with the fix)
    "mt19937_setattr": ("bg = np.random.MT19937(1)\nst = bg.state\nst['state']['pos'] = 10**5\nsetattr(bg, 'state', st)\n"
                        "v = np.random.Generator(bg).integers(0, 2**32, size=8, dtype=np.uint32)\n"),
    "mt19937_short_key": ("bg = np.random.MT19937(1)\nst = bg.state\nst['state']['key'] = st['state']['key'][:3]\n"
                          "bg.state = st\nv = np.random.Generator(bg).integers(0, 2**32, size=8, dtype=np.uint32)\n"),
    "generator_bit_generator": ("g = np.random.default_rng(1)\nst = np.random.Philox(1).state\nst['buffer_pos'] = -5\n"
                                "g2 = np.random.Generator(np.random.Philox(2))\ng2.bit_generator.state = st\n"
                                "v = g2.integers(0, 2**63, size=8)\n"),
    "randomstate_from_the_class": ("rs = np.random.RandomState(1)\ns = rs.get_state()\n"
                                   "np.random.RandomState.set_state(rs, (s[0], s[1], 100000))\nv = rs.randint(0, 9)\n"),
    "legacy_dict_form": ("rs = np.random.RandomState(1)\ns = rs.get_state(legacy=False)\ns['state']['pos'] = 10**5\n"
                         "rs.set_state(s)\nv = rs.randint(0, 9)\n"),
    "mt19937_pos": ("bg = np.random.MT19937(1)\nst = bg.state\nst['state']['pos'] = 700\nbg.state = st\n"
                    "v = np.random.Generator(bg).integers(0, 2**32, size=8, dtype=np.uint32)\n"),
    "philox_buffer_pos": ("bg = np.random.Philox(1)\nst = bg.state\nst['buffer_pos'] = -100\nbg.state = st\n"
                          "v = np.random.Generator(bg).integers(0, 2**63, size=8)\n"),
    "randomstate_set_state": ("rs = np.random.RandomState(1)\ns = rs.get_state()\n"
                              "rs.set_state((s[0], s[1], 100000))\nv = rs.randint(0, 2**31, size=8)\n"),
}


# FINDING N5-3, fixed: every state setter gets a checked copy (guards.checked_random_state).
@pytest.mark.parametrize("route", sorted(RNG_READS))
def test_bit_generator_state_positions_are_checked(route):
    result = _run("import numpy as np\n" + RNG_READS[route])
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "error", f"the draws read past the generator's state: {result}"


def test_saving_and_restoring_a_generators_state_still_works():
    result = _run("import numpy as np\n"
                  "bg = np.random.MT19937(3)\nst = bg.state\na = np.random.Generator(bg).random(3)\nbg.state = st\n"
                  "b = np.random.Generator(bg).random(3)\n"
                  "ph = np.random.Philox(3)\nsp = ph.state\nc = np.random.Generator(ph).random(3)\nph.state = sp\n"
                  "d = np.random.Generator(ph).random(3)\n"
                  "s = np.random.get_state()\ne = np.random.rand(3)\nnp.random.set_state(s)\nf = np.random.rand(3)\n"
                  "rs = np.random.RandomState(5)\nr = rs.get_state(legacy=False)\ng = rs.rand(2)\nrs.set_state(r)\n"
                  "v = bool((a == b).all() and (c == d).all() and (e == f).all() and (g == rs.rand(2)).all())\n",
                  ns=("v",))
    assert result["status"] == "ok" and result.get("v") is True, result


HOST_DRAWS = """
def probe_host(report):
    import numpy as np
    report['host_drew'] = int(np.random.randint(0, 2**31, size=1000).sum()) >= 0
"""


@pytest.mark.parametrize("setter", ["np.random.set_state", "set_state", "np.random.mtrand.set_state"])
def test_global_random_state_set_by_a_cell_does_not_crash_the_host(setter):
    result = run_cell_in_child("import numpy as np\nimport numpy.random.mtrand\nfrom numpy.random import set_state\n"
                               f"s = np.random.get_state()\n{setter}((s[0], s[1], 10**6))\n",
                               report=("status", "ename"), probe=HOST_DRAWS, hard_exit=True)
    assert result.get("ename") == "ValueError", result
    assert "crashed" not in result, f"the host crashed after the cell: {result}"


# --- N5-4: pandas' .str accessor pads and joins past the size gates ---------------------------------------------
# The padding gate estimates the cell's own str.center/ljust/zfill/expandtabs calls; pandas calls the same
# methods from its own code (lib.map_infer over the values) and joins with sep in Python, where no gate looks.

STR_SIZES = {
    "pad_wide_fill": "s = pd.Series(['a']).str.pad(3_000_000_000, fillchar='\\U0001F600')\n",
    "center": "s = pd.Series(['a']).str.center(3_000_000_000)\n",
    "zfill": "s = pd.Series(['a']).str.zfill(3_000_000_000)\n",
    "cat_sep": "s = pd.Series(['a' * 1000] * 1000).str.cat(sep='x' * 10_000_000)\n",
}


# FINDING N5-4, fixed: the interpreter's large allocations are bounded while a cell runs (_numpyguard.c), so
# pandas' own calls of str's methods are refused before C allocates.
@pytest.mark.parametrize("route", sorted(STR_SIZES))
def test_pandas_string_accessor_sizes_are_estimated(route):
    result = run_cell_in_child("import pandas as pd\n" + STR_SIZES[route],
                               limits={"timeout": 5.0, "ticks": 10**8, "memory_mb": 256},
                               rlimits={"RLIMIT_AS": 4 << 30}, report=("status", "ename", "evalue"), timeout=180)
    assert result.get("ename") == "MemoryLimitExceeded" and "refused before it was made" in result["evalue"], result


HELD_SIZES = {
    "bytes_expandtabs": "x = (b'\\t' * 100).expandtabs(300_000_000)\n",
    "bytearray_expandtabs": "x = bytearray(b'\\t' * 100).expandtabs(300_000_000)\n",
    "textwrap_indent": "import textwrap\nx = textwrap.indent('a\\n' * 10, 'b' * 300_000_000)\n",
    "pandas_float_format": "import pandas as pd\nx = pd.Series([1.5]).to_string(float_format='{:>3000000000}'.format)\n",
}


@pytest.mark.parametrize("route", sorted(HELD_SIZES))
def test_padding_routes_that_are_estimated(route):
    result = run_cell_in_child(HELD_SIZES[route], limits={"timeout": 30.0, "ticks": 10**8, "memory_mb": 256},
                               rlimits={"RLIMIT_AS": 4 << 30}, report=("status", "ename"), timeout=180)
    assert result.get("ename") == "SizeDenied", result


# --- held: magics, help, process-wide state, registries, files ------------------------------------------------

@pytest.mark.parametrize("cell", ["%timeit -n 1 -r 1 yield 1", "%timeit -n 1 -r 1 return 'x'",
                                  "%timeit -p 99999999999999999999 -n1 -r1 x=1",
                                  "%timeit -n 99999999999999999999 -r1 x=1",
                                  "%timeit -n1 -r1 -v __builtins__ x=1", "x = %time",
                                  "def f():\n    x = %timeit -n1 -r1 -o yield 1\n    return x\nprint(list(f()))"])
def test_timeit_statements_that_break_the_helper_are_clean_errors(workdir, cell):
    done, _ = _in_engine(cell, workdir)
    assert done["status"] == "error", done
    assert done["error"]["ename"] != "SandboxInternalError", done


def test_help_on_a_cell_object_posing_as_a_builtin_evaluates_no_text_signature(workdir):
    done, stdout = _in_engine("class D:\n    __text_signature__ = '(a=sys.version)'\n    def __get__(self, obj, typ=None):\n"
            "        return self\n    def __call__(self, a=1):\n        pass\nhelp(D())\n", workdir)
    assert done["status"] == "ok", done
    assert "3.11" not in stdout and "a=" not in stdout, stdout


PROCESS_STATE = {
    "warnings_simplefilter": ("import warnings\nwarnings.simplefilter('error')\n",
                              "import warnings\n    try:\n        warnings.warn('host', UserWarning)\n"
                              "        report['changed'] = False\n    except UserWarning:\n"
                              "        report['changed'] = True"),
    "decimal_context": ("import decimal\ndecimal.getcontext().prec = 3\n",
                        "import decimal\n    report['changed'] = decimal.getcontext().prec == 3"),
    "decimal_setcontext": ("import decimal\ndecimal.setcontext(decimal.Context(prec=3))\n",
                           "import decimal\n    report['changed'] = decimal.getcontext().prec == 3"),
    "decimal_default_context": ("import decimal\ndecimal.DefaultContext.prec = 3\n",
                                "import decimal\n    report['changed'] = decimal.DefaultContext.prec == 3"),
    "numpy_seterr": ("import numpy as np\nnp.seterr(all='raise')\n",
                     "import numpy as np\n    report['changed'] = np.geterr()['divide'] == 'raise'"),
    "numpy_seterrcall": ("import numpy as np\nnp.seterrcall(print)\nnp.seterr(all='call')\n",
                         "import numpy as np\n    report['changed'] = np.geterrcall() is not None"),
    "pandas_option": ("import pandas as pd\npd.set_option('display.max_rows', 3)\n",
                      "import pandas as pd\n    report['changed'] = pd.get_option('display.max_rows') == 3"),
}


@pytest.mark.parametrize("route", sorted(PROCESS_STATE))
def test_process_wide_settings_stay_the_hosts(route):
    cell, use = PROCESS_STATE[route]
    result = run_cell_in_child(cell, report=("status", "ename"), probe="def probe_host(report):\n    " + use + "\n")
    assert "crashed" not in result, result
    assert result.get("changed") is False, result


@pytest.mark.parametrize("cell", [
    "import warnings\nwarnings.filters.insert(0, ('error', None, Warning, None, 0))\n",
    "import json\njson._default_encoder.indent = 5\n",
    "import copy\ncopy._deepcopy_dispatch[int] = print\n",
    "import numpy as np\nnp.random.mtrand._rand.seed(1)\n",
    "import collections.abc\ncollections.abc.Callable.register(str)\n",
    "import numbers\nnumbers.Number.register(str)\n",
    "import functools, numpy as np, pandas as pd\nclass PlantedDtype(pd.api.extensions.ExtensionDtype):\n"
    "    name = 'planted'\npd.api.extensions.register_extension_dtype(PlantedDtype)\n",
    "import pandas as pd\n@pd.api.extensions.register_dataframe_accessor('planted')\nclass Acc:\n"
    "    def __init__(self, obj):\n        pass\n",
])
def test_shared_registries_and_private_state_are_refused(workdir, cell):
    done, _ = _in_engine(cell, workdir)
    assert done["status"] == "error" and done["denials"], done


@pytest.mark.parametrize("read", [
    "pd.read_csv('file://{secret}')", "pd.read_csv('file://localhost{secret}')", "pio.read_json('{secret}')",
    "pd.read_csv('/proc/self/root{secret}')", "pd.read_csv('/proc/self/cwd/../outside/secret.csv')",
    "np.loadtxt('file://{secret}', delimiter=',', skiprows=1)", "glob.glob('{outside}/*')",
    "glob.glob('*', root_dir='{outside}')",
])
def test_library_reads_outside_the_working_directory_are_refused(workdir, outside, read):
    secret = outside / "secret.csv"
    secret.write_text("a,b\n1,2\n")
    cell = ("import numpy as np, pandas as pd, plotly.io as pio, glob\n"
            f"got = {read.format(secret=secret, outside=outside)}\nprint(got)\n")
    done, stdout = _in_engine(cell, workdir)
    assert "secret.csv" not in stdout and "1" not in stdout.replace(str(outside), ""), stdout
    assert (done["error"] or {}).get("ename") != "SandboxInternalError", done


@pytest.mark.parametrize("cell", [
    "a = np.zeros(2)\nb = np.lib.stride_tricks.as_strided(a, shape=(100000,), strides=(8,))\n",
    "a = np.zeros(2)\na.strides = (10**6,)\n",
    "a = np.ndarray((10,), dtype=float, buffer=b'x' * 16)\n",
    "v = np.searchsorted(np.arange(3.), 1.5, sorter=np.array([0, 10**6, 2]))\n",
    "from scipy.linalg import blas\nv = blas.dcopy(np.zeros(2), np.zeros(1000), n=1000)\n",
    "a = np.zeros(100000)\nb = a[:]\na.resize(10**7, refcheck=False)\n",
    "import pandas as pd\nv = pd.core.array_algos.take.take_nd(np.zeros(2), np.array([10**6]), allow_fill=True)\n",
])
def test_numpy_memory_routes_are_refused(cell):
    result = _run("import numpy as np\n" + cell)
    assert "crashed" not in result, result
    assert result["status"] == "error", result


# --- N5-5: memory-mapped arrays a library hands out, over a file the cell then truncates --------------------------
# numpy.memmap is refused by name, but np.load(mmap_mode='r'), scipy.io.wavfile.read(mmap=True) and
# scipy.io.netcdf_file(mmap=True) return arrays over an mmap of a working-directory file. The cell truncates
# the file (open(name, 'w')); the next read of the array touches pages past the end of the file: SIGBUS, and
# the kernel process dies at level none.

MMAP_ROUTES = {
    "np_load_mmap_mode": ("np.save('a.npy', np.ones(10**6))\nm = np.load('a.npy', mmap_mode='r')\n"
                          "open('a.npy', 'w').close()\nv = m.sum()\n"),
    "wavfile_mmap": ("from scipy.io import wavfile\nwavfile.write('a.wav', 8000, np.ones(10**6, dtype=np.int16))\n"
                     "rate, m = wavfile.read('a.wav', mmap=True)\nopen('a.wav', 'w').close()\nv = m.sum()\n"),
    "netcdf_mmap": ("from scipy.io import netcdf_file\nf = netcdf_file('c.nc', 'w')\nf.createDimension('x', 10**6)\n"
                    "var = f.createVariable('v', 'd', ('x',))\nvar[:] = 1.0\nf.close()\n"
                    "g = netcdf_file('c.nc', 'r', mmap=True)\nd = g.variables['v'].data\n"
                    "open('c.nc', 'w').close()\nv = d.sum()\n"),
}


# FINDING N5-5, fixed: no array a cell holds lies over a map of a file: np.load, wavfile.read and netcdf_file
# read into memory instead (guards), so the values still come. (Maps inside one library call stay: pandas 3
# maps a big CSV for the length of read_csv.)
@pytest.mark.parametrize("route", sorted(MMAP_ROUTES))
def test_memory_mapped_arrays_over_a_truncated_file_do_not_crash_the_process(route):
    result = _run("import numpy as np\n" + MMAP_ROUTES[route])
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "ok", result   # read into memory: truncating the file later changes nothing


def test_the_mmap_module_is_not_handed_out():
    result = _run("import mmap\n")
    assert "crashed" not in result, result
    assert result["status"] == "error" and result["ename"] == "ImportDenied", result


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
    result = _run("import itertools\n" + NESTED_ITERATORS[route])
    assert "crashed" not in result, f"the process died: {result}"


@pytest.mark.parametrize("wrapper", ["itertools.chain(it)", "itertools.takewhile(bool, it)", "itertools.tee(it, 1)[0]",
                                     "itertools.pairwise(it)", "itertools.groupby(it)", "zip(it, strict=True)",
                                     "itertools.starmap(tuple, it)", "itertools.accumulate(it)"])
def test_counted_iterator_nesting_is_refused(wrapper):
    result = _run(f"import itertools\nit = iter([(1,)])\nfor i in range(300000):\n    it = {wrapper}\nx = next(it)\n")
    assert result.get("ename") == "SizeDenied", result


# --- N5-7: a cell subclass of numpy.random.BitGenerator ------------------------------------------------------------
# BitGenerator.__init__ (run by the subclass) makes the capsule over its bitgen_t struct, whose function pointers
# only the concrete generators fill in; Generator(B(0)).random() calls a NULL function pointer.

# FINDING N5-7, fixed: the abstract BitGenerator cannot be subclassed by a cell (gates._class_refusal).
@pytest.mark.parametrize("make", ["class B(np.random.BitGenerator):\n    pass\n",
                                  "B = type('B', (np.random.bit_generator.BitGenerator,), {})\n"])
def test_bit_generator_subclass_without_functions_does_not_crash(make):
    result = _run("import numpy as np\nimport numpy.random.bit_generator\n" + make +
                  "g = np.random.Generator(B(0))\nv = g.random()\n")
    assert "crashed" not in result, f"the process died: {result}"
    assert result["ename"] == "BuiltinDenied", result


@pytest.mark.parametrize("cls", ["np.random.Generator", "np.random.RandomState", "np.random.MT19937"])
def test_random_classes_without_their_init_refuse(cls):
    result = _run(f"import numpy as np\nclass C({cls}):\n    def __init__(self):\n        pass\n"
                  "c = C()\nv = np.random.Generator(c).random() if isinstance(c, np.random.BitGenerator) else "
                  "c.random_sample() if hasattr(c, 'random_sample') else c.random()\n")
    assert "crashed" not in result, result
    assert result["status"] == "error", result


# --- N5-8: a cell subclass of functools.partial is "the cell's own callable" -------------------------------------
# The library-object write check (in the working tree as this review ran, for N4-2: `libobj.name = v` takes data
# and the cell's own functions only; gates._library_object_write / _cell_or_builtin_callable) counts any object
# of a class the cell made as the cell's code: "its __call__ the special-method rule makes the cell's". A
# class P(functools.partial): pass has no __call__ of its own; it inherits partial's C tp_call, which calls the
# wrapped library function with the stored arguments and runs no cell code. P(np.savetxt, outside, ...) is
# accepted as Holiday.observance, np.ma.sqrt.f (the N4-2 routes), and on pandas' process-wide Float64Dtype
# instance (reached as a returned value: pd.array([1.5, None]).dtype is the one instance pandas keeps in a
# module-level table) as construct_array_type. The host's next use (a custom business day, np.ma.sqrt, and
# Series.convert_dtypes() / astype('Float64') / pd.concat of masked floats) writes the file, unconfined.
# (At HEAD, without that check, a plain partial does the same through every route.) The class-statement rule
# for special methods refuses P objects (held below).

PARTIAL_SUBCLASS = ("import functools, numpy as np, pandas as pd\nclass P(functools.partial):\n    pass\n"
                    "W = P(np.savetxt, {target!r}, np.array(['echo PWNED-BY-REVIEW5'], dtype=object), "
                    "'%s', ' ', '\\n', '')\n")

PARTIAL_SUBCLASS_ROUTES = {
    "shared_float64_dtype": ("pd.array([1.5, None]).dtype.construct_array_type = W\n",
                             "import pandas as pd\npd.Series([1.5, None]).convert_dtypes()"),
    "holiday_observance": ("import pandas.tseries.holiday as h\nh.USMemorialDay.observance = W\n",
                           "import pandas as pd\nfrom pandas.tseries.holiday import USFederalHolidayCalendar\n"
                           "pd.offsets.CustomBusinessDay(calendar=USFederalHolidayCalendar())"),
    "numpy_ma_operation": ("np.ma.sqrt.f = W\n", "import numpy as np\nnp.ma.sqrt(np.ma.array([4.0]))"),
}



# FINDING N5-8, fixed: an object of a cell class is the cell's callable only if its __call__ is the cell's
# function (gates._cell_or_builtin_callable), and pandas' extension dtypes are read-only (shared by the process).
@pytest.mark.parametrize("route", sorted(PARTIAL_SUBCLASS_ROUTES))
def test_partial_subclass_on_a_library_object_does_not_reach_the_host(outside, route):
    target = outside / f"partial-subclass-{route}.sh"
    plant, use = PARTIAL_SUBCLASS_ROUTES[route]
    result = run_cell_in_child(PARTIAL_SUBCLASS.format(target=str(target)) + plant, report=("status", "ename"),
                               probe=host_probe(use))
    assert "crashed" not in result, result
    assert not target.exists(), f"the host ran the cell's planted callable unconfined: {json.dumps(result)}"


@pytest.mark.parametrize("name", ["__repr__", "__eq__", "__call__"])
def test_partial_subclass_is_refused_as_a_special_method(workdir, name):
    done, _ = _in_engine("import functools\nclass P(functools.partial):\n    pass\n"
                         f"class C:\n    {name} = P(print, 'x')\n", workdir)
    assert done["status"] == "error" and done["error"]["ename"] == "AttributeDenied", done


# --- N5-9 (lesser): np.info(toplevel=NAME) runs installed programs in the kernel process ----------------------------
# Recorded as "information only" in review none4: numpy's info() imports any module by name to list its
# names. Importing an unguarded __main__ module runs that program: IPython.__main__ (start_ipython(): the app
# replaces sys.excepthook with its crash handler, which the host keeps after the cell and which writes crash
# reports under ~/.ipython), jupyterlab/nbconvert/jsonschema.__main__ (sys.meta_path grows), numpy.f2py,
# coverage, tornado's test runner, jupyter_core (parses the kernel's argv and looks for jupyter-* commands):
# each ends in SystemExit inside the cell, after running with the process's argv and the working directory.

HOST_HOOKS = """
import sys
BEFORE = (sys.excepthook, len(sys.meta_path))
def probe_host(report):
    import sys
    report['excepthook_changed'] = sys.excepthook is not BEFORE[0]
    report['meta_path_changed'] = len(sys.meta_path) != BEFORE[1]
"""


# FINDING N5-9, fixed: the audit hook refuses importing any __main__ module while a cell runs.
@pytest.mark.parametrize("name", ["IPython.__main__", "jupyterlab.__main__", "numpy.f2py.__main__", "json.__main__"])
def test_numpy_info_toplevel_does_not_run_installed_programs(name):
    result = run_cell_in_child(f"import numpy as np\nnp.info('zzz', toplevel={name!r})\n",
                               report=("status", "ename"), probe=HOST_HOOKS, limits={"timeout": 30.0}, timeout=180)
    assert "crashed" not in result, result
    assert result["excepthook_changed"] is False and result["meta_path_changed"] is False, result
    assert result["ename"] == "OperationDenied", result


# --- N5-10: the repetition gate counts a str's characters as bytes ------------------------------------------------
# gates._check_repeat estimates seq * n as len(seq) * n * 1 for str, whatever the string's kind: a string with
# one character past U+FFFF is stored at 4 bytes per character. '\U0001F600' * 200_000_000 is estimated at
# 200 MB and passes a 256 MB policy; C allocates 800 MB in one step (the sampler reports MemoryLimitExceeded
# afterwards). Under the default 2048 MB policy, '\U0001F600' * 2_000_000_000 passes and asks for 8 GB.
# (The padding, join, replace and translate gates count 4 bytes a character: held.)

WIDE_REPEATS = {
    "str_times_n": "x = '\\U0001F600' * 200_000_000\n",
    "n_times_str": "x = 200_000_000 * '\\U0001F600'\n",
    "in_place": "x = '\\U0001F600'\nx *= 200_000_000\n",
    "two_byte_kind": "x = '\\u20ac' * 200_000_000\n",
}


# FINDING N5-10, fixed: the repetition gate counts the bytes of the str's kind (gates._char_width).
@pytest.mark.parametrize("route", sorted(WIDE_REPEATS))
def test_repeating_a_wide_string_is_estimated_in_bytes(route):
    result = run_cell_in_child(WIDE_REPEATS[route], limits={"timeout": 10.0, "memory_mb": 256},
                               rlimits={"RLIMIT_AS": 6 << 30}, report=("status", "ename"), timeout=180)
    assert result.get("ename") == "SizeDenied", result


@pytest.mark.parametrize("cell", ["x = 'a'.center(250_000_000, '\\U0001F600')\n", "x = '\\U0001F600'.zfill(250_000_000)\n",
                                  "x = ('\\U0001F600' + '\\t').expandtabs(250_000_000)\n",
                                  "x = ('\\U0001F600' * 1000).join(['a'] * 250_000)\n",
                                  "x = ('a' * 1000).replace('a', '\\U0001F600' * 250_000)\n"])
def test_wide_padding_and_joins_are_estimated_in_bytes(cell):
    result = run_cell_in_child(cell, limits={"timeout": 10.0, "memory_mb": 512}, rlimits={"RLIMIT_AS": 6 << 30},
                               report=("status", "ename"), timeout=180)
    assert result.get("ename") == "SizeDenied", result



# --- held: scipy's process pools, tracebacks and generators' frames ------------------------------------------------

@pytest.mark.parametrize("call", ["differential_evolution(np.sum, [(0, 1)], workers=2, maxiter=1, updating='deferred')",
                                  "brute(np.sum, [(0, 1)], workers=2)"])
def test_scipy_worker_pools_start_no_process(call):
    result = run_cell_in_child(f"import numpy as np\nfrom scipy.optimize import differential_evolution, brute\n"
                               f"r = {call}\n", report=("status", "ename"), limits={"timeout": 20.0}, timeout=180)
    assert result["status"] == "error" and result["ename"] == "FileDenied", result


@pytest.mark.parametrize("read", ["TB.tb_frame", "TB.tb_next", "g().gi_frame", "g().gi_code"])
def test_tracebacks_handed_to_exit_and_generator_frames_stay_hidden(workdir, read):
    done, _ = _in_engine("class CM:\n    def __enter__(self):\n        return self\n"
                         "    def __exit__(self, t, v, tb):\n        global TB\n        TB = tb\n        return True\n"
                         "with CM():\n    1/0\ndef g():\n    yield 1\n" f"x = {read}\n", workdir)
    assert done["status"] == "error" and done["error"]["ename"] == "AttributeDenied", done


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


def test_honest_in_place_sorts_of_object_arrays_still_sort(workdir):
    done, _ = _in_engine("import numpy as np, pandas as pd\n"
                         "a = np.array([3, 1, 2, 'x'][:3], dtype=object)\na.sort()\n"
                         "b = np.array([5, 4, 3, 2, 1], dtype=object)\nb.partition(2)\n"
                         "c = np.array([(2, 'b'), (1, 'a')], dtype=[('n', 'i8'), ('s', 'O')])\nc.sort(order='n')\n"
                         "d = np.array([3.0, 1.0, 2.0])\nd.sort()\n"
                         "s = pd.Series(['a', 'b', 'a'])\n"
                         "ok = list(a) == [1, 2, 3] and b[2] == 3 and list(c['s']) == ['a', 'b'] and list(d) == [1, 2, 3]"
                         " and list(s.duplicated()) == [False, False, True]\n"
                         "assert ok\n", workdir)
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
    result = _run(HASHTABLE_CELL.replace("{call}", HASHTABLE_CALLS[call]))
    assert "crashed" not in result, f"the process died: {result}"
