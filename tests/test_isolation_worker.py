"""Levels `process` and `kernel` end to end: the real engine in a worker, crash containment, hard limits,
interrupts, a hostile worker, fail-closed start-up, restarts for looser policies, the data stack.

Attacks that must be stopped by the operating system run through a test-only engine (RogueEngine in
isolation_support.py) that executes the cell as plain Python inside the worker: the Python gates are out
of the picture, as they would be for a C extension gone rogue. The same attacks through the real engine
with a policy that grants os/socket/subprocess/ctypes are refused by the gates first (also checked)."""
import os
import struct
import sys
import threading
import time

import pytest

from sandbox_kernel.isolation import make_backend
from sandbox_kernel.policy import PRESETS

from isolation_support import Listener, Run, kernel_level_problem, rogue_policy

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="worker levels are tested on Linux")

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
KERNEL_PROBLEM = kernel_level_problem()
LEVELS = ("process", "kernel") if KERNEL_PROBLEM is None else ("process",)
needs_kernel = pytest.mark.skipif(KERNEL_PROBLEM is not None, reason=f"kernel level unavailable: {KERNEL_PROBLEM}")
SECRET_ENV = "SANDBOX_TEST_KERNEL_SECRET"


def _real_policy():
    return PRESETS["data-science"].with_limits(timeout=5.0, memory_mb=512)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    backends = {}
    for level in LEVELS:
        backends[level] = make_backend(level, _real_policy(), str(tmp_path_factory.mktemp(f"real-{level}")),
                                       grace=1.0, cancel_grace=1.0)
    for b in backends.values():
        assert b.wait_ready(), b.status()
    yield backends
    for b in backends.values():
        b.shutdown()


@pytest.fixture(scope="module")
def rogue(tmp_path_factory):
    os.environ[SECRET_ENV] = "hunter2"
    try:
        backends = {}
        for level in LEVELS:
            backends[level] = make_backend(
                level, rogue_policy(limits={"memory_mb": 512, "timeout": 5.0}),
                str(tmp_path_factory.mktemp(f"rogue-{level}")), grace=1.0, cancel_grace=1.0,
                engine="isolation_support:RogueEngine", extra_sys_path=[TESTS_DIR])
        for b in backends.values():
            assert b.wait_ready(), b.status()
    finally:
        del os.environ[SECRET_ENV]
    yield backends
    for b in backends.values():
        b.shutdown()


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    root = tmp_path_factory.mktemp("host")
    (root / "secret.txt").write_text("TOP-SECRET-HOST-DATA")
    (root / "target.txt").write_text("original")
    listener = Listener()
    yield {"root": root, "listener": listener}
    listener.close()


def pid(backend):
    return backend.status()["worker"]["pid"]


# -- the basics ------------------------------------------------------------------------------------

@pytest.mark.parametrize("level", LEVELS)
def test_state_persists_across_cells_in_the_worker(real, level):
    b = real[level]
    assert Run(b, "x = 41\ndef f():\n    return y + x\ny = 1").ok
    r = Run(b, "f()")
    assert r.ok and r.text() == "42"
    assert pid(b) != os.getpid()


@pytest.mark.parametrize("level", LEVELS)
def test_errors_denials_completion_and_evaluate_cross_the_channel(real, level):
    b = real[level]
    r = Run(b, "import os")
    assert not r.ok and "import of 'os' is not allowed" in r.error["evalue"]
    assert any(e["type"] == "denial" for e in r.events)
    assert "zip" in b.complete("zi", 2)["matches"]
    assert b.evaluate("6 * 7")["data"]["text/plain"] == "42"
    assert b.inspect("len", 3)["found"]


@pytest.mark.parametrize("level", LEVELS)
def test_events_are_relayed_as_they_happen(real, level):
    """The host gets 'first' while the cell sleeps: it interrupts the cell on seeing it, and 'second' never
    comes (events held until the end would arrive after the cell, too late to interrupt it). The sleep is
    the give-up."""
    b = real[level]
    seen = []

    def emit(event):
        seen.append(event)
        if event["type"] == "stream" and "first" in event["text"]:
            b.cancel()

    done = b.run_cell("import time\nprint('first')\ntime.sleep(4)\nprint('second')", emit=emit)
    assert done["status"] == "error" and done["error"]["ename"] == "Cancelled", done
    assert "worker" not in done, "the interrupt, not a lost worker, ended the cell"
    assert "".join(e["text"] for e in seen if e["type"] == "stream") == "first\n"


def test_worker_environment_holds_no_kernel_secrets(rogue):
    r = Run(rogue["process"], f"import os\nos.environ.get({SECRET_ENV!r}, 'absent')")
    assert r.text() == "'absent'"


@needs_kernel
def test_status_reports_exactly_the_active_layers(real):
    assert real["process"].status()["os_layers"]["active"] == ["rlimits"]
    s = real["kernel"].status()
    assert s["isolation"] == "kernel"
    assert sorted(s["os_layers"]["active"]) == ["capabilities", "landlock", "rlimits", "seccomp"]
    assert s["os_layers"]["failed"] == [] and s["os_layers"]["degraded"] is False
    assert s["worker"]["state"] == "ready"


# -- what the OS stops under `kernel` ---------------------------------------------------------------

@needs_kernel
def test_kernel_spawning_a_process_fails_and_nothing_runs(rogue, outside):
    marker = outside["root"] / "spawned"
    for cell in (f"import os\nassert os.system('touch {marker}') == 0",
                 f"import subprocess\nsubprocess.run(['touch', '{marker}'], check=True)",
                 f"import ctypes\nassert ctypes.CDLL(None).system(b'touch {marker}') == 0",
                 "import os\nos.fork()"):
        r = Run(rogue["kernel"], cell)
        assert not r.ok, cell
    assert not marker.exists()


@needs_kernel
def test_kernel_socket_to_loopback_fails_and_listener_receives_nothing(rogue, outside):
    port = outside["listener"].port
    for cell in (f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\ns.sendall(b'LEAK')",
                 "import ctypes\nfd = ctypes.CDLL(None).socket(2, 1, 0)\nassert fd >= 0"):
        r = Run(rogue["kernel"], cell)
        assert not r.ok, cell
    time.sleep(0.2)
    assert outside["listener"].connections == 0 and outside["listener"].data == b""


@needs_kernel
def test_kernel_reading_a_host_file_outside_the_workdir_fails(rogue, outside):
    for path in (outside["root"] / "secret.txt", "/etc/passwd"):
        r = Run(rogue["kernel"], f"open({str(path)!r}).read()")
        assert not r.ok and "PermissionError" in r.error["ename"]
        assert "TOP-SECRET" not in str(r.events)


@needs_kernel
def test_kernel_writing_outside_fails_and_target_is_unchanged(rogue, outside):
    target = outside["root"] / "target.txt"
    r = Run(rogue["kernel"], f"f = open({str(target)!r}, 'w')\nf.write('PWNED')\nf.close()")
    assert not r.ok
    assert target.read_text() == "original"
    assert Run(rogue["kernel"], "open('inside.txt', 'w').write('fine')").ok


@needs_kernel
def test_same_attacks_through_the_real_engine_are_refused_by_the_gates_first(real, outside, tmp_path):
    b = make_backend("kernel", rogue_policy(), str(tmp_path), spare=False)
    try:
        marker = outside["root"] / "spawned-real"
        for cell in (f"import os\nos.system('touch {marker}')",
                     f"import subprocess\nsubprocess.run(['touch', '{marker}'])",
                     f"import socket\nsocket.create_connection(('127.0.0.1', {outside['listener'].port}))",
                     f"open({str(outside['root'] / 'secret.txt')!r}).read()"):
            assert not Run(b, cell).ok, cell
        assert not marker.exists() and outside["listener"].connections == 0
    finally:
        b.shutdown()


@needs_kernel
def test_control_the_same_attacks_succeed_at_level_process(rogue, outside):
    """Without the OS layers the rogue engine does read the secret: the kernel-level failures above
    are the OS layers' work, not an accident of the test."""
    r = Run(rogue["process"], f"open({str(outside['root'] / 'secret.txt')!r}).read()")
    assert r.ok and "TOP-SECRET" in r.text()


# -- crashes, memory, hard limits -------------------------------------------------------------------

@pytest.mark.parametrize("level", LEVELS)
def test_allocation_bomb_is_contained_with_a_clear_message(real, level):
    b = real[level]
    Run(b, "keep = 'still here'")
    r = Run(b, "import numpy as np\nxs = []\nwhile True:\n    xs.append(np.ones(2**22))")
    assert not r.ok and "memory" in r.error["evalue"].lower()
    r2 = Run(b, "del xs\nkeep")
    assert r2.ok and r2.text() == "'still here'", r2.done   # contained: the worker and its state live on


@pytest.mark.parametrize("level", LEVELS)
def test_allocation_bomb_below_the_engine_is_stopped_by_rlimit(rogue, level):
    """No engine checks at all (rogue engine): RLIMIT_AS turns the bomb into MemoryError."""
    b = rogue[level]
    before = pid(b)
    r = Run(b, "x = bytearray(4 * 2**30)")
    assert not r.ok and r.error["ename"] == "MemoryError"
    assert "memory limit is 512 MB" in r.error["evalue"]
    assert Run(b, "1 + 1").text() == "2" and pid(b) == before


@pytest.mark.parametrize("level", LEVELS)
def test_worker_killed_by_the_os_kills_only_the_worker(rogue, level):
    """What the kernel's OOM killer does (SIGKILL): the kernel reports it and answers the next cell."""
    b = rogue[level]
    assert b.warm_spare()
    before = pid(b)
    r = Run(b, "import os, signal\nstate = 1\nos.kill(os.getpid(), signal.SIGKILL)")
    assert not r.ok and r.error["ename"] == "SandboxWorkerLost"
    msg = r.error["evalue"]
    assert "killed" in msg and "out of memory" in msg and "512 MB" in msg and "variables were lost" in msg
    assert r.done["worker"]["state_lost"] is True
    r2 = Run(b, "'state' in globals()")
    assert r2.ok and r2.text() == "False" and pid(b) != before


@pytest.mark.parametrize("level", LEVELS)
def test_segfault_kills_only_the_worker_and_recovery_is_fast(rogue, level):
    b = rogue[level]
    assert b.warm_spare()
    r = Run(b, "import ctypes\nctypes.string_at(0)")
    assert not r.ok and "segmentation fault" in r.error["evalue"] and "variables were lost" in r.error["evalue"]
    assert b.status()["worker"]["last_recovery_ms"] <= 300
    assert Run(b, "import numpy, pandas, plotly\n2 + 2").text() == "4"


@pytest.mark.parametrize("level", LEVELS)
def test_worker_exit_is_reported(rogue, level):
    r = Run(rogue[level], "import os\nos._exit(7)")
    assert "exited with status 7" in r.error["evalue"]
    assert Run(rogue[level], "3").text() == "3"


def test_cell_stuck_in_c_ends_within_timeout_plus_grace(real):
    """pbkdf2 runs for tens of seconds in C without looking at signals: the engine's soft timeout
    cannot fire, so the host kills the worker at timeout + grace. (Its rounds are charged as ticks first: the tick
    budget here is large enough to let it start, as a C call the charge misjudges would.)"""
    b = real["process"]
    r = Run(b, "import hashlib\nhashlib.pbkdf2_hmac('sha256', b'x', b'y', 10**8)",
            limits=_real_policy().limits.__class__(ticks=10**12, timeout=1.0, memory_mb=512))
    # the host's hard deadline (time limit + grace) killed it, as the kernel reports
    assert not r.ok and r.done["worker"]["reason"] == "timeout", r.done
    assert "time limit (1 s) nor within 1 s more" in r.error["evalue"], r.error
    assert Run(b, "1").text() == "1"


def test_interrupt_reaches_the_worker_and_keeps_state(real):
    b = real["process"]
    Run(b, "kept = 5")
    before = pid(b)
    threading.Timer(0.5, b.cancel).start()
    r = Run(b, "while True:\n    pass")
    # the engine in the worker ended the cell on the interrupt (not its time limit, not the host's kill)
    assert not r.ok and r.error["ename"] == "Cancelled" and "worker" not in r.done, r.done
    assert Run(b, "kept").text() == "5" and pid(b) == before


@needs_kernel
def test_interrupt_of_a_cell_stuck_in_c_kills_after_the_grace(real):
    b = real["kernel"]
    threading.Timer(0.3, b.cancel).start()
    r = Run(b, "import hashlib\nhashlib.pbkdf2_hmac('sha256', b'x', b'y', 10**8)",
            limits=_real_policy().limits.__class__(ticks=10**12, timeout=60.0, memory_mb=512))
    # killed after the interrupt's grace: not at the time limit's hard deadline (reason "timeout")
    assert r.done["worker"]["reason"] == "interrupt", r.done
    assert Run(b, "2").text() == "2"


# -- a hostile worker --------------------------------------------------------------------------------

@pytest.mark.parametrize("payload", [
    b"\xff\xff\xff\xff",                                      # claims a 4 GB frame
    b"\x00\x00\x00\x05junk!",                                 # not JSON
    b'\x00\x00\x00\x1b{"type":"exec","code":"1+1"}',          # a message type the host does not know
    struct.pack(">I", 37) + b'{"type":"stream","name":"x","text":1}',  # known type, wrong field types
])
def test_malformed_message_ends_the_worker_never_the_kernel(rogue, payload):
    b = rogue["process"]
    cell = ("import os, stat\n"
            "for fd in range(3, 256):\n"
            "    try:\n"
            "        if stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
            f"            os.write(fd, {payload!r})\n"
            "    except OSError:\n"
            "        pass\n"
            "import time\ntime.sleep(1)")
    r = Run(b, cell)
    assert not r.ok and r.done["worker"]["reason"] == "protocol", r.done
    assert "malformed" in r.error["evalue"]
    assert Run(b, "'alive'").text() == "'alive'"


def test_output_flood_is_cut_off(tmp_path):
    b = make_backend("process", rogue_policy(), str(tmp_path), engine="isolation_support:RogueEngine",
                     extra_sys_path=[TESTS_DIR], spare=False, max_cell_bytes=2 * 2**20)
    try:
        r = Run(b, "while True:\n    print('x' * 100000)")
        assert not r.ok and r.done["worker"]["reason"] == "flood" and "MB of output" in r.error["evalue"]
        assert Run(b, "5").text() == "5"
    finally:
        b.shutdown()


# -- fail closed, restarts ---------------------------------------------------------------------------

@needs_kernel
def test_worker_that_cannot_start_means_cells_do_not_run(tmp_path):
    b = make_backend("kernel", _real_policy(), str(tmp_path), engine="no_such_module:Engine", spare=False)
    try:
        r = Run(b, "open('ran.txt', 'w').write('x')")
        assert not r.ok and r.error["ename"] == "SandboxUnavailable"
        assert "cells do not run" in r.error["evalue"] and "Nothing was executed" in r.error["evalue"]
        assert not (tmp_path / "ran.txt").exists()
        assert b.status()["worker"]["state"] == "unavailable"
    finally:
        b.shutdown()


@needs_kernel
def test_looser_policy_needs_a_new_worker(rogue, outside):
    b = rogue["kernel"]
    base = b.policy
    assert b.needs_restart_for(base) is None
    assert b.needs_restart_for(PRESETS["strict"].with_limits(memory_mb=256)) is None   # tighter: no restart
    assert "network" in b.needs_restart_for(rogue_policy(network=True, limits={"memory_mb": 512}))
    assert "memory" in b.needs_restart_for(rogue_policy(limits={"memory_mb": 4096}))
    assert "isolation" in b.needs_restart_for(base, level="process")
    port = outside["listener"].port
    cell = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\ns.sendall(b'hi')\ns.close()"
    assert not Run(b, cell).ok
    b.restart(rogue_policy(network=True, limits={"memory_mb": 512, "timeout": 5.0}))
    try:
        assert b.status()["worker"]["network"] is True
        assert Run(b, cell).ok
        deadline = time.monotonic() + 10   # a give-up: the bytes are sent before the cell ends
        while outside["listener"].data != b"hi" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert outside["listener"].data == b"hi"
    finally:
        b.restart(base)
        outside["listener"].connections, outside["listener"].data = 0, b""


def test_reset_gives_a_fresh_process(real):
    b = real["process"]
    Run(b, "gone = 1")
    before = pid(b)
    b.reset()
    assert pid(b) != before
    r = Run(b, "gone")
    assert not r.ok and r.error["ename"] == "NameError"
    assert not any(e["type"] == "stream" and "variables were lost" in e["text"] for e in r.events)


# -- the data stack under `kernel` ---------------------------------------------------------------------

@needs_kernel
def test_data_stack_smoke_under_kernel(real):
    b = real["kernel"]
    r = Run(b, "import numpy as np\na = np.random.rand(400, 400)\nb = a @ a\n"
               "bool(np.allclose(b, np.dot(a, a)))")
    assert r.ok and r.text() == "True", r.done
    r = Run(b, "import pandas as pd\n"
               "df = pd.DataFrame({'k': ['a', 'b', 'a', 'b'], 'c': ['x', 'x', 'y', 'y'], 'v': [1, 2, 3, 4]})\n"
               "p = df.pivot_table(index='k', columns='c', values='v', aggfunc='sum')\nint(p.loc['b', 'y'])")
    assert r.ok and r.text() == "4", (r.done["error"], b.status())
    r = Run(b, "import plotly.express as px\npx.bar(df, x='k', y='v', color='c')")
    assert r.ok and any("application/vnd.plotly.v1+json" in d for d in r.results()), r.done
    r = Run(b, "df.to_csv('data.csv', index=False)\nback = pd.read_csv('data.csv')\nint(back['v'].sum())")
    assert r.ok and r.text() == "10", r.done
    assert os.path.exists(os.path.join(b.workdir, "data.csv"))


@pytest.mark.skipif(KERNEL_PROBLEM is None, reason="the kernel level works here")
def test_kernel_level_fails_closed_where_the_os_cannot_apply_it(tmp_path):
    b = make_backend("kernel", _real_policy(), str(tmp_path), spare=False)
    try:
        r = Run(b, "open('ran.txt', 'w').write('x')")
        assert not r.ok and r.error["ename"] == "SandboxUnavailable"
        assert not (tmp_path / "ran.txt").exists()
    finally:
        b.shutdown()


@needs_kernel
def test_host_without_landlock_fails_closed_or_reports_degraded(tmp_path):
    """A host whose container runtime filters the Landlock system calls (simulated by a seccomp filter
    in a child process, inherited by its workers): cells do not run; in degraded mode they run and the
    status says exactly which layer is missing."""
    import json
    import subprocess
    import textwrap

    code = textwrap.dedent("""
        import errno, json, sys
        import pyseccomp as sc
        f = sc.SyscallFilter(sc.ALLOW)
        f.add_rule(sc.ERRNO(errno.ENOSYS), "landlock_create_ruleset")
        f.load()
        from sandbox_kernel.isolation import make_backend
        from sandbox_kernel.policy import PRESETS
        out = {}
        for degraded in (False, True):
            wd = sys.argv[1] + ("/degraded" if degraded else "/strict")
            b = make_backend("kernel", PRESETS["data-science"], wd, spare=False, degraded=degraded)
            events = []
            done = b.run_cell("open('ran.txt', 'w').write('x')\\n1 + 1", emit=events.append)
            out[str(degraded)] = {"status": done["status"], "error": done.get("error"),
                                  "layers": b.status()["os_layers"]}
            b.shutdown()
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    strict, degraded = out["False"], out["True"]
    assert strict["status"] == "error" and strict["error"]["ename"] == "SandboxUnavailable"
    assert "landlock" in strict["error"]["evalue"].lower()
    assert not (tmp_path / "strict" / "ran.txt").exists()
    assert degraded["status"] == "ok"
    assert degraded["layers"]["degraded"] is True and degraded["layers"]["failed"] == ["landlock"]
    assert sorted(degraded["layers"]["active"]) == ["capabilities", "rlimits", "seccomp"]


def test_a_failing_emit_callback_leaves_the_worker_in_step(real):
    b = real["process"]
    before = pid(b)

    def broken(event):
        raise ValueError("kernel-side bug")

    with pytest.raises(ValueError):
        b.run_cell("print('a')\n'first'", emit=broken)
    r = Run(b, "'second'")
    assert r.text() == "'second'" and pid(b) == before


def test_worker_that_closes_its_channel_and_spins_is_stopped(rogue):
    b = rogue["process"]
    cell = ("import os, stat\n"
            "for fd in range(3, 256):\n"
            "    try:\n"
            "        if stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
            "            os.close(fd)\n"
            "    except OSError:\n"
            "        pass\n"
            "while True:\n"
            "    pass")
    r = Run(b, cell)
    # the host saw the channel close and stopped the worker (not at the cell's hard deadline: "(timeout)")
    assert not r.ok and r.done["worker"]["lost"], r.done
    assert "stopped by the kernel (closed its channel)" in r.error["evalue"], r.error
    assert Run(b, "'back'").text() == "'back'"


def test_worker_lost_between_cells_is_reported_with_the_next_cell(real):
    b = real["process"]
    Run(b, "idle_state = 1")
    os.kill(pid(b), 9)   # what the OOM killer does to an idle worker
    deadline = time.monotonic() + 10   # a give-up: SIGKILL ends it at once, a loaded machine reaps it later
    while b.status()["worker"]["state"] != "lost" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert b.status()["worker"]["state"] == "lost"
    r = Run(b, "idle_state")
    assert not r.ok and r.error["ename"] == "NameError"
    notice = "".join(e["text"] for e in r.events if e["type"] == "stream" and e["name"] == "stderr")
    assert "while idle; variables were lost" in notice and "fresh worker" in notice
    assert r.done["worker"]["state_lost"] is True


@pytest.mark.parametrize("level", LEVELS)
def test_worker_inherits_no_descriptor_but_its_channel(rogue, level):
    """Nothing of the kernel (ZMQ sockets, the connection file, other workers' channels) leaks in."""
    r = Run(rogue[level], "import os, stat\n"
                          "kinds = {}\n"
                          "for fd in os.listdir('/proc/self/fd'):\n"
                          "    try:\n"
                          "        st = os.fstat(int(fd))\n"
                          "    except OSError:\n"
                          "        continue\n"
                          "    kinds[int(fd)] = 'sock' if stat.S_ISSOCK(st.st_mode) else os.readlink(f'/proc/self/fd/{fd}')\n"
                          "sorted(kinds.items())")
    assert r.ok, r.error
    import ast

    fds = dict(ast.literal_eval(r.text()))
    sockets = [fd for fd, kind in fds.items() if kind == "sock"]
    assert len(sockets) == 1, fds
    assert fds[0] == "/dev/null" and fds[1] == "/dev/null" and fds[2].startswith("pipe:"), fds


def test_a_crash_in_the_very_first_cell_recovers_within_300_ms(tmp_path):
    b = make_backend(LEVELS[-1], rogue_policy(), str(tmp_path), engine="isolation_support:RogueEngine",
                     extra_sys_path=[TESTS_DIR])
    try:
        # Both workers start with the backend; the first cell waits only for the active one.
        r = Run(b, "import ctypes\nctypes.string_at(0)")
        assert "segmentation fault" in r.error["evalue"]
        assert b.status()["worker"]["last_recovery_ms"] <= 300
        assert Run(b, "import numpy, pandas, plotly\n'ready'").text() == "'ready'"
    finally:
        b.shutdown()


# -- the warm-up: after "ready", while the worker is idle -------------------------------------------------------
# The worker answers "ready" before it imports numpy, pandas and Plotly, and imports them while no request waits,
# under the OS layers, with address space held for them (the cell's memory limit is not spent on them). The first
# cell ends the warm-up; what it left is imported by the cell that uses it.

def _ping(backend) -> dict:
    value, error = backend._request("ping", {}, 30.0, max_bytes=4096, when="a test's ping")
    assert error is None, error
    return value


@pytest.mark.parametrize("level", LEVELS)
def test_the_warm_up_finishes_while_idle_and_gives_its_reserve_back(tmp_path, level):
    b = make_backend(level, _real_policy(), str(tmp_path), spare=False)
    try:
        assert b.wait_ready(), b.status()
        applied = b.status()["os_layers"]["details"]["rlimits"]
        assert applied["warm_reserve_mb"] == 512, applied
        for _ in range(600):   # a give-up, not a measure: one ping at a time until the warm-up is done
            value = _ping(b)
            if not value["warm_left"]:
                break
            time.sleep(0.1)
        assert value["warm_left"] == [], value
        # the limit given back: what the worker maps now plus the cell's 512 MB, below the limit set with the reserve
        assert value["address_space_mb"] < applied["address_space_mb"], (value, applied)
        r = Run(b, "import numpy as np, pandas as pd, plotly.express as px\nprint(pd.DataFrame({'a': np.arange(3)}).shape)")
        assert r.ok and r.stdout() == "(3, 1)\n", r.done
    finally:
        b.shutdown()


@pytest.mark.parametrize("level", LEVELS)
def test_a_first_cell_at_once_still_finds_the_data_libraries_importable(tmp_path, level):
    """The first cell arrives while the warm-up runs (or before it starts): it is answered, and the libraries it
    left are imported by a later cell within the same limits (the reserve stays while any is left)."""
    policy = PRESETS["data-science"].with_limits(timeout=30.0, memory_mb=256)
    b = make_backend(level, policy, str(tmp_path), spare=False)
    try:
        first = Run(b, "x = 1 + 1\nprint(x)")
        assert first.ok and first.stdout() == "2\n", first.done
        value = _ping(b)
        if value["warm_left"]:
            assert b.status()["os_layers"]["details"]["rlimits"]["address_space_mb"] == value["address_space_mb"]
        r = Run(b, "import numpy as np, pandas as pd, plotly.express as px\n"
                   "fig = px.line(x=[1, 2, 3], y=[2, 4, 8])\nprint(pd.DataFrame({'a': np.arange(3)}).shape)")
        assert r.ok and r.stdout() == "(3, 1)\n", r.done
    finally:
        b.shutdown()
