"""The Jupyter protocol as front ends and agents use it: conformance, interrupt, restart,
stop_on_error, user_expressions, kernel_info."""
import time

import jupyter_kernel_test
import pytest

from kernel_helpers import (KERNEL_NAME, iopub_types, require_kernelspec, run_interrupted_once_running, shell_request,
                            start_client)


class SandboxConformance(jupyter_kernel_test.KernelTests):
    kernel_name = KERNEL_NAME
    language_name = "python"
    file_extension = ".py"

    code_hello_world = "print('hello, world')"
    # No stderr sample: sandboxed code has no handle on stderr (no sys); the engine writes there only
    # for its own notes, which are checked in test_kernel_display.py.
    completion_samples = [{"text": "zi", "matches": {"zip"}}]
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples = ["import = 7q"]
    code_generate_error = "raise ValueError('boom')"
    code_execute_result = [
        {"code": "1+2+3", "result": "6"},
        {"code": "[n * n for n in range(4)]", "result": "[0, 1, 4, 9]"},
        {"code": "'sandbox'.upper()", "result": "'SANDBOX'"},
    ]
    code_display_data = [
        {"code": "display({'a': 1})", "mime": "text/plain"},
        {"code": "import pandas as pd\ndisplay(pd.DataFrame({'x': [1, 2]}))", "mime": "text/html"},
    ]
    code_history_pattern = "1?2*"
    supported_history_operations = ("tail", "range", "search")
    code_inspect_sample = "zip"

    @classmethod
    def setUpClass(cls):
        require_kernelspec()
        super().setUpClass()


@pytest.fixture(scope="module", params=["none", "process", "kernel"])
def kernel(request):
    """The protocol must hold at every isolation level."""
    client = start_client(isolation=request.param)
    yield client
    client.shutdown()


def test_kernel_info_turns_off_debugger_and_subshells(kernel):
    reply = shell_request(kernel, "kernel_info_request", {})
    content = reply["content"]
    assert content["implementation"] == "sandboxed-python"
    assert content["language_info"]["name"] == "python"
    assert "debugger" not in content["supported_features"]
    assert "kernel subshells" not in content["supported_features"]


def test_interrupt_ends_a_busy_cell_and_keeps_state(kernel):
    kernel.run("kept = 41")
    result = run_interrupted_once_running(kernel, "also_kept = 1\nprint('busy')\nwhile True:\n    kept = kept")
    # the interrupt ended the cell, as the kernel reports (not its time limit)
    assert result["status"] == "error" and result["error"]["ename"] == "Cancelled", result["error"]
    assert "interrupt" in result["error"]["evalue"].lower()
    assert kernel.run("kept + also_kept")["outputs"][-1]["data"]["text/plain"] == "42"


def test_interrupt_ends_a_sleeping_cell(kernel):
    result = run_interrupted_once_running(kernel, "import time\nprint('sleeping')\ntime.sleep(60)")
    assert result["status"] == "error" and result["error"]["ename"] == "Cancelled", result["error"]


def test_interrupt_between_cells_does_not_cancel_the_next_cell(kernel):
    # the kernel has answered the interrupt (no sleep guessing how long it takes) before the cell is sent
    assert shell_request(kernel, "interrupt_request", {}, channel="control")["content"]["status"] == "ok"
    assert kernel.run("sum(range(10))")["status"] == "ok"


def test_stop_on_error_aborts_queued_cells(kernel):
    kc = kernel.kc
    # ipykernel aborts the requests queued when the error is handled (stop_on_error_timeout 0): the first cell
    # waits a second before failing, so that on a loaded machine the second request is queued by then
    first = kc.execute("import time\ntime.sleep(1)\nraise ValueError('first fails')", stop_on_error=True)
    second = kc.execute("never_bound = 1")
    replies = {}
    while len(replies) < 2:
        msg = kc.get_shell_msg(timeout=20)
        replies[msg["parent_header"]["msg_id"]] = msg["content"]
    assert replies[first]["status"] == "error"
    assert replies[second]["status"] == "aborted"
    assert kernel.run("never_bound")["error"]["ename"] == "NameError"


def test_without_stop_on_error_the_next_cell_runs(kernel):
    kc = kernel.kc
    first = kc.execute("raise ValueError('first fails')", stop_on_error=False)
    second = kc.execute("bound_after_error = 1")
    replies = {}
    while len(replies) < 2:
        msg = kc.get_shell_msg(timeout=20)
        replies[msg["parent_header"]["msg_id"]] = msg["content"]
    assert replies[first]["status"] == "error" and replies[second]["status"] == "ok"


def test_user_expressions_run_in_the_sandbox(kernel):
    result = kernel.run("base = 6", user_expressions={
        "ok": "base * 7",
        "import": "__import__('os').system('touch /tmp/sbx-user-expr-pwned')",
        "module": "import os",
        "open": "open('/etc/passwd').read()",
    })
    exprs = result["user_expressions"]
    assert exprs["ok"] == {"status": "ok", "data": {"text/plain": "42"}, "metadata": {}}
    for name in ("import", "module", "open"):
        assert exprs[name]["status"] == "error", name
    import os
    assert not os.path.exists("/tmp/sbx-user-expr-pwned")


def test_user_expressions_use_the_cell_policy(kernel):
    kernel.run("import numpy as np")
    loose = kernel.run("z = 1", user_expressions={"sum": "np.zeros(2).sum()"})
    assert loose["user_expressions"]["sum"]["status"] == "ok"
    strict = kernel.run("%%sandbox --policy strict\nz = 1", user_expressions={"sum": "np.zeros(2).sum()"})
    assert strict["user_expressions"]["sum"]["status"] == "error"


def test_silent_execution_publishes_nothing(kernel):
    kc = kernel.kc
    msg_id = kc.execute("print('quiet')\n123", silent=True)
    reply = kc.get_shell_msg(timeout=20)
    assert reply["content"]["status"] == "ok"
    outputs = []
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except Exception:
            continue
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] in ("stream", "execute_result"):
            outputs.append(msg)
    assert outputs == []


def test_restart_gives_a_fresh_namespace_with_the_same_configuration():
    client = start_client(options=["--SandboxKernel.policy=strict"])
    try:
        client.run("before_restart = 1")
        client.restart()
        assert client.run("before_restart")["error"]["ename"] == "NameError"
        status = client.run("%sandbox_policy")["output"]
        assert status.startswith("policy: strict")
        assert client.run("import numpy")["status"] == "error"
    finally:
        client.shutdown()


def test_execute_reply_metadata_for_agents(kernel, request):
    result = kernel.run("print('mean=2.0')\nimport os")
    for key in ("output", "charts", "error", "denials", "truncated", "ticks", "elapsed_ms", "policy",
                "isolation"):
        assert key in result, key
    assert result["output"] == "mean=2.0\n"
    assert result["error"]["ename"] == "ImportDenied"
    assert result["denials"][0]["kind"] == "import" and result["denials"][0]["target"] == "os"
    level = request.node.callspec.params["kernel"]
    assert result["policy"] == "data-science" and result["isolation"] == level
    if level == "kernel":
        assert {"landlock", "seccomp", "rlimits"} <= set(result["os_layers"]), result["os_layers"]
    elif level == "none":
        assert result["os_layers"] == []
    assert "error" in iopub_types(result)
