"""The self-audit (`python -m sandbox_kernel audit`, issue 13 item 1): at every level every canary the
level promises holds, at level `process` the native canaries get through (the control that shows they
are real attempts), at `kernel` the OS layers stop them all; an engine that does not sandbox is caught
canary by canary; the native audit engine runs nothing but its fixed canaries; a kernel started with
audit_on_start shows the result in %sandbox_status and refuses cells when the audit failed."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest

from isolation_support import kernel_level_problem
from sandbox_kernel.audit import cells, native, run
from sandbox_kernel.audit.outcome import BREACHED, HELD, NOT_CONTAINED
from sandbox_kernel.policy import PRESETS

LEVELS = ["none", "process"] + (["kernel"] if kernel_level_problem() is None else [])
NATIVE_IDS = [c.id for c in run.NATIVE_CANARIES]
ENGINE_IDS = [c.id for c in cells.ENGINE_CANARIES]


def audit(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sandbox_kernel", "audit", *args], cwd=str(cwd),
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """One audit per level, run as an operator would (JSON for agents)."""
    out = {}
    for level in LEVELS:
        done = audit("--isolation", level, "--json", cwd=tmp_path_factory.mktemp(f"audit-{level}"))
        assert done.stdout.startswith("{"), done.stderr[-2000:]
        out[level] = (done.returncode, json.loads(done.stdout), done.stderr)
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_every_promised_canary_holds(reports, level):
    code, report, stderr = reports[level]
    verdicts = {c["id"]: c["verdict"] for c in report["canaries"]}
    assert code == 0 and report["passed"] is True, (report["failed"], stderr)
    assert [c["id"] for c in report["canaries"] if c["kind"] == "cell"] == ENGINE_IDS
    assert all(verdicts[i] == HELD for i in ENGINE_IDS), verdicts
    assert report["policy"] == "data-science" and report["isolation"] == level
    assert report["host"]["landlock_abi"] == (run.host_landlock_abi())
    if level == "none":
        assert not any(c["kind"] == "native" for c in report["canaries"])


def test_at_level_process_native_code_gets_through_and_is_not_counted(reports):
    """The control: the native canaries are real attempts (each one worked where no OS layer stands), and
    the table says so without failing the level."""
    code, report, _ = reports["process"]
    native_lines = {c["id"]: c for c in report["canaries"] if c["kind"] == "native"}
    assert list(native_lines) == NATIVE_IDS
    for line in native_lines.values():
        assert line["verdict"] == NOT_CONTAINED and line["promised"] is False, line
    assert "marker created" in native_lines["native-spawn"]["detail"]
    assert "listener received" in native_lines["native-connect"]["detail"]
    assert "secret was read" in native_lines["native-read"]["detail"]
    assert "written" in native_lines["native-write"]["detail"]
    assert "SIGWINCH" in native_lines["native-signal"]["detail"]
    assert report["os_layers"]["active"] == ["rlimits"]


@pytest.mark.skipif("kernel" not in LEVELS, reason=f"kernel level unavailable: {kernel_level_problem()}")
def test_at_level_kernel_the_os_layers_stop_every_native_canary(reports):
    code, report, _ = reports["kernel"]
    native_lines = [c for c in report["canaries"] if c["kind"] == "native"]
    assert [c["id"] for c in native_lines] == NATIVE_IDS
    assert all(c["verdict"] == HELD and c["promised"] for c in native_lines), native_lines
    assert all("PermissionError" in c["detail"] for c in native_lines), native_lines
    layers = report["os_layers"]
    assert {"landlock", "seccomp", "rlimits"} <= set(layers["active"]) and layers["degraded"] is False
    assert layers["details"]["landlock"]["host_abi"] == report["host"]["landlock_abi"] > 0


def test_the_table_has_one_line_per_canary(tmp_path):
    """The table an operator reads, here for the strict policy (no pandas, numpy or plotly: those canaries
    hold because the import is refused, and say so)."""
    done = audit("--isolation", "none", "--policy", "strict", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Sandboxed Python self-audit: policy 'strict', isolation 'none'")
    assert lines[1].startswith("OS layers in force: none") and "Landlock ABI" in lines[2]
    rows = {ln.split()[1]: ln for ln in lines[5:-2]}
    assert list(rows) == ENGINE_IDS and all(row.split()[2] == HELD for row in rows.values())
    assert "the library is not granted" in rows["plotly-figure"] and "ImportDenied" in rows["styler-env"]
    assert lines[-1] == f"PASSED: {len(ENGINE_IDS)} held"
    assert not os.listdir(tmp_path)  # nothing left behind in the directory it ran from


@pytest.mark.skipif("kernel" not in LEVELS, reason=f"kernel level unavailable: {kernel_level_problem()}")
def test_a_level_that_cannot_be_set_up_fails_the_audit(tmp_path):
    """Fail closed: without Landlock (and no degraded mode) level kernel runs nothing, so the audit
    cannot show anything holds; it says why and exits 1."""
    done = audit("--isolation", "kernel", "--landlock-abi", "0", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["passed"] is False
    assert report["failed"] == ["control"] and "does not run honest code" in report["canaries"][0]["detail"]


@pytest.mark.skipif("kernel" not in LEVELS, reason=f"kernel level unavailable: {kernel_level_problem()}")
def test_degraded_mode_reports_what_its_missing_layer_would_hold(tmp_path):
    done = audit("--isolation", "kernel", "--landlock-abi", "0", "--degraded", "--json", cwd=tmp_path)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["os_layers"]["failed"] == ["landlock"], report["failed"]
    verdicts = {c["id"]: (c["verdict"], c["detail"]) for c in report["canaries"] if c["kind"] == "native"}
    for cid in ("native-read", "native-write", "native-create"):
        assert verdicts[cid][0] == NOT_CONTAINED and "landlock is not active" in verdicts[cid][1]
    for cid in ("native-spawn", "native-fork", "native-connect", "native-signal"):
        assert verdicts[cid][0] == HELD, verdicts[cid]


def test_an_engine_that_does_not_sandbox_is_caught(monkeypatch):
    """The audit can fail: with the cells run as plain Python (the test-only RogueEngine in a worker),
    each attempt acts and each canary says how."""
    from sandbox_kernel.isolation import make_backend

    tests_dir = os.path.dirname(os.path.abspath(__file__))

    def rogue_backends(level, policy, scene, options):
        return make_backend("process", policy, scene.work, spare=False, warm=(), idle_cpu=None,
                            engine="isolation_support:RogueEngine", extra_sys_path=[tests_dir]), None

    wanted = {"process", "network", "files", "signal", "gadget", "frames"}
    monkeypatch.setattr(run, "_backends", rogue_backends)
    monkeypatch.setattr(run, "ENGINE_CANARIES", [c for c in cells.ENGINE_CANARIES if c.group in wanted])
    report = run.run_audit(PRESETS["data-science"], "process")
    lines = {c["id"]: c for c in report["canaries"]}
    assert report["passed"] is False
    expected = {"subprocess": "marker", "os-system": "marker", "dunder-import": "marker",
                "socket": "listener received", "urllib": "listener received", "pandas-url": "listener received",
                "read-open": "secret", "read-relative": "secret", "read-pandas": "secret",
                "write-open": "written", "create-open": "created outside", "write-pandas": "written",
                "write-numpy": "created outside", "signal": "victim",
                "numpy-interface": "handed out", "numpy-object-buffer": "handed out"}
    expected.update({cid: "os module it reached was used" for cid in (
        "subclasses", "print-self", "module-attribute", "computed-name", "styler-env", "generator-frame",
        "traceback-frame")})
    expected.update({cid: "handed out" for cid in ("format", "format-map", "coroutine-frame")})
    for cid in [c.id for c in cells.GADGETS + cells.FRAMES] + list(expected):
        assert lines[cid]["verdict"] == BREACHED, lines[cid]
    for cid, word in expected.items():
        assert word in lines[cid]["detail"], lines[cid]
    assert set(expected) <= set(report["failed"])


# -- the native audit engine runs its fixed canaries and nothing else ---------------------------------------

@pytest.mark.parametrize("source", [
    "import os\nos.system('true')",
    "{}",
    json.dumps({"canary": "exec", "args": {}}),
    json.dumps({"canary": "fork", "args": {"code": "print(1)"}}),
    json.dumps({"canary": "read", "args": {"path": "relative.txt", "digest": "0" * 64}}),
    json.dumps({"canary": "connect", "args": {"port": 80, "tag": "FLUSHALL"}}),
    json.dumps({"canary": "signal", "args": {"pid": 1}}),
    json.dumps({"canary": "spawn", "args": {"path": "/tmp/x", "argv": ["sh"]}}),
])
def test_the_native_engine_refuses_anything_but_its_canaries(source):
    events = []
    done = native.NativeCanaries(PRESETS["strict"]).run_cell(source, emit=events.append)
    assert done["status"] == "error" and done["error"]["ename"] == "AuditRequestRefused"
    assert [e["type"] for e in events] == ["error"]


@pytest.mark.parametrize("canary", ["append", "create", "spawn", "read"])
def test_the_native_engine_touches_only_audit_files(tmp_path, canary):
    victim = tmp_path / "notes.txt"
    victim.write_text("keep")
    for path in (victim, tmp_path / "new.txt"):
        events = []
        args = {"path": str(path), **({"digest": hashlib.sha256(b"keep").hexdigest()} if canary == "read" else {})}
        request = json.dumps({"canary": canary, "args": args})
        done = native.NativeCanaries(PRESETS["strict"]).run_cell(request, emit=events.append)
        outcome = json.loads(events[0]["data"]["text/plain"])
        assert done["status"] == "ok" and outcome["done"] is False and "sandbox-audit-" in outcome["error"]
    assert victim.read_text() == "keep" and sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_the_native_engine_evaluates_nothing():
    engine = native.NativeCanaries(PRESETS["strict"])
    assert engine.evaluate("1 + 1")["status"] == "error"


# -- the kernel's audit at start-up ---------------------------------------------------------------------

def _audit_line(client) -> str:
    out = client.run("%sandbox_status")["output"]
    return next(line for line in out.splitlines() if line.startswith("self-audit:"))


def test_audit_on_start_passes_and_status_shows_it(tmp_path):
    from kernel_helpers import shell_request, start_client

    client = start_client(options=["--SandboxKernel.audit_on_start=True"], isolation="none", cwd=str(tmp_path))
    try:
        assert shell_request(client, "kernel_info_request", {})["content"]["status"] == "ok"
        assert _audit_line(client).startswith(("self-audit: running", "self-audit: PASSED"))
        r = client.run("print(6 * 7)", timeout=300)   # waits for the audit, then runs
        assert r["status"] == "ok" and r["output"] == "42\n", r
        line = _audit_line(client)
        assert line.startswith(f"self-audit: PASSED: {len(ENGINE_IDS)} held at ") and "isolation 'none'" in line
    finally:
        client.shutdown()


def test_without_audit_on_start_status_says_it_did_not_run(tmp_path):
    from kernel_helpers import start_client

    client = start_client(isolation="none", cwd=str(tmp_path))
    try:
        assert _audit_line(client).startswith("self-audit: not run by this kernel")
    finally:
        client.shutdown()


@pytest.mark.skipif("kernel" not in LEVELS, reason=f"kernel level unavailable: {kernel_level_problem()}")
def test_a_failed_audit_refuses_cells(tmp_path):
    from kernel_helpers import start_client

    client = start_client(options=["--SandboxKernel.audit_on_start=True",
                                   "--SandboxKernel.isolation_options={'landlock_abi': 0, 'spare': False}"],
                          isolation="kernel", cwd=str(tmp_path))
    try:
        r = client.run("print('ran')", timeout=300)
        assert r["status"] == "error" and "ran" not in r["output"]
        assert r["error"]["ename"] == "SandboxUnavailable", r["error"]
        assert "self-audit run when this kernel started failed" in r["error"]["evalue"]
        assert "python -m sandbox_kernel audit --policy data-science --isolation kernel" in r["error"]["evalue"]
        assert _audit_line(client).startswith("self-audit: FAILED: 1 error (failing: control)")
    finally:
        client.shutdown()
