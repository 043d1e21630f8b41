"""One real attack per side door of the kernel; each asserts that nothing happened."""
import json
import os
import signal
import sqlite3
import time

import pytest
from jupyter_client.manager import KernelManager

from kernel_helpers import (KERNEL_NAME, iopub_types, require_kernelspec, run_interrupted_once_running, shell_request,
                            start_client)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("sidedoor-work")


@pytest.fixture(scope="module")
def kernel(workdir):
    client = start_client(cwd=str(workdir))
    yield client
    client.shutdown()


def marker(workdir, name):
    path = workdir / name
    if path.exists():
        path.unlink()
    return path


@pytest.mark.parametrize("template", [
    "!touch {path}",
    "  !touch {path}",
    "x = !touch {path}",
    "%system touch {path}",
    "%sx touch {path}",
    "%%bash\ntouch {path}",
    "%%sh\ntouch {path}",
    "%%script sh\ntouch {path}",
    "%%writefile {path}\npwned",
    "%run -e {path}",
    "%env SBX=1\n!touch {path}",
    "%pip install --target {path} nothing",
    "%load_ext {path}",
    "x = 1\nif x:\n    !touch {path}",
    "print(1)\n%%bash\ntouch {path}",
])
def test_ipython_escape_hatches_do_not_run(kernel, workdir, template):
    """Each is skipped with a note (the rest of the cell runs, tests/test_magics_kernel.py); none runs.
    (%%writefile runs, through the cell's confined open(): a path outside the working directory is
    refused.)"""
    path = marker(workdir.parent if template.startswith("%%writefile") else workdir, "escape-hatch-marker")
    result = kernel.run(template.format(path=path))
    if template.startswith("%%writefile"):
        assert result["denials"] and result["denials"][0]["kind"] == "file"
    else:
        assert result["denials"] and result["denials"][0]["kind"] == "magic"
        assert "was skipped" in result["output"] + "".join(o.get("text", "") for o in result["outputs"])
    time.sleep(0.1)
    assert not path.exists()


def test_a_skipped_magic_skips_only_its_line(kernel, workdir):
    result = kernel.run("ran_before = 1\n%run nothing.py\nran_after = 1")
    assert result["status"] == "ok"
    assert kernel.run("ran_before + ran_after")["outputs"][-1]["data"]["text/plain"] == "2"


@pytest.mark.parametrize("code", [
    "open('help-marker', 'w').write('x')?",
    "?open('help-marker', 'w')",
    "open('help-marker', 'w')??",
])
def test_help_syntax_runs_nothing(kernel, workdir, code):
    """Help syntax takes a name; a call in its place is skipped, never evaluated."""
    path = marker(workdir, "help-marker")
    result = kernel.run(code)
    assert result["denials"] and result["denials"][0]["kind"] == "magic"
    assert not path.exists()


@pytest.mark.parametrize("name", ["get_ipython", "In", "Out", "_ih", "_oh", "_i", "exit", "quit",
                                  "__IPYTHON__", "_dh", "display_pub", "__session__"])
def test_ipython_namespace_is_unreachable(kernel, name):
    """The names may exist as refusing stubs; using them must fail and reveal no IPython object."""
    for code in (f"{name}()", f"{name}[0]", f"{name}.__globals__"):
        result = kernel.run(code)
        assert result["status"] == "error", code
        assert "IPython" not in json.dumps(result["outputs"]) or "not reachable" in json.dumps(result["outputs"])
    assert kernel.run("'still alive'")["status"] == "ok"


def test_get_ipython_system_does_not_run(kernel, workdir):
    path = marker(workdir, "get-ipython-marker")
    kernel.run(f"get_ipython().system('touch {path}')")
    kernel.run(f"__builtins__['get_ipython']().system('touch {path}')")
    assert not path.exists()


def test_debugger_requests_are_refused(kernel):
    for command in ("initialize", "attach", "debugInfo", "dumpCell"):
        reply = shell_request(kernel, "debug_request",
                              {"type": "request", "seq": 1, "command": command, "arguments": {}},
                              channel="control")
        assert reply["content"]["success"] is False, command
    # Still working afterwards, and no debugpy listener was started.
    assert kernel.run("1 + 1")["status"] == "ok"


def test_subshells_are_refused(kernel):
    reply = shell_request(kernel, "create_subshell_request", {}, channel="control")
    assert reply["content"]["status"] == "error"
    listed = shell_request(kernel, "list_subshell_request", {}, channel="control")
    assert listed["content"]["subshell_id"] == []


def test_execute_on_a_made_up_subshell_does_not_run(kernel, workdir):
    path = marker(workdir, "subshell-marker")
    kc = kernel.kc
    msg = kc.session.msg("execute_request", {"code": f"open('{path.name}', 'w').write('x')", "silent": False,
                                              "store_history": True, "user_expressions": {},
                                              "allow_stdin": False, "stop_on_error": True})
    msg["header"]["subshell_id"] = "made-up"
    kc.shell_channel.send(msg)
    reply = kc.get_shell_msg(timeout=10)
    # The kernel answers this itself, the same on every ipykernel (7.3 would drop it without a reply).
    assert reply["parent_header"]["msg_id"] == msg["header"]["msg_id"]
    assert reply["msg_type"] == "execute_reply"
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "SandboxDenied", reply
    assert not path.exists()
    other = kc.session.msg("kernel_info_request", {})
    other["header"]["subshell_id"] = "made-up"
    kc.shell_channel.send(other)
    reply = kc.get_shell_msg(timeout=10)
    assert reply["parent_header"]["msg_id"] == other["header"]["msg_id"]
    assert reply["content"]["status"] == "error", reply
    assert kernel.run("1 + 1")["status"] == "ok"
    assert not path.exists()


def test_comms_from_the_front_end_open_nothing(kernel):
    kc = kernel.kc
    for target in ("jupyter.widget", "jupyter.widget.control", "ipyparallel"):
        msg = kc.session.msg("comm_open", {"comm_id": f"c-{target}", "target_name": target, "data": {}})
        kc.shell_channel.send(msg)
    time.sleep(0.3)
    reply = shell_request(kernel, "comm_info_request", {})
    assert reply["content"]["comms"] == {}
    assert kernel.run("2 * 21")["status"] == "ok"


SNEAKY_CLASS = '''
class Sneaky:
    _secret = "hidden-value"
    def __init__(self):
        self.visible = 1
        self._private_attr = 2
    @property
    def prop(self):
        open("completion-marker", "w").write("property ran")
        return 1
    def __getattr__(self, name):
        open("completion-marker", "w").write("getattr ran")
        return 1
    def __dir__(self):
        open("completion-marker", "w").write("dir ran")
        return ["injected"]
sneaky = Sneaky()
_hidden_global = 1
import numpy as np
import pandas as pd
df = pd.DataFrame({"a": [1, 2]})
'''


def complete(kernel, code):
    return shell_request(kernel, "complete_request", {"code": code, "cursor_pos": len(code)})["content"]


def inspect(kernel, code, detail=0):
    return shell_request(kernel, "inspect_request", {"code": code, "cursor_pos": len(code),
                                                     "detail_level": detail})["content"]


def test_completion_never_runs_sandbox_code_nor_reveals_hidden_names(kernel, workdir):
    path = marker(workdir, "completion-marker")
    assert kernel.run(SNEAKY_CLASS)["status"] == "ok"
    path.unlink(missing_ok=True)
    matches = complete(kernel, "sneaky.")["matches"]
    assert "visible" in matches and "prop" in matches
    assert "injected" not in matches
    assert not any(m.startswith("__") for m in matches)
    for code in ("sneaky.pr", "sneaky.prop.", "sneaky.missing.", "Sneaky.", "sneaky.__class__."):
        complete(kernel, code)
    assert not path.exists()
    assert not any(m.startswith("__") for m in complete(kernel, "")["matches"])
    assert not any(m.startswith("__st") or m.startswith("__") for m in complete(kernel, "_")["matches"])


def test_completion_hides_what_the_policy_denies_and_keeps_what_it_allows(kernel):
    kernel.run(SNEAKY_CLASS)
    assert "zip" in complete(kernel, "zi")["matches"]
    assert "groupby" in complete(kernel, "df.gro")["matches"]
    assert "DataFrame" in complete(kernel, "pd.Data")["matches"]
    np_names = complete(kernel, "np.")["matches"]
    assert "zeros" in np_names and "ctypeslib" not in np_names
    assert "to_pickle" not in complete(kernel, "df.to_pi")["matches"]
    assert not any(m.startswith("_") for m in complete(kernel, "np._")["matches"])
    assert "format" not in complete(kernel, "np.lib.")["matches"]  # numpy.lib.format is denied
    assert "read_pickle" not in complete(kernel, "pd.read_pi")["matches"]
    assert all(not m.startswith("__") for m in complete(kernel, "df.__")["matches"])


def test_inspection_never_runs_sandbox_code(kernel, workdir):
    kernel.run(SNEAKY_CLASS)
    path = marker(workdir, "completion-marker")
    for code in ("sneaky.prop", "sneaky.missing", "sneaky", "sneaky._secret", "sneaky.__class__"):
        for detail in (0, 1):
            inspect(kernel, code, detail)
    assert not path.exists()
    assert inspect(kernel, "zip")["found"] is True
    assert inspect(kernel, "np.ctypeslib")["found"] is False
    assert inspect(kernel, "sneaky.__class__.__subclasses__")["found"] is False
    # Private names of library objects stay hidden (a sandbox class's own _x is the cell's to read).
    assert inspect(kernel, "df._mgr")["found"] is False
    assert inspect(kernel, "np._core", 1)["found"] is False


def test_rich_output_cannot_carry_script(kernel):
    result = kernel.run('''
class Evil:
    def _repr_html_(self):
        return "<b>table</b><script>document.title='pwned'</script><img src=x onerror=alert(1)>"
    def _repr_markdown_(self):
        return "[x](javascript:alert(1)) <script>alert(1)</script>"
    def _repr_javascript_(self):
        return "alert(1)"
    def _repr_svg_(self):
        return "<svg onload=alert(1)></svg>"
Evil()
''')
    assert result["status"] == "ok", result["error"]
    data = [o for o in result["outputs"] if o["type"] == "execute_result"][0]["data"]
    assert set(data) <= {"text/plain", "text/html", "text/markdown"}
    blob = json.dumps(data).lower()
    assert "<script" not in blob and "onerror" not in blob and "javascript:" not in blob
    assert "<b>table</b>" in data.get("text/html", "")


def test_history_never_reaches_ipythons_database(tmp_path):
    require_kernelspec()
    km = KernelManager(kernel_name=KERNEL_NAME)
    km.start_kernel(env={**os.environ, "IPYTHONDIR": str(tmp_path / "ipython")}, cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        kc.execute_interactive("history_canary_7321 = 1", timeout=30)
        kc.history(hist_access_type="tail", n=5)
        reply = kc.get_shell_msg(timeout=10)
        assert any("history_canary_7321" in entry[2] for entry in reply["content"]["history"])
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    for db in (tmp_path / "ipython").rglob("history.sqlite"):
        rows = sqlite3.connect(db).execute("select source from history").fetchall()
        assert not any("history_canary_7321" in r[0] for r in rows)


def test_files_planted_in_the_working_directory_do_not_run_in_the_kernel(tmp_path):
    """A cell writes modules and IPython config into the working directory, then the kernel is
    restarted and asked for things that import lazily (usage_request imports psutil)."""
    outside = tmp_path / "outside"
    work = tmp_path / "work"
    outside.mkdir()
    work.mkdir()
    payload = f"open({str(outside / 'pwned')!r}, 'w').write('planted code ran')\n"
    client = start_client(cwd=str(work))
    try:
        names = ["psutil.py", "sandbox_kernel.py", "ipython_kernel_config.py", "ipython_config.py",
                 "jedi.py", "debugpy.py", "zmq_planted.py"]
        code = "\n".join(f"open({name!r}, 'w').write({payload!r})" for name in names)
        result = client.run(code)
        written = [name for name in names if (work / name).exists()]
        client.restart()
        shell_request(client, "usage_request", {}, channel="control")
        client.run("1 + 1")
        complete(client, "zi")
        inspect(client, "zip")
    finally:
        client.shutdown()
    assert result["status"] == "ok" or not written
    assert not (outside / "pwned").exists()


def test_signal_mode_interrupt_also_ends_the_cell(kernel):
    pid = kernel.km.provisioner.pid if kernel.km.provisioner else None
    if not pid:
        pytest.skip("no local kernel process")
    result = run_interrupted_once_running(kernel, "print('running')\nwhile True:\n    pass",
                                          interrupt=lambda: os.kill(pid, signal.SIGINT))
    assert result["status"] == "error" and result["error"]["ename"] == "Cancelled", result["error"]   # not its time limit
    assert kernel.run("'alive'")["status"] == "ok"


def test_denial_prints_one_readable_line(kernel):
    result = kernel.run("import subprocess")
    errors = [o for o in result["outputs"] if o["type"] == "error"]
    assert len(errors) == 1 and len(errors[0]["traceback"]) == 1
    line = errors[0]["traceback"][0]
    assert "subprocess" in line and "data-science" in line and "line 1" in line
    assert iopub_types(result).count("error") == 1


def test_the_sandbox_cannot_open_comms(kernel):
    for code in ("import comm\ncomm.create_comm(target_name='jupyter.widget')",
                 "import ipywidgets\nipywidgets.IntSlider()",
                 "import ipykernel.comm"):
        result = kernel.run(code)
        assert result["status"] == "error", code
        assert not [o for o in result["outputs"] if o["type"].startswith("comm")]
    assert shell_request(kernel, "comm_info_request", {})["content"]["comms"] == {}
