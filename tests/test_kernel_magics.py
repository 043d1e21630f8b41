"""Control magics over the protocol, and the operator's ceiling."""
import json

import pytest

from kernel_helpers import start_client
from sandbox_kernel.policy import PRESETS


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """Starts strict, may loosen up to data-science (the ceiling), writes an audit log."""
    work = tmp_path_factory.mktemp("magics-work")
    audit = work.parent / "audit.jsonl"
    client = start_client(cwd=str(work), options=[
        "--SandboxKernel.policy=strict", "--SandboxKernel.ceiling_policy=data-science",
        f"--SandboxKernel.audit_log={audit}"])
    client.audit_path = audit
    yield client
    client.shutdown()


def test_show_policy(kernel):
    out = kernel.run("%sandbox_policy")["output"]
    assert out.startswith("policy: strict") and "ceiling: data-science" in out


def test_select_policy_within_the_ceiling_applies_to_following_cells(kernel):
    assert kernel.run("import numpy")["error"]["ename"] == "ImportDenied"
    result = kernel.run("%sandbox_policy data-science\nimport numpy as np\nint(np.arange(4).sum())")
    assert result["status"] == "ok" and result["policy"] == "data-science"
    assert result["outputs"][-1]["data"]["text/plain"] == "6"
    assert kernel.run("np.zeros(1).size")["status"] == "ok"
    assert kernel.run("%sandbox_policy strict")["status"] == "ok"
    assert kernel.run("np.zeros(1).size")["status"] == "error"


def test_loosening_beyond_the_ceiling_is_refused_with_the_ceiling_named(tmp_path):
    client = start_client(cwd=str(tmp_path), options=["--SandboxKernel.policy=strict"])
    try:
        result = client.run("%sandbox_policy data-science\nopen('escalated', 'w').write('x')")
        assert result["status"] == "error" and result["error"]["ename"] == "SandboxDenied"
        message = result["error"]["evalue"]
        assert "ceiling 'strict'" in message and "--SandboxKernel.ceiling_policy" in message
        assert not (tmp_path / "escalated").exists()
        assert client.run("import numpy")["error"]["ename"] == "ImportDenied"  # still strict
        for cell in ("%%sandbox --policy data-science\nimport numpy",
                     "%%sandbox --timeout 100000\n1",
                     "%%sandbox --memory 100000000\n1",
                     "%sandbox_policy ../../../etc/passwd"):
            assert client.run(cell)["status"] == "error", cell
        assert client.run("%sandbox_isolation none")["status"] == "ok"  # the starting level is allowed
    finally:
        client.shutdown()


def test_cell_overrides_apply_to_one_cell(kernel):
    result = kernel.run("%%sandbox --timeout 1\nwhile True:\n    pass", timeout=20)
    # the cell's own 1 s limit fired (not the policy's)
    assert result["status"] == "error" and "time limit exceeded: 1 s" in result["error"]["evalue"], result["error"]
    assert kernel.run("import time\ntime.sleep(1.2)\n'next cell has the normal limit'")["status"] == "ok"
    ticks = kernel.run("%%sandbox --ticks 1000\nfor i in range(10**6):\n    pass")
    assert ticks["status"] == "error" and "tick" in ticks["error"]["evalue"]


def test_a_bad_cell_override_runs_nothing(kernel):
    kernel.run("flag = 'before'")
    result = kernel.run("%%sandbox --files on\nflag = 'after'")
    assert result["status"] == "error"
    assert kernel.run("flag")["outputs"][-1]["data"]["text/plain"] == "'before'"


def test_status_and_isolation(kernel):
    status = kernel.run("%sandbox_status")["output"]
    for part in ("policy: strict", "isolation: none", "limits: timeout", "os layers", "worker"):
        assert part in status, part
    levels = kernel.run("%sandbox_isolation")["output"]
    assert "none" in levels and "process" in levels and "kernel" in levels
    assert kernel.run("%sandbox_isolation docker")["status"] == "error"


def test_audit_lists_this_kernels_denials_and_writes_the_log(kernel):
    kernel.run("import socket")
    out = kernel.run("%sandbox_audit")["output"]
    assert "socket" in out
    lines = [json.loads(line) for line in kernel.audit_path.read_text().splitlines()]
    assert any(entry.get("target") == "socket" and entry.get("kind") == "import" for entry in lines)


def test_control_magic_inside_a_block_is_refused(kernel):
    result = kernel.run("if True:\n    %sandbox_policy data-science")
    assert result["status"] == "error" and "top level" in result["error"]["evalue"]


def test_operator_limits_override(tmp_path):
    client = start_client(cwd=str(tmp_path), options=["--SandboxKernel.limits={'timeout': 1.0}"])
    try:
        result = client.run("while True:\n    pass", timeout=20)
        assert "time limit exceeded: 1 s" in result["error"]["evalue"]
        assert client.run("%%sandbox --timeout 5\n1")["status"] == "error"  # above the operator's 1 s
    finally:
        client.shutdown()


def test_operator_policy_files(tmp_path):
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "analysis.json").write_text(json.dumps({
        "extends": "strict", "name": "analysis", "description": "strict plus numpy",
        "modules": PRESETS["strict"].to_dict()["modules"] + [{"name": "numpy"}]}))
    work = tmp_path / "work"
    work.mkdir()
    client = start_client(cwd=str(work), options=[f"--SandboxKernel.policies_dir={policies}",
                                                  "--SandboxKernel.policy=analysis"])
    try:
        assert client.run("import numpy as np\nint(np.ones(3).sum())")["outputs"][-1]["data"]["text/plain"] == "3"
        assert client.run("import pandas")["error"]["ename"] == "ImportDenied"
        assert client.run("%sandbox_policy")["output"].startswith("policy: analysis - strict plus numpy")
        assert client.run("%sandbox_policy strict")["status"] == "ok"  # tighter: allowed
        assert client.run("%sandbox_policy analysis")["status"] == "ok"  # back up to the ceiling
        assert client.run("%sandbox_policy data-science")["status"] == "error"  # beyond the ceiling
    finally:
        client.shutdown()
