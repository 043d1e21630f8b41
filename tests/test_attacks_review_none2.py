"""Second independent review at level `none`: attacks by an outsider told only the threat model.

Each test performs the real attack in an Engine with the data-science policy and asserts that it failed
and nothing happened: no process ran (the file it would write does not exist), no secret outside the
working directory reached the cell, no file was written outside it, host modules and host memory
unchanged. Attacks that change process-wide state (module globals, pandas options, uarray backends,
memory) run in a child process (tests/childcell.py) and report what the host sees afterwards.

The findings (full escapes unless said) were strict xfails; each passes once closed at its sink:
  N2-1  enum's functional API builds a class outside the class statement: its `__getattr__` is not
        wrapped against numpy's raw protocols (any address read and written), its `__del__` may be a
        library callable (a file written outside the working directory after the cell).
        Closed where every class is made (type's constructor asks gates.check_new_class while a cell
        runs); siblings: a class statement inheriting a library finalizer (netcdf_file, io.StringIO),
        objects of such classes taking attributes (NpzFile), names a class statement cannot bind.
  N2-2  `enum.global_enum(E)` writes E's members into `sys.modules[E.__module__]`, a module the cell
        names (`Enum(..., module=...)` or `E.__module__ = ...`): the host's json, and the sandbox's own
        `confine._confinement`, which turns the confinement off (a secret read, a process run).
        `EnumType._convert_`, readable from a cell's Enum subclass, writes a module's non-function
        globals the same way and reads any module's globals into members (their repr shows the values).
        Closed at the writers: global_enum is handed out guarded (only the cell's own enum, its members
        into the cell's names); a private name that resolves to the machinery of the library class a cell
        class derives from (enum's _convert_/_create_, abc's _abc_registry_clear) is hidden.
  N2-3  numpy's BitGenerator `.ctypes` (and `.cffi`) hand out ctypes objects: the CFUNCTYPE class makes
        a pointer to libc's `system` by dlsym, a process runs; `c_void_p.from_address` reads any address.
        Closed by object rules (BitGenerator.ctypes, .cffi, as ndarray.ctypes) and at the values: an
        instance of a ctypes or cffi class, or a capsule, is never handed to a cell (gates._instance_refusal);
        type(x) hands a class out only where x.__class__ would. Sibling (a full escape): plotly's import
        helpers (relative_import, optional_imports.get_module) import any module by the caller's name and
        hand back it or its attributes: relative_import('x', [], ['ctypes.CDLL']) ran a process.
  N2-4  process-wide library registries keep what a cell put there and run it in the host after the
        cell: pandas options (`display.float_format`), scipy.fft's global uarray backend.
        Closed by keeping that state per engine (guards.LIBRARY_STATE: pandas' options and plot_params,
        numpy.ma's masked_print_option, uarray's backends on a thread-local copy, csv's dialects): the
        engine's values are in place only while its cell runs. Sibling: masked_print_option.set_display of
        a cell object whose __str__ is a library callable (a file written when the host prints).
  N2-5  (lesser) `typing.dataclass_transform()(library_class)` writes an attribute of a host class.
        Closed as typing.final is: handed out guarded (only the cell's classes and functions). Siblings:
        typing.override (3.12+), typing.no_type_check_decorator (ran typing's unguarded no_type_check on
        what the decorator returned: DataFrame's __no_type_check__ written), abc.abstractclassmethod and
        abstractstaticmethod (wrote __isabstractmethod__ on pandas' functions).
  N2-6  a cell's own `__del__`, collected on a kernel thread (exempt from the confinement) while the
        cell runs, runs unconfined: a secret read into the cell, a process run.
Sibling of N2-1/N2-2 found in the same round: copy's reduction (copy._reconstruct) wrote a host module's
globals whenever a library or a nested copy deep-copied a cell object whose class answers __reduce_ex__.
"""
from __future__ import annotations

import json
import math
import sys
import threading

import pytest

from childcell import run_cell_in_child
from conftest import Sandbox

PAYLOAD = "echo PWNED-BY-REVIEW"


def _savetxt_partial(path) -> str:
    """A library callable that writes PAYLOAD to `path`, whatever extra positional argument it is given
    (np.savetxt writes the rows before it looks at `footer`)."""
    return (f"functools.partial(np.savetxt, {str(path)!r}, np.array([{PAYLOAD!r}], dtype=object), "
            "'%s', ' ', '\\n', '')")


# --- N2-1: enum's functional API makes classes the class statement's checks never see ---------------------

ENUM_GETATTR_RAW_MEMORY = """\
import enum, math, numpy as np
def hook(self, name):
    if name == "__array_interface__":
        return {"shape": (1,), "typestr": "<f8", "data": (id(math.tau) + 16, False), "version": 3}
    raise AttributeError(name)
E = enum.Enum("E", {"A": 1, "__getattr__": hook})
view = np.asarray(E.A)
view[0] = 3.0
"""

REPORT_TAU = """\
def probe_host(report):
    import math
    report["tau"] = math.tau
"""


def test_enum_functional_api_getattr_does_not_answer_numpys_raw_protocols():
    result = run_cell_in_child(ENUM_GETATTR_RAW_MEMORY, probe=REPORT_TAU, hard_exit=True, timeout=60)
    assert result.get("tau") == math.tau, f"host memory was written: {result}"


def test_enum_functional_api_array_interface_key_is_refused(run):
    r = run("import enum\nE = enum.Enum('E', {'A': 1, '__array_interface__': {'data': (0, False)}})")
    assert not r.ok and "cannot be defined" in r.error_value, r


ENUM_LIBRARY_FINALIZER = """\
import enum, functools, numpy as np
w = {writer}
E = enum.Enum("E", [("A", 1), ("__del__", w)])
#CELL
del E, w
"""

REPORT_FILE_AFTER_GC = """\
def probe_host(report):
    import gc, os
    gc.collect()
    report["written"] = os.path.exists({path!r})
"""


def test_enum_functional_api_library_finalizer_does_not_write_after_the_cell(outside):
    target = outside / "enum-finalizer.sh"
    result = run_cell_in_child(ENUM_LIBRARY_FINALIZER.format(writer=_savetxt_partial(target)),
                               probe=REPORT_FILE_AFTER_GC.format(path=str(target)), hard_exit=True, timeout=60)
    assert result.get("written") is False, result
    assert not target.exists()


# Siblings: every class made while a cell runs passes type's constructor (gates.check_new_class), whoever makes
# it; a class statement and a library's factory meet the same rules.

CLASS_FACTORY_ROUTES = {
    "enum_functional_dict": "E = enum.Enum('E', {{'A': 1, {entry}}})",
    "enum_functional_pairs": "E = enum.Enum('E', [('A', 1), ({entry_pair})])",
    "int_enum_functional": "E = enum.IntEnum('E', {{'A': 1, {entry}}})",
    "flag_functional": "E = enum.Flag('E', {{'A': 1, {entry}}})",
    "enum_subclass_call": "class Base(enum.Enum):\n    pass\nE = Base('E', {{'A': 1, {entry}}})",
}
FORBIDDEN_CLASS_ENTRIES = {
    "__class__": "int",                          # isinstance() answered by the member
    "__reduce_ex__": "print",                    # copy's reduction steered (the rewriter refuses the name)
    "__dict__": "{}",
    "__builtins__": "{}",
}


@pytest.mark.parametrize("route", sorted(CLASS_FACTORY_ROUTES))
@pytest.mark.parametrize("name", sorted(FORBIDDEN_CLASS_ENTRIES))
def test_class_factories_cannot_bind_what_a_class_statement_cannot(run, route, name):
    value = FORBIDDEN_CLASS_ENTRIES[name]
    make = CLASS_FACTORY_ROUTES[route].format(entry=f"{name!r}: {value}", entry_pair=f"{name!r}, {value}")
    r = run(f"import enum\n{make}\n")
    assert not r.ok and r.error_name == "BuiltinDenied" and name in r.error_value, r


@pytest.mark.parametrize("route", sorted(CLASS_FACTORY_ROUTES))
def test_class_factories_take_no_library_finalizer(run, route):
    make = CLASS_FACTORY_ROUTES[route].format(entry="'__del__': print", entry_pair="'__del__', print")
    r = run(f"import enum\n{make}\n")
    assert not r.ok and r.error_name == "BuiltinDenied" and "__del__" in r.error_value, r


def test_the_enum_mixin_type_cannot_bring_a_library_finalizer(run):
    r = run("import enum, io\nE = enum.Enum('E', 'A B', type=io.StringIO)\n")
    assert not r.ok and r.error_name == "BuiltinDenied" and "__del__" in r.error_value, r


def test_a_refused_class_is_never_seen_by_the_cells_init_subclass(run):
    r = run("import enum\nseen = []\nclass Base:\n    def __init_subclass__(cls, **kwargs):\n        seen.append(cls)\n"
            "try:\n    enum.Enum('E', {'A': 1, '__del__': print}, type=Base)\nexcept Exception as exc:\n"
            "    refused = type(exc).__name__\nprint(refused, len(seen))\n")
    assert r.ok and r.stdout == "BuiltinDenied 0\n", r


INHERITED_FINALIZER = """\
import functools, io, numpy as np
from scipy.io import netcdf_file
w = {writer}
class X({base}):
    {attribute} = w
x = object.__new__(X) if X.__mro__[1] is netcdf_file else X()
if X.__mro__[1] is netcdf_file:
    x.fp = io.BytesIO()
"""

INHERITED_FINALIZER_BASES = {"netcdf_file": ("netcdf_file", "flush"), "stringio": ("io.StringIO", "close"),
                             "bytesio": ("io.BytesIO", "close")}


@pytest.mark.parametrize("base", sorted(INHERITED_FINALIZER_BASES))
def test_a_class_statement_cannot_inherit_a_library_finalizer(outside, base):
    # netcdf_file.__del__ is its close(), which calls self.flush(); io's close-on-collect calls self.close():
    # each would call the partial the class hangs there, after the cell, unconfined
    target = outside / f"inherited-finalizer-{base}.sh"
    base_class, attribute = INHERITED_FINALIZER_BASES[base]
    cell = INHERITED_FINALIZER.format(writer=_savetxt_partial(target), base=base_class, attribute=attribute)
    result = run_cell_in_child(cell + "#CELL\ndel x\n", probe=REPORT_FILE_AFTER_GC.format(path=str(target)),
                               report=("status", "ename"), hard_exit=True, timeout=60)
    assert result.get("written") is False, result
    assert not target.exists()


def test_a_cell_subclass_of_stringio_is_refused_with_the_reason(run):
    r = run("import io\nclass X(io.StringIO):\n    pass\n")
    assert not r.ok and r.error_name == "BuiltinDenied" and "finalizer" in r.error_value, r


LIBRARY_FINALIZER_INSTANCES = {
    "npzfile": "np.savez('a.npz', x=np.arange(3))\nobj = np.load('a.npz')",
    "stringio": "obj = io.StringIO()",
}


@pytest.mark.parametrize("kind", sorted(LIBRARY_FINALIZER_INSTANCES))
def test_objects_with_a_library_finalizer_take_no_attributes(run, outside, kind):
    # NpzFile.__del__ calls self.close(): an instance attribute 'close' would run after the cell
    target = outside / f"instance-finalizer-{kind}.sh"
    r = run(f"import functools, io, numpy as np\n{LIBRARY_FINALIZER_INSTANCES[kind]}\n"
            f"obj.close = {_savetxt_partial(target)}\n")
    assert not r.ok and r.error_name == "AttributeDenied", r
    r = run(f"setattr(obj, 'close', {_savetxt_partial(target)})\n")
    assert not r.ok and r.error_name == "AttributeDenied", r
    run("del obj\n")
    import gc
    gc.collect()
    assert not target.exists()


def test_classes_libraries_make_for_the_cell_still_work(run):
    r = run("import collections, enum, typing, pandas as pd\n"
            "P = collections.namedtuple('P', 'x y')\nN = typing.NamedTuple('N', [('a', int)])\n"
            "T = typing.TypedDict('T', {'a': int})\nE = enum.Enum('E', 'A B')\n"
            "F = enum.IntFlag('F', {'R': 4, 'W': 2})\n"
            "rows = list(pd.DataFrame({'a': [1, 2]}).itertuples())\n"
            "class Own:\n    def __del__(self):\n        print('finalized in the cell')\n"
            "o = Own()\ndel o\nprint(P(1, 2), N(1), T(a=1), E.B, F.R | F.W == 6, rows[1].a)\n")
    assert r.ok and r.stdout == "finalized in the cell\nP(x=1, y=2) N(a=1) {'a': 1} E.B True 2\n", r


NO_EXTENSION_CLASS_SINK = """\
import json, sys, tempfile
sys.modules['sandbox_kernel._numpyguard'] = None     # as if the C extension had not been built
from sandbox_kernel import gates
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
assert not gates.CLASS_SINK_IN_C
eng = Engine(PRESETS['data-science'], workdir=tempfile.mkdtemp())
report = {}
for name, cell in json.loads(sys.argv[1]).items():
    done = eng.run_cell(cell, emit=lambda e: None)
    report[name] = (done['error'] or {}).get('ename') or eng.namespace.get('answer')
print(json.dumps(report))
"""


def test_without_the_extension_type_new_still_decides_for_enum_and_class_statements():
    import subprocess
    import sys as _sys
    from childcell import REPO
    cells = {"enum_finalizer": "import enum\nE = enum.Enum('E', {'A': 1, '__del__': print})",
             "enum_hook": "import enum, numpy as np\ndef hook(self, name):\n    if name == '__array_interface__':\n"
                          "        return {'shape': (1,), 'typestr': '<f8', 'data': (0, False), 'version': 3}\n"
                          "    raise AttributeError(name)\nE = enum.Enum('E', {'A': 1, '__getattr__': hook})\n"
                          "answer = np.asarray(E.A).dtype.kind",
             "inherited_finalizer": "import io\nclass X(io.StringIO):\n    pass",
             "honest": "import enum, collections\nE = enum.Enum('E', 'A B')\nP = collections.namedtuple('P', 'x')\n"
                       "answer = f'{E.B.name} {P(1).x}'"}
    out = subprocess.run([_sys.executable, "-c", NO_EXTENSION_CLASS_SINK, json.dumps(cells)], capture_output=True,
                         text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"enum_finalizer": "BuiltinDenied", "enum_hook": "O", "inherited_finalizer": "BuiltinDenied",
                      "honest": "B 1"}, report


# --- N2-2: enum.global_enum writes into any loaded module --------------------------------------------------

GLOBAL_ENUM_ROUTES = {
    "functional_module_argument": "import enum\nE = enum.Enum('E', {'loads': 1}, module='json')\nenum.global_enum(E)",
    "module_dunder_written": "import enum\nclass E(enum.Enum):\n    loads = 1\nE.__module__ = 'json'\n"
                             "enum.global_enum(E)",
}

REPORT_JSON_LOADS = """\
def probe_host(report):
    import json, types
    report["loads_is_a_function"] = isinstance(json.loads, types.FunctionType)
"""


@pytest.mark.parametrize("route", sorted(GLOBAL_ENUM_ROUTES))
def test_global_enum_does_not_write_host_modules(route):
    result = run_cell_in_child(GLOBAL_ENUM_ROUTES[route], probe=REPORT_JSON_LOADS, hard_exit=True, timeout=60)
    assert result.get("loads_is_a_function") is True, result


GLOBAL_ENUM_ESCAPE = """\
import enum, functools
E = enum.Enum("E", {{"_confinement": 1, "__call__": functools.partial({{}}.get, 0)}},
              module="sandbox_kernel.confine")
enum.global_enum(E)
#CELL
import pandas as pd
try:
    read_secret = "{secret}" in str(pd.read_csv({secret_file!r}).columns[0])
except Exception:
    read_secret = False
from scipy import stats
EVIL = ("import os\\n"
        "os.system('id > {marker}')\\n"
        "def _parse_args(self, *a, **k): return a, 0, 1\\n"
        "_parse_args_stats = _parse_args_rvs = _parse_args\\n")
class D(stats.rv_continuous):
    _parse_arg_template = EVIL
    def _construct_argparser(self, *args, **kwargs):
        pass
    def _pdf(self, x):
        return 1.0
try:
    D(name="d")
except Exception:
    pass
"""


def test_global_enum_is_not_a_full_escape(tmp_path, outside, host_secret):
    marker = outside / "pwned-by-global-enum"
    result = run_cell_in_child(GLOBAL_ENUM_ESCAPE.format(secret=host_secret, secret_file=str(tmp_path / "secret.txt"),
                                                         marker=marker),
                               ns=("read_secret",), hard_exit=True, timeout=60)
    escaped = [what for what, happened in (("a process ran", marker.exists()),
                                           ("a secret outside the workdir was read", result.get("read_secret")))
               if happened]
    assert not escaped, (escaped, result)


ENUM_CONVERT_WRITES_A_MODULE = """\
import enum
class E(enum.Enum):
    pass
C = E._convert_("C", "json", lambda name: name == "decoder")
"""

REPORT_JSON_DECODER = """\
def probe_host(report):
    import json, types
    report["decoder_is_a_module"] = isinstance(json.decoder, types.ModuleType)
"""


def test_enum_convert_does_not_write_host_modules():
    result = run_cell_in_child(ENUM_CONVERT_WRITES_A_MODULE, probe=REPORT_JSON_DECODER, hard_exit=True, timeout=60)
    assert result.get("decoder_is_a_module") is True, result


def test_enum_convert_does_not_read_host_module_globals(run, host_secret):
    from conftest import HOST_SECRET_MODULE
    r = run(f"import enum\nclass E(enum.Enum):\n    pass\n"
            f"S = E._convert_('S', {HOST_SECRET_MODULE!r}, lambda name: name == 'SECRET')\nprint(list(S))\n")
    assert not r.leaked(host_secret), r


def test_global_enum_puts_the_cells_enum_into_the_cells_names(run):
    r = run("import enum\n@enum.global_enum\nclass Color(enum.Enum):\n    RED = 1\n    GREEN = 2\n"
            "print(RED is Color.RED, GREEN.name)\n")
    assert r.ok and r.stdout == "True GREEN\n", r


@pytest.mark.parametrize("target", ["re.RegexFlag", "enum.Enum('F', 'A B')"])
def test_global_enum_of_a_class_the_cell_did_not_define_is_refused(run, target):
    import re
    flags = dict(vars(re))
    r = run(f"import enum, re\nenum.global_enum({target})\n")
    assert not r.ok and r.error_name == "CallDenied", r
    assert dict(vars(re)) == flags


@pytest.mark.parametrize("name", ["_convert_", "_create_", "_get_mixins_", "_check_for_existing_members_",
                                  "_find_new_"])
def test_enum_machinery_is_hidden_on_the_cells_enum(run, name):
    r = run(f"import enum\nclass E(enum.IntEnum):\n    A = 1\nx = E.{name}\n")
    assert not r.ok and r.error_name == "AttributeDenied", r
    r = run(f"x = E.A.{name}\n")   # (metaclass methods are no attributes of members)
    assert not r.ok and r.error_name in ("AttributeDenied", "AttributeError"), r


@pytest.mark.parametrize("expr", ["A._abc_registry_clear", "A._abc_caches_clear", "A._dump_registry"])
def test_abc_machinery_is_hidden_on_the_cells_classes(run, expr):
    r = run(f"import abc\nclass A(abc.ABC):\n    pass\nx = {expr}\n")
    assert not r.ok and r.error_name == "AttributeDenied", r


def test_private_names_the_cells_enum_defines_stay_readable(run):
    r = run("import enum\nclass E(enum.Enum):\n    A = 1\n    def _label(self):\n        return self.name.lower()\n"
            "    @classmethod\n    def _missing_(cls, value):\n        return cls.A\n"
            "E.A._note = 'n'\nprint(E.A._label(), E(7), E.A._note, E.A._value_, len(E._member_map_))\n")
    assert r.ok and r.stdout == "a E.A n 1 1\n", r


# --- N2-3: numpy's bit generators hand out ctypes -----------------------------------------------------------

BIT_GENERATORS = {
    "pcg64": "np.random.PCG64(1)",
    "mt19937": "np.random.MT19937(1)",
    "default_rng": "np.random.default_rng(1).bit_generator",
}

CTYPES_SYSTEM = """\
import numpy as np
c = {bit_generator}.ctypes
F = type(c.next_uint64)
class D:
    _handle = 0          # dlsym(RTLD_DEFAULT, ...)
system = F(("system", D()))
system(b"id > {marker}")
"""


@pytest.mark.parametrize("bit_generator", sorted(BIT_GENERATORS))
def test_bit_generator_ctypes_is_not_a_full_escape(run, outside, bit_generator):
    marker = outside / f"pwned-by-ctypes-{bit_generator}"
    r = run(CTYPES_SYSTEM.format(bit_generator=BIT_GENERATORS[bit_generator], marker=marker))
    assert not marker.exists(), "a process ran"
    assert not r.ok, r


def test_bit_generator_ctypes_does_not_read_memory(run):
    r = run("import numpy as np\nV = type(np.random.PCG64(1).ctypes.state)\n"
            "refcount_of_one = V.from_address(id(1)).value\n")
    assert not r.ok, r


def test_bit_generator_cffi_is_refused(run):
    r = run("import numpy as np\nhandle = np.random.PCG64(1).cffi\n")
    assert not r.ok, r


@pytest.mark.parametrize("expr", ["np.ma.array([1]).ctypes", "np.matrix([1]).ctypes", "np.zeros(2).T.ctypes"])
def test_array_ctypes_is_refused_on_subclasses_and_views(run, expr):
    r = run(f"import numpy as np\nx = {expr}")
    assert not r.ok and r.error_name == "AttributeDenied", r


BIT_GENERATOR_HANDLE_ROUTES = {
    "attribute": "bg.{name}",
    "getattr": "getattr(bg, '{name}')",
    "attrgetter": "operator.attrgetter('{name}')(bg)",
    "from_the_class": "type(bg).{name}.__get__(bg)",
    "match": "match bg:\n    case np.random.PCG64({name}=found):\n        pass",
}


@pytest.mark.parametrize("name", ["ctypes", "cffi", "capsule"])
@pytest.mark.parametrize("route", sorted(BIT_GENERATOR_HANDLE_ROUTES))
def test_bit_generator_handles_are_refused_by_every_route(run, route, name):
    r = run(f"import operator, numpy as np\nbg = np.random.PCG64(1)\n"
            f"{BIT_GENERATOR_HANDLE_ROUTES[route].format(name=name)}\n")
    assert not r.ok and r.error_name == "AttributeDenied", r


def test_type_hands_out_a_class_as_its_dunder_would(run):
    # type(x) answered with the raw class: a lock's class from _thread (x.__class__ is refused the same way)
    r = run("import numpy as np\nlock_class = type(np.random.PCG64(1).lock)\n")
    assert not r.ok and r.error_name == "BuiltinDenied" and "_thread" in r.error_value, r
    r = run("import numpy as np, pandas as pd\nprint(type(1).__name__, type(pd.Series([1])).__name__, "
            "isinstance(np.arange(2), type(np.arange(3))), type(type) is type)\n")
    assert r.ok and r.stdout == "int Series True True\n", r


# Sibling (found in this round): a granted library's import helpers import any module by the caller's name
# and hand back the module or one of its attributes, past every gate (a call's result is not an attribute
# read): plotly.relative_import('x', [], ['ctypes.CDLL']) gave a cell ctypes.CDLL, and CDLL(None)['system']
# ran a process.

IMPORT_HELPER_ROUTES = {
    "plotly_relative_import": ("import plotly\nhelper = plotly.relative_import", "relative"),
    "importers_relative_import": ("import _plotly_utils.importers as importers\nhelper = importers.relative_import",
                                  "relative"),
    "optional_imports_get_module": ("import plotly.optional_imports as optional\nhelper = optional.get_module",
                                    "module"),
    "from_import": ("from _plotly_utils.optional_imports import get_module as helper", "module"),
}
IMPORT_HELPER_USES = {
    # CDLL(None)['system'] is a pointer to libc's system(): item access, no attribute read to gate
    "relative": "_, get, _ = helper('x', [], ['ctypes.CDLL'])\nget('CDLL')(None)['system'](b'id > {marker}')",
    # the module itself: held by the cell, handed to the next library that reads it
    "module": "held = helper('os')\nprint(held)",
}


@pytest.mark.parametrize("route", sorted(IMPORT_HELPER_ROUTES))
def test_import_helpers_that_take_the_callers_module_name_are_refused(run, outside, route):
    marker = outside / f"pwned-by-{route}"
    setup, use = IMPORT_HELPER_ROUTES[route]
    r = run(f"{setup}\n{IMPORT_HELPER_USES[use].format(marker=marker)}\n")
    assert not r.ok and r.error_name == "AttributeDenied" and r.error_line <= 2, r
    assert not marker.exists() and "<module 'os'" not in r.stdout


# --- N2-4: process-wide library registries run the cell's callables in the host ----------------------------

PANDAS_FLOAT_FORMAT = """\
import functools, numpy as np, pandas as pd
pd.set_option("display.float_format", {formatter})
"""

REPORT_HOST_DATAFRAME_REPR = """\
def probe_host(report):
    import os, pandas as pd
    try:
        report["host_repr"] = "1.5" in repr(pd.DataFrame({{"a": [1.5]}}))
    except BaseException as exc:   # LimitExceeded is a BaseException
        report["host_repr"] = type(exc).__name__
    report["written"] = os.path.exists({path!r})
"""


def test_pandas_float_format_library_callable_does_not_run_in_the_host(outside):
    target = outside / "float-format.sh"
    result = run_cell_in_child(PANDAS_FLOAT_FORMAT.format(formatter=_savetxt_partial(target)),
                               probe=REPORT_HOST_DATAFRAME_REPR.format(path=str(target)), hard_exit=True, timeout=60)
    assert result.get("written") is False, result
    assert not target.exists()


def test_pandas_float_format_cell_function_does_not_outlive_the_cell(outside):
    result = run_cell_in_child(PANDAS_FLOAT_FORMAT.format(formatter="lambda x: 'CELL'"),
                               probe=REPORT_HOST_DATAFRAME_REPR.format(path=str(outside / "none")), hard_exit=True,
                               timeout=60)
    assert result.get("host_repr") is True, result


UARRAY_GLOBAL_BACKEND = """\
import functools, numpy as np, pandas as pd, scipy.fft
w = {writer}
backend = pd.Series(["numpy.scipy.fft", w], index=["__ua_domain__", "__ua_function__"], dtype=object)
scipy.fft.set_global_backend(backend)
"""

REPORT_HOST_FFT = """\
def probe_host(report):
    import os, numpy as np, scipy.fft
    try:
        report["host_fft"] = len(scipy.fft.fft(np.ones(4))) == 4
    except BaseException as exc:
        report["host_fft"] = type(exc).__name__
    report["written"] = os.path.exists({path!r})
"""


def test_uarray_global_backend_does_not_run_in_the_host(outside):
    target = outside / "uarray.sh"
    result = run_cell_in_child(UARRAY_GLOBAL_BACKEND.format(writer=_savetxt_partial(target)),
                               probe=REPORT_HOST_FFT.format(path=str(target)), hard_exit=True, timeout=60)
    assert result.get("written") is False, result
    assert result.get("host_fft") is True, result


MASKED_PRINT_OPTION = """\
import functools, numpy as np
class Shown:
    __str__ = {writer}
np.ma.masked_print_option.set_display(Shown())
"""

REPORT_HOST_MASKED_REPR = """\
def probe_host(report):
    import os, numpy as np
    try:
        report["host_repr"] = str(np.ma.masked_array([1, 2], mask=[1, 0]))
    except BaseException as exc:
        report["host_repr"] = type(exc).__name__
    report["written"] = os.path.exists({path!r})
"""


def test_masked_print_option_set_by_a_cell_does_not_run_in_the_host(outside):
    target = outside / "masked-print.sh"
    result = run_cell_in_child(MASKED_PRINT_OPTION.format(writer=_savetxt_partial(target)),
                               probe=REPORT_HOST_MASKED_REPR.format(path=str(target)), hard_exit=True, timeout=60)
    # the class itself is refused since a cell class's special methods must be the cell's own code
    assert result.get("status") == "ok" or result.get("ename") == "AttributeDenied", result
    assert result.get("written") is False and result.get("host_repr") == "[-- 2]", result
    assert not target.exists()


def test_pandas_options_apply_to_the_engines_cells_and_never_to_the_host(sandbox, tmp_path):
    import pandas as pd
    host_rows, host_format = pd.get_option("display.max_rows"), pd.get_option("display.float_format")
    r = sandbox.run("import pandas as pd\npd.set_option('display.max_rows', 4)\n"
                    "pd.options.display.float_format = '<{:.1f}>'.format\n"
                    "df = pd.DataFrame({'a': [x + 0.25 for x in range(10)]})\ndf")
    assert r.ok and "..." in r.result_text and "<0.2>" in r.result_text, r
    assert pd.get_option("display.max_rows") == host_rows and pd.get_option("display.float_format") is host_format
    assert "..." not in repr(pd.DataFrame({"a": range(10)}))
    r = sandbox.run("print(pd.get_option('display.max_rows'))\ndf")   # a later cell of the same engine
    assert r.ok and r.stdout == "4\n" and "<9.2>" in r.result_text, r
    other = Sandbox(tmp_path / "other")   # another engine in the same process starts from the host's
    r = other.run("import pandas as pd\nprint(pd.get_option('display.max_rows'))")
    assert r.ok and r.stdout == f"{host_rows}\n", r
    assert pd.get_option("display.max_rows") == host_rows


PANDAS_OPTION_ROUTES = {
    "set_option": "pd.set_option('display.max_rows', 3)",
    "options_attribute": "pd.options.display.max_rows = 3",
    "option_context_left_open": "pd.option_context('display.max_rows', 3).__enter__()",
    "styler_formatter": "pd.set_option('styler.format.formatter', lambda v: 'CELL')",
    "reset_after_host_change": "pd.reset_option('display.max_rows')",
}


@pytest.mark.parametrize("route", sorted(PANDAS_OPTION_ROUTES))
def test_no_route_changes_the_hosts_pandas_options(run, route):
    import pandas as pd
    before = _every_pandas_option()
    with pd.option_context("display.max_rows", 7):   # the host's own value differs from the default
        r = run(f"import pandas as pd\n{PANDAS_OPTION_ROUTES[route]}\n")
        assert r.ok, r
        assert pd.get_option("display.max_rows") == 7
    after = _every_pandas_option()
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)


def _every_pandas_option() -> dict:
    from pandas._config import config
    values = {}
    for key in config._registered_options:
        root, leaf = config._get_root(key)
        values[key] = root[leaf]
    return values


def test_uarray_backends_set_by_a_cell_stay_in_its_engine(run):
    import numpy as np
    import scipy.fft
    r = run("import numpy as np, scipy.fft\nclass Doubling:\n    __ua_domain__ = 'numpy.scipy.fft'\n"
            "    @staticmethod\n    def __ua_function__(method, args, kwargs):\n        return 'CELL'\n"
            "scipy.fft.set_global_backend(Doubling)\nscipy.fft.register_backend(Doubling)\n"
            "scipy.fft.set_backend(Doubling).__enter__()\nprint(scipy.fft.fft(np.ones(2)))\n")
    assert r.ok and r.stdout == "CELL\n", r
    assert len(scipy.fft.fft(np.ones(4))) == 4   # the host's transforms are scipy's own
    r = run("print(scipy.fft.fft(np.ones(2)))\nwith scipy.fft.set_backend('scipy', only=True):\n"
            "    print(len(scipy.fft.fft(np.ones(2))))\n")
    assert r.ok and r.stdout == "CELL\n2\n", r
    assert len(scipy.fft.fft(np.ones(4))) == 4


def test_csv_dialects_registered_by_a_cell_stay_in_its_engine(run):
    import csv
    r = run("import csv\ncsv.register_dialect('excel', delimiter=';')\ncsv.register_dialect('mine', delimiter='|')\n"
            "csv.field_size_limit(10)\n")
    assert r.ok, r
    assert csv.get_dialect("excel").delimiter == "," and "mine" not in csv.list_dialects()
    assert csv.field_size_limit() == 131072
    r = run("print(csv.get_dialect('excel').delimiter, csv.get_dialect('mine').delimiter, csv.field_size_limit())")
    assert r.ok and r.stdout == "; | 10\n", r


def test_numpy_print_and_error_state_stay_in_the_cell(run):
    import numpy as np
    r = run("import numpy as np\nnp.set_printoptions(formatter={'float': lambda x: 'CELL'})\n"
            "def cb(*a):\n    pass\nnp.seterrcall(cb)\nnp.seterr(all='call')\n")
    assert r.ok, r
    assert "CELL" not in repr(np.array([1.5]))
    assert np.geterrcall() is None and np.geterr()["divide"] != "call"


# --- N2-5: typing helpers that write their argument -----------------------------------------------------------

def test_dataclass_transform_does_not_write_library_classes(run):
    import pandas as pd
    try:
        run("import typing, pandas as pd\ntyping.dataclass_transform(field_specifiers=(1,))(pd.DataFrame)")
        assert "__dataclass_transform__" not in vars(pd.DataFrame), "a host class was written"
    finally:
        if "__dataclass_transform__" in vars(pd.DataFrame):
            del pd.DataFrame.__dataclass_transform__


def test_typing_final_does_not_write_library_classes(run):
    import pandas as pd
    r = run("import typing, pandas as pd\ntyping.final(pd.DataFrame)")
    assert not r.ok and r.error_name == "CallDenied", r
    assert "__final__" not in vars(pd.DataFrame)


WRITING_HELPERS = {
    "dataclass_transform_function": ("typing.dataclass_transform()(pd.read_csv)", "read_csv",
                                     "__dataclass_transform__"),
    "no_type_check_decorator": ("typing.no_type_check_decorator(lambda x: pd.DataFrame)(1)", "DataFrame",
                                "__no_type_check__"),
    "abstractclassmethod": ("abc.abstractclassmethod(pd.DataFrame.apply)", "DataFrame.apply", "__isabstractmethod__"),
    "abstractstaticmethod": ("abc.abstractstaticmethod(pd.read_csv)", "read_csv", "__isabstractmethod__"),
}
if sys.version_info >= (3, 12):
    WRITING_HELPERS["override"] = ("typing.override(pd.DataFrame.apply)", "DataFrame.apply", "__override__")


@pytest.mark.parametrize("helper", sorted(WRITING_HELPERS))
def test_typing_and_abc_helpers_do_not_write_library_objects(run, helper):
    import functools
    import pandas as pd
    call, path, attribute = WRITING_HELPERS[helper]
    target = functools.reduce(getattr, path.split("."), pd)
    try:
        r = run(f"import abc, typing, pandas as pd\n{call}\n")
        assert not r.ok and r.error_name == "CallDenied", r
        assert attribute not in vars(target), "a host object was written"
    finally:   # (a failure must not leave the host's pandas changed for the tests after it)
        if attribute in vars(target):
            delattr(target, attribute)


def test_the_helpers_still_work_on_the_cells_own_classes_and_functions(run):
    r = run("import abc, typing\nclass A(abc.ABC):\n    @abc.abstractclassmethod\n    def make(cls):\n        pass\n"
            "class B(A):\n    @classmethod\n    def make(cls):\n        return 'made'\n"
            "@typing.dataclass_transform()\nclass Model:\n    pass\n"
            "@typing.no_type_check_decorator\ndef plain(f):\n    return f\n@plain\ndef g(x: int):\n    return x\n"
            "print(B.make(), isinstance(A.__dict__['make'], abc.abstractclassmethod), g(2))\n")
    assert r.ok and r.stdout == "made True 2\n", r


# --- sibling of N2-1/N2-2 (found in this round): copy's reduction writes a module ------------------------------
# copy._reconstruct calls what __reduce_ex__ answered and writes the answered state into what it made; a cell
# class's __getattribute__ answers __reduce_ex__, and libraries deep-copy the cell's objects themselves (the
# copy guard saw only the outermost object of the cell's own call).

REDUCES_TO_A_MODULE = """\
import copy, dataclasses, math
import pandas as pd
class Evil:
    def __getattribute__(self, name):
        if name == "__reduce_ex__":
            return lambda protocol: (lambda: math, (), {{"tau": 3.0}})
        return object.__getattribute__(self, name)
@dataclasses.dataclass
class Holder:
    item: object
{route}
"""

DEEPCOPY_ROUTES = {
    "nested_deepcopy": "copy.deepcopy([Evil()])",
    "dataclasses_asdict": "dataclasses.asdict(Holder(Evil()))",
    "pandas_attrs": "df = pd.DataFrame({'a': [1]})\ndf.attrs['k'] = Evil()\ndf2 = df + 1",
}

REPORT_TAU_AND_ERROR = """\
def probe_host(report):
    import math
    report["tau"] = math.tau
"""


@pytest.mark.parametrize("route", sorted(DEEPCOPY_ROUTES))
def test_a_reduction_cannot_make_a_copy_write_a_module(route):
    result = run_cell_in_child(REDUCES_TO_A_MODULE.format(route=DEEPCOPY_ROUTES[route]), probe=REPORT_TAU_AND_ERROR,
                               hard_exit=True, timeout=60)
    assert result.get("tau") == math.tau, f"host module written: {result}"
    assert result.get("ename") == "CallDenied", result


def test_honest_deep_copies_still_work(run):
    r = run("import copy, collections, dataclasses, enum, fractions, numpy as np, pandas as pd\n"
            "@dataclasses.dataclass\nclass P:\n    x: list\nclass C(enum.Enum):\n    A = 1\n"
            "things = [np.arange(3), pd.DataFrame({'a': [1.5]}), P([1]), C.A, fractions.Fraction(1, 3),\n"
            "          collections.deque([1]), collections.OrderedDict(a=1), np.float64(2.5), range(3),\n"
            "          np.dtype('f8')]\n"
            "copies = copy.deepcopy(things)\nprint([type(a) is type(b) for a, b in zip(things, copies)].count(True),\n"
            "      dataclasses.asdict(P([things[0]]))['x'][0].sum(), copy.copy(P([2])).x)\n")
    assert r.ok and r.stdout == "10 3 [2]\n", r


# --- attempts that failed (kept as regressions) ---------------------------------------------------------------

def test_class_statement_cannot_name_its_module(run):
    r = run("import enum\nclass E(enum.Enum):\n    __module__ = 'json'\n    dumps = 1\n")
    assert not r.ok and r.error_name == "NameDenied", r
    assert not hasattr(json.dumps, "_value_")


KERNEL_THREAD_FINALIZER = """\
import pandas as pd
from scipy import stats
EVIL = ("import os\\n"
        "os.system('id > {marker}')\\n"
        "def _parse_args(self, *a, **k): return a, 0, 1\\n"
        "_parse_args_stats = _parse_args_rvs = _parse_args\\n")
class D(stats.rv_continuous):
    _parse_arg_template = EVIL
    def _construct_argparser(self, *args, **kwargs):
        pass
    def _pdf(self, x):
        return 1.0
got = []
class X:
    def __del__(self):
        try:
            got.append(str(pd.read_csv({secret_file!r}).columns[0]))
            D(name="d")
        except Exception as exc:
            got.append(type(exc).__name__)
for i in range(20):
    x = X()
    x.me = x
    del x
n = 0
while not got and n < 3 * 10**6:   # the cell runs on while a kernel thread collects the cycles
    n += 1
print(got)
"""


def test_a_cell_finalizer_collected_on_a_kernel_thread_during_the_cell_is_confined(run, tmp_path, outside, host_secret):
    # Stands in for ipykernel's iopub thread at level none, which allocates (and so collects) while a
    # cell prints; here a thread of the host collects explicitly, so the race is won every time.
    import gc
    marker = outside / "pwned-by-kernel-thread-finalizer"
    stop = threading.Event()

    def collect():
        while not stop.is_set():
            gc.collect()
            stop.wait(0.001)

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    try:
        r = run(KERNEL_THREAD_FINALIZER.format(marker=marker, secret_file=str(tmp_path / "secret.txt")))
    finally:
        stop.set()
        collector.join()
    escaped = [what for what, happened in (("a process ran", marker.exists()),
                                           ("a secret outside the workdir was read", r.leaked(host_secret)))
               if happened]
    assert not escaped, (escaped, r)


JINJA_CALLABLE_READS = {
    "filters_attr": "env.filters['attr']",
    "globals_cycler": "env.globals['cycler']",
    "tests": "env.tests",
    "policies": "env.policies",
}


@pytest.mark.parametrize("name", sorted(JINJA_CALLABLE_READS))
def test_jinja_environment_tables_are_opaque(run, name):
    r = run(f"import pandas as pd\nenv = pd.DataFrame({{'a': [1]}}).style.env\ngot = {JINJA_CALLABLE_READS[name]}\n")
    assert not r.ok and r.error_name == "AttributeDenied", r


def test_enum_and_abc_new_cannot_make_classes(run):
    for src in ("import abc\nX = abc.ABCMeta.__new__(abc.ABCMeta, 'X', (), {})",
                "X = type.__new__(type, 'X', (), {})"):
        r = run(src)
        assert not r.ok and r.error_name == "AttributeDenied", r


def test_series_labels_cannot_be_read_as_dunders_by_the_cell(run):
    r = run("import pandas as pd\ns = pd.Series([1], index=['__ua_domain__'])\nx = s.__ua_domain__\n")
    assert not r.ok and r.error_name == "AttributeDenied", r
