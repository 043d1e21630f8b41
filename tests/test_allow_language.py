"""Must-allow: ordinary Python that analysts and language models write runs unchanged, with no denial
records. Each program states its exact expected output."""
from __future__ import annotations

import sys
import textwrap

import pytest

PROGRAMS = {
    "properties-and-setters": ("""
        class Temp:
            def __init__(self, c):
                self._c = c
                self._cache = {}
            @property
            def f(self):
                return self._c * 9 / 5 + 32
            @f.setter
            def f(self, v):
                self._c = (v - 32) * 5 / 9
            @f.deleter
            def f(self):
                self._c = 0
        t = Temp(100)
        t.f = 212
        t._cache['k'] = 1
        print(t.f, t._c, t._cache)
        del t.f
        print(t._c)
        """, "212.0 100.0 {'k': 1}\n0\n"),
    "dataclasses": ("""
        from dataclasses import dataclass, field, asdict, astuple, replace, fields
        @dataclass(order=True)
        class P:
            x: int
            y: int = 0
            tags: list = field(default_factory=list)
        p = P(1, 2)
        print(p, asdict(p), astuple(p), replace(p, x=5), p < P(2), [f.name for f in fields(P)])
        @dataclass(frozen=True)
        class Q:
            a: int
        try:
            Q(1).a = 2
        except Exception as e:
            print(type(e).__name__)
        """, "P(x=1, y=2, tags=[]) {'x': 1, 'y': 2, 'tags': []} (1, 2, []) P(x=5, y=2, tags=[]) True "
             "['x', 'y', 'tags']\nFrozenInstanceError\n"),
    "namedtuple": ("""
        from typing import NamedTuple
        from collections import namedtuple
        class Pt(NamedTuple):
            x: int
            y: int = 0
        q = Pt(1)
        print(q._asdict(), q._replace(y=3), Pt._fields, Pt._field_defaults, Pt._make([3, 4]))
        R = namedtuple('R', 'a b')
        r = R(1, 2)
        print(r, r._asdict(), r._fields, r.a + r[1])
        """, "{'x': 1, 'y': 0} Pt(x=1, y=3) ('x', 'y') {'y': 0} Pt(x=3, y=4)\nR(a=1, b=2) {'a': 1, 'b': 2} ('a', 'b') 3\n"),
    "typeddict-and-typing": ("""
        from typing import TypedDict, Optional, Generic, TypeVar, Protocol
        class TD(TypedDict):
            a: int
        T = TypeVar('T')
        class Box(Generic[T]):
            def __init__(self, v: T) -> None:
                self.v = v
        class HasLen(Protocol):
            def __len__(self) -> int: ...
        def f(x: Optional[int] = None) -> int:
            return x or 0
        print(TD(a=1), Box[int](3).v, f(), f(2))
        """, "{'a': 1} 3 0 2\n"),
    "enums": ("""
        import enum
        class Color(enum.Enum):
            RED = 1
            GREEN = 2
        class Perm(enum.IntFlag):
            R = 4
            W = 2
        class S(str, enum.Enum):
            A = 'a'
        print(Color.RED, Color(2), Color['RED'].name, Color.RED.value, list(Color), len(Color.__members__))
        print(int(Perm.R | Perm.W), S.A.value, S('a') is S.A, Color.RED._value_)
        """, "Color.RED Color.GREEN RED 1 [<Color.RED: 1>, <Color.GREEN: 2>] 2\n6 a True 1\n"),
    "generators": ("""
        def gen(n):
            for i in range(n):
                yield i * i
        def relay():
            total = yield from gen(3)
            return total
        g = gen(4)
        print(next(g), list(g), sum(x for x in range(5)), list(relay()))
        def acc():
            s = 0
            while True:
                v = yield s
                s += v
        a = acc(); next(a); a.send(2); print(a.send(3))
        a.close()
        """, "0 [1, 4, 9] 10 [0, 1, 4]\n5\n"),
    "decorators-wraps": ("""
        import functools
        def deco(fn):
            @functools.wraps(fn)
            def w(*a, **k):
                return fn(*a, **k) * 2
            return w
        @deco
        def add(a, b):
            "adds"
            return a + b
        def param(n):
            def d(fn):
                return lambda *a: [fn(*a)] * n
            return d
        @param(2)
        def one():
            return 1
        print(add(1, 2), add.__name__, add.__doc__, add.__wrapped__(2, 3), one())
        """, "6 add adds 5 [1, 1]\n"),
    "closures-nonlocal": ("""
        def counter():
            n = 0
            def inc():
                nonlocal n
                n += 1
                return n
            return inc
        c = counter(); c(); c()
        fs = [lambda i=i: i for i in range(3)]
        print(c(), [f() for f in fs])
        """, "3 [0, 1, 2]\n"),
    "global-statement": ("""
        total = 0
        def bump():
            global total
            total += 5
        bump(); bump()
        print(total)
        """, "10\n"),
    "async-await": ("""
        async def double(x):
            return x * 2
        async def main():
            out = []
            for i in range(3):
                out.append(await double(i))
            return out
        async def agen():
            for i in range(2):
                yield i
        async def collect():
            return [i async for i in agen()]
        print(await main(), await collect())
        """, "[0, 2, 4] [0, 1]\n"),
    "match-statements": ("""
        from dataclasses import dataclass
        @dataclass
        class Point:
            x: int
            y: int
        def where(p):
            match p:
                case Point(x=0, y=0):
                    return 'origin'
                case Point(x=0, y=yy):
                    return f'y-axis {yy}'
                case Point(xx, 0):
                    return f'x-axis {xx}'
                case [a, b, *rest]:
                    return f'seq {a} {b} {rest}'
                case {'k': v, **others}:
                    return f'map {v} {others}'
                case int() | float() as n if n > 0:
                    return f'pos {n}'
                case str(s):
                    return f'str {s}'
                case _:
                    return 'other'
        for v in (Point(0, 0), Point(0, 3), Point(4, 0), [1, 2, 3, 4], {'k': 1, 'z': 2}, 5, 'hi', None):
            print(where(v))
        """, "origin\ny-axis 3\nx-axis 4\nseq 1 2 [3, 4]\nmap 1 {'z': 2}\npos 5\nstr hi\nother\n"),
    "fstrings-and-format": ("""
        from dataclasses import dataclass
        @dataclass
        class Q:
            name: str
            n: int
        q = Q('ab', 3)
        print(f"{3.14159:.2f}|{'x'!r}|{42:>5}|{q.name:^6}|{q.n=}|{1234567:,}|{0.25:.0%}")
        print("{q.name:>10}|{0:^5}|{1[0]}".format("a", [9], q=q))
        print("{name}-{n:03d}".format_map({'name': 'z', 'n': 7}), format(3.5, '08.3f'), '%s=%d' % ('k', 4))
        """, "3.14|'x'|   42|  ab  |q.n=3|1,234,567|25%\n        ab|  a  |9\nz-007 0003.500 k=4\n"),
    "exceptions-cause-context": ("""
        class AppError(Exception):
            def __init__(self, msg, code):
                super().__init__(msg)
                self.code = code
        try:
            try:
                1 / 0
            except ZeroDivisionError as e:
                raise AppError('bad', 7) from e
        except AppError as e:
            print(e, e.code, type(e.__cause__).__name__, type(e.__context__).__name__, e.__suppress_context__, e.args)
        try:
            try:
                {}['k']
            except KeyError:
                raise ValueError('v')
        except ValueError as e:
            print(repr(e.__context__), e.__cause__)
        try:
            raise KeyError('x')
        except:
            print('bare except catches ordinary errors')
        finally:
            print('finally')
        """, "bad 7 ZeroDivisionError ZeroDivisionError True ('bad',)\nKeyError('k') None\n"
             "bare except catches ordinary errors\nfinally\n"),
    "exception-groups": ("""
        try:
            raise ExceptionGroup('eg', [ValueError(1), TypeError(2)])
        except* ValueError as eg:
            print('values', len(eg.exceptions))
        except* TypeError:
            print('types')
        try:
            raise ExceptionGroup('outer', [KeyError('k'), ExceptionGroup('inner', [ValueError(3)])])
        except ExceptionGroup as eg:
            match, rest = eg.split(ValueError)
            print(len(match.exceptions), type(rest.exceptions[0]).__name__)
        """, "values 1\ntypes\n1 KeyError\n"),
    "type-introspection": ("""
        class Thing:
            pass
        t = Thing()
        x = [1]
        print(type(t).__name__, t.__class__.__name__, type(x).__name__, Thing.__qualname__, Thing.__module__,
              isinstance(t, Thing), issubclass(bool, int), type(1) is int, callable(len), x.__class__.__name__)
        """, "Thing Thing list Thing __main__ True True True True list\n"),
    "super-and-inheritance": ("""
        class Base:
            def __init__(self, a):
                self.a = a
            def describe(self):
                return f'Base({self.a})'
            def __repr__(self):
                return 'B'
        class Child(Base):
            def __init__(self, a, b):
                super().__init__(a)
                self.b = b
            def describe(self):
                return 'Child+' + super().describe()
        class Reg:
            names = []
            def __init_subclass__(cls, **kw):
                super().__init_subclass__(**kw)
                Reg.names.append(cls.__name__)
        class R1(Reg):
            pass
        c = Child(1, 2)
        print(c.a, c.b, c.describe(), isinstance(c, Base), Reg.names, repr(c))
        """, "1 2 Child+Base(1) True ['R1'] B\n"),
    "own-dunders-and-private": ("""
        import functools
        @functools.total_ordering
        class V:
            def __init__(self, v):
                self._v = v
                self.__secret = v * 10
            def __eq__(self, o):
                return self._v == o._v
            def __lt__(self, o):
                return self._v < o._v
            def __hash__(self):
                return hash(self._v)
            def __len__(self):
                return self._v
            def __getitem__(self, i):
                return i * self._v
            def __call__(self):
                return self.__secret
            def __getattr__(self, name):
                return name.upper()
        vs = sorted([V(2), V(1)])
        print(vs[0]._v, len(V(3)), V(2)[5], V(4)(), V(1) <= V(2), len({V(1), V(1)}), V(1).missing, V(1).__dict__)
        """, "1 3 10 40 True 1 MISSING {'_v': 1, '_V__secret': 10}\n"),
    "slots-classmethods": ("""
        class Money:
            __slots__ = ('amount',)
            def __init__(self, a):
                self.amount = a
            def __add__(self, o):
                return Money(self.amount + o.amount)
            def __mul__(self, k):
                return Money(self.amount * k)
            def __repr__(self):
                return f'Money({self.amount})'
            @classmethod
            def zero(cls):
                return cls(0)
            @staticmethod
            def unit():
                return 'EUR'
        print(Money(2) + Money(3), Money(2) * 3, sum([Money(1), Money(2)], Money.zero()), Money.unit())
        """, "Money(5) Money(6) Money(3) EUR\n"),
    "context-managers": ("""
        class Ctx:
            def __init__(self):
                self.log = []
            def __enter__(self):
                self.log.append('in')
                return self
            def __exit__(self, et, ev, tb):
                self.log.append('out:' + (et.__name__ if et else 'ok'))
                return et is KeyError
        c = Ctx()
        with c:
            pass
        with c:
            raise KeyError('k')
        print(c.log)
        """, "['in', 'out:ok', 'in', 'out:KeyError']\n"),
    "stdlib-mix": ("""
        import collections, itertools, functools, re, json, datetime, statistics, random, math, heapq, bisect
        import string, textwrap, decimal, fractions, copy, pprint, hashlib, base64, uuid, calendar
        print(collections.Counter('abca').most_common(1), list(itertools.combinations([1, 2, 3], 2)))
        print(re.sub(r'(\\d+)', r'<\\1>', 'a1b22'), json.loads(json.dumps({'a': [1, 2]})), functools.reduce(int.__add__, [1, 2]) if False else 3)
        print(datetime.date(2024, 1, 2).isoformat(), (datetime.datetime(2024, 1, 1) + datetime.timedelta(days=1)).day)
        print(statistics.mean([1, 2, 3]), statistics.median([3, 1, 2]), math.sqrt(16), math.isclose(0.1 + 0.2, 0.3))
        random.seed(1); r = random.Random(5)
        print(heapq.nsmallest(2, [5, 1, 3]), bisect.bisect([1, 3, 5], 4), string.ascii_lowercase[:3])
        print(textwrap.shorten('hello world again', 12), decimal.Decimal('1.10') + decimal.Decimal('2.2'), fractions.Fraction(1, 3) * 3)
        print(copy.deepcopy({'a': [1]}), hashlib.sha256(b'x').hexdigest()[:8], base64.b64encode(b'hi').decode())
        print(len(str(uuid.uuid4())), calendar.isleap(2024), pprint.pformat({'b': 1}))
        d = collections.defaultdict(list); d['a'].append(1)
        od = collections.OrderedDict(a=1, b=2); od.move_to_end('a')
        dq = collections.deque([1, 2], maxlen=3); dq.appendleft(0)
        print(dict(d), list(od), list(dq), list(itertools.islice(itertools.count(5), 3)), list(itertools.accumulate([1, 2, 3])))
        @functools.lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        print(fib(60), fib.cache_info().hits > 0)
        """, "[('a', 2)] [(1, 2), (1, 3), (2, 3)]\na<1>b<22> {'a': [1, 2]} 3\n2024-01-02 2\n2 2 4.0 True\n"
             "[1, 3] 2 abc\nhello [...] 3.30 1\n{'a': [1]} 2d711642 aGk=\n36 True {'b': 1}\n"
             "{'a': [1]} ['b', 'a'] [0, 1, 2] [5, 6, 7] [1, 3, 6]\n1548008755920 True\n"),
    "operators-and-sizes": ("""
        x = 5
        x **= 2
        x *= 3
        big = 2 ** 200
        print(x, 7 << 2, 2 ** 0.5, 10 ** 20, 'ab' * 3, [0] * 3, (1,) * 2, big.bit_length(), pow(3, 4), pow(3, 4, 5),
              divmod(7, 2), round(2.567, 2), list(range(5)), sum(range(10 ** 6)), len(list(range(100000))))
        """, "75 28 1.4142135623730951 100000000000000000000 ababab [0, 0, 0] (1, 1) 201 81 1 (3, 1) 2.57 "
             "[0, 1, 2, 3, 4] 499999500000 100000\n"),
    "dunder-calls-on-builtins": ("""
        x = [1, 2, 3]
        print(x.__len__(), (5).__add__(1), 'a'.__contains__('a'), {'a': 1}.__getitem__('a'), x.__iter__().__next__())
        """, "3 6 True 1 1\n"),
    "getattr-family": ("""
        class K:
            pass
        k = K()
        setattr(k, 'a', 1)
        print(getattr(k, 'a'), getattr(k, 'b', 'dflt'), hasattr(k, 'a'), hasattr(k, 'zz'))
        delattr(k, 'a')
        print(hasattr(k, 'a'), getattr(str, 'upper')('x'), hasattr([], 'append'))
        """, "1 dflt True False\nFalse X True\n"),
    "main-guard-and-locals": ("""
        def main():
            a = 1
            return sorted(locals())
        if __name__ == '__main__':
            print('main', main(), __name__)
        """, "main ['a'] __main__\n"),
    "comprehensions-and-walrus": ("""
        data = [1, 5, 2, 8]
        print([y for x in data if (y := x * 2) > 4], {x % 3 for x in data}, {x: x * x for x in data if x > 1},
              [[i * j for j in range(3)] for i in range(2)], any(x > 7 for x in data), max(data, key=lambda v: -v))
        """, "[10, 16] {1, 2} {5: 25, 2: 4, 8: 64} [[0, 0, 0], [0, 1, 2]] True 1\n"),
    "class-attributes-and-own-dict": ("""
        class Rec:
            kind = 'rec'
            def __init__(self, **kw):
                self.__dict__.update(kw)
            def __repr__(self):
                return f'{type(self).__name__}({self.__dict__})'
        r = Rec(a=1)
        Rec.kind = 'changed'
        print(r, r.a, Rec.kind, vars is not None)
        """, "Rec({'a': 1}) 1 changed True\n"),
    "abc-abstract": ("""
        import abc
        class A(abc.ABC):
            @abc.abstractmethod
            def area(self):
                ...
        class Sq(A):
            def __init__(self, s):
                self.s = s
            def area(self):
                return self.s ** 2
        try:
            A()
        except TypeError:
            print('abstract')
        print(Sq(3).area(), isinstance(Sq(1), A))
        """, "abstract\n9 True\n"),
    "recursion-ordinary": ("""
        def fact(n):
            return 1 if n <= 1 else n * fact(n - 1)
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)
        print(fact(20), depth(500))
        """, "2432902008176640000 500\n"),
}

# Programs that use syntax or builtins newer than the oldest supported Python (3.10).
NEEDS_PYTHON = {"exception-groups": (3, 11)}


def program_params(names):
    """The program names as pytest parameters, each skipped below the Python it needs."""
    return [pytest.param(name, marks=pytest.mark.skipif(
                sys.version_info < NEEDS_PYTHON[name],
                reason=f"needs Python {'.'.join(map(str, NEEDS_PYTHON[name]))}"))
            if name in NEEDS_PYTHON else name for name in names]


@pytest.mark.parametrize("name", program_params(sorted(PROGRAMS)))
def test_ordinary_program_runs(run, name):
    src, expected = PROGRAMS[name]
    r = run(textwrap.dedent(src))
    assert r.ok, r
    assert r.stdout == expected, r
    assert r.denials == [], r


def test_persistent_state_across_cells(sandbox):
    assert sandbox.run("def show():\n    return threshold * 2\n").ok
    assert sandbox.run("threshold = 21").ok
    r = sandbox.run("print(show())")
    assert r.ok and r.stdout == "42\n", r
    assert sandbox.run("class K:\n    def get(self):\n        return helper()\n").ok
    assert sandbox.run("def helper():\n    return 'late'\n").ok
    r = sandbox.run("print(K().get())\nimport math")
    assert r.ok and r.stdout == "late\n", r
    r = sandbox.run("print(math.pi > 3)")
    assert r.ok and r.stdout == "True\n", r


def test_last_expression_is_the_result(run):
    r = run("x = 40\nx + 2")
    assert r.ok and r.result_text == "42", r
    r = run("x + 2;")
    assert r.ok and r.result_text is None, r
    r = run("x + 2  # comment")
    assert r.ok and r.result_text == "42", r
    r = run("print('a')\nNone")
    assert r.ok and r.result_text is None and r.stdout == "a\n", r


def test_display_and_repr_html(run):
    r = run("class T:\n    def _repr_html_(self):\n        return '<b>t</b>'\n    def __repr__(self):\n        return 'T()'\n"
            "display(T())\nT()")
    assert r.ok, r
    assert r.displays and r.displays[0]["text/html"] == "<b>t</b>"
    assert r.result_text == "T()"


def test_error_reports_cell_line(run):
    r = run("a = 1\nb = 2\nc = a / 0\n")
    assert r.error_name == "ZeroDivisionError" and r.error_line == 3, r
    assert "c = a / 0" in "\n".join(r.error["traceback"])
    assert "sandbox_kernel" not in "\n".join(r.error["traceback"])


def test_frozen_dataclass_post_init_object_setattr(run):
    r = run("import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass F:\n    a: int\n    b: int = 0\n"
            "    def __post_init__(self):\n        object.__setattr__(self, 'b', self.a * 2)\nprint(F(2))")
    assert r.ok and r.stdout == "F(a=2, b=4)\n", r


def test_operator_attrgetter_sort(run):
    r = run("import operator\nclass P:\n    def __init__(self, n):\n        self.name = n\n"
            "print([p.name for p in sorted([P('b'), P('a')], key=operator.attrgetter('name'))])")
    assert r.ok and r.stdout == "['a', 'b']\n", r


def test_contextlib_contextmanager(run):
    r = run("from contextlib import contextmanager, suppress\n@contextmanager\ndef tag():\n    print('<')\n    yield\n"
            "    print('>')\nwith tag():\n    print('body')\nwith suppress(KeyError):\n    {}['x']\n")
    assert r.ok and r.stdout == "<\nbody\n>\n", r


def test_warnings_filterwarnings(run):
    r = run("import warnings\nwarnings.filterwarnings('ignore')\nprint('ok')")
    assert r.ok and r.stdout == "ok\n", r


def test_format_private_field_on_own_class(run):
    r = run("class C:\n    def __init__(self):\n        self._v = 5\n    def show(self):\n"
            "        return '{0._v}'.format(self)\nprint(C().show())")
    assert r.ok and r.stdout == "5\n", r


def test_match_dotted_value_pattern(run):
    r = run("import enum\nclass Color(enum.Enum):\n    RED = 1\n    GREEN = 2\n"
            "match Color.GREEN:\n    case Color.RED:\n        print('red')\n    case Color.GREEN:\n        print('green')\n")
    assert r.ok and r.stdout == "green\n", r


@pytest.mark.parametrize("src", [
    "import math\nmatch 1.0:\n    case math.pi:\n        pass\n",
])
def test_run_cell_never_raises(sandbox, src):
    try:
        r = sandbox.run(src)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"run_cell raised {type(exc).__name__}: {exc}")
    assert r.done["status"] in ("ok", "error")
