"""The short mutation run (issue 13, item 3; docs/mutation.md): a fixed set of mutants in gate decisions,
each of which the focused tests must kill.

Needs nothing beyond the `test` extra: a tiny mutator (below, with `ast`) flips one comparison or boolean
in a named function of a copy of the package in a temporary directory (the built C extensions copied
beside it), and pytest runs the named tests against that copy (PYTHONPATH first, cwd the copy, so the
child processes that tests start import the mutant too). The unmutated copy must pass the same tests
first: a mutant "killed" by tests that fail anyway would prove nothing. scripts/mutation.py is the long
run (Cosmic Ray, every decision in scripts/mutation_scope.txt).
"""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# (module, function, the expression as ast.unparse writes it, mutation, tests that must kill it).
# Mutations: "negate" a comparison (== / !=, < / >=, is / is not, in / not in ...), "and-or" swaps a
# boolean operator, "not" wraps the expression in `not (...)`, "drop-not" removes a `not`. '@k' picks the
# k-th of several equal expressions in the function.
MUTANTS = [
    ("gates.py", "Gates._decide", "n.startswith('_')@0", "not",
     ["tests/test_gate_decisions.py::test_private_attribute_of_a_library_object_is_refused"]),
    ("gates.py", "Gates._check_repeat", "size > self.max_bytes", "negate",
     ["tests/test_gate_decisions.py::test_repeating_a_list_past_the_memory_limit_is_refused"]),
    ("gates.py", "Gates.import_module", "rule is None", "negate",
     ["tests/test_gate_decisions.py::test_a_module_the_policy_does_not_grant_is_refused"]),
    ("gates.py", "Gates.write", "t is ModuleType", "negate",
     ["tests/test_gate_decisions.py::test_writing_a_module_attribute_is_refused"]),
    ("gates.py", "Gates.check_size", "bits > MAX_INT_BITS@0", "negate",
     ["tests/test_gate_decisions.py::test_a_huge_integer_product_is_refused"]),
    ("rewriter.py", "Rewriter._check_name", "name in FORBIDDEN_NAMES", "negate",
     ["tests/test_gate_decisions.py::test_a_reserved_name_is_refused_by_the_rewriter"]),
    ("confine.py", "ConfinedFiles.resolve", "full != self.root and (not full.startswith(self.root + os.sep))",
     "and-or",
     ["tests/test_gate_decisions.py::test_writing_a_file_outside_the_working_directory_is_refused"]),
]

_NEGATE = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE,
           ast.LtE: ast.Gt, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}


def _function(tree, qualname):
    node = tree
    for part in qualname.split("."):
        node = next(c for c in ast.iter_child_nodes(node)
                    if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and c.name == part)
    return node


def mutate(source: str, qualname: str, expression: str, how: str) -> str:
    """The source with `expression` changed by `how`; the rest of the file byte for byte as it was. The
    expression occurs once in the function, or ends with '@k' to take its k-th occurrence (from 0, in
    source order)."""
    expression, _, k = expression.partition("@")
    tree = ast.parse(source)
    found = sorted((n for n in ast.walk(_function(tree, qualname))
                    if isinstance(n, ast.expr) and ast.unparse(n) == expression),
                   key=lambda n: (n.lineno, n.col_offset))
    if k:
        assert len(found) > int(k), f"{qualname}: {expression!r} found {len(found)} times (the smoke list is stale)"
        found = [found[int(k)]]
    assert len(found) == 1, f"{qualname}: {expression!r} found {len(found)} times (the smoke list is stale)"
    node = found[0]
    if how == "negate":
        assert isinstance(node, ast.Compare) and len(node.ops) == 1, expression
        new = ast.Compare(node.left, [_NEGATE[type(node.ops[0])]()], node.comparators)
    elif how == "and-or":
        assert isinstance(node, ast.BoolOp), expression
        new = ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)
    elif how == "not":
        new = ast.UnaryOp(ast.Not(), node)
    elif how == "drop-not":
        assert isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not), expression
        new = node.operand
    else:
        raise ValueError(how)
    lines = source.encode().splitlines(keepends=True)
    start = sum(len(line) for line in lines[:node.lineno - 1]) + node.col_offset
    end = sum(len(line) for line in lines[:node.end_lineno - 1]) + node.end_col_offset
    data = source.encode()
    mutated = (data[:start] + f"({ast.unparse(new)})".encode() + data[end:]).decode()
    assert mutated != source
    ast.parse(mutated)
    return mutated


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory):
    """The package (with its built extensions) and the tests in a temporary directory."""
    dest = tmp_path_factory.mktemp("mutation")
    ignore = shutil.ignore_patterns("__pycache__", "artifacts", "browser")
    shutil.copytree(ROOT / "sandbox_kernel", dest / "sandbox_kernel", ignore=ignore)
    shutil.copytree(ROOT / "tests", dest / "tests", ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def _run_tests(copy: Path, tests) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(copy) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "-o", "addopts=", *tests], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=240)


def test_the_mutator_changes_only_the_named_expression():
    source = "def f(a):\n    if a > 1:  # kept\n        return 'é'\n    return a > 1\n\ndef g(a):\n    return a > 1\n"
    with pytest.raises(AssertionError):
        mutate(source, "f", "a > 1", "negate")   # twice in f: ambiguous
    assert mutate(source, "f", "a > 1@1", "negate") == source.replace("return a > 1\n", "return (a <= 1)\n", 1)
    assert mutate(source, "g", "a > 1", "negate") == source.replace("return a > 1\n", "return (a <= 1)\n", 2) \
        .replace("return (a <= 1)\n\ndef g", "return a > 1\n\ndef g")


def test_the_copy_imports_the_mutant(package_copy):
    """The copy, not the editable install, is what the test processes import."""
    env = dict(os.environ, PYTHONPATH=str(package_copy))
    out = subprocess.run([sys.executable, "-c", "import sandbox_kernel.gates as g; print(g.__file__)"],
                         cwd=package_copy, env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(package_copy / "sandbox_kernel" / "gates.py")


def test_focused_tests_kill_each_mutant(package_copy):
    every_test = sorted({t for m in MUTANTS for t in m[4]})
    unmutated = _run_tests(package_copy, every_test)
    assert unmutated.returncode == 0, "the unmutated copy fails its tests:\n" + unmutated.stdout[-3000:]
    survivors = []
    for module, qualname, expression, how, tests in MUTANTS:
        path = package_copy / "sandbox_kernel" / module
        original = path.read_text()
        path.write_text(mutate(original, qualname, expression, how))
        try:
            result = _run_tests(package_copy, tests)
        finally:
            path.write_text(original)
        # 1: tests failed. Anything else (2 interrupted, 4 usage, 5 no tests) is not a kill.
        if result.returncode != 1:
            survivors.append(f"{module}:{qualname} {how} {expression!r} (pytest exit {result.returncode})\n"
                             + result.stdout[-1500:])
    assert not survivors, "mutants the focused tests did not kill:\n" + "\n".join(survivors)
