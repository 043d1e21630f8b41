#!/usr/bin/env python
"""Cost of each gated operation inside a cell: the same loop in the engine and in plain ``exec``.

    python bench/gate_costs.py [--n 200000] [--reps 5]

Prints ns per operation (best of --reps) in plain CPython, in the engine, and the difference minus
the empty loop's (the tick's) own overhead. Noisy on a busy machine: read orders of magnitude.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SETUP = '''
import numpy as np
class O:
    def __init__(self):
        self.a = 1
    def m(self):
        return 1
class E(Exception):
    def __init__(self, c):
        super().__init__(c)
def g():
    return 1
o = O(); L = []; D = {}; s = "abc"; f2 = 1.5; f3 = 2.5; T = (1, 2, 3)
'''

OPS = {
    "empty loop iteration (tick)": "pass",
    "call of a cell function": "x = g()",
    "o.a (instance attribute)": "x = o.a",
    "o.m (bound method of a cell class)": "x = o.m",
    "L.append (builtin method)": "x = L.append",
    "D.get (builtin method)": "x = D.get",
    "s.upper (str method)": "x = s.upper",
    "np.sqrt (module attribute)": "x = np.sqrt",
    "o.a = 1 (write)": "o.a = 1",
    "o.a += 1 (augmented)": "o.a += 1",
    "i * 3 (int product)": "x = i * 3",
    "f2 * f3 (float product, names)": "x = f2 * f3",
    "str(i) (sized call)": "x = str(i)",
    "sum(T) (sized call)": "x = sum(T)",
    "id(i) (audit event)": "x = id(i)",
    "E(1) (super().__init__)": "x = E(1)",
}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS

    body = SETUP + "".join(f"def op{k}(n):\n    for i in range(n):\n        {stmt}\n"
                           for k, stmt in enumerate(OPS.values()))
    eng = Engine(PRESETS["data-science"], workdir=tempfile.mkdtemp(prefix="gate-costs-"))
    events: list = []
    done = eng.run_cell(body, emit=events.append)
    if done["status"] != "ok":
        raise SystemExit(f"setup failed: {done['error']}")
    ns = {"__name__": "__main__"}
    exec(compile(body, "<plain>", "exec"), ns)  # noqa: S102 - our own source
    res = {}
    for k, label in enumerate(OPS):
        te, tp = [], []
        cell = f"op{k}({args.n})"
        for _ in range(args.reps):
            t0 = time.perf_counter()
            done = eng.run_cell(cell, emit=events.append)
            te.append(time.perf_counter() - t0)
            if done["status"] != "ok":
                raise SystemExit(f"{label}: {done['error']}")
            t0 = time.perf_counter()
            exec(cell, ns)  # noqa: S102
            tp.append(time.perf_counter() - t0)
        res[label] = (min(tp) / args.n * 1e9, min(te) / args.n * 1e9)
    base_p, base_e = res["empty loop iteration (tick)"]
    print(f"{'operation':38s} {'plain ns':>9s} {'engine ns':>10s} {'gate ns':>8s}")
    for label, (p, e) in res.items():
        extra = (e - p) if label.startswith("empty") else (e - p) - (base_e - base_p)
        print(f"{label:38s} {p:9.0f} {e:10.0f} {extra:8.0f}")


if __name__ == "__main__":
    main()
