"""Control magics: found in cell text, applied by the kernel (controls.py), never by sandboxed code.

Cell text is untrusted, magic lines included. This module finds IPython syntax in a cell (line and
cell magics, ``!cmd``, ``x = !cmd``, ``obj?``), takes out the sandbox's own control magics, leaves the
syntax the engine runs itself (``%time``, ``%timeit``, ``%%writefile``, ``obj?``) in the code, and skips
every other line with a note. What a control magic then decides and prints is controls.py's.

Pure functions and plain data.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

LINE_CONTROLS = ("sandbox_policy", "sandbox_isolation", "sandbox_status", "sandbox_audit", "sandbox_files")
CELL_CONTROL = "sandbox"


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
    code: str                                      # the code for the engine (see parse_cell)
    controls: list[Control] = field(default_factory=list)
    refused: list[MagicError] = field(default_factory=list)
    skipped: list["Skipped"] = field(default_factory=list)

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


# -- IPython syntax the engine runs itself, and what is skipped --------------------------------------
# %time, %timeit, %%time, %%timeit, %%writefile and `obj?` are left in the code for the engine
# (cellmagics.py turns them into ordinary, rewritten Python run under the cell's limits). Every other IPython line is
# skipped: it becomes `pass` (so a block that held it stays valid and line numbers stay) and the kernel
# prints one note naming it and why; the rest of the cell runs. Only the syntax a reader of a notebook
# expects to do nothing visible here is skipped silently.

ENGINE_MAGICS = ("time", "timeit")
ENGINE_CELL_MAGICS = ENGINE_MAGICS + ("writefile", "file")   # %%file is IPython's old name of %%writefile

_SILENT = {
    "matplotlib": "plots are displayed inline already",
    "config": "IPython's display configuration does not apply to the sandbox's renderer",
}
_WHY = {
    "pip": "packages cannot be installed from inside the sandbox (an operator installs them for the kernel)",
    "conda": "packages cannot be installed from inside the sandbox (an operator installs them for the kernel)",
    "mamba": "packages cannot be installed from inside the sandbox (an operator installs them for the kernel)",
    "run": "running a file as a script would run code the cell did not show; paste it into a cell",
    "load": "loading a file or URL into the cell is not available; paste the code into a cell",
    "loadpy": "loading a file or URL into the cell is not available; paste the code into a cell",
    "env": "environment variables belong to the host",
    "set_env": "environment variables belong to the host",
    "system": "shell commands do not run in the sandbox (no processes)",
    "sx": "shell commands do not run in the sandbox (no processes)",
    "sc": "shell commands do not run in the sandbox (no processes)",
    "cd": "the working directory is fixed",
    "pwd": "the working directory is fixed",
    "load_ext": "IPython extensions do not load in the sandbox",
    "reload_ext": "IPython extensions do not load in the sandbox",
    "unload_ext": "IPython extensions do not load in the sandbox",
    "autoreload": "IPython extensions do not load in the sandbox",
    "aimport": "IPython extensions do not load in the sandbox",
    "debug": "debuggers and profilers are not available",
    "pdb": "debuggers and profilers are not available",
    "prun": "debuggers and profilers are not available",
    "lprun": "debuggers and profilers are not available",
    "memit": "debuggers and profilers are not available",
    "mprun": "debuggers and profilers are not available",
    "precision": "IPython's display settings do not apply; format numbers with f-strings or round()",
}
_DEFAULT_WHY = "IPython magics do not run in the sandbox (only %time, %timeit and the %sandbox_* controls do)"
_SHELL_WHY = "shell commands do not run in the sandbox (no processes)"
_CELL_WHY = ("the cell magic %%{name} does not run in the sandbox (only %%time, %%timeit, %%writefile and "
             "%%sandbox do); nothing in this cell ran")
_LATE_CELL_MAGIC_WHY = "a cell magic must be the first line of its cell; this line and the ones after it were not run"

# `name?`, `name??` at the end of a line and `?name`, `??name` at its start: IPython's help syntax.
HELP_END = re.compile(r"(?<![\w.])((?!\d)\w+(?:\.(?!\d)\w+)*)\s*(\?\??)\s*$")
HELP_START = re.compile(r"^\s*(\?\??)\s*((?!\d)\w+(?:\.(?!\d)\w+)*)\s*$")


@dataclass(frozen=True)
class Skipped:
    """An IPython line the kernel did not run; the rest of the cell ran."""

    line: int
    text: str          # the line as written (shortened)
    reason: str
    silent: bool = False

    @property
    def magic(self) -> str:
        return self.text.split()[0][:60] if self.text.split() else self.text

    def note(self) -> str:
        return f"note: line {self.line}: `{self.text}` was skipped: {self.reason}\n"

    def record(self, policy: str | None) -> dict:
        return {"kind": "magic", "target": self.magic, "rule": "skipped: " + self.reason, "line": self.line,
                "policy": policy, "hint": "write plain Python", "message": self.note().strip()}


def help_target(text: str) -> tuple[str, int] | None:
    """(dotted name, 1 for `?` or 2 for `??`) when the line is IPython help syntax, else None."""
    m = HELP_START.match(text)
    if m:
        return m.group(2), len(m.group(1))
    m = HELP_END.search(text)
    if m and not text[:m.start()].strip():
        return m.group(1), len(m.group(2))
    return None


@dataclass(frozen=True)
class Line:
    """One line of a cell as the scanner sees it."""

    index: int         # 0-based
    text: str
    kind: str          # code | line_magic | cell_magic | shell | assign_magic | help | question
    name: str = ""     # the magic's name without % signs
    args: str = ""
    indented: bool = False
    starts_statement: bool = True   # for code: not inside a string, brackets or after a backslash


def statement_indent(text: str, lines_before) -> int:
    """The indentation a statement put in place of this line needs: its own, except on a cell's first
    code line, where IPython drops it (an indented `  !ls` alone in a cell)."""
    if any(line.strip() and not line.lstrip().startswith("#") for line in lines_before):
        return len(text) - len(text.lstrip())
    return 0


def scan_lines(source: str):
    """Each line of a cell with what it is. A magic, shell or help line counts only where a statement
    starts (not inside a string, brackets or after a backslash)."""
    scanner = _Scanner()
    for index, text in enumerate(source.split("\n")):
        stripped = text.lstrip()
        indented = stripped != text
        if scanner.at_statement_start() and stripped[:1] in ("%", "!", "?"):
            m = _MAGIC_NAME.match(stripped)
            if stripped.startswith("%%"):
                yield Line(index, text, "cell_magic", m.group(1), m.group(2).strip(), indented)
            elif stripped.startswith("%"):
                yield Line(index, text, "line_magic", m.group(1) if m else "", m.group(2).strip() if m else "",
                           indented)
            elif stripped.startswith("!"):
                yield Line(index, text, "shell", indented=indented)
            else:
                yield Line(index, text, "help" if help_target(text) else "question", indented=indented)
            continue
        if scanner.at_statement_start() and _ASSIGN_MAGIC.match(stripped):
            magic = stripped.split("=", 1)[1].strip()
            m = _MAGIC_NAME.match(magic)
            yield Line(index, text, "assign_magic", m.group(1) if m else "", m.group(2).strip() if m else "",
                       indented)
            continue
        at_start = scanner.at_statement_start()
        if scanner.scan(text):
            yield Line(index, text, "help" if at_start and help_target(text) else "question", indented=indented)
            continue
        yield Line(index, text, "code", indented=indented, starts_statement=at_start)


def parse_cell(source: str, policy: str | None = None) -> ParsedCell:
    """Split a cell into the code for the engine and the kernel's control magics.

    Control magics are blanked (line numbers stay); the IPython syntax the engine runs (ENGINE_MAGICS,
    `obj?`) is left as written; any other magic, shell or help line becomes `pass` and is listed in
    `skipped`. `refused` holds misplaced control magics: then nothing in the cell runs."""
    lines = source.split("\n")
    parsed = ParsedCell(code="")
    out_lines = []
    engine_lines: set = set()   # indices of the IPython lines the engine runs (%time, obj?): not Python yet
    automagic: set = set()      # indices of code lines that start a statement with an automagic name
    first_code_line = True

    def skip(line: Line, reason: str, silent: bool = False):
        parsed.skipped.append(Skipped(line.index + 1, line.text.strip()[:80], reason, silent))
        out_lines.append(" " * statement_indent(line.text, out_lines) + "pass")

    for line in scan_lines(source):
        lineno, text = line.index + 1, line.text
        if line.kind == "cell_magic":
            name = line.name
            if name == CELL_CONTROL and first_code_line and not line.indented:
                parsed.controls.append(Control(name, line.args, lineno, cell=True))
                out_lines.append("")
                first_code_line = False
                continue
            if name == CELL_CONTROL:
                parsed.refused.append(MagicError(
                    f"%%sandbox must be the first line of the cell (line {lineno})",
                    target="%%sandbox", rule="cell magics come first", line=lineno, policy=policy))
                out_lines.extend("" for _ in lines[line.index:])
                break
            starts_the_cell = not line.indented and not any(
                c.strip() and not c.lstrip().startswith("#") for c in out_lines)
            if name in ENGINE_CELL_MAGICS and starts_the_cell:
                out_lines.extend(lines[line.index:])    # the engine runs the rest as the magic's body
                break
            # The rest of a cell under any other cell magic is not Python; none of it runs.
            parsed.skipped.append(Skipped(lineno, text.strip()[:80], _CELL_WHY.format(name=name) if starts_the_cell
                                          else _LATE_CELL_MAGIC_WHY))
            out_lines.extend("" for _ in lines[line.index:])
            break
        if line.kind == "line_magic" and line.name in LINE_CONTROLS:
            if line.indented:
                parsed.refused.append(MagicError(
                    f"%{line.name} must stand at the top level of the cell, not inside a block "
                    f"(line {lineno})", target="%" + line.name,
                    rule="control magics apply before the cell runs", line=lineno, policy=policy))
            else:
                parsed.controls.append(Control(line.name, line.args, lineno))
            out_lines.append("")
            first_code_line = False
            continue
        first_code_line = first_code_line and not (text.strip() and not text.lstrip().startswith("#"))
        if line.kind in ("line_magic", "assign_magic") and line.name in ENGINE_MAGICS or line.kind == "help":
            out_lines.append(text)
        elif line.kind == "line_magic":
            if line.name in _SILENT:
                skip(line, _SILENT[line.name], silent=True)
            else:
                skip(line, _WHY.get(line.name, _DEFAULT_WHY))
        elif line.kind == "assign_magic":
            skip(line, _SHELL_WHY if text.split("=", 1)[1].strip().startswith("!")
                 else _WHY.get(line.name, _DEFAULT_WHY))
        elif line.kind == "shell":
            skip(line, _WHY["pip"] if re.match(r"!\s*(pip3?|conda|mamba)\s", text.strip()) else _SHELL_WHY)
        elif line.kind == "question":
            skip(line, "help syntax works on a name (`obj?`, `obj.attr??`); this line was not run")
        else:
            if line.starts_statement and _AUTOMAGIC.match(text):
                automagic.add(len(out_lines))
            out_lines.append(text)
            continue
        if line.kind != "help" and line.name not in ENGINE_MAGICS:
            continue
        engine_lines.add(len(out_lines) - 1)
    if automagic:
        _skip_automagic(out_lines, engine_lines, automagic, parsed.skipped)
    parsed.code = "\n".join(out_lines)
    return parsed


# IPython's automagic runs these names without a %: its shell-like magics and its default aliases on POSIX
# (`pip install x` is `%pip install x`, `ls data` is `!ls data`), when the line is not Python.
_AUTOMAGIC = re.compile(r"[ \t]*(pip3?|conda|mamba|cd|pwd|env|cat|clear|cp|ldir|less|lf|lk|ll|ls|lx|man|mkdir|more"
                        r"|mv|rm|rmdir)(?:[ \t]|$)")


def _skip_automagic(out_lines: list, engine_lines: set, automagic: set, skipped: list) -> None:
    """Automagic lines are skipped like `!cmd`, and the rest of the cell runs. Only a line where the cell stops
    parsing is one (`ls = [1]` and `cat(x)` are Python; `ls -l` parses, and fails as Python would)."""
    lines = ["pass" if i in engine_lines else text for i, text in enumerate(out_lines)]
    for _ in range(100):
        try:
            ast.parse("\n".join(lines))
            return
        except SyntaxError as exc:
            index = (exc.lineno or 0) - 1
        except (ValueError, RecursionError, MemoryError):   # the engine reports these for the whole cell
            return
        if index not in automagic or lines[index] != out_lines[index]:
            return
        text = out_lines[index]
        name = _AUTOMAGIC.match(text).group(1)
        why = _WHY["pip"] if name.startswith("pip") or name in ("conda", "mamba") else _WHY.get(name, _SHELL_WHY)
        skipped.append(Skipped(index + 1, text.strip()[:80], why + " (IPython runs this line as a shell command)"))
        lines[index] = out_lines[index] = " " * statement_indent(text, out_lines[:index]) + "pass"
