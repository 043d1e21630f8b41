"""The wire between the kernel (host) and a sandbox worker: length-prefixed JSON frames.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON whose top level is an
object. That is all: the host never unpickles, evaluates or imports anything a worker sends, and every
frame is bounded in size before a byte of it is buffered.

The worker is untrusted once a cell has run in it (a rogue C extension can write anything to the
socket), so everything the host reads goes through :func:`validate_event`. Any violation raises
:class:`ChannelError`; the host's answer to that is to kill the worker (never to crash the kernel).

Every request carries an ``id``; the worker echoes it in every event and reply of that request, first
thing after the type (``{"type":"stream","id":7,...``). The host checks it on every frame it decodes and
may classify a frame by that prefix alone to discard it unread (output past the cell's caps).
"""
from __future__ import annotations

import json
import math
import re
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
# ... and relative to the frame's size, so that decoding a frame costs a bounded multiple of its bytes
# (a list costs the host ~64 bytes, a dict ~200: "[]," would otherwise be 20x its size, "{}," 45x).
# Brackets inside strings do not count (see _containers).
LISTS_PER_BYTE, DICTS_PER_BYTE, CONTAINERS_FREE = 1 / 8, 1 / 24, 4096
# Bytes of a frame's body the host may look at before deciding to discard the frame unread.
PEEK_BYTES = 64
# Frames up to this size are decoded without asking whether to discard them (unless asked to): they
# cannot hold too many containers (CONTAINERS_FREE) and cost microseconds.
SMALL_FRAME = 4096
# A worker whose own code (not a cell's) runs out of memory exits with this status.
EXIT_OUT_OF_MEMORY = 86


class ChannelError(Exception):
    """The peer broke the protocol: malformed, oversized or unexpected data."""


class ChannelClosed(ChannelError):
    """The peer closed the connection (usually: the worker died)."""


class ChannelTimeout(ChannelError):
    """Nothing arrived before the deadline."""


class FrameTooCostly(ChannelError):
    """A well-formed frame whose decoding would cost the host too much memory; the channel stays in step
    (the frame was read), so the host may drop it instead of ending the worker."""


def frame_prefix(kind: str, rid: int) -> bytes:
    """How every frame a worker sends for request ``rid`` begins (see the module docstring)."""
    return b'{"type":"%s","id":%d,' % (kind.encode("ascii"), rid)


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def encode(message: dict) -> bytes:
    """One frame. Only plain JSON data can be encoded; anything else is a bug in the sender."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return HEADER.pack(len(body)) + body


def decode(body) -> dict:
    """A frame's body (bytes or bytearray) as a dict, at a bounded cost: the container census runs on
    the raw bytes before anything is parsed."""
    brackets = body.count(b"[") + body.count(b"{")
    if brackets > CONTAINERS_FREE:
        too_many = _containers(body)
        if too_many:
            raise FrameTooCostly(too_many)
    try:
        # The C decoder guards its own recursion (RecursionError), so parsing is safe at any depth.
        value = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError, MemoryError) as exc:
        raise ChannelError(f"malformed frame: {type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise ChannelError("a frame must hold a JSON object")
    if brackets > MAX_DEPTH and _too_deep(value):
        raise ChannelError(f"frame nested deeper than {MAX_DEPTH} levels")
    return value


# A JSON string literal (unrolled: no backtracking blow-up).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def _containers(body) -> str | None:
    """Why ``body`` holds too many containers for its size, or None. Counting brackets is a C-speed
    scan. Only when that count is high, and the frame is text with few strings (a stream, HTML, LaTeX:
    at most one string per 64 bytes), are the brackets inside its strings taken out again."""
    size = len(body)

    def excess(lists, dicts):
        if lists + dicts > MAX_CONTAINERS:
            return f"frame with more than {MAX_CONTAINERS} containers"
        if lists > size * LISTS_PER_BYTE + CONTAINERS_FREE or dicts > size * DICTS_PER_BYTE + CONTAINERS_FREE:
            return f"frame with {lists} lists and {dicts} objects in {size} bytes (too costly to decode)"
        return None

    lists, dicts = body.count(b"["), body.count(b"{")
    if excess(lists, dicts) is None or body.count(b'"') > size // 64:
        return excess(lists, dicts)
    for match in _STRING.finditer(body):  # few strings (see above): a bounded loop
        start, end = match.span()
        lists -= body.count(b"[", start, end)
        dicts -= body.count(b"{", start, end)
    return excess(lists, dicts)


def _too_deep(value) -> bool:
    """True when containers nest deeper than MAX_DEPTH. Level by level (one list of references per
    level, no per-container bookkeeping); scalar-only lists are skipped at C speed."""
    level = [value]
    for _ in range(MAX_DEPTH):
        below = []
        for obj in level:
            items = obj.values() if type(obj) is dict else obj
            kinds = set(map(type, items))
            if list in kinds or dict in kinds:
                below.extend(v for v in items if type(v) is list or type(v) is dict)
        if not below:
            return False
        level = below
    return True


class Channel:
    """Frames over a connected stream socket (one end of a socketpair).

    ``host=True`` is the kernel's end, facing an untrusted worker: it never blocks on the peer. Its
    socket is non-blocking (every read is preceded by a poll with the caller's deadline, and a read
    that finds nothing returns to the poll), urgent data is read inline (SO_OOBINLINE) and, as soon as
    poll reports it (POLLPRI), is a protocol violation: one MSG_OOB byte on a blocking socket would
    otherwise leave poll saying "readable" while recv() waits for ordinary data for ever."""

    def __init__(self, sock: socket.socket, *, max_recv: int, max_send: int, host: bool = False):
        self.sock = sock
        self.host = host
        if host:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_OOBINLINE, 1)
            sock.setblocking(False)
        self.max_recv = max_recv
        self.max_send = max_send
        self._buf = bytearray()        # bytes received and not yet consumed (headers, small frames)
        self._body: bytearray | None = None  # the frame being read, allocated once at its final size
        self._got = 0
        self._skip_left = 0            # bytes of a discarded frame still to read and throw away
        self.received = 0  # payload bytes of every frame received so far (read or discarded)
        self.discarded = 0  # frames discarded unread
        self.last_length = 0  # payload bytes of the last frame returned or discarded
        self._poller = select.poll()  # cheaper than select() per wait, and no fd-number limit
        self._poller.register(sock.fileno(), select.POLLIN | select.POLLPRI)
        self._empty_reads = 0  # reads that found nothing after poll said readable, in a row

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
            self.sock.settimeout(0.0 if self.host else None)

    def pending(self) -> str | None:
        """What the peer sent that nobody asked for yet: "data", "closed" (end of stream or a broken
        socket), or None. Called between requests, when a well-behaved peer is silent."""
        if self._buf or self._body is not None or self._skip_left:
            return "data"
        try:
            ready = self._poller.poll(0)
            if not ready:
                return None
            if any(ev & select.POLLPRI for _, ev in ready):
                return "data"  # urgent data: never part of the protocol
            return "data" if self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) else "closed"
        except BlockingIOError:
            return None
        except (OSError, ValueError):
            return "closed"

    def _wait(self, deadline: float | None) -> None:
        if deadline is None:
            if not self.host:
                return  # the worker's end: a blocking read is what it wants
            ready = self._poller.poll()
        else:
            left = deadline - time.monotonic()
            ready = self._poller.poll(math.ceil(left * 1000)) if left > 0 else []
            if not ready:
                raise ChannelTimeout("no message before the deadline")
        if any(ev & select.POLLPRI for _, ev in ready):
            raise ChannelError("urgent (out-of-band) data on the channel")

    def _nothing_read(self) -> None:
        """A read found nothing although poll said the socket was readable. Twice in a row is a peer
        playing with the socket's state (the host would spin): a protocol violation."""
        self._empty_reads += 1
        if self._empty_reads > 2:
            raise ChannelError("the channel reports data that it does not deliver")

    def _fill(self, need: int, deadline: float | None) -> None:
        while len(self._buf) < need:
            self._wait(deadline)
            try:
                chunk = self.sock.recv(65536)
            except InterruptedError:  # pragma: no cover - PEP 475 retries, kept for clarity
                continue
            except BlockingIOError:  # nothing there after all
                self._nothing_read()
                continue
            except OSError as exc:
                raise ChannelClosed(f"cannot receive: {exc.strerror or exc}") from None
            if not chunk:
                raise ChannelClosed("the peer closed the channel")
            self._empty_reads = 0
            self._buf += chunk

    def _recv_into(self, view: memoryview, deadline: float | None) -> int:
        self._wait(deadline)
        try:
            n = self.sock.recv_into(view, min(len(view), 4 * 1024 * 1024))
        except InterruptedError:  # pragma: no cover
            return 0
        except BlockingIOError:
            self._nothing_read()
            return 0
        except OSError as exc:
            raise ChannelClosed(f"cannot receive: {exc.strerror or exc}") from None
        if n == 0:
            raise ChannelClosed("the peer closed the channel")
        self._empty_reads = 0
        return n

    def _discard(self, deadline: float | None) -> None:
        """Read and throw away the rest of a discarded frame, a bounded chunk at a time."""
        take = min(len(self._buf), self._skip_left)
        del self._buf[:take]
        self._skip_left -= take
        if not self._skip_left:
            return
        scratch = memoryview(bytearray(min(self._skip_left, 256 * 1024)))
        while self._skip_left:
            self._skip_left -= self._recv_into(scratch[:min(self._skip_left, len(scratch))], deadline)

    def _fill_body(self, deadline: float | None) -> None:
        body = self._body
        if self._got < len(body):
            with memoryview(body) as view:
                while self._got < len(body):
                    self._got += self._recv_into(view[self._got:], deadline)

    def recv(self, *, deadline: float | None = None, max_bytes: int | None = None, skip=None,
             skip_small: bool = False) -> dict | None:
        """The next frame as a dict. ``deadline`` is a time.monotonic() value; None waits forever.

        ``max_bytes`` lowers the size limit for this frame. ``skip(length, head)``, given the frame's
        length and its first PEEK_BYTES bytes, may decide to discard the frame unread: it is then read
        in bounded chunks and thrown away, and recv returns None. It is asked about frames larger than
        SMALL_FRAME bytes (cheap to decode: the fast path of a trivial cell), and about every frame
        with ``skip_small``. A timeout leaves the channel in step: the next call resumes the same frame."""
        if self._skip_left:
            self._discard(deadline)
        if self._body is None:
            self._fill(HEADER.size, deadline)
            (length,) = HEADER.unpack_from(self._buf)
            limit = self.max_recv if max_bytes is None else min(max_bytes, self.max_recv)
            if length > limit:
                raise ChannelError(f"frame of {length} bytes exceeds the limit of {limit}")
            self.last_length = length
            if skip is not None and (skip_small or length > SMALL_FRAME):
                peek = min(length, PEEK_BYTES)
                self._fill(HEADER.size + peek, deadline)
                if skip(length, bytes(self._buf[HEADER.size:HEADER.size + peek])):
                    del self._buf[:HEADER.size]
                    self.received += length
                    self.discarded += 1
                    self._skip_left = length
                    self._discard(deadline)
                    return None
            end = HEADER.size + length
            self.received += length
            if len(self._buf) >= end:  # all of it already buffered (small frames)
                body = self._buf[HEADER.size:end]
                del self._buf[:end]
                return decode(body)
            del self._buf[:HEADER.size]
            body = bytearray(length)  # read straight into its final place: no growing, no copy
            take = len(self._buf)
            with memoryview(self._buf) as buffered:
                body[:take] = buffered
            self._buf.clear()
            self._body, self._got = body, take
        self._fill_body(deadline)
        body, self._body = self._body, None
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


def _is_denial_record(v):
    return isinstance(v, dict) and all(
        x is None or type(x) in _DENIAL_FIELDS.get(k, (type(x),)) for k, x in v.items())


def _denial_record(v: dict) -> dict:
    """Only the fields a denial record has (checked by _is_denial_record); ``time`` and ``cell`` are
    the kernel's to add."""
    return {k: x for k, x in v.items() if k in _DENIAL_FIELDS}


# What a denial record may hold (denials.py); the kernel adds when and in which cell, never the worker.
_DENIAL_FIELDS = {"kind": (str,), "target": (str,), "rule": (str,), "line": (int,), "policy": (str,),
                  "hint": (str,), "message": (str,)}


# type -> {field: (required, check)}
EVENT_SCHEMAS = {
    "stream": {"name": (True, lambda v: v in ("stdout", "stderr")), "text": (True, _is_str)},
    "display": {"data": (True, _is_mime_bundle), "metadata": (False, _is_opt_dict),
                "transient": (False, _is_opt_dict), "update": (False, _is_bool)},
    # IPython.display.clear_output (the sandbox's own, provided_modules)
    "clear_output": {"wait": (True, _is_bool)},
    "result": {"data": (True, _is_mime_bundle), "metadata": (False, _is_opt_dict),
               "execution_count": (False, _is_opt_num)},
    "error": {"ename": (True, _is_str), "evalue": (True, _is_str), "traceback": (True, _is_str_list),
              "denial": (False, lambda v: v is None or _is_denial_record(v))},
    "denial": {"record": (True, _is_denial_record)},
    # The cell's summary, as the worker claims it. Closed: anything else a worker adds (``worker``,
    # ``isolation``, ``os_layers`` ...) is dropped; the host states those facts itself.
    "done": {"status": (True, lambda v: v in ("ok", "error")), "ticks": (False, _is_opt_num),
             "elapsed_ms": (False, _is_opt_num), "policy": (False, _is_opt_str),
             "denials": (False, lambda v: v is None or (isinstance(v, list) and all(map(_is_denial_record, v)))),
             "truncated": (False, lambda v: v is None or isinstance(v, bool)), "output": (False, _is_any),
             "charts": (False, _is_opt_list), "error": (False, _is_opt_dict),
             "execution_count": (False, _is_opt_num), "limit": (False, _is_any)},
    # replies to evaluate / complete / inspect / reset / ping
    "reply": {"value": (True, _is_any), "error": (False, _is_opt_str)},
    # start-up handshake and fatal errors from the worker's own code (before any request has an id)
    "ready": {"pid": (True, _is_num), "layers": (True, _is_dict), "python": (False, _is_opt_str),
              "baseline_mb": (False, _is_opt_num), "warm_ms": (False, _is_opt_num)},
    "fatal": {"message": (True, _is_str)},
}
# Messages that belong to a request and must carry its id.
REQUEST_TYPES = frozenset({"stream", "display", "clear_output", "result", "error", "denial", "done", "reply"})


def validate_event(message: dict, *, allowed: frozenset | set | None = None, rid: int | None = None) -> dict:
    """A checked copy of ``message`` holding only the keys its schema names. With ``rid``, the message
    must carry exactly that request id (the copy does not include it)."""
    kind = message.get("type")
    if not isinstance(kind, str) or kind not in EVENT_SCHEMAS:
        raise ChannelError(f"unknown message type {str(kind)[:40]!r}")
    if allowed is not None and kind not in allowed:
        raise ChannelError(f"unexpected message type {kind!r}")
    if rid is not None:
        got = message.get("id")
        if type(got) is not int or got != rid:
            raise ChannelError(f"a {kind} message for request {str(got)[:20]} while request {rid} runs")
    clean = {"type": kind}
    for key, (required, check) in EVENT_SCHEMAS[kind].items():
        if key not in message:
            if required:
                raise ChannelError(f"{kind} message without {key!r}")
            continue
        if not check(message[key]):
            raise ChannelError(f"{kind} message with a malformed {key!r}")
        clean[key] = message[key]
    if kind == "denial":
        clean["record"] = _denial_record(clean["record"])
    elif kind == "error" and clean.get("denial") is not None:
        clean["denial"] = _denial_record(clean["denial"])
    elif kind == "done" and clean.get("denials"):
        clean["denials"] = [_denial_record(r) for r in clean["denials"]]
    return clean
