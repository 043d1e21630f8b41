"""The engine's contract: events, persistence, errors, limits, completion privacy."""
import dataclasses
import json
import threading
import time

import pytest

from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS


@pytest.fixture
def engine(tmp_path):
    return Engine(PRESETS["data-science"], workdir=str(tmp_path))


def run(engine, source, **kw):
    events = []
    done = engine.run_cell(source, emit=events.append, **kw)
    json.dumps(events)   # everything the engine emits is plain JSON data
    json.dumps(done)
    return events, done


def stdout(events):
    return "".join(e["text"] for e in events if e["type"] == "stream" and e["name"] == "stdout")


def results(events):
    return [e["data"]["text/plain"] for e in events if e["type"] == "result"]


def test_last_expression_is_the_result_and_streams_come_first(engine):
    events, done = run(engine, "print('a')\n1 + 1")
    kinds = [e["type"] for e in events]
    assert kinds == ["stream", "result"]
    assert results(events) == ["2"] and done["status"] == "ok" and done["output"] == "a\n"


def test_trailing_semicolon_suppresses_the_result(engine):
    events, _ = run(engine, "1 + 1;")
    assert results(events) == []


def test_functions_see_globals_assigned_later(engine):
    run(engine, "def f():\n    return later * 2")
    run(engine, "later = 21")
    events, _ = run(engine, "f()")
    assert results(events) == ["42"]


def test_dunder_name_is_main_and_top_level_await(engine):
    events, _ = run(engine, "async def g():\n    return __name__\nawait g()")
    assert results(events) == ["'__main__'"]


def test_traceback_shows_only_cell_lines(engine):
    run(engine, "def inner():\n    return 1 / 0")
    events, done = run(engine, "x = 5\ninner()")
    err = done["error"]
    assert err["ename"] == "ZeroDivisionError"
    text = "\n".join(err["traceback"])
    assert "Cell In[2], line 2" in text and "Cell In[1], line 2, in inner" in text
    assert "sandbox_kernel" not in text and ".py" not in text
    assert engine.namespace["x"] == 5   # bound before the error: kept


def test_syntax_error_names_the_line(engine):
    _, done = run(engine, "x = 1\ny = (\n")
    assert done["error"]["ename"] == "SyntaxError"
    assert done["error"]["line"] == 2 or "line 2" in "\n".join(done["error"]["traceback"])


def test_validation_denial_is_recorded_with_its_line(engine):
    events, done = run(engine, "x = 1\n__st_getattr__ = 2")
    assert done["status"] == "error"
    assert done["denials"][0]["kind"] == "name" and done["denials"][0]["line"] == 2
    assert "x" not in engine.namespace   # refused before anything ran


def test_import_denial_sentence(engine):
    _, done = run(engine, "\n\nimport os")
    rec = done["denials"][0]
    assert rec["kind"] == "import" and rec["target"] == "os" and rec["line"] == 3
    assert rec["message"].startswith("import of 'os' is not allowed by policy 'data-science' (line 3)")


def test_caught_denials_are_still_recorded(engine):
    events, done = run(engine, "try:\n    import subprocess\nexcept ImportError:\n    print('fallback')")
    assert done["status"] == "ok" and stdout(events) == "fallback\n"
    assert [d["target"] for d in done["denials"]] == ["subprocess"]


def test_a_caught_denial_says_its_policy_and_line(engine):
    """What the cell prints of a caught denial is the same sentence as the record (ImportError's str() is its
    msg, which the policy and line used to miss)."""
    events, done = run(engine, "try:\n    import subprocess\nexcept ImportError as e:\n    print(e)\n"
                               "try:\n    open('/etc/passwd')\nexcept PermissionError as e:\n    print(e)\n")
    assert done["status"] == "ok", done
    printed = stdout(events).splitlines()
    assert printed[0].startswith("import of 'subprocess' is not allowed by policy 'data-science' (line 2)"), printed
    assert "by policy 'data-science' (line 6)" in printed[1], printed


def _tight(engine, **limits):
    return dataclasses.replace(engine.policy.limits, **limits)


def test_tick_limit_ends_the_cell_and_keeps_earlier_state(engine):
    _, done = run(engine, "kept = 1\nwhile True:\n    pass", limits=_tight(engine, ticks=50_000))
    assert done["error"]["ename"] == "TickLimitExceeded" and "50,000" in done["error"]["evalue"]
    assert done["denials"][-1]["kind"] == "limit"
    assert engine.namespace["kept"] == 1
    events, done = run(engine, "kept + 1")
    assert results(events) == ["2"]


def test_time_limit_survives_bare_except_and_swallowing_exit(engine):
    src = (
        "class Swallow:\n"
        "    def __enter__(self): return self\n"
        "    def __exit__(self, *a): return True\n"
        "with Swallow():\n"
        "    try:\n"
        "        while True: pass\n"
        "    except:\n"
        "        pass\n"
        "after = 'reached'\n"
    )
    _, done = run(engine, src, limits=_tight(engine, timeout=0.5, ticks=None))
    assert done["error"]["ename"] == "TimeLimitExceeded"
    assert done["denials"][-1]["kind"] == "limit" and done["denials"][-1]["target"] == "timeout"
    # the limit tripped even though __exit__ swallowed it: the cell is reported as ended by it


def test_finally_that_loops_cannot_outlive_the_limit(engine):
    src = "try:\n    while True: pass\nfinally:\n    while True: pass"
    _, done = run(engine, src, limits=_tight(engine, timeout=0.5, ticks=None))
    assert done["error"]["ename"] == "TimeLimitExceeded", done["error"]
    assert done["denials"][-1]["kind"] == "limit" and done["denials"][-1]["target"] == "timeout", done


def test_cancel_from_another_thread(engine):
    timer = threading.Timer(0.3, engine.cancel)
    timer.start()
    _, done = run(engine, "n = 0\nwhile True:\n    n += 1", limits=_tight(engine, timeout=30, ticks=None))
    assert done["error"]["ename"] == "Cancelled"   # not its 30 s time limit
    assert engine.namespace["n"] > 0


def test_sandbox_code_cannot_run_between_cells(engine):
    run(engine, "def f():\n    return 1")
    f = engine.namespace["f"]
    with pytest.raises(BaseException, match="outside a cell"):
        f()


def test_output_cap_keeps_head_and_tail(engine):
    _, done = run(engine, "for i in range(5000):\n    print('line', i)", limits=_tight(engine, output_bytes=2000))
    assert done["truncated"] is True
    events, _ = run(engine, "for i in range(5000):\n    print('line', i)", limits=_tight(engine, output_bytes=2000))
    text = "".join(e["text"] for e in events if e["type"] == "stream")
    assert text.startswith("line 0\n") and text.rstrip().endswith("line 4999")
    assert "characters of output cut" in text and len(text) < 2200


def test_streams_arrive_while_the_cell_runs(engine):
    """The host gets 'early' while the cell sleeps: it cancels the cell on seeing it, and 'late' never comes
    (output held until the end would arrive after the cell, too late to cancel it). The sleep is the give-up."""
    seen = []

    def emit(event):
        seen.append(event)
        if event["type"] == "stream" and "early" in event["text"]:
            engine.cancel()

    done = engine.run_cell("import time\nprint('early')\ntime.sleep(20)\nprint('late')", emit=emit,
                           limits=_tight(engine, timeout=60))
    assert done["error"]["ename"] == "Cancelled", done["error"]
    assert done["output"] == "early\n" and stdout(seen) == "early\n"


def test_seed002_result_convention(engine):
    src = "result = {'output': 'mean is 3', 'chart': {'data': [{'x': [1, 2], 'y': [3, 4], 'type': 'bar'}]}}"
    events, done = run(engine, src)
    assert "mean is 3" in done["output"]
    assert done["charts"][0]["data"][0]["type"] == "bar"
    assert any(e["type"] == "display" and "application/vnd.plotly.v1+json" in e["data"] for e in events)


def test_plotly_figure_is_compact_json(engine):
    events, done = run(engine, "import plotly.express as px\npx.bar(x=[1, 2], y=[3, 4], title='t')")
    data = [e for e in events if e["type"] == "result"][0]["data"]
    assert set(data) == {"application/vnd.plotly.v1+json", "text/plain"}
    assert data["application/vnd.plotly.v1+json"]["data"][0]["type"] == "bar"
    assert len(done["charts"]) == 1


def test_fig_show_is_a_display_not_a_browser(engine):
    events, _ = run(engine, "import plotly.graph_objects as go\ngo.Figure(go.Scatter(x=[1], y=[2])).show()")
    assert [e["type"] for e in events] == ["display"]


def test_pandas_result_has_html_and_text(engine):
    events, _ = run(engine, "import pandas as pd\npd.DataFrame({'a': [1, 2]})")
    data = [e for e in events if e["type"] == "result"][0]["data"]
    assert "<table" in data["text/html"] and "a" in data["text/plain"]


def test_repr_that_loops_forever_ends_with_a_timeout(engine):
    src = "class Bad:\n    def __repr__(self):\n        while True: pass\nBad()"
    _, done = run(engine, src, limits=_tight(engine, timeout=0.5, ticks=None))
    assert done["error"]["ename"] == "TimeLimitExceeded"


def test_evaluate_runs_gated(engine):
    run(engine, "value = 41")
    assert engine.evaluate("value + 1")["data"]["text/plain"] == "42"
    bad = engine.evaluate("value.__class__.__bases__")
    assert bad["status"] == "error" and bad["ename"] == "AttributeDenied"


def test_completion_hides_private_and_runs_no_code(engine):
    run(engine, "class C:\n    def __init__(self):\n        self.public = 1\n        self._hidden = 2\n"
                "    @property\n    def prop(self):\n        raise SystemError('ran')\n"
                "    def __getattr__(self, n):\n        raise SystemError('ran')\nc = C()\nimport math")
    names = engine.complete("c.", 2)["matches"]
    assert "public" in names and "prop" in names and "_hidden" not in names
    assert "__class__" not in names
    assert engine.complete("zi", 2)["matches"] == ["zip"]
    assert "floor" in engine.complete("math.fl", 7)["matches"]
    assert engine.complete("__st_", 5)["matches"] == []


def test_completion_of_granted_module_hides_denied_attributes(engine):
    run(engine, "import pandas as pd\ndf = pd.DataFrame({'a': [1]})")
    assert "groupby" in engine.complete("df.gro", 6)["matches"]
    assert engine.complete("df.to_pi", 8)["matches"] == []
    assert engine.complete("pd.read_pi", 10)["matches"] == []


def test_inspect_is_static(engine):
    run(engine, "def area(w, h):\n    'Area of a rectangle.'\n    return w * h")
    reply = engine.inspect("area", 4)
    assert reply["found"] and "Area of a rectangle" in reply["data"]["text/plain"]
    assert engine.inspect("__builtins__", 5)["found"] is False


def test_reset_gives_a_fresh_namespace(engine):
    run(engine, "x = 1")
    engine.reset()
    _, done = run(engine, "x")
    assert done["error"]["ename"] == "NameError"


def test_strict_policy_has_no_files(tmp_path):
    eng = Engine(PRESETS["strict"], workdir=str(tmp_path))
    _, done = run(eng, "open('x.txt', 'w').write('data')")
    assert done["denials"][0]["kind"] == "builtin" or done["denials"][0]["kind"] == "file"
    assert not (tmp_path / "x.txt").exists()


def test_methods_read_their_own_instances_inline_but_anything_else_through_the_gate(engine):
    """self.x in a method skips the gate only for instances of classes the cell wholly defined."""
    run(engine, "import pandas as pd\nclass C:\n    def peek(self):\n        return self._mgr\n"
                "    def private(self):\n        return self._secret\n    def set(self, v):\n        self._secret = v\n"
                "    def frame(self):\n        return self.gi_frame\n"
                "def g():\n    yield 1\n")
    _, done = run(engine, "C.peek(pd.DataFrame({'a': [1]}))")
    assert done["error"]["ename"] == "AttributeDenied" and done["denials"][0]["kind"] == "attribute"
    _, done = run(engine, "C.frame(g())")
    assert done["error"]["ename"] == "AttributeDenied"
    _, done = run(engine, "class D(pd.DataFrame):\n    pass\nC.set(D({'a': [1]}), 1)")
    assert done["error"]["ename"] == "AttributeDenied"   # a library subclass: the write gate decides
    events, done = run(engine, "c = C()\nc.set(5)\nc.private()")
    assert results(events) == ["5"] and done["denials"] == []


@pytest.mark.parametrize("src", [
    "import pandas as pd\ndef peek(p):\n    return p._mgr\npeek(pd.DataFrame({'a': [1]}))",
    "import pandas as pd\np = pd.DataFrame({'a': [1]})\np._mgr",
    "def g():\n    yield 1\ndef frame(p):\n    return p.gi_frame\nframe(g())",
    "import math\ndef put(m):\n    m.floor = 3\nput(math)",
    "class C:\n    pass\nc = C()\nc.__class__ = int",
])
def test_the_own_instance_fast_path_never_applies_to_other_objects(engine, src):
    import math
    floor = math.floor
    _, done = run(engine, src)
    assert done["error"] and done["error"]["ename"] in ("AttributeDenied", "NameDenied", "ValidationDenied"), done
    assert math.floor is floor


def test_seed002_charts_are_capped_like_displays(engine):
    """result = {"chart": [...]} counts against the cell's output cap like display() does: the engine
    neither keeps nor sends charts past it."""
    events, done = run(engine, "big = {'data': [{'type': 'scatter', 'y': list(range(100_000))}]}\n"
                               "result = {'chart': [big] * 6}")
    shown = [e["data"] for e in events if e["type"] == "display"]
    assert len(shown) == 6 and sum("application/vnd.plotly.v1+json" in d for d in shown) == 1
    assert "not shown" in shown[-1]["text/plain"] and done["truncated"] and len(done["charts"]) == 1


def test_an_emit_that_writes_to_the_cells_streams_does_not_reenter(engine):
    """At level none the kernel logs its own errors to sys.stderr, which is the cell's stream while
    the cell runs: the engine must not re-enter the delivery (RuntimeError: cannot enter context)."""
    import sys

    seen = []

    def emit(event):
        seen.append(event)
        print("host-side log line", file=sys.stderr)

    done = engine.run_cell("print('x')\ndisplay(1)", emit=emit)
    assert done["status"] == "ok"
    assert [e["type"] for e in seen] == ["stream", "display"]
    assert not any("host-side" in (e.get("text") or "") for e in seen)


# --- whatever escapes the engine's own finishing of a cell is reported, never raised ---------------------
# CI under load: a limit's alarm landed in denials.py while the engine recorded the cell's exception (the
# runtime's own code, but not one of its teardown files), the limit escaped run_cell with the cell's
# ~940-deep exception chain as its __context__, and pytest's report of it hit RecursionError. The slow
# is_genuine below stands in for an alarm that lands there.

def _alarm_lands_in_is_genuine(monkeypatch, engine):
    """engine_module.is_genuine, while a cell runs, waits for the alarm (up to 2 s) in a frame of this file;
    returns the list of what the alarm raised there."""
    import sandbox_kernel.engine as engine_module

    real, landed = engine_module.is_genuine, []

    def waits_for_the_alarm(exc):
        if engine.budget.running:
            try:
                for _ in range(40):
                    time.sleep(0.05)
            except BaseException as raised:  # noqa: B902 - recorded, then let through as the alarm meant
                landed.append(type(raised).__name__)
                raise
        return real(exc)

    monkeypatch.setattr(engine_module, "is_genuine", waits_for_the_alarm)
    return landed


def test_a_limit_raised_while_the_engine_records_the_error_is_the_cells_report(engine, monkeypatch):
    import signal

    landed = _alarm_lands_in_is_genuine(monkeypatch, engine)
    events, done = run(engine, "try:\n    raise ValueError('cell')\nfinally:\n    while True:\n        pass\n",
                       limits=_tight(engine, ticks=100_000))
    assert landed == ["TickLimitExceeded"], "the alarm did not land in the engine's own code"
    assert done["error"]["ename"] == "TickLimitExceeded" and done["denials"][-1]["kind"] == "limit", done
    assert [e["ename"] for e in events if e["type"] == "error"] == ["TickLimitExceeded"]
    tripped = engine.budget.tripped
    assert tripped.__context__ is None and tripped.__cause__ is None, "the limit still chains to the cell's"
    assert not engine.budget.running and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    monkeypatch.undo()
    assert run(engine, "print('next')")[1]["output"] == "next\n"


def test_a_failure_in_the_engines_finishing_is_an_internal_error_report(engine, monkeypatch):
    def fails(*args):
        raise RuntimeError("a bug in the engine's report")

    monkeypatch.setattr(engine, "_report", fails)
    events, done = run(engine, "x = 1\n1 / 0")
    assert done["status"] == "error" and done["error"]["ename"] == "SandboxInternalError", done
    assert [e["ename"] for e in events if e["type"] == "error"] == ["SandboxInternalError"]
    _, done = run(engine, "while True:\n    pass", limits=_tight(engine, ticks=50_000))
    assert done["error"]["ename"] == "SandboxInternalError" and "TickLimitExceeded" in done["error"]["evalue"]
    monkeypatch.undo()
    assert run(engine, "x + 1")[0][-1]["data"]["text/plain"] == "2"


def test_a_failure_of_the_callers_emit_is_raised_without_the_cells_chain(engine):
    class HostDown(Exception):
        pass

    def emit(event):
        if event["type"] == "error":
            raise HostDown("the caller's channel is gone")

    with pytest.raises(HostDown) as raised:
        engine.run_cell("try:\n    raise ValueError('cell')\nexcept ValueError:\n    1 / 0\n", emit=emit)
    assert raised.value.__context__ is None
    assert run(engine, "print('next')")[1]["output"] == "next\n"


def test_a_cell_nested_too_deeply_to_compile_is_reported_not_raised(engine):
    _, done = run(engine, "x = 1" + " + 1" * 100_000)   # the rewriter's recursion, before anything runs
    assert done["status"] == "error" and done["error"]["ename"] in ("RecursionError", "MemoryError"), done["error"]
    assert "nested too deeply" in done["error"]["evalue"]
    assert run(engine, "print('next')")[1]["output"] == "next\n"


def test_a_limit_never_fires_inside_the_delivery_of_an_event(engine):
    """The caller's emit writes to the worker's socket (or the kernel's queues): an alarm raising the
    limit there left a message half sent and the worker's stream out of step. The emit below blocks
    past the cell's whole time limit; it must complete, and the limit still ends the cell after it."""
    completed = []

    def slow_emit(event):
        if event["type"] == "stream" and not completed:
            time.sleep(0.5)          # several alarm periods, past the 0.2 s limit
            completed.append(event)

    limits = dataclasses.replace(engine.policy.limits, timeout=0.2)
    done = engine.run_cell("print('first', flush=True)\nwhile True:\n    pass", emit=slow_emit, limits=limits)
    assert completed and "first" in completed[0]["text"], "the delivery was cut by the limit"
    assert done["status"] == "error" and done["error"]["ename"] == "TimeLimitExceeded", done
    assert run(engine, "1 + 1")[1]["status"] == "ok"


NO_C_GUARDS = """\
import json, os, sys, tempfile
sys.modules['sandbox_kernel._numpyguard'] = None     # as if the C extension had not been built
os.environ.pop('SANDBOX_KERNEL_PYTHON_GUARDS', None)
os.environ.update(json.loads(sys.argv[1]))
from sandbox_kernel.engine import Engine, GuardsNotBuilt
from sandbox_kernel.policy import PRESETS
try:
    eng = Engine(PRESETS['data-science'], workdir=tempfile.mkdtemp())
except GuardsNotBuilt as exc:
    print(json.dumps({"refused": str(exc)}))
else:
    done = eng.run_cell("x = 6 * 7", emit=lambda e: None)
    print(json.dumps({"ran": done["status"], "x": eng.namespace.get("x")}))
"""


@pytest.mark.parametrize("accepted", [False, True])
def test_without_the_c_guards_no_engine_starts_unless_the_operator_accepts_the_fallbacks(accepted):
    """Fail closed: a missing or stale build of the C guards (several walls live there) stops every cell with
    what to do, unless the operator's environment accepts the Python fallbacks."""
    import json
    import subprocess
    import sys

    env = {"SANDBOX_KERNEL_PYTHON_GUARDS": "1"} if accepted else {}
    out = subprocess.run([sys.executable, "-c", NO_C_GUARDS, json.dumps(env)], capture_output=True, text=True,
                         timeout=120)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    if accepted:
        assert report == {"ran": "ok", "x": 42}
    else:
        message = report["refused"]
        assert "sandbox_kernel._numpyguard" in message and "build-essential python3-dev" in message
        assert "SANDBOX_KERNEL_PYTHON_GUARDS=1" in message
