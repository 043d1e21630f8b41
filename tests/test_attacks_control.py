"""Must-block: limit exceptions cannot be swallowed (bare except, BaseException obtained anywhere, finally
that loops, __exit__ returning True, except* (CVE-2025-22153), generator close, __del__), and sandbox
code that runs after its cell runs without power."""
from __future__ import annotations

import sys
import threading

import pytest

import gc

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")

LIMIT_ERRORS = ("TickLimitExceeded", "TimeLimitExceeded", "Cancelled", "MemoryLimitExceeded", "LimitExceeded")

# BaseException is not a builtin name in the sandbox; these are the ways a cell could still get it.
GET_BASE = {
    "mro": "B = ZeroDivisionError.mro()[-2]",
    "__mro__": "B = ZeroDivisionError.__mro__[-2]",
    "__bases__": "B = Exception.__bases__[0]",
    "__base__": "B = Exception.__base__",
    "match-mro": "match ZeroDivisionError:\n    case type(mro=m):\n        B = m()[-2]",
    "context": "try:\n    raise ValueError\nexcept ValueError as e:\n    B = type(e).__mro__[-2]",
    "exceptiongroup": "B = BaseExceptionGroup.__bases__[0]",
}

SWALLOWERS = {
    "bare-except": "while True:\n    try:\n        while True:\n            pass\n    except:\n        pass\n",
    "except-B": "while True:\n    try:\n        while True:\n            pass\n    except B:\n        pass\n",
    "except-B-in-function": "def spin():\n    while True:\n        try:\n            while True:\n                pass\n"
                            "        except B:\n            continue\nspin()\n",
    "except-star": "while True:\n    try:\n        while True:\n            pass\n    except* B:\n        pass\n",
    "except-star-exception": "while True:\n    try:\n        while True:\n            pass\n"
                             "    except* Exception:\n        pass\n",
    "except-tuple": "while True:\n    try:\n        while True:\n            pass\n    except (Exception, B):\n        pass\n",
    "finally-loops": "try:\n    while True:\n        pass\nfinally:\n    while True:\n        pass\n",
    "finally-recurses": "def f():\n    try:\n        f()\n    finally:\n        f()\nf()\n",
    "finally-return": "def f():\n    while True:\n        try:\n            while True:\n                pass\n"
                      "        finally:\n            continue\nf()\n",
    "exit-true": "class S:\n    def __enter__(self):\n        return self\n    def __exit__(self, *a):\n        return True\n"
                 "while True:\n    with S():\n        while True:\n            pass\n",
    "exit-loops": "class S:\n    def __enter__(self):\n        return self\n    def __exit__(self, *a):\n"
                  "        while True:\n            pass\nwith S():\n    pass\n",
    "generator-close-loops": "def g():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\n"
                             "x = g()\nnext(x)\ndel x\n",
    "generator-swallows-exit": "def g():\n    while True:\n        try:\n            yield 1\n        except B:\n            pass\n"
                               "for _ in g():\n    pass\n",
    "del-loops": "class D:\n    def __del__(self):\n        while True:\n            pass\nd = D()\ndel d\n",
    "repr-loops": "class R:\n    def __repr__(self):\n        while True:\n            pass\nR()\n",
    "repr-html-loops": "class R:\n    def _repr_html_(self):\n        while True:\n            pass\nR()\n",
    "str-in-print-loops": "class R:\n    def __str__(self):\n        while True:\n            pass\nprint(R())\n",
    "key-function-swallows": "def k(v):\n    while True:\n        try:\n            while True:\n                pass\n"
                             "        except B:\n            pass\nsorted([1, 2], key=k)\n",
    "lambda-in-map": "list(map(lambda v: [0 for _ in iter(int, 1)], [1]))\n",
}


@pytest.mark.parametrize("base", sorted(GET_BASE))
def test_base_exception_is_not_reachable(sandbox, base):
    r = sandbox.run(GET_BASE[base])
    b = sandbox.ns.get("B")
    assert b is None or b is not BaseException, r


# A cell with a 1 s limit that ends because of it: the bound is generous (load on the machine may stretch
# the cell's run, not by ten times), its point is that the limit, not something later, ended the cell.
CELL_ENDED_BY_LIMIT_MS = 10_000

# except* is Python 3.11 syntax.
NEEDS_PYTHON = {"except-star": (3, 11), "except-star-exception": (3, 11)}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.skipif(sys.version_info < NEEDS_PYTHON[name],
                                                reason="except* needs Python 3.11"))
    if name in NEEDS_PYTHON else name for name in sorted(SWALLOWERS)])
def test_limit_cannot_be_swallowed(sandbox, name):
    # get BaseException the one way that currently works, so the swallowers are as strong as possible
    sandbox.run("B = Exception\n" + GET_BASE["match-mro"])
    sandbox.run("keep = 'bound before'")
    r = sandbox.run("before = 1\n" + SWALLOWERS[name], timeout=1.0, ticks=2_000_000)
    assert not r.ok, r
    assert r.error_name in LIMIT_ERRORS or r.error_name == "RecursionError", r
    # the engine's own clock: a swallowed limit would run on until something else ended the cell
    assert r.done["elapsed_ms"] < CELL_ENDED_BY_LIMIT_MS, r.done["elapsed_ms"]
    if r.error_name in LIMIT_ERRORS:
        assert r.denied("limit"), r
        assert "limit" in r.error_value
    # what was bound before the limit stays; the engine still works
    assert sandbox.ns.get("keep") == "bound before"
    assert sandbox.ns.get("before") == 1
    r2 = sandbox.run("print(keep)")
    assert r2.ok and r2.stdout == "bound before\n", r2


def test_limit_error_names_the_limit(sandbox):
    r = sandbox.run("while True:\n    pass\n", ticks=100_000)
    assert r.error_name == "TickLimitExceeded", r
    assert "tick limit" in r.error_value and "100,000" in r.error_value
    assert r.denied("limit", line=2) or r.denied("limit", line=1), r
    r = sandbox.run("import time\nwhile True:\n    time.sleep(0.01)\n", timeout=0.5)
    assert r.error_name == "TimeLimitExceeded", r
    assert "time limit" in r.error_value


def test_swallowed_limit_still_reported(sandbox):
    """A cell that catches its limit and then finishes 'normally' still ends with the limit."""
    sandbox.run(GET_BASE["match-mro"])
    if sandbox.ns.get("B") is not BaseException:
        pytest.skip("BaseException not obtainable")
    r = sandbox.run("try:\n    while True:\n        pass\nexcept B:\n    caught = True\nprint('done')\n",
                    ticks=100_000)
    assert not r.ok and r.error_name == "TickLimitExceeded", r


def test_cancel_from_another_thread(sandbox):
    timer = threading.Timer(0.3, sandbox.engine.cancel)
    timer.start()
    r = sandbox.run("x = 0\nwhile True:\n    try:\n        x += 1\n    except:\n        pass\n", timeout=30)
    timer.join()
    # the cancellation ended the cell (not its 30 s time limit), past the bare except
    assert r.error_name in ("Cancelled", "KeyboardInterrupt"), r
    assert r.denied("limit"), r
    assert sandbox.run("print('alive')").stdout == "alive\n"


def _collect_or_fail(why: str, drop=(), give_up: float = 30.0) -> None:
    """Drops the entries `drop` ((namespace, name) pairs) and runs gc.collect() on a thread of the host's (a finalizer
    of the cell's runs there); a finalizer that loops instead of being refused never returns, so the wait
    gives up with `why` (the loop stays behind on its daemon thread, the test fails)."""
    def release():
        for ns, name in drop:
            del ns[name]
        gc.collect()

    collector = threading.Thread(target=release, daemon=True)
    collector.start()
    collector.join(give_up)
    assert not collector.is_alive(), f"{why}: gc.collect() had not returned after {give_up:g} s"


def test_del_after_cell_does_not_run_sandbox_code(sandbox, capsys):
    r = sandbox.run("log = []\nclass D:\n    def __del__(self):\n        log.append('ran')\n"
                    "        while True:\n            pass\nd = D()\n")
    assert r.ok
    _collect_or_fail("a __del__ kept the host busy after the cell", drop=[(sandbox.ns, "d")])
    assert sandbox.ns["log"] == [], "sandbox code ran outside a cell"


def test_generator_finalizer_after_cell_does_not_loop(sandbox):
    r = sandbox.run("def g():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\n"
                    "class C:\n    pass\nc = C()\nc.me = c\nc.g = g()\nnext(c.g)\ndel c\n")
    assert r.ok, r
    _collect_or_fail("a generator's finally kept the host busy after the cell")


def test_generator_finally_after_cell_is_confined(sandbox, outside):
    target = outside / "gen_finally.csv"
    r = sandbox.run("import pandas as pd\n"
                    "def gen():\n    try:\n        yield 1\n    finally:\n"
                    f"        pd.DataFrame({{'x': [1]}}).to_csv({str(target)!r})\n"
                    "class C:\n    pass\nc = C()\nc.me = c\nc.g = gen()\nnext(c.g)\ndel c\n")
    assert r.ok, r
    gc.collect()
    assert not target.exists(), "sandbox code wrote outside the workdir after its cell"


def test_generator_finally_after_cell_cannot_print(sandbox, capfd):
    sandbox.run("def gen():\n    try:\n        yield 1\n    finally:\n        print('ESCAPED-OUTPUT')\n"
                "class C:\n    pass\nc = C()\nc.me = c\nc.g = gen()\nnext(c.g)\ndel c\n")
    gc.collect()
    out, err = capfd.readouterr()
    assert "ESCAPED-OUTPUT" not in out + err


# ====================================================================================================
# From review round 4: variants of the fixes in fef0bc7 (string
# dispatch reached through the class, not the instance).
# ====================================================================================================

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


# ====================================================================================================
# From review round 6: C consumers of huge iterators that are not among
# the sized builtins.
# ====================================================================================================

# --- finalizers made of library callables run after the cell, unconfined ------------------------------

@pytest.mark.parametrize("finalizer", [
    "functools.partial(pd.DataFrame({{'x': [1]}}).to_csv, {target!r})",
    "functools.partial(np.savetxt, {target!r}, np.arange(3))",
])
def test_library_callable_finalizer_after_cell(sandbox, outside, finalizer):
    import gc
    target = str(outside / "finalizer.txt")
    r = sandbox.run("import functools, pandas as pd, numpy as np\n"
                    f"class X:\n    __del__ = {finalizer.format(target=target)}\n"
                    "x = X()\nx.me = x\ndel x\n")
    assert r.ok or r.denied(), r      # refusing the class is as good as a finalizer that cannot act
    gc.collect()
    assert not (outside / "finalizer.txt").exists(), "a finalizer wrote outside the workdir after the cell"
