"""What the generated attacks are judged by (issue 13 item 2): the host's own view, never the cell's word.

After each cell:
  canaries    the secret (in a file outside the working directory, a host module and the environment) is
              in no event and in none of the cell's strings; nothing outside the working directory was
              opened, read, listed, written, created or removed (inotify on the scene: a read that printed
              nothing is seen too); no process was started (a child of this process, or the marker a
              spawned `touch` creates); the loopback listener got no connection
  host state  the `__dict__`s (keys and value ids) of the granted modules, the runtime, builtins, sys, os
              and the other modules a cell would poison (WATCHED_TOPS) and of their classes, `sys.modules`,
              `sys.path`, the environment, the working directory of the process, and host memory
              (`math.tau`, the raw-memory target of the grammar's IFACE) are as before
  engine      no exception escaped run_cell, and none the cell ended with or caught (the grammar keeps what
              it catches in `pool` and `errors`) was raised by the runtime's own code other than
              deliberately (`raise` lines and the places where a gate performs the cell's own operation,
              DELEGATION_SITES); a trivial cell still runs afterwards
"""
from __future__ import annotations

import ctypes
import json
import linecache
import math
import os
import secrets
import shutil
import signal
import struct
import sys
import tempfile
import types

SECRET_MODULE = "fuzz_host_secret"
SECRET_ENV = "FUZZ_SECRET_ENV"

# Top-level modules whose dicts (and their classes' dicts) must not change: what the data-science policy
# grants, the runtime itself, the real builtins, and the modules a cell would poison to reach the host.
WATCHED_TOPS = frozenset("""numpy pandas scipy plotly _plotly_utils math json functools operator copy enum dataclasses
abc typing string collections itertools contextlib decimal re io random statistics heapq bisect array datetime
time textwrap pprint numbers fractions warnings builtins sandbox_kernel _collections_abc copyreg glob html
dateutil sys os posixpath posix subprocess socket importlib types inspect gc weakref threading pickle shutil
signal ctypes _thread linecache unicodedata codecs traceback""".split())

# Known changes of honest work: (module, key) values replaced per cell, keys libraries add as caches.
VOLATILE = {("sandbox_kernel.confine", "_net_deny"),
            # pandas' find_stack_level fills these the first time pandas warns
            ("pandas.util._exceptions", "_pkg_dir"), ("pandas.util._exceptions", "_test_dir")}
CACHE_KEYS = {"__slotnames__", "_abc_impl", "__annotations__", "__parameters__", "__warningregistry__"}

# Lines of the runtime where the exception is the cell's operation's own (the gate performs the read,
# call or conversion the cell asked for, and plain Python raises the same): keyed by (file name, source
# line), stable across edits elsewhere. Each was a report of the fuzzer, checked by hand.
DELEGATION_SITES = {
    ("gates.py", "value = getattr(obj, name)"),
    ("gates.py", "return getattr(obj, name)"),
    ("gates.py", "return fn(*args, **kwargs)"),   # Gates.sized: the sized builtin the cell called
    ("gates.py", "for is_attr, key in rest:"),     # str.format's own field parser ('{x.[a]}': ValueError)
    # a format field's item or attribute: '{0[k]}'.format({}) is a KeyError in plain Python too
    ("gates.py", "obj = self._gates.getattr(obj, key) if is_attr else obj[key]"),
    ("gates.py", "return format(value, spec)"),    # format(pd.options, 'x'): the object's own __format__
    # obj.__format__(spec) called by the cell, its spec size-checked first
    ("gates.py", "return lambda bound, target: runtime_callable(lambda spec: bound(check(spec)))"),
    ("gates.py", "setattr(self.write(obj, name), name, value)"),   # setattr(None, 'x', 1): AttributeError
    ("gates.py", "return self._check_value(bound(attr), target, a)"),   # x.__getattribute__('missing')
    ("gates.py", "return bound(attr, *value)"),    # super().__setattr__(...) of the cell's own class
    ("gates.py", "return hook(self, name)"),       # the class's own __getattr__/__getattribute__ (raw guard)
    ("gates.py", "return method(*made, **kwargs)"),   # dict.update(mappingproxy, ...): the cell's call
    ("gates.py", "return item in container"),      # 1 in decimal: "argument of type 'module' is not iterable"
    # the size-checked operators compute the cell's own operation: print * 3, gen % (1,), '%d' % ()
    ("gates.py", "return a * b"),
    ("gates.py", "return a % b"),
    ("gates.py", "return fmt % args"),
    ("gates.py", "return _BINARY[op](a, b)"),
    ("gates.py", "return _INPLACE[sym](current, value)"),
    ("guards.py", "return fn(*args, **kwargs)"),  # a guarded library function the cell called
    # operator.methodcaller('m')(obj): obj.m called ('dict' object is not callable, as in Python)
    ("guards.py", "return runtime_callable(lambda obj: gates.builtin_getattr(obj, name)(*args, **kwargs))"),
    # the cell's class statement, built by the host's __build_class__ (__slots__ = 1: TypeError)
    ("gates.py", "cls = _host_builtins.__build_class__(func, name, *bases, **kwargs)"),
    # an unbound method called with the cell's arguments (a missing argument: TypeError, as in Python)
    ("gates.py", "return make(functools.partial(unbound, target), target)(*args, **kwargs)"),
    # enum's namespace guard hashes the cell's key, as enum's own next line does (a list: TypeError)
    ("confine.py", "if key in _ARRAY_INTERFACE_NAMES and cell_is_running():"),
    # confinement calls the real open/os/socket function with the confined path: FileNotFoundError ...
    ("confine.py", "handle = _ORIGINAL_OPEN(full, mode, *args, **kwargs)"),
    ("confine.py", "return _ORIGINAL_OPEN(full, mode, *args, **kwargs)"),
    ("confine.py", "return _ORIGINAL_OPEN(file, mode, *args, **kwargs)"),
    ("confine.py", "return original(*args, **kwargs)"),
    ("confine.py", "return original(full, *args, **kwargs)"),
    ("confine.py", "return original(path, *args, **kwargs)   # realpath() below stats through us: no recursion"),
    # a numpy constructor the cell called (np.frombuffer(1): TypeError), its result checked after
    ("guards.py", 'return _checked_array(gates, np, fn(*args, **kwargs), f"numpy.{fn.__name__}()")'),
    # the df.query walker mirrors pandas' evaluator, which raises the same for "a.__class__ == 1"
    ("pandas_query.py", "return issubclass(t, (datetime.datetime, _numpy().datetime64))"),
}

# Findings the fuzzer made that are recorded as strict-xfail tests in tests/test_fuzz_findings.py (not
# fixed yet): the same breach again is counted as known, not new. A finding is known when one problem
# matches the entry's first pattern, every problem matches one of its patterns, and the cell matches
# every pattern of KNOWN_CELLS for it (a breach as broad as a memory write is known only by its route).
KNOWN_CELLS = {
    "test_late_equal_name_plants_a_raw_array_protocol_through_enum": [
        r"Late\('__array_(interface|struct)__', \d\)", r"enum\.(Enum|global_enum)\(",
    ],
}
KNOWN_FINDINGS = {
    "test_late_equal_name_plants_a_raw_array_protocol_through_enum": [
        r"^host memory written: math\.tau is ",
    ],
    "test_library_starts_multiprocessing_resource_tracker": [
        r"^processes were started: \[\(\d+, '[^']*multiprocessing\.resource_tracker[^']*'\)\]$",
        # the tracker is a Python started in the fuzzer's working directory: its sys.path[0] lists it
        r"^files outside the working directory were accessed: \['open [^']*', 'read [^']*'\]$",
    ],
}


def known_finding(problems: list[str], cell: str = "") -> str | None:
    """The name of the xfail test that records these problems, or None when they are new."""
    import re

    for name, patterns in KNOWN_FINDINGS.items():
        if any(re.search(patterns[0], p) for p in problems) and \
                all(any(re.search(pattern, p) for pattern in patterns) for p in problems) and \
                all(re.search(pattern, cell or "") for pattern in KNOWN_CELLS.get(name, ())):
            return name
    return None


SECURITY_CORE = ("rewriter.py", "gates.py", "guards.py", "confine.py", "builtins_table.py", "limits.py")
PACKAGE_DIR = os.path.dirname(os.path.abspath(__import__("sandbox_kernel").__file__))


class Scene:
    """A secret file and an empty `outside` directory next to the working directory, a loopback listener,
    the secret in a host module and in the environment."""

    def __init__(self, parent: str | None = None):
        from sandbox_kernel.audit.scene import Listener
        self.root = os.path.realpath(tempfile.mkdtemp(prefix="sandbox-fuzz-", dir=parent))
        self.work = os.path.join(self.root, "work")
        self.outside = os.path.join(self.root, "outside")
        os.mkdir(self.work)
        os.mkdir(self.outside)
        self.token = "FUZZ-SECRET-" + secrets.token_hex(12)
        self.secret_path = os.path.join(self.outside, "secret.txt")
        with open(self.secret_path, "w") as fh:
            fh.write(self.token + "\n")
        self.secret_stat = os.stat(self.secret_path)
        self.canary_path = os.path.join(self.outside, "canary.csv")
        self.marker = os.path.join(self.outside, "marker-spawned")
        self.listener = Listener()
        self.watch = FileWatch({self.root: {"work"}, self.outside: set()})
        module = types.ModuleType(SECRET_MODULE)
        module.SECRET = self.token
        sys.modules[SECRET_MODULE] = module
        os.environ[SECRET_ENV] = self.token

    def placeholders(self) -> dict:
        return {"secret_path": self.secret_path, "canary_path": self.canary_path, "marker": self.marker,
                "port": self.listener.port}

    def ignore_own_access(self):
        """What the host itself did in the scene so far (setting up, checking) is not a cell's doing."""
        self.watch.events()

    def touched(self) -> list[str]:
        """Canaries touched so far (each a sentence)."""
        found = []
        accessed = self.watch.events()   # first: the checks below open the scene themselves
        if accessed:
            found.append(f"files outside the working directory were accessed: {accessed[:8]}")
        started = child_processes()
        if started:
            found.append(f"processes were started: {started[:5]}")
        extra = sorted(set(os.listdir(self.outside)) - {"secret.txt"})
        if extra:
            found.append(f"files appeared outside the working directory: {extra}")
        try:
            st = os.stat(self.secret_path)
            with open(self.secret_path) as fh:
                if fh.read() != self.token + "\n" or st.st_mtime_ns != self.secret_stat.st_mtime_ns:
                    found.append("the secret file outside was changed")
        except FileNotFoundError:
            found.append("the secret file outside was removed")
        self.listener.settle(0.2)
        if self.listener.received:
            found.append(f"the loopback listener got {len(self.listener.received)} connection(s)")
        self.watch.events()
        return found

    def leaked(self, text: str) -> bool:
        return self.token in text

    def reset(self):
        """After a finding: clear the evidence so the next cell is judged on its own."""
        for name in os.listdir(self.outside):
            if name != "secret.txt":
                path = os.path.join(self.outside, name)
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
        with open(self.secret_path, "w") as fh:
            fh.write(self.token + "\n")
        self.secret_stat = os.stat(self.secret_path)
        self.listener.received.clear()
        for pid, _ in child_processes():
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self.watch.events()

    def close(self):
        self.watch.close()
        self.listener.close()
        sys.modules.pop(SECRET_MODULE, None)
        shutil.rmtree(self.root, ignore_errors=True)


class FileWatch:
    """inotify on some directories: every open, read, write, change, creation, removal or rename in them
    (or of them) since the last call, except of the entries named in `ignored` (the working directory)."""

    _MASK = 0x1 | 0x2 | 0x4 | 0x20 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
    _NAMES = {0x1: "read", 0x2: "write", 0x4: "attrib", 0x20: "open", 0x40: "moved-from", 0x80: "moved-to",
              0x100: "create", 0x200: "delete", 0x400: "delete-self", 0x800: "move-self", 0x4000: "overflow"}

    def __init__(self, ignored: dict):
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        self.dirs = {}
        for path, names in ignored.items():
            wd = libc.inotify_add_watch(self.fd, os.fsencode(path), self._MASK)
            if wd < 0:
                raise OSError(ctypes.get_errno(), f"inotify_add_watch {path}")
            self.dirs[wd] = (path, {os.fsencode(n) for n in names})

    def events(self) -> list[str]:
        """'<what> <path>' for each event since the last call (repeats folded)."""
        seen: list[str] = []
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return seen
            offset = 0
            while offset < len(data):
                wd, mask, _cookie, size = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16:offset + 16 + size].rstrip(b"\0")
                offset += 16 + size
                if mask & 0x8000 or wd not in self.dirs:   # IN_IGNORED: a watched directory went away
                    continue
                path, ignored = self.dirs[wd]
                if name in ignored:
                    continue
                what = "+".join(label for bit, label in self._NAMES.items() if mask & bit) or hex(mask)
                event = f"{what} {os.path.join(path, os.fsdecode(name)) if name else path}"
                if event not in seen:
                    seen.append(event)

    def close(self):
        os.close(self.fd)


def child_processes() -> list[tuple[int, str]]:
    """(pid, command line) of this process's children: the fuzzer itself starts none."""
    found = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/children") as fh:
                pids = [int(p) for p in fh.read().split()]
        except OSError:
            continue
        found += [(pid, _command_line(pid)) for pid in pids]
    return found


def _command_line(pid: int) -> str:
    """A child's command line; empty until its exec has happened, so asked again a few times."""
    import time

    for _ in range(20):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            return "?"
        if cmdline:
            return cmdline[:120]
        time.sleep(0.05)
    return ""


def _dict_print(d) -> tuple:
    return tuple(d), tuple(map(id, d.values()))


class HostState:
    """A fingerprint of the host: watched modules' and their classes' dicts, builtins, sys, environment.
    The classes watched are those of the watched modules when the fingerprint was (re)taken."""

    def __init__(self):
        self.tau = math.tau + 0.0   # a float object of its own: a raw write changes math.tau's
        self._rebase()

    def _rebase(self):
        self.modules = {name: mod for name, mod in list(sys.modules.items())
                        if type(mod) is types.ModuleType and name.split(".")[0] in WATCHED_TOPS}
        classes = {}
        for name, mod in self.modules.items():
            for value in list(mod.__dict__.values()):
                if isinstance(value, type) and id(value) not in classes:
                    classes[id(value)] = (f"{name}:{value.__qualname__}", value)
        self.classes = classes
        self.snapshot = self._take()

    def _take(self) -> dict:
        out = {name: _dict_print(mod.__dict__) for name, mod in self.modules.items()}
        for key, (label, cls) in self.classes.items():
            out[key] = _dict_print(cls.__dict__)
        out["<sys.modules>"] = (tuple(sys.modules), tuple(map(id, sys.modules.values())))
        out["<sys.path>"] = (tuple(sys.path), ())
        out["<sys.meta_path>"] = (tuple(map(id, sys.meta_path)), ())
        out["<environ>"] = (tuple(sorted(os.environ.items())), ())
        out["<cwd>"] = ((os.getcwd(),), ())
        return out

    def changes(self) -> list[str]:
        """What changed since the fingerprint (each a sentence); then the fingerprint is taken anew."""
        found = []
        if math.tau != self.tau:
            found.append(f"host memory written: math.tau is {math.tau!r}")
        now = self._take()
        for key, old in self.snapshot.items():
            new = now[key]
            if old == new:
                continue
            (keys, ids), (new_keys, new_ids) = old, new
            if key == "<sys.modules>":
                before = dict(zip(keys, ids))
                replaced = [k for k, i in zip(new_keys, new_ids) if k in before and before[k] != i]
                gone = [k for k in keys if k not in set(new_keys)]
                if replaced or gone:
                    found.append(f"sys.modules changed: replaced {replaced[:5]}, removed {gone[:5]}")
                continue
            if isinstance(key, str) and key.startswith("<"):
                found.append(f"{key[1:-1]} changed")
                continue
            label, holder = (key, self.modules[key]) if isinstance(key, str) else self.classes[key]
            module = label.split(":")[0]
            before, after = dict(zip(keys, ids)), dict(zip(new_keys, new_ids))
            replaced = [k for k in before if k in after and before[k] != after[k] and (module, k) not in VOLATILE]
            removed = [k for k in before if k not in after]
            added = [k for k in after if k not in before and k not in CACHE_KEYS
                     and not isinstance(holder.__dict__.get(k), types.ModuleType)]
            if replaced or removed or added:
                found.append(f"{label} changed: replaced {replaced[:5]}, removed {removed[:5]}, added {added[:5]}")
        if len(sys.modules) != len(self.snapshot["<sys.modules>"][0]):
            self._rebase()   # modules loaded by the cell: watched from now on
        else:
            self.snapshot = now
        self.tau = math.tau + 0.0
        return found


_SOURCES: dict[str, list[str]] = {}
_SOURCE_HASHES: dict[str, str] = {}


def snapshot_runtime_sources() -> None:
    """The runtime's source as it was imported: the judge reads lines from here, not from the disk, where
    other people's edits would shift every line during a run (linecache refreshes from the disk whenever
    a traceback is formatted)."""
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None) or ""
        if filename.startswith(PACKAGE_DIR + os.sep) and filename.endswith(".py"):
            with open(filename, encoding="utf-8") as fh:
                text = fh.read()
            _SOURCES[filename] = text.splitlines()
            _SOURCE_HASHES[os.path.basename(filename)] = source_hash(text)


def source_hash(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16]


def save_imported_sources(directory: str) -> None:
    """Writes the security core's files as imported into `directory`."""
    os.makedirs(directory, exist_ok=True)
    for filename, lines in _SOURCES.items():
        if os.path.basename(filename) in SECURITY_CORE:
            with open(os.path.join(directory, os.path.basename(filename)), "w", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")


def imported_source_hashes() -> dict[str, str]:
    """The security core's files as this process imported them (coverage is only comparable between
    processes that ran the same source)."""
    return {name: _SOURCE_HASHES[name] for name in SECURITY_CORE if name in _SOURCE_HASHES}


def _source_line(filename: str, lineno: int) -> str:
    lines = _SOURCES.get(filename)
    if lines is None:
        return linecache.getline(filename, lineno).strip()
    return lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""


def internal_error(exc: BaseException) -> str | None:
    """A sentence when `exc` (what a cell ended with, or caught) was raised by the runtime's own code by
    accident: not a denial or limit, raised in a sandbox_kernel frame on a line that is not a `raise` and
    not a place where the gate performs the cell's own operation. None otherwise. Runs none of the
    cell's code: exact types, BaseException's own descriptors, str arguments only."""
    from sandbox_kernel import engine
    from sandbox_kernel.denials import LimitExceeded, SandboxViolation

    kind = type(exc)
    if kind is getattr(engine, "CellError", None):
        kind = exc.kind   # the engine keeps a cell's exception as plain data once the cell is over
    if issubclass(kind, (SandboxViolation, LimitExceeded)) or not issubclass(kind, Exception):
        return None
    tb = BaseException.__traceback__.__get__(exc)   # the cell's class may define its own __traceback__
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    if not frames:
        return None
    last = frames[-1]
    if issubclass(kind, RecursionError) and not all(
            f.tb_frame.f_code.co_filename.startswith(PACKAGE_DIR + os.sep) for f in frames[-100:]):
        return None   # the cell's own recursion: the runtime's frame was merely the deepest one
    filename = last.tb_frame.f_code.co_filename
    if not filename.startswith(PACKAGE_DIR + os.sep):
        return None
    line = _source_line(filename, last.tb_lineno)
    base = os.path.basename(filename)
    if line.startswith("raise") or (base, line) in DELEGATION_SITES:
        return None
    args = BaseException.args.__get__(exc)
    message = args[0] if len(args) == 1 and type(args[0]) is str else f"<{len(args)} arguments>"
    return (f"{type.__dict__['__name__'].__get__(kind)}: {message[:200]} raised by the runtime at "
            f"{base}:{last.tb_lineno} in {last.tb_frame.f_code.co_name} ({line})")


def caught_exceptions(namespace: dict) -> list[BaseException]:
    """The exceptions a generated cell caught and kept (the lists `pool` and `errors`), read without
    running any of the cell's code: exact types only, no attribute of a cell object."""
    found = []
    for key in ("pool", "errors"):
        kept = namespace.get(key)
        if type(kept) is not list:
            continue
        for item in list.copy(kept):
            if issubclass(type(item), BaseException):
                found.append(item)
    return found


def strings_of(namespace: dict) -> list[str]:
    """The exact strs among the namespace's values and in its `pool` list (no cell code runs)."""
    out = [v for v in list(namespace.values()) if type(v) is str]
    kept = namespace.get("pool")
    if type(kept) is list:
        out += [v for v in list.copy(kept) if type(v) is str]
    return out


def cell_text_of(events: list, done: dict) -> str:
    return json.dumps(events, default=str) + json.dumps(done, default=str)
