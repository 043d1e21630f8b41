"""IPython syntax in a notebook cell, through the kernel: %time/%timeit/obj? run in the sandbox, any
other magic line is skipped with one note and the rest of the cell runs (the skipped commands doing
nothing is tests/test_kernel_sidedoors.py)."""
import pytest

from kernel_helpers import start_client


@pytest.fixture(scope="module", params=["none", "kernel"])
def kernel(tmp_path_factory, request):
    client = start_client(cwd=str(tmp_path_factory.mktemp("magics-kernel")), isolation=request.param)
    yield client
    client.shutdown()


def texts(result, name=None):
    return "".join(o.get("text", "") for o in result["outputs"] if o["type"] == "stream"
                   and (name is None or o.get("name") == name))


def test_a_cell_with_skipped_lines_runs_the_rest(kernel):
    result = kernel.run("a = 1\n%matplotlib inline\n!pip install seaborn\n%load_ext autoreload\n"
                        "if a:\n    !ls\nb = a + 1\nb")
    assert result["status"] == "ok", result
    assert result["outputs"][-1]["data"]["text/plain"] == "2"
    notes = texts(result, "stderr")
    assert "note: line 3: `!pip install seaborn` was skipped: packages cannot be installed" in notes
    assert "note: line 4: `%load_ext autoreload` was skipped" in notes and "line 6: `!ls`" in notes
    assert "matplotlib" not in notes                     # display setup: silent
    assert [(d["kind"], d["target"], d["line"]) for d in result["denials"]] == [
        ("magic", "!pip", 3), ("magic", "%load_ext", 4), ("magic", "!ls", 6)]


def test_automagic_shell_lines_are_skipped_and_the_rest_runs(kernel, tmp_path):
    """`pip install x` and `cat file` without `!` are shell commands in IPython (automagic): skipped with a note;
    nothing is installed or read, and the rest of the cell runs."""
    result = kernel.run("pip install anywidget\ncat ~/.ssh/id_rsa\nx = 40 + 2\nx")
    assert result["status"] == "ok", result
    assert result["outputs"][-1]["data"]["text/plain"] == "42"
    notes = texts(result, "stderr")
    assert "note: line 1: `pip install anywidget` was skipped: packages cannot be installed" in notes
    assert "note: line 2: `cat ~/.ssh/id_rsa` was skipped: shell commands do not run" in notes
    assert [(d["kind"], d["line"]) for d in result["denials"]] == [("magic", 1), ("magic", 2)]


def test_a_cell_under_another_cell_magic_does_not_run(kernel):
    result = kernel.run("%%bash\nmarker_from_bash = 1")
    assert result["status"] == "ok" and "nothing in this cell ran" in texts(result, "stderr")
    assert kernel.run("marker_from_bash")["error"]["ename"] == "NameError"


def test_timing_magics_run_in_the_sandbox(kernel):
    kernel.run("nums = list(range(100))")
    result = kernel.run("%timeit -n 10 -r 2 sum(nums)")
    assert result["status"] == "ok" and "(mean \u00b1 std. dev. of 2 runs, 10 loops each)" in texts(result)
    result = kernel.run("%%time\ntotal = sum(nums)\ntotal")
    assert result["status"] == "ok" and "CPU times: user" in texts(result) and "Wall time:" in texts(result)
    assert result["outputs"][-1]["data"]["text/plain"] == "4950"
    result = kernel.run("%time import os")
    assert result["status"] == "error" and result["error"]["ename"] == "ImportDenied", result


def test_help_syntax_and_help(kernel):
    result = kernel.run("sum?")
    assert result["status"] == "ok" and texts(result).startswith("Help on built-in function sum"), result
    result = kernel.run("help(print)")
    assert result["status"] == "ok" and "print(*args, sep=' ', end='\\n', file=None, flush=False)" in texts(result)


def test_eval_exec_and_globals_in_a_notebook(kernel):
    result = kernel.run("frames = {'sales': [1, 2]}\nexec('sales = frames[\"sales\"]')\n"
                        "'sales' in globals(), eval('sum(sales)')")
    assert result["status"] == "ok" and result["outputs"][-1]["data"]["text/plain"] == "(True, 3)", result
