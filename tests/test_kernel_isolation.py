"""The kernel over a worker backend: the same protocol, interrupt, a lost worker, switching levels."""
import json
import os
import re
import signal

import pytest

from kernel_helpers import run_interrupted_once_running, start_client

PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    client = start_client(cwd=str(tmp_path_factory.mktemp("isolation-work")), options=[
        "--SandboxKernel.isolation=process", "--SandboxKernel.isolation_ceiling=none"])
    yield client
    client.shutdown()


def worker_pid(kernel) -> int:
    status = kernel.run("%sandbox_status")["output"]
    return int(re.search(r'"pid": (\d+)', status).group(1))


def test_cells_run_in_a_worker_with_the_same_protocol(kernel):
    result = kernel.run("import plotly.express as px\nprint('hi')\npx.bar(x=['a'], y=[1])")
    assert result["status"] == "ok" and result["isolation"] == "process"
    assert result["output"] == "hi\n"
    assert PLOTLY in [o for o in result["outputs"] if o["type"] == "execute_result"][0]["data"]
    assert worker_pid(kernel) != kernel.km.provisioner.pid


def test_interrupt_in_a_worker_keeps_state(kernel):
    kernel.run("kept_in_worker = 5")
    result = run_interrupted_once_running(kernel, "print('running')\nwhile True:\n    pass")
    # the engine in the worker ended the cell on the interrupt (not its time limit, not a killed worker)
    assert result["status"] == "error" and result["error"]["ename"] == "Cancelled", result["error"]
    assert kernel.run("kept_in_worker")["outputs"][-1]["data"]["text/plain"] == "5"


def test_a_killed_worker_is_reported_and_replaced(kernel):
    kernel.run("lost_soon = 1")
    pid = worker_pid(kernel)
    # killed while the cell sleeps in it (a timer might kill it before the cell gets there)
    result = run_interrupted_once_running(kernel, "import time\nprint('sleeping')\ntime.sleep(20)",
                                          interrupt=lambda: os.kill(pid, signal.SIGKILL))
    assert result["status"] == "error"
    assert "lost" in result["error"]["evalue"]
    assert result.get("worker", {}).get("state_lost") is True
    assert kernel.run("lost_soon")["error"]["ename"] == "NameError"   # fresh worker, state gone
    assert kernel.run("1 + 1")["status"] == "ok"


def test_switching_isolation_says_state_is_lost(kernel):
    kernel.run("carried = 1")
    result = kernel.run("%sandbox_isolation none")
    assert result["status"] == "ok" and "fresh" in result["output"]
    assert kernel.run("carried")["error"]["ename"] == "NameError"
    assert kernel.run("'in process'")["isolation"] == "none"
    result = kernel.run("%sandbox_isolation process")
    assert result["status"] == "ok"
    assert kernel.run("'back in a worker'")["isolation"] == "process"


def test_status_reports_os_layers_and_worker_health(kernel):
    status = kernel.run("%sandbox_status")["output"]
    layers = json.loads(re.search(r"os layer details: (\{.*\})", status).group(1))
    assert "rlimits" in layers.get("active", [])
    assert re.search(r"os layers: active: [^;]*rlimits", status)
    assert '"state": "ready"' in status


def test_kernel_level_runs_confined_or_not_at_all(tmp_path):
    """At `kernel` isolation a cell runs only when every OS layer took effect (fail closed)."""
    client = start_client(cwd=str(tmp_path), options=["--SandboxKernel.isolation=kernel"])
    try:
        result = client.run("confined = 'yes'\nconfined")
        status = client.run("%sandbox_status")["output"]
        if result["status"] == "ok":
            assert "failed: none; degraded: no" in status
            assert result["isolation"] == "kernel"
        else:
            assert result["error"]["ename"] == "SandboxUnavailable"
            assert client.run("confined")["status"] == "error"   # nothing ran
        assert client.run("%sandbox_isolation process")["status"] == "error"   # below the ceiling
    finally:
        client.shutdown()


def test_status_says_what_each_level_holds_against(kernel):
    """Levels `none` and `process` are honest: they contain cooperative code and crashes, not attackers."""
    assert "Use isolation 'kernel' for untrusted code" in kernel.run("%sandbox_status")["output"]
    kernel.run("%sandbox_isolation none")
    status = kernel.run("%sandbox_status")["output"]
    assert "not an attacker" in status and "Use isolation 'kernel'" in status
    kernel.run("%sandbox_isolation kernel")
    status = kernel.run("%sandbox_status")
    assert "the OS confines the worker" in status["output"] and "degraded" not in status
    kernel.run("%sandbox_isolation process")


def test_a_files_policy_after_a_files_off_policy_gets_the_working_directory(tmp_path):
    """A worker started for a policy without files has a private scratch directory; moving to a policy
    with files (and nothing else different) starts a worker with rights on the real working directory
    (and says state is lost)."""
    from sandbox_kernel.policy import PRESETS

    policies = tmp_path / "policies"
    policies.mkdir()
    no_files = {**PRESETS["data-science"].to_dict(), "name": "ds-no-files", "files": False}
    (policies / "ds-no-files.json").write_text(json.dumps(no_files))
    work = tmp_path / "work"
    work.mkdir()
    client = start_client(cwd=str(work), isolation="kernel", options=[
        f"--SandboxKernel.policies_dir={policies}", "--SandboxKernel.policy=ds-no-files",
        "--SandboxKernel.ceiling_policy=data-science"])
    try:
        switched = client.run("%sandbox_policy data-science")
        assert "working directory" in switched["output"] and "new sandbox worker" in switched["output"]
        result = client.run("with open('kept.txt', 'w') as fh:\n    fh.write('here')")
        assert result["status"] == "ok", result["error"]
        assert (work / "kept.txt").read_text() == "here"
    finally:
        client.shutdown()


def test_the_kernel_process_is_not_dumpable(kernel):
    """A worker without Landlock (degraded mode) shares the kernel's uid: the kernel marks itself
    non-dumpable (prctl, read back with PR_GET_DUMPABLE) so /proc/<kernel>/environ and mem need
    CAP_SYS_PTRACE (the breach review's finding); what resource monitors read stays readable."""
    pid = kernel.km.provisioner.pid
    with open(f"/proc/{pid}/status") as fh:
        assert "Name:" in fh.read()
    assert "kernel process: non-dumpable" in kernel.run("%sandbox_status")["output"]
