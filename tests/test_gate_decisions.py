"""Gate decisions, one behaviour each, through the engine (issue 13, item 3: mutation testing).

Each test here pins a decision that a mutant in scripts/mutation_scope.txt changed without any focused
test noticing (docs/mutation.md lists which mutant each test kills), or one that the CI smoke run
(tests/test_mutation_smoke.py) mutates. A test asserts both sides where a flipped condition could
pass one of them: the refusal, and the ordinary use next to it.
"""
from __future__ import annotations

import dataclasses

import pytest
from conftest import CellResult

from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS


def _refused(r, kind, error="") -> bool:
    return not r.ok and r.denied(kind) and (not error or r.error_name == error)


def _run_with(policy, workdir, source) -> CellResult:
    workdir.mkdir(parents=True, exist_ok=True)
    events: list = []
    done = Engine(policy, workdir=str(workdir)).run_cell(source, emit=events.append)
    return CellResult(done, events)


# -- attribute reads (Gates._decide) -------------------------------------------------------------------

def test_private_attribute_of_a_library_object_is_refused(run):
    r = run("from fractions import Fraction\nx = Fraction(1, 2)._numerator")
    assert _refused(r, "attribute", "AttributeDenied"), r
    r = run("from fractions import Fraction\nx = Fraction(1, 2).numerator\nx")
    assert r.ok and r.result_text == "1", r


# -- sizes (Gates.check_size, Gates._check_repeat) -----------------------------------------------------

def test_repeating_a_list_past_the_memory_limit_is_refused(run):
    r = run("x = [0] * (10**9)")
    assert _refused(r, "limit", "SizeDenied"), r
    r = run("x = [0] * 1000\nlen(x)")
    assert r.ok and r.result_text == "1000", r


def test_a_huge_integer_product_is_refused(run):
    r = run("x = (1 << 5_000_000) * (1 << 5_000_000)")
    assert _refused(r, "limit", "SizeDenied"), r
    r = run("x = (1 << 4_000_000) * (1 << 4_000_000)\nx.bit_length()")
    assert r.ok and r.result_text == "8000001", r


# -- imports (Gates.import_module) -----------------------------------------------------------------------

def test_a_module_the_policy_does_not_grant_is_refused(run):
    r = run("import os")
    assert _refused(r, "import", "ImportDenied"), r
    r = run("import math\nmath.floor(2.5)")
    assert r.ok and r.result_text == "2", r


# -- writes (Gates.write) ----------------------------------------------------------------------------------

def test_writing_a_module_attribute_is_refused(run):
    r = run("import math\nmath.pi = 3")
    assert _refused(r, "attribute", "AttributeDenied"), r
    r = run("class C:\n    pass\nc = C()\nc.pi = 3\nc.pi")
    assert r.ok and r.result_text == "3", r


# -- names (Rewriter._check_name) ------------------------------------------------------------------------

def test_a_reserved_name_is_refused_by_the_rewriter(run):
    r = run("x = __builtins__")
    assert _refused(r, "name", "NameDenied"), r
    r = run("x = 1\ny = x + 1\ny")
    assert r.ok and r.result_text == "2", r


# -- files (ConfinedFiles.resolve) -------------------------------------------------------------------------

def test_writing_a_file_outside_the_working_directory_is_refused(run, outside):
    r = run(f"open({str(outside / 'x.txt')!r}, 'w')")
    assert _refused(r, "file", "FileDenied"), r
    assert not (outside / "x.txt").exists()
    r = run("open('../x.txt', 'w')")
    assert _refused(r, "file", "FileDenied"), r
    r = run("with open('a.txt', 'w') as f:\n    f.write('1')\nopen('a.txt').read()")
    assert r.ok and r.result_text == "'1'", r


def test_resize_is_refused_on_an_array_and_on_its_class(run):
    r = run("import numpy as np\na = np.zeros(3)\nf = a.resize")
    assert _refused(r, "attribute", "AttributeDenied"), r
    r = run("import numpy as np\nf = np.ndarray.resize")
    assert _refused(r, "attribute", "AttributeDenied"), r
    r = run("import numpy as np\nnp.resize(np.zeros(3), 5).shape")
    assert r.ok and r.result_text == "(5,)", r


# -- bound methods (Gates._check_method) ---------------------------------------------------------------------

def test_a_bound_method_of_the_runtime_is_handed_out(run):
    """itertools.chain's stand-in has a classmethod of the runtime: reading it must not be refused as a
    function from sandbox_kernel."""
    r = run("import itertools\nlist(itertools.chain.from_iterable([[1], [2]]))")
    assert r.ok and r.result_text == "[1, 2]", r


def test_a_denied_function_is_refused_under_another_class(tmp_path):
    """A policy that denies DataFrame.to_pickle denies the function itself (NDFrame.to_pickle): a Series
    (not a DataFrame) hands out the same function as a bound method, refused by value."""
    policy = dataclasses.replace(PRESETS["data-science"], object_deny=("pandas.DataFrame.to_pickle",))
    r = _run_with(policy, tmp_path / "work", "import pandas as pd\nf = pd.Series([1]).to_pickle")
    assert _refused(r, "attribute", "AttributeDenied"), r
    r = _run_with(policy, tmp_path / "work2", "import pandas as pd\nf = pd.DataFrame({'a': [1]}).to_pickle")
    assert _refused(r, "attribute", "AttributeDenied"), r
    r = _run_with(policy, tmp_path / "work3", "import pandas as pd\npd.Series([1, 2]).sum()")
    assert r.ok and r.result_text in ("3", "np.int64(3)"), r


# -- objects of ungranted libraries (Gates._foreign_class) ------------------------------------------------

def test_an_object_of_an_ungranted_library_hands_out_only_plain_data(run):
    """pandas' Styler holds a jinja2 Environment (jinja2.environment: a submodule of an ungranted package)."""
    source = "import pandas as pd\nenv = pd.DataFrame({'a': [1]}).style.env\n"
    for read in ("env.getattr", "env.filters", "env.globals"):
        r = run(source + f"got = {read}")
        assert _refused(r, "attribute", "AttributeDenied"), (read, r)
    r = run(source + "env.trim_blocks")
    assert r.ok and r.result_text == "True", r


# -- private and dunder reads (Gates._private_readable) ---------------------------------------------------

def test_dunder_dict_is_readable_only_on_the_cells_own_objects(run):
    r = run("class C:\n    pass\nc = C()\nc.x = 1\nc.__dict__")
    assert r.ok and r.result_text == "{'x': 1}", r
    r = run("import fractions\nd = fractions.Fraction(1, 2).__dict__")
    assert _refused(r, "attribute", "AttributeDenied"), r


def test_an_unknown_dunder_is_hidden_even_on_the_cells_own_class(run):
    r = run("class C:\n    pass\nc = C()\nx = c.__weakref__")
    assert _refused(r, "attribute", "AttributeDenied"), r


# -- scipy objects (Gates._decide: the index-array rule applies to plain reads only) -------------------------

def test_a_scipy_array_subclass_keeps_the_tolist_size_check(run):
    """MatlabObject is a scipy ndarray subclass: its tolist() is still the sized stand-in, refused before
    numpy builds the list (not only by the allocator afterwards)."""
    source = "import numpy as np\nfrom scipy.io.matlab import MatlabObject\nm = MatlabObject(np.zeros({}, dtype=bool), 'c')\n"
    r = run(source.format("3_000_000") + "x = m.tolist()", memory_mb=64)
    assert _refused(r, "limit", "SizeDenied"), r
    r = run(source.format("3") + "m.tolist()", memory_mb=64)
    assert r.ok and r.result_text == "[False, False, False]", r


# -- a cell's subclass of a library class (Gates._private_library_subclass) ----------------------------------

def test_a_library_subclass_reads_its_own_private_methods_but_not_the_librarys_state(run):
    source = "import pandas as pd\nclass D(pd.DataFrame):\n    def _mine(self):\n        return 7\nd = D({'a': [1]})\n"
    r = run(source + "d._mine()")
    assert r.ok and r.result_text == "7", r
    r = run(source + "m = d._mgr")
    assert _refused(r, "attribute", "AttributeDenied"), r


# -- super() (Gates._decide_super) ------------------------------------------------------------------------------

def test_super_reads_in_a_cell_class(run):
    r = run("class C:\n    def __new__(cls):\n        return super().__new__(cls)\n    def __init__(self):\n"
            "        super().__init__()\n        super().__setattr__('x', 5)\nC().x")
    assert r.ok and r.result_text == "5", r
    r = run("class C:\n    def __init__(self):\n        super().__setattr__('__class__', int)\nC()")
    assert _refused(r, "attribute", "AttributeDenied"), r


def test_super_reads_a_private_method_of_the_cells_own_parent(run):
    r = run("class A:\n    def _h(self):\n        return 1\nclass B(A):\n    def g(self):\n        return super()._h()\nB().g()")
    assert r.ok and r.result_text == "1", r
    r = run("import fractions\nclass F(fractions.Fraction):\n    def g(self):\n        return super()._numerator\n"
            "F(1, 2).g()")
    assert _refused(r, "attribute", "AttributeDenied"), r


def test_super_new_of_a_library_class_is_refused(run):
    r = run("import fractions\nclass F(fractions.Fraction):\n    def __new__(cls):\n"
            "        return super().__new__(cls)\nF()")
    assert _refused(r, "attribute", "AttributeDenied"), r


# -- module attributes (Gates._decide_module) -------------------------------------------------------------------

def test_a_missing_module_attribute_suggests_importing_the_submodule(run):
    r = run("import json\njson.nosuch")
    assert r.error_name == "AttributeError" and "try 'import json.nosuch'" in r.error_value, r
    r = run("import json\njson.dumps([1])")
    assert r.ok and r.result_text == "'[1]'", r


# -- builtins that read attributes (Gates.builtin_hasattr, builtin_getattr) -----------------------------------

def test_hasattr_answers_false_for_a_missing_attribute(run):
    r = run("class C:\n    pass\nc = C()\nc.x = 1\n(hasattr(c, 'x'), hasattr(c, 'nope'), hasattr(1, 'real'), hasattr(1, 'nope'))")
    assert r.ok and r.result_text == "(True, False, True, False)", r
    r = run("class C:\n    pass\n(getattr(C(), 'nope', 5), getattr(1, 'real', 5))")
    assert r.ok and r.result_text == "(5, 1)", r


# -- writes to functions (Gates.write) ----------------------------------------------------------------------

def test_only_the_cells_own_functions_take_attributes(run):
    r = run("def f():\n    pass\nf.flag = 1\nf.__doc__ = 'mine'\n(f.flag, f.__doc__)")
    assert r.ok and r.result_text == "(1, 'mine')", r
    r = run("import statistics\nstatistics.mean.flag = 1")
    assert _refused(r, "attribute", "AttributeDenied"), r
    r = run("def f():\n    pass\nf.__defaults__ = (1,)")
    assert _refused(r, "attribute", "AttributeDenied"), r


def test_a_decimal_context_precision_is_bounded_and_only_there(run):
    r = run("import decimal\nctx = decimal.Context()\nctx.prec = 10**12")
    assert _refused(r, "limit", "SizeDenied"), r
    r = run("import decimal\nctx = decimal.Context()\nctx.prec = 50\nctx.Emax = 10**12\n(ctx.prec, ctx.Emax)")
    assert r.ok and r.result_text == "(50, 1000000000000)", r
    r = run("class C:\n    pass\nc = C()\nc.prec = 10**12\nc.prec == 10**12")
    assert r.ok and r.result_text == "True", r


# == rewriter decisions (mutation survivors) ===============================================================
# The run over rewriter.py (docs/mutation.md, "Run 2"): what the rewriter refuses before a cell runs, and
# which nodes skip a gate. Each test below kills the survivors named in that table.

# -- names at binding sites (Rewriter._check_name with binding=True) ------------------------------------------

_READ_ONLY_BINDINGS = {
    "parameter": "def f(__name__):\n    return 1",
    "lambda parameter": "f = lambda __qualname__: 1",
    "function name": "def __module__():\n    return 1",
    "class name": "class __name__:\n    pass",
    "global": "def f():\n    global __name__\n    return 1",
    "import as": "import math as __name__",
    "from import as": "from math import pi as __module__",
}


@pytest.mark.parametrize("site", list(_READ_ONLY_BINDINGS))
def test_a_read_only_name_is_refused_at_every_binding_site(run, site):
    r = run(_READ_ONLY_BINDINGS[site])
    assert _refused(r, "name", "NameDenied"), r


def test_a_read_only_name_stays_readable(run):
    r = run("def f(a):\n    return a\nclass K:\n    pass\n(f(__name__) == __name__, K.__name__)")
    assert r.ok and r.result_text == "(True, 'K')", r


# -- 'import *' after a function (Rewriter._function keeps the function depth) ----------------------------------

def test_import_star_works_at_top_level_after_a_function_definition(run):
    r = run("def f():\n    def g():\n        pass\n    return 1\nfrom math import *\nfloor(2.5) + f()")
    assert r.ok and r.result_text == "3", r
    r = run("def f():\n    from math import *\n    return 1")
    assert _refused(r, "syntax", "ValidationDenied"), r


# -- docstrings (Rewriter._function puts the tick after the docstring) -----------------------------------------

def test_a_function_with_a_docstring_runs_each_statement_once(run):
    r = run("seen = []\ndef f():\n    'the doc'\n    seen.append(1)\n    seen.append(2)\nf()\n(seen, f.__doc__)")
    assert r.ok and r.result_text == "([1, 2], 'the doc')", r


# -- parameters checked once at entry (Rewriter._function, _never_rebound_parameters) -----------------------

def test_a_parameter_rebound_through_its_private_name_is_gated_again(run):
    # Inside class B, '__y = ...' binds '_B__y': the parameter is rebound, so its own-instance check cannot
    # be made once at entry (with the outer class's name, A, it would be, and the read below would be raw).
    src = ("from fractions import Fraction\n"
           "class A:\n"
           "    class B:\n"
           "        def m(self, _B__y):\n"
           "            __y = Fraction(1, 2)\n"
           "            return _B__y._numerator\n"
           "class O:\n"
           "    pass\n"
           "A.B().m(O())")
    r = run(src)
    assert _refused(r, "attribute", "AttributeDenied"), r
    r = run(src.replace("__y = Fraction(1, 2)", "__y = O()\n            __y._numerator = 7"))
    assert r.ok and r.result_text == "7", r


# -- the own-instance fast path (Rewriter._own_attribute_name, visit_Attribute) -----------------------------------

def test_mro_and_dunders_of_the_cells_own_instances_still_go_through_the_gate(run):
    cls = "class C:\n    def __init__(self):\n        self.v = 3\nc = C()\n"
    for read in ("c.mro", "C().mro", "C().__reduce_ex__", "(c or c).__reduce_ex__"):
        r = run(cls + "x = " + read)
        assert _refused(r, "attribute", "AttributeDenied"), (read, r)
    r = run(cls + "(c.v, C().v, (c or c).v)")
    assert r.ok and r.result_text == "(3, 3, 3)", r


# -- imports (Rewriter.visit_Import) ----------------------------------------------------------------------------

def test_importing_a_dotted_module_binds_its_top_package(run):
    r = run("import numpy.linalg\nfloat(numpy.linalg.norm([3, 4]))")
    assert r.ok and r.result_text == "5.0", r
    r = run("import numpy.linalg\nlinalg")
    assert not r.ok and r.error_name == "NameError", r


# -- sizes of *, **, << (Rewriter._cheap_binop, visit_BinOp) -------------------------------------------------------
# A mutant that makes an operation "cheap" compiles it without the size gate: 1 << 100_000_000 is 12.5 MB
# (over the 8,388,608-bit cap) but quick to build, so the mutant shows as a result where a SizeDenied belongs.

def test_a_left_shift_past_the_integer_cap_is_refused_with_constants_and_names(run):
    for src in ("x = 1 << 100_000_000", "n = 100_000_000\nx = 1 << n", "x = 1\nx = x << 100_000_000",
                "x = 1 << 8_388_607\ny = x << 1"):   # x is at the cap: even a small constant shift is checked
        r = run(src)
        assert _refused(r, "limit", "SizeDenied"), (src, r)
    # two constants: only a shift by at most 64 is left to the compiler; a literal at the cap (2**8_388_607
    # in hex) shifted by 65 goes through the gate
    r = run("x = 0x8" + "0" * 2_097_151 + " << 65")
    assert _refused(r, "limit", "SizeDenied"), r
    r = run("n = 64\n((1 << 64) == 2**64, (1 << n) == 2**64, (3 << 2))")
    assert r.ok and r.result_text == "(True, True, 12)", r


@pytest.mark.parametrize("src", ["x = 2 ** 100_000_000", "x = 7 ** 1_000_000_000", "x = 0xFF << 10_000_000",
                                 "x = 3 ** 9_000_000", "x = 12345678901234567890 ** 500_000"])
def test_a_power_of_two_constants_past_the_integer_cap_is_refused(run, src):
    """CPython folds only small results of constants; a larger one is computed when the cell runs (2 ** 100_000_000
    was 12 times the cap; 7 ** 10**9 one long C computation): such constants go through the gate."""
    r = run(src)
    assert _refused(r, "limit", "SizeDenied"), (src, r)


def test_small_results_of_constants_stay_as_written(run):
    r = run("x = (2 ** 64, 10 ** 3, 2 ** -1, 1 << 64, 3 * 4, 2.0 ** 1000, (1 + 1j) ** 3, (-1) ** 10**9, 1 ** 10**9)\n"
            "print(x[0] == 18446744073709551616, x[1], x[2], x[3] == x[0], x[4], x[5] > 1e300, x[6], x[7], x[8])")
    assert r.ok and r.stdout == "True 1000 0.5 True 12 True (-2+2j) 1 1\n", r


def test_a_small_constant_power_of_an_integer_at_the_cap_is_refused(run):
    """x ** k with a small constant k went ungated: (1 << 8_000_000) ** 4 had 32,000,001 bits, and x = x ** 4 in a
    loop grows without bound, each step one C multiplication (mutation run 2). Now the pow gate (C fast path for
    floats, complex numbers and small ints)."""
    r = run("x = 1 << 8_000_000\ny = x ** 4")
    assert _refused(r, "limit", "SizeDenied"), r
    r = run("x = 3\nf = 1.5\nprint(x ** 2, f ** 2, (2j) ** 2, x ** 0, (1 << 100) ** 2 == 1 << 200)")
    assert r.ok and r.stdout == "9 2.25 (-4+0j) 1 True\n", r


def test_a_non_constant_power_past_the_integer_cap_is_refused(run):
    for src in ("n = 100_000_000\nx = 2 ** n", "b = 2\nx = b ** 100_000_000", "x = 'x' * 10**10"):
        r = run(src)
        assert _refused(r, "limit", "SizeDenied"), (src, r)


# -- % (Rewriter.visit_BinOp: the mod and percent gates) ---------------------------------------------------------

def test_a_percent_format_held_in_a_name_has_its_star_width_checked(run):
    # memory_mb=64: a width over 16 M is refused; the unchecked format would build 20 MB
    r = run("fmt = '%*d'\nx = fmt % (20_000_000, 1)", memory_mb=64)
    assert _refused(r, "limit", "SizeDenied"), r
    r = run("x = 20_000_000\nx = '%*d' % (x, 1)", memory_mb=64)
    assert _refused(r, "limit", "SizeDenied"), r
    r = run("x = 7\nfmt = '%3d|'\n(x % 3, 7 % 3, 7.5 % 2, fmt % x, '%-3s|' % 'a')")
    assert r.ok and r.result_text == "(1, 1, 1.5, '  7|', 'a  |')", r
