"""The agent API: sandboxed Python sessions over the Jupyter protocol.

    from sandbox_kernel.client import SandboxSession

    with SandboxSession(policy="data-science") as sandbox:
        sandbox.put("values", [3, 1, 2])
        r = sandbox.run("print(max(values))")
        r.output, r.result, r.charts, r.error, r.denials, r.to_dict()

SandboxSession (sync) and AsyncSandboxSession (asyncio) start a kernel here, take one from a
sandbox_kernel.pool.KernelPool, or drive one behind Jupyter Kernel Gateway (docs/agents.md).
SandboxClient and run_code are the earlier dict-returning API, kept as they were.
"""
from .legacy import SandboxClient, run_code
from .results import (Denial, Event, ExecutionError, ExecutionResult, FileInfo, SandboxDenied, SandboxError,
                      SandboxTimeout, SessionStatus)
from .session import AsyncSandboxSession, SandboxSession, kernel_options

__all__ = ["AsyncSandboxSession", "Denial", "Event", "ExecutionError", "ExecutionResult", "FileInfo",
           "SandboxClient", "SandboxDenied", "SandboxError", "SandboxSession", "SandboxTimeout", "SessionStatus",
           "kernel_options", "run_code"]
