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
import gc
import inspect
import io
import os
import re
import socket
import sys
import threading
import weakref

from .denials import FileDenied, NetworkDenied, OperationDenied
from .rewriter import CELL_FILENAME_PREFIX

_FS: contextvars.ContextVar = contextvars.ContextVar("sandbox_fs", default=None)
_NET_DENIED: contextvars.ContextVar = contextvars.ContextVar("sandbox_net_denied", default=False)


_RESOLVING = threading.local()


def _realpath(path) -> str:
    """realpath with the host's own lstat: our stat guard must not answer for our own checks (it
    would hide a symlink that leaves the working directory)."""
    if getattr(_RESOLVING, "active", False):
        return os.path.realpath(path)
    _RESOLVING.active = True
    try:
        return os.path.realpath(path)
    finally:
        _RESOLVING.active = False


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
    # time zones; and the cgroup limits numpy, pandas and BLAS read to size their thread pools
    roots.update(("/usr/share/zoneinfo", "/usr/lib/python3/dist-packages", "/sys/fs/cgroup"))
    # this package's own code (an editable install is outside site-packages): while a cell runs its thread
    # is confined, and the kernel's output filter, run on that thread, imports its modules lazily
    roots.add(os.path.dirname(os.path.abspath(__file__)))
    return tuple(sorted({_realpath(r) for r in roots if r}))


def _max_open_files() -> int:
    """A quarter of the process's descriptors, at most 256: the rest stay the kernel's."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 256
    return 256 if soft == getattr(resource, "RLIM_INFINITY", -1) else max(8, min(256, soft // 4))


_READ_ONLY_MODES = frozenset("rbt")
_OPENED: "weakref.WeakSet" = weakref.WeakSet()   # files opened for cells (their own open and libraries')


class ConfinedFiles:
    """Paths resolve inside ``root``; anything that leaves it (.., absolute, symlinks) is refused."""

    def __init__(self, root: str, deny):
        self.root = _realpath(root)
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

    def translate_probe(self, path) -> str | None:
        raw = os.fsdecode(os.fspath(path))
        full = _realpath(os.path.join(self.root, raw))
        if full == self.root or full.startswith(self.root + os.sep) or _installation_path(full) is not None:
            return full
        return None

    def check_path(self, path, writes: bool) -> None:
        """The audit hook's check of a path some code is about to open (relative to the process's
        working directory, as the OS will see it)."""
        raw = os.fsdecode(os.fspath(path))
        full = _realpath(raw)
        if full == self.root or full.startswith(self.root + os.sep):
            if writes:
                self._check_hidden(full, raw if not os.path.isabs(raw) else os.path.relpath(full, self.root))
            return
        if not writes and _installation_path(full) is not None:
            return
        if writes and _installation_path(full) is not None and full.endswith((".pyc", ".pyc.tmp")) or \
                writes and "__pycache__" in full and _installation_path(full) is not None:
            raise PermissionError("bytecode caches are not written from the sandbox")
        self._deny(FileDenied(raw if not os.path.isabs(raw) else "an absolute path",
                              "paths must stay inside the sandbox working directory"))

    def refuse_operation(self, event: str, why: str | None = None) -> None:
        self._deny(OperationDenied(event, why or "the sandbox does not start processes, load native code, "
                                                 "unpickle or change the process"))

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
        full = _realpath(os.path.join(self.root, raw))
        if full != self.root and not full.startswith(self.root + os.sep):
            self._deny(FileDenied(shown, "paths must stay inside the sandbox working directory",
                                  hint="use a relative path such as 'data.csv'"))
        return full

    def resolve_native(self, path, writes: bool) -> str:
        """A path a library hands to its own native code (route_native_file_io): the absolute path inside
        the working directory (reads may also name the installation), hidden segments refused for writes."""
        if not writes:
            return self.library_resolve_read(path)
        full = self.resolve(path)
        self._check_hidden(full, os.fsdecode(os.fspath(path)))
        return full

    def _check_hidden(self, full: str, shown: str) -> None:
        """Writes never go through a hidden segment (.ipython, .jupyter, .ssh, .bashrc, .git) or a
        bytecode cache, wherever the working directory is: those are read by programs outside the
        sandbox later (IPython startup files, shell profiles)."""
        rel = os.path.relpath(full, self.root)
        if any(part.startswith(".") and part not in (".", "..") or part == "__pycache__"
               for part in rel.split(os.sep)):
            self._deny(FileDenied(shown, "hidden files and folders cannot be written from the sandbox",
                                  hint="use a name that does not start with '.'"))

    def open(self, file, mode="r", *args, **kwargs):
        if kwargs.get("opener") is not None:
            self._deny(FileDenied("a custom opener", "custom openers are not allowed"))
        full = self.resolve(file)
        if isinstance(mode, str) and any(c in mode for c in "wax+"):
            self._check_hidden(full, os.fsdecode(os.fspath(file)) if not isinstance(file, int) else "?")
        cap = _max_open_files()
        if sum(1 for f in list(_OPENED) if not f.closed) >= cap:
            # descriptors are the process's: a cell holding them all would leave the kernel none
            self._deny(FileDenied(os.fsdecode(os.fspath(file)) if not isinstance(file, int) else "?",
                                  f"at most {cap} files may be open at once; close some first"))
        try:
            handle = _ORIGINAL_OPEN(full, mode, *args, **kwargs)
        except OSError as exc:
            _named_as_given(exc, full, file)
            raise
        _named_as_given(handle, full, file)
        try:
            _OPENED.add(handle)
        except TypeError:
            pass
        return handle


def _named_as_given(obj, full: str, given) -> None:
    """An error or an open file names the path as the cell wrote it, as in plain Python: the absolute
    path the sandbox opened says where the working directory lives on the host."""
    given = os.fspath(given)
    if isinstance(obj, OSError):
        if obj.filename == full:
            obj.filename = given
        return
    raw = getattr(obj, "buffer", obj)   # a text file's binary file
    raw = getattr(raw, "raw", raw)      # a buffered file's FileIO
    if isinstance(raw, _io.FileIO) and raw.name == full:
        raw.name = given


def _import_roots() -> tuple[str, ...]:
    """sys.path directories (an editable install, a PYTHONPATH library) are read like the installation,
    except any that hold the home directory: the kernel starts with -P, so the working directory is
    not among them."""
    key = tuple(sys.path)
    if _IMPORT_ROOTS[0] != key:
        _IMPORT_ROOTS[:] = [key, ()]   # while computing, a nested call sees no extra roots
        home = _realpath(os.path.expanduser("~"))
        roots = []
        resolving = getattr(_RESOLVING, "active", False)
        _RESOLVING.active = True   # isdir() with the host's stat: a cell's confinement must not answer it
        try:
            for entry in key:
                if not entry:
                    continue
                full = _realpath(entry)
                if os.path.isdir(full) and full != "/" and not (home == full or home.startswith(full + os.sep)):
                    roots.append(full)
        finally:
            _RESOLVING.active = resolving
        _IMPORT_ROOTS[:] = [key, tuple(roots)]
    return _IMPORT_ROOTS[1]


_IMPORT_ROOTS: list = [None, ()]


def _installation_path(path) -> str | None:
    raw = os.fsdecode(os.fspath(path))
    if not os.path.isabs(raw):
        return None
    full = _realpath(raw)
    for root in _READ_ONLY + _import_roots():
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

    def check_path(self, path, writes: bool) -> None:
        if not writes and _installation_path(_realpath(os.fsdecode(os.fspath(path)))) is not None:
            return
        self.resolve(path)

    def refuse_operation(self, event: str, why: str | None = None) -> None:
        self._deny(OperationDenied(event, why or "the sandbox does not start processes, load native code, "
                                                 "unpickle or change the process"))

    def translate_probe(self, path) -> str | None:
        raw = os.fsdecode(os.fspath(path))
        return raw if os.path.isabs(raw) and _installation_path(raw) is not None else None

    def resolve_native(self, path, writes: bool) -> str:
        return self.library_resolve_read(path) if not writes else self.resolve(path)


def _quietly(files):
    """The same confinement for the host's time (see dropping_cell_objects): refusals are raised, not
    recorded, for there is no cell to report them to."""
    quiet = object.__new__(type(files))
    quiet.__dict__.update(vars(files), _deny=_raise)
    return quiet


def _raise(exc):
    raise exc


# -- process-wide entry points, dispatching on the cell's context --------------------------------

_ORIGINAL_OPEN = _io.open
_ORIGINAL_OS = {name: getattr(os, name) for name in
                ("open", "remove", "unlink", "rename", "replace", "mkdir", "makedirs", "rmdir",
                 "listdir", "scandir", "truncate", "chmod", "symlink", "link", "utime")}
_ORIGINAL_STAT = {name: getattr(os, name) for name in ("stat", "lstat", "access")}
_ORIGINAL_SOCKET = {name: getattr(socket.socket, name) for name in ("connect", "connect_ex", "sendto", "bind")}
_ORIGINAL_GETADDRINFO = socket.getaddrinfo
_installed = False
_READ_ONLY = _read_only_roots()


def _guarded_open(file, mode="r", *args, **kwargs):
    fs = _confinement()
    if fs is None:
        return _ORIGINAL_OPEN(file, mode, *args, **kwargs)
    return fs.library_open(file, mode, *args, **kwargs)


def _guard_os(name):
    original = _ORIGINAL_OS[name]
    two_paths = name in ("rename", "replace", "symlink", "link")

    def guarded(*args, **kwargs):
        fs = _confinement()
        if fs is None:
            return original(*args, **kwargs)
        resolve = fs.library_resolve_read if name in ("listdir", "scandir") else fs.resolve
        args = list(args)
        if not args and name in ("listdir", "scandir"):
            args = ["."]
        for i in range(min(2 if two_paths else 1, len(args))):
            args[i] = resolve("." if args[i] is None else args[i])
        kwargs.pop("dir_fd", None)
        result = original(*args, **kwargs)
        if name == "open" and type(result) is int:
            _CELL_DESCRIPTORS.add(result)   # a file of the working directory: io.open(fd) may take it
        return result
    guarded.__name__ = name
    return guarded


# Descriptors the confinement opened while cells ran (os.open of a working-directory path). A descriptor number is
# otherwise the host's: FileIO(3) of a leaked raw class read the host's open files and wrote its log (review 12,
# R12-3; review 13, R13-3). A number closed and reused by the host stays here: it names a file the cell could open.
_CELL_DESCRIPTORS: set = set()




def _guard_stat(name):
    """os.stat/lstat/access for libraries (os.path.exists, Path.is_dir): relative paths are the
    working directory's; a path outside it and the installation simply does not exist, so a probe
    neither reveals host files nor counts as a refusal."""
    original = _ORIGINAL_STAT[name]

    def guarded(path, *args, **kwargs):
        fs = _confinement()
        if fs is None or isinstance(path, int) or getattr(_RESOLVING, "active", False):
            return original(path, *args, **kwargs)   # realpath() below stats through us: no recursion
        _RESOLVING.active = True   # our own checks below stat through the host's functions
        try:
            full = fs.translate_probe(path)
        finally:
            _RESOLVING.active = False
        if full is None:
            if name == "access":
                return False
            raise FileNotFoundError(2, "No such file or directory", os.fsdecode(os.fspath(path)))
        kwargs.pop("dir_fd", None)
        return original(full, *args, **kwargs)
    guarded.__name__ = name
    return guarded


def _guard_socket(name):
    original = _ORIGINAL_SOCKET[name]

    def guarded(self, *args, **kwargs):
        if _network_denied():
            _raise_net(args[0] if args else None)
        return original(self, *args, **kwargs)
    guarded.__name__ = name
    return guarded


def _guarded_getaddrinfo(host, *args, **kwargs):
    if _network_denied():
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


def _replace_open_aliases() -> None:
    """Modules imported before install() may hold their own reference to the original open
    (bz2._builtin_open, tarfile.bltn_open, lzma._builtin_open): replace every such alias."""
    for name, module in list(sys.modules.items()):
        if module is None or name in ("_io", __name__):
            continue
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            if value is _ORIGINAL_OPEN:
                namespace[attr] = _guarded_open
    # numpy's DataSource keeps io.open in a table made when numpy was imported
    datasource = sys.modules.get("numpy.lib._datasource")
    openers = getattr(getattr(datasource, "_file_openers", None), "_file_openers", None)
    if isinstance(openers, dict):
        for key, value in list(openers.items()):
            if value is _ORIGINAL_OPEN:
                openers[key] = _guarded_open


_ARRAY_INTERFACE_NAMES = frozenset({"__array_interface__", "__array_struct__"})


def _guard_enum_namespace() -> None:
    """Enum's functional API (Enum('E', {...})) puts the cell's keys into a class namespace; an
    __array_interface__ there would let numpy read and write any address."""
    import enum

    enum_dict = getattr(enum, "EnumDict", None) or getattr(enum, "_EnumDict")
    original = enum_dict.__setitem__

    def __setitem__(self, key, value):
        if cell_is_running() and (type(key) is not str or key in _ARRAY_INTERFACE_NAMES):
            # a str subclass may compare unequal here and equal when numpy looks the name up
            raise TypeError("this member name cannot be defined in the sandbox (names must be plain str, "
                            "and __array_interface__/__array_struct__ are refused)")
        return original(self, key, value)
    enum_dict.__setitem__ = __setitem__


# -- the backstop: an audit hook (PEP 578) ----------------------------------------------------
#
# The patches above translate paths for libraries; they cannot catch a library that kept its own
# reference to the original open (numpy's DataSource holds io.open in a dict) or opens from C through
# Python's io. CPython raises an audit event for every such operation, wherever it comes from, and
# a hook that raises aborts it. The hook is permanent once added and costs a ContextVar read per event
# outside cells.

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {   # event -> indexes of path arguments, and whether the operation writes
    "os.remove": ((0,), True), "os.rename": ((0, 1), True), "os.mkdir": ((0,), True),
    "os.rmdir": ((0,), True), "os.chmod": ((0,), True), "os.chown": ((0,), True),
    "os.link": ((0, 1), True), "os.symlink": ((0, 1), True), "os.truncate": ((0,), True),
    "os.utime": ((0,), True), "os.listdir": ((0,), False), "os.scandir": ((0,), False),
    "shutil.copyfile": ((0, 1), True), "shutil.rmtree": ((0,), True), "shutil.move": ((0, 1), True),
    "os.chdir": ((0,), True), "os.chroot": ((0,), True), "os.mkfifo": ((0,), True),
    "os.mknod": ((0,), True), "os.setxattr": ((0,), True), "os.removexattr": ((0,), True),
}
_PROCESS_EVENTS = frozenset({
    "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty", "subprocess.Popen",
    "os.kill", "os.killpg", "pty.spawn", "os.startfile", "webbrowser.open",
    # (ctypes events are not here: granted libraries load ctypes when imported, and cells cannot
    # reach ctypes at all; a library that misuses it is what the worker level's OS layers are for)
    "code.__new__", "function.__new__", "sys.addaudithook", "sys._current_frames", "sys.settrace",
    "sys.setprofile", "cpython.remote_debugger_script", "os.setuid", "os.setgid",
    "sqlite3.connect", "sqlite3.enable_load_extension", "sqlite3.load_extension",
    "pickle.find_class", "winreg.OpenKey", "resource.setrlimit", "resource.prlimit",
    "signal.pthread_kill", "sys.remote_exec",
})
_NETWORK_EVENTS = frozenset({
    "socket.__new__", "socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg",
    "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr",
    "socket.getnameinfo", "http.client.connect", "http.client.send", "urllib.Request", "ftplib.connect",
    "smtplib.connect", "imaplib.open", "poplib.connect", "nntplib.connect", "telnetlib.Telnet.open",
})


def _on_import_path(path) -> bool:
    if not isinstance(path, (str, bytes, os.PathLike)):
        return False
    full = _realpath(os.fsdecode(os.fspath(path)))
    return any(entry and _realpath(entry) == full for entry in sys.path)


def _audit(event, args):
    fs = _confinement()
    if fs is None:
        return
    if event == "compile" or event == "exec":
        if not _source_to_code_vetted(event, args):
            fs.refuse_operation(event, "the sandbox does not turn text into code while a cell runs (only "
                                       "imports and a few library helpers whose text the cell cannot steer)")
        return
    if event == "import":
        name = args[0] if args else None
        if type(name) is str and (name == "__main__" or name.endswith(".__main__")):
            # a package's __main__ is its program: importing it runs it here, with the kernel's argv
            # (np.info(toplevel='IPython.__main__') replaced the host's sys.excepthook: review 5, N5-9)
            fs.refuse_operation(event, "a package's __main__ module is a program; the sandbox does not run it")
        return
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, 0))[:3]
        if path is None:
            return
        if isinstance(path, int):
            if path not in _CELL_DESCRIPTORS:
                fs.refuse_operation(f"opening file descriptor {int(path)}", "a descriptor the cell did not open is "
                                    "the host's (its files, its sockets, its log)")
            return   # a descriptor os.open gave for a working-directory path: opening it was checked
        writes = bool((flags or 0) & _WRITE_FLAGS) or (isinstance(mode, str) and any(c in mode for c in "wax+"))
        fs.check_path(path, writes)
        return
    spec = _PATH_EVENTS.get(event)
    if spec is not None:
        indexes, writes = spec
        if not writes and args and _on_import_path(args[0]):
            return   # the import system lists sys.path entries to find a module
        for i in indexes:
            if i < len(args) and isinstance(args[i], (str, bytes, os.PathLike)):
                fs.check_path(args[i], writes)
        return
    if event == "urllib.Request" and args and isinstance(args[0], str) and args[0][:5].lower() == "file:":
        from urllib.parse import unquote, urlsplit

        fs.check_path(unquote(urlsplit(args[0]).path) or "/", False)
        return
    if event == "mmap.__new__":
        # (pandas 3 maps a CSV of 5 MB or more for the length of read_csv: maps inside a library call are
        # allowed; the libraries that hand a cell an array over a map read into memory instead, guards.py)
        fileno = args[0] if args else -1
        if isinstance(fileno, int) and fileno >= 0:
            try:
                target = os.readlink(f"/proc/self/fd/{fileno}")
            except OSError:
                fs.refuse_operation(event)
            fs.check_path(target, False)
        return
    if event in _PROCESS_EVENTS:
        fs.refuse_operation(event)
    elif event in _NETWORK_EVENTS and _network_denied():
        address = args[1] if event in ("socket.connect", "socket.sendto", "socket.bind") and len(args) > 1 \
            else (args[0] if args and event != "socket.__new__" else None)
        if event == "socket.__new__":
            family = args[1] if len(args) > 1 else None
            if family == getattr(socket, "AF_UNIX", -1):
                return
        _raise_net(address if isinstance(address, (tuple, str)) else None)


# -- the source-to-code sink: text becomes code only where the cell cannot choose the text -----------------
# compile(), exec() and eval() of a string are an interpreter without the rewriter's gates: whoever feeds
# one a string the cell chose (dataclass field names, scipy's argument-parser template, a jinja template)
# has lost. While a cell runs, the audit hook refuses every 'compile' and 'exec' event (CPython raises
# both for a string, 'exec' for a code object) except where the immediate Python caller is one of the
# library functions below, each with the check that makes its text the library's own. The cell's own
# code (compiled by the engine before the cell starts) carries the cell file name and is executed as is.
# Callers are matched by their code object (not by name), looked up once their module is loaded.

def _identifier(name) -> bool:
    import keyword

    return type(name) is str and name.isidentifier() and not keyword.iskeyword(name)


def _dotted_identifier(name) -> bool:
    return type(name) is str and all(part.isidentifier() for part in name.split("."))


def _caller_frame(frame, code, depth: int):
    for _ in range(depth):
        frame = frame.f_back
        if frame is None:
            return None
        if frame.f_code is code:
            return frame
    return None


def _dataclass_fields_are_identifiers(frame, event, args) -> bool:
    """dataclasses builds __init__/__repr__/__eq__... from its fields' names: every name (the annotation
    keys, the fields collected from the bases) must be an exact-str identifier of a real Field."""
    import dataclasses

    process = _caller_frame(frame, dataclasses._process_class.__code__, 6)
    if process is None:
        return False
    local = process.f_locals
    fields = local.get("fields", {})
    annotations = local.get("cls_annotations", {})
    if type(fields) is not dict or type(annotations) is not dict:
        return False
    return all(_identifier(name) for name in annotations) and all(
        _identifier(name) and type(f) is dataclasses.Field and _identifier(f.name) for name, f in fields.items())


def _scipy_template_is_scipys(frame, event, args) -> bool:
    """rv_generic exec()s self._parse_arg_template, an attribute: whatever put it there (scipy's
    _construct_argparser, a dataclass field, a cell's __getstate__ restored by copy: review 17), the text must be
    scipy's own template filled with distinct shape identifiers and scipy's loc/scale arguments, and what runs
    is the code compiled from that text in the same exec() call."""
    if event == "compile":
        vetted = _is_scipy_argparser_text(args[0] if args else None)
        if vetted:
            _VETTED_SCIPY_COMPILES.add(id(frame))
        return vetted
    if id(frame) not in _VETTED_SCIPY_COMPILES:
        return False      # a code object exec()'d as it is: never compiled from vetted text
    _VETTED_SCIPY_COMPILES.discard(id(frame))
    code = args[0] if args else None
    return type(code).__name__ == "code" and code.co_filename == "<string>"


_VETTED_SCIPY_COMPILES: set = set()   # frames whose exec() compiled vetted text: its exec event comes next
_SCIPY_LOC_SCALE = {"loc=0, scale=1": "loc, scale", "loc=0": "loc, 1"}   # rv_continuous's, rv_discrete's
_SCIPY_FIRST_LINE = re.compile(r"\ndef _parse_args\(self, ((?:[_a-zA-Z][_a-zA-Z0-9]*, )*) (loc=0, scale=1|loc=0)\):\n")


def _is_scipy_argparser_text(text) -> bool:
    module = sys.modules.get("scipy.stats._distn_infrastructure")
    template = getattr(module, "__dict__", {}).get("parse_arg_template")
    if type(text) is bytes:
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return False
    if type(template) is not str or type(text) is not str:
        return False
    first = _SCIPY_FIRST_LINE.match(text)
    if first is None:
        return False
    shapes = first.group(1).split(", ")[:-1]
    if not all(map(_identifier, shapes)) or len(set(shapes)) != len(shapes) or \
            set(shapes) & {"self", "loc", "scale", "size", "moments"}:
        return False
    return text == template % {"shape_arg_str": first.group(1), "locscale_in": first.group(2),
                               "locscale_out": _SCIPY_LOC_SCALE[first.group(2)]}


def _names_are_identifiers(*names):
    def check(frame, event, args) -> bool:
        local = frame.f_locals
        return all(_identifier(local.get(name)) for name in names)
    return check


def _installed_template(frame, event, args) -> bool:
    """jinja2 compiles a template to Python: only templates that are files of the installation (pandas'
    own html.tpl ...), never text or files a cell chose."""
    filename = frame.f_locals.get("filename")
    return isinstance(filename, str) and os.path.isabs(filename) and _installation_path(filename) is not None


def _installed_template_code(frame, event, args) -> bool:
    code = frame.f_locals.get("code")
    return type(code).__name__ == "code" and _installation_path(code.co_filename) is not None


def _builtin_signature_name(frame, event, args) -> bool:
    """inspect.signature of a builtin evaluates the dotted names in its __text_signature__ defaults
    (sys.maxsize) and keeps constants: the object must be a library's, never a cell's (whose own
    __text_signature__ could name any module's constant)."""
    if not _dotted_identifier(frame.f_locals.get("s")):
        return False
    gates = sys.modules.get("sandbox_kernel.gates")
    inspect = sys.modules.get("inspect")
    outer = _caller_frame(frame, getattr(getattr(inspect, "_signature_fromstr", None), "__code__", None), 12)
    if outer is None or gates is None:
        return outer is not None
    obj = outer.f_locals.get("obj")
    if gates.is_sandbox_class(type(obj)) or gates.is_sandbox_class(obj) or gates.is_sandbox_function(obj):
        return False
    # a builtin's text signature comes from its C docstring; one in an object's own dict was put there (a
    # staticmethod or lru_cache wrapper given the cell's by functools' copies: review 16, R16-2, R16-11)
    try:
        own = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return True
    return not (isinstance(own, dict) and "__text_signature__" in own)


def _always(frame, event, args) -> bool:
    return True


def _rewritten_tree(frame, event, args) -> bool:
    """The engine compiles the text of a cell's eval()/exec() after parsing, validating and rewriting it
    like a cell: the rewritten tree, never text."""
    import ast

    return event == "compile" and isinstance(frame.f_locals.get("tree"), (ast.Module, ast.Expression))


def _provided_code(frame, event, args) -> bool:
    """provided_modules.build runs the one code object it compiled from its own rewritten source."""
    return event == "exec" and frame.f_locals.get("code") is frame.f_globals["_compiled"]()[0]


def _compile_only(frame, event, args) -> bool:
    return event == "compile"


# Library helpers that turn text into code at run time: (module, dotted path to the function, nested
# functions included, check). Code run while a module is imported is vetted by _run_by_an_import.
_SOURCE_CALLERS_SPEC = (
    ("ast", "parse", _compile_only),                 # always PyCF_ONLY_AST: a tree, never code
    ("typing", "ForwardRef.__init__", _compile_only),   # compiled, never evaluated (exec refused)
    ("collections", "namedtuple", _always),          # names interned as exact str and checked as identifiers
    ("dataclasses", "_create_fn", _dataclass_fields_are_identifiers),              # 3.10 - 3.12
    ("dataclasses", "_FuncBuilder.add_fns_to_class", _dataclass_fields_are_identifiers),   # 3.13
    ("inspect", "_signature_fromstr.wrap_value", _builtin_signature_name),   # a builtin's text signature default
    ("scipy.stats._distn_infrastructure", "rv_generic._attach_argparser_methods", _scipy_template_is_scipys),
    ("_plotly_utils.basevalidators", "InfoArrayValidator.build_validator", _names_are_identifiers(
        "validator_classname")),
    ("jinja2.environment", "Environment._compile", _installed_template),
    ("jinja2.environment", "Template.from_code", _installed_template_code),
    ("jinja2.debug", "fake_traceback", _always),    # '\n' * lineno + 'raise __jinja_exception__'
    ("sandbox_kernel.engine", "Engine._compile_text", _rewritten_tree),   # a cell's eval()/exec() text
    ("sandbox_kernel.provided_modules", "_compiled", _rewritten_tree),     # the sandbox's IPython.display
    ("sandbox_kernel.provided_modules", "build", _provided_code),
)
_SOURCE_CALLERS: dict = {}       # code object -> check(frame, event, args)


def _resolve_code(module, path: str):
    """The code object of module's function at path ('Class.method', 'function.nested')."""
    obj = module
    code = None
    for part in path.split("."):
        if code is not None:   # a function nested in the one found so far
            code = next((c for c in code.co_consts if type(c) is type(code) and c.co_name == part), None)
            if code is None:
                return None
            continue
        namespace = getattr(obj, "__dict__", None)
        if not isinstance(namespace, (dict, type(type.__dict__))):
            return None
        obj = namespace.get(part)
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if obj is None:
            return None
        if type(obj).__name__ == "function":
            code = obj.__code__
    return code


def _source_check(code):
    """The check for a caller, looked up again on a miss: a module is in sys.modules before its body has
    defined the function (clone_module is called while its package is still being imported)."""
    check = _SOURCE_CALLERS.get(code)
    if check is None and len(_SOURCE_CALLERS) < len(_SOURCE_CALLERS_SPEC):
        for modname, path, vetting in _SOURCE_CALLERS_SPEC:
            module = sys.modules.get(modname)
            if module is not None:
                found = _resolve_code(module, path)
                if found is not None:
                    _SOURCE_CALLERS[found] = vetting
        check = _SOURCE_CALLERS.get(code)
    return check


def _source_to_code_vetted(event, args) -> bool:
    """May this 'compile' or 'exec' go ahead while a cell runs?"""
    # frames: 0 here, 1 the audit hook, 2 the Python code that called compile/exec (a builtin has none)
    return _source_vetted_for(sys._getframe(2), event, args)


def _source_vetted_for(frame, event, args) -> bool:
    if event == "exec":
        code = args[0] if args else None
        if type(code).__name__ == "code" and code.co_filename.startswith(CELL_FILENAME_PREFIX):
            # the cell's own rewritten code, compiled by the engine before the cell and run by it (a
            # library running it with other globals would hand it their names)
            return frame.f_code.co_filename.startswith(_OWN_PACKAGE)
    elif len(args) > 1 and isinstance(args[1], str) and args[1].startswith(CELL_FILENAME_PREFIX):
        return False      # nothing compiled while a cell runs may pass for the cell's own code
    check = _source_check(frame.f_code)
    if check is not None:
        return check(frame, event, args)
    return _run_by_an_import(frame, event, args)


_IMPORT_LOADING = [None]   # importlib's _load_unlocked: the frame that runs a module's loader


def _run_by_an_import(frame, event, args) -> bool:
    """True when the code asking is a module being imported, with nothing but installed code between the
    import system and it: a module's source compiled and run by its loader (importlib's, or pytest's
    assertion rewriter in the tests), and what a module's body generates while it is imported (scipy's
    exec('del ' + name), attrs' generated methods, numpy.f2py's predicates). The import gate chose the
    module; a cell's function anywhere on the way (a warnings hook run by an import) ends the match, and
    the loader itself compiles and runs installed files only (a library importing a name the cell chose
    from a directory the cell can write would run the cell's file)."""
    if frame.f_code.co_filename.startswith("<frozen importlib."):
        source = getattr(args[0], "co_filename", None) if event == "exec" else args[1] if len(args) > 1 else None
        if not isinstance(source, str) or not installed_code(source) or _in_the_working_directory(source):
            return False
    return _installed_code_up_to(frame)


def _installed_code_up_to(frame) -> bool:
    """Whether importlib's loader is within 64 frames up from frame, with only installed code on the way."""
    loading = _import_loader()
    for _ in range(64):
        if frame is None:
            return False
        code = frame.f_code
        if code is loading:
            return True
        if not installed_code(code.co_filename):
            return False
        frame = frame.f_back
    return False


def _import_loader():
    loading = _IMPORT_LOADING[0]
    if loading is None:
        bootstrap = sys.modules.get("importlib._bootstrap")
        loading = _IMPORT_LOADING[0] = getattr(getattr(bootstrap, "_load_unlocked", None), "__code__", None)
    return loading


def made_by_an_import(frame) -> bool:
    """True when frame (the code asking, e.g. a class statement's) runs a module being imported, with
    nothing but installed code between the import system and it: the library's own doing (an extension
    module's initialisation has no frame of its own: frame is then importlib's). The sandbox's own frames
    (its gates, its fallbacks) are passed over."""
    while frame is not None and frame.f_code.co_filename.startswith(_OWN_PACKAGE):
        frame = frame.f_back
    return _installed_code_up_to(frame)


def _in_the_working_directory(filename: str) -> bool:
    """A file the cell can write is never installed code, even where sys.path names its directory."""
    active = _ACTIVE[0]
    root = getattr(active[0], "root", None) if active is not None else None
    if root is None or not os.path.isabs(filename):
        return False
    full = _realpath(filename)
    return full == root or full.startswith(root + os.sep)


_OWN_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_INSTALLED_FILES: dict = {}   # a code file name -> whether it is the installation's (not this package's)


def installed_code(filename: str) -> bool:
    """filename is the installation's code (the standard library, site-packages), not this package's."""
    known = _INSTALLED_FILES.get(filename)
    if known is None:
        known = filename.startswith("<frozen ") or not filename.startswith(_OWN_PACKAGE) and \
            os.path.isabs(filename) and _installation_path(filename) is not None
        if len(_INSTALLED_FILES) < 100_000:
            _INSTALLED_FILES[filename] = known
    return known


def _guard_pathlib_accessor() -> None:
    """Python 3.10's pathlib calls os and io through _NormalAccessor, whose attributes (stat = os.stat,
    open = io.open, mkdir = os.mkdir ...) were bound when pathlib was imported, before install(); every
    one that is still an original function is pointed at its guarded replacement. (3.11 removed the
    accessor: pathlib looks os.* up at each call.)"""
    import pathlib

    accessor = getattr(pathlib, "_NormalAccessor", None)
    if accessor is None:
        return
    guarded = {_ORIGINAL_OPEN: io.open}
    guarded.update((original, getattr(os, name)) for name, original in _ORIGINAL_OS.items())
    guarded.update((original, getattr(os, name)) for name, original in _ORIGINAL_STAT.items())
    for name, value in list(vars(accessor).items()):
        replacement = guarded.get(value) if callable(value) else None
        if replacement is not None:
            setattr(accessor, name, staticmethod(replacement))


def install() -> None:
    """Patch the process-wide entry points once. Outside a cell they behave exactly as before."""
    global _installed
    if _installed:
        return
    # Imported before the hook: on 3.10 importing asyncio builds code objects (types.coroutine calls
    # code.replace), an event refused during cells, and libraries import it lazily from a cell
    # (plotly -> IPython.display -> asyncio).
    import asyncio  # noqa: F401
    sys.addaudithook(_audit)
    gc.callbacks.append(_on_collection)
    builtins.open = _guarded_open
    io.open = _guarded_open
    _replace_open_aliases()
    _guard_enum_namespace()
    for name in _ORIGINAL_OS:
        setattr(os, name, _guard_os(name))
    for name in _ORIGINAL_STAT:
        setattr(os, name, _guard_stat(name))
    for name in _ORIGINAL_SOCKET:
        setattr(socket.socket, name, _guard_socket(name))
    socket.getaddrinfo = _guarded_getaddrinfo
    _guard_pathlib_accessor()
    _guard_fork_exec()
    _guard_thread_start()
    _installed = True


def _guard_thread_start() -> None:
    """No thread starts while a cell runs. A library's pool (pandas' parallel read_csv, mode.max_threads) ran the
    cell's converters on threads that outlived the cell unconfined (a library callable wrote a file outside after
    the time limit), where the gates find no engine, and whose shutdown, cut by the time limit, freed parsers
    still in use (a segfault): review 13, R13-1, R13-3, R13-4. threading starts every thread through one module
    function, looked up when called; _thread's own functions are replaced too."""
    import _thread

    def refusing(original):
        def start(*args, **kwargs):
            fs = _confinement()
            if fs is not None:
                fs.refuse_operation("starting a thread", "a thread would outlive the cell's limits and confinement "
                                    "(pandas: leave mode.max_threads at its default)")
            return original(*args, **kwargs)
        start.__name__ = getattr(original, "__name__", "start")
        return start
    for name in ("_start_new_thread", "_start_joinable_thread"):   # 3.10-3.12; 3.13
        if hasattr(threading, name):
            setattr(threading, name, refusing(getattr(threading, name)))
    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_thread, name):
            setattr(_thread, name, refusing(getattr(_thread, name)))


def _guard_fork_exec() -> None:
    """_posixsubprocess.fork_exec starts a program without an audit event (subprocess.Popen raises one in
    Python first; multiprocessing's spawnv_passfds does not: scipy's workers=2 started the resource tracker,
    a python -c whose sys.path[0] is the working directory, where a cell's multiprocessing.py ran unconfined:
    review 9, N9-7). Every caller looks the function up on the module when it calls, so the module attribute
    is the sink."""
    try:
        import _posixsubprocess
    except ImportError:   # not a POSIX system: no such entry point
        return
    original = _posixsubprocess.fork_exec

    def fork_exec(*args, **kwargs):
        fs = _confinement()
        if fs is not None:
            fs.refuse_operation("_posixsubprocess.fork_exec")
        return original(*args, **kwargs)
    _posixsubprocess.fork_exec = fork_exec


# -- native file I/O inside granted libraries ----------------------------------------------------------
# A library's own C/C++/Fortran code that opens a file *by name* is seen by neither the path hooks nor
# the audit hook (both see Python's io and os only). The granted libraries' entry points of that kind,
# found by reading their native symbol tables (fopen, std::filebuf::open, Fortran OPEN) and the Python
# code that calls them, are listed in docs/security.md ("Inventory of sinks"); each one's path goes
# through the cell's confinement here before the native code sees it.

def native_path(path, writes: bool):
    """path as a granted library's native code may open it: outside a cell, unchanged; in one, the
    absolute path inside the working directory (or a refusal)."""
    fs = _confinement()
    if fs is None:
        return path
    if isinstance(path, bytes):
        return os.fsencode(fs.resolve_native(path, writes))
    return fs.resolve_native(path, writes)


def _routed(function, positions, keywords, writes):
    """function with its path arguments (by position and by keyword) put through native_path."""
    def routed(*args, **kwargs):
        args = list(args)
        for i in positions:
            if i < len(args) and isinstance(args[i], (str, bytes, os.PathLike)):
                args[i] = native_path(args[i], writes)
        for key in keywords:
            if isinstance(kwargs.get(key), (str, bytes, os.PathLike)):
                kwargs[key] = native_path(kwargs[key], writes)
        return function(*args, **kwargs)
    routed.__name__ = getattr(function, "__name__", "routed")
    routed.__doc__ = getattr(function, "__doc__", None)
    routed.__st_routed__ = True
    return routed


_HIGHS_FILE_OPTIONS = {"log_file": True, "solution_file": True, "write_basis_file": True, "write_model_file": True,
                       "write_presolved_model_file": True, "read_basis_file": False, "read_solution_file": False}


# Qhull's options are a small language read by its C code: 'TI file' reopens the process's stdin on a file and
# 'TO file' its output, 'TC n' crashed the process, the other T options trace to the host's stderr (review 15:
# R15-1, R15-4). A cell's options are its geometry options only: the Q options (Qhull checks their values), the
# precision numbers (C-0, A0.9, E1e-10, R, W, V, U) and Pp.
_QHULL_OPTION = re.compile(r"Q[A-Za-z0-9:.+-]*|[ACERWVU]-?[0-9.eE+-]*|Pp")


def _check_qhull_options(options, fs) -> None:
    text = options.decode("latin-1") if isinstance(options, (bytes, bytearray)) else options
    if not isinstance(text, str):
        return   # Qhull's wrapper refuses it as it would anyway
    for token in text.split():
        if not _QHULL_OPTION.fullmatch(token):
            fs.refuse_operation(f"qhull option {token[:40]!r}",
                                "only Qhull's geometry options (Q..., C, A, E, R, W, V, U, Pp) are available: "
                                "its T options open files by name and trace to the host")


def _route_qhull_options(cls) -> None:
    init = cls.__dict__.get("__init__") if isinstance(cls, type) else None
    if init is None or getattr(init, "__st_routed__", False):
        return
    signature = inspect.signature(init)

    def __init__(self, *args, **kwargs):
        fs = _confinement()
        if fs is not None:
            options = signature.bind(self, *args, **kwargs).arguments.get("qhull_options")
            if options is not None:
                _check_qhull_options(options, fs)
        return init(self, *args, **kwargs)
    __init__.__doc__ = init.__doc__
    __init__.__st_routed__ = True
    cls.__init__ = __init__


def _route(owner, name, positions=(), keywords=(), writes=True) -> None:
    function = getattr(owner, name, None)
    if function is not None and not getattr(function, "__st_routed__", False):
        setattr(owner, name, _routed(function, positions, keywords, writes))


def route_native_file_io() -> None:
    """Each native entry point that opens a file by name, once its module is loaded."""
    # mmread/mminfo/mmwrite: C++ std::filebuf in _fmm_core, which is loaded inside the first call, so the
    # Python functions that hand it the path (loaded with scipy.io) are routed instead
    fmm = sys.modules.get("scipy.io._fast_matrix_market")
    if fmm is not None:
        _route(fmm, "_get_read_cursor", positions=(0,), keywords=("source",), writes=False)
        _route(fmm, "_get_write_cursor", positions=(0,), keywords=("target",), writes=True)
    odr = sys.modules.get("scipy.odr._odrpack")   # ODR report and error files: Fortran OPEN
    if odr is not None:
        _route(odr, "odr", keywords=("rptfile", "errfile"), writes=True)
    highs = sys.modules.get("scipy.optimize._highspy._core")   # HiGHS file options: fopen / filebuf
    passes = getattr(getattr(highs, "_Highs", None), "passOptions", None)
    if passes is not None and not getattr(passes, "__st_routed__", False):
        def passOptions(self, options):
            for option, writes in _HIGHS_FILE_OPTIONS.items():
                value = getattr(options, option, "")
                if isinstance(value, str) and value:
                    setattr(options, option, native_path(value, writes))
            return passes(self, options)
        passOptions.__st_routed__ = True
        highs._Highs.passOptions = passOptions
    qhull = sys.modules.get("scipy.spatial._qhull")   # Qhull's T options: freopen of stdin, files by name
    if qhull is not None:
        for name in ("ConvexHull", "Delaunay", "Voronoi", "HalfspaceIntersection"):
            _route_qhull_options(getattr(qhull, name, None))


# -- who is confined: the cell's thread, and every thread that is not the kernel's own -------------------
# The ContextVars above are a fast path, not the rule: a cell that reaches contextvars.Context().run(f)
# runs f with them unset, and threads a library starts (pandas' parallel reader) do not inherit them.
# So while a cell runs, the thread that runs it is confined whatever its Context, and so is every thread
# that is not the kernel's own. The kernel's own threads (ipykernel's iopub, control and heartbeat
# threads; at level none the kernel itself between cells) are those alive when the cell started that no
# cell started: a thread a cell's library started (a pool that outlives its cell) stays confined in every
# later cell. Threads are remembered by their Thread object, not their ident (idents are reused).
_ACTIVE: list = [None]            # (files, network allowed) of the running cell, or None between cells
_CELL_THREAD: list = [None]       # the ident of the thread that runs the cell
_KERNEL_THREADS: dict = {}       # ident -> Thread: the kernel's own threads during this cell
_STARTED_BY_CELLS: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()
_LIVE_THREADS = threading._active   # ident -> Thread of every running threading.Thread


def _confinement():
    """The files object that confines the code running now, or None (the kernel's own code)."""
    fs = _FS.get()
    if fs is not None:
        return fs
    host_time = _host_time_here()
    if host_time is not None:
        return host_time
    active = _ACTIVE[0]
    if active is None:
        return None
    ident = threading.get_ident()
    thread = _KERNEL_THREADS.get(ident)
    # (the same Thread still: an ident a dead kernel thread left is reused by the next thread started)
    if ident == _CELL_THREAD[0] or thread is None or _LIVE_THREADS.get(ident) is not thread:
        return active[0]
    return None


def _network_denied() -> bool:
    if _NET_DENIED.get():
        return True
    if _host_time_here() is not None:
        return True
    active = _ACTIVE[0]
    return active is not None and not active[1] and _confinement() is not None


def cell_is_running() -> bool:
    """True in the code of a running cell: its thread (whatever its Context) and threads not the kernel's."""
    return _confinement() is not None


def enter(files, network_allowed: bool, net_deny):
    """Confine the current context; returns tokens for leave()."""
    global _net_deny
    _net_deny = net_deny
    cell_thread = threading.get_ident()
    _KERNEL_THREADS.clear()
    _KERNEL_THREADS.update((t.ident, t) for t in threading.enumerate()
                           if t.ident != cell_thread and t not in _STARTED_BY_CELLS)
    _CELL_THREAD[0] = cell_thread
    _ACTIVE[0] = (files, bool(network_allowed))
    _LAST_CELL_FILES[0] = _quietly(files)
    tokens = _FS.set(files), _NET_DENIED.set(not network_allowed)
    for setup in _AT_CELL_START:
        try:
            setup()
        except Exception:   # noqa: BLE001 - what a setup captured is put back by its cleanup
            pass
    return tokens


_AT_CELL_START: list = []   # the runtime's own setups (guards.swap_in_library_state), run by enter(), confined
_AT_CELL_END: list = []   # the runtime's own cleanups (gates.forget_cell_abc_answers), run by leave()


def at_cell_start(setup) -> None:
    if setup not in _AT_CELL_START:
        _AT_CELL_START.append(setup)


def at_cell_end(cleanup) -> None:
    if cleanup not in _AT_CELL_END:
        _AT_CELL_END.append(cleanup)


def leave(tokens) -> None:
    fs_token, net_token = tokens
    try:
        # threads started during the cell (still alive) are the cell's in every later cell too
        for thread in threading.enumerate():
            if _KERNEL_THREADS.get(thread.ident) is not thread and thread.ident != _CELL_THREAD[0]:
                _STARTED_BY_CELLS.add(thread)
    finally:
        _ACTIVE[0] = None
        _CELL_THREAD[0] = None
    _FS.reset(fs_token)
    _NET_DENIED.reset(net_token)
    for cleanup in _AT_CELL_END:
        try:
            cleanup()
        except Exception:   # noqa: BLE001 - the host's state is restored whatever one cleanup does
            pass


# -- the host's time: what it runs of a cell's making -------------------------------------------------
# A cell's objects outlive the cell: in its namespace, or unreachable in a cycle the collector frees
# later, on whichever thread happens to allocate (the kernel between cells, ipykernel's iopub thread
# during one). A library finalizer among them runs what the cell left in its objects: scipy's
# netcdf_file.__del__ closes the cell's file object, whose close() is a library callable holding the
# cell's arguments (partial(np.savetxt, '/outside', ...)). No cell code runs, so no tick refuses it. So
# every garbage collection, and the host dropping a namespace, runs confined to the last cell's files
# with no network, whatever the thread: the collector runs nothing but finalizers, and the host's own
# objects have no finalizer that needs a file outside the working directory.
_LAST_CELL_FILES: list = [None]   # the last cell's files, quietly (no cell to record a refusal in)
_HOST_TIME: list = [None]         # (files, thread ident) while that thread runs finalizers for the host


def _host_time_here():
    """The files that confine this thread's host time, or None."""
    host_time = _HOST_TIME[0]
    return host_time[0] if host_time is not None and host_time[1] == threading.get_ident() else None


def _begin_host_time() -> bool:
    """Confine this thread to the last cell's files, unless it already is confined (or no cell ran yet)."""
    files = _LAST_CELL_FILES[0]
    if files is None or _HOST_TIME[0] is not None or _confinement() is not None:
        return False
    _HOST_TIME[0] = (files, threading.get_ident())
    return True


def _on_collection(phase, info) -> None:
    if phase == "start":
        _begin_host_time()
    elif _host_time_here() is not None:
        _HOST_TIME[0] = None


class dropping_cell_objects:
    """``with dropping_cell_objects(): namespace.clear()``: the finalizers the host's own drop runs
    (a reset namespace, a replaced engine) are confined as a collection's are."""

    def __enter__(self):
        self._held = _begin_host_time()
        return self

    def __exit__(self, *exc):
        if self._held:
            _HOST_TIME[0] = None
        return False
