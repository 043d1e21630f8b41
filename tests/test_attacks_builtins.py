"""Must-block: dangerous builtins, __builtins__, type()/metaclass tricks, IPython escape hatches, imports."""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys

import pytest

from childcell import GIVE_UP, TIGHT, ended_near_its_limit, run_cell_in_child

# (eval, exec, globals, vars, dir and help are the sandbox's own: tests/test_attacks_evalexec.py and
# tests/test_allow_introspection.py)
UNAVAILABLE_CALLS = [
    "compile('1', 'f', 'eval')",
    "vars(int)",
    "breakpoint()",
    "input()",
    "exit()",
    "quit()",
    "memoryview(b'x')",
    "get_ipython()",
    "get_ipython().system('id')",
]


@pytest.mark.parametrize("src", ["x = In[0]", "x = Out[0]", "x = In()", "x = Out()", "x = _ih", "x = _oh", "x = _i1",
                                 "x = __IPYTHON__", "x = get_ipython"])
def test_ipython_names_are_not_ipython(sandbox, src):
    r = sandbox.run(src)
    x = sandbox.ns.get("x")
    assert x is None or callable(x) and getattr(x, "__module__", "").startswith("sandbox_kernel"), r
    assert not isinstance(x, (list, dict))


@pytest.mark.parametrize("call", UNAVAILABLE_CALLS)
def test_unavailable_builtin(sandbox, call):
    r = sandbox.run(f"x = 0\ny = {call}\nprint('after')")
    assert not r.ok, r
    assert r.denied("builtin", line=2), r
    assert "after" not in r.stdout
    assert "y" not in sandbox.ns


def test_open_is_unavailable_under_strict(strict, outside):
    target = outside / "strict.txt"
    r = strict.run(f"f = open({str(target)!r}, 'w')\nf.write('x')")
    assert not r.ok and (r.denied("builtin", line=1) or r.denied("file", line=1)), r
    assert not target.exists()
    r = strict.run("f = open('local.txt', 'w')")
    assert not r.ok, r
    assert not (strict.workdir / "local.txt").exists()


@pytest.mark.parametrize("name", ["BaseException", "KeyboardInterrupt", "SystemExit"])
def test_base_exceptions_are_not_names(run, name):
    r = run(f"x = {name}")
    assert not r.ok and r.error_name in ("NameError", "BuiltinDenied"), r


# GeneratorExit is a builtin (a generator's `except GeneratorExit:` cleanup is everyday code; no limit derives
# from it, so `except GeneratorExit` catches no limit). It is the one BaseException a cell can raise, so every
# place the engine runs a cell's code must end it as the cell's error, never let it past the engine.
GENERATOR_EXITS = {
    "result repr": "class M:\n    def __repr__(self):\n        raise GeneratorExit('r')\n"
                   "    def _repr_html_(self):\n        raise GeneratorExit('h')\nM()",
    "print": "class M:\n    def __repr__(self):\n        raise GeneratorExit('r')\nprint(M())",
    "exception str": "class E(Exception):\n    def __str__(self):\n        raise GeneratorExit('s')\nraise E()",
    "subclass raised": "class G(GeneratorExit):\n    pass\nraise G('g')",
    "library callback": "import pandas as pd\nclass K:\n    def __eq__(self, o):\n        raise GeneratorExit('eq')\n"
                        "    __hash__ = object.__hash__\nk = K()\npd.Series([k, K()]).apply(lambda v: v == k)",
    "help": "class D:\n    @property\n    def __doc__(self):\n        raise GeneratorExit('d')\nhelp(D())",
}


@pytest.mark.parametrize("route", sorted(GENERATOR_EXITS))
def test_a_cells_generator_exit_stays_the_cells_error(sandbox, route):
    r = sandbox.run(GENERATOR_EXITS[route])
    assert r.done["status"] in ("ok", "error"), r
    after = sandbox.run("x = 1 + 1\nprint(x)")
    assert after.ok and after.stdout == "2\n", after


@pytest.mark.parametrize("expr", ["print.__self__", "len.__self__", "sum.__module__ and len.__self__",
                                  "abs.__self__.__dict__", "getattr(len, '__self__')"])
def test_builtins_module_is_not_reachable(run, expr):
    r = run(f"x = {expr}")
    assert not r.ok and r.denied("attribute", line=1), r


# --- type() and metaclasses -----------------------------------------------------------------------

TYPE_TRICKS = [
    "type(type(0))('X', (), {})",
    "type(type)('X', (), {})",
    "type('X', (), {})",
    "type(int)('X', (object,), {'a': 1})",
    "(1).__class__.__class__('X', (), {})",
    "int.__class__('X', (), {})",
    "type(type(0)).__call__('X', (), {})",
    "type.__new__(type, 'X', (), {})",
    "type(type(type(0)))('X', (), {})",
    "import functools\nfunctools.partial(type, 'X', (), {})()",
    "import functools\nfunctools.reduce(lambda a, b: a(b, (), {}), ['X'], type)",
]


@pytest.mark.parametrize("src", TYPE_TRICKS)
def test_three_argument_type_is_refused(sandbox, src):
    r = sandbox.run(f"X = None\n{src}\n")
    assert not r.ok, r
    assert r.denials or r.error_name == "TypeError", r
    assert sandbox.ns.get("X") is None


def test_type_of_type_is_the_sandbox_type(run):
    r = run("t = type(type(0))\nprint(t, t is type, isinstance(int, t), type(1) is int)")
    assert r.ok and r.stdout == "<class 'type'> True True True\n", r


METACLASS_TRICKS = [
    "class M(type):\n    pass",
    "class M(type(type(0))):\n    pass",
    "class M(type(int)):\n    pass",
    "T = type(type(0))\nclass M(T):\n    pass",
    "class X(metaclass=lambda n, b, d: 1):\n    pass",
    "def meta(n, b, d):\n    return 1\nclass X(metaclass=meta):\n    pass",
    "import abc\nclass M(abc.ABCMeta):\n    pass",
    "import enum\nclass M(enum.EnumMeta):\n    pass",
]


@pytest.mark.parametrize("src", METACLASS_TRICKS)
def test_metaclass_definitions_are_refused(sandbox, src):
    r = sandbox.run(src)
    assert not r.ok, r
    assert r.denied("builtin"), r
    assert "M" not in sandbox.ns and "X" not in sandbox.ns


def test_abcmeta_three_argument_call_is_refused(sandbox):
    r = sandbox.run("import abc\nM = abc.ABCMeta('M', (abc.ABCMeta,), {})\n")
    assert not r.ok and "M" not in sandbox.ns, r


# --- imports --------------------------------------------------------------------------------------

FORBIDDEN_IMPORTS = [
    "import os", "import os.path", "from os import system", "from os import path", "import sys",
    "from sys import modules", "import subprocess", "import importlib", "import importlib.util",
    "from importlib import import_module", "import ctypes", "import ctypes.util", "import gc",
    "import inspect", "import builtins", "from builtins import open", "import posix", "import _io",
    "import io\nx = io.open", "import io\nx = io.FileIO", "from io import open", "import marshal",
    "import pickle", "import shutil", "import socket", "import types", "import weakref", "import threading",
    "import _thread", "import asyncio", "import signal", "import sandbox_kernel", "import sandbox_kernel.gates",
    "import IPython.core", "from IPython.core.getipython import get_ipython", "import ipykernel", "import pathlib", "import tempfile", "import code", "import runpy",
    "import webbrowser", "import urllib.request", "import http.client", "import multiprocessing",
    "import numpy.ctypeslib", "from numpy import ctypeslib", "import numpy.f2py", "import numpy.lib.format",
    "from numpy.lib import format", "import numpy.testing", "import numpy._core", "from numpy import _core",
    "import pandas.io.pickle", "import pandas.core.computation.eval", "import pandas._libs",
    "import pandas.io.clipboards", "import plotly.offline", "import plotly.io.kaleido", "import scipy._lib",
    "import sandbox_test_host_secret", "import site", "import zipimport", "import atexit", "import logging",
    "import uuid\nx = uuid.getnode", "import operator\nx = operator.attrgetter('__class__.__mro__')(1)",
    "import operator\nx = operator.methodcaller('__reduce_ex__', 2)(1)",
    "import operator\nx = operator.attrgetter('gi_frame')((i for i in [1]))",
]


@pytest.mark.parametrize("src", FORBIDDEN_IMPORTS)
def test_forbidden_import(sandbox, src):
    before = set(sandbox.ns)
    r = sandbox.run(f"print('start')\n{src}\nprint('after')")
    assert not r.ok, r
    assert r.error_name in ("ImportDenied", "AttributeDenied", "ModuleNotFoundError", "ImportError"), r
    assert r.denials, r
    assert "after" not in r.stdout
    new = set(sandbox.ns) - before
    for name in new:
        v = sandbox.ns[name]
        assert getattr(v, "__name__", "").split(".")[0] not in ("os", "sys", "subprocess", "builtins", "ctypes",
                                                                 "importlib", "gc", "inspect"), (name, v)


@pytest.mark.parametrize("src", ["from . import x", "from .. import y", "from .math import floor",
                                 "from .x import *"])
def test_relative_import(run, src):
    r = run(src)
    assert not r.ok and r.denied("syntax", line=1), r


def test_import_star_of_granted_module_binds_only_public_names(sandbox):
    r = sandbox.run("from math import *\nprint(floor(2.5))")
    assert r.ok and r.stdout == "2\n", r
    assert not any(k.startswith("__st_") for k in sandbox.ns)
    r = sandbox.run("from os import *")
    assert not r.ok and r.denied("import", line=1), r
    r = sandbox.run("from pandas.io.common import *\nprint(os)")
    assert not r.ok, r
    assert "os" not in sandbox.ns or getattr(sandbox.ns["os"], "__name__", "") != "os"


def test_import_star_inside_function_is_refused(run):
    r = run("def f():\n    from math import *\n")
    assert not r.ok, r


def test_denial_message_is_a_sentence(run):
    r = run("x = 1\nimport os")
    assert not r.ok
    assert r.denied("import", line=2)
    rec = [d for d in r.denials if d["kind"] == "import"][0]
    assert rec["target"] == "os"
    assert "import of 'os' is not allowed by policy 'data-science' (line 2)" in rec["message"]
    assert r.error_line == 2
    # the traceback shows the cell's own line, never the engine's files
    tb = "\n".join(r.error["traceback"])
    assert "import os" in tb and "sandbox_kernel" not in tb and ".py" not in tb


def test_process_and_host_unchanged_after_import_attempts(run):
    before = dict(sys.modules)
    pid = os.getpid()
    for src in FORBIDDEN_IMPORTS[:20]:
        run(src)
    assert os.getpid() == pid
    assert set(before) - set(sys.modules) == set()


@pytest.mark.parametrize("src", [
    "import operator\nx = operator.attrgetter('__class__.__bases__')(1)",
    "import operator\nx = operator.attrgetter('gi_frame')((i for i in []))",
    "import operator\nx = operator.methodcaller('__subclasses__')(object)",
    "import operator, pandas as pd\nx = operator.methodcaller('to_pickle', 'x.pkl')(pd.DataFrame({'a': [1]}))",
])
def test_attrgetter_and_methodcaller_go_through_the_gate(sandbox, src):
    """operator.attrgetter/methodcaller are handed out gated: they read exactly what obj.name may."""
    r = sandbox.run(src)
    assert not r.ok and r.denied("attribute"), r
    assert "x" not in sandbox.ns


# ====================================================================================================
# From review round 2: the sandbox's own runtime objects and library
# frames reached through builtins that C code calls on the cell's behalf; output floods through rich display.
# ====================================================================================================

GET_GATE_FRAME = """\
import itertools
frames = list(itertools.islice(iter(locals, None), 1))   # list() runs inside the __st_sized__ gate
"""


def test_locals_from_gate_frame_cannot_neuter_the_gates(sandbox, outside):
    marker = outside / "gates.txt"
    sandbox.run(GET_GATE_FRAME +
                "import dataclasses\n"
                "g = frames[0]['self']\n"
                "base = g.policy.modules[0]\n"
                "extra = tuple(dataclasses.replace(base, name=n, allow=('*',), deny=()) for n in ('os', 'sandbox_kernel'))\n"
                "g.policy = dataclasses.replace(g.policy, modules=g.policy.modules + extra, denied_modules=())\n"
                "g.deny = lambda exc: None\n"
                "import sandbox_kernel.confine as c\n"
                "c._FS.set(None)\n"
                "import os\n"
                f"os.system('echo PWNED > {marker}')\n")
    assert not marker.exists(), "os.system ran"


def _runtime_objects(ns) -> list:
    found = []
    for k, v in ns.items():
        if k == "__builtins__":
            continue
        items = v if isinstance(v, list) else [v]
        for item in items:
            if isinstance(item, dict):
                for x in item.values():
                    if type(x).__module__.startswith("sandbox_kernel"):
                        found.append(x)
    return found


@pytest.mark.parametrize("src", [
    GET_GATE_FRAME,
    "import heapq\nframes = [next(heapq.merge(iter(locals, None)))]\n",
])
def test_locals_only_describes_cell_frames(sandbox, src):
    r = sandbox.run(src + "print(sorted(frames[0]))")
    assert not _runtime_objects(sandbox.ns), r
    keys = set(sandbox.ns.get("frames", [{}])[0])
    assert not keys & {"self", "h_append", "iterables", "fn", "kwargs"}, r


def test_locals_in_cell_functions_still_works(run):
    src = ("def f(a, b=2):\n    c = a + b\n    return sorted(locals().items())\nprint(f(1))\n"
           "class K:\n    x = 1\n    names = sorted(locals())\nprint(K.names)\n")
    plain = io.StringIO()
    with contextlib.redirect_stdout(plain):
        exec(src, {"__name__": "__main__"})
    # what plain CPython prints; 3.13 adds __firstlineno__ to a class body's namespace
    assert plain.getvalue().replace("'__firstlineno__', ", "") == \
        "[('a', 1), ('b', 2), ('c', 3)]\n['__module__', '__qualname__', 'x']\n"
    r = run(src)
    assert r.ok and r.stdout == plain.getvalue(), r


# ====================================================================================================
# From review round 3: state that leaks from a cell into the host
# thread, silent denials, private library state reached by shadowing the name in a sandbox subclass, C-level
# arithmetic past the limit.
# ====================================================================================================

def test_denials_inside_hasattr_are_recorded(run):
    r = run("class P:\n    @property\n    def x(self):\n        try:\n            import os\n"
            "        except ImportError:\n            pass\n        return 1\nprint(hasattr(P(), 'x'))\n")
    assert r.ok and r.stdout == "True\n"
    assert r.denied("import", line=5), r


# ====================================================================================================
# From review round 7: classes with a guard reached through type()
# instead of their module, and C-level work that the gates bound (decimal precision, %-formats) reached by the
# routes around them. Each attack that could hang runs in a child process under a hard timeout.
# ====================================================================================================

@pytest.mark.parametrize("src", [
    # itertools.repeat without a count, made from its class: sum() would never return from C
    "import itertools\nr = type(itertools.repeat(1, 2))(1)\nx = sum(r)",
    "import itertools\nc = type(itertools.count())\nx = sum(c())",
    "import itertools\nc = type(itertools.cycle([1]))\nx = sum(c([1]))",
    "import decimal\nc = type(decimal.getcontext())(prec=10**8)\nx = c.sqrt(decimal.Decimal(2))",
])
def test_type_hands_out_guarded_classes_guarded(src):
    try:
        result = run_cell_in_child(src, "strict", limits=TIGHT, timeout=GIVE_UP, report=("status", "ename", "elapsed_ms"))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the cell ran past its limit (no report after {GIVE_UP:g} s)")
    assert result["status"] == "error" and ended_near_its_limit(result), result
    # count() and cycle() already hand the cell a ticking generator, whose class cannot be called (TypeError)
    assert result["ename"] in ("SizeDenied", "TypeError", "TickLimitExceeded", "TimeLimitExceeded"), result


def test_type_of_ordinary_and_guarded_objects_still_works(run):
    r = run("import itertools, decimal, collections\n"
            "print(type(1).__name__, type([]) is list, type(itertools.chain()).__name__,"
            " type(decimal.Decimal(1)).__name__, type(decimal.getcontext()) is decimal.Context,"
            " type(collections.deque()) is collections.deque)")
    assert r.ok and r.stdout == "int True chain Decimal True True\n", r


def test_guarded_classes_stay_classes(run):
    """A guard on a class (deque charges what it consumes, np.ndarray checks what it is laid over) must
    leave it a class: isinstance, subclassing and type() work as in plain Python."""
    r = run("import collections, numpy as np\nfrom collections import deque\n"
            "class Q(collections.deque):\n    def peek(self):\n        return self[0]\n"
            "q = Q([5, 6])\nd = deque([1, 2, 3], maxlen=2)\n"
            "print(q.peek(), isinstance(q, deque), isinstance(d, collections.deque), type(d) is deque, d)\n"
            "a = np.zeros(2)\nprint(isinstance(a, np.ndarray), type(a) is np.ndarray, issubclass(np.ndarray, object))\n")
    assert r.ok, r
    assert r.stdout == "5 True True True deque([2, 3], maxlen=2)\nTrue True True\n", r
