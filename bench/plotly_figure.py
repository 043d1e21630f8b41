#!/usr/bin/env python
"""Cost of the kernel's Plotly check (sandbox_kernel/plotlyfigure.validate_figure) on big figures.

    python bench/plotly_figure.py [--reps 5]

The kernel runs the check on every chart, in its own process and outside every cell limit, so it
must stay linear and cheap next to what it already does with the figure (json.loads of the
worker's frame, json.dumps to publish it). Prints ms per figure (best of --reps) for the check,
and json.loads/json.dumps of the same figure for scale. Noisy on a busy machine.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def figures() -> dict:
    import numpy as np
    import plotly.graph_objects as go
    import plotly.io as pio

    rng = np.random.default_rng(0)

    def sent(fig):
        spec = json.loads(pio.to_json(fig, validate=False))
        return {"data": spec["data"], "layout": spec["layout"]}

    out = {}
    for n in (100_000, 400_000):
        x, y = rng.normal(size=n), rng.normal(size=n)
        out[f"scatter {n // 1000}k, plain lists"] = {"data": [{"type": "scattergl", "mode": "markers",
                                                               "x": x.tolist(), "y": y.tolist()}],
                                                     "layout": {"title": {"text": "t"}}}
        out[f"scatter {n // 1000}k, packed (plotly 6+)"] = sent(go.Figure(go.Scattergl(x=x, y=y, mode="markers")))
        labels = [f"point {i}" for i in range(n)]
        out[f"scatter {n // 1000}k + text labels"] = {"data": [{"type": "scattergl", "x": x.tolist(),
                                                                "y": y.tolist(), "text": labels,
                                                                "customdata": [[i, "a"] for i in range(n)]}]}
        out[f"bar {n // 1000}k categories"] = {"data": [{"type": "bar", "x": labels, "y": y.tolist()}]}
    side = 1000
    out["heatmap 1000x1000 lists"] = {"data": [{"type": "heatmap", "z": rng.normal(size=(side, side)).tolist()}]}
    out["many traces (2000 x 200 points)"] = {"data": [{"type": "scatter", "name": f"t{i}", "y": rng.normal(size=200).tolist(),
                                                        "marker": {"color": "red"}} for i in range(2000)]}
    return out


def best(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()

    import plotly

    from sandbox_kernel import plotlyfigure

    t = time.perf_counter()
    plotlyfigure.schema()
    print(f"plotly {plotly.__version__}: schema ready in {(time.perf_counter() - t) * 1000:.0f} ms "
          f"(fields are built on first use)")
    print(f"{'figure':42} {'JSON MB':>8} {'check ms':>9} {'loads ms':>9} {'dumps ms':>9}")
    for name, fig in figures().items():
        text = json.dumps(fig)
        parsed = json.loads(text)  # as the kernel holds it: parsed from the worker's frame
        plotlyfigure.validate_figure(parsed)  # first use builds the fields it needs
        check = best(lambda: plotlyfigure.validate_figure(parsed), args.reps)
        print(f"{name:42} {len(text) / 1e6:8.1f} {check:9.1f} {best(lambda: json.loads(text), args.reps):9.1f} "
              f"{best(lambda: json.dumps(fig), args.reps):9.1f}")


if __name__ == "__main__":
    main()
