"""Control magics: what %sandbox_policy, %%sandbox, %sandbox_isolation, %sandbox_status, %sandbox_audit
and %sandbox_files decide, and what they print.

One room for them, so a cell's path reads parse (magics.py) -> controls (here) -> backend -> publish,
and a reviewer finds every way a cell can change its own permissions in one file. The arguments come
from cell text, which is untrusted: a control magic can only move the cell's permissions within the
operator's ceiling, checked here. Tightening always works; loosening stops at the ceiling with a
message that names it. The state the controls change (policy, isolation, backend) and the operator's
configuration stay the kernel's; the controls read and write them through the kernel.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import shlex

from .magics import Control, MagicError
from .policy import ISOLATION_LEVELS, Limits, Policy

RAISE_CEILING_HINT = (
    "An operator raises the ceiling when launching the kernel, e.g. "
    "--SandboxKernel.ceiling_policy=NAME or c.SandboxKernel.ceiling_policy in a config file")


# -- The ceiling: what a cell may select -------------------------------------------------------------


def exceeds_message(policy: Policy, ceiling: Policy, why: list[str]) -> str:
    return (f"policy '{policy.name}' is beyond this kernel's ceiling '{ceiling.name}' "
            f"(it grants more: {', '.join(why)}). Tightening is always allowed; loosening stops at "
            f"the ceiling. {RAISE_CEILING_HINT}.")


def exceeds(policy: Policy, ceiling: Policy) -> list[str]:
    """Policy.exceeds, except that an object or module denial of the ceiling only counts when the
    policy grants the module it is about: `strict` (no pandas) is tighter than `data-science`, even
    though it does not repeat data-science's `pandas.DataFrame.query` rule."""
    why = policy.exceeds(ceiling)
    if "object rules" in why and not any(
            policy.module_allowed(path) for path in set(ceiling.object_deny) - set(policy.object_deny)):
        why.remove("object rules")
    if "denied modules" in why and not any(
            policy.module_allowed(name) for name in set(ceiling.denied_modules) - set(policy.denied_modules)):
        why.remove("denied modules")
    return why


def check_within_ceiling(policy: Policy, ceiling: Policy, line: int | None = None) -> Policy:
    why = exceeds(policy, ceiling)
    if why:
        raise MagicError(exceeds_message(policy, ceiling, why), kind="policy",
                         target=f"policy '{policy.name}'", rule=f"ceiling '{ceiling.name}'",
                         line=line, policy=ceiling.name, hint=RAISE_CEILING_HINT)
    return policy


def select_policy(name: str, policies: dict[str, Policy], ceiling: Policy, *,
                  limits_override: dict | None = None, line: int | None = None) -> Policy:
    """The named policy (with the operator's limit overrides), if it stays within the ceiling."""
    if name not in policies:
        raise MagicError(
            f"unknown policy '{name}' (line {line}); available: {', '.join(sorted(policies))}",
            kind="policy", target=f"policy '{name}'", rule="unknown policy", line=line,
            policy=ceiling.name, hint="an operator adds policies with --SandboxKernel.policies_dir")
    policy = policies[name]
    if limits_override:
        policy = dataclasses.replace(policy, limits=dataclasses.replace(policy.limits, **limits_override))
    return check_within_ceiling(policy, ceiling, line)


class _ArgParser(argparse.ArgumentParser):
    def error(self, message):  # argparse would exit the process
        raise MagicError(f"%%sandbox: {message}", target="%%sandbox", rule="bad arguments")


def _positive(kind):
    def convert(text):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value
    return convert


_CELL_ARGS = _ArgParser(prog="%%sandbox", add_help=False)
_CELL_ARGS.add_argument("--policy")
_CELL_ARGS.add_argument("--timeout", type=_positive(float), help="seconds of wall time")
_CELL_ARGS.add_argument("--memory", type=_positive(int), help="megabytes")
_CELL_ARGS.add_argument("--ticks", type=_positive(int))
_CELL_ARGS.add_argument("--output", type=_positive(int), help="bytes of text output")


def cell_policy(args: str, current: Policy, policies: dict[str, Policy], ceiling: Policy, *,
                limits_override: dict | None = None, line: int | None = None) -> Policy:
    """The policy for one `%%sandbox --policy NAME --timeout S --memory MB --ticks N` cell."""
    try:
        ns = _CELL_ARGS.parse_args(shlex.split(args))
    except ValueError as exc:
        raise MagicError(f"%%sandbox: {exc}", target="%%sandbox", rule="bad arguments", line=line) from None
    policy = current
    if ns.policy:
        policy = select_policy(ns.policy, policies, ceiling, limits_override=limits_override, line=line)
    changes = {k: v for k, v in (("timeout", ns.timeout), ("memory_mb", ns.memory),
                                 ("ticks", ns.ticks), ("output_bytes", ns.output)) if v is not None}
    if changes:
        policy = dataclasses.replace(policy, limits=dataclasses.replace(policy.limits, **changes))
        if not policy.limits.within(ceiling.limits):
            raise MagicError(
                f"%%sandbox limits {describe_limits(policy.limits)} are beyond the ceiling's "
                f"{describe_limits(ceiling.limits)} (policy '{ceiling.name}'). {RAISE_CEILING_HINT}, "
                f"or raises its limits with --SandboxKernel.limits.",
                kind="limit", target="%%sandbox limits", rule=f"ceiling '{ceiling.name}'", line=line,
                policy=ceiling.name, hint=RAISE_CEILING_HINT)
    return check_within_ceiling(policy, ceiling, line)


def isolation_rank(level: str) -> int:
    return ISOLATION_LEVELS.index(level)


def select_isolation(level: str, ceiling_level: str, *, line: int | None = None) -> str:
    """`level` if it is at least as strong as the ceiling's (the weakest level a cell may pick)."""
    if level not in ISOLATION_LEVELS:
        raise MagicError(
            f"unknown isolation level '{level}'; the levels are {', '.join(ISOLATION_LEVELS)} "
            f"(weakest to strongest)", kind="policy", target=f"isolation '{level}'",
            rule="unknown isolation level", line=line)
    if isolation_rank(level) < isolation_rank(ceiling_level):
        raise MagicError(
            f"isolation '{level}' is weaker than this kernel's ceiling '{ceiling_level}'; choose "
            f"{' or '.join(ISOLATION_LEVELS[isolation_rank(ceiling_level):])}. An operator lowers the "
            f"ceiling with --SandboxKernel.isolation_ceiling=LEVEL.",
            kind="policy", target=f"isolation '{level}'", rule=f"isolation ceiling '{ceiling_level}'",
            line=line, hint="an operator sets --SandboxKernel.isolation_ceiling")
    return level


def describe_limits(limits: Limits) -> str:
    def show(value, unit=""):
        return "unlimited" if value is None else f"{value:g}{unit}" if isinstance(value, float) else f"{value}{unit}"
    return (f"timeout {show(limits.timeout, ' s')}, memory {show(limits.memory_mb, ' MB')}, "
            f"ticks {show(limits.ticks)}, output {show(limits.output_bytes, ' bytes')}")


def describe_policy(policy: Policy, *, ceiling: Policy | None = None, isolation: str | None = None) -> str:
    """What `%sandbox_policy` prints."""
    lines = [f"policy: {policy.name}" + (f" - {policy.description}" if policy.description else ""),
             f"modules: {', '.join(policy.allowed_top_modules()) or '(none)'}",
             f"files: {'working directory only' if policy.files else 'off'}; "
             f"network: {'on' if policy.network else 'off'}",
             f"limits: {describe_limits(policy.limits)}"]
    if isolation:
        lines.append(f"isolation: {isolation}")
    if ceiling is not None:
        lines.append(f"ceiling: {ceiling.name} (cells may tighten freely and loosen up to this)")
    return "\n".join(lines) + "\n"


# -- Applying control magics in a kernel ------------------------------------------------------------


class Controls:
    """The control magics of one kernel. The kernel keeps the state they change and the operator's
    configuration (traitlets, as ipykernel does); this reads and changes them through the kernel, so that
    a cell's controls cross over once, in `apply`."""

    def __init__(self, kernel):
        self.kernel = kernel

    def apply(self, controls: list[Control], policy: Policy) -> tuple[Policy, str]:
        """Apply the cell's control magics in order; returns the cell's policy and text to print."""
        kernel = self.kernel
        notes = []
        overrides = kernel._limit_overrides()
        for control in controls:
            if control.cell:
                policy = cell_policy(control.args, policy, kernel._policies, kernel.ceiling,
                                     limits_override=overrides, line=control.line)
                notes.append(self._worker_for(policy))
            elif control.name == "sandbox_policy":
                if control.args:
                    policy = select_policy(control.args.split()[0], kernel._policies, kernel.ceiling,
                                           limits_override=overrides, line=control.line)
                    kernel.current_policy = policy
                    notes.append(f"policy for this and the following cells: {policy.name}\n")
                    notes.append(self._worker_for(policy))
                else:
                    notes.append(describe_policy(policy, ceiling=kernel.ceiling,
                                                 isolation=kernel.current_isolation))
                    if kernel.files_off_reason:
                        notes.append(f"note: {kernel.files_off_reason}\n")
            elif control.name == "sandbox_isolation":
                notes.append(self._isolation_magic(control))
            elif control.name == "sandbox_status":
                notes.append(self._status_text(policy, control))
            elif control.name == "sandbox_audit":
                notes.append(self._audit_text())
            elif control.name == "sandbox_files":
                notes.append(self._files_text(policy, control))
            kernel._audit_event("magic", magic=("%%" if control.cell else "%") + control.name,
                                args=control.args[:200], line=control.line, policy=policy.name)
        return policy, "".join(notes)

    def _worker_for(self, policy: Policy) -> str:
        """A worker whose OS limits are tighter than `policy` needs is replaced (state is lost)."""
        kernel = self.kernel
        needs_restart_for = getattr(kernel._backend, "needs_restart_for", None)
        reason = needs_restart_for(policy) if needs_restart_for else None
        if not reason:
            return ""
        kernel._audit_event("worker_restart", reason=reason, policy=policy.name,
                            isolation=kernel.current_isolation)
        kernel._backend.restart(policy)
        return f"a new sandbox worker was started because {reason}; variables from earlier cells are gone\n"

    def _isolation_magic(self, control: Control) -> str:
        kernel = self.kernel
        levels = ", ".join(ISOLATION_LEVELS)
        if not control.args:
            return (f"isolation: {kernel.current_isolation} (levels, weakest to strongest: {levels}; "
                    f"this kernel allows {kernel.isolation_floor} or stronger)\n")
        level = select_isolation(control.args.split()[0], kernel.isolation_floor, line=control.line)
        if level == kernel.current_isolation:
            return f"isolation is already {level}\n"
        previous = kernel.current_isolation
        try:
            kernel._replace_backend(level)
        except NotImplementedError as exc:
            kernel._replace_backend(previous)
            raise MagicError(f"isolation level '{level}' is not available in this build ({exc}); "
                             f"staying at '{previous}'", kind="policy", target=f"isolation '{level}'",
                             rule="not available", line=control.line) from None
        return (f"isolation: {level}. The namespace starts fresh: variables from the '{previous}' level "
                f"are not carried over.\n")

    def _status_text(self, policy: Policy, control: Control) -> str:
        """A short summary for people; ``--json``: every detail (the OS layers' rules, the worker's
        record) as one JSON document."""
        kernel = self.kernel
        args = control.args.split()
        if args not in ([], ["--json"]):
            raise MagicError(f"%sandbox_status takes no argument but --json, not {control.args[:100]!r}",
                             target="%sandbox_status", rule="usage", line=control.line)
        status = self._backend_status()
        layers = status.get("os_layers") or {}
        worker = status.get("worker")
        self_audit = (kernel._startup_audit.status_line() if kernel._startup_audit is not None else
                      "self-audit: not run by this kernel (--SandboxKernel.audit_on_start=True, or python -m "
                      "sandbox_kernel audit)")
        if args == ["--json"]:
            detail = {"policy": policy.name, "ceiling": kernel.ceiling.name,
                      "limits": dataclasses.asdict(policy.limits),
                      "files": bool(policy.files), "network": bool(policy.network),
                      "isolation": kernel.current_isolation, "isolation_floor": kernel.isolation_floor,
                      "protection": _protection(kernel.current_isolation, layers), "os_layers": layers,
                      "worker": worker, "output_caps": {"text_bytes": kernel.output_filter.text_bytes,
                                                         "display_bytes": kernel.output_filter.rich_bytes},
                      "denials": len(kernel._audit), "kernel_process": getattr(kernel, "process_protection", None),
                      "self_audit": self_audit, "files_off": kernel.files_off_reason, "error": status.get("error")}
            return json.dumps(detail, indent=1, default=str) + "\n"
        summary = {k: layers.get(k) for k in ("level", "active", "failed", "degraded") if k in layers}
        lines = [f"policy: {policy.name} (ceiling: {kernel.ceiling.name})",
                 f"limits: {describe_limits(policy.limits)}",
                 f"files: {'working directory only' if policy.files else 'off'}; "
                 f"network: {'on' if policy.network else 'off'}",
                 f"isolation: {kernel.current_isolation} (weakest allowed: {kernel.isolation_floor})",
                 f"protection: {_protection(kernel.current_isolation, layers)}",
                 f"os layers: {_describe_layers(layers)}",
                 f"os layer details: {json.dumps(summary, default=str)}",
                 f"worker: {json.dumps(_worker_summary(worker), default=str)}",
                 f"output caps: text {kernel.output_filter.text_bytes:,} bytes, "
                 f"display {kernel.output_filter.rich_bytes:,} bytes per cell",
                 f"denials so far: {len(kernel._audit)}",
                 f"kernel process: {_describe_protection(getattr(kernel, 'process_protection', None))}",
                 self_audit]
        if "error" in status:
            lines.append(f"backend: {status['error']}")
        if kernel.files_off_reason:
            lines.append(f"note: {kernel.files_off_reason}")
        lines.append("every detail (each layer's rules, the worker's record): %sandbox_status --json")
        return "\n".join(lines) + "\n"

    def _backend_status(self) -> dict:
        """The backend's status once its worker has started (or failed to): a worker still starting has
        no layers yet, and 'active: none' would misreport them."""
        kernel = self.kernel
        try:
            wait_ready = getattr(kernel.backend, "wait_ready", None)
            if wait_ready is not None:
                wait_ready()
            return kernel.backend.status()
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}

    def _files_text(self, policy: Policy, control: Control) -> str:
        """%sandbox_files [--json] [PATH]: the entries of a directory inside the working directory, read
        by the kernel (which has that directory on its own host, also behind a gateway where the client
        does not). Relative paths only, no '..', no symbolic link followed, only when the cell's policy
        gives files; the same refusal as a cell's otherwise."""
        kernel = self.kernel
        from .client.localfiles import list_directory
        from .client.results import SandboxDenied

        rest = control.args.strip()
        as_json = rest == "--json" or rest.startswith("--json ")
        path = (rest[len("--json"):].strip() if as_json else rest) or "."   # the rest of the line: spaces allowed
        if not policy.files or kernel.files_off_reason:
            raise MagicError(f"file access to '{path}' is not allowed by policy '{policy.name}'", kind="file",
                             target=path, rule=kernel.files_off_reason or "the policy gives no files",
                             line=control.line, policy=policy.name)
        try:
            entries = list_directory(kernel.workdir, path)
        except SandboxDenied as exc:
            raise MagicError(f"file access to '{path}' is not allowed by policy '{policy.name}': {exc.denial.rule}",
                             kind="file", target=path, rule=exc.denial.rule, line=control.line,
                             policy=policy.name) from None
        except OSError as exc:
            raise MagicError(f"%sandbox_files {path}: {exc.strerror or type(exc).__name__}",
                             target="%sandbox_files", rule="no such directory", line=control.line,
                             policy=policy.name) from None
        if as_json:
            return json.dumps({"path": path, "entries": [{"name": e.name, "kind": e.kind, "size": e.size}
                                                         for e in entries]}) + "\n"
        return "".join(f"{e.kind:<8}{e.size:>12,}  {e.name}\n" for e in entries) or f"{path}: empty\n"

    def _audit_text(self) -> str:
        kernel = self.kernel
        if not kernel._audit:
            return "no denials in this kernel yet\n"
        lines = [f"[cell {e.get('cell')}] {e.get('kind')}: {e.get('message')}" for e in kernel._audit]
        return "\n".join(lines) + "\n"


# -- What %sandbox_status says about the walls ---------------------------------------------------------


def _describe_layers(layers) -> str:
    if not isinstance(layers, dict) or not layers:
        return "none (cells run in the kernel's process; the Python gates are the only wall)"
    active = ", ".join(layers.get("active") or []) or "none"
    failed = ", ".join(str(f) for f in layers.get("failed") or []) or "none"
    return f"active: {active}; failed: {failed}; degraded: {'yes' if layers.get('degraded') else 'no'}"


def _worker_summary(worker) -> dict | None:
    """What a person reads of the worker's record (%sandbox_status --json has all of it)."""
    if not isinstance(worker, dict):
        return worker
    return {k: worker.get(k) for k in ("pid", "state", "error", "cells", "restarts", "spare") if k in worker}


def _describe_protection(protection) -> str:
    if not protection:
        return "not made non-dumpable (SandboxKernel.protect_process is off)"
    if protection.get("dumpable") is False:
        return "non-dumpable (no other process of the user can open its /proc memory or environment)"
    return f"dumpable ({protection.get('error') or 'unknown'})"


def _protection(level: str, layers) -> str:
    """What the level holds against, in one honest sentence (docs/security.md has the detail)."""
    if level == "none":
        return ("the Python gates only, in the kernel's own process: this contains cooperative code "
                "(mistakes, runaway loops), not an attacker; a gap in the gates gives a cell the kernel's "
                "process and your account. Use isolation 'kernel' for untrusted code.")
    if level == "process":
        return ("the Python gates and a separate worker process (a crash or memory bomb ends the worker, not "
                "the kernel); the OS does not confine the worker, so code that gets past the gates can read "
                "your files and reach the network. Use isolation 'kernel' for untrusted code.")
    failed = layers.get("failed") if isinstance(layers, dict) else None
    if isinstance(layers, dict) and layers.get("degraded"):
        return (f"DEGRADED: the OS layers {', '.join(map(str, failed or [])) or '(unknown)'} are not applied "
                "(the operator allowed degraded mode); what they would stop is open to code that gets past "
                "the gates.")
    return ("the Python gates, and the OS confines the worker (no files outside the working directory, no "
            "network unless the policy allows it, no processes, no signals to other processes) even if a "
            "cell gets past the gates.")
