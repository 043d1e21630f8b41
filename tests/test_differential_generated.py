"""Differential at every level (issue 13 item 4): allowed programs give what plain CPython gives (the
printed text, the value of the last expression as the engine renders it, the exception type) at levels
`none`, `process` and `kernel`. The programs are a hand-written set that covers the language (LANGUAGE,
plus test_differential.py's corpus) and programs hypothesis generates from a small grammar of allowed
Python (loops, comprehensions, functions, lambdas, classes, try/except, match, f-strings, str/list/dict
methods).

CI runs a short, fixed set of generated programs (SANDBOX_DIFFERENTIAL_EXAMPLES, default 100); a long
run: ``SANDBOX_DIFFERENTIAL_EXAMPLES=5000 pytest tests/test_differential_generated.py -k generated``
(random programs, a new set each run). The reference runs in this process; programs are deterministic
and never depend on string hashing (the workers have their own hash seed)."""
from __future__ import annotations

import ast
import contextlib
import io
import os
import sys
import textwrap

import pytest

from isolation_support import kernel_level_problem
from sandbox_kernel.isolation import make_backend
from sandbox_kernel.policy import PRESETS
from sandbox_kernel.render import text_plain

from test_differential import CORPUS, NEEDS_PYTHON

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

LEVELS = ["none"] + (["process"] if sys.platform.startswith("linux") else []) + \
    (["kernel"] if kernel_level_problem() is None else [])
EXAMPLES = int(os.environ.get("SANDBOX_DIFFERENTIAL_EXAMPLES", "100"))

# -- running a program: plain CPython, and the sandbox ------------------------------------------------------


def reference(src: str) -> tuple:
    """(stdout, the last expression's text as the engine renders it, the exception type) in CPython."""
    tree = ast.parse(src)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    ns = {"__name__": "__main__"}
    buf, value, error = io.StringIO(), None, None
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    with contextlib.redirect_stdout(buf):
        try:
            _drive(eval(compile(tree, "<plain>", "exec", flags=flags, dont_inherit=True), ns))
            if last is not None:
                value = _drive(eval(compile(ast.Expression(last.value), "<plain>", "eval", flags=flags,
                                            dont_inherit=True), ns), awaited=True)
        except Exception as exc:  # noqa: BLE001 - the program's own exception is what is compared
            error = type(exc).__name__
    return buf.getvalue(), None if value is None else text_plain(value, 1_000_000), error


def _drive(value, awaited=False):
    """Top-level await: compile() returns a coroutine; run it to completion (no event loop needed)."""
    import inspect

    if inspect.iscoroutine(value) and (awaited or value.cr_code.co_name == "<module>"):
        try:
            while True:
                value.send(None)
        except StopIteration as stop:
            return stop.value
    return value


def sandboxed(backend, src: str) -> tuple:
    events: list = []
    done = backend.run_cell(src, emit=events.append)
    stdout = "".join(e["text"] for e in events if e["type"] == "stream" and e["name"] == "stdout")
    results = [e["data"].get("text/plain") for e in events if e["type"] == "result"]
    error = (done.get("error") or {}).get("ename") if done.get("status") == "error" else None
    return stdout, results[-1] if results else None, error, done.get("denials") or []


@pytest.fixture(scope="module")
def backends(tmp_path_factory):
    made = {}
    policy = PRESETS["data-science"].with_limits(timeout=20.0, memory_mb=1024)
    try:
        for level in LEVELS:
            made[level] = make_backend(level, policy, str(tmp_path_factory.mktemp(f"diff-{level}")),
                                       **({} if level == "none" else {"spare": False}))
        yield made
    finally:
        for b in made.values():
            b.shutdown()


def check_everywhere(backends, src: str, *, levels=LEVELS) -> tuple:
    """Programs share each level's namespace (a worker's reset is a new process, 2.5 s): each one binds
    every name it reads before reading it, so what earlier programs left there changes nothing."""
    expected = reference(src)
    for level in levels:
        stdout, value, error, denials = sandboxed(backends[level], src)
        assert denials == [], (level, denials)
        assert (stdout, value, error) == expected, f"level {level}, program:\n{src}"
    return expected


# -- the hand-written set -----------------------------------------------------------------------------------

LANGUAGE = {
    "comprehensions": """
        xs = [i * i for i in range(10) if i % 3]
        nested = [(i, j) for i in range(3) for j in range(i) if i != j]
        sq = {i: i ** 2 for i in range(5)}
        evens = {i for i in range(10) if not i % 2}
        total = sum(x for x in xs if x > 10)
        m = [[r * c for c in range(3)] for r in range(3)]
        walrus = [y for x in range(6) if (y := x * 3) % 2]
        print(xs, nested, sq, sorted(evens), total, m, walrus)
        [len(str(v)) for v in (xs, sq)]
        """,
    "generators": """
        def counter(n):
            got = []
            for i in range(n):
                sent = yield i
                if sent is not None:
                    got.append(sent)
            return got
        g = counter(4)
        print(next(g), g.send('a'), g.send('b'))
        try:
            while True:
                next(g)
        except StopIteration as stop:
            print('returned', stop.value)
        def delegate():
            inner = yield from counter(2)
            yield ('inner returned', inner)
        print(list(delegate()))
        def closing():
            try:
                yield 1
                yield 2
            finally:
                print('closed')
        c = closing()
        print(next(c))
        c.close()
        def thrower():
            while True:
                try:
                    yield 'ok'
                except ValueError as e:
                    yield f'caught {e}'
        t = thrower()
        print(next(t), t.throw(ValueError('boom')), next(t))
        gen = (x * 2 for x in range(3))
        (list(gen), list(gen))
        """,
    "closures": """
        def make_counter():
            count = 0
            def step(by=1):
                nonlocal count
                count += by
                return count
            return step
        a, b = make_counter(), make_counter()
        print(a(), a(), a(5), b())
        def compose(*fs):
            def run(x):
                for f in reversed(fs):
                    x = f(x)
                return x
            return run
        inc = lambda x: x + 1
        dbl = lambda x: x * 2
        print(compose(inc, dbl)(5), compose(dbl, inc)(5), compose()(7))
        fns = [lambda i=i: i * 10 for i in range(3)]
        late = [lambda: i for i in range(3)]
        ([f() for f in fns], [f() for f in late], a.__name__, make_counter.__qualname__)
        """,
    "classes-inheritance": """
        class Animal:
            kind = 'animal'
            def __init__(self, name):
                self.name = name
            def speak(self):
                return f'{self.name} makes a sound'
            def __repr__(self):
                return f'{type(self).__name__}({self.name!r})'
            def __eq__(self, other):
                return type(self) is type(other) and self.name == other.name
            __hash__ = None
        class Dog(Animal):
            kind = 'dog'
            def speak(self):
                return super().speak().replace('a sound', 'woof')
        class Puppy(Dog):
            def speak(self):
                return super().speak() + '!'
        class Mixin:
            def tag(self):
                return f'<{self.kind}>'
        class Tagged(Mixin, Puppy):
            pass
        p = Tagged('rex')
        print(p.speak(), p.tag(), isinstance(p, Animal), issubclass(Tagged, Mixin), issubclass(Dog, Tagged))
        print(Dog('a') == Dog('a'), Dog('a') == Animal('a'), Animal.kind, p.kind, p.name)
        try:
            hash(p)
        except TypeError as e:
            print('unhashable', type(e).__name__)
        class Base:
            registry = []
            def __init_subclass__(cls, tag='', **kw):
                super().__init_subclass__(**kw)
                Base.registry.append((cls.__name__, tag))
        class One(Base, tag='first'):
            pass
        class Two(One):
            pass
        (p, Base.registry, type(p).__name__, type(Two()).__name__)
        """,
    "properties-descriptors": """
        class Temperature:
            def __init__(self, c):
                self._c = c
            @property
            def c(self):
                return self._c
            @c.setter
            def c(self, value):
                if value < -273.15:
                    raise ValueError('below absolute zero')
                self._c = value
            @c.deleter
            def c(self):
                self._c = 0
            @property
            def f(self):
                return self._c * 9 / 5 + 32
            @staticmethod
            def unit():
                return 'C'
            @classmethod
            def freezing(cls):
                return cls(0)
        t = Temperature(25)
        t.c = 100
        print(t.c, t.f, Temperature.unit(), Temperature.freezing().f)
        del t.c
        print(t.c)
        try:
            t.c = -300
        except ValueError as e:
            print(e)
        try:
            t.f = 3
        except AttributeError:
            print('read-only')
        class Positive:
            def __set_name__(self, owner, name):
                self.name = '_' + name
            def __get__(self, obj, objtype=None):
                return 'class access' if obj is None else getattr(obj, self.name)
            def __set__(self, obj, value):
                if value <= 0:
                    raise ValueError(f'{self.name[1:]} must be positive')
                setattr(obj, self.name, value)
        class Order:
            qty = Positive()
            def __init__(self, qty):
                self.qty = qty
        o = Order(3)
        try:
            o.qty = -1
        except ValueError as e:
            print(e)
        (o.qty, Order.qty)
        """,
    "dataclasses": """
        from dataclasses import dataclass, field, asdict, astuple, replace, fields
        @dataclass(order=True)
        class Item:
            price: float
            name: str = field(compare=False)
            tags: list = field(default_factory=list, repr=False)
            def total(self, n):
                return self.price * n
        @dataclass(frozen=True)
        class Point:
            x: int
            y: int = 0
            def __post_init__(self):
                if self.x < 0:
                    raise ValueError('negative x')
        items = sorted([Item(3.5, 'b'), Item(1.25, 'a', ['x'])])
        print(items, asdict(items[0]), astuple(items[1]), [f.name for f in fields(Item)])
        p = Point(1)
        try:
            p.x = 5
        except Exception as e:
            print(type(e).__name__)
        q = replace(p, y=7)
        try:
            Point(-1)
        except ValueError as e:
            print(e)
        (p, q, p == Point(1, 0), hash(p) == hash(Point(1)), items[0].total(4))
        """,
    "exceptions": """
        class AppError(Exception):
            def __init__(self, code, msg):
                super().__init__(msg)
                self.code = code
        class NotFound(AppError):
            pass
        def find(k):
            table = {'a': 1}
            try:
                return table[k]
            except KeyError as e:
                raise NotFound(404, f'no {k}') from e
        for k in ('a', 'b'):
            try:
                print(find(k))
            except AppError as e:
                print(type(e).__name__, e.code, e, type(e.__cause__).__name__, e.__suppress_context__)
        def cleanup():
            log = []
            try:
                try:
                    1 / 0
                finally:
                    log.append('inner finally')
            except ZeroDivisionError:
                log.append('handled')
            else:
                log.append('no else')
            finally:
                log.append('outer finally')
            return log
        print(cleanup())
        try:
            try:
                raise ValueError('first')
            except ValueError:
                raise TypeError('second')
        except TypeError as e:
            print(repr(e), repr(e.__context__))
        e = ValueError('with note')
        if hasattr(e, 'add_note'):
            e.add_note('a note')
        def returns_in_finally():
            try:
                return 'try'
            finally:
                print('finally runs')
        print(returns_in_finally())
        raise NotFound(410, 'gone')
        """,
    "match": """
        from dataclasses import dataclass
        @dataclass
        class Point:
            x: int
            y: int
        def describe(v):
            match v:
                case 0 | 1:
                    return 'bit'
                case int(n) if n < 0:
                    return f'negative {n}'
                case int() | float():
                    return 'number'
                case 'quit' | 'exit':
                    return 'command'
                case str(s):
                    return f'text {s!r}'
                case [x]:
                    return f'one {x}'
                case [x, y, *rest]:
                    return f'first {x} {y} and {len(rest)} more'
                case {'type': 'circle', 'r': r, **others}:
                    return f'circle {r} {sorted(others)}'
                case Point(x=0, y=0):
                    return 'origin'
                case Point(x=px, y=py) if px == py:
                    return f'diagonal {px}'
                case Point():
                    return 'point'
                case (a, b) if a > b:
                    return 'unreachable for tuples of two: lists matched first'
                case None:
                    return 'none'
                case _:
                    return 'other'
        values = [0, 1, -5, 2.5, 'quit', 'hi', [9], [1, 2, 3, 4], (1, 2), {'type': 'circle', 'r': 2, 'c': 'red'},
                  Point(0, 0), Point(3, 3), Point(1, 2), None, {1, 2}]
        [describe(v) for v in values]
        """,
    "fstrings": """
        name, value, pi = 'width', 42, 3.14159265
        items = ['a', 'b']
        print(f'{name}={value}', f'{name!r:>10}|{value:<6}|{value:^7}|{value:08.3f}|{value:+}|{value:x}|{value:#o}|{value:,}')
        print(f'{pi:.2f} {pi:10.4e} {pi:%} {1e21:g} {-0.0} {value=} {pi = :.1f}')
        width, prec = 12, 3
        print(f'{pi:{width}.{prec}f}|{"nested " + name:{"^"}{width + 4}}|{items[0]}{items[-1]!s}{"é"!a}')
        print(f"{'{'}literal braces{'}'} {{doubled}} {value // 5} {len(items) * 'ab'} {(lambda x: x * 2)(3)}")
        print('{0}-{1}-{0}'.format('x', 'y'), '{name}:{v:>4}'.format(name='n', v=1), '%-5s|%05.1f|%c' % ('ab', 2.25, 65))
        import datetime
        d = datetime.date(2024, 3, 9)
        f'{d:%Y/%m/%d} {d!r} {value:{"b"}}'
        """,
    "decorators": """
        import functools
        calls = []
        def logged(prefix):
            def deco(fn):
                @functools.wraps(fn)
                def wrapper(*args, **kwargs):
                    calls.append(f'{prefix}:{fn.__name__}{args}')
                    return fn(*args, **kwargs)
                return wrapper
            return deco
        def twice(fn):
            def wrapper(*a):
                return fn(fn(*a))
            return wrapper
        @logged('L')
        @twice
        def inc(x):
            '''add one'''
            return x + 1
        def register(cls):
            cls.registered = True
            return cls
        @register
        class Plugin:
            pass
        class Cached:
            @functools.cached_property
            def heavy(self):
                calls.append('computed')
                return 99
        c = Cached()
        @functools.lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        @functools.singledispatch
        def kind(x):
            return 'object'
        @kind.register
        def _(x: int):
            return 'int'
        (inc(1), inc.__name__, inc.__doc__, Plugin.registered, c.heavy, c.heavy, calls, fib(40),
         fib.cache_info().hits > 0, kind(1), kind('s'))
        """,
    "async": """
        async def square(x):
            return x * x
        async def agen(n):
            for i in range(n):
                yield await square(i)
        class Resource:
            def __init__(self):
                self.log = []
            async def __aenter__(self):
                self.log.append('enter')
                return self
            async def __aexit__(self, *exc):
                self.log.append('exit')
                return False
        async def main():
            values = [v async for v in agen(4)]
            async with Resource() as r:
                r.log.append('inside')
            try:
                async with Resource() as r2:
                    raise KeyError('inside')
            except KeyError as e:
                r2.log.append(f'caught {e}')
            return values, r.log, r2.log
        out = await main()
        print(out)
        coro = square(3)
        (await coro, type(coro).__name__)
        """,
    "context-managers-and-iteration": """
        import contextlib
        class Tracker:
            def __init__(self):
                self.events = []
            def __enter__(self):
                self.events.append('enter')
                return self
            def __exit__(self, exc_type, exc, tb):
                self.events.append(f'exit {exc_type.__name__ if exc_type else None}')
                return exc_type is KeyError
        t = Tracker()
        with t:
            raise KeyError('swallowed')
        @contextlib.contextmanager
        def tag(name):
            print(f'<{name}>')
            yield name.upper()
            print(f'</{name}>')
        with tag('b') as up, contextlib.suppress(ZeroDivisionError):
            print(up)
            1 / 0
        class Countdown:
            def __init__(self, n):
                self.n = n
            def __iter__(self):
                while self.n:
                    self.n -= 1
                    yield self.n
            def __len__(self):
                return self.n
            def __getitem__(self, i):
                return i * 100
            def __contains__(self, x):
                return x == 'magic'
        cd = Countdown(3)
        print(len(cd), list(cd), len(cd), cd[2], 'magic' in cd, 1 in cd)
        import itertools
        (t.events, list(itertools.accumulate([1, 2, 3], lambda x, y: x * y)), list(zip(*[(1, 'a'), (2, 'b')])),
         dict(enumerate('ab')), list(itertools.pairwise('abc')) if hasattr(itertools, 'pairwise') else None)
        """,
    "numbers-and-builtins": """
        import math, fractions, decimal, statistics
        print(sorted([3, 1, 2], reverse=True), min('bca'), max([], default='empty'), any([]), all([]))
        print(int('ff', 16), bin(10), oct(8), hex(255), chr(97), ord('a'), abs(-2.5), round(2.675, 2))
        print(divmod(17, 5), pow(3, 4, 5), 7 / 2, 7 // -2, -7 % 3, 2 ** 100, 0.1 + 0.2 == 0.3, math.isclose(0.1 + 0.2, 0.3))
        print(fractions.Fraction(1, 3) * 3, decimal.Decimal('1.10') + decimal.Decimal('2.20'), statistics.median([1, 3, 2]))
        print(isinstance(True, int), True + True, bool(''), bool([0]), None is None, 1 < 2 < 3, 'abc' < 'abd')
        print(list(map(lambda x, y: x * y, [1, 2], [3, 4])), list(filter(None, [0, 1, '', 'a'])), list(reversed('ab')))
        print(sorted(['b', 'A', 'c'], key=str.lower), list(range(10, 0, -3)), slice(1, 5, 2).indices(3), [1, 2, 3][::-1])
        x = 10
        x += 5; x -= 3; x *= 2; x //= 5; x **= 2; x %= 7; x <<= 3; x >>= 1; x |= 1; x &= 0b1111; x ^= 3
        (x, float('nan') != float('nan'), complex(1, -1) ** 2, int(-3.9), math.trunc(3.9), hash(7), id(x) == id(x))
        """,
    "strings-bytes": """
        s = 'The quick brown fox'
        print(s.split(), s.rsplit(' ', 1), s.partition(' '), s.title(), s.swapcase(), s.casefold())
        print(s.startswith(('A', 'T')), s.endswith('fox'), s.index('q'), s.rfind('o'), s.count('o'), s.isalpha())
        print('  pad  '.strip(), 'xxhixx'.strip('x'), 'a,b,,c'.split(','), 'line1\\nline2'.splitlines(), 'ab'.join('xyz'))
        print('Straße'.upper(), 'ǅ'.lower(), '%s and %r' % ('s', 's'), 'tab\\there'.expandtabs(2), 'abc'.translate({97: 'A'}))
        b = 'héllo'.encode('utf-8')
        print(b, len(b), b.decode(), b.hex(), bytes([65, 66]), bytearray(b'ab') + b'c', b[1:3], list(b'hi'))
        print(str.maketrans('ab', 'xy'), 'banana'.replace('a', 'o', 2), 'a-b-c'.rpartition('-'), repr('quote\\'s'))
        ('{:>8}'.format('r'), 'abc' * 2, 'x' in 'xyz', 'ABC'.lower().islower(), sorted('hello'), 'é'.encode('ascii', 'replace'))
        """,
    "collections": """
        import collections, heapq, bisect, copy
        Point = collections.namedtuple('Point', 'x y', defaults=[0])
        p = Point(1)
        print(p, p._replace(y=5), p._asdict(), Point._fields, p.x + p[1])
        od = collections.OrderedDict(a=1, b=2)
        od.move_to_end('a')
        dq = collections.deque([1, 2, 3], maxlen=4)
        dq.appendleft(0); dq.append(4); dq.rotate(1)
        cm = collections.ChainMap({'a': 1}, {'a': 2, 'b': 3})
        cnt = collections.Counter('abracadabra')
        print(list(od), dq, cm['a'], cm['b'], cnt.most_common(2), cnt['z'], (cnt - collections.Counter('aaa'))['a'])
        d = {'b': 1, 'a': 2}
        d.setdefault('c', []).append(3)
        d |= {'z': 0}
        merged = {**d, 'a': 9}
        print(d, merged, list(d.items())[0], d.pop('b'), d.popitem(), dict.fromkeys('xy', 0), {k: v for k, v in sorted(d.items())})
        h = [5, 3, 8, 1]
        heapq.heapify(h)
        nested = [[1, 2], [3]]
        deep, shallow = copy.deepcopy(nested), copy.copy(nested)
        nested[0].append(99)
        (heapq.nsmallest(2, h), heapq.heappop(h), bisect.bisect_left([1, 3, 5], 4), deep, shallow)
        """,
    "scope-and-state": """
        counter = 0
        def bump():
            global counter
            counter += 1
            return counter
        class Registry:
            items = []
            def add(self, x):
                self.items.append(x)
                return self
        r1, r2 = Registry(), Registry()
        r1.add(1)
        r2.add(2)
        x = 'global'
        def shadow():
            x = 'local'
            def inner():
                return x
            return inner()
        def default_trap(v, acc=[]):
            acc.append(v)
            return acc
        default_trap(1)
        class Scope:
            y = 5
            vals = [y for _ in range(2)] if False else None
            doubled = (lambda y=y: y * 2)()
        (bump(), bump(), counter, Registry.items, shadow(), x, default_trap(2), Scope.doubled, Scope.vals)
        """,
    "unpacking-and-calls": """
        def f(a, b=2, *args, c, d=4, **kw):
            return (a, b, args, c, d, sorted(kw.items()))
        def pos_only(a, b, /, c):
            return a + b + c
        first, *middle, last = range(6)
        (x, y), z = [1, 2], 3
        head, *tail = 'hello'
        print(first, middle, last, x, y, z, head, tail)
        print(f(1, c=3), f(1, 2, 3, 4, c=5, e=6), f(*[1, 2], **{'c': 3, 'k': 0}), pos_only(1, 2, c=3))
        try:
            pos_only(a=1, b=2, c=3)
        except TypeError as e:
            print('TypeError')
        a, b = 1, 2
        a, b = b, a
        merged = [*range(2), *'ab', *(None,)]
        (a, b, merged, {**{'x': 1}, 'y': 2}, max(*[3, 9, 1]), print(*'abc', sep='-', end='!\\n'))
        """,
    "numpy-basics": """
        import numpy as np
        a = np.arange(12, dtype=float).reshape(3, 4)
        b = np.linspace(0, 1, 4)
        print(a.shape, a.dtype, a.sum(), a.mean(axis=0), a[1:, ::2], a[a > 6], (a * b).round(2))
        print(np.dot(a, b).round(3), a.T.shape, np.concatenate([b, b]).size, np.stack([b, b]).shape, np.where(b > 0.5, 1, 0))
        rng = np.random.default_rng(7)
        r = rng.integers(0, 10, size=5)
        m = np.array([[4.0, 2.0], [1.0, 3.0]])
        vals = np.linalg.solve(m, np.array([2.0, 1.0]))
        print(r, vals.round(4), np.linalg.det(m).round(6), np.argsort([3, 1, 2]), np.unique([1, 1, 3]), np.cumsum([1, 2, 3]))
        s = np.zeros(3, dtype=[('x', 'i4'), ('y', 'f8')])
        s['x'] = [1, 2, 3]
        (a.tolist()[0], s['x'].sum(), float(np.median(r)), np.isnan(np.array([1.0, np.nan])).any(), np.float64(1.5) * 2)
        """,
    "pandas-basics": """
        import pandas as pd
        df = pd.DataFrame({'team': ['a', 'b', 'a', 'c', 'b'], 'pts': [3, 5, 2, 8, 1], 'min': [10, 20, 15, 30, 5]})
        df['rate'] = (df.pts / df['min']).round(3)
        print(df.shape, list(df.columns), df.dtypes.astype(str).tolist())
        print(df.groupby('team').pts.agg(['sum', 'max']))
        print(df[df.pts > 2].sort_values('pts', ascending=False).reset_index(drop=True))
        print(df.set_index('team').loc['a', 'pts'].tolist(), df.iloc[1:3, [0, 1]].values.tolist())
        s = pd.Series([1.5, None, 3.0], index=['x', 'y', 'z'])
        print(s.fillna(0).tolist(), s.isna().tolist(), s.dropna().index.tolist(), s.describe().round(3).to_dict())
        wide = df.pivot_table(index='team', values='pts', aggfunc='sum')
        (wide.to_dict(), df.team.value_counts().to_dict(), df.assign(x=lambda d: d.pts * 2).x.sum(), df.pts.apply(lambda v: v % 2).tolist())
        """,
    "error-name": """
        data = {'a': [1, 2]}
        total = 0
        for k in 'ab':
            total += sum(data[k])
        """,
    "error-attribute": """
        class C:
            __slots__ = ('a',)
        c = C()
        c.a = 1
        print(c.a)
        c.b = 2
        """,
    "error-recursion": """
        def depth(n):
            return depth(n + 1)
        depth(0)
        """,
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", sorted(LANGUAGE))
def test_language_programs_match_cpython(backends, name, level):
    check_everywhere(backends, textwrap.dedent(LANGUAGE[name]), levels=[level])


@pytest.mark.parametrize("level", [lv for lv in LEVELS if lv != "none"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_matches_cpython_at_the_worker_levels(backends, name, level):
    """test_differential.py's corpus (level none there) through the workers."""
    if name in NEEDS_PYTHON and sys.version_info < NEEDS_PYTHON[name]:
        pytest.skip(f"needs Python {NEEDS_PYTHON[name]}")
    check_everywhere(backends, textwrap.dedent(CORPUS[name]) + "\npass\n", levels=[level])


def test_the_language_set_exercises_errors_and_values(backends):
    """The comparison would pass vacuously if every program failed or printed nothing."""
    outcomes = {name: reference(textwrap.dedent(src)) for name, src in LANGUAGE.items()}
    errors = {name for name, (_, _, error) in outcomes.items() if error}
    assert errors == {"exceptions", "error-name", "error-attribute", "error-recursion"}, errors
    assert all(value is not None for name, (_, value, _) in outcomes.items() if name not in errors)


# -- differences found and fixed: each program once gave another answer in the sandbox (the reason says why) -----
FIXED_DIFFERENCES = {
    "rmul-before-repeat": (
        "The `*` gate repeated a sequence by the right operand's __index__ without first giving that operand's "
        "__rmul__ its turn; CPython calls __rmul__ (a number slot) before the sequence repeat (gates.check_size)",
        """
        class N:
            def __index__(self):
                return 3
            def __rmul__(self, other):
                return 'N.__rmul__'
        ('ab' * N(), [0] * N())
        """),
    "match-keyword-reads-twice": (
        "A match class pattern's keyword attribute was read twice (once by the gate, once by Python; a property's "
        "code ran twice); CPython reads it once (gates.pattern_read)",
        """
        log = []
        class K:
            @property
            def c(self):
                log.append('read')
                return 3
        match K():
            case K(c=3):
                pass
        log
        """),
    "consumers-call-len": (
        "The gate in front of C consumers of an iterable (`in`, sum, max, min, set, any, all, list, sorted, "
        "bytes ...) called the object's __len__ first; a __len__ that raised (a collection whose size is not "
        "known) made `x in obj` and sum(obj) fail where CPython never asks for the size (gates._estimated_length "
        "no longer asks a cell class)",
        """
        class Bag:
            def __contains__(self, x):
                return x == 1
            def __iter__(self):
                return iter([1, 2])
            def __len__(self):
                raise RuntimeError('size unknown')
        bag = Bag()
        (1 in bag, sum(bag), max(bag), any(bag))
        """),
    "generator-exit": (
        "GeneratorExit was not in the cell's builtins (BaseException, KeyboardInterrupt and SystemExit are "
        "withheld on purpose; GeneratorExit is not a base of the sandbox's limits), so the cleanup idiom "
        "`except GeneratorExit:` in a generator raised NameError when the generator was closed",
        """
        def worker():
            try:
                yield 1
            except GeneratorExit:
                print('cleanup')
                raise
        g = worker()
        next(g)
        g.close()
        'closed'
        """),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", sorted(FIXED_DIFFERENCES))
def test_fixed_differences_agree(backends, name, level):
    check_everywhere(backends, textwrap.dedent(FIXED_DIFFERENCES[name][1]), levels=[level])


# -- generated programs -------------------------------------------------------------------------------------
# A small grammar of allowed Python over five variables (ints a, b, c; str s; list xs; dict d). Values stay
# small (ints are reduced mod 1009 when stored, strings and lists cut), loops are bounded, and the programs
# raise the usual exceptions (ZeroDivisionError, IndexError, KeyError, ValueError, TypeError) often.

INTS = ("a", "b", "c")
SMALL = st.integers(0, 4)
INT_ATOMS = ("len(s)", "len(xs)", "len(d)", "sum(xs)", "xs[0]", "xs[-1]", "d['k']", "d.get('z', 7)", "s.count('a')",
             "s.find('b')", "max(xs, default=0)", "min(xs, default=-1)", "int(s[:1] or '0')", "xs.index(3)",
             "int(True)", "ord(s[0])", "hash(b)", "round(a / 3)", "(a > b) + (b > c)")
STR_ATOMS = ("s", "'ab'", "s.upper()", "s[::-1]", "s[1:3]", "s.strip()", "s.replace('a', 'b')", "repr(xs)[:8]",
             "'-'.join(str(v) for v in xs)", "s.title()", "s.zfill(5)", "str(d)[:10]", "s.split(' ')[0]")
# An object whose protocol methods log each call: the sandbox must call them as often, in the same order
# (but __len__: how often CPython itself asks it, list() presizing by it, is left out of the comparison).
LOGGED_CLASS = """class W:
    def __init__(self, v):
        self.v = v
        self.log = []
    def __len__(self):   # not logged (see above)
        return abs(self.v) % 5
    def __getitem__(self, i):
        self.log.append(('item', i))
        if i >= abs(self.v) % 5:
            raise IndexError(i)
        return i * self.v
    def __contains__(self, x):
        self.log.append('contains')
        return x == self.v
    def __eq__(self, other):
        self.log.append('eq')
        return isinstance(other, W) and other.v == self.v
    __hash__ = None
    def __lt__(self, other):
        self.log.append('lt')
        return self.v < other.v
    def __bool__(self):
        self.log.append('bool')
        return self.v > 0
    def __index__(self):
        self.log.append('index')
        return abs(self.v) % 4
    def __format__(self, spec):
        self.log.append('format')
        return format(self.v, spec)
    @property
    def p(self):
        self.log.append('p')
        return self.v
"""
LOGGED_USES = ("len(w)", "list(w)", "a in w", "w == W(a)", "w.p + w.p", "[i for i in w][:2]", "'ab' * w",
               "[0] * w", "sorted([W(2), w])[0].v", "bool(w)", "'y' if w else 'n'", "f'{w:>4}'", "xs[:w]",
               "getattr(w, 'p')", "hasattr(w, 'p')", "max(w, default=-1)", "w in [W(1), w]", "not w",
               "range(w)[-1:]", "bin(w)", "divmod(7, w.p or 1)", "min(W(3), w).v")
EXCEPTIONS = ("ZeroDivisionError", "IndexError", "KeyError", "ValueError", "TypeError", "AttributeError")


@st.composite
def int_expr(draw, names=INTS, depth=2):
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.one_of(st.integers(-9, 30).map(str), st.sampled_from(names), st.sampled_from(INT_ATOMS)))
    x, y = draw(int_expr(names, depth - 1)), draw(int_expr(names, depth - 1))
    kind = draw(st.integers(0, 9))
    if kind <= 1:
        return f"({x} {draw(st.sampled_from(['+', '-', '*', '//', '%']))} {y})"
    if kind == 2:   # bit operations; a shift by at most 7
        return f"({x} {draw(st.sampled_from(['&', '|', '^', '<<', '>>']))} ({y}) % 8)"
    if kind == 3:
        return f"({x} ** {draw(st.integers(0, 3))})"
    if kind == 4:
        return f"({x} if {draw(condition(names, depth - 1))} else {y})"
    if kind == 5:
        return draw(st.sampled_from([f"abs({x})", f"max({x}, {y})", f"min({x}, {y})", f"divmod({x}, {y})[1]",
                                     f"pow({x}, 2, 97)"]))
    if kind == 6:
        return f"(lambda v, w=2: v * w - {y})({x})"
    if kind == 7:
        return f"sum(i * {x} for i in range({draw(SMALL)}) if i != {y})"
    if kind == 8:
        return f"len([i for i in range({draw(SMALL)}) if (i + {x}) % 2])"
    return f"int({draw(str_expr(names, depth - 1))}.count('a') + {x})"


@st.composite
def condition(draw, names=INTS, depth=1):
    x, y = draw(int_expr(names, depth)), draw(int_expr(names, depth))
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return f"{x} {draw(st.sampled_from(['<', '<=', '==', '!=', '>', '>=']))} {y}"
    if kind == 1:
        return f"{x} in xs"
    if kind == 2:
        return f"s.startswith({draw(st.sampled_from(['a', 'b', '0', ' ']))!r})"
    if kind == 3:
        return f"not ({x} < {y} < {draw(int_expr(names, 0))})"
    if kind == 4:
        return f"({x} > 0 and {y} < 5 or 'k' in d)"
    return f"any(v > {x} for v in xs)"


@st.composite
def str_expr(draw, names=INTS, depth=1):
    atom = draw(st.sampled_from(STR_ATOMS))
    if depth == 0:
        return atom
    x = draw(int_expr(names, depth - 1))
    kind = draw(st.integers(0, 6))
    if kind == 0:
        return f'f"{{{x}!r:>4}}|{{s:.3}}"'
    if kind == 1:
        return f"'{{}}:{{:03d}}'.format({atom}, {x})"
    if kind == 2:
        return f"'%s/%d' % ({atom}, {x})"
    if kind == 3:
        return f"({atom} + str({x}))"
    if kind == 4:
        return f"{atom}[{x} % 5:]"
    if kind == 5:
        return f"({atom} * 2)"
    return f'f"{{{x}:+}}{{xs[:2]}}{{len(d)}}"'


@st.composite
def list_expr(draw, names=INTS):
    x = draw(int_expr(names, 1))
    return draw(st.sampled_from([
        f"[i * {x} for i in range({draw(SMALL)})]", "sorted(xs)", "xs[::-1]", "list(d.values())",
        "[v % 5 for v in xs]", f"xs + [{x}]", "sorted(xs, key=lambda v: (-v % 4, v))", f"[{x}] * 3",
        "[v for v in xs if v % 2] or [0]", "list(map(abs, xs))", "list(zip(xs, s))[:3]", "[len(w) for w in s.split()]"]))


@st.composite
def statement(draw, depth=2, names=INTS, counter=0):
    simple = st.sampled_from([
        "xs.append(a % 100)", "xs.sort()", "xs.reverse()", "xs.pop()", "xs.insert(0, b % 50)", "d['k'] = a",
        "d[s[:3]] = b", "del d['k']", "d.update({'j': c})", "d.pop('k', None)", "s = s.lower()",
        "xs.remove(xs[0])", "xs.extend(range(2))"])
    kind = draw(st.integers(0, 14 if depth > 0 else 5))
    if kind == 0:
        return f"{draw(st.sampled_from(names))} = {draw(int_expr(names))} % 1009"
    if kind == 1:
        return f"s = ({draw(str_expr(names))})[:40]"
    if kind == 2:
        return f"xs = ({draw(list_expr(names))})[:12]"
    if kind == 3:
        return draw(simple)
    if kind in (4, 5):
        return f"print({draw(int_expr(names))}, {draw(str_expr(names))})"
    body = draw(block(depth - 1, names, counter + 1))
    if kind == 6:
        other = draw(block(depth - 1, names, counter + 1))
        return f"if {draw(condition(names))}:\n{body}else:\n{other}"
    if kind == 7:
        return f"for i in range({draw(SMALL)}):\n{body}"
    if kind == 8:
        n = f"n{counter}"
        return f"{n} = 0\nwhile {n} < {draw(SMALL)}:\n    {n} += 1\n{body}"
    if kind == 9:
        caught = draw(st.lists(st.sampled_from(EXCEPTIONS), min_size=1, max_size=3, unique=True))
        handler = f"except ({', '.join(caught)},) as err:\n    print('caught', type(err).__name__, err)\n"
        final = "finally:\n    print('finally')\n" if draw(st.booleans()) else ""
        return f"try:\n{body}{handler}{final}"
    if kind == 10:
        fn = f"f{counter}"
        ret = draw(int_expr(("p", "q") + names))
        return f"def {fn}(p, q=3):\n    return {ret}\n{draw(st.sampled_from(names))} = {fn}({draw(int_expr(names, 1))}) % 1009"
    if kind == 11:
        return ("class K:\n    def __init__(self, v):\n        self.v = v\n    @property\n    def twice(self):\n"
                "        return self.v * 2\n    def __repr__(self):\n        return f'K({self.v!r})'\n"
                f"k = K({draw(int_expr(names, 1))})\nprint(k, k.twice, [k] * 2)")
    if kind == 12:
        return (f"match {draw(st.sampled_from(['xs', 'd', 'a % 4', 's', '(a, s)']))}:\n"
                "    case [] | {}:\n        print('empty')\n"
                "    case [first, *rest] if first > 0:\n        print('pos', first, len(rest))\n"
                "    case {'k': kv, **others}:\n        print('k', kv, len(others))\n"
                "    case 0 | 1:\n        print('bit')\n"
                "    case int(n) if n > 1:\n        print('int', n)\n"
                "    case str() as text if text:\n        print('text', text[:5])\n"
                "    case (x, str(y)):\n        print('pair', x, y[:3])\n"
                "    case _:\n        print('other')")
    if kind == 13:
        return (f"def gen{counter}(m):\n    for i in range(m):\n        yield i * {draw(int_expr(names, 1))}\n"
                f"xs = list(gen{counter}({draw(SMALL)}))")
    uses = draw(st.lists(st.sampled_from(LOGGED_USES), min_size=1, max_size=5))
    return LOGGED_CLASS + f"w = W({draw(int_expr(names, 1))})\nprint({', '.join(uses)}, w.log)"


@st.composite
def block(draw, depth, names=INTS, counter=0):
    lines = draw(st.lists(statement(depth, names, counter), min_size=1, max_size=3))
    return "".join(textwrap.indent(line, "    ") + "\n" for line in lines)


@st.composite
def program(draw):
    prelude = (f"a, b, c = {draw(st.integers(-5, 40))}, {draw(st.integers(-5, 40))}, {draw(st.integers(-5, 40))}\n"
               f"s = {draw(st.text(alphabet='ab01 -', max_size=8))!r}\n"
               f"xs = {draw(st.lists(st.integers(-3, 9), max_size=5))!r}\n"
               f"d = {{'k': {draw(st.integers(0, 9))}, 'j': {draw(st.integers(0, 9))}}}\n")
    body = draw(st.lists(statement(2), min_size=1, max_size=6))
    return prelude + "".join(line + "\n" for line in body) + "(a, b, c, s, xs, d)\n"


@hypothesis.settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=EXAMPLES <= 500,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(src=program())
def test_generated_programs_match_cpython(backends, src):
    check_everywhere(backends, src)
