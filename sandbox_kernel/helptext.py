"""help(obj) and `obj?` for cells: the signature and docstring, in the spirit of pydoc's plain text.

pydoc itself is not used: it lists private names and names the policy hides, shows where files live,
and reaches every attribute of a module or class through getattr. Here the members listed are the ones
the gates let the cell read (the engine's `visible_attributes`), found in the class or module dict
without running their code; a docstring or signature is read without calling anything the cell
defined except through the gates, and the text is shown without host paths.
"""
from __future__ import annotations

import inspect
import textwrap
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType

from .streams import hide_host_paths

MAX_MEMBERS = 400
MAX_DOC_LINES = 200
_FUNCTIONS = (FunctionType, BuiltinFunctionType, MethodType, type(str.join), type(object.__init__),
              type(str.__dict__["join"]), classmethod, staticmethod)


def signature(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError, RecursionError):
        return "(...)"


def _first_paragraph(doc: str | None) -> str:
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    out = []
    for line in lines:
        if not line.strip():
            break
        out.append(line.strip())
    return " ".join(out)[:200]


def _doc_block(doc: str | None, prefix: str) -> list[str]:
    if not doc:
        return []
    lines = inspect.cleandoc(doc).splitlines()
    cut = lines[:MAX_DOC_LINES]
    if len(lines) > len(cut):
        cut.append(f"[... {len(lines) - len(cut)} more lines]")
    return [(prefix + line).rstrip() for line in cut]


def _module_of(obj) -> str:
    """The module named in the title; never this package (a guarded stand-in of a library's function)."""
    module = getattr(obj, "__module__", None)
    return module if isinstance(module, str) and not module.startswith("sandbox_kernel") else ""


def render(obj, doc_of, members_of, static_lookup) -> str:
    """The text help(obj) prints. doc_of(obj) reads a docstring through the gates; members_of(obj) lists
    the names the policy shows; static_lookup(obj, name) -> (found, value) without running code."""
    if isinstance(obj, ModuleType):
        lines = [f"Help on module {obj.__name__}:", "", "NAME", f"    {obj.__name__}", ""]
        doc = doc_of(obj)
        if doc:
            lines += ["DESCRIPTION", *_doc_block(doc, "    "), ""]
        lines += _member_list(obj, members_of, static_lookup, "CONTENTS", "    ")
    elif isinstance(obj, type):
        module = _module_of(obj)
        lines = [f"Help on class {obj.__name__}" + (f" in module {module}:" if module else ":"), ""]
        bases = ", ".join(b.__qualname__ if b.__module__ == "builtins" else f"{b.__module__}.{b.__qualname__}"
                          for b in obj.__bases__ if b is not object)
        lines.append(f"class {obj.__name__}" + (f"({bases})" if bases else ""))
        lines.append(f" |  {obj.__name__}{signature(obj)}")
        doc = doc_of(obj)
        if doc:
            lines += [" |", *_doc_block(doc, " |  ")]
        members = _member_list(obj, members_of, static_lookup, "Methods and attributes:", " |      ")
        if members:
            lines += [" |", " |  " + members[0], *members[1:]]
    elif isinstance(obj, _FUNCTIONS) or callable(obj) and type(doc_of(obj)) is str \
            and doc_of(obj) is not doc_of(type(obj)):     # a callable with its own docstring (np.sin)
        name = getattr(obj, "__name__", type(obj).__name__)
        name = name if type(name) is str else type(obj).__name__
        module = _module_of(obj)
        kind = "built-in function" if isinstance(obj, BuiltinFunctionType) else \
            "method" if isinstance(obj, MethodType) else "function"
        lines = [f"Help on {kind} {name}" + (f" in module {module}:" if module else ":"), "",
                 f"{name}{signature(obj)}", *_doc_block(doc_of(obj), "    ")]
    else:
        cls = type(obj)
        module = _module_of(cls)
        lines = [f"Help on {cls.__name__}" + (f" in module {module}" if module else "") + " object:", ""]
        lines.append(render(cls, doc_of, members_of, static_lookup).split("\n", 2)[-1])
    return hide_host_paths("\n".join(lines).rstrip() + "\n")


def _member_list(owner, members_of, static_lookup, title: str, indent: str) -> list[str]:
    names = members_of(owner)
    if not names:
        return []
    out = [title]
    for name in names[:MAX_MEMBERS]:
        found, value = static_lookup(owner, name)
        if not found:
            continue
        if isinstance(value, (classmethod, staticmethod)):
            value = value.__func__
        if isinstance(value, type):
            out.append(f"{indent}class {name}")
        elif callable(value) and isinstance(value, _FUNCTIONS):
            out.append(f"{indent}{name}{signature(value)}")
        elif isinstance(value, property):
            out.append(f"{indent}{name} (property)")
            value = value.fget
        else:
            out.append(f"{indent}{name} = {_short_repr(value)}")
            continue
        summary = _first_paragraph(value.__doc__ if isinstance(value, _FUNCTIONS + (type,)) else None)
        if summary:
            out.extend(indent + "    " + line for line in textwrap.wrap(summary, 96))
    if len(names) > MAX_MEMBERS:
        out.append(f"{indent}[... {len(names) - MAX_MEMBERS} more]")
    return out


def _short_repr(value) -> str:
    """Plain data only (a cell's object could run code in its repr): the type otherwise."""
    if type(value) in (int, float, complex, bool, str, bytes, type(None)):
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."
    return f"<{type(value).__name__}>"
