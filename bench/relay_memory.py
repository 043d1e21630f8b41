"""The kernel process's memory while it relays a worker's large output (issue 8, item 2).

    python bench/relay_memory.py [--charts 20] [--points 400000] [--isolation process]
                                 [--output-bytes N] [--json out.json]

Starts a real kernel (jupyter_client, `--SandboxKernel.isolation=process` by default), runs a cell whose
`result = {"chart": [...]}` carries N charts of P points each (seed 002's channel, which the engine
relays chart by chart), and reads the kernel process's resident memory from /proc before the cell, at
its peak (VmHWM) and after. The figures in the issue-8 report come from this script.

To compare two trees, point the kernel and its workers at another copy of the package:
    --pythonpath /tmp/before --worker-python /path/to/wrapper
(the wrapper runs the worker from that copy; see the --worker-python help).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time

from sandbox_kernel.client import SandboxClient

CELL = """import numpy as np
xs = np.linspace(0, 1, {points})
charts = []
for i in range({charts}):
    ys = np.sin(xs * (i + 1))
    charts.append({{"data": [{{"type": "scattergl", "x": xs.tolist(), "y": ys.tolist()}}],
                    "layout": {{"title": "chart %d" % i}}}})
result = {{"output": "{charts} charts", "chart": charts}}
"""


def status_mb(pid: int) -> dict:
    fields = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = round(int(value.split()[0]) / 1024, 1)
    return fields


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--charts", type=int, default=20)
    ap.add_argument("--points", type=int, default=400_000)
    ap.add_argument("--isolation", default="process")
    ap.add_argument("--output-bytes", type=int, help="the policy's output_bytes (an operator's config "
                                                     "file); the kernel's display cap is min(this, 20 MB)")
    ap.add_argument("--pythonpath", help="PYTHONPATH for the kernel (another copy of sandbox_kernel)")
    ap.add_argument("--worker-python", help="executable the backend starts workers with (its 'python' "
                                             "option); a wrapper that drops its first three arguments "
                                             "('-I -m sandbox_kernel.isolation.worker') and runs that "
                                             "module from another copy with the rest")
    ap.add_argument("--json")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    options = [f"--SandboxKernel.isolation={args.isolation}"]
    if args.worker_python:
        options.append(f"--SandboxKernel.isolation_options=python={args.worker_python}")
    with tempfile.TemporaryDirectory() as tmp:
        if args.output_bytes:
            config = os.path.join(tmp, "operator_config.py")
            with open(config, "w") as fh:
                fh.write(f"c.SandboxKernel.limits = {{'output_bytes': {args.output_bytes}}}\n")
            options.append(f"--config={config}")
        client = SandboxClient(options=options, cwd=tmp, env=env).start()
        try:
            pid = client.km.provisioner.process.pid
            client.run("1 + 1")
            before = status_mb(pid)
            t = time.perf_counter()
            reply = client.run(CELL.format(charts=args.charts, points=args.points), timeout=600)
            seconds = round(time.perf_counter() - t, 1)
            time.sleep(1.0)
            after = status_mb(pid)
            out = {"machine": f"{platform.system()} {platform.release()}, Python {platform.python_version()}",
                   "charts": args.charts, "points": args.points, "isolation": args.isolation,
                   "output_bytes": args.output_bytes,
                   "kernel_rss_before_mb": before["VmRSS"], "kernel_rss_peak_mb": after["VmHWM"],
                   "kernel_rss_after_mb": after["VmRSS"], "cell_seconds": seconds,
                   "status": reply.get("status"), "charts_in_reply": len(reply.get("charts") or []),
                   "displays": sum(1 for o in reply.get("outputs") or [] if o.get("type") == "display_data"),
                   "error": (reply.get("error") or {}).get("evalue")}
        finally:
            client.shutdown()
    print(json.dumps(out, indent=2))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)


if __name__ == "__main__":
    main()
