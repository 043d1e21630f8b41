"""Per-cell budgets: ticks, wall time, memory, cancellation. SECURITY CORE.

Why ticks cost almost nothing: the rewriter puts ``__st_tick__()`` at every loop iteration, function
entry and comprehension step. ``__st_tick__`` takes the next item of an ``itertools.chain`` over
``repeat(None, CHUNK)`` blocks, so a tick is one C call; only once per CHUNK ticks does the chain call back
into Python (``_refill``), where the tick, time and cancellation checks run.

Why a cell's code never runs unconfined: the tick is also where a cell's code asks whether it may run on
the thread it finds itself on (``_fastgates.CellTick``, in C: one comparison of thread idents). The garbage
collector runs a cell's ``__del__`` on whichever thread collects; on one of the kernel's own threads (not
confined) the tick refuses before the first statement, like the idle tick between cells. A ``with`` block's
exit is no statement of the cell's: the rewriter hands every context manager to ``entered()``, whose exit
refuses the same way (a suspended generator closed later would run a library's ``__exit__``, with the
callbacks a cell gave it, unconfined).

Why limits cannot be swallowed: once a budget trips, the tick function is replaced by one that raises the
same LimitExceeded every time, and (in the main thread) a repeating SIGALRM raises it again, so an
``except BaseException`` or a ``finally`` that loops only earns a re-raise at its next tick; the engine
reports the trip even if the cell ends "normally" afterwards.

Memory (in the kernel's process, level ``none``): RLIMIT_AS is process-wide and would break the kernel
itself, so we never set it in-process. Instead the alarm handler reads the resident set size every
ALARM_INTERVAL and trips when it has grown by more than the limit since the cell started; sizes of
obviously huge results are refused before they are built (gates.py), and numpy, which fills arrays in C
where no sample can interrupt it, allocates through a bounded allocator in the engine's context
(_numpyguard.c). Worker levels add real rlimits.
"""
from __future__ import annotations

import contextvars
import itertools
import operator
import os
import signal
import sys
import threading
import time
import warnings

from .confine import cell_is_running
from .denials import (Cancelled, LimitExceeded, MemoryLimitExceeded, TickLimitExceeded, TimeLimitExceeded,
                      genuine)

try:
    from . import _numpyguard   # optional C extension (setup.py)
except ImportError:
    _numpyguard = None
if getattr(_numpyguard, "VERSION", None) != 3:
    _numpyguard = None   # as guards.py: a stale build is not used
try:
    from ._fastgates import CellTick   # optional C extension (setup.py)
except ImportError:
    CellTick = None

CHUNK = 10_000
_HERE = os.path.dirname(os.path.abspath(__file__))
# Where a cell's teardown runs: an alarm landing here must not raise (it would escape run_cell).
# Gates are not here: a cell spends its time inside them (a big multiplication), and a limit raised
# there is the cell's.
_TEARDOWN_FILES = frozenset(os.path.join(_HERE, f) for f in ("engine.py", "limits.py", "streams.py", "confine.py"))
ALARM_INTERVAL = 0.05
TICK_SECONDS = 100e-9   # a tick in charge_native: about one step of sandboxed Python (docs/security.md)
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _open_statm() -> int | None:
    try:
        return os.open("/proc/self/statm", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None


_STATM = _open_statm()   # opened once, outside any cell: reading it raises no audit event


def resident_bytes() -> int:
    """Current resident set size of this process (0 where /proc is missing)."""
    if _STATM is None:
        return 0
    try:
        return int(os.pread(_STATM, 128, 0).split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


_NUMPY_BOUNDED = contextvars.ContextVar("sandbox_numpy_bounded", default=False)


def bound_numpy_allocations() -> bool:
    """numpy's allocator in the calling contextvars.Context (the engine's) becomes the bounded one,
    once numpy is imported: numpy keeps its allocator in a ContextVar, so the host's numpy is untouched.
    False where the extension or numpy is missing."""
    if _NUMPY_BOUNDED.get():
        return True
    numpy = sys.modules.get("numpy")
    if _numpyguard is None or numpy is None:
        return False
    umath = sys.modules.get("numpy._core._multiarray_umath") or sys.modules.get("numpy.core._multiarray_umath")
    api = getattr(umath, "_ARRAY_API", None)
    if api is None or not _numpyguard.install(api):
        return False
    _NUMPY_BOUNDED.set(True)
    return True


class Budget:
    """The budget of the cell that is running, shared with the gates through the tick function."""

    def __init__(self, builtins_dict: dict):
        self._builtins = builtins_dict
        self._lock = threading.Lock()
        self.tripped: LimitExceeded | None = None
        self.running = False
        self._cancel_requested = False
        # The warnings filters are process-wide: a cell's (warnings.simplefilter('error'), a filter on a
        # class of the cell's) would act in the host's code after the cell. Each engine's cells keep
        # their own filters, installed only while a cell runs.
        self._cell_warnings = (list(warnings.filters), warnings.showwarning, warnings._showwarnmsg_impl)
        self._host_warnings = None
        self._cell_thread = threading.get_ident()
        self._idle()

    # -- arming ----------------------------------------------------------------------------------

    def start(self, *, ticks, timeout, memory_mb, policy_name, memory_baseline=None):
        """memory_baseline: resident size the limit counts from (the engine's, taken when its namespace
        was made), so that what earlier cells kept counts too; None counts from the cell's start."""
        self.policy_name = policy_name
        self.tick_limit = ticks
        self.timeout = timeout
        self.memory_limit = memory_mb * 1024 * 1024 if memory_mb else None
        self.started = time.monotonic()
        self.deadline = self.started + timeout if timeout else None
        self.rss_start = (memory_baseline if memory_baseline else resident_bytes()) if self.memory_limit else 0
        self.tripped = None
        self._cancel_requested = False
        self._full_chunks = 0
        self._extra = 0
        self._chunk = min(CHUNK, ticks) if ticks else CHUNK
        self._current = None
        self._cell_thread = threading.get_ident()
        self.running = True
        self.numpy_refused = 0
        self._swap_warnings(cell=True)
        if _numpyguard is not None:
            bound_numpy_allocations()
            _numpyguard.set_limit(self.memory_limit or 0, self.rss_start)
            if hasattr(_numpyguard, "set_cell_running"):
                _numpyguard.set_cell_running(True)   # numpy's buffer export checks object storage
        self._install_chain()
        self._arm_alarm()

    def stop(self) -> LimitExceeded | None:
        """Disarm and return the limit that tripped during the cell, if any. Every step runs even when one
        before it fails (that failure is raised afterwards): the alarm must stop, and the tick refuse, between
        cells whatever happened."""
        try:
            self._ticks_final = self.ticks_used()
        finally:
            self.running = False        # first: an alarm that fires from here on does nothing
        failure = None
        for step in (self._disarm_alarm, self._idle, self._release_numpy, self._final_memory_check,
                     self._restore_host_warnings):
            try:
                step()
            except BaseException as exc:  # noqa: B902 - the runtime's own failure, raised once all steps ran
                failure = failure or exc
        if failure is not None:
            raise failure
        return self.tripped

    def _release_numpy(self) -> None:
        if _numpyguard is not None:
            self.numpy_refused = _numpyguard.refused()
            _numpyguard.set_limit(0, 0)
            if hasattr(_numpyguard, "set_cell_running"):
                _numpyguard.set_cell_running(False)

    def _final_memory_check(self) -> None:
        """A cell short enough to finish between two samples still ends over its limit."""
        if self.tripped is None and self.memory_limit is not None \
                and resident_bytes() - self.rss_start > self.memory_limit:
            self.tripped = genuine(MemoryLimitExceeded(
                f"memory limit exceeded: {self.memory_limit // (1024 * 1024)} MB (policy '{self.policy_name}')",
                policy=self.policy_name))

    def _restore_host_warnings(self) -> None:
        self._swap_warnings(cell=False)

    def _swap_warnings(self, cell: bool) -> None:
        """Install the cell's warnings filters (cell=True) or put the host's back, keeping the cell's."""
        current = (list(warnings.filters), warnings.showwarning, warnings._showwarnmsg_impl)
        if cell:
            self._host_warnings, wanted = current, self._cell_warnings
        elif self._host_warnings is not None:
            self._cell_warnings, wanted, self._host_warnings = current, self._host_warnings, None
        else:
            return
        warnings.filters[:] = wanted[0]
        warnings.showwarning, warnings._showwarnmsg_impl = wanted[1], wanted[2]
        warnings._filters_mutated()

    def _install(self, source):
        """The tick becomes source's next item (the chain) or source's call (a tripped limit), on the cell's
        thread; any other thread asks _tick_elsewhere first."""
        self._source = source
        self._builtins["__st_tick__"] = _cell_tick(source, self._cell_thread, self._tick_elsewhere)

    def _idle(self):
        """Between cells, sandbox code (a __del__, a generator finaliser) may not run at all."""
        self._source = _raise_idle
        self._builtins["__st_tick__"] = _raise_idle

    def _tick_elsewhere(self):
        """The tick on a thread that is not the cell's: the cell's code runs on threads it started (they are
        confined), never on the kernel's own."""
        if not cell_is_running():
            raise genuine(LimitExceeded("sandboxed code cannot run on the kernel's own threads"))
        source = self._source
        return next(source) if isinstance(source, itertools.chain) else source()

    def may_run_here(self) -> bool:
        """Whether a cell's code may run now, on this thread (a context manager's exit asks)."""
        return self.running and (threading.get_ident() == self._cell_thread or cell_is_running())

    def entered(self, manager):
        """``with manager``: the manager as the cell's code uses it, its enter and exit run only where the
        cell's code may run (a generator suspended inside a ``with`` and collected after its cell, or on a
        kernel thread, would otherwise run the manager's exit there: ExitStack's callbacks, redirect_stdout
        putting back the cell's stream as the host's)."""
        return _CellContext(manager, self, asynchronous=False)

    def entered_async(self, manager):
        """``async with manager``: as entered()."""
        return _CellContext(manager, self, asynchronous=True)

    # -- accounting ------------------------------------------------------------------------------

    def _install_chain(self):
        """A chain over refills; map() (not a generator) so that an exception in one refill does not
        finish the source. chain itself drops its source after any error, so _refill installs a new
        chain before letting an exception through."""
        self._install(itertools.chain.from_iterable(map(self._refill, itertools.repeat(None))))

    def _refill(self, _):
        if self._current is not None:
            self._full_chunks += 1
            self._current = None
            try:
                self.check()
            except BaseException:
                if self.tripped is None and self.running:
                    self._install_chain()   # e.g. RecursionError at a chunk boundary: keep counting
                raise
        self._current = itertools.repeat(None, self._chunk)
        return self._current

    def chain_lost(self) -> bool:
        """True when a RecursionError hit the moment the chain called _refill: chain then drops its
        source, and every later tick raises StopIteration. No loop or call can proceed in that state
        (each starts with a tick), so nothing runs unchecked; the engine reports the RecursionError."""
        try:
            self._builtins["__st_tick__"]()
        except StopIteration:
            return True
        except BaseException:
            return False
        return False

    def ticks_used(self) -> int:
        if not self.running:
            return getattr(self, "_ticks_final", 0)
        current = 0 if self._current is None else self._chunk - operator.length_hint(self._current)
        return self._full_chunks * self._chunk + current + self._extra

    def charge(self, n: int) -> None:
        """Charge work done in C (list(range(n)) costs n ticks) before it starts."""
        if not self.running:
            _raise_idle()
        self._extra += n
        if self.tick_limit is not None and self.ticks_used() > self.tick_limit:
            self.trip(TickLimitExceeded(
                f"tick limit exceeded: {self.tick_limit:,} ticks (policy '{self.policy_name}'); "
                f"this operation alone needs {n:,}", policy=self.policy_name))
        self.check()

    def charge_native(self, seconds: float, what: str) -> None:
        """Charge one C call that will run about `seconds` (a lower bound) without returning to Python, before it
        starts (charges.py): as ticks, a tick standing for TICK_SECONDS of Python, and against the time left, so
        that a call which alone would end past the time limit is refused instead of overrunning it."""
        if not self.running:
            _raise_idle()
        left = None if self.deadline is None else self.deadline - time.monotonic()
        if left is not None and seconds > left:
            self.trip(TimeLimitExceeded(
                f"time limit: {what} would run about {seconds:.2g} s in one uninterruptible call, more than the "
                f"{max(left, 0):.2g} s left of {self.timeout:g} s (policy '{self.policy_name}')",
                policy=self.policy_name))
        self.charge(int(seconds / TICK_SECONDS))

    def check(self, memory: bool = False) -> None:
        """Trips the first limit that is exceeded. Memory is read only when asked (the alarm asks
        every ALARM_INTERVAL): reading it is a system call that releases the GIL, and releasing it
        every chunk keeps other threads (the kernel's control thread) from ever getting it back."""
        if self.tripped is not None:
            raise self.tripped
        if not self.running:
            _raise_idle()
        if self._cancel_requested:
            self.trip(Cancelled("the cell was interrupted", policy=self.policy_name))
        if self.tick_limit is not None and self.ticks_used() >= self.tick_limit:
            self.trip(TickLimitExceeded(
                f"tick limit exceeded: {self.tick_limit:,} ticks (policy '{self.policy_name}')",
                policy=self.policy_name))
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.trip(TimeLimitExceeded(
                f"time limit exceeded: {self.timeout:g} s (policy '{self.policy_name}')", policy=self.policy_name))
        if self.memory_limit is not None and (memory or not self._alarm_armed and self._full_chunks % 64 == 0):
            grown = resident_bytes() - self.rss_start
            if grown > self.memory_limit:
                self.trip(MemoryLimitExceeded(
                    f"memory limit exceeded: {self.memory_limit // (1024 * 1024)} MB (policy '{self.policy_name}')",
                    policy=self.policy_name))

    def _make_sticky(self, exc: LimitExceeded) -> LimitExceeded:
        """Record the first limit that tripped; from now on every tick raises it again."""
        with self._lock:
            if self.tripped is None:
                self.tripped = genuine(exc)
        tripped = self.tripped

        def sticky():
            raise tripped

        self._install(sticky)
        return tripped

    def trip(self, exc: LimitExceeded):
        raise self._make_sticky(exc)

    # -- cancellation and the alarm -------------------------------------------------------------

    def cancel(self) -> None:
        """Thread-safe: the next tick chunk or alarm ends the cell."""
        self._cancel_requested = True
        if self.running:
            self._make_sticky(Cancelled("the cell was interrupted", policy=getattr(self, "policy_name", None)))
            if self._alarm_armed and threading.current_thread() is not threading.main_thread():
                try:
                    signal.pthread_kill(threading.main_thread().ident, signal.SIGALRM)
                except (OSError, ValueError, AttributeError):
                    pass

    _alarm_armed = False

    def _arm_alarm(self):
        self._alarm_armed = False
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
            return
        try:
            self._old_alarm = signal.signal(signal.SIGALRM, self._on_alarm)
            signal.setitimer(signal.ITIMER_REAL, ALARM_INTERVAL, ALARM_INTERVAL)
            self._alarm_armed = True
        except (ValueError, OSError):
            pass

    def _disarm_alarm(self):
        if not self._alarm_armed:
            return
        self._alarm_armed = False
        try:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
        finally:
            signal.signal(signal.SIGALRM, self._old_alarm or signal.SIG_DFL)

    on_alarm = None   # the engine's hook (sends output a quiet cell printed earlier)

    def _on_alarm(self, signum, frame):
        """Interrupts pure-Python code between any two bytecodes, and blocking calls such as
        time.sleep; C code that never returns to the interpreter needs the worker's hard kill.
        It never raises inside the runtime's own code (a gate, the engine tearing a cell down): the
        next alarm or tick raises instead, in the cell's code or a library it called."""
        if not self.running:
            return
        if self.on_alarm is not None:
            self.on_alarm()
        if frame is not None and frame.f_code.co_filename in _TEARDOWN_FILES:
            return
        if _delivering(frame):
            return   # half a message on the worker's channel would put the stream out of step
        self.check(memory=True)


# Code objects during which an alarm never raises: the engine's delivery of an event to its caller
# (engine._deliver_once registers its inner function). The caller's emit writes to a socket or to the
# kernel's own queues; a limit raised there leaves a message half sent.
QUIET_CODES: set = set()


def _delivering(frame) -> bool:
    while frame is not None:
        if frame.f_code in QUIET_CODES:
            return True
        frame = frame.f_back
    return False


def _raise_idle():
    raise genuine(LimitExceeded("sandboxed code cannot run outside a cell"))


def _cell_tick(source, cell_thread: int, elsewhere):
    """The tick function: CellTick in C; without the extension the same decision in Python (slower)."""
    if CellTick is not None:
        return CellTick(source, cell_thread, elsewhere)
    step = source.__next__ if isinstance(source, itertools.chain) else source
    get_ident = threading.get_ident

    def tick():
        if get_ident() != cell_thread:
            return elsewhere()
        return step()
    return tick


_OLD_WITH_ERRORS = sys.version_info < (3, 11)   # 3.10 raised AttributeError for a missing __enter__


def _special_method(manager, name):
    """manager's name as the interpreter finds a special method: on its type, bound to it (None: absent)."""
    kind = type(manager)
    for klass in kind.__mro__:
        namespace = klass.__dict__
        if name in namespace:
            raw = namespace[name]
            bind = getattr(type(raw), "__get__", None)
            return bind(raw, manager, kind) if bind is not None else raw
    return None


class _CellContext:
    """A context manager entered by a cell's ``with`` (Budget.entered): the manager's own enter and exit,
    each run only where the cell's code may run (an exit outside is refused: the manager's exit does not
    run, as the cell's own code would not)."""

    __slots__ = ("_manager", "_enter", "_exit", "_budget")

    def __init__(self, manager, budget, asynchronous: bool):
        enter_name, exit_name = ("__aenter__", "__aexit__") if asynchronous else ("__enter__", "__exit__")
        self._manager, self._budget = manager, budget
        self._enter = _special_method(manager, enter_name)
        self._exit = _special_method(manager, exit_name) if self._enter is not None else None
        if self._exit is None:
            missing = exit_name if self._enter is not None else enter_name
            if _OLD_WITH_ERRORS:
                raise AttributeError(missing)
            protocol = "asynchronous context manager" if asynchronous else "context manager"
            raise TypeError(f"'{type(manager).__name__}' object does not support the {protocol} protocol")

    def _check(self):
        if not self._budget.may_run_here():
            raise genuine(LimitExceeded("sandboxed code cannot run outside a cell"))

    def __enter__(self):
        self._check()
        return self._enter()

    def __exit__(self, exc_type, exc, tb):
        self._check()
        return self._exit(exc_type, exc, tb)

    def __aenter__(self):
        self._check()
        return self._enter()

    def __aexit__(self, exc_type, exc, tb):
        self._check()
        return self._exit(exc_type, exc, tb)
