"""The host<->worker channel: plain JSON frames, bounded and validated; nothing is ever unpickled."""
import ast
import os
import socket
import struct
import time

import pytest

from sandbox_kernel.isolation import channel as ch

ISOLATION_DIR = os.path.join(os.path.dirname(ch.__file__))


def pair(max_recv=1024 * 1024, max_send=1024 * 1024):
    a, b = socket.socketpair()
    return ch.Channel(a, max_recv=max_recv, max_send=max_send), ch.Channel(b, max_recv=max_recv, max_send=max_send)


def test_round_trip_unicode_and_many_frames():
    a, b = pair()
    msgs = [{"type": "stream", "name": "stdout", "text": f"héllo {i} ✓"} for i in range(200)]
    for m in msgs:
        a.send(m)
    assert [b.recv(deadline=time.monotonic() + 2) for _ in msgs] == msgs


def test_oversized_frame_is_refused_before_it_is_buffered():
    a, b = pair(max_recv=1000)
    a.sock.sendall(struct.pack(">I", 10 ** 9))  # claims a gigabyte, sends nothing more
    with pytest.raises(ch.ChannelError, match="exceeds"):
        b.recv(deadline=time.monotonic() + 2)


def test_sender_refuses_to_send_oversized():
    a, _ = pair(max_send=100)
    with pytest.raises(ch.ChannelError):
        a.send({"type": "stream", "name": "stdout", "text": "x" * 1000})


@pytest.mark.parametrize("body", [
    b"\xff\xfe not utf-8",
    b"{not json}",
    b"[1, 2, 3]",                         # not an object
    b'{"type": "stream", "x": NaN}',      # non-standard constant
    b"[" * 100000 + b"]" * 100000,        # nesting bomb
    b'{"n": ' + b"9" * 10000 + b"}",      # int bigger than Python's str->int limit
])
def test_malformed_frames_raise_channel_error(body):
    a, b = pair(max_recv=10 ** 7)
    a.sock.sendall(struct.pack(">I", len(body)) + body)
    with pytest.raises(ch.ChannelError):
        b.recv(deadline=time.monotonic() + 2)


def test_timeout_and_close():
    a, b = pair()
    with pytest.raises(ch.ChannelTimeout):
        b.recv(deadline=time.monotonic() + 0.05)
    a.close()
    with pytest.raises(ch.ChannelClosed):
        b.recv(deadline=time.monotonic() + 1)


def test_validation_checks_types_and_drops_unknown_keys():
    ok = ch.validate_event({"type": "stream", "name": "stdout", "text": "hi", "__reduce__": "x"})
    assert ok == {"type": "stream", "name": "stdout", "text": "hi"}
    for bad in ({"type": "stream", "name": "stdout", "text": 3},
                {"type": "stream", "name": "/etc/passwd", "text": "x"},
                {"type": "error", "ename": "E", "evalue": "v", "traceback": [1]},
                {"type": "display", "data": ["not", "a", "bundle"]},
                {"type": "exec", "code": "import os"},
                {"type": None},
                {"type": "done"}):
        with pytest.raises(ch.ChannelError):
            ch.validate_event(bad)
    with pytest.raises(ch.ChannelError, match="unexpected"):
        ch.validate_event({"type": "ready", "pid": 1, "layers": {}}, allowed={"stream"})


def test_host_modules_never_deserialise_code():
    """The host side reads JSON only: no pickle/marshal/eval/exec/import of worker data anywhere."""
    for name in ("channel.py", "process.py"):
        tree = ast.parse(open(os.path.join(ISOLATION_DIR, name), encoding="utf-8").read())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(m.split(".")[0] in ("pickle", "marshal", "shelve", "dill", "cloudpickle")
                               for m in mods), (name, mods)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in ("eval", "exec", "__import__", "compile"), (name, node.func.id)


def test_chart_references_resolve_only_to_data_already_relayed():
    from sandbox_kernel.isolation.process import _resolve_chart

    sent = [None, {"data": [1]}]
    assert _resolve_chart({"$event": 1}, sent) == {"data": [1]}
    for bogus in ({"$event": 0}, {"$event": 7}, {"$event": -1}, {"$event": "1"}, {"$event": True}):
        assert _resolve_chart(bogus, sent) is None
    assert _resolve_chart({"data": [2]}, sent) == {"data": [2]}   # an inline chart passes as it is
