"""Many sandboxes on one machine (issue 12, item 3): a KernelPool serving concurrent sessions.

    python bench/concurrency.py [--sessions 20] [--cells 5] [--cold 3] [--configs default,nospare,...]
                                [--isolation LEVEL] [--json out.json]

For each configuration (--configs: `default`, the pre-warmed spare worker on and an empty warm-up cell;
`nospare`, isolation_options={"spare": False}, one worker per kernel instead of two; `warm` and
`nospare-warm`, the same with the pool's DATA_STACK_WARMUP cell), at the kernel's default isolation
level unless --isolation says otherwise:

* cold start: a kernel started from nothing until its worker has run a cell (what a session waits
  without a pool), --cold times in a row;
* a pool of --sessions kernels: the time to fill it, and the memory each session holds: the RSS and
  PSS of the kernel process and of its workers (from /proc), and the machine's MemAvailable before and
  after, divided by the number of sessions (what the machine really gave);
* --sessions sessions at once, each a thread: acquire a kernel from the pool (the session's start),
  then run a pandas + Plotly cell --cells times; the latency of each cell (execute_request until the
  reply and the idle status are in), first cells apart;
* the memory again after the cells, and the time for the pool to refill after every session released.

The machine's CPU count and load average are printed with the figures: on a shared machine, compare
figures of one run only. docs/performance.md ("Many sessions on one machine") has the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import statistics
import sys
import tempfile
import threading
import time

from jupyter_client.manager import KernelManager

from sandbox_kernel.pool import DATA_STACK_WARMUP, KernelPool

CELL = '''import pandas as pd
import plotly.express as px
days = 365
df = pd.DataFrame({"day": list(range(days)) * 4,
                   "region": [r for r in "NSEW" for _ in range(days)],
                   "sales": [(i * 37) % 101 for i in range(4 * days)]})
summary = df.groupby("region")["sales"].agg(["mean", "sum"])
print(summary.to_string())
px.line(df, x="day", y="sales", color="region", title="sales by region")
'''
PLOTLY = "application/vnd.plotly.v1+json"


def run_cell(kc, code: str, timeout: float = 300) -> tuple[float, dict, list]:
    """(seconds, reply content, output messages) of one cell, as a client sees it."""
    t0 = time.monotonic()
    msg_id = kc.execute(code)
    reply, idle, outputs = None, False, []
    deadline = t0 + timeout
    while reply is None or not idle:
        if time.monotonic() > deadline:
            raise TimeoutError("the cell did not finish")
        if reply is None:
            try:
                msg = kc.get_shell_msg(timeout=0.02)
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply = msg
            except queue.Empty:
                pass
        try:
            msg = kc.get_iopub_msg(timeout=0.02 if reply is None else 1)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
            idle = True
        elif msg["msg_type"] in ("stream", "display_data", "execute_result", "error"):
            outputs.append(msg)
    return time.monotonic() - t0, reply["content"], outputs


def check(reply: dict, outputs: list) -> None:
    charts = [o for o in outputs if PLOTLY in (o["content"].get("data") or {})]
    if reply.get("status") != "ok" or len(charts) != 1:
        raise RuntimeError(f"the benchmark cell failed: {reply.get('ename')}: {reply.get('evalue')}")


# -- memory ------------------------------------------------------------------------------------------

def _kb(path: str, key: str) -> int:
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def children(pid: int) -> list[int]:
    found = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                found += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return found


def session_memory(km) -> dict:
    """MB of one kernel and its workers: RSS (resident) and PSS (shared pages split between sharers)."""
    pid = km.provisioner.pid
    workers = children(pid)
    return {"kernel_rss": _kb(f"/proc/{pid}/status", "VmRSS") / 1024,
            "kernel_pss": _kb(f"/proc/{pid}/smaps_rollup", "Pss") / 1024,
            "workers": len(workers),
            "workers_rss": sum(_kb(f"/proc/{w}/status", "VmRSS") for w in workers) / 1024,
            "workers_pss": sum(_kb(f"/proc/{w}/smaps_rollup", "Pss") for w in workers) / 1024}


def cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def settle(kernels: list[int], timeout: float = 300) -> None:
    """Until the kernels and their workers use (almost) no CPU for a second: spares warmed up."""
    def total():
        return sum(cpu_seconds(p) for k in kernels for p in (k, *children(k)))
    deadline = time.monotonic() + timeout
    before = total()
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = total()
        if now - before < 0.05 * len(kernels):
            return
        before = now


def mem_available_mb() -> float:
    return _kb("/proc/meminfo", "MemAvailable") / 1024


def summarise_memory(rows: list[dict]) -> dict:
    keys = ("kernel_rss", "kernel_pss", "workers_rss", "workers_pss")
    out = {k: round(statistics.median(r[k] for r in rows), 1) for k in keys}
    out["workers"] = statistics.median(r["workers"] for r in rows)
    out["session_rss"] = round(out["kernel_rss"] + out["workers_rss"], 1)
    out["session_pss"] = round(out["kernel_pss"] + out["workers_pss"], 1)
    return out


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- the measurements --------------------------------------------------------------------------------

def cold_start(options: list[str]) -> float:
    """Seconds from nothing to a kernel whose worker has answered a cell (the pool's warm-up)."""
    cwd = tempfile.mkdtemp(prefix="bench-cold-")
    t0 = time.monotonic()
    km = KernelManager(kernel_name="sandboxed-python")
    km.start_kernel(extra_arguments=options, cwd=cwd)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=120)
        _, reply, _ = run_cell(kc, "None")
        took = time.monotonic() - t0
        if reply["status"] != "ok":
            raise RuntimeError(f"cold kernel failed: {reply.get('evalue')}")
        return took
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)


def measure(label: str, options: list[str], warm_code: str, sessions: int, cells: int, colds: int) -> dict:
    print(f"\n== {label}: {' '.join(options) or '(defaults)'}", flush=True)
    result: dict = {"label": label, "options": options, "warm_code": warm_code, "load_before": load()}
    result["cold_start_s"] = [round(cold_start(options), 3) for _ in range(colds)]
    print(f"cold start to a ready worker: {result['cold_start_s']} s", flush=True)

    available_before = mem_available_mb()
    t0 = time.monotonic()
    with KernelPool(sessions, options=options, warm_code=warm_code) as pool:
        if not pool.wait_full(timeout=60 * sessions):
            raise RuntimeError(f"the pool did not fill: {pool.stats()}")
        result["fill_s"] = round(time.monotonic() - t0, 1)
        acquired, go = threading.Barrier(sessions + 1), threading.Barrier(sessions + 1)
        rows: list[dict] = [{} for _ in range(sessions)]
        held: list = [None] * sessions

        def session(i: int) -> None:
            t = time.monotonic()
            held[i] = pool.acquire(timeout=120)
            rows[i]["acquire_ms"] = (time.monotonic() - t) * 1000
            acquired.wait()
            go.wait()   # the main thread reads the idle memory in between
            latencies = []
            for _ in range(cells):
                took, reply, outputs = run_cell(held[i].kc, CELL)
                check(reply, outputs)
                latencies.append(took * 1000)
            rows[i]["latency_ms"] = latencies

        threads = [threading.Thread(target=session, args=(i,)) for i in range(sessions)]
        for t in threads:
            t.start()
        acquired.wait()
        settle([p.km.provisioner.pid for p in held])   # spare workers finish their imports
        memory_idle = [session_memory(p.km) for p in held]
        available_filled = mem_available_mb()
        result["load_filled"] = load()
        print(f"pool of {sessions} filled in {result['fill_s']} s; settled, load {result['load_filled']}", flush=True)
        t0 = time.monotonic()
        go.wait()
        for t in threads:
            t.join()
        result["sessions_wall_s"] = round(time.monotonic() - t0, 1)
        result["load_after_cells"] = load()
        memory_used = [session_memory(p.km) for p in held]
        available_used = mem_available_mb()

        acquire = [r["acquire_ms"] for r in rows]
        first = [r["latency_ms"][0] for r in rows]
        later = [x for r in rows for x in r["latency_ms"][1:]]
        result.update({
            "sessions": sessions, "cells_per_session": cells, "cpus": os.cpu_count(),
            "acquire_ms": {"p50": round(percentile(acquire, 50), 3), "max": round(max(acquire), 3)},
            "first_cell_ms": {"p50": round(percentile(first, 50)), "p99": round(percentile(first, 99))},
            "cell_ms": {"p50": round(percentile(later, 50)), "p99": round(percentile(later, 99)),
                        "n": len(later)} if later else None,
            "memory_idle": summarise_memory(memory_idle),
            "memory_after_cells": summarise_memory(memory_used),
            "machine_mb_per_session_idle": round((available_before - available_filled) / sessions, 1),
            "machine_mb_per_session_after_cells": round((available_before - available_used) / sessions, 1),
        })
        t0 = time.monotonic()
        for pooled in held:
            pooled.release()
        if pool.wait_full(timeout=60 * sessions):
            result["refill_s"] = round(time.monotonic() - t0, 1)
    print(json.dumps({k: v for k, v in result.items() if k not in ("label", "options")}, indent=1), flush=True)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--cells", type=int, default=5, help="cells per session (the first is counted apart)")
    ap.add_argument("--cold", type=int, default=3, help="cold starts measured, one after the other")
    ap.add_argument("--configs", default="default,nospare,nospare-warm",
                    help="comma-separated: default, nospare, warm, nospare-warm")
    ap.add_argument("--isolation", help="the kernel's isolation level (default: the kernelspec's)")
    ap.add_argument("--json")
    args = ap.parse_args()

    base = [f"--SandboxKernel.isolation={args.isolation}"] if args.isolation else []
    nospare = [*base, "--SandboxKernel.isolation_options={'spare': False}"]
    known = {"default": ("spare on, empty warm-up (defaults)", base, "None"),
             "nospare": ("spare off", nospare, "None"),
             "warm": ("spare on, data-stack warm-up", base, DATA_STACK_WARMUP),
             "nospare-warm": ("spare off, data-stack warm-up", nospare, DATA_STACK_WARMUP)}
    configs = [known[name.strip()] for name in args.configs.split(",") if name.strip()]
    print(f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs, "
          f"{_kb('/proc/meminfo', 'MemTotal') / 2**20:.1f} GB, Python {sys.version.split()[0]}, load {load()}")
    results = [measure(label, options, warm, args.sessions, args.cells, args.cold) for label, options, warm in configs]

    print("\n| setting | cold start s (median) | pool fill s | acquire ms p50 (max) | first cell ms p50 / p99 "
          "| cell ms p50 / p99 | session RSS MB (kernel + workers) | session PSS MB | machine MB per session "
          "(idle / after cells) | refill s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        mem = r["memory_after_cells"]
        cell = r["cell_ms"] or {"p50": "-", "p99": "-"}
        print(f"| {r['label']} | {statistics.median(r['cold_start_s']):.2f} | {r['fill_s']} | "
              f"{r['acquire_ms']['p50']} ({r['acquire_ms']['max']}) | {r['first_cell_ms']['p50']} / "
              f"{r['first_cell_ms']['p99']} | {cell['p50']} / {cell['p99']} | {mem['session_rss']} "
              f"({mem['kernel_rss']} + {mem['workers_rss']}, {mem['workers']:g} workers) | {mem['session_pss']} | "
              f"{r['machine_mb_per_session_idle']} / {r['machine_mb_per_session_after_cells']} | "
              f"{r.get('refill_s', '-')} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                                   "python": sys.version.split()[0]}, "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
