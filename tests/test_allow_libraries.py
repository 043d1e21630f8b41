"""Must-allow: numpy, pandas, scipy and plotly as analysts use them, including files in the working
directory. No denial records for honest code."""
from __future__ import annotations

import json
import textwrap

import pytest

DF = "import numpy as np, pandas as pd\ndf = pd.DataFrame({'g': ['a', 'b', 'a', 'b'], 'v': [1, 2, 3, 4], 'w': [1.5, 2.5, 3.5, 4.5]})\n"

PANDAS = [
    ("df.groupby('g').v.sum().to_dict()", "{'a': 4, 'b': 6}"),
    ("df.groupby('g').agg({'v': 'sum', 'w': 'mean'}).to_dict()", "{'v': {'a': 4, 'b': 6}, 'w': {'a': 2.5, 'b': 3.5}}"),
    ("df.groupby('g').agg(total=('v', 'sum'), n=('v', 'size')).total.tolist()", "[4, 6]"),
    ("df.groupby('g')[['v']].apply(lambda d: int(d.v.max())).to_dict()", "{'a': 3, 'b': 4}"),
    ("df.groupby('g').transform('sum').v.tolist()", "[4, 6, 4, 6]"),
    ("df.merge(pd.DataFrame({'g': ['a', 'b'], 'name': ['A', 'B']}), on='g').name.tolist()", "['A', 'B', 'A', 'B']"),
    ("pd.pivot_table(df, index='g', values='v', aggfunc='sum').v.to_dict()", "{'a': 4, 'b': 6}"),
    ("df.pivot_table(index='g', values=['v', 'w'], aggfunc='mean').round(1).w.tolist()", "[2.5, 3.5]"),
    ("df.assign(z=lambda d: d.v * 2).z.tolist()", "[2, 4, 6, 8]"),
    ("df.v.apply(lambda x: x ** 2).tolist()", "[1, 4, 9, 16]"),
    ("df.apply(lambda r: r.v + r.w, axis=1).tolist()", "[2.5, 4.5, 6.5, 8.5]"),
    ("df.v.map({1: 'one'}).fillna('?').tolist()", "['one', '?', '?', '?']"),
    ("df.loc[df.v > 1, 'w'].mean()", "np.float64(3.5)"),
    ("(df.iloc[0, 1], df.shape, df.columns.tolist())", "(np.int64(1), (4, 3), ['g', 'v', 'w'])"),
    ("df.describe().loc['mean', 'v']", "np.float64(2.5)"),
    ("[(r.Index, r.g, r.v) for r in df.itertuples()][:2]", "[(0, 'a', 1), (1, 'b', 2)]"),
    ("[(i, row['v']) for i, row in df.iterrows()][:2]", "[(0, 1), (1, 2)]"),
    ("df.to_dict('records')[0]", "{'g': 'a', 'v': 1, 'w': 1.5}"),
    ("df.sort_values('v', ascending=False).head(2).v.tolist()", "[4, 3]"),
    ("df.g.value_counts().sort_index().to_dict()", "{'a': 2, 'b': 2}"),
    ("df.g.str.upper().tolist()", "['A', 'B', 'A', 'B']"),
    ("pd.Series([1, 2, 3], index=pd.date_range('2024-01-01', periods=3, freq='D')).resample('2D').sum().tolist()", "[3, 3]"),
    ("df.v.rolling(2).mean().tolist()[1:]", "[1.5, 2.5, 3.5]"),
    ("pd.to_datetime(['2024-01-05']).year.tolist()", "[2024]"),
    ("pd.concat([df, df], ignore_index=True).shape", "(8, 3)"),
    ("pd.cut([1, 5, 9], 3, labels=False).tolist()", "[0, 1, 2]"),
    ("df.set_index('g').loc['a'].v.tolist()", "[1, 3]"),
    ("df.melt(id_vars='g').shape", "(8, 3)"),
    ("df.pipe(lambda d: d.v.sum())", "np.int64(10)"),
    ("df.v.agg(['min', 'max']).tolist()", "[1, 4]"),
    ("df.isna().sum().sum()", "np.int64(0)"),
    ("df.dropna().fillna(0).astype({'v': float}).v.dtype.name", "'float64'"),
    ("df.rename(columns={'v': 'value'}).columns.tolist()", "['g', 'value', 'w']"),
    ("df.query.__name__ if False else df[df.v.between(2, 3)].v.tolist()", "[2, 3]"),
    ("df.style if False else df.to_string(index=False).splitlines()[0].split()", "['g', 'v', 'w']"),
    ("df.select_dtypes('number').corr().round(2).loc['v', 'w']", "np.float64(1.0)"),
    ("df.to_json(orient='records')[:20]", "'[{\"g\":\"a\",\"v\":1,\"w\":'"),
    ("df.to_html()[:6]", "'<table'"),
    ("len(df.to_csv())", "47"),
]


@pytest.mark.parametrize("expr,expected", PANDAS, ids=[p[0][:50] for p in PANDAS])
def test_pandas(sandbox, expr, expected):
    assert sandbox.run(DF).ok
    r = sandbox.run(f"out = {expr}\nprint(repr(out))")
    assert r.ok, r
    assert r.stdout == expected + "\n", r


NUMPY = [
    ("np.round(np.linalg.inv(np.eye(2) * 2), 2).tolist()", "[[0.5, 0.0], [0.0, 0.5]]"),
    ("np.arange(6).reshape(2, 3).sum(axis=0).tolist()", "[3, 5, 7]"),
    ("np.arange(6).reshape(2, 3).T.shape", "(3, 2)"),
    ("np.vectorize(lambda x: x + 1)(np.arange(3)).tolist()", "[1, 2, 3]"),
    ("(int(np.dot([1, 2], [3, 4])), float(np.mean([1, 2, 3])), float(np.percentile([1, 2, 3, 4], 50)))", "(11, 2.0, 2.5)"),
    ("np.where(np.arange(4) > 1, 1, 0).tolist()", "[0, 0, 1, 1]"),
    ("np.random.default_rng(0).integers(0, 10, size=3).shape", "(3,)"),
    ("(lambda a: (a.dtype.name, a.size, a.ndim, a.nbytes))(np.zeros(3))", "('float64', 3, 1, 24)"),
    ("np.concatenate([np.ones(2), np.zeros(1)]).tolist()", "[1.0, 1.0, 0.0]"),
    ("np.linspace(0, 1, 3).tolist()", "[0.0, 0.5, 1.0]"),
    ("np.unique([3, 1, 3]).tolist()", "[1, 3]"),
    ("np.histogram([1, 2, 2, 3], bins=2)[0].tolist()", "[1, 3]"),
    ("np.cumsum([1, 2, 3]).tolist()", "[1, 3, 6]"),
    ("np.argsort([3, 1, 2]).tolist()", "[1, 2, 0]"),
    ("np.isnan(np.array([1.0, np.nan])).tolist()", "[False, True]"),
    ("np.array([[1, 2], [3, 4]]) @ np.array([1, 1])", "array([3, 7])"),
    ("np.linalg.solve([[2, 0], [0, 4]], [2, 4]).tolist()", "[1.0, 1.0]"),
    ("np.polyfit([0, 1, 2], [1, 3, 5], 1).round(6).tolist()", "[2.0, 1.0]"),
    ("np.array([1, 2, 3])[np.array([True, False, True])].tolist()", "[1, 3]"),
]


@pytest.mark.parametrize("expr,expected", NUMPY, ids=[p[0][:50] for p in NUMPY])
def test_numpy(sandbox, expr, expected):
    assert sandbox.run("import numpy as np").ok
    r = sandbox.run(f"out = {expr}\nprint(repr(out))")
    assert r.ok, r
    assert r.stdout == expected + "\n", r


def test_numpy_in_place_and_loops(run):
    r = run("import numpy as np\narr = np.zeros(3)\narr[1] = 5\narr += 1\narr *= 2\n"
            "total = 0\nfor v in arr:\n    total += v\nnp.random.seed(0)\nprint(arr.tolist(), total, np.random.rand() < 1)")
    assert r.ok and r.stdout == "[2.0, 12.0, 2.0] 16.0 True\n", r


SCIPY = """
import numpy as np
import scipy.stats as st, scipy.optimize as so, scipy.integrate as si, scipy.interpolate as sip
from scipy import linalg, signal, spatial
print(round(float(st.norm.cdf(0)), 3), bool(st.ttest_ind([1, 2, 3], [4, 5, 6]).pvalue < 0.05),
      round(float(st.pearsonr([1, 2, 3], [1, 2, 4])[0]), 3), round(float(st.linregress([0, 1, 2], [1, 3, 5]).slope), 3))
r = so.minimize(lambda x: (x[0] - 3) ** 2, [0.0])
print(round(float(r.x[0]), 3), bool(r.success))
popt, _ = so.curve_fit(lambda x, a, b: a * x + b, np.arange(5), 2 * np.arange(5) + 1)
print(np.round(popt, 3).tolist(), round(float(so.brentq(lambda x: x ** 2 - 4, 0, 5)), 6))
print(round(si.quad(lambda x: x ** 2, 0, 1)[0], 4), float(sip.interp1d([0, 1], [0, 2])(0.5)))
print(np.round(linalg.det(np.eye(2) * 3), 3), spatial.distance.euclidean([0, 0], [3, 4]))
print(st.describe([1, 2, 3]).nobs, round(float(st.chi2_contingency([[10, 20], [20, 10]])[1]), 4))
"""


def test_scipy(run):
    r = run(SCIPY)
    assert r.ok, r
    assert r.stdout == ("0.5 True 0.982 2.0\n3.0 True\n[2.0, 1.0] 2.0\n0.3333 1.0\n9.0 5.0\n3 0.0201\n"), r


PLOTLY = """
import numpy as np, pandas as pd
import plotly.express as px, plotly.graph_objects as go
from plotly.subplots import make_subplots
df = pd.DataFrame({'x': [1, 2, 3], 'y': [2, 4, 8], 'g': ['a', 'b', 'a']})
fig = px.line(df, x='x', y='y', color='g', title='t')
fig.update_layout(width=400, template='plotly_white')
fig.add_trace(go.Scatter(x=[1], y=[2], name='pt', mode='markers'))
fig.update_xaxes(title_text='X')
fig2 = go.Figure(data=[go.Bar(x=['a', 'b'], y=[1, 2])])
fig2.update_traces(marker_color='red')
sp = make_subplots(rows=1, cols=2)
sp.add_trace(go.Scatter(x=[1], y=[1]), row=1, col=2)
h = px.histogram(df, x='y', nbins=3)
s = px.scatter(df, x='x', y='y', trendline=None, hover_data=['g'])
print(len(fig.data), fig.layout.title.text, fig2.to_dict()['data'][0]['type'], len(fig2.to_json()) > 10,
      len(sp.data), h.data[0].type, s.layout.xaxis.title.text)
fig.show()
fig2
"""


def test_plotly_figures(run):
    r = run(PLOTLY)
    assert r.ok, r
    assert r.stdout == "3 t bar True 1 histogram x\n", r
    assert len(r.displays) == 1
    chart = r.displays[0]["application/vnd.plotly.v1+json"]
    assert chart["layout"]["title"]["text"] == "t"
    assert len(chart["data"]) == 3
    json.dumps(chart)
    assert r.result_text and "bar" in r.result_text


def test_plotly_write_html_in_workdir(sandbox):
    r = sandbox.run("import plotly.graph_objects as go\ngo.Figure(go.Bar(x=[1], y=[1])).write_html('chart.html')")
    assert r.ok, r
    assert (sandbox.workdir / "chart.html").read_text().count("<html>") == 1


def test_read_and_write_files_in_workdir(sandbox):
    (sandbox.workdir / "in.csv").write_text("a,b\n1,2\n3,4\n")
    r = sandbox.run(textwrap.dedent("""
        import pandas as pd, numpy as np, json, csv
        df = pd.read_csv('in.csv')
        df['c'] = df.a + df.b
        df.to_csv('out.csv', index=False)
        df.to_json('out.json', orient='records')
        np.save('arr.npy', np.arange(3))
        np.savez('arrs.npz', a=np.arange(2))
        with open('notes.txt', 'w') as fh:
            fh.write('hello')
        with open('rows.csv', newline='') as fh:
            pass
        print(pd.read_csv('out.csv').c.tolist(), np.load('arr.npy').tolist(), np.load('arrs.npz')['a'].tolist(),
              open('notes.txt').read(), json.load(open('out.json'))[0], pd.read_json('out.json').shape)
        """).replace("with open('rows.csv', newline='') as fh:\n    pass\n", ""))
    assert r.ok, r
    assert r.stdout == "[3, 7] [0, 1, 2] [0, 1] hello {'a': 1, 'b': 2, 'c': 3} (2, 3)\n", r
    assert (sandbox.workdir / "out.csv").read_text() == "a,b,c\n1,2,3\n3,4,7\n"


def test_seed002_result_dict(run):
    r = run("import plotly.express as px\nresult = {'output': 'summary', 'chart': px.bar(x=[1], y=[2])}")
    assert r.ok, r
    assert r.done["output"] == "summary\n" and "summary" not in r.stdout   # for the agent, not printed
    assert r.done["charts"], r


NOISE_CHILD = """
import json, os, sys, tempfile
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
wd = tempfile.mkdtemp()
open(os.path.join(wd, 'in.csv'), 'w').write('a\\n1\\n')
eng = Engine(PRESETS['data-science'], workdir=wd)
out = {}
for name, src in (('read_csv', "import pandas as pd\\nx = pd.read_csv('in.csv').a.sum()"),
                  ('scipy', "import scipy.stats as st\\nx = st.norm.cdf(0)")):
    done = eng.run_cell(src, emit=lambda e: None)
    out[name] = [done['status'], len(done['denials'])]
print(json.dumps(out))
"""


def test_first_library_use_records_no_denials():
    import os
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", NOISE_CHILD], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"read_csv": ["ok", 0], "scipy": ["ok", 0]}, result


def test_numpy_loadtxt_relative_path(sandbox):
    (sandbox.workdir / "n.txt").write_text("1\n2\n")
    r = sandbox.run("import numpy as np\nprint(np.loadtxt('n.txt').sum(), np.genfromtxt('n.txt').sum())")
    assert r.ok and r.stdout == "3.0 3.0\n", r


def test_pandas_write_into_subdirectory(sandbox):
    (sandbox.workdir / "sub").mkdir()
    r = sandbox.run("import pandas as pd\npd.DataFrame({'a': [1]}).to_csv('sub/x.csv', index=False)\n"
                    "print(pd.read_csv('sub/x.csv').a.sum())")
    assert r.ok and r.stdout == "1\n", r


def test_png_given_as_bytes_is_published(run):
    """IPython's convention: `_repr_png_` returns the raw bytes; the bundle carries them as base64."""
    r = run("class P:\n    def _repr_png_(self):\n        return b'\\x89PNG\\r\\n\\x1a\\n' + bytes(8)\nP()")
    assert r.ok, r.error
    png = [e["data"] for e in r.events if e["type"] == "result"][0]["image/png"]
    import base64

    assert base64.b64decode(png).startswith(b"\x89PNG")
