"""The sandboxed cells behind put/get/upload/download: data in and out as text, never code.

Each operation is an ordinary cell that runs under the session's policy, so the policy's rules decide it
(file paths through the same confinement and, at level ``kernel``, Landlock; modules through the same
gates) and a refusal is the same denial a cell of the agent's would get. What the client puts into a
cell is only ever a Python *string literal* made by ``repr()`` of JSON, table-JSON or base64 text: the
sandbox parses it with its own granted modules (``json``, ``pandas.read_json``, ``base64``), and
nothing the caller passes is spliced in as code. Names are plain identifiers, checked here.

What comes back is printed between a random marker (the ``nonce``) and parsed by the client as
untrusted data: a cut or forged frame is refused, never evaluated.
"""
from __future__ import annotations

import keyword
import re
import secrets

_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,99}\Z")
# Helper names the cells bind for a moment (and delete): a name an agent is unlikely to use.
HELPER = "sandbox_session_"


def check_name(name: object) -> str:
    """A namespace name for put/get: an ASCII identifier, not a keyword, not private."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name) or keyword.iskeyword(name):
        raise ValueError(f"{name!r} is not a plain identifier (letters, digits and '_', starting with a letter, "
                         f"at most 100 characters, not a keyword)")
    if name.startswith(HELPER):
        raise ValueError(f"names starting with {HELPER!r} are used by the session's own cells")
    return name


def check_path(path: object) -> str:
    """A path for the sandbox to judge: text without NUL. Whether it stays inside the working directory
    is the sandbox's decision (the cell's own file rules), not a string check here."""
    if not isinstance(path, str) or not path or "\x00" in path or len(path) > 4096:
        raise ValueError(f"{path!r} is not a usable path (a non-empty string without NUL characters)")
    return path


def nonce() -> str:
    return "SBX" + secrets.token_hex(12)


def framed(text: str, marker: str) -> str | None:
    """The text between two markers, if the output is exactly one whole frame."""
    body = text[:-1] if text.endswith("\n") else text
    if len(body) >= 2 * len(marker) and body.startswith(marker) and body.endswith(marker):
        inner = body[len(marker):-len(marker)]
        if marker not in inner:
            return inner
    return None


# -- put -------------------------------------------------------------------------------------------

def put_json(name: str, parts: list[str]) -> list[str]:
    """Cells that bind `name` to json.loads of the text in `parts` (joined)."""
    return _put(name, parts, "import json\n    return json.loads(text)")


def put_frame(name: str, parts: list[str]) -> list[str]:
    """Cells that bind `name` to a DataFrame read from table-JSON (pandas' own schema'd format)."""
    return _put(name, parts, "import io\n    import pandas\n    return pandas.read_json(io.StringIO(text), "
                             "orient='table')")


def _put(name: str, parts: list[str], parse: str) -> list[str]:
    check_name(name)
    store = f"{HELPER}parts"
    cells = [f"{store} = []\n"]
    cells += [f"{store}.append({part!r})\n" for part in parts]
    cells.append(f"def {HELPER}put(text):\n    {parse}\n"
                 f"{name} = {HELPER}put(''.join({store}))\n"
                 f"del {HELPER}put, {store}\n")
    if len(parts) == 1:  # one cell is enough
        return [f"{store} = [{parts[0]!r}]\n" + cells[-1]]
    return cells


# -- get -------------------------------------------------------------------------------------------

BLOB = f"{HELPER}blob"


def get_setup(name: str, marker: str) -> str:
    """Serialise `name` in the sandbox (JSON, or table-JSON for a DataFrame) into an ASCII text the
    client then reads in slices; prints the text's length and SHA-256 in a frame, so the client can
    tell that no byte changed on the way (the output filter shows control characters as symbols, so
    DEL, the one control character JSON leaves raw, is escaped first)."""
    check_name(name)
    return (f"def {HELPER}get(value):\n"
            f"    import json\n"
            f"    try:\n"
            f"        text = 'json:' + json.dumps(value, ensure_ascii=True)\n"
            f"    except (TypeError, ValueError):\n"
            f"        to_json = value.to_json\n"
            f"        text = 'frame:' + to_json(orient='table', date_format='iso', force_ascii=True)\n"
            f"    return text.replace(chr(127), '\\\\u007f')\n"
            f"{BLOB} = {HELPER}get({name})\n"
            f"del {HELPER}get\n"
            f"def {HELPER}digest():\n"
            f"    import hashlib\n"
            f"    return hashlib.sha256({BLOB}.encode('ascii')).hexdigest()\n"
            f"print({marker!r} + str(len({BLOB})) + ':' + {HELPER}digest() + {marker!r})\n"
            f"del {HELPER}digest\n")


def get_slice(start: int, stop: int, marker: str) -> str:
    return f"print({marker!r} + {BLOB}[{int(start)}:{int(stop)}] + {marker!r})\n"


def get_cleanup() -> str:
    return f"{BLOB} = None\ndel {BLOB}\n"


# -- files -----------------------------------------------------------------------------------------

def write_chunk(path: str, data_b64: str, *, append: bool) -> str:
    check_path(path)
    mode = "ab" if append else "wb"
    return (f"def {HELPER}write():\n"
            f"    import base64\n"
            f"    with open({path!r}, {mode!r}) as fh:\n"
            f"        fh.write(base64.b64decode({data_b64!r}))\n"
            f"{HELPER}write()\n"
            f"del {HELPER}write\n")


def read_chunk(path: str, offset: int, size: int, marker: str) -> str:
    check_path(path)
    return (f"def {HELPER}read():\n"
            f"    import base64\n"
            f"    with open({path!r}, 'rb') as fh:\n"
            f"        fh.seek({int(offset)})\n"
            f"        return base64.b64encode(fh.read({int(size)})).decode('ascii')\n"
            f"print({marker!r} + {HELPER}read() + {marker!r})\n"
            f"del {HELPER}read\n")


def probe_directory(path: str, marker: str) -> str:
    """Asks the sandbox whether `path` is a directory it may read: opening it is refused (a denial)
    when the policy's file rules keep it out, and fails with IsADirectoryError when it is one."""
    check_path(path)
    return (f"def {HELPER}probe():\n"
            f"    try:\n"
            f"        open({path!r}, 'rb').close()\n"
            f"    except IsADirectoryError:\n"
            f"        return 'dir'\n"
            f"    return 'file'\n"
            f"print({marker!r} + {HELPER}probe() + {marker!r})\n"
            f"del {HELPER}probe\n")
