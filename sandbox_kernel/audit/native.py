"""AUDIT ONLY. The self-audit's native canaries: the attempts a breached worker would make, run as plain
Python (system calls through ``os``/``socket``) inside a real worker, with the gates out of the picture.
What such a canary cannot do is exactly what the OS layers (and the process boundary) take away.

Loaded only by the audit, through the worker backend's ``engine=`` option (an operator's setting, never
a cell's). It runs nothing but the fixed canaries below: a "cell" is a JSON request naming one canary
and its data (paths, a port, a pid), checked field by field; any other text is refused. Each canary
answers only whether its attempt worked (a read returns whether the digest matched, never the bytes),
reads, writes and creates only files named ``sandbox-audit-*``, sends only the fixed bytes ``TAG`` to a
loopback port, and signals with SIGWINCH (ignored by default), so that even a misconfigured kernel that
loaded this engine for its cells would give them nothing worth having.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import sys
import time

PREFIX = "sandbox-audit-"
TAG = b"AUDIT-native"   # what the connect canary sends (no newline: no line protocol acts on it)
# What a spawned child runs (fixed): create the marker file named on its command line.
_CHILD = "import sys; open(sys.argv[1], 'x').close()"
_FIELDS = {
    "path": lambda v: isinstance(v, str) and os.path.isabs(v) and "\0" not in v,
    "port": lambda v: type(v) is int and 0 < v < 65536,
    "pid": lambda v: type(v) is int and v > 1,
    "digest": lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) is not None,
}


def _audit_name(path: str) -> str:
    if not os.path.basename(path).startswith(PREFIX):
        raise ValueError(f"the audit only touches files named {PREFIX}*")
    return path


def control_workdir() -> dict:
    """Positive control: the worker's own directory is writable and readable."""
    name = f"{PREFIX}control-{os.getpid()}"
    with open(name, "w") as fh:
        fh.write("ok")
    with open(name) as fh:
        ok = fh.read() == "ok"
    os.unlink(name)
    return {"done": ok}


def control_python() -> dict:
    """Positive control: the Python installation is readable (what every import needs)."""
    with open(os.__file__, "rb") as fh:
        return {"done": len(fh.read(64)) > 0}


def spawn(path: str) -> dict:
    pid = os.posix_spawn(sys.executable, [sys.executable, "-I", "-S", "-c", _CHILD, _audit_name(path)], {})
    os.waitpid(pid, 0)
    return {"done": True}


def fork() -> dict:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return {"done": True}


def connect(port: int) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(TAG)
    return {"done": True}


def read(path: str, digest: str) -> dict:
    with open(_audit_name(path), "rb") as fh:
        return {"done": True, "matches": hashlib.sha256(fh.read(4096)).hexdigest() == digest}


def append(path: str) -> dict:
    fd = os.open(_audit_name(path), os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, b"BREACHED BY A NATIVE CANARY\n")
    finally:
        os.close(fd)
    return {"done": True}


def create(path: str) -> dict:
    os.close(os.open(_audit_name(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    return {"done": True}


def send_signal(pid: int) -> dict:
    os.kill(pid, signal.SIGWINCH)
    return {"done": True}


CANARIES = {
    "control_workdir": (control_workdir, ()),
    "control_python": (control_python, ()),
    "spawn": (spawn, ("path",)),
    "fork": (fork, ()),
    "connect": (connect, ("port",)),
    "read": (read, ("path", "digest")),
    "append": (append, ("path",)),
    "create": (create, ("path",)),
    "signal": (send_signal, ("pid",)),
}


def parse_request(source: str):
    """The canary a request names and its checked arguments; ValueError for anything else."""
    try:
        request = json.loads(source)
    except ValueError:
        raise ValueError("not an audit request") from None
    if not isinstance(request, dict) or set(request) - {"canary", "args"}:
        raise ValueError("not an audit request")
    name, args = request.get("canary"), request.get("args", {})
    if name not in CANARIES or not isinstance(args, dict):
        raise ValueError("unknown canary")
    fn, fields = CANARIES[name]
    if set(args) != set(fields) or not all(_FIELDS[k](args[k]) for k in fields):
        raise ValueError(f"canary {name!r} takes {', '.join(fields) or 'no arguments'}")
    return fn, args


class NativeCanaries:
    """The engine interface (run_cell, evaluate, complete, inspect, cancel, reset) over CANARIES."""

    def __init__(self, policy, *, workdir=None):
        self.policy = policy
        self.workdir = workdir

    def reset(self):
        pass

    def run_cell(self, source, *, emit, policy=None, limits=None, execution_count=None, display_bytes=None):
        started = time.monotonic()
        error = None
        try:
            fn, args = parse_request(source)
        except ValueError as exc:
            error = {"ename": "AuditRequestRefused", "evalue": str(exc), "traceback": [str(exc)]}
        else:
            try:
                outcome = fn(**args)
            except OSError as exc:
                outcome = {"done": False, "error": f"{type(exc).__name__}: "
                                                   f"{os.strerror(exc.errno) if exc.errno else exc}"}
            except Exception as exc:  # noqa: BLE001 - reported as the canary's outcome
                outcome = {"done": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            emit({"type": "result", "data": {"text/plain": json.dumps(outcome)}, "metadata": {}})
        if error:
            emit({"type": "error", **error, "denial": None})
        return {"type": "done", "status": "error" if error else "ok", "ticks": 0,
                "elapsed_ms": (time.monotonic() - started) * 1000, "policy": (policy or self.policy).name,
                "denials": [], "truncated": False, "output": "", "charts": [], "error": error,
                "execution_count": execution_count}

    def evaluate(self, expression, *, policy=None):
        return {"status": "error", "ename": "AuditRequestRefused", "evalue": "the audit engine evaluates nothing",
                "traceback": []}

    def complete(self, code, cursor_pos=None):
        return {"matches": [], "cursor_start": 0, "cursor_end": 0, "metadata": {}, "status": "ok"}

    def inspect(self, code, cursor_pos=None, detail_level=0):
        return {"found": False, "data": {}, "metadata": {}, "status": "ok"}

    def cancel(self):
        raise KeyboardInterrupt  # the worker's SIGINT handler, in the main thread
