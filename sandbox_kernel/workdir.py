"""Is the sandbox working directory a safe place to let cells read and write files?

A files-enabled policy lets cells write anywhere inside the working directory. Jupyter starts a kernel
in the notebook's directory, which may be the user's home or a checkout of this package. There a cell
could write IPython/Jupyter configuration or startup files, a kernelspec, shell start-up files, SSH keys,
the sandbox's own source or policy files: code the host runs later, outside the sandbox (and read
secrets such as the kernel's connection key). The kernel turns files off when the working directory
holds any such place, and says why.
"""
from __future__ import annotations

import os
import site
import sys


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def _inside(path: str, directory: str) -> bool:
    """`path` is `directory` or lies below it."""
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def control_paths(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Places the host trusts, by what they are."""
    paths: dict[str, str] = {"your home directory": os.path.expanduser("~")}
    try:
        from IPython.paths import get_ipython_dir

        paths["IPython's configuration directory"] = get_ipython_dir()
    except Exception:  # IPython missing or its directory unusable: nothing to protect there
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


def workdir_hazards(workdir: str, extra: dict[str, str] | None = None) -> list[str]:
    """What trusted places lie inside `workdir` (empty when it is safe for a files policy)."""
    root = _real(workdir)
    found = []
    for what, path in control_paths(extra).items():
        if path and _inside(_real(path), root) and what not in found:
            found.append(what)
    return found
