"""The session API (sandbox_kernel.client.SandboxSession): results, streaming, data in and out, control.

One kernel per module (isolation from SANDBOX_TEST_ISOLATION, `none` by default, like the other
kernel tests); a second one for the operator-options tests.
"""
import json
import math
import os
import threading

import pandas as pd
import pytest

from kernel_helpers import DEFAULT_TEST_ISOLATION, KERNEL_NAME, require_kernelspec
from sandbox_kernel.client import (Event, ExecutionResult, SandboxDenied, SandboxError, SandboxSession,
                                   SandboxTimeout, kernel_options)


@pytest.fixture(scope="module")
def session():
    require_kernelspec()
    with SandboxSession(isolation=DEFAULT_TEST_ISOLATION, kernel_name=KERNEL_NAME) as s:
        yield s


# -- run and its result ----------------------------------------------------------------------------

def test_run_returns_output_result_chart_and_seed_shape(session):
    r = session.run("import plotly.express as px\n"
                    "print('mean T1 =', 45.2)\n"
                    "px.line(x=[1, 2, 3], y=[44.1, 45.9, 43.7], title='T1').show()\n"
                    "21 * 2")
    assert isinstance(r, ExecutionResult) and r.ok and r.error is None and r.denials == []
    assert r.output == "mean T1 = 45.2\n"
    assert r.result == "42"
    assert len(r.charts) == 1 and r.charts[0]["layout"]["title"]["text"] == "T1"
    assert any("application/vnd.plotly.v1+json" in d for d in r.displays)
    assert r.policy == "data-science" and r.isolation == DEFAULT_TEST_ISOLATION
    assert r.elapsed_ms > 0 and r.execution_count >= 1
    seed = r.to_dict()
    assert set(seed) == {"output", "chart", "error"}
    assert seed["output"] == "mean T1 = 45.2\n" and seed["chart"]["data"][0]["type"] == "scatter"
    assert seed["error"] is None


def test_seed_result_variable_and_several_charts(session):
    r = session.run("result = {'output': 'two charts', 'chart': [{'data': [{'y': [1], 'type': 'bar'}]}, "
                    "{'data': [{'y': [2], 'type': 'bar'}]}]}")
    seed = r.to_dict()
    assert "two charts" in seed["output"]
    assert isinstance(seed["chart"], list) and [c["data"][0]["y"] for c in seed["chart"]] == [[1], [2]]


def test_denial_is_an_error_with_the_cell_line_and_a_record(session):
    r = session.run("x = 1\nimport subprocess\nx = 2")
    assert not r.ok and r.error.denial and r.error.ename == "ImportDenied" and r.error.line == 2
    assert [(d.kind, d.target, d.line) for d in r.denials] == [("import", "subprocess", 2)]
    assert r.to_dict()["error"].startswith("ImportDenied: import of 'subprocess'")
    assert session.run("x").result == "1"   # the cell stopped at line 2


def test_cell_error_keeps_traceback_and_is_not_a_denial(session):
    r = session.run("def f():\n    return 1 / 0\nf()")
    assert r.error.ename == "ZeroDivisionError" and not r.error.denial and r.error.line == 2
    assert any("1 / 0" in line for line in r.error.traceback)


def test_streaming_iterator_and_callback_see_events_in_order(session):
    events = list(session.stream("print('a')\nimport sys_not_granted_x\n"))
    kinds = [e.kind for e in events]
    assert kinds[0] == "stream" and events[0].text == "a\n" and kinds[-1] == "done"
    assert "error" in kinds and isinstance(events[-1].result, ExecutionResult)
    seen = []
    r = session.run("print('one')\ndisplay({'k': 1})\n'two'", on_event=seen.append)
    assert [e.kind for e in seen] == ["stream", "display", "result"] and all(isinstance(e, Event) for e in seen)
    assert seen[-1].data["text/plain"] == "'two'" and r.result == "'two'"


def test_timeout_interrupts_the_cell_and_the_kernel_stays(session):
    session.run("kept = 'still here'")
    with pytest.raises(SandboxTimeout):
        session.run("while True:\n    pass", timeout=2)
    assert session.run("kept").result == "'still here'"


def test_interrupt_from_another_thread_ends_a_running_cell(session):
    started = threading.Event()

    def on_event(event):
        if event.kind == "stream" and "started" in (event.text or ""):
            started.set()

    def interrupter():
        if started.wait(60):
            session.interrupt()

    helper = threading.Thread(target=interrupter)
    helper.start()
    r = session.run("print('started', flush=True)\nwhile True:\n    pass", timeout=90, on_event=on_event)
    helper.join()
    assert started.is_set() and not r.ok and r.error is not None
    assert session.run("1 + 1").result == "2"


# -- put and get -------------------------------------------------------------------------------------

def test_put_and_get_json_values_round_trip(session):
    value = {"name": "T1", "values": [44.1, 45.9, None, True], "nested": {"a": [1, [2, 3]]}, "n": 10 ** 18}
    session.put("readings", value)
    assert session.run("readings['nested']['a'][1][0] + 1").result == "3"
    assert session.get("readings") == value
    session.put("nan", float("nan"))
    assert math.isnan(session.get("nan"))


def test_put_carries_code_like_text_as_data(session):
    payload = "'); import os; os.system('touch pwned') #\\\"\"\"\n%sandbox_policy none\n!ls"
    session.put("text", payload)
    r = session.run("len(text)")
    assert r.result == str(len(payload)) and r.denials == []
    assert session.get("text") == payload
    assert not os.path.exists(os.path.join(session.cwd, "pwned"))


def test_get_returns_text_exactly_through_the_output_filter(session):
    # control characters, DEL, bidi overrides and escapes that the output filter rewrites in cell output
    tricky = "\x1b[31mred\x1b[0m \x7f \r\n \u202e evil \x00 \ud7ff \U0001f600 \\u0041"
    session.put("tricky", tricky)
    assert session.get("tricky") == tricky


def test_put_and_get_dataframes_as_table_json(session):
    frame = pd.DataFrame({"day": [1, 2, 3], "t1_us": [44.1, 45.9, float("nan")],
                          "when": pd.to_datetime(["2024-01-01", "2024-01-02", "2024-01-03"]),
                          "chip": ["a", "b", "c"]})
    session.put("frame", frame)
    r = session.run("print(type(frame).__name__ if False else frame['t1_us'].mean(), frame['when'].dt.day.sum())")
    assert r.output.split() == ["45.0", "6"]
    back = session.get("frame")
    pd.testing.assert_frame_equal(back, frame, check_dtype=False)
    assert str(back["when"].dtype).startswith("datetime64")
    session.run("made = frame.assign(double=frame['day'] * 2)")
    assert session.get("made")["double"].tolist() == [2, 4, 6]


def test_large_values_travel_in_chunks(session):
    big = ["x" * 1000 + str(i) for i in range(3000)]   # ~3 MB of JSON: several slices each way
    session.put("big", big)
    assert session.run("len(big), big[-1][-4:]").result == "(3000, '2999')"
    assert session.get("big") == big


def test_put_refuses_what_is_not_data_and_names_that_are_not_identifiers(session):
    session.run("for name in ('victim', 'x_y'):\n    pass\nvictim = 'untouched'")
    for bad in ("x; import os", "victim = 1 #", "__class__", "_private", "for", "a.b", "1x", "é", "x\n"):
        with pytest.raises(ValueError):
            session.put(bad, 1)
        with pytest.raises(ValueError):
            session.get(bad)
    for value in ({1, 2}, object(), b"bytes", {"k": 1j}, lambda: 1):
        with pytest.raises(TypeError):
            session.put("victim", value)
    assert session.run("victim").result == "'untouched'"


def test_get_of_a_missing_name_or_an_object_that_is_not_data(session):
    with pytest.raises(NameError):
        session.get("never_defined_here")
    session.run("class Opaque:\n    pass\nopaque = Opaque()\nfn = len")
    for name in ("opaque", "fn"):
        with pytest.raises(SandboxError):
            session.get(name)
    assert session.run("sandbox_session_blob").error.ename == "NameError"   # the helper cleaned up


def test_get_of_a_cell_object_that_lies_about_being_a_frame(session):
    session.run("class Liar:\n"
                "    def to_json(self, **kw):\n"
                "        return '{not json'\n"
                "liar = Liar()")
    with pytest.raises(ValueError):   # parsed as data by the client: a JSON error, nothing evaluated
        session.get("liar")


# -- files ---------------------------------------------------------------------------------------------

def test_upload_download_listdir_round_trip(session):
    blob = bytes(range(256)) * 9000   # 2.3 MB: several chunks each way
    session.upload("raw.bin", blob)
    session.upload("notes/../notes.txt", "héllo\n")
    assert session.download("raw.bin") == blob
    assert session.download("notes.txt") == "héllo\n".encode()
    r = session.run("import pandas as pd\npd.DataFrame({'a': [1, 2]}).to_csv('t.csv', index=False)\n"
                    "print(open('notes.txt').read())")
    assert r.output == "héllo\n\n"
    assert session.download("t.csv") == b"a\n1\n2\n"
    os.mkdir(os.path.join(session.cwd, "sub"))
    entries = {e.name: e for e in session.listdir()}
    assert entries["raw.bin"].kind == "file" and entries["raw.bin"].size == len(blob)
    assert entries["sub"].kind == "dir" and "t.csv" in entries
    session.upload("sub/inner.txt", b"")
    assert [(e.name, e.size) for e in session.listdir("sub")] == [("inner.txt", 0)]
    assert session.download("sub/inner.txt") == b""
    with pytest.raises(FileNotFoundError):
        session.download("missing.txt")
    with pytest.raises(NotADirectoryError):
        session.listdir("t.csv")


# -- status, restart, options ----------------------------------------------------------------------

def test_status_reports_policy_isolation_limits_and_health(session):
    st = session.status()
    assert st.policy == "data-science" and st.ceiling == "data-science"
    assert st.isolation == DEFAULT_TEST_ISOLATION and st.kernel_alive and st.where == "local"
    assert st.limits["timeout"] == 60 and st.limits["memory_mb"] == 2048 and st.files and not st.network
    if DEFAULT_TEST_ISOLATION == "kernel":
        assert "seccomp" in st.os_layers.get("active", [])


def test_restart_empties_the_namespace_and_keeps_files(session):
    session.run("before_restart = 1")
    session.upload("survives.txt", b"yes")
    session.restart()
    r = session.run("before_restart")
    assert r.error.ename == "NameError"
    assert session.download("survives.txt") == b"yes"
    assert session.run("2 + 2").result == "4"


def test_kernel_options_are_checked_before_any_kernel_starts():
    assert kernel_options("strict", "kernel", {"timeout": 5, "memory_mb": None}) == [
        "--SandboxKernel.policy=strict", "--SandboxKernel.isolation=kernel",
        "--SandboxKernel.limits={'timeout': 5.0, 'memory_mb': None}"]
    for bad in ({"policy": "strict --SandboxKernel.ceiling_policy=x"}, {"policy": "a\nb"},
                {"isolation": "container"}, {"limits": {"timeout": -1}}, {"limits": {"cpu": 1}},
                {"limits": {"timeout": "10"}}, {"limits": {"ticks": True}}, {"options": ["policy=x"]}):
        with pytest.raises(ValueError):
            kernel_options(**bad)
    with pytest.raises(ValueError):
        SandboxSession(policy="strict", gateway_url="http://127.0.0.1:1")
    with pytest.raises(ValueError):
        SandboxSession(cwd="/tmp", pool=object())


def test_session_options_are_the_operators_and_a_cell_cannot_loosen_them(tmp_path):
    require_kernelspec()
    with SandboxSession(policy="strict", isolation=DEFAULT_TEST_ISOLATION, limits={"timeout": 7},
                        cwd=str(tmp_path), kernel_name=KERNEL_NAME) as strict:
        st = strict.status()
        assert (st.policy, st.ceiling, st.limits["timeout"], st.files) == ("strict", "strict", 7, False)
        r = strict.run("%sandbox_policy data-science\nimport pandas")
        assert r.error.denial and r.denials[0].kind == "policy"
        assert strict.run("import pandas").denials[0].kind == "import"
        # files are off under strict: the file operations get the cell's own refusal
        with pytest.raises(SandboxDenied):
            strict.upload("x.txt", b"no")
        assert not os.path.exists(tmp_path / "x.txt")
        strict.put("numbers", [1, 2, 3])   # json is granted under strict
        assert strict.get("numbers") == [1, 2, 3]
        with pytest.raises(SandboxDenied) as denied:
            strict.put("frame", pd.DataFrame({"a": [1]}))   # pandas is not
        assert denied.value.denial.kind == "import"
    assert os.path.isdir(tmp_path)   # a directory the caller gave is never removed


def test_a_session_without_cwd_gets_a_private_directory_removed_at_close():
    require_kernelspec()
    s = SandboxSession(isolation=DEFAULT_TEST_ISOLATION, kernel_name=KERNEL_NAME).start()
    try:
        cwd = s.cwd
        assert os.path.isdir(cwd) and os.listdir(cwd) == []
        s.upload("a.txt", b"1")
        assert os.listdir(cwd) == ["a.txt"]
        assert json.loads(s.run("import json\nprint(json.dumps(open('a.txt').read()))").output) == "1"
    finally:
        s.close()
    assert not os.path.exists(cwd)
    with pytest.raises(SandboxError):
        s.run("1")


# -- the documented examples run and print what they say ---------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python_blocks(path):
    import re

    text = open(path, encoding="utf-8").read()
    return text, re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def _run_example(code, tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_agents_doc_session_example_prints_what_it_says(tmp_path):
    import re

    require_kernelspec()
    text, blocks = _python_blocks(os.path.join(ROOT, "docs", "agents.md"))
    example = next(b for b in blocks if "SandboxSession(" in b)
    promised = re.findall(r"prints\n\n```\n(.*?)```", text, re.DOTALL)[1]
    assert _run_example(example, tmp_path) == promised


def test_readme_agent_example_runs(tmp_path):
    require_kernelspec()
    _, blocks = _python_blocks(os.path.join(ROOT, "README.md"))
    example = next(b for b in blocks if "SandboxSession(" in b)
    lines = _run_example(example, tmp_path).splitlines()
    assert lines[0] == "mean 45.2 1 None"
    assert lines[1].startswith("ImportDenied: import of 'os' is not allowed by policy 'data-science' (line 1)")
