"""The kernelspec unchanged behind a real Jupyter Kernel Gateway on loopback, driven through its REST and
WebSocket API by SandboxSession(gateway_url=...). The kernel runs with the installed kernelspec's
defaults (isolation `kernel` on Linux), as a gateway operator would deploy it."""
import json
import socket
import subprocess
import sys
import time
import urllib.request

import pandas as pd
import pytest

from kernel_helpers import KERNEL_NAME, require_kernelspec
from sandbox_kernel.client import SandboxDenied, SandboxError, SandboxSession, SandboxTimeout

pytest.importorskip("kernel_gateway", reason="the test extras include jupyter_kernel_gateway")
TOKEN = "test-token-5c1e"
HEADERS = {"Authorization": f"token {TOKEN}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    require_kernelspec()
    root = tmp_path_factory.mktemp("gateway")
    port = free_port()
    log = open(root.parent / f"{root.name}.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "kernel_gateway", "--KernelGatewayApp.ip=127.0.0.1",
                             f"--KernelGatewayApp.port={port}", f"--KernelGatewayApp.auth_token={TOKEN}",
                             "--JupyterWebsocketPersonality.list_kernels=True"],
                            cwd=root, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(urllib.request.Request(f"{url}/api", headers=HEADERS), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    if proc.poll() is not None:
        log.seek(0)
        pytest.fail(f"Kernel Gateway did not start:\n{log.read()[-3000:]}")
    yield url, root
    proc.terminate()
    proc.wait(30)
    log.close()


@pytest.fixture(scope="module")
def session(gateway):
    url, _ = gateway
    with SandboxSession(gateway_url=url, gateway_headers=HEADERS, kernel_name=KERNEL_NAME) as s:
        yield s


def kernels(url: str) -> list:
    with urllib.request.urlopen(urllib.request.Request(f"{url}/api/kernels", headers=HEADERS), timeout=10) as r:
        return json.loads(r.read())


def test_cells_run_behind_the_gateway_at_the_kernelspecs_level(session):
    r = session.run("import plotly.express as px\nprint('via gateway')\npx.bar(y=[1, 2]).show()\n6 * 7")
    assert r.ok and r.output == "via gateway\n" and r.result == "42" and len(r.charts) == 1, r.error
    assert r.isolation == "kernel" and {"landlock", "seccomp"} <= set(r.os_layers)
    r = session.run("import os\nos.system('id')")
    assert r.error.denial and r.denials[0].kind == "import" and r.error.line == 1
    events = [e.kind for e in session.stream("print(1)\n2")]
    assert events == ["stream", "result", "done"]


def test_status_timeout_and_restart_through_the_gateway(session):
    st = session.status()
    assert st.where == "gateway" and st.kernel_alive and st.isolation == "kernel" and not st.degraded
    assert "landlock" in st.os_layers.get("active", [])
    session.run("kept = 1")
    with pytest.raises(SandboxTimeout):
        session.run("while True:\n    pass", timeout=3)
    assert session.run("kept").result == "1"
    session.restart()
    assert session.run("kept").error.ename == "NameError"
    assert session.run("'after restart'").result == "'after restart'"


def test_data_and_files_through_the_gateway(session, gateway):
    _, root = gateway
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    session.put("frame", frame)
    session.put("meta", {"n": 2})
    session.run("out = frame.assign(c=frame['a'] * meta['n'])")
    assert session.get("out")["c"].tolist() == [2, 4]
    session.upload("uploaded.txt", b"through the gateway")
    assert session.download("uploaded.txt") == b"through the gateway"
    assert (root / "uploaded.txt").read_bytes() == b"through the gateway"  # the gateway's directory
    with pytest.raises(SandboxDenied):
        session.download("../gateway.log")
    (root / "sub dir").mkdir(exist_ok=True)
    (root / "sub dir" / "inner.csv").write_text("a\n1\n")
    listing = {e.name: e for e in session.listdir()}   # listed by the kernel, on the gateway's host
    assert listing["uploaded.txt"].kind == "file" and listing["uploaded.txt"].size == len(b"through the gateway")
    assert listing["sub dir"].kind == "dir"
    assert [(e.name, e.kind, e.size) for e in session.listdir("sub dir")] == [("inner.csv", "file", 4)]
    for outside in ("..", "/", "sub dir/../.."):
        with pytest.raises(SandboxDenied):
            session.listdir(outside)


def test_the_session_deletes_its_kernel_and_options_belong_to_the_gateway(gateway):
    url, _ = gateway
    before = {k["id"] for k in kernels(url)}
    with SandboxSession(gateway_url=url, gateway_headers=HEADERS, kernel_name=KERNEL_NAME) as s:
        assert s.run("1").ok
        assert len({k["id"] for k in kernels(url)} - before) == 1
    assert {k["id"] for k in kernels(url)} == before
    with pytest.raises(ValueError):
        SandboxSession(gateway_url=url, policy="strict")
    with pytest.raises(ConnectionError):   # the gateway's token is checked
        SandboxSession(gateway_url=url, gateway_headers={"Authorization": "token wrong"},
                       kernel_name=KERNEL_NAME).start()
    assert {k["id"] for k in kernels(url)} == before
