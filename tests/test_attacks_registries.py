"""Must-block: process-wide registries a cell's class or function joins (the registry sink).

A class a cell defines is recorded in places the whole process consults: its bases' subclass lists (an
ABC asks every subclass's __subclasshook__), ABC registries and caches, warnings filters. Code the cell
put there then runs, or answers, outside the cell: in the host's isinstance() checks, in another
thread, after the cell ended (where its first tick raises LimitExceeded into the host's code: the
kernel died inside ipykernel's logging). Each registry is either refused to a cell or confined to it:
outside a running cell the cell's hooks answer NotImplemented and nothing the cell decided persists.
The checks run in a child process: the host's ABCs are process-wide.
"""
from __future__ import annotations

import decimal

import pytest

from childcell import run_cell_in_child

HOST_CHECKS = """\
import collections.abc, numbers, warnings
def probe_host(report):
    def ask(name, fn):
        try:
            report[name] = fn()
        except BaseException as exc:
            report[name] = "raised " + type(exc).__name__
    ask("list_is_mapping", lambda: isinstance([], collections.abc.Mapping))
    ask("int_is_mapping", lambda: isinstance(3, collections.abc.Mapping))
    ask("str_is_number", lambda: isinstance("a", numbers.Number))
    ask("dict_is_mapping", lambda: isinstance({}, collections.abc.Mapping))
    ask("int_is_number", lambda: isinstance(3, numbers.Number))
    def warn():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("default")
            warnings.warn("host warning", UserWarning)
        return len(seen)
    ask("host_warnings_seen", warn)
    def warn_plain():
        warnings.warn("host warning 2", RuntimeWarning)
        return "ok"
    ask("host_warn", warn_plain)
"""

HOST_UNCHANGED = {"list_is_mapping": False, "int_is_mapping": False, "str_is_number": False,
                  "dict_is_mapping": True, "int_is_number": True, "host_warnings_seen": 1, "host_warn": "ok"}

# --- Issue 10, finding 3: a cell subclass of a library ABC answers every isinstance() of that ABC -----------
# ABCMeta asks each subclass's __subclasshook__ (recursively, through Mapping.__subclasses__()), caches
# the positive answers in the library ABC, and consults the subclass's own registry: a cell class made
# isinstance([], Mapping) True for the whole process, and after the cell its hook raised LimitExceeded
# inside the host's isinstance().

REGISTRATIONS = {
    "subclasshook_true": "import collections.abc\nclass M(collections.abc.Mapping):\n"
                         "    @classmethod\n    def __subclasshook__(cls, C):\n        return True\n"
                         "isinstance([], collections.abc.Mapping)",
    "subclasshook_raises_after_the_cell": "import numbers\nclass N(numbers.Number):\n"
                                          "    @classmethod\n    def __subclasshook__(cls, C):\n        return 1 / 0\n",
    "subclasshook_loops_after_the_cell": "import collections.abc\nclass M(collections.abc.Mapping):\n"
                                         "    @classmethod\n    def __subclasshook__(cls, C):\n"
                                         "        while True:\n            pass\n",
    "register_on_a_cell_subclass": "import collections.abc\nclass M(collections.abc.Mapping):\n    pass\n"
                                   "try:\n    M.register(int)\nexcept Exception:\n    pass\n",
    "register_on_a_deeper_subclass": "import numbers\nclass A(numbers.Number):\n    pass\nclass B(A):\n    pass\n"
                                     "try:\n    B.register(str)\nexcept Exception:\n    pass\n",
    "subclasscheck_classmethod": "import collections.abc\nclass M(collections.abc.Mapping):\n"
                                 "    @classmethod\n    def __subclasscheck__(cls, C):\n        return True\n"
                                 "    @classmethod\n    def __instancecheck__(cls, x):\n        return True\n"
                                 "    @classmethod\n    def __subclasshook__(cls, C):\n        return True\n",
    "warning_category_abc": "import abc, warnings\nclass W(UserWarning, metaclass=abc.ABCMeta):\n"
                            "    @classmethod\n    def __subclasshook__(cls, C):\n        return 1 / 0\n"
                            "warnings.filterwarnings('error', category=W)\n",
    "warnings_filter_error": "import warnings\nwarnings.simplefilter('error')\n",
    "warnings_filter_ignore_everything": "import warnings\nwarnings.filterwarnings('ignore')\n",
}


@pytest.mark.parametrize("variant", sorted(REGISTRATIONS))
def test_cell_classes_do_not_answer_for_the_host(variant):
    result = run_cell_in_child(REGISTRATIONS[variant], report=("status",), probe=HOST_CHECKS, timeout=60)
    status = result.pop("status", None)
    assert "crashed" not in result, result
    assert result == HOST_UNCHANGED, f"{variant}: the host's answers changed ({status}: {result})"


def test_cell_hooks_still_answer_inside_the_cell(run):
    r = run("import collections.abc, abc, warnings\n"
            "class Duck(abc.ABC):\n    @classmethod\n    def __subclasshook__(cls, C):\n"
            "        return hasattr(C, 'quack') or NotImplemented\n"
            "class D:\n    def quack(self):\n        pass\n"
            "class M(collections.abc.Mapping):\n    def __getitem__(self, k):\n        return 1\n"
            "    def __len__(self):\n        return 0\n    def __iter__(self):\n        return iter(())\n"
            "class Mine(abc.ABC):\n    pass\nclass Other:\n    pass\nMine.register(Other)\n"
            "warnings.simplefilter('ignore')\nwarnings.warn('quiet')\n"
            "print(isinstance(D(), Duck), isinstance(1, Duck), isinstance(M(), collections.abc.Mapping), "
            "isinstance(Other(), Mine))")
    assert r.ok, r
    assert r.stdout == "True False True True\n", r.stdout
    assert r.stderr == "", r.stderr


def test_warnings_filters_of_a_cell_persist_for_its_later_cells(run):
    assert run("import warnings\nwarnings.simplefilter('ignore')").ok
    r = run("import warnings\nwarnings.warn('quiet')\nprint('done')")
    assert r.ok and r.stderr == "", r


# ====================================================================================================
# From review round 3: state that leaks from a cell into the host
# thread, silent denials, private library state reached by shadowing the name in a sandbox subclass, C-level
# arithmetic past the limit.
# ====================================================================================================

def test_decimal_context_does_not_leak_to_host(run):
    ctx = decimal.getcontext()
    saved = (ctx.prec, dict(ctx.traps))
    try:
        run("import decimal\ndecimal.getcontext().prec = 3\ndecimal.getcontext().traps[decimal.Inexact] = True\n")
        assert decimal.getcontext().prec == saved[0]
        assert decimal.Decimal(1) / decimal.Decimal(3) == decimal.Decimal("0.3333333333333333333333333333")
    finally:
        ctx.prec = saved[0]
        for k, v in saved[1].items():
            ctx.traps[k] = v


# ====================================================================================================
# From review round 6: C consumers of huge iterators that are not among
# the sized builtins.
# ====================================================================================================

HOST_ABCS = """
    import collections.abc, numbers
    def probe_host(report):
        report["str_is_number"] = isinstance("a", numbers.Number)
        report["list_is_mapping"] = isinstance([], collections.abc.Mapping)
"""


@pytest.mark.parametrize("src", ["import numbers\nnumbers.Number.register(str)",
                                 "import collections.abc\ncollections.abc.Mapping.register(list)"])
def test_abc_register_does_not_change_host_semantics(src):
    result = run_cell_in_child(src, report=(), probe=HOST_ABCS, timeout=60)
    assert result == {"str_is_number": False, "list_is_mapping": False}, result
