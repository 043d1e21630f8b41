"""Runs generated attack cells at level `none` in a child process, one child per batch, and judges each.

The child (``python tests/fuzz_child.py '<json options>'``) makes the scene (fuzz_oracles.Scene), an Engine
with the data-science policy, runs PRELUDE then each generated cell, and after each: collects garbage (a
cell's finalizers run outside the cell, as in a kernel), checks every oracle, runs a trivial cell. It
writes one JSON line per cell to a progress file *before* running it, so a crash or a hang (the child
dies or is killed) is reported with the cell that caused it and the cells before it in that engine.

    batch = run_batch(seed=1, count=200)            # a seeded random generator decides the cells
    batch = run_batch(seed=1, seconds=60, driver="hypothesis")
    batch.findings  -> [{"cell": ..., "history": [...], "problems": [...]}]   new ones
    batch.known     -> {"test_...": [finding, ...]}   ones tests/test_fuzz_findings.py already records
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# Each cell's own limits: a runaway ends within seconds, the child's rlimit bounds what C allocates.
CELL_LIMITS = {"timeout": 2.0, "ticks": 10**7, "memory_mb": 512, "output_bytes": 200_000}
CELLS_PER_ENGINE = 20   # cells share an engine (state left by one may matter to the next), then a fresh one
CHILD_ADDRESS_SPACE = 6 << 30
TRIVIAL = ("6 * 7", "42")   # no name a cell could have rebound: its value is the engine's rendering


@dataclasses.dataclass
class Batch:
    cells: int = 0
    findings: list = dataclasses.field(default_factory=list)
    known: dict = dataclasses.field(default_factory=dict)       # xfail test name -> its findings
    outcomes: dict = dataclasses.field(default_factory=dict)   # how cells ended: "ok" or the error's name
    seconds: float = 0.0
    returncode: int | None = None
    sources: dict = dataclasses.field(default_factory=dict)    # security core file -> hash of what ran


def run_batch(*, seed: int = 0, count: int = 10**9, seconds: float | None = None, driver: str = "random",
              cells: list[str] | None = None, coverage_file: str | None = None, timeout: float = 900,
              control: str | None = None) -> Batch:
    """Runs one child. `cells` replays given cells instead of generating. `control` (tests only) makes
    the child's engine unsafe in one named way, to show the oracles see it."""
    with tempfile.TemporaryDirectory(prefix="sandbox-fuzz-batch-") as tmp:
        progress = os.path.join(tmp, "progress.jsonl")
        opts = {"seed": seed, "count": count, "seconds": seconds, "driver": driver, "cells": cells,
                "coverage": coverage_file, "progress": progress, "control": control}
        started = time.monotonic()
        try:
            proc = subprocess.run([sys.executable, os.path.join(HERE, "fuzz_child.py"), json.dumps(opts)],
                                  capture_output=True, text=True, timeout=timeout, cwd=tmp,
                                  preexec_fn=_limit_child, env={**os.environ, "PYTHONPATH": HERE})
            returncode, stderr = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as exc:
            returncode, stderr = None, (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) \
                else (exc.stderr or "")
        batch = Batch(seconds=time.monotonic() - started, returncode=returncode)
        history, done = [], False
        with open(progress) if os.path.exists(progress) else _empty() as fh:
            for line in fh:
                record = json.loads(line)
                if "cell" in record and "problems" not in record:
                    batch.cells += 1
                    history = [] if record.get("fresh_engine") else history
                    history.append(record["cell"])
                elif "problems" in record:
                    record["history"] = history[:-1]
                    if record.get("known"):
                        batch.known.setdefault(record["known"], []).append(record)
                    else:
                        batch.findings.append(record)
                elif "outcome" in record:
                    batch.outcomes[record["outcome"]] = batch.outcomes.get(record["outcome"], 0) + 1
                elif "summary" in record:
                    done = True
                    batch.sources = record.get("sources", {})
        if not done:
            what = "the child hung (killed after %d s)" % timeout if returncode is None else \
                f"the child died (exit status {returncode})"
            batch.findings.append({"cell": history[-1] if history else None, "history": history[:-1],
                                   "problems": [f"{what}: {stderr[-1500:]}"]})
        return batch


class _empty:
    def __enter__(self):
        return iter(())

    def __exit__(self, *exc):
        return False


def _limit_child():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


# -- the child ------------------------------------------------------------------------------------------------


class Enough(Exception):
    """The time budget is used up (ends hypothesis' loop)."""


def child(opts: dict) -> None:
    cov = None
    if opts["coverage"]:
        import coverage
        core = os.path.join(REPO, "sandbox_kernel")
        from fuzz_oracles import SECURITY_CORE
        cov = coverage.Coverage(data_file=opts["coverage"], branch=True,
                                include=[os.path.join(core, name) for name in SECURITY_CORE])
        cov.start()
    Fuzzer(opts).run()
    if cov is not None:
        cov.stop()
        cov.save()
        # the source that ran, for the report: others may edit these files while a long run goes on
        import fuzz_oracles
        fuzz_oracles.save_imported_sources(os.path.join(opts["coverage"] + ".src", "sandbox_kernel"))
    sys.stdout.flush()
    os._exit(0)   # forged objects or library threads must not decide how the child ends


class Fuzzer:
    def __init__(self, opts: dict):
        import gc

        import fuzz_grammar
        import fuzz_oracles
        from sandbox_kernel.engine import Engine
        from sandbox_kernel.policy import PRESETS

        fuzz_oracles.snapshot_runtime_sources()   # first thing after the runtime's import
        self.opts = opts
        self.gc = gc
        self.grammar = fuzz_grammar
        self.oracles = fuzz_oracles
        self.scene = fuzz_oracles.Scene(parent=os.path.dirname(opts["progress"]))   # removed by the parent
        os.chdir(self.scene.root)
        self.policy = PRESETS["data-science"].with_limits(**CELL_LIMITS)
        self.Engine = Engine
        self.prelude = fuzz_grammar.PRELUDE.format(**self.scene.placeholders())
        self.raised: list = []
        self._capture_reported_exceptions()
        self.progress = open(opts["progress"], "a", buffering=1)
        self.deadline = time.monotonic() + opts["seconds"] if opts["seconds"] else None
        self.tried = 0
        self.control = opts.get("control")
        if self.control == "gate-typeerror":
            _give_a_gate_a_bug()
        self._new_engine()
        self.host = fuzz_oracles.HostState()   # after the first prelude: granted modules loaded

    def _capture_reported_exceptions(self):
        """Every exception a cell ends with passes Engine._report: keep it to judge where it came from."""
        original = self.Engine._report
        raised = self.raised

        def report(engine, exc, source):
            raised.append(exc)
            return original(engine, exc, source)
        self.Engine._report = report

    def _new_engine(self):
        unsafe = getattr(self, "control", None) == "unsandboxed"
        self.engine = PlainEngine() if unsafe else self.Engine(self.policy, workdir=self.scene.work)
        self.in_engine = 0
        # the first prelude imports numpy, pandas, scipy and plotly: more time than a cell's limit
        done = self.engine.run_cell(self.prelude, emit=lambda e: None,
                                    limits=dataclasses.replace(self.policy.limits, timeout=300, ticks=10**9))
        if done["status"] != "ok":
            raise RuntimeError(f"the fuzz prelude does not run: {done['error']}")
        if getattr(self, "host", None) is not None:
            self.host.changes()   # what making an engine changes is not a cell's doing
        self.scene.ignore_own_access()

    def run(self):
        try:
            if self.opts["cells"] is not None:
                for cell in self.opts["cells"]:
                    self.one(cell)
            elif self.opts["driver"] == "random":
                import random
                rng = random.Random(self.opts["seed"])
                while self.tried < self.opts["count"]:
                    self.one(self.grammar.build_cell(self.grammar.RandomChooser(rng.random())))
            else:
                self._hypothesis()
        except Enough:
            pass
        self.progress.write(json.dumps({"summary": True, "cells": self.tried,
                                        "sources": self.oracles.imported_source_hashes()}) + "\n")
        self.progress.close()
        self.scene.close()

    def _hypothesis(self):
        from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st
        from hypothesis.configuration import set_hypothesis_home_dir

        # hypothesis keeps a directory in the working directory (the scene's root, which is watched)
        set_hypothesis_home_dir(os.path.join(os.path.dirname(self.opts["progress"]), ".hypothesis"))

        @settings(max_examples=min(self.opts["count"], 10**6), database=None, deadline=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @seed(self.opts["seed"])
        @given(st.data())
        def explore(data):
            self.one(self.grammar.build_cell(self.grammar.HypothesisChooser(data)))
        explore()

    def one(self, cell: str):
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise Enough()
        if self.in_engine >= CELLS_PER_ENGINE:
            self._new_engine()
        self.progress.write(json.dumps({"cell": cell, "fresh_engine": self.in_engine == 0}) + "\n")
        self.in_engine += 1
        self.tried += 1
        problems = self.judge(cell)
        self.progress.write(json.dumps({"outcome": self.outcome}) + "\n")
        if problems:
            known = self.oracles.known_finding(problems, cell)
            self.progress.write(json.dumps({"cell": cell, "problems": problems, "known": known,
                                            "seed": self.opts["seed"]}) + "\n")
            self.scene.reset()
            self.host.changes()   # the new fingerprint is the baseline for what follows
            self._new_engine()

    def judge(self, cell: str) -> list[str]:
        events: list = []
        self.raised.clear()
        problems = []
        try:
            done = self.engine.run_cell(cell, emit=events.append)
        except BaseException as exc:  # noqa: B902 - run_cell must never raise: that is the finding
            self.outcome = "run_cell raised"
            return [f"run_cell raised {type(exc).__name__}: {exc}"]
        self.outcome = (done.get("error") or {}).get("ename") or "ok"
        self.gc.collect()   # finalizers of the cell's objects run now, outside any cell
        text = self.oracles.cell_text_of(events, done)
        if self.scene.leaked(text) or any(map(self.scene.leaked, self.oracles.strings_of(self.engine.namespace))):
            problems.append("the secret reached the cell")
        problems += self.scene.touched()
        problems += self.host.changes()
        for exc in self.raised + self.oracles.caught_exceptions(self.engine.namespace):
            internal = self.oracles.internal_error(exc)
            if internal and internal not in problems:
                problems.append(internal)
        trivial_events: list = []
        try:
            trivial = self.engine.run_cell(TRIVIAL[0], emit=trivial_events.append)
            out = "".join(e["data"].get("text/plain", "") for e in trivial_events if e["type"] == "result")
            if trivial["status"] != "ok" or out != TRIVIAL[1]:
                problems.append(f"the engine no longer runs a trivial cell: {trivial.get('error')} {out!r}")
        except BaseException as exc:  # noqa: B902
            problems.append(f"the engine no longer runs a trivial cell: {type(exc).__name__}: {exc}")
        return problems


def _give_a_gate_a_bug() -> None:
    """Control for the tests: the gates' name check becomes careless (NFKC of whatever it is given, no
    type check first), so an attribute name that is not a str raises TypeError inside the runtime."""
    import functools
    import unicodedata

    from sandbox_kernel import gates

    gates._normalise = functools.partial(unicodedata.normalize, "NFKC")


class PlainEngine:
    """Control for the tests: runs cells as plain Python, so every attack acts and each oracle must see it."""

    def __init__(self):
        self.namespace = {"__name__": "__main__"}

    def run_cell(self, source, *, emit, limits=None):
        import contextlib
        import io

        out = io.StringIO()
        error = None
        with contextlib.redirect_stdout(out):
            try:
                try:
                    code, mode = compile(source, "<plain>", "eval"), "eval"
                except SyntaxError:
                    code, mode = compile(source, "<plain>", "exec"), "exec"
                value = eval(code, self.namespace)
                if mode == "eval" and value is not None:
                    emit({"type": "result", "data": {"text/plain": repr(value)}})
            except Exception as exc:  # noqa: BLE001 - reported like the engine does
                error = {"ename": type(exc).__name__, "evalue": str(exc)}
        emit({"type": "stream", "name": "stdout", "text": out.getvalue()})
        return {"status": "error" if error else "ok", "error": error}


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    child(json.loads(sys.argv[1]))
