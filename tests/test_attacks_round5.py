"""Must-block, fifth round: variants of the in-progress fixes (printf widths that are not literals)."""
from __future__ import annotations

import pytest

from childcell import TIGHT, run_cell_in_child


def _run(src):
    return run_cell_in_child(src, limits=TIGHT, timeout=20,
                             rlimits={"RLIMIT_AS": 4 << 30})   # a failed check costs a MemoryError, not the host


@pytest.mark.parametrize("src", [
    "f = '%10000000000d'\nx = f % 1",
    "f = '%' + '10000000000d'\nx = f % (1,)",
    "x = '%10000000000d'.__mod__(1)",
    "import operator\nx = operator.mod('%10000000000d', 1)",
    "import operator\nx = operator.imod('%10000000000d', 1)",
    "x = b'%10000000000d'.__mod__(1)",
    "x = bytearray(b'%10000000000d') % 1",
    "s = '%10000000000d'\ns %= 1",
    "class S(str):\n    pass\nx = S('%10000000000d') % 1",
    "def f(a, b):\n    return a % b\nx = f('%10000000000d', 1)",
    "x = str.__mod__('%10000000000d', 1)",
    "x = '%*d' % (10**10, 1)",
])
def test_percent_width_not_literal(src):
    result = _run(src)
    # refused before C allocates: a size refusal, or no way to reach str.__mod__ at all
    assert result["ename"] in ("SizeDenied", "AttributeDenied"), result



# --- copy guard checks only the top-level object -------------------------------------------------------

@pytest.mark.parametrize("call", ["copy.deepcopy([X()])", "copy.deepcopy({'k': X()})", "copy.deepcopy((X(),))",
                                  "copy.deepcopy(Holder())"])
def test_copy_guard_nested(sandbox, call):
    import math
    snap = dict(vars(math))
    try:
        sandbox.run("import copy, math\ndef get_math():\n    return math\n"
                    "class X:\n    def __reduce_ex__(self, proto):\n"
                    "        return (get_math, (), {'floor': lambda v: 42})\n"
                    "class Holder:\n    def __init__(self):\n        self.x = X()\n"
                    f"try:\n    {call}\nexcept Exception:\n    pass\n")
        assert dict(vars(math)).keys() == snap.keys() and all(vars(math)[k] is snap[k] for k in snap), \
            "the host's math module was modified"
    finally:
        vars(math).clear()
        vars(math).update(snap)


# --- the "target must be the cell's" guard only looks at a positional target ---------------------------

@pytest.mark.parametrize("call,probe", [
    ("functools.update_wrapper(wrapper=math, wrapped=f)", "math"),
    ("typing.no_type_check(arg=pd.DataFrame)", "DataFrame"),
])
def test_target_guard_by_keyword(sandbox, call, probe):
    import math
    import pandas as pd
    target = math if probe == "math" else pd.DataFrame
    snap = dict(vars(target))
    try:
        sandbox.run("import functools, typing, math, pandas as pd\ndef f():\n    pass\nf.sqrt = lambda v: 43\n"
                    f"try:\n    {call}\nexcept Exception:\n    pass\n")
        now = dict(vars(target))
        assert now.keys() == snap.keys() and all(now[k] is snap[k] for k in snap), f"{probe} was modified"
    finally:
        if target is math:
            vars(math).clear()
            vars(math).update(snap)
        else:
            for k in set(vars(target)) - set(snap):
                delattr(target, k)
            for k, v in snap.items():
                if vars(target).get(k) is not v:
                    setattr(target, k, v)


# --- C loops that feed a list from its own iterator ---------------------------------------------------

@pytest.mark.parametrize("src", [
    "x = [0]\nx.extend(iter(x))",
    "x = [0]\nx += iter(x)",
])
def test_self_feeding_extend(src):
    result = run_cell_in_child(src, limits=TIGHT, rlimits={"RLIMIT_AS": 400 << 20}, timeout=20)
    # ending at all is the point: a snapshot of the iterator (status ok) or a limit
    assert result["status"] == "ok" or result["ename"] in (
        "TimeLimitExceeded", "TickLimitExceeded", "SizeDenied", "MemoryLimitExceeded"), \
        f"{result} (in-process without an address-space cap this fills the host's memory)"
