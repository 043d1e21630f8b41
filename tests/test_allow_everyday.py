"""Must-allow: a batch of everyday analysis idioms in one notebook-like cell, and io.StringIO/BytesIO."""
from __future__ import annotations

import sys

import pytest

EVERYDAY = '''\
import pandas as pd, numpy as np, csv, json
df = pd.DataFrame({"city": ["a", "b", "a"], "v": [1, 2, 3], "tags": [["x"], ["y", "z"], []]})
df.info()
pd.set_option("display.max_columns", None)
np.set_printoptions(precision=3)
print(df.groupby("city").size().reset_index(name="n").n.tolist())
print(pd.get_dummies(df, columns=["city"]).shape, df.explode("tags").shape, pd.crosstab(df.city, df.v).shape)
print(df.nlargest(2, "v").v.tolist(), df.sample(frac=1.0, random_state=1).shape, df.corr(numeric_only=True).shape)
print(pd.json_normalize([{"a": {"b": 1}}]).columns.tolist(), pd.DataFrame.from_dict({"a": [1]}).shape)
with open("rows.csv", "w", newline="") as fh:
    w = csv.writer(fh)
    w.writerow(["a", "b"])
    w.writerow([1, 2])
with open("rows.csv") as fh:
    print(list(csv.DictReader(fh)))
json.dump({"a": 1}, open("d.json", "w"))
print(json.load(open("d.json")))
class Config(dict):
    __getattr__ = dict.get
c = Config(a=1)
print(c.a, c.missing)
class Handler:
    def handle_x(self):
        return "x"
    def dispatch(self, name):
        return getattr(self, f"handle_{name}")()
    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)
h = Handler(a=1, _b=2)
print(h.dispatch("x"), h.a, h._b, sorted(h.__dict__.items()))
print(list(zip(*[[1, 2], [3, 4]])), int("ff", 16), f"{1234.5:,.2f}")
from datetime import datetime, timedelta
print((datetime(2024, 1, 1) + timedelta(days=3)).strftime("%Y-%m-%d"))
from typing import List, Dict, Optional, Any, Tuple
def f(x: List[int], y: Optional[Dict[str, Any]] = None) -> Tuple[int, ...]:
    return tuple(x)
print(f([1, 2]))
df.loc[df.v > 1, "flag"] = True
df["v2"] = df["v"].astype(float) ** 2
df.columns = [c.upper() for c in df.columns]
print(df.columns.tolist(), max(df.V), round(float(df.V.mean()), 2))
'''

EXPECTED_TAIL = (
    "[2, 1]\n(3, 4) (4, 3) (2, 3)\n[3, 2] (3, 3) (1, 1)\n['a.b'] (1, 1)\n[{'a': '1', 'b': '2'}]\n{'a': 1}\n"
    "1 None\nx 1 2 [('_b', 2), ('a', 1)]\n[(1, 3), (2, 4)] 255 1,234.50\n2024-01-04\n(1, 2)\n"
    "['CITY', 'V', 'TAGS', 'FLAG', 'V2'] 3 2.0\n"
)


def test_everyday_idioms(run):
    r = run(EVERYDAY)
    assert r.ok, r
    assert r.stdout.endswith(EXPECTED_TAIL), r.stdout[-800:]
    assert "RangeIndex" in r.stdout   # df.info() printed to the cell's stdout
    assert r.denials == [], r


@pytest.mark.parametrize("src,expected", [
    ("import io, pandas as pd\nprint(pd.read_csv(io.StringIO('a,b\\n1,2\\n')).sum().tolist())", "[1, 2]\n"),
    ("import io\nbuf = io.BytesIO()\nbuf.write(b'xy')\nprint(buf.getvalue())", "b'xy'\n"),
    ("from io import StringIO\nprint(StringIO('q').read())", "q\n"),
])
def test_io_stringio_bytesio(run, src, expected):
    r = run(src)
    assert r.ok and r.stdout == expected, r


LANGUAGE_MIX = """\
import functools, dataclasses, enum, typing, itertools, heapq, collections, bisect, statistics, random, re, json, textwrap, decimal
class Cached:
    def __init__(self):
        self.calls = 0
    @functools.cached_property
    def value(self):
        self.calls += 1
        return 42
c = Cached(); c.value; c.value
print(c.value, c.calls)
@dataclasses.dataclass(slots=True)
class S:
    a: int
    b: list = dataclasses.field(default_factory=list)
    def __post_init__(self):
        self.b.append(self.a)
print(S(3))
@typing.runtime_checkable
class HasLen(typing.Protocol):
    def __len__(self) -> int: ...
print(isinstance([], HasLen))
class Color(enum.Enum):
    RED = enum.auto()
    BLUE = enum.auto()
    def describe(self):
        return f"{self.name}={self.value}"
class Perm(enum.Flag):
    R = enum.auto()
    W = enum.auto()
print(Color.BLUE.describe(), Perm.R | Perm.W, Perm.R in (Perm.R | Perm.W))
print([(k, len(list(g))) for k, g in itertools.groupby("aabbbc")])
h = []
heapq.heappush(h, (2, "b")); heapq.heappush(h, (1, "a"))
print(heapq.heappop(h), collections.ChainMap({"a": 1}, {"b": 2})["b"])
od = collections.OrderedDict(a=1, b=2); print(od.popitem(last=False))
cnt = collections.Counter(); cnt.update("hello"); print(cnt.most_common(2))
l = [1, 3]; bisect.insort(l, 2); print(l)
print(statistics.quantiles([1, 2, 3, 4, 5], n=4))
random.seed(3); print(random.choices([1, 2, 3], weights=[1, 0, 0], k=2))
print([m.group() for m in re.compile(r"\\d+").finditer("a1b22")])
print(json.dumps({"d": decimal.Decimal("1.5")}, default=str))
print("abc".translate(str.maketrans("abc", "xyz")), textwrap.dedent("  x\\n  y"))
print(decimal.Decimal("1.005").quantize(decimal.Decimal("0.01"), rounding=decimal.ROUND_HALF_UP))
class Stack:
    def __init__(self):
        self._items = []
    def push(self, x):
        self._items.append(x)
        return self
    def __len__(self):
        return len(self._items)
    def __repr__(self):
        return f"{self.__class__.__name__}({self._items!r})"
print(Stack().push(1).push(2), len(Stack()))
def gen():
    total = 0
    while True:
        x = yield total
        if x is None:
            return total
        total += x
g = gen(); next(g); g.send(3); g.send(4)
try:
    g.send(None)
except StopIteration as e:
    print("returned", e.value)
"""


def test_language_mix_matches_cpython(run):
    """cached_property, dataclass(slots=True), runtime_checkable Protocol, enum.auto/Flag, groupby, heapq,
    ChainMap, Counter, bisect, statistics, random.choices, re, json default, translate, Decimal, generators."""
    import contextlib
    import io
    import random
    buf = io.StringIO()
    state = random.getstate()
    try:
        with contextlib.redirect_stdout(buf):
            exec(compile(LANGUAGE_MIX, "<plain>", "exec", dont_inherit=True), {"__name__": "__main__"})
    finally:
        random.setstate(state)
    r = run(LANGUAGE_MIX)
    assert r.ok, r
    assert r.stdout == buf.getvalue()
    assert r.denials == [], r


def test_singledispatch(run):
    r = run("import functools\n@functools.singledispatch\ndef show(x):\n    return 'obj'\n"
            "@show.register\ndef _(x: int):\n    return 'int'\n@show.register(list)\ndef _(x):\n    return 'list'\n"
            "print(show(1), show([1]), show('s'))")
    assert r.ok and r.stdout == "int list obj\n", r


@pytest.mark.parametrize("name", ["dataclasses", "enums", "generators", "match-statements", "fstrings-and-format",
                                  "exceptions-cause-context", "stdlib-mix", "async-await", "closures-nonlocal",
                                  pytest.param("exception-groups", marks=pytest.mark.skipif(
                                      sys.version_info < (3, 11), reason="except* needs Python 3.11"))])
def test_pure_python_runs_under_strict(strict, name):
    import textwrap

    from test_allow_language import PROGRAMS
    src, expected = PROGRAMS[name]
    r = strict.run(textwrap.dedent(src))
    assert r.ok, r
    assert r.stdout == expected, r
    assert r.denials == [], r
