"""The browser canaries' oracle: what in a published MIME bundle a trusted JupyterLab output would run
or fetch. The kernel's output filter is a positive schema; this is an independent negative check of its
result (script-bearing tags, event handlers, links and sources that are not inline images or fragments,
MIME types the front end executes, plotly strings with link markup or remote sources)."""
from __future__ import annotations

import re
from html.parser import HTMLParser

# Tags that run script, load a document or a resource, or change the page around the output.
_ACTIVE_TAGS = frozenset({
    "script", "iframe", "frame", "frameset", "object", "embed", "applet", "style", "link", "meta", "base",
    "form", "input", "button", "textarea", "select", "svg", "math", "template", "noscript", "video", "audio",
    "source", "track", "portal", "xml"})
_URL_ATTRS = frozenset({"href", "src", "action", "formaction", "srcset", "background", "poster", "xlink:href",
                        "data", "codebase", "ping", "lowsrc", "dynsrc", "cite", "longdesc", "usemap"})
_PUBLISHABLE = frozenset({"text/plain", "text/html", "image/png", "image/jpeg", "application/json",
                          "application/vnd.plotly.v1+json"})
_PLOTLY_URL_KEYS = frozenset({"source", "src", "href", "url", "tiles", "style", "geojson", "glyphs", "sprite",
                              "topojsonURL", "topojson"})
_SPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]+")


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in _ACTIVE_TAGS:
            self.problems.append(f"<{tag}>")
        for name, value in attrs:
            value = _SPACE_OR_CONTROL.sub("", value or "").lower()
            if name.startswith("on"):
                self.problems.append(f"<{tag} {name}=...>")
            elif name == "src" and not value.startswith(("data:image/png", "data:image/jpeg", "data:image/gif")):
                self.problems.append(f"<{tag} src={value[:40]!r}>")
            elif name == "href" and not value.startswith("#"):
                self.problems.append(f"<{tag} href={value[:40]!r}>")
            elif name in _URL_ATTRS - {"src", "href"}:
                self.problems.append(f"<{tag} {name}=...>")

    handle_startendtag = handle_starttag


def html_problems(html: str) -> list[str]:
    parser = _Tags()
    parser.feed(html)
    parser.close()
    return parser.problems


def _strings(value, key=None):
    """(key, string) for every string in a JSON value, iteratively."""
    stack = [(key, value)]
    while stack:
        k, v = stack.pop()
        if isinstance(v, str):
            yield k, v
        elif isinstance(v, dict):
            stack.extend(v.items())
        elif isinstance(v, list):
            stack.extend((k, item) for item in v)


def plotly_problems(figure) -> list[str]:
    problems = []
    for key, text in _strings(figure):
        flat = _SPACE_OR_CONTROL.sub("", text).lower()
        if "javascript:" in flat or "href=" in flat or re.search(r"<\s*script", flat):
            problems.append(f"{key}: {text[:40]!r}")
        elif key in _PLOTLY_URL_KEYS and ("//" in flat or flat.startswith("http")) \
                and not flat.startswith("data:"):
            problems.append(f"{key}: {text[:40]!r}")
    return problems


def active_content(data: dict) -> list[str]:
    """What in one published bundle a browser would run or fetch (empty when nothing)."""
    problems = [f"{mime} published" for mime in data if mime not in _PUBLISHABLE]
    html = data.get("text/html")
    if isinstance(html, str):
        problems += html_problems(html)
    elif html is not None:
        problems.append("text/html is not a string")
    figure = data.get("application/vnd.plotly.v1+json")
    if figure is not None:
        problems += plotly_problems(figure)
    return problems
