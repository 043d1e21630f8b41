"""Shared helpers for driving the sandbox engine in tests.

    def test_something(run):
        r = run("print(1 + 1)")
        assert r.ok and r.stdout == "2\\n"

Fixtures
  sandbox      a Sandbox (Engine with the data-science policy) whose working directory is tmp_path/"work"
  run          sandbox.run: runs one cell, returns a CellResult
  strict       a Sandbox with the strict policy
  outside      tmp_path/"outside": a host directory next to the working directory (must stay untouched)
  host_secret  a secret string held by a host-side module ``sandbox_test_host_secret`` and a host file
               outside the working directory; assert it never appears in any event (r.leaked(secret)).
"""
from __future__ import annotations

import dataclasses
import json
import sys
import types
from dataclasses import dataclass, field

import pytest

from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS


@dataclass
class CellResult:
    """What one cell did, in the shape tests want to assert on."""

    done: dict
    events: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.done["status"] == "ok"

    def _stream(self, name: str) -> str:
        return "".join(e["text"] for e in self.events if e["type"] == "stream" and e["name"] == name)

    @property
    def stdout(self) -> str:
        return self._stream("stdout")

    @property
    def stderr(self) -> str:
        return self._stream("stderr")

    @property
    def result_text(self) -> str | None:
        results = [e for e in self.events if e["type"] == "result"]
        return results[-1]["data"].get("text/plain") if results else None

    @property
    def displays(self) -> list:
        return [e["data"] for e in self.events if e["type"] == "display"]

    @property
    def error(self) -> dict | None:
        return self.done.get("error")

    @property
    def error_name(self) -> str | None:
        return self.error["ename"] if self.error else None

    @property
    def error_value(self) -> str:
        return self.error["evalue"] if self.error else ""

    @property
    def error_line(self) -> int | None:
        return self.error["line"] if self.error else None

    @property
    def denials(self) -> list[dict]:
        return list(self.done.get("denials", []))

    def denied(self, kind: str | None = None, line: int | None = None) -> bool:
        """True when a denial record of this kind (and cell line) was produced."""
        return any((kind is None or d["kind"] == kind) and (line is None or d["line"] == line)
                   for d in self.denials)

    @property
    def everything(self) -> str:
        """Every byte the cell sent out (events and summary), for secret searches."""
        return json.dumps(self.events, default=str) + json.dumps(self.done, default=str)

    def leaked(self, secret: str) -> bool:
        return secret in self.everything

    def __repr__(self) -> str:  # readable pytest failure messages
        return (f"CellResult(status={self.done['status']!r}, error={self.error_name}: {self.error_value[:300]!r}, "
                f"stdout={self.stdout[:300]!r}, result={str(self.result_text)[:200]!r}, "
                f"denials={[(d['kind'], d['line'], d['target']) for d in self.denials]})")


class Sandbox:
    """One Engine (one persistent namespace) in a temporary working directory."""

    def __init__(self, workdir, policy: str = "data-science"):
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.policy = PRESETS[policy]
        self.engine = Engine(self.policy, workdir=str(workdir))

    def run(self, source: str, **limits) -> CellResult:
        """Run one cell. Keyword arguments tighten the policy's limits (timeout=2, ticks=10**6 ...)."""
        events: list = []
        lim = dataclasses.replace(self.policy.limits, **limits) if limits else None
        done = self.engine.run_cell(source, emit=events.append, limits=lim)
        return CellResult(done, events)

    @property
    def ns(self) -> dict:
        return self.engine.namespace


@pytest.fixture
def sandbox(tmp_path) -> Sandbox:
    return Sandbox(tmp_path / "work")


@pytest.fixture
def run(sandbox):
    return sandbox.run


@pytest.fixture
def strict(tmp_path) -> Sandbox:
    return Sandbox(tmp_path / "work-strict", policy="strict")


@pytest.fixture
def outside(tmp_path):
    d = tmp_path / "outside"
    d.mkdir(exist_ok=True)
    return d


HOST_SECRET_MODULE = "sandbox_test_host_secret"


@pytest.fixture
def host_secret(tmp_path):
    """A secret the sandbox must never see: in a host module attribute and in a host file."""
    secret = "S3CR3T-" + tmp_path.name.upper().replace("_", "")
    mod = types.ModuleType(HOST_SECRET_MODULE)
    mod.SECRET = secret
    sys.modules[HOST_SECRET_MODULE] = mod
    (tmp_path / "secret.txt").write_text(secret + "\n")
    yield secret
    sys.modules.pop(HOST_SECRET_MODULE, None)


# -- what the run measured, printed after it ------------------------------------------------------------

def pytest_configure(config):
    import time
    config._sandbox_started = time.time()


def pytest_terminal_summary(terminalreporter, config):
    """The branch coverage the generated attacks reached in the security core (test_fuzz_attacks.py writes
    it; under xdist a worker does, so it goes through a file), when this run wrote it."""
    from pathlib import Path
    report = Path(__file__).parent / "artifacts" / "fuzz-coverage.txt"
    if report.exists() and report.stat().st_mtime >= getattr(config, "_sandbox_started", 0):
        terminalreporter.write_sep("-", "generated attacks: coverage of the security core")
        terminalreporter.write_line(report.read_text().rstrip())
    _write_file_times(terminalreporter)


def pytest_runtest_logreport(report):
    """Adds each phase's time to its test file's total (on the controller, which sees every worker's
    reports), for the per-file table below: a slow CI machine says which files it was slow in."""
    totals = _FILE_SECONDS
    path = report.nodeid.split("::", 1)[0]
    totals[path] = totals.get(path, 0.0) + getattr(report, "duration", 0.0)


_FILE_SECONDS: dict = {}


def _write_file_times(terminalreporter):
    if not _FILE_SECONDS:
        return
    ranked = sorted(_FILE_SECONDS.items(), key=lambda item: -item[1])
    import time
    total = sum(_FILE_SECONDS.values())
    wall = time.time() - getattr(terminalreporter.config, "_sandbox_started", time.time())
    terminalreporter.write_sep("-", f"time per test file (tests: {total:.0f} s over all workers; wall: {wall:.0f} s)")
    for path, seconds in ranked[:25]:
        terminalreporter.write_line(f"{seconds:8.1f}s  {path}")
