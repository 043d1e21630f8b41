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
