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
dangerous surfaces. Refused calls fail with an errno (EPERM; ENOSYS for ``clone3`` so glibc falls back
to ``clone``, whose flags the filter can read), so a cell sees a Python ``PermissionError`` instead of
the worker dying. Calls from a foreign architecture kill the worker (libseccomp's default).
"""
from __future__ import annotations

import errno
import os
import socket

CLONE_THREAD = 0x00010000
CLONE_NEW_FLAGS = (0x00000080, 0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                   0x40000000)  # NEWTIME NEWNS NEWCGROUP NEWUTS NEWIPC NEWUSER NEWPID NEWNET
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
U32 = 0xFFFFFFFF

# Refused outright (EPERM). Names unknown on this architecture are skipped (e.g. fork on aarch64).
DENIED = (
    # process creation (clone and clone3 are handled below)
    "execve", "execveat", "fork", "vfork",
    # other processes' memory, tracing, namespaces
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "pidfd_getfd",
    "pidfd_send_signal", "unshare", "setns", "tkill",
    # kernel keyring
    "keyctl", "add_key", "request_key",
    # mounts and root changes
    "mount", "umount2", "umount", "pivot_root", "chroot", "mount_setattr", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick",
    # kernel attack surface with no use in a notebook
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_by_handle_at", "name_to_handle_at", "fanotify_init", "lookup_dcookie", "uselib", "vhangup",
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
# Must be present in the filter on an architecture that has them, or the layer is not applied.
ESSENTIAL = ("execve", "execveat", "fork", "vfork", "ptrace", "clone", "clone3", "socket")


def available() -> tuple[bool, str]:
    try:
        import pyseccomp  # noqa: F401
    except ImportError:
        return False, "the pyseccomp package is not installed (pip install 'sandbox_kernel[kernel]')"
    except (OSError, RuntimeError) as exc:
        return False, f"libseccomp cannot be loaded ({exc}); install libseccomp2"
    return True, ""


def apply(*, network: bool = False) -> dict:
    """Load the filter into this process (all threads). Returns what took effect; raises on failure."""
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
    # clone3 passes its flags in memory the filter cannot read: ENOSYS makes glibc use clone.
    rule(sc.ERRNO(errno.ENOSYS), "clone3")
    # Signals only to this process (the engine's own timer and cancel use tgkill on itself).
    me = os.getpid()
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        rule(eperm, name, sc.Arg(0, sc.NE, me))
    # Other processes' limits, priority and memory placement (same-uid processes such as the kernel).
    rule(eperm, "prlimit64", sc.Arg(0, sc.NE, 0))
    rule(eperm, "setpriority", sc.Arg(1, sc.NE, 0))
    rule(eperm, "ioprio_set", sc.Arg(1, sc.NE, 0))
    rule(eperm, "migrate_pages", sc.Arg(0, sc.NE, 0))
    rule(eperm, "move_pages", sc.Arg(0, sc.NE, 0))
    # Pushing keystrokes into a terminal.
    rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, U32, TIOCSTI))
    rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, U32, TIOCLINUX))
    # Sockets. The channel to the kernel is an inherited socketpair, so socket() is never needed.
    if network:
        allowed_families = {socket.AF_INET, socket.AF_INET6, getattr(socket, "AF_NETLINK", 16)}
        for fam in range(0, 64):
            if fam not in allowed_families:
                rule(eperm, "socket", sc.Arg(0, sc.MASKED_EQ, U32, fam))
    else:
        rule(eperm, "socket")
    rule(eperm, "socketpair", sc.Arg(0, sc.NE, socket.AF_UNIX))
    missing = [n for n in ESSENTIAL if n not in added and sc.resolve_syscall(native, n) >= 0]
    if missing:
        raise OSError(errno.EINVAL, f"seccomp rules missing for {', '.join(missing)}")
    f.load()
    return {
        "filter": "libseccomp",
        "denied": sorted(set(added)),
        "network_sockets": network,
        "action": "EPERM (clone3: ENOSYS)",
    }
