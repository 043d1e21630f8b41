"""Listing the session's working directory from the trusted side, without following any link.

Cells have no directory listing (os, pathlib and glob are never granted), so `listdir` reads the
directory here, in the client's process. The worker may have planted symlinks or swapped directories,
so every step opens one name below a directory descriptor with O_NOFOLLOW: a symlink on the way is
refused, never followed, and entries are described with lstat (a link is listed as a link).
"""
from __future__ import annotations

import os

from .results import Denial, FileInfo, SandboxDenied

MAX_ENTRIES = 10_000


def list_directory(root: str, relative: str, *, max_entries: int = MAX_ENTRIES) -> list[FileInfo]:
    parts = [p for p in relative.replace("\\", "/").split("/") if p not in ("", ".")]
    if relative.startswith("/") or ".." in parts:
        raise _refused(relative, "listing takes a relative path with no '..'")
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(root, flags)
    try:
        for part in parts:
            try:
                inner = os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if os.path.islink(os.path.join(f"/proc/self/fd/{fd}", part)):
                    raise _refused(relative, "listing follows no symbolic link") from None
                raise exc
            os.close(fd)
            fd = inner
        entries = []
        with os.scandir(fd) as it:
            for entry in it:
                if len(entries) >= max_entries:
                    break
                info = entry.stat(follow_symlinks=False)
                kind = ("symlink" if entry.is_symlink() else "dir" if entry.is_dir(follow_symlinks=False)
                        else "file" if entry.is_file(follow_symlinks=False) else "other")
                entries.append(FileInfo(entry.name, kind, info.st_size if kind == "file" else 0))
        return sorted(entries, key=lambda e: e.name)
    finally:
        os.close(fd)


def _refused(path: str, rule: str) -> SandboxDenied:
    message = f"listing '{path}' is refused: {rule}"
    return SandboxDenied(message, Denial(kind="file", target=path, rule=rule, line=None, policy=None,
                                         hint="list a directory inside the working directory", message=message,
                                         by="client"))
