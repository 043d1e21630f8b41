"""A pool of warm Sandboxed Python kernels, so that a new session starts at once (issue 12, item 3).

    with KernelPool(4, options=["--SandboxKernel.limits={'memory_mb': 1024}"]) as pool:
        pooled = pool.acquire(timeout=30)      # a started kernel whose worker is ready
        pooled.kc.execute("1 + 1")             # jupyter_client's BlockingKernelClient
        pooled.release()                       # shut down; a fresh kernel replaces it

``size`` is the pool's capacity: kernels in use, warm and starting together never exceed it, so the
operator sizes the machine for ``size`` sessions (docs/operators.md). A kernel serves one session only:
``release()`` shuts it down and deletes its working directory, and a new kernel, with a new empty
directory, takes its place in the background. Reusing a kernel would hand the next session whatever the
last one left behind: variables, files, a worker that untrusted code has run in.

Warm means: the kernel answers on its channels and has run one silent cell (``warm_code``, by default
an empty one), so its worker (at the worker isolation levels) is started, confined and has imported
numpy, pandas and plotly.
"""
from __future__ import annotations

import atexit
import collections
import os
import queue
import shutil
import tempfile
import threading
import time
import uuid
import weakref

from jupyter_client.manager import KernelManager
from jupyter_core.paths import jupyter_runtime_dir

from .install import DEFAULT_NAME

# The silent cell that proves a kernel ready: it needs the worker, and leaves no history or count.
_WARM_CELL = "None"
# A warm-up for data work (``warm_code``): the first pandas + Plotly cell of a session then costs about
# what the later ones do (bench/concurrency.py), instead of the libraries' own first-use work. It binds
# no name; it needs a policy that grants pandas and plotly.
DATA_STACK_WARMUP = """import pandas as _pd
import plotly.express as _px
_px.line(_pd.DataFrame({"x": [0, 1], "y": [0, 1]}), x="x", y="y").to_dict()
_pd.DataFrame({"g": [0, 1], "v": [1.0, 2.0]}).groupby("g")["v"].agg(["mean", "sum"]).to_string()
del _pd, _px
"""
_BACKOFF_FIRST, _BACKOFF_MAX = 1.0, 30.0


_OPEN_POOLS: "weakref.WeakSet[KernelPool]" = weakref.WeakSet()


@atexit.register
def _close_open_pools():
    """Kernels do not outlive the program that pooled them (their workers stop with them)."""
    for pool in list(_OPEN_POOLS):
        pool.close(timeout=10)


class PoolError(RuntimeError):
    """No kernel could be handed out (the pool is closed, or kernels fail to start: the last reason)."""


class PooledKernel:
    """One session's kernel: ``km`` (KernelManager), ``kc`` (BlockingKernelClient, channels started),
    ``cwd`` (its own working directory), ``kernel_id`` (as the audit log's kernel_start names it).
    ``release()`` ends it; it is never handed out again."""

    def __init__(self, pool: "KernelPool", km: KernelManager, kc, cwd: str, kernel_id: str, start_s: float):
        self.km = km
        self.kc = kc
        self.cwd = cwd
        self.kernel_id = kernel_id
        self.start_s = start_s      # cold start of this kernel, to warm (seconds)
        self._pool = pool
        self._released = False
        self._stopped = threading.Event()

    def release(self, wait: bool = False) -> None:
        """Shut the kernel down and remove its directory, in the background (``wait``: block until
        done); then the pool starts a replacement. Safe to call twice."""
        self._pool._release(self)
        if wait:
            self._stopped.wait()

    def __enter__(self) -> "PooledKernel":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class KernelPool:
    """Keeps ``size`` kernels of ``kernel_name`` started and ready. Thread-safe; a context manager.

    ``options``: the kernel's command-line options (operator settings, e.g.
    ``["--SandboxKernel.isolation_options={'spare': False}"]``), the same for every kernel.
    ``cwd_root``: where each kernel's fresh working directory is made (default: the system's temporary
    directory); put it on a filesystem with a quota, since the directories share its space.
    ``env``: the kernels' environment (default: this process's); workers pass on only a few variables.
    ``max_starting``: kernels started at the same time (default: the number of CPUs).
    ``warm_code``: the silent cell each kernel runs before it is handed out, under the kernel's policy
    like any cell (e.g. DATA_STACK_WARMUP); a kernel whose warm-up fails is not used."""

    def __init__(self, size: int, kernel_name: str = DEFAULT_NAME, options: list[str] | None = None,
                 cwd_root: str | None = None, *, env: dict | None = None, startup_timeout: float = 120.0,
                 max_starting: int | None = None, warm_code: str = _WARM_CELL):
        if int(size) < 1:
            raise ValueError("a pool needs a size of at least 1")
        self.size = int(size)
        self.kernel_name = kernel_name
        self.options = list(options or [])
        self.cwd_root = cwd_root
        self.env = dict(env) if env is not None else None
        self.startup_timeout = float(startup_timeout)
        self.max_starting = max(1, int(max_starting or os.cpu_count() or 1))
        self.warm_code = warm_code
        self.last_error: str | None = None   # why the last kernel failed to start, if it did
        self.started = 0                     # kernels that became ready, over the pool's life
        self.failed = 0
        self._cond = threading.Condition()
        self._ready: collections.deque[PooledKernel] = collections.deque()
        self._in_use: set[PooledKernel] = set()
        self._starting = 0
        self._stopping = 0
        self._failures_in_a_row = 0
        self._closed = False
        self._threads: set[threading.Thread] = set()
        if cwd_root:
            os.makedirs(cwd_root, exist_ok=True)
        _OPEN_POOLS.add(self)
        with self._cond:
            self._fill()

    # -- handing out -------------------------------------------------------------------------------

    def acquire(self, timeout: float | None = None) -> PooledKernel:
        """A warm kernel for one session. Waits up to ``timeout`` seconds (None: for ever) while every
        kernel is in use or starting; raises PoolError when none came."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    raise PoolError("the kernel pool is closed")
                while self._ready:
                    pooled = self._ready.popleft()
                    if pooled.km.is_alive():
                        self._in_use.add(pooled)
                        return pooled
                    self._retire(pooled)
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    why = f"; the last start failed: {self.last_error}" if self.last_error else ""
                    raise PoolError(f"no kernel became free within {timeout:g} s ({len(self._in_use)} of "
                                    f"{self.size} in use, {self._starting} starting){why}")
                self._cond.wait(remaining)

    def stats(self) -> dict:
        with self._cond:
            return {"size": self.size, "ready": len(self._ready), "in_use": len(self._in_use),
                    "starting": self._starting, "stopping": self._stopping, "started": self.started,
                    "failed": self.failed, "last_error": self.last_error}

    def wait_full(self, timeout: float | None = None) -> bool:
        """Block until every free place holds a warm kernel (True), or ``timeout`` passes (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while len(self._ready) + len(self._in_use) < self.size and not self._closed:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return not self._closed

    # -- the kernels' lives ------------------------------------------------------------------------

    def _fill(self) -> None:
        """Start kernels until the pool is full (caller holds the lock)."""
        while (not self._closed and self._starting < self.max_starting
               and len(self._ready) + len(self._in_use) + self._starting + self._stopping < self.size):
            self._starting += 1
            self._spawn(self._start_one)

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=self._run_tracked, args=(target, *args), daemon=True,
                                  name="sandbox-kernel-pool")
        self._threads.add(thread)
        thread.start()

    def _run_tracked(self, target, *args) -> None:
        try:
            target(*args)
        finally:
            with self._cond:
                self._threads.discard(threading.current_thread())
                self._cond.notify_all()

    def _start_one(self) -> None:
        with self._cond:
            delay = 0.0 if not self._failures_in_a_row else min(
                _BACKOFF_MAX, _BACKOFF_FIRST * 2 ** (self._failures_in_a_row - 1))
        if delay:  # a host where kernels do not start: do not spin
            with self._cond:
                self._cond.wait_for(lambda: self._closed, delay)
        pooled, error = None, None
        if not self._closed:
            try:
                pooled = self._start_kernel()
            except Exception as exc:  # noqa: BLE001 - reported through last_error and acquire()
                error = f"{type(exc).__name__}: {exc}"
        with self._cond:
            self._starting -= 1
            if pooled is not None and not self._closed:
                self._ready.append(pooled)
                self.started += 1
                self._failures_in_a_row = 0
            elif pooled is not None:
                self._retire(pooled)
            elif error is not None:
                self.failed += 1
                self._failures_in_a_row += 1
                self.last_error = error
            self._fill()
            self._cond.notify_all()

    def _start_kernel(self) -> PooledKernel:
        t0 = time.monotonic()
        cwd = tempfile.mkdtemp(prefix="sandbox-session-", dir=self.cwd_root)
        # Named as Jupyter servers name them, so the kernel can give its id to the audit log.
        kernel_id = str(uuid.uuid4())
        runtime = jupyter_runtime_dir()
        os.makedirs(runtime, mode=0o700, exist_ok=True)
        km = KernelManager(kernel_name=self.kernel_name,
                           connection_file=os.path.join(runtime, f"kernel-{kernel_id}.json"))
        kc = None
        try:
            kwargs = {"extra_arguments": self.options, "cwd": cwd}
            if self.env is not None:
                kwargs["env"] = self.env
            km.start_kernel(**kwargs)
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=self.startup_timeout)
            _warm(kc, self.warm_code, self.startup_timeout)
        except BaseException:
            _stop(km, kc, cwd)
            raise
        return PooledKernel(self, km, kc, cwd, kernel_id, time.monotonic() - t0)

    def _release(self, pooled: PooledKernel) -> None:
        with self._cond:
            if pooled._released:
                return
            self._in_use.discard(pooled)
            self._retire(pooled)

    def _retire(self, pooled: PooledKernel) -> None:
        """Stop a kernel in the background, then fill its place (caller holds the lock)."""
        pooled._released = True
        self._stopping += 1
        self._spawn(self._stop_one, pooled)

    def _stop_one(self, pooled: PooledKernel) -> None:
        try:
            _stop(pooled.km, pooled.kc, pooled.cwd)
        finally:
            pooled._stopped.set()
            with self._cond:
                self._stopping -= 1
                self._fill()
                self._cond.notify_all()

    def close(self, timeout: float = 60.0) -> None:
        """Shut down every kernel, in use or not, and wait (up to ``timeout``) for them to be gone."""
        with self._cond:
            if not self._closed:
                self._closed = True
                for pooled in list(self._ready) + list(self._in_use):
                    self._retire(pooled)
                self._ready.clear()
                self._in_use.clear()
            self._cond.notify_all()
            deadline = time.monotonic() + timeout
            while self._threads and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())

    def __enter__(self) -> "KernelPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _warm(kc, code: str, timeout: float) -> None:
    """Run the silent warm-up cell and consume its messages, so the session starts with clean queues."""
    msg_id = kc.execute(code, silent=True, store_history=False)
    deadline = time.monotonic() + timeout
    reply = idle = None
    while reply is None or idle is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"the kernel's worker was not ready within {timeout:g} s")
        if reply is None:
            try:
                msg = kc.get_shell_msg(timeout=min(remaining, 0.1))
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply = msg
            except queue.Empty:
                pass
        try:
            msg = kc.get_iopub_msg(timeout=0.05)
        except queue.Empty:
            continue
        if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                and msg["content"].get("execution_state") == "idle"):
            idle = msg
    content = reply["content"]
    if content.get("status") != "ok":
        raise RuntimeError(f"the kernel cannot run cells: {content.get('ename')}: {content.get('evalue')}")


def _stop(km: KernelManager, kc, cwd: str) -> None:
    """A clean shutdown first (the kernel stops its workers), then the directory goes. Never raises."""
    try:
        if kc is not None:
            kc.stop_channels()
    except Exception:  # noqa: BLE001
        pass
    try:
        if km.has_kernel:
            km.shutdown_kernel(now=False)
    except Exception:  # noqa: BLE001 - a kernel that will not stop is killed
        try:
            km.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001
            pass
    shutil.rmtree(cwd, ignore_errors=True)
