"""SandboxClient, the first agent API (kept for the code that uses it; SandboxSession is the full one).

    from sandbox_kernel.client import SandboxClient

    with SandboxClient() as sandbox:
        r = sandbox.run("import pandas as pd\\nprint(pd.Series([1, 2, 3]).mean())")
        r["output"], r["charts"], r["error"], r["denials"]

Each result is a plain dict: the kernel's ``execute_reply.metadata["sandbox"]`` (output, charts,
error, denials, truncated, ticks, elapsed_ms, policy, isolation) plus ``status``,
``execution_count``, ``outputs`` (every iopub output message, in order, as ``{"type", ...content}``)
and ``user_expressions``. Nothing here trusts the kernel's output beyond parsing JSON.
"""
from __future__ import annotations

import queue
import time

from jupyter_client.manager import KernelManager

from ..install import DEFAULT_NAME
from .results import SandboxTimeout

_PLOTLY = "application/vnd.plotly.v1+json"
_OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error", "update_display_data", "clear_output",
                 "comm_open", "comm_msg", "comm_close")


class SandboxClient:
    def __init__(self, kernel_name: str = DEFAULT_NAME, *, options: list[str] | None = None,
                 cwd: str | None = None, env: dict | None = None, startup_timeout: float = 60):
        """`options` are operator settings for the kernel's command line, e.g.
        ``["--SandboxKernel.policy=strict"]``; `cwd` is the kernel's (and sandbox's) working directory;
        `env` replaces the kernel's environment."""
        self.kernel_name = kernel_name
        self.options = list(options or [])
        self.cwd = cwd
        self.env = env
        self.startup_timeout = startup_timeout
        self.km: KernelManager | None = None
        self.kc = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> "SandboxClient":
        self.km = KernelManager(kernel_name=self.kernel_name)
        kwargs = {"extra_arguments": self.options}
        if self.cwd:
            kwargs["cwd"] = self.cwd
        if self.env is not None:
            kwargs["env"] = self.env
        self.km.start_kernel(**kwargs)
        self._connect()
        return self

    def _connect(self):
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=self.startup_timeout)

    def restart(self) -> None:
        """A fresh namespace with the same configuration."""
        self.kc.stop_channels()
        self.km.restart_kernel(now=False)  # a graceful stop: the kernel ends its workers
        self._connect()

    def interrupt(self) -> None:
        self.km.interrupt_kernel()

    def shutdown(self) -> None:
        if self.kc is not None:
            self.kc.stop_channels()
        if self.km is not None and self.km.has_kernel:
            self.km.shutdown_kernel(now=True)
        self.kc = self.km = None

    def __enter__(self) -> "SandboxClient":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # -- running code ------------------------------------------------------------------------------

    def run(self, code: str, *, timeout: float = 120, user_expressions: dict | None = None,
            stop_on_error: bool = False) -> dict:
        """Run one cell; returns the structured result. A cell still running after `timeout`
        seconds is interrupted and SandboxTimeout is raised."""
        msg_id = self.kc.execute(code, user_expressions=user_expressions or {}, stop_on_error=stop_on_error)
        outputs: list[dict] = []
        deadline = time.monotonic() + timeout
        reply = None
        idle = False
        while reply is None or not idle:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.interrupt()
                raise SandboxTimeout(f"the cell did not finish within {timeout:g} s and was interrupted")
            # iopub first, as fast as it comes: a cell's messages pile up in ZeroMQ while this waits,
            # and past its high-water mark the tail (the idle status too) is dropped. The shell
            # reply is looked for only when iopub has nothing waiting.
            try:
                msg = self.kc.get_iopub_msg(timeout=min(remaining, 0.05 if reply is None else 1))
            except queue.Empty:
                if reply is None:
                    try:
                        msg = self.kc.get_shell_msg(timeout=min(remaining, 0.05))
                        if msg["parent_header"].get("msg_id") == msg_id:
                            reply = msg
                    except queue.Empty:
                        pass
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and msg["content"].get("execution_state") == "idle":
                idle = True
            elif kind in _OUTPUT_TYPES:
                outputs.append({"type": kind, **msg["content"]})
        return _result(reply, outputs)


def _result(reply: dict, outputs: list[dict]) -> dict:
    content = reply["content"]
    sandbox = dict(reply.get("metadata", {}).get("sandbox") or {})
    result = {
        "status": content.get("status"),
        "output": "".join(o.get("text", "") for o in outputs if o["type"] == "stream" and o.get("name") == "stdout"),
        "charts": [],
        "error": None,
        "denials": [],
        "truncated": False,
        **sandbox,
        "execution_count": content.get("execution_count"),
        "outputs": outputs,
        "user_expressions": content.get("user_expressions", {}),
    }
    # A chart whose copy in the reply did not fit the cell's display cap was still displayed.
    displayed = [o["data"][_PLOTLY] for o in outputs
                 if o["type"] in ("display_data", "execute_result") and _PLOTLY in (o.get("data") or {})]
    if len(displayed) > len(result["charts"]):
        result["charts"] = displayed
    if result["error"] is None and content.get("status") == "error":
        result["error"] = {"ename": content.get("ename"), "evalue": content.get("evalue"),
                           "traceback": content.get("traceback", [])}
    return result


def run_code(code: str, **options) -> dict:
    """Start a kernel, run one cell, stop the kernel."""
    timeout = options.pop("timeout", 120)
    with SandboxClient(**options) as sandbox:
        return sandbox.run(code, timeout=timeout)
