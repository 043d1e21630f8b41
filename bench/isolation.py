"""Isolation-level measurements: worker start, trivial-cell round trip, crash -> ready, relay cost.

    python bench/isolation.py [--rounds N] [--json out.json]

Prints a Markdown table (the figures in docs/performance.md, section "Isolation levels", come from it).
Linux only for the `kernel` level. A crash is simulated by SIGKILL-ing the worker from outside, which is
what the kernel's OOM killer does; the next cell then detects the loss and takes the pre-warmed spare.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time

from sandbox_kernel.isolation import make_backend
from sandbox_kernel.policy import PRESETS


def ms(seconds):
    return round(seconds * 1000, 2)


def cold_start(level, policy, workdir, n=3):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        b = make_backend(level, policy, workdir, spare=False)
        assert b.wait_ready(), b.status()
        times.append(time.perf_counter() - t)
        b.shutdown()
    return ms(statistics.median(times))


def crash_recovery(level, policy, workdir, n=10):
    b = make_backend(level, policy, workdir)
    recov, to_answer = [], []
    try:
        assert b.wait_ready()
        for _ in range(n):
            assert b.warm_spare()
            pid = b.status()["worker"]["pid"]
            t = time.perf_counter()
            os.kill(pid, signal.SIGKILL)
            lost = b.run_cell("1", emit=lambda e: None)
            assert lost["status"] == "error" and lost["worker"]["lost"], lost
            done = b.run_cell("import numpy, pandas, plotly\n2", emit=lambda e: None)
            assert done["status"] == "ok"
            to_answer.append(time.perf_counter() - t)
            recov.append(b.status()["worker"]["last_recovery_ms"])
    finally:
        b.shutdown()
    return {"recovery_ms_median": round(statistics.median(recov), 2), "recovery_ms_max": max(recov),
            "kill_to_next_answer_ms_median": ms(statistics.median(to_answer))}


WORKLOADS = {
    "trivial cell (`1`)": "1",
    "print 1 MB": "print('x' * 999_999)",
    "Plotly 10k points": ("import plotly.graph_objects as go\nimport numpy as np\n"
                          "go.Figure(go.Scatter(x=np.arange(10000), y=np.random.rand(10000)))"),
    "pandas groupby -> HTML": ("import pandas as pd\nimport numpy as np\n"
                               "df = pd.DataFrame(np.random.rand(2000, 8), columns=list('abcdefgh'))\n"
                               "df.groupby((df.a * 10).astype(int)).mean()"),
    "numpy 400x400 matmul x10": "import numpy as np\na = np.random.rand(400, 400)\nfor _ in range(10):\n    b = a @ a\nb.shape",
}


def interleaved(backends, rounds):
    """Median milliseconds per workload and level, levels interleaved round by round."""
    times = {w: {lv: [] for lv in backends} for w in WORKLOADS}
    for w, src in WORKLOADS.items():
        n = rounds if w.startswith("trivial") else max(10, rounds // 10)
        for b in backends.values():
            b.run_cell(src, emit=lambda e: None)  # warm
        for _ in range(n):
            for lv, b in backends.items():
                t = time.perf_counter()
                done = b.run_cell(src, emit=lambda e: None)
                times[w][lv].append(time.perf_counter() - t)
                assert done["status"] == "ok", done.get("error")
    return {w: {lv: ms(statistics.median(v)) for lv, v in per.items()} for w, per in times.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--json")
    args = ap.parse_args()
    policy = PRESETS["data-science"]
    levels = ["none", "process"] + (["kernel"] if sys.platform.startswith("linux") else [])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    out = {"machine": f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
                      f"{os.cpu_count()} CPUs, load average at start {load:.2f}" if load is not None else "",
           "workloads": {}, "workers": {}}
    with tempfile.TemporaryDirectory() as tmp:
        backends = {lv: make_backend(lv, policy, os.path.join(tmp, lv),
                                     **({} if lv == "none" else {"spare": False})) for lv in levels}
        try:
            for lv, b in backends.items():
                if lv != "none":
                    assert b.wait_ready(), b.status()
            out["workloads"] = interleaved(backends, args.rounds)
            for lv, b in backends.items():
                if lv != "none":
                    out["workers"][lv] = {"worker_rss_mb": b.status()["worker"]["rss_mb"]}
        finally:
            for b in backends.values():
                b.shutdown()
        for lv in levels[1:]:
            wd = os.path.join(tmp, lv)
            out["workers"][lv]["cold_start_ms"] = cold_start(lv, policy, wd)
            out["workers"][lv].update(crash_recovery(lv, policy, wd))
    print(f"Machine: {out['machine']}\n")
    print("| workload (median ms) | " + " | ".join(levels) + " | " +
          " | ".join(f"{lv} / none" for lv in levels[1:]) + " |")
    print("|---" * (len(levels) * 2) + "|")
    for w, per in out["workloads"].items():
        ratios = [f"{per[lv] / per['none']:.2f}x" if per["none"] else "-" for lv in levels[1:]]
        print(f"| {w} | " + " | ".join(f"{per[lv]}" for lv in levels) + " | " + " | ".join(ratios) + " |")
    print("\n| worker | cold start (to ready, numpy/pandas/plotly imported) | crash -> ready, median (max) | "
          "kill -> next cell answered | RSS |")
    print("|---|---|---|---|---|")
    for lv, r in out["workers"].items():
        print(f"| {lv} | {r['cold_start_ms']} ms | {r['recovery_ms_median']} ms ({r['recovery_ms_max']} ms) | "
              f"{r['kill_to_next_answer_ms_median']} ms | {r['worker_rss_mb']} MB |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
