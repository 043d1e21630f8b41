"""Must-block: every stand-in holds however its method is read (one rule for instance, class and super()).

Stand-ins replace methods whose real value would escape the gates (str.format traverses attributes,
list.extend consumes an iterator in C, arr.tolist builds an object per element, Figure.show opens a
renderer ...). They were chosen by instance reads only, so `range.count(r, 1.5)`, `np.ndarray.tolist(a)`
and `pd.Series.apply(box, name)` read from the *class* got the raw method. The stand-in is now chosen by
what the name resolves to in the class's MRO (gates.STAND_IN_METHODS lists every one), whoever reads it:
this file reads each listed method from an instance, from its class and through super() of a cell's
subclass, and checks the cell never receives the raw method.
"""
from __future__ import annotations

import array
import collections
import io

import pytest

from sandbox_kernel import gates as gates_module

EXAMPLES = {
    list: lambda: [1], set: lambda: {1}, frozenset: lambda: frozenset({1}), dict: lambda: {1: 2},
    bytearray: lambda: bytearray(b"ab"), str: lambda: "ab", bytes: lambda: b"ab", range: lambda: range(3),
    collections.deque: lambda: collections.deque([1]), collections.OrderedDict: lambda: collections.OrderedDict(a=1),
    collections.Counter: lambda: collections.Counter("ab"), array.array: lambda: array.array("b", [1]),
    io.BytesIO: lambda: io.BytesIO(b"ab"),
}


def _example(cls):
    if cls in EXAMPLES:
        return EXAMPLES[cls]()
    if cls.__module__.startswith("numpy"):
        import numpy as np
        if cls is np.random.RandomState:
            return np.random.RandomState(0)
        return np.zeros(2) if cls is np.ndarray else np.float64(1.0)
    if cls.__name__ == "BaseFigure":
        import plotly.graph_objects as go
        return go.Figure()
    raise AssertionError(f"no example object for {cls}")


def _methods(sandbox):
    # numpy and plotly register theirs when loaded: load them through the engine first
    assert sandbox.run("import numpy, plotly.graph_objects").ok
    return [(cls, name, kind) for cls, name, kind in gates_module.STAND_IN_METHODS]


def _is_raw(value, raw) -> bool:
    return value is raw or value == raw


def test_every_stand_in_is_listed_with_an_example(sandbox):
    methods = _methods(sandbox)
    kinds = {kind for _, _, kind in methods}
    assert {"consume", "consume_first", "consume_init", "join", "pad", "grow_text", "format", "format_map",
            "range_walk", "tolist", "plotly_show", "no_auto_open", "random_state", "object_sort"} <= kinds, kinds
    for cls, _, _ in methods:
        _example(cls)


@pytest.mark.parametrize("read", ["instance", "class", "super"])
def test_stand_ins_hold_for_every_read(sandbox, read):
    gates = sandbox.engine.gates
    raw_reads = []
    for cls, name, kind in _methods(sandbox):
        obj = _example(cls)
        if read == "instance":
            got, raw = gates.getattr(obj, name), getattr(obj, name)
        elif read == "class":
            got, raw = gates.getattr(cls, name), getattr(cls, name)
        else:
            if cls in (range, bytes, str, frozenset) or not isinstance(obj, cls) or cls.__flags__ & (1 << 8) == 0 \
                    and cls.__module__ == "builtins" and cls not in (list, set, dict, bytearray):
                continue   # classes a cell cannot subclass (or whose instances it cannot re-make)
            sandbox.ns["_base"] = cls
            r = sandbox.run("class Sub(_base):\n    pass")
            if not r.ok:
                continue
            sub = sandbox.ns["Sub"]
            try:
                child = sub(obj) if cls not in (collections.Counter,) else sub("ab")
            except Exception:
                continue
            sup = super(sub, child)
            got, raw = gates.getattr(sup, name), getattr(sup, name)
        if _is_raw(got, raw):
            raw_reads.append(f"{cls.__name__}.{name} ({kind})")
    assert raw_reads == [], f"{read} reads handed out the raw method: {raw_reads}"


def test_class_reads_apply_the_check_to_any_self(run):
    """A method read from the class is called with the cell's choice of self: the check is the same."""
    r = run("import numpy as np\nclass Box:\n    pass\n"
            "try:\n    str.format('{0.__class__}', Box())\nexcept Exception as e:\n    print(type(e).__name__)\n"
            "try:\n    str.join('', ('x' * 1000 for _ in range(10**6)))\nexcept Exception as e:\n    print(type(e).__name__)\n"
            "range.count(range(10**12), 1.5)\n", memory_mb=256, ticks=10**7)
    assert r.stdout.split() == ["AttributeDenied", "SizeDenied"], r
    assert r.error_name == "TickLimitExceeded" and "this operation alone needs" in r.error_value, r
