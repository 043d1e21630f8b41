"""Rich output over the protocol: pandas, Plotly round trip, display(), seed 002's `result`, output
caps, streaming, and rendering under the cell's limits."""
import json

import pytest

from kernel_helpers import run_interrupted_once_running, start_client

PLOTLY = "application/vnd.plotly.v1+json"


@pytest.fixture(scope="module", params=["none", "process", "kernel"])
def kernel(request, tmp_path_factory):
    """Rich output must be the same at every isolation level."""
    client = start_client(cwd=str(tmp_path_factory.mktemp("display-work")), isolation=request.param)
    yield client
    client.shutdown()


def outputs_of(result, kind):
    return [o for o in result["outputs"] if o["type"] == kind]


def test_pandas_result_has_html_and_text(kernel):
    result = kernel.run("import pandas as pd\ndf = pd.DataFrame({'city': ['a', 'b'], 'n': [1, 2]})\ndf")
    data = outputs_of(result, "execute_result")[0]["data"]
    assert "<table" in data["text/html"] and "city" in data["text/html"]
    assert "city" in data["text/plain"]


def test_plotly_show_round_trip(kernel):
    result = kernel.run(
        "import plotly.graph_objects as go\n"
        "fig = go.Figure(go.Bar(x=['a', 'b'], y=[3, 5]))\n"
        "fig.update_layout(title='counts')\n"
        "fig.show()")
    assert result["status"] == "ok", result["error"]
    shown = outputs_of(result, "display_data")
    assert len(shown) == 1
    data = shown[0]["data"]
    assert set(data) == {PLOTLY, "text/plain"}
    fig = data[PLOTLY]
    assert fig["data"][0]["type"] == "bar" and fig["layout"]["title"]["text"] == "counts"
    assert len(data["text/plain"]) < 200 and "text/html" not in data
    assert result["charts"] == [fig]
    assert len(json.dumps(fig)) < 100_000  # the compact JSON, never plotly's multi-megabyte HTML


def test_plotly_figure_as_result_and_express(kernel):
    result = kernel.run("import plotly.express as px\npx.scatter(x=[1, 2, 3], y=[2, 4, 8])")
    data = outputs_of(result, "execute_result")[0]["data"]
    assert PLOTLY in data and data[PLOTLY]["data"][0]["type"] == "scatter"


def test_display_publishes_display_data(kernel):
    result = kernel.run("display({'a': 1})\ndisplay('two')\n3")
    assert [o["type"] for o in result["outputs"]] == ["display_data", "display_data", "execute_result"]


def test_seed002_result_convention(kernel):
    result = kernel.run(
        "vals = [1, 2, 3]\n"
        "result = {'output': f'mean={sum(vals) / len(vals)}',\n"
        "          'chart': {'data': [{'x': [1, 2, 3], 'y': vals, 'type': 'scatter'}], 'layout': {}}}")
    assert result["status"] == "ok"
    assert "mean=2.0" in result["output"]
    assert result["charts"] and result["charts"][0]["data"][0]["y"] == [1, 2, 3]
    assert any(PLOTLY in o["data"] for o in outputs_of(result, "display_data"))


def test_trailing_semicolon_suppresses_the_result(kernel):
    assert outputs_of(kernel.run("1 + 1;"), "execute_result") == []


def test_output_flood_is_capped_with_head_tail_and_marker(kernel):
    result = kernel.run("%%sandbox --output 20000\nfor i in range(20000):\n    print('line', i)")
    text = "".join(o["text"] for o in outputs_of(result, "stream"))
    assert result["truncated"] is True
    assert "line 0\n" in text and "line 19999\n" in text
    assert "cut" in text
    assert len(text) < 30_000


def test_huge_repr_is_capped(kernel):
    result = kernel.run("'x' * 3_000_000")
    text = outputs_of(result, "execute_result")[0]["data"]["text/plain"] if outputs_of(result, "execute_result") \
        else ""
    assert len(text) <= 1_100_000


def test_a_looping_repr_ends_with_the_time_limit(kernel):
    result = kernel.run("%%sandbox --timeout 1\n"
                        "class Slow:\n"
                        "    def __repr__(self):\n"
                        "        while True:\n"
                        "            pass\n"
                        "Slow()", timeout=20)
    # the cell's own 1 s limit ended the repr (a repr rendered outside the limits would never end)
    assert result["status"] == "error" and "time limit exceeded: 1 s" in result["error"]["evalue"], result["error"]


def test_a_looping_repr_html_ends_with_the_time_limit(kernel):
    result = kernel.run("%%sandbox --timeout 1\n"
                        "class Slow:\n"
                        "    def _repr_html_(self):\n"
                        "        while True:\n"
                        "            pass\n"
                        "display(Slow())", timeout=20)
    assert result["status"] == "error" and "time limit" in result["error"]["evalue"]


def test_error_traceback_shows_the_cells_own_lines(kernel):
    result = kernel.run("def inner():\n    return 1 / 0\n\ninner()")
    tb = "\n".join(result["error"]["traceback"])
    assert "inner()" in tb and "return 1 / 0" in tb and "ZeroDivisionError" in tb
    assert "sandbox_kernel" not in tb and "site-packages" not in tb


# The front end gets 'early' while the cell sleeps: it interrupts the cell on seeing it, and 'late' never comes
# (output held until the end would arrive after the cell, too late to interrupt it). The sleep is the give-up.

def test_stdout_is_streamed_while_the_cell_runs(kernel):
    result = run_interrupted_once_running(kernel, "import time\nprint('early', flush=True)\ntime.sleep(20)\n"
                                                  "print('late')")
    assert result["status"] == "error" and result["error"]["ename"] == "Cancelled", result["error"]
    assert result["output"] == "early\n", result["output"]


def test_stdout_without_flush_is_streamed_while_the_cell_runs(kernel):
    result = run_interrupted_once_running(kernel, "import time\nprint('early')\ntime.sleep(20)\nprint('late')")
    assert result["status"] == "error" and result["error"]["ename"] == "Cancelled", result["error"]
    assert result["output"] == "early\n", result["output"]


def test_ipython_display_updates_and_clears_over_the_protocol(kernel):
    """IPython.display's display_id, update and clear_output become the protocol's own messages."""
    result = kernel.run("from IPython.display import display, clear_output, HTML, IFrame\n"
                        "h = display(HTML('<b>one</b>'), display_id=True)\n"
                        "h.update(HTML('<b>two</b>'))\n"
                        "print('before')\n"
                        "clear_output(wait=True)\n"
                        "display(IFrame('https://example.com/app', width=400, height=300))")
    assert result["status"] == "ok", result["error"]
    outputs = [o for o in result["outputs"] if o["type"] != "stream" or o["name"] == "stdout"]
    kinds = [o["type"] for o in outputs if o["type"] != "stream"]
    assert kinds == ["display_data", "update_display_data", "clear_output", "display_data"], kinds
    printed = "".join(o["text"] for o in outputs[:[o["type"] for o in outputs].index("clear_output")]
                      if o["type"] == "stream")
    assert printed == "before\n"   # what was printed before clear_output reached the front end first
    outputs = [o for o in outputs if o["type"] != "stream"]
    first, update = outputs[0], outputs[1]
    display_id = first["transient"]["display_id"]
    assert display_id and update["transient"] == {"display_id": display_id}
    assert first["data"]["text/html"] == "<b>one</b>" and update["data"]["text/html"] == "<b>two</b>"
    assert outputs[2]["wait"] is True
    iframe = outputs[3]["data"]
    assert set(iframe) == {"text/plain"} and "not loaded" in iframe["text/plain"]


def test_a_display_id_the_kernel_cannot_key_by_is_published_without_it(kernel):
    result = kernel.run("from IPython.display import display, update_display\n"
                        "display('a', display_id='bad id <x>')\n"
                        "update_display('b', display_id='bad id <x>')")
    assert result["status"] == "ok", result["error"]
    assert [(o["type"], o.get("transient")) for o in result["outputs"]] == [("display_data", {}),
                                                                            ("display_data", {})]
