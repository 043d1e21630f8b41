"""The `kernel` level when the cell owns the worker: every promise of the default level must hold even
if the cell runs arbitrary native code inside the worker.

Cells run as plain Python in a real worker (RogueEngine: the gates are out of the picture, ctypes and
raw system calls are in), at every Landlock ABI from 1 to the host's (the worker option
``landlock_abi``), and without Landlock at all (degraded mode, which must say so). One worker per ABI
serves every test of this module. Each test performs the real attack and checks that it failed AND
that nothing happened: no file read, written or changed outside the working directory, no connection,
no process, no signal, no scheduling change to another process, no other process's facts. The same
attacks succeed at level `process` (test_breach_controls.py), so the failures here are the layers'.
"""
import os
import signal
import stat
import time

import pytest

from isolation_support import (Listener, Run, UnixDatagramServer, Victim, breach_worker, kernel_level_problem,
                               rogue_policy)

PROBLEM = kernel_level_problem()
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=f"kernel level unavailable: {PROBLEM}")

if PROBLEM is None:
    from sandbox_kernel.isolation import landlock

    HOST_ABI = landlock.abi_version()
else:
    HOST_ABI = 0
# 0: Landlock unavailable (the worker runs in degraded mode, seccomp and rlimits only).
ABIS = list(range(1, HOST_ABI + 1)) + [0]


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    root = tmp_path_factory.mktemp("breach")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET-HOST-DATA")
    readonly = root / "readonly"  # granted read-only (extra_read), like site-packages
    readonly.mkdir()
    s = {"root": root, "outside": outside, "readonly": readonly, "listener": Listener(),
         "dgram": UnixDatagramServer(root), "secret": outside / "secret.txt"}
    yield s
    s["listener"].close()
    s["dgram"].close()


@pytest.fixture(scope="module", params=ABIS, ids=lambda a: f"abi{a}" if a else "no-landlock")
def rogue(request, scene, tmp_path_factory):
    abi = request.param
    workdir = tmp_path_factory.mktemp(f"rogue-abi{abi}")
    b = breach_worker("kernel", rogue_policy(limits={"memory_mb": 512, "timeout": 10.0}), workdir,
                      landlock_abi=abi, degraded=(abi == 0), extra_read=[scene["readonly"]])
    b.abi = abi
    b.workdir_path = workdir
    assert b.status()["worker"]["state"] == "ready", b.status()
    yield b
    b.shutdown()


@pytest.fixture
def victim(scene):
    v = Victim(scene["root"])
    yield v
    v.close()


@pytest.fixture
def canary(scene, request):
    """A fresh file outside the working directory, and one inside a read-only granted tree."""
    name = request.node.name.replace("[", "-").replace("]", "")
    files = {}
    for where in ("outside", "readonly"):
        p = scene[where] / f"{name}.txt"
        p.write_text("original")
        os.chmod(p, 0o644)
        os.utime(p, (1_000_000_000, 1_000_000_000))
        files[where] = p
    return files


def attempt(backend, source):
    """Run an attack cell; it must fail (an exception in the cell). Returns the run."""
    r = Run(backend, source)
    assert not r.ok, f"the attack succeeded: {source!r} -> {r.text()!r} {r.stdout()!r}"
    return r


def unchanged(path):
    st = os.stat(path)
    assert path.read_text() == "original", f"{path} was written"
    assert stat.S_IMODE(st.st_mode) == 0o644, f"{path} mode changed to {oct(st.st_mode)}"
    assert int(st.st_mtime) == 1_000_000_000, f"{path} times changed"
    assert st.st_uid == os.getuid()
    try:
        assert os.listxattr(path) == [], f"{path} has new xattrs {os.listxattr(path)}"
    except OSError:
        pass  # a filesystem without xattrs


def needs_landlock(rogue):
    if rogue.abi == 0:
        pytest.skip("without Landlock the worker's files are not confined; test_status_says_which_abi_is_"
                    "in_effect_or_that_the_worker_is_degraded checks that status says so")


# -- the record ----------------------------------------------------------------------------------------

def test_status_says_which_abi_is_in_effect_or_that_the_worker_is_degraded(rogue):
    layers = rogue.status()["os_layers"]
    seccomp = layers["details"]["seccomp"]
    assert seccomp["active"]
    if rogue.abi == 0:  # explicit and visible: %sandbox_status and the reply metadata show these fields
        assert layers["degraded"] is True and layers["failed"] == ["landlock"]
        assert "landlock_abi=0" in layers["details"]["landlock"]["error"]
        assert sorted(layers["active"]) == ["capabilities", "rlimits", "seccomp"]
        assert "truncate" in seccomp["landlock_gaps_closed"]
        return
    ll = layers["details"]["landlock"]
    assert ll["active"] and ll["abi"] == rogue.abi and ll["host_abi"] == HOST_ABI
    assert layers["degraded"] is False and layers["failed"] == []
    assert ll["tcp"] is (rogue.abi >= 4)
    assert ("signal" in ll["scoped"]) is (rogue.abi >= 6)
    assert ("truncate" in seccomp["landlock_gaps_closed"]) is (rogue.abi < 3)


# -- files ---------------------------------------------------------------------------------------------

def test_reading_outside_the_workdir_fails(rogue, scene):
    needs_landlock(rogue)
    for path in (scene["secret"], "/etc/passwd", os.path.expanduser("~/.bashrc"), scene["outside"]):
        r = attempt(rogue, f"import os\np = {str(path)!r}\nopen(p).read() if os.path.isfile(p) else os.listdir(p)")
        assert "TOP-SECRET" not in str(r.events)


def test_writing_creating_truncating_outside_fails_and_nothing_changes(rogue, scene, canary):
    needs_landlock(rogue)
    new = scene["outside"] / f"created-abi{rogue.abi}.txt"
    for target in canary.values():
        t = str(target)
        for cell in (f"open({t!r}, 'w').write('PWNED')",
                     f"open({t!r}, 'a').write('PWNED')",
                     f"os.truncate({t!r}, 0)",
                     f"os.close(os.open({t!r}, os.O_RDONLY | os.O_TRUNC))",  # Landlock < 3: no TRUNCATE
                     f"os.close(os.open({t!r}, 3 | os.O_TRUNC))",            # asks for no right at all
                     f"os.rename({t!r}, 'stolen')",
                     f"os.link({t!r}, 'hardlink')\nopen('hardlink', 'w').write('PWNED')",
                     f"os.unlink({t!r})"):
            attempt(rogue, cell)
        unchanged(target)
    attempt(rogue, f"open({str(new)!r}, 'w').write('x')")
    assert not new.exists()


def test_metadata_outside_cannot_change(rogue, canary):
    """chmod, chown, utime, xattrs, inode flags: Landlock has no right for any of them (at any ABI)."""
    needs_landlock(rogue)
    for target in canary.values():
        t = str(target)
        for cell in (f"os.chmod({t!r}, 0o777)",
                     f"os.chmod({t!r}, 0o000)",
                     f"os.chown({t!r}, os.getuid(), os.getgid())",
                     f"os.utime({t!r}, (0, 0))",
                     f"os.setxattr({t!r}, 'user.pwned', b'1')",
                     f"fd = os.open({t!r}, 3)\nos.fchmod(fd, 0o777)",                   # no-right open
                     f"fd = os.open({t!r}, os.O_RDONLY)\nos.fchmod(fd, 0o777)",
                     f"fd = os.open({t!r}, os.O_RDONLY)\nos.utime(fd, (0, 0))",
                     f"fd = os.open({t!r}, os.O_RDONLY)\nos.setxattr(fd, 'user.pwned', b'1')",
                     # FS_IOC_SETFLAGS (chattr +d), FS_IOC_ENABLE_VERITY: ioctls Landlock never checks on files
                     f"fd = os.open({t!r}, os.O_RDONLY)\nfcntl.ioctl(fd, 0x40086602, struct.pack('l', 0x40))",
                     f"fd = os.open({t!r}, os.O_RDONLY)\nfcntl.ioctl(fd, 0x40806685, bytes(128))"):
            attempt(rogue, cell)
        unchanged(target)


def test_symlinks_do_not_lead_outside(rogue, scene):
    needs_landlock(rogue)
    r = attempt(rogue, f"import os\nif not os.path.lexists('ln'): os.symlink({str(scene['secret'])!r}, 'ln')\n"
                       "open('ln').read()")
    assert "TOP-SECRET" not in str(r.events)


def test_the_workdir_keeps_working(rogue):
    """Positive control: inside the working directory files, lazy imports and BLAS threads work."""
    r = Run(rogue, "open('inside.txt', 'w').write('ok')\nos.rename('inside.txt', 'moved.txt')\n"
                   "import numpy as np, scipy.stats\na = np.random.rand(300, 300)\n"
                   "(open('moved.txt').read(), float(scipy.stats.norm.cdf(0)), (a @ a).shape, "
                   "len(os.sched_getaffinity(0)) >= 1)")
    assert r.ok, r.error
    assert r.text() == "('ok', 0.5, (300, 300), True)"


# -- network -------------------------------------------------------------------------------------------

def test_no_tcp_and_no_unix_datagrams_reach_anyone(rogue, scene):
    port = scene["listener"].port
    dgram = scene["dgram"]
    for cell in (f"s = socket.create_connection(('127.0.0.1', {port}), timeout=2)\ns.sendall(b'LEAK')",
                 "fd = libc.socket(2, 1, 0)\nassert fd >= 0, ctypes.get_errno()",
                 "fd = libc.socket(1, 2, 0)\nassert fd >= 0, ctypes.get_errno()",   # AF_UNIX datagram
                 f"a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\na.sendto(b'LEAK', {dgram.path!r})",
                 f"a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\na.sendto(b'LEAK', {dgram.abstract!r})",
                 "a, b = socket.socketpair(socket.AF_INET, socket.SOCK_STREAM)"):
        attempt(rogue, cell)
    # an ordinary stream pair still works (asyncio's self-pipe) and cannot address anyone
    r = Run(rogue, f"a, b = socket.socketpair()\na.sendto(b'LEAK', {dgram.path!r})")
    assert not r.ok
    time.sleep(0.2)
    assert scene["listener"].connections == 0 and scene["listener"].data == b""
    assert dgram.received() == []


# -- processes -----------------------------------------------------------------------------------------

def test_no_process_is_started(rogue, scene):
    marker = scene["outside"] / f"spawned-abi{rogue.abi}"
    for cell in (f"assert os.system('touch {marker}') == 0",
                 f"import subprocess\nsubprocess.run(['touch', '{marker}'], check=True)",
                 f"os.posix_spawn('/usr/bin/touch', ['touch', '{marker}'], {{}})",
                 f"assert libc.system(b'touch {marker}') == 0",
                 "pid = os.fork()\nif pid == 0: os._exit(0)",
                 "sc('clone', 17, 0, 0, 0, 0)",  # SIGCHLD, a plain fork through clone
                 "sc('vfork')" if os.uname().machine == "x86_64" else "sc('clone', 0x4011, 0, 0, 0, 0)"):
        attempt(rogue, cell)
    assert not marker.exists()


# -- signals -------------------------------------------------------------------------------------------

def test_signals_never_reach_another_process(rogue, victim):
    v = victim.pid
    cells = [f"os.kill({v}, signal.SIGUSR1)",
             f"os.killpg({v}, signal.SIGUSR1)",
             f"sc('tgkill', {v}, {v}, signal.SIGUSR1)",
             f"sc('tkill', {v}, signal.SIGUSR1)",
             f"sc('rt_sigqueueinfo', {v}, signal.SIGUSR1, siginfo(signal.SIGUSR1))",
             f"sc('rt_tgsigqueueinfo', {v}, {v}, signal.SIGUSR1, siginfo(signal.SIGUSR1))",
             f"fd = sc('pidfd_open', {v}, 0)\nsc('pidfd_send_signal', fd, signal.SIGUSR1, 0, 0)",
             # probes with signal 0 (nothing delivered even if allowed): the kernel, the worker's
             # group, every process of the user
             "os.kill(os.getppid(), 0)", "os.kill(0, 0)", "os.kill(-1, 0)"]
    for cell in cells:
        attempt(rogue, cell)
    time.sleep(0.3)
    assert victim.untouched() == []
    assert Run(rogue, "os.kill(os.getpid(), 0)").ok  # the worker may still signal itself


@pytest.mark.parametrize("how", ["F_SETOWN", "F_SETOWN_pgrp", "F_SETOWN_EX", "FIOSETOWN", "SIOCSPGRP"])
def test_sigio_owners_cannot_be_another_process(rogue, victim, how):
    """fcntl(F_SETOWN) + F_SETSIG + O_ASYNC makes the kernel send any signal, SIGKILL included, to the
    owner: without Landlock's signal scope (ABI < 6) only seccomp stands in the way."""
    v = victim.pid
    setup = {
        "F_SETOWN": f"fcntl.fcntl(w, fcntl.F_SETOWN, {v})",
        "F_SETOWN_pgrp": f"fcntl.fcntl(w, fcntl.F_SETOWN, -{v})",
        "F_SETOWN_EX": f"fcntl.fcntl(w, 15, struct.pack('ii', 1, {v}))",
        "FIOSETOWN": f"fcntl.ioctl(w, 0x8901, struct.pack('i', {v}))",
        "SIOCSPGRP": f"fcntl.ioctl(w, 0x8902, struct.pack('i', {v}))",
    }[how]
    for signum in (signal.SIGUSR1, signal.SIGKILL):
        cell = ("r, w = socket.socketpair()\nr, w = r.detach(), w.detach()\n" + setup + "\n"
                f"try:\n    fcntl.fcntl(w, 10, {int(signum)})\nexcept OSError:\n    pass\n"
                "fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_ASYNC)\n"
                "fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)\n"
                "os.write(r, b'x' * 10)\nos.write(w, b'x' * 10)\ntime.sleep(0.1)")
        attempt(rogue, cell)
    time.sleep(0.3)
    assert victim.untouched() == []


# -- scheduling of other processes ---------------------------------------------------------------------

def test_scheduling_of_other_processes_cannot_change(rogue, victim):
    v = victim.pid
    cpus = sorted(os.sched_getaffinity(0))
    cells = [f"os.sched_setaffinity({v}, {{{cpus[0]}}})",
             f"os.setpriority(os.PRIO_PROCESS, {v}, 19)",
             f"os.setpriority(os.PRIO_PGRP, {v}, 19)",
             f"os.sched_setscheduler({v}, os.SCHED_IDLE, os.sched_param(0))",
             f"os.sched_setscheduler({v}, os.SCHED_BATCH, os.sched_param(0))",
             f"os.sched_setparam({v}, os.sched_param(0))",
             # struct sched_attr {size, policy=SCHED_IDLE(5), flags, nice, ...}
             f"attr = struct.pack('IIQiIQQQ', 48, 5, 0, 0, 0, 0, 0, 0)\n"
             f"sc('sched_setattr', {v}, ctypes.create_string_buffer(attr, 48), 0)",
             f"sc('ioprio_set', 1, {v}, (3 << 13))",    # IOPRIO_WHO_PROCESS, class IDLE
             f"sc('ioprio_set', 2, {v}, (3 << 13))",    # IOPRIO_WHO_PGRP
             f"resource.prlimit({v}, resource.RLIMIT_NOFILE, (3, 3))",
             # every process of the user at once: probed with the worker's own current values, so that
             # an unfixed filter changes nothing on the machine running the tests
             "os.setpriority(os.PRIO_USER, 0, os.getpriority(os.PRIO_PROCESS, 0))",
             "sc('ioprio_set', 3, 0, sc('ioprio_get', 1, 0))"]
    if len(cpus) < 2:
        cells = cells[1:]  # one CPU: an affinity change could not show
    for cell in cells:
        attempt(rogue, cell)
    assert victim.untouched() == []
    # the worker's own scheduling stays its own to change (BLAS pools pin their threads with pid 0)
    r = Run(rogue, f"os.sched_setaffinity(0, {set(cpus)})\nos.setpriority(os.PRIO_PROCESS, 0, "
                   "os.getpriority(os.PRIO_PROCESS, 0))\nsorted(os.sched_getaffinity(0))")
    assert r.ok and r.text() == str(cpus), r.error


# -- what other processes do ---------------------------------------------------------------------------

def test_nothing_about_other_processes_leaks(rogue, victim):
    needs_landlock(rogue)
    v, host = victim.pid, "os.getppid()"
    for cell in (f"open(f'/proc/{{{host}}}/environ', 'rb').read()",
                 f"open('/proc/{v}/environ', 'rb').read()",
                 # the victim holds no capability, so here only Landlock's ptrace-mode check stands
                 f"os.readlink('/proc/{v}/cwd')", f"os.readlink('/proc/{v}/exe')", f"os.listdir('/proc/{v}/fd')",
                 f"os.readlink('/proc/{v}/fd/0')", f"open('/proc/{v}/stat').read()",
                 f"open(f'/proc/{{{host}}}/cmdline', 'rb').read()",
                 f"open(f'/proc/{{{host}}}/status').read()",
                 f"os.readlink(f'/proc/{{{host}}}/cwd')",
                 f"os.listdir(f'/proc/{{{host}}}/fd')",
                 f"os.readlink(f'/proc/{{{host}}}/fd/0')",
                 f"open(f'/proc/{{{host}}}/maps').read()",
                 "os.listdir('/proc')",
                 f"os.sched_getaffinity({host})",
                 f"os.getpriority(os.PRIO_PROCESS, {host})",
                 f"os.getsid({host})",
                 f"os.getpgid({host})",
                 f"os.sched_getscheduler({host})",
                 f"sc('ioprio_get', 1, {host})"):
        r = attempt(rogue, cell)
        assert "VICTIM-ENV-SECRET" not in str(r.events)


def test_the_network_namespace_is_not_readable(rogue, scene):
    """/proc/<pid>/net lists every socket of the namespace: the kernel's ports, the listener's."""
    needs_landlock(rogue)
    port = f"{scene['listener'].port:04X}"
    for cell in ("open('/proc/self/net/tcp').read()", "open('/proc/net/tcp').read()",
                 "open('/proc/thread-self/net/tcp').read()",
                 "open(f'/proc/self/task/{threading.get_native_id()}/net/tcp').read()",
                 "open('/proc/self/net/unix').read()", "open('/proc/self/mountinfo').read()",
                 "open('/proc/self/task/' + os.listdir('/proc/self/task')[-1] + '/net/tcp').read()"):
        r = attempt(rogue, "import threading\n" + cell)
        assert port not in str(r.events)
    r = Run(rogue, "open('/proc/self/statm').read().split()[0].isdigit()")
    assert r.ok and r.text() == "True", r.error  # what the engine and libraries read still works


def test_inotify_cannot_watch_forbidden_directories(rogue, scene):
    """A watch on a directory the worker may not list would reveal the names created there (another
    kernel's connection file): inotify is refused; the worker then sees nothing of what follows."""
    needs_landlock(rogue)
    watched = scene["outside"] / f"watched-abi{rogue.abi}"
    watched.mkdir()
    attempt(rogue, "fd = libc.inotify_init1(os.O_NONBLOCK)\nassert fd >= 0, ctypes.get_errno()\n"
                   f"wd = libc.inotify_add_watch(fd, {str(watched).encode()!r}, 0x100)\n"
                   "assert wd >= 0, ctypes.get_errno()")
    (watched / "kernel-0c0ffee.json").write_text("{}")
    r = Run(rogue, "os.read(fd, 4096)")
    assert "0c0ffee" not in str(r.events)
