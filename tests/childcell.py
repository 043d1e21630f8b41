"""Run one cell in a child Python process and get back a small JSON report.

Why a child: some attacks take the whole process down with them, or hold it past any limit: a C loop
that never checks the time limit, an allocation that fills the host's memory, forged objects that
segfault, a cell that uses up the file descriptors. In pytest's own process such a cell would hang,
kill or starve the whole run instead of failing one test. In a child it ends with the child, under a
hard subprocess timeout and the rlimits the test asks for.

    result = run_cell_in_child("x = '%10000000000d' % 1", limits=TIGHT, rlimits={"RLIMIT_AS": 4 << 30},
                               timeout=60)
    assert result["ename"] == "SizeDenied", result
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The limits most attack files give the cell: a runaway ends within about a second.
TIGHT = {"timeout": 1.0, "ticks": 10**7, "memory_mb": 256}

# How long a test waits for a child before it gives up: starting Python and the engine and running a cell with
# TIGHT's 1 s limit takes a few seconds on a loaded machine; a child still running after this is stuck where
# the limit cannot reach. A give-up, never a measure of speed.
GIVE_UP = 60.0


def ended_near_its_limit(result: dict, limits: dict = TIGHT) -> bool:
    """Whether the child's cell ended within ten times its time limit by the engine's own clock (ask for
    report=(..., "elapsed_ms")): the limit ended it, not the end of a computation in C the limit could not
    interrupt. Ten times, so that a loaded machine does not matter."""
    return result["elapsed_ms"] < 10 * limits["timeout"] * 1000

CHILD = textwrap.dedent("""
    import dataclasses, json, os, sys, tempfile
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS
    opts = json.loads(sys.argv[2])
    def probe_host(report):   # the test's probe replaces this; its imports run before the engine exists
        pass
    exec(opts["probe"])
    p = PRESETS[opts["policy"]]
    eng = Engine(p, workdir=tempfile.mkdtemp())
    limits = dataclasses.replace(p.limits, **opts["limits"]) if opts["limits"] else None
    for cell in sys.argv[1].split("\\n#CELL\\n"):   # several cells in one engine, separated by a '#CELL' line
        done = eng.run_cell(cell, emit=lambda e: None, limits=limits)
    known = {"status": done["status"], "ename": (done["error"] or {}).get("ename"), "denials": len(done["denials"]),
             "evalue": (done["error"] or {}).get("evalue"), "elapsed_ms": done["elapsed_ms"], "ticks": done["ticks"]}
    report = {key: known[key] for key in opts["report"]}
    report.update((name, bool(eng.namespace.get(name))) for name in opts["ns"])
    probe_host(report)
    print(json.dumps(report))
    if opts["hard_exit"]:
        sys.stdout.flush()
        os._exit(0)   # skip teardown of forged objects
""")


def run_cell_in_child(source: str, policy: str = "data-science", *, limits: dict | None = None,
                      rlimits: dict | None = None, timeout: float = 60, report=("status", "ename"), ns=(),
                      probe: str = "", hard_exit: bool = False) -> dict:
    """Run `source` as one cell of a fresh Engine (preset `policy`, its limits with `limits` replaced)
    in a child process, with `rlimits` ({"RLIMIT_AS": bytes, ...}) set on the child. A line '#CELL'
    splits `source` into cells run one after the other in that Engine.

    The dict has the `report` keys the test asks for (of the last cell): "status", "ename", "denials"
    (how many denial records), "evalue", "elapsed_ms" and "ticks" (as the engine reports them), "returncode" (of the
    child); `ns` names map to whether the cells left a
    truthy value there. `probe` is source run before the engine starts that may define ``probe_host(report)``,
    called after the cell to add what the host itself sees. `hard_exit` ends the child with
    os._exit(0) after the report. A child that printed nothing gives {"crashed": returncode,
    "stderr": its tail}; one past `timeout` seconds raises subprocess.TimeoutExpired.
    """
    def set_rlimits():
        import resource
        for name, value in rlimits.items():
            resource.setrlimit(getattr(resource, name), (value, value))

    opts = {"policy": policy, "limits": limits or {}, "report": [k for k in report if k != "returncode"],
            "ns": list(ns), "probe": textwrap.dedent(probe), "hard_exit": hard_exit}
    out = subprocess.run([sys.executable, "-c", CHILD, source, json.dumps(opts)], capture_output=True, text=True,
                         timeout=timeout, cwd=REPO, preexec_fn=set_rlimits if rlimits else None)
    lines = out.stdout.strip().splitlines()
    if not lines:
        return {"crashed": out.returncode, "stderr": out.stderr[-500:]}
    result = json.loads(lines[-1])
    if "returncode" in report:
        result["returncode"] = out.returncode
    return result


def savetxt_writer(path, payload: str = "echo PWNED-BY-REVIEW") -> str:
    """Source of a library callable that writes `payload` to `path` whatever positional argument follows
    (np.savetxt writes the rows before it looks at `footer`): what attacks plant for the host to call."""
    return (f"functools.partial(np.savetxt, {str(path)!r}, np.array([{payload!r}], dtype=object), "
            "'%s', ' ', '\\n', '')")


def host_probe(use: str, *, catch: str = "Exception", detail: bool = False) -> str:
    """A probe_host(report) that runs `use` as the host after the cell; what it raises (of `catch`) goes
    to report['host_error']: its type, and with `detail` its message."""
    error = "type(exc).__name__" + (" + ': ' + str(exc)[:200]" if detail else "")
    return ("def probe_host(report):\n    try:\n" + textwrap.indent(use or "pass", " " * 8) +
            f"\n    except {catch} as exc:\n        report['host_error'] = {error}\n")


def host_probe_any(use: str, *, detail: bool = False) -> str:
    """host_probe catching every BaseException the host's `use` raises (LimitExceeded, which a cell's code raises
    when the host runs it after the cell, among them)."""
    return host_probe(use, catch="BaseException", detail=detail)


def run_reporting(cell: str, **kwargs) -> dict:
    """run_cell_in_child reporting status, ename and evalue, ended with os._exit (forged objects are not torn down)."""
    return run_cell_in_child(cell, report=("status", "ename", "evalue"), hard_exit=True, **kwargs)


def run_with_host(cell: str, use: str) -> dict:
    """run_reporting, then `use` run as the host after the cell (host_probe_any, with the error's message); the
    child must not have crashed."""
    result = run_reporting(cell, probe=host_probe_any(use, detail=True))
    assert "crashed" not in result, result
    return result


def run_in_engine(source: str, tmp_path) -> tuple[dict, str]:
    """One cell in an Engine of this process (for cells that cannot crash it), working in tmp_path/"work" (next to
    conftest's `outside`): the done record and stdout."""
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    events = []
    done = Engine(PRESETS["data-science"], workdir=str(workdir)).run_cell(source, emit=events.append)
    return done, "".join(e.get("text", "") for e in events if e.get("type") == "stream")
