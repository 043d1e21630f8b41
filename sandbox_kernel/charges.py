"""Work that one C call does without a check, charged before it starts.

Why: a library function that does its whole job in one C loop (numpy's correlate and einsum, LAPACK's
factorisations, scipy's image filters and 2-d convolution, Floyd-Warshall) never returns to Python while it
runs, so neither the tick nor the time limit sees it, and it allocates little, so the memory limit does not
either: einsum('i,j,k,l->') over four short vectors ran 13 times past a 0.5 s limit (review 17, R17-3).

Each such entry point is replaced where its library looks it up at every call (a module attribute), or guarded
where the cell calls it (guards.CALL_GUARDS), by one that first estimates the call's work from its arguments' shapes
and, while a cell runs, charges it (Budget.charge_native): as ticks, and against the time left, so that a call
which alone would run past the time limit is refused before it starts. The estimate is work units times a
speed per unit, each a lower bound of the loop's time (about a quarter of what it measured on the machine the
figures in docs/security.md come from), so a refusal means the call would surely have overrun.
"""
from __future__ import annotations

import math
import sys

from . import gates as _gates   # (at call time: gates imports guards, which imports this module, at its end)
from .confine import cell_is_running

_KEEP: list = []   # the callables the call guards hold by identity, kept alive


def _charge(units: int, ns_per_unit: float, what: str) -> None:
    """Charge units x ns_per_unit to the running cell's budget (the callers have asked cell_is_running)."""
    if units > 1000:
        gates = _gates.CURRENT_GATES.get()
        if gates is not None and gates.budget is not None:
            gates.budget.charge_native(units * ns_per_unit * 1e-9, what)


def _charge_before(module, name: str, ns_per_unit: float, units) -> None:
    """module.name becomes a function that charges units(*args, **kwargs) x ns_per_unit first."""
    original = getattr(module, name, None)
    if original is None or getattr(original, "__st_charged__", False):
        return

    def charged(*args, **kwargs):
        if cell_is_running():
            _charge(units(*args, **kwargs), ns_per_unit, name)
        return original(*args, **kwargs)
    charged.__name__, charged.__doc__, charged.__st_charged__ = name, original.__doc__, True
    setattr(module, name, _gates.runtime_callable(charged))


def _guard_charged(ns_per_unit: float, units):
    """A CALL_GUARDS factory: the cell's call charges units(*args, **kwargs) x ns_per_unit first."""
    def factory(fn, gates):
        def charged(*args, **kwargs):
            if cell_is_running():   # (the guarded callable can be handed to the host)
                _charge(units(*args, **kwargs), ns_per_unit, fn.__name__)
            return fn(*args, **kwargs)
        charged.__name__, charged.__doc__ = fn.__name__, fn.__doc__
        return _gates.runtime_callable(charged)
    return factory


def _size(a) -> int:
    return int(sys.modules["numpy"].size(a))


def _shape(a) -> tuple:
    return tuple(int(d) for d in sys.modules["numpy"].shape(a))


# -- work estimates (units) -----------------------------------------------------------------------------------

def _product_of_sizes(a, v, *args, **kwargs) -> int:
    """A sliding product (correlate, convolve2d, a filter's weights): every output point visits every weight."""
    return _size(a) * _size(v)


def _factorisation(a, *args, **kwargs) -> int:
    """LAPACK on a stack of m x n matrices: about batch x m x n x max(m, n)."""
    shape = _shape(a)
    if len(shape) < 2:
        return 0
    m, n = shape[-2], shape[-1]
    return math.prod(shape[:-2]) * m * n * max(m, n)


def _einsum(*operands, **kwargs) -> int:
    """einsum without an optimised path loops once over every combination of its distinct labels, per operand."""
    parse = getattr(sys.modules.get("numpy._core.einsumfunc"), "_parse_einsum_input", None)
    if parse is None:
        return 0
    inputs, _output, arrays = parse(list(operands))
    sizes: dict = {}
    for labels, array in zip(inputs.split(","), arrays):
        for label, size in zip(labels, _shape(array)):
            sizes[label] = max(sizes.get(label, 1), size)
    return math.prod(sizes.values()) * max(1, len(arrays))


def _footprint_at(position: int):
    """A filter over a footprint (the argument at position): every output point visits every footprint cell."""
    def units(input, *args, **kwargs) -> int:
        return _size(input) * _size(args[position - 1]) if len(args) >= position else 0
    return units


def _filter_1d(input, function, filter_size, *args, **kwargs) -> int:
    return _size(input) * (int(filter_size) + _CALL_UNITS)


def _generic_filter(input, function, footprint, *args, **kwargs) -> int:
    """generic_filter calls a function at every output point (a library's own, np.median, runs uncharged)."""
    return _size(input) * (_size(footprint) + _CALL_UNITS)


_CALL_UNITS = 2000   # a call of a Python-level function from C, in units of 1 ns


def _median_2d(image, kernel_size, *args, **kwargs) -> int:
    return _size(image) * int(sys.modules["numpy"].prod(kernel_size))


def _linear_filter(b, a, x, *args, **kwargs) -> int:
    return _size(x) * (_size(b) + _size(a))


def _sparse_product(n_row, n_col, a_indptr, a_indices, b_indptr, b_indices, *args, **kwargs) -> int:
    """A sparse product's multiply-adds: every stored entry of A meets every stored entry of B's matching row."""
    np = sys.modules["numpy"]
    return int(np.diff(np.asarray(b_indptr))[np.asarray(a_indices)].sum()) if np.size(a_indices) else 0


def _gcd(*integers) -> int:
    """Lehmer's gcd of two n-digit ints (30-bit digits) takes about n**2 steps; math.gcd(*xs) folds pairwise."""
    sizes = sorted((abs(x).bit_length() // 30 + 1 for x in integers if type(x) is int), reverse=True)
    return sizes[0] * sizes[0] * (len(sizes) - 1) if len(sizes) > 1 else 0


def _matrix_product(a, b, *args, **kwargs) -> int:
    """a @ b of (..., m, k) and (..., k, n) stacks: every output point of the broadcast stack sums k products."""
    sa, sb = _shape(a), _shape(b)
    if not sa or not sb:
        return 0
    m = sa[-2] if len(sa) > 1 else 1
    n = sb[-1] if len(sb) > 1 else 1
    return max(math.prod(sa) * n, math.prod(sb) * m)


def _dot(a, b, *args, **kwargs) -> int:
    """np.dot sums over a's last and b's second-to-last axis for every pair of the other axes."""
    sa, sb = _shape(a), _shape(b)
    if not sa or not sb:
        return 0
    return math.prod(sa) * (math.prod(sb) // max(sb[-2] if len(sb) > 1 else sb[-1], 1))


def charge_matrix_product(a, b) -> None:
    """The cell's a @ b (the rewriter's binop gate): arrays only (a cell class's own __matmul__ runs as cell code)."""
    np = sys.modules.get("numpy")
    if np is not None and (isinstance(a, np.ndarray) or isinstance(b, np.ndarray)) and cell_is_running():
        _charge(_matrix_product(a, b), _BLAS_NS, "a matrix product")


def _distances(xa, xb=None, *args, **kwargs) -> int:
    """cdist(XA, XB) compares every row of XA with every row of XB over their columns; pdist(X) every pair of X's."""
    sa = _shape(xa)
    sb = _shape(xb) if xb is not None and not isinstance(xb, str) and not callable(xb) else sa
    if len(sa) != 2 or len(sb) != 2:
        return 0
    return sa[0] * sb[0] * sa[1]


def charge_concatenations(start, items) -> None:
    """sum(items, start) of lists or tuples: every step copies the running total (the sized-builtins gate asks)."""
    if not cell_is_running():
        return
    running, copied = len(start), 0
    for item in items:
        running += len(item) if type(item) is list or type(item) is tuple else 1
        copied += running
    _charge(copied, 1.0, "sum() of sequences")


def _all_pairs(csgraph, *args, **kwargs) -> int:
    """Floyd-Warshall over n nodes: n**3."""
    shape = _shape(csgraph)
    return shape[0] ** 3 if shape else 0


def _shortest_paths(csgraph, method="auto", *args, **kwargs) -> int:
    """shortest_path(method='FW' or 'auto', which picks Floyd-Warshall for dense graphs): n**3 charged; the other
    methods (Dijkstra, Johnson, Bellman-Ford) at least n x edges."""
    shape = _shape(csgraph)
    n = shape[0] if shape else 0
    edges = int(getattr(csgraph, "nnz", n * n))
    return n ** 3 if method in ("FW", "auto") else n * max(edges, n)


def _assignment(cost_matrix, *args, **kwargs) -> int:
    shape = _shape(cost_matrix)
    if len(shape) != 2:
        return 0
    n, m = sorted(shape)
    return n * n * m


_LAPACK_NS = 0.02   # numpy.linalg's factorisations and scipy.linalg's fastest family, per n**3 unit
_BLAS_NS = 0.005    # a matrix product's multiply-add
# (module, attribute, ns per unit, units): looked up by its library at every call
_REPLACED = (
    ("numpy._core.multiarray", "correlate", 0.03, _product_of_sizes),    # np.convolve, np.correlate, polymul
    ("numpy._core.multiarray", "correlate2", 0.03, _product_of_sizes),
    ("numpy._core.multiarray", "c_einsum", 0.1, _einsum),
    ("numpy._core.einsumfunc", "c_einsum", 0.1, _einsum),                 # np.einsum's own reference
    ("scipy.ndimage._nd_image", "correlate", 0.25, _product_of_sizes),   # correlate, convolve, the n-d filters
    ("scipy.ndimage._nd_image", "correlate1d", 0.05, _product_of_sizes),
    ("scipy.ndimage._nd_image", "rank_filter", 0.6, _footprint_at(2)),   # (input, rank, footprint): median ...
    ("scipy.ndimage._nd_image", "min_or_max_filter", 0.1, _footprint_at(1)),   # (input, footprint, structure)
    ("scipy.ndimage._nd_image", "generic_filter", 1.0, _generic_filter),
    ("scipy.ndimage._nd_image", "generic_filter1d", 1.0, _filter_1d),
    ("scipy.signal._sigtools", "_convolve2d", 0.35, _product_of_sizes),   # convolve2d, correlate2d
    ("scipy.signal._sigtools", "_correlateND", 3.0, _product_of_sizes),   # convolve/correlate(method='direct')
    ("scipy.signal._sigtools", "_medfilt2d", 0.15, _median_2d),
    ("scipy.signal._sigtools", "_linear_filter", 0.1, _linear_filter),   # lfilter
    ("numpy", "dot", _BLAS_NS, _dot),               # np.dot, and pandas' DataFrame.dot / @ through it
    ("numpy._core.numeric", "dot", _BLAS_NS, _dot),   # tensordot's
    ("scipy.sparse._compressed", "csr_matmat_maxnnz", 0.2, _sparse_product),   # A @ B of sparse arrays: R19-6
    ("math", "gcd", 0.3, _gcd),       # and fractions' normalisation, which reads math.gcd at each call (R16-15)
    ("math", "lcm", 0.3, _gcd),
)
# (module, attribute, ns per unit, units): called by the cell (Cython calls them within their module directly)
_GUARDED = (
    ("scipy.sparse.csgraph", "floyd_warshall", 0.25, _all_pairs),
    ("scipy.sparse.csgraph", "shortest_path", 0.25, _shortest_paths),
    ("scipy.optimize", "linear_sum_assignment", 0.02, _assignment),
    ("scipy.spatial.distance", "cdist", 0.1, _distances),     # (review 18, R18-13)
    ("scipy.spatial.distance", "pdist", 0.1, _distances),
    ("numpy", "matmul", _BLAS_NS, _matrix_product),   # a ufunc: a @ b in the cell goes through the binop gate
    ("numpy", "inner", _BLAS_NS, _dot),
) + tuple(("scipy.linalg", name, ns, _factorisation) for names, ns in (   # f2py's LAPACK: review 19, R19-2
    # (a lower bound each: the non-symmetric eigenproblems and matrix functions cost several n**3 passes; schur of
    # 2000 x 2000 ran 65 s)
    (("eig", "eigvals", "schur", "qz", "ordqz", "hessenberg", "sqrtm", "logm", "funm", "signm", "cosm", "sinm",
      "tanm", "solve_sylvester", "solve_continuous_are", "solve_discrete_are", "solve_continuous_lyapunov",
      "solve_discrete_lyapunov"), 0.4),
    (("svd", "svdvals", "pinv", "lstsq", "null_space", "orth", "polar", "expm"), 0.1),
    (("eigh", "eigvalsh", "pinvh"), 0.05),
    (("lu", "lu_factor", "qr", "rq", "inv", "solve", "det", "cholesky", "cho_factor", "ldl"), _LAPACK_NS),
) for name in names)


def charge_native_work(call_guards: dict) -> None:
    """Install the charges for every listed module loaded so far (guards' catch-up with loaded modules calls it
    again after each import); call_guards: guards.CALL_GUARDS."""
    for module_name, name, ns, units in _REPLACED:
        module = sys.modules.get(module_name)
        if module is not None:
            _charge_before(module, name, ns, units)
    lapack = sys.modules.get("numpy.linalg._umath_linalg")   # eig, svd, inv, solve, qr, lstsq, det, cholesky ...
    np = sys.modules.get("numpy")
    if lapack is not None and np is not None:
        for name in [n for n in dir(lapack) if not n.startswith("_")]:
            if isinstance(getattr(lapack, name), np.ufunc):
                _charge_before(lapack, name, _LAPACK_NS, _factorisation)
    for module_name, name, ns, units in _GUARDED:
        fn = getattr(sys.modules.get(module_name), name, None)
        if fn is not None and fn not in call_guards:
            call_guards[fn] = _guard_charged(ns, units)
            _KEEP.append(fn)
