"""Registers the "Sandboxed Python" kernelspec with Jupyter.

The template in ``sandbox_kernel/kernelspec/`` is copied to a temporary directory, its argv is given
the absolute path of this interpreter, and jupyter_client installs it for the user, an environment
(``--sys-prefix``) or a prefix. Operators may bake launch options (policy, ceiling, isolation) into
the argv so every kernel started from this spec uses them.
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import sys
import tempfile
import zlib
from importlib import resources

DEFAULT_NAME = "sandboxed-python"
DEFAULT_DISPLAY_NAME = "Sandboxed Python"


def kernel_argv(python: str = sys.executable, options: list[str] | None = None) -> list[str]:
    """How Jupyter launches the kernel. `-P` (3.11+) keeps the working directory, where sandboxed
    code may write files, off sys.path, so a cell cannot plant a module the next kernel imports."""
    if sys.version_info >= (3, 11):
        head = [python, "-P", "-m", "sandbox_kernel"]
    else:
        head = [python, "-c", "import sys; del sys.path[0]; from sandbox_kernel.__main__ import main; main()"]
    return head + ["-f", "{connection_file}"] + list(options or [])


def build_spec(directory: str, *, display_name: str = DEFAULT_DISPLAY_NAME,
               options: list[str] | None = None) -> dict:
    """Write kernel.json and the logos into `directory`; return the kernel.json content."""
    template = resources.files("sandbox_kernel") / "kernelspec"
    for name in ("logo-32x32.png", "logo-64x64.png"):
        with resources.as_file(template / name) as src:
            shutil.copy(src, os.path.join(directory, name))
    spec = json.loads((template / "kernel.json").read_text(encoding="utf-8"))
    spec["argv"] = kernel_argv(sys.executable, options)
    spec["display_name"] = display_name
    with open(os.path.join(directory, "kernel.json"), "w", encoding="utf-8") as fh:
        json.dump(spec, fh, indent=2)
    return spec


def install(*, user: bool = False, prefix: str | None = None, name: str = DEFAULT_NAME,
            display_name: str = DEFAULT_DISPLAY_NAME, options: list[str] | None = None) -> str:
    """Install the kernelspec; returns the directory it went to."""
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        build_spec(tmp, display_name=display_name, options=options)
        return KernelSpecManager().install_kernel_spec(tmp, kernel_name=name, user=user, prefix=prefix)


# -- Logos (generated once with make_logo_png and committed; kept here so they can be redrawn) -------


def make_logo_png(size: int) -> bytes:
    """A small RGBA PNG: a blue rounded square with a white keyhole, drawn with zlib and struct."""
    rows = []
    c = (size - 1) / 2
    for y in range(size):
        row = bytearray([0])  # filter type 0 for each scanline
        for x in range(size):
            dx, dy = abs(x - c), abs(y - c)
            corner = size * 0.18
            inside = not (dx > c - corner and dy > c - corner
                          and (dx - (c - corner)) ** 2 + (dy - (c - corner)) ** 2 > corner ** 2)
            hole = ((x - c) ** 2 + (y - c * 0.8) ** 2 <= (size * 0.14) ** 2
                    or (abs(x - c) <= size * 0.06 and c * 0.8 <= y <= c * 1.45))
            if not inside:
                row += bytes((0, 0, 0, 0))
            elif hole:
                row += bytes((255, 255, 255, 255))
            else:
                row += bytes((40, 90, 170, 255))
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"".join(rows), 9)) + chunk(b"IEND", b""))


if __name__ == "__main__":  # redraw the committed logos
    here = os.path.join(os.path.dirname(__file__), "kernelspec")
    for px in (32, 64):
        with open(os.path.join(here, f"logo-{px}x{px}.png"), "wb") as fh:
            fh.write(make_logo_png(px))
