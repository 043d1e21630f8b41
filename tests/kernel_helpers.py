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
