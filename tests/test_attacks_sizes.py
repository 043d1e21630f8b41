"""Must-block: results whose size an argument chooses, built in one C call (the consumer sink, second
half: test_attacks_consumers.py holds the iterables).

'%10000000000d' % 1, s * n, s.ljust(n), s.replace('a', s), ''.join(parts), arr.tolist(), decimal
arithmetic at a precision of 10**8, np.ones(3 * 10**9): each builds its result in C where the time limit
cannot interrupt it and no memory sample can see it until it is done. The size is estimated (or the
allocation refused by numpy's bounded allocator) before C starts, against the cell's own memory limit,
however the cell reaches the operation: by name, as a value, from the class, through a subclass or a
dunder.
"""
from __future__ import annotations

import dataclasses
import subprocess

import pytest

from childcell import GIVE_UP, TIGHT, ended_near_its_limit, run_cell_in_child
from conftest import Sandbox
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS


# --- Issue 10, finding 4 (second half): results built in one C call, reached from the class or by join ------
# ''.join([s] * N) and b''.join built the whole result in one C call with no size check (3 GB under
# --memory 512); np.ndarray.tolist(a) read from the class skipped the instance-only stand-in.

SMALL_MEMORY = {"timeout": 60.0, "ticks": 10**8, "memory_mb": 128}


def _run_limited(source, limits):
    return run_cell_in_child(source, limits=limits, rlimits={"RLIMIT_AS": 6 << 30}, timeout=120,
                             report=("status", "ename"))


SIZED_RESULTS = {
    "str_join": "s = 'x' * 1000\nparts = [s] * 10**6\nr = ''.join(parts)",
    "bytes_join": "s = b'x' * 1000\nparts = [s] * 10**6\nr = b''.join(parts)",
    "bytearray_join": "s = b'x' * 1000\nparts = [s] * 10**6\nr = bytearray().join(parts)",
    "str_join_from_the_class": "s = 'x' * 1000\nparts = [s] * 10**6\nr = str.join('', parts)",
    "str_join_separator": "parts = ['a'] * 10**6\nr = ('y' * 1000).join(parts)",
    "str_join_generator": "s = 'x' * 1000\nr = ''.join(s for _ in range(10**6))",
    "tolist_from_the_class": "import numpy as np\na = np.zeros(10**7)\nr = np.ndarray.tolist(a)",
    "tolist_of_a_scalar_class": "import numpy as np\na = np.zeros(10**7)\nr = type(a).tolist(a)",
}


@pytest.mark.parametrize("variant", sorted(SIZED_RESULTS))
def test_results_built_in_one_c_call_are_size_checked(variant):
    result = _run_limited(SIZED_RESULTS[variant], SMALL_MEMORY)
    assert result.get("ename") == "SizeDenied", f"{variant}: {result}"


# ====================================================================================================
# From review round 3: state that leaks from a cell into the host
# thread, silent denials, private library state reached by shadowing the name in a sandbox subclass, C-level
# arithmetic past the limit.
# ====================================================================================================

@pytest.mark.parametrize("src", [
    "decimal.getcontext().prec = 10**8\nx = decimal.Decimal(2).sqrt()",
    "c = decimal.Context(prec=10**8)\nx = c.sqrt(decimal.Decimal(2))",
    "c = decimal.getcontext().copy()\nc.prec = 10**8\nx = c.sqrt(decimal.Decimal(2))",
    "with decimal.localcontext(prec=10**8):\n    x = decimal.Decimal(2).sqrt()",
    "setattr(decimal.getcontext(), 'prec', 10**8)\nx = decimal.Decimal(2).sqrt()",
    "decimal.getcontext().__init__(prec=10**8)\nx = decimal.Decimal(2).sqrt()",
    "c = type(decimal.getcontext())(prec=10**8)\nx = c.sqrt(decimal.Decimal(2))",
    "c = decimal.getcontext().__class__(prec=10**8)\nx = c.sqrt(decimal.Decimal(2))",
    "class C(decimal.Context):\n    pass\nx = C(prec=10**8).sqrt(decimal.Decimal(2))",
    "class I:\n    n = 0\n    def __index__(self):\n        I.n += 1\n        return 5 if I.n == 1 else 10**8\n"
    "decimal.getcontext().prec = I()\nx = decimal.Decimal(2).sqrt()",
    "d = decimal.DefaultContext\nd.prec = 10**8",
    "decimal.getcontext().prec = 4000\nc = decimal.Context(prec=5000)\nx = decimal.Decimal(2).sqrt(c)\n"
    "decimal.getcontext().prec = 10**6",
])
def test_decimal_huge_precision_is_limited(src):
    src = "import decimal\n" + src + "\n"
    try:
        result = run_cell_in_child(src, "strict", limits=TIGHT, rlimits={"RLIMIT_AS": 4 << 30}, timeout=GIVE_UP,
                                   report=("status", "ename", "elapsed_ms"))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the cell ran past its limit (no report after {GIVE_UP:g} s)")
    # refused (a size or limit error, or no way to the constructor at all), or held to a small precision
    assert "crashed" not in result, result
    assert result["ename"] in (None, "SizeDenied", "TimeLimitExceeded", "TickLimitExceeded", "AttributeDenied",
                               "BuiltinDenied"), result
    assert result["status"] == "error" or "I()" in src, result
    assert ended_near_its_limit(result), result   # not after a square root to 10**8 digits


# ====================================================================================================
# From review round 5: variants of the in-progress fixes (printf widths
# that are not literals).
# ====================================================================================================

def _run(src):
    return run_cell_in_child(src, limits=TIGHT, timeout=20,
                             rlimits={"RLIMIT_AS": 4 << 30})   # a failed check costs a MemoryError, not the host


@pytest.mark.parametrize("src", [
    "f = '%10000000000d'\nx = f % 1",
    "f = '%' + '10000000000d'\nx = f % (1,)",
    "x = '%10000000000d'.__mod__(1)",
    "import operator\nx = operator.mod('%10000000000d', 1)",
    "import operator\nx = operator.imod('%10000000000d', 1)",
    "x = b'%10000000000d'.__mod__(1)",
    "x = bytearray(b'%10000000000d') % 1",
    "s = '%10000000000d'\ns %= 1",
    "class S(str):\n    pass\nx = S('%10000000000d') % 1",
    "def f(a, b):\n    return a % b\nx = f('%10000000000d', 1)",
    "x = str.__mod__('%10000000000d', 1)",
    "x = '%*d' % (10**10, 1)",
])
def test_percent_width_not_literal(src):
    result = _run(src)
    # refused before C allocates: a size refusal, or no way to reach str.__mod__ at all
    assert result["ename"] in ("SizeDenied", "AttributeDenied"), result


# ====================================================================================================
# From review round 6: C consumers of huge iterators that are not among
# the sized builtins.
# ====================================================================================================

NUMPY_HOST_ALLOCATOR = """
    import numpy as np
    def probe_host(report):   # after the cell: the host's own numpy allocates as before
        from numpy._core.multiarray import get_handler_name
        report["host_allocator"] = get_handler_name()
        report["host_big_array"] = np.ones(300 * 2**20, dtype=np.uint8).nbytes == 300 * 2**20
"""


@pytest.mark.parametrize("src", [
    "import numpy as np\nx = np.ones(3 * 10**9, dtype=np.uint8)",
    "import numpy as np\nx = np.full((60000, 60000), 1.5)",
    "import numpy as np\nx = np.arange(10**9)",
    "import numpy as np\nx = np.random.default_rng(0).random(10**9)",
    "import numpy as np\nx = np.tile(np.ones(1000), 10**6)",
    "import pandas as pd\nx = pd.Series(range(10**9))",
    "import numpy as np\nx = np.ones(10**6)\nwhile True:\n    x = np.concatenate([x, x])",
])
def test_numpy_allocation_is_size_checked(src):
    if gates_numpyguard() is None:
        pytest.skip("sandbox_kernel._numpyguard is not compiled: the memory sampler alone bounds numpy")
    # a time limit the refusal comes long before (importing pandas alone takes seconds on a loaded machine)
    try:
        result = run_cell_in_child(src, limits={**TIGHT, "timeout": 30.0}, rlimits={"RLIMIT_AS": 4 << 30},
                                   timeout=GIVE_UP, report=("status", "ename", "evalue"), probe=NUMPY_HOST_ALLOCATOR)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the cell ran past its limit (no report after {GIVE_UP:g} s)")
    assert result["ename"] in ("SizeDenied", "MemoryLimitExceeded"), result
    # refused before the array was made: by the size gate, or numpy's bounded allocator (not the sampler)
    assert result["ename"] == "SizeDenied" or "was refused before it was made" in result["evalue"], result
    assert result["host_allocator"] == "default_allocator" and result["host_big_array"], result


def gates_numpyguard():
    from sandbox_kernel import limits
    return limits._numpyguard


def test_numpy_allocations_within_the_limit_still_work(run):
    r = run("import numpy as np, pandas as pd\nx = np.ones((1000, 1000))\ny = x @ x\n"
            "df = pd.DataFrame(np.random.default_rng(1).random((10000, 5)))\n"
            "print(y[0, 0], df.shape, len(np.concatenate([x, x])))", memory_mb=256)
    assert r.ok and r.stdout == "1000.0 (10000, 5) 2000\n", r


# ====================================================================================================
# From review round 7: classes with a guard reached through type()
# instead of their module, and C-level work that the gates bound (decimal precision, %-formats) reached by the
# routes around them. Each attack that could hang runs in a child process under a hard timeout.
# ====================================================================================================

def test_decimal_at_an_ordinary_precision_still_works(run):
    r = run("import decimal\n"
            "decimal.getcontext().prec = 50\n"
            "a = decimal.Decimal(1) / decimal.Decimal(7)\n"
            "with decimal.localcontext() as c:\n    c.prec = 10\n    b = decimal.Decimal(1) / decimal.Decimal(7)\n"
            "ctx = decimal.Context(prec=5, rounding=decimal.ROUND_DOWN)\n"
            "print(len(str(a)), b, ctx.divide(decimal.Decimal(2), decimal.Decimal(3)),"
            " isinstance(decimal.getcontext(), decimal.Context), isinstance(ctx, decimal.Context))\n"
            "decimal.setcontext(ctx)\nprint(decimal.getcontext().prec)\n")
    assert r.ok, r
    assert r.stdout == "52 0.1428571429 0.66666 True True\n5\n", r


def test_decimal_precision_refusal_names_the_limit_and_line(run):
    r = run("import decimal\nc = decimal.getcontext()\nc.prec = 10**9\n")
    assert not r.ok and r.denied("limit", line=3), r
    assert "5,000 digits" in r.everything, r


# ====================================================================================================
# From review round 8: against the mechanisms of the second session
# (the C fast paths, the per-function own-instance flag, the stand-ins for numpy arrays, decimal contexts,
# deque and C iterators, the bounded numpy allocator, and the scrubbing of host paths from output).
# ====================================================================================================

# --- 4. decimal precision: super() past the stand-in's __init__ ---------------------------------------------

@pytest.mark.parametrize("src", [
    "import decimal\nctx = decimal.Context()\ntry:\n    super(decimal.Context, ctx).__init__(prec=10**8)\n"
    "except Exception:\n    pass\nok_made = ctx.prec > 5000",
    "import decimal\nclass C(decimal.Context):\n    def __init__(self):\n"
    "        super(decimal.Context, self).__init__(prec=10**8)\n"
    "try:\n    ok_made = C().prec > 5000\nexcept Exception:\n    ok_made = False",
])
def test_decimal_precision_cannot_be_raised_through_super(sandbox, src):
    r = sandbox.run(src)
    assert sandbox.ns.get("ok_made") is False or "ok_made" not in sandbox.ns, r


# --- 6. the size gates decide on exact types ----------------------------------------------------------------

@pytest.fixture
def small(tmp_path):
    """data-science with a 32 MB memory limit: the size gates refuse one step building more than 32 MB
    (and paddings/widths over 8 M characters), so the attacks stay small in absolute terms."""
    preset = PRESETS["data-science"]
    policy = dataclasses.replace(preset, limits=dataclasses.replace(preset.limits, memory_mb=32))
    box = Sandbox.__new__(Sandbox)
    workdir = tmp_path / "work-small"
    workdir.mkdir()
    box.workdir, box.policy = workdir, policy
    box.engine = Engine(policy, workdir=str(workdir))
    return box


@pytest.mark.parametrize("src", [
    "class I(int):\n    pass\nx = 'a' * I(5 * 10**7)",
    "class N:\n    def __index__(self):\n        return 5 * 10**7\nx = 'a' * N()",
    "import numpy as np\nx = [0] * np.int64(10**7)",
    "class S(str):\n    pass\nx = S('a') * (5 * 10**7)",
    "class L(list):\n    pass\nx = L([0]) * 10**7",
    "class S(str):\n    pass\ns = S('a')\ns *= 5 * 10**7\nx = s",
    "import numpy as np\nx = np.str_('a') * (5 * 10**7)",
    "import array\nx = array.array('b', [0]) * (5 * 10**7)",
    "import collections\nx = collections.deque([0]) * 10**7",
    "class I(int):\n    pass\nx = I(1) << I(5 * 10**8)",
    "x = str.ljust('a', 5 * 10**7)",
    "x = bytes.center(b'a', 5 * 10**7)",
    "x = (1).__format__('50000000d')",
    "x = 'a'.__format__('>50000000')",
    "x = '%(a(b))50000000s' % {'a(b)': 'x'}",
    "f = b'%(a(b))50000000s'\nx = f % {b'a(b)': b'x'}",
])
def test_size_gates_see_through_subclasses_and_dunders(small, src):
    r = small.run(src)
    assert r.error_name == "SizeDenied", r
    assert "x" not in small.ns


def test_size_gates_refuse_the_exact_types(small):
    for src in ("x = 'a' * (5 * 10**7)", "x = 'a'.ljust(5 * 10**7)", "x = format(1, '50000000d')",
                "x = '%(a)50000000s' % {'a': 'x'}", "x = 1 << (5 * 10**8)"):
        r = small.run(src)
        assert r.error_name == "SizeDenied", (src, r)


@pytest.mark.parametrize("src", [
    "s = 'a' * 10**4\nx = s.replace('a', s)",
    "s = 'a' * 10**4\nx = s.translate({97: s})",
])
def test_string_amplification_is_size_checked(small, src):
    r = small.run(src)
    assert r.error_name == "SizeDenied", r


# --- 8. the bounded numpy allocator counts resident memory, not what it handed out ----------------------------

# The peak resident size of the child's own address space (VmHWM; ru_maxrss would include what the
# forking parent had resident before exec).
MAXRSS_PROBE = """
def probe_host(report):
    with open("/proc/self/status") as status:
        peak = [line.split()[1] for line in status if line.startswith("VmHWM:")]
    report["maxrss_mb"] = int(peak[0]) // 1024 if peak else 0
"""


def test_lazily_zeroed_arrays_count_against_the_limit():
    src = ("import numpy as np\na = [np.zeros(40 * 2**20, dtype=np.uint8) for _ in range(12)]\n"
           "x = list(map(np.ndarray.fill, a, [1] * 12))")
    result = run_cell_in_child(src, limits={"timeout": 5.0, "ticks": 10**7, "memory_mb": 64},
                               rlimits={"RLIMIT_AS": 4 << 30}, timeout=30, report=("status", "ename"),
                               probe=MAXRSS_PROBE)
    assert result["status"] == "error", result
    assert result["maxrss_mb"] < 200, f"the cell committed {result['maxrss_mb']} MB under a 64 MB limit ({result})"


def test_objects_made_by_numpy_count_against_the_limit():
    src = "import numpy as np\nx = np.arange(6 * 10**6).tolist()"
    result = run_cell_in_child(src, limits={"timeout": 5.0, "ticks": 10**7, "memory_mb": 64},
                               rlimits={"RLIMIT_AS": 4 << 30}, timeout=30, report=("status", "ename"),
                               probe=MAXRSS_PROBE)
    assert result["status"] == "error", result
    assert result["maxrss_mb"] < 200, f"the cell committed {result['maxrss_mb']} MB under a 64 MB limit ({result})"


def test_plain_numpy_allocation_is_still_refused():
    result = run_cell_in_child("import numpy as np\nx = np.ones(10**9, dtype=np.uint8)",
                               limits={"timeout": 5.0, "ticks": 10**7, "memory_mb": 64},
                               rlimits={"RLIMIT_AS": 4 << 30}, timeout=30, report=("status", "ename"),
                               probe=MAXRSS_PROBE)
    assert result["ename"] == "MemoryLimitExceeded" and result["maxrss_mb"] < 200, result


def test_math_prod_start_is_size_checked(small):
    r = small.run("import math\nx = math.prod([5 * 10**7], start='a')")
    assert r.error_name == "SizeDenied", r
    assert "x" not in small.ns


def test_sized_operators_keep_python_semantics(run):
    r = run("import numpy as np, collections\nclass I(int):\n    pass\nclass N:\n    def __index__(self):\n        return 2\n"
            "print(np.int64(3) * [1], [1] * np.int64(2), I(2) * 'x', N() * 'y', 'z' * N(), np.array([1, 2]) * [3],"
            " collections.deque([1]) * 2, I(1) << I(3), '%(a(b))3s|' % {'a(b)': 'x'}, '%%d %d' % 5)")
    assert r.ok, r
    assert r.stdout == "[1, 1, 1] [1, 1] xx yy zz [3 6] deque([1, 1]) 8   x| %d 5\n", r


def test_replace_and_translate_keep_their_results(run):
    r = run("s = 'a-b-c'\nprint(s.replace('-', '--'), s.replace('-', '', 1), str.replace(s, 'a', 'A'), "
            "b'xy'.replace(b'x', b'zz'), s.translate({45: '+'}), s.translate(str.maketrans('abc', 'xyz')))")
    assert r.ok and r.stdout == "a--b--c ab-c A-b-c b'zzy' a+b+c x-y-z\n", r


@pytest.mark.parametrize("src", [
    "class S(str):\n    def __len__(self):\n        return 1\nx = S('a' * 10**4) * (5 * 10**3)",
    "class S(str):\n    def __len__(self):\n        return 1\n    def count(self, x):\n        return 0\n"
    "x = S('a' * 10**4).replace('a', 'a' * 10**4)",
    "class I(int):\n    pass\nx = 'a'.ljust(I(5 * 10**7))",
    "class N:\n    def __index__(self):\n        return 5 * 10**7\nx = 'a'.rjust(N())",
])
def test_size_gates_do_not_ask_a_subclass_its_length(small, src):
    """A str subclass's __len__ or count could answer anything: sizes are measured as the builtin does."""
    r = small.run(src)
    assert r.error_name == "SizeDenied", r
    assert "x" not in small.ns


# ====================================================================================================================
# Sink: C consumers of a size.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 3 (docs/reviews.md, "Review 3").
@pytest.mark.parametrize("precision", ["-5", "1000000000"])
def test_timeit_precision_extremes_print_a_bounded_line(run, precision):
    r = run(f"%timeit -p {precision} -n 1 -r 1 x = 1\n")
    assert r.ok, r
    assert len(r.stdout) < 500, r


# From review 4 (docs/reviews.md, "Review 4").
@pytest.mark.parametrize("cell", ["s = '\\t'.expandtabs(3000000000)", "s = 'ab'.zfill(3000000000)",
                                  "s = bytearray(3000000000)", "s = 'a'.ljust(3000000000)",
                                  "s = '{:>3000000000}'.format(1)"])
def test_size_gates_hold(sandbox, cell):
    r = sandbox.run(cell)
    assert r.error_name == "SizeDenied", r


# From review 5 (docs/reviews.md, "Review 5").
HELD_SIZES = {
    "bytes_expandtabs": "x = (b'\\t' * 100).expandtabs(300_000_000)\n",
    "bytearray_expandtabs": "x = bytearray(b'\\t' * 100).expandtabs(300_000_000)\n",
    "textwrap_indent": "import textwrap\nx = textwrap.indent('a\\n' * 10, 'b' * 300_000_000)\n",
    "pandas_float_format": "import pandas as pd\nx = pd.Series([1.5]).to_string(float_format='{:>3000000000}'.format)\n",
}


@pytest.mark.parametrize("route", sorted(HELD_SIZES))
def test_padding_routes_that_are_estimated(route):
    result = run_cell_in_child(HELD_SIZES[route], limits={"timeout": 30.0, "ticks": 10**8, "memory_mb": 256},
                               rlimits={"RLIMIT_AS": 4 << 30}, report=("status", "ename"), timeout=180)
    assert result.get("ename") == "SizeDenied", result


# --- N5-10: the repetition gate counts a str's characters as bytes ------------------------------------------------
# gates._check_repeat estimates seq * n as len(seq) * n * 1 for str, whatever the string's kind: a string with
# one character past U+FFFF is stored at 4 bytes per character. '\U0001F600' * 200_000_000 is estimated at
# 200 MB and passes a 256 MB policy; C allocates 800 MB in one step (the sampler reports MemoryLimitExceeded
# afterwards). Under the default 2048 MB policy, '\U0001F600' * 2_000_000_000 passes and asks for 8 GB.
# (The padding, join, replace and translate gates count 4 bytes a character: held.)

WIDE_REPEATS = {
    "str_times_n": "x = '\\U0001F600' * 200_000_000\n",
    "n_times_str": "x = 200_000_000 * '\\U0001F600'\n",
    "in_place": "x = '\\U0001F600'\nx *= 200_000_000\n",
    "two_byte_kind": "x = '\\u20ac' * 200_000_000\n",
}


# FINDING N5-10, fixed: the repetition gate counts the bytes of the str's kind (gates._char_width).
@pytest.mark.parametrize("route", sorted(WIDE_REPEATS))
def test_repeating_a_wide_string_is_estimated_in_bytes(route):
    result = run_cell_in_child(WIDE_REPEATS[route], limits={"timeout": 10.0, "memory_mb": 256},
                               rlimits={"RLIMIT_AS": 6 << 30}, report=("status", "ename"), timeout=180)
    assert result.get("ename") == "SizeDenied", result


@pytest.mark.parametrize("cell", ["x = 'a'.center(250_000_000, '\\U0001F600')\n", "x = '\\U0001F600'.zfill(250_000_000)\n",
                                  "x = ('\\U0001F600' + '\\t').expandtabs(250_000_000)\n",
                                  "x = ('\\U0001F600' * 1000).join(['a'] * 250_000)\n",
                                  "x = ('a' * 1000).replace('a', '\\U0001F600' * 250_000)\n"])
def test_wide_padding_and_joins_are_estimated_in_bytes(cell):
    result = run_cell_in_child(cell, limits={"timeout": 10.0, "memory_mb": 512}, rlimits={"RLIMIT_AS": 6 << 30},
                               report=("status", "ename"), timeout=180)
    assert result.get("ename") == "SizeDenied", result


# From review 9 (docs/reviews.md): the decimal bound through a cell subclass's super().__init__ (held).
def test_decimal_precision_bound_holds_through_subclass_super_init():
    cell = ("import decimal\nclass C(decimal.Context):\n    def widen(self):\n"
            "        super().__init__(prec=10**8)\nC().widen()\n")
    result = run_cell_in_child(cell, report=("status", "ename"), hard_exit=True, timeout=120)
    assert result["ename"] == "SizeDenied", result
