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


NUMPY_HOST_ALLOCATOR = """
    import numpy as np
    def probe_host(report):   # after the cell: the host's own numpy allocates as before
        from numpy._core.multiarray import get_handler_name
        report["host_allocator"] = get_handler_name()
        report["host_big_array"] = np.ones(300 * 2**20, dtype=np.uint8).nbytes == 300 * 2**20
"""


@pytest.mark.parametrize("src", [
    "import numpy as np\nx = np.ones(3 * 10**9, dtype=np.uint8)",
    "import numpy as np\nx = np.full((60000, 60000), 1.5)",
    "import numpy as np\nx = np.arange(10**9)",
    "import numpy as np\nx = np.random.default_rng(0).random(10**9)",
    "import numpy as np\nx = np.tile(np.ones(1000), 10**6)",
    "import pandas as pd\nx = pd.Series(range(10**9))",
    "import numpy as np\nx = np.ones(10**6)\nwhile True:\n    x = np.concatenate([x, x])",
])
def test_numpy_allocation_is_size_checked(src):
    if gates_numpyguard() is None:
        pytest.skip("sandbox_kernel._numpyguard is not compiled: the memory sampler alone bounds numpy")
    t0 = time.monotonic()
    try:
        result = run_cell_in_child(src, limits=TIGHT, rlimits={"RLIMIT_AS": 4 << 30}, timeout=4,
                                   report=("status", "ename"), probe=NUMPY_HOST_ALLOCATOR)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the cell ran past its limit ({time.monotonic() - t0:.1f}s)")
    assert result["ename"] in ("SizeDenied", "MemoryLimitExceeded"), result
    assert time.monotonic() - t0 < 3.5
    assert result["host_allocator"] == "default_allocator" and result["host_big_array"], result


def gates_numpyguard():
    from sandbox_kernel import limits
    return limits._numpyguard


def test_numpy_allocations_within_the_limit_still_work(run):
    r = run("import numpy as np, pandas as pd\nx = np.ones((1000, 1000))\ny = x @ x\n"
            "df = pd.DataFrame(np.random.default_rng(1).random((10000, 5)))\n"
            "print(y[0, 0], df.shape, len(np.concatenate([x, x])))", memory_mb=256)
    assert r.ok and r.stdout == "1000.0 (10000, 5) 2000\n", r


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
