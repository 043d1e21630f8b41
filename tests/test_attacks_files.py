"""Must-block: files outside the working directory, for the cell's own open() and for the granted
libraries it calls (pandas, numpy, scipy). Nothing is written outside, no secret is read, and error
messages do not show host paths outside the working directory."""
from __future__ import annotations

import bz2
import os

import pytest


@pytest.fixture
def layout(sandbox, outside, host_secret):
    """workdir/ with a symlink to the outside directory and one to the secret file; outside/ holds
    the secret in several formats."""
    (outside / "secret.csv").write_text(f"col\n{host_secret}\n")
    (outside / "secret.csv.bz2").write_bytes(bz2.compress(f"col\n{host_secret}\n".encode()))
    secret_file = outside.parent / "secret.txt"
    os.symlink(outside, sandbox.workdir / "link_dir")
    os.symlink(secret_file, sandbox.workdir / "link_file")
    os.symlink("../outside/secret.csv", sandbox.workdir / "rel_link.csv")
    return {"outside": outside, "secret": host_secret, "secret_file": secret_file}


def _pandas_major() -> int:
    import pandas
    return int(pandas.__version__.split(".")[0])


READS = [
    "open({secret_file!r}).read()",
    "open('../secret.txt').read()",
    "open('../../' + {secret_rel!r}).read()",
    "open('link_file').read()",
    "open('link_dir/secret.csv').read()",
    "open('rel_link.csv').read()",
    "open({secret_file!r}.encode()).read()",
    "open('/etc/passwd').read()",
    "open('/proc/self/environ').read()",
    "open('/proc/self/cmdline').read()",
    "open(0).read()",
    "open(3).read()",
    "open(P({secret_file!r})).read()",
    "open(S({secret_file!r})).read()",
    "open('./../secret.txt').read()",
    "open('sub/../../secret.txt').read()",
    "pd.read_csv({secret_csv!r})",
    "pd.read_csv('../outside/secret.csv')",
    "pd.read_csv('link_dir/secret.csv')",
    "pd.read_csv('rel_link.csv')",
    "pd.read_csv('/etc/passwd')",
    "pd.read_csv('file://' + {secret_csv!r})",
    "pd.read_csv(P({secret_csv!r}))",
    "pd.read_json({secret_file!r})",
    "pd.read_table('link_file')",
    "pd.read_fwf('link_file')",
    "np.loadtxt({secret_file!r}, dtype=str)",
    "np.loadtxt('../secret.txt', dtype=str)",
    "np.genfromtxt('link_file', dtype=str)",
    "np.load('link_file')",
    "scipy.io.loadmat('link_file')",
    "csv.reader(open('link_file'))",
]


@pytest.mark.parametrize("expr", READS)
def test_read_outside_workdir_is_refused(sandbox, layout, expr):
    prelude = ("import pandas as pd, numpy as np, scipy.io, csv\n"
               "class P:\n    def __init__(self, p):\n        self.p = p\n"
               "    def __fspath__(self):\n        return self.p\n"
               "class S(str):\n    pass\n")
    assert sandbox.run(prelude).ok
    secret_file = str(layout["secret_file"])
    src = expr.format(secret_file=secret_file, secret_csv=str(layout["outside"] / "secret.csv"),
                      secret_rel=os.path.relpath(secret_file, "/"))
    r = sandbox.run(f"x = None\ndata = {src}\nprint(data)")
    assert not r.ok, r
    assert not r.leaked(layout["secret"]), r
    assert "data" not in sandbox.ns
    refusals = ("FileNotFoundError", "PermissionError")
    if expr.startswith("pd.read_json(") and _pandas_major() < 3:
        # pandas 2 (the newest for Python 3.10) reads a string that is not an existing path as
        # literal JSON. The guarded os.path.exists says the outside file does not exist, so pandas
        # parses the path text and fails with a ValueError, having read nothing. pandas 3 opens the
        # string as a path and is refused.
        refusals += ("ValueError",)
    assert r.denied("file", line=2) or r.error_name in refusals, r
    if sandbox.workdir.parent.name not in src:
        # attacks that do not name a host path must not learn where the workdir or the outside live
        assert str(sandbox.workdir.parent) not in r.everything, r


WRITES = [
    ("open({out!r} + '/a.txt', 'w').write('x')", "a.txt"),
    ("open('../outside/b.txt', 'w').write('x')", "b.txt"),
    ("open('link_dir/c.txt', 'w').write('x')", "c.txt"),
    ("open('link_dir/c2.txt', 'x').write('x')", "c2.txt"),
    ("open('link_dir/c3.txt', 'a').write('x')", "c3.txt"),
    ("open(P({out!r} + '/d.txt'), 'w').write('x')", "d.txt"),
    ("pd.DataFrame({{'a': [1]}}).to_csv({out!r} + '/e.csv')", "e.csv"),
    ("pd.DataFrame({{'a': [1]}}).to_csv('../outside/f.csv')", "f.csv"),
    ("pd.DataFrame({{'a': [1]}}).to_csv('link_dir/g.csv')", "g.csv"),
    ("pd.DataFrame({{'a': [1]}}).to_json('link_dir/h.json')", "h.json"),
    ("pd.DataFrame({{'a': [1]}}).to_csv('link_dir/i.csv.gz', compression='gzip')", "i.csv.gz"),
    ("pd.DataFrame({{'a': [1]}}).to_csv('link_dir/j.csv.zip', compression='zip')", "j.csv.zip"),
    ("pd.DataFrame({{'a': [1]}}).to_csv('link_dir/k.csv.xz', compression='xz')", "k.csv.xz"),
    ("pd.DataFrame({{'a': [1]}}).to_csv({out!r} + '/l.tar', compression='tar')", "l.tar"),
    ("pd.DataFrame({{'a': [1]}}).to_excel('link_dir/m.xlsx')", "m.xlsx"),
    ("pd.DataFrame({{'a': [1]}}).to_html('link_dir/n.html')", "n.html"),
    ("pd.DataFrame({{'a': [1]}}).to_markdown('link_dir/o.md')", "o.md"),
    ("pd.DataFrame({{'a': [1]}}).to_string('link_dir/p.txt')", "p.txt"),
    ("np.savetxt({out!r} + '/q.txt', np.arange(3))", "q.txt"),
    ("np.savetxt('../outside/r.txt', np.arange(3))", "r.txt"),
    ("np.savetxt('link_dir/r2.txt.gz', np.arange(3))", "r2.txt.gz"),
    ("np.savetxt('link_dir/r3.txt.bz2', np.arange(3))", "r3.txt.bz2"),
    ("np.save('link_dir/s.npy', np.arange(3))", "s.npy"),
    ("np.savez('link_dir/t.npz', a=np.arange(3))", "t.npz"),
    ("np.savez_compressed('link_dir/u.npz', a=np.arange(3))", "u.npz"),
    ("scipy.io.savemat('link_dir/v.mat', {{'a': np.arange(3)}})", "v.mat"),
    ("import plotly.graph_objects as go\ngo.Figure().write_html('link_dir/w.html')", "w.html"),
    ("import plotly.graph_objects as go\ngo.Figure().write_json('link_dir/x.json')", "x.json"),
    ("import plotly.io as pio\nimport plotly.graph_objects as go\npio.write_json(go.Figure(), 'link_dir/y.json')", "y.json"),
]


@pytest.mark.parametrize("src,name", WRITES, ids=[w[1] for w in WRITES])
def test_write_outside_workdir_is_refused(sandbox, layout, src, name):
    prelude = ("import pandas as pd, numpy as np, scipy.io\n"
               "class P:\n    def __init__(self, p):\n        self.p = p\n"
               "    def __fspath__(self):\n        return self.p\n")
    assert sandbox.run(prelude).ok
    out = layout["outside"]
    before = sorted(os.listdir(out))
    r = sandbox.run("print('start')\n" + src.format(out=str(out)) + "\nprint('after')")
    assert not r.ok, r
    assert "after" not in r.stdout
    assert not (out / name).exists(), f"{name} was written outside the workdir"
    assert sorted(os.listdir(out)) == before
    # pandas refuses some of these itself ("non-existent directory": it checks the parent against the
    # process's cwd, not the workdir); what matters is that nothing was written
    assert r.denied("file") or r.error_name in ("PermissionError", "ModuleNotFoundError", "ImportError",
                                                "OSError"), r


def test_compressed_writer_outside_workdir(sandbox, outside):
    target = outside / "esc.csv.bz2"
    sandbox.run(f"import pandas as pd\npd.DataFrame({{'a': [1]}}).to_csv({str(target)!r}, compression='bz2')")
    assert not target.exists()


def test_compressed_reader_outside_workdir(sandbox, layout):
    r = sandbox.run("import pandas as pd\n"
                    f"print(pd.read_csv({str(layout['outside'] / 'secret.csv.bz2')!r}, compression='bz2'))")
    assert not r.leaked(layout["secret"]), r


def test_symlink_swap_inside_workdir(sandbox, layout):
    """A path that is checked, then replaced by a symlink, is still refused when opened."""
    (sandbox.workdir / "ok.txt").write_text("fine")
    r = sandbox.run("print(open('ok.txt').read())")
    assert r.ok and r.stdout == "fine\n", r
    os.remove(sandbox.workdir / "ok.txt")
    os.symlink(layout["secret_file"], sandbox.workdir / "ok.txt")
    r = sandbox.run("print(open('ok.txt').read())")
    assert not r.ok and not r.leaked(layout["secret"]), r


def test_error_messages_hide_host_paths(sandbox):
    host = str(sandbox.workdir)
    for src in ("open('missing.txt')", "import pandas as pd\npd.read_csv('missing.csv')",
                "import numpy as np\nnp.load('missing.npy')", "open('.')", "open('sub/dir/x.txt', 'w')"):
        r = sandbox.run(src)
        assert not r.ok, (src, r)
        assert host not in r.everything, (src, r)
        assert str(sandbox.workdir.parent) not in r.everything, (src, r)


def test_files_inside_workdir_work(sandbox):
    r = sandbox.run("import pandas as pd, numpy as np\n"
                    "with open('notes.txt', 'w') as fh:\n    fh.write('hello')\n"
                    "pd.DataFrame({'a': [1, 2]}).to_csv('d.csv', index=False)\n"
                    "print(open('notes.txt').read(), pd.read_csv('d.csv').a.sum())")
    assert r.ok and r.stdout == "hello 3\n", r
    assert (sandbox.workdir / "d.csv").read_text() == "a\n1\n2\n"


def test_strict_policy_has_no_files(strict, outside):
    r = strict.run("open('x.txt', 'w')")
    assert not r.ok and r.denials, r
    assert not (strict.workdir / "x.txt").exists()
