#!/usr/bin/env python3
"""Mutation testing of the security core's gate decisions (issue 13, item 3): the long run.

    .venv/bin/pip install -e '.[test,mutation]'
    .venv/bin/python scripts/mutation.py                        # every decision in scripts/mutation_scope.txt
    .venv/bin/python scripts/mutation.py --module gates.py --sample 40
    .venv/bin/python scripts/mutation.py --function Gates.write --function _class_refusal
    .venv/bin/python scripts/mutation.py --list                 # the mutants, without running them
    .venv/bin/python scripts/mutation.py --survivors-of bench/results/mutation.json   # after new tests

Cosmic Ray (the `mutation` extra) makes the mutants: for each one it rewrites the source file on disk,
runs the test command, and restores the file. The file is never the working tree's: the script exports
the committed package and tests (`git archive HEAD`, plus this script's own test files from the working
tree) into a temporary directory, copies the built C extensions beside them, and runs the focused tests
there with that directory first on PYTHONPATH, so the child processes that tests start (cells run in
workers, fuzz children) import the mutated module from disk too. Scope entries marked [no-c] are Python
fallbacks that _fastgates.c / _numpyguard.c replace when built; their mutants run in a second copy
without the extensions (the package's own switch: gates.py and guards.py use the Python paths when the
extension does not import; a stub module that raises ImportError stands in for it, since the editable
install would otherwise find the working tree's build), so a mutant there is not a false survivor. A
check before the run asserts which extensions each copy loads.

The operators are the ones that change a decision (comparisons, boolean operators, `not`, True/False,
numbers, break/continue, except clauses, loops that run zero times); `--operators all` takes every
Cosmic Ray operator. One mutant at a time, under `nice`, with `pytest -x` (a killed mutant stops at its
first failing test). Prints killed / survived / timeouts per module and per function and writes
bench/results/mutation.json (or --out); docs/mutation.md records the last results.
"""
from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCOPE_FILE = ROOT / "scripts" / "mutation_scope.txt"

# The focused tests per module, fastest killers first (measured: test_fastgates 1 s, test_attacks_standins
# 5 s, test_attacks_files 10 s, test_attacks_special_methods 10 s, test_engine_core 20 s,
# test_attacks_names 20 s, test_attacks_sizes 29 s). tests/test_gate_decisions.py holds the tests written
# for this run's survivors.
TESTS = {
    "gates.py": ["tests/test_gate_decisions.py", "tests/test_fastgates.py", "tests/test_attacks_builtins.py",
                 "tests/test_attacks_standins.py", "tests/test_attacks_special_methods.py",
                 "tests/test_attacks_files.py", "tests/test_engine_core.py", "tests/test_attacks_names.py",
                 "tests/test_attacks_sizes.py"],
    "rewriter.py": ["tests/test_gate_decisions.py", "tests/test_attacks_builtins.py", "tests/test_engine_core.py",
                    "tests/test_attacks_names.py", "tests/test_attacks_special_methods.py"],
    "guards.py": ["tests/test_gate_decisions.py", "tests/test_attacks_standins.py", "tests/test_attacks_sizes.py",
                  "tests/test_attacks_builtins.py", "tests/test_engine_core.py"],
    "confine.py": ["tests/test_confine_decisions.py", "tests/test_attacks_package_programs.py",
                   "tests/test_gate_decisions.py", "tests/test_attacks_confinement.py", "tests/test_attacks_files.py",
                   "tests/test_engine_core.py"],
}
# Test files taken from the working tree rather than HEAD (this run's own, possibly not yet committed).
OVERLAY = ["tests/test_gate_decisions.py", "tests/test_mutation_smoke.py"]

DECISION_OPERATORS = [
    "core/ReplaceComparisonOperator_Eq_NotEq", "core/ReplaceComparisonOperator_NotEq_Eq",
    "core/ReplaceComparisonOperator_Is_IsNot", "core/ReplaceComparisonOperator_IsNot_Is",
    "core/ReplaceComparisonOperator_Lt_GtE", "core/ReplaceComparisonOperator_GtE_Lt",
    "core/ReplaceComparisonOperator_Gt_LtE", "core/ReplaceComparisonOperator_LtE_Gt",
    "core/ReplaceComparisonOperator_Lt_LtE", "core/ReplaceComparisonOperator_LtE_Lt",
    "core/ReplaceComparisonOperator_Gt_GtE", "core/ReplaceComparisonOperator_GtE_Gt",
    "core/AddNot", "core/ReplaceUnaryOperator_Delete_Not",
    "core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue",
    "core/ReplaceAndWithOr", "core/ReplaceOrWithAnd",
    "core/ReplaceBreakWithContinue", "core/ReplaceContinueWithBreak",
    "core/ExceptionReplacer", "core/ZeroIterationForLoop", "core/NumberReplacer",
]


def read_scope(path=SCOPE_FILE):
    """[(module, qualname, no_c)] from the scope file."""
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        no_c = "[no-c]" in line
        target = line.replace("[no-c]", "").strip()
        module, qualname = target.split(":", 1)
        out.append((module, qualname, no_c))
    return out


def function_ranges(source: str, qualnames):
    """{qualname: (first line, last line)} for the named defs and classes in a module's source."""
    tree = ast.parse(source)
    found = {}

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = f"{prefix}{child.name}"
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                found.setdefault(q, (first, child.end_lineno))
                walk(child, q + ".")
    walk(tree, "")
    missing = [q for q in qualnames if q not in found]
    if missing:
        raise SystemExit(f"not in the module (scripts/mutation_scope.txt is stale?): {missing}")
    return {q: found[q] for q in qualnames}


def export_package(dest: Path, with_c: bool, from_worktree: bool) -> str:
    """The package and tests in `dest` (HEAD's, or the working tree's); returns the commit exported."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    if from_worktree:
        for part in ("sandbox_kernel", "tests"):
            shutil.copytree(ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__", "*.so",
                                                                                     "artifacts"))
        shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")
        commit += "+worktree"
    else:
        archive = subprocess.run(["git", "archive", "HEAD", "sandbox_kernel", "tests", "pyproject.toml"],
                                 cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        for rel in OVERLAY:
            if (ROOT / rel).exists():
                shutil.copy2(ROOT / rel, dest / rel)
    if with_c:
        for so in (ROOT / "sandbox_kernel").glob("*.so"):
            shutil.copy2(so, dest / "sandbox_kernel" / so.name)
    else:
        # Absent is not enough: the editable install's finder resolves a submodule missing from the copy in
        # the working tree (the built .so there). A stub that refuses to import is found first.
        for c in (ROOT / "sandbox_kernel").glob("*.c"):
            (dest / "sandbox_kernel" / f"{c.stem}.py").write_text(
                'raise ImportError("disabled by scripts/mutation.py: the Python fallbacks run")\n')
    return commit


def check_copy(dest: Path, with_c: bool) -> None:
    """The copy's modules are the ones imported, with the C extensions loaded or not as intended."""
    probe = ("import sandbox_kernel.gates as g, sandbox_kernel.guards as u; "
             "print(g.__file__, g._fastgates is not None, u._numpyguard is not None)")
    env = dict(os.environ, PYTHONPATH=str(dest), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", probe], cwd=dest, env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == [str(dest / "sandbox_kernel" / "gates.py"), str(with_c), str(with_c)], out


def enumerate_mutants(module_file: Path, operators, ranges):
    """[(operator, occurrence, (line, col), (line, col), qualname)] inside the scope's functions."""
    import cosmic_ray.plugins
    from cosmic_ray.ast import ast_nodes, get_ast_from_path

    tree = get_ast_from_path(module_file)
    nodes = list(ast_nodes(tree))
    out = []
    for name in operators:
        op = cosmic_ray.plugins.get_operator(name)()
        occurrence = 0
        for node in nodes:
            for start, end in op.mutation_positions(node):
                line = start[0]
                owners = [(hi - lo, q) for q, (lo, hi) in ranges.items() if lo <= line <= hi]
                if owners:
                    out.append((name, occurrence, start, end, min(owners)[1]))
                occurrence += 1
    return out


# Tests that assert the extensions are built: not run in the copy without them.
NEEDS_C = ["tests/test_fastgates.py::test_the_c_fast_paths_are_built_on_linux"]


def _ks(keys):
    """For each key, how many equal keys came before it (NumberReplacer makes two mutants per number)."""
    seen = defaultdict(int)
    out = []
    for key in keys:
        out.append(seen[key])
        seen[key] += 1
    return out


def _numbered(found):
    return [(*f, k) for f, k in zip(found, _ks([(f[0], f[2]) for f in found]))]


def run_tests_command(module: str, timeout_per_test: int, dest: Path, no_c: bool, deselect=()) -> str:
    files = " ".join(f for f in TESTS[module] if (dest / f).exists())
    for t in list(NEEDS_C if no_c else []) + list(deselect):
        files += f" --deselect {t}"
    # the copy without the extensions runs the Python fallbacks, which the engine accepts only when told
    accept = "env SANDBOX_KERNEL_PYTHON_GUARDS=1 " if no_c else ""
    return (f"{accept}nice -n 10 {sys.executable} -m pytest -x -q -p no:cacheprovider -p no:xdist "
            f"-o faulthandler_timeout=0 --timeout {timeout_per_test} {files}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", help="gates.py, rewriter.py, guards.py, confine.py (repeatable)")
    ap.add_argument("--function", action="append", help="a qualified name from the scope file (repeatable)")
    ap.add_argument("--sample", type=int, help="run N mutants picked at random (seeded) from the selection")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--operators", default="decision", help="'decision' (default) or 'all'")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds per mutant (default: 3x the unmutated run, at least 60)")
    ap.add_argument("--worktree", action="store_true", help="mutate the working tree's files, not HEAD's")
    ap.add_argument("--survivors-of", metavar="JSON",
                    help="run again only the mutants that survived in this earlier result file")
    ap.add_argument("--list", action="store_true", help="list the mutants and stop")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "mutation.json"))
    args = ap.parse_args(argv)

    try:
        import cosmic_ray.mutating
        import cosmic_ray.plugins
        from cosmic_ray.work_item import MutationSpec, TestOutcome, WorkerOutcome
    except ImportError:
        raise SystemExit("Cosmic Ray is not installed: .venv/bin/pip install -e '.[mutation]'")
    operators = (DECISION_OPERATORS if args.operators == "decision"
                 else [n for n in cosmic_ray.plugins.operator_names()])

    scope = read_scope()
    if args.module:
        scope = [s for s in scope if s[0] in args.module]
    if args.function:
        scope = [s for s in scope if s[1] in args.function or f"{s[0]}:{s[1]}" in args.function]
    if not scope:
        raise SystemExit("nothing in scope")

    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))   # `kill` still removes the copies
    work = Path(tempfile.mkdtemp(prefix="sandbox-mutation-"))
    copies = {}
    commit = None
    try:
        for no_c in sorted({s[2] for s in scope}):
            dest = work / ("no-c" if no_c else "c")
            dest.mkdir()
            commit = export_package(dest, with_c=not no_c, from_worktree=args.worktree)
            copies[no_c] = dest
            check_copy(dest, with_c=not no_c)

        mutants = []   # (module, qualname, no_c, operator, occurrence, start, end)
        by_module = defaultdict(list)
        for s in scope:
            by_module[(s[0], s[2])].append(s[1])
        for (module, no_c), names in sorted(by_module.items()):
            path = copies[no_c] / "sandbox_kernel" / module
            ranges = function_ranges(path.read_text(), names)
            for op, occ, start, end, q in enumerate_mutants(path, operators, ranges):
                mutants.append((module, q, no_c, op, occ, start, end))
        print(f"{len(mutants)} mutants in {len(scope)} decision functions", flush=True)
        if args.survivors_of:
            # Matched by function, operator, the text of the mutated line and the column (found again in the
            # earlier run's commit): the same mutant even when commits since moved it.
            earlier = json.loads(Path(args.survivors_of).read_text())
            wanted = set()
            survivors = [m for m in earlier["mutants"] if m["outcome"] == "survived"]
            for module in sorted({m["module"] for m in survivors}):
                src = subprocess.run(["git", "show", f"{earlier['commit'].split('+')[0]}:sandbox_kernel/{module}"],
                                     cwd=ROOT, capture_output=True, text=True, check=True).stdout
                old_file = work / f"earlier-{module}"
                old_file.write_text(src)
                old_ranges = function_ranges(src, [q for m, q, _ in read_scope() if m == module])
                where = {(op, occ): (start, q, k) for op, occ, start, _, q, k in
                         _numbered(enumerate_mutants(old_file, operators, old_ranges))}
                old_lines = src.splitlines()
                for m in survivors:
                    if m["module"] == module and (m["operator"], m["occurrence"]) in where:
                        start, q, k = where[(m["operator"], m["occurrence"])]
                        wanted.add((module, q, m["operator"], old_lines[start[0] - 1].strip(), start[1], k))
            lines = {module: (copies[False if (module, False) in by_module else True] / "sandbox_kernel" / module)
                     .read_text().splitlines() for module, _ in by_module}
            ks = {(m[0], m[3], m[4]): k for m, k in zip(mutants, _ks([(m[0], m[3], m[5]) for m in mutants]))}
            keyed = {(m[0], m[1], m[3], lines[m[0]][m[5][0] - 1].strip(), m[5][1], ks[(m[0], m[3], m[4])]): m
                     for m in mutants}
            for gone in sorted(wanted - set(keyed)):
                print(f"not found at this commit (its function changed): {gone}", flush=True)
            mutants = [m for key, m in keyed.items() if key in wanted]
            print(f"{len(mutants)} of them survived in {args.survivors_of} ({len(wanted)} survivors there)",
                  flush=True)
        if args.sample is not None and args.sample < len(mutants):
            rng = random.Random(args.seed)
            mutants = sorted(rng.sample(mutants, args.sample), key=lambda m: (m[0], m[5]))
            print(f"sampled {len(mutants)} (seed {args.seed})", flush=True)
        if args.list:
            for m in mutants:
                print(f"{m[0]}:{m[1]}{' [no-c]' if m[2] else ''} line {m[5][0]} {m[3]} #{m[4]}")
            return 0

        out = Path(args.out)

        def write_report():
            report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                      "commit": commit, "tool": "cosmic-ray " + _version("cosmic-ray"),
                      "operators": args.operators, "sample": args.sample, "seed": args.seed,
                      "selection": {"module": args.module, "function": args.function},
                      "deselected_failing_unmutated": {("no-c" if c else "c"): v for c, v in deselect.items() if v},
                      "baseline_seconds": {f"{m}{' [no-c]' if c else ''}": round(t, 1)
                                           for (m, c), t in baseline.items()},
                      "complete": len(results) == len(mutants),
                      "summary": summarise(results), "mutants": results}
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=1) + "\n")
            return report["summary"]

        env_before = dict(os.environ)
        results = []
        baseline = {}
        deselect = {False: [], True: []}
        try:
            for i, (module, q, no_c, op, occ, start, end) in enumerate(mutants, 1):
                dest = copies[no_c]
                os.chdir(dest)
                os.environ["PYTHONPATH"] = str(dest) + os.pathsep + env_before.get("PYTHONPATH", "")
                os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
                key = (module, no_c)
                if key not in baseline:
                    # The unmutated run, without -x: a test that fails already would "kill" every mutant.
                    # Such tests are deselected for this copy and listed in the report.
                    cmd = run_tests_command(module, 120, dest, no_c, deselect[no_c]).replace(" -x ", " ")
                    t0 = time.monotonic()
                    proc = subprocess.run(cmd.split(), capture_output=True, text=True)
                    took = time.monotonic() - t0
                    failing = [line.split()[1] for line in proc.stdout.splitlines()
                               if line.startswith(("FAILED ", "ERROR "))]
                    if proc.returncode not in (0, 1) or proc.returncode == 1 and not failing:
                        print(proc.stdout[-3000:], proc.stderr[-2000:])
                        raise SystemExit(f"the unmutated tests do not run for {module}")
                    if failing:
                        print(f"WARNING: failing unmutated ({'no-c' if no_c else 'c'}), deselected: {failing}",
                              flush=True)
                        deselect[no_c].extend(failing)
                    baseline[key] = took
                    print(f"baseline {module}{' [no-c]' if no_c else ''}: {took:.0f} s", flush=True)
                timeout = args.timeout or max(60.0, 3 * baseline[key])
                spec = MutationSpec(module_path=str(dest / "sandbox_kernel" / module), operator_name=op,
                                    occurrence=occ, start_pos=start, end_pos=end)
                t0 = time.monotonic()
                result = cosmic_ray.mutating.mutate_and_test([spec], run_tests_command(module, 120, dest, no_c, deselect[no_c]), timeout)
                took = time.monotonic() - t0
                if result.worker_outcome == WorkerOutcome.NO_TEST:
                    outcome = "no-mutation"
                elif result.worker_outcome != WorkerOutcome.NORMAL:
                    outcome = "error"
                elif result.output == "timeout":
                    outcome = "timeout"
                elif result.test_outcome == TestOutcome.SURVIVED:
                    outcome = "survived"
                elif result.test_outcome == TestOutcome.INCOMPETENT:
                    outcome = "incompetent"
                else:
                    outcome = "killed"
                killer = None
                if outcome == "killed":
                    for line in (result.output or "").splitlines():
                        if line.startswith(("FAILED ", "ERROR ")):
                            killer = line.split()[1].split(" - ")[0]
                            break
                diff = "\n".join(l for l in (result.diff or "").splitlines()
                                 if l.startswith(("+", "-")) and not l.startswith(("+++", "---")))
                results.append({"module": module, "function": q, "no_c": no_c, "operator": op,
                                "occurrence": occ, "line": start[0], "col": start[1], "outcome": outcome, "killed_by": killer,
                                "seconds": round(took, 1), "diff": diff})
                print(f"[{i}/{len(mutants)}] {outcome:9} {module}:{q} line {start[0]} {op.split('/')[-1]} "
                      f"({took:.0f} s){'  ' + diff.replace(chr(10), ' | ') if outcome == 'survived' else ''}",
                      flush=True)
                write_report()   # after each mutant: a run stopped early keeps what it found
        finally:
            os.chdir(ROOT)
            os.environ.clear()
            os.environ.update(env_before)

        print_summary(write_report())
        print(f"wrote {out}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _version(dist):
    from importlib.metadata import version
    return version(dist)


def summarise(results):
    per = defaultdict(lambda: defaultdict(int))
    for r in results:
        for key in (r["module"], f"{r['module']}:{r['function']}"):
            per[key][r["outcome"]] += 1
    return {k: dict(v) for k, v in sorted(per.items())}


def print_summary(summary):
    cols = ("killed", "survived", "timeout", "incompetent", "error", "no-mutation")
    print(f"{'':60} " + " ".join(f"{c[:9]:>9}" for c in cols))
    for k, v in summary.items():
        print(f"{k:60} " + " ".join(f"{v.get(c, 0):>9}" for c in cols))


if __name__ == "__main__":
    sys.exit(main())
