"""Must-block, eighth round: against the mechanisms of the second session (the C fast paths, the
per-function own-instance flag, the stand-ins for numpy arrays, decimal contexts, deque and C iterators,
the bounded numpy allocator, and the scrubbing of host paths from output).

Every test performs the real attack and asserts that it failed and that nothing happened. Tests of
findings that are not fixed are strict xfails whose reason says how the bypass works. Attacks that can
crash the process, corrupt memory or fill the machine's memory run in a child process.
"""
from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing

import pytest

from childcell import run_cell_in_child
from conftest import Sandbox
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
from test_attacks_memory import FAKEOBJ_EXPLOIT


# --- 1. the per-function own-instance flag: a mangled parameter rebound by its mangled name ---------------

MANGLED_ESCAPE = """\
import collections
class K:
    def go(self, __m, start, target):
        _K__m = start              # the same local as the parameter __m (Python mangles it to _K__m)
        _K__m = __m._sys           # read raw: the flag __st_own___m__ was computed for an O()
        mods = __m.modules
        _K__m = mods["sandbox_kernel.confine"]
        _K__m = __m._FS
        __m.set(None)              # the audit hook and the open() guards stand down
        _K__m = mods["os"]
        fd = __m.open(target, __m.O_WRONLY | __m.O_CREAT, 0o600)
        __m.write(fd, b"PWNED")
        __m.close(fd)
        return True
class O:
    pass
escaped = K().go(O(), collections, {target!r})
"""


def test_mangled_parameter_cannot_be_rebound_past_the_entry_flag(strict, outside):
    target = outside / "pwned.txt"
    r = strict.run(MANGLED_ESCAPE.format(target=str(target)))
    assert not target.exists(), "a file was written outside the working directory"
    assert not strict.ns.get("escaped"), r
    assert not r.ok and r.denials, r


@pytest.mark.parametrize("rebind", [
    "        _K__m = other\n",
    "        def swap():\n            nonlocal _K__m\n            _K__m = other\n        swap()\n",
])
def test_mangled_parameter_does_not_read_library_privates_raw(sandbox, rebind):
    r = sandbox.run("import pandas as pd\n"
                    "class K:\n"
                    "    def go(self, __m, other):\n" + rebind +
                    "        return __m._mgr\n"
                    "class O:\n    pass\n"
                    "mgr = K().go(O(), pd.DataFrame({'a': [1]}))\n")
    assert "mgr" not in sandbox.ns, type(sandbox.ns.get("mgr"))
    assert not r.ok and r.denied("attribute"), r


def test_unmangled_parameters_keep_their_entry_flag_honest(sandbox):
    """The same shape without mangling is rebinding the rewriter sees: the read goes to the gate."""
    r = sandbox.run("import pandas as pd\n"
                    "class K:\n"
                    "    def go(self, m, other):\n"
                    "        m = other\n"
                    "        return m._mgr\n"
                    "class O:\n    pass\n"
                    "mgr = K().go(O(), pd.DataFrame({'a': [1]}))\n")
    assert "mgr" not in sandbox.ns
    assert not r.ok and r.denied("attribute"), r


# --- 2. numpy's raw array protocol through a cell class's attribute hooks ---------------------------------

RAW_INTERFACE = """\
import numpy as np
b = b"immutable bytes!"
def interface(name):
    if name == "__array_interface__":
        return {{"data": (id(b) + 32, False), "shape": (16,), "typestr": "|u1", "version": 3}}
    raise AttributeError(name)
{cls}
try:
    a = np.asarray(X())
    a[0:9] = np.frombuffer(b"rewritten", dtype=np.uint8)
except Exception:
    pass
ok_made = b[:9] == b"rewritten"
"""


@pytest.mark.parametrize("cls", [
    "class X:\n    def __getattr__(self, name):\n        return interface(name)",
    "class X:\n    def __getattribute__(self, name):\n        return interface(name)",
    "class X:\n    pass\nX.__getattr__ = lambda self, name: interface(name)",
])
def test_attribute_hooks_do_not_answer_numpys_raw_protocols(cls):
    result = run_cell_in_child(RAW_INTERFACE.format(cls=cls), report=("status", "ename"), ns=("ok_made",),
                               hard_exit=True, timeout=30)
    assert result.get("ok_made") is False, result


# --- 3. stand-ins: the raw class through a library function's result --------------------------------------

@pytest.mark.parametrize("raw", [
    # numpy < 2.5: NDArray is a GenericAlias over the raw class (2.5 makes it a TypeAliasType: None)
    "typing.get_origin(np.typing.NDArray)",
    "typing.get_origin(np.ndarray[tuple[int], np.dtype[np.float64]])",
    "np.ndarray[tuple[int], np.dtype[np.float64]]",
])
def test_raw_ndarray_through_typing_get_origin(tmp_path, raw):
    import numpy as np
    if "NDArray" in raw and typing.get_origin(np.typing.NDArray) is None:
        pytest.skip("this numpy's NDArray is a type alias, not a generic alias over ndarray")
    marker = tmp_path / "fakeobj.txt"
    src = FAKEOBJ_EXPLOIT.format(constructor=f"{raw}((1,), dtype=object, buffer=buf)", marker=marker)
    src = src.replace("import numpy as np, json", "import numpy as np, json, typing")
    result = run_cell_in_child(src, report=("status", "ename", "denials"), hard_exit=True, timeout=30)
    assert not marker.exists(), f"os.system ran ({result})"
    assert result.get("status") == "error" and result.get("denials"), result


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


# --- 5. the sized builtins and deque's charge, reached as values or through __init__ ----------------------

@pytest.mark.parametrize("src", [
    "x = next(map(list, [range(10**7)]))",
])
def test_c_consumers_are_charged_however_reached(strict, src):
    r = strict.run(src, ticks=10**6)
    assert r.error_name in ("TickLimitExceeded", "SizeDenied"), r
    assert "x" not in strict.ns


@pytest.mark.parametrize("src", [
    "x = next(map(sum, [range(10**7)]))",
    "x = sorted([range(10**7)], key=sum)",
    "x = max([range(10**7)], key=any)",
    "import collections\nd = collections.deque()\nd.__init__(range(10**7), 0)\nx = d",
    "import collections\nd = collections.deque()\ncollections.deque.__init__(d, range(10**7), 0)\nx = d",
    "import collections\nclass Q(collections.deque):\n    def __init__(self, it):\n        super().__init__(it, 0)\n"
    "x = Q(range(10**7))",
])
def test_c_consumers_passed_as_values_are_charged(strict, src):
    r = strict.run(src, ticks=10**6)
    assert r.error_name in ("TickLimitExceeded", "SizeDenied"), r
    assert "x" not in strict.ns


def test_charging_builtins_and_deque_init_keep_their_results(run):
    r = run("import collections\nclass Q(collections.deque):\n    def __init__(self, it):\n        super().__init__(it, 3)\n"
            "d = collections.deque()\nd.__init__([1, 2])\n"
            "print(list(map(sum, [[1, 2], [3]])), sorted([[3], [1, 2]], key=sum), max([1, 5, 2]), Q(range(9)), d,"
            " sum.__name__, any([0, 1]), min(3, 1))")
    assert r.ok and r.stdout == "[3, 3] [[3], [1, 2]] 5 Q([6, 7, 8], maxlen=3) deque([1, 2]) sum True 1\n", r


@pytest.mark.parametrize("src", [
    "import typing\nx = typing.get_origin(typing.Deque[int])(range(10**7), maxlen=0)",
    "import typing\nx = typing.Deque(range(10**7), maxlen=0)",
])
def test_typing_hands_out_the_guarded_deque(strict, src):
    r = strict.run(src, ticks=10**6)
    assert r.error_name in ("TickLimitExceeded", "SizeDenied"), r
    assert "x" not in strict.ns


def test_c_consumers_by_name_are_charged(strict):
    r = strict.run("import collections\nx = collections.deque(range(10**7), maxlen=0)", ticks=10**6)
    assert r.error_name == "TickLimitExceeded", r
    r = strict.run("x = sum(range(10**7))", ticks=10**6)
    assert r.error_name == "TickLimitExceeded", r


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


# --- 7. C iterator nesting through callables and unlisted C iterators ----------------------------------------

@pytest.mark.parametrize("policy, src", [
    ("strict", "x = iter([1])\nfor i in range(300000):\n    x = map(list, [x])\nn = next(x)\n"),
    ("data-science", "import csv\nx = iter(['a'])\nfor i in range(300000):\n    x = csv.reader(x)\nn = next(x)\n"),
])
def test_c_iterator_nesting_cannot_crash_the_process(policy, src):
    try:
        result = run_cell_in_child(src, policy, limits={"timeout": 20.0}, timeout=60,
                                   report=("status", "ename", "returncode"))
    except subprocess.TimeoutExpired:
        pytest.fail("the cell ran past its limit")
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "error" and result["ename"] in ("SizeDenied", "RecursionError"), result


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


# --- 9. host paths in output ------------------------------------------------------------------------------

def _host_prefixes():
    return {p for p in (sys.prefix, sys.base_prefix) if p and len(p) > 1}


@pytest.mark.parametrize("src", [
    "import numpy as np\ngetattr(np, '_' + repr(np))",
    "import numpy as np\nclass J:\n    def _repr_json_(self):\n        return {'p': repr(np)}\nJ()",
    "import numpy as np\nresult = {'chart': {'data': [{'type': 'bar', 'x': [repr(np)], 'y': [1]}]}}",
])
def test_host_paths_never_reach_structured_output(run, src):
    r = run(src)
    for prefix in _host_prefixes():
        assert prefix not in r.everything, r


@pytest.mark.xfail(strict=True, reason=(
    "BYPASS R8-9: cells can read host paths as strings (repr(module), np.get_include()); scrubbing "
    "output for the literal path cannot stop the cell printing it reversed or encoded"))
@pytest.mark.parametrize("src", [
    "import numpy as np\nprint(repr(np)[::-1])",
    "import numpy as np\nprint(np.get_include()[::-1])",
])
def test_host_paths_are_not_readable_by_cells(run, src):
    r = run(src)
    for prefix in _host_prefixes():
        assert prefix[::-1] not in r.everything, r


def test_module_repr_is_scrubbed_in_plain_output(run):
    r = run("import numpy as np\nprint(repr(np))\nnp")
    assert r.ok, r
    for prefix in _host_prefixes():
        assert prefix not in r.everything, r


# --- 10. memoryview: documented as never handed out ---------------------------------------------------------

def test_memoryview_class_is_not_reachable_through_containers(sandbox):
    r = sandbox.run("import numpy as np\n"
            "mv = [t for t in np.ScalarType if t.__name__ == 'memoryview'][0]\n"
            "m = mv(bytearray(b'abcd'))\n")
    assert "m" not in sandbox.ns and not r.ok, r


LIBRARY_ATTRIBUTE_DICT = """\
import numpy as np, math, scipy.optimize
class K(scipy.optimize.OptimizeResult):
    pass
iface = {{'data': (id(math.tau) + 16, False), 'shape': (1,), 'typestr': '<f8', 'version': 3}}
o = {make}
try:
    v = np.asarray(o)
    v[0] = 3.0
except Exception:
    pass
ok_made = math.tau == 3.0
"""


@pytest.mark.parametrize("make", ["scipy.optimize.OptimizeResult({'__array_interface__': iface})",
                                  "K({'__array_interface__': iface})",
                                  "K(__array_interface__=iface)"])
def test_library_attribute_dicts_do_not_answer_numpys_raw_protocols(make):
    """scipy's result objects answer attribute reads from their own dict items, and a cell fills them."""
    result = run_cell_in_child(LIBRARY_ATTRIBUTE_DICT.format(make=make), ns=("ok_made",), hard_exit=True,
                               report=("status", "ename"), timeout=60)
    assert "crashed" not in result and not result.get("ok_made"), f"math.tau was overwritten ({result})"


def test_attribute_hooks_still_answer_everything_else(run):
    r = run("import scipy.optimize\nclass Rec:\n    def __init__(self):\n        self.d = {'a': 1}\n"
            "    def __getattr__(self, name):\n        return self.d.get(name, 0)\n"
            "res = scipy.optimize.OptimizeResult(x=2)\nprint(Rec().a, Rec().zz, res.x)\n")
    assert r.ok and r.stdout == "1 0 2\n", r


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
