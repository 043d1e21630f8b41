"""The special-method sink: what a class made or changed while a cell runs binds under a name Python calls by itself.

Python calls a class's special methods implicitly (repr, str, hash, ==, len, iteration, format, attribute lookup,
a descriptor's __get__, a finalizer), and so does the host after the cell: Tab completion and inspection, the
kernel's log of an exception, a library's process-wide hook (numpy.ma's masked print option), the garbage
collector, a kernel thread. A function the cell defined stops at its first tick there; a *library* callable bound
in its place (functools.partial(np.savetxt, outside, ...)) is not cell code and would run unconfined. So while a
cell runs, every special method of a class made or changed on its behalf must be a function the cell defined (or
a staticmethod, classmethod or property of one), None, or a builtin type's own method (gates.check_new_class at
creation, gates.check_class_write for every later write, from type's setattr slot: _numpyguard.c).

Each attack tries one route, catches the refusal, and leaves `obj` (an instance of whatever class came to exist)
for the host to touch through each touch point; the assertions are that the route was refused with a denial
naming the attribute and the rule, that no file appeared outside the working directory, and that the kernel
still answers. The honest cases (dataclasses, total_ordering, enum, NamedTuple, ABCs, properties, builtin slot
methods, pandas and numpy subclasses, a library's own class made at call time) must keep working.

The last section is the data-only sibling (N3-3): process-wide settings of granted libraries a cell changes are
its engine's, never the host's.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import pytest

from childcell import REPO, run_cell_in_child, run_in_engine
from test_attacks_registries import REPORT_HOST_MASKED_REPR

PAYLOAD = "echo PWNED-BY-A-SPECIAL-METHOD"


def _writer(path) -> str:
    """A library callable that writes PAYLOAD to `path`, whatever argument follows (np.savetxt writes the rows
    before it looks at `footer`): the value a cell binds as a special method."""
    return (f"functools.partial(np.savetxt, {str(path)!r}, np.array([{PAYLOAD!r}], dtype=object), "
            "'%s', ' ', '\\n', '')")


PRELUDE = "import enum, functools, typing, numpy as np\n"

# How a cell could bind a callable under a special name. {slot} is the name, {writer} the library callable;
# each leaves an instance in `obj` (of the hostile class, had it been made; else of a plain one).
ROUTES = {
    "class_body": "class C(str):\n    {slot} = {writer}\n",
    "staticmethod": "class C(str):\n    {slot} = staticmethod({writer})\n",
    "classmethod": "class C(str):\n    {slot} = classmethod({writer})\n",
    "property": "class C(str):\n    {slot} = property({writer})\n",
    "written_after": "class C(str):\n    pass\nC.{slot} = {writer}\n",
    "setattr": "class C(str):\n    pass\nsetattr(C, {slot!r}, {writer})\n",
    # enum's metaclass writes through its own __setattr__, which ends in type.__setattr__
    "enum_written_after": "class C(str, enum.Enum):\n    A = 'x'\nC.{slot} = {writer}\n",
    # library factories: the namespace is the cell's, type() is called by the library
    "enum_functional": "C = enum.Enum('C', {{'A': 'x', {slot!r}: {writer}}}, type=str)\n",
    # typing's NamedTupleMeta makes the class with namedtuple, then setattr()s the cell's body on it: the write
    # gate never sees these writes, type's setattr does
    "named_tuple_body": "class C(typing.NamedTuple):\n    a: str = 'x'\n    {slot} = {writer}\n",
}
ROUTE_FALLBACK = {"enum_written_after": "class C(str, enum.Enum):\n    A = 'x'\n",
                  "enum_functional": "C = enum.Enum('C', {'A': 'x'}, type=str)\n",
                  "named_tuple_body": "class C(typing.NamedTuple):\n    a: str = 'x'\n"}
ROUTE_INSTANCE = {"enum_written_after": "C.A", "enum_functional": "C.A", "named_tuple_body": "C()"}

# The names whose refusal is tested through every route, each with the host touch that calls it.
SLOTS = ("__repr__", "__str__", "__format__", "__eq__", "__hash__", "__len__", "__iter__", "__getattribute__",
         "__getattr__", "__bool__", "__contains__", "__getitem__")


def _attack_cell(route: str, slot: str, target) -> str:
    body = ROUTES[route].format(slot=slot, writer=_writer(target))
    fallback = ROUTE_FALLBACK.get(route, "class C(str):\n    pass\n")
    instance = ROUTE_INSTANCE.get(route, "C('x')")
    return (PRELUDE + "refused = ''\ntry:\n" + textwrap.indent(body, "    ") +
            "except Exception as exc:\n    refused = str(exc)\n" +
            "    try:\n        C\n    except NameError:\n" + textwrap.indent(fallback, "        ") +
            f"obj = {instance}\n")


HOST_TOUCHES = {
    "repr": repr, "str": str, "format": lambda o: format(o, ""), "eq": lambda o: o == "x", "hash": hash,
    "len": len, "iter": lambda o: list(iter(o)), "getattr": lambda o: getattr(o, "missing_name", None),
    "class": lambda o: o.__class__, "bool": bool, "contains": lambda o: "x" in o, "getitem": lambda o: o[0],
    "format_spec": lambda o: f"{o!s:>3}",
}


def touch_from_the_host(obj) -> None:
    """What host code may do with a cell's object after the cell (each special method Python calls by itself);
    each touch may fail, none may act."""
    for touch in HOST_TOUCHES.values():
        try:
            touch(obj)
        except BaseException:   # noqa: BLE001 - a refusal or a TypeError is what is expected here
            pass


@pytest.mark.parametrize("slot", SLOTS)
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_library_callable_cannot_become_a_special_method(sandbox, outside, route, slot):
    target = outside / f"{route}{slot}.sh"
    r = sandbox.run(_attack_cell(route, slot, target))
    assert r.ok, r
    assert not target.exists(), "the cell itself wrote outside the workdir"
    refused = sandbox.ns["refused"]
    assert slot in refused and r.denied("attribute"), r   # (__getattr__ and __getattribute__ writes: never allowed)
    assert "special method" in refused or "cannot be changed" in refused, r
    obj = sandbox.ns["obj"]
    touch_from_the_host(obj)                                        # the host's own code, after the cell
    sandbox.engine.complete("obj.", 4)                              # Tab
    sandbox.engine.inspect("obj", 1)                                # Shift+Tab, JupyterLab's contextual help
    worker = threading.Thread(target=touch_from_the_host, args=(obj,))   # a kernel thread
    worker.start()
    worker.join()
    assert not target.exists(), "a library callable bound as a special method ran in the host"
    again = sandbox.run("print(6 * 7)")
    assert again.ok and again.stdout == "42\n", again


def test_the_denial_names_the_attribute_the_class_and_the_rule(sandbox, outside):
    r = sandbox.run(PRELUDE + f"class Shown(str):\n    __repr__ = {_writer(outside / 'x.sh')}\n")
    assert r.error_name == "AttributeDenied", r
    assert "'__repr__' (a functools.partial object) of class Shown" in r.error_value, r
    assert "a special method must be a function defined in the cell" in r.error_value, r
    assert r.error_line == 2 and r.denied("attribute", line=2), r


# Values that are not the cell's code, however harmless they look: each is a library's code that Python would
# call with the cell's object, outside the cell too.
LIBRARY_VALUES = {
    "library_python_method": "enum.Enum.__repr__",            # reads self.__class__._value_repr_: the cell's
    "pandas_method": "pd.DataFrame.__repr__",
    "numpy_c_slot": "np.ndarray.__repr__",                      # a slot wrapper, but not of a builtin type
    "numpy_function": "np.save",
    "operator_function": "operator.eq",
    "attrgetter": "operator.attrgetter('real')",
    "bound_library_method": "pd.DataFrame({'a': [1]}).to_csv",
    "partial_of_a_builtin": "functools.partial(divmod, 1)",
    "a_cell_object_with_call": "Caller()",
    "runtime_function": "print",
    "module_builtin": "len",
    "classmethod_of_a_library_function": "classmethod(np.save)",
    "property_of_a_library_function": "property(np.save)",
}


@pytest.mark.parametrize("value", sorted(LIBRARY_VALUES))
def test_library_callables_of_every_kind_are_refused(sandbox, value):
    r = sandbox.run(PRELUDE + "import operator, pandas as pd\nclass Caller:\n    def __call__(self, *args):\n"
                    "        return 'x'\n" + f"class C:\n    __repr__ = {LIBRARY_VALUES[value]}\n")
    assert r.error_name == "AttributeDenied" and "'__repr__'" in r.error_value, r


def test_a_str_subclass_name_does_not_hide_a_special_method(sandbox, outside):
    """A namespace key equal to '__repr__' in characters but not by its own __eq__ (F3's trick)."""
    target = outside / "sly.sh"
    r = sandbox.run(PRELUDE + "class Sly(str):\n    def __eq__(self, other):\n        return False\n"
                    "    __hash__ = str.__hash__\n" +
                    f"C = enum.Enum('C', {{'A': 'x', Sly('__repr__'): {_writer(target)}}}, type=str)\n")
    # refused before any name is compared: a class namespace takes plain str keys only (or, reached by
    # enum's member dict first, the same rule there)
    assert not r.ok and r.error_name in ("AttributeDenied", "BuiltinDenied", "TypeError"), r
    assert not target.exists()
    assert "C" not in sandbox.ns


# --- descriptors and the class machinery: the slot is called on another class, or by type itself -------------

DESCRIPTOR_ROUTES = {
    "descriptor_get": ("class D:\n    __get__ = {writer}\nclass H:\n    x = D()\nobj = H()",
                       lambda obj: obj.x),
    "descriptor_set": ("class D:\n    def __get__(self, obj, owner=None):\n        return 1\n"
                       "    __set__ = {writer}\nclass H:\n    x = D()\nobj = H()",
                       lambda obj: setattr(obj, "x", 2)),
    "set_name": ("class D:\n    __set_name__ = {writer}\nobj = D()",
                 lambda obj: type("Host", (), {"x": obj})),
    "init_subclass": ("class C:\n    __init_subclass__ = classmethod({writer})\nobj = C()",
                      lambda obj: type("Host", (type(obj),), {})),
    "class_getitem": ("class C:\n    __class_getitem__ = classmethod({writer})\nobj = C()",
                      lambda obj: type(obj)[int]),
    "missing": ("class C(dict):\n    __missing__ = {writer}\nobj = C()", lambda obj: obj["absent"]),
    "fspath": ("class C:\n    __fspath__ = {writer}\nobj = C()", lambda obj: __import__("os").fspath(obj)),
    "enter_exit": ("class C:\n    __enter__ = {writer}\n    __exit__ = {writer}\nobj = C()",
                   lambda obj: obj.__enter__()),
}


@pytest.mark.parametrize("route", sorted(DESCRIPTOR_ROUTES))
def test_descriptors_and_class_hooks_take_no_library_callable(sandbox, outside, route):
    target = outside / f"{route}.sh"
    body, touch = DESCRIPTOR_ROUTES[route]
    cell = PRELUDE + "refused = ''\ntry:\n" + textwrap.indent(body.format(writer=_writer(target)), "    ") + \
        "\nexcept Exception as exc:\n    refused = str(exc)\n    class Plain:\n        pass\n    obj = Plain()\n"
    r = sandbox.run(cell)
    assert r.ok and "special method" in sandbox.ns["refused"], r
    try:
        touch(sandbox.ns["obj"])
    except BaseException:   # noqa: BLE001
        pass
    assert not target.exists(), "a hook bound by the cell ran a library callable in the host"


def test_a_finalizer_is_still_the_cells_own_and_the_collector_runs_nothing(sandbox, outside):
    import gc
    target = outside / "finalizer.sh"
    r = sandbox.run(PRELUDE + "refused = []\nfor make in ('class_body', 'enum'):\n    try:\n"
                    "        if make == 'class_body':\n"
                    f"            class F:\n                __del__ = {_writer(target)}\n"
                    "        else:\n"
                    f"            F = enum.Enum('F', {{'A': 1, '__del__': {_writer(target)}}})\n"
                    "    except Exception as exc:\n        refused.append(type(exc).__name__)\n")
    assert r.ok and sandbox.ns["refused"] == ["BuiltinDenied", "BuiltinDenied"], r
    gc.collect()
    assert not target.exists()


# --- the kernel's log: an exception class whose special methods the logging traceback calls ---------------

KERNEL_LIKE_CHILD = textwrap.dedent("""
    import io, json, logging, sys, tempfile, traceback
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS
    log = logging.getLogger("kernel-like")
    log.addHandler(logging.StreamHandler(io.StringIO()))
    eng = Engine(PRESETS["data-science"], workdir=tempfile.mkdtemp())
    report = {}
    try:
        done = eng.run_cell(sys.argv[1], emit=lambda e: None)
        report["status"], report["ename"] = done["status"], (done["error"] or {}).get("ename")
    except BaseException as exc:
        report["run_cell_raised"] = type(exc).__name__
        log.error("sandbox backend failed", exc_info=True)   # what kernel.py does with it
    print(json.dumps(report))
""")


@pytest.mark.parametrize("slot", ["__getattribute__", "__str__", "__repr__", "__getattr__"])
def test_an_exception_class_cannot_carry_a_library_callable_to_the_kernels_log(outside, slot):
    target = outside / f"exception{slot}.sh"
    cell = PRELUDE + f"class E(Exception):\n    {slot} = {_writer(target)}\nraise E('boom')\n"
    out = subprocess.run([sys.executable, "-c", KERNEL_LIKE_CHILD, cell], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"status": "error", "ename": "AttributeDenied"}, (report, out.stderr[-1000:])
    assert not target.exists()


# --- a library's process-wide hook: numpy.ma prints what masked_print_option holds ---------------------------

MASKED_PRINT = """\
import functools, numpy as np
try:
    class Shown:
        __str__ = {writer}
except Exception:
    class Shown:
        pass
np.ma.masked_print_option.set_display(Shown())
"""

HOST_PRINTS_A_MASKED_ARRAY = REPORT_HOST_MASKED_REPR   # the second review's probe (N2-4's sibling)


def test_a_library_hook_holding_the_cells_object_runs_no_library_callable(outside):
    target = outside / "masked.sh"
    result = run_cell_in_child(MASKED_PRINT.format(writer=_writer(target)), report=("status", "denials"),
                               probe=HOST_PRINTS_A_MASKED_ARRAY.format(path=str(target)), hard_exit=True, timeout=60)
    assert result.get("status") == "ok" and result.get("denials") == 1, result
    assert result.get("written") is False and result.get("host_repr") == "[-- 2]", result
    assert not target.exists()


# --- through a real kernel at level none ----------------------------------------------------------------------

def test_through_a_kernel_completion_and_inspection_run_no_library_callable(tmp_path, outside):
    from kernel_helpers import shell_request, start_client

    target = outside / "kernel.sh"
    workdir = tmp_path / "kernel-work"
    workdir.mkdir()
    client = start_client(cwd=str(workdir), isolation="none")
    try:
        r = client.run(_attack_cell("class_body", "__repr__", target), timeout=60)
        assert r["status"] == "ok", r
        r = client.run(_attack_cell("written_after", "__getattribute__", target).replace("obj =", "obj2 ="),
                       timeout=60)
        assert r["status"] == "ok", r
        for code in ("obj", "obj2"):
            shell_request(client, "inspect_request", {"code": code, "cursor_pos": len(code), "detail_level": 1},
                          timeout=30)
            shell_request(client, "complete_request", {"code": code + ".", "cursor_pos": len(code) + 1}, timeout=30)
        alive = client.km.is_alive()
        after = client.run("print(6 * 7)", timeout=30)["output"] if alive else None
    finally:
        client.shutdown()
    assert not target.exists(), "the kernel ran a library callable bound as a special method"
    assert alive and after == "42\n", (alive, after)


# --- without the C extension: the namespace check in type.__new__/build_class, the cell's writes in the gate ---

NO_EXTENSION = """\
import json, sys, tempfile
sys.modules['sandbox_kernel._numpyguard'] = None     # as if the C extension had not been built
import os; os.environ['SANDBOX_KERNEL_PYTHON_GUARDS'] = '1'   # the operator accepts the fallbacks (engine.py)
from sandbox_kernel import gates
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
assert not gates.CLASS_SINK_IN_C and not gates.CLASS_WRITES_IN_C
eng = Engine(PRESETS['data-science'], workdir=tempfile.mkdtemp())
report = {}
for name, cell in json.loads(sys.argv[1]).items():
    done = eng.run_cell(cell, emit=lambda e: None)
    report[name] = (done['error'] or {}).get('ename') or eng.namespace.get('answer')
print(json.dumps(report))
"""


def test_without_the_extension_the_cells_own_routes_are_refused(outside):
    target = outside / "no-extension.sh"
    writer = _writer(target)
    cells = {"class_body": PRELUDE + f"class C(str):\n    __repr__ = {writer}\n",
             "written_after": PRELUDE + f"class C(str):\n    pass\nC.__str__ = {writer}\n",
             "setattr": PRELUDE + f"class C(str):\n    pass\nsetattr(C, '__eq__', {writer})\n",
             "enum_functional": PRELUDE + f"C = enum.Enum('C', {{'A': 1, '__repr__': {writer}}})\n",
             "enum_class": PRELUDE + f"class C(enum.Enum):\n    A = 1\n    __repr__ = {writer}\n",
             "honest": PRELUDE + "import dataclasses\n@functools.total_ordering\n@dataclasses.dataclass(frozen=True)\n"
                                 "class D:\n    x: int\n    def __lt__(self, other):\n        return self.x < other.x\n"
                                 "class E(enum.Enum):\n    A = 1\nclass S(str):\n    pass\n"
                                 "S.__str__ = lambda self: 'S'\nanswer = f'{D(1) >= D(0)} {D(2)} {E.A!r} {S()}'\n"}
    out = subprocess.run([sys.executable, "-c", NO_EXTENSION, json.dumps(cells)], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"class_body": "AttributeDenied", "written_after": "AttributeDenied", "setattr": "AttributeDenied",
                      "enum_functional": "AttributeDenied", "enum_class": "AttributeDenied",
                      "honest": "True D(x=2) <E.A: 1> S"}, report
    assert not target.exists()


# --- honest code keeps working ----------------------------------------------------------------------------------

HONEST = {
    "dataclass_generated_methods": (
        "import dataclasses\n@dataclasses.dataclass(order=True, frozen=True, slots=True)\nclass D:\n    x: int\n"
        "    y: str = 'a'\nprint(D(1) < D(2), D(1), hash(D(1)) == hash(D(1)), dataclasses.replace(D(1), y='b'))",
        "True D(x=1, y='a') True D(x=1, y='b')\n"),
    "dataclass_unsafe_hash_and_post_init": (
        "import dataclasses\n@dataclasses.dataclass(unsafe_hash=True)\nclass D:\n    x: int\n"
        "    def __post_init__(self):\n        self.x += 1\nprint(D(1), len({D(1), D(1)}))", "D(x=2) 1\n"),
    "total_ordering": (
        "import functools\n@functools.total_ordering\nclass T:\n    def __init__(self, v):\n        self.v = v\n"
        "    def __eq__(self, o):\n        return self.v == o.v\n    def __lt__(self, o):\n        return self.v < o.v\n"
        "print(T(1) >= T(0), T(1) > T(2), T(2) <= T(2))", "True False True\n"),
    "enum_kinds": (
        "import enum\nclass C(enum.Enum):\n    A = 1\nclass F(enum.Flag):\n    X = 1\n    Y = 2\n"
        "class I(enum.IntEnum):\n    Q = 3\nclass S(enum.StrEnum):\n    Z = 'z'\nE = enum.Enum('E', 'A B')\n"
        "print(C.A, repr(C.A), F.X | F.Y, I.Q + 1, S.Z, f'{S.Z}', list(E))",
        "C.A <C.A: 1> F.X|Y 4 z z [<E.A: 1>, <E.B: 2>]\n"),
    "enum_with_own_methods": (
        "import enum\nclass C(enum.Enum):\n    A = 1\n    def __str__(self):\n        return 'own'\n"
        "    def describe(self):\n        return self.name.lower()\nprint(C.A, C.A.describe())", "own a\n"),
    "named_tuples": (
        "import collections, typing\nclass P(typing.NamedTuple):\n    x: int\n    y: int = 2\n"
        "    def __repr__(self):\n        return f'P<{self.x},{self.y}>'\nQ = collections.namedtuple('Q', 'a b')\n"
        "print(P(1), P(1)._replace(y=3).y, Q(1, 2), Q._make([3, 4]))", "P<1,2> 3 Q(a=1, b=2) Q(a=3, b=4)\n"),
    "typed_dict_abc_protocol": (
        "import abc, typing\nclass TD(typing.TypedDict):\n    a: int\nclass A(abc.ABC):\n    @abc.abstractmethod\n"
        "    def f(self): ...\nclass B(A):\n    def f(self):\n        return 1\n@typing.runtime_checkable\n"
        "class Pr(typing.Protocol):\n    def f(self) -> int: ...\nclass Impl(Pr):\n    def f(self):\n        return 2\n"
        "print(TD(a=1), B().f(), Impl().f(), isinstance(B(), Pr))", "{'a': 1} 1 2 True\n"),
    "properties_and_aliases": (
        "import functools\nclass K:\n    def __init__(self):\n        self._x = 0\n    @property\n    def x(self):\n"
        "        return self._x\n    @x.setter\n    def x(self, v):\n        self._x = v\n"
        "    @functools.cached_property\n    def c(self):\n        return 5\n    def __lt__(self, o):\n"
        "        return True\n    __gt__ = __lt__\n    def __str__(self):\n        return 'K'\n    __repr__ = __str__\n"
        "    __hash__ = None\n    __len__ = property(lambda self: 1).fget\nk = K()\nk.x = 3\n"
        "print(k.x, k.c, repr(k), k > k, len(k))", "3 5 K True 1\n"),
    "builtin_slot_methods": (
        "class A(dict):\n    __getattr__ = dict.__getitem__\n    __setattr__ = dict.__setitem__\n"
        "    __eq__ = object.__eq__\n    __iter__ = dict.__iter__\n"
        "class L(list):\n    __hash__ = object.__hash__\na = A(p=1)\na.q = 2\nprint(a.p, a.q, a == a, hash(L()) > 0)",
        "1 2 True True\n"),
    "class_getitem_and_init_subclass": (
        "class G:\n    def __class_getitem__(cls, item):\n        return f'G[{item.__name__}]'\n"
        "class Base:\n    registry = []\n    def __init_subclass__(cls, **kw):\n        Base.registry.append(kw)\n"
        "class Sub(Base, tag='x'):\n    pass\nprint(G[int], Base.registry)", "G[int] [{'tag': 'x'}]\n"),
    "descriptors": (
        "class D:\n    def __set_name__(self, owner, name):\n        self.n = name\n"
        "    def __get__(self, inst, owner=None):\n        return self.n\nclass H:\n    attr = D()\nprint(H().attr)",
        "attr\n"),
    "partial_and_bound_method_of_the_cells_functions": (
        "import functools\ndef show(self, prefix):\n    return prefix + 'shown'\nclass Helper:\n    def eq(self, o):\n"
        "        return True\nclass C:\n    __repr__ = functools.partialmethod(show, 'p-')\n    __eq__ = Helper().eq\n"
        "C.__str__ = functools.partial(show, None, 's-')\nprint(repr(C()), str(C()), C() == 1)", "p-shown s-shown True\n"),
    "written_after_creation": (
        "class S:\n    pass\nS.__hash__ = None\nS.__eq__ = object.__eq__\nS.__str__ = lambda self: 'S'\n"
        "print(str(S()), S.__hash__)", "S None\n"),
    "pandas_and_numpy_subclasses": (
        "import pandas as pd, numpy as np\nclass MyDF(pd.DataFrame):\n    _metadata = ['tag']\n    @property\n"
        "    def _constructor(self):\n        return MyDF\nclass Arr(np.ndarray):\n"
        "    def __array_finalize__(self, obj):\n        self.info = getattr(obj, 'info', None)\n"
        "df = MyDF({'a': [1, 2]})\na = np.arange(3).view(Arr)\n"
        "print(type(df.head(1)).__name__, type(df + 1).__name__, type(a * 2).__name__)", "MyDF MyDF Arr\n"),
    "a_librarys_own_class_made_at_call_time": (   # plotly's chomp_empty_strings defines a class on every call
        "import plotly.graph_objects as go\nfig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))\n"
        "fig.update_layout(title='t')\nprint(len(fig.data), fig.layout.title.text)", "1 t\n"),
}


@pytest.mark.parametrize("case", sorted(HONEST))
def test_honest_special_methods_keep_working(run, case):
    cell, expected = HONEST[case]
    r = run(cell)
    assert r.ok and r.stdout == expected, r
    assert not r.denials, r


# --- closed: a library's own special method that calls an ordinary attribute the cell set ---------------------
# The sink decides the names Python calls by itself. A library class's special method may call an ordinary
# attribute of the class (enum's __repr__ calls self.__class__._value_repr_, pandas' operations call
# self._constructor): a library callable the cell writes there runs wherever the host calls that special method
# on the cell's object. The host's own touch points (completion, inspection, the kernel's log) call nothing of a
# cell's object (N3-1, N3-2); a host that printed or computed with one would run it. Now a callable that
# overrides an attribute a library base defines meets the special-method rule (gates._library_override_refusal).

ORDINARY_ATTRIBUTE_ROUTES = {
    "enum_value_repr": ("import enum\nclass E(enum.Enum):\n    A = 1\nE._value_repr_ = {writer}\nobj = E.A\n", repr),
    "pandas_constructor": ("import pandas as pd\nclass M(pd.DataFrame):\n    pass\nM._constructor = {writer}\n"
                           "obj = M({{'a': [1]}})\n", lambda obj: obj + 1),
    # variants (added with the fix): in the class body, through setattr
    "pandas_constructor_in_the_body": ("import pandas as pd\nclass M(pd.DataFrame):\n    _constructor = {writer}\n"
                                       "obj = M({{'a': [1]}})\n", lambda obj: obj + 1),
    "enum_value_repr_by_setattr": ("import enum\nclass E(enum.Enum):\n    A = 1\nsetattr(E, '_value_repr_', {writer})\n"
                                   "obj = E.A\n", repr),
}


@pytest.mark.parametrize("route", sorted(ORDINARY_ATTRIBUTE_ROUTES))
def test_a_library_special_method_calls_no_library_callable_the_cell_placed(sandbox, outside, route):
    target = outside / f"{route}.sh"
    cell, touch = ORDINARY_ATTRIBUTE_ROUTES[route]
    r = sandbox.run(PRELUDE + cell.format(writer=_writer(target)))
    assert r.ok or r.denials, r
    try:
        touch(sandbox.ns["obj"])
    except BaseException:   # noqa: BLE001
        pass
    assert not target.exists(), "the host's call of a library special method ran the cell's library callable"


# --- process-wide library data is the engine's (N3-3 and its siblings) ---------------------------------------
# Not code: settings a granted library reads for everyone. Each is the engine's own (guards.LIBRARY_STATE): a
# later cell of the same engine sees what the cell set, the host and another engine keep their own.

ENGINE_DATA = {
    "plotly_template_default": ("import plotly.io as pio\npio.templates.default = 'plotly_white'\n",
                                "import plotly.io as pio\nvalue = pio.templates.default", "plotly_white"),
    "plotly_template_registered": ("import plotly.io as pio\npio.templates['zz'] = {'layout': {'width': 123}}\n",
                                   "import plotly.io as pio\nvalue = 'zz' in pio.templates", True),
    "plotly_template_mutated": ("import plotly.io as pio\npio.templates['plotly'].layout.width = 321\n",
                                "import plotly.io as pio\nvalue = pio.templates['plotly'].layout.width", 321),
    "calendar_first_weekday": ("import calendar\ncalendar.setfirstweekday(6)\n",
                               "import calendar\nvalue = calendar.firstweekday()", 6),
    "dateutil_word_list": ("import dateutil.parser as dp\ndp.parserinfo.JUMP.append('zzjump')\n",
                           "import dateutil.parser as dp\nvalue = 'zzjump' in dp.parserinfo.JUMP", True),
    "dateutil_offsets": ("import dateutil.parser as dp\ndp.parserinfo.TZOFFSET['ZZT'] = 3600\n",
                         "import dateutil.parser as dp\nvalue = dp.parserinfo.TZOFFSET.get('ZZT')", 3600),
    "scipy_special_errors": ("import scipy.special as sc\nsc.seterr(singular='raise')\n",
                             "import scipy.special as sc\nvalue = sc.geterr()['singular']", "raise"),
    "numpy_polynomial_print_style": ("import numpy as np\nnp.polynomial.set_default_printstyle('ascii')\n",
                                     "import numpy as np\nvalue = str(np.polynomial.Polynomial([1, 2]))",
                                     "1.0 + 2.0 x"),
}


def _host_value(check: str):
    namespace: dict = {}
    exec(check, namespace)   # the host's own view, outside any cell
    return namespace["value"]


@pytest.mark.parametrize("data", sorted(ENGINE_DATA))
def test_library_data_a_cell_sets_is_its_engines_and_never_the_hosts(tmp_path, data):
    from conftest import Sandbox

    write, check, expected = ENGINE_DATA[data]
    before = _host_value(check)
    assert before != expected
    engine = Sandbox(tmp_path / "work")
    r = engine.run(write)
    assert r.ok, r
    assert _host_value(check) == before, "the cell changed the host's library data"
    r = engine.run(check)                                     # a later cell of the same engine
    assert r.ok and engine.ns["value"] == expected, r
    other = Sandbox(tmp_path / "other")                       # another engine starts from the host's
    r = other.run(check)
    assert r.ok and other.ns["value"] == before, r
    assert _host_value(check) == before


# ====================================================================================================================
# Sink: special methods of a class made or changed while a cell runs.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 5 (docs/reviews.md, "Review 5").
@pytest.mark.parametrize("name", ["__repr__", "__eq__", "__call__"])
def test_partial_subclass_is_refused_as_a_special_method(tmp_path, name):
    done, _ = run_in_engine("import functools\nclass P(functools.partial):\n    pass\n"
                         f"class C:\n    {name} = P(print, 'x')\n", tmp_path)
    assert done["status"] == "error" and done["error"]["ename"] == "AttributeDenied", done
