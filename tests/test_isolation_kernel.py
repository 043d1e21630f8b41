"""The Jupyter kernel at isolation `process` and `kernel`, driven over the protocol like an agent would:
results, rich display, denials, status, interrupts, memory bombs, restart."""
import sys

import pytest

from isolation_support import kernel_level_problem

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="worker levels are tested on Linux")

PROBLEM = kernel_level_problem()
LEVELS = ["process"] + (["kernel"] if PROBLEM is None else [])


@pytest.fixture(scope="module", params=LEVELS)
def client(request, tmp_path_factory):
    from kernel_helpers import start_client

    level = request.param
    c = start_client(options=[f"--SandboxKernel.isolation={level}",
                              "--SandboxKernel.limits={'memory_mb': 512}"],
                     cwd=str(tmp_path_factory.mktemp(f"kernel-{level}")))
    c.level = level
    yield c
    c.shutdown()


def plain(result):
    for o in result["outputs"]:
        if o["type"] == "execute_result":
            return o["data"].get("text/plain")
    return None


def test_state_results_and_metadata(client):
    assert client.run("x = 40")["status"] == "ok"
    r = client.run("x + 2")
    assert r["status"] == "ok" and plain(r) == "42"
    assert r["isolation"] == client.level


def test_plotly_and_pandas_display_through_the_worker(client):
    r = client.run("import pandas as pd\nimport plotly.express as px\n"
                   "df = pd.DataFrame({'k': ['a', 'b'], 'v': [1, 2]})\npx.bar(df, x='k', y='v')")
    assert r["status"] == "ok", r["error"]
    bundles = [o["data"] for o in r["outputs"] if o["type"] in ("execute_result", "display_data")]
    assert any("application/vnd.plotly.v1+json" in b for b in bundles)
    assert r["charts"], "the figure appears in execute_reply.metadata['sandbox']['charts']"


def test_denials_cross_the_worker(client):
    r = client.run("import subprocess")
    assert r["status"] == "error" and r["denials"]


def test_status_names_the_layers(client):
    r = client.run("%sandbox_status")
    assert f"isolation: {client.level}" in r["output"]
    if client.level == "kernel":
        for layer in ("landlock", "seccomp", "rlimits", "capabilities"):
            assert layer in r["output"]


def test_interrupt_reaches_the_worker_and_keeps_state(client):
    from kernel_helpers import run_interrupted_once_running

    client.run("kept = 'yes'")
    r = run_interrupted_once_running(client, "print('running')\nwhile True:\n    pass")
    # the engine in the worker ended the cell on the interrupt (not its time limit, not a killed worker)
    assert r["status"] == "error" and r["error"]["ename"] == "Cancelled", r["error"]
    assert plain(client.run("kept")) == "'yes'"


def test_memory_bomb_leaves_the_kernel_answering(client):
    r = client.run("import numpy as np\nxs = []\nwhile True:\n    xs.append(np.ones(2**22))", timeout=60)
    assert r["status"] == "error" and "memory" in (r["error"]["evalue"] or "").lower()
    client.run("xs = None")
    assert plain(client.run("1 + 1")) == "2"
