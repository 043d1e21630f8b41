"""The first cell after a cold start: Sandboxed Python against stock ipykernel, on the same machine.

    python bench/first_cell.py [--rounds 5] [--cell "1+1"] [--json out.json] [--option --X.y=z ...]

What a person waits for in JupyterLab after opening a notebook: from launching the kernel until the
reply to their first cell. Each round starts a fresh kernel of each kind (stock `python3` and
`sandboxed-python`, in a new empty working directory, order alternating between rounds), sends the
first cell as soon as the kernel answers kernel_info (what JupyterLab waits for before it shows the
kernel as idle), and records:

* ready: launch -> kernel_info reply;
* first reply: launch -> the first cell's execute_reply and its idle status;
* second cell: the next cell's round trip (the steady state, for comparison).

The figure of merit is the median of first reply (sandbox) / median of first reply (ipykernel). The
machine's load average is printed before and after: on a shared machine, compare runs only at similar
load. Extra --option arguments go to the sandboxed kernel (e.g. --SandboxKernel.isolation=process).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

from jupyter_client import KernelManager

KERNELS = ("python3", "sandboxed-python")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_cell(kc, code: str, timeout: float = 300.0) -> dict:
    """Send ``code``; return its execute_reply once the reply and the idle status are both in."""
    msg_id = kc.execute(code, store_history=False)
    reply, idle = None, False
    deadline = time.monotonic() + timeout
    while reply is None or not idle:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no reply to {code!r} within {timeout} s")
        if reply is None:
            msg = kc.get_shell_msg(timeout=left)
            if msg["parent_header"].get("msg_id") == msg_id:
                reply = msg["content"]
        while not idle:
            try:
                msg = kc.get_iopub_msg(timeout=0.05 if reply is None else left)
            except Exception:  # queue.Empty: go back to the shell channel
                break
            if (msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"):
                idle = True
    return reply


def one_start(kernel_name: str, cell: str, options: list[str]) -> dict:
    cwd = tempfile.mkdtemp(prefix="bench-first-")
    km = KernelManager(kernel_name=kernel_name)
    kc = None
    try:
        t0 = time.perf_counter()
        km.start_kernel(cwd=cwd, extra_arguments=options if kernel_name != "python3" else [])
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        ready = time.perf_counter() - t0
        reply = run_cell(kc, cell)
        first = time.perf_counter() - t0
        if reply["status"] != "ok":
            raise RuntimeError(f"{kernel_name}: the first cell failed: {reply.get('evalue')}")
        t1 = time.perf_counter()
        run_cell(kc, cell)
        second = time.perf_counter() - t1
        return {"ready_s": round(ready, 3), "first_reply_s": round(first, 3), "second_cell_ms": round(second * 1000, 1)}
    finally:
        if kc is not None:
            kc.stop_channels()
        km.shutdown_kernel(now=False)
        shutil.rmtree(cwd, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cell", default="1+1", help="the first cell's code")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--option", action="append", default=[], help="a command-line option for the sandboxed kernel")
    args = ap.parse_args(argv)

    runs: dict[str, list[dict]] = {k: [] for k in KERNELS}
    print(f"load before: {load()}  (python {sys.version.split()[0]}, {os.cpu_count()} CPUs)", flush=True)
    for i in range(args.rounds):
        order = KERNELS if i % 2 == 0 else KERNELS[::-1]
        for name in order:
            r = one_start(name, args.cell, args.option)
            runs[name].append(r)
            print(f"round {i + 1} {name}: {r}", flush=True)
    print(f"load after: {load()}")

    summary = {}
    for name, rs in runs.items():
        summary[name] = {key: statistics.median(r[key] for r in rs) for key in rs[0]}
    ratio = summary["sandboxed-python"]["first_reply_s"] / summary["python3"]["first_reply_s"]
    print("\n| kernel | ready s (median) | first reply s (median) | second cell ms (median) |")
    print("|---|---:|---:|---:|")
    for name, s in summary.items():
        print(f"| {name} | {s['ready_s']:.2f} | {s['first_reply_s']:.2f} | {s['second_cell_ms']:.1f} |")
    print(f"\nfirst reply, sandboxed / stock: {ratio:.2f}x (target <= 1.2x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": runs, "median": summary, "ratio": round(ratio, 3), "cell": args.cell,
                       "options": args.option, "load": load()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
