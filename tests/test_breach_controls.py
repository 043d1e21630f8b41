"""Why the breach suite can fail: the same attacks, run by the same rogue cells at level `process` (a
worker without Landlock and seccomp), do succeed. And the decisions the worker takes before confining
itself (which directory it may write, which rules it grants), checked as data."""
import os
import time

import pytest

from isolation_support import (Listener, Run, UnixDatagramServer, Victim, breach_worker, kernel_level_problem,
                               rogue_policy)
from sandbox_kernel import workdir as wd
from sandbox_kernel.isolation import landlock as ll

pytestmark = pytest.mark.skipif(not os.uname().sysname == "Linux", reason="worker levels are tested on Linux")


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A `process` worker: rlimits only."""
    b = breach_worker("process", rogue_policy(limits={"memory_mb": 512, "timeout": 10.0}),
                      tmp_path_factory.mktemp("control"))
    yield b
    b.shutdown()


def test_control_files_outside_are_reachable_without_the_layers(plain, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    target = tmp_path / "target.txt"
    target.write_text("original")
    r = Run(plain, f"open({str(secret)!r}).read()")
    assert r.ok and "TOP-SECRET" in r.text()
    assert Run(plain, f"os.chmod({str(target)!r}, 0o600)\nos.close(os.open({str(target)!r}, 3 | os.O_TRUNC))").ok
    assert target.read_text() == "" and (target.stat().st_mode & 0o777) == 0o600


def test_control_signals_and_sigio_owners_reach_a_victim_without_the_layers(plain, tmp_path):
    victim = Victim(tmp_path)
    try:
        assert Run(plain, f"os.kill({victim.pid}, signal.SIGUSR1)").ok
        r = Run(plain, f"r, w = socket.socketpair()\nr, w = r.detach(), w.detach()\n"
                       f"fcntl.fcntl(w, fcntl.F_SETOWN, {victim.pid})\nfcntl.fcntl(w, 10, signal.SIGUSR2)\n"
                       "fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_ASYNC)\n"
                       "os.write(r, b'x')\ntime.sleep(0.1)")
        assert r.ok, r.error
        deadline = time.monotonic() + 5
        while len(victim.signals()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(victim.signals()) == ["SIGUSR1", "SIGUSR2"]
    finally:
        victim.close()


def test_control_another_process_is_readable_without_the_layers(plain, tmp_path):
    victim = Victim(tmp_path, secret="VICTIM-ENV-SECRET")
    try:
        r = Run(plain, f"(os.readlink('/proc/{victim.pid}/cwd'), open('/proc/{victim.pid}/environ').read(), "
                       f"os.sched_getaffinity({victim.pid}))")
        assert r.ok and "VICTIM-ENV-SECRET" in r.text(), r.error
    finally:
        victim.close()


def test_control_scheduling_of_a_victim_changes_without_the_layers(plain, tmp_path):
    victim = Victim(tmp_path)
    try:
        assert Run(plain, f"os.setpriority(os.PRIO_PROCESS, {victim.pid}, 19)\n"
                          f"os.sched_setscheduler({victim.pid}, os.SCHED_IDLE, os.sched_param(0))").ok
        assert victim.nice() == 19 and victim.scheduler()[0] == os.SCHED_IDLE
    finally:
        victim.close()


def test_control_leaks_without_the_layers(plain, tmp_path):
    listener = Listener()
    dgram = UnixDatagramServer(tmp_path)
    try:
        r = Run(plain, "open('/proc/self/net/tcp').read()")
        assert r.ok and f"{listener.port:04X}" in r.text()
        watched = tmp_path / "watched"
        watched.mkdir()
        assert Run(plain, "fd = libc.inotify_init1(os.O_NONBLOCK)\n"
                          f"assert libc.inotify_add_watch(fd, {str(watched).encode()!r}, 0x100) >= 0").ok
        (watched / "kernel-0c0ffee.json").write_text("{}")
        r = Run(plain, "os.read(fd, 4096)")
        assert r.ok and "0c0ffee" in r.text()
        assert Run(plain, f"a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                          f"a.sendto(b'LEAK', {dgram.path!r})").ok
        assert dgram.received() == [b"LEAK"]
    finally:
        listener.close()
        dgram.close()


# -- the decisions, as data ----------------------------------------------------------------------------

def test_no_grant_reaches_home_or_its_secrets():
    places = wd.own_places()
    import pwd

    home = pwd.getpwuid(os.getuid()).pw_dir
    for path in ("/", os.path.dirname(home) or "/", home, os.path.join(home, ".ssh"),
                 os.path.join(home, ".ssh", "id_rsa"), os.path.join(home, ".local"),
                 os.path.join(home, ".local", "share", "jupyter", "runtime", "kernel-1.json"),
                 os.path.join(home, ".ipython", "profile_default")):
        assert wd.grant_refusal(path, write=False, places=places), path
    # what lies below home (projects, virtualenvs, a pyenv Python) may be read, and written if it is code-free
    assert wd.grant_refusal(os.path.join(home, "project"), write=True, places=places) is None
    for code in (wd.sys.prefix, os.path.dirname(wd.__file__), os.path.dirname(os.path.dirname(wd.__file__))):
        assert wd.grant_refusal(code, write=False, places=places) is None
        assert wd.grant_refusal(code, write=True, places=places), code


def test_the_worker_refuses_home_on_its_own_when_the_host_forgot(tmp_path):
    """No protected list from the host, a files policy: the worker's own list (from the account
    database, not its scrubbed environment) still keeps it out of home."""
    import pwd

    home = pwd.getpwuid(os.getuid()).pw_dir
    writable, why = wd.writable_dir(home, str(tmp_path), files=True, places=())
    assert writable == os.path.realpath(tmp_path) and "home" in why
    writable, why = wd.writable_dir("/", None, files=True, places=())
    assert writable is None and why
    rules = dict(ll.plan("/"))
    assert "/" not in rules and not any(home.startswith(p.rstrip("/") + "/") or p == home for p in rules)


def test_files_off_means_no_right_on_the_workdir(tmp_path):
    writable, why = wd.writable_dir(str(tmp_path / "work"), str(tmp_path), files=False)
    assert writable == os.path.realpath(tmp_path) and "no file access" in why


def test_the_host_list_protects_what_the_environment_names(tmp_path, monkeypatch):
    runtime = tmp_path / "rt"
    runtime.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    places = wd.protected_places({"a path the operator protects (0)": str(tmp_path / "policies")})
    assert wd.grant_refusal(str(tmp_path), write=False, places=places)        # holds the runtime dir
    assert wd.grant_refusal(str(runtime / "x"), write=False, places=places)   # inside it
    assert wd.grant_refusal(str(tmp_path / "policies"), write=False, places=places)
    assert wd.grant_refusal(str(tmp_path / "other"), write=True, places=places) is None
    rules = dict(ll.plan(str(tmp_path / "other"), places=places, extra_read=[str(tmp_path)]))
    assert os.path.realpath(tmp_path) not in rules


def test_proc_grants_are_files_never_net():
    rules = dict(ll.plan("/tmp"))
    own = f"/proc/{os.getpid()}"
    assert own not in rules
    granted = sorted(p for p in rules if p.startswith("/proc/"))
    assert granted and all(p.startswith(own + "/") and "/net" not in p for p in granted if p.startswith(own))
    assert {os.path.basename(p) for p in granted if p.startswith(own)} <= set(ll.PROC_SELF)


@pytest.mark.skipif(kernel_level_problem() is not None, reason="kernel level unavailable")
def test_without_landlock_the_kernel_level_fails_closed_unless_degraded(tmp_path):
    b = breach_worker("kernel", rogue_policy(), tmp_path, landlock_abi=0, degraded=False)
    try:
        events = []
        done = b.run_cell("open('ran', 'w').write('x')", emit=events.append)
        assert done["status"] == "error" and done["error"]["ename"] == "SandboxUnavailable"
        assert "landlock" in done["error"]["evalue"].lower()
        assert not (tmp_path / "ran").exists()
    finally:
        b.shutdown()


def test_scratch_directories_of_killed_hosts_are_removed_by_the_next(tmp_path, monkeypatch):
    """A host killed before its exit handlers ran (Jupyter kills kernels) leaves its workers' private
    directories: the next host removes those whose process is gone, and nothing else."""
    import subprocess
    import sys

    monkeypatch.setattr(wd.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(wd, "_swept", False)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    old = time.time() - 3600
    stale, recent, alive, other = (tmp_path / f"sandbox-worker-{dead}-a", tmp_path / f"sandbox-worker-{dead}-b",
                                   tmp_path / f"sandbox-worker-{os.getpid()}-c", tmp_path / "sandbox-worker-x")
    for d in (stale, recent, alive, other):
        d.mkdir()
        (d / "f").write_text("x")
    for d in (stale, alive, other):
        os.utime(d, (old, old))
    fresh = wd.make_scratch()
    assert os.path.basename(fresh).startswith(f"sandbox-worker-{os.getpid()}-")
    assert not stale.exists() and recent.exists() and alive.exists() and other.exists()
    assert (os.stat(fresh).st_mode & 0o777) == 0o700 and os.listdir(fresh) == []


@pytest.mark.skipif(kernel_level_problem() is not None, reason="the kernel level is not available")
def test_control_degraded_mode_reaches_unprotected_processes(tmp_path):
    """What docs/security.md says degraded mode (no Landlock) does not hold: a process of the user that
    is not one of ours (not non-dumpable) has its memory and OOM score open to a worker's native code.
    The same cell against a non-dumpable victim fails (test_breach_review.py)."""
    import textwrap

    b = breach_worker("kernel", rogue_policy(limits={"memory_mb": 512, "timeout": 10.0}), tmp_path / "work",
                      landlock_abi=0, degraded=True)
    victim = Victim(tmp_path)
    try:
        assert b.status()["os_layers"]["degraded"] is True
        v = victim.pid
        r = Run(b, textwrap.dedent(f"""
            rw = [l for l in open('/proc/{v}/maps').read().splitlines() if ' rw-p ' in l][0]
            addr = int(rw.split('-')[0], 16)
            fd = os.open('/proc/{v}/mem', os.O_RDWR)
            os.pwrite(fd, os.pread(fd, 8, addr), addr)   # writes back what is there
            open('/proc/{v}/oom_score_adj', 'w').write('1000')
            'reached'"""))
        assert r.ok and r.text() == "'reached'", r.error
        with open(f"/proc/{v}/oom_score_adj") as fh:
            assert fh.read().strip() == "1000"
    finally:
        victim.close()
        b.shutdown()
