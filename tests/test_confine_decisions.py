"""confine.py's decisions, one behaviour each (issue 13, item 3: mutation testing).

Each test pins a decision of sandbox_kernel/confine.py that a mutant changed without any focused test
noticing (docs/mutation.md, run 3, lists which mutant each test kills). The path hooks are the first wall:
a cell's own open, os.*, socket never reach the audit hook with a path outside the working directory, so
the audit hook (the backstop for a library that kept the original function, or opens from C) is tested
here with the events a library raises, called inside a confinement set up as the engine sets it up
(confine.enter/leave). Each test asserts the refusal and, where a flipped condition could pass it, the
ordinary use next to it.
"""
from __future__ import annotations

import mmap
import os
import socket
import sys

import pytest

from sandbox_kernel import confine
from sandbox_kernel.denials import FileDenied, NetworkDenied, OperationDenied


def _raise(exc):
    raise exc


@pytest.fixture
def files(sandbox):
    """The cell's files object for the sandbox's working directory (the Engine has installed the hooks)."""
    return confine.ConfinedFiles(str(sandbox.workdir), _raise)


def _audit(files, event, args, network=False):
    """What the audit hook does with this event while a cell runs: the exception it raises, or None."""
    tokens = confine.enter(files, network, None)
    try:
        confine._audit(event, args)
    except Exception as exc:   # noqa: BLE001 - the outcome is what the test asserts
        return exc
    finally:
        confine.leave(tokens)
    return None


_INSTALLED = os.path.realpath(os.__file__)   # a file of the standard library: the installation


# -- ConfinedFiles.open: the first wall, on its own ---------------------------------------------------

def test_open_refuses_a_hidden_write_by_itself_and_names_the_file_as_given(files, sandbox):
    with pytest.raises(FileDenied) as refused:
        files.open(".bashrc", "w")
    assert refused.value.target == ".bashrc"
    assert not (sandbox.workdir / ".bashrc").exists()
    with files.open("data.txt", "w") as f:   # the ordinary write next to it
        f.write("1")
    assert (sandbox.workdir / "data.txt").read_text() == "1"


def test_a_cell_cannot_hold_more_files_open_than_the_cap(run, monkeypatch):
    held = sum(1 for f in list(confine._OPENED) if not f.closed)
    monkeypatch.setattr(confine, "_max_open_files", lambda: held + 2)
    r = run("a = open('a.txt', 'w')\nb = open('b.txt', 'w')\nc = open('c.txt', 'w')")
    assert not r.ok and r.denied("file", line=3) and "at most" in r.error_value, r
    r = run("a.close()\nc = open('c.txt', 'w')\nb.close()\nc.close()")
    assert r.ok, r


# -- ConfinedFiles.check_path: what a refusal shows ---------------------------------------------------

def test_the_backstop_names_a_hidden_write_relative_to_the_working_directory(files, sandbox):
    target = str(sandbox.workdir / ".ipython" / "startup.py")
    refused = _audit(files, "open", (target, "w", os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
    assert isinstance(refused, FileDenied), refused
    assert refused.target == os.path.join(".ipython", "startup.py")


def test_the_backstop_never_shows_an_absolute_path_outside(files, outside):
    target = outside / "secret.txt"
    refused = _audit(files, "open", (str(target), "r", os.O_RDONLY))
    assert isinstance(refused, FileDenied) and refused.target == "an absolute path", refused
    assert str(outside) not in str(refused)
    relative = os.path.relpath(target)   # a relative path is shown as written
    refused = _audit(files, "open", (relative, "r", os.O_RDONLY))
    assert isinstance(refused, FileDenied) and refused.target == relative, refused


# -- _audit: open ----------------------------------------------------------------------------------------

def test_the_backstop_lets_a_library_read_the_installation_with_os_open(files):
    assert _audit(files, "open", (_INSTALLED, None, os.O_RDONLY)) is None
    assert _audit(files, "open", (_INSTALLED,)) is None


def test_the_backstop_refuses_writes_told_by_flags_alone(files, sandbox):
    # os.open raises ('open', path, None, flags): no mode, the flags say it writes
    beside = os.path.join(os.path.dirname(_INSTALLED), "sitecustomize_from_a_cell.py")
    assert isinstance(_audit(files, "open", (beside, None, os.O_WRONLY | os.O_CREAT)), FileDenied)
    hidden = str(sandbox.workdir / ".bashrc")
    assert isinstance(_audit(files, "open", (hidden, None, os.O_RDWR)), FileDenied)
    assert isinstance(_audit(files, "open", (hidden, "w", 0)), FileDenied)   # and a mode alone
    assert _audit(files, "open", (str(sandbox.workdir / "data.csv"), None, os.O_WRONLY | os.O_CREAT)) is None


# -- _audit: path events, _on_import_path ---------------------------------------------------------------

def test_the_backstop_lists_only_import_path_entries_outside(files, outside):
    assert isinstance(_audit(files, "os.listdir", (str(outside),)), FileDenied)
    assert isinstance(_audit(files, "os.scandir", (str(outside),)), FileDenied)
    entry = next(p for p in sys.path if p and os.path.isdir(p))
    assert _audit(files, "os.listdir", (entry,)) is None   # the import system looking for a module


def test_the_backstop_checks_every_path_argument(files, sandbox, outside):
    victim = outside / "keep.txt"
    victim.write_text("x")
    assert isinstance(_audit(files, "os.remove", (str(victim), -1)), FileDenied)
    inside = str(sandbox.workdir / "a.txt")
    assert isinstance(_audit(files, "os.rename", (inside, str(victim), -1, -1)), FileDenied)
    assert _audit(files, "os.rename", (inside, str(sandbox.workdir / "b.txt"), -1, -1)) is None
    assert victim.read_text() == "x"


def test_a_file_url_inside_the_working_directory_is_read_and_outside_refused(files, sandbox, outside):
    inside = "file://" + str(sandbox.workdir / "data.csv")
    assert _audit(files, "urllib.Request", (inside, None, {}, "GET")) is None
    refused = _audit(files, "urllib.Request", ("file://" + str(outside / "x.csv"), None, {}, "GET"))
    assert isinstance(refused, FileDenied), refused


# -- _audit: memory maps ----------------------------------------------------------------------------------
# ('mmap.__new__', fileno, length, access, offset)

@pytest.fixture
def descriptors(sandbox, outside):
    (sandbox.workdir / "big.csv").write_text("a,b\n1,2\n")
    (outside / "secret.bin").write_text("secret")
    inside = os.open(sandbox.workdir / "big.csv", os.O_RDONLY)
    out = os.open(outside / "secret.bin", os.O_RDONLY)
    yield inside, out
    os.close(inside)
    os.close(out)


def test_a_library_maps_a_file_of_the_working_directory_at_any_offset(files, descriptors):
    inside, _ = descriptors
    assert _audit(files, "mmap.__new__", (inside, 0, mmap.ACCESS_READ, 0)) is None
    assert _audit(files, "mmap.__new__", (inside, 4096, mmap.ACCESS_READ, 1 << 20)) is None


def test_a_map_of_a_file_outside_is_refused(files, descriptors):
    _, out = descriptors
    assert isinstance(_audit(files, "mmap.__new__", (out, 0, mmap.ACCESS_READ, 0)), FileDenied)


def test_an_anonymous_map_is_allowed(files):
    assert _audit(files, "mmap.__new__", (-1, 4096, mmap.ACCESS_WRITE, 0)) is None


def test_a_map_of_descriptor_zero_is_checked_too(files, descriptors):
    _, out = descriptors
    saved = os.dup(0)
    os.dup2(out, 0)
    try:
        refused = _audit(files, "mmap.__new__", (0, 0, mmap.ACCESS_READ, 0))
    finally:
        os.dup2(saved, 0)
        os.close(saved)
    assert isinstance(refused, FileDenied), refused


# -- _audit: network, _network_denied ---------------------------------------------------------------

def test_a_network_denial_names_the_host(files):
    for event, args in (("socket.getaddrinfo", ("blocked.example", 80, 0, 0, 0)),
                        ("socket.gethostbyname", ("blocked.example",)),
                        ("socket.connect", (object(), ("blocked.example", 80)))):
        refused = _audit(files, event, args)
        assert isinstance(refused, NetworkDenied) and refused.target == "'blocked.example'", (event, refused)


def test_local_sockets_are_allowed_and_internet_sockets_refused(files):
    sock = object()   # ('socket.__new__', self, family, type, proto)
    assert _audit(files, "socket.__new__", (sock, socket.AF_UNIX, socket.SOCK_STREAM, 0)) is None
    refused = _audit(files, "socket.__new__", (sock, socket.AF_INET, socket.SOCK_STREAM, 0))
    assert isinstance(refused, NetworkDenied), refused


def test_a_policy_with_network_lets_the_cell_reach_it(files):
    tokens = confine.enter(files, True, None)
    try:
        denied = confine._network_denied()
        refused = None
        try:
            confine._audit("socket.getaddrinfo", ("allowed.example", 80, 0, 0, 0))
        except Exception as exc:   # noqa: BLE001
            refused = exc
    finally:
        confine.leave(tokens)
    assert not denied and refused is None, refused
    assert isinstance(_audit(files, "socket.getaddrinfo", ("blocked.example", 80, 0, 0, 0)), NetworkDenied)


# -- _in_the_working_directory ---------------------------------------------------------------------------

def test_a_file_of_the_working_directory_is_never_installed_code(files, sandbox, monkeypatch):
    module = str(sandbox.workdir / "mod.py")
    monkeypatch.chdir(sandbox.workdir)   # the kernel runs in its working directory
    tokens = confine.enter(files, False, None)
    try:
        answers = (confine._in_the_working_directory(module),
                   confine._in_the_working_directory(_INSTALLED),
                   # a relative name (a frozen module's '<frozen ...>') is no file of the working directory
                   confine._in_the_working_directory("<frozen importlib.util>"))
    finally:
        confine.leave(tokens)
    assert answers == (True, False, False)
