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
    mul, mod, ownattr, contains = gates.fast_gates(slow("mul"), slow("mod"), slow("getattr"), {Own},
                                                   slow("contains"), use_c=request.param == "c")
    return mul, mod, ownattr, calls, contains


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
        gates._fastgates.FastGates(1, 2, 3, set(), len)
    with pytest.raises(TypeError):
        gates._fastgates.FastGates(len, len, len, [Own], len)
    with pytest.raises(TypeError):
        gates._fastgates.FastGates(len, len, len, {Own}, 4)


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
