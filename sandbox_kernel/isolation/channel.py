"""The wire between the kernel (host) and a sandbox worker: length-prefixed JSON frames.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON whose top level is an
object. That is all: the host never unpickles, evaluates or imports anything a worker sends, and every
frame is bounded in size before a byte of it is buffered.

The worker is untrusted once a cell has run in it (a rogue C extension can write anything to the
socket), so everything the host reads goes through :func:`validate_event`. Any violation raises
:class:`ChannelError`; the host's answer to that is to kill the worker (never to crash the kernel).
"""
from __future__ import annotations

import json
import math
import select
import socket
import struct
import time

HEADER = struct.Struct(">I")
# Largest frame the host accepts from a worker. Cell outputs are capped by the engine far below this
# (a Plotly figure with 100k points is ~4 MB of JSON; the kernel caps display data at 20 MB); a frame above it means a broken or rogue worker.
MAX_EVENT_BYTES = 32 * 1024 * 1024
# Largest request the worker accepts from the host (cell source, policy).
MAX_REQUEST_BYTES = 16 * 1024 * 1024
# JSON nesting depth accepted from a worker: the kernel's own code (output filter, Jupyter session
# serialisation) walks these structures recursively.
MAX_DEPTH = 64
# Containers per frame (counted as brackets, strings included). Bounds what a hostile worker can make the
# host allocate: "[]," repeated turns 32 MB of JSON into ~10 M lists.
MAX_CONTAINERS = 2_000_000


class ChannelError(Exception):
    """The peer broke the protocol: malformed, oversized or unexpected data."""


class ChannelClosed(ChannelError):
    """The peer closed the connection (usually: the worker died)."""


class ChannelTimeout(ChannelError):
    """Nothing arrived before the deadline."""


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def encode(message: dict) -> bytes:
    """One frame. Only plain JSON data can be encoded; anything else is a bug in the sender."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return HEADER.pack(len(body)) + body


def decode(body: bytes) -> dict:
    try:
        text = body.decode("utf-8")
        brackets = text.count("[") + text.count("{")
        if brackets > MAX_CONTAINERS:
            raise ChannelError(f"frame with more than {MAX_CONTAINERS} brackets")
        # The C decoder guards its own recursion (RecursionError), so parsing is safe at any depth.
        value = json.loads(text, parse_constant=_reject_constant)
    except ChannelError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        raise ChannelError(f"malformed frame: {type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise ChannelError("a frame must hold a JSON object")
    if brackets > MAX_DEPTH and _too_deep(value):
        raise ChannelError(f"frame nested deeper than {MAX_DEPTH} levels")
    return value


def _too_deep(value) -> bool:
    """True when containers nest deeper than MAX_DEPTH. Iterative; scalar-only lists are skipped at C
    speed (set(map(type, ...))), so a 100k-point Plotly trace costs about a millisecond."""
    stack = [(value, 1)]
    while stack:
        obj, depth = stack.pop()
        if depth > MAX_DEPTH:
            return True
        items = obj.values() if type(obj) is dict else obj
        kinds = set(map(type, items))
        if list in kinds or dict in kinds:
            stack.extend((v, depth + 1) for v in items if type(v) is list or type(v) is dict)
    return False


class Channel:
    """Frames over a connected stream socket (one end of a socketpair)."""

    def __init__(self, sock: socket.socket, *, max_recv: int, max_send: int):
        self.sock = sock
        self.max_recv = max_recv
        self.max_send = max_send
        self._buf = bytearray()
        self.received = 0  # payload bytes of every frame received so far

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: dict, *, timeout: float | None = None) -> None:
        self.send_frame(encode(message), timeout=timeout)

    def send_body(self, body: bytes, *, timeout: float | None = None) -> None:
        """Send already-encoded JSON (the caller guarantees it is a JSON object)."""
        self.send_frame(HEADER.pack(len(body)) + body, timeout=timeout)

    def send_frame(self, data: bytes, *, timeout: float | None = None) -> None:
        if len(data) - HEADER.size > self.max_send:
            raise ChannelError(f"frame of {len(data)} bytes exceeds the limit of {self.max_send}")
        self.sock.settimeout(timeout)
        try:
            self.sock.sendall(data)
        except socket.timeout:
            raise ChannelTimeout("the peer did not read its messages in time") from None
        except OSError as exc:
            raise ChannelClosed(f"cannot send: {exc.strerror or exc}") from None
        finally:
            self.sock.settimeout(None)

    def _fill(self, need: int, deadline: float | None) -> None:
        while len(self._buf) < need:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelTimeout("no message before the deadline")
                ready, _, _ = select.select([self.sock], [], [], left)
                if not ready:
                    raise ChannelTimeout("no message before the deadline")
            try:
                chunk = self.sock.recv(min(max(need - len(self._buf), 65536), 4 * 1024 * 1024))
            except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for clarity
                continue
            except OSError as exc:
                raise ChannelClosed(f"cannot receive: {exc.strerror or exc}") from None
            if not chunk:
                raise ChannelClosed("the peer closed the channel")
            self._buf += chunk

    def recv(self, *, deadline: float | None = None) -> dict:
        """The next frame as a dict. ``deadline`` is a time.monotonic() value; None waits forever."""
        self._fill(HEADER.size, deadline)
        (length,) = HEADER.unpack_from(self._buf)
        if length > self.max_recv:
            raise ChannelError(f"frame of {length} bytes exceeds the limit of {self.max_recv}")
        self._fill(HEADER.size + length, deadline)
        body = bytes(self._buf[HEADER.size:HEADER.size + length])
        del self._buf[:HEADER.size + length]
        self.received += length
        return decode(body)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# ------------------------------------------------------------------------------------------------
# What a worker may send, checked field by field. Unknown keys are dropped; wrong types are errors.
# ------------------------------------------------------------------------------------------------

def _is_str(v):
    return isinstance(v, str)


def _is_opt_str(v):
    return v is None or isinstance(v, str)


def _is_dict(v):
    return isinstance(v, dict)


def _is_opt_dict(v):
    return v is None or isinstance(v, dict)


def _is_list(v):
    return isinstance(v, list)


def _is_opt_list(v):
    return v is None or isinstance(v, list)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_opt_num(v):
    return v is None or _is_num(v)


def _is_bool(v):
    return isinstance(v, bool)


def _is_any(v):
    return True


def _is_str_list(v):
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_mime_bundle(v):
    return isinstance(v, dict) and all(isinstance(k, str) for k in v)


# type -> {field: (required, check)}
EVENT_SCHEMAS = {
    "stream": {"name": (True, lambda v: v in ("stdout", "stderr")), "text": (True, _is_str)},
    "display": {"data": (True, _is_mime_bundle), "metadata": (False, _is_opt_dict),
                "transient": (False, _is_opt_dict)},
    "result": {"data": (True, _is_mime_bundle), "metadata": (False, _is_opt_dict),
               "execution_count": (False, _is_opt_num)},
    "error": {"ename": (True, _is_str), "evalue": (True, _is_str), "traceback": (True, _is_str_list),
              "denial": (False, _is_opt_dict)},
    "denial": {"record": (True, _is_dict)},
    "done": {"status": (True, _is_str), "ticks": (False, _is_opt_num), "elapsed_ms": (False, _is_opt_num),
             "policy": (False, _is_any), "denials": (False, _is_opt_list), "truncated": (False, _is_any),
             "output": (False, _is_any), "charts": (False, _is_opt_list), "error": (False, _is_opt_dict),
             "execution_count": (False, _is_opt_num), "limit": (False, _is_any)},
    # replies to evaluate / complete / inspect / reset / ping
    "reply": {"id": (True, _is_num), "value": (True, _is_any), "error": (False, _is_opt_str)},
    # start-up handshake and fatal errors from the worker's own code
    "ready": {"pid": (True, _is_num), "layers": (True, _is_dict), "python": (False, _is_opt_str),
              "baseline_mb": (False, _is_opt_num), "warm_ms": (False, _is_opt_num)},
    "fatal": {"message": (True, _is_str)},
}


# The summary event may grow fields as the engine grows; they are kept (they are plain JSON data).
OPEN_TYPES = frozenset({"done"})


def validate_event(message: dict, *, allowed: frozenset | set | None = None) -> dict:
    """A checked copy of ``message`` holding only the keys its schema names."""
    kind = message.get("type")
    if not isinstance(kind, str) or kind not in EVENT_SCHEMAS:
        raise ChannelError(f"unknown message type {str(kind)[:40]!r}")
    if allowed is not None and kind not in allowed:
        raise ChannelError(f"unexpected message type {kind!r}")
    clean = {"type": kind}
    for key, (required, check) in EVENT_SCHEMAS[kind].items():
        if key not in message:
            if required:
                raise ChannelError(f"{kind} message without {key!r}")
            continue
        if not check(message[key]):
            raise ChannelError(f"{kind} message with a malformed {key!r}")
        clean[key] = message[key]
    if kind in OPEN_TYPES:
        for key, value in message.items():
            if isinstance(key, str) and key not in clean:
                clean[key] = value
    return clean
