"""Where the engine runs: in the kernel's process (`none`), in a worker process (`process`), or in a
worker the operating system confines (`kernel`).

Every backend offers the same methods as :class:`sandbox_kernel.engine.Engine` and speaks the same
event protocol (plain JSON dicts; see engine.py), so the kernel does not care which one it talks to.
"""
from __future__ import annotations

import os

from ..policy import ISOLATION_LEVELS, Policy


class InProcessBackend:
    """Level `none`: the engine is a direct call. The Python-level gates are the only wall."""

    level = "none"

    def __init__(self, policy: Policy, workdir: str | None = None):
        from ..engine import Engine

        if workdir:
            os.makedirs(workdir, exist_ok=True)  # as the worker levels do
        self.engine = Engine(policy, workdir=workdir)

    def run_cell(self, source, *, emit, policy=None, limits=None, execution_count=None, display_bytes=None):
        """``display_bytes``: what the cell's displays may add up to before the engine notes the rest."""
        return self.engine.run_cell(source, emit=emit, policy=policy, limits=limits,
                                    execution_count=execution_count, display_bytes=display_bytes)

    def evaluate(self, expression, *, policy=None, display_bytes=None):
        return self.engine.evaluate(expression, policy=policy)

    def complete(self, code, cursor_pos):
        return self.engine.complete(code, cursor_pos)

    def inspect(self, code, cursor_pos, detail_level=0):
        return self.engine.inspect(code, cursor_pos, detail_level)

    def cancel(self):
        self.engine.cancel()

    def reset(self):
        self.engine.reset()

    def status(self) -> dict:
        return {"isolation": "none", "os_layers": {}, "worker": None}

    def needs_restart_for(self, policy: Policy, level: str | None = None) -> str | None:
        """Same contract as the worker backends: in-process there are no OS restrictions to loosen."""
        if level is not None and level != self.level:
            return f"isolation changes from 'none' to '{level}'"
        return None

    def restart(self, policy: Policy | None = None) -> None:
        """A fresh engine (and namespace), optionally with a new base policy."""
        from ..engine import Engine

        self.engine.close()
        self.engine = Engine(policy or self.engine.policy, workdir=self.engine.workdir)

    def shutdown(self):
        self.engine.close()


def default_isolation() -> str:
    """The level a kernel should start with when the operator did not choose one.

    Linux: ``kernel`` (secure by default: a worker confined by Landlock, seccomp and rlimits; it fails
    closed with a message saying what to do if the host cannot apply a layer). Other POSIX systems:
    ``process`` (crash and memory containment; the OS layers are Linux-only). Elsewhere: ``none``.
    docs/isolation.md explains the choice."""
    import sys

    if sys.platform.startswith("linux"):
        return "kernel"
    if os.name == "posix":
        return "process"
    return "none"


def make_backend(level: str, policy: Policy, workdir: str | None = None, **options):
    """The backend for ``level``. Options for the worker levels: see WorkerBackend (degraded, grace,
    cancel_grace, spare, startup_timeout, warm, fsize_mb, nofile, extra_read, max_cell_bytes ...)."""
    if level not in ISOLATION_LEVELS:
        raise ValueError(f"unknown isolation level {level!r}; choose one of {', '.join(ISOLATION_LEVELS)}")
    if level == "none":
        return InProcessBackend(policy, workdir)
    from .process import WorkerBackend

    return WorkerBackend(level, policy, workdir, **options)
