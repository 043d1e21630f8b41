"""What sandboxed output may carry into the user's browser.

JupyterLab runs scripts found in the outputs of cells it executed itself, so every MIME bundle a cell
produces passes through here before it is published: only allowlisted MIME types survive, HTML is
sanitised with nh3 (a real HTML sanitiser), markdown loses raw HTML and dangerous links, Plotly JSON
is validated, and images must be plain base64. Nothing in an output may make the browser fetch a
remote URL on its own (a remote <img> or Plotly image would leak sandbox data past the network rule).

A per-cell budget caps text (streams, text/plain, tracebacks) and rich data separately. Streams keep
their head live and their tail at the end, with a marker saying how much was cut.
"""
from __future__ import annotations

import base64
import binascii
import json
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

# -- HTML ----------------------------------------------------------------------------------------

_HTML_TAGS = set(nh3.ALLOWED_TAGS) | {"table", "thead", "tbody", "tfoot", "tr", "th", "td", "caption"}
_HTML_ATTRIBUTES = {tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()}
_HTML_ATTRIBUTES["*"] = {"class", "style", "title"}
_HTML_ATTRIBUTES["table"] = _HTML_ATTRIBUTES.get("table", set()) | {"border"}
# Inline styles pandas and hand-written tables use; none of these can hold a url().
_HTML_STYLE_PROPERTIES = {
    "text-align", "vertical-align", "font-weight", "font-style", "color", "background-color",
    "white-space", "padding", "width", "min-width", "max-width",
}
_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif);base64,[A-Za-z0-9+/=\s]*$")


def _html_attribute(tag: str, attr: str, value: str) -> str | None:
    # Images may only be inline data: a remote src would be fetched without a click.
    if tag == "img" and attr == "src":
        return value if _DATA_IMAGE.match(value.strip()) else None
    if tag == "a" and attr == "href" and value.strip().lower().startswith("data:"):
        return None
    return value


def sanitize_html(html: str) -> str:
    return nh3.clean(
        html,
        tags=_HTML_TAGS,
        clean_content_tags={"script", "style"},
        attributes=_HTML_ATTRIBUTES,
        attribute_filter=_html_attribute,
        url_schemes={"http", "https", "mailto", "data"},
        filter_style_properties=_HTML_STYLE_PROPERTIES,
    )


# -- Markdown ------------------------------------------------------------------------------------

# Inline links/images `[t](dest)` / `![t](dest)` and reference definitions `[t]: dest`.
_MD_INLINE_LINK = re.compile(r"(\])\(\s*(<[^>\n]*>|[^)\s]*)")
_MD_REFERENCE = re.compile(r"^( {0,3}\[[^\]\n]+\]:[ \t]*)(<[^>\n]*>|\S+)", re.MULTILINE)
_SAFE_LINK = re.compile(r"^(https?://|mailto:|#|[^:&%\\]*$)", re.IGNORECASE)
# A destination with no scheme: relative to the notebook, served by the Jupyter server itself.
_LOCAL_IMAGE = re.compile(r"^[^:&%\\]*$")


def _safe_destination(dest: str, image: bool) -> bool:
    dest = dest.strip("<>").strip()
    if image:
        return bool(_LOCAL_IMAGE.match(dest) or _DATA_IMAGE.match(dest))
    return bool(_SAFE_LINK.match(dest))


def _opens_image(text: str, close: int) -> bool:
    """Whether the `]` at `close` ends the text of an image (`![...]`), matching nested brackets."""
    depth = 0
    for i in range(close, -1, -1):
        if text[i] == "]":
            depth += 1
        elif text[i] == "[":
            depth -= 1
            if depth == 0:
                return i > 0 and text[i - 1] == "!"
    return True  # unbalanced: treat as an image, the stricter case


def sanitize_markdown(text: str) -> str:
    """Markdown without raw HTML: `<` is escaped, unsafe link and image destinations become `#`.

    Entities (`&#106;avascript:`) and percent-encoding in a destination count as unsafe, so an
    encoded scheme cannot slip past the check.
    """
    text = text.replace("<", "&lt;")

    def inline(m: re.Match) -> str:
        image = _opens_image(m.string, m.start())
        dest = m.group(2).replace("&lt;", "<")
        if _safe_destination(dest, image):
            return m.group(0)
        return "](#"

    def reference(m: re.Match) -> str:
        # A reference may serve an image, which would load by itself: only destinations safe for
        # images (local, inline data) or inert for them (#anchor, mailto:) are kept.
        dest = m.group(2).replace("&lt;", "<").strip("<>").strip()
        if _safe_destination(dest, image=True) or re.match(r"^(#|mailto:)", dest, re.IGNORECASE):
            return m.group(0)
        return m.group(1) + "#"

    text = _MD_INLINE_LINK.sub(inline, text)
    return _MD_REFERENCE.sub(reference, text)


# -- Plotly --------------------------------------------------------------------------------------

_PLOTLY_TOP_KEYS = {"data", "layout", "config", "frames"}
# Config keys that only change how the chart behaves on the page; the rest (plotlyServerURL,
# topojsonURL, mapbox tokens, showLink) make the browser talk to remote servers.
_PLOTLY_SAFE_CONFIG = {
    "responsive", "displayModeBar", "displaylogo", "scrollZoom", "staticPlot", "editable",
    "doubleClick", "showTips", "showAxisDragHandles", "modeBarButtonsToRemove", "locale",
    "toImageButtonOptions", "typesetMath",
}
_UNSAFE_URL = re.compile(r"^\s*([a-z][a-z0-9+.-]*:|//)", re.IGNORECASE)
_PLOTLY_URL_KEYS = {"source", "src", "url", "href", "style"}
_MAX_DEPTH = 64


class OutputRejected(ValueError):
    """A MIME value that cannot be published safely."""


def _check_plotly_value(value, depth: int, key: str = "") -> None:
    if depth > _MAX_DEPTH:
        raise OutputRejected("figure nested too deeply")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise OutputRejected("figure keys must be strings")
            _check_plotly_value(v, depth + 1, k)
    elif isinstance(value, list):
        for v in value:
            _check_plotly_value(v, depth + 1, key)
    elif isinstance(value, str):
        # Layout images (`source`), map styles and URL fields would be fetched by the browser.
        if key in _PLOTLY_URL_KEYS and _UNSAFE_URL.match(value) and not _DATA_IMAGE.match(value.strip()):
            raise OutputRejected(f"figure field {key!r} points outside the page")
        if "javascript:" in value.replace(" ", "").lower():
            raise OutputRejected("figure text carries a javascript: URL")
    elif value is None or isinstance(value, (bool, int, float)):
        return
    else:
        raise OutputRejected(f"figure holds a non-JSON value of type {type(value).__name__}")


def validate_plotly(fig) -> dict:
    """A clean copy of a Plotly figure dict, or OutputRejected."""
    if not isinstance(fig, dict) or not isinstance(fig.get("data", None), list):
        raise OutputRejected("a Plotly figure needs a 'data' list")
    extra = set(fig) - _PLOTLY_TOP_KEYS
    if extra:
        raise OutputRejected(f"unexpected figure keys: {', '.join(sorted(map(str, extra)))}")
    if not all(isinstance(trace, dict) for trace in fig["data"]):
        raise OutputRejected("every trace must be an object")
    if "layout" in fig and not isinstance(fig["layout"], dict):
        raise OutputRejected("'layout' must be an object")
    clean = {k: v for k, v in fig.items() if k != "config"}
    _check_plotly_value(clean, 0)
    if isinstance(fig.get("config"), dict):
        clean["config"] = {k: v for k, v in fig["config"].items() if k in _PLOTLY_SAFE_CONFIG}
        _check_plotly_value(clean["config"], 0)
    return clean


# -- Images and JSON ------------------------------------------------------------------------------

_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]*$")


def validate_image(value) -> str:
    if not isinstance(value, str) or not _BASE64.match(value):
        raise OutputRejected("an image must be base64 text")
    try:
        base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError):
        raise OutputRejected("an image must be valid base64") from None
    return value


def validate_json(value):
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise OutputRejected(f"not JSON data: {exc}") from None
    return value


def _filter_value(mime: str, value):
    if mime == "text/html":
        if not isinstance(value, str):
            raise OutputRejected("text/html must be a string")
        return sanitize_html(value)
    if mime == "text/markdown":
        if not isinstance(value, str):
            raise OutputRejected("text/markdown must be a string")
        return sanitize_markdown(value)
    if mime == PLOTLY_MIME:
        return validate_plotly(value)
    if mime in ("image/png", "image/jpeg"):
        return validate_image(value)
    if mime.startswith("text/"):
        if not isinstance(value, str):
            raise OutputRejected(f"{mime} must be a string")
        return value
    # application/json and any type an operator added: JSON data, passed as it is.
    return validate_json(value)


def _size(value) -> int:
    if isinstance(value, str):
        return len(value.encode("utf-8", "replace"))
    return len(json.dumps(value, allow_nan=True, default=str))


def _fmt_bytes(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    if n >= 1_000:
        return f"{n / 1_000:.1f} kB"
    return f"{n} bytes"


def _cut_to_bytes(text: str, limit: int, *, tail: bool = False) -> str:
    raw = text.encode("utf-8", "replace")
    if len(raw) <= limit:
        return text
    part = raw[-limit:] if tail else raw[:limit]
    return part.decode("utf-8", "ignore")


# -- The per-cell budget -----------------------------------------------------------------------------


class CellOutput:
    """The output budget of one cell: call ``stream``/``bundle``/``error`` as events arrive and
    ``finish`` at the end. Each returns what to publish."""

    TRACEBACK_BYTES = 64_000

    def __init__(self, allowlist, text_bytes: int, rich_bytes: int):
        self.allowlist = tuple(allowlist)
        self.text_bytes = max(int(text_bytes), 200)
        self.rich_bytes = max(int(rich_bytes), 0)
        # Streams publish live up to the head; the last `tail_bytes` are held back until finish.
        self.tail_bytes = self.text_bytes // 4
        self.head_bytes = self.text_bytes - self.tail_bytes
        self.text_used = 0
        self.rich_used = 0
        self.cut_bytes = 0
        self.held: deque[list] = deque()  # [name, text] chunks of the tail, oldest first
        self.held_bytes = 0
        self.filtered: list[dict] = []    # MIME values removed, for the reply metadata

    @property
    def truncated(self) -> bool:
        return self.cut_bytes > 0

    def stream(self, name: str, text: str) -> list[tuple[str, str]]:
        if name not in ("stdout", "stderr") or not isinstance(text, str):
            return []
        out = []
        room = self.head_bytes - self.text_used
        if room > 0:
            head = _cut_to_bytes(text, room)
            self.text_used += _size(head)
            out.append((name, head))
            text = text[len(head):]
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
        out = []
        if self.cut_bytes:
            out.append(("stderr", f"\n[... output truncated: {_fmt_bytes(self.cut_bytes)} cut "
                                  f"(the cell's text limit is {_fmt_bytes(self.text_bytes)}) ...]\n"))
        out.extend((name, text) for name, text in self.held)
        self.held.clear()
        self.held_bytes = 0
        return out

    def bundle(self, data: dict, metadata: dict | None = None) -> tuple[dict, dict] | None:
        """Filtered (data, metadata), or None when nothing publishable is left."""
        if not isinstance(data, dict):
            return None
        clean: dict = {}
        for mime, value in data.items():
            if not isinstance(mime, str) or mime not in self.allowlist:
                self.filtered.append({"mime": str(mime), "reason": "not in the MIME allowlist"})
                continue
            try:
                clean[mime] = _filter_value(mime, value)
            except OutputRejected as exc:
                self.filtered.append({"mime": mime, "reason": str(exc)})
        if not clean:
            return None
        text = clean.get("text/plain")
        rich = {k: v for k, v in clean.items() if k != "text/plain"}
        rich_size = sum(_size(v) for v in rich.values())
        if rich and self.rich_used + rich_size > self.rich_bytes:
            self.cut_bytes += rich_size
            for mime in rich:
                self.filtered.append({"mime": mime, "reason": "over the cell's display limit"})
            note = (f"[display of {_fmt_bytes(rich_size)} omitted: over the cell's display limit "
                    f"of {_fmt_bytes(self.rich_bytes)}]")
            clean = {"text/plain": (text + "\n" if isinstance(text, str) else "") + note}
            text = clean["text/plain"]
            rich = {}
        self.rich_used += rich_size if rich else 0
        if isinstance(text, str):
            room = max(self.text_bytes - self.text_used, 0)
            size = _size(text)
            if size > room:
                keep = max(room - 120, 0)
                head = _cut_to_bytes(text, keep // 2 + keep % 2)
                tail = _cut_to_bytes(text, keep // 2, tail=True) if keep else ""
                self.cut_bytes += size - _size(head) - _size(tail)
                clean["text/plain"] = f"{head}\n[... {_fmt_bytes(size - _size(head) - _size(tail))} cut ...]\n{tail}"
            self.text_used += _size(clean["text/plain"])
        return clean, _filter_metadata(metadata, clean)

    def error(self, ename: str, evalue: str, traceback: list) -> dict:
        """An error's fields, capped so a huge message cannot flood the front end."""
        ename = _cut_to_bytes(str(ename), 200)
        evalue = _cut_to_bytes(str(evalue), 4_000)
        lines, used = [], 0
        for line in traceback or []:
            line = str(line)
            size = _size(line)
            if used + size > self.TRACEBACK_BYTES:
                lines.append(f"[... {len(traceback) - len(lines)} traceback lines cut ...]")
                break
            lines.append(line)
            used += size
        return {"ename": ename, "evalue": evalue, "traceback": lines}


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
                 rich_bytes: int = 20_000_000):
        self.allowlist = tuple(allowlist)
        self.text_bytes = text_bytes
        self.rich_bytes = rich_bytes

    def cell(self, text_bytes: int | None = None) -> CellOutput:
        limit = self.text_bytes if text_bytes is None else min(text_bytes, self.text_bytes)
        return CellOutput(self.allowlist, limit, self.rich_bytes)
