"""The audit: one configuration (policy, isolation level, worker options), every canary, one report.

At every level the canaries of cells.py run as cells through the real backend (one engine, one worker).
At the worker levels the same attempts also run as native code inside a second worker (native.py,
loaded through the backend's ``engine=`` option): there the OS layers alone must stop them. Level
`process` promises no OS layer, so a native canary that gets through is reported as "not contained at
this level", not as a failure; at `kernel` every native canary must hold (in degraded mode, those whose
layer is missing are reported as not contained, as documented).
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time
from dataclasses import dataclass

from ..policy import Policy
from .cells import AUDIT_LIMITS, CONTROL, ENGINE_CANARIES
from .native import TAG
from .outcome import BREACHED, ERROR, FAILING, HELD, NOT_APPLICABLE, NOT_CONTAINED, Outcome
from .scene import Scene

NATIVE_ENGINE = "sandbox_kernel.audit.native:NativeCanaries"
# Worker options an operator's configuration may carry into the audit's workers; the audit chooses the
# rest itself (never `engine`: the engine canaries run the real engine).
PASSED_OPTIONS = ("degraded", "landlock_abi", "fsize_mb", "nofile", "extra_read", "protect", "cpu_hours",
                  "max_syscall", "python", "workdir_files", "startup_timeout", "grace", "cancel_grace")


@dataclass(frozen=True)
class NativeCanary:
    id: str
    group: str
    title: str
    request: object       # (scene) -> (canary name, args)
    evidence: object      # (scene, outcome dict) -> evidence text or None
    layer: str            # the OS layer that must stop it at level kernel


def _said(outcome: dict) -> str | None:
    return "the attempt worked, the worker says" if outcome.get("done") else None


NATIVE_CANARIES = [
    NativeCanary("native-spawn", "process", "posix_spawn of the Python interpreter",
                 lambda s: ("spawn", {"path": s.marker("native-spawn")}),
                 lambda s, o: "a process ran (marker created)" if s.exists(s.marker("native-spawn")) else _said(o),
                 "seccomp"),
    NativeCanary("native-fork", "process", "fork()", lambda s: ("fork", {}), lambda s, o: _said(o), "seccomp"),
    NativeCanary("native-connect", "network", "TCP connect to the loopback listener",
                 lambda s: ("connect", {"port": s.listener.port}),
                 lambda s, o: "the loopback listener received the tag" if s.listener.saw(TAG.decode()) else _said(o),
                 "seccomp"),
    NativeCanary("native-read", "files", "read the secret outside the working directory",
                 lambda s: ("read", {"path": s.secret, "digest": s.digest}),
                 lambda s, o: "the secret was read" if o.get("matches") else _said(o), "landlock"),
    NativeCanary("native-write", "files", "append to a file outside",
                 lambda s: ("append", {"path": s.target("native-write")}),
                 lambda s, o: s.target_changed("native-write") or _said(o), "landlock"),
    NativeCanary("native-create", "files", "create a file outside",
                 lambda s: ("create", {"path": s.marker("native-create")}),
                 lambda s, o: "a file was created outside" if s.exists(s.marker("native-create")) else _said(o),
                 "landlock"),
    NativeCanary("native-signal", "signal", "kill(SIGWINCH) another process",
                 lambda s: ("signal", {"pid": s.victim.pid}),
                 lambda s, o: (f"the victim caught {s.victim.signals()}" if s.victim.signals() else _said(o)),
                 "seccomp"),
]
NATIVE_CONTROLS = ("control_workdir", "control_python")


def host_landlock_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    from ..isolation import landlock

    return landlock.abi_version()


def _run(backend, source: str, limits=None) -> Outcome:
    events: list = []
    try:
        done = backend.run_cell(source, emit=events.append, limits=limits)
    except Exception as exc:  # noqa: BLE001 - reported as the canary's error
        done = {"status": "error", "error": {"ename": type(exc).__name__, "evalue": str(exc)}}
    return Outcome(done, events)


def _line(canary, verdict: str, detail: str, *, kind: str, promised: bool = True) -> dict:
    return {"id": canary.id, "group": canary.group, "kind": kind, "title": canary.title, "verdict": verdict,
            "detail": detail, "promised": promised}


def _engine_canaries(backend, scene, policy: Policy, output_filter) -> list[dict]:
    outcomes = []
    for canary in ENGINE_CANARIES:
        limits = canary.limits(policy.limits) if canary.limits else policy.limits.tighten(AUDIT_LIMITS)
        outcomes.append((canary, limits, _run(backend, canary.source(scene), limits)))
    scene.listener.settle()
    lines = []
    for canary, limits, out in outcomes:
        context = {"policy": policy, "cell_limits": limits, "output_filter": output_filter}
        try:
            verdict, detail = canary.judge(out, scene, context)
        except Exception as exc:  # noqa: BLE001 - a judge that cannot decide proves nothing
            verdict, detail = ERROR, f"the audit could not judge it: {type(exc).__name__}: {exc}"
        lines.append(_line(canary, verdict, detail, kind="cell"))
    return lines


def _native_request(name: str, args: dict) -> str:
    return json.dumps({"canary": name, "args": args})


def _native_outcome(out: Outcome) -> dict:
    for data, _ in out.bundles:
        try:
            value = json.loads(data.get("text/plain", ""))
        except (AttributeError, ValueError):
            continue
        if isinstance(value, dict):
            return value
    return {"done": False, "error": out.refusal()}


def _native_canaries(backend, scene, level: str, policy: Policy) -> list[dict]:
    for name in NATIVE_CONTROLS:
        out = _run(backend, _native_request(name, {}))
        result = _native_outcome(out)
        if not (out.ok and result.get("done")):
            why = result.get("error") or out.refusal()
            return [_line(c, ERROR, f"the native worker does not run (control {name}: {why})", kind="native")
                    for c in NATIVE_CANARIES]
    layers = (backend.status() or {}).get("os_layers") or {}
    active = set(layers.get("active") or ())
    results = [(c, _native_outcome(_run(backend, _native_request(*c.request(scene))))) for c in NATIVE_CANARIES]
    scene.listener.settle()
    lines = []
    for canary, result in results:
        evidence = canary.evidence(scene, result)
        if canary.group == "network" and policy.network:
            lines.append(_line(canary, NOT_APPLICABLE, "the policy allows network", kind="native", promised=False))
        elif not evidence:
            lines.append(_line(canary, HELD, result.get("error") or "refused", kind="native"))
        elif level == "process":
            lines.append(_line(canary, NOT_CONTAINED, evidence, kind="native", promised=False))
        elif canary.layer not in active and layers.get("degraded"):
            lines.append(_line(canary, NOT_CONTAINED, f"{evidence} ({canary.layer} is not active: degraded mode)",
                               kind="native", promised=False))
        else:
            lines.append(_line(canary, BREACHED, evidence, kind="native"))
    return lines


def _backends(level: str, policy: Policy, scene, options: dict):
    from ..isolation import make_backend

    if level == "none":
        return make_backend("none", policy, scene.work), None
    passed = {k: v for k, v in (options or {}).items() if k in PASSED_OPTIONS}
    engine = make_backend(level, policy, scene.work, spare=False, idle_cpu=None, **passed)
    try:
        native = make_backend(level, policy, scene.native_work, spare=False, idle_cpu=None, warm=(),
                              engine=NATIVE_ENGINE, **passed)
    except BaseException:
        engine.shutdown()
        raise
    return engine, native


def run_audit(policy: Policy, level: str, options: dict | None = None, *, mime_allowlist=None) -> dict:
    """Run every canary under (policy, level, worker options); the report as plain JSON data."""
    from ..outputfilter import DEFAULT_MIME_ALLOWLIST, OutputFilter

    started, when = time.monotonic(), datetime.datetime.now(datetime.timezone.utc)
    output_filter = OutputFilter(list(mime_allowlist or DEFAULT_MIME_ALLOWLIST))
    scene = Scene()
    engine = native = None
    lines: list[dict] = []
    status: dict = {}
    try:
        try:
            engine, native = _backends(level, policy, scene, options or {})
            control = _run(engine, CONTROL)
            why = None if control.stdout == "42\n" else control.refusal()
        except Exception as exc:  # noqa: BLE001 - the configuration cannot run anything: say why
            why = f"the backend could not start: {type(exc).__name__}: {exc}"
        if why is not None:
            lines.append({"id": "control", "group": "control", "kind": "cell", "title": "an honest cell runs",
                          "verdict": ERROR, "detail": f"the sandbox does not run honest code: {why}",
                          "promised": True})
        else:
            lines += _engine_canaries(engine, scene, policy, output_filter)
            if native is not None:
                lines += _native_canaries(native, scene, level, policy)
        status = (engine.status() or {}) if engine is not None else {}
    finally:
        for backend in (engine, native):
            if backend is not None:
                backend.shutdown()
        scene.close()
    failed = [line for line in lines if line["promised"] and line["verdict"] in FAILING]
    counts: dict = {}
    for line in lines:
        counts[line["verdict"]] = counts.get(line["verdict"], 0) + 1
    return {
        "passed": not failed and bool(lines),
        "policy": policy.name,
        "isolation": level,
        "time": when.isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - started, 2),
        "counts": counts,
        "failed": [line["id"] for line in failed],
        "os_layers": status.get("os_layers") or {},
        "host": {"landlock_abi": host_landlock_abi(), "kernel": platform.release(), "python": sys.version.split()[0],
                 "machine": platform.machine()},
        "canaries": lines,
    }
