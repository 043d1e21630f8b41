"""Must-block, sixth round: C consumers of huge iterators that are not among the sized builtins."""
from __future__ import annotations

import subprocess
import time

import pytest

from childcell import TIGHT, run_cell_in_child


@pytest.mark.parametrize("src", [
    "import collections\ncollections.deque(range(10**18), maxlen=0)",
    "import math\nmath.fsum(range(10**18))",
])
def test_c_consumers_of_huge_ranges_end(src):
    t0 = time.monotonic()
    try:
        result = run_cell_in_child(src, limits=TIGHT, rlimits={"RLIMIT_AS": 2 << 30}, timeout=2.5)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the cell ran past its 1 s limit ({time.monotonic() - t0:.1f}s)")
    assert result["ename"] in ("TimeLimitExceeded", "TickLimitExceeded", "SizeDenied"), result


def test_bmat_cannot_read_gate_globals(sandbox):
    r = sandbox.run("import numpy as np\ntry:\n    m = list(map(np.bmat, ['_KEEP']))\nexcept Exception:\n    m = None\n")
    m = sandbox.ns.get("m")
    import numpy as np
    leaked = [] if m is None else list(np.asarray(m[0]).ravel())
    assert not any(getattr(x, "__module__", "").startswith(("numpy", "plotly", "sandbox_kernel")) for x in leaked), r


# --- finalizers made of library callables run after the cell, unconfined ------------------------------

@pytest.mark.parametrize("finalizer", [
    "functools.partial(pd.DataFrame({{'x': [1]}}).to_csv, {target!r})",
    "functools.partial(np.savetxt, {target!r}, np.arange(3))",
])
def test_library_callable_finalizer_after_cell(sandbox, outside, finalizer):
    import gc
    target = str(outside / "finalizer.txt")
    r = sandbox.run("import functools, pandas as pd, numpy as np\n"
                    f"class X:\n    __del__ = {finalizer.format(target=target)}\n"
                    "x = X()\nx.me = x\ndel x\n")
    assert r.ok or r.denied(), r      # refusing the class is as good as a finalizer that cannot act
    gc.collect()
    assert not (outside / "finalizer.txt").exists(), "a finalizer wrote outside the workdir after the cell"


@pytest.mark.xfail(strict=True, reason="BYPASS (memory/time): numpy allocations are not size-checked before they "
                                       "start: np.ones(3e9, uint8) under a 256 MB limit commits up to 3 GB in C and "
                                       "ends on a time limit (8 s in-process under a 2 s limit), never a size refusal")
def test_numpy_allocation_is_size_checked():
    src = "import numpy as np\nx = np.ones(3 * 10**9, dtype=np.uint8)"
    t0 = time.monotonic()
    try:
        result = run_cell_in_child(src, limits=TIGHT, rlimits={"RLIMIT_AS": 4 << 30}, timeout=4)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the cell ran past its limit ({time.monotonic() - t0:.1f}s)")
    assert result["ename"] in ("SizeDenied", "MemoryLimitExceeded"), result
    assert time.monotonic() - t0 < 3.5


HOST_ABCS = """
    import collections.abc, numbers
    def probe_host(report):
        report["str_is_number"] = isinstance("a", numbers.Number)
        report["list_is_mapping"] = isinstance([], collections.abc.Mapping)
"""


@pytest.mark.parametrize("src", ["import numbers\nnumbers.Number.register(str)",
                                 "import collections.abc\ncollections.abc.Mapping.register(list)"])
def test_abc_register_does_not_change_host_semantics(src):
    result = run_cell_in_child(src, report=(), probe=HOST_ABCS, timeout=60)
    assert result == {"str_is_number": False, "list_is_mapping": False}, result
