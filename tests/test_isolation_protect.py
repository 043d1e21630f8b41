"""oslayers.protect_process(): what making a process non-dumpable holds against another process of the
same user with no capabilities (a worker without Landlock), and what it leaves readable.

A fresh child process forks the two sides and, when the tests run as root, turns both into an ordinary
user (nobody) first, which is how Jupyter runs: the victim calls protect_process() (or not: the
control), the attacker tries the victim's /proc files. A third case keeps the attacker at uid 0 without
capabilities, as a worker of a kernel running as root is: the owner-writable files stay writable for it
(docs/security.md says so)."""
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc semantics")

SCENE = r"""
import ctypes, errno, json, os, platform, sys, time, traceback
import psutil   # what jupyter-resource-usage calls on the kernel (imported before the uid change)
from sandbox_kernel.isolation.oslayers import protect_process
protect, attacker_kind = sys.argv[1] == "protect", sys.argv[2]
NOBODY = 65534

def ordinary_user():
    if os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)

def no_capabilities():
    nr = {"x86_64": 126, "aarch64": 91, "riscv64": 91}[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.syscall(nr, (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()) == 0

def be_the_victim():
    if attacker_kind == "ordinary":
        ordinary_user()
    else:
        no_capabilities()
    # Changing uid made it non-dumpable; a process the user starts is dumpable: start from there.
    assert ctypes.CDLL(None).prctl(4, 1, 0, 0, 0) == 0
    answer = protect_process() if protect else {}
    end = time.process_time() + 0.3
    while time.process_time() < end:   # some CPU time for the stat check
        pass
    return answer

ready_r, ready_w = os.pipe()
victim = os.fork()
if victim == 0:
    try:
        os.write(ready_w, json.dumps(be_the_victim()).encode())
        time.sleep(120)
    finally:
        os._exit(0)
os.close(ready_w)
answer = json.loads(os.read(ready_r, 4096))
def attack():
    if attacker_kind == "ordinary":
        ordinary_user()
    else:
        no_capabilities()
    v = f"/proc/{victim}"
    def stat_cpu():
        fields = open(f"{v}/stat").read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    attempts = {
        "mem": lambda: os.close(os.open(f"{v}/mem", os.O_RDWR)),
        "environ": lambda: open(f"{v}/environ", "rb").read(),
        "maps": lambda: open(f"{v}/maps").read(),
        "auxv": lambda: open(f"{v}/auxv", "rb").read(),
        "fd": lambda: os.listdir(f"{v}/fd"),
        "oom_score_adj": lambda: open(f"{v}/oom_score_adj", "w").write("1000"),
        "clear_refs": lambda: open(f"{v}/clear_refs", "w").write("5"),
        "stat": lambda: open(f"{v}/stat").read(),
        "status": lambda: open(f"{v}/status").read(),
        "statm": lambda: open(f"{v}/statm").read(),
        "cmdline": lambda: open(f"{v}/cmdline").read(),
    }
    got = {}
    for name, how in attempts.items():
        try:
            how()
            got[name] = "reached"
        except OSError as exc:
            got[name] = errno.errorcode.get(exc.errno, exc.errno)
    got["stat cpu ticks"] = stat_cpu() > 0
    p = psutil.Process(victim)
    got["psutil"] = [p.memory_info().rss > 0, p.cpu_times().user > 0, p.cpu_percent() >= 0, p.name() != ""]
    try:
        p.memory_full_info()   # smaps: ptrace-checked
        got["psutil smaps"] = "reached"
    except psutil.AccessDenied:
        got["psutil smaps"] = "AccessDenied"
    return got

out_r, out_w = os.pipe()
attacker = os.fork()
if attacker == 0:
    try:
        os.write(out_w, json.dumps(attack()).encode())
    except BaseException:
        os.write(out_w, json.dumps({"attacker failed": traceback.format_exc()}).encode())
    finally:
        os._exit(0)
os.close(out_w)
got = json.loads(os.read(out_r, 65536))
os.waitpid(attacker, 0)
os.kill(victim, 9)
os.waitpid(victim, 0)
print(json.dumps({"answer": answer, "got": got}))
"""

READABLE = {"stat": "reached", "status": "reached", "statm": "reached", "cmdline": "reached",
            "stat cpu ticks": True, "psutil": [True, True, True, True]}
PRIVATE = ("mem", "environ", "maps", "auxv")


def scene(protect: str, attacker: str) -> dict:
    out = subprocess.run([sys.executable, "-c", SCENE, protect, attacker], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_an_ordinary_users_process_cannot_open_a_protected_processes_files():
    seen = scene("protect", "ordinary")
    assert seen["answer"] == {"dumpable": False}
    got = seen["got"]
    assert {k: got[k] for k in PRIVATE + ("fd", "oom_score_adj", "clear_refs")} == {
        k: "EACCES" for k in PRIVATE + ("fd", "oom_score_adj", "clear_refs")}, got
    # psutil and jupyter-resource-usage read these; the host's idle check reads the CPU time in stat
    assert {k: got[k] for k in READABLE} == READABLE, got
    assert got["psutil smaps"] == "AccessDenied"  # USS/PSS (memory_full_info) of the kernel: not any more


def test_control_an_unprotected_process_is_open_to_the_same_user():
    got = scene("as-before", "ordinary")["got"]
    assert {k: got[k] for k in PRIVATE + ("fd", "oom_score_adj", "clear_refs")} == {
        k: "reached" for k in PRIVATE + ("fd", "oom_score_adj", "clear_refs")}, got


@pytest.mark.skipif(os.geteuid() != 0, reason="the root-container case needs root")
def test_uid_0_without_capabilities_still_writes_the_owner_writable_files():
    """A kernel running as root: its worker is uid 0 with no capability. The ptrace-checked files hold;
    the files that are only owner-writable (root's, once non-dumpable) do not. Without Landlock every
    root-owned file is writable for such a worker anyway."""
    got = scene("protect", "uid0")["got"]
    assert {k: got[k] for k in PRIVATE} == {k: "EACCES" for k in PRIVATE}, got
    assert got["oom_score_adj"] == got["clear_refs"] == "reached", got
