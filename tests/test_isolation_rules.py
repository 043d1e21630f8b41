"""The Landlock rule plan and ABI handling, checked as data (no confinement needed, any Linux)."""
import os
import sys

import pytest

from sandbox_kernel.isolation import landlock as ll
from sandbox_kernel.isolation import oslayers

WRITE_RIGHTS = (ll.WRITE_FILE | ll.REMOVE_DIR | ll.REMOVE_FILE | ll.MAKE_CHAR | ll.MAKE_DIR | ll.MAKE_REG
                | ll.MAKE_SOCK | ll.MAKE_FIFO | ll.MAKE_BLOCK | ll.MAKE_SYM | ll.TRUNCATE | ll.REFER)


def test_handled_rights_follow_the_abi():
    assert ll.handled_fs(1) == (1 << 13) - 1
    assert ll.handled_fs(2) == ll.handled_fs(1) | ll.REFER
    assert ll.handled_fs(3) == ll.handled_fs(2) | ll.TRUNCATE
    assert ll.handled_fs(4) == ll.handled_fs(3)
    assert ll.handled_fs(5) == ll.handled_fs(4) | ll.IOCTL_DEV
    assert ll.handled_fs(7) == ll.handled_fs(5)


def test_plan_writes_only_in_the_workdir_and_never_executes(tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    rules = dict(ll.plan(str(workdir)))
    writable = {p for p, r in rules.items() if r & WRITE_RIGHTS and p != "/dev/null"}
    assert writable == {os.path.realpath(workdir)}
    assert not any(r & ll.EXECUTE for r in rules.values())
    assert not any(r & (ll.MAKE_CHAR | ll.MAKE_BLOCK | ll.MAKE_SOCK | ll.IOCTL_DEV) for r in rules.values())
    assert rules["/dev/null"] == ll.READ_FILE | ll.WRITE_FILE


def test_plan_reads_python_but_not_home_etc_or_the_kernel_cwd(tmp_path):
    rules = dict(ll.plan(str(tmp_path)))
    for forbidden in ("/", "/etc", "/home", "/root", "/tmp", "/usr", "/proc", "/var", os.path.expanduser("~")):
        assert os.path.realpath(forbidden) not in rules or os.path.realpath(forbidden) == os.path.realpath(str(tmp_path))
    assert any(os.path.realpath(sys.executable).startswith(p) for p in rules)
    # the worker's own /proc files that Python and the libraries read, never the directory (net/)
    assert f"/proc/{os.getpid()}/statm" in rules and f"/proc/{os.getpid()}" not in rules
    assert "/proc/self" not in rules and not any("/net" in p for p in rules)
    resolver = [p for p in ll.NETWORK_READ_PATHS if os.path.exists(p)]
    assert not any(os.path.realpath(p) in rules for p in resolver)
    with_net = dict(ll.plan(str(tmp_path), network=True))
    assert all(os.path.realpath(p) in with_net for p in resolver)


def test_layer_record_fails_closed_and_degrades_only_when_allowed():
    strict = oslayers.LayerRecord("kernel", degraded_ok=False)
    with pytest.raises(oslayers.LayerError, match="seccomp"):
        strict.attempt("seccomp", oslayers._raise, "no libseccomp")
    soft = oslayers.LayerRecord("kernel", degraded_ok=True)
    soft.attempt("seccomp", oslayers._raise, "no libseccomp")
    soft.attempt("rlimits", lambda: {"memory_mb": 1})
    summary = soft.summary()
    assert summary["degraded"] and "seccomp" in summary["failed"] and summary["active"] == ["rlimits"]
    assert "no libseccomp" in summary["details"]["seccomp"]["error"]


def test_kernel_level_refuses_off_linux_with_what_to_do(monkeypatch, tmp_path):
    from sandbox_kernel.isolation import default_isolation, make_backend
    from sandbox_kernel.policy import PRESETS

    monkeypatch.setattr(sys, "platform", "darwin")
    assert default_isolation() == ("process" if os.name == "posix" else "none")
    b = make_backend("kernel", PRESETS["strict"], str(tmp_path))
    events = []
    done = b.run_cell("1", emit=events.append)
    assert done["status"] == "error" and done["error"]["ename"] == "SandboxUnavailable"
    assert "needs Linux" in done["error"]["evalue"] and "'process'" in done["error"]["evalue"]
    assert b.status()["worker"]["pid"] is None
    b.shutdown()
