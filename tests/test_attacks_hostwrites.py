"""Must-block: granted modules and classes must stay unchanged on the host even when the write is done
by a library helper on the cell's behalf (copy's reduce protocol, functools.update_wrapper,
dataclasses.dataclass, typing decorators) or by item assignment into module-level containers.
Every test restores the host objects it may have damaged, so a bypass cannot break later tests."""
from __future__ import annotations

import contextlib
import json
import math

import pandas as pd
import pytest


@contextlib.contextmanager
def restored(*objs):
    snaps = [(o, dict(vars(o))) for o in objs]
    try:
        yield
    finally:
        for o, snap in snaps:
            if isinstance(o, type):
                for k in set(vars(o)) - set(snap):
                    with contextlib.suppress(Exception):
                        delattr(o, k)
                for k, v in snap.items():
                    if vars(o).get(k) is not v:
                        with contextlib.suppress(Exception):
                            setattr(o, k, v)
            elif isinstance(o, dict):
                pass
            else:
                vars(o).clear()
                vars(o).update(snap)


def _unchanged(obj, snap) -> bool:
    now = dict(vars(obj))
    return set(now) == set(snap) and all(now[k] is snap[k] for k in snap)


@pytest.mark.parametrize("fn", ["copy", "deepcopy"])
def test_copy_reduce_protocol_cannot_write_modules(sandbox, fn):
    snap = dict(vars(math))
    with restored(math):
        sandbox.run("import copy, math\n"
                    "def get_math():\n    return math\n"
                    "class X:\n    def __reduce_ex__(self, proto):\n"
                    "        return (get_math, (), {'floor': lambda v: 42, 'sandbox_was_here': True})\n"
                    f"copy.{fn}(X())\n")
        assert _unchanged(math, snap), "the host's math module was modified"


@pytest.mark.parametrize("call", ["functools.update_wrapper(math, f)", "functools.wraps(f)(math)"])
def test_update_wrapper_cannot_write_modules(sandbox, call):
    snap = dict(vars(math))
    with restored(math):
        sandbox.run("import functools, math\ndef f():\n    pass\nf.sqrt = lambda v: 43\n"
                    f"try:\n    {call}\nexcept Exception:\n    pass\n")
        assert math.__name__ == "math"
        assert _unchanged(math, snap), "the host's math module was modified"


@pytest.mark.parametrize("call,target", [
    ("dataclasses.dataclass(json.JSONDecoder)", json.JSONDecoder),
    ("typing.no_type_check(pd.DataFrame)", pd.DataFrame),
])
def test_class_decorators_cannot_write_library_classes(sandbox, call, target):
    snap = dict(vars(target))
    with restored(target):
        sandbox.run(f"import dataclasses, typing, json, pandas as pd\ntry:\n    {call}\nexcept Exception:\n    pass\n")
        assert _unchanged(target, snap), f"{target.__name__} was modified"


def test_module_level_containers_are_read_only(sandbox):
    import numpy as np
    original = dict(np.sctypeDict)
    try:
        sandbox.run("import numpy as np\nnp.sctypeDict['float64'] = np.int8\n")
        assert np.dtype("float64") == np.float64, "the host's numpy dtype table changed"
    finally:
        np.sctypeDict.clear()
        np.sctypeDict.update(original)


def test_direct_writes_stay_refused(run):
    for src in ("import math\nmath.__dict__.update({'floor': 1})", "import math\nvars(math).update(floor=1)",
                "import math\nsetattr(math, 'floor', 1)"):
        r = run(src)
        assert not r.ok and r.denials, (src, r)
    assert math.floor(1.5) == 1


# ====================================================================================================
# From review round 5: variants of the in-progress fixes (printf widths
# that are not literals).
# ====================================================================================================

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
