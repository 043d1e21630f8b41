"""Shared helpers for the kernel protocol tests: one kernel per test module, raw message access."""
from __future__ import annotations

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


def start_client(options=None, cwd=None, env=None) -> SandboxClient:
    require_kernelspec()
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
