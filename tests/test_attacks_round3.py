"""Must-block, third round: state that leaks from a cell into the host thread, silent denials, private
library state reached by shadowing the name in a sandbox subclass, C-level arithmetic past the limit."""
from __future__ import annotations

import decimal
import subprocess
import time

import pytest

from childcell import TIGHT, run_cell_in_child


def test_decimal_context_does_not_leak_to_host(run):
    ctx = decimal.getcontext()
    saved = (ctx.prec, dict(ctx.traps))
    try:
        run("import decimal\ndecimal.getcontext().prec = 3\ndecimal.getcontext().traps[decimal.Inexact] = True\n")
        assert decimal.getcontext().prec == saved[0]
        assert decimal.Decimal(1) / decimal.Decimal(3) == decimal.Decimal("0.3333333333333333333333333333")
    finally:
        ctx.prec = saved[0]
        for k, v in saved[1].items():
            ctx.traps[k] = v


def test_denials_inside_hasattr_are_recorded(run):
    r = run("class P:\n    @property\n    def x(self):\n        try:\n            import os\n"
            "        except ImportError:\n            pass\n        return 1\nprint(hasattr(P(), 'x'))\n")
    assert r.ok and r.stdout == "True\n"
    assert r.denied("import", line=5), r


def test_private_library_state_via_subclass_shadowing(sandbox):
    r = sandbox.run("import pandas as pd\nclass D(pd.DataFrame):\n    _mgr = None\n"
                    "m = D({'a': [1]})._mgr\nprint(type(m).__name__)\n")
    assert "m" not in sandbox.ns, r


def test_private_library_state_stays_hidden(run):
    r = run("import pandas as pd\nclass D(pd.DataFrame):\n    pass\nm = D({'a': [1]})._mgr\n")
    assert not r.ok and r.denied("attribute", line=4), r


@pytest.mark.parametrize("src", [
    "decimal.getcontext().prec = 10**8\nx = decimal.Decimal(2).sqrt()",
    "c = decimal.Context(prec=10**8)\nx = c.sqrt(decimal.Decimal(2))",
    "c = decimal.getcontext().copy()\nc.prec = 10**8\nx = c.sqrt(decimal.Decimal(2))",
    "with decimal.localcontext(prec=10**8):\n    x = decimal.Decimal(2).sqrt()",
    "setattr(decimal.getcontext(), 'prec', 10**8)\nx = decimal.Decimal(2).sqrt()",
    "decimal.getcontext().__init__(prec=10**8)\nx = decimal.Decimal(2).sqrt()",
    "c = type(decimal.getcontext())(prec=10**8)\nx = c.sqrt(decimal.Decimal(2))",
    "c = decimal.getcontext().__class__(prec=10**8)\nx = c.sqrt(decimal.Decimal(2))",
    "class C(decimal.Context):\n    pass\nx = C(prec=10**8).sqrt(decimal.Decimal(2))",
    "class I:\n    n = 0\n    def __index__(self):\n        I.n += 1\n        return 5 if I.n == 1 else 10**8\n"
    "decimal.getcontext().prec = I()\nx = decimal.Decimal(2).sqrt()",
    "d = decimal.DefaultContext\nd.prec = 10**8",
    "decimal.getcontext().prec = 4000\nc = decimal.Context(prec=5000)\nx = decimal.Decimal(2).sqrt(c)\n"
    "decimal.getcontext().prec = 10**6",
])
def test_decimal_huge_precision_is_limited(src):
    src = "import decimal\n" + src + "\n"
    t0 = time.monotonic()
    try:
        result = run_cell_in_child(src, "strict", limits=TIGHT, rlimits={"RLIMIT_AS": 4 << 30}, timeout=3)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the cell ran past its limit ({time.monotonic() - t0:.1f}s)")
    # refused (a size or limit error, or no way to the constructor at all), or held to a small precision
    assert "crashed" not in result, result
    assert result["ename"] in (None, "SizeDenied", "TimeLimitExceeded", "TickLimitExceeded", "AttributeDenied",
                               "BuiltinDenied"), result
    assert result["status"] == "error" or "I()" in src, result
