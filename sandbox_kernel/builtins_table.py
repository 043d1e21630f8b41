"""The ``__builtins__`` a cell sees. SECURITY CORE.

A plain dict (CPython's fast global lookups need an exact dict); cells cannot reach it: the name
``__builtins__`` is refused by the rewriter, globals(), vars() and locals() are copies without it, and
frames and function internals are not available. The gate functions live here too, under reserved
``__st_*__`` names, and the engine's helpers for %time, %timeit and `obj?` under '%...' names (not
identifiers: no cell can write them).
"""
from __future__ import annotations

import builtins as _b
import io
import sys
import types
import weakref

from .confine import ConfinedFiles
from .denials import BuiltinDenied, CallDenied
from .gates import OWN_CLASSES, SandboxType, is_sandbox_class, runtime_callable
from .guards import NESTING_STAND_INS, _ticking_iter, charged
from .rewriter import CELL_FILENAME_PREFIX, FORBIDDEN_NAMES, GATE_PREFIX

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
    "FutureWarning ImportWarning UnicodeWarning BytesWarning ResourceWarning ExceptionGroup EncodingWarning "
    "GeneratorExit"
).split()

# Refused with a sentence that says why, instead of a bare NameError.
_UNAVAILABLE = {
    "compile": "code objects are not available; eval() and exec() take the text",
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


def own_names(scope) -> dict:
    """A copy of a namespace with the cell's own names only: never the runtime's (gates, builtins, the
    '%...' helpers), never a key that is not an identifier."""
    return {k: v for k, v in scope.items()
            if type(k) is str and k.isidentifier() and not k.startswith(GATE_PREFIX) and k not in FORBIDDEN_NAMES}


class NamespaceSnapshot(dict):
    """What globals() (and locals() at the top level of a cell) return: a read-only copy of the cell's
    names. The namespace itself never reaches a cell (a live namespace dict is a planting ground for
    the runtime's names); eval()/exec() given a snapshot run in the namespace, like a cell."""

    __slots__ = ()
    __module__ = "builtins"   # the runtime's own classes are refused as values; this one is plain data

    def _read_only(self, *args, **kwargs):
        raise TypeError("globals() is a read-only copy in the sandbox: assign the name directly (x = value), "
                        "or use exec(code, globals()) to run code in the cell's namespace")

    __setitem__ = __delitem__ = __ior__ = update = setdefault = pop = popitem = clear = _read_only

    def __copy__(self):
        return NamespaceSnapshot(self)

    def __deepcopy__(self, memo):
        import copy

        return NamespaceSnapshot(copy.deepcopy(dict(self), memo))


for _method in ("_read_only", "__copy__", "__deepcopy__"):
    runtime_callable(NamespaceSnapshot.__dict__[_method])


def _unavailable(name: str, why: str, gates):
    def refuse(*args, **kwargs):
        gates.deny(BuiltinDenied(name, why))
    refuse.__name__ = name
    refuse.__qualname__ = name
    return runtime_callable(refuse)


_C_DESCRIPTORS = (types.MemberDescriptorType, types.GetSetDescriptorType)

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
    DOCUMENTED_AS[consume] = fn
    return runtime_callable(consume)


# help() shows a stand-in's original (its signature and docstring: text only). Never a __wrapped__
# attribute: a cell reads __wrapped__, and the original would skip the stand-in's checks.
DOCUMENTED_AS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def documented_as(obj):
    try:
        return DOCUMENTED_AS.get(obj, obj)
    except TypeError:   # unhashable, or not weakly referable
        return obj


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

    def caller_scope(name: str):
        """(locals, globals) of the cell code that called: C code that calls these (iter(locals, None)
        consumed by a gate or a library) would otherwise hand out whatever Python frame called it."""
        frame = sys._getframe(2)
        if not frame.f_code.co_filename.startswith(CELL_FILENAME_PREFIX):
            gates.deny(BuiltinDenied(f"{name}() called from outside the cell's code",
                                     f"{name}() describes the cell's own code only"))
        return frame.f_locals, frame.f_globals

    def snapshot(scope):
        return NamespaceSnapshot(own_names(scope)) if scope is engine.namespace else own_names(scope)

    def sandbox_locals():
        """A copy of the caller's own names (never the live namespace; at a cell's top level, read-only)."""
        scope, _ = caller_scope("locals")
        return snapshot(scope)

    def sandbox_globals():
        """A read-only copy of the cell's names."""
        _, scope = caller_scope("globals")
        return snapshot(scope)

    def sandbox_vars(*args):
        """vars() is locals(); vars(obj) a copy of the __dict__ of the cell's own objects and classes."""
        if not args:
            scope, _ = caller_scope("vars")
            return snapshot(scope)
        if len(args) != 1:
            raise TypeError(f"vars expected at most 1 argument, got {len(args)}")
        obj = args[0]
        if not gates._allowed_quietly(obj, "__dict__"):
            gates.deny(BuiltinDenied(f"vars() of {type(obj).__name__ if not isinstance(obj, type) else obj.__name__}",
                                     "vars() shows the attributes of objects and classes the cell defined",
                                     hint="dir(obj) lists what can be read"))
        return {k: v for k, v in own_names(gates.getattr(obj, "__dict__")).items()
                if k not in ("__dict__", "__weakref__") and not isinstance(v, _C_DESCRIPTORS)}

    def sandbox_dir(*args):
        """The names the policy shows: the caller's names, or the readable public attributes of obj."""
        if not args:
            scope, _ = caller_scope("dir")
            return sorted(own_names(scope))
        if len(args) != 1:
            raise TypeError(f"dir expected at most 1 argument, got {len(args)}")
        return engine.visible_attributes(args[0])

    def sandbox_eval(source, globals=None, locals=None, /):
        return engine.run_text("eval", source, globals, locals)

    def sandbox_exec(source, globals=None, locals=None, /, *, closure=None):
        if closure is not None:
            raise TypeError("exec() takes no closure in the sandbox")
        engine.run_text("exec", source, globals, locals)

    def sandbox_iter(obj, *sentinel):
        """iter(callable, sentinel) can feed a C loop forever (sum(iter(int, 1))): it ticks per item."""
        if sentinel:
            return _ticking_iter(_b.iter(obj, *sentinel), gates)
        return _b.iter(obj)

    for fn in (sandbox_iter, sandbox_print, sandbox_locals, sandbox_globals, sandbox_vars, sandbox_dir,
               sandbox_eval, sandbox_exec):
        fn.__name__ = fn.__qualname__ = fn.__name__[len("sandbox_"):]
        DOCUMENTED_AS[fn] = getattr(_b, fn.__name__)
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
        "globals": runtime_callable(sandbox_globals),
        "vars": runtime_callable(sandbox_vars),
        "dir": runtime_callable(sandbox_dir),
        "eval": runtime_callable(sandbox_eval),
        "exec": runtime_callable(sandbox_exec),
        "help": runtime_callable(engine.help),
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
        "__st_augattr__": gates.augattr,
        "__st_augitem__": gates.augitem,
        "__st_aug__": gates.aug,
        "__st_binop__": gates.binop,
        "__st_sized__": gates.sized,
        "__st_import__": gates.import_,
        "__st_importfrom__": gates.importfrom,
        "__st_importstar__": gates.importstar,
        "__st_matched__": gates.matched,
        "__st_starcaptured__": gates.starcaptured,
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
        "__st_entered__": gates.entered,
        "__st_entered_async__": gates.entered_async,
    })
    table["__st_mul__"], table["__st_mod__"], table["__st_ownattr__"], table["__st_contains__"], \
        table["__st_pow__"] = gates.make_fast_gates()
    table["__st_getattr__"], table["__st_write__"] = gates.make_cached_gates()
    # What %time, %timeit and `obj?` turn into (cellmagics.py); not identifiers, so no cell names them.
    magics = engine.magics
    table.update({name: runtime_callable(fn) for name, fn in (
        ("%time_start", magics.time_start), ("%time_keep", magics.time_keep), ("%time_end", magics.time_end),
        ("%time_value", magics.time_value), ("%timeit_run", magics.timeit_run), ("%help_on", engine.help_on),
        ("%writefile", magics.writefile))})
    return table
