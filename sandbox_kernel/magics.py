"""Control magics: found in cell text, applied by the kernel, never by sandboxed code.

Cell text is untrusted, magic lines included. This module finds IPython syntax in a cell (line and
cell magics, ``!cmd``, ``x = !cmd``, ``obj?``), keeps the sandbox's own control magics and refuses
everything else. Applying a control magic can only move the cell's permissions within the operator's
ceiling: tightening always works, loosening stops at the ceiling with a message that names it.

Pure functions and plain data; the kernel holds the state.
"""
from __future__ import annotations

import argparse
import dataclasses
import re
import shlex
from dataclasses import dataclass, field

from .policy import ISOLATION_LEVELS, Limits, Policy

LINE_CONTROLS = ("sandbox_policy", "sandbox_isolation", "sandbox_status", "sandbox_audit")
CELL_CONTROL = "sandbox"

RAISE_CEILING_HINT = (
    "An operator raises the ceiling when launching the kernel, e.g. "
    "--SandboxKernel.ceiling_policy=NAME or c.SandboxKernel.ceiling_policy in a config file")


class MagicError(Exception):
    """A control magic that cannot be applied; the cell fails and nothing in it runs."""

    def __init__(self, message: str, *, kind: str = "magic", target: str = "", rule: str = "",
                 line: int | None = None, policy: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.kind, self.target, self.rule = kind, target, rule
        self.line, self.policy, self.hint = line, policy, hint

    def record(self) -> dict:
        return {"kind": self.kind, "target": self.target, "rule": self.rule, "line": self.line,
                "policy": self.policy, "hint": self.hint, "message": self.message}


@dataclass(frozen=True)
class Control:
    """One control magic found in a cell."""

    name: str          # without the % signs
    args: str
    line: int          # 1-based line in the cell
    cell: bool = False


@dataclass
class ParsedCell:
    code: str                                      # the cell with magic lines blanked out
    controls: list[Control] = field(default_factory=list)
    refused: list[MagicError] = field(default_factory=list)

    @property
    def cell_control(self) -> Control | None:
        return next((c for c in self.controls if c.cell), None)


# -- Finding IPython syntax ------------------------------------------------------------------------

_ASSIGN_MAGIC = re.compile(r"^[A-Za-z_][\w.,\s\[\]()*]*=\s*[!%]")
_MAGIC_NAME = re.compile(r"^%{1,2}([\w.]*)(.*)$", re.DOTALL)
_STRING_PREFIXES = {"r", "b", "u", "f", "rb", "br", "fr", "rf", "t", "tr", "rt"}


class _Scanner:
    """Tracks strings, brackets and continuations across lines, just enough to tell whether a line
    starts a new statement and whether a `?` sits outside strings and comments."""

    def __init__(self):
        self.quote: str | None = None   # the open string's delimiter
        self.depth = 0                  # open brackets
        self.backslash = False

    def at_statement_start(self) -> bool:
        return self.quote is None and self.depth == 0 and not self.backslash

    def scan(self, line: str) -> bool:
        """Consume one line; True when a `?` appears outside strings and comments."""
        self.backslash = False
        question = False
        i, n = 0, len(line)
        while i < n:
            ch = line[i]
            if self.quote:
                if ch == "\\":
                    i += 2
                elif line.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = None
                else:
                    i += 1
                continue
            if ch == "#":
                break
            if ch.isalnum() or ch == "_":
                # A whole identifier; a string prefix (r, b, f, rb ...) right before a quote.
                j = i
                while j < n and (line[j].isalnum() or line[j] == "_"):
                    j += 1
                if j < n and line[j] in "'\"" and line[i:j].lower() in _STRING_PREFIXES:
                    i = j
                    continue
                i = j
                continue
            if ch in "'\"":
                self.quote = ch * 3 if line.startswith(ch * 3, i) else ch
                i += len(self.quote)
                continue
            if ch in "([{":
                self.depth += 1
            elif ch in ")]}":
                self.depth = max(self.depth - 1, 0)
            elif ch == "?":
                question = True
            elif ch == "\\" and line[i + 1:].strip() == "":
                self.backslash = True
            i += 1
        # A single-quoted string cannot span lines without a backslash; close it to stay in sync.
        if self.quote in ("'", '"') and not line.endswith("\\"):
            self.quote = None
        return question


def _refusal(what: str, line: int, text: str, policy: str | None) -> MagicError:
    return MagicError(
        f"{what} is not available in the sandbox (line {line}): `{text.strip()[:80]}` was not run. "
        f"Only the sandbox control magics run here: %sandbox_policy, %%sandbox, %sandbox_isolation, "
        f"%sandbox_status, %sandbox_audit",
        kind="magic", target=text.strip().split()[0][:60] if text.strip() else what,
        rule="IPython magics, shell commands and help syntax do not run in the sandbox",
        line=line, policy=policy,
        hint="write plain Python; the sandbox control magics are listed in docs/operators.md")


def parse_cell(source: str, policy: str | None = None) -> ParsedCell:
    """Split a cell into plain Python (magic lines blanked, so line numbers stay) and magics."""
    lines = source.split("\n")
    parsed = ParsedCell(code="")
    out_lines = []
    scanner = _Scanner()
    first_code_line = True
    for index, text in enumerate(lines):
        lineno = index + 1
        stripped = text.lstrip()
        if scanner.at_statement_start() and stripped[:1] in ("%", "!", "?"):
            indented = stripped != text
            m = _MAGIC_NAME.match(stripped)
            if stripped.startswith("%%"):
                name, args = m.group(1), m.group(2).strip()
                if name == CELL_CONTROL and first_code_line and not indented:
                    parsed.controls.append(Control(name, args, lineno, cell=True))
                    out_lines.append("")
                    first_code_line = False
                    continue
                if name == CELL_CONTROL:
                    parsed.refused.append(MagicError(
                        f"%%sandbox must be the first line of the cell (line {lineno})",
                        target="%%sandbox", rule="cell magics come first", line=lineno, policy=policy))
                else:
                    parsed.refused.append(_refusal("the cell magic %%" + name, lineno, text, policy))
                # The rest of a cell under a cell magic is not Python; none of it runs.
                out_lines.extend("" for _ in lines[index:])
                break
            if stripped.startswith("%") and m and m.group(1) in LINE_CONTROLS:
                if indented:
                    parsed.refused.append(MagicError(
                        f"%{m.group(1)} must stand at the top level of the cell, not inside a block "
                        f"(line {lineno})", target="%" + m.group(1),
                        rule="control magics apply before the cell runs", line=lineno, policy=policy))
                else:
                    parsed.controls.append(Control(m.group(1), m.group(2).strip(), lineno))
                out_lines.append("")
                first_code_line = False
                continue
            what = {"%": "the magic %" + (m.group(1) if m else ""), "!": "the shell command",
                    "?": "help syntax"}[stripped[0]]
            parsed.refused.append(_refusal(what, lineno, text, policy))
            out_lines.append("")
            continue
        if scanner.at_statement_start() and _ASSIGN_MAGIC.match(stripped):
            parsed.refused.append(_refusal("assigning a magic or shell command", lineno, text, policy))
            out_lines.append("")
            continue
        if stripped and not stripped.startswith("#"):
            first_code_line = False
        if scanner.scan(text):
            parsed.refused.append(_refusal("help syntax (`obj?`)", lineno, text, policy))
            out_lines.append("")
            continue
        out_lines.append(text)
    parsed.code = "\n".join(out_lines)
    return parsed


# -- Applying control magics -------------------------------------------------------------------------


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
