"""Must-block: attributes that library code writes and reads by name on the cell's behalf (the library-write sink).

The write gate sees the cell's own `obj.name = v`; library code that sets or reads attributes by name does it past
every gate: a dataclass's generated __init__ (`self.f = f` for each field) and replace()/asdict() (`getattr(obj,
f.name)`), copy's restore of an object's state (`setattr(y, key, value)` for each slot-state key). Review 17 used
them to assign `__class__` (a cell object became a scipy csr_matrix over indices it chose: memory read and written;
contextlib.redirect_stdout handing out the host's sys.path; a forged refusal of the sandbox's own class), to write
a library base's private state, and to read attributes the policy denies.

Two sinks decide it, whatever the route:
- `__class__` assignment (`_numpyguard.guard_class_assignment`, the setter of object's `__class__` descriptor, which
  every assignment ends in): while a cell runs, nothing the cell made changes class and nothing becomes a cell's
  class or the runtime's;
- dataclass field names (`gates.dataclass_field_refusal`, at dataclass() and at class creation): no special names;
  on a class with a library base nothing private nor defined by the library; a class's table of fields is
  dataclass()'s alone.

"A library writing by name" is also simulated by host functions placed in the namespace (the routes the suite does
not know yet end in the same setter).
"""
from __future__ import annotations

import pytest

# -- the __class__ sink ----------------------------------------------------------------------------------------

# (what the cell makes, the class it asks for): objects of the cell's classes, and library objects made cells' or
# the runtime's
SWAPS = {
    "cell_object_to_csr_matrix": ("class O:\n    pass\nobj = O()\nimport scipy.sparse as sp\nnew = sp.csr_matrix\n",
                                  "O"),
    "cell_object_to_redirect_stdout": ("class O:\n    pass\nobj = O()\nimport contextlib\n"
                                       "new = contextlib.redirect_stdout\n", "O"),
    "cell_object_to_another_cell_class": ("class O:\n    pass\nclass P:\n    pass\nobj = O()\nnew = P\n", "O"),
    "cell_error_to_runtime_refusal": ("try:\n    import os\nexcept Exception as e:\n    new = type(e)\n"
                                      "class E(ImportError):\n    pass\nobj = E('forged')\n", "E"),
    "library_object_to_cell_class": ("import calendar\nobj = calendar.TextCalendar()\n"
                                     "class C(calendar.TextCalendar):\n    pass\nnew = C\n", "TextCalendar"),
}

# library code setting an attribute by name, as a host function in the namespace would
WRITERS = {
    "setattr": lambda obj, new: setattr(obj, "__class__", new),
    "object_setattr": lambda obj, new: object.__setattr__(obj, "__class__", new),
    "descriptor": lambda obj, new: object.__dict__["__class__"].__set__(obj, new),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("swap", sorted(SWAPS))
def test_no_class_assignment_on_the_cells_behalf(sandbox, swap, writer):
    setup, kept = SWAPS[swap]
    sandbox.ns["library_write"] = WRITERS[writer]
    r = sandbox.run(setup + "library_write(obj, new)")
    assert not r.ok and r.error_name == "AttributeDenied" and "'__class__'" in r.error_value, r
    assert type(sandbox.ns["obj"]).__name__ == kept, "the object changed class"


def test_copy_slot_state_cannot_assign_the_class(run):
    """R17-5: copy._reconstruct setattr()s every key of the slot state __getstate__ answers, '__class__'
    included, before the copy guard looks at the result; a property setter earlier in the state kept the copy."""
    r = run("import copy, numpy as np, scipy.sparse as sp\nsecret = np.full(4, 1234567.0)\nv = np.zeros(4)\n"
            "from numpy.lib.array_utils import byte_bounds\noff = (byte_bounds(secret)[0] - byte_bounds(v)[0]) // 8\n"
            "GRAB = []\nclass O:\n    @property\n    def grab(self):\n        return None\n    @grab.setter\n"
            "    def grab(self, value):\n        GRAB.append(self)\n    def __getstate__(self):\n"
            "        return (None, {'data': np.array([1.0]), 'indices': np.array([off], dtype=np.int64),\n"
            "                       'indptr': np.array([0, 1], dtype=np.int64), '_shape': (1, 4), 'grab': None,\n"
            "                       '__class__': sp.csr_matrix})\n"
            "try:\n    copy.copy(O())\nexcept Exception as e:\n    print('refused', type(e).__name__)\n"
            "print([type(g).__name__ for g in GRAB])")
    assert r.ok and r.stdout == "refused AttributeDenied\n['O']\n", r


def test_copy_state_of_a_library_subclass_is_the_librarys(sandbox):
    """copy restores what __getstate__ answered through the library's __setstate__ or straight into __dict__, past the
    write gate: on a class with a library base, a cell's own __getstate__ would choose the library's private state
    (rv_continuous's _ctor_param, its template, a DataFrame's _mgr)."""
    r = sandbox.run("import copy, scipy.stats as st\nclass R(st.rv_continuous):\n    def _pdf(self, x):\n"
                    "        return 1.0\n    def __getstate__(self):\n        return {'_ctor_param': {'a': 0}, 'planted': 1}\n"
                    "r = R(a=0, b=1)\ntry:\n    copy.copy(r)\nexcept Exception as e:\n    print(type(e).__name__)\n"
                    "try:\n    copy.deepcopy([r])\nexcept Exception as e:\n    print(type(e).__name__)\n"
                    "class Q(st.rv_continuous):\n    def _pdf(self, x):\n        return 1.0\n"
                    "class W:\n    def __getstate__(self):\n        return {'x': 2}\n"
                    "print(type(copy.copy(Q(a=0, b=1))).__name__, copy.copy(W()).x)")
    assert r.ok and r.stdout == "CallDenied\nCallDenied\nQ 2\n", r


def test_library_moves_its_own_objects_between_its_classes(run):
    """numpy.ma's masked constant and scipy's splines assign __class__ between their own classes."""
    r = run("import numpy as np\nfrom scipy.interpolate import UnivariateSpline\n"
            "s = UnivariateSpline(np.arange(10.0), np.arange(10.0) ** 2, s=0)\n"
            "print(type(s).__name__, int(np.ma.array([1, 2, 3], mask=[0, 1, 0]).sum()))")
    assert r.ok and r.stdout == "InterpolatedUnivariateSpline 4\n", r


def test_the_host_assigns_classes_outside_cells(sandbox):
    sandbox.run("class O:\n    pass\nclass P:\n    pass\nobj = O()")
    ns = sandbox.ns
    ns["obj"].__class__ = ns["P"]   # the host, between cells: not the cell's doing
    assert type(ns["obj"]) is ns["P"]


# -- dataclass fields ---------------------------------------------------------------------------------------------

REFUSED_FIELDS = {
    # R17-4: '__class__' through the generated __init__
    "class_field": ("import dataclasses\nclass X:\n    __annotations__ = {'data': object, '__class__': object}\n"
                    "X = dataclasses.dataclass(X)", "CallDenied"),
    "setattr_field": ("import dataclasses\nclass X:\n    __annotations__ = {'__setattr__': object}\n"
                      "X = dataclasses.dataclass(X)", "CallDenied"),
    "dunder_field": ("import dataclasses\n@dataclasses.dataclass\nclass X:\n    __array_priority__: int = 0", "CallDenied"),
    # R17-2b: a library base's private state written by the generated __init__
    "private_on_library_subclass": ("import dataclasses, scipy.stats as st\n@dataclasses.dataclass(eq=False)\n"
                                    "class X(st.rv_continuous):\n    _parse_arg_template: str = ''", "CallDenied"),
    # R17-1: replace() reads ndarray's ctypes when a field takes its name
    "library_name_on_library_subclass": ("import dataclasses, numpy as np\n@dataclasses.dataclass\n"
                                         "class X(np.ndarray):\n    ctypes: object = None", "CallDenied"),
    # a cell dataclass's fields inherited into a class with a library base
    "inherited_into_library_subclass": ("import dataclasses, numpy as np\n@dataclasses.dataclass\nclass D:\n"
                                        "    ctypes: object = None\nclass A(np.ndarray, D):\n    pass",
                                        "BuiltinDenied"),
    "private_inherited_into_library_subclass": ("import dataclasses, scipy.stats as st\n@dataclasses.dataclass\n"
                                                "class D:\n    _parse_arg_template: str = ''\n"
                                                "class R(st.rv_continuous, D):\n    pass", "BuiltinDenied"),
    # R17-1: a borrowed table of fields names any attribute
    "borrowed_table_in_class_body": ("import dataclasses\n@dataclasses.dataclass\nclass D:\n    ctypes: object = None\n"
                                     "import numpy as np\nclass A(np.ndarray):\n"
                                     "    __dataclass_fields__ = D.__dataclass_fields__", "BuiltinDenied"),
    "borrowed_table_written": ("import dataclasses\n@dataclasses.dataclass\nclass D:\n    x: int = 0\nclass A:\n"
                               "    pass\nA.__dataclass_fields__ = D.__dataclass_fields__", "AttributeDenied"),
    "borrowed_table_by_enum_functional_api": ("import enum, dataclasses\n@dataclasses.dataclass\nclass D:\n"
                                              "    x: int = 0\nE = enum.Enum('E', {'__dataclass_fields__': "
                                              "D.__dataclass_fields__, 'A': 1})", "BuiltinDenied"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_FIELDS))
def test_dataclass_fields_the_cell_could_not_write_are_refused(run, case):
    source, ename = REFUSED_FIELDS[case]
    r = run(source)
    assert not r.ok and r.error_name == ename and ("field" in r.error_value or "__dataclass_fields__" in
                                                   r.error_value), r


def test_replace_cannot_hand_out_hidden_members(run):
    """R17-1b: replace() of an rv_continuous subclass with borrowed fields handed the cell the instance's
    __setattr__ and _attach_argparser_methods, which together exec()'d the cell's text."""
    r = run("import dataclasses, scipy.stats as st\nclass D:\n"
            "    __annotations__ = {'_attach_argparser_methods': object, '__setattr__': object}\n"
            "try:\n    D = dataclasses.dataclass(D)\nexcept Exception as e:\n    print('dataclass', type(e).__name__)\n"
            "class R(st.rv_continuous):\n    def _pdf(self, x):\n        return 1.0\n"
            "    try:\n        __dataclass_fields__ = D.__dataclass_fields__\n    except AttributeError:\n"
            "        pass\nr = R()\ntry:\n    dataclasses.replace(r)\nexcept Exception as e:\n"
            "    print('replace', type(e).__name__)")
    assert r.ok and r.stdout == "dataclass CallDenied\nreplace TypeError\n", r


HONEST_DATACLASSES = {
    "private_field": ("import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int\n"
                      "    _cache: dict = dataclasses.field(default_factory=dict)\n"
                      "p = P(1)\nprint(dataclasses.replace(p, x=2), dataclasses.asdict(p))",
                      "P(x=2, _cache={}) {'x': 1, '_cache': {}}\n"),
    "frozen_slots": ("import dataclasses\n@dataclasses.dataclass(frozen=True, slots=True)\nclass Q:\n    a: int\n"
                     "    b: str = 'z'\nprint(Q(1), dataclasses.replace(Q(1), b='y'))", "Q(a=1, b='z') Q(a=1, b='y')\n"),
    "inheritance": ("import dataclasses\n@dataclasses.dataclass\nclass P:\n    x: int\n    _n: int = 0\n"
                    "@dataclasses.dataclass\nclass R(P):\n    y: float = 0.0\nprint(R(1, 2, 3.0))", "R(x=1, _n=2, y=3.0)\n"),
    "public_field_on_library_subclass": ("import dataclasses, pandas as pd\n@dataclasses.dataclass\n"
                                         "class Note(Exception):\n    text: str = ''\nprint(repr(Note('a').text))",
                                         "'a'\n"),
}


@pytest.mark.parametrize("case", sorted(HONEST_DATACLASSES))
def test_honest_dataclasses_still_work(run, case):
    source, expected = HONEST_DATACLASSES[case]
    r = run(source)
    assert r.ok and r.stdout == expected, r
