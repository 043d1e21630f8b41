"""Resource limits for a sandbox worker (levels `process` and `kernel`).

Applied by the worker to itself, after its trusted start-up imports and before any cell runs:

* RLIMIT_AS: the worker's address space at start-up (interpreter, numpy, pandas, plotly, BLAS threads)
  plus the policy's ``memory_mb``. ``memory_mb`` therefore means "memory the notebook may use on top of
  the runtime", which is what a person means by it; a bomb gets MemoryError (the cell ends, the worker
  and its variables live) or, if C code cannot handle the failed allocation, the worker dies and the
  host reports it. Soft and hard limits are equal: the worker cannot raise it again.
* RLIMIT_CPU: a per-cell soft limit (CPU used so far + the cell's budget), set by the worker's own code
  between cells; SIGXCPU ends a worker whose cell escaped every other limit. The hard CPU limit stays
  open so the worker can move the soft limit for the next cell; the host's wall-clock kill is the
  backstop if untrusted C code raises the soft limit.
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


def apply(*, memory_mb: int | None, fsize_mb: int | None = DEFAULT_FSIZE_MB,
          nofile: int | None = DEFAULT_NOFILE) -> dict:
    """Apply the worker-lifetime limits; return what took effect (for status())."""
    if not available():
        raise OSError("resource limits are not available on this platform")
    applied = {}
    if memory_mb is not None:
        baseline = address_space_bytes()
        limit = baseline + int(memory_mb) * 1024 * 1024
        soft, _ = _set(resource.RLIMIT_AS, limit)
        applied["address_space_mb"] = soft // (1024 * 1024) if soft != resource.RLIM_INFINITY else None
        applied["baseline_mb"] = baseline // (1024 * 1024)
        applied["memory_mb"] = int(memory_mb)
    if fsize_mb is not None:
        _set(resource.RLIMIT_FSIZE, int(fsize_mb) * 1024 * 1024)
        applied["file_size_mb"] = int(fsize_mb)
    if nofile is not None:
        soft, _ = _set(resource.RLIMIT_NOFILE, int(nofile))
        applied["open_files"] = soft
    _set(resource.RLIMIT_CORE, 0)
    applied["core_dumps"] = False
    return applied


def set_cell_cpu_budget(seconds: float | None) -> None:
    """Soft RLIMIT_CPU for the next cell: CPU used so far plus ``seconds`` (None lifts it)."""
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
