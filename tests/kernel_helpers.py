"""Shared helpers for the kernel protocol tests: one kernel per test module, raw message access."""
from __future__ import annotations

import os
import queue
import time

import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

from sandbox_kernel.client import SandboxClient

KERNEL_NAME = "sandboxed-python"


def require_kernelspec() -> None:
    try:
        KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        pytest.fail(f"kernelspec '{KERNEL_NAME}' is not installed: run `python -m sandbox_kernel install "
                    f"--sys-prefix` (scripts/test.sh does)")


# Tests pin the level they run at (the kernelspec's default is `kernel` on Linux); modules that should
# hold at every level take the `isolation_level` fixture (tests/conftest.py) and pass it here.
DEFAULT_TEST_ISOLATION = os.environ.get("SANDBOX_TEST_ISOLATION", "none")


def start_client(options=None, cwd=None, env=None, isolation=None) -> SandboxClient:
    require_kernelspec()
    options = list(options or [])
    if not any(o.startswith("--SandboxKernel.isolation=") for o in options):
        options.append(f"--SandboxKernel.isolation={isolation or DEFAULT_TEST_ISOLATION}")
    return SandboxClient(KERNEL_NAME, options=options, cwd=cwd, env=env).start()


def shell_request(client: SandboxClient, msg_type: str, content: dict, *, channel: str = "shell",
                  timeout: float = 10) -> dict:
    """Send any request on the shell or control channel and return its reply."""
    kc = client.kc
    chan = kc.shell_channel if channel == "shell" else kc.control_channel
    msg = kc.session.msg(msg_type, content)
    chan.send(msg)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            reply = chan.get_msg(timeout=0.2)
        except queue.Empty:
            continue
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return reply
    raise TimeoutError(f"no reply to {msg_type}")


def iopub_types(result: dict) -> list[str]:
    return [o["type"] for o in result["outputs"]]


def run_interrupted_once_running(client: SandboxClient, code: str, *, interrupt=None, give_up: float = 60) -> dict:
    """client.run(code) for a cell that prints before it blocks, interrupted (`interrupt()`, by default the
    client's) once that output has arrived: the cell is running then. A timer cannot know when a loaded
    machine starts the cell, and an interrupt that lands before the engine or its worker has the cell is
    not kept for it. Returns what client.run returns; the wait gives up after `give_up` seconds."""
    from sandbox_kernel.client.legacy import _OUTPUT_TYPES, _result

    kc = client.kc
    msg_id = kc.execute(code)
    deadline = time.monotonic() + give_up
    interrupted = idle = False
    reply, outputs = None, []
    while reply is None or not idle:
        assert time.monotonic() < deadline, f"no answer to {code!r} after {give_up:g} s"
        try:
            msg = kc.get_iopub_msg(timeout=0.1)
        except queue.Empty:
            msg = None
        if msg is not None and msg["parent_header"].get("msg_id") == msg_id:
            if msg["msg_type"] in _OUTPUT_TYPES:
                outputs.append({"type": msg["msg_type"], **msg["content"]})
            if msg["msg_type"] == "stream" and not interrupted:
                (interrupt or client.interrupt)()
                interrupted = True
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
        if reply is None:
            try:
                msg = kc.get_shell_msg(timeout=0.01)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                reply = msg
    assert interrupted, f"{code!r} printed nothing before it ended"
    return _result(reply, outputs)
