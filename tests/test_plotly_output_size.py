"""Issue 11, item 8: large Plotly charts through a real kernel, at every isolation level.

A 100k-point Scattergl (2.6 MB as JSON lists) rendered as a note under the 1 MB display cap while the cell
reported success. Now numeric arrays leave in plotly.js's typed-array form ({"dtype", "bdata"}), displays
have a cap of their own (max_display_bytes, 5 MB by default) separate from the text limit, and a display
left out is named on one stderr line with the reply's `truncated` true (no "0 characters of output cut").
`pio.show(dict)` validates the dict into a figure, as plotly does, instead of showing its repr.
"""
from __future__ import annotations

import base64
import json
import re

import numpy as np
import pytest

from kernel_helpers import start_client

PLOTLY = "application/vnd.plotly.v1+json"
CAP = 5_000_000  # SandboxKernel.max_display_bytes's default
NOT_SHOWN = re.compile(r"\[sandbox\] (?:a Plotly chart|a display|a chart) of [\d.]+ [kM]B not shown: "
                       r"over the cell's display limit of 5\.0 MB(?:; [\d.]+ [kM]?B already shown)?\n")


@pytest.fixture(scope="module", params=["none", "process", "kernel"])
def kernel(request, tmp_path_factory):
    client = start_client(cwd=str(tmp_path_factory.mktemp("plotly-size")), isolation=request.param)
    yield client
    client.shutdown()


def displays(result):
    return [o["data"] for o in result["outputs"] if o["type"] in ("display_data", "execute_result")]


def stderr(result) -> str:
    return "".join(o["text"] for o in result["outputs"] if o["type"] == "stream" and o["name"] == "stderr")


def decoded(spec) -> np.ndarray:
    return np.frombuffer(base64.b64decode(spec["bdata"]), dtype="<" + spec["dtype"])


SCATTERGL = {
    "numpy": "import numpy as np\nx = np.arange(100_000)\ny = np.sin(x / 1000.0)\n",
    "lists": "import math\nx = list(range(100_000))\ny = [math.sin(i / 1000.0) for i in x]\n",
}


@pytest.mark.parametrize("arrays", sorted(SCATTERGL))
def test_100k_point_scattergl_renders_as_a_chart(kernel, arrays):
    result = kernel.run(SCATTERGL[arrays] + "import plotly.graph_objects as go\n"
                        "fig = go.Figure(go.Scattergl(x=x, y=y, mode='markers'))\nfig.show()")
    assert result["status"] == "ok", result["error"]
    shown = displays(result)
    assert len(shown) == 1 and PLOTLY in shown[0], shown
    trace = shown[0][PLOTLY]["data"][0]
    assert trace["type"] == "scattergl"
    assert trace["x"]["dtype"] == "i4" and trace["y"]["dtype"] == "f8"   # plotly.js's typed arrays
    assert decoded(trace["x"]).tolist() == list(range(100_000))
    assert np.allclose(decoded(trace["y"]), np.sin(np.arange(100_000) / 1000.0))
    size = len(json.dumps(shown[0][PLOTLY]))
    assert 1_500_000 < size < 1_700_000 < CAP   # as JSON lists: 2.6 MB (x and y), over the old 1 MB cap
    assert result["truncated"] is False and result["charts"] == [shown[0][PLOTLY]]
    assert "cut" not in stderr(result) and "not shown" not in stderr(result)


def test_text_limit_does_not_cap_displays(kernel):
    """The policy's output limit (here 10 kB) cuts text; the chart has the display cap."""
    result = kernel.run("%%sandbox --output 10000\n" + SCATTERGL["numpy"] +
                        "import plotly.graph_objects as go\nprint('t' * 50_000)\n"
                        "go.Figure(go.Scattergl(x=x, y=y)).show()")
    assert result["status"] == "ok", result["error"]
    assert [PLOTLY in d for d in displays(result)] == [True]
    printed = "".join(o["text"] for o in result["outputs"] if o["type"] == "stream" and o["name"] == "stdout")
    assert 5_000 < printed.count("t") <= 10_000
    assert result["truncated"] is True and "the cell's text limit is 10.0 kB" in stderr(result)


@pytest.mark.parametrize("points, what", [(600_000, "a Plotly chart"), (1_400_000, "a display")])
def test_too_large_figure_is_reported(kernel, points, what):
    """6.4 MB of packed numbers is over the 5 MB display cap (the kernel leaves the chart out); 15 MB is
    past what the engine and the worker pass on (twice the cap: the kernel names their note's display).
    Either way: the cell's result, one line naming what was left out and the limit, truncated in the
    reply, no text-cut marker."""
    result = kernel.run(f"import numpy as np, plotly.graph_objects as go\n"
                        f"y = np.random.default_rng(0).normal(size={points})\n"
                        f"go.Figure(go.Scattergl(y=y)).show()\nprint('done')")
    assert result["status"] == "ok", result["error"]
    assert not any(PLOTLY in d for d in displays(result))
    lines = stderr(result)
    assert NOT_SHOWN.fullmatch(lines) and lines.startswith(f"[sandbox] {what} of "), lines
    assert "characters of output cut" not in lines and "output truncated" not in lines
    assert result["truncated"] is True and result["charts"] == []
    assert result["output"] == "done\n" or "done" in "".join(
        o.get("text", "") for o in result["outputs"] if o["type"] == "stream")


def test_second_chart_over_the_cap_is_named_after_the_first(kernel):
    result = kernel.run(SCATTERGL["numpy"] + "import plotly.graph_objects as go\n"
                        "for i in range(4):\n    go.Figure(go.Scattergl(x=x, y=y + i)).show()")
    assert result["status"] == "ok", result["error"]
    assert sum(PLOTLY in d for d in displays(result)) == 3  # 1.6 MB each: the fourth is past 5 MB
    lines = stderr(result).splitlines(keepends=True)
    assert len(lines) == 1 and NOT_SHOWN.fullmatch(lines[0]) and "already shown" in lines[0], lines
    assert result["truncated"] is True


def test_pio_show_of_a_dict_is_a_chart(kernel):
    result = kernel.run("import plotly.io as pio\n"
                        "pio.show({'data': [{'type': 'bar', 'x': ['a', 'b'], 'y': [3, 5]}], "
                        "'layout': {'title': {'text': 'counts'}}})")
    assert result["status"] == "ok", result["error"]
    (data,) = displays(result)
    assert data[PLOTLY]["data"][0]["type"] == "bar" and data[PLOTLY]["layout"]["title"]["text"] == "counts"
    assert data["text/plain"].startswith("Figure(") and "{'data'" not in data["text/plain"]


def test_pio_show_validates_the_dict_like_plotly(kernel):
    bad = kernel.run("import plotly.io as pio\npio.show({'data': [{'type': 'bar', 'nonsense': 1}]})")
    assert bad["status"] == "error" and bad["error"]["ename"] == "ValueError", bad["error"]
    assert not displays(bad)
    lenient = kernel.run("import plotly.io as pio\n"
                         "pio.show({'data': [{'type': 'bar', 'y': [1, 2], 'nonsense': 1}]}, validate=False)")
    assert lenient["status"] == "ok", lenient["error"]
    (data,) = displays(lenient)
    assert data[PLOTLY]["data"][0] == {"type": "bar", "y": [1, 2]}
