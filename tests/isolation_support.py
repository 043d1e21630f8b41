"""Shared helpers for the isolation tests (test-only policies, event collection, loopback listener)."""
from __future__ import annotations

import socket
import threading

from sandbox_kernel.policy import ALWAYS_DENIED_MODULES, PRESETS, Policy

ROGUE_MODULES = ("os", "posix", "socket", "subprocess", "ctypes", "signal", "time")


def rogue_policy(**changes) -> Policy:
    """data-science plus os/socket/subprocess/ctypes: stands in for a C extension gone rogue, so that
    the tests exercise the OS layers rather than the Python gates."""
    base = PRESETS["data-science"].to_dict()
    data = {
        "name": "test-rogue",
        "description": "TEST ONLY: grants os, socket, subprocess and ctypes to sandboxed code",
        "modules": base["modules"] + [{"name": m} for m in ROGUE_MODULES],
        "denied_modules": [m for m in ALWAYS_DENIED_MODULES
                           if m.split(".")[0] not in ROGUE_MODULES],
        "object_deny": base["object_deny"],
        "limits": {**base["limits"], **changes.pop("limits", {})},
        "files": True,
        "network": False,
    }
    data.update(changes)
    return Policy.from_dict(data)


class Run:
    """Runs a cell, keeps its events and the done summary."""

    def __init__(self, backend, source, **kw):
        self.events = []
        self.done = backend.run_cell(source, emit=self.events.append, **kw)

    @property
    def ok(self):
        return self.done["status"] == "ok"

    @property
    def error(self):
        return self.done.get("error") or {}

    def stdout(self):
        return "".join(e["text"] for e in self.events if e["type"] == "stream" and e["name"] == "stdout")

    def results(self):
        return [e["data"] for e in self.events if e["type"] == "result"]

    def text(self):
        r = self.results()
        return r[-1].get("text/plain") if r else None


class Listener:
    """A loopback TCP listener that records every connection and byte it receives."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(5)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.data = b""
        self._stop = False
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _serve(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.connections += 1
            conn.settimeout(0.5)
            try:
                while True:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    self.data += chunk
            except OSError:
                pass
            conn.close()

    def close(self):
        self._stop = True
        self._t.join(2)
        self.sock.close()


class RogueEngine:
    """TEST ONLY. An "engine" that runs each cell as plain, unsandboxed Python inside the worker: the
    worst case of a C extension gone rogue, with the Python gates out of the picture entirely. What it
    cannot do is exactly what the OS layers (and the process boundary) take away.

    Loaded in a worker with ``make_backend(..., engine="isolation_support:RogueEngine",
    extra_sys_path=[tests_dir])``."""

    def __init__(self, policy, *, workdir=None):
        self.policy = policy
        self.workdir = workdir
        self.reset()

    def reset(self):
        self.namespace = {"__name__": "__main__"}

    def run_cell(self, source, *, emit, policy=None, limits=None, execution_count=None):
        import ast
        import contextlib
        import io
        import time

        started = time.monotonic()

        class Out(io.TextIOBase):
            def __init__(self, name):
                self.name = name

            def write(self, text):
                emit({"type": "stream", "name": self.name, "text": text})
                return len(text)

        error = None
        try:
            tree = ast.parse(source)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            with contextlib.redirect_stdout(Out("stdout")), contextlib.redirect_stderr(Out("stderr")):
                exec(compile(tree, "<cell>", "exec"), self.namespace)
                if last is not None:
                    value = eval(compile(last, "<cell>", "eval"), self.namespace)
                    if value is not None:
                        emit({"type": "result", "data": {"text/plain": repr(value)}, "metadata": {}})
        except BaseException as exc:  # noqa: B902
            error = {"ename": type(exc).__name__, "evalue": str(exc), "traceback": [repr(exc)]}
            emit({"type": "error", **error, "denial": None})
        return {"type": "done", "status": "error" if error else "ok", "ticks": 0,
                "elapsed_ms": (time.monotonic() - started) * 1000, "policy": (policy or self.policy).name,
                "denials": [], "truncated": False, "output": "", "charts": [], "error": error,
                "execution_count": execution_count}

    def evaluate(self, expression, *, policy=None):
        return {"status": "ok", "data": {"text/plain": repr(eval(expression, self.namespace))}, "metadata": {}}

    def complete(self, code, cursor_pos=None):
        return {"matches": [], "cursor_start": 0, "cursor_end": 0, "metadata": {}, "status": "ok"}

    def inspect(self, code, cursor_pos=None, detail_level=0):
        return {"found": False, "data": {}, "metadata": {}, "status": "ok"}

    def cancel(self):
        raise KeyboardInterrupt  # runs in the worker's SIGINT handler, in the main thread


def kernel_level_problem():
    """Why the `kernel` level cannot be tested on this machine, or None."""
    import sys

    if not sys.platform.startswith("linux"):
        return "the kernel level needs Linux"
    from sandbox_kernel.isolation import landlock, seccomp

    if landlock.abi_version() < 1:
        return "Landlock is not available on this kernel"
    ok, why = seccomp.available()
    return None if ok else why
