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

    def run_cell(self, source, *, emit, policy=None, limits=None, execution_count=None, display_bytes=None):
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


# -- the breach suite (tests/test_breach_*.py) -------------------------------------------------------
# A worker owned by the cell: RogueEngine runs each cell as plain Python inside a real `kernel` worker,
# so what a cell cannot do is exactly what the OS layers take away. One worker per Landlock ABI, shared
# by the tests of a module (module fixtures in tests/test_breach_*.py).

VICTIM_CODE = r"""
import ctypes, os, platform, signal, sys, time
log = sys.argv[1]
if os.geteuid() == 0:
    # Hold no capability, as an ordinary user's processes do: otherwise the kernel's capability rules
    # (a process may not renice or inspect one with more capabilities) would hide what the sandbox
    # does or does not stop when the tests run as root.
    libc = ctypes.CDLL(None, use_errno=True)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    nr = {"x86_64": 126, "aarch64": 91, "riscv64": 91}[platform.machine()]
    assert libc.syscall(nr, header, data) == 0, ctypes.get_errno()
if sys.argv[2:] == ["protect"]:
    # What oslayers.protect_process does for the kernel process and every worker (this process runs
    # without site-packages): non-dumpable, so its /proc files belong to root and need CAP_SYS_PTRACE.
    assert ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) == 0
def record(signum, frame):
    with open(log, "a") as fh:
        fh.write(signal.Signals(signum).name + "\n")
for name in ("SIGUSR1", "SIGUSR2", "SIGIO", "SIGURG", "SIGWINCH", "SIGHUP", "SIGTERM", "SIGINT",
             "SIGALRM", "SIGCONT", "SIGPIPE"):
    signal.signal(getattr(signal, name), record)
with open(log + ".ready", "w") as fh:
    fh.write(str(os.getpid()))
while True:
    time.sleep(0.05)
"""


class Victim:
    """A process the TEST starts (never the worker), in its own session: it writes the name of every
    signal it catches to a file, and SIGKILL/SIGSTOP would end or freeze it. Same user as the worker,
    so only the sandbox stands between them. ``protect``: it makes itself non-dumpable, as the kernel
    process and every worker do (oslayers.protect_process)."""

    def __init__(self, directory, secret: str = "VICTIM-ENV-SECRET", *, protect: bool = False):
        import os
        import subprocess
        import sys
        import time

        self.log = os.path.join(str(directory), f"victim-{time.monotonic_ns()}.log")
        env = {"PATH": os.environ.get("PATH", ""), "VICTIM_SECRET": secret}
        argv = [sys.executable, "-S", "-c", VICTIM_CODE, self.log] + (["protect"] if protect else [])
        self.proc = subprocess.Popen(argv, env=env,
                                     start_new_session=True, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid
        for _ in range(400):
            if os.path.exists(self.log + ".ready"):
                break
            time.sleep(0.01)
        else:
            raise RuntimeError("the victim process did not start")
        self.affinity0, self.nice0 = self.affinity(), self.nice()
        self.scheduler0, self.ioprio0, self.nofile0 = self.scheduler(), self.ioprio(), self.nofile()

    def alive(self) -> bool:
        import os

        if self.proc.poll() is not None:
            return False
        with open(f"/proc/{self.pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        return state not in ("T", "t", "Z", "X")

    def signals(self) -> list[str]:
        import os

        if not os.path.exists(self.log):
            return []
        with open(self.log) as fh:
            return fh.read().split()

    def affinity(self):
        import os

        return sorted(os.sched_getaffinity(self.pid))

    def nice(self):
        import os

        return os.getpriority(os.PRIO_PROCESS, self.pid)

    def scheduler(self):
        import os

        return os.sched_getscheduler(self.pid), os.sched_getparam(self.pid).sched_priority

    def ioprio(self):
        return ioprio_get(self.pid)

    def nofile(self):
        import resource

        return resource.prlimit(self.pid, resource.RLIMIT_NOFILE)

    def untouched(self) -> list[str]:
        """What changed about the victim since it started (empty when nothing did)."""
        changes = []
        if not self.alive():
            changes.append(f"not running (exit {self.proc.poll()})")
            return changes
        if self.signals():
            changes.append(f"caught {self.signals()}")
        for what, before, now in (("affinity", self.affinity0, self.affinity()), ("nice", self.nice0, self.nice()),
                                  ("scheduler", self.scheduler0, self.scheduler()),
                                  ("ioprio", self.ioprio0, self.ioprio()), ("nofile", self.nofile0, self.nofile())):
            if before != now:
                changes.append(f"{what} {before} -> {now}")
        return changes

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(5)


def ioprio_get(pid: int) -> int:
    import ctypes

    import pyseccomp

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    nr = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "ioprio_get")
    return int(libc.syscall(ctypes.c_long(nr), ctypes.c_long(1), ctypes.c_long(pid)))


class UnixDatagramServer:
    """A Unix datagram socket at a path (and one in the abstract namespace) recording what arrives."""

    def __init__(self, directory):
        import os
        import time

        self.path = os.path.join(str(directory), f"dgram-{time.monotonic_ns()}.sock")
        self.abstract = f"\0sandbox-breach-{os.getpid()}-{time.monotonic_ns()}"
        self.socks = []
        for address in (self.path, self.abstract):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind(address)
            s.setblocking(False)
            self.socks.append(s)

    def received(self) -> list[bytes]:
        got = []
        for s in self.socks:
            while True:
                try:
                    got.append(s.recv(65536))
                except (BlockingIOError, OSError):
                    break
        return got

    def close(self):
        for s in self.socks:
            s.close()


# Run once in every rogue worker: raw system calls by name (numbers from libseccomp for this machine).
ROGUE_PRELUDE = r"""
import ctypes, errno, fcntl, os, resource, signal, socket, struct, sys, time
import pyseccomp
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def sc(name, *args):
    nr = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    assert nr >= 0, name
    conv = [a if isinstance(a, (ctypes._SimpleCData, ctypes.Array, ctypes.Structure)) or
            type(a).__name__ == "CArgObject" else ctypes.c_long(a) for a in args]
    r = libc.syscall(ctypes.c_long(nr), *conv)
    if r == -1:
        e = ctypes.get_errno()
        raise OSError(e, f"{name}: {os.strerror(e)}")
    return r

def siginfo(signum):
    buf = ctypes.create_string_buffer(128)
    struct.pack_into("iii", buf, 0, signum, 0, -1)   # si_signo, si_errno, si_code = SI_QUEUE
    struct.pack_into("ii", buf, 16, os.getpid(), os.getuid())
    return buf
'ready'
"""


def breach_worker(level, policy, workdir, *, landlock_abi=None, degraded=False, extra_read=(), **options):
    """A worker whose cells run as plain Python (RogueEngine), prelude loaded."""
    import os

    from sandbox_kernel.isolation import make_backend

    tests_dir = os.path.dirname(os.path.abspath(__file__))
    b = make_backend(level, policy, str(workdir), spare=False, warm=("numpy",), grace=1.0, cancel_grace=1.0,
                     engine="isolation_support:RogueEngine", extra_sys_path=[tests_dir],
                     extra_read=[str(p) for p in extra_read], landlock_abi=landlock_abi, degraded=degraded,
                     **options)
    if b.wait_ready():
        r = Run(b, ROGUE_PRELUDE)
        assert r.ok, r.error
    return b
