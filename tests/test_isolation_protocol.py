"""The kernel trusts nothing a worker sends, never grows without bound, and always tells the truth about
lost state (issue 8, items 2, 4, 8).

Each attack runs for real inside a worker (RogueEngine and the engines of protocol_support.py run plain
Python there, as a rogue C extension would): early and forged summaries, messages of another request,
output written while no request runs, oversized replies, floods, deaths outside a cell and every way a
memory death shows up. Each test asserts what the host did and that nothing reached the next cell."""
import json
import os
import socket
import struct
import sys
import threading
import time
import tracemalloc

import pytest

from sandbox_kernel.isolation import channel as ch
from sandbox_kernel.isolation import make_backend
from sandbox_kernel.policy import PRESETS

from isolation_support import Run, kernel_level_problem, rogue_policy
from protocol_support import RAW

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="worker levels are tested on Linux")

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
KERNEL_PROBLEM = kernel_level_problem()
LEVELS = ("process", "kernel") if KERNEL_PROBLEM is None else ("process",)
needs_kernel = pytest.mark.skipif(KERNEL_PROBLEM is not None, reason=f"kernel level unavailable: {KERNEL_PROBLEM}")


def rogue_backend(tmp, engine="isolation_support:RogueEngine", level="process", **options):
    b = make_backend(level, rogue_policy(limits={"memory_mb": 512, "timeout": 10.0}), str(tmp),
                     engine=engine, extra_sys_path=[TESTS_DIR], grace=1.0, cancel_grace=1.0, **options)
    assert b.wait_ready(), b.status()
    return b


@pytest.fixture(scope="module")
def rogue(tmp_path_factory):
    backends = {level: rogue_backend(tmp_path_factory.mktemp(f"protocol-{level}"), level=level) for level in LEVELS}
    yield backends
    for b in backends.values():
        b.shutdown()


def pid(backend):
    return backend.status()["worker"]["pid"]


def texts(run):
    return "".join(e.get("text", "") for e in run.events if e["type"] == "stream")


def notice(run):
    return "".join(e["text"] for e in run.events if e["type"] == "stream" and e["name"] == "stderr")


# -- item 8: forged protocol ------------------------------------------------------------------------

@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("forged_id", ["none", "right"])
def test_an_early_done_cannot_shift_output_onto_the_next_cell(rogue, level, forged_id):
    """A done written early (with or without the request's own id), then more output of the same
    cell: that output must never appear in the next cell."""
    b = rogue[level]
    before = pid(b)
    cell = RAW + (
        "rid = request_id() if FORGED == 'right' else None\n"
        "tag = {} if rid is None else {'id': rid}\n"
        "write(frame({'type': 'done', **tag, 'status': 'ok'}) +\n"
        "      frame({'type': 'stream', **tag, 'name': 'stdout', 'text': 'A-LATE\\n'}))\n"
        "print('A-REAL')\n").replace("FORGED", repr(forged_id))
    a = Run(b, cell)
    r = Run(b, "print('B')")
    assert "A-LATE" not in texts(r) and "A-REAL" not in texts(r)
    assert r.ok and r.stdout() == "B\n"
    assert pid(b) != before                              # the lying worker is gone
    reported = a.done.get("worker") or r.done.get("worker")
    assert reported["lost"] and reported["reason"] == "protocol", (a.done, r.done)


@pytest.mark.parametrize("bad_id", ["missing", "other request", "a string"])
def test_a_message_without_the_request_id_ends_the_worker_and_is_not_relayed(rogue, bad_id):
    b = rogue["process"]
    cell = RAW + (
        "rid = request_id()\n"
        "tag = {'missing': {}, 'other request': {'id': rid + 7}, 'a string': {'id': str(rid)}}[BAD]\n"
        "write(frame({'type': 'stream', **tag, 'name': 'stdout', 'text': 'WRONG-ID\\n'}))\n"
        "import time\ntime.sleep(0.5)\n").replace("BAD", repr(bad_id))
    r = Run(b, cell)
    assert not r.ok and r.done["worker"]["reason"] == "protocol", r.done
    assert "WRONG-ID" not in texts(r)
    assert Run(b, "'alive'").text() == "'alive'"


def test_a_large_frame_must_begin_with_its_type_and_request_id(rogue):
    """The host classifies large frames by their first bytes before decoding them; one that does not
    begin with its type and the request's id (here: the same keys in another order) is not decoded at
    all, and the worker is stopped."""
    b = rogue["process"]
    cell = RAW + (
        "rid = request_id()\n"
        "write(frame({'name': 'stdout', 'type': 'stream', 'id': rid, 'text': 'REORDERED' * 2000}))\n"
        "import time\ntime.sleep(0.5)\n")
    r = Run(b, cell)
    assert not r.ok and r.done["worker"]["reason"] == "protocol" and "request id" in r.error["evalue"], r.done
    assert "REORDERED" not in texts(r)


@pytest.mark.parametrize("level", LEVELS)
def test_output_sent_between_requests_is_never_attributed_to_the_next_cell(rogue, level):
    """A thread of the worker writes a frame (with the id the next request will have) while the worker
    is idle: the host finds it before sending the next request, replaces the worker and says so."""
    b = rogue[level]
    flag = os.path.join(b.workdir, "injected.flag")
    if os.path.exists(flag):
        os.unlink(flag)
    assert Run(b, "kept = 1").ok
    cell = RAW + (
        "import threading, time\n"
        "rid = request_id()\n"
        "def later():\n"
        "    time.sleep(0.3)\n"
        "    write(frame({'type': 'stream', 'id': rid + 1, 'name': 'stdout', 'text': 'INJECTED\\n'}))\n"
        "    open('injected.flag', 'w').close()\n"
        "threading.Thread(target=later).start()\n")
    assert Run(b, cell).ok
    for _ in range(500):
        if os.path.exists(flag):
            break
        time.sleep(0.01)
    assert os.path.exists(flag)
    r = Run(b, "print('B')\n'kept' in globals()")
    assert "INJECTED" not in texts(r)
    assert r.stdout() == "B\n" and r.text() == "False"
    assert r.done["worker"]["reason"] == "protocol" and r.done["worker"]["state_lost"] is True
    assert "while no request was running" in notice(r) and "variables were lost" in notice(r)


def test_the_summary_carries_no_fact_the_worker_claims_about_itself(tmp_path):
    """worker, isolation and os_layers are the host's to state; policy and the cell's number are what the
    host sent; when and in which cell a denial happened is the kernel's to add."""
    b = rogue_backend(tmp_path, engine="protocol_support:ForgingEngine", spare=False)
    try:
        r = Run(b, "1", execution_count=5)
        assert r.ok
        assert "isolation" not in r.done and "os_layers" not in r.done
        assert "worker" not in r.done                         # nothing was lost: the host says nothing
        assert r.done["policy"] == b.policy.name and r.done["execution_count"] == 5
        records = [e["record"] for e in r.events if e["type"] == "denial"] + r.done["denials"]
        assert records and all("cell" not in rec and "time" not in rec for rec in records)
    finally:
        b.shutdown()


# -- item 4: replies capped at the source, every loss reported ----------------------------------------

@pytest.fixture(scope="module")
def real(tmp_path_factory):
    policy = PRESETS["data-science"].with_limits(timeout=30.0, memory_mb=1024, output_bytes=64_000_000)
    b = make_backend("process", policy, str(tmp_path_factory.mktemp("protocol-real")), grace=1.0)
    assert b.wait_ready(), b.status()
    yield b
    b.shutdown()


def test_a_huge_completion_is_trimmed_in_the_worker_and_state_survives(real):
    """180,000 attribute names of ~190 characters (34 MB of matches): the reply is trimmed where it is
    made and says so; the worker, and the notebook's variables, live on."""
    before = pid(real)
    assert Run(real, "class C:\n    pass\nc = C()\n"
                     "c.__dict__.update(dict.fromkeys(['a' * 190 + str(i) for i in range(180000)], 0))\n"
                     "kept = 'still here'").ok
    reply = real.complete("c.a", 3)
    assert 0 < len(reply["matches"]) < 180000 and "180000 names match" in reply["trimmed"]
    assert reply["metadata"]["sandbox_trimmed"] == reply["trimmed"]
    r = Run(real, "kept")
    assert r.text() == "'still here'" and pid(real) == before and "worker" not in r.done


def test_a_huge_inspection_and_user_expression_are_trimmed_in_the_worker(real):
    before = pid(real)
    params = ", ".join(f"p{i}_{'x' * 100}" for i in range(2000))   # a 206,000-character signature
    assert Run(real, f"class K:\n    def __init__(self, {params}):\n        pass\n"
                     "kept2 = 'here too'").ok
    reply = real.inspect("K", 1)
    assert reply["found"] and "characters cut by the sandbox" in reply["data"]["text/plain"]
    assert len(reply["data"]["text/plain"]) < 100_000
    value = real.evaluate("'y' * 40_000_000")     # output_bytes (64 MB) lets the engine render it all
    assert value["status"] == "ok" and "trimmed by the sandbox" in value["data"]["text/plain"], value.get("evalue")
    assert value["data"]["text/plain"].startswith("'yyyy")
    r = Run(real, "kept2")
    assert r.text() == "'here too'" and pid(real) == before and "worker" not in r.done


def test_a_reply_larger_than_the_host_accepts_ends_the_worker_and_is_reported(tmp_path):
    """A worker that answers a completion with a 2 MB frame (its own writing, past the worker's
    trimming): the host refuses it unread, and the next cell says the worker and its variables are gone."""
    b = rogue_backend(tmp_path, engine="protocol_support:OversizeEngine")
    try:
        assert Run(b, "state = 1").ok
        reply = b.complete("st", 2)
        assert reply["matches"] == []
        r = Run(b, "'state' in globals()")
        assert r.text() == "False"
        assert r.done["worker"]["reason"] == "protocol" and "completion" in r.done["worker"]["when"]
        assert "variables were lost" in notice(r) and "fresh worker" in notice(r)
    finally:
        b.shutdown()


@pytest.mark.parametrize("request_kind, how", [("complete", "exited with status 3"),
                                               ("inspect", "segmentation fault"),
                                               ("evaluate", "SIGKILL")])
def test_a_worker_lost_outside_a_cell_is_reported_with_the_next_cell(tmp_path, request_kind, how):
    b = rogue_backend(tmp_path, engine="protocol_support:DyingEngine")
    try:
        before = pid(b)
        assert Run(b, "state = 1").ok
        {"complete": lambda: b.complete("st", 2), "inspect": lambda: b.inspect("state", 1),
         "evaluate": lambda: b.evaluate("state")}[request_kind]()
        r = Run(b, "'state' in globals()")
        assert r.text() == "False" and pid(b) != before
        worker = r.done["worker"]
        assert worker["lost"] and worker["state_lost"] and how in worker["message"], worker
        assert set(worker) >= {"lost", "reason", "state_lost", "message", "when"}
        assert how in notice(r) and "variables were lost" in notice(r)
        assert Run(b, "1").done.get("worker") is None     # told once
    finally:
        b.shutdown()


def test_a_worker_stopped_after_an_error_in_the_kernel_is_reported_with_the_next_cell(tmp_path):
    """The kernel's own callback fails hard in the middle of a cell: the worker (out of step now) is
    stopped, and the next cell says its variables are gone instead of silently starting afresh."""
    b = rogue_backend(tmp_path)
    try:
        assert Run(b, "state = 1").ok

        def broken(event):
            raise SystemExit("kernel going down")

        with pytest.raises(SystemExit):
            b.run_cell("print('x')\nimport time\ntime.sleep(0.2)", emit=broken)
        r = Run(b, "'state' in globals()")
        assert r.text() == "False" and r.done["worker"]["reason"] == "host"
        assert "variables were lost" in notice(r)
    finally:
        b.shutdown()


def test_a_worker_that_died_before_a_reset_is_still_reported(tmp_path):
    """A reset discards the namespace on purpose, but a worker that had died by itself (or spoken out of
    turn) before it is still told: the operator's log and the agent learn what happened."""
    import signal

    b = rogue_backend(tmp_path)
    try:
        assert Run(b, "state = 1").ok
        os.kill(pid(b), signal.SIGKILL)
        b._active.wait_exit(5)
        b.reset()
        r = Run(b, "'state' in globals()")
        assert r.text() == "False"
        assert r.done["worker"]["when"] == "before a reset" and "SIGKILL" in r.done["worker"]["message"]
        assert Run(b, "1").done.get("worker") is None
    finally:
        b.shutdown()


# -- item 4: memory deaths say "out of memory" ------------------------------------------------------------

def test_memoryerror_escaping_the_workers_own_code_says_out_of_memory(tmp_path):
    b = rogue_backend(tmp_path)
    try:
        r = Run(b, "import __main__\n"
                   "def send(self, message):\n"
                   "    raise MemoryError\n"
                   "__main__.Worker.send = send\n")
        assert r.done["worker"]["reason"] == "memory", r.done
        assert "out of memory" in r.error["evalue"] and "512 MB" in r.error["evalue"]
    finally:
        b.shutdown()


def test_an_uncaught_memoryerror_at_top_level_says_out_of_memory(tmp_path):
    """What Python does with a MemoryError nobody caught: a traceback on stderr and exit status 1 (the
    worker's process image replaced by an interpreter that does exactly that)."""
    b = rogue_backend(tmp_path)
    try:
        r = Run(b, "import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'raise MemoryError'])")
        assert r.done["worker"]["reason"] == "memory", r.done
        assert "out of memory" in r.error["evalue"] and "status 1" not in r.error["evalue"]
    finally:
        b.shutdown()


@pytest.mark.parametrize("level", LEVELS)
def test_abort_after_a_failed_allocation_in_c_says_out_of_memory(rogue, level):
    """C++ operator new of a terabyte under the worker's address-space limit: std::bad_alloc, nobody
    catches it, std::terminate, abort()."""
    b = rogue[level]
    r = Run(b, "import ctypes\nlib = ctypes.CDLL('libstdc++.so.6')\nlib._Znwm.argtypes = [ctypes.c_size_t]\n"
               "lib._Znwm(1 << 40)")
    assert r.done["worker"]["reason"] == "memory", r.done
    assert "out of memory" in r.error["evalue"] and "512 MB" in r.error["evalue"]
    assert Run(b, "2").text() == "2"


# -- item 2: what the host holds while relaying is bounded by the cell's caps -----------------------------

CHARTS = RAW + (
    "rid = request_id()\n"
    "points = [i / 7 for i in range(60000)]\n"
    "chart = {'data': [{'type': 'scatter', 'x': points, 'y': points}], 'layout': {}}\n"
    "body = frame({'type': 'display', 'id': rid, 'data': {'application/vnd.plotly.v1+json': chart,\n"
    "              'text/plain': 'Figure'}, 'metadata': {}})\n"
    "for _ in range(N):\n"
    "    write(body)\n")


def test_charts_past_the_display_cap_are_not_kept_nor_decoded(tmp_path):
    """40 charts of ~2.4 MB each with a 4 MB display cap: the host decodes what the kernel could
    publish, keeps at most the cap for done.charts, and discards the rest unread."""
    b = rogue_backend(tmp_path, max_display_bytes=4_000_000, spare=False)
    try:
        worker = b._active
        events = []
        tracemalloc.start()
        try:
            done = b.run_cell(CHARTS.replace("N", "40"), emit=events.append)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        displays = [e for e in events if e["type"] == "display"]
        assert done["status"] == "ok" and done["truncated"] is True
        assert worker.channel.discarded >= 35 and len(displays) <= 5
        assert "discarded unread" in "".join(e.get("text", "") for e in events if e["type"] == "stream")
        # 40 decoded charts would be ~250 MB; the cap keeps it to a few charts' worth
        assert peak < 60 * 2 ** 20, peak
    finally:
        b.shutdown()


def test_a_worker_flooding_far_past_the_caps_is_stopped(tmp_path):
    """Frames discarded unread still count: past max_cell_bytes the worker is stopped, and says why."""
    b = rogue_backend(tmp_path, max_display_bytes=1_000_000, max_cell_bytes=32 * 2 ** 20, spare=False)
    try:
        r = Run(b, CHARTS.replace("N", "10 ** 6"))
        assert not r.ok and r.done["worker"]["reason"] == "flood" and "far past its limits" in r.error["evalue"]
        assert Run(b, "5").text() == "5"
    finally:
        b.shutdown()


def test_displays_past_the_kernels_cap_are_withheld_in_the_worker(tmp_path):
    """The real engine relays seed 002's result["chart"] list as it is: 12 charts of ~0.9 MB under a 2 MB
    display cap. The worker sends what the kernel could publish and a note in place of each other chart;
    nothing is discarded as a flood, the worker and its variables live on."""
    b = make_backend("process", PRESETS["data-science"], str(tmp_path), spare=False, max_display_bytes=2_000_000)
    try:
        worker = b._active
        r = Run(b, "xs = [i / 7 for i in range(25000)]\n"
                   "result = {'chart': [{'data': [{'type': 'scatter', 'x': xs, 'y': xs}]} for _ in range(12)]}\n"
                   "kept = 'yes'")
        shown = [e for e in r.events if e["type"] == "display" and "application/vnd.plotly.v1+json" in e["data"]]
        notes = [e for e in r.events if e["type"] == "display" and "not shown" in e["data"].get("text/plain", "")]
        assert r.ok and 1 <= len(shown) <= 2 and len(shown) + len(notes) == 12, r.done.get("error")
        assert len(r.done["charts"]) == len(shown) and r.done["truncated"] is True
        assert worker.channel.discarded == 0 and worker.channel.received < 3_000_000
        assert Run(b, "kept").text() == "'yes'" and b._active is worker
    finally:
        b.shutdown()


def test_stdout_and_chart_references_resolve_to_data_the_host_kept(tmp_path):
    """done.output as {"$stdout": true} is the stdout the host relayed; with the real engine a chart
    shown in the cell travels once (as a reference) and comes back in done.charts."""
    b = make_backend("process", PRESETS["data-science"], str(tmp_path), spare=False)
    try:
        worker = b._active
        r = Run(b, "import plotly.graph_objects as go\nprint('hello')\n"
                   "fig = go.Figure(go.Scatter(x=list(range(50000)), y=list(range(50000))))\nfig.show()")
        assert r.ok and r.done["output"] == "hello\n"
        shown = [e["data"]["application/vnd.plotly.v1+json"] for e in r.events if e["type"] == "display"]
        assert len(shown) == 1 and r.done["charts"] == shown
        # the chart crossed the channel once: the done frame did not carry it again
        assert worker.channel.received < 1.5 * len(json.dumps(shown[0], separators=(",", ":")))
    finally:
        b.shutdown()


# -- the channel itself --------------------------------------------------------------------------------

def pair(max_recv=64 * 2 ** 20):
    a, b = socket.socketpair()
    return ch.Channel(a, max_recv=max_recv, max_send=max_recv), ch.Channel(b, max_recv=max_recv, max_send=max_recv)


def test_a_discarded_frame_is_never_decoded_and_the_channel_stays_in_step():
    """A frame skip() discards is read in bounded chunks and thrown away, across a timeout in its middle;
    the next frame (itself resumed after a timeout) arrives intact."""
    a, b = pair()
    big = ch.encode({"type": "stream", "id": 3, "name": "stdout", "text": "x" * 5_000_000})
    done = ch.encode({"type": "done", "id": 3, "status": "ok", "output": "y" * 300_000})
    a.sock.sendall(big[:100_000])
    seen = []
    skip = lambda n, head: seen.append((n, head)) or head.startswith(ch.frame_prefix("stream", 3))  # noqa: E731
    with pytest.raises(ch.ChannelTimeout):
        b.recv(deadline=time.monotonic() + 0.05, skip=skip)
    rest = threading.Event()
    sender = threading.Thread(target=lambda: (a.sock.sendall(big[100_000:] + done[:1000]), rest.wait(10),
                                              a.sock.sendall(done[1000:])))
    sender.start()
    while len(seen) < 2:      # the rest of the big frame is thrown away, then the done frame begins
        with pytest.raises(ch.ChannelTimeout):
            b.recv(deadline=time.monotonic() + 0.05, skip=skip)
    assert seen[0][0] == len(big) - 4
    with pytest.raises(ch.ChannelTimeout):  # the done frame is incomplete: the next call resumes it
        b.recv(deadline=time.monotonic() + 0.05, skip=skip)
    rest.set()
    assert b.recv(deadline=time.monotonic() + 5, skip=skip)["output"] == "y" * 300_000
    sender.join()
    assert b.discarded == 1 and b.pending() is None and len(seen) == 2 and b.received == len(big) + len(done) - 8


def test_pending_tells_data_from_a_closed_peer():
    a, b = pair()
    assert b.pending() is None
    a.send({"type": "stream", "id": 1, "name": "stdout", "text": "late"})
    assert b.pending() == "data"
    b.recv(deadline=time.monotonic() + 1)
    assert b.pending() is None
    a.close()
    assert b.pending() == "closed"


# Frames a worker could send to make the host allocate as much as possible per byte.
COSTLY_UNITS = {
    "empty lists": b"[],", "empty objects": b"{},", "one-key objects": b'{"a":1},', "pairs": b"[1.5,2.5],",
    "short strings": b'"ab",', "two-byte characters": '"\u0100",'.encode(), "3-digit ints": b"257,",
    "short floats": b"0.5,", "long floats": b"0.5488135039273248,",
    "pairs of two-byte characters": '["\u0100","\u0100"],'.encode(),
    "objects of two-byte characters": '{"a":"\u0100","b":"\u0100","c":"\u0100"},'.encode(),
    "singleton lists": b'["a"],',
}
DECODE_FACTOR = 24


def test_decoding_a_frame_costs_a_bounded_multiple_of_its_size():
    """Whatever a 4 MB frame holds, decoding it (or refusing it) allocates at most DECODE_FACTOR times
    its size; kinds of data that would cost more (containers packed tight) are refused before parsing.
    Brackets inside strings are text, not containers: such a frame is not refused."""
    head, tail = b'{"type":"display","id":1,"data":{"application/json":[', b"0]}}"
    ratios, refused = {}, set()
    for name, unit in COSTLY_UNITS.items():
        body = head + unit * ((4 * 2 ** 20 - len(head) - len(tail)) // len(unit)) + tail
        tracemalloc.start()
        try:
            try:
                value = ch.decode(body)
            except ch.FrameTooCostly:
                value = refused.add(name)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        del value
        ratios[name] = round(peak / len(body), 1)
    assert max(ratios.values()) <= DECODE_FACTOR, ratios
    assert {"empty lists", "empty objects", "one-key objects", "singleton lists"} <= refused
    assert "long floats" not in refused and "short strings" not in refused
    text = "[{" * 1_000_000
    assert ch.decode(json.dumps({"type": "stream", "id": 1, "name": "stdout", "text": text}).encode())["text"] == text
