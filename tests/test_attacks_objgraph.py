"""Must-block: walking the object graph (dunders, class hierarchies, function internals, frames of
generators / coroutines / tracebacks, exception attributes) and reaching forbidden modules through
granted ones. Each attack must fail with an attribute denial on the right line and bind nothing."""
from __future__ import annotations

import types

import pytest

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SETUP = """\
import numpy as np
import pandas as pd
import math, json, functools
def f(a=1):
    return a
class C:
    def m(self):
        return 1
def gen():
    yield 1
async def coro():
    return 1
async def agen():
    yield 1
g = gen()
co = coro()
ag = agen()
try:
    1 / 0
except ZeroDivisionError as e:
    err = e
"""

# (expression, what it would reach)
GRAPH_WALKS = [
    "().__class__.__bases__",
    "().__class__.__base__",
    "().__class__.__mro__",
    "(1).__class__.mro()",
    "int.mro()",
    "object.__subclasses__()",
    "type.__subclasses__(object)",
    "f.__globals__",
    "f.__code__",
    "f.__closure__",
    "f.__defaults__",
    "f.__kwdefaults__",
    "f.__builtins__",
    "(lambda: 0).__globals__",
    "C.m.__globals__",
    "C().m.__func__",
    "C().m.__self__",
    "C.__init__.__globals__",
    "len.__self__",
    "print.__self__",
    "[].append.__self__.__class__.__bases__",
    "pd.read_csv.__globals__",
    "np.mean.__globals__",
    "json.dumps.__globals__",
    "functools.reduce.__self__",
    "math.__loader__",
    "math.__spec__",
    "math.__dict__",
    "np.__dict__",
    "np.__builtins__",
    "pd.__file__",
    "pd.DataFrame.__dict__",
    "pd.DataFrame().__dict__",
    "pd.DataFrame()._mgr",
    "np.ndarray.__subclasses__()",
    "object.__getattribute__",
    "object.__reduce_ex__",
    "(1).__reduce_ex__(2)",
    "int.__dict__",
    "C.__dict__['m'].__globals__",
    "g.gi_frame",
    "g.gi_code",
    "g.gi_frame.f_back.f_globals",          # RestrictedPython CVE-2023-37271
    "co.cr_frame",
    "co.cr_code",
    "ag.ag_frame",
    "ag.ag_code",
    "err.__traceback__",
    "err.__traceback__.tb_frame.f_globals",
    "err.__context__.__traceback__",
    "C.m.__code__.co_consts",
    "f.func_globals",
]


@pytest.mark.parametrize("expr", GRAPH_WALKS)
def test_object_graph_walk_is_denied(sandbox, expr):
    assert sandbox.run(SETUP).ok
    r = sandbox.run(f"print('before')\nx = {expr}\nprint('after', x)")
    assert not r.ok, r
    assert r.error_name in ("AttributeDenied", "NameDenied", "AttributeError"), r
    assert r.denied("attribute", line=2) or r.error_name == "AttributeError", r
    assert "after" not in r.stdout
    assert "x" not in sandbox.ns
    # nothing that escapes the gates ever lands in the namespace
    for v in sandbox.ns.values():
        assert not isinstance(v, (types.FrameType, types.CodeType, types.TracebackType))


@pytest.mark.parametrize("expr", ["f.__globals__", "g.gi_frame", "err.__traceback__", "().__class__.__mro__",
                                  "pd.read_csv.__globals__", "int.mro"])
def test_getattr_and_hasattr_follow_the_same_rules(sandbox, expr):
    assert sandbox.run(SETUP).ok
    obj, _, name = expr.rpartition(".")
    r = sandbox.run(f"x = getattr({obj}, {name!r})")
    assert not r.ok and r.denied("attribute", line=1), r
    assert "x" not in sandbox.ns
    r = sandbox.run(f"h = hasattr({obj}, {name!r})\nprint(h)")
    assert r.ok and r.stdout == "False\n", r
    r = sandbox.run(f"x = getattr({obj}, {name!r}, 'DEFAULT')")
    assert not r.ok and "x" not in sandbox.ns, r


# Attribute paths from a granted module to a forbidden module, class or function.
FORBIDDEN_PATHS = [
    ("import pandas as pd", "pd.io.common.os"),
    ("import pandas as pd", "pd.io.parsers.readers.sys"),
    ("import pandas as pd", "pd.io.parsers.readers.threading"),
    ("import pandas as pd", "pd.core.common.builtins"),
    ("import pandas as pd", "pd.core.common.inspect"),
    ("import pandas as pd", "pd.io.common.Path"),
    ("import pandas as pd", "pd.io.formats.format.get_terminal_size"),
    ("import pandas as pd", "pd.io.common.urljoin"),
    ("import numpy as np", "np.ctypeslib"),
    ("import numpy as np", "np.lib.npyio.os"),
    ("import numpy as np", "np.lib.format"),
    ("import numpy as np", "np.testing"),
    ("import numpy as np", "np.f2py"),
    ("import numpy as np", "np._core"),
    ("import pandas as pd", "pd.io.pickle"),
    ("import pandas as pd", "pd.core.computation"),
    ("import pandas as pd", "pd._libs"),
    ("import plotly.io as pio", "pio.kaleido"),
    ("import plotly.io as pio", "pio.base_renderers"),
    ("import plotly", "plotly.offline"),
]


@pytest.mark.parametrize("setup,path", FORBIDDEN_PATHS)
def test_forbidden_module_through_granted_module(sandbox, setup, path):
    r = sandbox.run(f"{setup}\nx = {path}\nprint('GOT', x)")
    assert not r.ok, r
    assert r.denied("attribute", line=2) or r.error_name == "AttributeError", r
    assert "GOT" not in r.stdout
    assert "x" not in sandbox.ns


def test_forbidden_function_through_from_import(run):
    r = run("from pandas.io.common import os")
    assert not r.ok and (r.denied("attribute", line=1) or r.denied("import", line=1)), r
    r = run("from pandas.core.common import inspect")
    assert not r.ok, r
    r = run("from pandas.io.formats.format import get_terminal_size")
    assert not r.ok, r


# --- exception attributes -------------------------------------------------------------------------

def test_attribute_error_obj_does_not_hand_out_hidden_objects(sandbox):
    """CVE-2024-47532 (RestrictedPython): AttributeError.obj carried the object a guard protected."""
    r = sandbox.run(
        "import numpy as np\n"
        "def gen():\n    yield 1\n"
        "g = gen()\n"
        "got = []\n"
        "for attempt in ('g.gi_frame', 'np.lib.npyio.os', 'np.lib.npyio.os.system'):\n"
        "    try:\n"
        "        if attempt == 'g.gi_frame':\n            g.gi_frame\n"
        "        elif attempt == 'np.lib.npyio.os':\n            np.lib.npyio.os\n"
        "        else:\n            np.lib.npyio.os.system\n"
        "    except AttributeError as e:\n"
        "        got.append((e.obj, e.name))\n"
        "print(len(got))\n")
    assert r.ok, r
    assert r.stdout == "3\n"
    for obj, _name in sandbox.ns["got"]:
        assert not isinstance(obj, (types.FrameType, types.ModuleType)) or obj.__name__ == "numpy.lib.npyio", obj
        assert getattr(obj, "__name__", "") != "os"


def test_exception_context_chain_holds_no_internals(sandbox):
    r = sandbox.run(
        "def gen():\n    yield 1\n"
        "g = gen()\n"
        "chain = []\n"
        "try:\n    g.gi_frame\n"
        "except AttributeError as e:\n"
        "    c = e\n"
        "    while c is not None:\n"
        "        chain.append(c)\n"
        "        c = c.__context__ or c.__cause__\n"
        "print(len(chain) >= 1)\n")
    assert r.ok and r.stdout == "True\n", r
    for exc in sandbox.ns["chain"]:
        assert isinstance(exc, BaseException)
        for a in getattr(exc, "args", ()):
            assert not isinstance(a, (types.FrameType, types.TracebackType, types.CodeType, types.ModuleType))
    r = sandbox.run("chain[0].__traceback__")
    assert not r.ok and r.denied("attribute", line=1), r
    r = sandbox.run("chain[-1].__traceback__.tb_frame")
    assert not r.ok and r.denied("attribute", line=1), r


def test_with_traceback_does_not_expose_frames(run):
    r = run("try:\n    1/0\nexcept Exception as e:\n    t = e.with_traceback(None).__traceback__\n")
    assert not r.ok and r.denied("attribute", line=4), r


def test_generator_frame_chain_cve_2023_37271(sandbox, host_secret):
    """RestrictedPython CVE-2023-37271: gi_frame.f_back.f_back.f_globals of a running generator."""
    r = sandbox.run(
        "import sandbox_test_host_secret\n")
    assert not r.ok and r.denied("import", line=1), r
    r = sandbox.run(
        "def g():\n"
        "    yield (x for x in [1]).gi_frame.f_back.f_back.f_globals\n"
        "for leaked in g():\n"
        "    print(leaked)\n")
    assert not r.ok and r.denied("attribute", line=2), r
    assert not r.leaked(host_secret)
    assert "leaked" not in sandbox.ns


def test_coroutine_frames_are_hidden(run):
    r = run("async def c():\n    return 1\nx = c()\ntry:\n    f = x.cr_frame\nfinally:\n    x.close()\n")
    assert not r.ok and r.denied("attribute", line=5), r
    r = run("async def a():\n    yield 1\nx = a()\nf = x.ag_frame.f_globals\n")
    assert not r.ok and r.denied("attribute", line=4), r


def test_object_hierarchy_via_type_and_vars(run):
    for src in ("type(1).__subclasses__()", "type(type(1)).__subclasses__(type(1))", "vars(int)",
                "type(1).__dict__", "type(object).__mro__"):
        r = run(f"x = {src}")
        assert not r.ok, (src, r)
        assert r.denials, (src, r)


# ====================================================================================================
# From review round 2: the sandbox's own runtime objects and library
# frames reached through builtins that C code calls on the cell's behalf; output floods through rich display.
# ====================================================================================================

@pytest.mark.parametrize("src", [
    "print.__self__", "getattr.__self__", "display.__self__", "locals.__closure__", "print.__globals__",
    "getattr.__func__", "hasattr.__self__.policy",
])
def test_runtime_callables_do_not_expose_the_engine(run, src):
    r = run(f"x = {src}")
    assert not r.ok and r.denials, r


# ====================================================================================================
# From review round 3: state that leaks from a cell into the host
# thread, silent denials, private library state reached by shadowing the name in a sandbox subclass, C-level
# arithmetic past the limit.
# ====================================================================================================

def test_private_library_state_via_subclass_shadowing(sandbox):
    r = sandbox.run("import pandas as pd\nclass D(pd.DataFrame):\n    _mgr = None\n"
                    "m = D({'a': [1]})._mgr\nprint(type(m).__name__)\n")
    assert "m" not in sandbox.ns, r


def test_private_library_state_stays_hidden(run):
    r = run("import pandas as pd\nclass D(pd.DataFrame):\n    pass\nm = D({'a': [1]})._mgr\n")
    assert not r.ok and r.denied("attribute", line=4), r


# -- review 12: what a refusal carries ----------------------------------------------------------------------------
# R12-3: a refusal made on a cache miss carried the lookup's KeyError as __context__, whose key was (type(obj), name):
# the real class of any object, past type()'s check and every stand-in (_io.FileIO opened the host's descriptors;
# the real decimal.Context; the real three-argument type).

_CLASS_OF = (
    "def class_of(obj):\n"
    "    try:\n"
    "        obj._surely_private\n"
    "    except AttributeError as e:\n"
    "        chain = [e.__context__, e.__cause__]\n"
    "        return [c for c in chain if c is not None]\n")


@pytest.mark.parametrize("holder", ["open('mine.txt', 'w').buffer.raw", "1", "int", "[].__iter__()", "print"])
def test_a_refusal_carries_no_chain(run, holder):
    r = run(_CLASS_OF + f"found = class_of({holder})\nprint(found)\n")
    assert r.ok and r.stdout == "[]\n", (holder, r)


def test_a_refusal_never_hands_out_the_real_file_class(tmp_path, outside, host_secret):
    """The attack itself: with the real FileIO, any descriptor of the host is readable and writable."""
    from childcell import run_cell_in_child

    secret = outside / "held_open.txt"
    secret.write_text(host_secret)
    hostlog = outside / "hostlog.txt"
    cell = ("try:\n    open('mine.txt', 'w').buffer.raw._x\nexcept AttributeError as e:\n"
            "    ctx = e.__context__\n"
            "FileIO = ctx.args[0][0] if ctx is not None else None\nfound = []\n"
            "for fd in range(3, 40):\n    try:\n        found.append(FileIO(fd, 'r', closefd=False).read(200))\n"
            "    except Exception:\n        pass\n"
            f"leaked = any(type(d) is bytes and {host_secret.encode()!r} in d for d in found)\n")
    probe = (f"import os\nSECRET_FD = os.open({str(secret)!r}, os.O_RDONLY)\n"
             f"LOG_FD = os.open({str(hostlog)!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
             f"def probe_host(report):\n    report['hostlog'] = open({str(hostlog)!r}).read()\n")
    result = run_cell_in_child(cell, report=("status", "ename"), probe=probe, ns=("leaked",), hard_exit=True,
                               limits={"timeout": 30.0})
    assert "crashed" not in result and not result["leaked"] and result["hostlog"] == "", result
