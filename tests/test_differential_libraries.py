"""Differential (libraries): scipy/numpy/pandas idioms print exactly what plain CPython prints."""
from __future__ import annotations

import ast
import contextlib
import io

SCIENTIFIC = """\
import numpy as np, pandas as pd
from scipy import stats, signal, integrate, interpolate, optimize, sparse, special, ndimage
from scipy.spatial import distance
from scipy.cluster import hierarchy
import scipy.fft
np.random.seed(42)
a = np.random.rand(3)
w, v = np.linalg.eig(np.array([[2.0, 0.0], [0.0, 3.0]]))
print(np.round(a, 4).tolist(), sorted(np.round(w.real, 3).tolist()), np.round(np.abs(np.fft.fft([1, 0, 0, 0])), 3).tolist())
X, Y = np.meshgrid([1, 2], [3, 4]); print(X.tolist(), np.einsum("ij,ij->", X, Y), np.char.upper(["a"]).tolist())
print(np.datetime64("2024-01-01") + np.timedelta64(1, "D"), np.isin([1, 5], [1, 2]).tolist(), np.unique([1, 1, 2], return_counts=True)[1].tolist())
print(stats.describe([1, 2, 3]).mean, np.round(stats.zscore([1, 2, 3]), 3).tolist(), stats.mannwhitneyu([1, 2, 3], [4, 5, 6]).pvalue < 1)
print(signal.find_peaks([0, 1, 0, 2, 0])[0].tolist())
b, a2 = signal.butter(2, 0.2); print(np.round(signal.filtfilt(b, a2, np.ones(20))[:2], 3).tolist())
print(np.round(integrate.odeint(lambda y, t: -y, 1.0, [0, 1])[-1], 4).tolist())
sol = integrate.solve_ivp(lambda t, y: -y, [0, 1], [1.0]); print(round(float(sol.y[0, -1]), 2))
print(round(float(interpolate.CubicSpline([0, 1, 2], [0, 1, 4])(1.5)), 3))
print(optimize.linprog([-1, -1], A_ub=[[1, 1]], b_ub=[1], bounds=[(0, 1), (0, 1)]).status)
print(sparse.csr_matrix(np.eye(2)).nnz, distance.cdist([[0, 0]], [[3, 4]]).tolist(), hierarchy.linkage([[0], [1], [5]]).shape)
print(special.gamma(5), np.round(np.abs(scipy.fft.fft([1, 1])), 1).tolist(), ndimage.gaussian_filter(np.zeros(3), 1).tolist())
df = pd.DataFrame({"t": pd.date_range("2024-01-01", periods=6, freq="D"), "v": [1, 2, 2, 3, 5, 8], "c": list("aabbcc")})
df["m"] = df.t.dt.month
print(df.set_index("t").resample("2D").v.sum().tolist(), pd.qcut(df.v, 2, labels=False).tolist())
print(df.v.rolling(2).agg(["mean", "max"]).iloc[-1].tolist(), round(float(df.v.ewm(span=2).mean().iloc[-1]), 3))
print(df.pivot(index="t", columns="c", values="v").shape, df.v.shift(1).fillna(0).tolist(), np.round(df.v.pct_change().fillna(0), 2).tolist())
print(df.v.cumsum().tolist(), df.v.rank().tolist(), df.v.clip(2, 5).tolist(), df.v.where(df.v > 2, 0).tolist())
df["cat"] = df.c.astype("category"); print(df.cat.cat.codes.tolist(), pd.Categorical(["x", "y"]).categories.tolist())
print(df.duplicated("c").tolist(), df.drop_duplicates("c").shape, df.v.replace({2: 20}).tolist())
s = pd.Series(["a-1", "b-2"]); print(s.str.contains("a").tolist(), s.str.extract(r"(\\d)")[0].tolist(), s.str.split("-", expand=True).shape)
print(df[["v", "m"]].map(lambda x: x * 2).v.tolist(), df.v.agg(["mean", "std"]).round(2).tolist(), df.describe(include="all").shape)
print(df.v.interpolate().tolist(), int(df.memory_usage(deep=True).sum()) > 0, df.select_dtypes("number").columns.tolist())
print(pd.merge_asof(pd.DataFrame({"k": [1, 5]}), pd.DataFrame({"k": [2, 4], "x": [9, 8]}), on="k").x.tolist())
"""


def _plain(src: str) -> str:
    import numpy as np
    buf = io.StringIO()
    state = np.random.get_state()
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(src, "<plain>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True),
                 {"__name__": "__main__"})
    finally:
        np.random.set_state(state)
    return buf.getvalue()


def test_scientific_idioms_match_cpython(run):
    expected = _plain(SCIENTIFIC)
    r = run(SCIENTIFIC + "\npass\n")
    assert r.ok, r
    assert r.stdout == expected
    assert not [d for d in r.denials if d["kind"] != "file"], r
