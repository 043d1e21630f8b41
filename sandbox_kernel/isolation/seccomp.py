"""The worker's system-call filter, built with libseccomp (through the ``pyseccomp`` ctypes binding).

Why libseccomp rather than a hand-written BPF program: the filter must check the architecture of every
call (an x86_64 process can still make i386 calls through ``int 0x80``, and x32 calls with bit 30 set),
map names to numbers per architecture, compare 64-bit arguments with 32-bit BPF instructions, and stay
correct as kernels add system calls. libseccomp does all of that, is what Docker, Podman, systemd and
Flatpak use, and is packaged everywhere (``libseccomp.so.2``). ``pyseccomp`` is a small pure-ctypes
binding to it, so there is nothing to compile. A hand-written BPF program would be a few hundred lines
of security-critical code that nobody else reviews.

The filter is a deny list (default: allow) because the data stack (numpy, BLAS thread pools, the
allocator, ``mbind``, pandas, plotly) uses a long, version-dependent tail of system calls that an
allow list would break, which is exactly the failure users hit with other sandboxes. Files are
Landlock's job; this filter removes the calls that leave the process or reach the kernel's most
dangerous surfaces, and what Landlock does not see: file metadata (chmod, chown, utime, xattrs, inode
flags), opens that request no read or write, other processes' signals and scheduling, inotify. It also
closes what the Landlock ABI in effect leaves open (``landlock_abi``): truncation before ABI 3 (TCP
before 4 and signals before 6 are refused here on every kernel anyway). Refused calls fail with an errno
(EPERM; ENOSYS for ``clone3`` and ``openat2`` so glibc falls back to calls whose arguments the filter
can read), so a cell sees a Python ``PermissionError`` instead of the worker dying. Calls from a foreign
architecture kill the worker (libseccomp's default).

Arguments are compared as 64-bit values. Every "only this value" rule denies on inequality, so a caller
that puts garbage in the upper half of a 32-bit argument is refused, never let through.
"""
from __future__ import annotations

import errno
import os
import socket

CLONE_THREAD = 0x00010000
CLONE_NEW_FLAGS = (0x00000080, 0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                   0x40000000)  # NEWTIME NEWNS NEWCGROUP NEWUTS NEWIPC NEWUSER NEWPID NEWNET
U32 = 0xFFFFFFFF
PRIO_PROCESS = 0
IOPRIO_WHO_PROCESS = 1
NETLINK_ROUTE = 0
SOCK_TYPE_MASK = 0xF
SOCK_STREAM, SOCK_SEQPACKET = 1, 5

# Refused outright (EPERM). Names unknown on this architecture are skipped (e.g. fork on aarch64).
DENIED = (
    # process creation (clone and clone3 are handled below)
    "execve", "execveat", "fork", "vfork",
    # other processes: memory, tracing, handles, namespaces
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "process_mrelease", "kcmp",
    "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "unshare", "setns", "tkill", "get_robust_list",
    "capget",
    # kernel keyring
    "keyctl", "add_key", "request_key",
    # mounts and root changes
    "mount", "umount2", "umount", "pivot_root", "chroot", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick",
    # file metadata: Landlock has no right for it, so these would change files anywhere the worker can
    # name (permissions, owner, times, extended attributes), read-only trees included
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "fchown32",
    "chown32", "lchown32", "utime", "utimes", "futimesat", "utimensat", "utimensat_time64", "setxattr",
    "lsetxattr", "fsetxattr", "setxattrat", "removexattr", "lremovexattr", "fremovexattr", "removexattrat",
    # watching directories Landlock forbids reveals the names of files created there
    "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark",
    # kernel attack surface with no use in a notebook
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "uselib", "vhangup",
    "nfsservctl", "quotactl", "quotactl_fd",
    # System V IPC and POSIX message queues: channels to other processes that Landlock does not cover
    "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semctl", "semtimedop", "shmget", "shmat",
    "shmctl", "shmdt", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify",
    "mq_getsetattr",
    # host administration
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon",
    "swapoff", "acct", "syslog", "iopl", "ioperm", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex", "sethostname", "setdomainname",
)
# The first argument is a pid; only 0 (this thread or process) is allowed. Pid 0 is all a library needs
# (BLAS pools pin with 0); any other pid may be another process of the same user, such as the kernel.
OWN_PID_ONLY = (
    "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr",  # scheduling
    "sched_getaffinity", "sched_getscheduler", "sched_getparam", "sched_getattr",  # facts about others
    "sched_rr_get_interval", "getpgid", "getsid", "prlimit64", "migrate_pages", "move_pages",
)
# Signals: only to this process (the engine's own timer and cancel signal itself). kill(0)/kill(-1)
# (a process group, every process of the user) are refused too.
SIGNAL_CALLS = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
# fcntl commands that make the kernel signal someone (the owner of SIGIO/SIGURG, the signal used, lease
# and directory notifications); with F_SETSIG(SIGKILL) an owner set to any pid kills it.
FCNTL_DENIED = {"F_SETOWN": 8, "F_SETSIG": 10, "F_SETOWN_EX": 15, "F_SETLEASE": 1024, "F_NOTIFY": 1026}
# ioctl requests with the same effect (socket/file owners, a terminal's process group) or that act on a
# terminal (keystrokes, console, size changes signal its foreground group).
IOCTL_DENIED = {"FIOSETOWN": 0x8901, "SIOCSPGRP": 0x8902, "TIOCSPGRP": 0x5410, "TIOCSCTTY": 0x540E,
                "TIOCSTI": 0x5412, "TIOCSWINSZ": 0x5414, "TIOCLINUX": 0x541C, "TIOCCONS": 0x541D,
                "TIOCSETD": 0x5423}
# ioctl request types (bits 8-15 on every architecture) of filesystem inode operations: flags
# (chattr), fs-verity (makes a file read-only for ever), encryption policies, XFS/btrfs subvolumes,
# clones, versions. Landlock checks ioctls on devices only (ABI 5), never on files and directories.
IOCTL_TYPES_DENIED = {"f": 0x66, "X": 0x58, "btrfs": 0x94, "v": 0x76}
# Must be present in the filter on an architecture that has them, or the layer is not applied.
ESSENTIAL = ("execve", "execveat", "fork", "vfork", "ptrace", "clone", "clone3", "socket", "kill", "fcntl",
             "ioctl", "setpriority", "sched_setaffinity", "pidfd_open", "inotify_add_watch", "chmod",
             "fchmod", "openat", "open")


def available() -> tuple[bool, str]:
    try:
        import pyseccomp  # noqa: F401
    except ImportError:
        return False, "the pyseccomp package is not installed (pip install 'sandbox_kernel[kernel]')"
    except (OSError, RuntimeError) as exc:
        return False, f"libseccomp cannot be loaded ({exc}); install libseccomp2"
    return True, ""


def apply(*, network: bool = False, landlock_abi: int = 0) -> dict:
    """Load the filter into this process (all threads). ``landlock_abi``: the Landlock ABI in effect
    (0: none), whose gaps the filter closes. Returns what took effect; raises on failure."""
    import pyseccomp as sc

    native = sc.Arch.NATIVE
    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.CTL_NNP, 1)
    f.set_attr(sc.Attr.CTL_TSYNC, 1)  # every existing thread (BLAS pools) gets the filter too
    eperm = sc.ERRNO(errno.EPERM)
    added, skipped = [], []

    def rule(action, name, *args):
        if sc.resolve_syscall(native, name) < 0:
            skipped.append(name)
            return
        f.add_rule(action, name, *args)
        if name not in added:
            added.append(name)

    for name in DENIED:
        rule(eperm, name)
    # clone: threads only (CLONE_THREAD set), and no new namespaces.
    rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    for bit in CLONE_NEW_FLAGS:
        rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, bit, bit))
    # clone3 and openat2 pass their flags in memory the filter cannot read: ENOSYS makes glibc and
    # Python use clone and openat, whose flags it can.
    rule(sc.ERRNO(errno.ENOSYS), "clone3")
    rule(sc.ERRNO(errno.ENOSYS), "openat2")

    # Other processes: signals, signal owners, scheduling, priorities, limits.
    me = os.getpid()
    for name in SIGNAL_CALLS:
        rule(eperm, name, sc.Arg(0, sc.NE, me))
    for cmd in FCNTL_DENIED.values():
        for name in ("fcntl", "fcntl64"):
            rule(eperm, name, sc.Arg(1, sc.MASKED_EQ, U32, cmd))
    for req in IOCTL_DENIED.values():
        rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, U32, req))
    for kind in IOCTL_TYPES_DENIED.values():
        rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFF00, kind << 8))
    for name in OWN_PID_ONLY:
        rule(eperm, name, sc.Arg(0, sc.NE, 0))
    # (which, who): only (PRIO_PROCESS, 0). PRIO_USER with who=0 would renice every process of the user.
    for name in ("setpriority", "getpriority"):
        rule(eperm, name, sc.Arg(0, sc.NE, PRIO_PROCESS))
        rule(eperm, name, sc.Arg(1, sc.NE, 0))
    for name in ("ioprio_set", "ioprio_get"):
        rule(eperm, name, sc.Arg(0, sc.NE, IOPRIO_WHO_PROCESS))
        rule(eperm, name, sc.Arg(1, sc.NE, 0))

    # Files. An open that asks for neither read nor write (O_ACCMODE == 3) passes Landlock's open check
    # with no right at all, anywhere; nothing legitimate uses it.
    o_accmode, o_trunc = os.O_ACCMODE, os.O_TRUNC
    gaps = []
    rule(eperm, "open", sc.Arg(1, sc.MASKED_EQ, o_accmode, 3))
    rule(eperm, "openat", sc.Arg(2, sc.MASKED_EQ, o_accmode, 3))
    if landlock_abi < 3:
        # Without Landlock's TRUNCATE right, truncate(path) and a read-only open with O_TRUNC empty
        # files outside the working directory (read-only trees included).
        rule(eperm, "truncate")
        rule(eperm, "truncate64")
        rule(eperm, "open", sc.Arg(1, sc.MASKED_EQ, o_accmode | o_trunc, o_trunc))
        rule(eperm, "openat", sc.Arg(2, sc.MASKED_EQ, o_accmode | o_trunc, o_trunc))
        gaps.append("truncate")
    if landlock_abi < 4:
        gaps.append("tcp")  # socket() is refused below (without a network policy)
    if landlock_abi < 6:
        gaps.append("signals")  # the signal rules above hold on every kernel

    # Sockets. The channel to the kernel is an inherited socketpair, so socket() is never needed.
    if network:
        allowed_families = {socket.AF_INET, socket.AF_INET6, getattr(socket, "AF_NETLINK", 16)}
        for fam in range(0, 64):
            if fam not in allowed_families:
                rule(eperm, "socket", sc.Arg(0, sc.MASKED_EQ, U32, fam))
        # netlink for getaddrinfo's routes only: sock_diag and friends list every socket on the host.
        rule(eperm, "socket", sc.Arg(0, sc.MASKED_EQ, U32, getattr(socket, "AF_NETLINK", 16)),
             sc.Arg(2, sc.NE, NETLINK_ROUTE))
    else:
        rule(eperm, "socket")
    # socketpair: AF_UNIX streams only (asyncio's self-pipe). A datagram pair can sendto() any named or
    # abstract Unix socket on the host, which Landlock does not check before ABI 6 (named: never).
    rule(eperm, "socketpair", sc.Arg(0, sc.NE, socket.AF_UNIX))
    for kind in range(SOCK_TYPE_MASK + 1):
        if kind not in (SOCK_STREAM, SOCK_SEQPACKET):
            rule(eperm, "socketpair", sc.Arg(1, sc.MASKED_EQ, SOCK_TYPE_MASK, kind))

    missing = [n for n in ESSENTIAL if n not in added and sc.resolve_syscall(native, n) >= 0]
    if missing:
        raise OSError(errno.EINVAL, f"seccomp rules missing for {', '.join(missing)}")
    f.load()
    return {
        "filter": "libseccomp",
        "denied": sorted(set(added)),
        "network_sockets": network,
        "landlock_gaps_closed": gaps,
        "action": "EPERM (clone3, openat2: ENOSYS)",
    }
