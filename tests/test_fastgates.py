"""The fast paths of the mul, mod and ownattr gates (C in sandbox_kernel/_fastgates.c, and the Python
fallback used when it was not compiled): each answers only what needs no policy and hands everything
else to the slow gate, so both implementations must agree with each other and with plain Python."""
from __future__ import annotations

import sys

import pytest

from sandbox_kernel import gates

IMPLEMENTATIONS = ["python"] + (["c"] if gates._fastgates is not None else [])


class Own:
    def __init__(self):
        self.x = 1


class Foreign:
    def __init__(self):
        self.x = 2


@pytest.fixture(params=IMPLEMENTATIONS)
def fast(request):
    calls = []

    def slow(kind):
        def gate(a, b):
            calls.append((kind, a if kind != "getattr" else type(a).__name__, b))
            return ("slow", kind)
        return gate
    mul, mod, ownattr, contains, pow_ = gates.fast_gates(slow("mul"), slow("mod"), slow("getattr"), {Own},
                                                         slow("contains"), slow("pow"), use_c=request.param == "c")
    SMALL_POWER[:] = [pow_]
    return mul, mod, ownattr, calls, contains


SMALL_POWER: list = []   # the fixture's pow (its tuple keeps the shape the other tests unpack)


def test_the_c_fast_paths_are_built_on_linux():
    if sys.platform != "linux":
        pytest.skip("the C extension is optional off Linux")
    assert gates._fastgates is not None, "sandbox_kernel/_fastgates.c was not compiled (pip install -e . builds it)"


@pytest.mark.parametrize("a, b", [(3, 4), (-7, 6), (2**30, 2**30 - 1), (1.5, 2), (3, 0.25), (2.0, 10**400),
                                  (0.5, 2.5), (10**400, 0.0)])
def test_mul_answers_small_ints_and_floats_itself(fast, a, b):
    mul, _, _, calls, _ = fast
    try:
        expected = a * b
    except OverflowError:
        with pytest.raises(OverflowError):
            mul(a, b)
    else:
        assert mul(a, b) == expected
    assert calls == []


@pytest.mark.parametrize("a, b", [(2**31, 2), (3, -(2**31)), (10**30, 10**30), ("ab", 3), (3, [1]), (True, 2),
                                  (2, False)])
def test_mul_hands_everything_else_to_the_size_gate(fast, a, b):
    mul, _, _, calls, _ = fast
    assert mul(a, b) == ("slow", "mul")
    assert calls == [("mul", a, b)]


@pytest.mark.parametrize("a, b", [(7, 3), (-7, 3), (7.5, 2), (10**40, 7), (5, 2.5)])
def test_mod_answers_numbers_on_the_left_itself(fast, a, b):
    _, mod, _, calls, _ = fast
    assert mod(a, b) == a % b
    assert calls == []


@pytest.mark.parametrize("a", ["%5d", b"%5d", bytearray(b"%d"), [1], True])
def test_mod_hands_formats_and_other_types_to_the_gate(fast, a):
    _, mod, _, calls, _ = fast
    assert mod(a, 1) == ("slow", "mod")
    assert calls == [("mod", a, 1)]


def test_mod_of_a_number_by_a_string_is_still_an_error(fast):
    _, mod, _, calls, _ = fast
    with pytest.raises(TypeError):
        mod(5, "%d")
    assert calls == []


def test_ownattr_reads_own_instances_directly_and_gates_the_rest(fast):
    _, _, ownattr, calls, _ = fast
    assert ownattr(Own(), "x") == 1
    assert calls == []
    assert ownattr(Foreign(), "x") == ("slow", "getattr")
    assert calls == [("getattr", "Foreign", "x")]


def test_ownattr_missing_attribute_raises_attribute_error(fast):
    _, _, ownattr, _, _ = fast
    with pytest.raises(AttributeError):
        ownattr(Own(), "nope")


@pytest.mark.parametrize("args", [(), (1,), (1, 2, 3)])
def test_wrong_arity_is_a_type_error(fast, args):
    mul, mod, ownattr, _, contains = fast
    for fn in (mul, mod, ownattr, contains):
        with pytest.raises(TypeError):
            fn(*args)


@pytest.mark.skipif(gates._fastgates is None, reason="the C extension is not built")
def test_c_constructor_rejects_bad_arguments():
    with pytest.raises(TypeError):
        gates._fastgates.FastGates(1, 2, 3, set(), len, len)
    with pytest.raises(TypeError):
        gates._fastgates.FastGates(len, len, len, [Own], len, len)
    with pytest.raises(TypeError):
        gates._fastgates.FastGates(len, len, len, {Own}, 4, len)


@pytest.mark.parametrize("container, item", [({1: 2}, 1), ({1}, 2), (frozenset({3}), 3), ("abc", "b"),
                                             ([1, 2], 2), ((1,), 5), (b"ab", 97), (range(10), 3),
                                             ({1: 2}.keys(), 1), ({1: 2}.items(), (1, 2))])
def test_contains_answers_builtin_containers_itself(fast, container, item):
    *_, calls, contains = fast
    assert contains(container, item) == (item in container)
    assert calls == []


def test_contains_hands_iterators_and_other_objects_to_the_gate(fast):
    *_, calls, contains = fast
    it = iter([1])
    assert contains(it, 1) == ("slow", "contains")
    assert contains({1: 2}.values(), 2) == ("slow", "contains")
    assert [c[0] for c in calls] == ["contains", "contains"]


def test_cells_get_the_same_answers_as_plain_python(run):
    src = ("class P:\n    def __init__(self):\n        self.v = [3, 4]\n"
           "def mk():\n    return P()\n"
           "print(7 * 6, 2**31 * 3, 1.5 * 4, 'ab' * 3, [0] * 2, 17 % 5, 7.5 % 2, '%3d|' % 5, "
           "mk().v, mk().v.copy(), (3).real)\n"
           "s = '%s-%s'\ns %= (1, 2)\nprint(s)\n"
           "print(1 in [1], 2 not in {2: 0}, 'a' in 'cat', 3 in map(abs, [-3]), 5 not in iter([1]))\n")
    r = run(src)
    assert r.ok, r
    assert r.stdout == "42 6442450944 6.0 ababab [0, 0] 2 1.5   5| [3, 4] [3, 4] 3\n1-2\nTrue False True True True\n"


@pytest.mark.skipif(gates._fastgates is None, reason="the C extension is not built")
def test_cached_gates_take_only_cache_hits_and_call_the_python_steps_for_the_rest():
    import math
    from types import MethodType

    calls = []
    allow, pure = object(), object()

    class Meta(type):
        def __hash__(cls):
            calls.append("hash")
            return 1

    class Odd(metaclass=Meta):
        pass

    def spy(kind, answer):
        def fn(*a):
            calls.append((kind,) + tuple(x if type(x) in (str, int) else type(x).__name__ for x in a))
            return answer
        return fn
    own = Own()
    own.m = MethodType(len, "ab")
    own.obj = Foreign()
    cache = {(math, "pi"): pure, (Own, "x"): allow, (Own, "m"): allow, (Own, "obj"): allow,
             (Own, "sub"): lambda o: ("substituted", type(o).__name__)}
    cache[("w", Own, "x")] = True
    cache[("w", Own, "y")] = object()   # (Gates.write's other marks are Python's)
    cached = gates._fastgates.CachedGates(cache, allow, pure, gates._PLAIN_TYPES, spy("slow", "S"),
                                          spy("allowed", "A"), spy("check", "C"), spy("write", "W"))
    get, write = cached.getattr, cached.write
    assert get(math, "pi") == math.pi and get(own, "x") == 1 and calls == []
    assert get(own, "sub") == ("substituted", "Own") and calls == []
    assert get(own, "m") == "A" and calls == [("allowed", "Own", "m", "method")]   # its function is checked
    calls.clear()
    assert get(own, "obj") == "C" and calls == [("check", "Foreign", "Own", "obj")]
    calls.clear()
    assert get(own, "y") == "S" and calls == [("slow", "Own", "y")]   # a miss
    calls.clear()
    assert get(Odd(), "x") == "S" and calls == [("slow", "Odd", "x")]   # the metaclass's hash is not run here
    calls.clear()
    with pytest.raises(AttributeError):
        get(Own.__new__(Own), "x")   # an allowed read of a missing attribute
    assert calls == []
    with pytest.raises(TypeError):
        get(own)
    assert write(own, "x") is own and calls == []
    assert write(own, "y") == "W" and write(own, "z") == "W" and write(Odd(), "x") == "W"
    assert calls == [("write", "Own", "y"), ("write", "Own", "z"), ("write", "Odd", "x")]


def test_cells_get_the_same_reads_and_writes_through_the_cached_gates(run):
    src = ("import math, random\n"
           "class E(Exception):\n    def __init__(self, c):\n        super().__init__(f'code {c}')\n"
           "        self.c = c\n"
           "r = random.Random(1)\n"
           "out = []\n"
           "for i in range(3):\n"
           "    out.append((math.pi, math.sqrt(4.0), r.random() < 1, [1, 2].count(1), E(i).c, E(i).args))\n"
           "    try:\n        raise E(i)\n    except E as e:\n        out.append(e.c)\n"
           "print(out[-1], len(out), out[0][:4])\n"
           "try:\n    math.nope\nexcept AttributeError as e:\n    print('missing', type(e).__name__)\n")
    for _ in range(2):   # the second run reads from the cache
        r = run(src)
        assert r.ok, r
        assert r.stdout == "2 6 (3.141592653589793, 2.0, True, 1)\nmissing AttributeError\n"


def test_cells_get_the_same_write_decisions_through_the_cached_gates(run):
    src = ("import math, random, textwrap\nclass E(Exception):\n    pass\nout = []\n"
           "for i in range(2):\n"
           "    x = E(); x.a = i; out.append(x.a)\n"
           "    try:\n        math.pi = 3\n    except Exception as err:\n        out.append(type(err).__name__)\n"
           "    r = random.Random(1)\n"
           "    try:\n        r.random = len\n    except Exception as err:\n        out.append(type(err).__name__)\n"
           "    w = textwrap.TextWrapper(); w.width = 5; out.append(w.width)\n"
           "print(out)\n")
    for _ in range(2):   # the second run writes through the cache
        r = run(src)
        assert r.ok, r
        assert r.stdout == "[0, 'AttributeDenied', 'AttributeDenied', 5, 1, 'AttributeDenied', 'AttributeDenied', 5]\n"


def test_a_policy_change_leaves_no_cached_decision_behind(tmp_path):
    """The cache the C hit path reads is the gates' own dict, cleared in place when the policy changes: a read
    allowed and cached under one policy is decided again under the next (here, a policy that denies it)."""
    import dataclasses

    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS

    loose = PRESETS["data-science"]
    tight = dataclasses.replace(loose, name="tight", object_deny=loose.object_deny + ("numpy.sum", "numpy.ndarray.sum"))
    engine = Engine(loose, workdir=str(tmp_path))
    cell = "import numpy as np\na = np.zeros(3)\nfor _ in range(3):\n    f = np.sum\n    g = a.sum\n"
    assert engine.run_cell(cell, emit=lambda e: None)["status"] == "ok"
    done = engine.run_cell(cell, emit=lambda e: None, policy=tight)
    assert done["status"] == "error" and done["error"]["ename"] == "AttributeDenied", done["error"]
    assert engine.run_cell(cell, emit=lambda e: None, policy=loose)["status"] == "ok"



def test_small_powers_take_the_fast_path_only_where_nothing_can_grow(fast):
    """a ** k (k a small int constant, the rewriter's __st_pow__): floats, complex numbers and small ints in the fast
    path; anything else, an int at the size cap above all, goes to the gate (mutation run 2: x ** 4 of an int at
    the cap had 32,000,001 bits)."""
    calls = fast[3]
    pow_ = SMALL_POWER[0]
    assert (pow_(3, 2), pow_(1.5, 2), pow_(2j, 2), pow_(-7, 3), pow_(2**30, 4)) == (9, 2.25, -4 + 0j, -343, 2**120)
    assert calls == []
    for a in (2**31, 1 << 8_000_000, True, [1], "s"):
        assert pow_(a, 2) == ("slow", "pow")
    assert [c[0] for c in calls] == ["pow"] * 5
