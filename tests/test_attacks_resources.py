"""Must-block: process-wide resources a cell can exhaust for its host (file descriptors). Runs in a child
process so the exhaustion cannot reach pytest."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from childcell import run_cell_in_child

HOST_DESCRIPTORS = """
    import socket
    def probe_host(report):   # after the cell: can the host still open a file and a socket?
        try:
            open("/dev/null").close()
            report["host_open"] = True
        except OSError:
            report["host_open"] = False
        try:
            socket.socket().close()
            report["host_socket"] = True
        except OSError:
            report["host_socket"] = False
"""


def _run(src):
    return run_cell_in_child(src, probe=HOST_DESCRIPTORS, timeout=60,
                             rlimits={"RLIMIT_NOFILE": 256})   # same effect as the default, found faster


def test_cell_cannot_exhaust_file_descriptors():
    result = _run("files = []\ntry:\n    for i in range(100000):\n        files.append(open('f%d.txt' % i, 'w'))\n"
                  "except OSError:\n    pass\n")
    assert result["host_open"] and result["host_socket"], result


def test_files_closed_by_the_cell_are_released():
    result = _run("for i in range(600):\n    with open('g%d.txt' % (i % 10), 'w') as fh:\n        fh.write('x')\n")
    assert result == {"status": "ok", "ename": None, "host_open": True, "host_socket": True}, result


MEMORY_CHILD = textwrap.dedent("""
    import dataclasses, json, sys, tempfile
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS
    p = PRESETS["data-science"]
    eng = Engine(p, workdir=tempfile.mkdtemp())
    limits = dataclasses.replace(p.limits, memory_mb=200)
    statuses = []
    for i in range(4):
        done = eng.run_cell(f"x{i} = bytearray(b'\\\\x01') * (150 * 2**20)", emit=lambda e: None, limits=limits)
        statuses.append((done["error"] or {}).get("ename"))
    print(json.dumps(statuses))
""")


def test_memory_limit_counts_what_earlier_cells_kept():
    out = subprocess.run([sys.executable, "-c", MEMORY_CHILD], capture_output=True, text=True, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(__file__)))
    statuses = json.loads(out.stdout.strip().splitlines()[-1])
    assert any(s in ("MemoryLimitExceeded", "SizeDenied") for s in statuses), statuses


@pytest.mark.parametrize("src", [
    "import scipy.spatial\nt = scipy.spatial.cKDTree.__new__(scipy.spatial.cKDTree)\nt.tree",
    "import scipy.spatial\nt = scipy.spatial.cKDTree.__new__(scipy.spatial.cKDTree)\nt.count_neighbors(t, 1.0)",
])
def test_uninitialised_library_objects_cannot_crash_the_process(src):
    result = run_cell_in_child(src, probe=HOST_DESCRIPTORS, report=("status", "ename", "returncode"), timeout=60)
    assert result.get("returncode") == 0, f"the process died ({result})"


@pytest.mark.parametrize("wrapper", [
    "map(abs, x)", "filter(None, x)", "zip(x)", "enumerate(x)", "itertools.islice(x, 5)",
    "itertools.chain(x)", "itertools.chain.from_iterable(map(lambda v: [v], x))", "itertools.tee(x)[0]",
    "itertools.takewhile(bool, x)", "itertools.starmap(abs, zip(x))", "type(map(abs, []))(abs, x)",
    "itertools.islice(map(abs, x), 9).__class__(x, 9)", "copy.copy(itertools.tee(map(abs, x))[0])",
    "map(abs, itertools.tee(x)[0].__copy__())", "next(itertools.groupby(map(abs, x)))[1]",
])
def test_nested_c_iterators_cannot_crash_the_process(wrapper):
    src = f"import copy, itertools\nx = iter([1])\nfor _ in range(10**6):\n    x = {wrapper}\nnext(x)\n"
    result = run_cell_in_child(src, probe=HOST_DESCRIPTORS, report=("status", "ename", "returncode"), timeout=60)
    assert result.get("returncode") == 0, f"the process died ({result})"
    # refused at the limit; groupby's groups read their parent lazily and never nest (the cell ends well)
    assert result.get("ename") == "SizeDenied" or "groupby" in wrapper and result.get("status") == "ok", result
