"""Plotly figures leaving the kernel: a positive schema, built from plotly's own validators.

JupyterLab renders ``application/vnd.plotly.v1+json`` with plotly.js in a trusted output, so anything
in a figure that makes the browser fetch a URL leaks cell data past the network rule. Instead of
looking for bad keys, a figure is rebuilt from what plotly's schema knows:

- every key must be an attribute of its trace type, of the layout, of a template or of a frame (the
  schema of the installed plotly package, read through ``ValidatorCache``); unknown keys are dropped
  (plotly.js ignores them, so an honest figure renders the same);
- every value must be of its attribute's kind (number, enumerated value, colour, flag list ...);
- every free string goes through :func:`clean_markup` (plotly's pseudo-HTML keeps its tags, loses
  ``href``/``target``/``popup`` and any style that is not a plain font or colour);
- the attributes that make plotly.js or the map library fetch something are named in
  ``_BY_PATH`` and get a safe form: inline ``data:image`` only for images, inline GeoJSON only,
  a blank map style with nothing to fetch, circle markers on maps, no tile/image/vector/symbol
  map layers; update-menu and slider arguments are checked against the schema for their method;
- ``config`` keeps only page-behaviour keys and always points ``topojsonURL`` at an inline empty
  topology (plotly.js would otherwise fetch base maps from its CDN) and turns off MathJax.

Every string-, any-, data- or info-array-valued attribute must be classified in ``_BY_NAME`` or
``_BY_PATH``; an unclassified one is dropped at run time and listed in ``schema().unclassified``,
which a test keeps empty, so a new URL field in a future plotly is caught by the test suite.

The walk is iterative (no recursion to blow), depth-capped, linear in the figure's size, and skips
lists of plain numbers at C speed. See docs/output-plotly.md for the rules and why each exists.
"""
from __future__ import annotations

import array
import base64
import json
import re
import sys
from itertools import chain

from .outputfilter import clean_text, needs_cleaning

MAX_DEPTH = 64
MAX_UPDATE_KEYS = 10_000  # attributes set by all of a figure's menu buttons and slider steps together
MAX_MAP_SUBPLOTS = 100    # distinct map subplots a figure may name (each gets a blank style)
MAX_PATH_PARTS = 16       # dotted parts of one menu/slider attribute path (plotly's deepest is ~6)


class FigureRejected(ValueError):
    """A figure that cannot be published at all (not a figure, not JSON data, too deep)."""


# -- plotly's pseudo-HTML ------------------------------------------------------------------------

# plotly.js (src/lib/svg_text_utils.js) normalises newlines, splits on `<...>` and reads a tag name
# as `[^ >]*` after an optional `/`. Only these names are tags; anything else renders as text.
_PLOTLY_TAGS = frozenset({"a", "b", "i", "em", "s", "u", "sup", "sub", "span", "br"})
_NEWLINES = re.compile(r"\r\n?|\n")
_SEGMENT = re.compile(r"<[^<>]*>")
_PLAIN_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*>")
_TAG = re.compile(r"<(/?)([^ >]*)(.*)>", re.S)
_STYLE_ATTR = re.compile(r"""(?:^|[\s"'])style\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.I)
# plotly.js decodes these entities in attribute values before it uses them.
_ENTITY = re.compile(r"&(#\d{1,7}|#x[\da-fA-F]{1,6}|[a-z]{1,10});")  # a longer one stays text: '&' fails
_MAX_TAG = 2000  # a longer `<...>` is escaped as text before any attribute is parsed
_ENTITIES = {"mu": "\u03bc", "amp": "&", "lt": "<", "gt": ">", "nbsp": "\xa0", "times": "\xd7",
             "plusmn": "\xb1", "deg": "\xb0"}
_STYLE_PROPERTIES = frozenset({
    "color", "fill", "font-family", "font-size", "font-style", "font-weight", "font-variant",
    "text-decoration", "opacity", "fill-opacity", "letter-spacing",
})
_CSS_FUNCTION = re.compile(r"(?:rgba?|hsla?)\(\s*[\d\s.,%+-]*\)", re.I)
_CSS_PLAIN = re.compile(r"[\w\s.,%#'+-]*")


def _decode_entity(m: re.Match) -> str:
    name = m.group(1)
    if name[0] == "#":
        code = int(name[2:], 16) if name[1:2] in ("x", "X") else int(name[1:])
        return chr(code) if code <= 0x10FFFF else m.group(0)
    return _ENTITIES.get(name, m.group(0))


def css_value_is_plain(value: str) -> bool:
    """Words, numbers, lengths, quotes and colour functions: nothing that can load or escape."""
    return bool(_CSS_PLAIN.fullmatch(_CSS_FUNCTION.sub("0", value)))


def _clean_style(raw: str) -> str:
    declarations = []
    for part in _ENTITY.sub(_decode_entity, raw).split(";"):
        name, colon, value = part.partition(":")
        name, value = name.strip().lower(), value.strip()
        if colon and name in _STYLE_PROPERTIES and value and css_value_is_plain(value):
            declarations.append(f"{name}:{value}")
    return ";".join(declarations)


def _clean_tag(segment: str) -> str:
    if _PLAIN_TAG.fullmatch(segment):
        return segment  # no attributes: nothing to load or run
    if len(segment) > _MAX_TAG:
        return "&lt;" + segment[1:]  # (attribute regexes are quadratic on crafted long tags)
    m = _TAG.fullmatch(segment)
    closing, name = m.group(1), m.group(2).lower()
    if name not in _PLOTLY_TAGS:
        return "&lt;" + segment[1:]  # text for plotly.js either way; escaped, it can never be a tag
    if closing:
        return f"</{name}>"
    if name == "br":
        return "<br>"
    style = _STYLE_ATTR.search(m.group(3))
    style = _clean_style(style.group(1) if style.group(1) is not None else style.group(2)) if style else ""
    return f'<{name} style="{style}">' if style else f"<{name}>"


def clean_markup(text: str) -> str:
    """A string plotly.js may render as pseudo-HTML, with only plain tags and plain styles left.

    Returned unchanged when nothing needed cleaning. Each cleaned piece is closed (every `<` it keeps
    ends inside it), so a hovertemplate and the values substituted into it cannot join into a tag.
    Terminal controls and bidi overrides are made visible too (clean_text): agents print chart titles.
    """
    text = clean_text(text)
    if "<" not in text:
        return text
    norm = _NEWLINES.sub(" ", text)
    out, pos, changed = [], 0, False
    for m in _SEGMENT.finditer(norm):
        out.append(_clean_text(norm[pos:m.start()]))
        tag = _clean_tag(m.group(0))
        out.append(tag)
        pos = m.end()
    out.append(_clean_text(norm[pos:]))
    cleaned = "".join(out)
    return text if cleaned == norm else cleaned


# A `<` that starts no tag stays only when no later text (a template's substitution, the next
# string) could turn it into one: it must be followed by a character no tag name starts with.
_DANGLING = re.compile(r"<(?=\Z|[A-Za-z%/]|[^\x00-\x7f])")


def _clean_text(piece: str) -> str:
    return _DANGLING.sub("&lt;", piece) if "<" in piece else piece


# -- plain values ----------------------------------------------------------------------------------

_DROP = object()
_NONE = type(None)
_NUMERIC_TYPES = frozenset({int, float, bool, _NONE})
_SCALAR_TYPES = _NUMERIC_TYPES | {str}
DATA_IMAGE = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}")
_COLOR = re.compile(r"#[0-9A-Fa-f]{3,8}|(?:rgba?|hsla?|hsva?)\(\s*[\d\s.,%+-]*\)|[A-Za-z]{1,40}")
_NUMBER_TEXT = re.compile(r"\s*[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?\s*")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
# plotly.js's typed arrays (src/lib/array.js): dtype -> bytes per element. plotly.js throws on any
# other dtype, reads `shape` only as a string or a number, and decodes one to three dimensions.
_TYPED_ITEMSIZE = {"f8": 8, "f4": 4, "i4": 4, "u4": 4, "i2": 2, "u2": 2, "i1": 1, "u1": 1, "u1c": 1,
                   "float64": 8, "float32": 4, "int32": 4, "uint32": 4, "int16": 2, "uint16": 2, "int8": 1,
                   "uint8": 1, "uint8c": 1}
_SHAPE = re.compile(r"\s*\d{1,12}(?:\s*,\s*\d{1,12}){0,2}\s*")
_COLORSCALE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]{0,40}(?:_r)?")
_IDENTIFIER = re.compile(r"[A-Za-z][\w-]{0,63}")


def typed_array(value: dict):
    """plotly's packed numeric array ``{"dtype", "bdata", "shape"?}`` (plotly.py writes numpy arrays so),
    as plotly.js can decode it, or _DROP: a dtype plotly.js knows, ``bdata`` standard padded base64
    holding a whole number of elements, a shape of one to three dimensions (as text, the only form
    plotly.js reads) whose product is that number. Kept as it is otherwise: the base64 text is its own
    honest size (what the output budget counts), and it is never decoded here."""
    if not set(value) <= {"dtype", "bdata", "shape"}:
        return _DROP
    dtype, bdata, shape = value.get("dtype"), value.get("bdata"), value.get("shape")
    itemsize = _TYPED_ITEMSIZE.get(dtype) if type(dtype) is str else None
    if itemsize is None or type(bdata) is not str or len(bdata) % 4 or not _BASE64.fullmatch(bdata):
        return _DROP
    nbytes = len(bdata) // 4 * 3 - (len(bdata) - len(bdata.rstrip("=")))
    if nbytes % itemsize:
        return _DROP
    count = nbytes // itemsize
    out = {"dtype": dtype, "bdata": bdata}
    if shape is None:
        return out
    if type(shape) is int:
        dims, text = [shape], str(shape)
    elif type(shape) is str and _SHAPE.fullmatch(shape):
        dims, text = [int(d) for d in shape.split(",")], shape
    elif type(shape) is list and 1 <= len(shape) <= 3 and all(type(d) is int and d >= 0 for d in shape):
        dims, text = shape, ", ".join(map(str, shape))
    else:
        return _DROP
    if len(dims) > 1 and 0 in dims:
        # plotly.js makes one view per row of the leading dimensions: "1000000000, 0" over no data made 10**9
        # of them and crashed the tab on every opening of the notebook (review O3, O3-2)
        return _DROP
    product = 1
    for d in dims:
        product *= d
    if product != count:
        return _DROP
    out["shape"] = text
    return out


# Lists of plain numbers at least this long leave as typed arrays (pack_numbers): about half the size of
# their JSON text for floats. Shorter ones stay lists, readable in the reply's copy of the chart.
PACK_MIN_ITEMS = 1000
_EXACT_FLOAT = 2 ** 53
_INT_CODES = (("i1", "b", 2 ** 7), ("i2", "h", 2 ** 15), ("i4", "i", 2 ** 31))


def pack_numbers(values: list, shape: str | None = None):
    """A list of ints and floats (no bool, no None) as plotly.js's typed array, or None (kept a list):
    ints in the smallest of int8/16/32 that holds them all (plotly.py's choice for int64 arrays), else
    float64, which is exact for every float and for ints within 2**53; a larger int keeps the list.
    Built at C speed (array.array, base64)."""
    if len(values) < PACK_MIN_ITEMS:
        return None
    types = set(map(type, values))
    if not types or not types <= {int, float}:
        return None
    packed = None
    if types == {int}:
        lo, hi = min(values), max(values)
        for dtype, code, top in _INT_CODES:
            if -top <= lo and hi < top:
                packed = (dtype, array.array(code, values))
                break
        else:
            if not (-_EXACT_FLOAT <= lo and hi <= _EXACT_FLOAT):
                return None
    elif int in types and any(type(v) is int and not -_EXACT_FLOAT <= v <= _EXACT_FLOAT for v in values):
        return None
    if packed is None:
        try:
            packed = ("f8", array.array("d", values))
        except OverflowError:
            return None
    dtype, arr = packed
    if sys.byteorder != "little":  # plotly.js reads the bytes little-endian
        arr.byteswap()
    out = {"dtype": dtype, "bdata": base64.b64encode(arr.tobytes()).decode("ascii")}
    if shape is not None:
        out["shape"] = shape
    return out


def pack_rows(rows: list):
    """A rectangular list of rows of plain numbers (a heatmap's z) as a 2-D typed array, or None."""
    if len(rows) < 2 or set(map(type, rows)) != {list} or len(set(map(len, rows))) != 1:
        return None
    if len(set(map(id, rows))) != len(rows):
        return None  # one row in many places: the walk refuses the figure (not JSON data)
    width = len(rows[0])
    if width == 0 or len(rows) * width < PACK_MIN_ITEMS:
        return None
    return pack_numbers(list(chain.from_iterable(rows)), f"{len(rows)}, {width}")


def _element_types(values: list) -> set:
    return set(map(type, values))


def _clean_strings(values: list, types: set) -> list:
    """A list of scalars with every string markup-cleaned; the same list when none needs it."""
    strings = values if types == {str} else [v for v in values if type(v) is str]
    joined = "".join(strings)
    if "<" not in joined and not needs_cleaning(joined):
        return values
    return [clean_markup(v) if type(v) is str else v for v in values]


# -- the schema ------------------------------------------------------------------------------------

# How free-form attributes are treated, by attribute name. Kinds:
#   text   a string plotly.js may draw: markup-cleaned (numbers pass)
#   css    a string plotly.js sets as one CSS property (font family, text shadow): plain values only
#   data   any JSON (numbers, strings, lists, objects): every string markup-cleaned
#   drop   never passed on
# Names in _PATH_ONLY (URL-ish or map-related) must be classified by full path in _BY_PATH.
_TEXT_NAMES = (
    "text hovertext hovertemplate texttemplate name label prefix suffix tickprefix ticksuffix "
    "labelprefix labelsuffix valuesuffix tickformat hoverformat xhoverformat yhoverformat "
    "zhoverformat uhoverformat vhoverformat whoverformat valuehoverformat labelformat valueformat "
    "separators uid legendgroup alignmentgroup offsetgroup bingroup xbingroup ybingroup scalegroup "
    "stackgroup templateitemname carpet group baseframe below featureidkey add remove value path "
    "sourcelayer"
).split()
_DATA_NAMES = (
    # AnyValidator: numbers or category/date strings, revisions, metadata, fallbacks
    "a0 b0 ax ay x y z x0 y0 x1 y1 r0 theta0 dtick tick0 base start end size level meta uirevision "
    "datarevision editrevision selectionrevision computed selectedpoints xperiod yperiod xperiod0 "
    "yperiod0 clipmin clipmax include minallowed maxallowed labelalias hovertemplatefallback "
    "texttemplatefallback opacityscale cornerradius barcornerradius xanchor yanchor xclick yclick "
    "traces "
    # DataArrayValidator: the data
    "a b c i j k u v w r theta lat lon open high low close q1 q3 median mean sd lowerfence upperfence "
    "notchspan array arrayminus categoryarray color colors columnorder customdata dash facecolor format "
    "hiddenlabels ids imag real intensity labels locations measure parents target surfacecolor "
    "ticktext tickvals values vertexcolor xbounds ybounds xy indices "
    # InfoArrayValidator: ranges, domains, grid layouts (args/args2 are classified by path)
    "autotickangles bounds constraintrange domain dtickrange groups insiderange parallels range sector "
    "span subplots xaxes yaxes zmax zmin"
).split()
_CSS_NAMES = ("family", "shadow")
_DROP_NAMES = ("token",)  # Chart Studio streaming tokens (plotly 5)
_PATH_ONLY = frozenset({"source", "style", "geojson", "args", "args2", "icon", "symbol",
                        "sourceattribution", "accesstoken", "coordinates", "template"})
_BY_NAME = {**{n: "text" for n in _TEXT_NAMES}, **{n: "data" for n in _DATA_NAMES},
            **{n: "css" for n in _CSS_NAMES}, **{n: "drop" for n in _DROP_NAMES}}

_MAP_SUBPLOTS = ("map", "mapbox")
_BY_PATH = {
    # Images: inline data only (a remote source is fetched as soon as the chart draws).
    "layout.image.source": "image", "image.source": "image",
    # GeoJSON given as a string is fetched by plotly.js: inline objects only.
    "choropleth.geojson": "geojson", "choroplethmap.geojson": "geojson",
    "choroplethmapbox.geojson": "geojson", "scattergeo.geojson": "geojson",
    # Update menus and sliders call restyle/relayout/animate with these: checked like the figure.
    "layout.updatemenu.button.args": "args", "layout.updatemenu.button.args2": "args",
    "layout.slider.step.args": "args",
    "sankey.link.source": "array",  # node indices
    # indicator's delta arrows are drawn as text.
    "indicator.delta.increasing.symbol": "text", "indicator.delta.decreasing.symbol": "text",
}
for _sub in _MAP_SUBPLOTS:
    _BY_PATH.update({
        # Every named map style fetches tiles, a style sheet or glyphs: replaced by a blank one.
        f"layout.{_sub}.style": "map-style",
        f"layout.{_sub}.accesstoken": "drop",
        # Layers: only inline GeoJSON sources; attribution is HTML in the map's control; icons and
        # image corners only matter for the layer kinds that fetch (dropped in _finish_map_layer).
        f"layout.{_sub}.layer.source": "geojson",
        f"layout.{_sub}.layer.sourceattribution": "drop",
        f"layout.{_sub}.layer.symbol.icon": "drop",
        f"layout.{_sub}.layer.coordinates": "drop",
        # A marker symbol other than 'circle' is an icon the map fetches from a CDN.
        f"scatter{_sub}.marker.symbol": "map-symbol",
    })

# Validator classes whose values are fixed by the schema: no classification needed.
_FIXED_KINDS = {
    "NumberValidator": "number", "IntegerValidator": "number", "AngleValidator": "number",
    "BooleanValidator": "boolean", "EnumeratedValidator": "enum", "DashValidator": "enum",
    "FlaglistValidator": "flaglist", "ColorValidator": "color", "ColorlistValidator": "colorlist",
    "ColorscaleValidator": "colorscale", "SubplotidValidator": "subplotid", "LiteralValidator": "literal",
}
# Validator classes whose values are free: the attribute must be classified.
_FREE_KINDS = {"StringValidator", "AnyValidator", "DataArrayValidator", "InfoArrayValidator",
               "ImageUriValidator"}


class Leaf:
    __slots__ = ("kind", "array_ok", "values", "regexes", "flags", "extras", "base", "path")

    def __init__(self, kind, path="", array_ok=False, values=(), regexes=(), flags=(), extras=(), base=""):
        self.kind, self.path, self.array_ok = kind, path, array_ok
        self.values, self.regexes = frozenset(values), tuple(regexes)
        self.flags, self.extras, self.base = frozenset(flags), frozenset(extras), base

    def __repr__(self):
        return f"Leaf({self.kind!r}, {self.path!r})"

    def signature(self):
        return (self.kind, self.array_ok, self.values, self.regexes, self.flags, self.extras, self.base)


_UNBUILT = object()


class Obj:
    """A JSON object with known fields. ``subplots`` maps `xaxis2` to the field of `xaxis`.

    Fields of a plotly class are built when first asked for (``build``), so a figure costs only
    the attributes it uses; ``like`` shares another object's fields, less the ``excluded`` ones."""
    __slots__ = ("path", "fields", "subplots", "finish", "build", "like", "excluded", "props")

    def __init__(self, path, fields=None, subplots=None, finish=None, build=None, like=None, excluded=(),
                 props=None):
        self.path, self.fields, self.subplots, self.finish = path, fields or {}, subplots, finish
        self.build, self.like, self.excluded = build, like, frozenset(excluded)
        self.props = props  # a plotly class's property names: any other key is unknown at once

    def field(self, key):
        node = self.fields.get(key, _UNBUILT)
        if node is _UNBUILT:
            if self.props is not None and self.subplots is None and key not in self.props:
                return None
            if self.like is not None:
                return None if key in self.excluded else self.like.field(key)
            node = self.build(self, key) if self.build is not None else None
            known = node is not None or (self.build is not None and self.build.is_prop(self, key))
            if node is None and self.subplots is not None:
                m = self.subplots.match(key)
                if m and m.group(1) != key:
                    node = self.field(m.group(1))
            if known:  # only the schema's own names are kept: a figure's junk keys cost no memory
                self.fields[key] = node
        return node

    def keys(self):
        """Every field name (builds them all: for the classification test)."""
        if self.like is not None:
            return [k for k in self.like.keys() if k not in self.excluded]
        return sorted(set(self.fields) | set(getattr(self.build, "names", lambda _: ())(self)))


class Items:
    """A list of objects (layout.annotations, frames ...) or of one node."""
    __slots__ = ("item",)

    def __init__(self, item):
        self.item = item


class Dispatch:
    """An object whose schema depends on its `type` (traces, GeoJSON)."""
    __slots__ = ("types", "default", "strict")

    def __init__(self, types, default=None, strict=False):
        self.types, self.default, self.strict = types, default, strict


class TemplateData:
    """layout.template.data: {trace type: [partial traces of that type]}."""
    __slots__ = ("traces",)

    def __init__(self, traces):
        self.traces = traces


class Schema:
    def __init__(self):
        self.traces: dict[str, Obj] = {}
        self.layout: Obj | None = None
        self.frame_layout: Obj | None = None  # layout without updatemenus/sliders/template
        self.figure: Obj | None = None
        self.animation: Obj | None = None
        self.unclassified: list[str] = []
        self.built: dict[str, Obj] = {}
        self.restyle_nodes: dict[str, list] = {}
        self.trace_props: frozenset | None = None

    def complete(self) -> "Schema":
        """Builds every field of every object (the classification test reads ``unclassified``)."""
        done: set[str] = set()
        while len(done) < len(self.built):  # building fields adds the objects they hold
            for node in [n for n in self.built.values() if n.path not in done]:
                done.add(node.path)
                for key in node.keys():
                    node.field(key)
        return self


def _base_kind(validator) -> str:
    for klass in type(validator).__mro__:
        if klass.__module__ == "_plotly_utils.basevalidators":
            return klass.__name__
    return type(validator).__name__


def _classify(path: str, name: str, vkind: str, map_roots=frozenset()) -> str | None:
    kind = _BY_PATH.get(path)
    if kind is not None:
        return kind
    if vkind == "SrcValidator":
        return "drop"  # Chart Studio grid references: meaningless here
    if name in _PATH_ONLY and (vkind in _FREE_KINDS or _on_a_map(path, map_roots)):
        return None  # URL-ish names, and anything a map library reads: classified by path only
    if vkind in _FIXED_KINDS:
        return _FIXED_KINDS[vkind]
    kind = _BY_NAME.get(name) if vkind in _FREE_KINDS else None
    if kind is None or vkind == "StringValidator":
        return kind if kind != "data" else "text"
    return "array" if vkind == "DataArrayValidator" else "data"


def _on_a_map(path: str, map_roots) -> bool:
    """An attribute the map library may read (a map trace's or a map subplot's), other than a font's
    style: even an enumerated symbol or style there could name something to fetch."""
    parts = path.split(".")
    on_map = parts[0] in map_roots or parts[:2] in (["layout", sub] for sub in _MAP_SUBPLOTS)
    return on_map and not parts[-2].endswith("font")


def _leaf(kind: str, path: str, validator) -> Leaf:
    array_ok = bool(getattr(validator, "array_ok", False))
    if kind == "enum":
        values = [v for v in getattr(validator, "values", ()) if not (isinstance(v, str) and v[:1] == "/")]
        regexes = [re.compile(v.strip("/")) for v in getattr(validator, "values", ())
                   if isinstance(v, str) and v[:1] == "/" and v[-1:] == "/"]
        return Leaf(kind, path, array_ok, values, regexes)
    if kind == "flaglist":
        return Leaf(kind, path, array_ok, flags=validator.flags, extras=validator.extras or ())
    if kind == "subplotid":
        return Leaf(kind, path, array_ok, base=validator.base)
    if kind == "literal":
        return Leaf(kind, path, values=[validator.val])
    if kind == "color" and getattr(validator, "colorscale_path", None):
        array_ok = True
    return Leaf(kind, path, array_ok)


def _validator(parent: str, prop: str):
    """plotly's ValidatorCache.get_validator, without what a cell filed in the cache under a key of its own
    (guards.forget_cell_keys_in_plotly_validators: at level none a cell shares the cache; review 6, N6-4)."""
    from plotly.validator_cache import ValidatorCache

    guards = sys.modules.get(__package__ + ".guards")   # loaded where cells run in this process (level none)
    if guards is not None:
        guards.forget_cell_keys_in_plotly_validators()
    return ValidatorCache.get_validator(parent, prop)


def _build_schema() -> Schema:
    import _plotly_utils.basevalidators as bv
    import plotly.graph_objects as go

    schema = Schema()
    built: dict[str, Obj] = {}
    data_validator = _data_validator()
    map_roots = set()  # trace types drawn on a map subplot
    for trace_type in data_validator.class_strs_map:
        try:
            base = getattr(_validator(trace_type, "subplot"), "base", None)
        except (AttributeError, ImportError, KeyError, TypeError):
            base = None
        if base in _MAP_SUBPLOTS:
            map_roots.add(trace_type)

    traces = Items(Dispatch(schema.traces, default="scatter", strict=True))
    template = Obj("layout.template", {"data": TemplateData(schema.traces)})
    classes: dict[str, type] = {}

    def obj_for(cls) -> Obj:
        path = cls._path_str
        if path not in built:
            classes[path] = cls
            built[path] = Obj(path, build=build_field, finish=_FINISH.get(path), props=frozenset(cls._valid_props))
        return built[path]

    def build_field(node: Obj, prop: str):
        if prop not in classes[node.path]._valid_props:
            return None
        try:
            validator = _validator(node.path, prop)
        except (AttributeError, ImportError, KeyError, TypeError):
            return None  # a deprecated alias with no validator of its own: plotly.js ignores it
        if isinstance(validator, bv.BaseTemplateValidator):
            return template
        if isinstance(validator, bv.BaseDataValidator):
            return traces
        if isinstance(validator, bv.CompoundArrayValidator):
            return Items(obj_for(validator.data_class))
        if isinstance(validator, bv.CompoundValidator):
            return obj_for(validator.data_class)
        full = f"{node.path}.{prop}"
        vkind = _base_kind(validator)
        kind = _classify(full, prop, vkind, map_roots)
        if kind is None:
            schema.unclassified.append(f"{full} ({vkind})")
            return None
        return None if kind == "drop" else _leaf(kind, full, validator)

    build_field.names = lambda node: sorted(classes[node.path]._valid_props)
    build_field.is_prop = lambda node, prop: prop in classes[node.path]._valid_props

    for trace_type, class_name in sorted(data_validator.class_strs_map.items()):
        schema.traces[trace_type] = obj_for(getattr(go, class_name))
    layout = schema.layout = obj_for(go.Layout)
    layout.subplots = go.Layout._subplotid_prop_re
    # A template's layout is a layout without a template of its own (plotly.js ignores one there).
    template.fields["layout"] = Obj("layout", like=layout, excluded=("template",), subplots=layout.subplots,
                                    finish=_finish_template_layout)
    # Frames and update arguments carry no menus, sliders or templates: their arguments can then
    # never nest another set of arguments.
    schema.frame_layout = Obj("layout", like=layout, excluded=("template", "updatemenus", "sliders"),
                              subplots=layout.subplots)
    frame = obj_for(go.Frame)
    frame.fields["layout"] = schema.frame_layout
    schema.figure = Obj("figure", {"data": traces, "layout": layout, "frames": Items(frame)})
    schema.built = built
    schema.animation = _animation_schema()
    return schema


def _data_validator():
    try:
        from plotly.validators import DataValidator  # plotly 5.x
        return DataValidator()
    except ImportError:
        return _validator("", "data")


def _animation_schema() -> Obj:
    """Plotly.animate's options (not in plotly.py's schema)."""
    number, boolean = Leaf("number"), Leaf("boolean")
    frame = Obj("animation.frame", {"duration": number, "redraw": boolean})
    transition = Obj("animation.transition", {
        "duration": number, "easing": Leaf("enum", regexes=[re.compile(r"[a-z]+(-[a-z]+)*")]),
        "ordering": Leaf("enum", values=["layout first", "traces first"])})
    return Obj("animation", {
        "mode": Leaf("enum", values=["immediate", "next", "afterall"]),
        "direction": Leaf("enum", values=["forward", "reverse"]),
        "fromcurrent": boolean, "frame": frame, "transition": transition})


_GEOMETRY_TYPES = ("Point", "MultiPoint", "LineString", "MultiLineString", "Polygon", "MultiPolygon")


def _geojson_schema() -> Dispatch:
    types: dict[str, Obj] = {}
    geo = Dispatch(types)
    bbox, data = Leaf("number", array_ok=True), Leaf("data")
    for name in _GEOMETRY_TYPES:
        types[name] = Obj(name, {"type": Leaf("literal", values=[name]), "coordinates": Leaf("coords"),
                                 "bbox": bbox})
    types["GeometryCollection"] = Obj("GeometryCollection", {
        "type": Leaf("literal", values=["GeometryCollection"]), "geometries": Items(geo), "bbox": bbox})
    types["Feature"] = Obj("Feature", {"type": Leaf("literal", values=["Feature"]), "id": data,
                                       "properties": data, "geometry": geo, "bbox": bbox})
    types["FeatureCollection"] = Obj("FeatureCollection", {
        "type": Leaf("literal", values=["FeatureCollection"]), "features": Items(geo), "bbox": bbox})
    return geo


_GEOJSON = _geojson_schema()
_SCHEMA: Schema | None = None


def schema() -> Schema:
    """The compiled schema of the installed plotly (built once, on first use)."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = _build_schema()
    return _SCHEMA


# -- safe replacements -------------------------------------------------------------------------------

# A map style with nothing to fetch: no sources, no sprite, and glyphs from an empty inline
# resource (a text layer then draws nothing instead of asking a font server).
SAFE_MAP_STYLE = {
    "id": "sandbox-blank", "version": 8, "sources": {},
    "layers": [{"id": "background", "type": "background", "paint": {"background-color": "#FFFFFF"}}],
    "glyphs": "data:application/x-protobuf;base64,#{fontstack}/{range}",
}
_TOPOLOGY_LAYERS = ("coastlines", "land", "ocean", "lakes", "rivers", "countries", "subunits")
# plotly.js fetches `topojsonURL + "<scope>_<resolution>m.json"`; from this inline URL the name lands
# in the fragment and every scope gets a valid topology with empty layers: no base map, no fetch.
SAFE_TOPOJSON_URL = "data:application/json;base64," + base64.b64encode(json.dumps({
    "type": "Topology", "arcs": [],
    "objects": {name: {"type": "GeometryCollection", "geometries": []} for name in _TOPOLOGY_LAYERS},
}, separators=(",", ":")).encode()).decode() + "#"

_CONFIG_BOOLEANS = ("responsive", "displaylogo", "staticPlot", "editable", "showTips",
                    "showAxisDragHandles")
_IMAGE_FORMATS = ("png", "svg", "jpeg", "webp")


def clean_config(config) -> dict:
    """Page-behaviour keys only; topojsonURL and typesetMath are always ours."""
    out: dict = {}
    config = config if isinstance(config, dict) else {}
    for key in _CONFIG_BOOLEANS:
        if type(config.get(key)) is bool:
            out[key] = config[key]
    if config.get("displayModeBar") in (True, False, "hover"):
        out["displayModeBar"] = config["displayModeBar"]
    scroll = config.get("scrollZoom")
    if type(scroll) is bool or (type(scroll) is str and
                                set(scroll.split("+")) <= {"cartesian", "gl3d", "geo", "mapbox", "map"}):
        out["scrollZoom"] = scroll
    if config.get("doubleClick") in (False, "reset", "autosize", "reset+autosize"):
        out["doubleClick"] = config["doubleClick"]
    buttons = config.get("modeBarButtonsToRemove")
    if type(buttons) is list and all(type(b) is str and _IDENTIFIER.fullmatch(b) for b in buttons):
        out["modeBarButtonsToRemove"] = list(buttons)
    if type(config.get("locale")) is str and _IDENTIFIER.fullmatch(config["locale"]):
        out["locale"] = config["locale"]
    image = config.get("toImageButtonOptions")
    if isinstance(image, dict):
        opts = {}
        if image.get("format") in _IMAGE_FORMATS:
            opts["format"] = image["format"]
        if type(image.get("filename")) is str and _IDENTIFIER.fullmatch(image["filename"]):
            opts["filename"] = image["filename"]
        for key in ("width", "height", "scale"):
            if image.get(key) is None and key in image or type(image.get(key)) in (int, float):
                opts[key] = image[key]
        out["toImageButtonOptions"] = opts
    out["topojsonURL"] = SAFE_TOPOJSON_URL
    # MathJax (when a page has it) would typeset `$...$` text, and TeX can carry links, styles and
    # `\require`: plotly's text stays plain.
    out["typesetMath"] = False
    return out


# -- the walk ----------------------------------------------------------------------------------------


class _Walk:
    """One figure's clean copy. Work items sit on an explicit stack: nothing recurses."""

    def __init__(self, schema: Schema, parent: "_Walk | None" = None):
        self.schema = schema
        self.stack: list = []
        self.seen: set[int] = set()
        self.updates_left = MAX_UPDATE_KEYS
        # Every map subplot anything in the figure could draw on (traces, templates, frames, menu
        # arguments): validate_figure gives each the blank style. Shared with the walks of arguments.
        self.map_subplots: set[str] = parent.map_subplots if parent is not None else set()

    def note_map_subplot(self, name: str) -> None:
        if name not in self.map_subplots:
            if len(self.map_subplots) >= MAX_MAP_SUBPLOTS:
                raise FigureRejected(f"figure names more than {MAX_MAP_SUBPLOTS} map subplots")
            self.map_subplots.add(name)

    def spend(self, keys: int) -> bool:
        """Update-menu and slider arguments cost a schema lookup per attribute for every trace type:
        a figure gets MAX_UPDATE_KEYS of them (attributes and per-trace values); later ones are dropped."""
        self.updates_left -= max(keys, 1)
        return self.updates_left >= 0

    def run(self, node, value, depth: int = 0):
        holder = {"v": None}
        self.push(node, value, holder, "v", depth)
        while self.stack:
            task = self.stack.pop()
            task[0](*task[1:])
        return holder.get("v", _DROP) if "v" in holder else _DROP

    def push(self, node, value, out, key, depth):
        if depth > MAX_DEPTH:
            raise FigureRejected(f"figure nested too deeply (more than {MAX_DEPTH} levels)")
        if isinstance(value, (dict, list)):
            if id(value) in self.seen:
                raise FigureRejected("figure shares one object in two places (not JSON data)")
            self.seen.add(id(value))
        handler = _HANDLERS[type(node)]
        handler(self, node, value, out, key, depth)

    # results -------------------------------------------------------------------------------
    @staticmethod
    def put(out, key, value):
        if value is _DROP:
            if isinstance(out, dict):
                out.pop(key, None)
            else:
                out[key] = None
        else:
            out[key] = value

    # containers ----------------------------------------------------------------------------
    def obj(self, node: Obj, value, out, key, depth):
        if not isinstance(value, dict):
            return self.put(out, key, _DROP)
        clean: dict = {}
        out[key] = clean
        if node.finish is not None:
            self.stack.append((node.finish, self, node, value, out, key, depth))
        tasks = []
        for k, v in value.items():
            if type(k) is not str:
                raise FigureRejected("figure keys must be strings")
            child = node.field(k)
            if child is None or (isinstance(child, Leaf) and child.kind == "args"):
                continue  # unknown keys are dropped; update arguments wait for the method (finish)
            clean[k] = None  # keeps the key order; the child task fills or removes it
            tasks.append((self.push, child, v, clean, k, depth + 1))
        self.stack.extend(reversed(tasks))  # popped in the figure's order

    def items(self, node: Items, value, out, key, depth):
        if not isinstance(value, list):
            return self.put(out, key, _DROP)
        clean = [None] * len(value)
        out[key] = clean
        for i in range(len(value) - 1, -1, -1):  # popped in the figure's order
            self.stack.append((self.push, node.item, value[i], clean, i, depth + 1))

    def dispatch(self, node: Dispatch, value, out, key, depth):
        if not isinstance(value, dict):
            if node.strict:
                raise FigureRejected("every trace must be an object")
            return self.put(out, key, _DROP)
        kind = value.get("type", node.default)
        target = node.types.get(kind) if type(kind) is str else None
        if target is None:
            if node.strict:
                raise FigureRejected(f"unknown trace type {str(kind)[:40]!r}")
            return self.put(out, key, _DROP)
        if node.strict:  # a trace (of the figure, a frame, an animate argument)
            self.note_map_trace(target)
        self.obj(target, value, out, key, depth)

    def note_map_trace(self, trace: Obj) -> None:
        """A trace type drawn on a map may end up on its default subplot whatever it names (plotly.js
        replaces a subplot id it does not accept by the default): that one is styled too."""
        leaf = trace.field("subplot")
        if isinstance(leaf, Leaf) and leaf.kind == "subplotid" and leaf.base in _MAP_SUBPLOTS:
            self.note_map_subplot(leaf.base)

    def template_data(self, node: TemplateData, value, out, key, depth):
        if not isinstance(value, dict):
            return self.put(out, key, _DROP)
        clean: dict = {}
        out[key] = clean
        for trace_type, traces in value.items():
            target = node.traces.get(trace_type) if type(trace_type) is str else None
            if target is not None:  # (a subplot its trace defaults name is noted by the leaf)
                clean[trace_type] = None
                self.stack.append((self.push, Items(target), traces, clean, trace_type, depth + 1))

    # leaves --------------------------------------------------------------------------------
    def leaf(self, node: Leaf, value, out, key, depth):
        kind = node.kind
        if kind == "data":
            return self.data(value, out, key, depth)
        if kind == "array":
            if isinstance(value, dict):
                return self.put(out, key, typed_array(value))
            if isinstance(value, list) and value:
                packed = pack_rows(value) if type(value[0]) is list else pack_numbers(value)
                if packed is not None:
                    return self.put(out, key, packed)
            return self.data(value, out, key, depth)
        if kind == "geojson":
            return self.dispatch(_GEOJSON, value, out, key, depth)
        if kind == "map-style":
            return self.put(out, key, json.loads(json.dumps(SAFE_MAP_STYLE)))
        if kind == "coords":
            return self.coords(value, out, key, depth)
        if isinstance(value, list):
            if kind in ("number", "color") and node.array_ok and len(value) >= PACK_MIN_ITEMS:
                packed = pack_numbers(value)  # marker.size, marker.color as numbers, ...
                if packed is not None:
                    return self.put(out, key, packed)
            return self.put(out, key, self.leaf_list(node, value, depth))
        if isinstance(value, dict):  # only plotly's packed numeric arrays
            return self.put(out, key, typed_array(value) if node.array_ok else _DROP)
        result = _scalar(node, value)
        if kind == "subplotid" and node.base in _MAP_SUBPLOTS and type(result) is str:
            self.note_map_subplot(result)  # wherever it is named: trace, template, frame, argument
        return self.put(out, key, result)

    def leaf_list(self, node: Leaf, values: list, depth):
        kind = node.kind
        types = _element_types(values)
        if kind in ("text", "css", "number", "boolean", "enum", "flaglist", "color", "subplotid",
                    "map-symbol") and node.array_ok:
            if not types <= _SCALAR_TYPES:
                return _DROP
            if kind == "text":
                return _clean_strings(values, types)
            if kind == "number" and types <= _NUMERIC_TYPES:
                return values
            if kind == "enum" and not node.regexes and set(values) <= node.values:
                return values
            cleaned = [_scalar(node, v) for v in values]
            return _DROP if any(v is _DROP for v in cleaned) else values
        if kind == "colorlist":
            return values if types <= {str} and all(map(_COLOR.fullmatch, values)) else _DROP
        if kind == "colorscale":
            return values if all(_colorscale_step(step) for step in values) else _DROP
        return _DROP

    def data(self, value, out, key, depth):
        """Any JSON value; strings are markup-cleaned. Lists of plain scalars take the C path."""
        if isinstance(value, list):
            types = _element_types(value)
            if types <= _NUMERIC_TYPES:
                return self.put(out, key, value)
            if types <= _SCALAR_TYPES:
                return self.put(out, key, _clean_strings(value, types))
            if types == {list} and len(set(map(id, value))) == len(value):
                # rows of a table or a matrix (each its own list): one C pass over all cells
                cells = list(chain.from_iterable(value))
                cell_types = _element_types(cells)
                if cell_types <= _NUMERIC_TYPES or (
                        cell_types <= _SCALAR_TYPES and _clean_strings(cells, cell_types) is cells):
                    return self.put(out, key, value)
            clean = [None] * len(value)
            out[key] = clean
            for i, v in enumerate(value):
                if isinstance(v, (dict, list)):
                    self.stack.append((self.data_task, v, clean, i, depth + 1))
                else:
                    clean[i] = _plain(v)
            return None
        if isinstance(value, dict):
            clean = {}
            out[key] = clean
            for k, v in value.items():
                if type(k) is not str:
                    raise FigureRejected("figure keys must be strings")
                # Keys of free data (meta, customdata objects, GeoJSON properties) leave as they are
                # read: as text (an agent prints the chart). Schema keys are plotly's own names.
                k = clean_text(k)
                if isinstance(v, (dict, list)):
                    clean[k] = None
                    self.stack.append((self.data_task, v, clean, k, depth + 1))
                else:
                    clean[k] = _plain(v)
            return None
        return self.put(out, key, _plain(value))

    def data_task(self, value, out, key, depth):
        if depth > MAX_DEPTH:
            raise FigureRejected(f"figure nested too deeply (more than {MAX_DEPTH} levels)")
        if id(value) in self.seen:
            raise FigureRejected("figure shares one object in two places (not JSON data)")
        self.seen.add(id(value))
        self.data(value, out, key, depth)

    def coords(self, value, out, key, depth):
        """GeoJSON coordinates: nested lists of numbers only."""
        if not isinstance(value, list):
            return self.put(out, key, _DROP)
        types = _element_types(value)
        if types <= {int, float}:
            return self.put(out, key, value)
        if types != {list}:
            return self.put(out, key, _DROP)
        clean = [None] * len(value)
        out[key] = clean
        for i, v in enumerate(value):
            self.stack.append((self.coords_task, v, clean, i, depth + 1))

    def coords_task(self, value, out, key, depth):
        if depth > MAX_DEPTH:
            raise FigureRejected(f"figure nested too deeply (more than {MAX_DEPTH} levels)")
        if id(value) in self.seen:
            raise FigureRejected("figure shares one object in two places (not JSON data)")
        self.seen.add(id(value))
        self.coords(value, out, key, depth)


def _plain(value):
    """A JSON scalar as it may leave: strings markup-cleaned; anything else is not JSON data."""
    if type(value) is str:
        return clean_markup(value)
    if type(value) in _NUMERIC_TYPES:
        return value
    raise FigureRejected(f"figure holds a non-JSON value of type {type(value).__name__}")


def _colorscale_step(step) -> bool:
    return (type(step) is list and len(step) == 2 and type(step[0]) in (int, float)
            and type(step[1]) is str and bool(_COLOR.fullmatch(step[1])))


def _scalar(node: Leaf, value):
    """One scalar for a leaf of a fixed kind: the value, or _DROP."""
    kind, vtype = node.kind, type(value)
    if vtype not in _SCALAR_TYPES:
        raise FigureRejected(f"figure holds a non-JSON value of type {vtype.__name__}")
    if value is None:
        return None
    if kind == "text":
        return clean_markup(value) if vtype is str else value
    if kind == "number":
        if vtype in (int, float) or (vtype is str and len(value) <= 64 and _NUMBER_TEXT.fullmatch(value)):
            return value
        return _DROP
    if kind == "boolean":
        return value if vtype is bool else _DROP
    if kind in ("enum", "literal"):
        if value in node.values and (vtype is not bool or any(type(v) is bool for v in node.values)):
            return value
        if vtype is str and any(r.fullmatch(value) for r in node.regexes):
            return value
        return _DROP
    if kind == "flaglist":
        if value in node.extras and any(type(e) is vtype for e in node.extras):
            return value
        return value if vtype is str and set(value.split("+")) <= node.flags else _DROP
    if kind == "color":
        return value if (vtype is str and _COLOR.fullmatch(value)) or vtype in (int, float) else _DROP
    if kind == "colorscale":
        return value if vtype is str and _COLORSCALE_NAME.fullmatch(value) else _DROP
    if kind == "subplotid":  # the ids plotly.js accepts as they are: x, x2 ... (not x1 or x02)
        return value if vtype is str and re.fullmatch(re.escape(node.base) + r"(?:[2-9]|[1-9]\d{1,8})?",
                                                      value) else _DROP
    if kind == "css":
        return value if vtype is str and css_value_is_plain(value) else _DROP
    if kind == "image":
        return value if vtype is str and DATA_IMAGE.fullmatch(value) else _DROP
    if kind == "map-symbol":
        return value if value == "circle" else _DROP
    return _DROP  # colorlist/data arrays given a scalar, or a kind with no scalar form


_HANDLERS = {Obj: _Walk.obj, Items: _Walk.items, Dispatch: _Walk.dispatch,
             TemplateData: _Walk.template_data, Leaf: _Walk.leaf}


# -- finishing hooks: what depends on a sibling field ------------------------------------------------

_LAYER_SAFE_TYPES = ("circle", "line", "fill")


def _finish_map_layer(walk: _Walk, node: Obj, raw: dict, out, key, depth):
    """A map layer draws only inline GeoJSON as circles, lines or fills: raster, image and vector
    sources are URLs, and symbol layers fetch icons. Others become an invisible layer (so that the
    indices other layers are known by stay the same)."""
    layer = out[key] if isinstance(out, list) or key in out else None
    if not isinstance(layer, dict):
        return
    safe = (raw.get("sourcetype", "geojson") == "geojson" and raw.get("type", "circle") in _LAYER_SAFE_TYPES
            and ("source" not in raw or isinstance(layer.get("source"), dict)))
    if not safe:
        out[key] = {"visible": False}


_METHODS = ("restyle", "relayout", "update", "animate")
_FINISH = {}  # filled below, once the hooks exist


def _finish_update_control(walk: _Walk, node: Obj, raw: dict, out, key, depth):
    """An update menu button or slider step: its args are checked for the method it calls."""
    control = out[key] if isinstance(out, list) or key in out else None
    if not isinstance(control, dict):
        return
    method = raw.get("method", "restyle")
    for name in ("args", "args2"):
        if name not in raw or node.field(name) is None:
            continue
        args = _clean_args(walk, method, raw[name], depth + 1) if method in _METHODS else _DROP
        if args is not _DROP:
            control[name] = args


def _clean_args(walk: _Walk, method: str, args, depth: int):
    if not isinstance(args, list):
        return _DROP
    if depth > MAX_DEPTH:
        raise FigureRejected(f"figure nested too deeply (more than {MAX_DEPTH} levels)")
    sch = walk.schema
    clean: list = []
    if method in ("restyle", "relayout") and args and type(args[0]) is str:
        # The (attribute, value[, traces]) form of the same call.
        check = _restyle_update if method == "restyle" else _relayout_update
        update = check(walk, {args[0]: args[1] if len(args) > 1 else None}, depth + 1)
        if args[0] not in update:
            return [{}]
        clean = [args[0], update[args[0]]]
        if method == "restyle" and len(args) > 2:
            clean.append(_trace_indices(args[2]))
        return clean
    if method == "restyle":
        clean.append(_restyle_update(walk, args[0] if args else None, depth + 1))
        if len(args) > 1:
            clean.append(_trace_indices(args[1]))
    elif method == "relayout":
        clean.append(_relayout_update(walk, args[0] if args else None, depth + 1))
    elif method == "update":
        clean.append(_restyle_update(walk, args[0] if args else None, depth + 1))
        if len(args) > 1:
            clean.append(_relayout_update(walk, args[1], depth + 1))
        if len(args) > 2:
            clean.append(_trace_indices(args[2]))
    elif method == "animate":
        clean.append(_animate_target(walk, args[0] if args else None, depth + 1))
        if len(args) > 1:
            opts = _Walk(sch, walk).run(sch.animation, args[1], depth + 1) if isinstance(args[1], dict) else _DROP
            clean.append({} if opts is _DROP else opts)
    return clean


def _trace_indices(value):
    if value is None or type(value) is int:
        return value
    if type(value) is list and _element_types(value) <= {int}:
        return value
    return None


_PATH_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")
_ATTR_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[\d{1,9}\])*(?:\.[A-Za-z_][A-Za-z0-9_]*(?:\[\d{1,9}\])*)*")
_INDEX_RUN = re.compile(r"(?:\[\d+\])+")
_NOT_UPDATABLE = ("template", "updatemenus", "sliders")
_MAX_CACHED_PATHS = 4096


def _attribute_path(path) -> str | None:
    """A menu/slider attribute path as it is resolved: None unless it is `name[i].name...` with at most
    MAX_PATH_PARTS parts (anything else is not a path plotly.js sets, and its key would leave the kernel
    as the cell wrote it); each run of indices collapsed to at most two (`[0][0]`), which resolve like any
    longer run (an object takes one index, a data leaf any number): the work on a path is bounded by its
    length, and the schema's cache is keyed by schema paths only."""
    if type(path) is not str:
        raise FigureRejected("figure keys must be strings")
    if path.count(".") >= MAX_PATH_PARTS or not _ATTR_PATH.fullmatch(path):
        return None
    if "[" not in path:
        return path
    return _INDEX_RUN.sub(lambda m: "[0]" if m.group(0).count("[") == 1 else "[0][0]", path)


def _path_parts(path: str) -> list | None:
    """[(name, number of indices)] of an attribute string ('annotations[0].text'), or None."""
    parts = []
    for part in path.split("."):
        m = _PATH_PART.fullmatch(part)
        if m is None:
            return None
        parts.append((m.group(1), min(m.group(2).count("["), 2)))  # more resolve like two (_attribute_path)
    return parts


def _resolve(root: Obj, path, parts: list | None = None):
    """The schema node an attribute string ('marker.color', 'annotations[0].text') names, or None
    (`parts`: the path already split by _path_parts)."""
    parts = _path_parts(path) if parts is None else parts
    if parts is None:
        return None
    node = root
    last = len(parts) - 1
    for n, (name, indices) in enumerate(parts):
        if not isinstance(node, Obj):
            return None
        node = node.field(name)
        if node is None:
            return None
        for _ in range(indices):
            if isinstance(node, Items):
                node = node.item
            elif isinstance(node, Leaf) and node.kind in ("data", "array", "number", "text", "color") and n == last:
                node = Leaf("data") if node.kind in ("data", "array") else Leaf(node.kind)  # one element
            else:
                return None
    return node


def _signature(node):
    return node.signature() if isinstance(node, Leaf) else id(node)


def _checked(walk: _Walk, node, value, depth):
    return _Walk(walk.schema, walk).run(node, value, depth)


def _restyle_nodes(sch: Schema, path: str) -> list:
    """The distinct schema nodes an attribute path (as _attribute_path gives it) names across all trace
    types, found from those of its prefix: a part costs one lookup per distinct node its prefix names,
    not one per trace type (`x.<junk>` steps once from x's few leaf kinds). Cached by the path with its
    indices as `[]`: only paths some trace type knows are kept, at most two indices a run, and at most
    _MAX_CACHED_PATHS of them."""
    if sch.trace_props is None:
        sch.trace_props = frozenset().union(*(trace.keys() for trace in sch.traces.values()))
    if path.split(".")[0].split("[")[0] not in sch.trace_props:
        return []  # one set lookup for a name no trace type has
    key = path.replace("[0]", "[]") if "[" in path else path
    nodes = sch.restyle_nodes.get(key)
    if nodes is None:
        head, dot, last = path.rpartition(".")
        starts = _restyle_nodes(sch, head) if dot else list(sch.traces.values())
        step = _path_parts(last) if starts else None
        found: dict = {}
        for start in starts if step else ():
            node = _resolve(start, last, step)
            if node is not None:
                found.setdefault(_signature(node), node)
        nodes = list(found.values())
        if nodes and len(sch.restyle_nodes) < _MAX_CACHED_PATHS:
            sch.restyle_nodes[key] = nodes
    return nodes


def _restyle_update(walk: _Walk, update, depth):
    """{attribute: value or [value per trace]}: each attribute is checked as every trace type that
    has it would read it; it passes only when all of them accept the same clean value."""
    if not isinstance(update, dict):
        return {}
    clean = {}
    for path, value in update.items():
        canonical = _attribute_path(path)
        # a path's parts cost one lookup per trace type each (uncached when no trace type has it)
        if not walk.spend((len(value) if isinstance(value, list) else 1) + path.count(".")):
            break
        if canonical is None:
            continue
        head = path.split(".")[0].split("[")[0]
        if head == "subplot":
            continue  # a new map subplot would get the map library's default (fetching) style
        if head == "type":
            if path == "type" and _no_map_types(walk.schema, value):
                clean[path] = value
            continue
        nodes = _restyle_nodes(walk.schema, canonical)
        results = []
        for node in nodes:
            per_trace = (isinstance(value, list) and not (isinstance(node, Leaf) and node.kind == "data"))
            if per_trace:
                results.append([_checked(walk, node, v, depth) for v in value])
            else:
                results.append(_checked(walk, node, value, depth))
        if results and all(r == results[0] for r in results[1:]):
            result = results[0]
            if isinstance(result, list) and any(r is _DROP for r in result):
                continue
            if result is not _DROP:
                clean[path] = result
    return clean


def _no_map_types(sch: Schema, value) -> bool:
    """Trace types (one, or one per trace) that draw on no map subplot."""
    for kind in value if isinstance(value, list) else [value]:
        node = sch.traces.get(kind) if type(kind) is str else None
        leaf = node.field("subplot") if node is not None else None
        if node is None or (isinstance(leaf, Leaf) and leaf.base in _MAP_SUBPLOTS):
            return False
    return True


def _relayout_update(walk: _Walk, update, depth):
    if not isinstance(update, dict):
        return {}
    clean = {}
    for path, value in update.items():
        canonical = _attribute_path(path)
        if not walk.spend(1 + path.count(".")):
            break
        if canonical is None or path.split(".")[0].split("[")[0] in _NOT_UPDATABLE:
            continue
        node = _resolve(walk.schema.frame_layout, canonical)
        if node is None:
            continue
        result = _checked(walk, node, value, depth)
        if result is not _DROP:
            clean[path] = result
    return clean


def _animate_target(walk: _Walk, target, depth):
    """Frame names, a group name, null, or frames given inline (checked as frames)."""
    frame = walk.schema.figure.fields["frames"].item
    if target is None or type(target) is str:
        return target if target is None else clean_markup(target)
    if isinstance(target, dict):
        result = _checked(walk, frame, target, depth)
        return None if result is _DROP else result
    if isinstance(target, list):
        clean = []
        for item in target:
            if item is None or type(item) is str:
                clean.append(item if item is None else clean_markup(item))
            elif isinstance(item, dict):
                result = _checked(walk, frame, item, depth + 1)
                clean.append(None if result is _DROP else result)
        return clean
    return None


_MAP_KEY = re.compile(r"(?:%s)\d*" % "|".join(_MAP_SUBPLOTS))
_STYLE_NAME = re.compile(r"[a-z][a-z-]{0,40}")


def _finish_template_layout(walk: _Walk, node: Obj, raw: dict, out, key, depth):
    """A template may keep a map style *name* (plotly 5 and 6 templates carry 'light'): a template
    only fills attributes the figure leaves unset, and validate_figure sets every map's style."""
    layout = out[key] if key in out else None
    if not isinstance(layout, dict):
        return
    for name, sub in layout.items():
        if _MAP_KEY.fullmatch(name) and isinstance(sub, dict) and isinstance(raw.get(name), dict):
            style = raw[name].get("style")
            if type(style) is str and _STYLE_NAME.fullmatch(style):
                sub["style"] = style


def _finish_map_subplot(walk: _Walk, node: Obj, raw: dict, out, key, depth):
    """Every map subplot object that leaves the kernel has the blank style: in the layout, in a frame's
    layout, and as a relayout/update/animate argument (`{"map": {}}` would otherwise replace the
    subplot's style by the map library's default on a click). A template's keeps a name (see
    _finish_template_layout)."""
    sub = out[key] if isinstance(out, list) or key in out else None
    if isinstance(sub, dict):
        sub["style"] = json.loads(json.dumps(SAFE_MAP_STYLE))


_FINISH.update({"layout.updatemenu.button": _finish_update_control,
                "layout.slider.step": _finish_update_control,
                **{f"layout.{sub}.layer": _finish_map_layer for sub in _MAP_SUBPLOTS},
                **{f"layout.{sub}": _finish_map_subplot for sub in _MAP_SUBPLOTS}})


# -- the figure --------------------------------------------------------------------------------------


def validate_figure(fig) -> dict:
    """A clean copy of a Plotly figure ({data, layout, frames, config}), or FigureRejected.

    Honest figures (plotly.express, graph_objects) keep their data and layout as they are; config is
    rebuilt; map subplots get a blank style. See the module docstring for what is removed.
    """
    if not isinstance(fig, dict) or not isinstance(fig.get("data"), list):
        raise FigureRejected("a Plotly figure needs a 'data' list")
    if "layout" in fig and not isinstance(fig["layout"], (dict, type(None))):
        raise FigureRejected("'layout' must be an object")
    sch = schema()
    body = {k: v for k, v in fig.items() if k in ("data", "layout", "frames")}
    walk = _Walk(sch)
    clean = walk.run(sch.figure, body)
    if not isinstance(clean, dict):
        raise FigureRejected("a Plotly figure needs a 'data' list")
    # Every map subplot the figure could ever draw on, whoever names it (a trace, a template's trace
    # defaults, a frame, an animate button's inline frame) and the default subplot of every map trace
    # type anywhere, has the blank style in the layout: plotly.js would give an unstyled one the map
    # library's default style, fetched from a CDN.
    for sub in sorted(walk.map_subplots):
        layout = clean.setdefault("layout", {})
        if not isinstance(layout.get(sub), dict):
            layout[sub] = {}
        layout[sub]["style"] = json.loads(json.dumps(SAFE_MAP_STYLE))
    clean["config"] = clean_config(fig.get("config"))
    return clean
