"""The confinement sink (confine.py): who is confined while a cell runs.

The audit hook and the path hooks used to decide by a ContextVar only. A fresh contextvars.Context (in
sys.modules, so any escape reaches it) runs code with that variable unset, and on the cell's own thread
nothing else confined it: review R10-1 ran `id` and read a file outside the working directory with
contextvars.Context().run(os.system, ...). Now, while a cell runs, its thread is confined whatever its
Context, so is every thread a cell started (in this cell or an earlier one), and only the kernel's own
threads (alive before the cell, started by no cell) are not.

"Ungated Python" is simulated here by a host function placed in the cell's namespace: it stands for
whatever an escape reaches (a library's helper, a real builtin). The cell calls it; it runs host code,
never rewritten, so only the sinks stand between it and the host.
"""
from __future__ import annotations

import contextvars
import json
import os
import socket
import threading

import pytest

from childcell import run_cell_in_child

from sandbox_kernel import confine


def _in_a_fresh_context(fn, *args):
    return contextvars.Context().run(fn, *args)


FRESH_CONTEXT_ESCAPES = {
    "process": lambda marker, secret: _in_a_fresh_context(os.system, f"id > {marker}"),
    "read_outside": lambda marker, secret: _in_a_fresh_context(lambda: open(secret).read()),
    "read_outside_os_open": lambda marker, secret: _in_a_fresh_context(
        lambda: os.read(os.open(secret, os.O_RDONLY), 100)),
    "write_outside": lambda marker, secret: _in_a_fresh_context(lambda: open(marker, "w").write("x")),
    "stat_outside": lambda marker, secret: _in_a_fresh_context(os.stat, secret),
    "exec_source": lambda marker, secret: _in_a_fresh_context(exec, f"open({str(marker)!r}, 'w').write('x')"),
    "copied_context": lambda marker, secret: contextvars.copy_context().run(
        lambda: (confine._FS.set(None), os.system(f"id > {marker}"))),
}


@pytest.mark.parametrize("name", sorted(FRESH_CONTEXT_ESCAPES))
def test_a_fresh_context_on_the_cells_thread_is_confined(sandbox, outside, tmp_path, host_secret, name):
    marker = outside / f"pwned-{name}"
    sandbox.ns["escape"] = lambda: FRESH_CONTEXT_ESCAPES[name](marker, tmp_path / "secret.txt")
    r = sandbox.run("print(escape())")
    assert not r.ok and r.error_name in ("OperationDenied", "FileDenied", "FileNotFoundError"), r
    assert not marker.exists() and not r.leaked(host_secret), r


def test_a_fresh_context_cannot_reach_the_network(sandbox):
    sandbox.ns["connect"] = lambda: _in_a_fresh_context(socket.create_connection, ("127.0.0.1", 9), 1)
    r = sandbox.run("connect()")
    assert not r.ok and r.error_name == "NetworkDenied", r


def test_the_cells_thread_is_the_hosts_again_after_the_cell(sandbox, outside, host_secret, tmp_path):
    """Between cells the kernel (which at level none is this very thread) works as before."""
    sandbox.run("x = 1")
    assert _in_a_fresh_context(lambda: open(tmp_path / "secret.txt").read()).strip() == host_secret
    (outside / "host-writes").write_text("fine")
    assert not confine.cell_is_running()


class _Pool:
    """A library's worker thread that outlives the cell that started it (a persistent pool)."""

    def __init__(self):
        self.jobs: list = []
        self.results: list = []
        self.wake = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.thread.start()

    def _work(self):
        while True:
            self.wake.wait()
            self.wake.clear()
            job = self.jobs.pop()
            if job is None:
                return
            try:
                self.results.append(("ok", job()))
            except BaseException as exc:  # noqa: B902 - the job's outcome is the result
                self.results.append(("error", type(exc).__name__))
            self.done.set()

    def run(self, job):
        self.done.clear()
        self.jobs.append(job)
        self.wake.set()
        assert self.done.wait(30)
        return self.results[-1]

    def stop(self):
        self.jobs.append(None)
        self.wake.set()
        self.thread.join(10)


def test_no_thread_starts_while_a_cell_runs(sandbox, outside):
    """A library's pool started in a cell outlived it unconfined (review 13, R13-1): starting a thread while a cell
    runs is refused, whoever asks (threading, _thread)."""
    pools = []
    sandbox.ns["start_pool"] = lambda: pools.append(_Pool())
    import _thread
    sandbox.ns["start_raw"] = lambda: _thread.start_new_thread(lambda: None, ())
    try:
        for call in ("start_pool()", "start_raw()"):
            r = sandbox.run(call)
            assert not r.ok and r.error_name == "OperationDenied" and "thread" in r.error_value, (call, r)
        assert pools == []
    finally:
        for pool in pools:
            pool.stop()


def test_the_kernels_own_threads_keep_working_while_a_cell_runs(sandbox, outside):
    """A thread alive before the cell that no cell started (ipykernel's iopub, control, heartbeat) is not
    confined: the kernel writes outside the working directory during the cell."""
    pool = _Pool()
    target = outside / "kernel-thread-writes"
    sandbox.ns["kernel_work"] = lambda: pool.run(lambda: open(target, "w").write("kernel"))
    try:
        r = sandbox.run("outcome = kernel_work()")
        assert r.ok and sandbox.ns["outcome"] == ("ok", 6), (r, sandbox.ns.get("outcome"))
        assert target.read_text() == "kernel"
    finally:
        pool.stop()


def _try(job):
    try:
        job()
        return "ok"
    except BaseException as exc:  # noqa: B902
        return type(exc).__name__


# ====================================================================================================================
# Sink: who is confined.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 5 (docs/reviews.md, "Review 5").
# --- held: scipy's process pools, tracebacks and generators' frames ------------------------------------------------

@pytest.mark.parametrize("call", ["differential_evolution(np.sum, [(0, 1)], workers=2, maxiter=1, updating='deferred')",
                                  "brute(np.sum, [(0, 1)], workers=2)"])
def test_scipy_worker_pools_start_no_process(call):
    result = run_cell_in_child(f"import numpy as np\nfrom scipy.optimize import differential_evolution, brute\n"
                               f"r = {call}\n", report=("status", "ename"), limits={"timeout": 20.0}, timeout=180)
    # (FileDenied when review 5 ran it: the pool's semaphore file; since N9-7 the resource tracker's start is
    # refused first, at fork_exec)
    assert result["status"] == "error" and result["ename"] in ("OperationDenied", "FileDenied"), result


# --- programs started without an audit event (review 9, N9-7; the fuzzer's F2) ------------------------------------
# scipy's workers=2 makes a multiprocessing Pool, whose first semaphore starts the resource tracker through
# _posixsubprocess.fork_exec (multiprocessing.util.spawnv_passfds), which raises no audit event: a `python -c` whose
# sys.path[0] is the working directory ran a cell's multiprocessing.py unconfined. fork_exec is guarded now
# (confine._guard_fork_exec).

WORKDIR_IS_CWD = '''
import os, sys, tempfile, time
_mkdtemp = tempfile.mkdtemp
def _workdir_is_cwd(*a, **k):
    # the kernel's default (SandboxKernel.workdir): the working directory is the directory the kernel starts
    # in, and the kernel takes that directory off its own sys.path (__main__._strip_cwd_from_path)
    tempfile.mkdtemp = _mkdtemp
    d = _mkdtemp(*a, **k)
    os.chdir(d)
    sys.path[:] = [p for p in sys.path if p not in ("", ".", d)]
    return d
tempfile.mkdtemp = _workdir_is_cwd
def probe_host(report):
    for i in range(100):
        if os.path.exists(MARKER):
            break
        time.sleep(0.05)
    report["outside"] = os.path.exists(MARKER) and open(MARKER).read()
'''

POOL = '''
with open('multiprocessing.py', 'w') as f:      # a file in the cell's own working directory
    f.write("import os\\nopen(%r, 'w').write('ran as pid %%d' %% os.getpid())\\n" % MARKER)
import numpy as np
from scipy import optimize
try:
    optimize.differential_evolution(lambda x: float((x**2).sum()), [(-1, 1)] * 2, maxiter=1, workers=2,
                                    updating='deferred')
except Exception:
    pass
'''


def test_library_worker_pools_run_no_program(tmp_path):
    marker = str(tmp_path / "outside-marker")
    result = run_cell_in_child(POOL.replace("MARKER", repr(marker)), report=("status", "ename"),
                               probe=WORKDIR_IS_CWD.replace("MARKER", repr(marker)), hard_exit=True, timeout=120)
    assert "crashed" not in result, result
    assert not result["outside"], json.dumps(result)


def test_fork_exec_itself_is_refused_in_a_cell(run):
    """The sink directly: subprocess' and multiprocessing's one entry point, whoever calls it during a cell."""
    import _posixsubprocess
    assert getattr(_posixsubprocess.fork_exec, "__name__", "") == "fork_exec" and confine._installed
    r = run("import numpy as np\nfrom scipy import optimize\n"
            "optimize.differential_evolution(lambda x: 0.0, [(0, 1)], workers=2, maxiter=1)\n")
    assert not r.ok and r.denied(), r
