#!/usr/bin/env python
"""How many times each gate runs for one ``run()`` of a workload, or a cProfile of it.

    python bench/gate_counts.py dict_str            # gate call counts, top attribute reads
    python bench/gate_counts.py dict_str --profile  # cProfile of the timed cell, by own time
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import io
import os
import pstats
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from workloads import CALL, WORKLOADS, setup_source  # noqa: E402

NOT_GATES = ("__st_tick__",)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", choices=list(WORKLOADS))
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args(argv)
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS

    eng = Engine(PRESETS["data-science"], workdir=tempfile.mkdtemp(prefix="gate-counts-"))
    events: list = []
    for src in (setup_source(args.workload), CALL):
        done = eng.run_cell(src, emit=events.append)
        if done["status"] != "ok":
            raise SystemExit(f"failed: {done['error']}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        eng.run_cell(CALL, emit=events.append)
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(15)
        print(out.getvalue())
        return
    counts: collections.Counter = collections.Counter()
    reads: collections.Counter = collections.Counter()
    table = eng.builtins
    for key in list(table):
        fn = table[key]
        if key.startswith("__st_") and key not in NOT_GATES and callable(fn) and not isinstance(fn, type):
            def counting(*a, _fn=fn, _key=key, **kw):
                counts[_key] += 1
                if _key == "__st_getattr__" and len(a) == 2:
                    reads[(type(a[0]).__name__, a[1])] += 1
                return _fn(*a, **kw)
            table[key] = counting
    done = eng.run_cell(CALL, emit=events.append)
    print(f"{args.workload}: status {done['status']}, ticks {done['ticks']:,}")
    for key, n in counts.most_common():
        print(f"  {key:24s} {n:>12,}")
    print("  most frequent attribute reads:")
    for (tname, attr), n in reads.most_common(10):
        print(f"    {tname}.{attr:20s} {n:>10,}")


if __name__ == "__main__":
    main()
