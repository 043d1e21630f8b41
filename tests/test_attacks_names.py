"""Must-block: the reserved gate namespace (__st_*__) and the runtime's names cannot be read, bound or
shadowed at any binding site; attribute names that are not plain str, or that NFKC-normalise to a
hidden name, cannot fool the gates."""
from __future__ import annotations

import sys

import pytest

from childcell import run_in_engine

G = "__st_getattr__"

# (source, line of the offending name). Every source binds or reads a reserved name.
BINDING_SITES = [
    (f"{G} = print", 1),
    (f"{G} += 1", 1),
    (f"{G}: int = 1", 1),
    (f"a, *{G} = [1, 2]", 1),
    (f"({G}) = 1", 1),
    (f"[a, ({G}, b)] = [1, (2, 3)]", 1),
    (f"print(({G} := 1))", 1),
    (f"for {G} in [1]:\n    pass", 1),
    (f"for a, {G} in [(1, 2)]:\n    pass", 1),
    (f"x = [1 for {G} in [1]]", 1),
    (f"x = {{1 for {G} in [1]}}", 1),
    (f"x = {{k: 1 for k, {G} in [(1, 2)]}}", 1),
    (f"x = list(1 for {G} in [1])", 1),
    (f"x = [y for y in [1] if ({G} := y)]", 1),
    (f"def f({G}):\n    pass", 1),
    (f"def f({G}, /):\n    pass", 1),
    (f"def f(a, /, {G}=1):\n    pass", 1),
    (f"def f(*, {G}):\n    pass", 1),
    (f"def f(*{G}):\n    pass", 1),
    (f"def f(**{G}):\n    pass", 1),
    (f"async def f({G}, /):\n    pass", 1),
    (f"f = lambda {G}: 0", 1),
    (f"f = lambda {G}, /: 0", 1),
    (f"f = lambda *, {G}: 0", 1),
    (f"f = lambda *{G}: 0", 1),
    (f"def {G}():\n    pass", 1),
    (f"async def {G}():\n    pass", 1),
    (f"class {G}:\n    pass", 1),
    (f"class C:\n    {G} = 1", 2),
    (f"class C:\n    def {G}(self):\n        pass", 2),
    (f"import math as {G}", 1),
    (f"import math.floor as {G}", 1),
    (f"from math import floor as {G}", 1),
    (f"from math import {G}", 1),
    (f"import {G}", 1),
    (f"try:\n    pass\nexcept Exception as {G}:\n    pass", 3),
    (f"try:\n    pass\nexcept* Exception as {G}:\n    pass", 3),
    (f"match 1:\n    case {G}:\n        pass", 2),
    (f"match 1:\n    case int() as {G}:\n        pass", 2),
    (f"match [1, 2]:\n    case [1, *{G}]:\n        pass", 2),
    (f"match {{'a': 1}}:\n    case {{**{G}}}:\n        pass", 2),
    (f"match {{'a': 1}}:\n    case {{'a': {G}}}:\n        pass", 2),
    (f"match 1:\n    case (1 | 2) as {G}:\n        pass", 2),
    (f"match (1, 2):\n    case (a, {G}):\n        pass", 2),
    (f"global {G}", 1),
    (f"def f():\n    global {G}\n    {G} = 1", 2),
    (f"def f():\n    {G} = 1\n    def g():\n        nonlocal {G}", 2),
    (f"del {G}", 1),
    (f"with open('x', 'w') as {G}:\n    pass", 1),
    (f"with open('x', 'w') as (a, {G}):\n    pass", 1),
    # reading the gate or the runtime's names
    (f"print({G})", 1),
    (f"x = {G}(1, 'real')", 1),
    ("x = __st_tick__", 1),
    ("x = __st_import__('os', False)", 1),
    ("x = __st_write__", 1),
    ("x = __st_matched__", 1),
    ("x = __st_anything_new__", 1),
    ("x = __builtins__", 1),
    ("x = __builtins__['__import__']('os')", 1),
    ("x = __import__('os')", 1),
    ("x = __build_class__", 1),
    ("x = __loader__", 1),
    ("x = __spec__", 1),
    ("x = __file__", 1),
    ("x = __dict__", 1),
    ("__builtins__ = {}", 1),
    ("__name__ = 'x'", 1),
    ("__class__ = 1", 1),
    ("def f(__builtins__):\n    pass", 1),
    ("for __builtins__ in [1]:\n    pass", 1),
    # NFKC: the parser normalises fullwidth/compatibility characters to the reserved name
    ("__\uff53\uff54_getattr__ = 1", 1),
    ("x = __\uff42uiltins__", 1),
    ("def f(__\uff53t_tick__):\n    pass", 1),
]


@pytest.mark.parametrize("src,line", BINDING_SITES, ids=[s.replace("\n", "/")[:60] for s, _ in BINDING_SITES])
def test_reserved_name_is_refused_before_running(sandbox, src, line):
    r = sandbox.run(f"print('ran')\n{src}\n")
    assert not r.ok, r
    assert r.error_name in ("NameDenied", "ValidationDenied", "SyntaxError"), r
    if r.error_name != "SyntaxError":
        assert r.denied("name", line=line + 1) or r.denied("syntax", line=line + 1), r
    assert r.stdout == "", "the cell must be refused before any of it runs"
    # the gates still work afterwards
    r2 = sandbox.run("x = ().__class__.__bases__")
    assert not r2.ok and r2.denied("attribute", line=1), r2


@pytest.mark.skipif(sys.version_info < (3, 12), reason="type parameters need Python 3.12")
@pytest.mark.parametrize("src", [f"def f[{G}](): pass", f"class C[{G}]: pass", f"type {G} = int",
                                 f"type T[{G}] = list", f"def f[*{G}](): pass", f"def f[**{G}](): pass"])
def test_reserved_name_in_type_params(sandbox, src):
    r = sandbox.run(src)
    assert not r.ok and (r.denied("name") or r.denied("syntax")), r


def test_locals_copy_cannot_shadow_gates(sandbox):
    r = sandbox.run("d = locals()\n"
                    "dict.__setitem__(d, '__st_getattr__', lambda o, n: 'SHADOWED')\n"
                    "print('__builtins__' in d, '__st_getattr__' in globals if False else 0)\n"
                    "x = ().__class__.__bases__\n")
    assert not r.ok and r.denied("attribute", line=4), r


def test_class_namespace_cannot_shadow_gates(sandbox):
    r = sandbox.run("class C:\n"
                    "    locals()['__st_getattr__'] = lambda o, n: getattr\n"
                    "    x = ().__class__.__bases__\n")
    assert not r.ok and r.denied("attribute", line=3), r


def test_kwargs_named_like_gates_do_not_shadow(sandbox):
    r = sandbox.run("def f(**kw):\n    return ().__class__.__bases__\n"
                    "f(**{'__st_getattr__': print})\n")
    assert not r.ok and r.denied("attribute", line=2), r


# --- attribute names that are not plain str -------------------------------------------------------

STR_SUBCLASSES = {
    "eq": "class N(str):\n    def __eq__(self, o):\n        return True\n    __hash__ = str.__hash__\n",
    "hash": "class N(str):\n    def __hash__(self):\n        return hash('__name__')\n"
            "    def __eq__(self, o):\n        return True\n",
    "startswith": "class N(str):\n    def startswith(self, *a):\n        return False\n"
                  "    def endswith(self, *a):\n        return False\n",
    "isascii": "class N(str):\n    def isascii(self):\n        return True\n",
    "str": "class N(str):\n    def __str__(self):\n        return 'name'\n    def __repr__(self):\n        return 'name'\n",
}


@pytest.mark.parametrize("kind", sorted(STR_SUBCLASSES))
@pytest.mark.parametrize("call", ["getattr(f, N('__globals__'))", "getattr(g, N('gi_frame'))",
                                  "getattr(int, N('__subclasses__'))", "getattr(f, N('__code__'))"])
def test_str_subclass_attribute_name(sandbox, kind, call):
    assert sandbox.run(STR_SUBCLASSES[kind] +
                       "def f():\n    pass\ndef gen():\n    yield 1\ng = gen()\n"
                       "f.__name__\nint.__name__\ng.__name__\n").ok   # warm the decision cache
    r = sandbox.run(f"x = {call}")
    assert not r.ok, r
    assert r.denied("attribute", line=1), r
    assert "x" not in sandbox.ns


@pytest.mark.parametrize("kind", sorted(STR_SUBCLASSES))
def test_str_subclass_name_for_writes(sandbox, kind):
    assert sandbox.run(STR_SUBCLASSES[kind] + "import math\nclass K:\n    pass\nk = K()\nk.name = 1\n").ok
    for call in ("setattr(math, N('pi'), 3)", "setattr(K, N('__bases__'), (object,))",
                 "setattr(k, N('__class__'), int)", "delattr(math, N('pi'))"):
        r = sandbox.run(call)
        assert not r.ok and r.denials, (call, r)
    import math
    assert math.pi == 3.141592653589793


@pytest.mark.parametrize("kind", sorted(STR_SUBCLASSES))
def test_str_subclass_module_name_for_import(sandbox, kind):
    assert sandbox.run(STR_SUBCLASSES[kind]).ok
    r = sandbox.run("import importlib\n")
    assert not r.ok
    r = sandbox.run("import math\nx = getattr(math, N('__loader__'))")
    assert not r.ok and r.denials, r


@pytest.mark.parametrize("name", ["__\uff47lobals__", "\uff47i_frame", "__cl\u0430ss__", "__globals__\u200b",
                                  "__globa\u217cs__"])
def test_non_ascii_attribute_names_in_getattr(sandbox, name):
    """getattr() receives the raw string (no parser normalisation): it either names nothing or is refused."""
    r = sandbox.run(f"def f():\n    pass\ndef gen():\n    yield 1\ng = gen()\n"
                    f"x = getattr(f, {name!r}, None) or getattr(g, {name!r}, None)\nprint(x)")
    assert "x" not in sandbox.ns or sandbox.ns["x"] is None, r


def test_nfkc_attribute_syntax_is_normalised_then_refused(run):
    r = run("def f():\n    pass\nx = f.__\uff47lobals__\n")
    assert not r.ok and r.denied("attribute", line=3), r
    r = run("def gen():\n    yield 1\nx = gen().\uff47i_frame\n")
    assert not r.ok and r.denied("attribute", line=3), r


# ====================================================================================================
# From review round 8: against the mechanisms of the second session
# (the C fast paths, the per-function own-instance flag, the stand-ins for numpy arrays, decimal contexts,
# deque and C iterators, the bounded numpy allocator, and the scrubbing of host paths from output).
# ====================================================================================================

# --- 1. the per-function own-instance flag: a mangled parameter rebound by its mangled name ---------------

MANGLED_ESCAPE = """\
import collections
class K:
    def go(self, __m, start, target):
        _K__m = start              # the same local as the parameter __m (Python mangles it to _K__m)
        _K__m = __m._sys           # read raw: the flag __st_own___m__ was computed for an O()
        mods = __m.modules
        _K__m = mods["sandbox_kernel.confine"]
        _K__m = __m._FS
        __m.set(None)              # the audit hook and the open() guards stand down
        _K__m = mods["os"]
        fd = __m.open(target, __m.O_WRONLY | __m.O_CREAT, 0o600)
        __m.write(fd, b"PWNED")
        __m.close(fd)
        return True
class O:
    pass
escaped = K().go(O(), collections, {target!r})
"""


def test_mangled_parameter_cannot_be_rebound_past_the_entry_flag(strict, outside):
    target = outside / "pwned.txt"
    r = strict.run(MANGLED_ESCAPE.format(target=str(target)))
    assert not target.exists(), "a file was written outside the working directory"
    assert not strict.ns.get("escaped"), r
    assert not r.ok and r.denials, r


@pytest.mark.parametrize("rebind", [
    "        _K__m = other\n",
    "        def swap():\n            nonlocal _K__m\n            _K__m = other\n        swap()\n",
])
def test_mangled_parameter_does_not_read_library_privates_raw(sandbox, rebind):
    r = sandbox.run("import pandas as pd\n"
                    "class K:\n"
                    "    def go(self, __m, other):\n" + rebind +
                    "        return __m._mgr\n"
                    "class O:\n    pass\n"
                    "mgr = K().go(O(), pd.DataFrame({'a': [1]}))\n")
    assert "mgr" not in sandbox.ns, type(sandbox.ns.get("mgr"))
    assert not r.ok and r.denied("attribute"), r


def test_unmangled_parameters_keep_their_entry_flag_honest(sandbox):
    """The same shape without mangling is rebinding the rewriter sees: the read goes to the gate."""
    r = sandbox.run("import pandas as pd\n"
                    "class K:\n"
                    "    def go(self, m, other):\n"
                    "        m = other\n"
                    "        return m._mgr\n"
                    "class O:\n    pass\n"
                    "mgr = K().go(O(), pd.DataFrame({'a': [1]}))\n")
    assert "mgr" not in sandbox.ns
    assert not r.ok and r.denied("attribute"), r


# ====================================================================================================
# From review round 9: against the fixes of round 8 (the ndarray
# constructor hook, the wrapping of attribute hooks for numpy's raw protocols, the charged builtins and size
# estimates, the never-rebound parameter analysis).
# ====================================================================================================

# --- 4. the never-rebound analysis mangles with the enclosing class only: a nested class mangles differently --

NESTED_CLASS_MANGLED_ESCAPE = """\
import collections
def go(_J__m, start, target):
    class J:                       # inside J, '__m' is mangled to '_J__m': the parameter of go
        def set(self, v):
            nonlocal __m
            __m = v
    s = J().set
    s(start)
    s(_J__m._sys)                  # read raw: the entry flag was computed for an O()
    mods = _J__m.modules
    s(mods["sandbox_kernel.confine"])
    s(_J__m._FS)
    _J__m.set(None)
    s(mods["os"])
    fd = _J__m.open(target, _J__m.O_WRONLY | _J__m.O_CREAT, 0o600)
    _J__m.write(fd, b"PWNED")
    _J__m.close(fd)
    return True
class O:
    pass
escaped = go(O(), collections, {target!r})
"""


def test_parameter_rebound_through_a_nested_class_mangling(strict, outside):
    target = outside / "pwned.txt"
    r = strict.run(NESTED_CLASS_MANGLED_ESCAPE.format(target=str(target)))
    assert not target.exists(), "a file was written outside the working directory"
    assert not strict.ns.get("escaped"), r
    assert not r.ok and r.denials, r


@pytest.mark.parametrize("rebind", [
    "    class J:\n        nonlocal __m\n        __m = other\n",
    "    class J:\n        def f(self):\n            nonlocal __m\n            __m = other\n    J().f()\n",
])
def test_nested_class_rebinding_does_not_read_library_privates_raw(sandbox, rebind):
    r = sandbox.run("import pandas as pd\n"
                    "def go(_J__m, other):\n" + rebind +
                    "    return _J__m._mgr\n"
                    "class O:\n    pass\n"
                    "mgr = go(O(), pd.DataFrame({'a': [1]}))\n")
    assert "mgr" not in sandbox.ns, type(sandbox.ns.get("mgr"))
    assert not r.ok and r.denied("attribute"), r


# ====================================================================================================================
# Sink: attribute lookup by string in the cell.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 2 (docs/reviews.md, "Review 2").
def test_enum_convert_does_not_read_host_module_globals(run, host_secret):
    from conftest import HOST_SECRET_MODULE
    r = run(f"import enum\nclass E(enum.Enum):\n    pass\n"
            f"S = E._convert_('S', {HOST_SECRET_MODULE!r}, lambda name: name == 'SECRET')\nprint(list(S))\n")
    assert not r.leaked(host_secret), r


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


def test_series_labels_cannot_be_read_as_dunders_by_the_cell(run):
    r = run("import pandas as pd\ns = pd.Series([1], index=['__ua_domain__'])\nx = s.__ua_domain__\n")
    assert not r.ok and r.error_name == "AttributeDenied", r


# From review 5 (docs/reviews.md, "Review 5").
@pytest.mark.parametrize("read", ["TB.tb_frame", "TB.tb_next", "g().gi_frame", "g().gi_code"])
def test_tracebacks_handed_to_exit_and_generator_frames_stay_hidden(tmp_path, read):
    done, _ = run_in_engine("class CM:\n    def __enter__(self):\n        return self\n"
                         "    def __exit__(self, t, v, tb):\n        global TB\n        TB = tb\n        return True\n"
                         "with CM():\n    1/0\ndef g():\n    yield 1\n" f"x = {read}\n", tmp_path)
    assert done["status"] == "error" and done["error"]["ename"] == "AttributeDenied", done
