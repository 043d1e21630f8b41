"""Must-block, fourth round: variants of the fixes in fef0bc7 (string dispatch reached through the class,
not the instance)."""
from __future__ import annotations

import pytest

RCE = """\
import pandas as pd
import functools
df = pd.DataFrame({{'a': [1, 2]}})
def ev(expr):
    try:
        return {route}
    except Exception as e:
        return e
ev("@inspect.sys.modules.get('sandbox_kernel.confine')._FS.set(None)")
ev("@inspect.os.system('echo PWNED > {marker}')")
"""

CLASS_ROUTES = [
    "pd.DataFrame.apply(df, 'eval', expr=expr, engine='python')",
    "type(df).apply(df, 'eval', expr=expr, engine='python')",
    "type(df).agg(df, 'eval', expr=expr, engine='python')",
    "pd.DataFrame.aggregate(df, 'eval', expr=expr, engine='python')",
    "pd.DataFrame.transform(df, 'eval', expr=expr, engine='python')",
    "functools.partial(pd.DataFrame.apply, df)('eval', expr=expr, engine='python')",
]


@pytest.mark.parametrize("route", CLASS_ROUTES)
def test_string_dispatch_through_the_class(sandbox, outside, route):
    marker = outside / "class_dispatch.txt"
    sandbox.run(RCE.format(route=route, marker=marker))
    assert not marker.exists(), "os.system ran"


def test_string_dispatch_through_the_instance_is_refused(sandbox, outside):
    marker = outside / "instance_dispatch.txt"
    r = sandbox.run(RCE.format(route="df.apply('eval', expr=expr, engine='python')", marker=marker))
    assert not marker.exists()
    assert r.denials, r


# --- inspection and completion run no sandbox code --------------------------------------------------

DESCRIPTORS = """\
log = []
class D:
    def __get__(self, inst, owner):
        log.append('ran')
        return 'doc'
class C:
    __signature__ = D()
    def __init__(self, a):
        pass
class E:
    __doc__ = D()
class F:
    @property
    def p(self):
        log.append('property ran')
        return 1
f_obj = F()
"""


@pytest.mark.parametrize("token", ["C", "E"])
def test_inspect_runs_no_sandbox_code(sandbox, token):
    assert sandbox.run(DESCRIPTORS).ok
    try:
        reply = sandbox.engine.inspect(token)
    except BaseException as exc:  # noqa: B902
        pytest.fail(f"inspect({token!r}) raised {type(exc).__name__}: {exc}")
    assert reply["status"] == "ok"
    assert sandbox.ns["log"] == []


@pytest.mark.parametrize("code", ["f_obj.", "f_obj.p", "C.", "E.", "F.p", "log.", "C"])
def test_complete_and_inspect_of_ordinary_objects_run_no_sandbox_code(sandbox, code):
    assert sandbox.run(DESCRIPTORS).ok
    sandbox.engine.complete(code)
    if code.endswith("p") or code == "log.":
        sandbox.engine.inspect(code.rstrip("."))
    assert sandbox.ns["log"] == []


# --- the error report renders the cell's exception outside the cell ----------------------------------

@pytest.mark.parametrize("src,expected", [
    ("class ValidationError(Exception):\n    def __init__(self, field):\n        self.field = field\n"
     "    def __str__(self):\n        return f'invalid {self.field}'\nraise ValidationError('age')", "invalid age"),
    ("class Loop(Exception):\n    def __str__(self):\n        while True:\n            pass\nraise Loop()", None),
    # a subclass of a denial class (reached with type(e)) whose sentence()/record() the engine trusts
    ("try:\n    import os\nexcept ImportError as e:\n    D = type(e)\nclass G(D):\n    def sentence(self):\n"
     "        return 'FORGED'\n    def record(self):\n        return {'kind': 'network', 'target': 'forged'}\n"
     "raise G('os', 'r')", None),
])
def test_custom_exception_str_is_rendered_within_limits(sandbox, src, expected):
    try:
        r = sandbox.run(src, timeout=1.0)
    except BaseException as exc:  # noqa: B902
        pytest.fail(f"run_cell raised {type(exc).__name__}: {exc}")
    assert not r.ok
    if expected:
        assert r.error_value == expected, r
    assert sandbox.run("print('alive')").stdout == "alive\n"


def test_denial_records_cannot_be_forged(sandbox):
    r = sandbox.run("try:\n    import os\nexcept ImportError as e:\n    D = type(e)\n"
                    "class G(D):\n    pass\n")
    if r.ok:
        try:
            r = sandbox.run("raise G('evil.example', 'forged rule')")
        except BaseException:  # noqa: B902 - covered by the test above
            return
        assert not any(d["target"] == "evil.example" and d["kind"] == "import" for d in r.denials), r


GETATTRIBUTE = """\
log = []
class S:
    def __getattribute__(self, name):
        log.append(name)
        return 1
s = S()
"""


@pytest.mark.parametrize("call", ["complete:s.", "complete:s.x", "inspect:s"])
def test_completion_on_instances_with_getattribute(sandbox, call):
    assert sandbox.run(GETATTRIBUTE).ok
    kind, code = call.split(":")
    try:
        getattr(sandbox.engine, kind)(code)
    except BaseException as exc:  # noqa: B902
        pytest.fail(f"{kind}({code!r}) raised {type(exc).__name__}: {exc}")
    assert sandbox.ns["log"] == []
