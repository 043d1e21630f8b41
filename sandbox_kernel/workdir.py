"""Which places the sandbox may be given rights on: the one list of places the host trusts, and the one
decision about every grant.

A files-enabled policy lets cells write anywhere inside the working directory. Jupyter starts a kernel
in the notebook's directory, which may be the user's home or a checkout of this package. There a cell
could write IPython/Jupyter configuration or startup files, a kernelspec, shell start-up files, SSH keys,
the sandbox's own source or policy files: code the host runs later, outside the sandbox (and read
secrets such as the kernel's connection key). The kernel turns files off when the working directory
holds any such place, and says why (:func:`workdir_hazards`). The worker's Landlock plan asks
:func:`grant_refusal` about every path it would open, whatever the kernel decided.

Three kinds of protected place:

* ``SECRET`` (SSH keys, Jupyter runtime/config/data directories, the IPython directory, the kernel's
  connection file): no right on it, inside it, or on any directory that holds it;
* ``HOME``: no right on it or on any directory that holds it (what lies below it is the user's own:
  projects, virtualenvs, a pyenv Python);
* ``CODE`` (the Python installation, site-packages, this package, Jupyter's search paths, the
  operator's policy files): no write right on it, inside it, or on any directory that holds it.
"""
from __future__ import annotations

import os
import shutil
import site
import stat
import sys
import tempfile
import time

SECRET, HOME, CODE = "secret", "home", "code"


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def _inside(path: str, directory: str) -> bool:
    """`path` is `directory` or lies below it."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def control_paths(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Places the host trusts, by what they are (as this process's environment names them)."""
    paths: dict[str, str] = {"your home directory": os.path.expanduser("~")}
    # IPython's own answer where it is loaded (the kernel); its default rule elsewhere (importing IPython
    # costs a worker backend 70 ms).
    paths["IPython's configuration directory"] = os.environ.get("IPYTHONDIR") or os.path.expanduser("~/.ipython")
    if "IPython" in sys.modules:
        try:
            from IPython.paths import get_ipython_dir

            paths["IPython's configuration directory"] = get_ipython_dir()
        except Exception:  # noqa: BLE001 - its directory unusable: keep the default rule
            pass
    try:
        from jupyter_core import paths as jp

        paths["Jupyter's configuration directory"] = jp.jupyter_config_dir()
        paths["Jupyter's data directory (kernelspecs)"] = jp.jupyter_data_dir()
        paths["Jupyter's runtime directory (connection keys)"] = jp.jupyter_runtime_dir()
        for i, p in enumerate(jp.jupyter_path() + jp.jupyter_config_path()):
            paths[f"a Jupyter search path ({i})"] = p
    except Exception:
        pass
    paths["the Python installation"] = sys.prefix
    paths["the base Python installation"] = sys.base_prefix
    for i, p in enumerate(list(getattr(site, "getsitepackages", lambda: [])()) + [site.getusersitepackages()]):
        paths[f"a site-packages directory ({i})"] = p
    paths["the sandbox_kernel package"] = os.path.dirname(os.path.abspath(__file__))
    paths.update({k: v for k, v in (extra or {}).items() if v})
    return paths


def _kind(what: str) -> str:
    if what == "your home directory":
        return HOME
    if what.startswith(("IPython's", "Jupyter's", "your SSH", "your GnuPG", "the kernel's connection",
                        "a path the operator protects")):
        return SECRET
    return CODE


def protected_places(extra: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(kind, what, path) for every place the host trusts, as the host's environment names them (the
    kernel's HOME, JUPYTER_*_DIR, IPYTHONDIR), plus the defaults :func:`own_places` derives."""
    named = control_paths(extra)
    home = named["your home directory"]
    named["your SSH directory"] = os.path.join(home, ".ssh")
    named["your GnuPG directory"] = os.path.join(home, ".gnupg")
    connection = _connection_file()
    if connection:  # the file (its directory may be /tmp); the Jupyter runtime directory is above
        named["the kernel's connection file"] = connection
    places = [(_kind(what), what, path) for what, path in named.items() if path]
    return _unique(places + own_places())


def own_places() -> list[tuple[str, str, str]]:
    """The places a worker protects on its own, from the account database and the interpreter rather
    than from its environment (which the host scrubbed and pointed at the working directory)."""
    places = []
    try:
        import pwd

        home = pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError):
        home = None
    if home:
        places.append((HOME, "your home directory", home))
        for what, rel in (("your SSH directory", ".ssh"), ("your GnuPG directory", ".gnupg"),
                          ("IPython's configuration directory", ".ipython"),
                          ("Jupyter's configuration directory", ".jupyter"),
                          ("Jupyter's data directory (kernelspecs)", ".local/share/jupyter")):
            places.append((SECRET, what, os.path.join(home, rel)))
    places.append((SECRET, "Jupyter's runtime directory (connection keys)", f"/run/user/{os.getuid()}/jupyter"))
    for what, path in (("the Python installation", sys.prefix), ("the base Python installation", sys.base_prefix),
                       ("the sandbox_kernel package", os.path.dirname(os.path.abspath(__file__)))):
        places.append((CODE, what, path))
    for p in getattr(site, "getsitepackages", lambda: [])():
        places.append((CODE, "a site-packages directory", p))
    return _unique(places)


def _unique(places):
    seen, out = set(), []
    for kind, what, path in places:
        real = _real(path)
        if (kind, real) not in seen:
            seen.add((kind, real))
            out.append((kind, what, real))
    return out


def _connection_file() -> str | None:
    """The running kernel's connection file, if this process is an ipykernel (never imports one)."""
    app_module = sys.modules.get("ipykernel.kernelapp")
    if app_module is None:
        return None
    try:
        app = app_module.IPKernelApp
        if app.initialized():
            return getattr(app.instance(), "abs_connection_file", None) or None
    except Exception:  # noqa: BLE001 - no app, or a half-initialised one: nothing to add
        pass
    return None


def grant_refusal(path: str, *, write: bool, places) -> str | None:
    """Why a Landlock rule on `path` (with write rights if `write`) would reach a protected place, or
    None when it may be granted. The one decision for every rule of the worker's plan."""
    real = _real(path)
    for kind, what, place in places:
        holds = _inside(place, real)      # the grant would cover the place
        within = _inside(real, place)     # the grant lies inside the place
        if kind == SECRET and (holds or within):
            return f"{real} {'holds' if holds and real != place else 'is' if holds else 'lies inside'} {what}"
        if kind == HOME and holds:
            return f"{real} {'holds' if real != place else 'is'} {what}"
        if kind == CODE and write and (holds or within):
            return f"{real} {'holds' if holds and real != place else 'is' if holds else 'lies inside'} {what}"
    return None


def writable_dir(workdir: str, scratch: str | None, *, files: bool, places=()) -> tuple[str | None, str | None]:
    """The one directory a worker may write, and why it is not the working directory (None if it is).
    The working directory when files are on and no grant on it reaches a protected place (the host's
    ``places`` and the worker's own); else ``scratch`` (a private empty directory the host made) if
    that is safe; else none."""
    protected = own_places() + [tuple(p) for p in places]
    why = "the policy has no file access" if not files else grant_refusal(workdir, write=True, places=protected)
    if why is None:
        return _real(workdir), None
    if scratch and os.path.isdir(scratch) and grant_refusal(scratch, write=True, places=protected) is None:
        return _real(scratch), why
    return None, why


SCRATCH_PREFIX = "sandbox-worker-"
_swept = False


def make_scratch() -> str:
    """A private, empty directory (0700) for a worker that may not write its working directory. Named
    after this process: a host killed before its exit handlers ran leaves its directories behind, and
    the next host removes them."""
    global _swept
    if not _swept:
        _swept = True
        _sweep_scratch()
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")


def _sweep_scratch(min_age: float = 600.0) -> None:
    """Remove scratch directories of this user whose host process is gone and that were not touched
    for ``min_age`` seconds (a pid seen from another pid namespace may look gone)."""
    now = time.time()
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(SCRATCH_PREFIX):].split("-", 1)[0] if entry.name.startswith(SCRATCH_PREFIX) else ""
        if not pid.isdigit():
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or now - st.st_mtime < min_age:
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue


def workdir_hazards(workdir: str, extra: dict[str, str] | None = None) -> list[str]:
    """What trusted places lie inside `workdir` (empty when it is safe for a files policy)."""
    root = _real(workdir)
    found = []
    for what, path in control_paths(extra).items():
        if path and _inside(_real(path), root) and what not in found:
            found.append(what)
    return found
