"""Must-block, seventh round: classes with a guard reached through type() instead of their module, and
C-level work that the gates bound (decimal precision, %-formats) reached by the routes around them.
Each attack that could hang runs in a child process under a hard timeout."""
from __future__ import annotations

import subprocess
import time

import pytest

from childcell import TIGHT, run_cell_in_child


@pytest.mark.parametrize("src", [
    # itertools.repeat without a count, made from its class: sum() would never return from C
    "import itertools\nr = type(itertools.repeat(1, 2))(1)\nx = sum(r)",
    "import itertools\nc = type(itertools.count())\nx = sum(c())",
    "import itertools\nc = type(itertools.cycle([1]))\nx = sum(c([1]))",
    "import decimal\nc = type(decimal.getcontext())(prec=10**8)\nx = c.sqrt(decimal.Decimal(2))",
])
def test_type_hands_out_guarded_classes_guarded(src):
    t0 = time.monotonic()
    try:
        result = run_cell_in_child(src, "strict", limits=TIGHT, timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the cell ran past its limit ({time.monotonic() - t0:.1f}s)")
    assert result["status"] == "error", result
    # count() and cycle() already hand the cell a ticking generator, whose class cannot be called (TypeError)
    assert result["ename"] in ("SizeDenied", "TypeError", "TickLimitExceeded", "TimeLimitExceeded"), result


def test_type_of_ordinary_and_guarded_objects_still_works(run):
    r = run("import itertools, decimal, collections\n"
            "print(type(1).__name__, type([]) is list, type(itertools.chain()).__name__,"
            " type(decimal.Decimal(1)).__name__, type(decimal.getcontext()) is decimal.Context,"
            " type(collections.deque()) is collections.deque)")
    assert r.ok and r.stdout == "int True chain Decimal True True\n", r


def test_decimal_at_an_ordinary_precision_still_works(run):
    r = run("import decimal\n"
            "decimal.getcontext().prec = 50\n"
            "a = decimal.Decimal(1) / decimal.Decimal(7)\n"
            "with decimal.localcontext() as c:\n    c.prec = 10\n    b = decimal.Decimal(1) / decimal.Decimal(7)\n"
            "ctx = decimal.Context(prec=5, rounding=decimal.ROUND_DOWN)\n"
            "print(len(str(a)), b, ctx.divide(decimal.Decimal(2), decimal.Decimal(3)),"
            " isinstance(decimal.getcontext(), decimal.Context), isinstance(ctx, decimal.Context))\n"
            "decimal.setcontext(ctx)\nprint(decimal.getcontext().prec)\n")
    assert r.ok, r
    assert r.stdout == "52 0.1428571429 0.66666 True True\n5\n", r


def test_decimal_precision_refusal_names_the_limit_and_line(run):
    r = run("import decimal\nc = decimal.getcontext()\nc.prec = 10**9\n")
    assert not r.ok and r.denied("limit", line=3), r
    assert "5,000 digits" in r.everything, r


def test_host_directories_do_not_answer_whether_they_exist(run, outside):
    """On 3.10 pathlib called os through a table bound before the sandbox's guards (pathlib's accessor):
    writing into an existing host directory was refused one way and into a missing one another, an
    existence oracle for host paths."""
    existing = outside / "there"
    existing.mkdir()
    errors = []
    for target in (existing / "x.csv", outside / "missing" / "x.csv"):
        r = run(f"import pandas as pd\npd.DataFrame({{'a': [1]}}).to_csv({str(target)!r})\n")
        assert not r.ok, r
        errors.append((r.error["ename"], r.error["evalue"].replace(str(target.parent), "<dir>")))
        assert not target.exists()
    assert errors[0] == errors[1], errors


def test_guarded_classes_stay_classes(run):
    """A guard on a class (deque charges what it consumes, np.ndarray checks what it is laid over) must
    leave it a class: isinstance, subclassing and type() work as in plain Python."""
    r = run("import collections, numpy as np\nfrom collections import deque\n"
            "class Q(collections.deque):\n    def peek(self):\n        return self[0]\n"
            "q = Q([5, 6])\nd = deque([1, 2, 3], maxlen=2)\n"
            "print(q.peek(), isinstance(q, deque), isinstance(d, collections.deque), type(d) is deque, d)\n"
            "a = np.zeros(2)\nprint(isinstance(a, np.ndarray), type(a) is np.ndarray, issubclass(np.ndarray, object))\n")
    assert r.ok, r
    assert r.stdout == "5 True True True deque([2, 3], maxlen=2)\nTrue True True\n", r
