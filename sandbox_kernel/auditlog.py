"""The operator's audit log file: JSON lines appended by the kernel, rotated by size.

Many kernels may share one file (a pool on one machine). Appends are single ``write`` calls on an
``O_APPEND`` descriptor; the size check and the rotation happen under an ``flock`` on the open file,
waited for at most a fraction of a second, and a writer that finds the file renamed under it reopens
it. Without the lock a batch is still appended, only not rotated. Nothing here ever blocks for long:
the file is opened non-blocking (a FIFO without a reader fails at once instead of hanging the kernel).
The caller decides what to do with a failure (the kernel warns, counts the lost records and says so
in the log once it can write again).
"""
from __future__ import annotations

import fcntl
import json
import os
import stat
import time

_LOCK_WAIT = 0.2      # seconds a writer waits for another kernel's rotation or append
_LOCK_STEP = 0.005
_ATTEMPTS = 8        # reopenings after other kernels' rotations


class AuditFile:
    """Appends batches of records to ``path``; past ``max_bytes`` (0: never) the file becomes
    ``path.1``, ``path.1`` becomes ``path.2`` ... and ``path.<backups>`` is deleted."""

    def __init__(self, path: str, max_bytes: int = 0, backups: int = 0):
        self.path = path
        self.max_bytes = max(int(max_bytes or 0), 0)
        self.backups = max(int(backups or 0), 0)

    def append(self, records: list[dict]) -> None:
        """Write the records as one batch of lines. Raises OSError (or ValueError) on failure."""
        data = "".join(json.dumps(r, default=str, ensure_ascii=True, allow_nan=False) + "\n"
                       for r in records).encode("ascii")
        if not data:
            return
        for _ in range(_ATTEMPTS):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK,
                         0o600)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    _write_all(fd, data)   # a pipe or a device: nothing to rotate
                    return
                if _lock(fd):
                    mine = os.fstat(fd)
                    try:
                        current = os.stat(self.path)
                    except FileNotFoundError:
                        current = None
                    if current is None or (current.st_dev, current.st_ino) != (mine.st_dev, mine.st_ino):
                        continue   # another kernel rotated it since we opened it: open the new one
                    if self.max_bytes and mine.st_size and mine.st_size + len(data) > self.max_bytes:
                        self._rotate()
                        continue
                _write_all(fd, data)
                return
            finally:
                os.close(fd)   # also releases the lock
        # Other kernels kept rotating under us: append to whatever the path names now (the file may
        # pass max_bytes by this batch).
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def _rotate(self) -> None:
        if self.backups == 0:
            os.unlink(self.path)
            return
        for i in range(self.backups - 1, 0, -1):
            older = f"{self.path}.{i}"
            if os.path.lexists(older):
                os.replace(older, f"{self.path}.{i + 1}")
        os.replace(self.path, f"{self.path}.1")


def _lock(fd: int) -> bool:
    deadline = time.monotonic() + _LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_LOCK_STEP)
        except OSError:
            return False   # a filesystem without flock: append without rotating


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
