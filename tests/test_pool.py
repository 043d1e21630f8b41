"""KernelPool smoke test (issue 12, item 3): two warm kernels run cells at once, share nothing (no
variable, no file), and a released kernel is gone, its directory with it, and replaced by a new one.
Timings are in bench/concurrency.py, not here."""
from __future__ import annotations

import json
import os
import queue
import threading
import time

from sandbox_kernel.pool import KernelPool

# A real worker (level process; no spare and no numpy/pandas/plotly warm-up, to keep the test cheap):
# warm must mean the worker is ready.
OPTIONS = ["--SandboxKernel.isolation=process", "--SandboxKernel.limits={'memory_mb': 300}",
           "--SandboxKernel.isolation_options={'spare': False, 'warm': 'json', 'fsize_mb': 5}"]


def run(kc, code: str, timeout: float = 60) -> dict:
    """The execute_reply content, with the cell's stdout as "stdout"."""
    msg_id = kc.execute(code)
    reply, idle, out = None, False, []
    deadline = time.monotonic() + timeout
    while reply is None or not idle:
        assert time.monotonic() < deadline, f"no answer to {code!r}"
        if reply is None:
            try:
                msg = kc.get_shell_msg(timeout=0.1)
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply = msg
            except queue.Empty:
                pass
        try:
            msg = kc.get_iopub_msg(timeout=0.05)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
            out.append(msg["content"]["text"])
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            idle = True
    return {**reply["content"], "stdout": "".join(out)}


def worker_limits(kernel_pid: int) -> dict:
    """The OS limits of a kernel's only worker, as /proc shows them: {name: (soft, hard)}."""
    tasks = os.listdir(f"/proc/{kernel_pid}/task")
    [worker] = [int(c) for t in tasks for c in open(f"/proc/{kernel_pid}/task/{t}/children").read().split()]
    limits = {}
    with open(f"/proc/{worker}/limits") as fh:
        for line in fh.readlines()[1:]:
            name, soft, hard = line[:26].strip(), *line[26:].split()[:2]
            limits[name] = (soft, hard)
    return limits


def processes_in(directory: str) -> list[int]:
    """Processes whose working directory is (or was, before it was deleted) ``directory``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == directory or cwd.startswith(directory + os.sep) or cwd == f"{directory} (deleted)":
            found.append(int(pid))
    return found


SESSION_CELL = """secret_{name} = '{name}-value'
with open('{name}.txt', 'w') as fh:
    fh.write(secret_{name})
print(secret_{name})
"""
PROBE = """for name in ('a', 'b'):
    try:
        value = {'a': lambda: secret_a, 'b': lambda: secret_b}[name]()
    except NameError:
        value = None
    try:
        with open(name + '.txt') as fh:
            text = fh.read()
    except FileNotFoundError:
        text = None
    print(name, value, text)
"""


def test_two_sessions_at_once_share_nothing_and_a_released_kernel_is_replaced(tmp_path):
    root, log = str(tmp_path / "sessions"), tmp_path / "audit.log"
    with KernelPool(2, options=[*OPTIONS, f"--SandboxKernel.audit_log={log}"], cwd_root=root) as pool:
        a, b = pool.acquire(timeout=120), pool.acquire(timeout=120)
        assert a.cwd != b.cwd and os.path.dirname(a.cwd) == os.path.dirname(b.cwd) == root
        assert a.km.provisioner.pid != b.km.provisioner.pid

        results = {}

        def session(pooled, name):
            results[name] = run(pooled.kc, SESSION_CELL.format(name=name))

        threads = [threading.Thread(target=session, args=(a, "a")), threading.Thread(target=session, args=(b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert results["a"]["stdout"] == "a-value\n" and results["b"]["stdout"] == "b-value\n"

        seen_by_a, seen_by_b = run(a.kc, PROBE)["stdout"], run(b.kc, PROBE)["stdout"]
        assert seen_by_a == "a a-value a-value\nb None None\n"
        assert seen_by_b == "a None None\nb b-value b-value\n"
        assert os.listdir(a.cwd) == ["a.txt"] and os.listdir(b.cwd) == ["b.txt"]

        # Each session's worker has its own OS limits: a's file-size limit stops a's write; b runs on.
        for pooled in (a, b):
            limits = worker_limits(pooled.km.provisioner.pid)
            assert limits["Max file size"] == (str(5 * 2 ** 20),) * 2
            soft, hard = limits["Max address space"]
            assert soft == hard != "unlimited" and int(soft) < 4 * 2 ** 30
        big = run(a.kc, "with open('big.bin', 'wb') as fh:\n    fh.write(b'x' * (6 * 2 ** 20))")
        assert big["status"] == "error" and "File too large" in big["evalue"]
        assert os.path.getsize(os.path.join(a.cwd, "big.bin")) <= 5 * 2 ** 20
        assert run(b.kc, "print(len(secret_b))")["stdout"] == "7\n"

        a.release(wait=True)
        assert not a.km.is_alive() and not os.path.exists(a.cwd)
        assert processes_in(a.cwd) == []   # the kernel's worker went with it
        c = pool.acquire(timeout=120)      # the replacement: b is still in use and the pool holds two
        assert c.cwd not in (a.cwd, b.cwd) and os.listdir(c.cwd) == []
        assert run(c.kc, PROBE)["stdout"] == "a None None\nb None None\n"
        stats = pool.stats()
        assert stats["started"] == 3 and stats["in_use"] == 2 and stats["failed"] == 0
        # Released twice is released once: nothing more to stop, no third replacement.
        a.release()
        assert pool.stats()["stopping"] == 0 and pool.stats()["starting"] == 0
    assert not os.path.exists(b.cwd) and not os.path.exists(c.cwd)   # close() ended the sessions too
    assert not b.km.is_alive() and not c.km.is_alive()

    # The pool's kernels share one audit log; each names the id the pool gave it, and its warm-up cell
    # is there as what it was: silent, sent by the pool's client.
    records = [json.loads(line) for line in log.read_text().splitlines()]
    starts = {r["kernel_id"]: r["kernel_session"] for r in records if r["event"] == "kernel_start"}
    assert set(starts) == {a.kernel_id, b.kernel_id, c.kernel_id}
    [warm] = [r for r in records if r["event"] == "cell" and r["kernel_session"] == starts[c.kernel_id]][:1]
    assert warm["silent"] is True and warm["status"] == "ok" and warm["client_session"] == c.kc.session.session

