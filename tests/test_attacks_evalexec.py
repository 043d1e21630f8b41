"""eval() and exec() of text are a new door into the same room: every classic escape fails through them
exactly as it fails in a cell, the dicts a cell hands them cannot shadow the runtime or receive its
builtins, and they run only inside a cell, under its limits."""
from __future__ import annotations

import pytest

# Each escape, written once; the test runs it as a cell, through eval() or exec(), and nested.
ESCAPES = [
    ("__import__('os').system('id')", "name"),
    ("().__class__.__base__.__subclasses__()", "attribute"),
    ("(lambda: 0).__globals__", "attribute"),
    ("(lambda: 0).__code__", "attribute"),
    ("(x for x in []).gi_frame", "attribute"),
    ("'{0.__class__.__mro__}'.format(1)", "attribute"),
    ("__builtins__", "name"),
    ("__st_getattr__", "name"),
    ("type(1).__subclasses__", "attribute"),
    ("getattr(1, '__class__').__bases__", "attribute"),
]


FORMS = {
    "cell": lambda e: f"y = {e}",
    "eval": lambda e: f"y = eval({e!r})",
    "exec": lambda e: f"exec({'y = ' + e!r})",
    "nested": lambda e: f"y = eval({'eval(' + repr(e) + ')'!r})",
    "function": lambda e: f"exec({'def f():' + chr(10) + '    return ' + e + chr(10) + 'y = f()'!r})",
    "dict": lambda e: f"g = {{}}\nexec({'y = ' + e!r}, g)",
}


@pytest.mark.parametrize("escape, kind", ESCAPES)
@pytest.mark.parametrize("form", FORMS)
def test_every_escape_fails_through_eval_and_exec_as_in_a_cell(sandbox, escape, kind, form):
    cell = FORMS[form](escape)
    r = sandbox.run(cell + "\nprint('after')")
    assert not r.ok and r.denied(kind), (cell, r)
    assert "after" not in r.stdout and "y" not in sandbox.ns


@pytest.mark.parametrize("code", ["import os", "from os import system", "import subprocess",
                                  "import builtins", "import sandbox_kernel", "from numpy import ctypeslib"])
def test_imports_are_the_cells_imports(sandbox, code):
    r = sandbox.run(f"exec({code!r})")
    assert not r.ok and (r.denied("import") or r.denied("attribute")), r


def test_a_gate_name_in_a_globals_or_locals_dict_is_refused(sandbox):
    for cell in ("eval('x.__class__.__bases__', {'__st_getattr__': lambda o, n: 1, 'x': 1})",
                 "exec('y = ().__class__.__bases__', {}, {'__st_getattr__': lambda o, n: 1})",
                 "exec('y = p.__dict__', {'__st_own__': {type(1)}, '__st_type__': type, 'p': 1})",
                 "exec('for i in range(10**9): pass', {'__st_tick__': lambda: None})"):
        r = sandbox.run(cell, ticks=10**6)
        assert not r.ok and r.error_name == "CallDenied" and r.denied("attribute"), (cell, r)


def test_a_str_subclass_key_posing_as_a_gate_name_is_never_seen_by_the_code(sandbox):
    r = sandbox.run("class K(str):\n"
                    "    def __hash__(self): return hash('__st_getattr__')\n"
                    "    def __eq__(self, other): return True\n"
                    "g = {K('anything'): lambda o, n: 'SHADOWED', 'x': 1}\n"
                    "y = eval('x.__class__.__bases__', g)")
    assert not r.ok and r.denied("attribute", line=5), r


def test_dicts_that_are_not_plain_dicts_are_refused(sandbox):
    r = sandbox.run("class D(dict):\n"
                    "    def __missing__(self, key): return lambda *a: 'SHADOWED'\n"
                    "y = eval('().__class__.__bases__', D())")
    assert not r.ok and r.error_name == "TypeError" and "must be a dict" in r.error_value, r
    r = sandbox.run("import collections\n"
                    "y = eval('().__class__.__bases__', {}, collections.ChainMap({}))")
    assert not r.ok and r.error_name == "TypeError", r


def test_the_cells_builtins_never_reach_a_dict_it_holds(sandbox):
    """exec(code, g) puts __builtins__ into g in CPython: here g never holds them, not even while the
    code runs (a function of the cell that holds g reads it then), and what g said is ignored."""
    r = sandbox.run("g = {}\n"
                    "g['peek'] = lambda: sorted(k for k in g if k.startswith('__'))\n"
                    "exec('during = peek()', g)\n"
                    "print(g['during'], sorted(k for k in g if k.startswith('__')))\n"
                    "h = {'__builtins__': {'len': lambda x: 'FAKE'}}\n"
                    "print(eval('len([1, 2])', h), '__builtins__' in h and h['__builtins__'] is not None)")
    assert r.ok, r
    assert r.stdout == "[] []\n2 True\n", r
    assert all(type(v) is not dict or "__st_getattr__" not in v for k, v in sandbox.ns.items() if k != "__builtins__")


def test_definitions_land_in_the_dict_given_and_functions_made_there_stay_gated(sandbox):
    r = sandbox.run("g = {'base': 10}\n"
                    "exec('def f(n):\\n    return n + base\\nclass C:\\n    pass\\nz = f(1)', g)\n"
                    "print(g['z'], g['f'](5), type(g['C']()).__name__)\n"
                    "g['f'].__globals__")
    assert not r.ok and r.denied("attribute", line=4), r
    assert r.stdout == "11 15 C\n", r


def test_text_turned_into_code_by_libraries_is_still_refused(sandbox):
    """The engine may compile the text it rewrote; nothing else a cell starts may (confine.py)."""
    r = sandbox.run("import typing\nx = typing.get_type_hints")
    assert not r.ok, r
    r = sandbox.run("import dataclasses\n"
                    "C = dataclasses.make_dataclass('C', [('a b', int)])")
    assert not r.ok, r


def test_code_objects_and_functions_are_not_accepted(sandbox):
    for cell in ("eval(compile('1', 'f', 'eval'))", "eval(lambda: 1)", "exec(print)"):
        r = sandbox.run(cell)
        assert not r.ok and (r.denied("builtin") or r.error_name == "CallDenied"), (cell, r)


def test_eval_runs_under_the_cells_limits(sandbox):
    r = sandbox.run("exec('while True:\\n    pass')", ticks=10**5)
    assert not r.ok and r.error_name == "TickLimitExceeded", r
    r = sandbox.run("eval('[i for i in range(10**9)]')", ticks=10**5)
    assert not r.ok and r.error_name == "TickLimitExceeded", r
    r = sandbox.run("eval('10 ** 10 ** 10')")
    assert not r.ok and r.error_name in ("SizeDenied", "MemoryLimitExceeded"), r
    r = sandbox.run("try:\n    exec('while True: pass')\nexcept BaseException:\n    pass\nprint('swallowed')",
                    timeout=1)
    assert not r.ok and r.error_name == "TimeLimitExceeded", r


def test_eval_refuses_to_run_outside_a_cell(sandbox):
    """Between cells (a finalizer, a host thread) there is no budget: nothing runs."""
    assert sandbox.run("x = 1").ok
    host_eval = sandbox.ns["__builtins__"]["eval"]
    with pytest.raises(Exception) as info:
        host_eval("x + 1")
    assert "only while a cell runs" in str(info.value)


def test_globals_called_from_a_library_reveals_nothing(sandbox):
    """A library function that calls globals() for the cell (a dataclass default factory runs in code
    dataclasses generated) would get that library's globals: refused."""
    r = sandbox.run("import dataclasses\n"
                    "@dataclasses.dataclass\n"
                    "class C:\n"
                    "    g: dict = dataclasses.field(default_factory=globals)\n"
                    "c = C()")
    assert not r.ok and r.denied("builtin", line=5), r


def test_eval_from_a_library_runs_in_the_cells_namespace(sandbox):
    r = sandbox.run("import pandas as pd\nsecret_name = 7\n"
                    "pd.Series(['1 + 1', 'secret_name * 2']).apply(eval).tolist()")
    assert r.ok and r.result_text == "[2, 14]", r
    r = sandbox.run("import pandas as pd\npd.Series(['np']).apply(eval)")   # pandas' own globals: not seen
    assert not r.ok and r.error_name == "NameError", r


def test_globals_is_a_copy_and_cannot_plant(sandbox):
    r = sandbox.run("g = globals()\n"
                    "dict.__setitem__(g, '__st_getattr__', lambda o, n: 'SHADOWED')\n"
                    "dict.__setitem__(g, 'planted', 1)\n"
                    "exec('y = ().__class__.__bases__', g)")
    assert not r.ok and r.denied("attribute", line=4), r
    assert "planted" not in sandbox.ns
    r = sandbox.run("globals()['planted'] = 1")
    assert not r.ok and r.error_name == "TypeError" and "read-only" in r.error_value, r
    assert "planted" not in sandbox.ns


def test_vars_is_a_copy_of_the_cells_own_objects_only(sandbox):
    r = sandbox.run("class P:\n    def __init__(self):\n        self.u = 1\n"
                    "p = P()\nv = vars(p)\nv['u'] = 99\nv['__class__'] = int\n"
                    "print(p.u, type(p).__name__)")
    assert r.ok and r.stdout == "1 P\n", r
    for cell in ("import math\nvars(math)", "import pandas as pd\nvars(pd.DataFrame())", "vars(len)",
                 "vars(int)"):
        r = sandbox.run(cell)
        assert not r.ok and r.denied("builtin"), (cell, r)
