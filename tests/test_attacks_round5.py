"""Must-block, fifth round: variants of the in-progress fixes (printf widths that are not literals)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import dataclasses, json, sys, tempfile
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS
    p = PRESETS["data-science"]
    eng = Engine(p, workdir=tempfile.mkdtemp())
    done = eng.run_cell(sys.argv[1], emit=lambda e: None,
                        limits=dataclasses.replace(p.limits, timeout=1.0, ticks=10**7, memory_mb=256))
    print(json.dumps({"status": done["status"], "ename": (done["error"] or {}).get("ename")}))
""")


def _cap():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))   # a failed check costs a MemoryError, not the host


def _run(src):
    out = subprocess.run([sys.executable, "-c", CHILD, src], capture_output=True, text=True, timeout=20,
                         cwd=os.path.dirname(os.path.dirname(__file__)), preexec_fn=_cap)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.xfail(strict=True, reason="BYPASS (OOM): %-format widths are bounded only for literal format strings; "
                                       "a format in a variable, str.__mod__ or operator.mod builds 10 GB in C")
@pytest.mark.parametrize("src", [
    "f = '%10000000000d'\nx = f % 1",
    "f = '%' + '10000000000d'\nx = f % (1,)",
    "x = '%10000000000d'.__mod__(1)",
    "import operator\nx = operator.mod('%10000000000d', 1)",
    "x = b'%10000000000d'.__mod__(1)",
])
def test_percent_width_not_literal(src):
    result = _run(src)
    assert result["ename"] == "SizeDenied", result

