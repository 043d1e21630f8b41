"""Files are off when the working directory holds places the host trusts (home, configuration,
kernelspecs, the Python installation, this package)."""
import os
import sys

from kernel_helpers import start_client
from sandbox_kernel.workdir import workdir_hazards

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_hazards(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("IPYTHONDIR", raising=False)
    monkeypatch.delenv("JUPYTER_CONFIG_DIR", raising=False)
    monkeypatch.delenv("JUPYTER_DATA_DIR", raising=False)
    monkeypatch.delenv("JUPYTER_RUNTIME_DIR", raising=False)
    (tmp_path / "home" / "project").mkdir(parents=True)
    assert workdir_hazards(str(tmp_path / "home" / "project")) == []
    assert "your home directory" in workdir_hazards(str(tmp_path / "home"))
    assert "IPython's configuration directory" in workdir_hazards(str(tmp_path / "home"))
    assert "your home directory" in workdir_hazards(str(tmp_path))       # an ancestor of home
    assert "the Python installation" in workdir_hazards(sys.prefix)
    assert "the sandbox_kernel package" in workdir_hazards(ROOT)        # a checkout of this package
    assert workdir_hazards("/")
    assert workdir_hazards(str(tmp_path / "home" / "project"),
                           {"the policies directory": str(tmp_path / "home" / "project" / "pol")})


def test_a_kernel_started_in_home_keeps_files_off(tmp_path):
    """Attack: with the home directory as working directory, a cell writes an IPython startup file and
    a shell start-up file; the next IPython (or login shell) would run them outside the sandbox."""
    home = tmp_path / "home"
    (home / ".ipython" / "profile_default" / "startup").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IPYTHONDIR", "JUPYTER_"))}
    env["HOME"] = str(home)
    client = start_client(cwd=str(home), env=env)
    try:
        result = client.run(
            "open('.ipython/profile_default/startup/00-pwn.py', 'w').write('print(1)')")
        assert result["status"] == "error" and result["error"]["ename"] in ("FileDenied", "BuiltinDenied")
        assert "file access is off in this kernel" in "".join(
            o.get("text", "") for o in result["outputs"] if o["type"] == "stream")
        assert client.run("import pandas as pd\npd.DataFrame({'a': [1]}).to_csv('.bashrc')")["status"] == "error"
        assert client.run("open('notes.txt', 'w')")["status"] == "error"
        assert "your home directory" in client.run("%sandbox_status")["output"]
    finally:
        client.shutdown()
    assert not (home / ".ipython" / "profile_default" / "startup" / "00-pwn.py").exists()
    assert not (home / ".bashrc").exists() and not (home / "notes.txt").exists()


def test_a_project_directory_keeps_files_on(tmp_path):
    client = start_client(cwd=str(tmp_path))
    try:
        assert client.run("open('notes.txt', 'w').write('ok')")["status"] == "ok"
    finally:
        client.shutdown()
    assert (tmp_path / "notes.txt").read_text() == "ok"
