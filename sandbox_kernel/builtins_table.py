"""The ``__builtins__`` a cell sees. SECURITY CORE.

A plain dict (CPython's fast global lookups need an exact dict); cells cannot reach it: the name
``__builtins__`` is refused by the rewriter, and globals(), vars(), frames and function internals are
not available. The gate functions live here too, under reserved ``__st_*__`` names.
"""
from __future__ import annotations

import builtins as _b
import io
import sys

from .confine import ConfinedFiles
from .denials import BuiltinDenied, CallDenied
from .gates import OWN_CLASSES, SandboxType, is_sandbox_class, runtime_callable
from .guards import NESTING_STAND_INS, _ticking_iter, charged
from .rewriter import CELL_FILENAME_PREFIX

_SAFE = (
    "abs all any ascii bin bool bytearray bytes callable chr classmethod complex dict divmod enumerate "
    "filter float format frozenset hash hex id int isinstance issubclass iter len list map max min next "
    "object oct ord property range repr reversed round set slice sorted staticmethod str sum super "
    "tuple zip aiter anext Ellipsis NotImplemented"
).split()

_EXCEPTIONS = (
    "ArithmeticError AssertionError AttributeError BufferError EOFError Exception FloatingPointError "
    "ImportError IndexError KeyError LookupError MemoryError ModuleNotFoundError NameError "
    "NotImplementedError OSError OverflowError RecursionError ReferenceError RuntimeError StopIteration "
    "StopAsyncIteration SyntaxError IndentationError TabError TypeError UnboundLocalError UnicodeError "
    "UnicodeDecodeError UnicodeEncodeError UnicodeTranslateError ValueError ZeroDivisionError "
    "FileNotFoundError FileExistsError PermissionError IsADirectoryError NotADirectoryError TimeoutError "
    "ConnectionError BlockingIOError ChildProcessError InterruptedError ProcessLookupError EnvironmentError "
    "IOError Warning UserWarning DeprecationWarning PendingDeprecationWarning RuntimeWarning SyntaxWarning "
    "FutureWarning ImportWarning UnicodeWarning BytesWarning ResourceWarning ExceptionGroup EncodingWarning"
).split()

# Refused with a sentence that says why, instead of a bare NameError.
_UNAVAILABLE = {
    "eval": "evaluating strings as code is not allowed",
    "exec": "executing strings as code is not allowed",
    "compile": "compiling code objects is not allowed",
    "globals": "the module namespace object is not available",
    "vars": "namespace objects are not available",
    "dir": "listing attributes is not available; use tab completion",
    "help": "interactive help is not available; use obj? in the notebook is not either, read the docs",
    "breakpoint": "debuggers are not available",
    "input": "cells cannot read from standard input",
    "exit": "cells cannot end the kernel",
    "quit": "cells cannot end the kernel",
    "memoryview": "raw memory views are not available",
    "get_ipython": "IPython's shell is not reachable from the sandbox",
    "In": "IPython's input history is not reachable from the sandbox",
    "Out": "IPython's output history is not reachable from the sandbox",
    "open": "this policy does not allow files",
}


def _unavailable(name: str, why: str, gates):
    def refuse(*args, **kwargs):
        gates.deny(BuiltinDenied(name, why))
    refuse.__name__ = name
    refuse.__qualname__ = name
    return runtime_callable(refuse)


# Builtin functions that consume an iterable in C. The rewriter charges 'sum(x)' where it sees the
# call; handed around as values (map(sum, ...), sorted(key=sum)) they charge themselves.
_CONSUMING_FUNCTIONS = ("sum", "min", "max", "any", "all", "sorted")


def _charging(fn, gates):
    def consume(*args, **kwargs):
        if "key" in kwargs:   # sorted(xs, key=list): the key is a consumer too
            kwargs["key"] = charged(kwargs["key"])
        return gates.sized(fn, *args, **kwargs)
    consume.__name__ = consume.__qualname__ = fn.__name__
    consume.__doc__ = fn.__doc__
    return runtime_callable(consume)


def make_builtins(engine) -> dict:
    gates = engine.gates
    table: dict = {name: getattr(_b, name) for name in _SAFE + _EXCEPTIONS if hasattr(_b, name)}
    table.update({"True": True, "False": False, "None": None})
    table.update({cls.__name__: stand_in for cls, stand_in in NESTING_STAND_INS.items() if cls.__module__ == "builtins"})
    for name in _CONSUMING_FUNCTIONS:
        table[name] = _charging(getattr(_b, name), gates)
    for name, why in _UNAVAILABLE.items():
        table[name] = _unavailable(name, why, gates)

    def sandbox_print(*args, sep=" ", end="\n", file=None, flush=False):
        if file is not None and not isinstance(file, io.IOBase) and not is_sandbox_class(type(file)):
            raise TypeError("print(file=...) takes a file object or an object of a class defined in the cell")
        _b.print(*args, sep=sep, end=end, file=file if file is not None else sys.stdout, flush=flush)

    def sandbox_locals():
        """locals() as a copy without the runtime's names (never the live module namespace), and only
        of the cell's own code: C code that calls locals (iter(locals, None) consumed by a gate or a
        library) would otherwise hand out the locals of whatever Python frame called it."""
        frame = sys._getframe(1)
        if not frame.f_code.co_filename.startswith(CELL_FILENAME_PREFIX):
            gates.deny(BuiltinDenied("locals() called from outside the cell's code",
                                     "locals() describes the cell's own functions only"))
        return {k: v for k, v in frame.f_locals.items()
                if not (isinstance(k, str) and (k.startswith("__st_") or k == "__builtins__"))}

    def sandbox_iter(obj, *sentinel):
        """iter(callable, sentinel) can feed a C loop forever (sum(iter(int, 1))): it ticks per item."""
        if sentinel:
            return _ticking_iter(_b.iter(obj, *sentinel), gates)
        return _b.iter(obj)

    sandbox_iter.__name__ = "iter"
    sandbox_print.__name__ = "print"
    sandbox_locals.__name__ = "locals"
    table.update({
        "type": SandboxType,
        "getattr": runtime_callable(gates.builtin_getattr),
        "hasattr": runtime_callable(gates.builtin_hasattr),
        "setattr": runtime_callable(gates.builtin_setattr),
        "delattr": runtime_callable(gates.builtin_delattr),
        "pow": runtime_callable(gates.pow),
        "format": runtime_callable(lambda value, format_spec="": gates.format(value, "", format_spec)),
        "print": runtime_callable(sandbox_print),
        "display": runtime_callable(engine._display),
        "locals": runtime_callable(sandbox_locals),
        "iter": runtime_callable(sandbox_iter),
        "__build_class__": gates.build_class,
        # Cells never execute an import bytecode (the rewriter turns every import into a gate call)
        # and cannot name __import__. What does look it up here is C code of a granted library that
        # imports lazily while a cell's frame is on top (numpy's _methods): it gets the real one, and
        # the module it imports goes to that C code, not to the cell.
        "__import__": _b.__import__,
        "__name__": "builtins",
    })
    if gates.policy.files:
        files = ConfinedFiles(engine.workdir, gates.deny)

        def sandbox_open(file, mode="r", buffering=-1, encoding=None, errors=None, newline=None, closefd=True,
                         opener=None):
            if opener is not None or closefd is not True:
                gates.deny(CallDenied("open() with opener/closefd", "only plain paths can be opened"))
            return files.open(file, mode, buffering, encoding, errors, newline)
        sandbox_open.__name__ = "open"
        table["open"] = runtime_callable(sandbox_open)
    # The gates, under the reserved names the rewriter emits.
    table.update({
        "__st_getattr__": gates.getattr,
        "__st_write__": gates.write,
        "__st_augattr__": gates.augattr,
        "__st_augitem__": gates.augitem,
        "__st_aug__": gates.aug,
        "__st_binop__": gates.binop,
        "__st_sized__": gates.sized,
        "__st_import__": gates.import_,
        "__st_importfrom__": gates.importfrom,
        "__st_importstar__": gates.importstar,
        "__st_matched__": gates.matched,
        "__st_type__": type,          # the real one-argument type, for the own-instance check
        "__st_own__": OWN_CLASSES,
        "__st_matchclass__": gates.matchclass,
        "__st_matchvalue__": gates.matchvalue,
        "__st_format__": gates.format,
        "__st_percent__": gates.percent,
        "__st_starred__": gates.starred,
        "__st_unpacked__": gates.unpacked,
        "__st_starred_rows__": gates.starred_rows,
        "__st_tick__": engine.budget._builtins.get("__st_tick__"),
    })
    table["__st_mul__"], table["__st_mod__"], table["__st_ownattr__"], table["__st_contains__"] = \
        gates.make_fast_gates()
    return table
