"""The order in which a worker confines itself, and the record of what took effect.

1. ``early`` (still single-threaded, before numpy starts BLAS threads): Landlock and dropping Linux
   capabilities, both of which apply to the calling thread and its future threads only.
2. the worker's trusted warm-up imports (numpy, pandas, plotly, the engine): they already run under
   Landlock, which proves that lazy imports keep working.
3. ``late``: rlimits (the address-space baseline is measured after warm-up) and the seccomp filter,
   synchronised to every thread. The filter is told which Landlock ABI took effect (0 when Landlock
   failed in degraded mode) and closes what that ABI leaves open.

Fail closed: a layer the level requires that cannot be applied raises :class:`LayerError`, unless the
operator allowed degraded mode, in which case the failure is recorded and reported by ``status()``.

:func:`protect_process` is not a layer of the worker but a wall around the processes a worker could
reach: the kernel process and every worker make themselves non-dumpable at start-up.
"""
from __future__ import annotations

import ctypes
import os
import sys

from . import landlock, rlimits, seccomp

PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4
PR_CAPBSET_DROP = 24
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
SYS_CAPSET = {"x86_64": 126, "aarch64": 91, "riscv64": 91}

LAYERS_BY_LEVEL = {
    "none": (),
    "process": ("rlimits",),
    "kernel": ("rlimits", "landlock", "capabilities", "seccomp"),
}


class LayerError(RuntimeError):
    """A required OS layer could not be applied (and degraded mode is off)."""


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> dict:
    """Empty every capability set of this thread (and the bounding and ambient sets)."""
    import platform

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.restype = ctypes.c_int
    try:
        with open("/proc/sys/kernel/cap_last_cap") as fh:
            last = int(fh.read())
    except (OSError, ValueError):
        last = 40
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: nothing to drop then
    nr = SYS_CAPSET.get(platform.machine())
    if nr is None:
        raise OSError("capset: unsupported architecture")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(ctypes.c_long(nr), ctypes.byref(header), ctypes.byref(data)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"capset failed: {os.strerror(e)}")
    return {"effective": 0, "root": os.geteuid() == 0}


def protect_process() -> dict:
    """Make this process non-dumpable. Its ``/proc/<pid>`` files then belong to root, and those that
    reveal or change the process (``mem``, ``environ``, ``fd/``, ``maps``, ``oom_score_adj``,
    ``clear_refs`` ...) need CAP_SYS_PTRACE or root: no other process of the same user can open them,
    a worker without Landlock included. ``stat``, ``statm``, ``status`` and ``cmdline`` stay readable
    (psutil, jupyter-resource-usage). Costs: no core dumps, no same-user debugger attaching (gdb -p,
    py-spy). execve resets it, so every worker calls this for itself; at level kernel the worker's filter
    refuses ``PR_SET_DUMPABLE`` afterwards (seccomp.PRCTL_ALLOWED), so a breached worker cannot undo it.
    Never raises: returns
    ``{"dumpable": False}`` on success, else the reason (``{"dumpable": True, "error": ...}``)."""
    if not sys.platform.startswith("linux"):
        return {"dumpable": None, "error": f"not available on {sys.platform}"}
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.restype = ctypes.c_int
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            e = ctypes.get_errno()
            return {"dumpable": True, "error": f"prctl(PR_SET_DUMPABLE): {os.strerror(e)}"}
        return {"dumpable": bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0))}
    except OSError as exc:
        return {"dumpable": True, "error": str(exc)}


def effective_capabilities() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return -1


def platform_problem() -> str | None:
    if not sys.platform.startswith("linux"):
        return (f"the 'kernel' isolation level needs Linux (this is {sys.platform}); use --SandboxKernel."
                "isolation=process, or run the kernel in a Linux container or VM")
    return None


class LayerRecord:
    def __init__(self, level: str, degraded_ok: bool):
        self.level = level
        self.degraded_ok = degraded_ok
        self.layers: dict[str, dict] = {}
        self.workdir: dict | None = None  # which directory the worker may write, and why (worker.py)
        self.tasks: dict | None = None    # the task listener handed to the host (seccomp.supervise_tasks)

    def attempt(self, name: str, fn, *args, **kwargs):
        try:
            detail = fn(*args, **kwargs) or {}
        except Exception as exc:  # noqa: BLE001 - any failure means the layer is off
            self.layers[name] = {"active": False, "error": f"{type(exc).__name__}: {exc}"}
            if not self.degraded_ok:
                raise LayerError(f"the {name} layer could not be applied: {exc}") from None
            return None
        self.layers[name] = {"active": True, **detail}
        return detail

    def summary(self) -> dict:
        required = LAYERS_BY_LEVEL[self.level]
        return {
            "level": self.level,
            "required": list(required),
            "active": [n for n in required if self.layers.get(n, {}).get("active")],
            "failed": [n for n in required if not self.layers.get(n, {}).get("active")],
            "degraded": any(not self.layers.get(n, {}).get("active") for n in required),
            "details": self.layers,
            **({"workdir": self.workdir} if self.workdir is not None else {}),
        }


def apply_early(record: LayerRecord, *, workdir: str | None, network: bool, extra_read=(), places=(),
                landlock_abi: int | None = None, tasks_fd: int | None = None) -> None:
    """``workdir``: the one directory the worker may write (None: none); ``places``: protected places
    from the host (workdir.protected_places), added to the worker's own; ``landlock_abi``: a cap;
    ``tasks_fd``: the socket on which the host waits for the task listener (seccomp.supervise_tasks),
    part of the seccomp layer: installed here, before any thread exists."""
    if record.level != "kernel":
        return
    problem = platform_problem()
    if problem:
        record.attempt("landlock", _raise, problem)
        record.attempt("capabilities", _raise, problem)
        return
    ok, why = seccomp.available()  # load libseccomp now, while the loader can still find it
    record.attempt("landlock", landlock.restrict, workdir, network=network, extra_read=extra_read,
                   places=places, abi_cap=landlock_abi)
    record.attempt("capabilities", drop_capabilities)
    if not ok:
        record.layers["seccomp"] = {"active": False, "error": why}
    elif tasks_fd is not None:
        try:
            record.tasks = seccomp.supervise_tasks(tasks_fd)
        except Exception as exc:  # noqa: BLE001 - fail closed below, unless degraded mode is allowed
            record.tasks = {"supervised": False, "error": f"{type(exc).__name__}: {exc}"}
            if not record.degraded_ok:
                raise LayerError(f"the seccomp layer could not be applied: the task listener: {exc}") from None


def apply_late(record: LayerRecord, *, memory_mb: int | None, network: bool, fsize_mb=None,
               nofile=None, cpu_hours=None, max_syscall=None, warm_reserve_mb: int = 0) -> None:
    """``cpu_hours``: the worker's lifetime CPU (rlimits); ``max_syscall``: a lower ceiling than the
    reviewed one for the system calls the filter lets through (tests); ``warm_reserve_mb``: address space
    held for the warm-up imports made after the layers (worker.py)."""
    if record.level == "none":
        return
    kw = {}
    if fsize_mb is not None:
        kw["fsize_mb"] = fsize_mb
    if nofile is not None:
        kw["nofile"] = nofile
    if cpu_hours is not None:
        kw["cpu_hours"] = cpu_hours
    if warm_reserve_mb:
        kw["reserve_mb"] = warm_reserve_mb
    record.attempt("rlimits", rlimits.apply, memory_mb=memory_mb, **kw)
    if record.level == "kernel":
        problem = platform_problem()
        if problem:
            record.attempt("seccomp", _raise, problem)
            return
        pre = record.layers.get("seccomp")
        if pre and not pre.get("active"):
            record.attempt("seccomp", _raise, pre["error"])
            return
        ll = record.layers.get("landlock", {})
        record.attempt("seccomp", seccomp.apply, network=network,
                       landlock_abi=ll.get("abi", 0) if ll.get("active") else 0, max_syscall=max_syscall)
        if record.tasks is not None and record.layers.get("seccomp", {}).get("active"):
            record.layers["seccomp"]["tasks"] = record.tasks


def _raise(message):
    raise OSError(message)
