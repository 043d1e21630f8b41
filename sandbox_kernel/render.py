"""Objects -> MIME bundles (plain JSON data), computed inside the cell's limits.

Rendering runs code the cell may have written (``__repr__``, ``_repr_html_``), so the engine calls
this while the budget is still armed, and reads ``_repr_*_`` methods through the attribute gate.
Plotly figures become their compact JSON (``application/vnd.plotly.v1+json``), never the HTML bundle.
"""
from __future__ import annotations

import base64
import json
import pprint

PLOTLY_MIME = "application/vnd.plotly.v1+json"
_REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("text/latex", "_repr_latex_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("image/svg+xml", "_repr_svg_"),
    ("application/json", "_repr_json_"),
)
_PRETTY_TYPES = (dict, list, tuple, set, frozenset)


def is_plotly_figure(obj) -> bool:
    for k in type(obj).__mro__:
        if k.__name__ == "BaseFigure" and k.__module__ == "plotly.basedatatypes":
            return True
    return False


def plotly_json(fig) -> dict:
    """The figure as plain JSON data (numpy arrays become lists) via plotly's own encoder."""
    import plotly.io as pio

    spec = json.loads(pio.to_json(fig, validate=False))
    out = {"data": spec.get("data", []), "layout": spec.get("layout", {}), "config": {}}
    if spec.get("frames"):  # animations (px.scatter(..., animation_frame=...)) play from their frames
        out["frames"] = spec["frames"]
    return out


def chart_from_spec(spec) -> dict | None:
    """Seed 002's ``result["chart"]``: a figure, or a dict with a 'data' key."""
    if is_plotly_figure(spec):
        return plotly_json(spec)
    if isinstance(spec, dict) and "data" in spec:
        try:
            chart = {"data": spec["data"], "layout": spec.get("layout", {}), "config": {}}
            if spec.get("frames"):
                chart["frames"] = spec["frames"]
            return json.loads(json.dumps(chart, default=_json_default))
        except (TypeError, ValueError):
            return None
    return None


def _json_default(o):
    tolist = getattr(type(o), "tolist", None)
    if tolist is not None and type(o).__module__.startswith(("numpy", "pandas")):
        return o.tolist()
    raise TypeError(f"{type(o).__name__} is not JSON serialisable")


def figure_summary(chart: dict) -> str:
    kinds = [t.get("type", "scatter") for t in chart.get("data", []) if isinstance(t, dict)]
    title = chart.get("layout", {}).get("title")
    if isinstance(title, dict):
        title = title.get("text")
    s = f"Figure({len(kinds)} trace{'s' if len(kinds) != 1 else ''}: {', '.join(kinds[:5]) or 'none'}"
    if title:
        s += f"; title {str(title)[:60]!r}"
    return s + ")"


def text_plain(obj, cap: int) -> str:
    if type(obj) in _PRETTY_TYPES:
        text = pprint.pformat(obj, width=100, sort_dicts=False)
    else:
        text = repr(obj)
    if type(text) is not str:
        text = "<repr returned a non-string>"
    if len(text) > cap:
        half = cap // 2
        text = f"{text[:half]}\n[... {len(text) - cap:,} characters cut ...]\n{text[-half:]}"
    return text


def bundle(obj, gates, cap: int = 1_000_000) -> dict:
    """The MIME bundle of one object. Sandbox-defined ``_repr_*_`` methods run gated."""
    if is_plotly_figure(obj):
        chart = plotly_json(obj)
        return {PLOTLY_MIME: chart, "text/plain": figure_summary(chart)}
    data: dict = {}
    mimebundle = _gated_method(obj, "_repr_mimebundle_", gates)
    if mimebundle is not None:
        result = mimebundle()
        if isinstance(result, tuple):
            result = result[0]
        if isinstance(result, dict):
            data.update({k: v for k, v in result.items() if isinstance(k, str)})
    for mime, method_name in _REPR_METHODS:
        if mime in data:
            continue
        method = _gated_method(obj, method_name, gates)
        if method is None:
            continue
        value = method()
        if isinstance(value, tuple):
            value = value[0]
        if value is not None:
            data[mime] = value
    for mime in ("image/png", "image/jpeg"):
        if type(data.get(mime)) in (bytes, bytearray):  # IPython's convention: raw bytes, sent as base64
            data[mime] = base64.b64encode(bytes(data[mime])).decode("ascii")
    if "text/plain" not in data:
        data["text/plain"] = text_plain(obj, cap)
    return json.loads(json.dumps(data, default=str))


def _gated_method(obj, name, gates):
    """A ``_repr_*_`` method only if the class defines one (no __getattr__ fallbacks are probed)."""
    if isinstance(obj, type):
        return None
    for k in type(obj).__mro__:
        if name in k.__dict__:
            try:
                return gates.getattr(obj, name)
            except AttributeError:
                return None
    return None
