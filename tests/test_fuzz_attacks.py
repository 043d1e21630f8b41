"""Generated attacks (issue 13 item 2): cells built by tests/fuzz_grammar.py from allowed Python and the
ingredients of past escapes, run at level `none` with the data-science policy in a child process
(tests/fuzz_child.py), each judged by the host's own view (tests/fuzz_oracles.py): nothing outside the
working directory opened, written or listed, no process, no connection, the secret in no output, host
modules and classes unchanged, no exception of the runtime's own, a trivial cell still runs.

CI runs a short fixed set (SANDBOX_FUZZ_CELLS cells from a fixed seed, so a failure replays); the long
run is ``.venv/bin/python scripts/fuzz.py --seconds 600 --seed N``. The other tests show that each oracle
can fire: the same judging code is fed breaches planted with the gates off, and a gate given a bug."""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

import fuzz_grammar
import fuzz_oracles
from fuzz_child import run_batch

SEED = 20261126
CELLS = int(os.environ.get("SANDBOX_FUZZ_CELLS", "40"))
FUZZ_COVERAGE = Path(__file__).parent / "artifacts" / "fuzz-coverage.txt"   # conftest prints it after the run

sys.path.insert(0, str(Path(__file__).parent.parent / "scripts"))
import fuzz as fuzz_script  # noqa: E402  (scripts/fuzz.py: the long run's coverage summary, reused)


def _described(findings: list) -> str:
    return "\n\n".join(f"{f['problems']}\n--- cell (after {len(f.get('history') or [])} others in its engine):\n"
                       f"{f['cell']}" for f in findings)


def test_generated_attacks_find_nothing(tmp_path):
    coverage_file = str(tmp_path / ".coverage") if fuzz_script._coverage_installed() else None
    batch = run_batch(seed=SEED, count=CELLS, coverage_file=coverage_file)
    assert not batch.findings, f"{len(batch.findings)} finding(s) in {batch.cells} cells:\n" + \
        _described(batch.findings)
    assert batch.returncode == 0 and batch.cells == CELLS, batch
    # the cells attacked: some were refused, and some ran to the end (the epilogue's escalations ran)
    denials = sum(n for ename, n in batch.outcomes.items() if ename.endswith("Denied"))
    assert denials and batch.outcomes.get("ok"), batch.outcomes
    if coverage_file and os.path.exists(coverage_file):
        # the branch coverage these cells reach in the security core: printed at the end of the run (conftest)
        summary = fuzz_script._coverage_summary([(coverage_file, batch.sources)], str(tmp_path))
        FUZZ_COVERAGE.parent.mkdir(exist_ok=True)
        FUZZ_COVERAGE.write_text(f"{CELLS} generated cells, seed {SEED}: {summary}\n")


# -- the oracles can fire ---------------------------------------------------------------------------------

# Each cell does one forbidden thing, run with the gates off (a plain exec engine): the problem the
# oracles must report for it.
PLANTED = [
    ("open(SECRET_PATH).read()", r"accessed: \['open .*/outside/secret\.txt', 'read "),
    ("import os\nnames = os.listdir(os.path.dirname(SECRET_PATH))", r"accessed: \['open .*/outside'"),
    ("open(CANARY_PATH, 'w').write('x')", r"files appeared outside the working directory: \['canary\.csv'\]"),
    ("import os\nos.system(CMD)", r"files appeared outside the working directory: \['marker-spawned'\]"),
    ("import subprocess\nsleeper = subprocess.Popen(['sleep', '60'])",
     r"processes were started: \[\(\d+, 'sleep 60'\)"),
    ("import socket\nsocket.create_connection(('127.0.0.1', PORT)).close()", r"listener got 1 connection"),
    ("import fuzz_host_secret\nprint(fuzz_host_secret.SECRET)", r"the secret reached the cell"),
    ("import os\nkept = os.environ['FUZZ_SECRET_ENV']", r"the secret reached the cell"),
    ("math.floor = print", r"^math changed: replaced \['floor'\]"),
    ("pd.DataFrame.planted = 1", r"pandas.*DataFrame changed: .*added \['planted'\]"),
    ("import sys\nsys.exit = None", r"^sys changed: replaced \['exit'\]"),
    ("import ctypes\nctypes.c_double.from_address(id(math.tau) + 16).value = 3.0", r"host memory written: math\.tau"),
    ("import builtins\nbuiltins.repr = lambda value: 'broken'", r"the engine no longer runs a trivial cell"),
    ("raise SystemExit(0)", r"^run_cell raised SystemExit"),
    ("import os\nos._exit(3)", r"the child died \(exit status 3\)"),
]


def test_oracles_report_breaches_planted_with_the_gates_off():
    batch = run_batch(cells=[cell for cell, _ in PLANTED], control="unsandboxed", timeout=300)
    by_cell = {f["cell"]: f["problems"] for f in batch.findings}
    missed = [(cell, pattern, by_cell.get(cell)) for cell, pattern in PLANTED
              if not any(re.search(pattern, p) for p in by_cell.get(cell, []))]
    assert not missed, f"breaches the oracles did not report: {missed}"
    assert len(batch.findings) == len(PLANTED), _described(batch.findings)


class _NamesThatAreNotStr(fuzz_grammar.RandomChooser):
    """The grammar with every attribute name spelt None and read by getattr(): what a careless gate trips on."""

    def choice(self, label, options):
        forced = {"spelling": "None", "reader": "getattr({o}, {n})"}.get(label)
        return forced if forced in options else super().choice(label, options)


def test_a_gate_bug_is_found_by_generated_cells():
    """The gates' name check made careless (no str check before NFKC): generated cells whose names are not
    str make it raise TypeError inside gates.py, which the oracle reports with the cell."""
    cells = [fuzz_grammar.build_cell(_NamesThatAreNotStr(SEED + i)) for i in range(6)]
    batch = run_batch(cells=cells, control="gate-typeerror", timeout=300)
    internal = [f for f in batch.findings
                if any("TypeError: normalize() argument 2 must be str" in p and "raised by the runtime at gates.py"
                       in p for p in f["problems"])]
    assert internal, f"the planted gate bug was not found in {batch.cells} cells: {batch.findings}"
    assert all(f["cell"] in cells for f in internal)


def test_known_findings_are_told_apart_from_new_ones():
    tracker = "processes were started: [(7, '/usr/bin/python -B -c from multiprocessing.resource_tracker " \
              "import main;main(6)')]"
    listing = "files outside the working directory were accessed: ['open /tmp/x', 'read /tmp/x']"
    assert fuzz_oracles.known_finding([tracker, listing]) == "test_library_starts_multiprocessing_resource_tracker"
    assert fuzz_oracles.known_finding([listing]) is None   # the listing alone is a cell's doing
    assert fuzz_oracles.known_finding([tracker, "the secret reached the cell"]) is None
    written = "host memory written: math.tau is 3.0"
    assert fuzz_oracles.known_finding([written], "E = enum.Enum('E', {Late('__array_interface__', 2): IFACE})") \
        == "test_late_equal_name_plants_a_raw_array_protocol_through_enum"
    assert fuzz_oracles.known_finding([written], "np.asarray(Hooked()).__setitem__(0, 3.0)") is None
    assert fuzz_oracles.known_finding(["numpy changed: replaced ['floor'], removed [], added []"]) is None


def test_the_grammar_is_deterministic_and_parses():
    import ast

    first = [fuzz_grammar.build_cell(fuzz_grammar.RandomChooser(i)) for i in range(30)]
    again = [fuzz_grammar.build_cell(fuzz_grammar.RandomChooser(i)) for i in range(30)]
    assert first == again
    for cell in first:
        ast.parse(cell)
    prelude = fuzz_grammar.PRELUDE.format(secret_path="/s", canary_path="/c", marker="/m", port=1)
    ast.parse(prelude)
    json.dumps(first)   # cells travel to the child as JSON
