"""The system-call filter as data and in a child process: every number above the reviewed one is
refused, names resolve from libseccomp or our own table or the filter is not built (fail closed).
The attacks through a real worker are in test_breach_review.py and test_breach_kernel.py."""
import errno
import json
import os
import subprocess
import sys

import pytest

from sandbox_kernel.isolation import seccomp

ok, why = seccomp.available() if sys.platform.startswith("linux") else (False, "not Linux")
pytestmark = pytest.mark.skipif(not ok, reason=why)

ENOSYS_VERDICT = seccomp.SECCOMP_RET_ERRNO | errno.ENOSYS
FOREIGN = 0x40000003  # AUDIT_ARCH_I386


def run_bpf(program: bytes, nr: int, arch: int) -> int:
    """A classic BPF interpreter for the instructions seccomp programs use here (loads of seccomp_data,
    jumps on constants, returns): what the kernel computes for one call."""
    import struct

    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data = {0: nr & 0xFFFFFFFF, 4: arch}
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == seccomp._LD_ABS_W:
            acc = data[k]
        elif code == seccomp._JEQ_K:
            pc += jt if acc == k else jf
        elif code == seccomp._JGT_K:
            pc += jt if acc > k else jf
        elif code == seccomp._RET_K:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


@pytest.mark.parametrize("arch", sorted(seccomp.REVIEWED_MAX), ids=hex)
def test_every_number_above_the_reviewed_one_gets_enosys(arch):
    """All 2^12 first numbers, the last before the x32 bit, x32 numbers and the top of the range."""
    highest = seccomp.REVIEWED_MAX[arch]
    program = seccomp.future_calls_program(arch, highest)
    assert len(program) == 7 * 8
    numbers = list(range(4096)) + [0x3FFFFFFF, 0x40000000 | 39, 0x7FFFFFFF, 0xFFFFFFFF]
    for nr in numbers:
        expected = ENOSYS_VERDICT if nr > highest else seccomp.SECCOMP_RET_ALLOW
        assert run_bpf(program, nr, arch) == expected, nr
    assert {run_bpf(program, nr, FOREIGN) for nr in (0, 39, highest, highest + 1)} == {
        seccomp.SECCOMP_RET_KILL_PROCESS}


def test_the_table_covers_every_number_from_424_to_the_reviewed_one():
    """Each call Linux added in the unified numbering up to REVIEWED_MAX has an entry (and so a decision
    in the table's comments): raising REVIEWED_MAX without reviewing the calls in between fails here."""
    numbers = sorted(seccomp.UNIFIED_NUMBERS.values())
    assert numbers == list(range(424, max(seccomp.REVIEWED_MAX.values()) + 1))
    assert len(set(seccomp.UNIFIED_NUMBERS.values())) == len(seccomp.UNIFIED_NUMBERS)


def test_the_table_agrees_with_libseccomp_where_libseccomp_knows_the_call():
    import pyseccomp as sc

    if sc.system_arch() not in seccomp.REVIEWED_MAX:
        pytest.skip("not an architecture of the kernel level")
    known = {name: sc.resolve_syscall(sc.Arch.NATIVE, name) for name in seccomp.UNIFIED_NUMBERS}
    assert {n: nr for n, nr in known.items() if nr >= 0 and nr != seccomp.UNIFIED_NUMBERS[n]} == {}
    assert any(nr >= 0 for nr in known.values())


def test_names_resolve_from_libseccomp_or_the_table_or_fail_closed(monkeypatch):
    import platform

    import pyseccomp as sc

    native = sc.Arch.NATIVE
    every = (seccomp.DENIED + seccomp.OWN_PID_ONLY + seccomp.SIGNAL_CALLS + seccomp.ESSENTIAL
             + ("clone", "prctl", "sendmsg", "sendmmsg", "socketpair", "truncate", "setpriority", "fcntl64"))
    resolved = {name: seccomp.number(sc, native, name) for name in every}
    assert resolved["file_setattr"] == 469 and resolved["setxattrat"] == 463
    if platform.machine() == "x86_64":
        assert resolved["fcntl64"] is None and resolved["fork"] == 57  # not on x86_64; a real one
    with pytest.raises(OSError, match="no_such_call"):
        seccomp.number(sc, native, "no_such_call")
    monkeypatch.setitem(seccomp.UNIFIED_NUMBERS, "pidfd_open", 999)
    with pytest.raises(OSError, match="pidfd_open"):
        seccomp.number(sc, native, "pidfd_open")


CHILD = r"""
import ctypes, errno, json, os, socket, sys
from sandbox_kernel.isolation import seccomp
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return r if r != -1 else errno.errorcode[ctypes.get_errno()]
def filters():
    with open("/proc/self/status") as fh:
        return [l.split()[1] for l in fh if l.startswith("Seccomp_filters:")] or ["?"]
out = {}
mode = sys.argv[1]
if mode == "unknown-name":
    seccomp.DENIED += ("no_such_call",)
try:
    out["apply"] = seccomp.apply(network=(mode == "network"), max_syscall=None)["max_syscall"]
except OSError as exc:
    out["apply"] = str(exc)
out["filters"] = filters()[0]
a, b = socket.socketpair()
try:
    a.sendmsg([b"x"])
    out["sendmsg"] = "sent"
except OSError as exc:
    out["sendmsg"] = errno.errorcode[exc.errno]
out["send"] = a.send(b"y")
armed = ctypes.c_int(-1)
out["prctl"] = [libc.prctl(1, 0, 0, 0, 0), libc.prctl(2, ctypes.byref(armed), 0, 0, 0), armed.value,
                libc.prctl(15, b"renamed", 0, 0, 0)]
out["new calls"] = [call(nr, -1, 0, 0, 0, 0, 0) for nr in (470, 500, 1000)]
print(json.dumps(out))
"""


def child(mode):
    out = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_filter_in_a_process_without_a_network():
    got = child("plain")
    assert got["apply"] == max(seccomp.REVIEWED_MAX.values()) and got["filters"] == "2"
    assert got["sendmsg"] == "EPERM" and got["send"] == 1
    assert got["prctl"] == [-1, 0, 0, 0]  # PR_SET_PDEATHSIG refused; reading it and PR_SET_NAME work
    assert got["new calls"] == ["ENOSYS"] * 3


def test_with_a_network_the_filter_keeps_sendmsg():
    got = child("network")
    assert got["sendmsg"] == "sent" and got["new calls"] == ["ENOSYS"] * 3


def test_a_name_nobody_can_resolve_loads_no_filter_at_all():
    """apply() raises before loading anything: the worker's start-up then fails (LayerError -> fatal),
    the cell never runs. Here the process is left without any filter, and says why."""
    got = child("unknown-name")
    assert "no_such_call" in got["apply"] and got["filters"] == "0"
    assert got["sendmsg"] == "sent"
