"""Levels `process` and `kernel`, host side: the engine runs in a worker process behind a channel.

The host (the kernel's process) spawns ``python -I -m sandbox_kernel.isolation.worker``, hands it one
end of a socketpair, relays its events as they arrive and owns its life:

* soft limits are the engine's (inside the worker); the host adds the hard one: a cell still running
  ``grace`` seconds after its time limit, or ``cancel_grace`` seconds after an interrupt, gets its worker
  killed (SIGKILL), which also ends a cell stuck in C code;
* a worker that dies (segfault, out of memory, exit) or breaks the protocol (malformed or oversized
  frame, a message of another request, anything sent between requests, a flood of output) ends the cell
  with a clear message, never the kernel; the next cell gets a fresh worker, taken from a pre-warmed
  spare so that it is ready at once. A worker lost outside a cell (completion, inspection,
  user_expressions, idle) is reported at the start of the next cell;
* nothing received is ever unpickled, evaluated or imported: frames are JSON, validated field by field,
  each checked to carry the id of the request being served;
* while relaying a cell the host keeps no more than the cell's own output caps allow (text: the cell's
  ``output_bytes``; displays: ``max_display_bytes``); output past them is discarded unread;
* the ``done`` summary states only what the worker may claim; ``worker`` is the host's own record;
* nothing else of the worker's costs the host without bound: every worker is started from one thread
  that lasts as long as the kernel (its parent-death SIGKILL fires when the kernel dies, never before),
  once a second the host checks that the idle worker burns no CPU (a thread a cell left spinning), and
  it reads at most STDERR_BYTES of the worker's stderr in the worker's whole life.
"""
from __future__ import annotations

import atexit
import collections
import errno
import os
import queue
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import weakref

from ..policy import Limits, Policy
from ..workdir import grant_refusal, make_scratch, protected_places
from . import rlimits
from .channel import (EXIT_OUT_OF_MEMORY, MAX_EVENT_BYTES, MAX_REQUEST_BYTES, SMALL_FRAME, Channel,
                      ChannelClosed, ChannelError, ChannelTimeout, FrameTooCostly, frame_prefix, validate_event)

# Libraries a worker imports before it reports ready, so that a cell (or a crash's replacement) finds
# them loaded. Missing ones are skipped.
DEFAULT_WARM = ("numpy", "pandas", "plotly", "plotly.graph_objects", "plotly.express")
# Environment variables passed to a worker; nothing else from the kernel's environment (API keys,
# tokens) reaches sandboxed code.
ENV_PASS = ("PATH", "LANG", "LANGUAGE", "TZ", "PLOTLY_RENDERER", "OMP_NUM_THREADS",
            "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_MAX_THREADS", "SYSTEMROOT",
            "SANDBOX_KERNEL_PYTHON_GUARDS")   # the operator's acceptance of the C guards' fallbacks (engine.py)
PLOTLY_MIME = "application/vnd.plotly.v1+json"
CELL_EVENTS = frozenset({"stream", "display", "clear_output", "result", "error", "denial", "done"})
POLL = 0.25
# The kernel's cap on one cell's rich display data (SandboxKernel.max_display_bytes): the host keeps no
# more than this of a cell's displays while relaying it, and discards displays far past it unread.
DEFAULT_DISPLAY_BYTES = 20_000_000
# Largest reply to a completion or inspection request (the engine caps both far below this).
SMALL_REPLY_BYTES = 1024 * 1024
# Characters the engine may add to a cell's text past its cap (truncation markers, notes).
TEXT_SLACK = 64 * 1024
# What one character of text may take in a frame (a JSON escape such as \u0001).
MAX_BYTES_PER_CHAR = 6
# A denial record larger than this is dropped unread (the kernel's audit keeps a sentence, not a book).
DENIAL_FRAME_BYTES = 256 * 1024
# What the host reads of a worker's stderr (diagnostics: the last lines before a crash) in the worker's
# whole life; then it closes the pipe (the worker's writes fail with EPIPE), so a worker that writes to
# fd 2 for ever costs the kernel a bounded amount of CPU.
STDERR_BYTES = 4 * 2 ** 20
STDERR_READS = 20_000
# An idle worker (no request running) may use this much CPU time, counted from IDLE_SETTLE seconds after
# its last request ended (BLAS threads spin briefly after work); past it, a thread left running by a
# cell is burning the machine between cells, so the worker is stopped and the next cell says so.
IDLE_CPU_SECONDS = 2.0
IDLE_SETTLE = 1.0
IDLE_CHECK = 1.0
# Tasks (threads) a `kernel` worker may hold at once: BLAS and OpenMP pools (one thread per CPU each), a
# few of the engine's and a cell's own. Every new task waits for the host's answer (the task listener,
# seccomp.supervise_tasks); past this many, clone fails with EAGAIN. Tasks are pids of the host: without
# a bound a worker could take all of them (pid_max is 32768 on many machines) while idle.
DEFAULT_MAX_TASKS = max(256, 4 * (os.cpu_count() or 1) + 128)
# After this many refusals in a worker's life the host stops answering (it closes the listener: every
# later clone fails with ENOSYS at no cost to the kernel), so a worker that retries for ever cannot keep
# the kernel's supervising thread busy.
TASK_REFUSALS = 10_000
# seccomp user notification (linux/seccomp.h): ioctls on the listener and their structures.
_NOTIF_RECV, _NOTIF_SEND = 0xC0502100, 0xC0182101
_NOTIF_SIZE = 80             # struct seccomp_notif: id, pid, flags, seccomp_data
_NOTIF_RESP = struct.Struct("=QqiI")  # struct seccomp_notif_resp: id, val, error, flags
_NOTIF_CONTINUE = 1
# Evidence in a dead worker's last stderr lines that it ran out of memory (C++, Python, libc, BLAS).
_MEMORY_WORDS = re.compile(r"MemoryError|bad_alloc|out of memory|cannot allocate memory|memory allocation "
                           r"failed|failed to allocate", re.IGNORECASE)

_SIGNAL_TEXT = {getattr(signal, name): text for name, text in (
    ("SIGSEGV", "crashed with a segmentation fault"),
    ("SIGBUS", "crashed with a bus error"),
    ("SIGILL", "crashed (illegal instruction)"),
    ("SIGFPE", "crashed (arithmetic fault)"),
    ("SIGABRT", "aborted (SIGABRT; often C code that could not allocate memory)"),
    ("SIGXCPU", "exceeded its CPU time limit"),
    ("SIGSYS", "made a forbidden system call"),
) if hasattr(signal, name)}  # (Windows lacks most of these; the worker levels refuse to start there)


_LIVE: "weakref.WeakSet[WorkerProcess]" = weakref.WeakSet()


@atexit.register
def _kill_live_workers():
    """No worker outlives the kernel."""
    for w in list(_LIVE):
        try:
            if w.proc.returncode is None:
                w.proc.kill()
        except Exception:  # noqa: BLE001
            pass


class _Spawner:
    """Starts every worker from one thread that lives as long as the kernel's process. A worker's
    parent-death signal (SIGKILL, which its filter forbids it to change) fires when the *thread* that
    started it ends: from a short-lived thread (a timer, an executor) a worker would die early, and
    without the signal it could outlive the kernel."""

    _lock = threading.Lock()
    _jobs: "queue.SimpleQueue | None" = None
    _pid: int | None = None

    @classmethod
    def popen(cls, *args, **kwargs) -> subprocess.Popen:
        with cls._lock:
            if cls._pid != os.getpid():  # first use, or a forked copy of the kernel without the thread
                cls._jobs, cls._pid = queue.SimpleQueue(), os.getpid()
                threading.Thread(target=cls._serve, args=(cls._jobs,), name="sandbox-worker-spawner",
                                 daemon=True).start()
            jobs = cls._jobs
        done, result = threading.Event(), {}
        jobs.put((args, kwargs, result, done))
        done.wait()
        if "error" in result:
            raise result["error"]
        return result["proc"]

    @staticmethod
    def _serve(jobs):
        while True:
            args, kwargs, result, done = jobs.get()
            try:
                result["proc"] = subprocess.Popen(*args, **kwargs)
            except BaseException as exc:  # noqa: B902 - handed to the caller
                result["error"] = exc
            done.set()


class WorkerLost(Exception):
    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class WorkerProcess:
    """One worker process and its channel."""

    def __init__(self, init: dict, *, workdir: str, python: str | None = None,
                 max_event_bytes: int = MAX_EVENT_BYTES, max_tasks: int = DEFAULT_MAX_TASKS):
        self.init = init
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        # Level kernel: a second socket, on which the worker hands over its task listener at start-up.
        tasks_parent = tasks_child = None
        if init.get("level") == "kernel":
            tasks_parent, tasks_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.max_tasks = int(max_tasks)
        self.tasks_refused = 0      # new tasks the host refused (the cell is told)
        self.tasks_supervised = False
        self.death_claim = False    # its end was explained from its own exit status or words (_death)
        self.cpu_seen = 0.0         # its CPU time at the host's last sample (cpu_seconds)
        self.scratch = None
        if not init.get("workdir_files", True):
            # Files off, or a directory that holds places the host trusts: a private, empty directory is
            # the worker's cwd, HOME, TMPDIR and only writable path instead; removed with it.
            self.scratch = workdir = make_scratch()
            weakref.finalize(self, shutil.rmtree, self.scratch, ignore_errors=True)
            init["scratch"] = self.scratch
        env = {k: v for k, v in os.environ.items() if k in ENV_PASS or k.startswith("LC_")}
        env.update({"HOME": workdir, "TMPDIR": workdir, "PYTHONDONTWRITEBYTECODE": "1",
                    "MPLCONFIGDIR": workdir})
        cmd = [python or sys.executable, "-I", "-m", "sandbox_kernel.isolation.worker",
               "--fd", str(child.fileno()), "--die-with-parent", "--parent", str(os.getpid())]
        pass_fds = (child.fileno(),)
        if tasks_child is not None:
            cmd += ["--tasks-fd", str(tasks_child.fileno())]
            pass_fds += (tasks_child.fileno(),)
        self.spawned = time.monotonic()
        try:
            self.proc = _Spawner.popen(cmd, pass_fds=pass_fds, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=workdir,
                                       env=env, start_new_session=True, close_fds=True)
        except BaseException:
            if tasks_parent is not None:
                tasks_parent.close()
            raise
        finally:
            child.close()
            if tasks_child is not None:
                tasks_child.close()
        self.pid = self.proc.pid
        _LIVE.add(self)
        self.channel = Channel(parent, max_recv=max_event_bytes, max_send=MAX_REQUEST_BYTES, host=True)
        self.ready: dict | None = None
        self.fatal: str | None = None
        self.killed_by_host: str | None = None
        self.stderr_tail: collections.deque = collections.deque(maxlen=50)
        self.stderr_bytes = 0  # read from the worker's stderr so far (at most STDERR_BYTES)
        self.idle_since: float | None = None  # when its last request ended (None: one is running)
        self.idle_cpu: float | None = None    # its CPU time IDLE_SETTLE s after that
        self.cells = 0
        self.last_policy_sent = None
        self._drainer = threading.Thread(target=self._drain, name=f"sandbox-worker-{self.pid}-stderr", daemon=True)
        self._drainer.start()
        if tasks_parent is not None:
            threading.Thread(target=self._supervise_tasks, args=(tasks_parent,),
                             name=f"sandbox-worker-{self.pid}-tasks", daemon=True).start()
        try:
            self.channel.send(init, timeout=10)
        except ChannelError as exc:
            self.fatal = f"could not start the worker: {exc}"

    def _drain(self):
        """Keep the last few KB of the worker's stderr for diagnostics, reading in bounded chunks, and
        at most STDERR_BYTES in STDERR_READS reads in the worker's life: then the pipe is closed."""
        fd = self.proc.stderr.fileno()
        tail = b""
        reads = 0
        try:
            while self.stderr_bytes < STDERR_BYTES and reads < STDERR_READS:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                reads += 1
                self.stderr_bytes += len(chunk)
                tail = (tail + chunk)[-8192:]
                self.stderr_tail.clear()
                self.stderr_tail.extend(tail.decode("utf-8", "replace").splitlines()[-50:])
            else:
                self.stderr_tail.append(f"[sandbox] stopped reading this worker's stderr after "
                                        f"{self.stderr_bytes / 2 ** 20:.1f} MB in {reads} reads")
        except (OSError, ValueError):
            pass
        finally:
            try:
                self.proc.stderr.close()
            except OSError:
                pass

    def tasks(self) -> int | None:
        """The worker's tasks (threads) now, from /proc/<pid>/status (readable while non-dumpable)."""
        try:
            with open(f"/proc/{self.pid}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Threads:"):
                        return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return None

    def _supervise_tasks(self, sock: socket.socket) -> None:
        """Receive the worker's task listener, then answer each of its new tasks: proceed while it holds
        fewer than max_tasks, else EAGAIN. Never blocks on the worker: every wait is a poll with a
        timeout, and ends with the worker. (Concurrent clones each see the count before the others
        complete, so the worker may pass the bound by the number of its threads cloning at that moment:
        it holds fewer than twice max_tasks, whatever it does.)"""
        listener = None
        try:
            sock.setblocking(False)
            waiting = select.poll()
            waiting.register(sock.fileno(), select.POLLIN)
            while listener is None:
                if self.proc.poll() is not None:
                    return
                if not waiting.poll(500):
                    continue
                try:
                    _, fds, _, _ = socket.recv_fds(sock, 16, 4)
                except BlockingIOError:
                    continue
                if not fds:
                    return  # the worker closed it without a listener (degraded mode)
                listener, extra = fds[0], fds[1:]
                os.set_inheritable(listener, False)  # recvmsg does not set close-on-exec
                for fd in extra:
                    os.close(fd)
                try:
                    if os.readlink(f"/proc/self/fd/{listener}") != "anon_inode:seccomp notify":
                        return
                except OSError:
                    return
        except OSError:
            return
        finally:
            sock.close()
        try:
            self.tasks_supervised = True
            events = select.poll()
            events.register(listener, select.POLLIN)
            notif = bytearray(_NOTIF_SIZE)
            while self.tasks_refused < TASK_REFUSALS:
                ready = events.poll(1000)
                if not ready:
                    if self.proc.poll() is not None:
                        return
                    continue
                if ready[0][1] & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                    return  # no task of the worker is left
                notif[:] = bytes(_NOTIF_SIZE)
                try:
                    fcntl_ioctl(listener, _NOTIF_RECV, notif)
                except OSError as exc:
                    if exc.errno in (errno.ENOENT, errno.EINTR):
                        continue  # the calling task went away meanwhile
                    return
                (nid,) = struct.unpack_from("=Q", notif)
                tasks = self.tasks()
                if tasks is not None and tasks < self.max_tasks:
                    answer = _NOTIF_RESP.pack(nid, 0, 0, _NOTIF_CONTINUE)
                else:
                    self.tasks_refused += 1
                    answer = _NOTIF_RESP.pack(nid, 0, -errno.EAGAIN, 0)
                try:
                    fcntl_ioctl(listener, _NOTIF_SEND, answer)
                except OSError:
                    continue  # the task went away (ENOENT)
        finally:
            os.close(listener)  # from now on every new task of the worker fails (ENOSYS)

    def last_words(self, settle: float = 0.5) -> list[str]:
        """The last lines the worker wrote to stderr; once it has exited, after the drain read them all."""
        if self.proc.returncode is not None:
            self._drainer.join(settle)
        return list(self.stderr_tail)

    def wait_ready(self, timeout: float, *, give_up: bool = True) -> bool:
        """True once the worker reported ready; False (with self.fatal set) if it cannot be used.
        With ``give_up=False`` a timeout only means "not yet"."""
        if self.ready is not None:
            return True
        if self.fatal is not None:
            return False
        try:
            msg = validate_event(self.channel.recv(deadline=time.monotonic() + timeout),
                                 allowed={"ready", "fatal"})
        except ChannelTimeout:
            if not give_up:
                return False
            self.fatal = f"the sandbox worker did not start within {timeout:g} s"
            self.kill("startup timeout")
            return False
        except ChannelError as exc:
            self.wait_exit(2.0)
            time.sleep(0.05)  # let the stderr drain catch the last line
            last = next((ln for ln in reversed(self.stderr_tail) if ln.strip()), "")
            detail = self.describe_exit() or str(exc)
            self.fatal = f"the sandbox worker failed to start ({detail}{': ' + last[:300] if last else ''})"
            self.kill("startup failure")
            return False
        if msg["type"] == "fatal":
            self.fatal = msg["message"]
            self.kill("startup refused")
            return False
        self.ready = msg
        self.ready_at = self.idle_since = time.monotonic()
        return True

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum) -> None:
        if self.proc.returncode is None:
            try:
                self.proc.send_signal(signum)
            except (ProcessLookupError, OSError):
                pass

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self, why: str) -> None:
        if self.killed_by_host is None and self.proc.returncode is None:
            self.killed_by_host = why
        self.signal(signal.SIGKILL)
        self.wait_exit(5.0)
        self.channel.close()
        self._remove_scratch()

    def _remove_scratch(self) -> None:
        """The private directory goes with the worker that wrote it, once it has exited (also at collection)."""
        if self.scratch is not None and self.proc.returncode is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def describe_exit(self) -> str | None:
        rc = self.proc.returncode
        if rc is None:
            return None
        if rc < 0:
            sig = -rc
            if sig in _SIGNAL_TEXT:
                return _SIGNAL_TEXT[sig]
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            if sig == getattr(signal, "SIGKILL", -1):
                if self.killed_by_host:
                    return f"was stopped by the kernel ({self.killed_by_host})"
                return "was killed by the operating system (SIGKILL)"
            return f"was ended by {name}"
        return f"exited with status {rc}"

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of every thread of the worker (/proc/<pid>/stat, which stays readable
        while the worker is non-dumpable)."""
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
            self.cpu_seen = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            return self.cpu_seen
        except (OSError, ValueError, IndexError):
            return None

    def rss_mb(self) -> float | None:
        """Memory the worker holds as the host can see it: resident pages (shared ones included) and
        swapped-out ones (/proc/<pid>/status VmRSS + VmSwap). Memory no process owns is not counted:
        memfd pages written and never mapped (memfd_create is refused at level kernel), pipe and socket
        buffers, files in a tmpfs working directory.

        Once the main thread has exited (SYS_exit) while other threads live, the leader is a zombie
        without an address space and its status has no Vm* lines (review 3, B3-5): the figure is then
        read from a live thread's status (/proc/<pid>/task/<tid>/status: the threads share one address
        space, so any live one gives the process's figure; readable while non-dumpable)."""
        kb = self._memory_kb(f"/proc/{self.pid}/status")
        if kb is not None:
            return kb / 1024
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return None
        for tid in tids:
            if tid != str(self.pid):
                kb = self._memory_kb(f"/proc/{self.pid}/task/{tid}/status")
                if kb is not None:
                    return kb / 1024
        return 0.0 if tids else None

    @staticmethod
    def _memory_kb(path: str) -> int | None:
        """VmRSS + VmSwap in one status file; None when it has no VmRSS (a zombie, an exited task)."""
        try:
            kb, seen = 0, False
            with open(path, "rb") as fh:
                for line in fh:
                    if line.startswith((b"VmRSS:", b"VmSwap:")):
                        kb += int(line.split()[1])
                        seen = True
            return kb if seen else None
        except (OSError, ValueError, IndexError):
            return None


class WorkerBackend:
    """The `process` and `kernel` isolation levels. Same methods as InProcessBackend."""

    def __init__(self, level: str, policy: Policy, workdir: str | None = None, *, degraded: bool = False,
                 grace: float = 2.0, cancel_grace: float = 1.0, spare: bool = True, spare_delay: float = 0.0,
                 startup_timeout: float = 60.0, warm=DEFAULT_WARM, python: str | None = None,
                 fsize_mb: int | None = None, nofile: int | None = None, extra_read=(),
                 max_event_bytes: int = MAX_EVENT_BYTES, max_cell_bytes: int = 256 * 2 ** 20,
                 max_display_bytes: int = DEFAULT_DISPLAY_BYTES,
                 engine: str | None = None, extra_sys_path=(), landlock_abi: int | None = None,
                 workdir_files: bool | None = None, protect=(), cpu_hours: float | None = None,
                 idle_cpu: float | None = IDLE_CPU_SECONDS, max_syscall: int | None = None,
                 max_tasks: int | None = None, start: bool = True):
        if level not in ("process", "kernel"):
            raise ValueError(f"WorkerBackend runs levels 'process' and 'kernel', not {level!r}")
        # Options may arrive as strings (traitlets Dict on a command line).
        grace, cancel_grace, startup_timeout = float(grace), float(cancel_grace), float(startup_timeout)
        degraded, spare = _flag(degraded), _flag(spare)
        fsize_mb = int(fsize_mb) if fsize_mb is not None else None
        nofile = int(nofile) if nofile is not None else None
        max_event_bytes, max_cell_bytes = int(max_event_bytes), int(max_cell_bytes)
        if isinstance(warm, str):
            warm = [m.strip() for m in warm.split(",") if m.strip()]
        if isinstance(extra_read, str):
            extra_read = [extra_read]
        if isinstance(protect, str):
            protect = [protect]
        landlock_abi = int(landlock_abi) if landlock_abi not in (None, "") else None
        max_syscall = int(max_syscall) if max_syscall not in (None, "") else None
        cpu_hours = float(cpu_hours) if cpu_hours not in (None, "") else None
        idle_cpu = float(idle_cpu) if idle_cpu not in (None, "") else None
        workdir_files = _flag(workdir_files) if workdir_files not in (None, "") else None
        self.level = level
        self.policy = policy
        self.workdir = os.path.realpath(workdir or os.getcwd())
        os.makedirs(self.workdir, exist_ok=True)
        self.degraded = degraded
        self.grace = grace
        self.cancel_grace = cancel_grace
        self.use_spare = spare
        self.startup_timeout = startup_timeout
        self.python = python
        self.max_event_bytes = max_event_bytes
        self.max_cell_bytes = max_cell_bytes
        self.max_display_bytes = int(max_display_bytes)
        self._options = {"warm": list(warm), "fsize_mb": fsize_mb, "nofile": nofile,
                         "extra_read": [str(p) for p in extra_read], "engine": engine,
                         "extra_sys_path": [str(p) for p in extra_sys_path], "landlock_abi": landlock_abi,
                         "cpu_hours": cpu_hours, "max_syscall": max_syscall}
        self.idle_cpu = idle_cpu
        self.max_tasks = int(max_tasks) if max_tasks not in (None, "") else DEFAULT_MAX_TASKS
        self.idle_checks = 0  # times the idle worker's CPU was measured
        # Places no worker may be given rights on (workdir.py), as this process's environment names
        # them, and whether the working directory reaches one. The worker checks again on its own.
        self._protected = [list(p) for p in protected_places(
            {f"a path the operator protects ({i})": str(p) for i, p in enumerate(protect)})]
        self.workdir_refusal = grant_refusal(self.workdir, write=True, places=self._protected)
        self._workdir_files = workdir_files
        self._lock = threading.RLock()
        self._active: WorkerProcess | None = None
        self._spare: WorkerProcess | None = None
        self._spare_lock = threading.Lock()
        self._spare_timer: threading.Timer | None = None
        self._created = time.monotonic()
        self.spare_delay = float(spare_delay)
        self._running: WorkerProcess | None = None
        self._cancel_at: float | None = None
        self._closed = False
        self._next_id = 0
        self._policy_cache: tuple | None = None
        self.restarts = 0
        self.last_loss: dict | None = None
        self.last_loss_stderr: list[str] = []
        self._losses: list[dict] = []  # workers lost outside a cell, told with the next cell
        self.last_recovery_ms: float | None = None
        self.startup_error: str | None = None
        self._unsupported = None
        if os.name != "posix":
            self._unsupported = (f"the '{level}' isolation level needs a POSIX system (Linux for 'kernel'); "
                                 "on this platform choose isolation 'none', or run the kernel in a Linux "
                                 "container or VM")
        elif level == "kernel" and not sys.platform.startswith("linux"):
            self._unsupported = (f"the 'kernel' isolation level needs Linux (Landlock, seccomp); this is "
                                 f"{sys.platform}. Choose isolation 'process', or run the kernel in a Linux "
                                 "container or VM")
        self._watch_stop = threading.Event()
        if start and self._unsupported is None:
            self._active = self._spawn()
            # At once by default (even a crash in the first cell recovers instantly), from a thread: the
            # spawn forks this process (tens of ms), and the kernel answers nothing until this returns.
            threading.Thread(target=self._ensure_spare, name="sandbox-spare-start", daemon=True).start()
        if self._unsupported is None and self.idle_cpu is not None:
            threading.Thread(target=_watch_idle, args=(weakref.ref(self), self._watch_stop),
                             name="sandbox-idle-watch", daemon=True).start()

    # -- workers -------------------------------------------------------------------------------

    def _init_message(self) -> dict:
        files = self._worker_files(self.policy)
        return {"op": "init", "level": self.level, "workdir": self.workdir, "policy": self.policy.to_dict(),
                "degraded_ok": self.degraded, "memory_mb": self.policy.limits.memory_mb,
                "workdir_files": bool(files), "protected": self._protected,
                **{k: v for k, v in self._options.items() if v not in (None, [])}}

    def _spawn(self) -> WorkerProcess:
        return WorkerProcess(self._init_message(), workdir=self.workdir, python=self.python,
                             max_event_bytes=self.max_event_bytes, max_tasks=self.max_tasks)

    def _ensure_worker(self) -> WorkerProcess | None:
        """A ready worker, or None with self.startup_error saying why (fail closed). A ready worker that
        died or spoke while idle is replaced, and the loss is kept for the next cell to report."""
        if self._unsupported is not None:
            self.startup_error = self._unsupported
            return None
        if self._closed:
            self.startup_error = "the sandbox backend was shut down"
            return None
        w = self._active
        if w is not None and w.ready is not None:
            trouble = self._idle_trouble(w)
            if trouble is None:
                self._ensure_spare()
                return w
            if trouble[0] is not None:
                self._record_loss(w, *trouble, when="between cells")
        if w is not None and w.ready is None and w.fatal is None and w.alive():
            pass  # still starting: wait below
        else:
            if w is not None:
                w.kill("replaced")
            w = self._take_spare() or self._spawn()
            self._active = w
        if not w.wait_ready(self.startup_timeout):
            self.startup_error = w.fatal
            self._active = None
            return None
        self.startup_error = None
        self._ensure_spare()
        return w

    def _idle_trouble(self, w: WorkerProcess) -> tuple | None:
        """None when ``w`` can take a request. Otherwise (reason, message) of its loss, or (None, None)
        when the host stopped it itself (already reported). A well-behaved worker is silent between
        requests: anything it sent since its last reply would be taken for the next request's output."""
        pending = w.channel.pending()
        if pending is None and w.alive():
            return None
        if w.killed_by_host is not None:
            return None, None
        if pending == "data" and w.alive():
            w.kill("protocol")
            return "protocol", ("the sandbox worker sent data while no request was running (after its "
                                "last answer), so it was stopped")
        w.wait_exit(1.0)
        if w.alive():
            w.kill("closed its channel")
            return "protocol", "the sandbox worker closed its channel while idle and was stopped"
        reason, message = self._death(w, 0.0, idle=True)
        return reason, f"{message} while idle"

    def _record_loss(self, w: WorkerProcess, reason: str, message: str, *, when: str, cell: bool = False) -> dict:
        """Count and remember a lost worker. Outside a cell, the loss is kept for the next cell to
        report (a stderr notice and done["worker"]), whichever request lost it."""
        message = f"{message}; variables were lost"
        self.restarts += 1
        self.last_loss = {"reason": reason, "message": message, "pid": w.pid, "time": time.time(), "when": when}
        # For the operator's log only (it names host paths): not part of status().
        self.last_loss_stderr = [line[:300] for line in list(w.stderr_tail)[-20:]]
        record = {"lost": True, "reason": reason, "state_lost": True, "message": message, "when": when,
                  "worker_claim": bool(w.death_claim)}
        self.last_loss["worker_claim"] = record["worker_claim"]
        if not cell:
            self._losses.append(record)
        return record

    def _take_spare(self) -> WorkerProcess | None:
        with self._spare_lock:
            s, self._spare = self._spare, None
        if s is not None and s.fatal is None and s.alive():
            return s
        if s is not None:
            s.kill("stale spare")
        return None

    def _ensure_spare(self, *, now: bool = False) -> None:
        """Keep a pre-warmed spare. With ``spare_delay`` > 0 the first one waits that long after the
        backend started (a timer, so it also happens while the notebook is idle): for operators who run
        many kernels that live for a few cells, which then never pay for a second interpreter."""
        if not self.use_spare or self._closed:
            return
        delay = self.spare_delay - (time.monotonic() - self._created)
        if delay > 0 and not now:
            if self._spare_timer is None:
                self._spare_timer = threading.Timer(delay, self._ensure_spare, kwargs={"now": True})
                self._spare_timer.daemon = True
                self._spare_timer.start()
            return
        with self._spare_lock:
            if not self._closed and (self._spare is None or not self._spare.alive()):
                if self._spare is not None:
                    self._spare.kill("stale spare")
                self._spare = self._spawn()

    def _replace_after_loss(self) -> None:
        """Make the next worker ready now (the spare, normally) and time it."""
        t0 = time.monotonic()
        self._active = None
        w = self._ensure_worker()
        if w is not None:
            self.last_recovery_ms = round((time.monotonic() - t0) * 1000, 1)

    def _discard_workers(self) -> None:
        with self._spare_lock:
            spare, self._spare = self._spare, None
        for w in (self._active, spare):
            if w is not None:
                w.kill("discarded")
        self._active = None

    def check_idle(self) -> None:
        """Stop the active worker if it burns CPU while no request runs (a thread a cell left spinning:
        the wall-clock kill only covers a running cell). Reported with the next cell. Skipped while a
        request holds the backend."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            w = self._active
            if w is None or w.ready is None or w.idle_since is None or w.killed_by_host or not w.alive():
                return
            if time.monotonic() - w.idle_since < IDLE_SETTLE:
                return
            used = w.cpu_seconds()
            if used is None:
                return
            self.idle_checks += 1
            if w.idle_cpu is None:
                w.idle_cpu = used
                return
            burnt = used - w.idle_cpu
            if burnt > self.idle_cpu:
                w.kill("busy while idle")
                self._record_loss(w, "cpu", f"the sandbox worker kept using the CPU while no cell was running "
                                  f"({burnt:.1f} s of CPU time; a thread left running by a cell?), so it was "
                                  "stopped", when="between cells")
        finally:
            self._lock.release()

    # -- the cell ------------------------------------------------------------------------------

    def run_cell(self, source, *, emit, policy=None, limits=None, execution_count=None, display_bytes=None):
        """Run one cell in the worker, relaying its events to ``emit`` as they arrive. ``display_bytes``
        is the kernel's cap on the cell's rich display data (default: the backend's max_display_bytes,
        within the cell's output_bytes, as the kernel's output filter counts); with the cell's
        ``output_bytes`` it bounds what the worker sends and the host decodes and keeps."""
        with self._lock:
            started = time.monotonic()
            eff_policy = policy or self.policy
            eff_limits = limits or eff_policy.limits
            w = self._ensure_worker()
            losses, self._losses = self._losses, []
            for loss in losses:
                emit({"type": "stream", "name": "stderr",
                      "text": f"[sandbox] {loss['message']}. This cell runs in a fresh worker.\n"})
            if w is None:
                done = self._refused(emit, eff_policy, execution_count, started)
                if losses:
                    done["worker"]["earlier"] = losses
                return done
            rid = self._new_id()
            # The kernel publishes at most output_bytes of text and min(output_bytes, its display cap)
            # of displays per cell (outputfilter.OutputFilter.cell): no need to hold or decode more.
            text_cap = int(eff_limits.output_bytes) if eff_limits.output_bytes else DEFAULT_DISPLAY_BYTES
            display_cap = int(display_bytes) if display_bytes else min(self.max_display_bytes, text_cap)
            relayed = _Relayed(rid, text_cap, display_cap)
            req = {"op": "run_cell", "id": rid, "source": source, "limits": _limits_dict(limits),
                   "execution_count": execution_count, "max_done_bytes": relayed.done_limit,
                   "display_bytes": relayed.display_cap,
                   **self._policy_field(w, policy)}
            self._cancel_at = None
            self._running = w
            w.idle_since = w.idle_cpu = None
            try:
                # The hard deadline counts from the moment the worker has the cell.
                hard = time.monotonic() + eff_limits.timeout + self.grace if eff_limits.timeout else None
                self._send(w, req)
                done, emit_error = self._relay(w, emit, hard, eff_limits, relayed)
                w.cells += 1
            except WorkerLost as lost:
                return self._lost(w, lost, emit, eff_policy, execution_count, started, losses)
            except BaseException:
                # A bug on this side of the channel: the worker's stream is no longer in step with
                # the requests, so it cannot be reused (and the next cell says so).
                self._stop_after_host_error(w, "while it ran a cell")
                raise
            finally:
                self._running = None
                self._cancel_at = None
                w.idle_since = time.monotonic()
            # What the host knows better than the worker: the policy it sent and the cell's number.
            done["policy"] = eff_policy.name
            if execution_count is not None:
                done["execution_count"] = execution_count
            if losses:
                done["worker"] = {**losses[0], **({"count": len(losses)} if len(losses) > 1 else {})}
            if emit_error is not None:
                raise emit_error  # the caller's own callback failed; the worker is still in step
            return done

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _stop_after_host_error(self, w: WorkerProcess, when: str) -> None:
        w.kill("host error")
        self._record_loss(w, "host", "the sandbox worker was stopped after an error in the kernel", when=when)
        self._active = None

    def _policy_dict(self, policy: Policy | None):
        """policy.to_dict(), cached: it costs more than a whole round trip, and the kernel passes the
        same (or an equal) policy with every cell. Policies are frozen, so equal means same dict."""
        if policy is None:
            return None
        cached = self._policy_cache
        if cached is not None and (cached[0] is policy or cached[0] == policy):
            return cached[1]
        data = policy.to_dict()
        self._policy_cache = (policy, data)
        return data

    def _policy_field(self, w: WorkerProcess, policy: Policy | None) -> dict:
        """The policy for a request: in full the first time, then "same as last time" (5 KB of JSON
        each way per cell is most of a round trip)."""
        data = self._policy_dict(policy)
        if data is not None and data is w.last_policy_sent:
            return {"policy_ref": "last"}
        w.last_policy_sent = data
        return {"policy": data}

    def _send(self, w: WorkerProcess, req: dict) -> None:
        try:
            w.channel.send(req, timeout=10)
        except ChannelError as exc:
            w.kill("unresponsive")
            raise WorkerLost("crash", f"the sandbox worker {w.describe_exit() or 'stopped reading'} ({exc})")

    def _relay(self, w: WorkerProcess, emit, hard_deadline, limits: Limits, relayed: "_Relayed"):
        """Relay a cell's events until its ``done``; returns (done, exception raised by emit or None).
        Every decoded frame must carry the cell's request id; output past the cell's caps is discarded
        unread (``relayed.skip``), and a worker that keeps sending far past them is stopped."""
        start_bytes = w.channel.received
        refused_before = w.tasks_refused
        peak_rss = 0.0
        cpu_start = w.cpu_seconds() or 0.0
        cell_cpu = 0.0
        budget_cpu = (limits.timeout + 5) * max(1, os.cpu_count() or 1) if limits.timeout else None  # as worker.py
        emit_error = None

        def deliver(event):
            nonlocal emit_error
            if emit_error is None:
                try:
                    emit(event)
                except KeyboardInterrupt:
                    self.cancel()  # the kernel's own interrupt landed in its callback
                except Exception as exc:  # noqa: BLE001 - keep relaying so the worker stays in step
                    emit_error = exc

        while True:
            now = time.monotonic()
            if self._cancel_at is not None and now >= self._cancel_at + self.cancel_grace:
                w.kill("interrupt")
                raise WorkerLost("interrupt", "the cell was interrupted but did not stop within "
                                 f"{self.cancel_grace:g} s, so the sandbox worker was killed")
            if hard_deadline is not None and now >= hard_deadline:
                w.kill("timeout")
                raise WorkerLost("timeout", f"the cell did not stop at its time limit ({limits.timeout:g} s) "
                                 f"nor within {self.grace:g} s more, so the sandbox worker was killed")
            wait = now + POLL
            if hard_deadline is not None:
                wait = min(wait, hard_deadline)
            if self._cancel_at is not None:
                wait = min(wait, self._cancel_at + self.cancel_grace)
            try:
                raw = w.channel.recv(deadline=wait, skip=relayed.skip, skip_small=relayed.saturated)
            except ChannelTimeout:
                rss = w.rss_mb()
                if rss:
                    peak_rss = max(peak_rss, rss)
                cpu = w.cpu_seconds()
                if cpu is not None:
                    cell_cpu = max(cell_cpu, cpu - cpu_start)
                if self._cancel_at is not None:
                    w.signal(signal.SIGINT)  # again: the first may have landed before the cell started
                continue
            except KeyboardInterrupt:
                self.cancel()
                continue
            except ChannelClosed:
                w.wait_exit(1.0)
                if w.alive():
                    w.kill("closed its channel")
                raise WorkerLost(*self._death(w, peak_rss, cell_cpu=cell_cpu, budget_cpu=budget_cpu)) from None
            except FrameTooCostly as exc:
                if not relayed.drop_costly():  # only the cell's own output may be dropped and the cell go on
                    w.kill("protocol")
                    raise WorkerLost("protocol", f"the sandbox worker sent a malformed message ({exc}) and "
                                     "was stopped") from None
                raw = None
            except ChannelError as exc:
                w.kill("protocol")
                raise WorkerLost("protocol", f"the sandbox worker sent a malformed message ({exc}) and was "
                                 "stopped") from None
            if w.channel.received - start_bytes > self.max_cell_bytes:
                w.kill("flood")
                raise WorkerLost("flood", f"the cell kept sending output far past its limits (more than "
                                 f"{self.max_cell_bytes // 2 ** 20} MB of output through the channel), so its "
                                 "worker was stopped")
            if raw is None:
                continue  # discarded unread: past what the cell's caps let the kernel publish
            try:
                event = validate_event(raw, allowed=CELL_EVENTS, rid=relayed.rid)
            except ChannelError as exc:
                w.kill("protocol")
                raise WorkerLost("protocol", f"the sandbox worker sent a malformed message ({exc}) and was "
                                 "stopped") from None
            del raw
            if event["type"] == "done":
                done, note = relayed.finish(event)
                if note is not None:
                    deliver(note)
                refused = w.tasks_refused - refused_before
                if refused:  # the host's own count: a fact, not the worker's claim
                    more = ("; after that many refusals this worker starts no more threads (restart the "
                            "kernel for a fresh one)" if w.tasks_refused >= TASK_REFUSALS else "")
                    deliver({"type": "stream", "name": "stderr",
                             "text": f"[sandbox] {refused} new threads of this cell were refused: a sandbox "
                                     f"worker may hold at most {w.max_tasks} threads at once{more}\n"})
                return done, emit_error
            if relayed.keep(event, w.channel.last_length):
                deliver(event)

    def _death(self, w: WorkerProcess, peak_rss: float, *, idle: bool = False, cell_cpu: float = 0.0,
               budget_cpu: float | None = None) -> tuple[str, str]:
        """(reason, sentence) for a worker that ended by itself, and ``w.death_claim``: whether the
        sentence rests on the worker's own word. A memory or CPU limit is the host's finding only when
        it saw the worker use that much (``peak_rss``, ``cell_cpu`` of ``budget_cpu``: its own samples);
        an exit status, a signal the worker may send itself (SIGXCPU, SIGKILL) or a last stderr line are
        the worker's to choose, so such a death is told as the worker's account."""
        reason, message = self._death_reason(w, peak_rss, idle=idle)
        memory = self.policy.limits.memory_mb
        if reason == "memory":
            w.death_claim = not (memory and peak_rss >= 0.9 * memory)
        elif reason == "cpu":  # the cell's soft budget, or the lifetime one (the hard RLIMIT_CPU)
            hours = self._options.get("cpu_hours") or rlimits.default_cpu_hours()
            w.death_claim = not ((budget_cpu and cell_cpu >= 0.9 * budget_cpu) or w.cpu_seen >= 0.9 * hours * 3600)
        else:
            w.death_claim = False  # a crash, an exit: nothing is concluded from it
        if w.death_claim:
            message += (" (by the worker's own account, from how it ended; the kernel did not see it use "
                        "that much)")
        return reason, message

    def _death_reason(self, w: WorkerProcess, peak_rss: float, *, idle: bool = False) -> tuple[str, str]:
        """Every way a memory death shows up says "out of memory": the OOM killer's SIGKILL, the exit
        status of the worker's own MemoryError, Python's status 1 after an uncaught MemoryError, C code's
        abort() after a failed allocation."""
        how = w.describe_exit() or "stopped"
        rc = w.proc.returncode
        memory = self.policy.limits.memory_mb
        limit = f"limit {memory} MB" if memory else "no memory limit was set"
        if rc == -getattr(signal, "SIGKILL", -1) and w.killed_by_host is None:
            if idle:  # an idle worker allocates nothing: do not guess
                return "killed", "the sandbox worker was killed (SIGKILL)"
            seen = f", last seen using {peak_rss:.0f} MB" if peak_rss else ""
            return "memory", (f"the sandbox worker was killed (SIGKILL from the operating system): most "
                              f"likely out of memory ({limit}{seen})")
        if rc == -getattr(signal, "SIGXCPU", -1):
            return "cpu", "the sandbox worker was killed: it used up its CPU time limit"
        if rc == EXIT_OUT_OF_MEMORY:
            return "memory", f"the sandbox worker ran out of memory ({limit}) in its own code and exited"
        if rc == 1 or rc == -getattr(signal, "SIGABRT", -1):
            words = [line for line in w.last_words() if line.strip()]
            if rc == 1 and words and words[-1].startswith("MemoryError"):
                return "memory", f"the sandbox worker ran out of memory ({limit}): an uncaught MemoryError ended it"
            if rc != 1:
                if any(_MEMORY_WORDS.search(line) for line in words):
                    return "memory", (f"the sandbox worker ran out of memory ({limit}): C code aborted when "
                                      "an allocation failed")
                return "crash", ("the sandbox worker aborted (SIGABRT): C code gave up, most often because it "
                                 f"could not allocate memory (possibly out of memory; {limit})")
        reason = "exit" if rc is not None and rc >= 0 else "crash"
        return reason, f"the sandbox worker {how}"

    def _lost(self, w, lost: WorkerLost, emit, policy, execution_count, started, earlier=()) -> dict:
        record = self._record_loss(w, lost.reason, lost.message, when="during this cell", cell=True)
        message = f"{record['message']}. A fresh sandbox worker runs the next cell."
        w.kill(lost.reason)
        self._replace_after_loss()
        err = {"ename": "SandboxWorkerLost", "evalue": message, "traceback": [f"SandboxWorkerLost: {message}"],
               "line": None}
        emit({"type": "error", "ename": err["ename"], "evalue": message, "traceback": err["traceback"],
              "denial": None})
        worker = {**record, "message": message, "recovery_ms": self.last_recovery_ms}
        if earlier:
            worker["earlier"] = list(earlier)
        return self._done_error(policy, err, execution_count, started, worker=worker)

    def _refused(self, emit, policy, execution_count, started) -> dict:
        why = self.startup_error or "the sandbox worker could not start"
        message = (f"cells do not run: the '{self.level}' isolation level could not be set up ({why}). "
                   "Nothing was executed. Once the host is fixed, restart the kernel. Until then an operator "
                   "(not a cell: %sandbox_isolation cannot go below the operator's level) can install the "
                   "kernelspec with another level, 'python -m sandbox_kernel install --isolation process' "
                   "(a worker without the OS layers), or let this level run without the missing layer "
                   "(--SandboxKernel.isolation_degraded=True); docs/isolation.md says what each holds.")
        err = {"ename": "SandboxUnavailable", "evalue": message, "traceback": [f"SandboxUnavailable: {message}"],
               "line": None}
        emit({"type": "error", "ename": err["ename"], "evalue": message, "traceback": err["traceback"],
              "denial": None})
        return self._done_error(policy, err, execution_count, started,
                                worker={"lost": False, "reason": "unavailable", "state_lost": False})

    @staticmethod
    def _done_error(policy, err, execution_count, started, *, worker) -> dict:
        return {"type": "done", "status": "error", "ticks": 0,
                "elapsed_ms": round((time.monotonic() - started) * 1000, 3), "policy": policy.name,
                "denials": [], "truncated": False, "output": "", "charts": [], "error": err,
                "execution_count": execution_count, "worker": worker}

    # -- other requests ------------------------------------------------------------------------

    def _request(self, op: str, payload: dict, timeout: float, *, max_bytes: int, when: str):
        """One request/reply outside a cell. Returns (value, error). The reply must carry the request's
        id and fit ``max_bytes`` (the worker trims to fit); a worker lost here is reported with the next
        cell, like any other loss."""
        with self._lock:
            w = self._ensure_worker()
            if w is None:
                return None, self.startup_error or "the sandbox worker is not available"
            rid = self._new_id()
            max_bytes = min(max_bytes, self.max_event_bytes)
            w.idle_since = w.idle_cpu = None
            try:
                self._send(w, {"op": op, "id": rid, "max_bytes": max_bytes, **payload})
                try:
                    raw = w.channel.recv(deadline=time.monotonic() + timeout, max_bytes=max_bytes)
                except ChannelTimeout:
                    w.kill("timeout")
                    raise WorkerLost("timeout", f"the sandbox worker did not answer within {timeout:g} s and "
                                     "was stopped") from None
                except ChannelClosed:
                    w.wait_exit(1.0)
                    raise WorkerLost(*self._death(w, 0.0)) from None
                except ChannelError as exc:
                    w.kill("protocol")
                    raise WorkerLost("protocol", f"the sandbox worker sent a malformed message ({exc}) and "
                                     "was stopped") from None
                try:
                    msg = validate_event(raw, allowed={"reply"}, rid=rid)
                    if msg.get("error") is None and not _REPLY_CHECKS[op](msg["value"]):
                        raise ChannelError(f"a malformed answer to '{op}'")
                except ChannelError as exc:
                    w.kill("protocol")
                    raise WorkerLost("protocol", f"the sandbox worker sent a malformed message ({exc}) and "
                                     "was stopped") from None
                return msg["value"], msg.get("error")
            except WorkerLost as lost:
                self._record_loss(w, lost.reason, f"{lost.message} {when}", when=when)
                w.kill(lost.reason)
                self._replace_after_loss()
                return None, lost.message
            except BaseException:
                self._stop_after_host_error(w, when)  # its answer would arrive out of turn
                raise
            finally:
                w.idle_since = time.monotonic()

    def evaluate(self, expression, *, policy=None, display_bytes=None):
        eff = policy or self.policy
        timeout = (eff.limits.timeout or 60.0) + self.grace
        text = int(eff.limits.output_bytes or DEFAULT_DISPLAY_BYTES)
        display = int(display_bytes) if display_bytes else min(self.max_display_bytes, text)  # as run_cell
        value, error = self._request("evaluate", {"expression": expression, "policy": self._policy_dict(policy)},
                                     timeout, max_bytes=text + display + 65536,
                                     when="while evaluating user_expressions")
        if not isinstance(value, dict) or error:
            return {"status": "error", "ename": "SandboxWorkerLost" if error else "SandboxError",
                    "evalue": error or "no answer", "traceback": []}
        return value

    def complete(self, code, cursor_pos):
        value, error = self._request("complete", {"code": code, "cursor_pos": cursor_pos}, 10.0,
                                     max_bytes=SMALL_REPLY_BYTES, when="while answering a completion request")
        if not isinstance(value, dict) or error:
            pos = len(code) if cursor_pos is None else cursor_pos
            return {"matches": [], "cursor_start": pos, "cursor_end": pos, "metadata": {}, "status": "ok"}
        return value

    def inspect(self, code, cursor_pos, detail_level=0):
        value, error = self._request("inspect", {"code": code, "cursor_pos": cursor_pos,
                                                 "detail_level": detail_level}, 10.0,
                                     max_bytes=SMALL_REPLY_BYTES, when="while answering an inspection request")
        if not isinstance(value, dict) or error:
            return {"found": False, "data": {}, "metadata": {}, "status": "ok"}
        return value

    def cancel(self):
        """Thread-safe (and safe from a signal handler): interrupt the running cell. The engine in the
        worker turns SIGINT into a cancellation error; if the cell is still running ``cancel_grace``
        seconds later, the worker is killed and replaced."""
        w = self._running
        if w is None:
            return
        if self._cancel_at is None:
            self._cancel_at = time.monotonic()
        w.signal(signal.SIGINT)

    def reset(self):
        """A fresh namespace in a fresh process: sandboxed code may have changed anything in the old one.
        A worker that had already died or spoken out of turn is still reported with the next cell."""
        with self._lock:
            old = self._active
            self._active = None
            if old is not None:
                trouble = self._idle_trouble(old) if old.ready is not None else None
                if trouble is not None and trouble[0] is not None:
                    self._record_loss(old, *trouble, when="before a reset")
                old.kill("reset")
            self._ensure_worker()

    # -- configuration -------------------------------------------------------------------------

    def needs_restart_for(self, policy: Policy, level: str | None = None) -> str | None:
        """Why running ``policy`` (at ``level``) needs a new worker, or None. A restart loses variables;
        the kernel should say so before calling :meth:`restart`. Tightening never needs one: the engine
        enforces the tighter policy and the OS layers stay as strict as they were."""
        if level is not None and level != self.level:
            return f"isolation changes from '{self.level}' to '{level}'"
        if self.level == "kernel" and policy.network and not self.policy.network:
            return "the policy needs network access, which this worker's system-call filter forbids"
        mine, theirs = self.policy.limits.memory_mb, policy.limits.memory_mb
        if mine is not None and (theirs is None or theirs > mine):
            return f"the policy's memory limit ({theirs} MB) exceeds this worker's ({mine} MB)"
        if policy.files and not self._worker_files(self.policy) and self._worker_files(policy):
            return ("the policy uses files in the working directory, and this worker was started without "
                    "access to it")
        return None

    def _worker_files(self, policy: Policy) -> bool:
        """Whether a worker started for `policy` gets rights on the working directory (else a scratch one)."""
        return bool(policy.files and self.workdir_refusal is None and self._workdir_files is not False)

    def restart(self, policy: Policy | None = None) -> None:
        """New workers (active and spare) built for ``policy``; the old ones and their state are gone."""
        with self._lock:
            if policy is not None:
                self.policy = policy
            self._discard_workers()
            self._active = self._spawn()
            self._ensure_worker()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Block until a worker is ready (True) or cannot start (False; see status())."""
        with self._lock:
            return self._ensure_worker() is not None

    def warm_spare(self, timeout: float = 60.0) -> bool:
        """Block until the pre-warmed spare worker is ready (True), so a crash recovers at once."""
        with self._lock:
            if self._ensure_worker() is None:
                return False
            self._ensure_spare(now=True)
            s = self._spare
            return s is not None and s.wait_ready(timeout, give_up=False)

    def status(self) -> dict:
        w = self._active
        layers = (w.ready or {}).get("layers") if w is not None else None
        spare = self._spare
        return {
            "isolation": self.level,
            "os_layers": layers or {"level": self.level, "active": [], "failed": [], "degraded": None},
            "worker": {
                "pid": w.pid if w is not None else None,
                "state": ("ready" if w is not None and w.ready and w.alive() else
                          "lost" if w is not None and w.ready else
                          "starting" if w is not None and w.fatal is None and w.alive() else "unavailable"),
                "error": self.startup_error,
                "cells": w.cells if w is not None else 0,
                "rss_mb": round(w.rss_mb() or 0, 1) if w is not None else None,
                "baseline_mb": (w.ready or {}).get("baseline_mb") if w is not None else None,
                "restarts": self.restarts,
                "last_loss": self.last_loss,
                "last_recovery_ms": self.last_recovery_ms,
                "spare": ("ready" if spare is not None and spare.ready else
                          "starting" if spare is not None and spare.alive() else None),
                "network": self.policy.network if self.level == "kernel" else True,
                "memory_mb": self.policy.limits.memory_mb,
            },
        }

    def shutdown(self):
        """Stop every worker. Safe from another thread while a cell runs: that cell's worker is
        killed and the cell ends with an error (the kernel is going away)."""
        self._closed = True
        self._watch_stop.set()
        if self._spare_timer is not None:
            self._spare_timer.cancel()
        with self._spare_lock:
            spare, self._spare = self._spare, None
        idle = self._lock.acquire(timeout=0.2)
        try:
            for w in (self._active, spare):
                if w is None:
                    continue
                if idle:
                    try:
                        w.channel.send({"op": "shutdown"}, timeout=0.5)
                    except ChannelError:
                        pass
                    if w.wait_exit(0.5) is not None:
                        w.channel.close()
                        w._remove_scratch()
                        continue
                w.kill("shutdown")
            if idle:
                self._active = None
        finally:
            if idle:
                self._lock.release()

    def __del__(self):
        try:
            self._watch_stop.set()
            for w in (self._active, self._spare):
                if w is not None and w.proc.returncode is None:
                    w.proc.kill()
        except Exception:  # noqa: BLE001
            pass


def _watch_idle(backend_ref, stop: threading.Event) -> None:
    """Every IDLE_CHECK seconds, the backend's idle check, until it is shut down or collected."""
    while not stop.wait(IDLE_CHECK):
        backend = backend_ref()
        if backend is None or backend._closed:
            return
        try:
            backend.check_idle()
        except Exception:  # noqa: BLE001 - a failed check must not end the watch
            pass
        del backend


def fcntl_ioctl(fd: int, request: int, arg):
    import fcntl

    return fcntl.ioctl(fd, request, arg)


def _flag(value) -> bool:
    if isinstance(value, str):
        if value.strip().lower() in ("1", "true", "yes", "on"):
            return True
        if value.strip().lower() in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"not a yes/no value: {value!r}")
    return bool(value)


def _resolve_chart(chart, sent):
    """``{"$event": n}`` in done.charts means the Plotly data of the cell's n-th event (sent once); ``sent``
    maps (or lists) event numbers to the data the host kept."""
    if isinstance(chart, dict) and set(chart) == {"$event"}:
        n = chart["$event"]
        if type(n) is not int or n < 0:
            return None
        if isinstance(sent, dict):
            return sent.get(n)
        return sent[n] if n < len(sent) else None
    return chart


class _Relayed:
    """What the host decodes and keeps of one cell while relaying it, bounded by the cell's own caps:
    at most ``text_cap`` (+ slack) characters of stdout for done.output, at most ``display_cap`` bytes
    of charts for done.charts. Frames of the cell's output past what the kernel could publish (text
    past the text cap, displays past twice the display cap, an error or a denial larger than any the
    kernel shows) are discarded unread, recognised by the prefix every frame of this request starts
    with; a frame over SMALL_FRAME bytes without that prefix is a protocol violation. So no frame the
    host decodes is larger than the caps allow, whatever MAX_EVENT_BYTES is."""

    __slots__ = ("rid", "text_cap", "display_cap", "text_budget", "display_budget", "done_limit", "_prefixes", "errors",
                 "saturated", "frames", "kind", "length", "text_seen", "display_seen", "dropped_frames",
                 "dropped_bytes", "stdout", "stdout_kept", "stdout_cut", "charts", "chart_bytes")

    def __init__(self, rid: int, text_cap: int, display_cap: int):
        self.rid = rid
        self.text_cap, self.display_cap = text_cap, display_cap
        self.text_budget = text_cap + TEXT_SLACK               # characters of stream text decoded
        self.display_budget = 2 * display_cap + text_cap       # bytes of display/result frames decoded
        # The closing summary (and an error): the cell's text, a traceback and denials; charts travel
        # as references. The worker trims its done to fit (max_done_bytes in the request).
        self.done_limit = MAX_BYTES_PER_CHAR * self.text_budget + display_cap + 2 ** 20
        self._prefixes: tuple | None = None
        self.saturated = False     # a budget is spent: every frame is asked about before decoding
        self.frames = 0            # frames of the cell so far: event n of the worker is frame n
        self.kind: str | None = None   # kind and size of the frame being read, from its prefix
        self.length = 0
        self.text_seen = self.display_seen = 0
        self.errors = 0            # error events relayed: a cell ends with one
        self.dropped_frames = self.dropped_bytes = 0
        self.stdout: list[str] = []
        self.stdout_kept = 0
        self.stdout_cut = False
        self.charts: dict[int, object] = {}
        self.chart_bytes = 0

    def skip(self, length: int, head: bytes) -> bool:
        """Channel.recv's hook: True discards the frame unread."""
        if self._prefixes is None:
            self._prefixes = tuple((frame_prefix(k, self.rid), k) for k in sorted(CELL_EVENTS))
        self.kind, self.length = None, length
        for prefix, kind in self._prefixes:
            if head.startswith(prefix):
                self.kind = kind
                break
        else:
            if length > SMALL_FRAME:
                raise ChannelError(f"a frame of {length} bytes that does not begin with its type and request id")
            return False
        if self.kind == "done":
            if length > self.done_limit:
                raise ChannelError(f"a done summary of {length} bytes (the limit is {self.done_limit})")
            return False
        if self._room(self.kind, length):
            return False
        self._dropped(length)
        return True

    def _room(self, kind: str, length: int) -> bool:
        """Could the kernel still publish some of a frame of this kind and size?"""
        if kind == "stream":
            return self.text_seen < self.text_budget and length <= MAX_BYTES_PER_CHAR * self.text_budget + 1024
        if kind == "error":
            # The cell's error: the kernel shows 4 kB of its message and 64 kB of traceback, and done
            # has it too. A cell ends with one error; the kernel publishes each error event as a message
            # of its own, outside the text and display caps, so any further one is past what the cell
            # may publish: discarded unread, like output past the caps (and counted in the note).
            return not self.errors and length <= self.done_limit
        if kind == "denial":
            return length <= DENIAL_FRAME_BYTES
        return self.display_seen < self.display_budget and length <= self.display_budget + 1024

    def drop_costly(self) -> bool:
        """A frame too costly to decode was read in full: drop it if it is the cell's own output."""
        if self.kind not in ("stream", "display", "clear_output", "result", "denial"):
            return False
        self._dropped(self.length)
        return True

    def _dropped(self, length: int) -> None:
        self.frames += 1
        self.dropped_frames += 1
        self.dropped_bytes += length

    def keep(self, event: dict, length: int) -> bool:
        """Account for a decoded event and keep what done may refer to, within the caps. False when the
        event is past the caps (a small frame, decoded before the budget was known to be spent)."""
        kind = event["type"]
        if kind != "done" and not self._room(kind, length):
            self.saturated = True
            self._dropped(length)
            return False
        index = self.frames
        self.frames += 1
        if kind == "stream":
            text = event["text"]
            self.text_seen += len(text)
            if event["name"] == "stdout":
                room = self.text_budget - self.stdout_kept
                if room > 0:
                    self.stdout.append(text[:room])
                    self.stdout_kept += min(len(text), room)
                if len(text) > room:
                    self.stdout_cut = True
            self.saturated |= self.text_seen >= self.text_budget
        elif kind == "error":
            self.errors += 1
        elif kind == "clear_output":   # counted like a display: a flood of them is a flood of messages
            self.display_seen += length
            self.saturated |= self.display_seen >= self.display_budget
        elif kind in ("display", "result"):
            self.display_seen += length
            chart = event["data"].get(PLOTLY_MIME)
            if chart is not None:
                if self.chart_bytes + length <= self.display_cap:  # past it, a reference resolves to nothing
                    self.charts[index] = chart
                    self.chart_bytes += length
            self.saturated |= self.display_seen >= self.display_budget
        return True

    def finish(self, done: dict) -> tuple[dict, dict | None]:
        """done with its references put back from what the host kept, and a note for the output
        discarded unread (or None)."""
        truncated = bool(done.get("truncated"))
        output = done.get("output")
        if output == {"$stdout": True}:
            done["output"] = "".join(self.stdout)
            truncated |= self.stdout_cut
        elif output is not None and not isinstance(output, str):
            done["output"] = ""
        if isinstance(done.get("charts"), list):
            resolved = [_resolve_chart(c, self.charts) for c in done["charts"]]
            truncated |= any(c is None for c in resolved)
            done["charts"] = [c for c in resolved if c is not None]
        note = None
        if self.dropped_frames:
            truncated = True
            note = {"type": "stream", "name": "stderr",
                    "text": f"[sandbox] {self.dropped_frames} outputs of this cell "
                            f"({self.dropped_bytes / 1e6:.1f} MB) were discarded unread: past the cell's "
                            f"limits (text {self.text_cap:,} bytes, displays {self.display_cap:,} bytes)\n"}
        done["truncated"] = truncated
        return done, note


def _is_str_list(value) -> bool:
    return isinstance(value, list) and all(type(v) is str for v in value)


# What each reply outside a cell must look like (beyond the channel's schema): checked before the
# kernel sees it.
_REPLY_CHECKS = {
    "complete": lambda v: isinstance(v, dict) and _is_str_list(v.get("matches"))
    and type(v.get("cursor_start")) is int and type(v.get("cursor_end")) is int,
    "inspect": lambda v: isinstance(v, dict) and type(v.get("found")) is bool and isinstance(v.get("data"), dict),
    "evaluate": lambda v: isinstance(v, dict) and v.get("status") in ("ok", "error"),
    "reset": lambda v: True,
    "ping": lambda v: True,
}


def _limits_dict(limits: Limits | None):
    if limits is None:
        return None
    return {"ticks": limits.ticks, "timeout": limits.timeout, "memory_mb": limits.memory_mb,
            "output_bytes": limits.output_bytes}
