"""Library functions and classes that cells receive guarded. SECURITY CORE.

When an attribute read or an import hands a cell one of the objects in CALL_GUARDS, the gates give it
the guard's stand-in instead (one per engine: Gates.guarded), and type(x) / x.__class__ do the same.
A stand-in does what the original does, after a check the original cannot make itself: an argument
that would run past every limit in C (an endless iterator, a huge factorial, a 5,000-digit decimal
context, a deep chain of C iterators), write into the host's objects (dataclass on a library class), or
turn raw memory into objects (a numpy array laid over bytes). Functions become functions; classes
become subclasses that still pass isinstance for the real class (_StandInMeta).
"""
from __future__ import annotations

import _thread
import abc
import array
import collections
import copy
import csv
import dataclasses
import decimal
import enum
import functools
import hashlib
import heapq
import inspect
import io
import itertools
import locale
import math
import operator
import random
import sys
import types
import typing
import warnings
import weakref
import zoneinfo

try:
    from . import _numpyguard   # optional C extension (setup.py)
except ImportError:
    _numpyguard = None
if getattr(_numpyguard, "VERSION", None) != 3:
    _numpyguard = None   # absent, or a stale build of an older source (engine.py then refuses to start)

from . import pandas_query   # imported with the runtime: a cell's import may not compile the sandbox's files
from .confine import at_cell_end, at_cell_start, cell_is_running, route_native_file_io
from .denials import CallDenied, ImportDenied, SandboxViolation, SizeDenied, genuine
from .gates import (_NO_RAW_ARRAY, _RAW_ARRAY_PROTOCOLS, CURRENT_GATES, _built_on_index_arrays, _grow_call, _no_auto_open,
                    _type_name,
                    add_stand_in_kind, dataclass_field_refusal, inherited_dataclass_fields, is_sandbox_class,
                    is_sandbox_function, refuse_raw_protocols_in_hooks, runtime_callable)
from .gates import _PASS_THROUGH as SPECIAL_METHOD_PASS_THROUGH
from . import charges as _charges   # (a module: either may be imported first)


# ------------------------------------------------------------------------------------------------
# Functions with a dangerous argument, and endless iterators
# ------------------------------------------------------------------------------------------------

def _guard_numpy_save(fn, gates):
    """np.save / np.savez / np.savez_compressed pickle an object array (allow_pickle=True by default): a pickle
    written for whoever loads it later, with a cell object's __reduce_ex__ in it (review 16, R16-16). Pickles are
    neither read nor written in the sandbox: allow_pickle is off, so numpy refuses object arrays itself."""
    positional = 2 if fn.__name__ == "save" else None   # save(file, arr, allow_pickle)

    def save(*args, **kwargs):
        if kwargs.get("allow_pickle") or positional is not None and len(args) > positional and args[positional]:
            gates.deny(CallDenied(f"numpy.{fn.__name__}(allow_pickle=True)", "pickles are not written in the sandbox"))
        if positional is not None and len(args) > positional:
            args = args[:positional]
        kwargs["allow_pickle"] = False
        return fn(*args, **kwargs)
    save.__name__, save.__doc__ = fn.__name__, fn.__doc__
    return runtime_callable(save)


def _guard_numpy_load(fn, gates):
    @functools.wraps(fn)
    def load(*args, **kwargs):
        if kwargs.get("allow_pickle"):
            gates.deny(CallDenied("numpy.load(allow_pickle=True)", "loading pickles can run arbitrary code"))
        kwargs["allow_pickle"] = False
        # read into memory, never mapped (confine: a map dies with SIGBUS when the file is truncated)
        if len(args) > 1:
            args = (args[0], None) + args[2:]
        kwargs.pop("mmap_mode", None)
        return fn(*args, **kwargs)
    return runtime_callable(load)


def _refuse(exc):
    """Raise exc (a genuine refusal), recorded as the running engine's denial when an engine runs."""
    gates = CURRENT_GATES.get()
    if gates is not None:
        gates.deny(exc)
    raise exc


def _guard_lu_solve(fn, gates):
    """scipy.linalg.lu_solve((lu, piv), b): LAPACK's ?getrs swaps rows by the pivots it is given, unchecked
    (piv [5] returned a heap word, [10**6] crashed: review 10, N10-12). Pivots are lu_factor's or refused."""
    np = sys.modules["numpy"]

    @functools.wraps(fn)
    def lu_solve(lu_and_piv, b, *args, **kwargs):
        lu, piv = lu_and_piv
        pivots, rows = np.asarray(piv), np.shape(lu)[0] if np.ndim(lu) == 2 else 0
        if pivots.ndim != 1 or pivots.dtype.kind not in "iu" or pivots.size > rows or \
                pivots.size and (int(pivots.min()) < 0 or int(pivots.max()) >= rows):
            raise ValueError("lu_solve: the pivots must be lu_factor's: integers from 0 to n - 1, one per row")
        return fn((lu, pivots), b, *args, **kwargs)
    return runtime_callable(lu_solve)


_OUTPUT_PARAMETERS = ("output", "distances", "indices", "out")


def _guard_output_arrays(fn, gates):
    """A scipy.ndimage function writes its output= (distances=, indices=) array from C: label() wrote the
    sandbox's read-only view of a sparse array's indices, ignoring the flag, and the labels (1..k in input
    order) chose each index (review 10, N10-11). An output array must be writeable."""
    import inspect

    np = sys.modules["numpy"]
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        try:
            bound = signature.bind_partial(*args, **kwargs).arguments
        except TypeError:
            return fn(*args, **kwargs)   # the function's own error
        for name in _OUTPUT_PARAMETERS:
            value = bound.get(name)
            if isinstance(value, np.ndarray) and not np.ndarray.flags.__get__(value).writeable:
                raise ValueError(f"{fn.__name__}: the {name} array is read-only")
        return fn(*args, **kwargs)
    return runtime_callable(checked)


def _ndimage_writers():
    """The public functions of scipy.ndimage that take an array to write (an output= parameter or alike)."""
    import inspect

    ndimage = sys.modules.get("scipy.ndimage")
    found = []
    for name in getattr(ndimage, "__all__", ()):
        fn = getattr(ndimage, name, None)
        try:
            parameters = inspect.signature(fn).parameters if callable(fn) else ()
        except (TypeError, ValueError):
            continue
        if any(p in parameters for p in _OUTPUT_PARAMETERS):
            found.append(fn)
    return found


def _guard_scipy_reader(position):
    """scipy.io.wavfile.read(..., mmap=...) and netcdf_file(..., mmap=...) (a map by default for a file
    name): read into memory instead; `position` is the mmap parameter's place among the arguments."""
    def guard(fn, gates):
        # (a function for netcdf_file too: a stand-in subclass would inherit its library __del__, which no
        # class made while a cell runs may)
        @functools.wraps(fn)
        def read(*args, **kwargs):
            if len(args) > position:
                args = args[:position] + (False,) + args[position + 1:]
            else:
                kwargs["mmap"] = False
            return fn(*args, **kwargs)
        return runtime_callable(read)
    return guard


def _guard_endless(fn, gates):
    """itertools.count(), cycle() and repeat() without a count can feed a C loop forever
    (sum(count())); the sandbox's versions tick on every item. cycle() also wraps an iterator, so it
    counts towards the nesting of C iterators (review 5, N5-6: 300,000 cycles deep overflowed the stack)."""
    def ticking(*args, **kwargs):
        depth = _deeper(args[:1], "cycle") if fn is itertools.cycle else 0
        it = fn(*args, **kwargs)
        if fn is itertools.repeat and (len(args) > 1 or "times" in kwargs):
            return it
        gen = _ticking_iter(it, gates)
        if depth:
            _GENERATOR_DEPTH[gen] = depth
        return gen
    ticking.__name__ = fn.__name__
    ticking.__doc__ = fn.__doc__
    return runtime_callable(ticking)


def _ticking_iter(it, gates):
    table = gates.budget._builtins if gates.budget is not None else {"__st_tick__": lambda: None}
    for item in it:
        table["__st_tick__"]()   # looked up each time: the budget swaps it when a limit trips
        yield item


def _guard_big_math(fn, gates):
    """math.factorial/comb/perm run in C without returning to the interpreter: bound n first."""
    def bounded(*args):
        if any(type(a) is int and a > 100_000 for a in args):
            gates.deny(SizeDenied(f"math.{fn.__name__} of more than 100,000",
                                  "it would run in C, where the sandbox cannot stop it"))
        return fn(*args)
    bounded.__name__ = fn.__name__
    bounded.__doc__ = fn.__doc__
    return runtime_callable(bounded)


# operator's functions for the sized operators: the same checks as the operator written out in a cell.
_SIZED_OPERATOR_FUNCTIONS = {operator.mul: "*", operator.pow: "**", operator.lshift: "<<", operator.mod: "%",
                             operator.imul: "*=", operator.ipow: "**=", operator.ilshift: "<<=",
                             operator.imod: "%="}


def _guard_sized_operator(fn, gates):
    """operator.mul, pow, lshift, mod and their in-place forms are '*', '**', '<<', '%' under another name
    (reduce(operator.mul, ...), accumulate(xs, operator.pow)): the same size and %-format width checks."""
    symbol = _SIZED_OPERATOR_FUNCTIONS[fn]
    if symbol.endswith("="):
        def sized(a, b):
            return gates.apply_inplace(a, symbol, b)
    elif symbol == "%":
        def sized(a, b):
            return gates.mod(a, b)
    else:
        def sized(a, b):
            return gates.binop(a, symbol, b)
    sized.__name__ = sized.__qualname__ = fn.__name__
    sized.__doc__ = fn.__doc__
    return runtime_callable(sized)


# Decimal arithmetic runs in C (libmpdec) at the context's precision, where the time limit cannot
# stop it; ln/exp/log10 cost grows with its cube (4,000 digits: ~1 s, 100,000: minutes). Every context a
# cell makes or changes is held to this precision.
MAX_DECIMAL_PREC = 5_000


def bounded_decimal_prec(gates, prec):
    """The precision as an exact int, refused above MAX_DECIMAL_PREC (None: the default)."""
    if prec is None:
        return None
    value = operator.index(prec)   # once: a cell's __index__ could answer differently the second time
    if value > MAX_DECIMAL_PREC:
        gates.deny(SizeDenied(f"a decimal precision of {value:,} digits",
                              f"at most {MAX_DECIMAL_PREC:,} digits: decimal arithmetic runs in C, "
                              f"where the time limit cannot stop it"))
    return value


class _BoundedWrite:
    """The target of ``ctx.prec = v`` in place of ctx (see Gates.write): checks v, then sets it;
    ``refuse_delete`` (if given) is called instead of a delete."""
    __slots__ = ("_target", "_check", "_refuse_delete")

    def __init__(self, target, check, refuse_delete=None):
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_check", check)
        object.__setattr__(self, "_refuse_delete", refuse_delete)

    def __setattr__(self, name, value):
        setattr(self._target, name, self._check(value))

    def __delattr__(self, name):
        if self._refuse_delete is not None:
            self._refuse_delete()
        delattr(self._target, name)


SPECIAL_METHOD_PASS_THROUGH.add(_BoundedWrite.__setattr__.__code__)   # the write is its caller's


def _stand_in_class(cls, construct):
    """A library class as cells see it when its construction needs a check: a subclass (one per
    engine) whose every call goes through construct(make, *args, **kwargs), make being the real
    construction. Calling the stand-in itself gives an instance of the real class; a cell's subclass
    of it gets its own instances; isinstance/issubclass answer as for the real class."""
    def call(stand_in, *args, **kwargs):
        make = cls if stand_in is made else functools.partial(type.__call__, stand_in)
        return construct(make, *args, **kwargs)
    bases = (_StandInMeta,) if type(cls) is type else (_StandInMeta, type(cls))
    meta = type(f"{cls.__name__}_stand_in", bases, {"__call__": call})
    made = meta(cls.__name__, (cls,), {"__doc__": cls.__doc__, "__module__": cls.__module__,
                                       "__qualname__": cls.__qualname__, "__st_real__": cls})
    return made


class _StandInMeta(type):
    """The metaclass of a guarded library class's stand-in (a subclass with checks): isinstance and
    issubclass answer as for the real class, so the objects the library itself makes still pass."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls.__st_real__)

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls.__st_real__)


# -- C iterators nested in C iterators ------------------------------------------------------------
# next() on map(f, map(f, ... it)) recurses in C, one level per wrapper, with no recursion check: a
# million nested wrappers (a few lines and 100 MB) overflow the C stack and kill the process. Every C
# iterator class a cell can make is a stand-in that records how deep its inputs nest, and refuses to
# wrap deeper than this. (Generators are Python frames: the recursion limit bounds those.)
MAX_ITERATOR_NESTING = 2_000

_NESTING_SLOT: dict = {}      # stand-in class -> the slot holding an instance's depth
_TEE_DEPTH = weakref.WeakKeyDictionary()   # itertools.tee's objects are made in C: depth kept aside
_GENERATOR_DEPTH = weakref.WeakKeyDictionary()   # the ticking generator around a cycle(): its depth


def _nesting_of(obj) -> int:
    """How deep obj's chain of C iterators is (0: not a C iterator wrapper, or not one we made)."""
    for k in type(obj).__mro__:
        slot = _NESTING_SLOT.get(k)
        if slot is not None:
            try:
                return slot.__get__(obj)
            except AttributeError:   # made by C without our __new__ (chain.from_iterable on a subclass)
                return MAX_ITERATOR_NESTING
    if type(obj) is _TEE_TYPE:
        depth = _TEE_DEPTH.get(obj)
        return _tee_copy_nesting(obj) if depth is None else depth
    if type(obj) is types.GeneratorType:
        return _GENERATOR_DEPTH.get(obj, 0)
    return 0


def _nesting_inside(iterable) -> int:
    """The deepest C iterator held by a list, tuple, set or dict that chain.from_iterable will flatten
    (chain.from_iterable([it]) calls next(it) itself: one level deeper than it)."""
    if type(iterable) in (list, tuple, set, frozenset, dict):
        return max(map(_nesting_of, iterable), default=0)
    return 0


def _tee_copy_nesting(tee) -> int:
    """A tee object we did not make is a copy of one (copy.copy, __copy__): it reads the iterator its
    shared buffer reads. Unreadable (a cell that turned DeprecationWarning into errors on 3.12+): as
    deep as allowed."""
    try:
        source = tee.__reduce__()[2][0].__reduce__()[1][0]
    except Exception:
        return MAX_ITERATOR_NESTING
    return 1 + _nesting_of(source)


def _deeper(inputs, what) -> int:
    return _checked_depth(1 + max((_nesting_of(i) for i in inputs), default=0), what)


def _checked_depth(depth, what) -> int:
    if depth > MAX_ITERATOR_NESTING:
        exc = genuine(SizeDenied(f"{what} nested {depth:,} deep",
                         f"C iterators nest at most {MAX_ITERATOR_NESTING:,} deep (next() would recurse in C "
                         f"past the end of the stack)"))
        _refuse(exc)
    return depth


# Builtin classes that consume an iterable in C when called. Passed as the function of map/filter/
# starmap/... (map(list, [range(10**18)])) they would run uncharged, and nest in C: the stand-ins call
# them through the sized gate instead (a Python frame per call, so nesting meets the recursion limit).
_CONSUMING_CLASSES = frozenset({list, tuple, set, frozenset, dict, bytes, bytearray})


def charged(fn):
    """fn itself, or for a consuming builtin class a function that calls it through the sized gate."""
    if type(fn) is not type or fn not in _CONSUMING_CLASSES:
        return fn
    wrapper = _CHARGED.get(fn)
    if wrapper is None:
        def wrapper(*args, **kwargs):
            gates = CURRENT_GATES.get()
            return gates.sized(fn, *args, **kwargs) if gates is not None else fn(*args, **kwargs)
        wrapper.__name__ = wrapper.__qualname__ = fn.__name__
        wrapper = _CHARGED[fn] = runtime_callable(wrapper)
    return wrapper


_CHARGED: dict = {}
_FUNCTION_FIRST = frozenset({"map", "filter", "starmap", "takewhile", "dropwhile", "filterfalse"})


def _charge_islice_skips(args) -> None:
    """islice(it, start, stop[, step]) skips start items, and step - 1 between items, in C at next(), with no
    tick and no check for signals (review 16, R16-8: 3*10**8 skipped items ran 3.6 s past a 0.5 s limit;
    10**12 is hours). The skips are charged as ticks when the slice is made (once for the step), so a slice
    the budget cannot pay for is refused before C starts."""
    gates = CURRENT_GATES.get()
    if len(args) < 3 or gates is None or gates.budget is None or not cell_is_running():
        return
    start = 0 if args[1] is None else operator.index(args[1])
    step = 1 if len(args) < 4 or args[3] is None else operator.index(args[3])
    skipped = max(start, 0) + max(step - 1, 0)
    if skipped > 1000:
        gates.budget.charge(skipped)


def _nesting_stand_in(cls):
    """cls (map, zip, itertools.chain ...) as cells see it: a subclass whose instances carry their
    nesting depth in a slot; iteration is the real class's, in C."""
    function_first = cls.__name__ in _FUNCTION_FIRST

    def __new__(sub, *args, **kwargs):
        depth = _deeper(args, cls.__name__)
        if cls is itertools.islice:
            _charge_islice_skips(args)
        if function_first and args:
            args = (charged(args[0]),) + args[1:]
        if "func" in kwargs or "key" in kwargs:   # accumulate(func=...), groupby(key=...)
            kwargs = {k: charged(v) if k in ("func", "key") else v for k, v in kwargs.items()}
        obj = cls.__new__(sub, *args, **kwargs)
        slot.__set__(obj, depth)
        return obj
    namespace = {"__slots__": ("__st_depth__",), "__new__": __new__, "__doc__": cls.__doc__,
                 "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__st_real__": cls}
    if hasattr(cls, "from_iterable"):
        def from_iterable(sub, iterable):
            depth = _checked_depth(1 + max(_nesting_of(iterable), _nesting_inside(iterable)),
                                   f"{cls.__name__}.from_iterable")
            obj = cls.__dict__["from_iterable"].__get__(None, sub)(iterable)   # C, bound to the stand-in
            slot.__set__(obj, depth + 1)   # its items are iterables too: count one more
            return obj
        namespace["from_iterable"] = classmethod(runtime_callable(from_iterable))
    stand_in = _StandInMeta(cls.__name__, (cls,), namespace)
    slot = stand_in.__dict__["__st_depth__"]
    _NESTING_SLOT[stand_in] = slot
    return stand_in


def _nesting_tee(tee):
    def tee_(iterable, n=2):
        depth = _deeper((iterable,), "tee")
        copies = tee(iterable, n)
        for t in copies:
            if type(t) is _TEE_TYPE:
                _TEE_DEPTH[t] = depth
        return copies
    tee_.__name__ = "tee"
    tee_.__doc__ = tee.__doc__
    return runtime_callable(tee_)


class _SteppedReader:
    """What csv.reader returns to a cell: the real reader, stepped from Python. A reader's next() calls
    its input's next() in C with no depth check, so csv.reader(csv.reader(...)) nested a few hundred
    thousand times overflowed the C stack; a Python frame per step meets the recursion limit instead."""
    __slots__ = ("_reader",)

    def __init__(self, reader):
        self._reader = reader

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._reader)

    @property
    def line_num(self):
        return self._reader.line_num

    @property
    def dialect(self):
        return self._reader.dialect


_SteppedReader.__name__ = _SteppedReader.__qualname__ = "reader"
_SteppedReader.__module__ = "_csv"


def _guard_csv_reader(fn, gates):
    @functools.wraps(fn)
    def reader(*args, **kwargs):
        return _SteppedReader(fn(*args, **kwargs))
    return runtime_callable(reader)


_TEE_TYPE = type(itertools.tee(())[0])
_NESTING_CLASSES = [map, filter, zip, enumerate] + [
    getattr(itertools, n) for n in ("accumulate", "batched", "chain", "compress", "dropwhile", "filterfalse",
                                    "groupby", "islice", "pairwise", "starmap", "takewhile", "zip_longest")
    if isinstance(getattr(itertools, n, None), type)]
NESTING_STAND_INS = {cls: _nesting_stand_in(cls) for cls in _NESTING_CLASSES}


def _groupby(iterable, key=None):
    """itertools.groupby written in Python. CPython's C groupby (3.11 to 3.13) frees a key while a key's
    re-entrant __eq__ is still comparing it (gh-143543): list item arrays laid over the freed block made the
    other key a bytearray over all memory (review 10, N10-8). Same groups, in the same order; a group is
    consumed before the next key is read, like the C one's. Nested like the C iterators (next() of a deep
    chain of generators recurses in C too)."""
    depth = _deeper((iterable,), "groupby")
    groups = _groups(iter(iterable), charged(key) if key is not None else None, depth)
    _GENERATOR_DEPTH[groups] = depth
    return groups


def _groups(it, key, depth):
    keyfunc = key if key is not None else (lambda v: v)
    state = {"done": False}
    try:
        state["value"] = next(it)
    except StopIteration:
        return
    state["key"] = keyfunc(state["value"])

    def group(target):
        yield state["value"]
        for value in it:
            state["value"], state["key"] = value, keyfunc(value)
            if not state["key"] == target:
                return
            yield value
        state["done"] = True

    while not state["done"]:
        target = state["key"]
        members = group(target)
        _GENERATOR_DEPTH[members] = depth
        yield target, members
        for _ in members:   # what the caller left of this group
            pass
        if state["key"] == target and not state["done"]:
            break   # (only when the group ended without a new key: the iterator is exhausted)


runtime_callable(_groupby)
if isinstance(getattr(itertools, "groupby", None), type):
    NESTING_STAND_INS[itertools.groupby] = _groupby
_NESTING_TEE = _nesting_tee(itertools.tee)


def _guard_decimal_context(cls, gates):
    """decimal.Context as cells see it: a subclass whose constructor bounds the precision. One class
    per engine, made on first use."""
    if gates._decimal_context is None:
        class Context(cls, metaclass=_StandInMeta):
            __doc__ = cls.__doc__
            __st_real__ = cls

            @runtime_callable
            def __init__(self, prec=None, *args, **kwargs):
                super().__init__(bounded_decimal_prec(gates, prec), *args, **kwargs)
        Context.__module__ = "decimal"
        gates._decimal_context = Context
    return gates._decimal_context


def _guard_decimal_activation(fn, gates):
    """setcontext(ctx) and localcontext(ctx, prec=...): the context made current is bounded too
    (its precision read through the C descriptor, whatever a subclass claims)."""
    def activate(ctx=None, **kwargs):
        if isinstance(ctx, decimal.Context):
            bounded_decimal_prec(gates, decimal.Context.prec.__get__(ctx))
        if "prec" in kwargs:
            kwargs["prec"] = bounded_decimal_prec(gates, kwargs["prec"])
        return fn(ctx, **kwargs) if fn is decimal.localcontext else fn(ctx)
    activate.__name__ = fn.__name__
    activate.__doc__ = fn.__doc__
    return runtime_callable(activate)


def _guard_typing_introspection(fn, gates):
    """typing.get_origin / get_args hand back the classes inside an alias (get_origin(typing.Deque[int])
    is deque): a guarded class comes back as its stand-in, as from any other read."""
    def introspect(tp):
        result = fn(tp)
        return tuple(map(gates.handed_out, result)) if type(result) is tuple else gates.handed_out(result)
    introspect.__name__ = fn.__name__
    introspect.__doc__ = fn.__doc__
    return runtime_callable(introspect)


def _guard_target_is_sandboxed(position_name: str, field_names: bool = False):
    """Decorators and helpers that write attributes onto their argument (dataclass, update_wrapper,
    total_ordering, no_type_check, abstractmethod, final ...) may only change what the cell made.
    field_names: the class's annotation keys become source text (dataclass): identifiers only (the
    source-to-code sink in confine.py refuses the rest anyway; this says why, earlier)."""
    def factory(fn, gates):
        def check(target):
            if not (is_sandbox_class(target) or is_sandbox_function(target) or
                    type(target) in (classmethod, staticmethod, property) or
                    type(target) is functools.partial):
                gates.deny(CallDenied(f"{fn.__name__}() of {_type_name(target)}",
                                      f"it changes its {position_name}; only classes and functions "
                                      f"defined in the cell may be changed"))
            annotations = type.__dict__["__dict__"].__get__(target).get("__annotations__") \
                if field_names and isinstance(target, type) else None
            if type(annotations) is dict and not all(type(k) is str and k.isidentifier() for k in annotations):
                gates.deny(CallDenied(f"{fn.__name__}() of a class with a field name that is not an identifier",
                                      "field names become the text of the generated methods"))
            if type(annotations) is dict:
                mro = type.__dict__["__mro__"].__get__(target)
                why = dataclass_field_refusal(mro, list(annotations) + inherited_dataclass_fields(mro[1:]))
                if why is not None:
                    gates.deny(CallDenied(f"{fn.__name__}() of a class with {why[0]}", why[1]))

        def guarded(*args, **kwargs):
            targets = list(args[:1]) + [v for k, v in kwargs.items() if k in _TARGET_KEYWORDS]
            if targets:
                for target in targets:
                    check(target)
                return fn(*args, **kwargs)
            decorator = fn(**kwargs)            # @dataclass(frozen=True): the class comes later

            def apply(target):
                check(target)
                return decorator(target)
            return runtime_callable(apply)
        guarded.__name__ = fn.__name__
        guarded.__doc__ = fn.__doc__
        return runtime_callable(guarded)
    return factory


def _guard_set_module(fn, gates):
    """numpy's and pandas' set_module(name) decorators write __module__ of what they decorate from library code,
    past the write gate: pd.DataFrame renamed for the whole process (review 18, R18-9). The cell's own only."""
    def set_module(module):
        decorator = fn(module)

        def apply(target):
            if not (is_sandbox_class(target) or is_sandbox_function(target)):
                gates.deny(CallDenied(f"set_module() of {_type_name(target)}", "it rewrites the object's __module__; "
                                      "only classes and functions defined in the cell may be changed"))
            return decorator(target)
        return runtime_callable(apply)
    set_module.__doc__ = fn.__doc__
    return runtime_callable(set_module)


# The parameter names these helpers give their target (update_wrapper(wrapper=...), no_type_check(arg=...)).
_TARGET_KEYWORDS = frozenset({"wrapper", "arg", "cls", "f", "funcobj", "enumeration", "func", "obj", "method"})


def _guard_global_enum(fn, gates):
    """enum.global_enum(E) writes E's members into sys.modules[E.__module__], a name the cell chooses
    (Enum(..., module='json'), E.__module__ = ...); at level none even '__main__' is the kernel's module.
    For the cell's own enum it does what global_enum does with the cell's namespace as E's module."""
    def global_enum(cls, update_str=False):
        if not (isinstance(cls, type) and issubclass(cls, enum.Enum) and is_sandbox_class(cls)):
            gates.deny(CallDenied(f"enum.global_enum({_type_name(cls)})", "it writes the members into a module: "
                                  "only an enum the cell defined, into the cell's own names"))
        cls.__repr__ = enum.global_flag_repr if issubclass(cls, enum.Flag) else enum.global_enum_repr
        if not issubclass(cls, enum.ReprEnum) or update_str:
            cls.__str__ = enum.global_str
        gates.namespace.update((name, member) for name, member in cls.__members__.items()
                               if type(name) is str and name.isidentifier() and not name.startswith("__"))
        return cls
    global_enum.__doc__ = fn.__doc__
    return runtime_callable(global_enum)


def _guard_no_type_check_decorator(fn, gates):
    """typing.no_type_check_decorator(d) applies typing's own no_type_check to whatever d returns (a library
    class: its __no_type_check__ and its functions' are written): the guarded no_type_check instead."""
    no_type_check = gates.guarded(typing.no_type_check, CALL_GUARDS[typing.no_type_check])

    def no_type_check_decorator(decorator):
        def wrapped_decorator(*args, **kwargs):
            return no_type_check(decorator(*args, **kwargs))
        return runtime_callable(wrapped_decorator)
    no_type_check_decorator.__doc__ = fn.__doc__
    return runtime_callable(no_type_check_decorator)


def _guard_abstract_wrapper(cls, gates):
    """abc.abstractclassmethod(f) / abstractstaticmethod(f) set f.__isabstractmethod__: only on the cell's
    functions (a library's would turn abstract in every class that holds it)."""
    def construct(make, *args, **kwargs):
        target = args[0] if args else kwargs.get("callable")
        if not is_sandbox_function(target):
            gates.deny(CallDenied(f"abc.{cls.__name__}() of a function the cell did not define", "it changes the "
                                  "function it wraps; only functions defined in the cell may be changed"))
        return make(*args, **kwargs)
    return _stand_in_class(cls, construct)


def _wrapper_names_checked(gates, what, assigned, updated):
    """functools' own names only: update_wrapper sets each `assigned` name on the wrapper and calls .update()
    on each `updated` one, by name, in library code, past the gates (assigned=('__code__',) swapped a cell
    function's bytecode, updated=('__globals__',) merged a dict into the cell's namespace, a staticmethod's
    __globals__ handed out the real builtins: review 16, R16-3..R16-5, R16-14). Returns them as tuples."""
    assigned, updated = tuple(assigned), tuple(updated)
    if not (all(type(n) is str and n in functools.WRAPPER_ASSIGNMENTS for n in assigned) and
            all(type(n) is str and n in functools.WRAPPER_UPDATES for n in updated)):
        gates.deny(CallDenied(f"{what} with names of the cell's choosing",
                              "only functools' own WRAPPER_ASSIGNMENTS and WRAPPER_UPDATES are copied"))
    return assigned, updated


def _guard_update_wrapper(fn, gates):
    """functools.update_wrapper: the cell's own function as the wrapper (_guard_target_is_sandboxed), and
    functools' own names (_wrapper_names_checked)."""
    targeted = _guard_target_is_sandboxed("wrapper")(fn, gates)

    def update_wrapper(wrapper, wrapped, assigned=functools.WRAPPER_ASSIGNMENTS, updated=functools.WRAPPER_UPDATES):
        assigned, updated = _wrapper_names_checked(gates, "functools.update_wrapper", assigned, updated)
        return targeted(wrapper, wrapped, assigned, updated)
    update_wrapper.__doc__ = fn.__doc__
    return runtime_callable(update_wrapper)


def _guard_wraps(fn, gates):
    """functools.wraps(w) returns a decorator that writes onto the function it decorates."""
    def wraps(wrapped, assigned=functools.WRAPPER_ASSIGNMENTS, updated=functools.WRAPPER_UPDATES):
        assigned, updated = _wrapper_names_checked(gates, "functools.wraps", assigned, updated)
        decorator = fn(wrapped, assigned, updated)

        def apply(wrapper):
            if not is_sandbox_function(wrapper) and not is_sandbox_class(wrapper):
                gates.deny(CallDenied("functools.wraps(...) on a function the cell did not define",
                                      "it would change that function"))
            return decorator(wrapper)
        return runtime_callable(apply)
    wraps.__name__ = "wraps"
    wraps.__doc__ = fn.__doc__
    return runtime_callable(wraps)


def _guard_attrgetter(fn, gates):
    """operator.attrgetter('a.b') reads through the attribute gate."""
    def attrgetter(*names):
        for name in names:
            if type(name) is not str:
                raise TypeError("attribute name must be a string")
        paths = [name.split(".") for name in names]

        def get(obj):
            values = []
            for path in paths:
                value = obj
                for part in path:
                    value = gates.builtin_getattr(value, part)
                values.append(value)
            return values[0] if len(values) == 1 else tuple(values)
        return runtime_callable(get)
    attrgetter.__doc__ = fn.__doc__
    return runtime_callable(attrgetter)


def _guard_methodcaller(fn, gates):
    def methodcaller(name, *args, **kwargs):
        if type(name) is not str:
            raise TypeError("method name must be a string")
        return runtime_callable(lambda obj: gates.builtin_getattr(obj, name)(*args, **kwargs))
    methodcaller.__doc__ = fn.__doc__
    return runtime_callable(methodcaller)


def _guard_singledispatch(fn, gates):
    """register() reads implementations' annotations with typing.get_type_hints, which evaluates
    string annotations outside the rewriter: only evaluated (non-string) annotations are accepted."""
    def singledispatch(func):
        dispatcher = fn(func)
        register = dispatcher.register

        def guarded_register(cls, func=None):
            target = cls if func is None and not isinstance(cls, type) else func
            annotations = getattr(target, "__annotations__", None) if target is not None else None
            if isinstance(annotations, dict) and any(isinstance(a, str) for a in annotations.values()):
                gates.deny(CallDenied("register() with string annotations",
                                      "annotations given as strings would be evaluated outside the sandbox"))
            return register(cls, func) if func is not None else register(cls)
        dispatcher.register = runtime_callable(guarded_register)
        return dispatcher
    singledispatch.__doc__ = fn.__doc__
    return runtime_callable(singledispatch)


_COPY_SEARCH_LIMIT = 1_000_000
_SCALARS = frozenset({int, float, complex, str, bytes, bool, type(None)})


def _refuse_planted_protocols(root, refuse) -> None:
    """Every library object reachable from a deep copy (containers, instance dicts) is searched for a
    numpy raw-protocol key in its __dict__."""
    seen, pending = set(), [root]
    while pending:
        obj = pending.pop()
        if type(obj) in _SCALARS or id(obj) in seen:
            continue
        seen.add(id(obj))
        if len(seen) > _COPY_SEARCH_LIMIT:
            refuse(f"of more than {_COPY_SEARCH_LIMIT:,} objects (too many to search)")
        t = type(obj)
        if t is list or t is tuple or t is set or t is frozenset:
            pending.extend(obj)
            continue
        if t is dict:
            pending.extend(obj.keys())
            pending.extend(obj.values())
            continue
        state = getattr(obj, "__dict__", None)
        if type(state) is dict:
            if not is_sandbox_class(t) and any(k in state for k in _RAW_ARRAY_PROTOCOLS):
                refuse("planting numpy's raw protocols")
            pending.extend(state.values())


def _guard_copy(fn, gates):
    """copy.copy/deepcopy follow __reduce_ex__, which a cell's class can steer (its own __reduce__, a
    __getattribute__ that answers for it, a __class__ that names another class): the copy machinery
    would then build an object of any class and update its __dict__ with the cell's state (a module's,
    or a library object's with numpy's raw '__array_interface__' in it). A copy must be of the
    original's own class, and a library object's copy may not carry raw protocols."""
    def refuse(what):
        gates.deny(CallDenied(f"copy.{fn.__name__}() {what}", "define __copy__/__deepcopy__ instead"))

    def check_pair(original, made):
        if type(made) is not type(original):
            refuse(f"turning a {type(original).__name__} into a {type(made).__name__}")
        state = getattr(made, "__dict__", None) if not is_sandbox_class(type(made)) else None
        if type(state) is dict and any(k in state for k in _RAW_ARRAY_PROTOCOLS):
            refuse("planting numpy's raw protocols")

    def guarded(x, *args, **kwargs):
        cls = type(x)
        if is_sandbox_class(cls):
            for k in cls.__mro__:
                if not is_sandbox_class(k):
                    continue
                if any(h in k.__dict__ for h in ("__reduce_ex__", "__reduce__", "__getattribute__")):
                    refuse("of an object whose class answers for its own reduction")
        if fn is copy.deepcopy:
            made = fn(x, *args, **kwargs)
            if made is not x:
                check_pair(x, made)
            # the memo is the cell's (an argument, or handed to its __deepcopy__ hooks): nothing it
            # says can be trusted, so the copy itself is searched for planted raw protocols
            _refuse_planted_protocols(made, refuse)
            return made
        made = fn(x, *args, **kwargs)
        if made is not x:
            check_pair(x, made)
        return made
    guarded.__name__ = fn.__name__
    guarded.__doc__ = fn.__doc__
    return runtime_callable(guarded)


def _guard_copy_reconstruct() -> None:
    """The sink of copy's reduction protocol: copy._reconstruct calls what an object's __reduce_ex__ answered
    and then writes the answered state into whatever that made (y.__dict__.update(state), setattr, items).
    A reduction is the object's to answer (a cell class's __getattribute__ answers __reduce_ex__; a library
    deep-copies the cell's objects itself: nested deepcopy, dataclasses.asdict, pandas' attrs on every
    operation), so while a cell runs what it makes must be an object of the original's own class before any
    state goes into it: never a module (math.__dict__.update(...)) or another library object."""
    original = copy._reconstruct
    if getattr(original, "__st_closed__", False):
        return

    def _reconstruct(x, memo, func, args, *rest, **kwargs):
        if cell_is_running():
            state = rest[0] if rest else kwargs.get("state")
            if state is not None and _cell_state_for_a_library_base(type(x)):
                # the state goes in past the write gate (a library's __setstate__, __dict__.update, setattr): on a
                # class with a library base, the library's private state would be what the cell's __getstate__ said
                _refuse(genuine(CallDenied(f"a copy of a {type(x).__name__}", "its class has a library base and "
                                           "its own __getstate__: the state would go in past the write gate",
                                           hint="define __copy__/__deepcopy__ instead")))
            if memo is not None and _built_on_index_arrays(type(x)):
                # a deep copy takes each piece of state from the memo, which is the cell's to fill: a csr_array
                # copy got the cell's writable, unchecked indices (review 10, N10-9)
                exc = genuine(CallDenied(f"a deep copy of a {type(x).__name__}",
                                         "its index arrays would come from a memo the cell can fill",
                                         hint="use the object's own copy() method"))
                _refuse(exc)
            func = functools.partial(_made_like, x, func)
        return original(x, memo, func, args, *rest, **kwargs)
    _reconstruct.__st_closed__ = True
    copy._reconstruct = _reconstruct


def _cell_state_for_a_library_base(cls) -> bool:
    mro = type.__dict__["__mro__"].__get__(cls)
    if not is_sandbox_class(cls) or all(is_sandbox_class(k) or k.__module__ in ("builtins", "abc") for k in mro):
        return False
    return any(is_sandbox_class(k) and "__getstate__" in type.__dict__["__dict__"].__get__(k) for k in mro)


def _made_like(original, make, *args):
    made = make(*args)
    if type(made) is not type(original):
        exc = genuine(CallDenied(f"a copy of a {type(original).__name__} made as a {type(made).__name__}",
                                 "a copy is an object of the original's own class (its reduction answered otherwise)"))
        _refuse(exc)
    return made


_guard_copy_reconstruct()


def _guard_consumer(fn, gates):
    """Functions that consume an iterable in C (deque, math.fsum, math.prod, functools.reduce): its
    length is charged as ticks before they start, like list() and sum()."""
    def charge(args):
        """The iterable among the first two arguments made consumable (see Gates.consumable) and charged."""
        return tuple(gates.consumable(arg) if i < 2 and not callable(arg) else arg for i, arg in enumerate(args))

    def consumer(*args, **kwargs):
        args = charge(args)
        if fn is math.prod and args and not isinstance(kwargs.get("start", 1), (int, float, complex)):
            # prod(xs, start='a') repeats start in C: multiply through the size-checked '*' instead
            result = kwargs["start"]
            for x in args[0]:
                result = gates.binop(result, "*", x)
            return result
        return fn(*args, **kwargs)
    if isinstance(fn, type):   # deque: still a class to isinstance() and to subclass
        def construct(make, *args, **kwargs):
            return make(*charge(args), **kwargs)
        return _stand_in_class(fn, construct)
    consumer.__name__ = getattr(fn, "__name__", "consumer")
    consumer.__doc__ = fn.__doc__
    return runtime_callable(consumer)


def _ticking_factory(fn, gates):
    """Combinatoric iterators have no length hint: list(product(range(1000), repeat=5)) would fill
    memory in C. The sandbox's versions tick on every item."""
    def ticking(*args, **kwargs):
        return _ticking_iter(fn(*args, **kwargs), gates)
    ticking.__name__ = fn.__name__
    ticking.__doc__ = fn.__doc__
    return runtime_callable(ticking)



def _guard_zoneinfo(cls, gates):
    """zoneinfo.ZoneInfo keeps one instance per key for the whole process, and the instance holds the key
    object it was made from: a cell's str subclass (split = partial(np.savetxt, ...)) became every later
    ZoneInfo('Europe/Paris').key in the process (review 6, N6-3). The cell's constructor passes an exact str."""
    def construct(make, key, *args, **kwargs):
        return make(str.__str__(key) if isinstance(key, str) else key, *args, **kwargs)
    return _stand_in_class(cls, construct)


# Ticks one PBKDF2 round costs: an HMAC is two hash compressions, ~0.5-1 us, where a tick is ~50 ns of bytecode.
PBKDF2_ROUND_TICKS = 16


def _guard_pbkdf2(fn, gates):
    """hashlib.pbkdf2_hmac runs iterations x blocks HMACs in C with the GIL released and allocates nothing:
    neither the alarm nor the allocation bound sees it (review 11, R11-7). The rounds are charged first."""
    @functools.wraps(fn)
    def pbkdf2_hmac(hash_name, password, salt, iterations, dklen=None):
        rounds = operator.index(iterations)
        if dklen is not None:
            size = hashlib.new(hash_name).digest_size
            rounds *= max(1, -(-operator.index(dklen) // size))
        if rounds > 0 and gates.budget is not None:
            gates.budget.charge(rounds * PBKDF2_ROUND_TICKS)
        return fn(hash_name, password, salt, iterations, dklen)
    return runtime_callable(pbkdf2_hmac)


def _guard_contains(fn, gates):
    """operator.contains(a, b) is `b in a`: the same gate (an iterator, a range walked for a float, a cell
    object's __iter__ are charged first; review 11, R11-4)."""
    def contains(a, b, /):
        return gates.contains(a, b)
    contains.__doc__ = fn.__doc__
    return runtime_callable(contains)


def _guard_scrypt(fn, gates):
    """hashlib.scrypt allocates its 128 x n x r bytes in OpenSSL, past every allocator the sandbox bounds
    (review 8, N8-4: 1 GB under a 256 MB policy): the size is checked first, and maxmem never exceeds it."""
    @functools.wraps(fn)
    def scrypt(password, *, salt, n, r, p, maxmem=0, dklen=64):
        need = 128 * operator.index(n) * operator.index(r) * max(operator.index(p), 1)
        if need > gates.max_bytes:
            gates.deny(SizeDenied(f"hashlib.scrypt needing ~{need:,} bytes",
                                  f"one step may use at most {gates.max_bytes:,} bytes (the policy's memory limit)"))
        return fn(password, salt=salt, n=n, r=r, p=p, maxmem=min(operator.index(maxmem) or gates.max_bytes,
                                                                   gates.max_bytes), dklen=dklen)
    return runtime_callable(scrypt)


CALL_GUARDS = {itertools.count: _guard_endless, itertools.cycle: _guard_endless,
                itertools.repeat: _guard_endless, math.factorial: _guard_big_math,
                math.comb: _guard_big_math, math.perm: _guard_big_math,
                copy.copy: _guard_copy, copy.deepcopy: _guard_copy,
                functools.wraps: _guard_wraps,
                functools.update_wrapper: _guard_update_wrapper,
                functools.total_ordering: _guard_target_is_sandboxed("class"),
                dataclasses.dataclass: _guard_target_is_sandboxed("class", field_names=True),
                typing.no_type_check: _guard_target_is_sandboxed("argument"),
                typing.final: _guard_target_is_sandboxed("argument"),
                typing.runtime_checkable: _guard_target_is_sandboxed("class"),
                abc.abstractmethod: _guard_target_is_sandboxed("function"),
                enum.unique: _guard_target_is_sandboxed("class"),
                operator.attrgetter: _guard_attrgetter, operator.methodcaller: _guard_methodcaller,
                functools.singledispatch: _guard_singledispatch,
                decimal.Context: _guard_decimal_context, decimal.setcontext: _guard_decimal_activation,
                decimal.localcontext: _guard_decimal_activation,
                itertools.tee: lambda fn, gates: _NESTING_TEE,
                typing.get_origin: _guard_typing_introspection, typing.get_args: _guard_typing_introspection,
                csv.reader: _guard_csv_reader, zoneinfo.ZoneInfo: _guard_zoneinfo,
                # typing's alias of deque, callable like it
                typing.Deque: lambda fn, gates: gates.guarded(collections.deque, _guard_consumer)}
if hasattr(enum, "global_enum"):   # 3.11+
    CALL_GUARDS[enum.global_enum] = _guard_global_enum
# typing's and abc's helpers that write an attribute of their argument (typing.final above)
for _name, _what in (("dataclass_transform", "class"), ("override", "function")):   # 3.11+, 3.12+
    if hasattr(typing, _name):
        CALL_GUARDS[getattr(typing, _name)] = _guard_target_is_sandboxed(_what)
if hasattr(typing, "no_type_check_decorator"):
    CALL_GUARDS[typing.no_type_check_decorator] = _guard_no_type_check_decorator
if hasattr(hashlib, "scrypt"):   # (OpenSSL builds only)
    CALL_GUARDS[hashlib.scrypt] = _guard_scrypt
CALL_GUARDS[hashlib.pbkdf2_hmac] = lambda fn, gates: _guard_pbkdf2(fn, gates)
# the module's functions are its hidden Random's bound methods: the same check as the instances' stand-in
CALL_GUARDS[random.getrandbits] = lambda fn, gates: runtime_callable(lambda k: gates.random_bits(fn, k))
CALL_GUARDS[operator.contains] = lambda fn, gates: _guard_contains(fn, gates)
CALL_GUARDS[abc.abstractclassmethod] = _guard_abstract_wrapper
CALL_GUARDS[abc.abstractstaticmethod] = _guard_abstract_wrapper
for _cls, _stand_in in NESTING_STAND_INS.items():
    CALL_GUARDS[_cls] = (lambda s: lambda fn, gates: s)(_stand_in)
for _function in _SIZED_OPERATOR_FUNCTIONS:
    CALL_GUARDS[_function] = _guard_sized_operator
for _name in ("product", "permutations", "combinations", "combinations_with_replacement"):
    CALL_GUARDS[getattr(itertools, _name)] = _ticking_factory
for _consumer in (collections.deque, math.fsum, math.prod, functools.reduce, operator.countOf, operator.indexOf,
                  heapq.nlargest, heapq.nsmallest, collections.Counter, array.array):
    CALL_GUARDS[_consumer] = _guard_consumer
_KEEP: list = []


def _guard_plotly_show(fn, gates):
    def show(fig, *args, **kwargs):
        if gates.display is None:
            gates.deny(CallDenied("plotly.io.show", "there is no display here"))
        if isinstance(fig, dict):
            # pio.show({'data': ..., 'layout': ...}): plotly validates the dict into a figure (and raises
            # on a bad one) before it renders; so does this, and the figure is shown as a chart, not as
            # the dict's repr. validate=False skips what plotly.js ignores instead of raising.
            import plotly.graph_objects as go

            fig = go.Figure(fig, skip_invalid=kwargs.get("validate", True) is False)
        gates.display(fig)
    return runtime_callable(show)


def _guard_auto_open(fn, gates):
    return _no_auto_open(fn)


def _route_pandas_evaluator() -> None:
    """pandas' expression evaluator is an interpreter of its own ('@name' resolves in whatever frame is
    `level` up, attributes and calls are whatever the text names). While a cell runs, every call of
    pandas.core.computation.eval.eval (DataFrame.query and DataFrame.eval import it at each call) is
    evaluated by pandas_query instead; pandas.eval is handed out as the same router; and pandas' own
    parser (Expr) refuses to start, for any route not yet known."""
    if "pandas" not in sys.modules:
        return
    module = sys.modules.get("pandas.core.computation.eval")
    if module is None:
        import pandas.core.computation.eval as module   # noqa: F811 - loaded lazily by DataFrame.eval
    if getattr(module.eval, "__st_closed__", False):
        return
    original = module.eval
    unset = object()

    def eval(expr, parser="pandas", engine=None, local_dict=None, global_dict=None, resolvers=(), level=0,
             target=None, inplace=unset):
        if not cell_is_running():
            extra = {} if inplace is unset else {"inplace": inplace}
            return original(expr, parser=parser, engine=engine, local_dict=local_dict, global_dict=global_dict,
                            resolvers=resolvers, level=level + 1, target=target, **extra)
        gates = CURRENT_GATES.get()
        if gates is None:
            raise genuine(CallDenied("pandas' expression evaluator", "there is no sandbox engine on this thread"))
        inplace = False if inplace is unset or type(inplace).__name__ == "NoDefault" else inplace
        return pandas_query.evaluate(gates, expr, parser, engine, local_dict, global_dict, resolvers, level,
                                     target, inplace)
    eval.__doc__ = original.__doc__
    eval.__st_closed__ = True
    runtime_callable(eval)
    _close_pandas_parser()
    module.eval = eval
    CALL_GUARDS[original] = lambda fn, gates: eval   # pandas.eval, as cells read it
    _KEEP.append(original)


def _close_pandas_parser() -> None:
    expr = sys.modules.get("pandas.core.computation.expr")
    parse = getattr(getattr(expr, "Expr", None), "__init__", None)
    if parse is None or getattr(parse, "__st_closed__", False):
        return

    def __init__(self, *args, **kwargs):
        if cell_is_running():
            raise genuine(CallDenied("pandas' own expression parser", "it evaluates text outside the sandbox"))
        parse(self, *args, **kwargs)
    __init__.__st_closed__ = True
    expr.Expr.__init__ = __init__


# -- numpy: arrays laid over raw memory ------------------------------------------------------------
# An object array is a row of PyObject pointers. Laid over bytes a cell wrote (np.ndarray(buffer=...),
# frombuffer, recarray(buf=), memmap), any address becomes an object ("fakeobj"); an int view over an
# object array's storage writes raw pointers into it. Either ends in the real builtins. Numpy itself
# refuses some routes (frombuffer(dtype=object), object <-> int view()); these guards close the rest by
# checking what an array is laid over, after numpy built it and before the cell holds it.

def _forged_array(np, arr) -> bool:
    """True when a constructor laid arr over object storage on either side: object fields over any
    buffer (bytes a cell wrote, or another object array at an offset or with another layout: a
    structured ('i8', 'O') view over an object array writes an int into a pointer slot), or any dtype
    over an object array's storage. Arrays with their own memory (no base) are never forged."""
    if arr.dtype.hasobject and any(stride % arr.dtype.itemsize for stride in arr.strides):
        return True   # np.ndarray((2,), object, strides=(4,)): elements straddle pointers, even in own memory
    base = arr.base
    if base is None:
        return False
    if arr.dtype.hasobject:
        return True
    while base is not None:
        if isinstance(base, np.ndarray):
            if base.dtype.hasobject:
                return True
            base = base.base
        elif isinstance(base, memoryview):
            base = base.obj
        else:
            return False
    return False


def _checked_array(gates, np, arr, what):
    if isinstance(arr, np.ndarray) and _forged_array(np, arr):
        exc = genuine(CallDenied(f"{what} laid over raw memory",
                         "object arrays are made from Python objects, never from bytes, and their "
                         "storage is never seen as bytes"))
        if gates is not None:
            gates.deny(exc)
        raise exc
    return arr


def _guard_numpy_array_class(cls, gates):
    """np.ndarray, np.recarray, np.memmap, np.char.chararray as cells see them: construction is
    checked by _forged_array."""
    np = sys.modules["numpy"]
    return _stand_in_class(cls, lambda make, *args, **kwargs: _checked_array(
        gates, np, make(*args, **kwargs), f"{cls.__name__}()"))


def _guard_numpy_buffer_function(fn, gates):
    """frombuffer and the np.rec / np.char constructors that take a buffer: the result is checked."""
    np = sys.modules["numpy"]

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        return _checked_array(gates, np, fn(*args, **kwargs), f"numpy.{fn.__name__}()")
    return runtime_callable(checked)


def _guard_numpy_constructor(np) -> bool:
    """The checks in ndarray's own constructor and buffer export (_numpyguard.c), so that the raw class,
    wherever a cell finds it (typing.get_origin(np.typing.NDArray), a generic alias, a library's
    annotations), checks what it makes too, and no consumer of the buffer protocol writes bytes over an
    object array's pointers. False where the extension is missing: the stand-in classes are all there is."""
    if _numpyguard is None:
        return False

    def check_new_array(arr):
        if cell_is_running():
            _checked_array(CURRENT_GATES.get(), np, arr, "ndarray()")
    _numpyguard.guard_array_new(np.ndarray, runtime_callable(check_new_array))
    if hasattr(_numpyguard, "guard_c_recursion"):
        _numpyguard.guard_c_recursion(np.ndarray)   # tuple hashes, self-holding object arrays (N4-11)
        _numpyguard.guard_deallocation((np.ndarray,))   # object arrays nested 300,000 deep (R18-11)
    _numpyguard.guard_array_buffer(np.ndarray, np.dtype, runtime_callable(_refuse_object_buffer))
    pending = list(np.ndarray.__subclasses__())
    while pending:
        sub = pending.pop()
        _numpyguard.guard_subclass_new(sub)
        _numpyguard.guard_subclass_buffer(sub)
        pending.extend(sub.__subclasses__())
    return True


def _serial_pandas_reads() -> None:
    """pandas 3.1 parses a CSV of 5 MB or more on a thread pool (its default: one thread a CPU); no thread starts while
    a cell runs (confine._guard_thread_start, review 13), so while a cell runs pandas is told one worker: the serial
    reader, the same frame. Its one function that decides the count is replaced (read at each call)."""
    readers = sys.modules.get("pandas.io.parsers.readers")
    original = getattr(readers, "_default_n_workers", None)
    if original is None or getattr(original, "__st_serial__", False):
        return

    def _default_n_workers():
        return 1 if cell_is_running() else original()
    _default_n_workers.__st_serial__ = True
    readers._default_n_workers = _default_n_workers


def _normalise_wrapped_indices(np) -> None:
    """take/put/choose with mode='wrap' bring an index into range by adding or subtracting the length one step at a
    time, in a C loop that holds the GIL and looks at no signal: np.take(np.arange(4), [10**17], mode='wrap') has
    years of work left (review 13, R13-2). ndarray's three methods (every route: np.take, np.put, np.choose,
    a.take, the class's) are replaced for the process: while a cell runs, wrapped indices are reduced modulo the
    length first, in one vectorised step, which is what the loop computes."""
    if _numpyguard is None or getattr(np.ndarray.take, "__st_wrapped__", False):
        return
    originals = {name: getattr(np.ndarray, name) for name in ("take", "put", "choose")}
    # (keywords, never positions: numpy reads a positional out=None of choose as an output array of objects)

    def reduced(indices, n):
        return np.mod(np.asarray(indices, dtype=np.intp), n) if n > 0 else indices

    def take(self, indices, axis=None, out=None, mode="raise"):
        if mode == "wrap" and cell_is_running():
            shape = np.ndarray.shape.__get__(self)
            n = int(np.prod(shape)) if axis is None else shape[axis] if shape else 1
            indices = reduced(indices, n)
        return originals["take"](self, indices, axis=axis, out=out, mode=mode)

    def put(self, indices, values, mode="raise"):
        if mode == "wrap" and cell_is_running():
            indices = reduced(indices, int(np.ndarray.size.__get__(self)))
        return originals["put"](self, indices, values, mode=mode)

    def choose(self, choices, out=None, mode="raise"):
        if mode == "wrap" and cell_is_running():
            self = reduced(self, len(choices))
        return originals["choose"](self, choices, out=out, mode=mode)
    for fn in (take, put, choose):
        fn.__doc__, fn.__st_wrapped__ = originals[fn.__name__].__doc__, True
        _numpyguard.replace_class_attribute(np.ndarray, fn.__name__, runtime_callable(fn))


def _charge_deque_concatenation() -> None:
    """`d += it` on a bounded deque consumes `it` in C and keeps nothing (review 11, R11-6): deque's in-place
    concatenation slot asks, while a cell runs, for what to consume, charged like d.extend(it) (_numpyguard)."""
    if _numpyguard is None or not hasattr(_numpyguard, "guard_deque_iconcat"):
        return

    def consumed(other):
        gates = CURRENT_GATES.get()
        return other if gates is None else _grow_call(gates.sized, _same, False, other)
    _numpyguard.guard_deque_iconcat(collections.deque, runtime_callable(consumed))


def _same(value):
    return value


_charge_deque_concatenation()
if _numpyguard is not None:
    # next() on 100,000 nested generator expressions overflowed the C stack (review 18, R18-10): resuming a generator
    # from C counts against the recursion limit, for the whole process (host code included: a limit, not a refusal)
    _numpyguard.guard_generator_resumption()
    # freeing slice(slice(...)) a million deep overflowed the C stack (review 18, R18-11): types whose deallocator
    # frees what they hold directly, without CPython's deferral of deep frees (numpy's arrays: when numpy loads)
    # (generators too: a chain of unstarted ones dropped when a deep one raises frees itself recursively)
    _numpyguard.guard_deallocation((slice, staticmethod, classmethod, property, operator.itemgetter,
                                    operator.attrgetter, operator.methodcaller, collections.deque, super,
                                    types.GeneratorType))


# Library code that makes a read-only view writeable on purpose, found by reading the granted libraries'
# Python for `writeable = True` / `setflags(write=True)`: numpy's broadcast_arrays (when the source is
# writeable) and pandas' date parsing (an array it has just made). (module, function) of the caller.
_MAY_UNLOCK_ARRAYS = frozenset({("numpy.lib._stride_tricks_impl", "_broadcast_to"),
                                ("pandas.io.parsers.base_parser", "date_converter"),
                                ("pandas.io.pytables", "_unconvert_string_array")})


def _guard_array_unlock(np) -> bool:
    """No array goes from read-only to writeable at a cell's request. A read-only array may be a view a library
    hands out of data it keeps and trusts in C (pandas' Categorical and MultiIndex codes, the sandbox's views of
    scipy's index arrays): numpy lets a view become writeable again whenever the array under it is writeable,
    and the codes then indexed past their buffers (review 9, N9-1, N9-2). Every route (flags.writeable = True,
    flags['W'] = True, setflags(write=True), from the instance or the class) ends in ndarray.setflags, which
    numpy's flags object calls as a method: that method is replaced for the process (_numpyguard). Library code
    listed in _MAY_UNLOCK_ARRAYS keeps doing what it does. Without the extension the gate's stand-in covers
    reads of setflags only. True where the method was replaced."""
    original = np.ndarray.setflags

    def setflags(self, write=None, align=None, uic=None):
        if write and not np.ndarray.flags.__get__(self).writeable and cell_is_running():
            caller = sys._getframe(1).f_code
            module = sys._getframe(1).f_globals.get("__name__")
            if (module, caller.co_name) not in _MAY_UNLOCK_ARRAYS:
                exc = genuine(CallDenied("making a read-only array writeable",
                                         "a read-only array may be a library's own data, which it trusts",
                                         hint="a.copy() is a writeable copy"))
                _refuse(exc)
        return original(self, write, align, uic)
    setflags.__doc__ = original.__doc__
    runtime_callable(setflags)
    if _numpyguard is not None and hasattr(_numpyguard, "replace_class_attribute"):
        _numpyguard.replace_class_attribute(np.ndarray, "setflags", setflags)
        return True
    _CHECKED_SETFLAGS[0] = setflags
    add_stand_in_kind("array_unlock", np.ndarray, ("setflags",))
    return False


_CHECKED_SETFLAGS = [None]


def _refuse_object_buffer(arr):
    """An object array's storage asked for as writable bytes (io.BytesIO(b).readinto(arr)): the bytes
    would land over its pointers."""
    exc = genuine(CallDenied("writing into an object array's storage as bytes",
                             "object arrays hold pointers; their storage is never written as bytes"))
    _refuse(exc)


def _object_storage(obj) -> bool:
    """obj is an ndarray (or a view) whose elements hold object pointers."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.ndarray) and np.ndarray.dtype.__get__(obj).hasobject


def readinto_stand_in(method):
    """Without the C buffer check: f.readinto(arr) of a buffered file or BytesIO refuses object arrays."""
    def readinto(buffer, *args):
        if _object_storage(buffer):
            _refuse_object_buffer(buffer)
        return method(buffer, *args)
    return runtime_callable(readinto)


BUFFERS_CHECKED_IN_C = _numpyguard is not None


# -- numpy's raw protocols: the sink ------------------------------------------------------------------------
# numpy reads '__array_interface__' / '__array_struct__' off any object it converts and trusts the address
# in them. A data descriptor on `object` answers "absent" before any instance __dict__ is consulted
# (_numpyguard.c explains the rule); classes that define the protocols find their own first, and
# numpy's DummyArray (as_strided, sliding_window_view) is the one class whose instances answer from
# their __dict__. Installed once per process, when this module is imported.

class _AbsentProtocol:
    """The sink in Python, for a build without _numpyguard: the same answers, slower."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if isinstance(obj, type):
            for k in type.__dict__["__mro__"].__get__(obj):
                found = type.__dict__["__dict__"].__get__(k).get(self.name, self)
                if found is self and k is object:
                    break
                if found is not self:
                    get = getattr(type(found), "__get__", None)
                    return get(found, None, obj) if get is not None else found
        elif obj is not None and type(obj) in _RAW_PROTOCOL_PROVIDERS:
            state = object.__getattribute__(obj, "__dict__")
            if self.name in state:
                return state[self.name]
        raise AttributeError(f"'{type(obj).__name__}' object has no attribute '{self.name}'")

    def __set__(self, obj, value):
        if isinstance(obj, type):
            if not obj.__flags__ & 512:   # Py_TPFLAGS_HEAPTYPE: builtin types stay immutable
                raise TypeError(f"cannot set '{self.name}' attribute of immutable type '{obj.__name__}'")
            _type_namespace(obj)[self.name] = value
            _type_modified(obj)
        elif type(obj) in _RAW_PROTOCOL_PROVIDERS:
            object.__getattribute__(obj, "__dict__")[self.name] = value
        else:
            raise AttributeError(f"'{type(obj).__name__}' object attribute '{self.name}' is read-only "
                                 f"(numpy's raw array protocols)")

    def __delete__(self, obj):
        if isinstance(obj, type):
            namespace = _type_namespace(obj)
            if self.name not in namespace:
                raise AttributeError(self.name)
            del namespace[self.name]
            _type_modified(obj)
        elif type(obj) in _RAW_PROTOCOL_PROVIDERS:
            del object.__getattribute__(obj, "__dict__")[self.name]
        else:
            raise AttributeError(self.name)


_RAW_PROTOCOL_PROVIDERS: set = set()


def _type_namespace(cls) -> dict:
    """The dict behind cls.__dict__ (the mapping proxy's only referent)."""
    import gc

    return gc.get_referents(type.__dict__["__dict__"].__get__(cls))[0]


def _type_modified(cls) -> None:
    import ctypes

    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))


def _install_raw_protocol_sink() -> None:
    if _numpyguard is not None:
        _numpyguard.install_raw_protocol_sink(_RAW_ARRAY_PROTOCOLS)
        return
    namespace = _type_namespace(object)
    for name in _RAW_ARRAY_PROTOCOLS:
        if type(namespace.get(name)) is not _AbsentProtocol:
            namespace[name] = _AbsentProtocol(name)
    _type_modified(object)


def _add_raw_protocol_provider(cls) -> None:
    if _numpyguard is not None:
        _numpyguard.add_raw_protocol_provider(cls)
    _RAW_PROTOCOL_PROVIDERS.add(cls)


def _numpy_raw_protocol_providers(np) -> None:
    """numpy's DummyArray: as_strided (and so sliding_window_view) hangs an interface dict on one, built
    from an array numpy holds (never from a cell's dict: as_strided itself is denied by policy, and the class a
    cell can reach refuses to construct: _guard_raw_description)."""
    dummy = _dummy_array_class()
    if dummy is not None:
        _add_raw_protocol_provider(dummy)


def _dummy_array_class():
    """numpy's DummyArray class (numpy 2 keeps it in _stride_tricks_impl, numpy 1 in stride_tricks), or None."""
    for name in ("numpy.lib._stride_tricks_impl", "numpy.lib.stride_tricks"):
        dummy = getattr(sys.modules.get(name), "DummyArray", None)
        if isinstance(dummy, type):
            return dummy
    return None


_install_raw_protocol_sink()


# -- numpy.random's state setters: positions inside the state -------------------------------------------------
# MT19937's setter stores 'pos' and Philox's 'buffer_pos' as given, and every draw then reads key[pos] /
# buffer[buffer_pos] in C: past the state struct, heap words and pointers come back, or the process dies
# (review 5, N5-3). Every route ends in a bit generator's state setter: `bg.state = st` (the write of a
# library object's attribute, gates.Gates._library_object_write), RandomState.set_state and
# np.random.set_state (the process-wide generator). What reaches the setter is a fresh copy in exact types,
# its positions and array lengths checked: a cell object cannot answer one thing here and another there.
_RANDOM_STATE_SHAPES = {"MT19937": {"key": 624}, "Philox": {"counter": 4, "key": 2}}
_RANDOM_POSITIONS = {"MT19937": ("pos", 624), "Philox": ("buffer_pos", 4)}


def checked_random_state(state):
    """A copy of a bit generator's state (a dict, or RandomState's legacy tuple) that numpy's setter can
    take without reading outside it; ValueError when a position or an array length is out of range."""
    np = sys.modules["numpy"]
    if type(state) is tuple or isinstance(state, tuple):
        items = tuple.__getitem__(state, slice(None))
        if items and items[0] == "MT19937":
            if len(items) < 3:
                raise ValueError("a legacy state is ('MT19937', key, pos, ...)")
            key = _state_array(np, items[1], np.uint32, 624, "key")
            pos = _position(items[2], 624, "pos")
            return ("MT19937", key, pos) + items[3:]
        return items
    if not isinstance(state, dict):
        return state
    state = dict(dict.items(state))
    name = state.get("bit_generator")
    if type(name) is not str:
        return state
    inner = state.get("state")
    if isinstance(inner, dict) and name in _RANDOM_STATE_SHAPES:
        inner = dict(dict.items(inner))
        for field, length in _RANDOM_STATE_SHAPES[name].items():
            inner[field] = _state_array(np, inner.get(field), np.uint32 if name == "MT19937" else np.uint64,
                                        length, field)
        state["state"] = inner
    if name in _RANDOM_POSITIONS:
        field, size = _RANDOM_POSITIONS[name]
        holder = inner if name == "MT19937" else state
        if not isinstance(holder, dict):
            raise ValueError(f"a {name} state has a 'state' dict")
        holder[field] = _position(holder.get(field), size, field)
        if name == "Philox":
            state["buffer"] = _state_array(np, state.get("buffer"), np.uint64, 4, "buffer")
    return state


def checked_attribute_value(obj, name, value):
    """What a library object's attribute takes from a cell's write: bg.state = st is the setter above."""
    if name == "state":
        bit_generator = getattr(sys.modules.get("numpy.random.bit_generator"), "BitGenerator", None)
        if bit_generator is not None and isinstance(obj, bit_generator):
            return checked_random_state(value)
    return value


def _state_array(np, value, dtype, length, field):
    array = np.array(value, dtype=dtype)   # a copy in numpy's own type
    if array.shape != (length,):
        raise ValueError(f"the state's '{field}' must hold {length} numbers")
    return array


def _position(value, size, field):
    position = operator.index(value)
    if type(position) is not int:
        position = int.__index__(position)
    if not 0 <= position <= size:
        raise ValueError(f"the state's '{field}' must be between 0 and {size}")
    return position


def _guard_numpy_iterator(fn, gates):
    """np.nditer / np.nested_iters are refused while a cell runs. Every value an iterator hands out views memory
    the iterator frees or lets go of at close() (the end of its with block) while the value still points there:
    its buffers when buffered (review 9, N9-5), and, unbuffered, an operand only the iterator held (a temporary,
    an 'allocate' output: review 10, N10-1). A bytes object laid on the freed block was rewritten into a
    bytearray over all memory. Loops over arrays, np.ndindex and np.ndenumerate do what analysis code uses
    nditer for."""
    def iterator(*args, **kwargs):
        gates.deny(genuine(CallDenied(f"numpy.{fn.__name__}()", "its values can outlive the memory they view",
                                      hint="loop over the array, np.ndindex(a.shape) or np.ndenumerate(a)")))
    iterator.__name__ = iterator.__qualname__ = fn.__name__
    iterator.__doc__ = fn.__doc__
    return runtime_callable(iterator)


def _guard_raw_description(fn, gates):
    """numpy's DummyArray is trusted to answer the raw protocols from its own __dict__ (the one provider that does):
    a cell that reached the class (type(sliding_window_view(x, 2).base)) made one over any address and read and
    wrote memory through np.asarray (review 14, R14-1). Only numpy's as_strided makes them: the class a cell
    receives refuses to construct."""
    def construct(make, *args, **kwargs):
        gates.deny(CallDenied("numpy's DummyArray", "its instances describe raw memory numpy trusts; only "
                              "numpy's own as_strided makes them"))
    return _stand_in_class(fn, construct)


def _numpy_guards(np) -> dict:
    _numpy_raw_protocol_providers(np)
    guards = {np.load: _guard_numpy_load, np.save: _guard_numpy_save, np.savez: _guard_numpy_save,
              np.savez_compressed: _guard_numpy_save, np.frombuffer: _guard_numpy_buffer_function,
              np.nditer: _guard_numpy_iterator, np.nested_iters: _guard_numpy_iterator}
    dummy = _dummy_array_class()
    if dummy is not None:
        guards[dummy] = _guard_raw_description
    # np.random.set_state is the process-wide RandomState's bound method (the host draws from it too)
    guards[np.random.set_state] = lambda fn, gates: runtime_callable(
        lambda state, *a, **k: fn(checked_random_state(state), *a, **k))
    # np.info(name, toplevel=M) imports any module by name and prints what it finds in it and its submodules (a host
    # module's strings), keeping M in numpy's process-wide cache (review 18, R18-2): numpy's own docs only
    guards[np.info] = _guard_numpy_info
    add_stand_in_kind("random_state", np.random.RandomState, ("set_state",))
    _guard_array_unlock(np)
    if _guard_numpy_constructor(np):
        return guards   # np.rec and np.char build through ndarray's checked constructor
    with warnings.catch_warnings():   # numpy 2.5 deprecates np.char's array functions: read them quietly
        warnings.simplefilter("ignore", DeprecationWarning)
        for cls in (np.ndarray, np.recarray, np.memmap, getattr(np.char, "chararray", None)):
            if cls is not None:
                guards[cls] = _guard_numpy_array_class
        for fn in (np.rec.array, np.rec.fromstring, np.rec.fromarrays, np.rec.fromrecords, np.rec.fromfile,
                   getattr(np.char, "array", None), getattr(np.char, "asarray", None)):
            if fn is not None:
                guards[fn] = _guard_numpy_buffer_function
    return guards


def _guard_numpy_info(fn, gates):
    def info(object=None, maxwidth=76, output=None, toplevel="numpy"):
        if type(toplevel) is not str or toplevel != "numpy":
            gates.deny(CallDenied("np.info(toplevel=...)", "it imports and searches any module by name",
                                  hint="np.info(obj) looks in numpy"))
        return fn(object, maxwidth, output, "numpy")
    info.__name__, info.__doc__ = "info", fn.__doc__
    return runtime_callable(info)


# numpy reads '__array_interface__' off any object it converts and trusts the address in it. Library
# classes whose attribute lookup answers from data a cell fills would hand it the cell's dict: pandas
# answers s.__array_interface__ from an index label, scipy's results and odr.Data from their items.
# Every loaded class with its own __getattr__/__getattribute__ gets the "absent" answer for the raw
# protocols first (classes are scanned again after each import; a handful of ms).
_PROTECTED_CLASSES: set = set()
_SCANNED_WITH = [0]   # len(sys.modules) at the last scan


def _refuse_raw_protocols_on_library_classes() -> None:
    if len(sys.modules) == _SCANNED_WITH[0]:
        return   # no module loaded since the last scan (classes come with modules)
    _SCANNED_WITH[0] = len(sys.modules)
    pending = [object]
    seen = set()
    while pending:
        cls = pending.pop()
        try:
            subclasses = type.__subclasses__(cls)
        except TypeError:
            continue
        for sub in subclasses:
            if sub in seen:
                continue
            seen.add(sub)
            pending.append(sub)
            if sub in _PROTECTED_CLASSES or not ("__getattr__" in sub.__dict__ or "__getattribute__" in sub.__dict__) \
                    or issubclass(sub, type):   # a metaclass answers for classes (EnumType: no dunder members)
                continue
            try:
                for protocol in _RAW_ARRAY_PROTOCOLS:
                    if protocol not in sub.__dict__:
                        type.__setattr__(sub, protocol, _NO_RAW_ARRAY)
                refuse_raw_protocols_in_hooks(sub)
            except (TypeError, AttributeError):
                pass   # an immutable (C) type: its lookup is C code, not a cell's data
            _PROTECTED_CLASSES.add(sub)


# -- lookups by string inside granted libraries: the string-dispatch sink ----------------------------------
# pandas' apply/agg/transform (Series, DataFrame, GroupBy, Resampler, windows, pivot_table's aggfunc), a
# few scipy functions (kstest's cdf name, probplot's dist, root_scalar's method, load_npz's format) and
# plotly express's trendline_options={'function': name} and tools.get_graph_obj turn a
# string their caller chose into getattr/hasattr/setattr inside the library. In these modules (found by
# reading every getattr(x, <computed name>) of the granted libraries: docs/security.md, "Inventory of
# sinks") the three builtins are replaced by versions that, while a cell runs, resolve a name that is not
# one of the calling function's own constants through the attribute gate: public names only, the
# policy's object rules, the value checked. Names each module computes itself are listed with it.
STRING_LOOKUP_MODULES = {
    "pandas.core.apply": (), "pandas.core.groupby.generic": (), "pandas.core.groupby.groupby": (),
    "pandas.core.resample": (), "pandas.core.reshape.pivot": (), "pandas.core.indexers.objects": (),
    "pandas.core.window.rolling": ("_grouper",),
    "scipy.stats._stats_py": (), "scipy.stats._hypotests": (), "scipy.stats._morestats": (),
    "scipy.stats._sampling": (), "scipy.stats._fit": (), "scipy.sparse._matrix_io": (),
    "scipy.optimize._root_scalar": (),
    "plotly.express.trendline_functions": (), "plotly.tools": (),
}
_BUILTIN_GETATTR, _BUILTIN_HASATTR, _BUILTIN_SETATTR = getattr, hasattr, setattr


def _chosen_by_the_caller(name, own_names) -> bool:
    """True when name is neither a constant of the library function calling the builtin (two frames up)
    nor one of the names its module computes itself."""
    return name not in own_names and name not in sys._getframe(2).f_code.co_consts


# pandas' evaluator by name ('eval', 'query' on any object): closed at its source as well; asked for by
# string, it is a denial on record whatever object was asked.
_EVALUATOR_NAMES = frozenset({"eval", "query"})


def _gated_lookup(own_names):
    def lookup_getattr(obj, name, *default):
        if isinstance(name, str) and cell_is_running():
            name = str.__str__(name)   # the characters the lookup uses, whatever a str subclass claims
            if _chosen_by_the_caller(name, own_names):
                gates = CURRENT_GATES.get()
                if name in _EVALUATOR_NAMES:
                    exc = genuine(CallDenied(f"'{name}' looked up by string", "pandas' expression evaluator "
                                             "evaluates text outside the sandbox"))
                    if gates is not None:
                        gates.deny(exc)
                    raise exc
                if gates is not None:
                    return gates.builtin_getattr(obj, name, *default)
                if name.startswith("_"):
                    raise genuine(CallDenied(f"a lookup of '{name}' by string", "only public names"))
        return _BUILTIN_GETATTR(obj, name, *default)

    def lookup_hasattr(obj, name):
        if isinstance(name, str) and cell_is_running():
            name = str.__str__(name)
            if _chosen_by_the_caller(name, own_names):
                try:
                    lookup_getattr(obj, name)   # a refused name is a denial, not a quiet False
                    return True
                except SandboxViolation:
                    raise
                except AttributeError:
                    return False
        return _BUILTIN_HASATTR(obj, name)

    def lookup_setattr(obj, name, value):
        if isinstance(name, str) and cell_is_running():
            name = str.__str__(name)
            if _chosen_by_the_caller(name, own_names):
                gates = CURRENT_GATES.get()
                if gates is not None:
                    return gates.builtin_setattr(obj, name, value)
                if name.startswith("_") or not name.isidentifier():
                    raise genuine(CallDenied(f"setting {name[:40]!r} by string", "only public identifiers"))
        return _BUILTIN_SETATTR(obj, name, value)
    lookup_getattr.__name__, lookup_hasattr.__name__, lookup_setattr.__name__ = "getattr", "hasattr", "setattr"
    SPECIAL_METHOD_PASS_THROUGH.add(lookup_setattr.__code__)   # the library's frame below makes the write
    return lookup_getattr, lookup_hasattr, lookup_setattr


def _close_string_lookups() -> None:
    for name, own_names in STRING_LOOKUP_MODULES.items():
        module = sys.modules.get(name)
        namespace = getattr(module, "__dict__", None)
        if namespace is None or getattr(namespace.get("getattr"), "__st_closed__", False):
            continue
        functions = _gated_lookup(frozenset(own_names))
        for fn in functions:
            fn.__st_closed__ = True
            namespace[fn.__name__] = fn


def _guard_pandas_plot_backend() -> None:
    """pandas imports its plotting backend by the name in an option a cell sets (pd.set_option(
    'plotting.backend', name), df.plot(backend=name)): while a cell runs, only a granted module."""
    module = sys.modules.get("pandas.plotting._core")
    original = getattr(module, "_load_backend", None)
    if original is None or getattr(original, "__st_closed__", False):
        return

    def _load_backend(backend):
        if cell_is_running() and backend != "matplotlib":   # 'matplotlib' is pandas' own module
            gates = CURRENT_GATES.get()
            if gates is None or type(backend) is not str or not gates.policy.module_allowed(backend):
                exc = genuine(ImportDenied(f"plotting backend {str(backend)[:40]!r}", "this module is not granted"))
                if gates is not None:
                    gates.deny(exc)
                raise exc
        return original(backend)
    _load_backend.__st_closed__ = True
    module._load_backend = _load_backend


# -- process-wide library state, kept per engine -------------------------------------------------------------
# Granted libraries keep some settings for the whole process, and what a cell puts there is used by whoever
# calls the library next, the host included: pandas' options (display.float_format and the styler's
# formatters are callables, run when anyone prints a frame), numpy.ma's masked_print_option (str() of the
# cell's object when anyone prints a masked array), scipy.fft's uarray backends (called by every transform),
# csv's dialect registry; and data the library reads for everyone (dateutil's parser word lists, calendar's
# first weekday, plotly's templates and default template, scipy.special's error handling, numpy.polynomial's
# print style). Each engine keeps its own: its values are installed when a cell starts (or when the
# library is first loaded during one) and the host's are put back when the cell ends, as the warnings filters
# are (limits.py). Values are compared by identity only (== would run the cell's __eq__ in the host).

_MISSING = object()


class _PandasOptions:
    """pandas' option tree, written in place (every route to it, set_option, option_context, pd.options.x = v,
    reset_option, ends there); an option's callback runs when its value changes, as set_option runs it.
    A snapshot is (the options, their values), in one order kept while no option is registered.

    The tree's dicts are the host's, recorded the first time each section is seen: a cell that reached the live
    tree (pd.options.d) and replaced a section (d['display'] = {...}) left the host's values going into a dict
    pandas no longer read, and the host's next print called the cell's float_format (review 12, R12-2). Before
    every read and install the recorded sections are put back where pandas looks, and a leaf the cell deleted
    is written again."""
    name = "pandas options"

    def __init__(self):
        self._slots, self._key = ((), (), ()), None
        self._sections: dict = {}   # ('display',) or ('styler', 'format') -> the host's dict for that section

    @staticmethod
    def available() -> bool:
        return "pandas._config.config" in sys.modules

    def _slots_now(self):
        config = sys.modules["pandas._config.config"]
        key = (len(config._registered_options), id(config._global_config))
        if self._key is not None and key[1] != self._key[1]:
            self._sections = {}   # pandas made a new tree (reloaded): record it afresh
        self._relink(config)
        if key != self._key:
            options, roots, leaves = [], [], []
            for option in list(config._registered_options):
                path = tuple(option.split("."))
                root = self._section(config, path[:-1])
                if type(root) is dict and path[-1] in root:
                    options.append(option)
                    roots.append(root)
                    leaves.append(path[-1])
            self._slots, self._key = (tuple(options), tuple(roots), tuple(leaves)), key
        return self._slots

    def _section(self, config, path):
        """The recorded dict of a section, recorded now if new (its current dict, reached from a recorded one)."""
        if not path:
            return config._global_config
        recorded = self._sections.get(path)
        if recorded is None:
            parent = self._section(config, path[:-1])
            recorded = dict.get(parent, path[-1]) if type(parent) is dict else None
            if type(recorded) is not dict:
                return None
            self._sections[path] = recorded
        return recorded

    def _relink(self, config) -> None:
        """Each recorded section back in its recorded parent (shallow sections first)."""
        for path in sorted(self._sections, key=len):
            parent = config._global_config if len(path) == 1 else self._sections.get(path[:-1])
            if type(parent) is dict and dict.get(parent, path[-1]) is not self._sections[path]:
                dict.__setitem__(parent, path[-1], self._sections[path])

    def read(self):
        options, roots, leaves = self._slots_now()
        registered = sys.modules["pandas._config.config"]._registered_options
        return options, tuple(root[leaf] if leaf in root else registered[option].defval
                              for option, root, leaf in zip(options, roots, leaves))

    def install(self, wanted, current, entering: bool) -> None:
        options, roots, leaves = self._slots_now()
        values = wanted[1]
        registered = sys.modules["pandas._config.config"]._registered_options
        if wanted[0] is not options:   # options registered since: theirs are the defaults
            known = dict(zip(*wanted))
            values = tuple(known[o] if o in known else registered[o].defval for o in options)
        missing = [i for i, (root, leaf) in enumerate(zip(roots, leaves)) if leaf not in root]
        if not missing and current[0] is options and all(map(operator.is_, values, current[1])):
            return
        now = tuple(root.get(leaf) for root, leaf in zip(roots, leaves))
        changed = sorted({i for i, (value, was) in enumerate(zip(values, now)) if value is not was} | set(missing))
        for i in changed:
            roots[i][leaves[i]] = values[i]
        for i in changed:
            callback = registered[options[i]].cb
            if callback is not None:
                try:
                    callback(options[i])
                except Exception:   # noqa: BLE001 - the value is in place; a callback's own failure is its own
                    pass


class _ObjectState:
    """The instance dict of one library object (numpy.ma's masked_print_option), or a dict's items."""

    def __init__(self, name: str, module: str, attribute: str, items: bool = False):
        self.name, self._module, self._attribute, self._items = name, module, attribute, items

    def _target(self):
        return getattr(sys.modules.get(self._module), self._attribute, None)

    def available(self) -> bool:
        return self._target() is not None

    def _dict(self) -> dict:
        target = self._target()
        if self._items:
            return target
        if type(target) is _thread._local:   # a thread-local's dict, of the thread asking (the cell's)
            return _thread._local.__getattribute__(target, "__dict__")
        return object.__getattribute__(target, "__dict__")

    def read(self) -> dict:
        return dict.copy(self._dict())

    def install(self, wanted: dict, current: dict, entering: bool) -> None:
        target = self._dict()
        if dict.keys(current) != dict.keys(wanted) or any(current[k] is not wanted[k] for k in wanted):
            dict.clear(target)
            dict.update(target, wanted)


class _ModuleGlobals:
    """Module globals a library function rebinds (scipy.cluster.hierarchy's set_link_color_palette: R18-7)."""

    def __init__(self, name: str, module: str, names: tuple):
        self.name, self._module, self._names = name, module, names

    def available(self) -> bool:
        return self._module in sys.modules

    def read(self) -> tuple:
        namespace = sys.modules[self._module].__dict__
        return tuple(namespace.get(n, _MISSING) for n in self._names)

    def install(self, wanted: tuple, current: tuple, entering: bool) -> None:
        namespace = sys.modules[self._module].__dict__
        for name, value, now in zip(self._names, wanted, current):
            if value is not now and value is not _MISSING:
                namespace[name] = value


class _SlotState:
    """The slots of one library object that has no instance dict (plotly.express's defaults)."""

    def __init__(self, name: str, module: str, attribute: str):
        self.name, self._module, self._attribute = name, module, attribute

    def _target(self):
        return getattr(sys.modules.get(self._module), self._attribute, None)

    def available(self) -> bool:
        return self._target() is not None

    def _slots(self):
        return tuple(getattr(type(self._target()), "__slots__", ()))

    def read(self):
        target = self._target()
        return tuple(getattr(target, slot, _MISSING) for slot in self._slots())

    def install(self, wanted, current, entering: bool) -> None:
        target = self._target()
        for slot, value, now in zip(self._slots(), wanted, current):
            if value is now:
                continue
            if value is _MISSING:
                object.__delattr__(target, slot)
            else:
                object.__setattr__(target, slot, value)


class _RandomModule:
    """The random module's process-wide generator: random.seed(n) in a cell would make the host's draws
    (and another engine's) the cell's to predict (review 6, N6-5)."""
    name = "random module generator"

    @staticmethod
    def available() -> bool:
        return True

    @staticmethod
    def read():
        return random.getstate()

    @staticmethod
    def install(wanted, current, entering: bool) -> None:
        if wanted is not current:
            random.setstate(wanted)


class _NumpyGlobalRandom:
    """numpy's legacy global RandomState (np.random.seed, np.random.rand ...): np.random.seed(n) in a cell decided
    the host's later draws and another engine's (review 12, R12-5)."""
    name = "numpy global random state"

    @staticmethod
    def available() -> bool:
        return "numpy.random.mtrand" in sys.modules

    @staticmethod
    def read():
        # the bit generator object too: np.random.set_bit_generator(bg) replaced it for the host (review 18, R18-8)
        mtrand = sys.modules["numpy.random.mtrand"]
        return mtrand.get_bit_generator(), mtrand._rand.get_state(legacy=False)

    @staticmethod
    def install(wanted, current, entering: bool) -> None:
        if wanted is current:
            return
        mtrand = sys.modules["numpy.random.mtrand"]
        if mtrand.get_bit_generator() is not wanted[0]:
            mtrand.set_bit_generator(wanted[0])
        mtrand._rand.set_state(wanted[1])


def forget_cell_keys_in_plotly_validators() -> None:
    """plotly's ValidatorCache keeps what get_validator found under the (parent, name) it was asked for; a
    cell's str subclass whose __format__ answers another name files one property's validator under another
    for the whole process, the kernel's output wall included (review 6, N6-4). Entries keyed by anything but
    exact str are dropped at the end of each cell, and before the wall looks a validator up."""
    cache = getattr(getattr(sys.modules.get("plotly.validator_cache"), "ValidatorCache", None), "_cache", None)
    if type(cache) is not dict or len(cache) == _VALIDATORS_CHECKED_AT[0]:
        return
    for key in [k for k in list(cache) if type(k) is not tuple or any(type(part) is not str for part in k)]:
        cache.pop(key, None)
    _VALIDATORS_CHECKED_AT[0] = len(cache)


_VALIDATORS_CHECKED_AT = [-1]


class _UarrayBackends:
    """uarray's backends (scipy.fft's set_global_backend, register_backend, set_backend). uarray can give a
    thread its own copy of the global backends: while a cell runs, its thread works on the engine's copy
    (set_state without reset), and the process-wide table is never written; at the end the thread goes back
    to it (set_state(host, True))."""
    private_copy = True

    def __init__(self, module: str):
        self.name, self._module = module, module

    def available(self) -> bool:
        return hasattr(sys.modules.get(self._module), "get_state")

    def read(self):
        return sys.modules[self._module].get_state()

    def install(self, wanted, current, entering: bool) -> None:
        module = sys.modules[self._module]
        if entering:
            module.set_state(wanted)
        else:
            module.set_state(wanted, True)


class _CsvDialects:
    """csv's dialect registry and field size limit (register_dialect('excel', ...) would change the host's)."""
    name = "csv dialects"

    @staticmethod
    def available() -> bool:
        return True

    @staticmethod
    def read():
        return {name: csv.get_dialect(name) for name in csv.list_dialects()}, csv.field_size_limit()

    @staticmethod
    def install(wanted, current, entering: bool) -> None:
        dialects, limit = wanted
        if limit == current[1] and dialects.keys() == current[0].keys() and \
                all(current[0][name] is dialect for name, dialect in dialects.items()):
            return
        for name in current[0]:
            if name not in dialects:
                csv.unregister_dialect(name)
        for name, dialect in dialects.items():
            if current[0].get(name) is not dialect:
                csv.register_dialect(name, dialect)
        if current[1] != limit:
            csv.field_size_limit(limit)


def _same_items(a, b) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


class _ClassData:
    """Class-level data a library reads for everyone: each attribute's value and, for a list or a dict, its
    contents (dateutil's parserinfo word lists, which a cell extends in place: dp.parserinfo.JUMP.append(w);
    numpy.polynomial's print style, which set_default_printstyle writes on the class). A dict's contents are
    kept as its items, never rehashed outside the cell."""

    def __init__(self, name: str, module: str, cls: str, attributes: tuple):
        self.name, self._module, self._cls, self._attributes = name, module, cls, attributes

    def _class(self):
        return getattr(sys.modules.get(self._module), self._cls, None)

    def available(self) -> bool:
        return isinstance(self._class(), type)

    @staticmethod
    def _contents(value):
        if type(value) is list:
            return tuple(value)
        if type(value) is dict:
            return tuple(dict.items(value))
        return None

    def read(self):
        namespace = self._class().__dict__
        values = tuple(namespace.get(a, _MISSING) for a in self._attributes)
        return values, tuple(map(self._contents, values))

    def install(self, wanted, current, entering: bool) -> None:
        cls = self._class()
        for attribute, value, contents, now in zip(self._attributes, wanted[0], wanted[1], current[0]):
            if value is not now:
                if value is _MISSING:
                    type.__delattr__(cls, attribute)
                    continue
                type.__setattr__(cls, attribute, value)
            if contents is None or _same_items(contents, self._contents(value) or ()):
                continue
            if type(value) is list:
                list.__setitem__(value, slice(None), contents)
            else:
                dict.clear(value)
                dict.update(value, contents)


class _PlotlyTemplates:
    """plotly.io.templates: the registry of named templates and the default one (pio.templates['t'] = ...,
    pio.templates.default = 't'), used by every figure made afterwards. Templates are mutable objects
    (pio.templates['plotly'].layout.font.size = 30 changes the registry's object): an engine starts with the
    host's names, each built-in one loaded afresh for it on first use, the host's own templates copied."""
    name = "plotly templates"

    @staticmethod
    def _config():
        module = sys.modules.get("plotly.io._templates")
        return module, getattr(module, "templates", None)

    def available(self) -> bool:
        return self._config()[1] is not None

    def read(self):
        config = object.__getattribute__(self._config()[1], "__dict__")
        return tuple(dict.items(config["_templates"])), config["_default"]

    def first(self, current):
        """The engine's registry before its first change: none of the host's template objects in it."""
        module, _ = self._config()
        templates = []
        for name, template in current[0]:
            if template is not module.Lazy:
                template = module.Lazy if name in _PLOTLY_BUILT_IN_TEMPLATES else type(template)(template)
            templates.append((name, template))
        return tuple(templates), current[1]

    def install(self, wanted, current, entering: bool) -> None:
        config = object.__getattribute__(self._config()[1], "__dict__")
        registry = config["_templates"]
        if not _same_items(wanted[0], tuple(dict.items(registry))):
            dict.clear(registry)
            dict.update(registry, wanted[0])
        config["_default"] = wanted[1]


_PLOTLY_BUILT_IN_TEMPLATES = frozenset({"ggplot2", "seaborn", "simple_white", "plotly", "plotly_white", "plotly_dark",
                                        "presentation", "xgridoff", "ygridoff", "gridon", "none"})


class _SpecialFunctionErrors:
    """scipy.special's error handling (seterr, errstate), kept per thread by scipy: the cell's thread is the
    kernel's own at level none."""
    name = "scipy.special errors"

    @staticmethod
    def available() -> bool:
        return hasattr(sys.modules.get("scipy.special"), "geterr")

    @staticmethod
    def read():
        return tuple(sys.modules["scipy.special"].geterr().items())   # scipy's own str values

    @staticmethod
    def install(wanted, current, entering: bool) -> None:
        if wanted != current:
            sys.modules["scipy.special"].seterr(**dict(wanted))


class _ProcessLocale:
    """The C library's locale, one for the process: calendar.different_locale entered through an ExitStack and
    never left (or locale.setlocale) set the host's LC_TIME for good (review 9, N9-8)."""
    name = "the process's locale"
    _CATEGORIES = tuple(getattr(locale, c) for c in ("LC_CTYPE", "LC_COLLATE", "LC_TIME", "LC_MONETARY",
                                                     "LC_NUMERIC", "LC_MESSAGES") if hasattr(locale, c))

    @staticmethod
    def available() -> bool:
        return True

    def read(self):
        return tuple(locale.setlocale(category) for category in self._CATEGORIES)

    def install(self, wanted, current, entering: bool) -> None:
        for category, value, now in zip(self._CATEGORIES, wanted, current):
            if value != now:
                locale.setlocale(category, value)


_DATEUTIL_WORD_LISTS = ("JUMP", "WEEKDAYS", "MONTHS", "HMS", "AMPM", "UTCZONE", "PERTAIN", "TZOFFSET")

LIBRARY_STATE = (_PandasOptions(),
                 _ObjectState("pandas plot_params", "pandas.plotting._misc", "plot_params", items=True),
                 _ObjectState("numpy.ma masked_print_option", "numpy.ma.core", "masked_print_option"),
                 _UarrayBackends("scipy._lib._uarray._uarray"), _UarrayBackends("uarray._uarray"), _CsvDialects(),
                 _ClassData("dateutil parserinfo", "dateutil.parser._parser", "parserinfo", _DATEUTIL_WORD_LISTS),
                 _ObjectState("calendar first weekday", "calendar", "c"),
                 _PlotlyTemplates(), _SpecialFunctionErrors(),
                 # pandas' holiday calendars: the registry a cell's calendar class joins by being defined
                 # (get_calendar(name) hands it to whoever asks next), and the federal rules list a cell
                 # could append to; plotly's process-wide defaults
                 _ObjectState("pandas holiday calendars", "pandas.tseries.holiday", "holiday_calendars", items=True),
                 _ClassData("pandas federal holidays", "pandas.tseries.holiday", "USFederalHolidayCalendar",
                            ("rules",)),
                 _SlotState("plotly.express defaults", "plotly.express._core", "defaults"), _RandomModule(),
                 _NumpyGlobalRandom(),
                 _ObjectState("plotly.io defaults", "plotly.io._defaults", "defaults"),
                 _ObjectState("plotly.io json config", "plotly.io._json", "config"),
                 _ClassData("numpy.polynomial print style", "numpy.polynomial._polybase", "ABCPolyBase",
                            ("_use_unicode",)), _ProcessLocale(),
                 # scipy's thread-local settings (the cell's thread is the host's at level none) and module globals
                 # set by a function call, never restored by scipy (review 18, R18-5, R18-6, R18-7)
                 _ObjectState("scipy.sparse.linalg solver choice", "scipy.sparse.linalg._dsolve.linsolve",
                              "useUmfpack"),
                 _ObjectState("scipy.fft default workers", "scipy.fft._pocketfft.helper", "_config"),
                 _ModuleGlobals("scipy.cluster.hierarchy link colours", "scipy.cluster.hierarchy",
                                ("_link_line_colors",)))


def object_kept_per_engine(obj) -> bool:
    """obj is a library object whose state the engine keeps as its own (pandas' options' holders, plotly's
    defaults and template registry ...: LIBRARY_STATE): a cell's writes to it are its engine's."""
    for state in LIBRARY_STATE:
        target = getattr(state, "_target", None) or getattr(state, "_config", None)
        try:
            found = target() if callable(target) else None
        except Exception:   # noqa: BLE001 - a library not loaded yet
            continue
        if found is obj or type(found) is tuple and len(found) > 1 and found[1] is obj:
            return True
    return False


def kept_per_engine(cls, name) -> bool:
    """cls.name is class data the engine keeps as its own (a _ClassData above): a cell changes it in place
    for its own later cells (dateutil's parser word lists), never for the host's."""
    return any(type(state) is _ClassData and name in state._attributes and state._class() is cls
               for state in LIBRARY_STATE)


def swap_in_library_state() -> None:
    """The engine's values in place of the host's, for each piece of state not yet swapped in this cell (at
    the cell's start, and after each module load during it)."""
    gates = CURRENT_GATES.get()
    if gates is None or not cell_is_running():
        return
    host = gates.host_library_state
    for state in LIBRARY_STATE:
        if state.name in host or not state.available():
            continue
        current = state.read()
        host[state.name] = current
        mine = gates.library_state.get(state.name, _MISSING)
        if mine is _MISSING and getattr(state, "private_copy", False):
            mine = current
        elif mine is _MISSING and hasattr(state, "first"):
            mine = state.first(current)
        if mine is not _MISSING:
            state.install(mine, current, True)


def swap_out_library_state() -> None:
    """The end of a cell: the engine keeps what its cell left, the host gets its own values back."""
    gates = CURRENT_GATES.get()
    if gates is None:
        return
    host, gates.host_library_state = gates.host_library_state, {}
    for state in LIBRARY_STATE:
        previous = host.get(state.name, _MISSING)
        if previous is _MISSING:
            continue
        current = state.read()
        gates.library_state[state.name] = current
        state.install(previous, current, False)


at_cell_start(swap_in_library_state)
at_cell_end(swap_out_library_state)
at_cell_end(forget_cell_keys_in_plotly_validators)


def _close_pandas_interchange() -> None:
    """pandas' dataframe interchange (pd.api.interchange.from_dataframe, and plotly.express given any
    object with __dataframe__) lays a ctypes array over whatever address the object's buffers name
    (buffer_to_ndarray), then writes null markers through it: any memory read and written (review
    none4, N4-10). Every route ends in that one function of the module: while a cell runs it refuses.
    No granted library produces interchange objects of its own."""
    module = sys.modules.get("pandas.core.interchange.from_dataframe")
    if module is None or getattr(module.buffer_to_ndarray, "__st_closed__", False):
        return
    original = module.buffer_to_ndarray

    def buffer_to_ndarray(*args, **kwargs):
        if cell_is_running():
            raise genuine(CallDenied("pandas' dataframe interchange",
                                     "it reads memory at whatever address the object's buffers name"))
        return original(*args, **kwargs)
    buffer_to_ndarray.__st_closed__ = True
    module.buffer_to_ndarray = buffer_to_ndarray
    _KEEP.append(original)


def _hash_object_keys_from_a_copy() -> None:
    """pandas' duplicated() keeps an object array's elements in its hash table as borrowed pointers while it
    calls their __eq__ (the cell's code), which may put new objects in the array and free the keys the table
    still compares with (review 5, N5-11: Series/DataFrame.duplicated, drop_duplicates segfaulted). The
    table gets a copy: its references keep every key alive. Every module that holds the function is patched
    (three import it by name)."""
    hashtable = sys.modules.get("pandas._libs.hashtable")
    original = getattr(hashtable, "duplicated", None)
    if original is None or getattr(original, "__st_copies_keys__", False):
        return
    np = sys.modules["numpy"]

    def duplicated(values, *args, **kwargs):
        if isinstance(values, np.ndarray) and np.ndarray.dtype.__get__(values).hasobject:
            values = np.ndarray.copy(values)
        return original(values, *args, **kwargs)
    duplicated.__st_copies_keys__ = True
    for name in ("pandas._libs.hashtable", "pandas.core.frame", "pandas.core.groupby.generic",
                 "pandas.core.indexes.multi"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "duplicated", None) is original:
            module.duplicated = duplicated
    _KEEP.append(original)


# -- FITPACK: knots, coefficients and degrees as arrays it indexes -------------------------------------------------
# FITPACK's Fortran takes a spline as (t, c, k) and trusts that there are at least 2k + 2 knots and n - k - 1
# coefficients: splev with k = 50 over ten knots ran off both arrays (SIGSEGV), k = 5 over three read heap words
# back (review 18, R18-12); PPoly.from_spline, splint, sproot, spalde, insert, bisplev reach the same wrappers, and
# so does the deprecated shim scipy.interpolate.dfitpack. Every route ends in the raw wrappers of scipy's
# _dfitpack and _fitpack modules, which scipy's Python looks up on the module at each call: replaced there, they
# check the shapes first while a cell runs (a BSpline checks its own when it is made).

def _knots_refusal(t, k):
    """(why, n - k - 1): why the knots t cannot carry degree k (None when they can), and the coefficients they need."""
    np = sys.modules["numpy"]
    t = np.asarray(t)
    if type(k) is not int and not isinstance(k, np.integer):
        return "the degree must be an int", 0
    k = int(k)
    n = t.shape[0] if t.ndim == 1 else 0
    if not 0 <= k <= 5 or n < 2 * k + 2:
        return f"degree {k} needs at least {2 * k + 2} knots (given {n})", 0
    if t.dtype.kind not in "fiu" or not bool(np.all(t[1:] >= t[:-1])):
        return "knots must be numbers in order", 0
    return None, n - k - 1


def _curve_refusal(t, c, k):
    why, needed = _knots_refusal(t, k)
    size = sys.modules["numpy"].asarray(c).size
    return why or (f"{needed} coefficients are needed (given {size})" if size < needed else None)


def _surface_refusal(tx, ty, c, kx, ky):
    why_x, nx = _knots_refusal(tx, kx)
    why_y, ny = _knots_refusal(ty, ky)
    size = sys.modules["numpy"].asarray(c).size
    return why_x or why_y or (f"{nx * ny} coefficients are needed (given {size})" if size < nx * ny else None)


_FITPACK_SPLINES = {   # (module, name): why the call's spline is refused, from its arguments
    ("scipy.interpolate._dfitpack", "splev"): lambda t, c, k, *a, **kw: _curve_refusal(t, c, k),
    ("scipy.interpolate._dfitpack", "splder"): lambda t, c, k, *a, **kw: _curve_refusal(t, c, k),
    ("scipy.interpolate._dfitpack", "splint"): lambda t, c, k, *a, **kw: _curve_refusal(t, c, k),
    ("scipy.interpolate._dfitpack", "sproot"): lambda t, c, *a, **kw: _curve_refusal(t, c, 3),
    ("scipy.interpolate._dfitpack", "spalde"): lambda t, c, k1, *a, **kw: _curve_refusal(t, c, int(k1) - 1),
    ("scipy.interpolate._dfitpack", "parder"): lambda tx, ty, c, kx, ky, *a, **kw: _surface_refusal(tx, ty, c, kx, ky),
    ("scipy.interpolate._dfitpack", "bispev"): lambda tx, ty, c, kx, ky, *a, **kw: _surface_refusal(tx, ty, c, kx, ky),
    ("scipy.interpolate._dfitpack", "dblint"): lambda tx, ty, c, kx, ky, *a, **kw: _surface_refusal(tx, ty, c, kx, ky),
    ("scipy.interpolate._fitpack", "_insert"): lambda per, t, c, k, *a, **kw: _curve_refusal(t, c, k),
}


def _rows(a) -> int:
    np = sys.modules["numpy"]
    shape = np.shape(a)
    return int(shape[0]) if shape else 0


def _linkage_refusal(Z, *arrays, rows_of=(), points_of=()):
    """scipy.cluster's Cython kernels read one row of each array in rows_of per link of Z and one entry of each
    array in points_of per point (review 19, R19-5: R = np.ones((1, 4)) under 300,000 links read the heap)."""
    links = _rows(Z)
    for i in rows_of:
        rows = _rows(arrays[i])
        if rows < links:
            return f"an array of {rows:,} rows for a linkage of {links:,} links"
    for i in points_of:
        entries = int(sys.modules["numpy"].size(arrays[i]))
        if entries < links + 1:
            return f"an array of {entries:,} entries for {links + 1:,} points"
    return None


_HIERARCHY_KERNELS = {   # name: (arguments after Z read per link, read per point)
    "cluster_in": ((0,), (1,)), "cluster_dist": ((), (0,)), "cluster_maxclust_dist": ((), (0,)),
    "cluster_monocrit": ((0,), (1,)), "cluster_maxclust_monocrit": ((0,), (1,)),
    "get_max_dist_for_each_cluster": ((0,), ()), "get_max_Rfield_for_each_cluster": ((0, 1), ()),
    "leaders": ((), (0,)),
}


def _mahalanobis_refusal(*arrays, VI=None, V=None, w=None, **kwargs):
    """The distance kernels read VI as n x n and V, w as n long, n the points' columns (R19-4: VI of 2 x 2 with 40
    columns read 1,596 doubles past it; 3,000 columns killed the host)."""
    np = sys.modules["numpy"]
    n = int(np.shape(arrays[0])[1]) if np.ndim(arrays[0]) == 2 else 0
    if VI is not None and np.shape(VI) != (n, n):
        return f"VI of shape {np.shape(VI)} for points of {n} columns"
    for name, vector in (("V", V), ("w", w)):
        if vector is not None and np.size(vector) < n:
            return f"{name} of {np.size(vector)} entries for points of {n} columns"
    return None


def _checked_kernel(library, name, original, refusal, why, hint=None):
    """original, behind refusal(*args, **kwargs): why the arguments' shapes cannot be what the kernel reads, or None."""
    def checked(*args, **kwargs):
        if cell_is_running():
            problem = refusal(*args, **kwargs)
            if problem is not None:
                _refuse(genuine(CallDenied(f"{library} {name}: {problem}", why, hint=hint)))
        return original(*args, **kwargs)
    checked.__name__, checked.__doc__, checked.__st_checked__ = name, original.__doc__, True
    return runtime_callable(checked)


def _geometry_refusal(*args, **kwargs):
    """ndimage's zoom_shift(input, zoom, shift, ...) and geometric_transform(input, fn, coordinates, matrix, offset,
    ...) turn shifts, zooms, matrices and offsets into indices in C: a NaN or 1e300 shift in wrap, mirror or reflect
    mode indexed far outside the input (review 19, R19-7: SIGSEGV). Every number must be finite and within 2**31."""
    np = sys.modules["numpy"]
    for value in args[1:5]:
        if value is None or callable(value) or not isinstance(value, (np.ndarray, list, tuple, float, int)):
            continue
        numbers = np.asarray(value)
        if numbers.dtype.kind in "fc" and not (np.isfinite(numbers).all() and (np.abs(numbers) < 2.0 ** 31).all()):
            return "a shift, zoom, matrix or offset that is not a finite number below 2**31"
    return None


def _check_kernels(module_name, refusals: dict, library: str, why: str, hint=None) -> None:
    """Each module.name in refusals (name -> refusal) replaced, once the module is loaded, by a _checked_kernel."""
    module = sys.modules.get(module_name)
    for name, refusal in refusals.items():
        original = getattr(module, name, None)
        if original is not None and not getattr(original, "__st_checked__", False):
            setattr(module, name, _checked_kernel(library, name, original, refusal, why, hint))


def _linkage_check(rows_of, points_of):
    return lambda Z, *arrays, **kwargs: _linkage_refusal(Z, *arrays, rows_of=rows_of, points_of=points_of)


_DISTANCE_KERNELS = ("cdist_mahalanobis_double_wrap", "pdist_mahalanobis_double_wrap", "cdist_seuclidean_double_wrap",
                     "pdist_seuclidean_double_wrap", "cdist_weighted_minkowski_double_wrap",
                     "pdist_weighted_minkowski_double_wrap")


def _check_native_kernels() -> None:
    """The C, Cython and Fortran kernels that FITPACK, scipy.cluster.hierarchy, scipy.ndimage's interpolation and
    scipy.spatial.distance look up on their module at each call, replaced there by ones that check the arrays'
    shapes first while a cell runs (every route ends in them)."""
    for module_name in ("scipy.interpolate._dfitpack", "scipy.interpolate._fitpack"):
        _check_kernels(module_name, {name: refusal for (module, name), refusal in _FITPACK_SPLINES.items()
                                     if module == module_name},
                       "scipy.interpolate's FITPACK", "FITPACK trusts the spline's shape and would read past it",
                       hint="make the spline with scipy.interpolate.BSpline(t, c, k)")
    _check_kernels("scipy.cluster._hierarchy", {name: _linkage_check(*reads) for name, reads in
                                                _HIERARCHY_KERNELS.items()},
                   "scipy.cluster's", "the kernel reads the arrays by the linkage's size, unchecked")
    _check_kernels("scipy.ndimage._nd_image", dict.fromkeys(("zoom_shift", "geometric_transform"), _geometry_refusal),
                   "scipy.ndimage's", "the interpolation turns it into indices in C, unchecked")
    _check_kernels("scipy.spatial._distance_wrap", dict.fromkeys(_DISTANCE_KERNELS, _mahalanobis_refusal),
                   "scipy.spatial.distance's", "the kernel reads the matrix by the points' columns, unchecked")


def _check_sparse_indices_fully() -> None:
    """scipy.sparse's compressed and coordinate formats check index bounds only on request (their
    constructors call check_format(full_check=False)), keep the very arrays they were given, and their C
    kernels index with them unchecked: a csr_array built from (or later handed) indices past its shape
    wrote and read outside its buffers (review 4, N4-9). While a cell runs, every format check takes copies
    of the index arrays (the cell keeps writable references to the ones it passed) and checks them fully;
    the arrays a cell reads back from a sparse object are read-only views (Gates._index_arrays_read_only)."""
    np = sys.modules["numpy"]
    for module_name, class_name, check in (("scipy.sparse._compressed", "_cs_matrix", "check_format"),
                                           ("scipy.sparse._bsr", "_bsr_base", "check_format"),
                                           ("scipy.sparse._coo", "_coo_base", "_check")):
        cls = getattr(sys.modules.get(module_name), class_name, None)
        original = getattr(cls, check, None)
        if original is None or getattr(original, "__st_full_check__", False):
            continue

        def checked(self, *args, _original=original, _coords=(check == "_check"), **kwargs):
            if not cell_is_running():
                return _original(self, *args, **kwargs)
            if _coords:
                self.coords = tuple(np.array(c, copy=True) for c in self.coords)
                return _original(self, *args, **kwargs)
            self.indices = np.array(self.indices, copy=True)
            self.indptr = np.array(self.indptr, copy=True)
            kwargs.pop("full_check", None)
            return _original(self, full_check=True)
        checked.__st_full_check__ = True
        setattr(cls, check, checked)
        _KEEP.append(original)


def _validate_categorical_codes() -> None:
    """pd.Categorical.from_codes(..., validate=False) keeps codes past the categories, and pandas' Cython
    takes categories[code] without a bounds check when it makes the values (review 4, N4-9: heap words, or
    pointers as objects, came back). While a cell runs the codes are always validated."""
    cls = getattr(sys.modules.get("pandas.core.arrays.categorical"), "Categorical", None)
    raw = getattr(cls, "__dict__", {}).get("from_codes")
    if not isinstance(raw, classmethod) or getattr(raw.__func__, "__st_validates__", False):
        return
    original = raw.__func__

    def from_codes(cls, codes, *args, **kwargs):
        if cell_is_running():
            # pandas keeps the codes array it is given: the cell's own, which it could change after the check
            # (review 14, R14-2: codes past the categories, read without a bounds check)
            codes = sys.modules["numpy"].array(codes, copy=True)
            if len(args) >= 4:   # (categories, ordered, dtype, validate)
                args = args[:3] + (True,) + args[4:]
            else:
                kwargs["validate"] = True
        return original(cls, codes, *args, **kwargs)
    runtime_callable(from_codes)   # the sandbox's own wrapper: cells may call it (it is pandas' from_codes)
    from_codes.__st_validates__ = True
    from_codes.__doc__, from_codes.__name__, from_codes.__qualname__ = \
        original.__doc__, original.__name__, original.__qualname__
    setattr(cls, "from_codes", classmethod(from_codes))
    _KEEP.append(original)


def _copy_multiindex_codes() -> None:
    """MultiIndex keeps the codes arrays it is given (read-only, but a view the cell took before stays writable):
    codes changed after the check index the levels in C without bounds (review 14, R14-3: heap words read, and over
    an object level, read as object pointers). While a cell runs the constructor and set_codes get copies."""
    cls = getattr(sys.modules.get("pandas.core.indexes.multi"), "MultiIndex", None)
    new = getattr(cls, "__dict__", {}).get("__new__")
    if not isinstance(new, staticmethod) or getattr(new.__func__, "__st_copies__", False):
        return
    np = sys.modules["numpy"]
    original_new, original_set = new.__func__, cls.__dict__["set_codes"]

    def copied(codes):
        if codes is None or not cell_is_running():
            return codes
        if isinstance(codes, np.ndarray):
            return codes.copy()
        items = list(codes)
        if items and all(np.isscalar(c) for c in items):   # one level's codes (set_codes(..., level=0))
            return np.array(items)
        return [np.array(c, copy=True) for c in items]

    original_levels = cls.__dict__["set_levels"]

    def verified(kwargs):
        # verify_integrity=False skips the check that every code indexes its level, and pandas' take then reads past
        # the level's buffer in C (review 19, R19-3: heap words, a SIGSEGV): while a cell runs it is always checked
        if cell_is_running():
            kwargs["verify_integrity"] = True
        return kwargs

    parameters = list(inspect.signature(original_new).parameters)
    at = parameters.index("verify_integrity") - 3 if "verify_integrity" in parameters else None   # after codes

    def __new__(cls, levels=None, codes=None, *args, **kwargs):
        if at is not None and len(args) > at:   # given by position
            args = args[:at] + (True if cell_is_running() else args[at],) + args[at + 1:]
        elif at is not None:
            kwargs = verified(kwargs)
        return original_new(cls, levels, copied(codes), *args, **kwargs)

    def set_codes(self, codes, **kwargs):
        return original_set(self, copied(codes), **verified(kwargs))

    def set_levels(self, levels, **kwargs):
        return original_levels(self, levels, **verified(kwargs))
    for fn, original in ((__new__, original_new), (set_codes, original_set), (set_levels, original_levels)):
        fn.__doc__, fn.__qualname__, fn.__st_copies__ = original.__doc__, original.__qualname__, True
        runtime_callable(fn)
    setattr(cls, "__new__", staticmethod(__new__))
    setattr(cls, "set_codes", set_codes)
    setattr(cls, "set_levels", set_levels)
    _KEEP.extend((original_new, original_set))


# C and Fortran code that calls a function with an array over its own work memory, which it frees when it
# returns: a cell's callback that keeps the array writes into whatever is allocated there next (fsolve's x under
# a list's item array: review 9, N9-3). Found by calling every callback-taking API of numpy and scipy with a
# recording callback (docs/security.md lists them); each entry point's callables get copies of such arrays.
# (module, class or None, attribute)
_BORROWING_ENTRY_POINTS = (
    ("scipy.optimize._minpack", None, "_hybrd"), ("scipy.optimize._minpack", None, "_hybrj"),
    ("scipy.optimize._minpack", None, "_lmdif"), ("scipy.optimize._minpack", None, "_lmder"),
    ("scipy.integrate._odepack", None, "odeint"),
    ("scipy.integrate._ode", "vode", "runner"), ("scipy.integrate._ode", "zvode", "runner"),
    ("scipy.integrate._ode", "lsoda", "runner"), ("scipy.integrate._ode", "dopri5", "runner"),
    ("scipy.integrate._ode", "dop853", "runner"),
)


def _borrowed(array, np) -> bool:
    """No Python object owns the memory under this array (a C library's work buffer, a capsule's)."""
    while isinstance(array, np.ndarray):
        if np.ndarray.flags.__get__(array).owndata:
            return False
        array = np.ndarray.base.__get__(array)
    return not isinstance(array, (bytes, bytearray, memoryview))


def _given_copies(callback, np):
    """callback, given a copy of each borrowed array among its arguments."""
    def call(*args, **kwargs):
        return callback(*(np.array(a) if isinstance(a, np.ndarray) and _borrowed(a, np) else a for a in args),
                        **kwargs)
    return call


def _copy_arrays_given_to_callbacks() -> None:
    np = sys.modules.get("numpy")
    for module_name, holder_name, name in _BORROWING_ENTRY_POINTS:
        holder = sys.modules.get(module_name)
        if holder is not None and holder_name is not None:
            holder = holder.__dict__.get(holder_name)
        entry = getattr(holder, name, None) if holder is not None else None
        if entry is None or getattr(entry, "__st_copies_borrowed__", False):
            continue

        def entry_point(*args, __entry=entry, **kwargs):
            if cell_is_running():
                args = tuple(_given_copies(a, np) if callable(a) and not isinstance(a, type) else a for a in args)
                kwargs = {k: _given_copies(v, np) if callable(v) and not isinstance(v, type) else v
                          for k, v in kwargs.items()}
            return __entry(*args, **kwargs)
        entry_point.__st_copies_borrowed__ = True
        setattr(holder, name, entry_point if holder_name is None else staticmethod(entry_point))
        _KEEP.append(entry)
    svdp = sys.modules.get("scipy.sparse.linalg._svdp")
    product = getattr(svdp, "_AProd", None)
    if product is not None and not getattr(product.__call__, "__st_copies_borrowed__", False):
        original = product.__call__

        def __call__(self, transa, m, n, x, y):   # PROPACK's x is a view of its work array
            return original(self, transa, m, n, np.array(x) if cell_is_running() else x, y)
        __call__.__st_copies_borrowed__ = True
        product.__call__ = __call__


_NDIMAGE_GUARDED: list = []


def register_library_guards() -> None:
    """Guards for library functions, registered once their library has been loaded (by a cell's import
    or by another library: Gates._catch_up_with_loaded_modules)."""
    _route_pandas_evaluator()
    _hash_object_keys_from_a_copy()
    _validate_categorical_codes()
    if "pandas.core.indexes.multi" in sys.modules:
        _copy_multiindex_codes()
    for module, name, position in (("scipy.io.wavfile", "read", 1), ("scipy.io._netcdf", "netcdf_file", 2)):
        reader = getattr(sys.modules.get(module), name, None)
        if reader is not None and reader not in CALL_GUARDS:
            CALL_GUARDS[reader] = _guard_scipy_reader(position)
            _KEEP.append(reader)
    if "scipy.sparse._compressed" in sys.modules:
        _check_sparse_indices_fully()
    _check_native_kernels()
    for module, name in (("numpy._utils", "set_module"), ("pandas.util._decorators", "set_module")):
        setter = getattr(sys.modules.get(module), name, None)
        if setter is not None and setter not in CALL_GUARDS:
            CALL_GUARDS[setter] = _guard_set_module
            _KEEP.append(setter)
    if "scipy.ndimage" in sys.modules and not _NDIMAGE_GUARDED:
        for fn in _ndimage_writers():
            CALL_GUARDS.setdefault(fn, _guard_output_arrays)
            _KEEP.append(fn)
        _NDIMAGE_GUARDED.append(True)
    linalg = sys.modules.get("scipy.linalg")
    if getattr(linalg, "lu_solve", None) is not None and linalg.lu_solve not in CALL_GUARDS:
        CALL_GUARDS[linalg.lu_solve] = _guard_lu_solve
        _KEEP.append(linalg.lu_solve)
    _close_pandas_interchange()
    _copy_arrays_given_to_callbacks()
    swap_in_library_state()   # a library loaded during a cell: its state is the engine's from now on
    _refuse_raw_protocols_on_library_classes()
    _close_string_lookups()
    _guard_pandas_plot_backend()
    route_native_file_io()
    _serial_pandas_reads()
    _charges.charge_native_work(CALL_GUARDS)
    np = sys.modules.get("numpy")
    if np is not None:
        _normalise_wrapped_indices(np)
    if np is not None and np.load not in CALL_GUARDS:
        guards = _numpy_guards(np)
        CALL_GUARDS.update(guards)
        _KEEP.extend(guards)
        add_stand_in_kind("tolist", np.ndarray, ("tolist",))
        add_stand_in_kind("object_sort", np.ndarray, ("sort", "partition"))
        add_stand_in_kind("tolist", np.generic, ("tolist",))
    pio = sys.modules.get("plotly.io")
    if pio is not None and pio.show not in CALL_GUARDS:
        CALL_GUARDS[pio.show] = _guard_plotly_show
        CALL_GUARDS[pio.write_html] = _guard_auto_open
        CALL_GUARDS[pio.to_html] = _guard_auto_open
        _KEEP.extend((pio.show, pio.write_html, pio.to_html))
    ckdtree = sys.modules.get("scipy.spatial._ckdtree")   # query_pairs: counted first (N9-4)
    if ckdtree is not None:
        add_stand_in_kind("kdtree_pairs", ckdtree.cKDTree, ("query_pairs",))
        kdtree = sys.modules.get("scipy.spatial._kdtree")
        if kdtree is not None:
            add_stand_in_kind("kdtree_pairs", kdtree.KDTree, ("query_pairs",))
    figure = getattr(sys.modules.get("plotly.basedatatypes"), "BaseFigure", None)
    if figure is not None:
        add_stand_in_kind("plotly_show", figure, ("show",))
        add_stand_in_kind("no_auto_open", figure, ("write_html", "to_html"))


if not BUFFERS_CHECKED_IN_C:   # without _numpyguard: readinto refuses object arrays itself
    for _reader in (io.BytesIO, io.BufferedReader, io.BufferedRandom, io.FileIO):
        add_stand_in_kind("readinto", _reader, ("readinto", "readinto1"))
