"""TEST ONLY. Rogue engines and raw-frame helpers for tests/test_isolation_protocol.py: a worker that lies,
forges, floods or dies, loaded into a real worker with ``engine="protocol_support:<Name>"`` and
``extra_sys_path=[tests_dir]``. Everything here runs inside the worker, as a C extension gone rogue would."""
from __future__ import annotations

import os
import signal

from isolation_support import RogueEngine

# Prepended to a RogueEngine cell: find the channel and the id of the request being served, and write
# raw frames to the socket behind the worker's back.
RAW = r'''
import gc as _gc, json as _json, os as _os, stat as _stat, struct as _struct

def channel_fd():
    for fd in range(3, 256):
        try:
            if _stat.S_ISSOCK(_os.fstat(fd).st_mode):
                return fd
        except OSError:
            pass

def request_id():
    for o in _gc.get_objects():
        if type(o).__name__ == "Worker" and hasattr(o, "channel"):
            return getattr(o, "_rid", 0)
    return 0

def frame(message):
    body = _json.dumps(message, separators=(",", ":")).encode()
    return _struct.pack(">I", len(body)) + body

def write(data):
    fd = channel_fd()
    while data:
        data = data[_os.write(fd, data):]
'''


def _write_raw(message: dict) -> None:
    """From an engine method: a frame with the id of the request being served, written straight to
    the socket before the worker's own answer."""
    scope: dict = {}
    exec(RAW, scope)  # noqa: S102 - test-only code running inside the worker
    scope["write"](scope["frame"]({"type": message.pop("type"), "id": scope["request_id"](), **message}))


class ForgingEngine(RogueEngine):
    """Claims facts only the host may state: the worker's health, the isolation level, the policy, the
    cell's number, and when/in which cell its denials happened."""

    def run_cell(self, source, *, emit, policy=None, limits=None, execution_count=None, display_bytes=None):
        record = {"kind": "policy", "target": "os", "rule": "r", "line": 1, "policy": "unrestricted",
                  "hint": None, "message": "forged", "cell": 999, "time": 0.0}
        emit({"type": "denial", "record": dict(record)})
        done = super().run_cell(source, emit=emit, policy=policy, limits=limits, execution_count=execution_count)
        done.update(worker={"lost": False, "reason": "all good", "state_lost": False},
                    isolation="none", os_layers={"active": ["everything"]}, policy="unrestricted",
                    execution_count=999, denials=[record])
        return done


class DyingEngine(RogueEngine):
    """Dies while answering a request outside a cell, each in its own way."""

    def complete(self, code, cursor_pos=None):
        os._exit(3)

    def inspect(self, code, cursor_pos=None, detail_level=0):
        os.kill(os.getpid(), signal.SIGSEGV)

    def evaluate(self, expression, *, policy=None):
        os.kill(os.getpid(), signal.SIGKILL)


class OversizeEngine(RogueEngine):
    """Answers a completion with a reply frame far larger than any completion needs."""

    def complete(self, code, cursor_pos=None):
        _write_raw({"type": "reply", "value": {"matches": ["m" * 100] * 20000, "cursor_start": 0,
                                               "cursor_end": 0, "metadata": {}, "status": "ok"}})
        return super().complete(code, cursor_pos)
