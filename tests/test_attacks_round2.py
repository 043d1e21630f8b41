"""Must-block, second round: the sandbox's own runtime objects and library frames reached through
builtins that C code calls on the cell's behalf; output floods through rich display."""
from __future__ import annotations

import contextlib
import io
import json

import pytest

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


@pytest.mark.parametrize("src", [
    "print.__self__", "getattr.__self__", "display.__self__", "locals.__closure__", "print.__globals__",
    "getattr.__func__", "hasattr.__self__.policy",
])
def test_runtime_callables_do_not_expose_the_engine(run, src):
    r = run(f"x = {src}")
    assert not r.ok and r.denials, r


# --- output floods through rich display ------------------------------------------------------------

FLOODS = [
    "class R:\n    def _repr_html_(self):\n        return 'x' * 5_000_000\ndisplay(R())",
    "class R:\n    def _repr_html_(self):\n        return 'x' * 5_000_000\nR()",
    "class R:\n    def _repr_mimebundle_(self, **k):\n        return {'text/plain': 'y' * 3_000_000}\nR()",
    "for i in range(300):\n    display('z' * 10000)",
    "class R:\n    def _repr_json_(self):\n        return {'k': 'j' * 2_000_000}\ndisplay(R())",
]


@pytest.mark.parametrize("src", FLOODS)
def test_display_output_is_capped(run, src):
    cap = 100_000
    r = run(src, output_bytes=cap)
    size = sum(len(json.dumps(e)) for e in r.events if e["type"] in ("display", "result"))
    assert size < 2 * cap, f"{size:,} bytes of display data for a {cap:,}-byte cell limit"


# --- match class patterns on builtin classes ---------------------------------------------------------

def test_match_object_keyword_reads_module_attributes(sandbox, outside):
    marker = outside / "match_object.txt"
    sandbox.run("import pandas as pd\n"
                "try:\n    match pd.core.common:\n        case object(builtins=b):\n            pass\n"
                "except Exception:\n    pass\n"
                "try:\n    match b:\n        case object(eval=ev):\n            pass\n"
                "except Exception:\n    pass\n"
                "ev(\"(__import__('sandbox_kernel.confine', fromlist=['_FS'])._FS.set(None), "
                f"__import__('os').system('echo PWNED > {marker}'))\")\n")
    assert not marker.exists(), "os.system ran"
    assert "ev" not in sandbox.ns and "b" not in sandbox.ns


@pytest.mark.parametrize("pattern,subject", [
    pytest.param("object(os=m)", "pd.io.common"),
    pytest.param("object(sys=m)", "pd.io.parsers.readers"),
    pytest.param("object(inspect=m)", "pd.core.common"),
    pytest.param("object(mro=m)", "ZeroDivisionError"),
    ("type(mro=m)", "ZeroDivisionError"),
    pytest.param("object(read_pickle=m)", "pd"),
    pytest.param("object(eval=m)", "pd"),
    pytest.param("object(query=m)", "pd.DataFrame"),
    pytest.param("object(tofile=m)", "np.zeros(1)"),
])
def test_match_keyword_pattern_cannot_bind_what_attribute_access_refuses(sandbox, pattern, subject):
    sandbox.run(f"import pandas as pd, numpy as np\ntry:\n    match {subject}:\n        case {pattern}:\n            pass\n"
                "except Exception:\n    pass\n")
    if pattern.endswith("(os=m)") or pattern.endswith("(sys=m)") or "inspect" in pattern:
        import types
        assert not isinstance(sandbox.ns.get("m"), types.ModuleType), pattern
    else:
        assert "m" not in sandbox.ns, f"{pattern} bound {sandbox.ns.get('m')!r}"


# --- pandas' expression evaluator is an unsandboxed interpreter ------------------------------------------

PANDAS_EVAL_RCE = """\
import pandas as pd
df = pd.DataFrame({{'a': [1, 2]}})
def ev(expr):
    try:
        return {route}
    except Exception as e:
        return e
ev("@inspect.sys.modules.get('sandbox_kernel.confine')._FS.set(None)")
ev("@inspect.os.system('echo PWNED > {marker}')")
"""


@pytest.mark.parametrize("route", [
    "pd.core.apply.frame_apply(df, 'eval', args=(), kwargs={'expr': expr, 'engine': 'python'}).apply()",
])
def test_pandas_eval_is_not_reachable(sandbox, outside, route):
    marker = outside / "pdeval.txt"
    sandbox.run(PANDAS_EVAL_RCE.format(route=route, marker=marker))
    assert not marker.exists(), "os.system ran"


@pytest.mark.parametrize("route", [
    "df.eval(expr, engine='python')",
    "df.query(expr, engine='python')",
    "pd.eval(expr, engine='python')",
    "df.apply('eval', expr=expr, engine='python')",
    "df.agg('eval', expr=expr, engine='python')",
    "df.transform('query', expr=expr)",
    "getattr(df, 'eval')(expr, engine='python')",
    "pd.core.frame.DataFrame.eval(df, expr, engine='python')",
    "pd.core.computation.eval.eval(expr, engine='python')",
    "df.groupby('a').apply('eval', expr=expr)",
    "df.a.to_frame().eval(expr, engine='python')",
])
def test_pandas_eval_routes_are_refused(sandbox, outside, route):
    marker = outside / "pdeval.txt"
    r = sandbox.run(PANDAS_EVAL_RCE.format(route=route, marker=marker))
    assert not marker.exists(), "os.system ran"
    assert r.denials, r


def test_pipe_does_not_look_names_up(sandbox, outside):
    """df.pipe('eval', ...) was refused by name by the old string-dispatch guard; pipe never resolves a
    string (it calls its argument: 'str' object is not callable), so since issue 10 there is nothing to
    refuse and nothing happens."""
    marker = outside / "pdeval.txt"
    sandbox.run(PANDAS_EVAL_RCE.format(route="df.pipe('eval', expr=expr)", marker=marker))
    assert not marker.exists(), "os.system ran"
    r = sandbox.run("import pandas as pd\ntry:\n    pd.DataFrame({'a': [1]}).pipe('eval', expr='a')\n"
                    "except TypeError as e:\n    print(e)")
    assert r.ok and "not callable" in r.stdout, r


STATEFUL_STR = """\
class S(str):
    n = 0
    def __eq__(self, o):
        S.n += 1
        return S.n > 2 and str.__eq__(self, o)
    __hash__ = str.__hash__
    def startswith(self, *a):
        return False
"""


def test_string_dispatch_guard_with_str_subclass(sandbox, outside):
    marker = outside / "dispatch.txt"
    sandbox.run(STATEFUL_STR)
    sandbox.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2]})\n"
                "def ev(expr):\n    S.n = 0\n    try:\n        return df.apply(S('eval'), expr=expr, engine='python')\n"
                "    except Exception as e:\n        return e\n"
                "ev(\"@inspect.sys.modules.get('sandbox_kernel.confine')._FS.set(None)\")\n"
                f"ev(\"@inspect.os.system('echo PWNED > {marker}')\")\n")
    assert not marker.exists(), "os.system ran"
