"""The audit's report as a table for people (one line per canary) and a one-line summary."""
from __future__ import annotations

from .outcome import BREACHED, ERROR, HELD, NOT_APPLICABLE, NOT_CONTAINED


def layers_text(report: dict) -> str:
    layers = report.get("os_layers") or {}
    if report.get("isolation") == "none":
        return "none (level none: the engine runs in this process; the gates are the only wall)"
    active = list(layers.get("active") or [])
    landlock = (layers.get("details") or {}).get("landlock") or {}
    if "landlock" in active and landlock.get("abi"):
        active[active.index("landlock")] = f"landlock (ABI {landlock['abi']})"
    text = ", ".join(active) or "none"
    if layers.get("failed"):
        text += f"; FAILED: {', '.join(layers['failed'])}"
    if layers.get("degraded"):
        text += " (degraded mode)"
    return text


def summary(report: dict) -> str:
    counts = report.get("counts") or {}
    parts = [f"{counts[v]} {v}" for v in (HELD, BREACHED, ERROR, NOT_CONTAINED, NOT_APPLICABLE) if counts.get(v)]
    head = "PASSED" if report.get("passed") else "FAILED"
    tail = f" (failing: {', '.join(report['failed'])})" if report.get("failed") else ""
    return f"{head}: {', '.join(parts) or 'no canaries ran'}{tail}"


def table(report: dict) -> str:
    host = report.get("host") or {}
    rows = [(f"{c['group']}{' (native)' if c['kind'] == 'native' else ''}", c["id"], c["verdict"], c["detail"],
             c["title"]) for c in report.get("canaries", [])]
    lines = [f"Sandboxed Python self-audit: policy '{report['policy']}', isolation '{report['isolation']}', "
             f"{report['time']}, {report['seconds']} s",
             f"OS layers in force: {layers_text(report)}",
             f"host: Linux {host.get('kernel')} ({host.get('machine')}), Landlock ABI {host.get('landlock_abi')}, "
             f"Python {host.get('python')}", ""]
    width = [max([len(r[i]) for r in rows] + [len(h)]) for i, h in enumerate(("group", "canary", "verdict"))]
    lines.append(f"{'group':<{width[0]}}  {'canary':<{width[1]}}  {'verdict':<{width[2]}}  evidence")
    for group, cid, verdict, detail, _ in rows:
        mark = verdict.upper() if verdict in (BREACHED, ERROR) else verdict
        lines.append(f"{group:<{width[0]}}  {cid:<{width[1]}}  {mark:<{width[2]}}  {detail}")
    if any(r[2] == NOT_CONTAINED for r in rows):
        why = ("level 'process' promises no OS layer (level 'kernel' does)" if report.get("isolation") == "process"
               else "in degraded mode level 'kernel' promises only what its active layers hold (docs/isolation.md)")
        lines += ["", f"not contained at this level: native code in the worker got through; {why}. "
                      "Not counted as a failure."]
    lines += ["", summary(report)]
    return "\n".join(lines) + "\n"
