"""How fast the C work that charges.py charges runs on this machine, against the speed it is charged at.

charges.py estimates a call's time as work units x a speed per unit that must be a lower bound of the real time
(a refusal then means the call would surely have overrun). This measures each charged entry point in plain Python
(no sandbox) and prints measured ns per unit, the charged ns per unit, and their ratio: a ratio below 1 means the
charge overestimates here (a refusal could come early) and the constant in charges.py should come down.

    python bench/native_speeds.py
"""
from __future__ import annotations

import time

import numpy as np
import scipy.ndimage as nd
import scipy.signal as sig
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csgraph

from sandbox_kernel import charges


def _charged(module: str, name: str) -> float:
    rates = {(m, n): ns for m, n, ns, _ in charges._REPLACED + charges._GUARDED}
    return charges._LAPACK_NS if module == "lapack" else rates[(module, name)]


def _best(fn, reps: int = 3) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    a, m, x = np.ones(200), rng.random((600, 600)), np.ones((400, 400))
    cases = [
        ("einsum i,j,k,l->", "numpy._core.einsumfunc", "c_einsum", 200 ** 3 * 50 * 4,
         lambda: np.einsum("i,j,k,l->", a, a, a, a[:50])),
        ("einsum ij,jk->ik", "numpy._core.einsumfunc", "c_einsum", 300 ** 3 * 2,
         lambda: np.einsum("ij,jk->ik", m[:300, :300], m[:300, :300])),
        ("np.convolve", "numpy._core.multiarray", "correlate", 2e4 ** 2, lambda: np.convolve(np.ones(20000), np.ones(20000))),
        ("eig 600", "lapack", "eig", 600 ** 3, lambda: np.linalg.eig(m)),
        ("solve 600", "lapack", "solve", 600 ** 3, lambda: np.linalg.solve(m, m)),
        ("median_filter", "scipy.ndimage._nd_image", "rank_filter", 400 * 400 * 900, lambda: nd.median_filter(x, size=30)),
        ("ndimage.correlate", "scipy.ndimage._nd_image", "correlate", 400 * 400 * 900,
         lambda: nd.correlate(x, np.ones((30, 30)))),
        ("convolve2d", "scipy.signal._sigtools", "_convolve2d", 400 * 400 * 1600, lambda: sig.convolve2d(x, np.ones((40, 40)))),
        ("convolve direct", "scipy.signal._sigtools", "_correlateND", 200 * 200 * 1600,
         lambda: sig.convolve(x[:200, :200], np.ones((40, 40)), method="direct")),
        ("medfilt2d", "scipy.signal._sigtools", "_medfilt2d", 400 * 400 * 961, lambda: sig.medfilt2d(x, 31)),
        ("lfilter IIR", "scipy.signal._sigtools", "_linear_filter", 10 ** 6 * 200,
         lambda: sig.lfilter(np.ones(100), np.r_[1.0, np.zeros(98), 0.5], np.ones(10 ** 6))),
        ("floyd_warshall", "scipy.sparse.csgraph", "floyd_warshall", 300 ** 3, lambda: csgraph.floyd_warshall(m[:300, :300])),
        ("linear_sum_assignment", "scipy.optimize", "linear_sum_assignment", 600 ** 3,
         lambda: linear_sum_assignment(m)),
    ]
    print(f"{'entry point':24s} {'measured ns/unit':>17s} {'charged':>8s} {'ratio':>6s}")
    for label, module, name, units, fn in cases:
        measured = _best(fn) / units * 1e9
        charged = _charged(module, name)
        print(f"{label:24s} {measured:17.3f} {charged:8.3f} {measured / charged:6.1f}")


if __name__ == "__main__":
    main()
