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


def round_trip(backend, source="1", n=300):
    times = []
    sink = []
    for _ in range(n):
        t = time.perf_counter()
        backend.run_cell(source, emit=sink.append)
        times.append(time.perf_counter() - t)
        sink.clear()
    times.sort()
    return {"median_ms": ms(statistics.median(times)), "p95_ms": ms(times[int(len(times) * 0.95) - 1])}


def timed_cell(backend, source, n=5):
    times = []
    for _ in range(n):
        sink = []
        t = time.perf_counter()
        done = backend.run_cell(source, emit=sink.append)
        times.append(time.perf_counter() - t)
        assert done["status"] == "ok", done.get("error")
    return ms(statistics.median(times))


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--json")
    args = ap.parse_args()
    policy = PRESETS["data-science"]
    levels = ["none", "process"] + (["kernel"] if sys.platform.startswith("linux") else [])
    out = {"machine": f"{platform.system()} {platform.release()}, Python {platform.python_version()}, "
                      f"{os.cpu_count()} CPUs", "levels": {}}
    big_print = "print('x' * 999_999)"
    figure = ("import plotly.graph_objects as go\nimport numpy as np\n"
              "go.Figure(go.Scatter(x=np.arange(10000), y=np.random.rand(10000)))")
    frame = ("import pandas as pd\nimport numpy as np\n"
             "df = pd.DataFrame(np.random.rand(2000, 8), columns=list('abcdefgh'))\n"
             "df.groupby((df.a * 10).astype(int)).mean()")
    with tempfile.TemporaryDirectory() as tmp:
        for level in levels:
            wd = os.path.join(tmp, level)
            b = make_backend(level, policy, wd, **({} if level == "none" else {"spare": False}))
            if level != "none":
                assert b.wait_ready(), b.status()
            b.run_cell(figure, emit=lambda e: None)  # warm caches alike
            row = {"trivial": round_trip(b, n=args.rounds),
                   "print_1MB_ms": timed_cell(b, big_print),
                   "plotly_10k_points_ms": timed_cell(b, figure),
                   "pandas_groupby_ms": timed_cell(b, frame)}
            if level != "none":
                st = b.status()["worker"]
                row["worker_rss_mb"] = st["rss_mb"]
                row["cold_start_ms"] = cold_start(level, policy, wd)
                row.update(crash_recovery(level, policy, wd))
            b.shutdown()
            out["levels"][level] = row
    print(f"Machine: {out['machine']}\n")
    print("| level | trivial cell median (p95) | print 1 MB | Plotly 10k points | pandas groupby | "
          "worker start | crash -> ready (max) | kill -> next answer | worker RSS |")
    print("|---|---|---|---|---|---|---|---|---|")
    for level, r in out["levels"].items():
        t = r["trivial"]
        print(f"| {level} | {t['median_ms']} ms ({t['p95_ms']}) | {r['print_1MB_ms']} ms | "
              f"{r['plotly_10k_points_ms']} ms | {r['pandas_groupby_ms']} ms | "
              f"{r.get('cold_start_ms', '-')} ms | "
              f"{r.get('recovery_ms_median', '-')} ms ({r.get('recovery_ms_max', '-')}) | "
              f"{r.get('kill_to_next_answer_ms_median', '-')} ms | {r.get('worker_rss_mb', '-')} MB |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
