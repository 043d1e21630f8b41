"""Differential: allowed programs print exactly what plain CPython prints for the same source.

The reference run is a plain ``exec`` of the unmodified source in a fresh ``__main__`` namespace with
stdout redirected (top-level await is driven the same way as in the engine). Programs are deterministic:
no ids, addresses, clocks or hash-order dependence (tests/test_differential_generated.py runs them in
workers too, whose string-hash seed differs)."""
from __future__ import annotations

import ast
import contextlib
import io
import random
import sys
import textwrap

import pytest

CORPUS = {
    "arith": """
        print(7 // 2, -7 // 2, 7 % -3, 2 ** -1, 1e308 * 10, -0.0, 0.1 + 0.2, round(2.5), round(3.5), int('-12'))
        print(divmod(-7, 2), abs(-3), pow(2, 10, 1000), 10 ** 30 // 7, (1 << 70) >> 3, 5 & 3, 5 | 3, 5 ^ 3, ~5)
        print(float('inf') > 10 ** 300, complex(1, 2) * 2, 3 * 1.5, 4 * 2 ** 3, 2 ** 3 ** 2)
        """,
    "strings": """
        s = 'Hello, World'
        print(s.lower(), s.split(', '), s[::-1], s.replace('l', 'L', 2), s.find('W'), s.center(20, '*'))
        print('-'.join(['a', 'b']), 'x'.join('abc'), s.encode()[:3], 'ß'.upper(), 'a\\tb'.expandtabs(4), s.zfill(15))
        print(f'{s!r:>20}|{s:.5}|{len(s):04d}|{3.14159:+.3e}|{255:#x}|{255:b}|{"€":^5}|', 'ab' * 3, 3 * 'x')
        print('%5.2f|%-4s|%x|%r' % (3.14159, 'a', 255, 'q'), '{:,}'.format(10 ** 7), str(b'\\x00\\xff'))
        """,
    "collections": """
        import collections, itertools, heapq, bisect
        c = collections.Counter('mississippi')
        print(sorted(c.items()), c.most_common(2))
        d = collections.defaultdict(int)
        for w in 'a b a c a b'.split():
            d[w] += 1
        print(sorted(d.items()), list(itertools.chain([1], [2, 3])), list(itertools.groupby('aabbbc'))[0][0])
        print(list(itertools.permutations('abc', 2))[:4], list(itertools.product([0, 1], repeat=2)))
        print(list(itertools.zip_longest([1, 2], [3], fillvalue=0)), list(itertools.starmap(pow, [(2, 3)])))
        h = [5, 1, 4]; heapq.heapify(h); heapq.heappush(h, 0)
        print([heapq.heappop(h) for _ in range(4)], bisect.insort([1, 3], 2))
        print(sorted({'b': 2, 'a': 1}.items(), key=lambda kv: kv[1], reverse=True), list(reversed(range(3))))
        """,
    "classes": """
        class Vec:
            __slots__ = ('x', 'y')
            def __init__(self, x, y):
                self.x, self.y = x, y
            def __add__(self, o):
                return Vec(self.x + o.x, self.y + o.y)
            def __mul__(self, k):
                return Vec(self.x * k, self.y * k)
            __rmul__ = __mul__
            def __eq__(self, o):
                return (self.x, self.y) == (o.x, o.y)
            def __hash__(self):
                return hash((self.x, self.y))
            def __repr__(self):
                return f'Vec({self.x}, {self.y})'
            def __iter__(self):
                yield self.x
                yield self.y
        v = Vec(1, 2)
        print(v + v, 3 * v, v * 2, list(v), v == Vec(1, 2), len({v, Vec(1, 2)}), max(v), dict(a=v))
        class Account:
            rate = 0.1
            def __init__(self, owner):
                self.owner = owner
                self._balance = 0
            @property
            def balance(self):
                return self._balance
            def deposit(self, amt):
                if amt <= 0:
                    raise ValueError(f'bad amount {amt}')
                self._balance += amt
                return self
        a = Account('ann').deposit(10).deposit(5)
        try:
            a.deposit(-1)
        except ValueError as e:
            print('error:', e)
        try:
            a.balance = 3
        except AttributeError as e:
            print(type(e).__name__)
        print(a.balance, a.owner, Account.rate, type(a).__name__, a.__class__.__qualname__, isinstance(a, Account))
        """,
    "dataclass-enum-match": """
        from dataclasses import dataclass, field
        import enum
        class Kind(enum.Enum):
            CIRCLE = 'c'
            RECT = 'r'
        @dataclass
        class Shape:
            kind: Kind
            dims: list = field(default_factory=list)
            def area(self):
                match self:
                    case Shape(kind=k, dims=[r]) if k is Kind.CIRCLE:
                        return round(3.14159 * r * r, 2)
                    case Shape(k, [w, h]) if k == Kind.RECT:
                        return w * h
                    case _:
                        return None
        shapes = [Shape(Kind.CIRCLE, [1]), Shape(Kind.RECT, [2, 3]), Shape(Kind.RECT, [])]
        print([s.area() for s in shapes], shapes[0], Kind('r'), sorted(k.name for k in Kind))
        """,
    "generators-iterators": """
        def primes():
            found = []
            n = 2
            while True:
                if all(n % p for p in found):
                    found.append(n)
                    yield n
                n += 1
        import itertools
        print(list(itertools.islice(primes(), 10)), list(itertools.takewhile(lambda p: p < 20, primes())))
        class Countdown:
            def __init__(self, n):
                self.n = n
            def __iter__(self):
                return self
            def __next__(self):
                if self.n <= 0:
                    raise StopIteration
                self.n -= 1
                return self.n
        print(list(Countdown(4)), sum(Countdown(5)), sorted(Countdown(3)), next(iter([]), 'empty'))
        g = (i * i for i in range(5))
        print(next(g), list(g), list(zip('ab', range(5))), list(enumerate('xy', 1)), list(map(str.upper, 'ab')))
        """,
    "exceptions": """
        def risky(i):
            if i == 0:
                raise ZeroDivisionError('zero')
            if i == 1:
                raise KeyError('k')
            if i == 2:
                return {}['missing']
            if i == 3:
                return [][1]
            if i == 4:
                return int('x')
            return 'ok'
        for i in range(6):
            try:
                print(risky(i))
            except (KeyError, IndexError) as e:
                print(type(e).__name__, e)
            except Exception as e:
                print(type(e).__name__, e, e.args)
            else:
                print('else')
            finally:
                print('finally', i)
        try:
            raise RuntimeError('outer') from ValueError('inner')
        except RuntimeError as e:
            print(repr(e), repr(e.__cause__), e.__suppress_context__)
        """,
    "exception-groups": """
        def risky(i):
            if i == 0:
                raise ExceptionGroup('g', [ValueError('a')])
            if i == 1:
                raise ExceptionGroup('nested', [KeyError('k'), ExceptionGroup('inner', [TypeError('t')])])
            return 'ok'
        for i in range(3):
            try:
                print(risky(i))
            except ExceptionGroup as e:
                print('group', e.exceptions)
            finally:
                print('finally', i)
        try:
            raise ExceptionGroup('eg', [ValueError(1), TypeError(2), ValueError(3)])
        except* ValueError as eg:
            print('values', eg.exceptions)
        except* TypeError as eg:
            print('types', eg.exceptions)
        """,
    "closures-decorators": """
        import functools
        calls = []
        def trace(fn):
            @functools.wraps(fn)
            def inner(*args, **kw):
                calls.append(fn.__name__)
                return fn(*args, **kw)
            return inner
        @trace
        def square(x):
            '''square it'''
            return x * x
        def make_adders():
            return [lambda x, n=n: x + n for n in range(3)]
        print([f(10) for f in make_adders()], square(4), square.__doc__, calls)
        memo = functools.lru_cache(maxsize=32)(lambda n: n * 2)
        print(memo(3), memo(3), functools.partial(int, base=2)('101'), functools.reduce(lambda a, b: a + b, range(5)))
        """,
    "async": """
        async def fetch(i):
            return i * 10
        async def gather_all():
            out = []
            for i in range(3):
                out.append(await fetch(i))
            return out
        class AIter:
            def __init__(self):
                self.i = 0
            def __aiter__(self):
                return self
            async def __anext__(self):
                if self.i >= 3:
                    raise StopAsyncIteration
                self.i += 1
                return self.i
        async def consume():
            return [x async for x in AIter()]
        print(await gather_all(), await consume())
        """,
    "json-re-datetime": """
        import json, re, datetime, statistics, math, decimal, fractions
        doc = json.loads('{"a": [1, 2.5, null, true], "b": {"c": "d"}}')
        print(doc, json.dumps(doc, sort_keys=True, indent=None), json.dumps({'x': 1}, indent=2))
        print(re.findall(r'(\\w)(\\d)', 'a1 b2 c'), re.split(r'\\s+', 'a  b c'), bool(re.fullmatch(r'[a-z]+', 'abc')))
        m = re.search(r'(?P<y>\\d{4})-(?P<m>\\d\\d)', 'on 2024-03-05')
        print(m.group('y'), m.groupdict(), m.span())
        d = datetime.date(2024, 2, 28) + datetime.timedelta(days=2)
        print(d, d.weekday(), d.strftime('%Y/%m/%d'), datetime.datetime(2024, 1, 1, 12, 30).isoformat())
        print(statistics.stdev([1, 2, 3, 4]), statistics.mode([1, 1, 2]), math.comb(10, 3), math.gcd(12, 18))
        print(decimal.Decimal('0.1') * 3, fractions.Fraction(3, 4) + fractions.Fraction(1, 4), math.floor(-2.5))
        """,
    "sorting-keys": """
        people = [('ann', 31), ('bob', 25), ('cid', 31), ('dee', 22)]
        print(sorted(people, key=lambda p: (-p[1], p[0])), min(people, key=lambda p: p[1]))
        words = 'the quick brown fox jumps over the lazy dog'.split()
        print(sorted(sorted(set(words)), key=len), sorted(words, key=str.lower, reverse=True)[:3])
        import random
        rng = random.Random(42)
        xs = [rng.randint(1, 100) for _ in range(10)]
        print(xs, sorted(xs)[:3], rng.choice(words), rng.sample(range(10), 3))
        """,
    "simulation": """
        import random
        rng = random.Random(7)
        grid = [[0] * 5 for _ in range(5)]
        x = y = 2
        for step in range(200):
            dx, dy = rng.choice([(0, 1), (1, 0), (0, -1), (-1, 0)])
            x = min(4, max(0, x + dx))
            y = min(4, max(0, y + dy))
            grid[y][x] += 1
        for row in grid:
            print(' '.join(f'{v:3d}' for v in row))
        print(sum(map(sum, grid)))
        """,
    "numpy": """
        import numpy as np
        rng = np.random.default_rng(0)
        a = rng.normal(size=(3, 4))
        print(a.shape, a.round(3))
        print(np.arange(12).reshape(3, 4).mean(axis=1), np.linalg.norm([3, 4]), np.eye(2) @ np.array([1.5, 2]))
        m = np.array([[2.0, 1.0], [1.0, 3.0]])
        print(np.linalg.eigvalsh(m).round(6), np.cumprod([1, 2, 3]), np.clip(np.arange(5), 1, 3))
        total = 0.0
        for v in np.linspace(0, 1, 11):
            total += v * v
        print(round(total, 6), np.where(a > 0)[0][:3], (a > 0).sum(), a.argmax(), np.sort(a[0]).round(2))
        """,
    "pandas": """
        import pandas as pd, numpy as np
        df = pd.DataFrame({'city': ['x', 'y', 'x', 'z', 'y'], 'sales': [10, 20, 30, 40, 50], 'cost': [1, 2, 3, 4, 5]})
        df['margin'] = df.sales - df.cost
        print(df)
        print(df.groupby('city').agg(total=('sales', 'sum'), avg=('margin', 'mean')))
        print(df.pivot_table(index='city', values='sales', aggfunc=['sum', 'count']))
        print(df.sort_values(['city', 'sales'], ascending=[True, False]).head(3))
        print(df.describe().round(2))
        s = pd.Series([1, None, 3], name='s')
        print(s.fillna(s.mean()), s.isna().sum(), df.apply(lambda r: r.sales > 25, axis=1).tolist())
        print(df.merge(pd.DataFrame({'city': ['x', 'y'], 'region': ['N', 'S']}), how='left', on='city'))
        """,
    "scipy": """
        import numpy as np
        from scipy import stats, optimize
        x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
        y = 2.0 * x + 1.0
        res = stats.linregress(x, y)
        print(round(res.slope, 6), round(res.intercept, 6), round(res.rvalue, 6))
        print(round(stats.norm.ppf(0.975), 4), round(stats.binom.pmf(2, 5, 0.5), 4), stats.mode([1, 2, 2, 3]).mode)
        r = optimize.minimize_scalar(lambda v: (v - 1.5) ** 2)
        print(round(r.x, 4), round(optimize.root_scalar(lambda v: v ** 3 - 8, bracket=[0, 5]).root, 6))
        """,
    "plotly": """
        import plotly.graph_objects as go
        import plotly.express as px
        fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4], mode='lines', name='s'))
        fig.update_layout(title='T', xaxis_title='X')
        d = fig.to_dict()
        print(d['data'][0]['type'], d['data'][0]['x'], d['layout']['title']['text'], d['layout']['xaxis']['title']['text'])
        b = px.bar(x=['a', 'b'], y=[1, 2])
        print(b.data[0].type, list(b.data[0].x), len(b.to_json()) > 100)
        """,
    "state-and-scope": """
        counter = 0
        def bump(n=1):
            global counter
            counter += n
            return counter
        class Registry:
            items = {}
            @classmethod
            def add(cls, key, value):
                cls.items[key] = value
                return cls
        Registry.add('a', 1).add('b', 2)
        print(bump(), bump(5), counter, sorted(Registry.items), [bump() for _ in range(3)])
        x = 10
        def outer():
            x = 20
            def inner():
                nonlocal x
                x += 1
                return x
            return inner() + x
        print(outer(), x, (lambda: x)())
        """,
}


def _plain(src: str) -> str:
    buf = io.StringIO()
    ns = {"__name__": "__main__"}
    code = compile(src, "<plain>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    state = random.getstate()
    try:
        with contextlib.redirect_stdout(buf):
            value = eval(code, ns)
            if hasattr(value, "send"):
                try:
                    while True:
                        value.send(None)
                except StopIteration:
                    pass
    finally:
        random.setstate(state)
    return buf.getvalue()


# Programs that use syntax or builtins newer than the oldest supported Python (3.10).
NEEDS_PYTHON = {"exception-groups": (3, 11)}


def corpus_params(names):
    """The corpus names as pytest parameters, each skipped below the Python it needs."""
    return [pytest.param(name, marks=pytest.mark.skipif(
                sys.version_info < NEEDS_PYTHON[name],
                reason=f"needs Python {'.'.join(map(str, NEEDS_PYTHON[name]))}"))
            if name in NEEDS_PYTHON else name for name in names]


@pytest.mark.parametrize("name", corpus_params(sorted(CORPUS)))
def test_same_output_as_cpython(run, name):
    src = textwrap.dedent(CORPUS[name])
    expected = _plain(src)
    assert expected, "the reference run printed nothing"
    r = run(src + "\npass\n")   # no trailing expression: output is print() only, as in the reference
    assert r.ok, r
    assert r.stdout == expected
    assert r.denials == [], r


@pytest.mark.parametrize("name", corpus_params(["arith", "classes", "exceptions", "exception-groups"]))
def test_same_output_split_across_cells(sandbox, name):
    """The same program, one top-level statement per cell, still prints what CPython prints."""
    src = textwrap.dedent(CORPUS[name])
    expected = _plain(src)
    out = []
    for node in ast.parse(src).body:
        r = sandbox.run(ast.get_source_segment(src, node) + "\npass")
        assert r.ok, r
        out.append(r.stdout)
    assert "".join(out) == expected
