"""Landlock (Linux >= 5.13) through its three system calls, with ctypes.

What the worker may touch after :func:`restrict`:

* read-write (no execute, no device nodes, no sockets, no symlinks, no FIFOs) beneath one directory: the sandbox working
  directory when the policy has files and the directory is safe, else a private empty one, or none;
* read-only beneath what Python needs to import anything, now or lazily later: the interpreter's
  prefixes, every ``sys.path`` directory, this package, the shared-library directories, the loader
  cache, time zone data, a few files of ``/proc/self`` (never ``net/``), CPU topology in ``/sys``;
* ``/dev/null`` (read-write), ``/dev/urandom``, ``/dev/random``, ``/dev/zero`` (read);
* nothing else. No path gets the EXECUTE right: the dynamic loader maps libraries with ``mmap``, which
  Landlock treats as reading, so ``execve`` is refused by Landlock as well as by seccomp.

Every rule is checked by ``workdir.grant_refusal`` against the places the host trusts (home, SSH keys,
Jupyter and IPython directories, the connection file; no write on the Python installation or this
package): a rule that would reach one is dropped, whoever asked for it.

``restrict(..., abi_cap=N)`` handles only what ABI ``min(N, host)`` handles (the test matrix runs every
ABI on one host); seccomp covers what a lower ABI leaves open (see seccomp.py).

From ABI 4 TCP bind/connect are also handled (refused unless the policy grants network); from ABI 6
the worker may not signal processes outside its domain (the kernel, other programs) nor connect to
abstract Unix sockets created outside it.

Landlock restricts the calling thread and its future children only, so the worker calls
:func:`restrict` while it is still single-threaded (before numpy starts its BLAS threads); the function
refuses to run otherwise.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import stat
import sys

# System call numbers: the same on every architecture that uses the generic table (x86_64, aarch64,
# riscv64, arm, ppc64, s390x ...). Alpha and ia64 differ and are not supported.
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
_SUPPORTED_MACHINES = {"x86_64", "aarch64", "arm64", "riscv64", "armv7l", "armv6l", "ppc64le", "ppc64",
                       "s390x", "i686", "i386", "loongarch64", "mips64"}

CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights, by the ABI version that introduced them.
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13       # ABI 2
TRUNCATE = 1 << 14    # ABI 3
IOCTL_DEV = 1 << 15   # ABI 5
NET_BIND_TCP = 1 << 0      # ABI 4
NET_CONNECT_TCP = 1 << 1   # ABI 4
SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1         # ABI 6

FS_V1 = (1 << 13) - 1
# Rights that make sense on a file (not a directory); others make add_rule fail with EINVAL.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

READ_ONLY = READ_FILE | READ_DIR
# No MAKE_SYM: the working directory is the notebook's own, and the Jupyter server (unconfined) saves
# notebooks and checkpoints there through whatever it finds; a symlink the worker planted (the notebook
# replaced by a link to ~/.bashrc, .ipynb_checkpoints pointing at IPython's startup directory) would make
# it write outside. Without MAKE_SYM Landlock also refuses renaming or hard-linking an existing symlink
# into or within the directory (the right is checked for the file type at the destination). No
# MAKE_FIFO: a FIFO in the notebook's place would hang the server's next read of it.
READ_WRITE = (READ_FILE | READ_DIR | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG
              | REFER | TRUNCATE)


class LandlockError(OSError):
    pass


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = None


def _syscall():
    global _libc
    if _libc is None:
        # The running interpreter's own libc: no ctypes.util.find_library, which runs ldconfig.
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
        _libc.prctl.restype = ctypes.c_int
    return _libc


def abi_version() -> int:
    """The Landlock ABI the running kernel offers; 0 when Landlock is missing or disabled."""
    if not sys.platform.startswith("linux") or platform.machine() not in _SUPPORTED_MACHINES:
        return 0
    libc = _syscall()
    v = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                     ctypes.c_uint32(CREATE_RULESET_VERSION))
    return int(v) if v > 0 else 0


def handled_fs(abi: int) -> int:
    mask = FS_V1
    if abi >= 2:
        mask |= REFER
    if abi >= 3:
        mask |= TRUNCATE
    if abi >= 5:
        mask |= IOCTL_DEV
    return mask


def thread_count() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 1 if len(os.listdir("/proc/self/task")) == 1 else 2


def python_read_paths() -> list[str]:
    """Directories and files Python (and its lazy imports) must read."""
    paths = [os.path.dirname(os.path.realpath(sys.executable)), os.path.realpath(sys.executable)]
    # The prefixes' library trees (stdlib, site-packages, the shared libraries a conda or venv prefix
    # carries) rather than the prefixes themselves: with a system Python the prefix is /usr.
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        paths += [os.path.join(prefix, "lib"), os.path.join(prefix, "lib64")]
        if os.path.realpath(prefix) not in ("/usr", "/usr/local", "/"):
            paths.append(os.path.join(prefix, "share"))
    try:
        import sysconfig

        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            paths.append(sysconfig.get_path(key))
    except (ImportError, KeyError):
        pass
    for entry in sys.path:
        if entry and os.path.isabs(entry) and os.path.exists(entry):
            paths.append(entry)
    # This package (an editable install lives outside site-packages).
    paths.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # Shared libraries, the loader's cache, time zones, CPU topology, locale data.
    paths += ["/lib", "/lib64", "/lib32", "/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/local/lib",
              "/usr/local/lib64", "/etc/ld.so.cache", "/etc/localtime", "/usr/share/zoneinfo",
              "/sys/devices/system/cpu", "/proc/cpuinfo", "/proc/meminfo"]
    return paths


NETWORK_READ_PATHS = ["/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/gai.conf",
                      "/etc/host.conf", "/etc/services", "/etc/protocols", "/etc/ssl", "/etc/pki",
                      "/etc/ca-certificates", "/usr/share/ca-certificates"]
DEVICE_PATHS = {"/dev/null": READ_FILE | WRITE_FILE, "/dev/urandom": READ_FILE,
                "/dev/random": READ_FILE, "/dev/zero": READ_FILE}
# What of /proc/<pid> Python, glibc, numpy and the engine read (statm: memory baseline and sampler;
# maps: pthread_getattr_np on the main thread; status/stat/limits/comm/cmdline: process introspection
# in libraries; fd: listing its own descriptors; opening one of its magic links is checked against the
# target's own path). Never the directory: /proc/<pid>/net (and task/<tid>/net) lists every socket of
# the network namespace, the kernel's ports included; mountinfo names host paths.
PROC_SELF = {"stat": READ_FILE, "statm": READ_FILE, "status": READ_FILE, "maps": READ_FILE,
             "limits": READ_FILE, "comm": READ_FILE, "cmdline": READ_FILE, "fd": READ_DIR}


class Plan:
    """The rules of one confinement, and the rules refused because they reached a protected place."""

    def __init__(self):
        self.rules: dict[str, int] = {}
        self.refused: list[str] = []


def build_plan(writable: str | None, *, network: bool = False, extra_read=(), places=()) -> Plan:
    """(path, rights) for :func:`restrict`: deduplicated, nonexistent paths dropped, and every rule
    vetted against ``places`` (plus the worker's own list, :func:`workdir.own_places`)."""
    from ..workdir import grant_refusal, own_places

    protected = own_places() + [tuple(p) for p in places]
    result = Plan()

    def add(path, rights):
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            return
        if not os.path.exists(real):
            return
        why = grant_refusal(real, write=bool(rights & ~READ_ONLY), places=protected)
        if why:
            result.refused.append(why)
            return
        result.rules[real] = result.rules.get(real, 0) | rights

    for p in python_read_paths():
        add(p, READ_ONLY)
    for p in extra_read:
        add(p, READ_ONLY)
    if network:
        for p in NETWORK_READ_PATHS:
            add(p, READ_ONLY)
    # /proc/self resolves now, to this process's own directory.
    for name, rights in PROC_SELF.items():
        add(f"/proc/{os.getpid()}/{name}", rights)
    for p, rights in DEVICE_PATHS.items():
        add(p, rights)
    if writable:
        add(writable, READ_WRITE)
    return result


def plan(writable: str | None, *, network: bool = False, extra_read=(), places=()) -> list[tuple[str, int]]:
    """The rules of :func:`build_plan`, sorted."""
    return sorted(build_plan(writable, network=network, extra_read=extra_read, places=places).rules.items())


def restrict(writable: str | None, *, network: bool = False, extra_read=(), places=(),
             abi_cap: int | None = None) -> dict:
    """Confine this process (must be single-threaded). Returns what took effect; raises LandlockError.
    ``writable``: the one directory with write rights (None: none). ``abi_cap``: handle no more than
    that ABI (0: behave as if Landlock were missing)."""
    host_abi = abi_version()
    abi = host_abi if abi_cap is None else min(int(abi_cap), host_abi)
    if abi < 1:
        why = ("Landlock is disabled by the worker option landlock_abi=0" if host_abi >= 1 else
               "Landlock is not available: it needs Linux >= 5.13 with 'landlock' in the active security "
               "modules (cat /sys/kernel/security/lsm; add it with the boot parameter lsm=...,landlock) and, "
               "in a container, a seccomp profile that lets the landlock_* system calls through "
               "(docs/operators.md, Kubernetes)")
        raise LandlockError(errno.ENOSYS, why)
    if thread_count() != 1:
        raise LandlockError(errno.EBUSY, "Landlock must be applied before any thread starts")
    libc = _syscall()
    fs = handled_fs(abi)
    attr = _RulesetAttr(handled_access_fs=fs, handled_access_net=0, scoped=0)
    size = 8
    net = False
    if abi >= 4 and not network:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        net = True
    if abi >= 4:
        size = 16
    scoped = []
    if abi >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL
        scoped = ["signal", "abstract_unix_socket"]
        size = 24
    ruleset_fd = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                              ctypes.c_uint32(0))
    if ruleset_fd < 0:
        e = ctypes.get_errno()
        raise LandlockError(e, f"landlock_create_ruleset failed: {os.strerror(e)}")
    granted = []
    built = build_plan(writable, network=network, extra_read=extra_read, places=places)
    try:
        for path, rights in sorted(built.rules.items()):
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                st = os.fstat(fd)
                allowed = rights & fs
                if not stat.S_ISDIR(st.st_mode):
                    allowed &= FILE_RIGHTS
                if not allowed:
                    continue
                rule = _PathBeneathAttr(allowed_access=allowed, parent_fd=fd)
                r = libc.syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset_fd),
                                 ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0))
                if r < 0:
                    e = ctypes.get_errno()
                    raise LandlockError(e, f"landlock_add_rule({path}) failed: {os.strerror(e)}")
                granted.append(path)
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            e = ctypes.get_errno()
            raise LandlockError(e, f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(e)}")
        if libc.syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)) < 0:
            e = ctypes.get_errno()
            raise LandlockError(e, f"landlock_restrict_self failed: {os.strerror(e)}")
    finally:
        os.close(ruleset_fd)
    return {
        "abi": abi,
        "host_abi": host_abi,
        "filesystem": True,
        "tcp": net,
        "scoped": scoped,
        "writable": [p for p, r in built.rules.items() if r & ~READ_ONLY and p not in DEVICE_PATHS],
        "rules": len(granted),
        "refused": built.refused,
    }
