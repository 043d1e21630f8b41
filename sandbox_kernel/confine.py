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
import threading
import weakref

from .denials import FileDenied, NetworkDenied, OperationDenied

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

    def refuse_operation(self, event: str) -> None:
        self._deny(OperationDenied(event, "the sandbox does not start processes, load native code, "
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
        handle = _ORIGINAL_OPEN(full, mode, *args, **kwargs)
        try:
            _OPENED.add(handle)
        except TypeError:
            pass
        return handle


def _import_roots() -> tuple[str, ...]:
    """sys.path directories (an editable install, a PYTHONPATH library) are read like the installation,
    except any that hold the home directory: the kernel starts with -P, so the working directory is
    not among them."""
    key = tuple(sys.path)
    if _IMPORT_ROOTS[0] != key:
        _IMPORT_ROOTS[:] = [key, ()]   # while computing, a nested call sees no extra roots
        home = _realpath(os.path.expanduser("~"))
        roots = []
        for entry in key:
            if not entry:
                continue
            full = _realpath(entry)
            if os.path.isdir(full) and full != "/" and not (home == full or home.startswith(full + os.sep)):
                roots.append(full)
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

    def refuse_operation(self, event: str) -> None:
        self._deny(OperationDenied(event, "the sandbox does not start processes, load native code, "
                                          "unpickle or change the process"))

    def translate_probe(self, path) -> str | None:
        raw = os.fsdecode(os.fspath(path))
        return raw if os.path.isabs(raw) and _installation_path(raw) is not None else None

    def resolve_native(self, path, writes: bool) -> str:
        return self.library_resolve_read(path) if not writes else self.resolve(path)


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




def _guard_stat(name):
    """os.stat/lstat/access for libraries (os.path.exists, Path.is_dir): relative paths are the
    working directory's; a path outside it and the installation simply does not exist, so a probe
    neither reveals host files nor counts as a refusal."""
    original = _ORIGINAL_STAT[name]

    def guarded(path, *args, **kwargs):
        fs = _FS.get()
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
        if key in _ARRAY_INTERFACE_NAMES and _FS.get() is not None:
            raise TypeError(f"{key} cannot be defined in the sandbox")
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
    fs = _FS.get()
    if fs is None:
        fs = _thread_confinement()
        if fs is None:
            return
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, 0))[:3]
        if isinstance(path, int) or path is None:
            return   # an already open descriptor (os.fdopen): opening it was checked
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
    elif event in _NETWORK_EVENTS and _NET_DENIED.get():
        address = args[1] if event in ("socket.connect", "socket.sendto", "socket.bind") and len(args) > 1 \
            else (args[0] if args and event != "socket.__new__" else None)
        if event == "socket.__new__":
            family = args[1] if len(args) > 1 else None
            if family == getattr(socket, "AF_UNIX", -1):
                return
        _raise_net(address if isinstance(address, (tuple, str)) else None)


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
    _installed = True


# -- native file I/O inside granted libraries ----------------------------------------------------------
# A library's own C/C++/Fortran code that opens a file *by name* is seen by neither the path hooks nor
# the audit hook (both see Python's io and os only). The granted libraries' entry points of that kind,
# found by reading their native symbol tables (fopen, std::filebuf::open, Fortran OPEN) and the Python
# code that calls them, are listed in docs/security.md ("Inventory of sinks"); each one's path goes
# through the cell's confinement here before the native code sees it.

def native_path(path, writes: bool):
    """path as a granted library's native code may open it: outside a cell, unchanged; in one, the
    absolute path inside the working directory (or a refusal)."""
    fs = _FS.get()
    if fs is None:
        fs = _thread_confinement()
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


# Threads a library starts while a cell runs (pandas' parallel reader) do not inherit the cell's
# context: during a cell, the audit hook confines every thread that was not alive when the cell started.
# (A pool that outlives its cell is not confined in later cells: thread idents are reused, so they cannot
# be remembered safely; the worker level's OS layers cover that case.)
_ACTIVE: list = [None]            # the running cell's files object, or None between cells
_BEFORE_CELL: set = set()         # thread idents alive when the running cell started


def cell_is_running() -> bool:
    """True in the code of a running cell (its context) or a thread it started."""
    return _FS.get() is not None or _thread_confinement() is not None


def _thread_confinement():
    files = _ACTIVE[0]
    if files is None or threading.get_ident() in _BEFORE_CELL:
        return None
    return files


def enter(files, network_allowed: bool, net_deny):
    """Confine the current context; returns tokens for leave()."""
    global _net_deny
    _net_deny = net_deny
    _BEFORE_CELL.clear()
    _BEFORE_CELL.update(t.ident for t in threading.enumerate())
    _ACTIVE[0] = files
    return _FS.set(files), _NET_DENIED.set(not network_allowed)


_AT_CELL_END: list = []   # the runtime's own cleanups (gates.forget_cell_abc_answers), run by leave()


def at_cell_end(cleanup) -> None:
    if cleanup not in _AT_CELL_END:
        _AT_CELL_END.append(cleanup)


def leave(tokens) -> None:
    fs_token, net_token = tokens
    _ACTIVE[0] = None
    _FS.reset(fs_token)
    _NET_DENIED.reset(net_token)
    for cleanup in _AT_CELL_END:
        try:
            cleanup()
        except Exception:   # noqa: BLE001 - the host's state is restored whatever one cleanup does
            pass
