"""What the worker's system-call filter costs per call, and a `kernel` worker's cold start.

    python bench/seccomp_cost.py [--calls N] [--starts N] [--seccomp FILE]

For each kind of call, a child process times N calls without a filter and then with the worker's
filter (seccomp.apply, no network, Landlock ABI as the host's): calls the filter never looks at
(getppid: the kernel's per-syscall action cache answers them), calls whose arguments it checks (openat,
fcntl, ioctl, kill to self, send and recv on the channel's kind of socket). Prints ns per call, then the
median cold start of a `kernel` worker (spawn to ready, spare off). ``--seccomp FILE`` times another
version of isolation/seccomp.py (e.g. ``git show OLD:sandbox_kernel/isolation/seccomp.py > old.py``)
for the per-call figures. Linux only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import ctypes, fcntl, json, os, socket, sys, time, termios
n = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
a, b = socket.socketpair()
fd = os.open("/dev/null", os.O_RDONLY)
me = os.getpid()
calls = {
    "getppid": lambda: libc.getppid(),
    "openat+close": lambda: os.close(os.open("/dev/null", os.O_RDONLY)),
    "fcntl F_GETFL": lambda: fcntl.fcntl(fd, fcntl.F_GETFL),
    "ioctl FIONREAD": lambda: fcntl.ioctl(a.fileno(), termios.FIONREAD, b"\0\0\0\0"),
    "kill(self, 0)": lambda: os.kill(me, 0),
    "send+recv 1 byte": lambda: (a.send(b"x"), b.recv(1)),
}
def measure():
    out = {}
    for name, fn in calls.items():
        best = None
        for _ in range(int(sys.argv[3])):
            t = time.perf_counter_ns()
            for _ in range(n):
                fn()
            dt = (time.perf_counter_ns() - t) / n
            best = dt if best is None else min(best, dt)
        out[name] = round(best, 1)
    return out
before = measure()
import importlib.util
from sandbox_kernel.isolation import landlock
spec = importlib.util.spec_from_file_location("seccomp_under_test", sys.argv[2])
seccomp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(seccomp)
t = time.perf_counter()
seccomp.apply(network=False, landlock_abi=landlock.abi_version())
apply_ms = (time.perf_counter() - t) * 1000
after = measure()
print(json.dumps({"before": before, "after": after, "apply_ms": round(apply_ms, 2)}))
"""


def syscall_cost(n: int, module: str, reps: int = 15) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(n), module, str(reps)], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def cold_starts(n: int) -> float:
    from sandbox_kernel.isolation import make_backend
    from sandbox_kernel.policy import PRESETS

    times = []
    with tempfile.TemporaryDirectory() as workdir:
        for _ in range(n):
            t = time.perf_counter()
            b = make_backend("kernel", PRESETS["data-science"], workdir, spare=False)
            assert b.wait_ready(), b.status()
            times.append(time.perf_counter() - t)
            b.shutdown()
    return round(statistics.median(times) * 1000, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--seccomp", default=None, help="a seccomp.py to time instead of the package's")
    args = parser.parse_args()
    from sandbox_kernel.isolation import seccomp

    cost = syscall_cost(args.calls, args.seccomp or seccomp.__file__)
    print("| call | ns without filter | ns with filter | added |")
    print("|---|---|---|---|")
    for name, before in cost["before"].items():
        after = cost["after"][name]
        print(f"| {name} | {before} | {after} | {round(after - before, 1)} |")
    print(f"\nseccomp.apply(): {cost['apply_ms']} ms")
    if args.starts:
        print(f"\nkernel worker cold start (median of {args.starts}): {cold_starts(args.starts)} ms")


if __name__ == "__main__":
    main()
