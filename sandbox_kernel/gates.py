"""The gate functions that rewritten cells call. SECURITY CORE.

The rewriter (rewriter.py) turns ``a.b`` into ``__st_getattr__(a, "b")``, imports into
``__st_import__``, writes into ``__st_write__`` and so on; this module decides each of those calls.
Decisions are cached per (type, name) for instances and per (object, name) for modules and classes,
so a hot attribute costs a dict lookup and a type check.

Three ideas carry the design:
* Names are checked as exact ``str`` after NFKC normalisation; private and dunder names are hidden
  except a short list of read-only, harmless dunders, and private names on classes the sandbox itself
  defined (``self._cache``).
* What an access *returns* is checked too: a module must be granted, a frame, code object or traceback
  is never handed out, a function or class from a forbidden module (os, subprocess, ...) is refused
  however it was reached, and the ``type`` metaclass is replaced by the sandbox's one-argument ``type``.
* Granted modules and classes are read-only: writes go only to objects the sandbox made.
"""
from __future__ import annotations

import abc
import array
import builtins as _host_builtins
import collections
import contextvars
import copy
import dataclasses
import decimal
import enum
import functools
import importlib
import io
import operator
import os
import random
import re
import string
import sys
import types
import typing
import unicodedata
import weakref
from types import BuiltinFunctionType, CodeType, FrameType, FunctionType, MethodType, ModuleType, TracebackType

import _string

try:
    from . import _fastgates   # optional C fast paths (setup.py); the Python ones are used without it
except ImportError:
    _fastgates = None
if getattr(_fastgates, "VERSION", None) != 5:
    _fastgates = None   # absent, or a stale build of an older source: the same decisions in Python

from .denials import (AttributeDenied, BuiltinDenied, CallDenied, ImportDenied, SandboxViolation, SizeDenied,
                      genuine)
from . import confine as _confine
from .confine import at_cell_end, cell_is_running, installed_code, made_by_an_import
from .limits import bound_numpy_allocations
from .policy import Policy
from .rewriter import (CELL_FILENAME_PREFIX, DATA_METHODS_WITH_STAND_INS, FORBIDDEN_NAMES, FRAME_ATTRIBUTES,
                       READ_ONLY_NAMES, Rewriter)

# ------------------------------------------------------------------------------------------------
# What is harmless to read
# ------------------------------------------------------------------------------------------------

# Dunders a cell may read: identity and documentation, and the protocol methods that ordinary
# code calls explicitly (super().__init__(...), obj.__len__()). Absent on purpose: __dict__ (special
# rule below), __class__-walking (__bases__, __mro__, __subclasses__), function internals (__globals__,
# __code__, __closure__, __defaults__), bound-method internals (__self__, __func__), __reduce__*,
# __getattribute__/__setattr__/__delattr__ (special rule for super()), and the arithmetic dunders that
# would bypass the size checks (__mul__, __pow__, __lshift__, __mod__ and their variants).
SAFE_DUNDERS = frozenset("""
__name__ __qualname__ __doc__ __module__ __class__ __version__ __all__ __annotations__ __members__
__match_args__ __slots__ __dataclass_fields__ __dataclass_params__ __wrapped__ __cause__ __context__
__suppress_context__ __notes__ __init__ __post_init__ __repr__ __str__ __format__ __bytes__
__hash__ __bool__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __len__ __length_hint__ __iter__
__next__ __reversed__ __contains__ __getitem__ __setitem__ __delitem__ __missing__ __call__
__enter__ __exit__ __aenter__ __aexit__ __aiter__ __anext__ __await__ __int__ __float__ __complex__
__index__ __round__ __trunc__ __floor__ __ceil__ __abs__ __neg__ __pos__ __invert__ __add__ __radd__
__iadd__ __sub__ __rsub__ __isub__ __truediv__ __rtruediv__ __itruediv__ __floordiv__ __rfloordiv__
__ifloordiv__ __divmod__ __rdivmod__ __and__ __rand__ __iand__ __or__
__ror__ __ior__ __xor__ __rxor__ __ixor__ __rshift__ __rrshift__ __irshift__ __matmul__ __rmatmul__
__imatmul__ __copy__ __deepcopy__ __sizeof__ __fspath__ __array__
__class_getitem__ __orig_bases__ __parameters__ __args__ __origin__ __total__ __required_keys__
__optional_keys__ __fields__ __set_name__ __init_subclass__
""".split())

# Private names every namedtuple and enum member offers as public API.
PUBLIC_PRIVATE_NAMES = frozenset({"_asdict", "_replace", "_fields", "_make", "_field_defaults",
                                  "_value_", "_name_", "_missing_", "_generate_next_value_", "_ignore_",
                                  "_repr_html_", "_repr_markdown_", "_repr_latex_", "_repr_json_",
                                  "_repr_png_", "_repr_svg_", "_repr_jpeg_", "_repr_mimebundle_"})

# Modules whose functions and classes a cell never receives, whatever path leads there.
FORBIDDEN_ORIGINS = frozenset("""
os posix nt posixpath ntpath genericpath sys subprocess _posixsubprocess importlib _imp ctypes _ctypes
gc inspect pickle _pickle marshal shutil socket _socket ssl _ssl urllib http ftplib smtplib
multiprocessing _multiprocessing signal _signal pty code codeop runpy webbrowser threading _thread
asyncio _asyncio concurrent tempfile sqlite3 _sqlite3 mmap resource platform sysconfig site pkgutil
zipimport atexit faulthandler tracemalloc pdb bdb trace timeit doctest pydoc IPython ipykernel
jupyter_client zmq traitlets sandbox_kernel cffi _cffi_backend fcntl termios select selectors
shelve dbm _dbm _gdbm tarfile zipfile pathlib _io _frozen_importlib _frozen_importlib_external
copyreg weakref _weakref sysconfig _sysconfigdata logging contextvars
""".split())

# Builtins that are never handed out, even when a library re-exports them.
_DANGEROUS_BUILTINS = {getattr(_host_builtins, n) for n in (
    "eval", "exec", "compile", "open", "__import__", "globals", "locals", "vars", "getattr", "setattr",
    "delattr", "breakpoint", "input", "help", "exit", "quit", "dir", "__build_class__", "memoryview",
) if hasattr(_host_builtins, n)}
_DANGEROUS_BUILTINS |= {string.Formatter}

# Top-level modules that are never "a library the policy does not grant" (gates._foreign_module): the
# standard library (its dangerous modules are FORBIDDEN_ORIGINS) and the sandbox's own.
_STDLIB_MODULES = frozenset(getattr(sys, "stdlib_module_names", ())) | {"builtins", "__main__"}
_NOT_FOREIGN = frozenset({"sandbox_kernel"})
# The standard library's dangerous modules (FORBIDDEN_ORIGINS) whose objects a library may still hand out: opaque
# like an ungranted library's (plain data only, read-only). plotly's logging.Logger led to every logger's live
# handler list, where a cell planted a handler the host ran unconfined (review 12, R12-1); a lock a library keeps
# would let a cell block the host. The io module's file objects are the cell's own files.
_OPAQUE_STDLIB = FORBIDDEN_ORIGINS - {"_io", "io", "sandbox_kernel"}
_SCALAR_TYPES = frozenset({int, float, complex, str, bytes, bool, type(None)})
_C_DATA_DESCRIPTORS = (types.MemberDescriptorType, types.GetSetDescriptorType)   # slots and C fields

_NAMES_READ_NEVER = FRAME_ATTRIBUTES | {"mro", "f_trace_lines", "f_trace_opcodes"}
_INTERNAL_TYPES = (FrameType, CodeType, TracebackType)

# Values that need no check on return: plain data, bound methods (checked by their function), and bound
# slot wrappers (super().__init__, x.__eq__: the slot's own operation on the object just read, made
# afresh at each read, so never one of the policy's denied values).
_PLAIN_TYPES = frozenset({int, float, complex, str, bytes, bool, type(None), list, tuple, dict, set,
                          frozenset, range, slice, bytearray, MethodType, types.MethodWrapperType})

# Classes of the standard library that carry no state of their own: a sandbox class that derives
# only from these (and sandbox classes) is wholly the sandbox's, so its private names and __dict__
# are the sandbox's business.
_HASHABLE_METACLASSES = frozenset({type, abc.ABCMeta, enum.EnumMeta})
_PURE_DATA = frozenset({int, float, complex, str, bytes, bool, type(None), list, tuple, dict, set, frozenset,
                        range, slice, bytearray})
_STRUCTURAL_MODULES = frozenset({"builtins", "enum", "typing", "abc", "_collections_abc",
                                 "collections.abc", "numbers", "collections", "dataclasses"})

_WRITE_NEVER = frozenset({"__class__", "__bases__", "__dict__", "__mro__", "__base__", "__subclasses__",
                          "__builtins__", "__globals__", "__code__", "__closure__", "__defaults__",
                          "__kwdefaults__", "__getattribute__", "__setattr__", "__delattr__",
                          "__match_args__", "__array_interface__", "__array_struct__", "__del__",
                          "__getattr__", "__dataclass_fields__", "__dataclass_params__"}) | FRAME_ATTRIBUTES
_WRITABLE_FUNCTION_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__wrapped__",
                                        "__annotations__"})

# Size of results built in one step (ints in bits; sequences in bytes, estimated).
MAX_INT_BITS = 1 << 23
_INT_RULE = f"integers are capped at {MAX_INT_BITS:,} bits (about 2.5 million digits)"
DEFAULT_MAX_BYTES = 1 << 30

_SANDBOX_CLASSES: "weakref.WeakSet[type]" = weakref.WeakSet()
# Functions of the runtime that cells are meant to hold (print, display, guarded library calls).
# Classes the cell defined from its own classes and object alone (type metaclass): rewritten methods
# read and write non-dunder attributes of their instances without a gate call (rewriter.py).
OWN_CLASSES: set = set()
# Instances of builtin data are the cell's own too: their public attributes are bound methods and plain
# data (the gate reads them unchecked as well), except the stand-ins the rewriter leaves to the gates.
OWN_CLASSES.update(_PURE_DATA)
_RUNTIME_BOUND: set = set()   # bound methods of the runtime (they have no __dict__ to mark)


_RUNTIME_CALLABLES: "weakref.WeakSet" = weakref.WeakSet()


def runtime_callable(fn):
    """Register a function of ours as one a cell may hold and pass around. By identity, never by a mark in
    the function's dict, and without functools.wraps' __wrapped__ (the raw function it stands in for): a
    cell copies a function's dict onto its own (functools.update_wrapper, singledispatch), and the marks
    and the link came along (review 16, R16-4, R16-12, R16-13)."""
    try:
        _RUNTIME_CALLABLES.add(fn)
    except TypeError:
        _RUNTIME_BOUND.add(fn)
    namespace = getattr(fn, "__dict__", None)
    if type(namespace) is dict:
        namespace.pop("__wrapped__", None)
    return fn


def _is_runtime_callable(fn) -> bool:
    return _member(fn, _RUNTIME_CALLABLES) or _member(fn, _RUNTIME_BOUND)


def _member(value, container) -> bool:
    """value in container, for values that may be unhashable (without id(): an audited call)."""
    try:
        return value in container
    except TypeError:
        return False


def is_sandbox_class(cls) -> bool:
    try:
        return cls in _SANDBOX_CLASSES
    except TypeError:
        return False


def is_sandbox_function(fn) -> bool:
    """A function a cell defined: its builtins are a sandbox table. (Not fn.__code__: reading it is an
    audited event, and this runs on hot paths.)"""
    return type(fn) is FunctionType and type(fn.__builtins__) is dict and "__st_tick__" in fn.__builtins__


def _structural(cls) -> bool:
    return cls is object or cls.__module__ in _STRUCTURAL_MODULES


# Generic aliases, which answer attribute reads from their origin (types.GenericAlias every name but its own,
# typing's aliases every name that is not a dunder), and the names that are their own.
_GENERIC_ALIASES = (types.GenericAlias, typing._BaseGenericAlias)
_GENERIC_ALIAS_OWN_NAMES = frozenset({"__origin__", "__args__", "__parameters__", "__metadata__"})


def _wholly_sandboxed(cls) -> bool:
    return all(is_sandbox_class(k) or _structural(k) for k in cls.__mro__)


def _is_class(obj) -> bool:
    return issubclass(type(obj), type)


def _normalise(name) -> str:
    if type(name) is not str:
        raise genuine(AttributeDenied(repr(name)[:40], "attribute names must be plain str"))
    return name if name.isascii() else unicodedata.normalize("NFKC", name)


def _type_name(obj) -> str:
    t = obj if _is_class(obj) else type(obj)
    return getattr(t, "__name__", "object") if type(t.__dict__.get("__name__", "")) is str else "object"


def _origin(v) -> str:
    """The top-level module a function or class comes from ('' when unknown, and for the sandbox's own classes:
    their __module__ is whatever the sandboxed source that made them was named)."""
    if is_sandbox_class(v):
        return ""
    mod = getattr(v, "__module__", None)
    if type(mod) is not str:
        return ""
    return mod.split(".", 1)[0]


# ------------------------------------------------------------------------------------------------
# The one-argument type
# ------------------------------------------------------------------------------------------------

# The gates of the engine whose cell is running: each engine sets it once in its own contextvars.Context.
CURRENT_GATES: contextvars.ContextVar = contextvars.ContextVar("sandbox_gates", default=None)


class _SandboxTypeMeta(type):
    """Makes the sandbox's ``type`` behave as ``type`` for isinstance/issubclass, while calling it
    with three arguments is refused (dynamic class creation would skip ``__build_class__``)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, type)

    def __subclasscheck__(cls, sub):
        return isinstance(sub, type) and issubclass(sub, type)

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs:
            result = type(args[0])
            guard = _guards.CALL_GUARDS.get(result)
            if guard is not None:
                # the class as its module hands it out (guarded), never the raw one
                gates = CURRENT_GATES.get()
                if gates is None:
                    raise genuine(BuiltinDenied(f"type() of a {result.__name__} object", "its class has a guard"))
                return gates.guarded(result, guard)
            if issubclass(result, type):
                return SandboxType
            gates = CURRENT_GATES.get()
            if gates is None:
                # no engine on this thread (not the cell's): nothing to decide with, so nothing is handed out
                # (a library's pool thread got the raw _io.FileIO: review 13, R13-3)
                raise genuine(BuiltinDenied(f"type() of a {result.__name__} object", "no sandbox engine here"))
            if result not in gates._classes_handed_out:
                gates.class_handed_out_by_type(result)
            return result
        raise genuine(BuiltinDenied("type() with three arguments", "classes are made with the class statement"))

    def __repr__(cls):
        return "<class 'type'>"


class SandboxType(metaclass=_SandboxTypeMeta):
    __slots__ = ()

    def __init_subclass__(cls, **kwargs):
        raise genuine(BuiltinDenied("a subclass of type", "metaclasses cannot be defined in the sandbox"))


SandboxType.__name__ = SandboxType.__qualname__ = "type"
SandboxType.__module__ = "builtins"


def _allowed_metaclasses():
    import abc
    import enum

    allowed = {abc.ABCMeta, enum.EnumMeta}
    import typing

    for name in ("_ProtocolMeta", "NamedTupleMeta", "_TypedDictMeta"):
        meta = getattr(typing, name, None)
        if isinstance(meta, type):
            allowed.add(meta)
    return frozenset(allowed)


ALLOWED_METACLASSES = _allowed_metaclasses()


# ------------------------------------------------------------------------------------------------
# Gated string formatting
# ------------------------------------------------------------------------------------------------

_SPEC_NUMBER = re.compile(r"\d+")


class _GatedFormatter(string.Formatter):
    """str.format whose field names ('{0.attr}') read attributes through the attribute gate."""

    def __init__(self, gates: "Gates"):
        self._gates = gates

    def format_field(self, value, format_spec):
        return self._gates.format(value, "", format_spec)

    def get_field(self, field_name, args, kwargs):
        first, rest = _string.formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attr, key in rest:
            if is_attr and type(key) is str and key.startswith("__"):
                self._gates.deny(AttributeDenied(f"'{key}' in a format field",
                                                 "format fields may not read dunder attributes"))
            obj = self._gates.getattr(obj, key) if is_attr else obj[key]
        return obj, first


class _NoLookupFormatter(string.Formatter):
    """str.format for a library's call where no engine's gates are at hand: no field may read."""

    def get_field(self, field_name, args, kwargs):
        first, rest = _string.formatter_field_name_split(field_name)
        for _ in rest:
            raise genuine(AttributeDenied(f"'{field_name}' in a format field", "format fields run by a library "
                                          "may not read attributes or items here"))
        return self.get_value(first, args, kwargs), first


_NO_LOOKUP_FORMATTER = _NoLookupFormatter()

# -- str.format run by libraries ------------------------------------------------------------------------
# A library that formats a template the cell chose (pandas' Styler.format('{0.__globals__[...]}')) runs
# str.format in C, where '{0.attr}' reads any attribute. While a cell runs, such a call goes through the
# same field gate as the cell's own str.format (_GatedFormatter), unless the template is a constant of the
# library function calling it. str.format and str.format_map are replaced in str's type for the whole
# process (_fastgates.install_format_gate): templates without attribute or item fields, and every call
# outside a cell, are formatted by the original methods.

_LOOKUP_FIELD = re.compile(r"\{[^}:!{.\[]*[.\[]")
_ORIGINAL_FORMAT = str.format
_ORIGINAL_FORMAT_MAP = str.format_map


def _library_format(original, template, args, kwargs, caller):
    # A library's own constant template is its code, not the cell's; sandboxed code (a cell, its eval() text,
    # the provided modules: their builtins are the sandbox's) gets no such exemption, whatever route handed it
    # the raw method (review 11, R11-1, R11-5).
    if not cell_is_running() or type(template) is str and template in caller.f_code.co_consts \
            and "__st_tick__" not in caller.f_builtins:
        return original(template, *args, **kwargs)
    gates = CURRENT_GATES.get()
    formatter = gates.formatter if gates is not None else _NO_LOOKUP_FORMATTER
    if original is _ORIGINAL_FORMAT_MAP:
        if kwargs or len(args) != 1:
            return original(template, *args, **kwargs)   # format_map's own TypeError
        return formatter.vformat(str.__str__(template), (), args[0])
    return formatter.vformat(str.__str__(template), args, kwargs)


def _format_gate(original, template, /, *args, **kwargs):
    """Called by _fastgates' str.format for a template with lookup fields; frame 1 is its caller."""
    return _library_format(original, template, args, kwargs, sys._getframe(1))


def _install_format_gate() -> None:
    global _ORIGINAL_FORMAT, _ORIGINAL_FORMAT_MAP
    if _fastgates is not None:
        _ORIGINAL_FORMAT, _ORIGINAL_FORMAT_MAP = _fastgates.install_format_gate(runtime_callable(_format_gate))
        return
    import ctypes
    import gc

    # without the extension: the same gate in Python, in the dict behind str's mapping proxy
    namespace = gc.get_referents(type.__dict__["__dict__"].__get__(str))[0]
    if getattr(namespace["format"], "__st_format_gate__", False):
        return
    original_format, original_format_map = namespace["format"], namespace["format_map"]

    def format(self, /, *args, **kwargs):
        if isinstance(self, str) and _LOOKUP_FIELD.search(self):
            return _library_format(original_format, self, args, kwargs, sys._getframe(1))
        return original_format(self, *args, **kwargs)

    def format_map(self, /, *args, **kwargs):
        if isinstance(self, str) and _LOOKUP_FIELD.search(self):
            return _library_format(original_format_map, self, args, kwargs, sys._getframe(1))
        return original_format_map(self, *args, **kwargs)
    for gated, original in ((format, original_format), (format_map, original_format_map)):
        gated.__doc__ = original.__doc__
        gated.__qualname__ = f"str.{gated.__name__}"
        gated.__st_format_gate__ = True
        runtime_callable(gated)
    _ORIGINAL_FORMAT, _ORIGINAL_FORMAT_MAP = original_format, original_format_map
    namespace["format"], namespace["format_map"] = format, format_map
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(str))


# ------------------------------------------------------------------------------------------------
# Decisions
# ------------------------------------------------------------------------------------------------

_ALLOW = 1      # read, then check the value's type
_ALLOW_PURE = 2  # read, the value was checked once (module attributes)


class Gates:
    """All gates for one engine and one policy at a time."""

    def __init__(self, policy: Policy, *, on_denial=None, budget=None, namespace=None, display=None,
                 provided=None):
        self.on_denial = on_denial or (lambda exc: None)
        self.budget = budget
        self.namespace = namespace
        self.display = display
        self.provided = provided or (lambda name: None)   # the sandbox's own modules (provided_modules)
        self.formatter = _GatedFormatter(self)
        # process-wide library state (pandas options, uarray backends ...) as this engine's cells left it, and
        # the host's while a cell runs (guards.swap_in_library_state)
        self.library_state: dict = {}
        self.host_library_state: dict = {}
        self.set_policy(policy)

    def set_policy(self, policy: Policy) -> None:
        self.policy = policy
        # cleared in place, never replaced: _fastgates.CachedGates holds this dict
        if hasattr(self, "_cache"):
            self._cache.clear()
        else:
            self._cache: dict = {}
        self._class_cache: dict = {}
        self._super_cache: dict = {}
        self._instance_types: dict = {}
        self._classes_handed_out: set = set()   # classes type(x) may answer with (checked once)
        self._foreign_modules: dict = {}   # top-level module name -> True when ungranted third-party code
        self._guarded: dict = {}
        self._match_stand_ins: dict = {}
        self._decimal_context = None   # decimal.Context as this engine's cells see it (_guard_decimal_context)
        self._safe_functions: set = set()
        self._denied_values: set[int] = set(_DANGEROUS_BUILTINS)
        self._denied_pairs: set = set()   # (class or module, attribute)
        self._unresolved = list(policy.object_deny)
        self._modules_seen = -1   # len(sys.modules) when rules and guards last caught up with it
        self._catch_up_with_loaded_modules()
        self.set_memory_limit(policy.limits.memory_mb)

    def set_memory_limit(self, memory_mb) -> None:
        """The size checks' cap: one step may build at most the memory limit (the policy's, or a cell's)."""
        self.max_bytes = memory_mb * 1024 * 1024 if memory_mb else DEFAULT_MAX_BYTES

    # -- denial plumbing -------------------------------------------------------------------------

    _quiet = 0   # > 0 while answering hasattr / import *: the question itself is not a denial

    def deny(self, exc: SandboxViolation):
        exc.policy = exc.policy or self.policy.name
        exc.set_line(_cell_line())
        exc.refresh()
        genuine(exc)
        if not self._quiet:
            self.on_denial(exc)
        raise exc

    def _decision(self, obj, name):
        """The decision for obj.name, from the caches or freshly made (raises when denied); getattr inlines the
        cache lookup on its hot path."""
        t = type(obj)
        decision = self._cache.get((obj if t is ModuleType else t, name))
        # decided outside any except block: a refusal must not carry the lookup's KeyError, whose key holds the
        # object's real class (review 12, R12-3)
        return self._decision_not_cached(obj, t, name) if decision is None else decision

    def _allowed_quietly(self, obj, name) -> bool:
        self._quiet += 1
        try:
            self._decision(obj, name)
            return True
        except AttributeError:
            return False
        finally:
            self._quiet -= 1

    # -- object rules (pandas.DataFrame.query ...) resolved to identities ------------------------

    def _catch_up_with_loaded_modules(self) -> None:
        """Libraries load libraries (px.data.gapminder() imports pandas, Series.interpolate scipy): whatever
        loaded a module, its object rules are resolved and its guards installed before any decision about
        its objects is made, and no decision made before that is reused. Called on every cache miss (a new
        module's objects are always misses first); costs a len() when nothing was loaded."""
        loaded = len(sys.modules)
        if loaded == self._modules_seen:
            return
        self._modules_seen = loaded
        _guards.register_library_guards()
        if cell_is_running():
            bound_numpy_allocations()   # numpy loaded by a library call allocates bounded from now on
        if self._unresolved and self._resolve_object_rules():
            self._forget_decisions()

    def _forget_decisions(self) -> None:
        """A rule resolved late: every cached decision may have been made without it."""
        self._cache.clear()
        self._class_cache.clear()
        self._super_cache.clear()
        self._safe_functions.clear()
        self._classes_handed_out.clear()

    def _resolve_object_rules(self) -> bool:
        """Resolves what can be resolved now; True when a rule was resolved."""
        still = []
        for path in self._unresolved:
            owner, attr = _resolve_path(path)
            if owner is None:
                still.append(path)
                continue
            self._denied_pairs.add((owner, attr))
            value = owner.__dict__.get(attr) if isinstance(getattr(owner, "__dict__", None), dict) or _is_class(owner) else None
            if value is None:
                try:
                    value = getattr(owner, attr)
                except Exception:
                    value = None
            if value is not None and not isinstance(value, (int, float, str)):
                self._denied_values.add(value)
                self._keep_alive = getattr(self, "_keep_alive", []) + [value]
        resolved = len(still) != len(self._unresolved)
        self._unresolved = still
        return resolved

    def _pair_denied(self, obj, name) -> bool:
        if not self._denied_pairs:
            return False
        if type(obj) is ModuleType:
            return (obj, name) in self._denied_pairs
        cls = obj if _is_class(obj) else type(obj)
        try:
            mro = cls.__mro__
        except AttributeError:
            return False
        return any((k, name) in self._denied_pairs for k in mro)

    # -- reading ---------------------------------------------------------------------------------

    def getattr(self, obj, name):
        """``__st_getattr__(obj, name)``: the value of ``obj.name`` if the policy allows it.
        The rewriter always passes a str constant; builtin_getattr checks names from cells."""
        t = type(obj)
        # modules are keyed by themselves (every module has the same type); a miss is decided outside any except
        # block (a refusal carrying the lookup's KeyError would hand out the object's real class: R12-3)
        decision = self._cache.get((obj if t is ModuleType else t, name))
        if decision is None:
            # super() reads (super().__init__ in every cell constructor) skip _decision_not_cached's frame
            decision = self._decide_super_cached(obj, name) if t is super else self._decision_not_cached(obj, t, name)
        if decision is _ALLOW:
            value = getattr(obj, name)
            tv = type(value)
            if tv in _PLAIN_TYPES:
                if tv is MethodType and value.__func__ not in self._safe_functions:
                    return self._check_method(value, name)
                return value
            return self._check_value(value, obj, name)
        if decision is _ALLOW_PURE:
            return getattr(obj, name)
        return decision(obj)

    def _decision_not_cached(self, obj, t, name):
        if t is super:
            return self._decide_super_cached(obj, name)
        # Only classes of known metaclasses are looked up by identity: an instance with its own
        # __hash__/__eq__ must never match a class's cached decision.
        decision = self._class_cache.get((obj, name)) if t in _HASHABLE_METACLASSES else None
        return self._decide(obj, t, name) if decision is None else decision

    def pattern_read(self, subject, name) -> None:
        """A class pattern ('case C(k=v)') reads subject.k itself, after this check, and binds what it
        read: no gate stands between. So the read is allowed only where the gate would hand out the very
        object Python reads: refused where the gate substitutes a copy, a read-only view or a guarded
        stand-in (a library class's list, scipy's index arrays, np.frombuffer), and where the value
        itself is refused. Module attributes, builtin data and the public attributes of the cell's own
        classes are not read here (their decision covers the value), so Python reads them once."""
        t = type(subject)
        decision = self._decision(subject, name)
        if decision is _ALLOW_PURE or t in OWN_CLASSES and Rewriter._own_attribute_name(name):
            return   # what the inline own-instance path (rewriter) reads unchecked too
        if decision is _ALLOW:
            value = getattr(subject, name)   # AttributeError: the pattern does not match
            tv = type(value)
            if tv in _PLAIN_TYPES:
                if tv is MethodType and value.__func__ not in self._safe_functions:
                    self._check_method(value, name)
                return
            if self._check_value(value, subject, name) is value:
                return
        self.deny(AttributeDenied(f"'{_normalise(name)}' of {_type_name(subject)} in a class pattern",
                                  "the sandbox hands this attribute out as a copy or a guarded stand-in, "
                                  "which a pattern cannot bind", hint=f"read it in the case body: subject.{name}"))

    def _decide(self, obj, t, name):
        """Returns _ALLOW, _ALLOW_PURE or a callable producing the value (substitution); raises when
        the access is denied. Caches where the decision depends only on the key."""
        self._catch_up_with_loaded_modules()
        n = _normalise(name)
        if t is ModuleType:
            return self._decide_module(obj, n)
        if t in _INTERNAL_TYPES:
            self.deny(AttributeDenied(f"'{n}' of a {t.__name__} object", "interpreter internals are hidden"))
        if n in _NAMES_READ_NEVER:
            self.deny(AttributeDenied(f"'{n}'", "frames, code objects and class hierarchies are hidden"))
        if issubclass(t, _GENERIC_ALIASES) and n not in _GENERIC_ALIAS_OWN_NAMES:
            # np.ndarray[Any, Any], NDArray, Annotated[np.ndarray, m], Field[int] pass reads on to their origin
            # class: decided as reads of the origin, its refusals and stand-ins included (review 17, R17-6)
            return lambda alias: self.getattr(object.__getattribute__(alias, "__origin__"), name)
        is_class = _is_class(obj)
        if t is super:
            return self._decide_super(obj, n)
        per_instance = False
        if n.startswith("_"):
            if not self._private_readable(obj, is_class, n):
                if not n.startswith("__") and self._private_library_subclass(obj, is_class, n):
                    per_instance = True   # a method of the cell's subclass of a library class
                else:
                    self.deny(AttributeDenied(f"'{n}' of {_type_name(obj)}",
                                              "private and dunder attributes are hidden",
                                              hint=None if n.startswith("__") else
                                              "private names are readable only on classes defined in the sandbox"))
            elif not n.startswith("__") and n not in PUBLIC_PRIVATE_NAMES:
                hidden, shadowed = _library_private(obj, is_class, n)
                if hidden:
                    # enum's _convert_/_create_, abc's _abc_registry_clear: the machinery of the library class
                    # a cell class derives from writes process state (_convert_ writes any module's globals)
                    self.deny(AttributeDenied(f"'{n}' of {_type_name(obj)}", "private names of the library classes "
                                              "a cell class derives from are hidden"))
                per_instance = per_instance or shadowed   # the cell's classes may define or delete it later
        if self._pair_denied(obj, n):
            self.deny(AttributeDenied(f"'{n}' of {_type_name(obj)}", "this method is disabled by the policy"))
        self._refuse_array_resize(obj, is_class, n)
        if n == "__init__" and not is_class and isinstance(obj, decimal.Context):
            self.deny(AttributeDenied("'__init__' of a decimal context",
                                      "a context is set up once (its precision is bounded then)"))
        if n == "__init__" and not _reinitialisable(obj if is_class else t):
            # A library's constructor run again on an object that exists assigns its attributes itself, past the
            # write gate and the read-only list (dateutil's DEFAULTPARSER given a planted callable, a csr_array
            # left half re-initialised with unchecked indices: review 10, N10-6, N10-7). super().__init__ in a
            # cell class's constructor is the way a subclass calls its library base.
            self.deny(AttributeDenied(f"'__init__' of {_type_name(obj)}",
                                      "a library object's constructor runs once, when the object is made",
                                      hint="make a new object instead"))
        subst = self._substitute(obj, t, is_class, n)
        decision = subst or _ALLOW
        if subst is None and self._foreign_class(obj if is_class else t):
            decision = self._plain_data_only(obj if is_class else t, n)
        if decision is _ALLOW and not is_class and _built_on_index_arrays(t):
            decision = self._index_arrays_read_only(n)
        if decision is _ALLOW and n == "base" and not is_class and _is_ndarray(obj):
            decision = self._base_of_read_only_arrays(n)
        if decision is _ALLOW and (not is_sandbox_class(obj) and not _guards.kept_per_engine(obj, n) if is_class
                                   else _read_only_instances(t)):
            decision = self._containers_copied(n)
        if decision is _ALLOW and _library_holds_a_container(obj if is_class else t, n):
            decision = self._class_container_copied(n, obj if is_class else t)
        if decision is _ALLOW and not is_class and t in _PURE_DATA and not n.startswith("_"):
            # public attributes of builtin data (lst.append, d.get, z.real): bound methods and data
            # of an object the cell already holds
            decision = _ALLOW_PURE
        if per_instance or _shadows_a_library_attribute(obj if is_class else t, n):
            return decision
        if not is_class:
            self._cache[(t, name)] = decision
        elif t in _HASHABLE_METACLASSES:
            if len(self._class_cache) > 100_000:
                self._class_cache.clear()
            self._class_cache[(obj, name)] = decision
        return decision

    def _containers_copied(self, n):
        """The read of n on a library class or a process-wide library object (read-only instance types): a
        list, dict or set comes as the cell's own copy. Those containers are the process's, and an in-place
        change outlives the cell (textwrap.TextWrapper's translation table, calendar.HTMLCalendar.cssclasses,
        a cached plotly validator's flags: review 7, N7-1/N7-3)."""
        def read(obj):
            value = getattr(obj, n)
            if type(value) in _COPIED_CONTAINERS:
                return _plain_copy(value)
            if _is_ndarray(value):   # a class's table (RK45.A, Polynomial.domain): read-only (review 10, N10-5)
                return _read_only_view(value)
            return self._allowed_value(obj, n, value)
        return read

    def _class_container_copied(self, n, cls):
        """The read of n through an instance of a library class, a cell class deriving from one, or super(),
        where n resolves to a container a library class holds: the cell's own copy, as on the class itself
        (HTMLCalendar().cssclasses is HTMLCalendar.cssclasses). What an instance holds itself is its own.
        (Decided per class: the reader is cached for cls, whose MRO is what it searches.)"""
        def read(obj):
            value = getattr(obj, n)
            if _held_by_a_library_class(cls, n, value):
                return _read_only_view(value) if _is_ndarray(value) else _plain_copy(value)
            return self._allowed_value(obj, n, value)
        return read

    def _base_of_read_only_arrays(self, n):
        """a.base of a read-only array: read-only too. The view is read-only because its owner is a library's
        data (pandas' Categorical codes are a read-only view of the codes it indexes by in C); its base is that
        data, writeable (review 9, N9-1/N9-2)."""
        def read(obj):
            base = getattr(obj, n)
            if _is_ndarray(base) and not sys.modules["numpy"].ndarray.flags.__get__(obj).writeable:
                return _read_only_view(base)
            return self._allowed_value(obj, n, base)
        return read

    def _index_arrays_read_only(self, n):
        """The read of n on a scipy object (or a pandas sparse index): an integer array comes as a read-only
        view. Those objects keep using the arrays they hand out as indices into their own buffers, in C
        without bounds checks (Delaunay.simplices, cKDTree.indices, a csr_array's indices, a BlockIndex's
        blengths): tri.simplices[:, 0] = 10**9 read and wrote outside them (review 5, N5-2; N4-9)."""
        def read(obj):
            return _read_only_index_view(self._allowed_value(obj, n, getattr(obj, n)))
        return read

    def _allowed_value(self, obj, n, value):
        """What an allowed read of obj.n hands out (getattr inlines the same, on its fast path)."""
        tv = type(value)
        if tv in _PLAIN_TYPES:
            if tv is MethodType and value.__func__ not in self._safe_functions:
                return self._check_method(value, n)
            return value
        return self._check_value(value, obj, n)

    def _decide_super_cached(self, obj, name):
        """super() reads depend on the class the super is for and on the instance's kind."""
        target = obj.__self__
        tt = type(target)
        kind = target if tt is ModuleType or issubclass(tt, type) else tt   # (_is_class inlined: hot)
        key = (name, obj.__thisclass__, kind)
        decision = self._super_cache.get(key)
        if decision is None:
            decision = self._decide(obj, super, name)
            if decision is _ALLOW and not _shadows_a_library_attribute(obj.__self_class__, _normalise(name),
                                                                        after=obj.__thisclass__):
                self._super_cache[key] = decision
        return decision

    def _check_method(self, method, name):
        """A bound method is as dangerous as its function (a class may hold shutil.rmtree)."""
        func = method.__func__
        if type(func) is FunctionType and not is_sandbox_function(func) and not _is_runtime_callable(func) \
                and (_origin(func) in FORBIDDEN_ORIGINS or self._foreign_module(_origin(func))) \
                or _member(func, self._denied_values):
            self.deny(AttributeDenied(f"'{name}'", f"functions from '{func.__module__}' are not available"))
        if len(self._safe_functions) < 100_000:
            self._safe_functions.add(func)
        return method

    # -- objects of libraries the policy does not grant ----------------------------------------------
    # A granted library hands out objects of packages it depends on that the policy does not grant (pandas'
    # Styler.env is a jinja2 Environment, whose getattr/getitem look up any name, dunders included, in code
    # the gates never see; dateutil's and pytz's time zones). Their code was never reviewed: the cell may
    # hold such an object, pass it back to a granted library, print it, and read its plain data (numbers,
    # text), but not call its methods, read its other attributes, or receive its functions and classes.
    # The standard library is not "ungranted" here: its dangerous modules are the FORBIDDEN_ORIGINS above.

    def _foreign_module(self, top: str) -> bool:
        foreign = self._foreign_modules.get(top)
        if foreign is None:
            # (a loaded top-level package: C functions name made-up modules, scipy.odr.odr says '_odrpack')
            loaded = type(sys.modules.get(top)) is ModuleType
            foreign = loaded and top not in _NOT_FOREIGN and (top not in _STDLIB_MODULES or top in _OPAQUE_STDLIB) \
                and not self.policy.module_allowed(top)
            if loaded:
                self._foreign_modules[top] = foreign
        return foreign

    def _foreign_class(self, cls) -> bool:
        if is_sandbox_class(cls):
            return False
        module = type.__dict__["__module__"].__get__(cls) if isinstance(cls, type) else None
        return type(module) is str and self._foreign_module(module.split(".", 1)[0])

    def _plain_data_only(self, cls, n):
        """The read of cls's n: refused before any of the library's code could run (a property, a method, a
        __getattr__ of its own), and refused after it unless the value is plain data."""
        deny, name = self.deny, _type_name(cls)

        def refuse():
            deny(AttributeDenied(f"'{n}' of {name}", "objects of libraries the policy does not grant are "
                                 "opaque: only their plain data (numbers, text) can be read"))
        raw = _raw_attribute(cls, n)
        if raw is not None and not isinstance(raw, _C_DATA_DESCRIPTORS) and hasattr(type(raw), "__get__") or \
                raw is None and any(_raw_attribute(cls, hook) is not None and _raw_attribute(cls, hook) is not
                                    getattr(object, hook) for hook in ("__getattr__", "__getattribute__")):
            refuse()

        def read(obj):
            value = getattr(obj, n)
            if type(value) not in _SCALAR_TYPES:
                refuse()
            return value
        return read

    def _private_readable(self, obj, is_class, n) -> bool:
        if n.startswith("__") and n.endswith("__"):
            if n in SAFE_DUNDERS:
                return True
            if obj is object and n in ("__setattr__", "__delattr__"):
                return True   # replaced by the gated stand-in (_substitute)
            if n == "__new__":
                # object.__new__(cls) and a cell class's own __new__; a library class's __new__ makes
                # an object its __init__ never set up (C extensions crash on those)
                cls = obj if is_class else type(obj)
                return cls is object or is_sandbox_class(cls)
            if n == "__dict__":
                cls = obj if is_class else type(obj)
                return is_sandbox_class(cls) and _wholly_sandboxed(cls) and (is_class or _raw_arrays_refused(cls))
            return False
        if n in PUBLIC_PRIVATE_NAMES:
            return True
        cls = obj if is_class else type(obj)
        return self._private_on_sandbox_class(cls, n)

    @staticmethod
    def _private_on_sandbox_class(cls, n) -> bool:
        """A private name is the cell's when its class is wholly the sandbox's. With a library base
        (class D(pd.DataFrame)), only methods and class attributes the sandbox defined, of names no
        library class uses, are; instance state may have been set by the library (D()._mgr)."""
        if not is_sandbox_class(cls):
            return False
        if _wholly_sandboxed(cls):
            return True
        return False   # decided per instance: see _private_library_subclass

    def _private_library_subclass(self, obj, is_class, n) -> bool:
        cls = obj if is_class else type(obj)
        if not is_sandbox_class(cls) or _wholly_sandboxed(cls):
            return False
        if not is_class:
            inst = _instance_dict_of(obj)
            if inst is None or n in inst:
                return False
        owner = None
        for k in cls.__mro__:
            if n in k.__dict__:
                if not (is_sandbox_class(k) or _structural(k)):
                    return False
                owner = owner or k
        return owner is not None and is_sandbox_class(owner)

    def _refuse_array_resize(self, obj, is_class, n):
        if n == "resize" and (_is_ndarray(obj) or is_class and _is_ndarray_class(obj)):
            # a.resize(n, refcheck=False) frees the old block under every view of it: the views then
            # read whatever is allocated there next (an object array's pointers); super(np.matrix, m) too
            self.deny(AttributeDenied("'resize' of an array", "it can free memory other arrays still view",
                                      hint="np.resize(a, shape) returns a resized copy"))

    def _decide_super(self, obj, n):
        """super() reads follow the rules of the instance it is bound to; super().__setattr__ and
        friends are handed out only wrapped in the write gate."""
        self_class = obj.__self_class__
        if n in ("__setattr__", "__delattr__"):
            target = obj.__self__
            if self_class is None or not is_sandbox_class(self_class):
                self.deny(AttributeDenied(f"'{n}' of super()", "only classes defined in the sandbox may use it"))
            bound = getattr(obj, n)

            def gated(attr, *value):
                self.write(target, attr)
                return bound(attr, *value)
            return lambda _obj: runtime_callable(gated)
        if n == "__init__" and isinstance(obj.__self__, decimal.Context) \
                and getattr(getattr(obj, n), "__objclass__", None) is decimal.Context:
            # super(decimal.Context, ctx).__init__(prec=...): decimal's own __init__, past the bound
            self.deny(AttributeDenied("'__init__' of a decimal context through super()",
                                      "a context's precision is bounded by the sandbox's decimal.Context"))
        if n == "__getattribute__":
            target = obj.__self__
            bound = getattr(obj, n)

            def gated_read(attr):
                a = _normalise(attr)
                if a.startswith("_") and not self._private_readable(target, False, a) or a in _NAMES_READ_NEVER \
                        or self._pair_denied(target, a):
                    self.deny(AttributeDenied(f"'{a}'", "private and dunder attributes are hidden"))
                subst = self._substitute(target, type(target), False, a)
                if subst is not None:
                    return subst(target)
                return self._check_value(bound(attr), target, a)
            return lambda _obj: runtime_callable(gated_read)
        if n == "__new__":
            # super().__new__(cls) in a cell class: allowed when what it resolves to is object.__new__
            # or a cell class's own
            resolved = getattr(obj, n)
            owner = getattr(resolved, "__self__", None)
            if not (resolved is object.__new__ or owner is object or is_sandbox_class(owner)):
                self.deny(AttributeDenied("'__new__' of super()", "only object.__new__ and the cell's own"))
            return _ALLOW
        if n.startswith("_") and not (n in SAFE_DUNDERS or n in PUBLIC_PRIVATE_NAMES or
                                      (self_class is not None and self._private_on_sandbox_class(self_class, n))):
            self.deny(AttributeDenied(f"'{n}' of super()", "private and dunder attributes are hidden"))
        target = obj.__self__
        if self._pair_denied(target, n):
            self.deny(AttributeDenied(f"'{n}' of super()", "this method is disabled by the policy"))
        target_is_class = _is_class(target)
        cls = target if target_is_class else type(target)
        self._refuse_array_resize(target, target_is_class, n)
        # super(S, s).format, super().__init__(it) of a list subclass: the parent's method, with the
        # stand-in it would have read directly
        decision = self._substitute_super(obj, n) or _ALLOW
        if decision is _ALLOW and not target_is_class and _built_on_index_arrays(cls):
            decision = self._index_arrays_read_only(n)
        if decision is _ALLOW and n == "base" and not target_is_class and _is_ndarray(target):
            decision = self._base_of_read_only_arrays(n)
        if decision is _ALLOW and _library_holds_a_container(cls, n):
            decision = self._class_container_copied(n, cls)
        return decision

    def _substitute(self, obj, t, is_class, n):
        """Safe stand-ins for attributes whose real value would escape the gates. One rule for instance
        and class reads: the stand-in is chosen by what the name resolves to in the class's MRO
        (_STAND_IN_KINDS), and a method read from the class gets the same check as the bound method,
        applied to whatever object the cell passes as self (pd.Series.apply(box, ...), str.join(sep, xs))."""
        if is_class and obj is object and n in ("__setattr__", "__delattr__"):
            # the frozen-dataclass idiom object.__setattr__(self, "b", v), through the write gate
            write = self.write
            if n == "__setattr__":
                return lambda _o: runtime_callable(
                    lambda target, attr, value: object.__setattr__(write(target, attr), attr, value))
            return lambda _o: runtime_callable(lambda target, attr: object.__delattr__(write(target, attr), attr))
        if n == "register" and is_class and isinstance(obj, abc.ABCMeta):
            return self._abc_register(obj)
        if not is_class and issubclass(t, functools.partial) and n in ("func", "args", "keywords"):
            return self._partial_part(n)
        cls = obj if is_class else t
        raw = _raw_attribute(cls, n)
        kind = _stand_in_kind(raw, n)
        if kind is None:
            return None
        make = self._stand_in_maker(kind, n)
        if not is_class:
            return lambda o: make(getattr(o, n), o)
        if _binds_to_the_class(raw):   # dict.fromkeys, a staticmethod: the class read is already bound
            return lambda c: make(getattr(c, n), c)
        return lambda c: _unbound_stand_in(make, getattr(c, n))

    def _partial_part(self, n):
        """p.func, p.args, p.keywords: a partial's insides are the cell's own, or a library's, but never the
        runtime's: a stand-in made as a partial held the raw method in .args (review 11, R11-1..3). The
        runtime's callables are closures now; this refuses any partial of its own that remains."""
        deny, check = self.deny, self._allowed_value

        def read(p):
            if _is_runtime_callable(p):
                deny(AttributeDenied(f"'{n}' of a sandbox callable", "the sandbox's own callables are not taken apart"))
            return check(p, n, getattr(p, n))
        return read

    def _substitute_super(self, sup, n):
        """super().n: the stand-in for what n resolves to after the super's class in the MRO."""
        owner = sup.__self_class__
        if owner is None:
            return None
        kind = _stand_in_kind(_raw_attribute(owner, n, after=sup.__thisclass__), n)
        if kind is None:
            return None
        make, target = self._stand_in_maker(kind, n), sup.__self__
        return lambda s: make(getattr(s, n), target)

    def _stand_in_maker(self, kind, n):
        """make(bound, target) -> the callable a cell receives in place of bound (target: its self)."""
        if kind == "format":
            fmt = self.formatter
            return lambda bound, target: runtime_callable(lambda *a, **k: fmt.vformat(_as_str(target), a, k))
        if kind == "format_map":
            fmt = self.formatter
            return lambda bound, target: runtime_callable(lambda m: fmt.vformat(_as_str(target), (), m))
        if kind == "pad":
            padded = self.padded
            return lambda bound, target: runtime_callable(lambda *a, **k: padded(bound, *a, **k))
        if kind == "random_bits":
            bits = self.random_bits
            return lambda bound, target: runtime_callable(lambda k: bits(bound, k))
        if kind == "kdtree_pairs":
            counted = self.counted_pairs
            return lambda bound, target: runtime_callable(lambda *a, **k: counted(bound, target, *a, **k))
        if kind == "random_state":
            # RandomState.set_state: the positions in the state are checked (guards.checked_random_state)
            checked = _guards.checked_random_state
            return lambda bound, target: runtime_callable(lambda *a, **k: bound(*map(checked, a), **k))
        if kind == "array_unlock":
            # a.setflags(write=True) without the extension (guards._guard_array_unlock)
            checked = _guards._CHECKED_SETFLAGS[0]
            return lambda bound, target: runtime_callable(lambda *a, **k: checked(target, *a, **k))
        if kind == "grow_text":
            # s.replace('a', s) builds len(s)**2 in C: the result's size is estimated first
            grown = self.checked_growth
            return lambda bound, target: runtime_callable(lambda *a, **k: grown(n, target, bound, a, k))
        if kind in ("consume", "consume_first"):
            # C consumes the iterables: made material through the sized gate first (charged)
            sized, first = self.sized, kind == "consume_first"
            return lambda bound, target: runtime_callable(lambda *a, **k: _grow_call(sized, bound, first, *a, **k))
        if kind == "consume_init":
            # d.__init__(iterable) refills a container in C, like its constructor: charged the same way
            consumable = self.consumable

            def refill(bound, target, *a, **k):
                if not a:
                    return bound(**k)
                taker = next((c for c in _BY_PROTOCOL if isinstance(target, c)), None)
                return bound(consumable(a[0], taker), *a[1:], **k)
            return lambda bound, target: runtime_callable(lambda *a, **k: refill(bound, target, *a, **k))
        if kind == "join":
            join = self.checked_join
            return lambda bound, target: runtime_callable(lambda parts: join(target, bound, parts))
        if kind == "range_walk":
            # range.count(1.5) walks the range in C (an exact int is answered in O(1))
            charge = self.charge_consumed

            def walk(bound, target, v, *a):
                if type(v) is not int and type(v) is not bool:
                    charge((target,))
                return bound(v, *a)
            return lambda bound, target: runtime_callable(lambda *a: walk(bound, target, *a))
        if kind == "tolist":
            # arr.tolist() makes a Python object per element in one C call (~32 bytes each, not 8)
            too_large, limit = self._too_large, self.max_bytes

            def tolist(bound, target):
                size = _array_size(target)
                if size * 32 > limit:
                    too_large(f"tolist() of {size:,} elements (~{size * 32:,} bytes of Python objects)")
                return bound()
            return lambda bound, target: runtime_callable(lambda: tolist(bound, target))
        if kind == "object_sort":
            # a.sort() / a.partition(k) of an object array: the elements' __lt__ is the cell's code, which may
            # put new objects in the array while numpy's sort holds the old ones without references (pivots,
            # merge buffer) and writes them back freed (review 5, N5-11). A copy's references keep every
            # element alive; the sorted copy is written back.
            def in_place(bound, target, *a, **k):
                np = sys.modules["numpy"]
                if not np.ndarray.dtype.__get__(target).hasobject:
                    return bound(*a, **k)
                copy = np.ndarray.copy(target)
                result = getattr(np.ndarray, n)(copy, *a, **k)
                np.ndarray.__setitem__(target, Ellipsis, copy)
                return result
            return lambda bound, target: runtime_callable(lambda *a, **k: in_place(bound, target, *a, **k))
        if kind == "format_spec":
            # x.__format__(spec) is format(x, spec): the same width check on the spec
            check = self.check_format_spec
            return lambda bound, target: runtime_callable(lambda spec: bound(check(spec)))
        if kind == "plotly_show":
            display, deny = self.display, self.deny

            def show(target, *a, **k):
                if display is None:
                    deny(CallDenied("Figure.show()", "there is no display here"))
                return display(target)
            return lambda bound, target: runtime_callable(lambda *a, **k: show(target, *a, **k))
        if kind == "no_auto_open":
            return lambda bound, target: _no_auto_open(bound)
        if kind == "readinto":
            return lambda bound, target: _guards.readinto_stand_in(bound)
        raise AssertionError(f"no stand-in maker for {kind}")

    def _abc_register(self, abc_class):
        """ABC.register() puts a class in a registry the whole process consults (a cell ABC's registry
        too, through its library bases' subclass checks): only the cell's own classes may be registered,
        and only with an ABC whose ABC bases are all the cell's."""
        register = getattr(abc_class, "register")
        library_bases = [k for k in abc_class.__mro__ if isinstance(k, abc.ABCMeta) and not is_sandbox_class(k)
                         and k is not abc.ABC]
        deny = self.deny

        def guarded(subclass):
            if not is_sandbox_class(abc_class) or library_bases and not is_sandbox_class(subclass):
                deny(CallDenied(f"{_type_name(abc_class)}.register({_type_name(subclass)})",
                                "library ABCs are shared with the host; a cell's ABC may register only the "
                                "cell's own classes when it derives from one"))
            return register(subclass)
        return lambda _o: runtime_callable(guarded)

    def _check_value(self, value, obj=None, name=None):
        """What a read returns must itself be something the cell may hold."""
        t = type(value)
        if t is BuiltinFunctionType:
            owner = value.__self__
            if owner is obj and owner is not None and type(owner) is not ModuleType:
                return value   # a bound builtin method of the object just read (lst.append)
        elif t is MethodType and obj is not None and type(obj) is ModuleType:
            # a module's bound method (np.random.set_state is the process-wide RandomState's)
            guard = _guards.CALL_GUARDS.get(value)
            if guard is not None:
                return self.guarded(value, guard)
        if t is ModuleType:
            modname = value.__dict__.get("__name__")
            if type(modname) is not str or not self.policy.module_allowed(modname):
                self.deny(AttributeDenied(f"module '{modname}' reached through '{name}'",
                                          "this module is not granted", hint=self._modules_hint()))
            return value
        if t in _INTERNAL_TYPES:
            self.deny(AttributeDenied(f"'{name}'", "frames, code objects and tracebacks are hidden"))
        if t is memoryview:   # arr.data: a writable view of raw storage (an object array's pointers)
            self.deny(AttributeDenied(f"'{name}'", "raw memory views are not available"))
        if t is FunctionType or t is BuiltinFunctionType or t is functools.partial or issubclass(t, type):
            return self._check_callable(value, t, name)
        if t is types.GenericAlias:
            # np.typing.NDArray is ndarray[...]: calling an alias calls its origin, so a guarded origin
            # is swapped for its stand-in (subscripting the result keeps it)
            origin = self.handed_out(value.__origin__)
            if origin is not value.__origin__:
                return types.GenericAlias(origin, value.__args__)
        if t.__module__ == "typing":   # typing.Deque: callable like deque
            return self.handed_out(value)
        try:
            guard = _guards.CALL_GUARDS.get(value)
        except TypeError:   # unhashable
            guard = None
        if guard is not None:   # a guarded callable of a type the branches above do not know (numpy's dispatchers)
            return self.guarded(value, guard)
        refusal = self._instance_types.get(t, _UNSEEN)
        if refusal is _UNSEEN:
            refusal = self._instance_types[t] = _instance_refusal(t)
        if refusal is not None:
            self.deny(AttributeDenied(f"'{name}'", refusal))
        if _member(value, self._denied_values):
            self.deny(AttributeDenied(f"'{name}'", "this function is disabled by the policy"))
        return value

    def _check_callable(self, value, t, name):
        """Functions and classes: by identity (denied, guarded) and by the module they come from."""
        if _member(value, self._denied_values):
            self.deny(AttributeDenied(f"'{name}'", "this function is disabled by the policy"))
        guard = _guards.CALL_GUARDS.get(value) if t is not functools.partial else None
        if guard is not None:
            return self.guarded(value, guard)
        if issubclass(t, type):
            if issubclass(value, type):
                # Every metaclass (type, ABCMeta, EnumMeta) called with three arguments builds a class
                # from a dict the cell chose; cells get the one-argument type instead. Subclass
                # abc.ABC or enum.Enum to use them.
                return SandboxType
            if (_origin(value) in FORBIDDEN_ORIGINS or self._foreign_class(value)) and not _is_denial_class(value) \
                    and value not in _MEMORY_FILES:
                self.deny(AttributeDenied(f"'{name}'", f"classes from '{value.__module__}' are not available"))
            return value
        target = value.func if t is functools.partial else value
        if is_sandbox_function(target) or _is_runtime_callable(target):
            return value
        if _member(target, self._denied_values):
            self.deny(AttributeDenied(f"'{name}'", "this function is disabled by the policy"))
        owner = getattr(target, "__self__", None)
        if type(target) is BuiltinFunctionType and owner is not None and type(owner) is not ModuleType:
            return value  # a bound builtin method of an object the cell already holds
        origin = _origin(target)
        if origin in FORBIDDEN_ORIGINS or self._foreign_module(origin):
            self.deny(AttributeDenied(f"'{name}'", f"functions from '{target.__module__}' are not available"))
        return value

    def class_handed_out_by_type(self, cls) -> None:
        """type(x) gives a class only where x.__class__ would: not a class of a forbidden module (a ctypes
        object's CFUNCTYPE class makes a pointer to any symbol), not one the policy disables. (An ungranted
        library's class stays opaque wherever it is: its attributes and subclasses are refused.)"""
        if _member(cls, self._denied_values):
            self.deny(BuiltinDenied(f"type() of a {_type_name(cls)} object", "this class is disabled by the policy"))
        if _origin(cls) in FORBIDDEN_ORIGINS and not _is_denial_class(cls) and cls not in _MEMORY_FILES:
            self.deny(BuiltinDenied(f"type() of a {_type_name(cls)} object",
                                    f"classes from '{cls.__module__}' are not available"))
        if len(self._classes_handed_out) < 100_000:
            self._classes_handed_out.add(cls)

    def handed_out(self, value):
        """value as a cell receives it: the guarded stand-in where value has a guard, else value."""
        try:
            guard = _guards.CALL_GUARDS.get(value)
        except TypeError:   # unhashable (Annotated[int, {...}], a list of Callable parameters)
            return value
        return value if guard is None else self.guarded(value, guard)

    def guarded(self, value, guard):
        """The guarded stand-in for a function or class, one per engine, so every route to it (module
        attribute, from-import, type(x), x.__class__) gives the same object."""
        stand_in = self._guarded.get(value)
        if stand_in is None:
            stand_in = self._guarded[value] = guard(value, self)
        return stand_in

    def _modules_hint(self) -> str:
        # one line, not the whole list (45 names in data-science): the magic prints it on request
        count = len(self.policy.allowed_top_modules())
        return f"%sandbox_policy lists the {count} modules this policy grants"

    def _decide_module(self, mod, n):
        """Module attributes are cached in the main cache under (module, name); see getattr."""
        modname = mod.__dict__.get("__name__")
        rule = self.policy.module_rule(modname) if type(modname) is str else None
        if rule is None:
            self.deny(AttributeDenied(f"'{n}' of module '{modname}'", "this module is not granted"))
        if n.startswith("_") and n not in ("__name__", "__doc__", "__version__", "__all__"):
            self.deny(AttributeDenied(f"'{modname}.{n}'", "private module attributes are hidden"))
        if not rule.attribute_allowed(n) or (mod, n) in self._denied_pairs:
            self.deny(AttributeDenied(f"'{modname}.{n}'", "this attribute is disabled by the policy"))
        try:
            value = getattr(mod, n)
        except AttributeError:
            sub = f"{modname}.{n}"
            if sub in sys.modules or not self.policy.module_allowed(sub):
                raise
            raise AttributeError(f"module '{modname}' has no attribute '{n}' (try 'import {sub}')") from None
        checked = self._check_value(value, mod, f"{modname}.{n}")
        if type(value) in (tuple, list, set, frozenset):
            # a module's table of classes (np.ScalarType holds memoryview): each one as if read by name
            for item in value:
                if isinstance(item, type) or callable(item) and not isinstance(item, (str, bytes)):
                    self._check_value(item, mod, f"{modname}.{n}")
        if type(value) is dict and any(type(v) in _COPIED_CONTAINERS for v in value.values()):
            # a module-level table of lists (plotly.colors.PLOTLY_SCALES): the cell's own copy per read, the
            # lists inside included (review 7, N7-1: PLOTLY_SCALES['Greys'].append changed the process's)
            decision = (lambda v: lambda _m: _plain_copy(v))(value)
            self._cache[(mod, n)] = decision
            return decision
        if _is_ndarray(value) and modname.split(".", 1)[0] != "__main__":
            # a library's module-level array (numpy.polynomial's polyone, polyx): read-only for the cell, which
            # would change the host's later results in place (review 10, N10-5)
            decision = (lambda v: lambda _m: _read_only_view(v))(value)
            self._cache[(mod, n)] = decision
            return decision
        if type(value) is dict:
            # a library's module-level table (np.sctypeDict): readable, never changed by a cell
            checked = types.MappingProxyType(value)
        elif type(value) in (list, set, decimal.Context):
            # module-level mutable state (decimal.DefaultContext is the template of every new context):
            # a copy per read, so a cell changes only its own
            decision = (lambda v: lambda _m: copy.copy(v))(value)
            self._cache[(mod, n)] = decision
            return decision
        if checked is value and type(value) is not ModuleType:
            decision = _ALLOW_PURE
        else:
            decision = (lambda v: lambda _m: v)(checked) if checked is not value else _ALLOW
        self._cache[(mod, n)] = decision
        return decision

    # -- builtins that read attributes ----------------------------------------------------------

    def builtin_getattr(self, obj, name, *default):
        if len(default) > 1:
            raise TypeError(f"getattr expected at most 3 arguments, got {2 + len(default)}")
        _normalise(name)   # exact str before any cache lookup: a str subclass could fake its hash
        try:
            return self.getattr(obj, name)
        except SandboxViolation:
            raise
        except AttributeError:
            if default:
                return default[0]
            raise

    def builtin_hasattr(self, obj, name):
        """A question, not an access: a hidden attribute is simply absent (no denial is recorded)."""
        _normalise(name)
        if not self._allowed_quietly(obj, name):
            return False
        try:
            self.getattr(obj, name)   # what runs here (a property of the cell's) is recorded as usual
            return True
        except SandboxViolation:
            raise
        except AttributeError:
            return False

    # -- writing ---------------------------------------------------------------------------------

    def write(self, obj, name):
        """``__st_write__(obj, name)``: returns obj when ``obj.name = ...`` / ``del obj.name`` is allowed."""
        t = type(obj)
        try:
            decision = self._cache[("w", t, name)]
        except (KeyError, TypeError):
            decision = None
        if decision is True:
            return obj
        if decision is _LIBRARY_OBJECT:
            return self._library_object_write(obj, name)
        self._catch_up_with_loaded_modules()
        n = _normalise(name)
        if not n.isidentifier():
            # an attribute name is also text some libraries turn into code (dataclass fields, namedtuple-like
            # factories): a name that is not an identifier is never one an honest cell needs
            self.deny(AttributeDenied(repr(n)[:60] + " (write)", "attribute names must be identifiers"))
        if t is ModuleType:
            self.deny(AttributeDenied(f"'{n}' of module '{obj.__dict__.get('__name__')}'",
                                      "modules are read-only in the sandbox"))
        if t in _INTERNAL_TYPES or n in _WRITE_NEVER:
            self.deny(AttributeDenied(f"'{n}' (write)", "this attribute cannot be changed in the sandbox"))
        if n in _PANDAS_TYPE_NAMES:
            self.deny(AttributeDenied(f"'{n}' (write)", "pandas decides what an object is by it and then trusts "
                                      "its data"))
        if _is_class(obj):
            if not is_sandbox_class(obj):
                self.deny(AttributeDenied(f"'{n}' of class {_type_name(obj)} (write)",
                                          "classes not defined in the sandbox are read-only"))
            if n in SPECIAL_METHODS and not CLASS_WRITES_IN_C:   # else type's setattr decides (check_class_write)
                return _guards._BoundedWrite(obj, lambda value: self._special_method_written(obj, n, value))
            if n not in SPECIAL_METHODS and _library_defines(type.__dict__["__mro__"].__get__(obj), n):
                return _guards._BoundedWrite(obj, lambda value: self._library_override_written(obj, n, value))
            return obj
        if t is FunctionType or t is BuiltinFunctionType or t is MethodType:
            if not is_sandbox_function(obj) or (n.startswith("__") and n not in _WRITABLE_FUNCTION_DUNDERS):
                self.deny(AttributeDenied(f"'{n}' of a function (write)",
                                          "only functions defined in the sandbox can be changed"))
            return obj
        if n.startswith("_"):
            cls = t
            if not self._private_on_sandbox_class(cls, n) or (n.startswith("__") and n.endswith("__")
                                                               and n not in SAFE_DUNDERS):
                self.deny(AttributeDenied(f"'{n}' of {_type_name(obj)} (write)",
                                          "private attributes are writable only on classes defined in the sandbox"))
        if self._pair_denied(obj, n):
            self.deny(AttributeDenied(f"'{n}' of {_type_name(obj)} (write)", "disabled by the policy"))
        if self._foreign_class(t):
            # opaque objects (an ungranted library's, a dangerous stdlib module's: a logger's level, a handler's
            # stream) are the process's: the host and its libraries act on what they hold
            self.deny(AttributeDenied(f"'{n}' of {_type_name(obj)} (write)", "objects of libraries the policy does "
                                      "not grant are read-only in the sandbox"))
        if _read_only_instances(t):
            self.deny(AttributeDenied(f"'{n}' of {_type_name(obj)} (write)",
                                      "this library's objects are shared by the process: read-only in the sandbox"))
        if _library_finalizer(t):
            # np.load's NpzFile, io.StringIO: the garbage collector runs the finalizer after the cell, and it
            # calls what it finds on the object (z.close = functools.partial(...) would run unconfined)
            self.deny(AttributeDenied(f"'{n}' of {_type_name(obj)} (write)",
                                      "its class has a library finalizer, which runs after the cell: read-only"))
        if n == "strides" and _is_ndarray(obj):
            # a.strides = (4,) over object storage reads half pointers, (8,) over a structured
            # ('i8', 'O') array reads an int as a pointer: any address becomes an object
            self.deny(AttributeDenied("'strides' of an array (write)",
                                      "strides decide where elements are read; use slicing or np.lib views"))
        if n == "prec" and isinstance(obj, decimal.Context):
            return _guards._BoundedWrite(obj, lambda v: _guards.bounded_decimal_prec(self, v))
        if not is_sandbox_class(t) and not _callables_kept_per_engine(t):
            self._cache[("w", t, name)] = _LIBRARY_OBJECT
            return self._library_object_write(obj, n)
        self._cache[("w", t, name)] = True
        return obj

    def _library_object_write(self, obj, name):
        """``libobj.name = v``: data, or the cell's own code. A library keeps its objects and calls what it
        finds on them whenever it next runs, after the cell too and for the host (scipy.stats.norm.pdf,
        a Holiday's observance, plotly's cached validators, np.ma.sqrt.f are shared by the process); a
        library callable stored there (functools.partial(np.savetxt, '/outside', ...)) would run with
        the cell's arguments and no cell code to stop it. The cell's own functions tick, and refuse to run
        outside its cells."""
        # (property setters included: BSpline.c's stores what it gets)
        if type.__dict__["__module__"].__get__(type(obj)) == "sandbox_kernel.denials":
            # a caught refusal is reported as the sandbox's own words (the denial mark): its target, rule, policy
            # and hint changed by the cell made it say anything (review O3, O3-1)
            self.deny(AttributeDenied(f"'{name}' of {_type_name(obj)} (write)",
                                      "a refusal says what the sandbox refused; the cell cannot reword it"))
        if _module_level_library_object(obj) and not _guards.object_kept_per_engine(obj):
            # calendar.month_name.format = '%d' changed the host's calendar.month_name[1] (review 10, N10-10): an
            # object its library keeps in a module is the process's, whoever reaches it
            self.deny(AttributeDenied(f"'{name}' of {_type_name(obj)} (write)",
                                      "this object is kept by its library's module for the whole process"))
        if hasattr(type(obj), "__get__") and not callable(obj):
            # a descriptor (functools.cached_property, property, a library's own): what a library class holds
            # decides that attribute for every instance in the process; np.finfo.epsneg.attrname = 'eps' changed
            # the host's np.finfo(t).epsneg (review 12, R12-4)
            self.deny(AttributeDenied(f"'{name}' of {_type_name(obj)} (write)",
                                      "a descriptor decides an attribute for every object of its class"))
        keeps_invariants = _built_on_index_arrays(type(obj))

        def check(value):
            if is_sandbox_class(type(value)) and not _harmless_special_method(value):
                # the library calls methods it looks up on what it keeps (a Holiday's start_date.tz_localize),
                # and the cell's object can answer with a library callable (review 6, N6-2)
                self.deny(AttributeDenied(f"'{name}' of {_type_name(obj)} (write)",
                                          "a library's object takes data and the cell's own functions, not "
                                          "objects of the cell's classes: the library would call their methods "
                                          "whenever it next runs"))
            if keeps_invariants and not callable(value) and not _same_numbers_shape(obj, name, value):
                # b.c = np.zeros(1), b.k = 10**5, kde.dataset = ..., interp.values = ...: the constructor
                # checked these against each other, and C code indexes by them (review 5, N5-1)
                self.deny(AttributeDenied(f"'{name}' of {_type_name(obj)} (write)",
                                          "this object's data was checked when it was made, and its C code "
                                          "relies on that: make a new one instead"))
            if callable(value) and not _cell_or_builtin_callable(value):
                self.deny(AttributeDenied(f"'{name}' of {_type_name(obj)} (write)",
                                          "a library's object takes data and the cell's own functions only: a "
                                          f"library callable ({_what_is_bound(value)}) stored on it would run "
                                          "whenever the library next calls it, after the cell too",
                                          hint="wrap it in a function of your own: def f(*a): return g(*a)"))
            return _guards.checked_attribute_value(obj, name, value)

        def refuse_delete():
            # the library calls it next for everyone: np.ma.sqrt without its ufunc fails in the host too
            self.deny(AttributeDenied(f"'{name}' of {_type_name(obj)} (delete)",
                                      "a library's objects lose no attributes in the sandbox"))
        return _guards._BoundedWrite(obj, check, refuse_delete)

    def _library_override_written(self, cls, name, value):
        """C.name = v where a library class C derives from defines name: the library's own methods call it
        (enum's __repr__ calls _value_repr_, pandas' operations call _constructor)."""
        what = _library_override_refusal(name, value, mro=type.__dict__["__mro__"].__get__(cls))
        if what is not None:
            self.deny(_special_method_denial(_type_name(cls), what))
        return value

    def _special_method_written(self, cls, name, value):
        """Without the extension's class-write sink: the cell's own write of a special method, checked."""
        what = _special_method_refusal(name, value)
        if what is not None:
            self.deny(_special_method_denial(_type_name(cls), what))
        return value

    def builtin_setattr(self, obj, name, value):
        _normalise(name)
        setattr(self.write(obj, name), name, value)

    def builtin_delattr(self, obj, name):
        _normalise(name)
        delattr(self.write(obj, name), name)

    def augattr(self, obj, name, op, value):
        """``a.b op= v``: a gated read, the operation (size-checked), a gated write."""
        current = self.getattr(obj, name)
        result = self.apply_inplace(current, op, value)
        setattr(self.write(obj, name), name, result)

    def augitem(self, container, key, op, value):
        container[key] = self.apply_inplace(container[key], op, value)

    def aug(self, current, op, value):
        return self.apply_inplace(current, op, value)

    def apply_inplace(self, current, op, value):
        sym = op[:-1]
        if sym == "%" and isinstance(current, (str, bytes, bytearray)):
            return self.percent(current, value)
        if sym in _SIZED_OPS:
            current, value = self.check_size(current, sym, value)
        return _INPLACE[sym](current, value)

    # -- sizes -----------------------------------------------------------------------------------

    def small_power(self, a, k):
        """``a ** k`` for a small int constant k (the rewriter's __st_pow__): an int at the size cap would still
        grow k-fold in one C multiplication, and x = x ** 4 in a loop without bound (mutation run 2)."""
        return self.binop(a, "**", k)

    def binop(self, a, op, b):
        """``a * b``, ``a ** b``, ``a << b``, refused before they start when the result would be huge; ``a @ b``,
        charged first (charges.charge_matrix_product)."""
        ta = type(a)
        tb = type(b)
        if ta is float or tb is float:
            return _BINARY[op](a, b)
        a, b = self.check_size(a, op, b)
        return _BINARY[op](a, b)

    def make_mul(self):
        """``a * b`` (the commonest sized operator) as a closure with float and small-int fast paths."""
        check_size = self.check_size
        limit = MAX_INT_BITS

        def mul(a, b):
            ta = type(a)
            tb = type(b)
            if ta is float or tb is float:
                return a * b
            if ta is int and tb is int and a.bit_length() + b.bit_length() <= limit:
                return a * b
            a, b = check_size(a, "*", b)
            return a * b
        return mul

    def make_fast_gates(self):
        """``(mul, mod, ownattr, contains, pow)`` for this engine: see fast_gates."""
        return fast_gates(self.make_mul(), self.mod, self.getattr, OWN_CLASSES, self.contains, self.small_power)

    def make_cached_gates(self):
        """``(getattr, write)`` for ``__st_getattr__`` and ``__st_write__``: their cache hits in C
        (_fastgates.CachedGates: the same steps, the rest in this class), or the methods without the extension."""
        if _fastgates is None:
            return self.getattr, self.write
        cached = _fastgates.CachedGates(self._cache, _ALLOW, _ALLOW_PURE, _PLAIN_TYPES, self.getattr,
                                        self._allowed_value, self._check_value, self.write)
        return cached.getattr, cached.write

    def contains(self, container, item):
        """``item in container`` for anything but the builtin containers: an iterator is consumed in C,
        so what it would yield is charged first (-1 in map(abs, range(10**10)))."""
        if _on_mro(type(container), "__contains__") is None:
            container = self.consumable(container)   # 'in' iterates it in C
        else:
            self.charge_consumed((container,))
        return item in container

    def check_size(self, a, op, b):
        """Refuses ``a op b`` when its result would be huge, and returns the operands to compute it with:
        a count given as an int subclass or an ``__index__`` object comes back as the exact int it was
        checked as (asked once: a second answer could differ)."""
        if op == "*":
            if isinstance(a, int) and isinstance(b, int):
                bits = int.bit_length(a) + int.bit_length(b)
                if bits > MAX_INT_BITS:
                    self._too_large(f"the integer product ({bits:,} bits)", _INT_RULE)
                return a, b
            if isinstance(a, _REPEATING_SEQUENCES):
                reflected = getattr(type(b), "__rmul__", None)
                if type(reflected) is FunctionType:
                    # CPython gives the right operand's number slot its turn before repeating the sequence
                    product = reflected(b, a)
                    if product is not NotImplemented:
                        return _Product(product), None
                count = _as_count(b)
                if count is not None:
                    self._check_repeat(a, count)
                    return a, count
            elif isinstance(b, _REPEATING_SEQUENCES) and getattr(type(a), "__mul__", None) in (None, int.__mul__):
                # 'n * seq' repeats seq only when n's own '*' declines (an int, an __index__ object);
                # np.int64(3) * [1] is numpy's broadcasting instead, and stays so
                count = _as_count(a)
                if count is not None:
                    self._check_repeat(b, count)
                    return count, b
        elif op == "**":
            if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1:
                bits = (int.bit_length(a) - 1) * int(b)
                if bits > MAX_INT_BITS:
                    self._too_large(f"a {int.bit_length(a)}-bit integer to the power {int(b):,} (~{bits:,} bits)",
                                    _INT_RULE)
        elif op == "<<":
            if isinstance(a, int) and isinstance(b, int) and a and int.bit_length(a) + int(b) > MAX_INT_BITS:
                self._too_large(f"shifting an integer left by {int(b):,} bits", _INT_RULE)
        elif op == "@":
            _guards._charges.charge_matrix_product(a, b)
        return a, b

    def random_bits(self, getrandbits, k):
        """getrandbits(k) makes a k-bit integer in one C call, past the size every operator keeps integers to
        (review 16, R16-17: random.getrandbits(10**9))."""
        bits = operator.index(k)
        if bits > MAX_INT_BITS:
            self._too_large(f"random.getrandbits({bits:,})", _INT_RULE)
        return getrandbits(bits)

    def counted_pairs(self, bound, tree, r, p=2.0, eps=0.0, output_type="set"):
        """tree.query_pairs(r, ...): scipy's C++ fills a std::vector with every pair in one call, outside
        Python's allocator, so the memory limit looked only after it (n**2/2 pairs: 2.1 GB under 256 MB,
        review 9, N9-4). The pairs are counted first (count_neighbors keeps none), out to r * (1 + eps),
        and a result that cannot fit one step's size is refused before the call."""
        n = int(tree.n)
        within = int(tree.count_neighbors(tree, float(r) * (1 + max(0.0, float(eps))), p=p))
        pairs = max(0, (within - n) // 2)
        size = pairs * (16 + (16 if output_type == "ndarray" else 120))   # the vector, then the result
        if size > self.max_bytes:
            self._too_large(f"cKDTree.query_pairs: {pairs:,} pairs (~{size:,} bytes)")
        return bound(r, p, eps, output_type)

    def _check_repeat(self, seq, count):
        if count > 0:
            item = _char_width(seq) if isinstance(seq, str) else 1 if isinstance(seq, (bytes, bytearray)) else 8
            size = _true_len(seq) * count * item
            if size > self.max_bytes:
                self._too_large(f"repeating a {type(seq).__name__} {count:,} times (~{size:,} bytes)")

    def _too_large(self, what, rule=None):
        self.deny(SizeDenied(what, rule or f"one step may build at most {self.max_bytes:,} bytes "
                                           f"(the policy's memory limit)"))

    def check_format_spec(self, spec):
        """A format spec's widths and precisions, bounded; returns the spec as an exact str."""
        if type(spec) is not str:
            spec = str(spec)
        for number in _SPEC_NUMBER.findall(spec):
            if len(number) > 9 or int(number) > self.max_bytes // 4:
                self._too_large(f"the format spec {spec[:40]!r}")
        return spec

    def format(self, value, conversion="", spec=""):
        """``f"{x!r:>10}"`` and ``format(x, spec)``: widths and precisions are bounded before formatting."""
        spec = self.check_format_spec(spec)
        if conversion == "r":
            value = repr(value)
        elif conversion == "s":
            value = str(value)
        elif conversion == "a":
            value = ascii(value)
        return format(value, spec)

    def mod(self, a, b):
        """``a % b`` whose left operand is not a number (numbers never reach here: see make_fast_gates):
        string formatting has its widths checked first."""
        if isinstance(a, (str, bytes, bytearray)):
            return self.percent(a, b)
        return a % b

    def percent(self, fmt, args):
        """``"%10d" % x``: widths and precisions are bounded before C formats (and allocates) anything.
        Exact str/bytes views are scanned, so a subclass cannot hide its text."""
        if isinstance(fmt, (str, bytes, bytearray)):
            text = str.__str__(fmt) if isinstance(fmt, str) else bytes(fmt).decode("latin-1")
            limit = self.max_bytes // 4
            for width, precision in _percent_fields(text):
                for number in (width, precision):
                    if number.isdigit() and (len(number) > 9 or int(number) > limit):
                        self._too_large(f"the %-format field width {number}")
                if "*" in (width, precision):
                    values = args if isinstance(args, tuple) else (args,)
                    if any(type(v) is int and abs(v) > limit for v in values):
                        self._too_large("a %-format '*' width")
        return fmt % args

    def padded(self, method, *args, **kwargs):
        """s.ljust(n), rjust, center, zfill, expandtabs: the result's size checked before C builds it.
        The width as the method takes it: first argument, or the keyword (expandtabs' tabsize=8 default)."""
        if args:
            key, width = None, args[0]
        else:
            key = "tabsize" if "tabsize" in kwargs else "width" if "width" in kwargs else None
            width = kwargs[key] if key else (8 if getattr(method, "__name__", None) == "expandtabs" else None)
        count = _as_count(width)   # an int subclass or __index__ object: checked and passed as the exact int
        if count is not None:
            width = count
            if width > self.max_bytes // 4:
                self._too_large(f"padding a str to {width:,} characters")
            size = _expanded_size(method, width)
            if size > self.max_bytes // 4:   # expandtabs: every tab becomes up to `width` characters
                self._too_large(f"expanding tabs to {size:,} characters")
            if args:
                args = (width,) + args[1:]
            elif key:
                kwargs[key] = width
        return method(*args, **kwargs)

    def sized(self, fn, *args, **kwargs):
        """``list(x)`` and friends: the length of x is charged as ticks (and checked against the size
        cap) before the call consumes it in C."""
        if _member(fn, _SIZED_BUILTINS) and args:
            first = args[0]
            if (fn is bytes or fn is bytearray) and type(first) is int:
                n = first
                if n > self.max_bytes:
                    self._too_large(f"{fn.__name__}({n:,})")
            else:
                first = self.consumable(first, fn)
                args = (first,) + args[1:]
                n = _estimated_length(first)
                if n * 8 > self.max_bytes and fn is not sum and fn is not any and fn is not all \
                        and fn is not min and fn is not max:
                    self._too_large(f"{fn.__name__}() of {n:,} items")
            if n > 1000 and self.budget is not None and type(first) is not int:
                self.budget.charge(n)   # items consumed in C count as ticks; bytes(n) is one memset
            if fn is sum:
                start = args[1] if len(args) > 1 else kwargs.get("start", 0)
                if type(start) is list or type(start) is tuple:
                    # a + b copies both: summing sequences is quadratic in C (review 18, R18-3)
                    if type(first) is not list and type(first) is not tuple:
                        first = list(first)
                        args = (first,) + args[1:]
                    _guards._charges.charge_concatenations(start, first)
        return fn(*args, **kwargs)

    def checked_growth(self, name, text, method, args, kwargs):
        """str/bytes replace and translate, refused when the result would pass the size cap."""
        if not isinstance(text, _TEXT):
            return method(*args, **kwargs)   # str.replace(5, ...): the method's own TypeError
        if name == "replace" and len(args) >= 2:
            old, new = args[0], args[1]
            if isinstance(old, (str, bytes, bytearray)) and isinstance(new, (str, bytes, bytearray)) \
                    and _true_len(new) > _true_len(old):
                # the builtin count and len: a subclass's own could answer anything
                base = next(b for b in (str, bytes, bytearray) if isinstance(text, b))
                hits = base.count(text, old) if _true_len(old) else _true_len(text) + 1
                if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0:
                    hits = min(hits, int(args[2]))
                size = _true_len(text) + hits * (_true_len(new) - _true_len(old))
                if size > self.max_bytes // 4:
                    self._too_large(f"replace() growing a string to ~{size:,} characters")
        elif name == "translate" and args and type(args[0]) is dict and isinstance(text, str):
            longest = max((_true_len(v) for v in args[0].values() if isinstance(v, str)), default=1)
            if _true_len(text) * longest > self.max_bytes // 4:
                self._too_large(f"translate() growing a string to ~{_true_len(text) * longest:,} characters")
        return method(*args, **kwargs)

    def checked_join(self, separator, method, parts):
        """sep.join(parts) builds its whole result in one C call: the result's size, counted as the builtin
        types count it, is checked first. Parts that are not yet material are collected here, in Python
        (where the limits reach), and refused as soon as they add up past the cap."""
        if not isinstance(separator, _TEXT):
            return method(parts)
        text = isinstance(separator, str)
        limit = self.max_bytes // 4 if text else self.max_bytes
        measure = str.__len__ if text else _byte_length
        step = _true_len(separator)
        material = type(parts) is list or type(parts) is tuple
        if not material and _on_mro(type(parts), "__iter__") is None:
            return method(parts)   # not iterable: join's own error
        collected, size = [], 0
        for part in parts:
            if not material:
                collected.append(part)
            try:
                size += measure(part) + step
            except TypeError:
                break   # a part of the wrong type: join's own error below
            if size > limit:
                self._too_large(f"join() building more than {limit:,} characters")
        return method(parts if material else collected)

    def starred(self, value):
        """'*value' in a call, a display or an unpacking: C consumes all of it, so it goes through the
        sized gate first (a list or tuple is already material)."""
        if type(value) is list or type(value) is tuple:
            return value
        return self.sized(list, value)

    def unpacked(self, value, shape):
        """'(a, *b), c = value': every level of the target that holds a star, at any depth, is made
        material through the sized gate (C would build it uncharged); shape comes from the rewriter."""
        if shape is None:
            return value
        star, children = shape
        items = self.starred(value)
        n, k = len(children), len(items)
        if star < 0:
            if k != n:
                return items   # Python raises the usual "too many / not enough values"
            return [self.unpacked(v, c) for v, c in zip(items, children)]
        after = n - star - 1
        if k < n - 1:
            return items
        head = [self.unpacked(v, c) for v, c in zip(items[:star], children[:star])]
        tail = [self.unpacked(v, c) for v, c in zip(items[k - after:], children[star + 1:])] if after else []
        return head + list(items[star:k - after]) + tail

    def starred_rows(self, rows, shape=None):
        """The rows of 'for a, *b in rows', each charged as 'a, *b = row' would be."""
        unpacked = self.unpacked
        for row in rows:
            yield unpacked(row, shape) if shape is not None else self.starred(row)

    def charge_consumed(self, args):
        """What C will consume from these iterables is charged as ticks before it starts."""
        for arg in args:
            n = _estimated_length(arg)
            if n > 1000 and self.budget is not None:
                self.budget.charge(n)

    def consumable(self, obj, consumer=None):
        """What a C consumer is given in obj's place, charged: an instance of a cell class whose __iter__ is
        the cell's code is iterated here, once, as the consumer would, so that the iterator it answers is
        what gets measured (an __iter__ returning iter(range(10**12)) is consumed in C, past every limit).
        Not where the consumer takes such an object by another protocol (dict(mapping) reads its keys)."""
        t = type(obj)
        if is_sandbox_class(t) and type(_on_mro(t, "__iter__")) is FunctionType and not any(
                _on_mro(t, name) is not None for name in _BY_PROTOCOL.get(consumer, ())):
            obj = iter(obj)
        self.charge_consumed((obj,))
        return obj

    def pow(self, base, exp, mod=None):
        if mod is None:
            self.check_size(base, "**", exp)
            return pow(base, exp)
        return pow(base, exp, mod)

    # -- imports ---------------------------------------------------------------------------------

    def import_module(self, name: str):
        if type(name) is not str:
            self.deny(ImportDenied(repr(name)[:40], "module names must be plain str"))
        provided = self.provided(name)
        if provided is not None:   # sandboxed source the engine ran for the cell: never importlib's
            return provided
        rule = self.policy.module_rule(name)
        if rule is None:
            self.deny(ImportDenied(name, "this module is not granted", hint=self._modules_hint()))
        mod = importlib.import_module(name)
        self._catch_up_with_loaded_modules()
        return mod

    def import_(self, name, as_leaf):
        """``import a.b`` binds the top package a; ``import a.b as c`` binds a.b."""
        mod = self.import_module(name)
        if as_leaf or "." not in name:
            return mod
        top = name.split(".", 1)[0]
        return self.import_module(top)

    def importfrom(self, modname, names):
        mod = self.import_module(modname)
        out = []
        for n in names:
            try:
                out.append(self.getattr(mod, n))
            except SandboxViolation:
                raise
            except AttributeError:
                sub = f"{modname}.{n}"
                if self.policy.module_allowed(sub):
                    try:
                        out.append(self.import_module(sub))
                        continue
                    except ImportError:
                        pass
                provided = " (the sandbox provides IPython.display, not IPython)" if self.provided(modname) else ""
                raise ImportError(f"cannot import name '{n}' from '{modname}'{provided}") from None
        return tuple(out)

    def importstar(self, modname):
        mod = self.import_module(modname)
        names = mod.__dict__.get("__all__")
        if not isinstance(names, (list, tuple)):
            names = [n for n in mod.__dict__ if not n.startswith("_")]
        for n in names:
            if type(n) is not str or n.startswith("_") or not self._allowed_quietly(mod, n):
                continue
            try:
                self.namespace[n] = self.getattr(mod, n)
            except (AttributeError, SandboxViolation):
                continue

    # -- match and classes -----------------------------------------------------------------------

    def matched(self, *values):
        """Values bound by a class pattern are checked like attribute reads."""
        for v in values:
            if type(v) not in _PLAIN_TYPES:
                self._check_value(v, None, "a value bound by a class pattern")
        return True

    def starcaptured(self, *captured):
        """The lists a match star capture built in C (one step, past every checkpoint) are charged."""
        self.charge_consumed(captured)
        return True

    def matchvalue(self, value):
        """``case Color.RED:`` needs a dotted name in the pattern: the gated value goes in a box whose
        one attribute the pattern reads."""
        return _MatchValueBox(value)

    def matchclass(self, cls, keyword_names):
        """``case C(x, k=y)``: a stand-in for C whose isinstance check reads every attribute the
        pattern will read (C.__match_args__ and the keywords) through the attribute gate first."""
        if not _is_class(cls):
            raise TypeError("called match pattern must be a class")
        if type(cls) is type and cls.__module__ == "builtins" and not keyword_names:
            return cls   # int(x), str(x): builtins match the subject itself and read no attribute
        try:
            return self._match_stand_ins[(cls, keyword_names)]
        except (KeyError, TypeError):
            pass
        match_args = getattr(cls, "__match_args__", ())
        if type(match_args) is not tuple or any(type(a) is not str for a in match_args):
            raise TypeError(f"{_type_name(cls)}.__match_args__ must be a tuple of str")
        for attr in match_args + keyword_names:
            a = _normalise(attr)
            if a.startswith("_") or a in _NAMES_READ_NEVER:
                self.deny(AttributeDenied(f"'{a}' in a class pattern", "patterns may match public attributes only"))
        names = match_args + keyword_names
        gates = self

        class _PatternMeta(type):
            def __instancecheck__(stand_in, subject):
                if not isinstance(subject, cls):
                    return False
                for attr in names:
                    try:
                        gates.pattern_read(subject, attr)
                    except SandboxViolation:
                        raise
                    except AttributeError:
                        return False
                return True

        stand_in = _PatternMeta(getattr(cls, "__name__", "pattern"), (), {"__match_args__": match_args})
        if len(self._match_stand_ins) > 10_000:
            self._match_stand_ins.clear()
        self._match_stand_ins[(cls, keyword_names)] = stand_in
        return stand_in

    def entered(self, manager):
        """'with m': m's __enter__ and __exit__ are its methods, so an object whose methods the cell may not call
        (an ungranted library's, a dangerous stdlib module's) is not entered either: an RLock entered by a
        generator suspended inside the ``with`` stayed held after the cell (numpy's BitGenerator lock: every
        other thread's np.random blocked; review 15, R15-3). The budget runs the rest (limits.py)."""
        self._refuse_opaque_manager(manager)
        return self.budget.entered(manager)

    def entered_async(self, manager):
        """'async with m': as entered()."""
        self._refuse_opaque_manager(manager)
        return self.budget.entered_async(manager)

    def _refuse_opaque_manager(self, manager):
        cls = type(manager)
        if self._foreign_class(cls):
            self.deny(CallDenied(f"'with' on a {_type_name(cls)} object", "objects of libraries the policy does not "
                                 "grant are opaque: their methods, __enter__ included, cannot be called"))

    def build_class(self, func, name, *bases, **kwargs):
        """The class statement: bases and metaclass are checked, the class is recorded as the sandbox's.

        The class body's namespace is where its code looks up the runtime's own names first, so it must
        be made by a metaclass the sandbox trusts. CPython takes type(base) as the metaclass of a base
        that is not a class (``class X(P()):`` made a cell's ``P.__prepare__`` the maker of the body's
        namespace, which answered the runtime's names: review 15, R15-5). So the bases are resolved
        (``__mro_entries__``) exactly once here, each must then be a class, and the body runs in the one
        namespace _PreparedClass hands over (a second resolution or ``__prepare__`` could answer
        differently)."""
        resolved = types.resolve_bases(bases)
        for b in resolved:
            if not _is_class(b):
                self.deny(BuiltinDenied(f"a base that is a {_type_name(type(b))} object",
                                        "a class's bases must be classes"))
        bases_given, bases = bases, resolved
        for b in bases:
            if b is SandboxType or (_is_class(b) and issubclass(b, type)):
                self.deny(BuiltinDenied("a subclass of type", "metaclasses cannot be defined in the sandbox"))
            if _is_class(b) and b.__module__ == "sandbox_kernel.denials":
                self.deny(BuiltinDenied(f"a subclass of {b.__name__}", "the sandbox's refusals cannot be imitated"))
            if _is_class(b) and self._foreign_class(b):
                self.deny(BuiltinDenied(f"a subclass of {_type_name(b)}", "classes of libraries the policy does "
                                        "not grant cannot be subclassed"))
        meta = kwargs.get("metaclass")
        if meta is SandboxType:
            kwargs.pop("metaclass")
        elif meta is not None and meta not in ALLOWED_METACLASSES:
            self.deny(BuiltinDenied(f"metaclass {getattr(meta, '__name__', '?')}",
                                    "only abc.ABCMeta and enum metaclasses can be used"))
        meta = kwargs.pop("metaclass", None)
        prepared = _PreparedClass(_most_derived_metaclass(meta if meta is not None else type, bases), name, bases,
                                  bases_given, kwargs, self)
        cls = _host_builtins.__build_class__(func, name, *bases, metaclass=prepared, **kwargs)
        if _is_class(cls):
            if not CLASS_SINK_IN_C:   # else type's constructor has already decided (check_new_class)
                # a metaclass written in Python went through type.__new__, which checked the namespace before its
                # own writes (enum's Enum.__new__): only a plain class's special methods are checked here
                refused = _class_denial(name, type.__dict__["__bases__"].__get__(cls),
                                        dict(type.__dict__["__dict__"].__get__(cls)), self,
                                        special_methods=type(cls) is type)
                if refused is not None:
                    self.deny(refused)
            _SANDBOX_CLASSES.add(cls)
            if cls.__dict__.get("_is_protocol") is not True:   # typing.Protocol counts every class attribute
                for protocol in _RAW_ARRAY_PROTOCOLS:
                    if protocol not in cls.__dict__:
                        setattr(cls, protocol, _NO_RAW_ARRAY)
                for name, mark in _LIBRARY_TYPE_NAMES.items():
                    type.__setattr__(cls, name, mark)
            refuse_raw_protocols_in_hooks(cls)
            if isinstance(cls, abc.ABCMeta):
                _confine_abc_hooks(cls)
            if type(cls) is type and _wholly_sandboxed(cls) and all(
                    k is object or is_sandbox_class(k) for k in cls.__mro__) and len(OWN_CLASSES) < 100_000:
                OWN_CLASSES.add(cls)
        return cls


def _refuse_opaque_managers_in_exit_stacks():
    """contextlib's exit stacks enter a manager on the cell's behalf as 'with' does: ExitStack().enter_context(lock)
    left the lock held after the cell with no generator needed (review 15, R15-3). The same refusal, while a cell
    runs; outside a cell the stacks are the host's, unchanged."""
    import contextlib

    def checking(original):
        def enter(self, manager, *args, **kwargs):
            gates = CURRENT_GATES.get()
            if gates is not None and cell_is_running():
                gates._refuse_opaque_manager(manager)
            return original(self, manager, *args, **kwargs)
        enter.__name__, enter.__qualname__, enter.__doc__ = original.__name__, original.__qualname__, original.__doc__
        enter.__module__ = original.__module__   # contextlib's method still, as cells and libraries see it
        enter.__st_checked__ = True   # (host-side idempotence only: the class is the library's, never the cell's)
        return runtime_callable(enter)
    for cls in (contextlib.ExitStack, contextlib.AsyncExitStack):
        for name in ("enter_context", "enter_async_context"):
            original = getattr(cls, name, None)
            if original is not None and not getattr(original, "__st_checked__", False):
                setattr(cls, name, checking(original))


_refuse_opaque_managers_in_exit_stacks()


def _most_derived_metaclass(meta, bases):
    """The metaclass CPython's class statement would use: the most derived of ``meta`` and the bases' own."""
    winner = meta
    for base in bases:
        candidate = type(base)
        if issubclass(winner, candidate):
            continue
        if issubclass(candidate, winner):
            winner = candidate
            continue
        raise genuine(TypeError("metaclass conflict: the metaclass of a derived class must be a (non-strict) "
                                "subclass of the metaclasses of all its bases"))
    return winner


class _PreparedClass:
    """What build_class hands ``__build_class__`` as the metaclass: not a class, so CPython neither resolves
    the bases nor chooses a metaclass again; it returns the one namespace prepared here (a dict made by the
    trusted metaclass, never a cell's mapping) and then calls the real metaclass, as CPython would, with the
    ``__orig_bases__`` CPython records when ``__mro_entries__`` changed the bases."""

    __slots__ = ("_meta", "_namespace", "_bases_given", "_changed")

    def __init__(self, meta, name, bases, bases_given, kwargs, gates):
        namespace = meta.__prepare__(name, bases, **kwargs)
        if not isinstance(namespace, dict) or any(is_sandbox_class(k) for k in type(namespace).__mro__):
            gates.deny(BuiltinDenied(f"a class namespace of type {_type_name(type(namespace))}",
                                     "a class body runs in a dictionary"))
        self._meta, self._namespace = meta, namespace
        self._bases_given, self._changed = bases_given, bases_given != bases

    def __prepare__(self, name, bases, **kwargs):
        return self._namespace

    def __call__(self, name, bases, namespace, **kwargs):
        if self._changed:
            namespace["__orig_bases__"] = self._bases_given
        return self._meta(name, bases, namespace, **kwargs)


# -- the class-creation sink ---------------------------------------------------------------------------------
# A cell's class statement comes through build_class; library code makes classes from a namespace the cell
# chose without it (enum.Enum('E', {...}) and its mixin type=, namedtuple, TypedDict, NamedTuple). Every class
# is made by type's constructor: _numpyguard.guard_class_creation makes it (and every metaclass's copy of it)
# ask check_new_class first while a cell runs, so a refused class never exists (no __init_subclass__ or
# __set_name__ of the cell's sees it). A class a module's import makes is the library's own; any other is
# the cell's doing and meets the class statement's rules (_class_refusal); the attribute hooks in every new
# namespace answer "absent" for numpy's raw protocols from the start.

_CLASS_NAMES_NEVER = (FORBIDDEN_NAMES | READ_ONLY_NAMES) - {"__module__", "__qualname__"}


def _class_refusal(bases, namespace, gates):
    """(what, why) when a class made on a cell's behalf from bases and namespace may not exist, else None.
    Its finalizer, its own or inherited, must be a cell function: the garbage collector runs it after the
    cell, outside the confinement, where a cell function's first tick refuses and a library's
    (netcdf_file.close, io's close on collection) calls whatever the cell hung on the object."""
    for name in _PANDAS_TYPE_NAMES:
        if name in namespace and namespace[name] is not _LIBRARY_TYPE_NAMES.get(name):
            return f"'{name}' in a class", "pandas decides what an object is by it and then trusts its data"
    for name in _CLASS_NAMES_NEVER.intersection(namespace):
        if name in _RAW_ARRAY_PROTOCOLS and hasattr(type(namespace[name]), "__set__") or \
                name == "__dict__" and type(namespace[name]) is types.GetSetDescriptorType:
            continue   # a data descriptor answers for the class's instances (the sandbox's "absent", type's own)
        return f"'{name}' in a class", "the class statement cannot bind it either"
    finalizer = namespace.get("__del__")
    finalizers = [finalizer] if finalizer is not None else [_raw_attribute(b, "__del__") for b in bases]
    if any(f is not None and not is_sandbox_function(f) for f in finalizers):
        return ("a __del__ that is not a function defined in the cell", "finalizers run after the cell, where "
                "nothing else may (a class inheriting a library's finalizer included)")
    for base in bases:
        if not isinstance(base, type):
            continue
        if type.__dict__["__module__"].__get__(base) == "sandbox_kernel.denials":
            return f"a subclass of {_type_name(base)}", "the sandbox's refusals cannot be imitated"
        if gates is not None and gates._foreign_class(base):
            return (f"a subclass of {_type_name(base)}",
                    "classes of libraries the policy does not grant cannot be subclassed")
        if _derives_from_modules(base, _C_INDEX_DATA_MODULES) or _unlisted_pandas_or_scipy_base(base):
            # a cell's subclass answers the index data the library's C code trusts: a property for a
            # csr_array's indices or a MultiIndex's codes, get_window_bounds of a window indexer, factorize
            # of an extension array, a gaussian_kde's weights (reviews 8 and 10: memory read and written by
            # address). pandas 3 relabels classes' __module__ (ExtensionArray says pandas.api.extensions), so
            # every pandas and scipy class is refused but the extension points listed in _SUBCLASSABLE.
            return (f"a subclass of {_type_name(base)}",
                    "its objects hand C code index data that the C code does not check; use the library's own "
                    "classes")
        if base in _abstract_c_bases():
            # numpy's BitGenerator leaves its C function table to the concrete generators: a subclass of
            # it hands Generator NULL pointers, and the first draw calls one (review 5, N5-7)
            return (f"a subclass of {_type_name(base)}",
                    "it is an abstract base whose C parts only numpy's own generators fill: subclass "
                    "MT19937, PCG64, Philox or SFC64")
    return None


# Modules whose classes hand their index data to C or Cython that trusts it: a cell may use their objects
# but not subclass them (Gates' index-array rules cover the library's own objects).
# The pandas and scipy classes a cell may subclass: documented extension points whose objects the libraries'
# C code does not index by (a frame's or series' subclass, a holiday calendar's rules, a distribution's _pdf).
_SUBCLASSABLE = (("pandas", "DataFrame"), ("pandas", "Series"),
                 ("pandas.tseries.holiday", "AbstractHolidayCalendar"),
                 ("pandas.tseries.holiday", "USFederalHolidayCalendar"),
                 ("scipy.stats", "rv_continuous"), ("scipy.stats", "rv_discrete"), ("scipy.stats", "rv_histogram"))


def _real_module(cls) -> str:
    """The module a class was written in: pandas 3 sets a class's __module__ to where it is published
    (pandas.api.extensions), but its methods keep their own."""
    for value in type.__dict__["__dict__"].__get__(cls).values():
        if type(value) is FunctionType and type(value.__module__) is str:
            return value.__module__
    module = type.__dict__["__module__"].__get__(cls)
    return module if type(module) is str else ""


def _unlisted_pandas_or_scipy_base(base) -> bool:
    """The nearest pandas or scipy class in base's MRO (base itself first) is not one of _SUBCLASSABLE."""
    listed = {getattr(sys.modules.get(module), name, None) for module, name in _SUBCLASSABLE}
    for k in type.__dict__["__mro__"].__get__(base):
        if is_sandbox_class(k):
            continue
        if k in listed:
            return False
        top = _real_module(k).split(".", 1)[0]
        if top in ("pandas", "scipy") or type.__dict__["__module__"].__get__(k).split(".", 1)[0] in ("pandas", "scipy"):
            return True
    return False


_C_INDEX_DATA_MODULES = ("scipy.sparse", "scipy.spatial", "scipy.interpolate", "pandas.core.indexers",
                         "pandas.api.indexers", "pandas.core.arrays", "pandas._libs")


def _derives_from_modules(cls, prefixes) -> bool:
    """A library class in cls's MRO comes from a module named by one of prefixes."""
    for k in type.__dict__["__mro__"].__get__(cls):
        module = type.__dict__["__module__"].__get__(k)
        if type(module) is str and module.startswith(prefixes) and not is_sandbox_class(k):
            return True
    return False


def _abstract_c_bases() -> tuple:
    """Library bases whose instances need C state that only the library's own subclasses set up."""
    # (read from sys.modules: numpy's module __getattr__ would import numpy.random, making classes here)
    base = getattr(sys.modules.get("numpy.random.bit_generator"), "BitGenerator", None)
    return (base,) if base is not None else ()


def _class_denial(name, bases, namespace, gates, special_methods=True, maker=None):
    """The refusal of a class made on a cell's behalf (see _class_refusal), else None. Its special methods
    meet _special_method_refusal unless special_methods is False (a library's own maker); maker: the frame
    making the class."""
    if any(type(key) is not str for key in namespace):
        # a str subclass can answer every name check here "not equal" and numpy's lookup later "equal"
        # (same hash): planted __array_interface__ through enum's functional API (fuzzer finding F3)
        return BuiltinDenied("a class attribute named by an object that is not a plain str",
                             "class attribute names must be plain str")
    why = _class_refusal(bases, namespace, gates)
    if why is not None:
        return BuiltinDenied(*why)
    if special_methods:
        library_bases = [k for b in bases if isinstance(b, type) for k in type.__dict__["__mro__"].__get__(b)]
        what = _dataclass_namespace_refusal(library_bases, namespace)
        if what is not None:
            return BuiltinDenied(*what)
        for key, value in namespace.items():
            exact = _exact_name(key)
            if exact in SPECIAL_METHODS:
                what = _special_method_refusal(exact, value, maker)
            elif _library_defines(library_bases, exact):
                what = _library_override_refusal(exact, value, maker, library_bases)
            else:
                continue
            if what is not None:
                return _special_method_denial(name if type(name) is str else "?", what)
    return None


# -- dataclass fields ----------------------------------------------------------------------------------------
# dataclasses writes and reads every field by name in code of its own: the generated __init__ (self.f = f),
# replace() and asdict() (getattr(obj, f.name)), all past the cell's write and read gates. So a field's name must
# be one the cell could write on every instance of the class: no dunder (a '__class__' field swapped the class:
# review 17, R17-4), and on a class with a library base nothing private (an instance's private state may be the
# library's: rv_continuous's _parse_arg_template, R17-2b) and nothing a library base defines (ndarray's ctypes,
# R17-1). The fields of a cell's class are the ones dataclass() collected from it and its bases, so a class may
# not bring its own __dataclass_fields__ (a borrowed table named any attribute), and a class with a library base
# may not inherit a cell dataclass's fields that would break the rule for it.

_DATACLASS_TABLES = ("__dataclass_fields__", "__dataclass_params__")


def dataclass_field_refusal(mro, names):
    """(what, why) when dataclass fields named names may not exist on a class with this MRO, else None."""
    library = [k for k in mro if not (is_sandbox_class(k) or _structural(k))]
    for name in names:
        exact = _exact_name(name)
        if exact is None or not exact.isidentifier() or exact.startswith("__") and exact.endswith("__"):
            return (f"a dataclass field named {str(exact or name)[:40]!r}",
                    "dataclasses writes and reads fields by name past the sandbox's gates: a field is a plain "
                    "identifier, not a special name")
        if library and (exact.startswith("_") or _library_defines(library, exact)):
            return (f"a dataclass field named {exact!r} on a subclass of {_type_name(library[0])}",
                    "dataclasses writes and reads fields by name past the sandbox's gates: on a class with a "
                    "library base a field may not be private nor take a name the library's class defines")
    return None


def inherited_dataclass_fields(classes) -> list:
    """The field names dataclass() gave the cell's classes among classes (their own tables, never a library's)."""
    return [name for k in classes if is_sandbox_class(k)
            for name in type.__dict__["__dict__"].__get__(k).get("__dataclass_fields__", ())]


def _dataclass_namespace_refusal(mro, namespace):
    if any(table in namespace for table in _DATACLASS_TABLES):
        return ("'__dataclass_fields__' in a class", "only dataclass() makes a class's table of fields")
    if all(is_sandbox_class(k) or _structural(k) for k in mro):
        return None   # (the fields were checked when dataclass() made them, for classes wholly the cell's)
    inherited = inherited_dataclass_fields(mro)
    return dataclass_field_refusal(mro, inherited) if inherited else None


def _library_defines(mro, name) -> bool:
    """A library class in mro defines name (its own methods may call it on the cell's class)."""
    return bool(_library_values(mro, name))


def _library_values(mro, name) -> list:
    return [type.__dict__["__dict__"].__get__(k)[name] for k in mro
            if k is not object and not is_sandbox_class(k) and name in type.__dict__["__dict__"].__get__(k)]


def _library_override_refusal(name, value, maker=None, mro=()):
    """What is refused when value overrides a library base's attribute name on a cell's class: the same rule
    as a special method for anything callable (a library callable there runs when the library's own
    methods call it: enum's __repr__ calls _value_repr_, pandas' operations _constructor); data passes, and
    so does the base's own value (enum's class machinery copies _generate_next_value_ into the class)."""
    if not (callable(value) or isinstance(value, (staticmethod, classmethod, property))):
        return None
    if any(value is own for own in _library_values(mro, name)):
        return None
    if isinstance(value, type) and (_builtin_type(value) or any(value is k for k in mro)):
        return None   # a class the cell's class already derives from (enum's _member_type_: its mixin)
    return _special_method_refusal(name, value, maker)


def check_new_class(metatype, args, kwds):
    """What type's constructor makes a class from while a cell runs (see above): args, or args whose
    namespace's attribute hooks are wrapped; a refusal raises."""
    if len(args) != 3 or type(args[1]) is not tuple or type(args[2]) is not dict or not cell_is_running():
        return args   # type(x), a malformed call (type's own error), the kernel's own threads
    name, bases, namespace = args
    gates = CURRENT_GATES.get()
    maker = _maker_frame(sys._getframe(1))
    # (a module's import makes hundreds of classes: the question that lets them through is asked first)
    by_import = made_by_an_import(maker)
    exc = None if by_import else \
        _class_denial(name, bases, namespace, gates, not _makes_its_own_slots(maker, None), maker)
    if exc is not None:
        genuine(exc)
        if gates is not None:
            gates.deny(exc)
        raise exc
    metaclass = any(isinstance(b, type) and issubclass(b, type) for b in bases)
    # (a metaclass's namespace holds the hooks of its classes, not of its instances' attributes)
    hooks = [] if metaclass else [h for h in ("__getattr__", "__getattribute__")
                                  if h in namespace and not _member(namespace[h], _RAW_GUARDS)]
    # (not for typing.Protocol classes: a protocol counts every name in its namespace as a member to check)
    marks = not by_import and not metaclass and any(namespace.get(n) is not m for n, m in _LIBRARY_TYPE_NAMES.items()) \
        and not any(isinstance(b, type) and b.__dict__.get("_is_protocol") is True for b in bases)
    keys = [] if metaclass or by_import else [k for k in _KEY_METHODS if _confines_key(namespace.get(k))]
    if hooks or marks or keys:
        namespace = dict(namespace)
        for hook in hooks:
            namespace[hook] = _refusing_raw_protocols(namespace[hook])
        for key in keys:
            namespace[key] = _confined_key_method(key, namespace[key])
        if marks:   # a class made on the cell's behalf answers pandas' type marks from its library base
            namespace.update(_LIBRARY_TYPE_NAMES)
        return name, bases, namespace
    return args


runtime_callable(check_new_class)


# -- special methods: what Python, a library or the host calls on a class by itself ---------------------------
# Python calls a class's special methods implicitly (repr, hash, ==, iteration, len, format, a descriptor's
# __get__, __set_name__, __init_subclass__ ...), and so do the host (the kernel's log, a library's cache or
# finalizer, the garbage collector, a kernel thread) after the cell. A function the cell defined stops at its
# first tick there; a library callable bound in its place (functools.partial(np.savetxt, outside, ...), a
# library's Python or C function, a bound method, an object with __call__) is not cell code, never ticks, and
# would run unconfined. So while a cell runs, a class made or changed on its behalf binds under these names only
# what _special_method_refusal accepts: at creation (check_new_class, from type's constructor) and at every
# later write (check_class_write, from type's setattr slot: _numpyguard.guard_class_writes; without the
# extension, the write gate for the cell's own writes).
# The names: CPython's slot table (typeobject.c slotdefs) and the special methods Python, the standard
# library and numpy/pandas call by name. __del__ keeps its own, stricter rule (_class_refusal).
SPECIAL_METHODS = frozenset("""
__getattribute__ __getattr__ __setattr__ __delattr__ __repr__ __hash__ __call__ __str__ __lt__ __le__ __eq__
__ne__ __gt__ __ge__ __iter__ __next__ __get__ __set__ __delete__ __init__ __new__ __await__ __aiter__
__anext__ __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __mod__ __rmod__ __divmod__ __rdivmod__ __pow__
__rpow__ __neg__ __pos__ __abs__ __bool__ __invert__ __lshift__ __rlshift__ __rshift__ __rrshift__ __and__
__rand__ __xor__ __rxor__ __or__ __ror__ __int__ __float__ __iadd__ __isub__ __imul__ __imod__ __ipow__
__ilshift__ __irshift__ __iand__ __ixor__ __ior__ __floordiv__ __rfloordiv__ __truediv__ __rtruediv__
__ifloordiv__ __itruediv__ __index__ __matmul__ __rmatmul__ __imatmul__ __len__ __getitem__ __setitem__
__delitem__ __contains__ __buffer__ __release_buffer__
__set_name__ __init_subclass__ __class_getitem__ __mro_entries__ __prepare__ __missing__ __instancecheck__
__subclasscheck__ __subclasshook__ __enter__ __exit__ __aenter__ __aexit__ __length_hint__ __fspath__
__format__ __bytes__ __complex__ __round__ __trunc__ __floor__ __ceil__ __reversed__ __sizeof__ __dir__
__reduce__ __reduce_ex__ __getstate__ __setstate__ __getnewargs__ __getnewargs_ex__ __copy__ __deepcopy__
__replace__ __post_init__ __array__ __array_ufunc__ __array_function__ __array_finalize__ __array_wrap__
__array_prepare__ __array_namespace__ __dlpack__ __dlpack_device__ __finalize__ __dataframe__
""".split())
_SPECIAL_METHOD_RULE = ("a special method must be a function defined in the cell (or a staticmethod, classmethod "
                        "or property of one), None, or a builtin type's own method: Python and the host call it "
                        "by themselves, outside the cell too, where anything else would run unconfined")
_HEAPTYPE = 1 << 9   # Py_TPFLAGS_HEAPTYPE
_BUILTIN_METHOD_TYPES = (types.WrapperDescriptorType, types.MethodDescriptorType, types.ClassMethodDescriptorType)


def _exact_name(key):
    """A namespace key as type() will use it: a str subclass's characters (its own __eq__ or __hash__ could
    hide a special name), anything else None."""
    if type(key) is str:
        return key
    return str.__str__(key) if issubclass(type(key), str) else None


def _builtin_type(cls) -> bool:
    """One of Python's own static types (int, str, list, object ...): its methods do no I/O and call
    nothing but the object's own special methods."""
    return type(cls) is type and not cls.__flags__ & _HEAPTYPE and type.__dict__["__module__"].__get__(cls) == \
        "builtins"


def _harmless_special_method(value, source=frozenset(), wrapped=False) -> bool:
    """value may be bound as a special method (see above); source: the code objects written in the library
    function making the class or the write (its own methods and closures, see _library_source)."""
    if value is None or is_sandbox_function(value):
        return True
    t = type(value)
    if t is FunctionType:
        # the runtime's wrappers (ABC hooks that answer only inside a cell, attribute hooks that refuse the raw
        # array protocols): made only from what the class already holds or inherits
        return value in _CONFINED_HOOKS or value in _RAW_GUARDS or bool(source) and value.__code__ in source
    if (t is staticmethod or t is classmethod) and not wrapped:
        inner = value.__func__
        return inner is types.GenericAlias or _harmless_special_method(inner, source, wrapped=True)
    if t is property and not wrapped:
        return all(f is None or _harmless_special_method(f, source, wrapped=True)
                   for f in (value.fget, value.fset, value.fdel))
    if t in _BUILTIN_METHOD_TYPES:   # object.__eq__, list.__iter__, dict.get
        return _builtin_type(value.__objclass__)
    if t is BuiltinFunctionType:     # object.__new__, int.__new__: bound to the type
        return _builtin_type(value.__self__)
    if t is MethodType:              # the cell's function runs first, and ticks
        return is_sandbox_function(value.__func__)
    if t is functools.partial or t is functools.partialmethod:
        return is_sandbox_function(value.func)
    return False


def _special_method_refusal(name, value, maker=None):
    """What is refused (for the denial's target) when value may not be bound under the special method name
    on a class a cell makes or changes, else None (see above). maker: the frame making the class or the
    write."""
    if _harmless_special_method(value) or maker is not None and \
            _harmless_special_method(value, _library_source(maker.f_code)):
        return None
    return f"'{name}' ({_what_is_bound(value)})"


_SOURCE_CODES: dict = {}   # a library function's code object -> the code objects written inside it


def _library_source(code) -> frozenset:
    """The code objects written in an installed library function's source (its class bodies, their methods,
    its closures): a class statement a library runs at call time (plotly's chomp_empty_strings defines its
    class on every call) or a write it makes (cls.__x__ = a function it defines) binds the library's own
    methods, as its classes made at import do. Empty for the cell's code and the runtime's (the runtime's
    frame runs the cell's class statements)."""
    found = _SOURCE_CODES.get(code)
    if found is None:
        found = set()
        if installed_code(code.co_filename):
            pending = [(code, 0)]
            while pending:
                outer, depth = pending.pop()
                for inner in outer.co_consts:
                    if type(inner) is CodeType and inner not in found and depth < 4:
                        found.add(inner)
                        pending.append((inner, depth + 1))
        if len(_SOURCE_CODES) > 10_000:
            _SOURCE_CODES.clear()
        _SOURCE_CODES[code] = found = frozenset(found)
    return found


def _what_is_bound(value) -> str:
    """What a refused value is, read without running any of its code."""
    t = type(value)
    if t is FunctionType or t is BuiltinFunctionType:
        module = getattr(value, "__module__", None)
        return f"the function {module}.{value.__qualname__}" if type(module) is str else "a library function"
    name = type.__dict__["__qualname__"].__get__(t)
    module = type.__dict__["__module__"].__get__(t)
    return f"a {name} object" if module == "builtins" else f"a {module}.{name} object"


def _special_method_denial(cls_name, what):
    return AttributeDenied(f"{what} of class {cls_name}", _SPECIAL_METHOD_RULE)


# Library code that binds its own callables as special methods of a cell's class, allowed by the identity of
# its code object (never by the value: the same library function bound by the cell to another class would
# call what that class holds). Each binds only what it generated or its own functions, or a method of one of
# the class's own bases (what inheritance gives anyway):
#   dataclasses   __init__, __repr__, __eq__, the order methods, frozen __setattr__/__delattr__, __hash__,
#                 __replace__: generated from its templates (the codegen sink checks every field name) and
#                 run as the class's methods (they read and write fields); _add_slots remakes the class from
#                 the class's own dict (every entry checked when it was bound) and adds its own
#                 __getstate__/__setstate__; _process_class binds __hash__ itself (None or generated).
#   functools.total_ordering   its own _gt_from_lt ... functions, which call the cell's root comparison.
#   enum          EnumType.__new__, once the class exists: Enum.__new__, the first enum base's or the data
#                 type's __repr__/__str__/__format__/__reduce_ex__, Flag's operators (methods of the class's
#                 own bases); _make_class_unpicklable: _break_on_call_reduce; global_enum (handed out only for
#                 the cell's own enum): enum's global reprs. (The namespace EnumType.__new__ makes the class
#                 from is the cell's, and is checked.)
#   typing        Protocol.__init_subclass__: its own __subclasshook__ and __init__; _no_init_or_replace_init:
#                 the __init__ the class's MRO holds; NewType.__mro_entries__: a class whose
#                 __init_subclass__ raises TypeError.
#   collections.namedtuple   a namespace wholly its own (the field names validated as identifiers).
# Writes name what each may bind: dataclasses' _process_class also binds a field's default under the field's
# name (the cell's value), so it may bind only __hash__.
_NAMESPACE_MAKERS_SPEC = (
    ("dataclasses", "_add_slots"),
    ("typing", "NewType.__mro_entries__"),
    ("collections", "namedtuple"),
)
_WRITE_MAKERS_SPEC = (
    ("dataclasses", "_set_new_attribute", None),
    ("dataclasses", "_add_slots", ("__getstate__", "__setstate__")),
    ("dataclasses", "_process_class", ("__hash__",)),
    ("functools", "total_ordering", None),
    ("enum", "EnumType.__new__", None),
    ("enum", "EnumMeta.__new__", None),
    ("enum", "_make_class_unpicklable", ("__reduce_ex__",)),
    ("enum", "global_enum", ("__repr__", "__str__", "__format__")),
    ("typing", "Protocol.__init_subclass__", ("__subclasshook__", "__init__")),
    ("typing", "_no_init_or_replace_init", ("__init__",)),
)
# Frames that only pass a write or a class on: the maker is the frame below. EnumType.__setattr__ ends in
# type.__setattr__; the runtime's frames that act for their caller: the cell's class statement (build_class),
# the cell's setattr and a.b op= v, the Python fallbacks of the sinks, and a library's setattr by string
# (guards register theirs).
_PASS_THROUGH_SPEC = (("enum", "EnumType.__setattr__"), ("enum", "EnumMeta.__setattr__"))
_NAMESPACE_MAKERS: set = set()
_WRITE_MAKERS: dict = {}   # code object -> the names it may bind (None: every special method)
_PASS_THROUGH: set = set()


def _code_of(module_name, dotted):
    obj = sys.modules.get(module_name)
    for part in dotted.split("."):
        obj = getattr(obj, part, None) if obj is not None else None
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
    obj = getattr(obj, "__func__", obj)   # a classmethod read from its class
    code = getattr(obj, "__code__", None)
    return code if type(code) is CodeType else None


def _resolve_slot_makers() -> None:
    """The makers' code objects (all of them standard library, imported by this module)."""
    for module_name, dotted in _NAMESPACE_MAKERS_SPEC:
        code = _code_of(module_name, dotted)
        if code is not None:
            _NAMESPACE_MAKERS.add(code)
    for module_name, dotted, names in _WRITE_MAKERS_SPEC:
        code = _code_of(module_name, dotted)
        if code is not None:
            _WRITE_MAKERS[code] = None if names is None else frozenset(names)
    for module_name, dotted in _PASS_THROUGH_SPEC:
        code = _code_of(module_name, dotted)
        if code is not None:
            _PASS_THROUGH.add(code)


def _maker_frame(frame):
    """The frame that makes the class or the write: frame, or the one below the sinks' pass-throughs."""
    for _ in range(6):
        if frame is None or frame.f_code not in _PASS_THROUGH:
            return frame
        frame = frame.f_back
    return frame


_OWN_FILES = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _makes_its_own_slots(frame, name) -> bool:
    """frame is a library's maker allowed to bind name (None: to make a class from a namespace of its own), or
    the runtime's own code (its stand-ins and pattern classes, its guards of library classes; the frames
    that act for the cell are passed over, _PASS_THROUGH)."""
    if frame is None:
        return False
    code = frame.f_code
    if name is None and code in _NAMESPACE_MAKERS:
        return True
    if name is not None and code in _WRITE_MAKERS:
        names = _WRITE_MAKERS[code]
        return names is None or name in names
    return code.co_filename.startswith(_OWN_FILES)


def check_class_write(cls, name, value):
    """type's setattr asks this while a cell runs, for a special method name (_numpyguard.guard_class_writes)."""
    if not cell_is_running():
        return None   # the kernel's own threads
    if name in _KEY_METHODS and _confines_key(value):
        _KEYS_WRITTEN.add(cls)   # wrapped at the cell's end (confine_written_keys)
    if _harmless_special_method(value):
        return None
    maker = _maker_frame(sys._getframe(1))
    what = _special_method_refusal(name, value, maker)
    if what is None or _makes_its_own_slots(maker, name) or made_by_an_import(maker):
        return None
    exc = genuine(_special_method_denial(_type_name(cls), what))
    gates = CURRENT_GATES.get()
    if gates is not None:
        gates.deny(exc)
    raise exc


runtime_callable(check_class_write)


def check_class_assignment(obj, new_class):
    """object's __class__ setter asks this while a cell runs (_numpyguard.guard_class_assignment): whoever
    writes it (the cell, a dataclass's generated __init__, copy's slot state), an object the cell made keeps
    its class, and nothing becomes a cell's class or the runtime's (its refusals). A library moving its own
    object between its own classes (numpy.ma's masked constant, scipy's splines) is left alone."""
    if not cell_is_running():
        return None
    old = type(obj)
    if not any(is_sandbox_class(k) or _runtime_class(k) for k in (old, new_class)):
        return None
    exc = genuine(AttributeDenied(f"'__class__' of {_type_name(obj)} (write)",
                                  "an object keeps the class it was made with: the new class's constructor never "
                                  "checked the state it would get"))
    gates = CURRENT_GATES.get()
    if gates is not None:
        gates.deny(exc)
    raise exc


def _runtime_class(cls) -> bool:
    module = type.__dict__["__module__"].__get__(cls) if isinstance(cls, type) else None
    return type(module) is str and (module == "sandbox_kernel" or module.startswith("sandbox_kernel."))


runtime_callable(check_class_assignment)
_resolve_slot_makers()
_PASS_THROUGH.update((Gates.build_class.__code__, _PreparedClass.__call__.__code__, Gates.builtin_setattr.__code__,
                      Gates.augattr.__code__))


def _install_class_sink() -> bool:
    """check_new_class in type's constructor (True), or without the extension in type.__new__, which
    metaclasses written in Python call (enum's, abc's, typing's); type(name, bases, ns) itself is then
    decided only for the cell's own class statements (build_class)."""
    if _guards._numpyguard is not None and hasattr(_guards._numpyguard, "guard_class_creation"):
        _guards._numpyguard.guard_class_creation(check_new_class)
        if hasattr(_guards._numpyguard, "guard_class_writes"):
            _guards._numpyguard.guard_class_writes(check_class_write, SPECIAL_METHODS)
        _guards._numpyguard.guard_class_assignment(check_class_assignment)
        guard_metaclasses()
        return True
    import ctypes
    import gc

    namespace = gc.get_referents(type.__dict__["__dict__"].__get__(type))[0]
    original = namespace["__new__"]
    if getattr(original, "__st_class_sink__", False):
        return False

    def __new__(metatype, *args, **kwargs):
        if cell_is_running():
            args = check_new_class(metatype, args, kwargs)
        return original(metatype, *args, **kwargs)
    _PASS_THROUGH.add(__new__.__code__)
    __new__.__st_class_sink__ = True
    runtime_callable(__new__)
    namespace["__new__"] = staticmethod(__new__)
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(type))
    return False


def guard_metaclasses() -> None:
    """Metaclasses made before the sink copied type's original constructor: each gets the checked one."""
    guard = getattr(_guards._numpyguard, "guard_metaclass", None)
    if guard is None:
        return
    pending, seen = [type], set()
    while pending:
        for sub in type.__subclasses__(pending.pop()):
            if sub not in seen:
                seen.add(sub)
                guard(sub)
                pending.append(sub)


# -- process-wide registries: a cell's ABC answers only inside its cell ------------------------------------
# An ABC asks every subclass's __subclasshook__ (through __subclasses__(), so a cell's subclass of
# collections.abc.Mapping answers isinstance(x, Mapping) for the whole process), calls a class's own
# __subclasscheck__/__instancecheck__, and caches the answers in the ABC and all its bases. A cell's
# hooks are wrapped: outside a running cell (after it, in the kernel's threads) they answer as if absent.
# At the end of every cell the caches of the ABCs that took a cell's answers are emptied, so nothing a
# cell answered outlives it. Registration is restricted in Gates._abc_register.
_CELL_ABCS: "weakref.WeakSet[type]" = weakref.WeakSet()   # cell ABCs and the library ABCs above them
# The runtime's own hooks, known by identity (a mark in a function's dict can be copied onto a cell's: R16-12).
_CONFINED_HOOKS: "weakref.WeakSet" = weakref.WeakSet()
_RAW_GUARDS: "weakref.WeakSet" = weakref.WeakSet()
_ABC_HOOKS = ("__subclasshook__", "__subclasscheck__", "__instancecheck__")


def _confine_abc_hooks(cls) -> None:
    for name in _ABC_HOOKS:
        raw = cls.__dict__.get(name)
        if raw is None or _member(getattr(raw, "__func__", raw), _CONFINED_HOOKS):
            continue
        wrapper = classmethod if isinstance(raw, classmethod) else staticmethod if isinstance(raw, staticmethod) \
            else None
        function = raw.__func__ if wrapper is not None else raw

        def confined(*args, __function=function, __name=name, __bound=wrapper is classmethod):
            if cell_is_running():
                return __function(*args)
            if __name == "__subclasshook__":
                return NotImplemented
            if __bound:   # (cls, sub): the answer ABCMeta itself gives
                return getattr(abc.ABCMeta, __name)(args[0], args[-1])
            return False
        _CONFINED_HOOKS.add(confined)
        runtime_callable(confined)
        type.__setattr__(cls, name, wrapper(confined) if wrapper is not None else confined)
    for k in cls.__mro__:
        if isinstance(k, abc.ABCMeta):
            _CELL_ABCS.add(k)


def forget_cell_abc_answers() -> None:
    """The end of a cell: every ABC a cell's class could have answered for forgets the answers."""
    for k in list(_CELL_ABCS):
        try:
            k._abc_caches_clear()
        except Exception:   # noqa: BLE001 - teardown must go on
            pass


at_cell_end(forget_cell_abc_answers)


def _is_ndarray(obj) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.ndarray)


def _is_ndarray_class(cls) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(cls, type) and issubclass(cls, np.ndarray)


def _no_raw_array(self):
    raise AttributeError("raw array protocols are not available in the sandbox")


# numpy reads these from an instance (np.asarray(obj)) and trusts the address in them. Cells cannot bind
# the names, but an instance's __dict__ could hold them: a data descriptor on every class the cell
# defines takes precedence over the instance dict and answers "absent".
_RAW_ARRAY_PROTOCOLS = ("__array_interface__", "__array_struct__")
_NO_RAW_ARRAY = property(_no_raw_array)
# pandas decides what an object is by these names (getattr(x, '_typ'): extract_array, its ABCs) and then trusts
# its data in C: a cell class with _typ = 'index' passed as an Index, whose codes Categorical took unchecked
# (review 16, R16-18). Every class the cell makes answers them from the library class it derives from (a class
# wholly the cell's has none), with a data descriptor that comes before its instances' dicts; its namespace may
# not bind them, and its attribute hooks never answer them.
_PANDAS_TYPE_NAMES = ("_typ", "_subtyp")


class _LibraryTypeName:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, owner=None):
        owner = type(obj) if owner is None else owner
        base = next(k for k in type.__dict__["__mro__"].__get__(owner) if not is_sandbox_class(k))
        return getattr(base, self.name)   # object has none: AttributeError, as for any absent name

    def __set__(self, obj, value):
        raise AttributeError(f"'{self.name}' is pandas' type mark: a cell's object cannot set it")

    def __delete__(self, obj):
        raise AttributeError(f"'{self.name}' is pandas' type mark: a cell's object cannot delete it")


_LIBRARY_TYPE_NAMES = {name: _LibraryTypeName(name) for name in _PANDAS_TYPE_NAMES}


def refuse_raw_protocols_in_hooks(cls) -> None:
    """A __getattr__ answers what a failed lookup (our descriptor's "absent" included) leaves over, and
    a __getattribute__ answers everything: either, the cell's or a library base's, would hand numpy a
    dict the cell filled. The class gets a wrapper that answers "absent" for the raw protocols first."""
    for hook in ("__getattr__", "__getattribute__"):
        found = None
        for k in cls.__mro__:
            if hook in k.__dict__:
                found = k.__dict__[hook]
                break
        if found is None or found is object.__getattribute__ or _member(found, _RAW_GUARDS):
            continue
        type.__setattr__(cls, hook, _refusing_raw_protocols(found))


def _refusing_raw_protocols(hook):
    def guarded(self, name):
        if name in _RAW_ARRAY_PROTOCOLS or name in _PANDAS_TYPE_NAMES:
            raise AttributeError(name)
        return hook(self, name)
    for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
        try:
            setattr(guarded, attribute, getattr(hook, attribute))
        except (AttributeError, TypeError):
            pass
    _RAW_GUARDS.add(guarded)
    return runtime_callable(guarded)


# -- a cell's objects as keys of the process's caches ------------------------------------------------------------
# Libraries keep process-wide caches keyed by what they were given (dateutil's tz.gettz, _strptime's formats,
# typing's _tp_cache): a cell's object stays there after the cell, and the host's next lookup with an equal hash
# compares against it, running the cell's __eq__ where a cell function refuses to run (review 17, R17-7: the
# host's gettz('Europe/Paris') raised). A class made while a cell runs has its own __eq__, __ne__ and __hash__
# wrapped: outside a running cell its objects equal only themselves and hash by identity, so a host lookup
# misses them and goes on as if they were absent.
_KEY_METHODS = ("__eq__", "__ne__", "__hash__")
_confining = _confine._FS.get
_KEYS_WRITTEN: "weakref.WeakSet[type]" = weakref.WeakSet()   # classes given a key method during the cell


def _confines_key(value) -> bool:
    """A key method that runs the cell's code: its function, or a staticmethod, classmethod, property, bound method,
    partial or partialmethod of one (what the special-method rule lets a class bind); never a library's own (the
    classes an import makes during a cell keep theirs)."""
    t = type(value)
    if t is staticmethod or t is classmethod or t is MethodType:
        value = value.__func__
    elif t is property:
        value = value.fget
    elif t is functools.partial or t is functools.partialmethod:
        value = value.func
    return is_sandbox_function(value)


def _confined_key_method(name, value):
    if type(value) is FunctionType:
        call = value
    else:   # bound as Python binds a special method it looks up on the class
        def call(self, *args):
            get = getattr(type(value), "__get__", None)
            return (get(value, self, type(self)) if get is not None else value)(*args)
    # (the confinement's context variable first: a C call, where cell_is_running is two Python frames)
    if name == "__eq__":
        def confined(self, other):
            return call(self, other) if _confining() is not None or cell_is_running() else self is other
    elif name == "__ne__":
        def confined(self, other):
            return call(self, other) if _confining() is not None or cell_is_running() else self is not other
    else:
        def confined(self):
            return call(self) if _confining() is not None or cell_is_running() else object.__hash__(self)
    for attribute in ("__name__", "__qualname__", "__doc__"):
        text = getattr(value, attribute, None)
        if type(text) is str:
            setattr(confined, attribute, text)
    _CONFINED_HOOKS.add(confined)
    return runtime_callable(confined)


def confine_written_keys() -> None:
    """The end of a cell: a key method written on a class during it (K.__eq__ = f) is wrapped like one the class
    was made with (the class-write sink lets the cell's function through; the host compares after the cell)."""
    for cls in list(_KEYS_WRITTEN):
        namespace = type.__dict__["__dict__"].__get__(cls)
        for name in _KEY_METHODS:
            value = namespace.get(name)
            if _confines_key(value):
                type.__setattr__(cls, name, _confined_key_method(name, value))
    _KEYS_WRITTEN.clear()


at_cell_end(confine_written_keys)


def _raw_arrays_refused(cls) -> bool:
    """The instances' __dict__ may be handed out only where the class answers "absent" to numpy's
    raw protocols (not protocol classes, which build_class leaves alone)."""
    for protocol in _RAW_ARRAY_PROTOCOLS:
        for k in cls.__mro__:
            if protocol in k.__dict__:
                if k.__dict__[protocol] is not _NO_RAW_ARRAY:
                    return False
                break
        else:
            return False
    return True

_LAZY_WRAPPERS = (map, filter, enumerate)


def _estimated_length(it, depth: int = 0) -> int:
    """length_hint, looking through map/filter/enumerate/zip (which hint 0) to what they wrap:
    sum(map(abs, range(10**18))) is charged for 10**18 items before C starts on it. The cell's own
    __len__ is never asked (CPython's consumers do not ask it either; it may raise, lie or have effects):
    an instance of a cell class is measured by the builtin class it derives from, if any."""
    t = type(it)
    if is_sandbox_class(t):
        return _length_kept_by_a_builtin(it, t)
    n = operator.length_hint(it, 0)
    if n or depth > 4:
        return n
    t = type(it)
    t = t.__dict__.get("__st_real__", t) if isinstance(t.__dict__.get("__st_real__"), type) else t  # map's stand-in
    if t in _LAZY_WRAPPERS or t is zip:
        try:
            args = it.__reduce__()[1]
        except Exception:
            return 0
        inner = [a for a in args if hasattr(type(a), "__iter__") or hasattr(type(a), "__next__")]
        if t is map:
            inner = list(args[1:])
        elif t is filter:
            inner = list(args[1:2])
        elif t is enumerate:
            inner = list(args[:1])
        lengths = [_estimated_length(a, depth + 1) for a in inner]
        if not lengths:
            return 0
        return min(lengths) if t is zip or t is map else max(lengths)
    return 0


def _resolved_on_mro(cls, name):
    """(the class that holds name, its value) as name resolves on cls (not on its instances), read from the
    classes' dicts: no hook runs. (None, None) when no class holds it."""
    for base in type.__dict__["__mro__"].__get__(cls):
        held = type.__dict__["__dict__"].__get__(base)
        if name in held:
            return base, held[name]
    return None, None


def _on_mro(cls, name):
    """What name resolves to on cls, or None."""
    return _resolved_on_mro(cls, name)[1]


# Consumers that take an object by another protocol than iteration when it has one of these (dict(mapping)
# reads its keys; bytes(x) asks __bytes__, then __index__): such objects are given to them as they are.
_BY_PROTOCOL = {dict: ("keys",), collections.OrderedDict: ("keys",), collections.Counter: ("keys",),
                bytes: ("__bytes__", "__index__", "__buffer__"), bytearray: ("__bytes__", "__index__", "__buffer__")}


def _length_kept_by_a_builtin(obj, cls) -> int:
    """len() as the first builtin base of a cell class counts it (a list subclass's items), or 0."""
    for base in type.__dict__["__mro__"].__get__(cls):
        if type.__dict__["__module__"].__get__(base) == "builtins" and base is not object:
            length = type.__dict__["__dict__"].__get__(base).get("__len__")
            if length is not None:
                return length(obj)
    return 0


_PERCENT_FLAGS = re.compile(r"[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _percent_fields(text: str):
    """(width, precision) of each %-conversion, read as CPython reads them: a mapping key is skipped
    by balancing its parentheses ('%(a(b))10s' has the key 'a(b)' and width 10)."""
    i = text.find("%")
    while i >= 0:
        j = i + 1
        if text.startswith("(", j):
            depth, j = 1, j + 1
            while j < len(text) and depth:
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                j += 1
        match = _PERCENT_FLAGS.match(text, j)
        yield match.group(1) or "", match.group(2) or ""
        i = text.find("%", max(match.end(), i + 2) if text.startswith("%", j) else match.end())


class _MatchValueBox:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


def _instance_dict_of(obj):
    """obj.__dict__ through the C descriptor of its type, or None (never a cell-defined __dict__)."""
    for k in type(obj).__mro__:
        d = k.__dict__.get("__dict__")
        if d is not None:
            if type(d).__name__ != "getset_descriptor":
                return None
            value = d.__get__(obj, type(obj))
            return value if type(value) is dict else None
    return None


# In-memory files live in _io, a forbidden origin (it also holds FileIO and open): these two are data.
_MEMORY_FILES = (io.StringIO, io.BytesIO)


def _is_denial_class(cls) -> bool:
    """A cell that caught a refusal may name its class (type(e).__name__): exception classes only."""
    return cls.__module__ == "sandbox_kernel.denials" and issubclass(cls, BaseException)


def _as_str(s):
    if not isinstance(s, str):
        raise TypeError("descriptor 'format' requires a 'str' object")
    return str.__str__(s)


def _is_plotly_figure(t) -> bool:
    for k in t.__mro__:
        if k.__name__ == "BaseFigure" and k.__module__ == "plotly.basedatatypes":
            return True
    return False


# -- stand-ins: what a name resolves to decides its stand-in, for instance and class reads alike ----------

def _raw_attribute(cls, n, after=None):
    """The entry for n in cls's MRO (unbound, as the class dict holds it), searching after `after`
    (a super()'s class); None where no class defines it. The MRO and dicts are read through type's own
    descriptors: a class cannot answer for itself."""
    try:
        mro = type.__dict__["__mro__"].__get__(cls)
    except TypeError:
        return None
    start = 0
    if after is not None:
        start = next((i + 1 for i, k in enumerate(mro) if k is after), len(mro))
    for k in mro[start:]:
        namespace = type.__dict__["__dict__"].__get__(k)
        if n in namespace:
            return namespace[n]
    return None


_STAND_IN_KINDS: dict = {}   # a method as its class dict holds it -> the kind of check its stand-in makes
STAND_IN_METHODS: list = []  # (class, name, kind) for each, in the order they were added (tests read it)


def add_stand_in_kind(kind: str, cls, names) -> None:
    """The methods `names` of cls (as cls's own dict holds them) get the stand-in of `kind`."""
    namespace = type.__dict__["__dict__"].__get__(cls)
    for n in names:
        if n in namespace and namespace[n] not in _STAND_IN_KINDS:
            _STAND_IN_KINDS[namespace[n]] = kind
            STAND_IN_METHODS.append((cls, n, kind))


def _stand_in_kind(raw, n):
    if n == "__format__":
        return "format_spec"   # any class's __format__ (object's, int's, a library's): the spec is checked
    if raw is None:
        return None
    try:
        return _STAND_IN_KINDS.get(raw)
    except TypeError:   # an unhashable class attribute
        return None


def _shadows_a_library_attribute(cls, n, after=None) -> bool:
    """Whether one of the cell's classes in cls's MRO (after `after`) holds n before a library class that holds
    it too. Then the decision depends on the cell's class dict, which the cell may change: `del Cls.n` makes the
    library's the one read, and a decision cached for the cell's own method would hand out the library's raw
    method (review 11, R11-5). Such reads are decided each time."""
    if not isinstance(cls, type):
        return False
    mro = type.__dict__["__mro__"].__get__(cls)
    if after is not None:
        mro = mro[mro.index(after) + 1:] if after in mro else ()
    own = False
    for k in mro:
        if n in type.__dict__["__dict__"].__get__(k):
            if is_sandbox_class(k):
                own = True
            elif own and k is not object:   # object's own methods are no stand-in and no denial
                return True
    return False


def _binds_to_the_class(raw) -> bool:
    return isinstance(raw, (classmethod, staticmethod)) or type(raw).__name__ == "classmethod_descriptor"


def _unbound_stand_in(make, unbound):
    """A method read from the class: called with the cell's choice of self, the instance stand-in for it. A
    closure, never a functools.partial: a partial's public .args would hand the raw method to the cell
    (review 11, R11-1)."""
    def call(target, *args, **kwargs):
        return make(lambda *a, **k: unbound(target, *a, **k), target)(*args, **kwargs)
    return runtime_callable(call)


def _array_size(obj) -> int:
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        return np.ndarray.size.__get__(obj)
    return 1


_TEXT = (str, bytes, bytearray)
# C consumers of an iterable: x.extend(iter(x)) feeds itself forever, set().__init__(repeat(1, 10**9))
# runs past every limit. Their iterables are charged (and made material) before C starts.
for _cls, _names in ((list, ("extend", "__iadd__")), (bytearray, ("extend",)), (dict, ("update", "__ior__")),
                     (set, ("update", "union", "intersection", "difference", "symmetric_difference", "isdisjoint",
                            "issubset", "issuperset", "intersection_update", "difference_update",
                            "symmetric_difference_update")),
                     (frozenset, ("union", "intersection", "difference", "symmetric_difference", "isdisjoint",
                                  "issubset", "issuperset")),
                     (collections.deque, ("extend", "extendleft", "__iadd__")),
                     (collections.OrderedDict, ("update",)), (collections.Counter, ("update", "subtract")),
                     (array.array, ("extend",))):
    add_stand_in_kind("consume", _cls, _names)
for _cls in (dict, collections.OrderedDict):
    add_stand_in_kind("consume_first", _cls, ("fromkeys",))
for _cls in (list, set, dict, bytearray, collections.deque, collections.OrderedDict, collections.Counter):
    add_stand_in_kind("consume_init", _cls, ("__init__",))
for _cls in _TEXT:
    add_stand_in_kind("join", _cls, ("join",))
    add_stand_in_kind("pad", _cls, ("ljust", "rjust", "center", "zfill", "expandtabs"))
    add_stand_in_kind("grow_text", _cls, ("replace", "translate"))
_install_format_gate()   # before the stand-ins: the cell's own str.format is the gated one's stand-in
add_stand_in_kind("format", str, ("format",))
add_stand_in_kind("format_map", str, ("format_map",))
add_stand_in_kind("range_walk", range, ("count", "index", "__contains__"))   # 1.5 in a range walks it
for _cls in (random.Random.__mro__[1], random.SystemRandom):   # _random.Random's C method, SystemRandom's own
    add_stand_in_kind("random_bits", _cls, ("getrandbits",))
del _cls, _names


def _inline_names() -> set:
    """Non-dunder names of builtin data whose methods have stand-ins."""
    names = set()
    for cls in _PURE_DATA:
        for n, v in type.__dict__["__dict__"].__get__(cls).items():
            if not n.startswith("__") and _stand_in_kind(v, n) is not None:
                names.add(n)
    return names


assert _inline_names() <= DATA_METHODS_WITH_STAND_INS, \
    f"the rewriter's inline path must leave every stand-in to the gates: {_inline_names() - DATA_METHODS_WITH_STAND_INS}"
_MATERIAL = frozenset({list, tuple, set, frozenset, dict, str, bytes, bytearray, range})


def _grow_call(sized, method, first_only, *args, **kwargs):
    """The iterables a consuming method takes (all its arguments; fromkeys: the first) are made
    material through the sized gate first; a range is charged, not copied (C walks all of it)."""
    consumed = 1 if first_only else len(args)
    made = []
    for i, a in enumerate(args):
        if i < consumed and type(a) is range:
            sized.__self__.charge_consumed((a,))
        elif i < consumed and type(a) not in _MATERIAL and hasattr(type(a), "__iter__"):
            a = sized(list, a)
        made.append(a)
    return method(*made, **kwargs)


runtime_callable(_grow_call)


def _no_auto_open(method):
    def guarded(*args, **kwargs):
        if kwargs.get("auto_open"):
            raise genuine(CallDenied("with auto_open=True", "opening a browser is not allowed"))
        return method(*args, **kwargs)
    return runtime_callable(guarded)


def _resolve_path(path: str):
    """'pandas.DataFrame.query' -> (DataFrame class, 'query') once pandas is imported, else (None, _)."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        modname = ".".join(parts[:i])
        mod = sys.modules.get(modname)
        if mod is None:
            continue
        owner = mod
        try:
            for p in parts[i:-1]:
                owner = getattr(owner, p)
        except AttributeError:
            return None, parts[-1]
        return owner, parts[-1]
    return None, parts[-1]


# eval()/exec() text compiled for a cell (engine.py): its denials are reported at the cell's line
TEXT_FILENAME_PREFIX = CELL_FILENAME_PREFIX + "text:"


# Libraries whose objects are values or process-wide singletons (dateutil's default parser, its UTC
# time zone, which the kernel's own message parsing uses): a cell may not set attributes on them.
_READ_ONLY_INSTANCE_PACKAGES = ("dateutil",)
# Modules whose objects are process-wide caches and singletons that a cell has no reason to change: plotly's
# validators (one cached instance per property, shared by every figure and read by the kernel's output
# wall), scipy.stats' distributions (st.norm is one object for the whole process).
_READ_ONLY_INSTANCE_MODULES = ("_plotly_utils.", "plotly.validators.", "scipy.stats._continuous_distns",
                               "scipy.stats._discrete_distns", "scipy.stats._distn_infrastructure",
                               # pandas' holiday rules are module-level objects every calendar shares
                               # (EasterMonday.offset.append shifted the host's dates: review 7, N7-2)
                               "pandas.tseries.holiday")
# numpy caches one finfo/iinfo per type for everyone: np.finfo(np.float64).eps = 0.5 would be the host's.
_READ_ONLY_LIBRARY_TYPES = frozenset({("numpy", "finfo"), ("numpy", "iinfo")})
_LIBRARY_OBJECT = object()   # the write cache's mark: a library object's attribute, the value is checked


# Libraries whose objects keep arrays they index with in C (scipy's splines, triangulations, trees, sparse
# arrays; pandas' sparse indexes): see Gates._index_arrays_read_only and _library_object_write.
_INDEXING_LIBRARIES = ("scipy.", "pandas._libs.sparse", "pandas.core.arrays.sparse")


_COPIED_CONTAINERS = (list, dict, set, bytearray)


# Library classes whose __init__ may run again on an object the cell holds: it refills the object from what it
# is given, charged by the consume_init stand-in (d.__init__(pairs), deque(maxlen).__init__(xs)).
_REINITIALISABLE = (list, dict, set, bytearray, collections.deque, collections.OrderedDict, collections.Counter)


def _reinitialisable(cls) -> bool:
    """cls.__init__ may be read: it is the cell's own function, object's, or a builtin container's."""
    owner, init = _resolved_on_mro(cls, "__init__")
    if init is None or init is object.__dict__["__init__"] or owner in _REINITIALISABLE:
        return True
    return type(init) is FunctionType and is_sandbox_function(init)


def _module_level_library_object(obj) -> bool:
    """obj is a value of a library module's namespace: of its class's module, or of the module it names itself
    (a TypeVar's __module__)."""
    names = {type.__dict__["__module__"].__get__(type(obj))}
    own = getattr(obj, "__dict__", {}).get("__module__") if isinstance(getattr(obj, "__dict__", None), dict) \
        else None
    if type(own) is str:
        names.add(own)
    for name in names:
        module = sys.modules.get(name) if type(name) is str else None
        if module is not None and name != "__main__" and \
                any(value is obj for value in dict.values(module.__dict__)):
            return True
    return False


def _library_containers(cls, n):
    """The lists, dicts, sets, bytearrays and arrays held under n by the library classes on cls's MRO (not by a
    class the cell defined, nor state the engine keeps per engine)."""
    for holder in type.__dict__["__mro__"].__get__(cls):
        value = type.__dict__["__dict__"].__get__(holder).get(n)
        if (type(value) in _COPIED_CONTAINERS or _is_ndarray(value)) and not is_sandbox_class(holder) \
                and not _guards.kept_per_engine(holder, n):
            yield value


def _library_holds_a_container(cls, n) -> bool:
    return next(_library_containers(cls, n), None) is not None


def _held_by_a_library_class(cls, n, value) -> bool:
    return any(held is value for held in _library_containers(cls, n))


def _plain_copy(value, depth=0):
    """A copy of a container of the process's, nested lists/dicts/sets copied too (a few levels): what the
    cell changes is its own. Other objects inside are the same objects."""
    t = type(value)
    if depth > 4 or t not in _COPIED_CONTAINERS:
        return value
    if t is dict:
        return {k: _plain_copy(v, depth + 1) for k, v in dict.items(value)}
    if t is list:
        return [_plain_copy(v, depth + 1) for v in list.__iter__(value)]
    return t(value)


def _built_on_index_arrays(cls) -> bool:
    """cls is, or derives from, a class of _INDEXING_LIBRARIES (a cell's subclass of cKDTree too)."""
    return _derives_from_modules(cls, _INDEXING_LIBRARIES)


def _same_numbers_shape(obj, name, value) -> bool:
    """value only replaces numbers: the attribute itself after an in-place operation (A.data *= 2), or a
    float/complex array of the current one's shape (A.data = np.log1p(A.data)); never indices or sizes."""
    np = sys.modules.get("numpy")
    current = getattr(obj, name, None)
    if value is current:
        return True
    return np is not None and isinstance(value, np.ndarray) and isinstance(current, np.ndarray) and \
        np.ndarray.shape.__get__(value) == np.ndarray.shape.__get__(current) and \
        np.ndarray.dtype.__get__(value).kind in "fc" and np.ndarray.dtype.__get__(current).kind in "fc"


def _read_only_index_view(value, depth: int = 0):
    """An integer array as a read-only view; a tuple, list or dict holding some (coo_array.coords,
    Delaunay.vertex_neighbor_vertices: review 18, R18-1) as a new one of the same views."""
    np = sys.modules.get("numpy")
    if np is None:
        return value
    t = type(value)
    if t is np.ndarray or isinstance(value, np.ndarray):
        return _read_only_view(value) if np.ndarray.dtype.__get__(value).kind in "iu" else value
    if depth < 4 and (t is tuple or t is list):
        return t(_read_only_index_view(item, depth + 1) for item in value)
    if depth < 4 and t is dict:
        return {key: _read_only_index_view(item, depth + 1) for key, item in value.items()}
    return value


def _read_only_view(array):
    """A read-only view of a writeable ndarray (the cell cannot make it writeable again: guards'
    _guard_array_unlock), or the array itself when it is read-only already."""
    np = sys.modules["numpy"]
    if not np.ndarray.flags.__get__(array).writeable:
        return array
    view = np.ndarray.view(array)
    view.flags.writeable = False
    return view


def _cell_or_builtin_callable(value) -> bool:
    """A callable a library may keep on its objects: the cell's own code (a function, a method or partial of
    one), or one of Python's own static types (default_factory = list). Objects of the cell's classes are
    refused before (class P(functools.partial) calls partial's C code and no cell code runs: review 5, N5-8)."""
    if _harmless_special_method(value):
        return True
    # A class, even the cell's, runs the __new__/__init__ it inherits, and a library's calls the class's
    # other attributes, which no class rule checks (UserDict.__init__ calls self.update; enum calls
    # _missing_: review 6, N6-1): Python's own types only.
    return isinstance(value, type) and _builtin_type(value)


def _callables_kept_per_engine(cls) -> bool:
    """pandas' options (pd.options.display.float_format = '{:.2f}'.format): swapped per engine at each cell's
    start and end (guards.LIBRARY_STATE), so what a cell stores there is never the host's."""
    return type.__dict__["__module__"].__get__(cls) == "pandas._config.config"


def _library_finalizer(cls) -> bool:
    """cls's instances are finalized by a library's code (a __del__ that is not a cell function)."""
    finalizer = _raw_attribute(cls, "__del__")
    return finalizer is not None and not is_sandbox_function(finalizer)


def _library_private(obj, is_class, n):
    """(hidden, shadowed) for a private name read on a cell class or its instance: hidden when n resolves to
    a library class's attribute (through the class's MRO, and for a class its metaclass's too), not to the
    cell's classes or the instance's own dict; shadowed when any library class there defines n."""
    cls = obj if is_class else type(obj)
    chains = [type.__dict__["__mro__"].__get__(cls)]
    if is_class:
        chains.append(type.__dict__["__mro__"].__get__(type(cls)))
    owner, shadowed = None, False
    for chain in chains:
        for k in chain:
            if n in type.__dict__["__dict__"].__get__(k):
                owner = owner or k
                shadowed = shadowed or not is_sandbox_class(k)
    if owner is None or is_sandbox_class(owner):
        return False, shadowed
    if not is_class:
        own = _instance_dict_of(obj)
        if own is not None and n in own:
            return False, shadowed
    return True, shadowed


_UNSEEN = object()
# Objects that read, write or call any address: ctypes' (a CFUNCTYPE makes a pointer to any symbol, from_address
# reads any address), cffi's, and capsules (raw pointers for C code). Whoever hands one out (BitGenerator.ctypes,
# .cffi, .capsule), a cell never holds one.
_RAW_POINTER_ORIGINS = frozenset({"ctypes", "_ctypes", "cffi", "_cffi_backend"})
_CAPSULE_TYPE = getattr(types, "CapsuleType", None) or type(__import__("datetime").datetime_CAPI)


def _instance_refusal(t):
    """Why an instance of t is never handed to a cell (None: it may be)."""
    module = type.__dict__["__module__"].__get__(t)
    module = module if type(module) is str else ""
    if module.startswith("sandbox_kernel") and not issubclass(t, BaseException):
        return "the sandbox's own objects are not available"
    mro = type.__dict__["__mro__"].__get__(t)
    if t is _CAPSULE_TYPE or any(str(type.__dict__["__module__"].__get__(k)).split(".", 1)[0] in _RAW_POINTER_ORIGINS
                                 for k in mro):
        return "foreign-function objects and raw pointers (ctypes, cffi, capsules) are not available"
    return None


def _read_only_instances(cls) -> bool:
    module = type.__dict__["__module__"].__get__(cls) if isinstance(cls, type) else None
    if type(module) is not str or is_sandbox_class(cls):
        return False
    if module.split(".", 1)[0] in _READ_ONLY_INSTANCE_PACKAGES or module.startswith(_READ_ONLY_INSTANCE_MODULES) \
            or (module, type.__dict__["__qualname__"].__get__(cls)) in _READ_ONLY_LIBRARY_TYPES:
        return True
    # pandas keeps one instance of most of its dtypes for the process (pd.array([1.5]).dtype is its
    # Float64Dtype) and calls their methods for every frame: construct_array_type = ... was the host's
    base = sys.modules.get("pandas.core.dtypes.base")
    return base is not None and issubclass(cls, base.ExtensionDtype)


def _expanded_size(method, width: int) -> int:
    """The most characters s.expandtabs(width) can make (len(s) + tabs x width); 0 for the other pads."""
    if getattr(method, "__name__", None) != "expandtabs":
        return 0
    target = getattr(method, "__self__", None)
    if isinstance(target, str):
        tabs = str.count(target, "\t")
    elif isinstance(target, (bytes, bytearray)):
        tabs = (bytearray.count if isinstance(target, bytearray) else bytes.count)(target, b"\t")
    else:
        return 0
    return len(target) + tabs * max(width, 0)


def _cell_line() -> int | None:
    """The line of the innermost cell frame on the stack (where the denied request came from)."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(CELL_FILENAME_PREFIX) and not name.startswith(TEXT_FILENAME_PREFIX):
            return f.f_lineno
        f = f.f_back
    return None


# ------------------------------------------------------------------------------------------------
# Operators and sized builtins
# ------------------------------------------------------------------------------------------------

_BINARY = {"*": operator.mul, "**": operator.pow, "<<": operator.lshift, "@": operator.matmul}
_SIZED_OPS = frozenset(_BINARY)
_INPLACE = {"+": operator.iadd, "-": operator.isub, "*": operator.imul, "@": operator.imatmul,
            "/": operator.itruediv, "%": operator.imod, "**": operator.ipow, "<<": operator.ilshift,
            ">>": operator.irshift, "|": operator.ior, "^": operator.ixor, "&": operator.iand,
            "//": operator.ifloordiv}
# Sequences whose '*' repeats them in C (subclasses too: np.str_ is a str), and how a count is read.
_REPEATING_SEQUENCES = (str, bytes, bytearray, list, tuple, collections.deque, array.array)


def _char_width(text: str) -> int:
    """Bytes per character of the str CPython builds from text: 1, 2 or 4 (its widest character decides;
    '\U0001F600' * n is 4n bytes). Read through str's own iterator: a subclass's __iter__ is not asked."""
    if str.isascii(text) or not str.__len__(text):
        return 1
    widest = ord(max(str.__iter__(text)))
    return 4 if widest > 0xFFFF else 2 if widest > 0xFF else 1


def _true_len(seq) -> int:
    """len() as the builtin base type counts it (a subclass's __len__ could answer anything)."""
    for base in _REPEATING_SEQUENCES:
        if isinstance(seq, base):
            return base.__len__(seq)
    return len(seq)


def _byte_length(x) -> int:
    """The bytes a bytes-like part adds to a join (its buffer's size, whatever its __len__ says)."""
    if type(x) is bytes or type(x) is bytearray:
        return len(x)
    with memoryview(x) as view:
        return view.nbytes


class _Product:
    """An operand whose '*' answers a product already computed (check_size's callers multiply what it returns)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __mul__(self, _none):
        return self.value


def _as_count(x):
    """The repeat count x stands for, as an exact int, or None (x is not a count: a float, an array)."""
    if type(x) is int:
        return x
    try:
        return operator.index(x)
    except TypeError:
        return None
_SIZED_BUILTINS = {f for f in (list, tuple, set, frozenset, dict, bytes, bytearray, sorted, sum, min, max,
                                   any, all)}


_PLAIN_CONTAINERS = frozenset({dict, set, frozenset, str, list, tuple, bytes, type({}.keys()), type({}.items())})


def fast_gates(slow_mul, slow_mod, slow_getattr, own, slow_contains, slow_pow, *, use_c=True):
    """The hottest gates with their no-policy fast paths first: a float or two small ints for ``*``, a number on
    the left of ``%`` (arithmetic, never a format), an instance of a class in ``own`` for an attribute the
    rewriter already found plain, a builtin container for ``in``, a float, complex or small int raised to a
    small constant power. Anything else goes to the slow gate.
    In C when sandbox_kernel._fastgates was compiled; else the same decisions in Python."""
    if use_c and _fastgates is not None:
        fast = _fastgates.FastGates(slow_mul, slow_mod, slow_getattr, own, slow_contains, slow_pow)
        return fast.mul, fast.mod, fast.getattr, fast.contains, fast.pow
    small = 1 << 31

    def mul(a, b):
        ta, tb = type(a), type(b)
        if ta is float or tb is float or (ta is int and tb is int and -small < a < small and -small < b < small):
            return a * b
        return slow_mul(a, b)

    def mod(a, b):
        ta = type(a)
        if ta is int or ta is float:
            return a % b
        return slow_mod(a, b)

    def ownattr(obj, name):
        if type(name) is str and type(obj) in own:
            return getattr(obj, name)
        return slow_getattr(obj, name)

    def contains(container, item):
        t = type(container)
        if t in _PLAIN_CONTAINERS or t is range and (type(item) is int or type(item) is bool):
            return item in container
        return slow_contains(container, item)

    def pow_(a, k):
        ta = type(a)
        if ta is float or ta is complex or ta is int and -small < a < small:
            return a ** k
        return slow_pow(a, k)
    return mul, mod, ownattr, contains, pow_


# The guards need the helpers above; the gates need the guards' table (a cycle, resolved by order).
from . import guards as _guards  # noqa: E402  (used at call time: either module may be imported first)

CLASS_SINK_IN_C = _install_class_sink()
CLASS_WRITES_IN_C = CLASS_SINK_IN_C and hasattr(_guards._numpyguard, "guard_class_writes")
