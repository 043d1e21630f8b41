"""What the audit sets up on the host before any canary runs, and reads afterwards as evidence: canary
files outside the working directory, a loopback listener, a victim process that records signals.
Everything lives in one temporary directory that is removed at the end."""
from __future__ import annotations

import hashlib
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from .native import PREFIX

ORIGINAL = "original canary content\n"

# The victim: a process the audit starts (never a worker), in its own session. It appends the name of
# every SIGWINCH it catches to its log, and exits when the audit process is gone.
VICTIM_CODE = r"""
import os, signal, sys, time
log, parent = sys.argv[1], os.getppid()
def record(signum, frame):
    with open(log, "a") as fh:
        fh.write("SIGWINCH\n")
signal.signal(signal.SIGWINCH, record)
open(log + ".ready", "w").close()
while os.getppid() == parent:
    time.sleep(0.1)
"""


class Listener:
    """A loopback TCP listener that records what each connection sent."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._busy = False
        self._stop = False
        self._thread = threading.Thread(target=self._serve, name="sandbox-audit-listener", daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self._busy = True
            data = b""
            conn.settimeout(0.3)
            try:
                while len(data) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            finally:
                conn.close()
                self.received.append(data)
                self._busy = False

    def settle(self, timeout: float = 2.0) -> None:
        """Wait until every connection made so far has been read."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pending = select.select([self.sock], [], [], 0)[0]
            if not pending and not self._busy:
                return
            time.sleep(0.02)

    def saw(self, tag: str) -> bool:
        return any(tag.encode() in data for data in self.received)

    def close(self):
        self._stop = True
        self._thread.join(2)
        self.sock.close()


class Victim:
    """A process of the same user that only the sandbox separates from the worker."""

    def __init__(self, directory: str):
        self.log = os.path.join(directory, f"{PREFIX}victim.log")
        self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", VICTIM_CODE, self.log],
                                     start_new_session=True, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid
        deadline = time.monotonic() + 10
        while not os.path.exists(self.log + ".ready"):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("the audit's victim process did not start")
            time.sleep(0.01)

    def signals(self) -> list[str]:
        time.sleep(0.05)  # a signal sent just now is handled within the victim's next sleep
        try:
            with open(self.log) as fh:
                return fh.read().split()
        except FileNotFoundError:
            return []

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(5)


class Scene:
    """The temporary directory (work, native-work, outside), canary files, listener and victim."""

    def __init__(self):
        self.root = os.path.realpath(tempfile.mkdtemp(prefix=PREFIX))
        self.work = os.path.join(self.root, "work")
        self.native_work = os.path.join(self.root, "native-work")
        self.outside = os.path.join(self.root, "outside")
        for d in (self.work, self.native_work, self.outside):
            os.mkdir(d, 0o700)
        self.token = "SANDBOX-AUDIT-SECRET-" + secrets.token_hex(12)
        self.secret = self._file("secret.txt", self.token + "\n")
        self.digest = hashlib.sha256((self.token + "\n").encode()).hexdigest()
        self.python = sys.executable
        self.listener = Listener()
        self.victim = None
        self._targets: dict[str, tuple[str, float]] = {}
        try:
            self.victim = Victim(self.outside)
        except (OSError, RuntimeError):
            self.close()
            raise

    def _file(self, name: str, content: str) -> str:
        path = os.path.join(self.outside, PREFIX + name)
        with open(path, "w") as fh:
            fh.write(content)
        os.chmod(path, 0o644)
        return path

    def marker(self, canary_id: str) -> str:
        """A path outside the working directory that only a breach would create."""
        return os.path.join(self.outside, f"{PREFIX}marker-{canary_id}")

    def target(self, canary_id: str) -> str:
        """An existing file outside the working directory that only a breach would change."""
        if canary_id not in self._targets:
            path = self._file(f"target-{canary_id}.txt", ORIGINAL)
            os.utime(path, (1_000_000_000, 1_000_000_000))
            self._targets[canary_id] = (path, os.stat(path).st_mtime)
        return self._targets[canary_id][0]

    def target_changed(self, canary_id: str) -> str | None:
        path, mtime = self._targets[canary_id]
        try:
            with open(path) as fh:
                content = fh.read()
            st = os.stat(path)
        except FileNotFoundError:
            return "the file outside was removed"
        if content != ORIGINAL:
            return "the file outside was written"
        if st.st_mtime != mtime:
            return "the file outside was touched"
        return None

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def close(self):
        if self.victim is not None:
            self.victim.close()
        self.listener.close()
        shutil.rmtree(self.root, ignore_errors=True)
