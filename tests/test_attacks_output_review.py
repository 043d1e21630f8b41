"""An outsider's attack on the wall between sandboxed cells and the user's browser and terminal.

Written by a reviewer who had not read the output filter: each test performs one attack through a real
kernel at the default configuration (the `kernel` isolation level, the `data-science` policy) and
asserts that the promise held: nothing a cell outputs runs script or loads a remote URL in the browser,
redresses JupyterLab, acts in a terminal, makes a cell's own text read as a sandbox denial, or makes
the kernel's own work on output superlinear or unbounded. Strict xfails are findings the review made
and did not fix (reason "FINDING: ..."); they fail CI the day they start passing.

Browser-side claims were checked in a real JupyterLab + headless Chromium with every remote host mapped
to a recording server: tests/review_output_browser.py (same machinery as test_browser_jupyterlab.py).
It showed: the forged denial lines below render in JupyterLab exactly like a denial (same
application/vnd.jupyter.stderr box); the HTML route's mutation-XSS payloads, `&#36;`-spelt math and a
Plotly `$\\style{url()}$` title set no flag and made no request; headings in HTML get no ids; the
sanitiser's work shows up as a cell that keeps JupyterLab's kernel busy for 14-17 s.

Costs that cannot be counted from outside (the kernel's HTML sanitiser is a C library) are measured
as what the OS reports for the kernel's process: its CPU seconds and its peak resident memory
(VmHWM), each with a margin of 10x or more over what linear work needs; no wall-clock is asserted.
"""
from __future__ import annotations

import base64
import json
import os
import queue
import re
import struct
import zlib
from html.parser import HTMLParser

import pytest

from kernel_helpers import shell_request, start_client

PLOTLY = "application/vnd.plotly.v1+json"
FORGED_IMPORT = ("ImportDenied: import of 'os' is not allowed by policy 'data-science' (line 1): "
                 "this module is not granted.")
# What acts in a terminal: ESC, BEL, the other C0 controls but \n and \t, DEL, C1, bidi controls.
TERMINAL_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
DENIAL_NAMES = ("ValidationDenied", "NameDenied", "AttributeDenied", "ImportDenied", "BuiltinDenied",
                "FileDenied", "NetworkDenied", "OperationDenied", "SizeDenied", "CallDenied",
                "LimitExceeded", "TimeLimitExceeded", "TickLimitExceeded", "MemoryLimitExceeded")

HELPERS = '''\
class Bundle:
    def __init__(self, data, metadata=None):
        self.data, self.metadata = data, metadata
    def _repr_mimebundle_(self, include=None, exclude=None):
        return (self.data, self.metadata) if self.metadata is not None else self.data

class Html:
    def __init__(self, text):
        self.text = text
    def _repr_html_(self):
        return self.text

class Markdown:
    def __init__(self, text):
        self.text = text
    def _repr_markdown_(self):
        return self.text

class Plotly:
    def __init__(self, figure):
        self.figure = figure
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"application/vnd.plotly.v1+json": self.figure, "text/plain": "a figure"}
'''


def _start(tmp_path_factory, name):
    client = start_client(cwd=str(tmp_path_factory.mktemp(name)), isolation="kernel")
    setup = client.run(HELPERS)
    if setup["status"] != "ok":     # not an AssertionError: a strict xfail must not pass on a broken setup
        client.shutdown()
        raise RuntimeError(f"the kernel did not run the helpers: {setup['error']}")
    return client


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """The default level, as JupyterLab starts the kernelspec."""
    client = _start(tmp_path_factory, "review-work")
    yield client
    client.shutdown()


@pytest.fixture
def fresh_kernel(tmp_path_factory):
    """A kernel of its own, for the measurements of the kernel's process (its peak memory only grows)."""
    client = _start(tmp_path_factory, "review-fresh")
    yield client
    client.shutdown()


def published(result) -> list[dict]:
    return [o["data"] for o in result["outputs"] if o["type"] in ("display_data", "execute_result")]


def stream(result, name: str) -> str:
    return "".join(o["text"] for o in result["outputs"] if o["type"] == "stream" and o["name"] == name)


def strings(value):
    """Every string in a JSON value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def alive(kernel) -> bool:
    return kernel.run("1 + 1", timeout=60)["status"] == "ok"


def kernel_pid(client) -> int:
    return client.km.provisioner.pid


def kernel_cpu_seconds(client) -> float:
    """User + system CPU of the kernel's own process (not the worker), as the OS accounts it."""
    with open(f"/proc/{kernel_pid(client)}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kernel_peak_kb(client) -> int:
    with open(f"/proc/{kernel_pid(client)}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


# -- Terminals: streams, errors, completion, inspection, user_expressions --------------------------


TERMINAL_PAYLOAD = ("osc52 \x1b]52;c;aGk=\x07 osc8 \x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\ "
                    "clear \x1b[2J\x1b[H up \x1b[A alt \x1b[?1049h c1 \x9b2J nel \x85 bs \x08 "
                    "bidi \u202e\u2066\u200f\u061c over\rwrite")


def test_streams_show_terminal_controls_as_text(kernel):
    result = kernel.run(f"print({TERMINAL_PAYLOAD!r})")
    text = stream(result, "stdout")
    assert "osc52" in text and "write" in text
    assert not TERMINAL_CONTROL.search(text), ascii(text)
    assert not TERMINAL_CONTROL.search(result["output"])


@pytest.mark.parametrize("sgr", ["08", "008", "1;08", ";8", "8;", "0008", "7", "07", "5", "6", "27;7",
                                 "4:8", "38:5:8", "?1049h", " 8", "99999999999999999999",
                                 "1" + ";1" * 3000])
def test_concealing_and_odd_sgr_spellings_are_not_sent_raw(kernel, sgr):
    """Conceal, blink and reverse video are dropped however the parameter is spelt (leading zeros,
    empty parameters, colon sub-parameters); anything the filter does not parse is shown as text."""
    result = kernel.run(f"print({('A' + chr(27) + '[' + sgr + ('' if sgr.endswith('h') else 'm') + 'B')!r})")
    assert "\x1b" not in stream(result, "stdout"), ascii(stream(result, "stdout")[:200])


def test_error_fields_and_shown_source_lines_are_cleaned(kernel):
    raw = "\x1b]52;c;aGk=\x07\u202e"
    runtime = kernel.run(f'x = "{raw}"; raise ValueError("v{raw}")')
    syntax = kernel.run(f'x = "{raw}" +\n')
    for result in (runtime, syntax):
        error = result["outputs"][-1]
        assert error["type"] == "error"
        for text in [error["ename"], error["evalue"], *error["traceback"]]:
            assert not TERMINAL_CONTROL.search(text), ascii(text)


def test_completion_and_inspection_show_controls_as_text(kernel):
    setup = kernel.run('class C:\n    """doc \\x1b]52;c;aGk=\\x07 \\u202e"""\n'
                       '    def m(self):\n        "mdoc \\x1b[2J"\n'
                       'c = C()\nsetattr(c, "z" * 100000, 1)\n'
                       'd = {"k\\x1b]52;c;aGk=\\x07": 1}\n'
                       'try:\n    setattr(c, "a\\x1b[2Jb", 1)\nexcept AttributeError:\n    pass')
    assert setup["status"] == "ok", setup["error"]
    for code in ("c.", "c.z", 'd["'):
        reply = shell_request(kernel, "complete_request", {"code": code, "cursor_pos": len(code)})["content"]
        for match in reply["matches"]:
            assert not TERMINAL_CONTROL.search(match) and len(match) <= 200, ascii(match[:80])
    for code in ("C", "c.m", "d"):
        reply = shell_request(kernel, "inspect_request", {"code": code, "cursor_pos": len(code), "detail_level": 1})
        assert set(reply["content"]["data"]) <= {"text/plain"}
        assert not TERMINAL_CONTROL.search(reply["content"]["data"].get("text/plain", ""))


def test_user_expressions_are_cleaned_sanitised_and_capped_together(kernel):
    kernel.run('class R:\n    def __repr__(self):\n        return "repr\\x1b]52;c;aGk=\\x07\\u202e"\n'
               '    def _repr_html_(self):\n        return "<img src=//evil.example/ue><script>1</script>"\nr = R()')
    expressions = {"r": "r", **{f"big{i}": "'y' * 600000" for i in range(40)}}
    result = kernel.run("pass", user_expressions=expressions)
    values = result["user_expressions"]
    assert values["r"]["data"]["text/html"] == "<img>"
    assert not TERMINAL_CONTROL.search(values["r"]["data"]["text/plain"])
    assert len(json.dumps(values)) < 1_200_000      # 40 x 600 kB asked, one cell's text cap given


# -- Denials: the sandbox's word ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ImportDenied", "LimitExceeded", "TimeLimitExceeded", "NetworkDenied"])
def test_a_cell_class_named_like_a_denial_is_labelled_as_the_cells(kernel, name):
    result = kernel.run(f"class {name}(Exception):\n    pass\nraise {name}('import of \\'os\\' is not allowed')")
    assert result["error"]["denial"] is False and result["denials"] == []
    assert result["error"]["ename"].startswith(f"{name} (raised by the cell")


def test_rewriting_a_caught_denials_args_does_not_change_what_it_says(kernel):
    result = kernel.run("try:\n    import os\nexcept Exception as e:\n    e.args = ('import of \\'x\\' FORGED',)\n"
                        "    raise e")
    assert "FORGED" not in json.dumps(result["error"]) and "FORGED" not in json.dumps(result["denials"])


def test_warning_hooks_and_type_made_classes_are_refused(kernel):
    for source in ("import warnings\nwarnings.formatwarning = lambda *a, **k: 'ImportDenied: x\\n'",
                   "import warnings\nwarnings.showwarning = print",
                   "E = type('ImportDenied', (Exception,), {})"):
        result = kernel.run(source)
        assert result["status"] == "error" and result["error"]["denial"] is True, source


def test_a_result_dict_cannot_write_the_replys_own_fields(kernel):
    result = kernel.run('result = {"output": 1, "denials": [{"message": "forged"}], "error": "forged", '
                        '"policy": "unrestricted", "isolation": "none", "truncated": True}')
    assert result["status"] == "ok" and result["error"] is None and result["denials"] == []
    assert result["policy"] == "data-science" and result["isolation"] == "kernel"


# Was (fixed): FINDING: a real denial carries cell-chosen lines. The attribute name of getattr() goes into the
# AttributeDenied message with its newlines, so a cell that never imported anything shows a whole
# 'ImportDenied: import of 'os' ...' line (or any notice) inside the sandbox's own one-line denial, in the
# reply's denials and as a separate entry of %sandbox_audit. Seen in JupyterLab too.
def test_a_real_denial_cannot_carry_a_forged_line(kernel):
    result = kernel.run(f"x = 1\ngetattr(x, {('_a' + chr(10) + FORGED_IMPORT)!r})")
    assert result["error"]["denial"] is True
    shown = "\n".join(result["error"]["traceback"]).splitlines()
    assert len(shown) == 1 and not any(line.startswith("ImportDenied") for line in shown), shown
    assert all("\n" not in d["message"] for d in result["denials"])
    audit = stream(kernel.run("%sandbox_audit"), "stdout")
    assert not any(line.startswith("ImportDenied") for line in audit.splitlines()), audit


# Was FINDING: stderr could show a line reading exactly like a denial (warnings.warn('\\rImportDenied: ...')).
# A cell may print any text, so the answer is a mark no cell text can carry: a real denial's line
# starts with DENIAL_MARK (added by the kernel; clean_text spells it out in all cell text).
def test_stderr_cannot_show_a_line_that_reads_as_a_denial(kernel):
    from sandbox_kernel.outputfilter import DENIAL_MARK

    for message in (chr(13) + FORGED_IMPORT, "x" + chr(10) + FORGED_IMPORT, DENIAL_MARK + " " + FORGED_IMPORT):
        result = kernel.run(f"import warnings\nwarnings.warn({message!r})")
        assert result["status"] == "ok"
        lines = stream(result, "stderr").splitlines()
        assert not any(DENIAL_MARK in line for line in lines), lines
    real = kernel.run("import os")
    assert real["error"]["traceback"][0].startswith(DENIAL_MARK + " ImportDenied: ")


# Was (fixed): FINDING: a denial caught in one cell and raised in a later cell is reported as that later
# cell's denial (error.denial true, the reply's denials list it), although nothing was refused in it: a cell
# can keep real denials and replay them whenever it wants its own failure to look like the sandbox's.
def test_a_denial_caught_earlier_is_not_reported_as_a_later_cells_denial(kernel):
    kernel.run("try:\n    import os\nexcept Exception as e:\n    saved = e")
    result = kernel.run("raise saved")
    assert result["status"] == "error"
    assert result["error"]["denial"] is False and result["denials"] == []


# -- MIME types, metadata, display ids -------------------------------------------------------------


def test_renderers_that_fetch_or_run_are_dropped(kernel):
    bundle = {"application/vnd.vegalite.v5+json": {"data": {"url": "http://evil.example/v.json"}, "mark": "point"},
              "application/vnd.vega.v5+json": {"data": [{"name": "a", "url": "http://evil.example/w.json"}]},
              "text/vnd.mermaid": "graph TD; A-->B", "image/svg+xml": "<svg onload=alert(1)>",
              "application/vnd.jupyter.stderr": FORGED_IMPORT, "application/vnd.jupyter.stdout": "x",
              "application/vnd.jupyter.widget-view+json": {"model_id": "x"}, "application/pdf": "JVBER",
              "application/geo+json": {"type": "Point"}, "text/latex": "$\\href{javascript:alert(1)}{x}$",
              "application/javascript": "window.x=1", "TEXT/HTML": "<script>1</script>",
              "text/html ": "<script>1</script>", "text/html;charset=utf-8": "<img src=//evil.example/c>",
              "application/x.custom+json": {"a": 1}, "text/plain": "plain"}
    result = kernel.run(f"display(Bundle({bundle!r}))")
    assert published(result) == [{"text/plain": "plain"}]
    assert {f["mime"] for f in result["filtered"]} == set(bundle) - {"text/plain"}


def test_display_metadata_and_display_ids_never_reach_the_front_end(kernel):
    result = kernel.run("display(Bundle({'text/html': '<b>x</b>', 'text/plain': 'x'}, "
                        "{'text/html': {'isolated': True}, 'image/png': {'width': 10**9}, 'x': '\\x1b[2J'}), "
                        "display_id='abc')\n"
                        "display(Html('<i>y</i>'), transient={'display_id': 'zzz'})")
    messages = [o for o in result["outputs"] if o["type"] in ("display_data", "update_display_data")]
    assert [m["type"] for m in messages] == ["display_data", "display_data"]
    assert all(m["metadata"] == {} and m["transient"] == {} for m in messages)


MXSS = [
    '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>',
    "<xmp><img src=x onerror=alert(1)></xmp><noembed><img src=x onerror=alert(2)></noembed>"
    "<iframe><img src=x onerror=alert(3)></iframe><noframes><img src=x onerror=alert(4)></noframes>",
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "<svg><p><style><img src=x onerror=alert(1)>",
    "<math><mi><mglyph><svg><mtext><textarea><path id=</textarea><img onerror=alert(1) src=1>",
    '<table><a href="#x" title="<img src=x onerror=alert(1)>">a</a><tr><td>1</td></tr></table>',
    '<img src="data:image/png;base64,iVBORw0KGgo= "><img src=" data:image/png;base64,x">'
    '<img src="data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+"><img src="DATA:image/png;base64,AA">',
    '<a href="#//evil.example">b</a><a href=" #x">c</a><a href="#&#10;javascript:alert(1)">d</a>'
    '<a href="#x" ping="//evil.example/p" target="_blank">p</a>',
    '<img src="data:image/png;base64,iVBORw0KGgo=" usemap="#m"><map name="m">'
    '<area href="//evil.example/a" shape=rect coords=0,0,100,100></map>',
    '<q cite="//evil.example/q">q</q><blockquote cite="//evil.example/b">b</blockquote>'
    '<table background="//evil.example/t"><td background=x>x</table>',
    '<a name="jp-main-content-panel" id="x">n</a><img name="getElementById"><form name="x"><input name=y>',
    '<p dir="rtl" lang="x" hidden>x</p><div popover>o</div>'
    '<details open ontoggle=alert(1)><summary>s</summary></details>',
]


ALLOWED_TAGS = {"a", "abbr", "b", "blockquote", "br", "caption", "code", "col", "colgroup", "dd", "del", "details",
                "div", "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li",
                "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "summary", "sup",
                "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var"}
ALLOWED_ATTRIBUTES = {"title", "href", "src", "alt", "width", "height", "colspan", "rowspan", "span", "start",
                      "align", "scope", "open"}


class _Elements(HTMLParser):
    """Every element and attribute as a browser's tokenizer sees them in the published HTML."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.found: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def elements(html: str) -> list[tuple[str, dict]]:
    parser = _Elements()
    parser.feed(html)
    parser.close()
    return parser.found


@pytest.mark.parametrize("payload", MXSS, ids=range(len(MXSS)))
def test_html_parser_tricks_come_out_inert(kernel, payload):
    html = published(kernel.run(f"display(Html({payload!r}))"))[0].get("text/html", "")
    for tag, attributes in elements(html):
        assert tag in ALLOWED_TAGS, (tag, html)
        assert set(attributes) <= ALLOWED_ATTRIBUTES, (attributes, html)
        if "href" in attributes:
            assert re.fullmatch(r"#[A-Za-z0-9_-]*", attributes["href"] or ""), html
        if "src" in attributes:
            assert re.fullmatch(r"data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=]+", attributes["src"] or ""), html


def test_math_delimiters_spelt_as_entities_are_split_for_mathjax(kernel):
    payload = ("<p>&#36;&#36;x&#36;&#36; &#92;(y&#92;) &#x5c;[z&#x5c;] &dollar;w&dollar; "
               "\\begin{align}a\\end{align}</p>")
    html = published(kernel.run(f"display(Html({payload!r}))"))[0]["text/html"]
    bare = html.replace("<span>$</span>", "").replace("<span>\\</span>", "")
    assert "$" not in bare and "\\" not in bare, html


def test_markdown_math_and_links_are_rebuilt(kernel):
    payload = "# T $\\style{background:url(//evil.example/m)}{x}$\n\n[a](http://evil.example/l) ![i](//evil.example/i)"
    html = published(kernel.run(f"display(Markdown({payload!r}))"))[0]["text/html"]
    assert "src=" not in html and 'href="http' not in html
    assert "$" not in html.replace("<span>$</span>", "").replace("<span>\\</span>", "")


# -- Plotly ----------------------------------------------------------------------------------------


URL = "//evil.example/p/b.png"
SPAN_STYLES = [
    f"fill:url({URL})", f"color:url({URL})", f"font-family:url({URL})", f"font:12px url({URL})",
    f"font-family:'a\n;background:url({URL})", f'font-family:"a\n;background:url({URL})',
    f"font-family:'a\\';background:url({URL})'", f"color:red/*;*/;background:url({URL})",
    f"color:red;/*x*/background:url({URL})", f"font-family:a\\;background:url({URL})",
    f"COLOR:red;BACKGROUND:url({URL})", f"color:red\n;background:url({URL})", f"color:red;b\\61 ckground:url({URL})",
    f"color:red;background\\:url({URL})", f"font-family:\\27;background:url({URL})",
    f"color:red}};*{{background:url({URL})",
    f"font-family:a(;background:url({URL}));color:red", f"font-family:[;background:url({URL})]",
    f"color:red;background:u\\rl({URL})", f"color:&quot;;background:url({URL})", f"text-decoration:url({URL})",
    f"letter-spacing:1px;background-image:url({URL})", f"fill:url(#a) url({URL})", f"color:red;mask:url({URL})",
    f"font-family:x;cursor:url({URL}),auto", f"color:red;filter:url({URL}#f)",
]
MARKUP = [f"<span style=\"{s}\">t</span>" if '"' not in s else f"<span style='{s}'>t</span>" for s in SPAN_STYLES] + [
    "<a href='http://evil.example/a'>a</a>", "<A HREF=javascript:alert(1)>x</A>", "<a\nhref='//evil.example'>x</a>",
    '<span style="color:red" style="background:url(//evil.example/dup)">d</span>',
    "<span style=color:red;background:url(//evil.example/unquoted)>u</span>",
    '<span style="color:red"x style="background:url(//evil.example/x)">x</span>',
    "<img src=//evil.example/i>", '<br style="background:url(//evil.example/br)">',
    "<sup style='background:url(//evil.example/sup)'>s</sup>",
]


def test_plotly_text_markup_parser_differences_keep_no_url_or_link(kernel):
    figure = {"data": [{"type": "scatter", "x": [1], "y": [1], "name": m, "text": [m], "hovertemplate": m,
                        "customdata": [m]} for m in MARKUP],
              "layout": {"title": {"text": MARKUP[4]}, "annotations": [{"text": m} for m in MARKUP],
                         "xaxis": {"categoryarray": MARKUP, "tickprefix": MARKUP[5]}}}
    result = kernel.run(f"display(Plotly({figure!r}))")
    assert result["status"] == "ok"
    data = published(result)[0][PLOTLY]
    for text in strings({"data": data["data"], "layout": data["layout"]}):
        lowered = text.lower()
        assert "url(" not in lowered and "href" not in lowered and "<img" not in lowered, text
        assert "background" not in lowered and "mask" not in lowered and "cursor" not in lowered, text


def test_plotly_update_paths_with_huge_indices_and_deep_paths_stay_bounded(kernel):
    figure = {"data": [{"type": "scatter"}], "layout": {"updatemenus": [{"buttons": [
        {"method": "relayout", "args": [{"images[999999999].source": "http://evil.example/i.png",
                                         "images[0].source": "//evil.example/j.png",
                                         "shapes[99999999999999999999].x0": 1, ("xaxis." * 20000) + "title": 1}]},
        {"method": "relayout", "args": [{"images": [{"source": "http://evil.example/k.png"}]}]},
        {"method": "update", "args": [{"marker.symbol": [["airport"]]}, {"map.style": "http://evil.example/s"}]},
        {"method": "animate", "args": [[{"layout": {"images": [{"source": "//evil.example/f.png"}]}}]]}]}]}}
    before = kernel_peak_kb(kernel)
    result = kernel.run(f"display(Plotly({figure!r}))")
    assert result["status"] == "ok"
    assert "evil.example" not in json.dumps(published(result))
    assert kernel_peak_kb(kernel) - before < 200_000


HOSTILE_FRAME = ('import pandas as pd\nimport plotly.express as px\n'
                 'df = pd.DataFrame({"c": ["<a href=\'http://evil.example/a\'>x</a>", '
                 '"<img src=//evil.example/i onerror=alert(1)>"], "v": [1, 2]})\n')


def test_an_express_figure_with_hostile_values_is_rebuilt_on_every_route(kernel):
    """plotly.express and graph_objects methods, published as the cell's value and as result["chart"]."""
    result = kernel.run(HOSTILE_FRAME + 'fig = px.bar(df, x="c", y="v", hover_data={"c": True}, '
                        'title="<span style=\'background:url(//evil.example/t)\'>t</span>")\n'
                        'fig.add_layout_image(source="http://evil.example/img.png", x=0, y=1, sizex=1, sizey=1)\n'
                        'fig.update_layout(map_style="open-street-map")\n'
                        'result = {"output": "r", "chart": fig}')
    value = kernel.run("fig")
    assert result["status"] == "ok" and value["status"] == "ok"
    figures = [d[PLOTLY] for r in (result, value) for d in published(r) if PLOTLY in d] + result["charts"]
    assert len(figures) >= 2
    for figure in figures:
        for text in strings({"data": figure["data"], "layout": figure["layout"]}):
            assert "url(" not in text and "href" not in text.lower() and "<img" not in text.lower(), text
        for image in figure["layout"].get("images", []):
            assert "source" not in image or image["source"].startswith("data:image/"), image


def test_pandas_styler_and_raw_table_html_keep_no_style_class_or_handler(kernel):
    result = kernel.run(HOSTILE_FRAME + 'display(df.style.set_table_styles([{"selector": "td", '
                        '"props": "background:url(//evil.example/s)"}])'
                        '.set_table_attributes("onclick=alert(1) class=jp-Dialog").format(escape=None))\n'
                        'class T:\n    def _repr_html_(self):\n        return df.to_html(escape=False)\ndisplay(T())')
    htmls = [d["text/html"] for d in published(result) if "text/html" in d]
    assert result["status"] == "ok" and len(htmls) == 2
    for html in htmls:
        for tag, attributes in elements(html):
            assert tag in ALLOWED_TAGS and set(attributes) <= ALLOWED_ATTRIBUTES, (tag, attributes)
            assert "evil.example" not in (attributes.get("src") or "") + (attributes.get("href") or "")


# -- The kernel's own work on output ---------------------------------------------------------------


def _png(width: int, height: int) -> bytes:
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    packer = zlib.compressobj(9)
    row = b"\x00" * (width + 1)
    body = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")


def test_a_png_decompression_bomb_is_not_inflated_in_the_kernel(fresh_kernel):
    """400 kB that inflate to 400 MB of pixels."""
    encoded = base64.b64encode(_png(20000, 20000)).decode()
    before = kernel_peak_kb(fresh_kernel)
    result = fresh_kernel.run(f"class I:\n    def _repr_png_(self):\n        return {encoded!r}\ndisplay(I())")
    assert result["status"] == "ok"
    assert kernel_peak_kb(fresh_kernel) - before < 100_000
    assert alive(fresh_kernel)


PATHOLOGICAL_MARKDOWN = {
    "link_openers": "[a" * 24500, "nested_brackets": "[" * 24500 + "a" + "]" * 24500,
    "emph_closers": "a***" * 12250, "star_nested": "*" * 24500 + "a" + "*" * 24500,
    "unclosed_links": "[a](b" * 9800, "entities": "&#" * 24500, "code_spans": "`a" * 24500,
}


@pytest.mark.parametrize("name", list(PATHOLOGICAL_MARKDOWN))
def test_pathological_markdown_costs_the_kernel_little(kernel, name):
    """CommonMark's pathological inputs at just under the per-output markdown limit."""
    before = kernel_cpu_seconds(kernel)
    result = kernel.run(f"display(Markdown({PATHOLOGICAL_MARKDOWN[name]!r}))", timeout=120)
    assert result["status"] == "ok"
    assert kernel_cpu_seconds(kernel) - before < 5.0     # linear work measured at < 0.5 s
    assert alive(kernel)


# Was (fixed): FINDING: the kernel's HTML sanitiser is quadratic in nesting: 200 kB of '<div>' (40,000 levels)
# cost the kernel's own process 3.3 CPU seconds (300 kB: 11-17 s; the 1 MB display cap: minutes), on the shell
# thread, past interrupts (an interrupt 3 s in ended the cell 9 s later), once per display and again for every
# cell. Every block tag the filter keeps (p, ul, ol, h1-h6, blockquote, details, table...) closes an open <p>
# by a scope walk of the open-element stack.
def test_html_sanitising_is_linear_in_nesting(fresh_kernel):
    before = kernel_cpu_seconds(fresh_kernel)
    result = fresh_kernel.run("display(Html('<div>' * 50000))", timeout=300)
    spent = kernel_cpu_seconds(fresh_kernel) - before
    assert result["status"] == "ok"
    assert spent < 1.0, f"the kernel spent {spent:.1f} CPU seconds sanitising 250 kB of HTML"


# Was (fixed): FINDING: the kernel's HTML sanitiser expands misnested formatting tags without bound in the
# kernel's process: 65 kB ('<p>' + 700 distinct '<b title=i>' + '</p>' + '<p>x</p>' x 7000: the parser
# reconstructs all 700 open formatting elements in each paragraph) raise the kernel's peak memory by 1.3 GB
# and leave ~1 GB resident; 93 kB take 2.7 GB, 140 kB 6.1 GB; a few hundred kB under the 1 MB display cap
# exhaust the machine. The size check comes after the parse.
def test_html_sanitising_memory_is_bounded(fresh_kernel):
    payload = "'<p>' + ''.join('<b title=' + str(i) + '>' for i in range(700)) + '</p>' + '<p>x</p>' * 7000"
    before = kernel_peak_kb(fresh_kernel)
    result = fresh_kernel.run(f"display(Html({payload}))", timeout=300)
    grown = kernel_peak_kb(fresh_kernel) - before
    assert result["status"] == "ok"
    assert grown < 200_000, f"the kernel's peak memory grew by {grown // 1024} MB for 65 kB of HTML"


def test_deeply_nested_output_does_not_take_the_kernel_down(kernel):
    """Deeper than the worker channel's 64 levels: the worker is replaced (its variables are lost, said
    in the error), the kernel answers the next cell."""
    result = kernel.run("d = x = {}\nfor i in range(200):\n    x['a'] = {}\n    x = x['a']\n"
                        "display(Bundle({'application/json': d, 'text/plain': 'deep'}))", timeout=120)
    assert result["status"] in ("ok", "error")
    assert alive(kernel)
    assert kernel.run(HELPERS)["status"] == "ok"


# Was (fixed): FINDING: terminal controls survive in JSON-typed outputs. Strings of a Plotly figure (trace
# names, titles, category values) and of application/json outputs keep raw ESC/BEL/bidi controls in iopub and
# in the reply's 'charts', which agents read as data: printing a chart's title or an axis value puts OSC 52
# (clipboard), OSC 8 (links), screen clears and RLO into the agent's terminal. Streams, text/plain and error
# fields are cleaned; these are not.
def test_json_typed_outputs_carry_no_terminal_controls(kernel):
    raw = "\x1b]52;c;aGk=\x07\x1b[2J\u202e"
    result = kernel.run(f"display(Plotly({{'data': [{{'type': 'bar', 'x': ['a{raw}'], 'y': [1], 'name': 'n{raw}'}}],"
                        f" 'layout': {{'title': {{'text': 't{raw}'}}}}}}))\n"
                        f"display(Bundle({{'application/json': {{'k{raw}': 'v{raw}'}}, 'text/plain': 'j'}}))")
    assert result["status"] == "ok"
    everything = list(strings(published(result))) + list(strings(result["charts"]))
    assert not [s for s in everything if TERMINAL_CONTROL.search(s)], [ascii(s) for s in everything
                                                                       if TERMINAL_CONTROL.search(s)][:4]


# Was (fixed): FINDING: iopub floods are capped by bytes of data, not by messages: 10,000 `display(i)` (a few
# bytes each, ~7 MB of message envelopes) pass uncapped and unmarked; a client that reads slower than the
# kernel writes loses the tail to ZMQ's high-water mark, 'status: idle' included. SandboxClient.run is such a
# client (it waits up to 100 ms on the shell channel per iopub message until the reply arrives): it hangs
# until its timeout, then interrupts the kernel.
def test_a_display_flood_is_capped_or_reported(fresh_kernel):
    msg_id = fresh_kernel.kc.execute("for i in range(10000):\n    display(i)")
    reply = fresh_kernel.kc.get_shell_msg(timeout=120)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = fresh_kernel.kc.get_shell_msg(timeout=120)
    displays, idle = 0, False
    while True:         # read only once the cell is over: a slow reader
        try:
            message = fresh_kernel.kc.get_iopub_msg(timeout=2)
        except queue.Empty:
            break
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        displays += message["msg_type"] == "display_data"
        idle = idle or (message["msg_type"] == "status" and message["content"]["execution_state"] == "idle")
    truncated = reply["metadata"]["sandbox"]["truncated"]
    assert idle, f"'status: idle' never arrived ({displays} of 10000 displays did, truncated={truncated})"
    assert displays == 10000 or truncated


def test_the_kernel_is_alive_after_the_review(kernel):
    assert alive(kernel)


# ====================================================================================================================
# Sink: host-side work on cell output (the output wall).
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 8 (docs/reviews.md, "Review 8").
@pytest.mark.parametrize("text", ['<a href="javascript:alert(1)">x</a>', '<a href="JaVaScRiPt:alert(1)">x</a>',
                                  '<a href="java&#115;cript:alert(1)">x</a>', '<img src=x onerror=alert(1)>'])
def test_plotly_pseudo_html_links_lose_script_urls_at_the_wall(text):
    from sandbox_kernel import plotlyfigure
    fig = {"data": [{"type": "scatter", "x": [1], "y": [1], "text": [text], "hovertemplate": text}],
           "layout": {"title": {"text": text}, "annotations": [{"text": text, "x": 1, "y": 1}]}}
    out = json.dumps(plotlyfigure.validate_figure(fig)).lower()
    assert "javascript" not in out and "java&#115;" not in out and "<img" not in out, out
