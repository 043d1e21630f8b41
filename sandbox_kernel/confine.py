"""Files and network for sandboxed code and the granted libraries it calls. SECURITY CORE.

A cell's own ``open`` is the confined one below. Granted libraries open files themselves
(``pd.read_csv`` -> ``open``; ``np.save`` -> ``open``; pathlib -> ``io.open``) and reach the network
through ``socket``; so while a cell runs, those process-wide entry points dispatch on a ContextVar: set in
the cell's context, they confine; in every other thread and context (the kernel's own machinery) they are
the originals. The worker level ``kernel`` adds Landlock and seccomp underneath, which do not depend on
Python at all.
"""
from __future__ import annotations

import _io
import builtins
import contextvars
import io
import os
import socket
import sys

from .denials import FileDenied, NetworkDenied

_FS: contextvars.ContextVar = contextvars.ContextVar("sandbox_fs", default=None)
_NET_DENIED: contextvars.ContextVar = contextvars.ContextVar("sandbox_net_denied", default=False)


def _read_only_roots() -> tuple[str, ...]:
    """Where granted libraries read their own data (zone info, templates, package resources):
    the Python installation and the time-zone database, never the kernel's working directory or home."""
    import site
    import sysconfig

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            roots.add(sysconfig.get_path(key))
        except KeyError:
            pass
    try:
        roots.update(site.getsitepackages())
    except AttributeError:
        pass
    for entry in sys.path:
        if entry and os.path.basename(entry.rstrip(os.sep)) in ("site-packages", "dist-packages"):
            roots.add(entry)
    roots.update(("/usr/share/zoneinfo", "/usr/lib/python3/dist-packages"))
    return tuple(sorted({os.path.realpath(r) for r in roots if r}))


_READ_ONLY_MODES = frozenset("rbt")


class ConfinedFiles:
    """Paths resolve inside ``root``; anything that leaves it (.., absolute, symlinks) is refused."""

    def __init__(self, root: str, deny):
        self.root = os.path.realpath(root)
        self._deny = deny   # raises the denial (records it, adds the line)

    def library_open(self, file, mode="r", *args, **kwargs):
        """A granted library's own open(): the working directory, plus read-only access to the
        Python installation (pandas reads its time zones, plotly its templates)."""
        if isinstance(file, (str, bytes, os.PathLike)) and isinstance(mode, str) and set(mode) <= _READ_ONLY_MODES:
            full = _installation_path(file)
            if full is not None:
                return _ORIGINAL_OPEN(full, mode, *args, **kwargs)
        return self.open(file, mode, *args, **kwargs)

    def library_resolve_read(self, path) -> str:
        full = _installation_path(path) if isinstance(path, (str, bytes, os.PathLike)) else None
        return full if full is not None else self.resolve(path)

    def resolve(self, path) -> str:
        if isinstance(path, int) or isinstance(path, bool):
            self._deny(FileDenied(f"file descriptor {path}", "only paths inside the working directory can be opened"))
        try:
            raw = os.fspath(path)
        except TypeError:
            raise TypeError(f"expected str, bytes or os.PathLike object, not {type(path).__name__}") from None
        if isinstance(raw, bytes):
            raw = os.fsdecode(raw)
        if "\0" in raw:
            raise ValueError("embedded null byte")
        shown = raw if not os.path.isabs(raw) else "an absolute path"
        full = os.path.realpath(os.path.join(self.root, raw))
        if full != self.root and not full.startswith(self.root + os.sep):
            self._deny(FileDenied(shown, "paths must stay inside the sandbox working directory",
                                  hint="use a relative path such as 'data.csv'"))
        return full

    def open(self, file, mode="r", *args, **kwargs):
        if kwargs.get("opener") is not None:
            self._deny(FileDenied("a custom opener", "custom openers are not allowed"))
        return _ORIGINAL_OPEN(self.resolve(file), mode, *args, **kwargs)


def _installation_path(path) -> str | None:
    raw = os.fsdecode(os.fspath(path))
    if not os.path.isabs(raw):
        return None
    full = os.path.realpath(raw)
    for root in _READ_ONLY:
        if full == root or full.startswith(root + os.sep):
            return full
    return None


class NoFiles:
    """The policy has files off: every path is refused, by the cell and by the libraries it calls."""

    def __init__(self, deny):
        self._deny = deny

    def resolve(self, path):
        shown = path if isinstance(path, str) and not os.path.isabs(path) else "a file"
        self._deny(FileDenied(shown, "this policy does not allow files",
                              hint="select a policy with files enabled"))

    def open(self, file, mode="r", *args, **kwargs):
        self.resolve(file)

    def library_open(self, file, mode="r", *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and isinstance(mode, str) and set(mode) <= _READ_ONLY_MODES:
            full = _installation_path(file)
            if full is not None:
                return _ORIGINAL_OPEN(full, mode, *args, **kwargs)
        self.resolve(file)

    def library_resolve_read(self, path) -> str:
        full = _installation_path(path) if isinstance(path, (str, bytes, os.PathLike)) else None
        return full if full is not None else self.resolve(path)


# -- process-wide entry points, dispatching on the cell's context --------------------------------

_ORIGINAL_OPEN = _io.open
_ORIGINAL_OS = {name: getattr(os, name) for name in
                ("open", "remove", "unlink", "rename", "replace", "mkdir", "makedirs", "rmdir",
                 "listdir", "scandir", "truncate", "chmod", "symlink", "link", "utime")}
_ORIGINAL_SOCKET = {name: getattr(socket.socket, name) for name in ("connect", "connect_ex", "sendto", "bind")}
_ORIGINAL_GETADDRINFO = socket.getaddrinfo
_installed = False
_READ_ONLY = _read_only_roots()


def _guarded_open(file, mode="r", *args, **kwargs):
    fs = _FS.get()
    if fs is None:
        return _ORIGINAL_OPEN(file, mode, *args, **kwargs)
    return fs.library_open(file, mode, *args, **kwargs)


def _guard_os(name):
    original = _ORIGINAL_OS[name]
    two_paths = name in ("rename", "replace", "symlink", "link")

    def guarded(*args, **kwargs):
        fs = _FS.get()
        if fs is None:
            return original(*args, **kwargs)
        resolve = fs.library_resolve_read if name in ("listdir", "scandir") else fs.resolve
        args = list(args)
        if not args and name in ("listdir", "scandir"):
            args = ["."]
        for i in range(min(2 if two_paths else 1, len(args))):
            args[i] = resolve("." if args[i] is None else args[i])
        kwargs.pop("dir_fd", None)
        return original(*args, **kwargs)
    guarded.__name__ = name
    return guarded


def _guard_socket(name):
    original = _ORIGINAL_SOCKET[name]

    def guarded(self, *args, **kwargs):
        if _NET_DENIED.get():
            _raise_net(args[0] if args else None)
        return original(self, *args, **kwargs)
    guarded.__name__ = name
    return guarded


def _guarded_getaddrinfo(host, *args, **kwargs):
    if _NET_DENIED.get():
        _raise_net((host,))
    return _ORIGINAL_GETADDRINFO(host, *args, **kwargs)


_net_deny = None


def _raise_net(address):
    host = address[0] if isinstance(address, tuple) and address else address
    exc = NetworkDenied(f"'{host}'" if isinstance(host, str) else "a network address",
                        "this policy does not allow network access")
    if _net_deny is not None:
        _net_deny(exc)
    raise exc


def install() -> None:
    """Patch the process-wide entry points once. Outside a cell they behave exactly as before."""
    global _installed
    if _installed:
        return
    builtins.open = _guarded_open
    io.open = _guarded_open
    for name in _ORIGINAL_OS:
        setattr(os, name, _guard_os(name))
    for name in _ORIGINAL_SOCKET:
        setattr(socket.socket, name, _guard_socket(name))
    socket.getaddrinfo = _guarded_getaddrinfo
    _installed = True


def enter(files, network_allowed: bool, net_deny):
    """Confine the current context; returns tokens for leave()."""
    global _net_deny
    _net_deny = net_deny
    return _FS.set(files), _NET_DENIED.set(not network_allowed)


def leave(tokens) -> None:
    fs_token, net_token = tokens
    _FS.reset(fs_token)
    _NET_DENIED.reset(net_token)
