"""Must-block: dangerous corners of granted libraries (pickle loaders, string evaluation, browsers,
raw file access in C, ctypes) and library functions that evaluate strings as code."""
from __future__ import annotations

import subprocess

import pytest

import webbrowser

DENIED_CORNERS = [
    # (setup, attack, file that must not appear in the workdir)
    ("import numpy as np", "np.ctypeslib", None),
    ("import numpy as np", "np.ctypeslib.as_array", None),
    ("import numpy as np\nnp.save('a.npy', np.arange(3))", "np.load('a.npy', allow_pickle=True)", None),
    ("import numpy as np\nnp.save('a.npy', np.arange(3))", "from numpy import load\nload('a.npy', allow_pickle=True)", None),
    ("import numpy as np\nimport functools\nnp.save('a.npy', np.arange(3))",
     "functools.partial(np.load, allow_pickle=True)('a.npy')", None),
    ("import numpy as np", "np.lib.format.read_array", None),
    ("import numpy as np", "np.arange(3).tofile('t.bin')", "t.bin"),
    ("import numpy as np", "np.fromfile('t.bin')", None),
    ("import numpy as np", "np.memmap('m.bin', mode='w+', shape=(3,))", "m.bin"),
    ("import numpy as np", "np.arange(3).dump('d.pkl')", "d.pkl"),
    ("import numpy as np", "np.arange(3).dumps()", None),
    ("import pandas as pd", "pd.read_pickle('a.pkl')", None),
    ("import pandas as pd", "pd.DataFrame({'a': [1]}).to_pickle('a.pkl')", "a.pkl"),
    ("import pandas as pd", "pd.Series([1]).to_pickle('s.pkl')", "s.pkl"),
    ("import pandas as pd", "pd.io.pickle.read_pickle('a.pkl')", None),
    # pandas' evaluator itself (DataFrame.query/eval and pandas.eval are evaluated by the sandbox:
    # tests/test_pandas_query.py)
    ("import pandas as pd", "pd.core.computation.eval.eval('1')", None),
    ("import pandas as pd", "pd.read_clipboard()", None),
    ("import pandas as pd", "pd.DataFrame().to_clipboard()", None),
    ("import pandas as pd", "pd.show_versions()", None),
    ("import pandas as pd", "pd.DataFrame({'a': [1]}).to_parquet('p.parquet')", "p.parquet"),
    ("import pandas as pd", "pd.DataFrame({'a': [1]}).to_hdf('h.h5', key='a')", "h.h5"),
    ("import pandas as pd", "pd.read_sql('select 1', None)", None),
    ("import plotly.graph_objects as go\nfig = go.Figure()", "fig.write_image('x.png')", "x.png"),
    ("import plotly.graph_objects as go\nfig = go.Figure()", "fig.to_image()", None),
    ("import plotly.graph_objects as go\nimport plotly.io as pio\nfig = go.Figure()", "pio.write_image(fig, 'y.png')", "y.png"),
    ("import plotly.graph_objects as go\nimport plotly.io as pio\nfig = go.Figure()", "pio.to_image(fig)", None),
    ("import plotly.io as pio", "pio.renderers.default = 'browser'", None),
    ("import plotly.io as pio", "pio.kaleido.scope", None),
    ("import plotly.graph_objects as go\nimport plotly.io as pio\nfig = go.Figure()",
     "pio.full_figure_for_development(fig)", None),
    ("import plotly.graph_objects as go\nfig = go.Figure()", "fig.write_html('f.html', auto_open=True)", None),
    ("import plotly.express as px", "px.scatter(x=[1], y=[2]).write_html('g.html', auto_open=True)", None),
    ("import plotly", "plotly.offline.plot({'data': []}, auto_open=True)", None),
]


@pytest.fixture
def no_browser_or_process(monkeypatch):
    """Record (and refuse) every browser launch and subprocess the host would make."""
    calls = []

    def record(*a, **k):
        calls.append(a)
        raise RuntimeError("recorded by the test")

    class FakeBrowser:
        def open(self, *a, **k):
            return record(*a)
        open_new = open_new_tab = open

    monkeypatch.setattr(webbrowser, "open", record)
    monkeypatch.setattr(webbrowser, "open_new", record)
    monkeypatch.setattr(webbrowser, "open_new_tab", record)
    monkeypatch.setattr(webbrowser, "get", lambda *a, **k: FakeBrowser())
    monkeypatch.setattr(subprocess, "Popen", record)
    return calls


@pytest.mark.parametrize("setup,attack,artifact", DENIED_CORNERS, ids=[c[1][:60] for c in DENIED_CORNERS])
def test_dangerous_library_corner_is_denied(sandbox, no_browser_or_process, setup, attack, artifact):
    r0 = sandbox.run(setup)
    assert r0.ok, r0
    r = sandbox.run(f"print('start')\n{attack}\nprint('after')")
    assert not r.ok, r
    assert "after" not in r.stdout
    assert r.denials, r
    assert all(d["line"] in (2, 3) for d in r.denials), r
    assert no_browser_or_process == [], "a browser or process was started"
    if artifact:
        assert not (sandbox.workdir / artifact).exists()


def test_fig_show_renders_in_the_notebook_not_a_browser(sandbox, no_browser_or_process):
    r = sandbox.run("import plotly.graph_objects as go\nfig = go.Figure(go.Bar(x=[1], y=[2]))\n"
                    "fig.show(renderer='browser')\nfig.show()\n")
    assert r.ok, r
    assert no_browser_or_process == []
    assert len(r.displays) == 2 and "application/vnd.plotly.v1+json" in r.displays[0]


def test_plotly_io_show_browser(sandbox, no_browser_or_process):
    """Held today only because plotly's one-shot HTTP server cannot bind (network is off)."""
    sandbox.run("import plotly.graph_objects as go\nimport plotly.io as pio\nfig = go.Figure()\n"
                "pio.show(fig, renderer='browser')\n")
    assert no_browser_or_process == []


def test_plotly_io_write_html_auto_open(sandbox, no_browser_or_process):
    sandbox.run("import plotly.graph_objects as go\nimport plotly.io as pio\nfig = go.Figure()\n"
                "pio.write_html(fig, 'f.html', auto_open=True)\n")
    assert no_browser_or_process == []


def test_typing_get_type_hints_evals_annotation(sandbox, outside):
    marker = outside / "typing.txt"
    r = sandbox.run("import typing\n"
                    f"def f(x: \"__import__('os').system('echo PWNED > {marker}')\"):\n    pass\n"
                    "typing.get_type_hints(f)\n")
    assert not marker.exists(), "os.system ran"
    assert not r.ok, r


def test_typing_get_type_hints_on_class(sandbox, outside):
    marker = outside / "typing_cls.txt"
    sandbox.run("import typing\n"
                "class C:\n"
                f"    x: \"__import__('os').system('echo PWNED > {marker}')\"\n"
                "try:\n    typing.get_type_hints(C)\nexcept Exception as e:\n    print(e)\n")
    assert not marker.exists(), "os.system ran"


def test_forward_ref_evaluation_is_not_reachable(run):
    r = run("import typing\ntyping.ForwardRef('1')._evaluate(globals(), {}, frozenset())")
    assert not r.ok and r.denials, r


def test_pickle_compat_loads_runs_pickle(sandbox, outside):
    marker = outside / "pickle.txt"
    payload = f"cos\nsystem\n(S'echo PWNED > {marker}'\ntR.".encode()
    r = sandbox.run(f"import pandas.compat.pickle_compat as pc\npc.loads({payload!r})\n")
    assert not marker.exists(), "os.system ran"
    assert not r.ok and r.denials, r


NPZ_BUILDER = r'''
import numpy as np
def crc32(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0xEDB88320 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
def u16(n):
    return n.to_bytes(2, "little")
def u32(n):
    return n.to_bytes(4, "little")
def npz_with_object_member(path, pickle_bytes):
    header = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }"
    header = header + " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    body = b"\x93NUMPY\x01\x00" + u16(len(header)) + header.encode() + pickle_bytes
    name = b"a.npy"
    crc = crc32(body)
    sizes = u32(crc) + u32(len(body)) + u32(len(body)) + u16(len(name))
    local = b"PK\x03\x04" + u16(20) + u16(0) * 4 + sizes + u16(0) + name
    central = b"PK\x01\x02" + u16(20) + u16(20) + u16(0) * 4 + sizes + u16(0) * 4 + u32(0) + u32(0) + name
    end = b"PK\x05\x06" + u16(0) * 2 + u16(1) * 2 + u32(len(central)) + u32(len(local) + len(body)) + u16(0)
    with open(path, "wb") as fh:
        fh.write(local + body + central + end)
'''


def test_npz_allow_pickle_attribute(sandbox, outside):
    marker = outside / "npz.txt"
    payload = f"cos\nsystem\n(S'echo PWNED > {marker}'\ntR.".encode()
    assert sandbox.run(NPZ_BUILDER + f"npz_with_object_member('p.npz', {payload!r})\n").ok
    r = sandbox.run("z = np.load('p.npz')\nz.allow_pickle = True\nz['a']\n")
    assert not marker.exists(), "os.system ran"
    assert not r.ok and r.denials, r


def test_npz_object_member_without_pickle_is_refused(sandbox, outside):
    marker = outside / "npz2.txt"
    payload = f"cos\nsystem\n(S'echo PWNED > {marker}'\ntR.".encode()
    assert sandbox.run(NPZ_BUILDER + f"npz_with_object_member('p.npz', {payload!r})\n").ok
    r = sandbox.run("z = np.load('p.npz')\nz['a']\n")
    assert not r.ok, r
    r = sandbox.run("np.load('p.npz', allow_pickle=True)")
    assert not r.ok and r.denials, r
    assert not marker.exists()


@pytest.mark.parametrize("call", ["df.apply('eval', expr='b = a + 1')", "df.agg('query', expr='a > 1')",
                                  "df.aggregate('eval', expr='a.__class__')"])
def test_denied_method_through_string_dispatch(sandbox, call):
    assert sandbox.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})").ok
    r = sandbox.run(f"out = {call}")
    assert not r.ok and r.denials, r


def test_no_process_from_granted_libraries(sandbox, no_browser_or_process):
    """Nothing in ordinary library use starts a process (pandas clipboard, plotly kaleido, numpy f2py)."""
    for src in ("import numpy as np\nnp.f2py.compile('', 'x')", "import pandas as pd\npd.read_clipboard()",
                "import plotly.io as pio\npio.kaleido.scope.default_format", "import scipy\nscipy.show_config()"):
        sandbox.run(src)
    assert no_browser_or_process == []
