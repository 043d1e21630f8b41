"""Modules the sandbox provides itself: IPython.display (display, HTML, Image, clear_output ...).

Real notebooks import IPython.display to show things; the real module reaches IPython's shell, so cells
never get it. The sandbox's own version (provided/ipython_display.py) is sandboxed source: it is parsed,
validated and rewritten like a cell and runs under the importing cell's limits, with the cell's builtins,
so it can do nothing a cell could not do itself. That is why every policy has it and no policy needs to
grant it: the names below never reach importlib.
"""
from __future__ import annotations

import ast
import os

from .rewriter import parse_cell, rewrite

# module name a cell imports -> the name of the object the source binds for it
PROVIDED = {"IPython": "ipython_module", "IPython.display": "display_module", "IPython.core.display": "display_module"}

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "provided", "ipython_display.py")
FILENAME = "<IPython.display (provided by the sandbox)>"


def _compiled():
    """The rewritten code, once per process (the rewriter is pure), and its lines for tracebacks.
    confine lets this function compile a rewritten tree while a cell runs, and build exec its result."""
    if not _CODE:
        tree = ast.fix_missing_locations(rewrite(parse_cell(_TEXT, FILENAME, "exec")))
        _CODE.append((compile(tree, FILENAME, "exec", dont_inherit=True), _TEXT.splitlines()))
    return _CODE[0]


_CODE: list = []


# Read when the engine loads, never while a cell runs (confinement would rightly refuse a read outside the
# working directory then).
with open(SOURCE, encoding="utf-8") as _f:
    _TEXT = _f.read()


def build(builtins: dict, sources: dict, runtime: dict) -> dict:
    """Runs the source (inside the running cell: its limits apply) and returns {module name: object}.
    ``runtime`` holds the engine's callables the source names (_display, _show, _clear)."""
    code, lines = _compiled()
    sources[FILENAME] = lines
    namespace = {"__builtins__": builtins, "__name__": "IPython.display", **runtime}
    exec(code, namespace)   # noqa: S102 - rewritten, gated source, run like a cell
    return {name: namespace[binding] for name, binding in PROVIDED.items()}
