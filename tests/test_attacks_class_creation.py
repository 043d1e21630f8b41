"""Classes made on the cell's behalf: a class statement and the library factories that make a class from a
namespace the cell chose (enum's functional API and its `type=` mixin, subclass calls of an Enum) meet the same rules
before the class exists: no name a class statement cannot bind, numpy's raw protocols not answered by a hook, a
finalizer that is the cell's own function (not a library callable, not inherited from `netcdf_file` or `io.StringIO`),
and objects of a class with a library finalizer take no attributes. Honest factories keep working, with and without
the C extension.

Sink: docs/security.md, "Inventory of sinks", row *classes made on the cell's behalf*. The attacks come from the
independent review 2 at level none (N2-1 and its siblings; docs/reviews.md).
"""
from __future__ import annotations

import json
import math

import pytest

from childcell import run_cell_in_child, savetxt_writer

# From review 2 (docs/reviews.md, "Review 2").
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
    result = run_cell_in_child(ENUM_LIBRARY_FINALIZER.format(writer=savetxt_writer(target)),
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
    cell = INHERITED_FINALIZER.format(writer=savetxt_writer(target), base=base_class, attribute=attribute)
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
            f"obj.close = {savetxt_writer(target)}\n")
    assert not r.ok and r.error_name == "AttributeDenied", r
    r = run(f"setattr(obj, 'close', {savetxt_writer(target)})\n")
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
import os; os.environ['SANDBOX_KERNEL_PYTHON_GUARDS'] = '1'   # the operator accepts the fallbacks (engine.py)
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


def test_enum_and_abc_new_cannot_make_classes(run):
    for src in ("import abc\nX = abc.ABCMeta.__new__(abc.ABCMeta, 'X', (), {})",
                "X = type.__new__(type, 'X', (), {})"):
        r = run(src)
        assert not r.ok and r.error_name == "AttributeDenied", r


# From review 15 (docs/reviews.md, "Review 15").
# --- R15-5 (full): a base that is not a class chose the class body's namespace --------------------------------
# CPython takes type(base) as the metaclass of a base that is an instance, so a cell class's __prepare__ made the
# namespace in which the class body looks up the runtime's own names first: answering the own-instance check
# with "yes" made every attribute read in the body raw (glob.os.environ, sys.modules, confinement switched off).

PREPARED_NAMESPACE = """\
import glob
class ALL:
    def __contains__(self, x):
        return True
class NS:
    def __init__(self):
        self.d = {}
    def __getitem__(self, k):
        if k == "__st_own__":
            return ALL()
        return self.d[k]
    def __setitem__(self, k, v):
        self.d[k] = v
class P:
    def __prepare__(name, bases):
        return NS()
    def __init__(self, *a):
        self.a = a
"""

MRO_ENTRIES_NAMESPACE = """\
import glob
class ALL:
    def __contains__(self, x):
        return True
class NS(dict):
    def __missing__(self, k):
        if k == "__st_own__":
            return ALL()
        raise KeyError(k)
class P:
    def __prepare__(name, bases):
        return NS()
    def __init__(self, *a):
        self.a = a
class Q:
    def __mro_entries__(self, bases):
        return (P(),)
"""

ENV_SECRET = "R15-ENV-SECRET-7731"
SECRET_IN_THE_ENVIRONMENT = f"""\
import os
os.environ["SANDBOX_TEST_R15_SECRET"] = {ENV_SECRET!r}
def probe_host(report):
    report["leaked"] = {ENV_SECRET!r} in repr(eng.namespace.get("got"))
"""


@pytest.mark.parametrize("prelude, base", [(PREPARED_NAMESPACE, "P()"), (MRO_ENTRIES_NAMESPACE, "Q()")],
                         ids=["instance_base", "mro_entries"])
def test_a_base_that_is_not_a_class_cannot_choose_the_class_namespace(prelude, base):
    cell = prelude + f"got = None\nclass X({base}):\n    got = glob.os.environ['SANDBOX_TEST_R15_SECRET']\n"
    result = run_cell_in_child(cell, report=("status", "ename", "evalue"), probe=SECRET_IN_THE_ENVIRONMENT,
                               hard_exit=True)
    assert result.get("leaked") is False, result
    assert result["ename"] == "BuiltinDenied" and "bases must be classes" in result["evalue"], result


def test_a_prepared_namespace_cannot_switch_confinement_off(outside):
    marker = outside / "pwned-by-prepared-namespace"
    cell = PREPARED_NAMESPACE + (
        "class X(P()):\n"
        "    c = glob.sys.modules['sandbox_kernel.confine']\n"
        "    c._ACTIVE[0] = None\n"
        "    c._FS.set(None)\n"
        f"    glob.os.system('id > {marker}')\n")
    result = run_cell_in_child(cell, report=("status", "ename", "evalue"), hard_exit=True)
    assert not marker.exists(), result
    assert result["ename"] == "BuiltinDenied", result


def test_a_prepared_namespace_cannot_read_a_host_module(host_secret):
    cell = PREPARED_NAMESPACE + "got = None\nclass X(P()):\n    got = glob.sys.modules['sandbox_test_host_secret'].SECRET\n"
    probe = ("import sys, types\nm = types.ModuleType('sandbox_test_host_secret'); m.SECRET = 'R15-MODULE-SECRET'\n"
             "sys.modules[m.__name__] = m\n"
             "def probe_host(report):\n    report['leaked'] = 'R15-MODULE-SECRET' in repr(eng.namespace.get('got'))\n")
    result = run_cell_in_child(cell, report=("status", "ename"), probe=probe, hard_exit=True)
    assert result.get("leaked") is False and result["ename"] == "BuiltinDenied", result


def test_classes_whose_bases_resolve_through_mro_entries_still_work(run):
    r = run("from typing import Generic, TypeVar, NamedTuple, TypedDict\n"
            "T = TypeVar('T')\n"
            "class G(Generic[T]):\n    pass\n"
            "class NT(NamedTuple):\n    x: int\n    y: str = 'a'\n"
            "class TD(TypedDict):\n    a: int\n"
            "class Q:\n    def __mro_entries__(self, bases):\n        return (dict,)\n"
            "class Z(Q()):\n    pass\n"
            "print(G[int], NT(1), TD(a=1), Z(a=1), issubclass(Z, dict))")
    assert r.ok, r
    assert r.stdout == "__main__.G[int] NT(x=1, y='a') {'a': 1} {'a': 1} True\n", r.stdout


def test_a_class_namespace_made_by_a_library_metaclass_still_works(run):
    r = run("import enum, abc\n"
            "class E(enum.Enum):\n    A = 1\n    B = 2\n"
            "class F(enum.IntFlag):\n    R = 1\n    W = 2\n"
            "class A(abc.ABC):\n    @abc.abstractmethod\n    def f(self): ...\n"
            "class B(A):\n    def f(self):\n        return 5\n"
            "print(list(E), F.R | F.W, B().f())")
    assert r.ok, r
    assert r.stdout.endswith(" 5\n") and "E.A" in r.stdout, r.stdout
