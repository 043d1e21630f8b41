"""What the cell-key wrapper costs: comparisons and hashing of a cell class with its own __eq__/__hash__.

A class made while a cell runs has its own __eq__, __ne__ and __hash__ wrapped so that outside a cell its objects
answer by identity (docs/security.md, "a cell's objects as keys of process-wide caches"). This times a
comparison-bound cell (90,000 == of such objects, a set of 2,000) in an engine, best of five runs.

    python bench/key_methods.py [CHECKOUT]   (another checkout, its extensions built in place, for an A/B)
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

CELL = """
class P:
    def __init__(self, x):
        self.x = x
    def __eq__(self, other):
        return self.x == other.x
    def __hash__(self):
        return hash(self.x)
ps = [P(i % 100) for i in range(2000)]
n = 0
for a in ps[:300]:
    for b in ps[:300]:
        if a == b:
            n += 1
s = len(set(ps))
"""


def main() -> None:
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, root)
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS

    engine = Engine(PRESETS["data-science"], workdir=tempfile.mkdtemp())
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        done = engine.run_cell(CELL, emit=lambda event: None)
        best = min(best, time.perf_counter() - start)
    print(f"{root}: {done['status']}, best of 5: {best:.3f} s")


if __name__ == "__main__":
    main()
