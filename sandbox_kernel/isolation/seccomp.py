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
architecture (i386 through ``int 0x80``, x32) kill the whole worker. It also keeps the worker from
outliving its kernel (``prctl(PR_SET_PDEATHSIG)``) and, without a network policy, from holding
descriptors in flight (``sendmsg``, ``sendmmsg``: SCM_RIGHTS count against a per-user budget). ``prctl``
is the one allow list (``PRCTL_ALLOWED``, in the second filter): its options change the process's own
walls (``PR_SET_DUMPABLE``), and the few a library uses are known.

Arguments are compared as 64-bit values. Every "only this value" rule denies on inequality, so a caller
that puts garbage in the upper half of a 32-bit argument is refused, never let through.

A deny list allows every call its authors never saw. So it fails closed at both ends of time:
* every system call numbered above the highest one reviewed for the architecture (``REVIEWED_MAX``)
  returns ENOSYS (as on a kernel that lacks it, so libc falls back); libseccomp cannot express a range,
  so this is a second filter of seven BPF instructions (plus the prctl allow list), stacked on
  libseccomp's (the kernel applies the stricter verdict of the two);
* a denied name libseccomp does not know (it is older than the call) is resolved from our own table
  (``UNIFIED_NUMBERS``); a name neither knows makes :func:`apply` raise, so the worker does not start,
  rather than leave the call allowed.
"""
from __future__ import annotations

import ctypes
import errno
import os
import socket
import struct
import sys

CLONE_THREAD = 0x00010000
CLONE_NEW_FLAGS = (0x00000080, 0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000,
                   0x40000000)  # NEWTIME NEWNS NEWCGROUP NEWUTS NEWIPC NEWUSER NEWPID NEWNET
U32 = 0xFFFFFFFF
PRIO_PROCESS = 0
IOPRIO_WHO_PROCESS = 1
NETLINK_ROUTE = 0
SOCK_TYPE_MASK = 0xF
SOCK_STREAM, SOCK_SEQPACKET = 1, 5
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SCHED_CORE = 62
LANDLOCK_CREATE_RULESET_FLAGS_NONE = 0  # flags 0 makes a ruleset; VERSION (1) and ERRATA (2) only answer
# prctl options the worker may use (an allow list: every other option fails with EPERM, review 3, B3-4).
# What glibc, Python and the libraries use, and reads of the worker's own state. Left out, among others:
# PR_SET_DUMPABLE (4: would undo protect_process; a dumpable worker's crash runs a '|' core_pattern helper
# as root, whatever RLIMIT_CORE says), PR_SET_PDEATHSIG (1), PR_SET_PTRACER, PR_SET_MM,
# PR_SET_CHILD_SUBREAPER, PR_SET_KEEPCAPS, PR_SET_SECUREBITS, PR_SET_IO_FLUSHER, PR_SCHED_CORE (62),
# PR_SET_MEMORY_MERGE (67: KSM merges pages with other processes', a side channel on their contents),
# PR_SET_SYSCALL_USER_DISPATCH, PR_SET_TSC, PR_MCE_KILL, PR_SET_SECCOMP, perf events, options newer
# than this list.
PRCTL_ALLOWED = {
    # reads of the worker's own state
    "PR_GET_PDEATHSIG": 2, "PR_GET_DUMPABLE": 3, "PR_GET_KEEPCAPS": 7, "PR_GET_NAME": 16, "PR_GET_SECCOMP": 21,
    "PR_CAPBSET_READ": 23, "PR_GET_TSC": 25, "PR_GET_SECUREBITS": 27, "PR_GET_TIMERSLACK": 30,
    "PR_MCE_KILL_GET": 34, "PR_GET_CHILD_SUBREAPER": 37, "PR_GET_NO_NEW_PRIVS": 39, "PR_GET_TID_ADDRESS": 40,
    "PR_GET_THP_DISABLE": 42, "PR_GET_FP_MODE": 46, "PR_SVE_GET_VL": 51, "PR_GET_SPECULATION_CTRL": 52,
    "PR_GET_TAGGED_ADDR_CTRL": 56, "PR_GET_IO_FLUSHER": 58, "PR_PAC_GET_ENABLED_KEYS": 61, "PR_SME_GET_VL": 64,
    "PR_GET_MDWE": 66, "PR_GET_MEMORY_MERGE": 68, "PR_RISCV_V_GET_CONTROL": 70,
    "PR_GET_SHADOW_STACK_STATUS": 74, "PR_GET_AUXV": 0x41555856,
    # the worker's own threads and memory: thread names (pthread_setname_np), timer slack, VMA names
    # (glibc's decorated maps), transparent huge pages off, CPU features glibc and runtimes set
    "PR_SET_NAME": 15, "PR_SET_TIMERSLACK": 29, "PR_SET_VMA": 0x53564d41, "PR_SET_THP_DISABLE": 41,
    "PR_SVE_SET_VL": 50, "PR_SET_SPECULATION_CTRL": 53, "PR_PAC_RESET_KEYS": 54, "PR_SET_TAGGED_ADDR_CTRL": 55,
    "PR_PAC_SET_ENABLED_KEYS": 60, "PR_SME_SET_VL": 63, "PR_RISCV_V_SET_CONTROL": 69,
    "PR_RISCV_SET_ICACHE_FLUSH_CTX": 71, "PR_SET_SHADOW_STACK_STATUS": 75, "PR_LOCK_SHADOW_STACK_STATUS": 76,
    # restricting itself further (capabilities are already empty). Not PR_SET_SECCOMP (22): every filter
    # a thread stacks is kernel memory (see future_calls_program), as seccomp(SET_MODE_FILTER) is refused
    "PR_SET_NO_NEW_PRIVS": 38, "PR_CAPBSET_DROP": 24, "PR_CAP_AMBIENT": 47, "PR_SET_MDWE": 65,
}
SCMP_UNKNOWN_NAME = -1  # libseccomp: no such name; its other negative answers: not on this architecture

# Architectures the kernel level supports, by libseccomp token (= AUDIT_ARCH_*): the highest system
# call number reviewed for each. Every call above it is refused (ENOSYS). Review the calls a new
# kernel adds (deny, or allow because it reaches nothing outside the worker), add them to
# UNIFIED_NUMBERS, then raise the number.
REVIEWED_MAX = {
    0xC000003E: 469,  # x86_64 (Linux 6.17: file_setattr)
    0xC00000B7: 469,  # aarch64
    0xC00000F3: 469,  # riscv64
}
# Since Linux 5.1 new calls get one number on every architecture above (the unified table, from 424).
# Every call from there to REVIEWED_MAX and the decision taken for it; the numbers resolve a name when
# libseccomp is older than the call (2.5.4 stops at 456). Allowed calls reach nothing outside the
# worker: its own memory, futexes, its own LSM label, files it may open, stat-like reads.
UNIFIED_NUMBERS = {
    "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "pidfd_open": 434,                                      # denied (DENIED)
    "clone3": 435,                                                         # ENOSYS
    "close_range": 436,                                                    # allowed
    "openat2": 437,                                                        # ENOSYS
    "pidfd_getfd": 438,                                                    # denied
    "faccessat2": 439,                                                     # allowed
    "process_madvise": 440,                                                # denied
    "epoll_pwait2": 441,                                                   # allowed
    "mount_setattr": 442, "quotactl_fd": 443,                              # denied
    "landlock_create_ruleset": 444,                                        # version queries only
    "landlock_add_rule": 445, "landlock_restrict_self": 446,               # denied (kernel memory)
    "memfd_secret": 447,                                                   # denied
    "process_mrelease": 448,                                               # denied
    "futex_waitv": 449, "set_mempolicy_home_node": 450, "cachestat": 451,  # allowed
    "fchmodat2": 452,                                                      # denied
    "map_shadow_stack": 453, "futex_wake": 454, "futex_wait": 455,         # allowed
    "futex_requeue": 456,                                                  # allowed
    "statmount": 457, "listmount": 458,                                    # denied
    "lsm_get_self_attr": 459,                                              # allowed
    "lsm_set_self_attr": 460,                                              # denied
    "lsm_list_modules": 461, "mseal": 462,                                 # allowed
    "setxattrat": 463,                                                     # denied
    "getxattrat": 464, "listxattrat": 465,                                 # allowed (as getxattr)
    "removexattrat": 466, "open_tree_attr": 467,                           # denied
    "file_getattr": 468,                                                   # allowed (as stat)
    "file_setattr": 469,                                                   # denied
}

# Refused outright (EPERM). Names that do not exist on this architecture are skipped (fork on
# aarch64, fcntl64 on x86_64); a name nobody can resolve stops the worker from starting.
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
    "open_tree_attr", "fsopen", "fsconfig", "fsmount", "fspick",
    # the mount table (what /proc/self/mountinfo, which Landlock withholds, would say) and LSM labels
    "statmount", "listmount", "lsm_set_self_attr",
    # file metadata: Landlock has no right for it, so these would change files anywhere the worker can
    # name (permissions, owner, times, extended attributes), read-only trees included
    "chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "fchown32",
    "chown32", "lchown32", "utime", "utimes", "futimesat", "utimensat", "utimensat_time64", "setxattr",
    "lsetxattr", "fsetxattr", "setxattrat", "removexattr", "lremovexattr", "fremovexattr", "removexattrat",
    # symlinks: the working directory is the notebook's, and the Jupyter server (unconfined) follows a
    # link planted there when it saves the notebook or a checkpoint (writes outside); Landlock's
    # MAKE_SYM is not granted either, this holds without Landlock too
    "symlink", "symlinkat",
    # watching directories Landlock forbids reveals the names of files created there
    "file_setattr",  # inode flags (chattr) by path, the system call FS_IOC_SETFLAGS stands for
    "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark",
    # kernel attack surface with no use in a notebook
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    # the machine's asynchronous-I/O budget (/proc/sys/fs/aio-max-nr, one counter for every process of
    # the host): a worker that reserved it would make every other process's io_setup fail
    "io_setup", "io_destroy", "io_submit", "io_cancel", "io_getevents", "io_pgetevents",
    # memory the address-space limit does not count: a memfd's pages written with write() (never
    # mapped) are in no RSS and outside RLIMIT_AS; secret memory is taken out of the kernel's own map
    "memfd_create", "memfd_secret",
    # the host's task count, loads and uptime (sysinfo().procs watches other processes start and end)
    "sysinfo",
    # page references in kernel objects: vmsplice puts references to the worker's own pages into a pipe,
    # and one 4 kB page of a transparent huge page holds its whole 2 MB folio after munmap (review 3,
    # B3-1: 48 pipes held 1.2 GB under a 512 MB limit, in no RSS); splice, tee and sendfile move such
    # references (and page-cache folios of files) on into pipes and sockets. Python falls back to
    # read/write when sendfile fails (shutil.copyfile, socket.sendfile).
    "vmsplice", "splice", "tee", "sendfile", "sendfile64",
    # Landlock after the worker's own ruleset is applied (this filter is loaded after it): every rule is
    # unreclaimable kernel memory (one per TCP port per ruleset, review 3, B3-2); version queries stay
    "landlock_add_rule", "landlock_restrict_self",
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
# POSIX record locks and open-file-description locks: one kernel object (struct file_lock, unreclaimable)
# per byte range, nothing bounds their number (review 3, B3-3: 300,000 locks = 55 MB in 2 s), and a read
# lock on a readable file (another program's SQLite database) blocks its writers. flock() stays: one
# lock per open file at most, bounded by the descriptor limit (HDF5 uses it). sqlite3 is not reachable
# from a cell. The 64-bit-offset commands (12-14) are the same commands on 32-bit kernels.
FCNTL_LOCKS = {"F_SETLK": 6, "F_SETLKW": 7, "F_SETLK64": 13, "F_SETLKW64": 14, "F_OFD_SETLK": 37,
               "F_OFD_SETLKW": 38}
# ioctl requests with the same effect (socket/file owners, a terminal's process group) or that act on a
# terminal (keystrokes, console, size changes signal its foreground group).
IOCTL_DENIED = {"FIOSETOWN": 0x8901, "SIOCSPGRP": 0x8902, "TIOCSPGRP": 0x5410, "TIOCSCTTY": 0x540E,
                "TIOCSTI": 0x5412, "TIOCSWINSZ": 0x5414, "TIOCLINUX": 0x541C, "TIOCCONS": 0x541D,
                "TIOCSETD": 0x5423}
# ioctl request types (bits 8-15 on every architecture) of filesystem inode operations: flags
# (chattr), fs-verity (makes a file read-only for ever), encryption policies, XFS/btrfs subvolumes,
# clones, versions. Landlock checks ioctls on devices only (ABI 5), never on files and directories.
IOCTL_TYPES_DENIED = {"f": 0x66, "X": 0x58, "btrfs": 0x94, "v": 0x76}
# Kernel memory no RSS shows and RLIMIT_AS does not bound: a pipe's buffer grown with F_SETPIPE_SZ (up to
# pipe-max-size each), and without a network policy a socket's buffers grown with SO_SNDBUF/SO_RCVBUF:
# 400 socketpairs with 8 MB send buffers held 3.1 GB of queued data for a worker of 30 MB RSS under a
# 512 MB limit (net.core.wmem_max 4 MB). At the defaults a pipe holds 64 kB and a socket wmem_default.
F_SETPIPE_SZ = 1031
SOL_SOCKET = 1
SOCKET_BUFFER_OPTIONS = {"SO_SNDBUF": 7, "SO_RCVBUF": 8, "SO_SNDBUFFORCE": 32, "SO_RCVBUFFORCE": 33}
# MSG_ZEROCOPY (TCP, UDP: with a network policy) sends from the caller's pages by reference: after munmap
# they stay pinned until the peer acknowledges, a whole huge page for each 4 kB (as vmsplice, B3-1).
SO_ZEROCOPY = 60
# KSM: pages marked mergeable are merged with identical pages of other processes, and the time a write to
# a merged page takes tells whether another process holds the same contents (a side channel on them);
# PR_SET_MEMORY_MERGE is off the prctl list for the same reason.
MADV_MERGEABLE = 12
# mknod file types other than a regular file: FIFOs (a FIFO in the notebook's place hangs the Jupyter
# server's next read of it), devices and sockets (Landlock's MAKE_* rights are not granted either).
MKNOD_TYPES_DENIED = {"S_IFIFO": 0o010000, "S_IFCHR": 0o020000, "S_IFBLK": 0o060000, "S_IFSOCK": 0o140000}
S_IFMT = 0o170000
# ioctl request type of socket and network-device ioctls (SIOCGIFCONF, SIOCGIFNAME, SIOCGIFHWADDR,
# SIOCETHTOOL ...): any socket, an AF_UNIX socketpair included, answers them for the network namespace
# (interfaces, addresses, MAC addresses). Refused without a network policy.
IOCTL_SOCKET_TYPE = 0x89
# System calls whose first argument is a clock id. A negative id with bit 2 clear names a process's CPU
# clock by pid ((~pid) << 3 | type): the kernel lets anyone read any process's (its CPU time, whether it
# exists) and set a timer on it. All are refused: a filter rule cannot compare one argument twice, so
# this process's own by pid goes too (glibc's clock_getcpuclockid); CLOCK_PROCESS_CPUTIME_ID (what
# time.process_time reads) and thread clocks (bit 2 set; the kernel allows them for this thread group
# only) stay.
CPUCLOCK_PERTHREAD = 4
CLOCK_CALLS = ("clock_gettime", "clock_getres", "clock_nanosleep", "timer_create", "clock_gettime64",
               "clock_getres_time64", "clock_nanosleep_time64")
# Must be present in the filter on an architecture that has them, or the layer is not applied.
ESSENTIAL = ("execve", "execveat", "fork", "vfork", "ptrace", "clone", "clone3", "socket", "kill", "fcntl",
             "ioctl", "setpriority", "sched_setaffinity", "pidfd_open", "inotify_add_watch", "chmod",
             "fchmod", "openat", "open", "prctl", "setxattrat", "file_setattr", "symlinkat", "mknodat", "memfd_create",
             "io_setup", "sysinfo", "vmsplice", "splice", "tee", "sendfile", "landlock_add_rule",
             "landlock_create_ruleset")


def available() -> tuple[bool, str]:
    try:
        import pyseccomp  # noqa: F401
    except ImportError:
        return False, (f"the pyseccomp package is not installed for this Python; install it with "
                       f"'{sys.executable} -m pip install pyseccomp'")
    except (OSError, RuntimeError) as exc:
        return False, (f"libseccomp cannot be loaded ({exc}); install the system's libseccomp (Debian, Ubuntu: "
                       "apt-get install libseccomp2; Fedora, RHEL: dnf install libseccomp; Alpine: apk add "
                       "libseccomp)")
    return True, ""


def apply(*, network: bool = False, landlock_abi: int = 0, max_syscall: int | None = None) -> dict:
    """Load the filter into this process (all threads). ``landlock_abi``: the Landlock ABI in effect
    (0: none), whose gaps the filter closes. ``max_syscall``: refuse every call above this number
    (default and ceiling: REVIEWED_MAX for the architecture; lower values are for tests). Returns what
    took effect; raises on failure, including a denied name that cannot be resolved."""
    import pyseccomp as sc

    native = sc.Arch.NATIVE
    token = sc.system_arch()
    if token not in REVIEWED_MAX:
        raise OSError(errno.EINVAL, f"no reviewed system-call table for this architecture ({token:#x})")
    reviewed = REVIEWED_MAX[token]
    highest = reviewed if max_syscall is None else min(int(max_syscall), reviewed)
    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.CTL_NNP, 1)
    f.set_attr(sc.Attr.CTL_TSYNC, 1)  # every existing thread (BLAS pools) gets the filter too
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)  # i386 (int 0x80) and x32 calls: the whole worker
    eperm = sc.ERRNO(errno.EPERM)
    added, own_table = [], []

    def rule(action, name, *args):
        nr = number(sc, native, name)
        if nr is None:
            return  # no such call on this architecture
        f.add_rule(action, nr, *args)
        if name not in added:
            added.append(name)
        if sc.resolve_syscall(native, name) < 0 and name not in own_table:
            own_table.append(name)

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
    # The parent-death signal (SIGKILL when the kernel dies) was set before any cell ran; changing it
    # would let the worker outlive its kernel.
    rule(eperm, "prctl", sc.Arg(0, sc.MASKED_EQ, U32, PR_SET_PDEATHSIG))
    # Core scheduling cookies are shared with a process named by pid (PR_SCHED_CORE_SHARE_TO/FROM): a
    # scheduling change to another process, held back only by a ptrace-mode check (review 2, not filed).
    rule(eperm, "prctl", sc.Arg(0, sc.MASKED_EQ, U32, PR_SCHED_CORE))
    # Non-dumpable (protect_process) must stay: the allow list (future_calls_program) refuses it too.
    rule(eperm, "prctl", sc.Arg(0, sc.MASKED_EQ, U32, PR_SET_DUMPABLE))
    # landlock_create_ruleset makes a ruleset only with flags 0 (flags is 32 bits: the kernel ignores
    # the upper half, so does this rule)
    rule(eperm, "landlock_create_ruleset", sc.Arg(2, sc.MASKED_EQ, U32, LANDLOCK_CREATE_RULESET_FLAGS_NONE))
    # A second listener would take the host's place in deciding the worker's new tasks (the kernel
    # allows one per filter chain already; this holds if that ever changes).
    rule(eperm, "seccomp", sc.Arg(1, sc.MASKED_EQ, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                                  SECCOMP_FILTER_FLAG_NEW_LISTENER))

    # Other processes: signals, signal owners, scheduling, priorities, limits.
    me = os.getpid()
    for name in SIGNAL_CALLS:
        rule(eperm, name, sc.Arg(0, sc.NE, me))
    for cmd in FCNTL_DENIED.values():
        for name in ("fcntl", "fcntl64"):
            rule(eperm, name, sc.Arg(1, sc.MASKED_EQ, U32, cmd))
    for name in ("fcntl", "fcntl64"):
        rule(eperm, name, sc.Arg(1, sc.MASKED_EQ, U32, F_SETPIPE_SZ))
        for cmd in FCNTL_LOCKS.values():
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

    for name in CLOCK_CALLS:
        rule(eperm, name, sc.Arg(0, sc.MASKED_EQ, 0x80000000 | CPUCLOCK_PERTHREAD, 0x80000000))
    for kind in MKNOD_TYPES_DENIED.values():
        rule(eperm, "mknod", sc.Arg(1, sc.MASKED_EQ, S_IFMT, kind))
        rule(eperm, "mknodat", sc.Arg(2, sc.MASKED_EQ, S_IFMT, kind))

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
        # Descriptors in flight (SCM_RIGHTS) count against the user's limit, shared with every other
        # process of the user; the filter cannot read a message's control data, so without a network
        # the calls that carry it go. The channel uses send/recv (sendto/recvfrom).
        rule(eperm, "sendmsg")
        rule(eperm, "sendmmsg")
        # The only sockets are socketpairs (connected AF_UNIX): bind() would only give one a name, in
        # the abstract namespace the worker shares with the host (squatting X11's, D-Bus's, any
        # program's name: their bind fails with EADDRINUSE); named ones Landlock refuses (MAKE_SOCK).
        rule(eperm, "bind")
        for option in SOCKET_BUFFER_OPTIONS.values():
            rule(eperm, "setsockopt", sc.Arg(1, sc.MASKED_EQ, U32, SOL_SOCKET), sc.Arg(2, sc.MASKED_EQ, U32, option))
        rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFF00, IOCTL_SOCKET_TYPE << 8))
    rule(eperm, "setsockopt", sc.Arg(1, sc.MASKED_EQ, U32, SOL_SOCKET), sc.Arg(2, sc.MASKED_EQ, U32, SO_ZEROCOPY))
    rule(eperm, "madvise", sc.Arg(2, sc.MASKED_EQ, U32, MADV_MERGEABLE))
    # socketpair: AF_UNIX streams only (asyncio's self-pipe). A datagram pair can sendto() any named or
    # abstract Unix socket on the host, which Landlock does not check before ABI 6 (named: never).
    rule(eperm, "socketpair", sc.Arg(0, sc.NE, socket.AF_UNIX))
    for kind in range(SOCK_TYPE_MASK + 1):
        if kind not in (SOCK_STREAM, SOCK_SEQPACKET):
            rule(eperm, "socketpair", sc.Arg(1, sc.MASKED_EQ, SOCK_TYPE_MASK, kind))

    missing = [n for n in ESSENTIAL if n not in added and number(sc, native, n) is not None]
    if missing:
        raise OSError(errno.EINVAL, f"seccomp rules missing for {', '.join(missing)}")
    f.load()
    load_program(future_calls_program(token, highest, number(sc, native, "prctl"), PRCTL_ALLOWED.values(),
                                      number(sc, native, "seccomp")), flags=SECCOMP_FILTER_FLAG_TSYNC)
    return {
        "filter": "libseccomp",
        "denied": sorted(set(added)),
        "resolved_by_own_table": sorted(own_table),
        "max_syscall": highest,
        "network_sockets": network,
        "landlock_gaps_closed": gaps,
        "prctl_allowed": sorted(PRCTL_ALLOWED),
        "action": f"EPERM (clone3, openat2 and every call above {highest}: ENOSYS)",
    }


def number(sc, native, name: str) -> int | None:
    """The system call's number on this architecture; None if it has none here. Raises if neither
    libseccomp nor UNIFIED_NUMBERS knows the name (fail closed: never a silently skipped rule)."""
    nr = sc.resolve_syscall(native, name)
    own = UNIFIED_NUMBERS.get(name)
    if nr >= 0:
        if own is not None and own != nr:
            raise OSError(errno.EINVAL, f"system call {name}: libseccomp says {nr}, our table {own}")
        return nr
    if own is not None:
        return own
    if nr != SCMP_UNKNOWN_NAME:
        return None
    raise OSError(errno.EINVAL, f"system call {name!r} is known neither to libseccomp nor to the table of "
                                "reviewed calls, so it cannot be refused")


# -- the second filter: every call above the reviewed number -------------------------------------------
# struct seccomp_data: nr at offset 0, arch at 4. Classic BPF opcodes and seccomp return values.
_LD_ABS_W, _JEQ_K, _JGT_K, _RET_K = 0x20, 0x15, 0x25, 0x06
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 1 << 3
SECCOMP_RET_USER_NOTIF = 0x7FC00000
PR_SET_NO_NEW_PRIVS = 38


def future_calls_program(arch: int, highest: int, prctl_nr: int | None = None, prctl_allowed=(),
                         seccomp_nr: int | None = None) -> bytes:
    """Seven instructions: a call of another architecture kills the process (as libseccomp's filter
    does); a call numbered above ``highest`` gets ENOSYS; anything else is left to the other filter.
    x32 numbers (bit 30 on x86_64) get ENOSYS here and a kill from libseccomp's filter: the kill wins.

    With ``prctl_nr`` and ``seccomp_nr`` (what the worker loads: this is its last filter), also
    (len(prctl_allowed) + 7 more instructions):
    * the prctl allow list: prctl with an option outside ``prctl_allowed`` gets EPERM;
    * no further filter: seccomp(SECCOMP_SET_MODE_FILTER) gets EPERM. Each thread could stack its own
      filters up to the kernel's 32,768 instructions a chain, kernel memory outside the limit (review 3:
      198 threads held ~450 MB); the worker's own filters are loaded by then.
    Both first arguments are 32-bit (int option, unsigned int op): the kernel reads their low 32 bits
    (offset 16 on the little-endian architectures of REVIEWED_MAX), so does this program. libseccomp
    cannot express "none of these", and a refusal of seccomp() in its filter would refuse this one."""
    if prctl_nr is None:
        insns = [
            (_LD_ABS_W, 0, 0, 4),                                   # 0: A = arch
            (_JEQ_K, 0, 4, arch),                                   # 1: native? 2 : 6
            (_LD_ABS_W, 0, 0, 0),                                   # 2: A = nr
            (_JGT_K, 1, 0, highest),                                # 3: nr > highest? 5 : 4
            (_RET_K, 0, 0, SECCOMP_RET_ALLOW),                      # 4
            (_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),       # 5
            (_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),               # 6
        ]
        return b"".join(struct.pack("=HBBI", *insn) for insn in insns)
    if seccomp_nr is None:
        raise ValueError("the prctl allow list goes with the seccomp refusal: pass seccomp_nr")
    values = sorted({int(v) & U32 for v in prctl_allowed})
    n = len(values)
    if n > 240:
        raise ValueError("too many prctl options for one jump")
    # 9+n: EPERM, 10+n: ALLOW, 11+n: ENOSYS, 12+n: KILL
    insns = [
        (_LD_ABS_W, 0, 0, 4),                                       # 0: A = arch
        (_JEQ_K, 0, n + 10, arch),                                  # 1: native? 2 : kill
        (_LD_ABS_W, 0, 0, 0),                                       # 2: A = nr
        (_JGT_K, n + 7, 0, highest),                                # 3: nr > highest? enosys : 4
        (_JEQ_K, 0, 2, int(seccomp_nr)),                            # 4: seccomp? 5 : 7
        (_LD_ABS_W, 0, 0, 16),                                      # 5: A = op (low 32 bits)
        (_JEQ_K, n + 2, n + 3, SECCOMP_SET_MODE_FILTER),            # 6: a new filter? eperm : allow
        (_JEQ_K, 0, n + 2, int(prctl_nr)),                          # 7: prctl? 8 : allow
        (_LD_ABS_W, 0, 0, 16),                                      # 8: A = option (low 32 bits)
    ]
    for i, value in enumerate(values):                              # 9 .. 8+n: allowed? allow
        insns.append((_JEQ_K, n - i, 0, value))
    insns += [(_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM),      # 9+n
              (_RET_K, 0, 0, SECCOMP_RET_ALLOW),                    # 10+n
              (_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS),     # 11+n
              (_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS)]             # 12+n
    return b"".join(struct.pack("=HBBI", *insn) for insn in insns)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def load_program(program: bytes, *, flags: int = 0) -> None:
    """Install a classic BPF seccomp program (8 bytes per instruction) on this process."""
    import pyseccomp as sc

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    nr = sc.resolve_syscall(sc.Arch.NATIVE, "seccomp")
    r = libc.syscall(ctypes.c_long(nr), ctypes.c_long(SECCOMP_SET_MODE_FILTER), ctypes.c_long(flags),
                     ctypes.byref(prog))
    if r < 0 or (r > 0 and not flags & SECCOMP_FILTER_FLAG_NEW_LISTENER):
        e = ctypes.get_errno() if r < 0 else errno.EBUSY  # TSYNC: r is a thread that could not sync
        raise OSError(e, f"seccomp: loading one of the worker's own filters: {os.strerror(e)}")
    return int(r)  # NEW_LISTENER: the listener's descriptor


# -- the task count: every new task is the host's decision ----------------------------------------------
# A thread is a task: it takes a pid of the host and kernel memory, whatever its stack (a raw clone can
# share one), so neither RLIMIT_AS nor anything else in the worker bounds their number, and RLIMIT_NPROC
# counts every process of the user (and is ignored for root). So the worker hands the host a seccomp
# listener before it starts any thread: every clone waits for the kernel process, which counts the
# worker's tasks (/proc/<pid>/status) and lets it proceed or fails it with EAGAIN (process.py). A task
# may hold only one listener in its filter chain, so no cell can install its own in front of the host's;
# the main filter refuses a new listener anyway. Calls the main filter refuses (clone3, a process) never
# reach the host: a refusal (ERRNO) takes precedence over USER_NOTIF.
TASK_CALLS = ("clone", "clone3", "fork", "vfork")


def tasks_program(arch: int, numbers) -> bytes:
    """Calls in ``numbers`` of the native architecture go to the listener; everything else is allowed
    (left to the other filters)."""
    n = len(numbers)
    insns = [(_LD_ABS_W, 0, 0, 4), (_JEQ_K, 0, n + 1, arch), (_LD_ABS_W, 0, 0, 0)]
    for i, nr in enumerate(numbers):
        insns.append((_JEQ_K, n - i, 0, nr))
    insns += [(_RET_K, 0, 0, SECCOMP_RET_ALLOW), (_RET_K, 0, 0, SECCOMP_RET_USER_NOTIF)]
    return b"".join(struct.pack("=HBBI", *insn) for insn in insns)


def supervise_tasks(sock_fd: int) -> dict:
    """Install the task filter on this (still single-threaded) process and hand its listener to the host
    through the inherited socket ``sock_fd``; no copy stays here. Raises when the kernel cannot."""
    import pyseccomp as sc

    token = sc.system_arch()
    native = sc.Arch.NATIVE
    numbers = [nr for nr in (number(sc, native, n) for n in TASK_CALLS) if nr is not None]
    sock = socket.socket(fileno=sock_fd)
    try:
        # The host lets a clone proceed with SECCOMP_USER_NOTIF_FLAG_CONTINUE (Linux 5.5); on an older
        # kernel every thread would wait for an answer that cannot be given.
        import re

        match = re.match(r"(\d+)\.(\d+)", os.uname().release)
        if match is None or (int(match[1]), int(match[2])) < (5, 5):
            raise OSError(errno.ENOSYS, f"Linux {os.uname().release} cannot let a supervised clone proceed "
                                        "(SECCOMP_USER_NOTIF_FLAG_CONTINUE needs 5.5)")
        listener = load_program(tasks_program(token, numbers), flags=SECCOMP_FILTER_FLAG_NEW_LISTENER)
        try:
            socket.send_fds(sock, [b"T"], [listener])
        finally:
            os.close(listener)
    finally:
        sock.close()
    return {"supervised": True, "calls": [n for n in TASK_CALLS if number(sc, native, n) is not None]}
