#!/usr/bin/env python3
"""The long run of the generated attacks (issue 13 item 2; the short CI run is tests/test_fuzz_attacks.py).

    .venv/bin/python scripts/fuzz.py --seconds 600 --seed 1
    .venv/bin/python scripts/fuzz.py --replay findings.json [--minimise]

Runs batches of generated cells (tests/fuzz_grammar.py) at level `none`, each batch in a child process
(tests/fuzz_child.py) that judges every cell with tests/fuzz_oracles.py, until the time is used. Prints the
cells tried, how they ended, the findings (new ones, and known ones that tests/test_fuzz_findings.py
records as strict xfails) and, when coverage.py is installed, the branch coverage of the security core.
New findings are written as JSON (--out) for --replay, which runs a finding's cell again after the cells
that ran before it in its engine; --minimise then drops those and the cell's steps while it still fails.
Exit status 1 when there is a new finding.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))

import fuzz_grammar  # noqa: E402
from fuzz_child import run_batch  # noqa: E402
from fuzz_oracles import SECURITY_CORE, source_hash  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600, help="time to fuzz, in total (default 600)")
    parser.add_argument("--seed", type=int, default=1, help="batch i runs seed*1000+i (default 1)")
    parser.add_argument("--driver", choices=("random", "hypothesis"), default="random",
                        help="what decides the grammar's choices (default: a seeded random generator)")
    parser.add_argument("--batch-seconds", type=float, default=150,
                        help="fuzzing time of one child process; a hang loses at most this (default 150)")
    parser.add_argument("--out", help="where new findings are written as JSON (default: a temporary file)")
    parser.add_argument("--no-coverage", action="store_true", help="do not measure coverage")
    parser.add_argument("--replay", help="a findings JSON file written by --out: run its findings again")
    parser.add_argument("--minimise", action="store_true", help="with --replay: shrink each finding")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay, args.minimise)
    return fuzz(args)


# -- the long run -------------------------------------------------------------------------------------------


def fuzz(args) -> int:
    measure = not args.no_coverage and _coverage_installed()
    work = tempfile.mkdtemp(prefix="sandbox-fuzz-run-")
    started = time.monotonic()
    deadline = started + args.seconds
    cells, outcomes, findings, known = 0, collections.Counter(), [], collections.defaultdict(list)
    coverage_files = []
    batch_index = 0
    while deadline - time.monotonic() > 5:
        seconds = min(args.batch_seconds, deadline - time.monotonic())
        coverage_file = os.path.join(work, f".coverage.{batch_index}") if measure else None
        seed = args.seed * 1000 + batch_index
        batch = run_batch(seed=seed, seconds=seconds, driver=args.driver, coverage_file=coverage_file,
                          timeout=seconds + 300)
        cells += batch.cells
        outcomes.update(batch.outcomes)
        for finding in batch.findings:
            finding["seed"] = seed
        findings += batch.findings
        for name, found in batch.known.items():
            known[name] += found
        if coverage_file and os.path.exists(coverage_file):
            coverage_files.append((coverage_file, batch.sources))
        print(f"batch {batch_index} (seed {seed}): {batch.cells} cells in {batch.seconds:.0f} s, "
              f"{len(batch.findings)} new finding(s), {sum(map(len, batch.known.values()))} known", flush=True)
        batch_index += 1
    elapsed = time.monotonic() - started

    print(f"\n== generated attacks: {cells} cells in {batch_index} batches, {elapsed:.0f} s "
          f"({args.driver} driver, seed {args.seed}, level none, policy data-science)")
    refused = sum(n for ename, n in outcomes.items() if ename.endswith(("Denied", "Exceeded")))
    print(f"outcomes: {outcomes.get('ok', 0)} ran to the end, {refused} refused by the sandbox, "
          f"{cells - outcomes.get('ok', 0) - refused} ended with an ordinary error")
    print("  " + ", ".join(f"{ename} {n}" for ename, n in outcomes.most_common()))
    print(f"new findings: {len(findings)}")
    for finding in findings:
        print(f"  - {finding['problems']}\n    seed {finding['seed']}, after {len(finding.get('history') or [])} "
              f"cells in its engine; cell:\n" + _indented(finding["cell"] or "(none: the child died at start)"))
    print(f"known findings (tests/test_fuzz_findings.py): "
          f"{', '.join(f'{name} x{len(found)}' for name, found in known.items()) or 'none'}")
    if findings:
        out = args.out or os.path.join(work, "findings.json")
        with open(out, "w") as fh:
            json.dump(findings, fh, indent=1)
        print(f"written to {out} (replay: scripts/fuzz.py --replay {out} --minimise)")
    if measure:
        print(_coverage_summary(coverage_files, work))
    else:
        print("coverage: not measured" + ("" if args.no_coverage else " (coverage.py is not installed)"))
    for name in os.listdir(work):   # the coverage data; a findings file written here stays
        if name != "findings.json":
            path = os.path.join(work, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    if not os.listdir(work):
        os.rmdir(work)
    return 1 if findings else 0


def _indented(text: str) -> str:
    return "\n".join("      " + line for line in text.splitlines())


def _coverage_installed() -> bool:
    try:
        import coverage  # noqa: F401
    except ImportError:
        return False
    return True


def _coverage_summary(batches: list[tuple[str, dict]], work: str) -> str:
    """Branch and line coverage of the security core, every batch's data combined. Others edit these files
    while a run goes on: each file is measured against the version of it most batches ran (each child
    keeps a copy of what it imported), combining those batches only."""
    import coverage

    if not batches:
        return "coverage: no data (no batch finished)"
    lines = ["coverage of the security core (branches taken / branches; lines run / lines):"]
    totals = collections.Counter()
    core = os.path.join(REPO, "sandbox_kernel")
    for name in SECURITY_CORE:
        versions = collections.defaultdict(list)
        for data, sources in batches:
            versions[sources.get(name)].append(data)
        same = max(versions.values(), key=len)   # on a tie, the first version run
        ran = os.path.join(same[0] + ".src", "sandbox_kernel")
        combined = coverage.Coverage(data_file=os.path.join(work, f".coverage-{name}"), branch=True,
                                     config_file=False)
        combined.set_option("paths", {"core": [ran + os.sep, core + os.sep]})
        combined.combine(same, keep=True)
        report = os.path.join(work, f"coverage-{name}.json")
        combined.json_report(outfile=report, include=[os.path.join(ran, name)])
        with open(report) as fh:
            summary = json.load(fh)["totals"]
        with open(os.path.join(core, name), encoding="utf-8") as fh:
            changed = source_hash(fh.read()) != next(k for k, v in versions.items() if v is same)
        note = "" if len(same) == len(batches) else f"   ({len(same)} of {len(batches)} batches ran this version)"
        note += "   (edited since)" if changed else ""
        lines.append("  " + _coverage_line(name, summary) + note)
        totals.update({key: summary[key] for key in ("num_branches", "covered_branches", "num_statements",
                                                     "covered_lines")})
    lines.append("  " + _coverage_line("total", totals))
    return "\n".join(lines)


def _coverage_line(name: str, summary: dict) -> str:
    branches, taken = summary["num_branches"], summary["covered_branches"]
    statements, run = summary["num_statements"], summary["covered_lines"]
    return (f"{name:18} branches {taken:5}/{branches:<5} {100 * taken / max(branches, 1):5.1f}%   "
            f"lines {run:5}/{statements:<5} {100 * run / max(statements, 1):5.1f}%")


# -- replaying and shrinking a finding --------------------------------------------------------------------


def replay(path: str, minimise: bool) -> int:
    with open(path) as fh:
        findings = json.load(fh)
    still = 0
    for finding in findings if isinstance(findings, list) else [findings]:
        cells = list(finding.get("history") or []) + [finding["cell"]]
        problems = _problems(cells)
        print(f"== {finding['problems']}\nreplayed: {problems or 'nothing found'}")
        if problems and minimise:
            cells = _shrink(cells, _kind(problems[0]))
            print("smallest cells that still fail:\n" + "\n-- next cell\n".join(cells))
            print(f"problems: {_problems(cells)}")
        still += bool(problems)
    return 1 if still else 0


def _problems(cells: list[str]) -> list[str]:
    batch = run_batch(cells=cells)
    found = batch.findings + [f for known in batch.known.values() for f in known]
    return [p for f in found if f["cell"] == cells[-1] for p in f["problems"]]


def _kind(problem: str) -> str:
    """What a shrunk cell must still show: the problem without its addresses, ids and counts."""
    return problem.split(":")[0]


def _shrink(cells: list[str], kind: str) -> list[str]:
    def fails(candidate):
        return any(_kind(p) == kind for p in _problems(candidate))

    while len(cells) > 1 and fails(cells[1:]):   # the cells before it in its engine
        cells = cells[1:]
    steps = fuzz_grammar.steps_of(cells[-1])
    i = 0
    while i < len(steps):
        candidate = steps[:i] + steps[i + 1:]
        if candidate and fails(cells[:-1] + ["\n".join(candidate)]):
            steps = candidate
        else:
            i += 1
    return cells[:-1] + ["\n".join(steps)]


if __name__ == "__main__":
    sys.exit(main())
