"""Resource limits for a sandbox worker (levels `process` and `kernel`).

Applied by the worker to itself, after its trusted start-up imports and before any cell runs:

* RLIMIT_AS: the worker's address space at start-up (interpreter, numpy, pandas, plotly, BLAS threads)
  plus the policy's ``memory_mb``. ``memory_mb`` therefore means "memory the notebook may use on top of
  the runtime", which is what a person means by it; a bomb gets MemoryError (the cell ends, the worker
  and its variables live) or, if C code cannot handle the failed allocation, the worker dies and the
  host reports it. Soft and hard limits are equal: the worker cannot raise it again.
* RLIMIT_CPU: a per-cell soft limit (CPU used so far + the cell's budget), set by the worker's own code
  between cells; SIGXCPU ends a worker whose cell escaped every other limit. Untrusted code can raise
  the soft limit (up to the hard one) and ignore SIGXCPU, so the hard limit is the worker's lifetime
  budget, ``cpu_hours`` (default: 24 hours per CPU, a day of every core busy), which it cannot raise:
  SIGKILL when it is spent. Within it, the host's wall-clock kill bounds a running cell and the host's
  idle check (process.py) a worker that burns CPU between cells.
* RLIMIT_FSIZE: the largest file a cell may write (Python ignores SIGXFSZ, so a write fails with EFBIG).
* RLIMIT_NOFILE: open files.
* RLIMIT_CORE = 0: a crash never writes the worker's memory to disk.

RLIMIT_NPROC is not used: it counts threads (BLAS pools) and is ignored for root; seccomp is what stops
process creation.
"""
from __future__ import annotations

import os

try:
    import resource
except ImportError:  # pragma: no cover - not Linux/Unix
    resource = None

DEFAULT_FSIZE_MB = 1024
DEFAULT_NOFILE = 1024
DEFAULT_CPU_HOURS_PER_CPU = 24


def available() -> bool:
    return resource is not None and hasattr(resource, "RLIMIT_AS")


def address_space_bytes() -> int:
    """Current virtual size of this process (VmSize), or 0 when it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            pages = int(fh.read().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def cpu_seconds_used() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _set(which, soft, hard=None):
    hard = soft if hard is None else hard
    cur_soft, cur_hard = resource.getrlimit(which)
    # Never raise a limit that is already lower (an operator's ulimit wins).
    if cur_hard != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or hard > cur_hard):
        hard = cur_hard
    if soft == resource.RLIM_INFINITY or (hard != resource.RLIM_INFINITY and soft > hard):
        soft = hard
    resource.setrlimit(which, (soft, hard))
    return resource.getrlimit(which)


def default_cpu_hours() -> float:
    return DEFAULT_CPU_HOURS_PER_CPU * max(1, os.cpu_count() or 1)


def apply(*, memory_mb: int | None, fsize_mb: int | None = DEFAULT_FSIZE_MB,
          nofile: int | None = DEFAULT_NOFILE, cpu_hours: float | None = None, reserve_mb: int = 0) -> dict:
    """Apply the worker-lifetime limits; return what took effect (for status()). ``reserve_mb``: address space
    held for the warm-up imports that follow (tighten_address_space() gives it back once they are done)."""
    if not available():
        raise OSError("resource limits are not available on this platform")
    applied = {}
    if memory_mb is not None:
        baseline = address_space_bytes()
        limit = baseline + (int(memory_mb) + int(reserve_mb)) * 1024 * 1024
        soft, _ = _set(resource.RLIMIT_AS, limit)
        applied["address_space_mb"] = soft // (1024 * 1024) if soft != resource.RLIM_INFINITY else None
        applied["baseline_mb"] = baseline // (1024 * 1024)
        applied["memory_mb"] = int(memory_mb)
        if reserve_mb:
            applied["warm_reserve_mb"] = int(reserve_mb)
    if fsize_mb is not None:
        _set(resource.RLIMIT_FSIZE, int(fsize_mb) * 1024 * 1024)
        applied["file_size_mb"] = int(fsize_mb)
    if nofile is not None:
        soft, _ = _set(resource.RLIMIT_NOFILE, int(nofile))
        applied["open_files"] = soft
    _set(resource.RLIMIT_CORE, 0)
    applied["core_dumps"] = False
    hours = default_cpu_hours() if cpu_hours is None else float(cpu_hours)
    seconds = max(1, int(cpu_seconds_used() + hours * 3600))
    _, hard = _set(resource.RLIMIT_CPU, seconds)
    applied["cpu_hours"] = round(hard / 3600, 2) if hard != resource.RLIM_INFINITY else None
    return applied


def address_space_limit_mb() -> int | None:
    """The address-space limit in force, in MB (None: none)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft // (1024 * 1024)


def tighten_address_space(memory_mb: int) -> int | None:
    """The address-space limit lowered to what the process maps now plus memory_mb, if that is lower (a limit
    only ever goes down); returns the limit in MB, or None when there is none."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    wanted = address_space_bytes() + int(memory_mb) * 1024 * 1024
    if wanted < soft:
        soft, _ = _set(resource.RLIMIT_AS, wanted, wanted)
    return soft // (1024 * 1024)


def set_cell_cpu_budget(seconds: float | None) -> None:
    """Soft RLIMIT_CPU for the next cell: CPU used so far plus ``seconds`` (None: the lifetime budget)."""
    if not available():
        return
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if seconds is None:
        soft = hard
    else:
        soft = int(cpu_seconds_used() + seconds) + 1
        if hard != resource.RLIM_INFINITY:
            soft = min(soft, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (OSError, ValueError):
        pass
