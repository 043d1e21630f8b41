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
import random
import types
import typing

import pytest

from sandbox_kernel import gates as gates_module

EXAMPLES = {
    list: lambda: [1], set: lambda: {1}, frozenset: lambda: frozenset({1}), dict: lambda: {1: 2},
    bytearray: lambda: bytearray(b"ab"), str: lambda: "ab", bytes: lambda: b"ab", range: lambda: range(3),
    collections.deque: lambda: collections.deque([1]), collections.OrderedDict: lambda: collections.OrderedDict(a=1),
    collections.Counter: lambda: collections.Counter("ab"), array.array: lambda: array.array("b", [1]),
    io.BytesIO: lambda: io.BytesIO(b"ab"),
    random.Random.__mro__[1]: lambda: random.Random(1), random.SystemRandom: lambda: random.SystemRandom(),
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
    if cls.__name__ in ("cKDTree", "KDTree"):   # query_pairs, counted first (N9-4)
        import numpy as np
        return cls(np.zeros((3, 2)))
    raise AssertionError(f"no example object for {cls}")


def _methods(sandbox):
    # numpy and plotly register theirs when loaded: load them through the engine first
    assert sandbox.run("import numpy, plotly.graph_objects, scipy.spatial").ok
    return [(cls, name, kind) for cls, name, kind in gates_module.STAND_IN_METHODS]


def _is_raw(value, raw) -> bool:
    return value is raw or value == raw


def test_every_stand_in_is_listed_with_an_example(sandbox):
    methods = _methods(sandbox)
    kinds = {kind for _, _, kind in methods}
    assert {"consume", "consume_first", "consume_init", "join", "pad", "grow_text", "format", "format_map",
            "range_walk", "tolist", "plotly_show", "no_auto_open", "random_state", "object_sort",
            "kdtree_pairs", "random_bits"} <= kinds, kinds
    for cls, _, _ in methods:
        _example(cls)


@pytest.mark.parametrize("read", ["instance", "class", "super", "alias", "annotated"])
def test_stand_ins_hold_for_every_read(sandbox, read):
    gates = sandbox.engine.gates
    raw_reads = []
    for cls, name, kind in _methods(sandbox):
        obj = _example(cls)
        if read == "instance":
            got, raw = gates.getattr(obj, name), getattr(obj, name)
        elif read == "class":
            got, raw = gates.getattr(cls, name), getattr(cls, name)
        elif read in ("alias", "annotated"):
            # a generic alias passes reads on to its class (review 17, R17-6)
            alias = types.GenericAlias(cls, (int,)) if read == "alias" else typing.Annotated[cls, 0]
            try:
                raw = getattr(alias, name)
            except AttributeError:
                continue   # typing's aliases answer dunders themselves: none to pass on
            got = gates.getattr(alias, name)
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


# Reads the policy refuses on a class, each through the aliases that pass reads on to it (review 17, R17-6:
# np.ndarray[Any, Any].resize freed a buffer views still pointed at; dataclasses.Field[int].__init__ re-ran a
# library dataclass's Field constructor).
ALIAS_FORMS = ["np.ndarray[typing.Any, typing.Any]", "NDArray", "typing.Annotated[np.ndarray, 0]",
               "typing.Annotated[np.ndarray[typing.Any, typing.Any], 0]"]
REFUSED_CLASS_READS = ["resize", "ctypes", "tofile", "dump", "__setstate__", "__reduce__", "_set_flags"]


@pytest.mark.parametrize("form", ALIAS_FORMS)
def test_alias_reads_are_decided_as_reads_of_the_class(run, form):
    r = run("import typing, numpy as np\nfrom numpy.typing import NDArray\nout = []\n"
            f"for name in {REFUSED_CLASS_READS!r}:\n"
            "    for target in (np.ndarray, " + form + "):\n"
            "        try:\n            getattr(target, name)\n            out.append('read')\n"
            "        except Exception as e:\n            out.append(type(e).__name__)\n"
            "print(out.count('AttributeDenied'), len(out))")
    assert r.ok and r.stdout == f"{2 * len(REFUSED_CLASS_READS)} {2 * len(REFUSED_CLASS_READS)}\n", r


def test_resize_through_an_alias_frees_nothing(run):
    r = run("import numpy as np, typing\nb = np.zeros(64)\nv = b[:]\ntry:\n"
            "    np.ndarray[typing.Any, typing.Any].resize(b, (100000,), refcheck=False)\nexcept Exception as e:\n"
            "    print('refused', type(e).__name__)\ns = [np.full(64, 7.0) for i in range(50)]\nv[:] = 5.0\n"
            "print('hit', sum(int((x == 5.0).any()) for x in s), b.size)")
    assert r.ok and r.stdout == "refused AttributeDenied\nhit 0 64\n", r


def test_a_library_dataclass_field_is_not_reinitialised_through_an_alias(run):
    r = run("import dataclasses, numpy as np, scipy.stats as st\n"
            "res = st.bootstrap((np.arange(10.0),), np.mean, n_resamples=20)\nfs = dataclasses.fields(res)\ntry:\n"
            "    dataclasses.Field[int].__init__(fs[0], dataclasses.MISSING, dataclasses.MISSING, True, True, None,"
            " True, None, False)\nexcept Exception as e:\n    print('refused', type(e).__name__)\n"
            "print([f.name for f in dataclasses.fields(res)][0])")
    assert r.ok and r.stdout == "refused AttributeDenied\nconfidence_interval\n", r


def test_aliases_still_read_as_types(run):
    r = run("import typing, numpy as np\nfrom numpy.typing import NDArray\n"
            "print(list[int].__name__, np.ndarray[typing.Any, typing.Any].__name__, typing.get_origin(NDArray).__name__,"
            " typing.List[int].__args__, NDArray[np.float64].__args__[0])")
    assert r.ok and r.stdout == "list ndarray ndarray (<class 'int'>,) tuple[typing.Any, ...]\n", r


def test_class_reads_apply_the_check_to_any_self(run):
    """A method read from the class is called with the cell's choice of self: the check is the same."""
    r = run("import numpy as np\nclass Box:\n    pass\n"
            "try:\n    str.format('{0.__class__}', Box())\nexcept Exception as e:\n    print(type(e).__name__)\n"
            "try:\n    str.join('', ('x' * 1000 for _ in range(10**6)))\nexcept Exception as e:\n    print(type(e).__name__)\n"
            "range.count(range(10**12), 1.5)\n", memory_mb=256, ticks=10**7)
    assert r.stdout.split() == ["AttributeDenied", "SizeDenied"], r
    assert r.error_name == "TickLimitExceeded" and "this operation alone needs" in r.error_value, r


# -- review 11: the stand-ins' insides, and decisions that depended on what a cell class held --------------------
# R11-1..3: class-read stand-ins were functools.partial(_call_unbound, make, <raw method>) and instance ones
# partial(in_place, <raw bound method>, a): a partial's public .args handed the raw method to the cell (raw
# str.format read the kernel's environment, numpy's own set_state read past its state, the raw object sort
# crashed the kernel). R11-5: a decision cached while the cell's class shadowed a library method stayed
# after `del Cls.name`, handing out the library's raw method. Each attack runs in a child (some crash).

from childcell import TIGHT, run_cell_in_child  # noqa: E402

_CANARY = "r11-canary-value-7f3a"
_CANARY_ENV = f"import os\nos.environ['R11_CANARY'] = {_CANARY!r}\n"
_ROOMY = dict(TIGHT, timeout=20.0)


def _attack(cell, limits=_ROOMY, **kw):
    kw.setdefault("rlimits", {"RLIMIT_AS": 3 << 30})
    return run_cell_in_child(cell, limits=limits, ns=("leaked",), probe=_CANARY_ENV, hard_exit=True,
                             report=("status", "ename", "evalue"), **kw)


@pytest.mark.parametrize("route", ["str.format.args[1]", "str.format.func", "str.format.keywords",
                                   "'{}'.format.args", "'x'.ljust.args[0]"])
def test_a_stand_ins_insides_are_not_handed_out(route):
    """R11-1: the raw str.format, read out of a stand-in, formatted '{0.__globals__[os].environ}'."""
    r = _attack(f"import pandas as pd\nraw = {route}\n"
                f"leaked = {_CANARY!r} in raw('{{0.__globals__[os].environ}}', pd.read_csv)\n")
    assert "crashed" not in r and r["status"] == "error" and not r["leaked"], r


def test_numpys_own_set_state_is_not_reachable_through_a_stand_in():
    """R11-2: numpy's set_state accepts pos=700 and every draw then reads past the 624-word state."""
    r = _attack("import numpy as np\nrs = np.random.RandomState(0)\nst = rs.get_state()\n"
                "raw = np.random.RandomState.set_state.args[1]\nraw(rs, (st[0], st[1], 700, st[3], st[4]))\n"
                "rs.randint(0, 2**32, size=8, dtype=np.uint64)\nleaked = rs.get_state()[2] > 624\n")
    assert "crashed" not in r and r["status"] == "error" and not r["leaked"], r


def test_numpys_own_object_sort_is_not_reachable_through_a_stand_in():
    """R11-3 (review 5's N5-11 reopened): the raw sort of an object array whose __lt__ replaces its items."""
    r = _attack("import numpy as np\nclass K:\n    def __init__(self, v):\n        self.v = v\n"
                "        self.pad = [v] * 20\n    def __lt__(self, o):\n        a[:] = [K(-i) for i in range(len(a))]\n"
                "        return self.v < o.v\na = np.array([K(i) for i in range(200)], dtype=object)\n"
                "raw = a.sort.args[0]\nraw(kind='mergesort')\njunk = [[i] * 20 for i in range(5000)]\n"
                "leaked = sum(len(x.pad) for x in a) > 0\n", limits=dict(TIGHT, timeout=5.0),
                rlimits={"RLIMIT_AS": 2 << 30})
    assert "crashed" not in r and r["status"] == "error" and not r["leaked"], r


@pytest.mark.parametrize("read", ["instance", "class", "super"])
def test_stand_ins_are_opaque(sandbox, read):
    """Whatever a stand-in is, none of its public attributes (a partial's func/args/keywords among them) holds
    the raw method it stands in for."""
    from sandbox_kernel.denials import SandboxViolation

    gates = sandbox.engine.gates

    def holds(value, raw):
        if value is raw or type(value) is type(raw) and value == raw:
            return True
        if type(value) in (tuple, list):
            return any(holds(v, raw) for v in value)
        return type(value) is dict and any(holds(v, raw) for v in value.values())

    leaks = []
    for cls, name, kind in _methods(sandbox):
        obj = _example(cls)
        if read == "super":
            if cls in (range, bytes, str, frozenset) or not isinstance(obj, cls):
                continue
            sandbox.ns["_base"] = cls
            if not sandbox.run("class Sub(_base):\n    pass").ok:
                continue
            try:
                obj = sandbox.ns["Sub"](obj) if cls is not collections.Counter else sandbox.ns["Sub"]("ab")
            except Exception:
                continue
            holder = super(sandbox.ns["Sub"], obj)
        else:
            holder = obj if read == "instance" else cls
        got = gates.getattr(holder, name)
        raws = (getattr(holder, name), type.__dict__["__dict__"].__get__(cls).get(name))
        for attr in {"func", "args", "keywords", *(n for n in dir(got) if not n.startswith("_"))}:
            try:
                value = gates.getattr(got, attr)
            except (AttributeError, SandboxViolation):
                continue
            if any(raw is not None and holds(value, raw) for raw in raws):
                leaks.append(f"{cls.__name__}.{name}.{attr} ({kind})")
    assert leaks == [], f"{read} reads: the raw method is inside the stand-in: {leaks}"


@pytest.mark.parametrize("name, cell, ticks", [
    ("RandomState.set_state",
     "import numpy as np\nclass R(np.random.RandomState):\n    def set_state(self, st):\n        return 'mine'\n"
     "r = R(0)\nr.set_state(None)\ndel R.set_state\nst = r.get_state()\n"
     "r.set_state((st[0], st[1], 700, st[3], st[4]))\nr.randint(0, 2**32, size=8, dtype=np.uint64)\n"
     "leaked = r.get_state()[2] > 624\n", None),
    ("str.format from the class",
     "import pandas as pd\nclass S(str):\n    def format(self, *a):\n        return 'mine'\nS.format\ndel S.format\n"
     f"leaked = {_CANARY!r} in S.format('{{0.__globals__[os].environ}}', pd.read_csv)\n", None),
    ("deque.extend",
     "import collections\nclass D(collections.deque):\n    def extend(self, it):\n        return 'mine'\n"
     "d = D(maxlen=1)\nd.extend(())\ndel D.extend\nd.extend(range(5 * 10**7))\nleaked = True\n", 10**6),
    ("super() of a deeper class",
     "import numpy as np\nclass A(np.random.RandomState):\n    def set_state(self, st):\n        return 'mine'\n"
     "class B(A):\n    def go(self, st):\n        return super().set_state(st)\n"
     "b = B(0)\nb.go(None)\ndel A.set_state\nst = b.get_state()\nb.go((st[0], st[1], 700, st[3], st[4]))\n"
     "leaked = b.get_state()[2] > 624\n", None),
    ("an object rule (ndarray.ctypes)",
     "import numpy as np\nclass A(np.ndarray):\n    ctypes = 'mine'\na = np.zeros(3).view(A)\na.ctypes\n"
     "del A.ctypes\nleaked = a.ctypes is not None\n", None),
])
def test_a_decision_does_not_outlive_the_cell_method_it_was_made_for(name, cell, ticks):
    """R11-5: reading a name while the cell's class shadows a library method, deleting the cell's method, and
    reading it again gives the library method's stand-in or denial, never the raw method (decisions that depend
    on a cell class's dict are not cached)."""
    limits = dict(_ROOMY, ticks=ticks, timeout=60.0) if ticks else _ROOMY
    r = _attack(cell, limits=limits, timeout=120)
    assert "crashed" not in r and r["status"] == "error" and not r["leaked"], (name, r)
