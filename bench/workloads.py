"""Benchmark workloads: small Python sources run identically under every mode.

Each workload is a *setup* cell (imports, data, a ``run()`` function; not timed) and the timed cell
``CALL`` (``_bench_result = run()``). ``run()`` returns a small checksum so that the modes can be
compared for equal results and so that no large object stays alive between repetitions.

Sizes are chosen so that ``run()`` takes roughly 50-300 ms in plain CPython 3.11 on the reference
machine (2 cores). ``SCALE`` in a setup source is replaced by the runner (1.0 normally).
"""
from __future__ import annotations

CALL = "_bench_result = run()"

PURE = "pure"
LIBRARY = "library"

WORKLOADS: dict[str, dict] = {}


def _w(name: str, group: str, setup: str, what: str) -> None:
    WORKLOADS[name] = {"name": name, "set": group, "setup": setup.strip() + "\n", "what": what}


# ------------------------------------------------------------------------------------------------
# pure-Python set
# ------------------------------------------------------------------------------------------------

_w("loop_arith", PURE, """
N = int(1_000_000 * SCALE)

def run():
    total = 0
    acc = 1.0
    for i in range(N):
        total += i * i % 7
        if i & 1:
            total -= 3
        acc = acc * 0.999999 + 1.0
    k = 0
    while k < N // 4:
        k += 1
    return total + int(acc) + k
""", "for/while loops with int and float arithmetic (i * i, %, &)")

_w("oop_attrs", PURE, """
N = int(200_000 * SCALE)

class Vec:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def add(self, other):
        return Vec(self.x + other.x, self.y + other.y)

    def dot(self, other):
        return self.x * other.x + self.y * other.y

    @property
    def norm2(self):
        return self.dot(self)


class Account:
    def __init__(self, owner):
        self.owner = owner
        self._balance = 0
        self.history = []

    @property
    def balance(self):
        return self._balance

    @balance.setter
    def balance(self, value):
        if value < -1000:
            raise ValueError("overdrawn")
        self._balance = value

    def deposit(self, amount):
        self.balance = self.balance + amount
        self.history.append(amount)

    def withdraw(self, amount):
        self.balance -= amount
        self.history.append(-amount)


def run():
    acct = Account("ann")
    v = Vec(0, 0)
    step = Vec(1, 2)
    s = 0
    for i in range(N):
        v = v.add(step)
        s += v.norm2 % 11
        if i % 3:
            acct.deposit(i % 50)
        else:
            acct.withdraw(i % 20)
    return s + acct.balance + len(acct.history)
""", "classes with __slots__, methods, properties and setters, self.x updates")

_w("recursion_fib", PURE, """
N = 30 if SCALE >= 1 else 26

def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)

def run():
    return fib(N)
""", "naive recursive Fibonacci (function calls)")

_w("comprehensions", PURE, """
N = int(300_000 * SCALE)

def run():
    squares = [i * i for i in range(N)]
    evens = [x for x in squares if x % 2 == 0]
    table = {i: str(i) for i in range(0, N, 3)}
    uniq = {x % 1000 for x in squares}
    pairs = [(a, b) for a in range(300) for b in range(a % 20)]
    total = sum(x % 13 for x in evens)
    nested = [[j for j in range(i % 10)] for i in range(N // 10)]
    return len(evens) + len(table) + len(uniq) + len(pairs) + total + sum(len(r) for r in nested)
""", "list/dict/set comprehensions, nested comprehensions, generator expressions")

_w("dict_str", PURE, """
import random
N = int(50_000 * SCALE)
_rng = random.Random(1)
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
LINES = [" ".join(_rng.choice(WORDS).capitalize() if _rng.random() < 0.2 else _rng.choice(WORDS)
                  for _ in range(8)) for _ in range(N)]

def run():
    counts = {}
    lengths = {}
    out = []
    for line in LINES:
        for w in line.lower().split():
            counts[w] = counts.get(w, 0) + 1
            lengths.setdefault(len(w), []).append(w)
        if line.startswith("Alpha"):
            out.append(line.replace("Alpha", "A").strip())
    report = ", ".join(f"{k}={v:>6}" for k, v in sorted(counts.items()))
    joined = "|".join(out)
    return len(report) + len(joined) + sum(len(v) for v in lengths.values())
""", "word counting: str methods, dict get/setdefault, f-strings, join")

_w("sort_key", PURE, """
import random
N = int(90_000 * SCALE)
_rng = random.Random(2)
RECORDS = [{"name": "n%05d" % _rng.randrange(100000), "age": _rng.randrange(90),
            "score": _rng.random()} for _ in range(N)]
PAIRS = [(_rng.random(), _rng.randrange(1000)) for _ in range(N)]

class Rec:
    def __init__(self, d):
        self.name = d["name"]
        self.score = d["score"]

OBJS = [Rec(d) for d in RECORDS[: N // 2]]

def run():
    a = sorted(RECORDS, key=lambda r: (r["age"], -r["score"]))
    b = sorted(PAIRS, key=lambda p: p[1])
    c = sorted(OBJS, key=lambda o: o.score, reverse=True)
    d = list(RECORDS)
    d.sort(key=lambda r: r["name"])
    return a[0]["age"] + b[-1][1] + int(c[0].score * 1000) + len(d[0]["name"])
""", "sorted()/list.sort with key lambdas over dicts, tuples and objects")

_w("exceptions", PURE, """
N = int(300_000 * SCALE)

class AppError(Exception):
    def __init__(self, code):
        super().__init__(f"code {code}")
        self.code = code

def check(i):
    if i % 3 == 0:
        raise AppError(i % 7)
    if i % 5 == 0:
        raise KeyError(i)
    return i

def run():
    caught = 0
    total = 0
    for i in range(N):
        try:
            total += check(i)
        except AppError as e:
            caught += e.code
        except KeyError:
            caught += 1
        finally:
            total += 1
    return caught + total
""", "raise and catch (custom and builtin exceptions) in a loop, finally")

_w("simulation", PURE, """
import math
import random
from dataclasses import dataclass, field

N = int(6_000 * SCALE)
STEPS = 60

@dataclass
class Particle:
    x: float
    y: float
    vx: float
    vy: float
    mass: float = 1.0
    trail: list = field(default_factory=list)

    def step(self, dt, g):
        self.vy -= g * dt
        self.x += self.vx * dt
        self.y += self.vy * dt
        if self.y < 0:
            self.y = -self.y
            self.vy = -self.vy * 0.9

    @property
    def energy(self):
        return 0.5 * self.mass * (self.vx ** 2 + self.vy ** 2) + self.mass * 9.81 * self.y

def run():
    rng = random.Random(3)
    ps = [Particle(rng.random(), rng.random() * 10, rng.uniform(-1, 1), 0.0) for _ in range(N)]
    dt = 0.01
    for t in range(STEPS):
        for p in ps:
            p.step(dt, 9.81)
        if t % 10 == 0:
            for p in ps:
                p.trail.append((round(p.x, 2), round(p.y, 2)))
    e = sum(p.energy for p in ps)
    far = max(ps, key=lambda p: math.hypot(p.x, p.y))
    return round(e, 3) + len(far.trail)
""", "particles as dataclasses, attribute augmented assignment, properties")

_w("numpy_loop", PURE, """
import numpy as np
N = int(120_000 * SCALE)
ARR = np.linspace(0.0, 10.0, N)

def run():
    s = 0.0
    out = np.empty(N)
    for i in range(N):
        v = ARR[i]
        out[i] = np.sqrt(v) + np.sin(v) * 0.5
        s += float(v) * 2.0
    return round(s + float(out.sum()), 6)
""", "numpy scalars and ufunc calls inside a Python loop")

# ------------------------------------------------------------------------------------------------
# library set
# ------------------------------------------------------------------------------------------------

_w("numpy_vec", LIBRARY, """
import numpy as np
N = int(1_000_000 * SCALE)
rng = np.random.default_rng(4)
A = rng.random(N)
M = rng.random((260, 260))

def run():
    b = np.sqrt(A) * 3.0 + np.sin(A)
    c = np.sort(b)
    m = M @ M
    h, _ = np.histogram(A, bins=50)
    cs = np.cumsum(A).mean()
    return round(float(c[N // 2] + m.trace() + h.max() + cs), 3)
""", "vectorised ufuncs, sort, matmul, histogram, cumsum")

_w("pandas_groupby", LIBRARY, """
import numpy as np
import pandas as pd
N = int(400_000 * SCALE)
rng = np.random.default_rng(5)
DF = pd.DataFrame({"key": rng.integers(0, 1000, N), "cat": rng.choice(["a", "b", "c", "d"], N),
                   "x": rng.random(N), "y": rng.random(N)})
DIM = pd.DataFrame({"key": np.arange(1000), "region": np.arange(1000) % 7, "w": np.linspace(0, 1, 1000)})

def run():
    g = DF.groupby(["key", "cat"]).agg(x_sum=("x", "sum"), y_mean=("y", "mean"), n=("x", "size"))
    m = DF.merge(DIM, on="key", how="left")
    r = m.groupby("region")["x"].sum() * m.groupby("region")["w"].mean()
    p = m.pivot_table(index="region", columns="cat", values="y", aggfunc="mean")
    return round(float(g["x_sum"].sum() + r.sum() + p.values.sum()), 3)
""", "DataFrame groupby/agg, merge, pivot_table")

_w("pandas_apply", LIBRARY, """
import numpy as np
import pandas as pd
N = int(15_000 * SCALE)
rng = np.random.default_rng(6)
DF = pd.DataFrame({"a": rng.random(N), "b": rng.integers(0, 10, N), "s": rng.choice(["x", "yy", "zzz"], N)})

def score(row):
    return row["a"] * 2.0 + row["b"]

def run():
    r1 = DF.apply(score, axis=1)
    r2 = DF["s"].apply(lambda s: len(s) * 2)
    r3 = DF["b"].map(lambda b: b % 3)
    return round(float(r1.sum() + r2.sum() + r3.sum()), 3)
""", "DataFrame.apply(axis=1) and Series.apply/map with sandbox-defined functions")

_w("plotly_json", LIBRARY, """
import numpy as np
import plotly.graph_objects as go
N = int(20_000 * SCALE)
rng = np.random.default_rng(7)
XS = np.arange(N)
YS = [rng.random(N) for _ in range(4)]

def run():
    fig = go.Figure()
    for k, ys in enumerate(YS):
        fig.add_trace(go.Scatter(x=XS, y=ys, mode="lines", name=f"series {k}"))
    fig.add_trace(go.Bar(x=list(range(50)), y=list(range(50))))
    fig.update_layout(title="benchmark", xaxis_title="t", yaxis_title="value", template="plotly_white")
    text = fig.to_json()
    return len(text) // 1000
""", "plotly graph_objects figure with 5 traces serialised to JSON")

_w("json_roundtrip", LIBRARY, """
import json
import random
N = int(12_000 * SCALE)
_rng = random.Random(8)
DATA = {"items": [{"id": i, "name": "item%d" % i, "tags": ["t%d" % (i % 7), "u"], "price": _rng.random(),
                   "nested": {"a": [1, 2, 3], "b": None, "c": True}} for i in range(N)]}

def run():
    text = json.dumps(DATA)
    back = json.loads(text)
    pretty = json.dumps(back["items"][:2000], indent=2, sort_keys=True)
    return len(text) // 100 + len(back["items"]) + len(pretty) // 100
""", "json.dumps/loads of a nested structure")


TRIVIAL = "1+1"


def setup_source(name: str, scale: float = 1.0) -> str:
    return WORKLOADS[name]["setup"].replace("SCALE", repr(float(scale)))
