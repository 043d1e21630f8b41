"""IPython.display as the sandbox provides it.

This file is never imported by the host. The engine reads it as text and runs it the way it runs a cell
(parsed, validated, rewritten, gated, under the running cell's limits) the first time a cell imports
IPython, IPython.display or IPython.core.display. Everything here is therefore exactly as trusted as a
cell: the classes are ordinary sandboxed classes with `_repr_*_` methods, and what they produce passes
the kernel's output filter like any other display. Nothing here fetches a URL or loads a page: a cell's
output never loads remote content, so `Image(url=...)`, `IFrame(...)` and `YouTubeVideo(...)` show a
line of text naming what was not loaded. `Javascript` never runs.

The engine puts three names in this file's globals before it runs: `_display` (the sandbox's display(),
a builtin of every cell), `_show(obj, display_id, update)` (a display with an id, or the replacement of an
earlier one) and `_clear(wait)` (clears the cell's output).
"""

_NOT_LOADED = "not loaded: a cell's output never loads remote content"


def _read(filename, binary):
    """The bytes or text of a file: the cell's own open(), confined to the working directory (and refused, with
    the policy's reason, when the policy has no files)."""
    with open(filename, "rb" if binary else "r") as f:
        return f.read()


class DisplayObject:
    """The base of the display classes: data given directly, read from a file, or named by a URL."""

    def __init__(self, data=None, url=None, filename=None, metadata=None):
        if data is not None and isinstance(data, str):
            if data.startswith("http://") or data.startswith("https://"):
                url, data = data, None
        self.data = data
        self.url = url
        self.filename = filename
        self.metadata = metadata
        if filename is not None and data is None:
            self.data = _read(filename, self._binary)

    _binary = False

    def _not_loaded(self):
        return f"<{type(self).__name__} of {self.url}: {_NOT_LOADED}>"

    def __repr__(self):
        if self.data is None and self.url is not None:
            return self._not_loaded()
        return f"<{type(self).__name__} object>"


class TextDisplayObject(DisplayObject):
    """Display classes whose data is text."""

    def __init__(self, data=None, url=None, filename=None, metadata=None):
        super().__init__(data, url, filename, metadata)
        if self.data is not None and not isinstance(self.data, str):
            raise TypeError(f"{type(self).__name__} expects text, not {type(self.data).__name__}")

    def _text(self):
        return self.data if self.data is not None else None


class Pretty(TextDisplayObject):
    def __repr__(self):
        return self.data if self.data is not None else super().__repr__()


class HTML(TextDisplayObject):
    def _repr_html_(self):
        return self._text()


class Markdown(TextDisplayObject):
    def _repr_markdown_(self):
        return self._text()


class Latex(TextDisplayObject):
    """The kernel does not typeset LaTeX: the source is shown as text."""

    def __repr__(self):
        return self.data if self.data is not None else super().__repr__()


class Math(Latex):
    def __repr__(self):
        if self.data is None:
            return super().__repr__()
        text = self.data.strip("$")
        return f"$${text}$$"


class SVG(DisplayObject):
    """SVG can carry script and remote loads; the kernel cannot rebuild it, so its source is not shown."""

    def __repr__(self):
        return "<SVG image: not shown, SVG is not an output the sandbox can publish safely>"


class Code(TextDisplayObject):
    def __init__(self, data=None, url=None, filename=None, language=None):
        super().__init__(data, url, filename)
        self.language = language

    def __repr__(self):
        return self.data if self.data is not None else super().__repr__()


class JSON(DisplayObject):
    def __init__(self, data=None, url=None, filename=None, expanded=False, metadata=None, root="root", **kwargs):
        super().__init__(data, url, filename, metadata)
        self.expanded = expanded
        self.root = root

    def _repr_json_(self):
        return self.data

    def __repr__(self):
        if self.data is None:
            return super().__repr__()
        return repr(self.data)


class Javascript(TextDisplayObject):
    """Never run: the sandbox's output cannot run script in the browser."""

    def __init__(self, data=None, url=None, filename=None, lib=None, css=None):
        super().__init__(data, url, filename)

    def __repr__(self):
        return "<Javascript: not run, a cell's output never runs script in the browser>"


class Image(DisplayObject):
    """PNG and JPEG data, from bytes or a file in the working directory; the kernel checks and re-encodes it."""

    _binary = True

    def __init__(self, data=None, url=None, filename=None, format=None, embed=None, width=None, height=None,
                 retina=False, unconfined=False, metadata=None, alt=None):
        if isinstance(data, str) and not (data.startswith("http://") or data.startswith("https://")):
            filename, data = data, None
        super().__init__(data, url, filename, metadata)
        if format is None and self.filename is not None:
            format = "jpeg" if self.filename.lower().endswith((".jpg", ".jpeg")) else "png"
        if format is None and isinstance(self.data, (bytes, bytearray)):
            format = "jpeg" if bytes(self.data[:3]) == b"\xff\xd8\xff" else "png"
        self.format = "jpeg" if format == "jpg" else format
        self.width = width
        self.height = height
        self.alt = alt

    def _repr_png_(self):
        if self.format == "png" and self.data is not None:
            return self.data

    def _repr_jpeg_(self):
        if self.format == "jpeg" and self.data is not None:
            return self.data

    def __repr__(self):
        if self.data is None and self.url is not None:
            return self._not_loaded()
        return "<Image object>" if self.alt is None else f"<Image: {self.alt}>"


class IFrame:
    """An embedded page is remote content: the address is shown as text, the page is not loaded."""

    def __init__(self, src, width, height, extras=None, **kwargs):
        self.src = src
        self.width = width
        self.height = height
        self.params = kwargs

    def __repr__(self):
        return f"<IFrame of {self.src}: {_NOT_LOADED}>"


class YouTubeVideo(IFrame):
    def __init__(self, id, width=400, height=300, allow_autoplay=False, **kwargs):
        super().__init__(f"https://www.youtube.com/embed/{id}", width, height, **kwargs)
        self.id = id


class FileLink:
    """A link to a file of the working directory, shown as its path (links in output are not followed)."""

    def __init__(self, path, url_prefix="", result_html_prefix="", result_html_suffix="<br>"):
        self.path = path

    def __repr__(self):
        return str(self.path)


class _Bundle:
    """What display(raw=True) and publish_display_data show: a MIME bundle as given (the kernel filters it)."""

    def __init__(self, data):
        if not isinstance(data, dict):
            raise TypeError(f"a raw display is a dict of MIME type to value, not {type(data).__name__}")
        self.data = data

    def _repr_mimebundle_(self, include=None, exclude=None):
        return self.data


class DisplayHandle:
    """An output that later calls can replace (display(obj, display_id=True) returns one)."""

    _count = 0

    def __init__(self, display_id=None):
        if display_id is None:
            DisplayHandle._count += 1
            display_id = f"sandbox-display-{DisplayHandle._count}"
        self.display_id = str(display_id)

    def display(self, obj, **kwargs):
        _show(obj, self.display_id, False)

    def update(self, obj, **kwargs):
        _show(obj, self.display_id, True)

    def __repr__(self):
        return f"<DisplayHandle display_id={self.display_id}>"


def _shown(objs, raw):
    return [_Bundle(o) if raw and isinstance(o, dict) else o for o in objs]


def display(*objs, include=None, exclude=None, metadata=None, transient=None, display_id=None, raw=False,
            clear=False, **kwargs):
    """IPython's display(): each object shown as its richest output the kernel can publish."""
    if clear:
        _clear(True)
    if display_id is None:
        _display(*_shown(objs, raw))
        return None
    handle = display_id if isinstance(display_id, DisplayHandle) else \
        DisplayHandle(None if display_id is True else display_id)
    for obj in _shown(objs, raw):
        _show(obj, handle.display_id, False)
    return handle


def update_display(obj, *, display_id, **kwargs):
    _show(obj, display_id.display_id if isinstance(display_id, DisplayHandle) else str(display_id), True)


def clear_output(wait=False):
    """Clears the cell's output now, or (wait=True) when the next output arrives."""
    _clear(bool(wait))


def publish_display_data(data, metadata=None, *, transient=None, **kwargs):
    _display(_Bundle(data))


def _raw_display(kind):
    def show(*objs, raw=False, **kwargs):
        for obj in objs:
            _display(kind(obj) if raw else obj)
    return show


display_html = _raw_display(HTML)
display_markdown = _raw_display(Markdown)
display_latex = _raw_display(Latex)
display_json = _raw_display(JSON)
display_pretty = _raw_display(Pretty)
display_png = _raw_display(lambda data: Image(data, format="png"))
display_jpeg = _raw_display(lambda data: Image(data, format="jpeg"))
display_svg = _raw_display(SVG)
display_javascript = _raw_display(Javascript)


_EXPORTS = {"Code": Code, "DisplayHandle": DisplayHandle, "DisplayObject": DisplayObject, "FileLink": FileLink,
            "HTML": HTML, "IFrame": IFrame, "Image": Image, "JSON": JSON, "Javascript": Javascript, "Latex": Latex,
            "Markdown": Markdown, "Math": Math, "Pretty": Pretty, "SVG": SVG, "TextDisplayObject": TextDisplayObject,
            "YouTubeVideo": YouTubeVideo, "clear_output": clear_output, "display": display,
            "display_html": display_html, "display_javascript": display_javascript, "display_jpeg": display_jpeg,
            "display_json": display_json, "display_latex": display_latex, "display_markdown": display_markdown,
            "display_png": display_png, "display_pretty": display_pretty, "display_svg": display_svg,
            "publish_display_data": publish_display_data, "update_display": update_display}


class _Module:
    """What `import IPython.display` gives: an object holding the names above (a cell may change its copy)."""

    def __init__(self, name, names):
        self._name = name
        for key in names:
            setattr(self, key, names[key])

    def __repr__(self):
        return f"<module '{self._name}' (provided by the sandbox)>"


display_module = _Module("IPython.display", _EXPORTS)
ipython_module = _Module("IPython", {"display": display_module})
