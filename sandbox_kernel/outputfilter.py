"""What sandboxed output may carry into the user's browser or terminal: a positive schema.

JupyterLab trusts the outputs of a cell the user ran: it inserts their HTML without a sanitiser, runs
their scripts with the Jupyter server's origin, typesets `$...$` in them with MathJax (whose `\\href`
and `\\style` take URLs), and renders markdown itself. So nothing a cell wrote reaches the browser
as it was written. Every MIME value published is either rebuilt here from a parsed structure or
dropped:

* text (streams, `text/plain`, error fields): control characters other than newline and tab become
  visible symbols, bidi overrides are spelled out, colour (SGR) sequences survive; see clean_text;
* `text/html`: parsed and re-serialised by nh3 against an explicit tag and attribute list (no class,
  id or style; URLs only `data:image/...` or `#fragment`), then math delimiters are split so MathJax
  finds nothing to typeset;
* `text/markdown`: rendered here by markdown-it (CommonMark, raw HTML off) and published as the
  sanitised `text/html` above; the browser never parses markdown a cell wrote;
* Plotly JSON: rebuilt against plotly's own schema (plotlyfigure.py);
* PNG and JPEG: decoded, checked for their signature, re-encoded; JSON: plain JSON data.

A per-cell budget caps text (the policy's output limit, within the operator's max_output_bytes) and
rich data (the operator's max_display_bytes) separately; every copy that leaves the kernel counts,
including the copies in the execute_reply summary. Sizes are checked before any work is done on a
value, and all work here is linear in what is kept, because it runs in the kernel's process outside
every cell limit. Streams keep their head live and their tail at the end, with a marker saying how
much was cut; a display left out for the display limit is named on a line of its own (stderr), and
either makes the reply's `truncated` true.
"""
from __future__ import annotations

import base64
import binascii
import html as html_lib
import json
import math
import re
from collections import deque

import nh3

DEFAULT_MIME_ALLOWLIST = (
    "text/plain",
    "text/html",
    "text/markdown",
    "image/png",
    "image/jpeg",
    "application/json",
    "application/vnd.plotly.v1+json",
)

PLOTLY_MIME = "application/vnd.plotly.v1+json"
# Types the kernel can rebuild. An operator's extra types must be JSON data (application/...+json):
# anything else would reach the browser as the cell wrote it.
_REBUILT = frozenset(DEFAULT_MIME_ALLOWLIST)
_JSON_TYPE = re.compile(r"^application/[a-z0-9.+-]+\+json$")
# JSON types whose renderers do more than show data: vega and vega-lite load `data.url` (and images,
# fonts) from anywhere; the GeoJSON renderer draws on remote tiles; vdom builds DOM elements (img,
# script) from the JSON; widget views and state, bokeh's and holoviews' load/exec types run code.
# Re-serialising them changes nothing of that, so the kernel refuses them as extra types.
_ACTIVE_JSON_TYPE = re.compile(
    r"^application/(?:vnd\.vega(?:lite)?(?:\.v[0-9.]+)?|(?:vnd\.)?geo|vdom(?:\.v[0-9]+)?"
    r"|vnd\.jupyter\.widget-[a-z]+|vnd\.(?:bokehjs|holoviews)_[a-z]+(?:\.v[0-9]+)?)\+json$")


class OutputRejected(ValueError):
    """A MIME value that cannot be published safely."""


class OverDisplayLimit(OutputRejected):
    """A MIME value larger than what is left of the cell's display budget (named on a line of its own)."""

    def __init__(self, size: int):
        super().__init__("over the cell's display limit")
        self.size = size


def allowed_extra_type(mime: str) -> bool:
    """Whether an operator-added MIME type can be published as JSON data the kernel re-serialises: JSON
    types only, and none whose known renderer fetches or runs what the data names (_ACTIVE_JSON_TYPE)."""
    return bool(_JSON_TYPE.match(mime)) and not _ACTIVE_JSON_TYPE.match(mime.lower())


# -- Text ------------------------------------------------------------------------------------------

# Marks the one-line form of a real denial; cell text never carries it (clean_text spells it out),
# so a cell cannot print a line that reads like one.
DENIAL_MARK = "\u26d4"
# C0 controls but \t and \n, DEL, C1 controls, bidi embedding/override/isolate marks, lone surrogates,
# the denial mark.
_UNSAFE_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                          "\u2028\u2029\ud800-\udfff\u26d4]")
_TEXT_TOKEN = re.compile("\x1b\\[([0-9;]{0,64})m|" + _UNSAFE_TEXT.pattern)
# SGR parameters that only colour or weight text (no conceal, blink, reverse video).
_SGR_SIMPLE = frozenset({0, 1, 2, 3, 4, 22, 23, 24, 39, 49, *range(30, 38), *range(40, 48), *range(90, 98),
                         *range(100, 108)})
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Unicode's line and paragraph separators: str.splitlines() (agents, the MCP client) breaks a line there, so a
# one-line denial could carry a second line (review O3, O3-3). Shown by their code, like the bidi marks.
_SHOWN_BY_CODE = _BIDI | {"\u2028", "\u2029"}


def _sgr_allowed(params: str) -> bool:
    if not params:
        return True
    try:
        values = [int(p) if p else 0 for p in params.split(";")]
    except ValueError:
        return False
    i = 0
    while i < len(values):
        v = values[i]
        if v in (38, 48):  # 38;5;n or 38;2;r;g;b: a colour from the palette or RGB
            if i + 2 < len(values) and values[i + 1] == 5 and values[i + 2] < 256:
                i += 3
                continue
            if i + 4 < len(values) and values[i + 1] == 2 and max(values[i + 2:i + 5]) < 256:
                i += 5
                continue
            return False
        if v not in _SGR_SIMPLE:
            return False
        i += 1
    return True


def _visible(m: re.Match) -> str:
    token = m.group(0)
    if m.group(1) is not None or token.startswith("\x1b["):
        if _sgr_allowed(m.group(1) or ""):
            return token
        return "\u241b" + token[1:]  # the ESC shown as a symbol, the rest as text
    ch = token
    code = ord(ch)
    if ch in _SHOWN_BY_CODE or ch == DENIAL_MARK:
        return f"<U+{code:04X}>"
    if code < 0x20:
        return chr(0x2400 + code)  # Unicode's control pictures: a visible ␛, ␇, ␈ ...
    if code == 0x7F:
        return "\u2421"
    return "\ufffd"  # C1 controls and lone surrogates


def _visible_char(m: re.Match) -> str:
    """One character _UNSAFE_TEXT matched, as clean_text shows it outside a colour sequence."""
    ch = m.group(0)
    code = ord(ch)
    if ch in _SHOWN_BY_CODE or ch == DENIAL_MARK:
        return f"<U+{code:04X}>"
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    return "\ufffd"


def needs_cleaning(text: str) -> bool:
    return _UNSAFE_TEXT.search(text) is not None


def one_line(text: str) -> str:
    """Cleaned text on one line: a line break shows as ⏎, so a value inside a sentence (a denied
    attribute's name) cannot start a line of its own."""
    return clean_text(text).replace("\n", "\u23ce")


def clean_text(text: str) -> str:
    """Text a terminal or the browser shows as text: nothing in it moves the cursor, rewrites the line,
    sets a title, writes the clipboard (OSC 52), makes a link (OSC 8), hides or reorders characters.

    `\\r\\n` and a lone `\\r` become `\\n`, so a progress line prints its updates one under another
    instead of overwriting what came before."""
    if _UNSAFE_TEXT.search(text) is None:
        return text
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _TEXT_TOKEN.sub(_visible, text)


# -- HTML ------------------------------------------------------------------------------------------

# Formatting, lists, tables, images: what tables, reports and rendered markdown use. Nothing that
# loads, embeds, submits or styles.
_HTML_TAGS = {
    "a", "abbr", "b", "blockquote", "br", "caption", "cite", "code", "col", "colgroup", "dd", "del",
    "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3", "h4", "h5", "h6",
    "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span",
    "strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul",
    "var",
}
# No class, id or style anywhere: they would let output wear JupyterLab's own look (a fake dialog
# over the page) or clobber the page's names.
_HTML_ATTRIBUTES = {
    "*": {"title"},
    "a": {"href"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align", "scope"},
    "col": {"span"}, "colgroup": {"span"},
    "ol": {"start"},
    "details": {"open"},
}
_DISPLAY_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
_DATA_IMAGE = re.compile(r"^data:image/(?:png|jpeg|gif);base64,[A-Za-z0-9+/=]*$")
_FRAGMENT = re.compile(r"^#[A-Za-z0-9_.:-]{0,200}$")
_NUMBER = re.compile(r"^[0-9]{1,5}$")


def _html_attribute(tag: str, attr: str, value: str) -> str | None:
    """Per-attribute decisions nh3 calls back for: only inline images and in-page links are URLs."""
    if attr == "src":
        return value if tag == "img" and _DATA_IMAGE.match(value) else None
    if attr == "href":
        return value if _FRAGMENT.match(value) else None
    if attr in ("width", "height", "colspan", "rowspan", "span", "start"):
        return value if _NUMBER.match(value) else None
    if attr == "align":
        return value if value in ("left", "right", "center") else None
    if attr == "scope":
        return value if value in ("row", "col", "rowgroup", "colgroup") else None
    if attr == "open":
        return ""
    return value


# A tag in nh3's output: every attribute value is double-quoted there, and `"` inside one is escaped.
_HTML_TAG_OR_TEXT = re.compile(r'(<(?:[^>"]|"[^"]*")*>)|([^<]+)')
_MATH_CHARS = re.compile(r"[$\\]")


def _split_math(html: str) -> str:
    """Put each `$` and `\\` of the text in an element of its own. MathJax only finds math inside one
    run of text between tags, so no pair of delimiters (`$..$`, `\\(..\\)`, `\\begin..\\end`) survives
    and nothing is typeset (TeX's `\\href`, `\\style`, `\\class` would take URLs and classes)."""
    if _MATH_CHARS.search(html) is None:
        return html

    def text(m: re.Match) -> str:
        if m.group(1) is not None:
            return m.group(1)
        return _MATH_CHARS.sub(lambda c: f"<span>{c.group(0)}</span>", m.group(2))

    return _HTML_TAG_OR_TEXT.sub(text, html)


# html5ever (nh3's parser) does work proportional to nesting depth for each new element, and rebuilds
# every open formatting element (b, i, a, ...) inside each new block: 700 distinct unclosed <b>s before
# 7,000 paragraphs took 1.3 GB and seconds of the kernel's time in 65 kB of input. A linear scan of the
# start and end tags bounds both before the parser sees anything.
HTML_MAX_DEPTH = 256
HTML_MAX_OPEN_FORMATTING = 32
_TAG_NAME = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9:-]*)")
_VOID_TAGS = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta",
                        "param", "source", "track", "wbr"})
_FORMATTING_TAGS = frozenset({"a", "b", "big", "code", "em", "font", "i", "nobr", "s", "small", "strike",
                              "strong", "tt", "u"})


def html_shape_problem(html: str) -> str | None:
    """Why `html` is too costly to parse (too deep, too many formatting elements left open), or None.
    Counts every tag-like `<name` (also inside comments and attribute values), so it only errs on the
    side of refusing."""
    depth = formatting = 0
    for m in _TAG_NAME.finditer(html):
        name = m.group(2).lower()
        if name in _VOID_TAGS:
            continue
        step = -1 if m.group(1) else 1
        depth = max(depth + step, 0)
        if name in _FORMATTING_TAGS:
            formatting = max(formatting + step, 0)
            if formatting > HTML_MAX_OPEN_FORMATTING:
                return f"more than {HTML_MAX_OPEN_FORMATTING} formatting elements left open"
        if depth > HTML_MAX_DEPTH:
            return f"nested deeper than {HTML_MAX_DEPTH} elements"
    return None


def sanitize_html(html: str) -> str:
    """HTML rebuilt from nh3's parse: the allowlists above, comments and scripts gone, no math.
    Raises OutputRejected when the input's shape would make the parse costly (html_shape_problem)."""
    problem = html_shape_problem(html)
    if problem:
        raise OutputRejected(f"HTML {problem} (shown as text)")
    clean = nh3.clean(
        html,
        tags=_HTML_TAGS,
        clean_content_tags={"script", "style", "template", "textarea", "title", "noscript", "xmp"},
        attributes=_HTML_ATTRIBUTES,
        attribute_filter=_html_attribute,
        url_schemes={"data"},
        link_rel=None,
        strip_comments=True,
    )
    return _split_math(_html_visible(clean))


def _html_visible(html: str) -> str:
    """nh3 writes every character literally, whatever entity spelt it (`&#x26d4;`): the denial mark,
    controls and bidi overrides are shown as clean_text shows them (escaped: `&lt;U+26D4&gt;`), so a
    cell's HTML or markdown cannot draw a denial's line, and text an agent takes from it is plain."""
    if _UNSAFE_TEXT.search(html) is None:
        return html
    return _UNSAFE_TEXT.sub(lambda m: html_lib.escape(_visible_char(m)), html)


# -- Markdown --------------------------------------------------------------------------------------

# markdown-it is linear but pure Python (up to ~17 us a character on hostile input): beyond these a
# value is shown as text, so a cell cannot keep the kernel's shell thread busy for long.
MARKDOWN_MAX_CHARS = 50_000       # one value
MARKDOWN_CELL_CHARS = 100_000     # all the markdown of one cell
_markdown = None


def _markdown_renderer():
    """markdown-it in CommonMark mode with raw HTML off; a link whose target the HTML rules would
    drop keeps its text and shows the address after it, so the reader still sees where it pointed."""
    global _markdown
    if _markdown is None:
        from markdown_it import MarkdownIt

        md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
        default_open = md.renderer.rules.get("link_open")
        default_close = md.renderer.rules.get("link_close")

        def link_open(tokens, idx, options, env):
            href = tokens[idx].attrGet("href") or ""
            if _FRAGMENT.match(href):
                env.setdefault("_links", []).append(None)
                return default_open(tokens, idx, options, env) if default_open else \
                    md.renderer.renderToken(tokens, idx, options, env)
            env.setdefault("_links", []).append(href)
            return ""

        def link_close(tokens, idx, options, env):
            href = env.get("_links", [None]).pop() if env.get("_links") else None
            if href is None:
                return default_close(tokens, idx, options, env) if default_close else \
                    md.renderer.renderToken(tokens, idx, options, env)
            return f" ({html_lib.escape(href)})" if href else ""

        md.renderer.rules["link_open"] = link_open
        md.renderer.rules["link_close"] = link_close
        _markdown = md
    return _markdown


def render_markdown(text: str) -> str:
    """Markdown a cell wrote, as sanitised HTML."""
    return sanitize_html(_markdown_renderer().render(text, {}))


# -- Plotly ----------------------------------------------------------------------------------------


def validate_plotly(fig) -> dict:
    """A Plotly figure rebuilt against plotly's own schema (plotlyfigure.py), or OutputRejected."""
    from .plotlyfigure import FigureRejected, validate_figure

    try:
        return validate_figure(fig)
    except FigureRejected as exc:
        raise OutputRejected(str(exc)) from None


# -- Images and JSON -------------------------------------------------------------------------------

_SIGNATURES = {"image/png": (b"\x89PNG\r\n\x1a\n",), "image/jpeg": (b"\xff\xd8\xff",)}


def validate_image(value, mime: str = "image/png") -> str:
    """The image re-encoded from its decoded bytes, which must start with the format's signature."""
    if not isinstance(value, str):
        raise OutputRejected("an image must be base64 text")
    try:
        raw = base64.b64decode("".join(value.split()), validate=True)
    except (binascii.Error, ValueError):
        raise OutputRejected("an image must be valid base64") from None
    if not raw.startswith(_SIGNATURES.get(mime, (b"",))):
        raise OutputRejected(f"the data is not a {mime.split('/')[1].upper()} image")
    return base64.b64encode(raw).decode("ascii")


def validate_json(value):
    """JSON data with every string (keys too) cleaned like text: a JSON viewer, or an agent printing a
    value, shows it as text. Iterative, and the same object when nothing needed cleaning."""
    try:
        text = json.dumps(value, allow_nan=True, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise OutputRejected(f"not JSON data: {type(exc).__name__}") from None
    if not needs_cleaning(text) and "\\u" not in text:  # escapes could spell a control character
        return value
    root = [value]
    stack = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = clean_text(item)
        elif isinstance(item, dict):
            item = {clean_text(k) if isinstance(k, str) else k: v for k, v in item.items()}
            container[key] = item
            stack.extend((item, k) for k in item)
        elif isinstance(item, list):
            item = list(item)
            container[key] = item
            stack.extend((item, i) for i in range(len(item)))
    return root[0]


def _size(value) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "replace"))
    try:
        return len(json.dumps(value, allow_nan=True, default=str))
    except (TypeError, ValueError, RecursionError):
        return 0


def _fmt_bytes(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    if n >= 1_000:
        return f"{n / 1_000:.1f} kB"
    return f"{n} bytes"


def _cut_to_bytes(text: str, limit: int, *, tail: bool = False) -> str:
    """At most `limit` UTF-8 bytes of `text` (its start, or its end). Only the part kept is encoded.

    A start never ends inside an escape sequence: clean text keeps complete colour sequences, and one
    cut to `ESC [` would become a screen clear, a cursor move ... with whatever is published after it
    (the held tail begins where the cell chose). An end needs no such care: a sequence cut there has
    lost its ESC."""
    limit = max(limit, 0)
    if len(text) <= limit // 4:
        return text
    part = text[-limit:] if tail else text[:limit]  # a character is at least one byte
    raw = part.encode("utf-8", "replace")
    if len(raw) > limit:
        raw = raw[-limit:] if tail else raw[:limit]
        part = raw.decode("utf-8", "ignore")
    if not tail and len(part) < len(text):
        part = _without_partial_escape(part)
    return part


_COMPLETE_SGR = re.compile("\x1b\\[[0-9;]{0,64}m")
_LONGEST_SGR = 67  # ESC [ 64 parameters m


def _without_partial_escape(part: str) -> str:
    """`part` less a trailing ESC that does not start a complete colour sequence within it."""
    start = part.rfind("\x1b", max(len(part) - _LONGEST_SGR, 0))
    if start < 0 or _COMPLETE_SGR.match(part, start):
        return part
    return part[:start]


# -- The wire --------------------------------------------------------------------------------------


def _json_default(obj):
    from jupyter_client.jsonutil import json_default

    return json_default(obj)


def pack_message(obj) -> bytes:
    """The kernel session's packer: JSON whose every string is valid UTF-8 (lone surrogates become
    U+FFFD) and whose every number is finite. jupyter_client's own packer encodes with
    `surrogateescape`, which turns a cell's `'\\udc80'` into invalid UTF-8 on the wire and fails
    outright on `'\\ud800'`, leaving the client without a reply."""
    try:
        text = json.dumps(obj, default=_json_default, ensure_ascii=False, allow_nan=False)
    except ValueError:  # NaN or Infinity somewhere: null, as JSON has no such numbers
        text = json.dumps(_finite(obj), default=_json_default, ensure_ascii=False, allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def _finite(obj):
    """A copy with non-finite floats as None. Iterative: the message may be deep."""
    root = [obj]
    stack = [(root, 0)]
    while stack:
        container, key = stack.pop()
        value = container[key]
        if isinstance(value, float):
            if not math.isfinite(value):
                container[key] = None
        elif isinstance(value, dict):
            value = dict(value)
            container[key] = value
            stack.extend((value, k) for k in value)
        elif isinstance(value, (list, tuple)):
            value = list(value)
            container[key] = value
            stack.extend((value, i) for i in range(len(value)))
    return root[0]


# -- The per-cell budget ---------------------------------------------------------------------------


class CellOutput:
    """The output budget of one cell: call ``stream``/``bundle``/``error`` as events arrive and
    ``finish`` at the end; ``charge_chart``/``charge_text`` for the copies in the reply summary.
    Each returns what to publish."""

    TRACEBACK_BYTES = 64_000
    # The engine and the worker pass on display data up to this many times the display cap before they
    # replace it by a note: the cap counts what the kernel publishes, and a chart's lists of numbers
    # leave packed (plotlyfigure.pack_numbers) at about half the size they arrive with.
    UPSTREAM_FACTOR = 2
    MAX_NOTICES = 20  # lines naming a display left out; later ones are counted in one line at the end
    # Messages, not only bytes: 10,000 tiny displays are 7 MB of envelopes, and a client that reads
    # slowly loses the tail (the cell's `idle` status included) to ZeroMQ's high-water mark.
    MAX_DISPLAYS = 500
    MAX_STREAM_MESSAGES = 2_000

    def __init__(self, allowlist, text_bytes: int, rich_bytes: int):
        self.allowlist = tuple(allowlist)
        self.rich_bytes = max(int(rich_bytes), 0)
        self.set_text_bytes(text_bytes)
        self.text_used = 0
        self.rich_used = 0
        self.cut_bytes = 0
        self.held: deque[list] = deque()  # [name, text] chunks of the tail, oldest first
        self.held_bytes = 0
        self.filtered: list[dict] = []    # MIME values removed, for the reply metadata
        self.charts: list[dict] = []      # Plotly figures published, as published
        self.markdown_chars = 0
        self.displays = 0
        self.displays_dropped = 0         # not yet reported by finish()
        self.displays_dropped_total = 0
        self.stream_messages = 0
        self.displays_cut = 0             # displays left out: over the display limit
        self.copies_cut = 0               # charts left out of the reply summary: over the display limit
        self.notices: list[tuple[str, str]] = []  # lines for the kernel to publish now (take_notices)
        self._notices_held = 0            # displays cut past MAX_NOTICES: one line at finish()
        self._chart_ids: dict[int, tuple] = {}  # id(raw figure) -> (raw, clean): reused by the summary

    @property
    def truncated(self) -> bool:
        return bool(self.cut_bytes or self.displays_dropped_total or self.displays_cut or self.copies_cut)

    def set_text_bytes(self, text_bytes: int) -> None:
        """The text budget (a cell's %%sandbox may change its policy's output limit after the cell's
        first notes): streams publish live up to the head; the last `tail_bytes` are held back until
        finish."""
        self.text_bytes = max(int(text_bytes), 200)
        self.tail_bytes = self.text_bytes // 4
        self.head_bytes = self.text_bytes - self.tail_bytes

    @property
    def upstream_bytes(self) -> int:
        """The display data the engine and the worker may pass on for this cell (UPSTREAM_FACTOR)."""
        return self.rich_bytes * self.UPSTREAM_FACTOR

    def take_notices(self) -> list[tuple[str, str]]:
        """The lines naming displays left out since the last call, as (stream name, text)."""
        out, self.notices = self.notices, []
        return out

    def _display_cut(self, what: str, size: int | None) -> None:
        """A display left out for the display limit: counted (the reply says truncated) and named on one
        line of stderr. The line is the kernel's own text, never the cell's."""
        self.displays_cut += 1
        if self.displays_cut > self.MAX_NOTICES:
            self._notices_held += 1
            return
        of = f" of {_fmt_bytes(size)}" if size else ""
        used = f"; {_fmt_bytes(self.rich_used)} already shown" if self.rich_used else ""
        self.notices.append(("stderr", f"[sandbox] {what}{of} not shown: over the cell's display limit of "
                                       f"{_fmt_bytes(self.rich_bytes)}{used}\n"))

    def _note_filtered(self, mime: str, reason: str) -> None:
        """The reply's record of a value removed. A MIME key is the cell's text (and reasons quote it):
        both are cut, then shown as one line of clean text, like every string an agent prints."""
        if len(self.filtered) < 100:
            self.filtered.append({"mime": one_line(mime[:100]), "reason": one_line(reason[:300])})

    # -- streams

    def stream(self, name: str, text: str) -> list[tuple[str, str]]:
        if name not in ("stdout", "stderr") or not isinstance(text, str):
            return []
        # Cut to what could ever be kept before cleaning (cleaning may grow the text): the start for the head,
        # the end for the tail (one large chunk arriving after the head is full must leave its end, not its start).
        room = max(self.head_bytes - self.text_used, 0)
        if len(text) > room + self.tail_bytes:
            end = len(text) - self.tail_bytes
            self.cut_bytes += _size(text[room:end])
            text = text[:room] + text[end:]
        text = clean_text(text)
        out = []
        room = self.head_bytes - self.text_used
        if room > 0 and self.stream_messages < self.MAX_STREAM_MESSAGES:
            head = _cut_to_bytes(text, room)
            self.text_used += _size(head)
            self.stream_messages += 1
            if head:
                out.append((name, head))
            text = text[len(head):]
            if text:  # the head is full: what follows (and all later text) goes to the tail, in order
                self.text_used = max(self.text_used, self.head_bytes)
        if text:
            self._hold(name, text)
        return out

    def _hold(self, name: str, text: str) -> None:
        size = _size(text)
        if self.held and self.held[-1][0] == name:
            self.held[-1][1] += text
        else:
            self.held.append([name, text])
        self.held_bytes += size
        while self.held_bytes > self.tail_bytes and self.held:
            first = self.held[0]
            excess = self.held_bytes - self.tail_bytes
            first_size = _size(first[1])
            if first_size <= excess:
                self.held.popleft()
                self.held_bytes -= first_size
                self.cut_bytes += first_size
            else:
                kept = _cut_to_bytes(first[1], first_size - excess, tail=True)
                cut = first_size - _size(kept)
                first[1] = kept
                self.held_bytes -= cut
                self.cut_bytes += cut

    def finish(self) -> list[tuple[str, str]]:
        """The held-back tail, after a marker when anything was cut."""
        out = self.take_notices()
        if self._notices_held:
            out.append(("stderr", f"[sandbox] {self._notices_held:,} more displays not shown: over the cell's "
                                  f"display limit of {_fmt_bytes(self.rich_bytes)}\n"))
            self._notices_held = 0
        if self.cut_bytes:
            out.append(("stderr", f"\n[... output truncated: {_fmt_bytes(self.cut_bytes)} cut "
                                  f"(the cell's text limit is {_fmt_bytes(self.text_bytes)}) ...]\n"))
        if self.displays_dropped:
            out.append(("stderr", f"\n[... {self.displays_dropped:,} more displays not shown: a cell shows at "
                                  f"most {self.MAX_DISPLAYS:,} ...]\n"))
            self.displays_dropped = 0
        out.extend((name, text) for name, text in self.held)
        self.held.clear()
        self.held_bytes = 0
        return out

    # -- rich displays

    def _rich_value(self, mime: str, value):
        """(published mime, clean value) for one entry of a bundle, or OutputRejected."""
        room = self.rich_bytes - self.rich_used
        if mime == "text/html":
            if not isinstance(value, str):
                raise OutputRejected("text/html must be a string")
            if len(value) > room:
                raise OverDisplayLimit(len(value))
            return "text/html", sanitize_html(value)
        if mime == "text/markdown":
            if not isinstance(value, str):
                raise OutputRejected("text/markdown must be a string")
            if len(value) > min(room, MARKDOWN_MAX_CHARS, MARKDOWN_CELL_CHARS - self.markdown_chars):
                raise OutputRejected("too much markdown to render in one cell (shown as text)")
            self.markdown_chars += len(value)
            return "text/html", render_markdown(value)
        if mime == PLOTLY_MIME:
            return mime, self._plotly(value)
        if mime in ("image/png", "image/jpeg"):
            if isinstance(value, str) and len(value) > room:
                raise OverDisplayLimit(len(value))
            return mime, validate_image(value, mime)
        if mime.startswith("text/"):
            raise OutputRejected(f"{mime} cannot be rebuilt by the kernel")
        if not (mime == "application/json" or allowed_extra_type(mime)):
            raise OutputRejected(f"{mime} is not JSON data the kernel can re-serialise")
        return mime, validate_json(value)

    def _plotly(self, fig) -> dict:
        hit = self._chart_ids.get(id(fig))
        if hit is not None and hit[0] is fig:
            return hit[1]
        clean = validate_plotly(fig)
        self._chart_ids[id(fig)] = (fig, clean)
        return clean

    def clear(self) -> bool:
        """Whether a clear_output of the cell may be published: each is a message, counted like a display."""
        return self._display_message()

    def _display_message(self) -> bool:
        """Counts one display message of the cell; False past MAX_DISPLAYS (dropped, reported at finish)."""
        if self.displays >= self.MAX_DISPLAYS:
            self.displays_dropped += 1
            self.displays_dropped_total += 1
            return False
        self.displays += 1
        return True

    @staticmethod
    def display_id(transient) -> str | None:
        """The display id of a display's transient data, when it is one a front end may key outputs by (the
        cell chose it: plain letters, digits and ``_.:-``, at most 200)."""
        value = transient.get("display_id") if isinstance(transient, dict) else None
        return value if type(value) is str and _DISPLAY_ID.fullmatch(value) else None

    def bundle(self, data: dict, metadata: dict | None = None) -> tuple[dict, dict] | None:
        """Filtered (data, metadata), or None when nothing publishable is left."""
        if not isinstance(data, dict):
            return None
        if not self._display_message():
            return None
        clean: dict = {}
        over = None
        text = data.get("text/plain")
        if len(data) == 1 and isinstance(text, str) and len(text) < 200:
            upstream = _UPSTREAM_NOTE.fullmatch(text)
            if upstream:  # the engine or the worker left this display out (past UPSTREAM_FACTOR x the cap)
                size = upstream.group(2) or upstream.group(3)
                size = int(size.replace(",", "")) if upstream.group(2) else int(float(size) * 1_000_000)
                self._display_cut("a chart" if upstream.group(1) == "chart" else "a display", size)
                self._note_filtered("display", "over the cell's display limit")
                return None
        for mime, value in data.items():
            if mime == "text/plain":
                continue
            if not isinstance(mime, str) or mime not in self.allowlist:
                self._note_filtered(str(mime), "not in the MIME allowlist")
                continue
            if mime == "text/markdown" and "text/html" in data and "text/html" in self.allowlist:
                continue  # the cell's own HTML is the richer form; markdown would be a second copy
            try:
                published, value = self._rich_value(mime, value)
            except OutputRejected as exc:
                self._note_filtered(mime, str(exc))
                if isinstance(exc, OverDisplayLimit) and over is None:
                    over = (_describe({mime: None}), exc.size)  # one line for the display
                if mime == "text/markdown" and isinstance(value, str) and not isinstance(text, str):
                    text = value  # too long to render: still readable as text
                continue
            if published not in clean:
                clean[published] = value
        rich_size = sum(_size(v) for v in clean.values())
        if clean and self.rich_used + rich_size > self.rich_bytes:
            for mime in clean:
                self._note_filtered(mime, "over the cell's display limit")
            over = (_describe(clean), rich_size)
            clean = {}  # its text/plain (a figure's one-line summary, a repr) is still published
        if over is not None:
            self._display_cut(*over)
        self.rich_used += rich_size if clean else 0
        if PLOTLY_MIME in clean:
            self.charts.append(clean[PLOTLY_MIME])
        if isinstance(text, str) and "text/plain" in self.allowlist:
            clean["text/plain"] = self._plain(text)
        if not clean:
            return None
        return clean, _filter_metadata(metadata, clean)

    def _plain(self, text: str) -> str:
        """A text/plain value within what is left of the text budget (head and tail kept)."""
        room = max(self.text_bytes - self.text_used, 0)
        size = _size(text)
        if len(text) > 2 * room + 64:  # trim before cleaning, so the work is bounded by the budget
            text = text[:room] + text[len(text) - room:] if room else ""
        text = clean_text(text)
        kept = text
        if _size(text) > room:
            keep = max(room - 120, 0)
            head = _cut_to_bytes(text, keep // 2 + keep % 2)
            tail = _cut_to_bytes(text, keep // 2, tail=True) if keep else ""
            kept = f"{head}\n[... {_fmt_bytes(size - _size(head) - _size(tail))} cut ...]\n{tail}"
            self.cut_bytes += max(size - _size(head) - _size(tail), 1)
        self.text_used += _size(kept)
        return kept

    def error(self, ename: str, evalue: str, traceback: list, *, denial: bool = False) -> dict:
        """An error's fields, cleaned and capped so a huge message cannot flood the front end. A real
        denial is one line (its message may hold a cell's text: a line break cannot start a fake one)
        and starts with DENIAL_MARK, which no cell text can carry."""
        ename = clean_text(_cut_to_bytes(str(ename), 200))
        evalue = clean_text(_cut_to_bytes(str(evalue), 4_000))
        if denial:
            evalue = one_line(evalue)
            line = traceback[0] if isinstance(traceback, list) and traceback else f"{ename}: {evalue}"
            line = one_line(_cut_to_bytes(str(line), self.TRACEBACK_BYTES))
            return {"ename": ename, "evalue": evalue, "traceback": [f"{DENIAL_MARK} {line}"]}
        lines, used = [], 0
        traceback = traceback if isinstance(traceback, list) else []
        for line in traceback:
            line = _cut_to_bytes(str(line), self.TRACEBACK_BYTES)
            size = _size(line)
            if used + size > self.TRACEBACK_BYTES:
                lines.append(f"[... {len(traceback) - len(lines)} traceback lines cut ...]")
                break
            lines.append(clean_text(line))
            used += size
        return {"ename": ename, "evalue": evalue, "traceback": lines}

    # -- copies in the reply summary

    def charge_chart(self, fig) -> dict | None:
        """A figure for the reply summary: the published copy when the cell displayed it, else checked
        now; None (and noted) when it is unsafe or its copy does not fit the display budget."""
        try:
            clean = self._plotly(fig)
        except OutputRejected as exc:
            self._note_filtered(PLOTLY_MIME, str(exc))
            return None
        size = _size(clean)
        if self.rich_used + size > self.rich_bytes:
            self.copies_cut += 1  # the chart was shown (or named as not shown); the reply lacks its copy
            self._note_filtered(PLOTLY_MIME, "left out of the reply summary: over the cell's display "
                                             "limit (each copy counts)")
            return None
        self.rich_used += size
        return clean

    def charge_text(self, text: str) -> str:
        """Text for the reply summary, within what is left of the text budget."""
        if not isinstance(text, str) or not text:
            return ""
        room = max(self.text_bytes - self.text_used, 0)
        kept = _cut_to_bytes(text, room)
        if len(kept) < len(text):
            self.cut_bytes += _size(text) - _size(kept)
        kept = clean_text(kept)
        self.text_used += _size(kept)
        return kept


# The notes the engine (engine._bundle, _seed002_result) and the worker (isolation/worker.py) publish in
# place of a display they did not pass on. Recognised so that the cell's reply says truncated and the
# display is named on one line, like one the kernel left out. (A cell that displays such text itself
# only gets that line for it.)
_UPSTREAM_NOTE = re.compile(r"\[(display|chart) of (?:([\d,]{1,20}) bytes not shown: the cell's output is capped at "
                            r"[\d,]{1,20} bytes|([\d.]{1,12}) MB not shown: over the cell's display limit of "
                            r"[\d.]{1,12} MB)\]")


def _describe(clean: dict) -> str:
    """What a display was, for the line that says it was not shown."""
    if PLOTLY_MIME in clean:
        return "a Plotly chart"
    if "image/png" in clean or "image/jpeg" in clean:
        return "an image"
    if "text/html" in clean:
        return "an HTML display"
    return "a display"


_METADATA_KEYS = {"width", "height", "expanded", "unconfined", "isolated"}


def _filter_metadata(metadata, data: dict) -> dict:
    """Only the per-MIME layout hints front ends know, with plain values."""
    out: dict = {}
    if not isinstance(metadata, dict):
        return out
    for mime, hints in metadata.items():
        if mime in data and isinstance(hints, dict):
            kept = {k: v for k, v in hints.items()
                    if k in _METADATA_KEYS and isinstance(v, (bool, int, float))}
            if kept:
                out[mime] = kept
    return out


class OutputFilter:
    """The operator's output settings; hands out one CellOutput per cell."""

    def __init__(self, allowlist=DEFAULT_MIME_ALLOWLIST, text_bytes: int = 1_000_000,
                 rich_bytes: int = 5_000_000):
        kept = [m for m in allowlist if m in _REBUILT or allowed_extra_type(m)]
        self.ignored = [m for m in allowlist if m not in kept]
        # Import the renderers now, in the kernel, not at the first output: at level `none` outputs are
        # filtered on the cell's own thread, where confinement refuses to compile source.
        from . import plotlyfigure  # noqa: F401

        _markdown_renderer()
        self.allowlist = tuple(kept)
        self.text_bytes = text_bytes
        self.rich_bytes = rich_bytes

    def cell(self, output_bytes: int | None = None) -> CellOutput:
        """The budget of one cell: the policy's output limit caps its text, within the operator's text
        cap; displays have the operator's display cap (max_display_bytes), whatever the text limit: a
        chart of a few MB is no flood of text (issue 11)."""
        return CellOutput(self.allowlist, self.text_cap(output_bytes), self.rich_bytes)

    def text_cap(self, output_bytes: int | None) -> int:
        """A cell's text budget under a policy's output limit (None: unlimited), within the operator's."""
        return self.text_bytes if output_bytes is None else min(output_bytes, self.text_bytes)
