"""A new user's path: a plain `pip install` gives everything the default level needs, a missing OS
piece is named with its exact fix (and nothing runs), and the worker starts with the kernel.

The full proof, a fresh virtualenv with `pip install <checkout>` (no extras) and `python -m
sandbox_kernel install`, takes minutes and the network; it is done by hand (the README's commands)."""
from __future__ import annotations

import os
import stat
import sys
import time

import psutil
import pytest

from kernel_helpers import start_client
from sandbox_kernel.isolation import landlock, make_backend
from sandbox_kernel.policy import PRESETS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINUX = sys.platform.startswith("linux")


def _pyproject() -> dict:
    try:
        import tomllib
    except ImportError:   # Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)


def test_the_default_levels_python_dependency_is_a_plain_dependency_on_linux():
    project = _pyproject()["project"]
    seccomp = [d for d in project["dependencies"] if d.replace(" ", "").startswith("pyseccomp")]
    assert seccomp and "sys_platform=='linux'" in seccomp[0].replace(" ", "").replace('"', "'"), seccomp
    # the old extra still resolves, so `pip install "sandbox_kernel[kernel]"` keeps working
    assert "kernel" in project["optional-dependencies"]


def test_the_license_is_an_spdx_string_so_the_build_prints_no_deprecation_banner():
    assert _pyproject()["project"]["license"] == "BSD-3-Clause"


def _python_without_pyseccomp(tmp_path) -> str:
    """An interpreter for the worker (WorkerBackend's `python`) in which pyseccomp cannot be imported,
    as in an environment where it was never installed."""
    wrapper = tmp_path / "python-without-pyseccomp"
    wrapper.write_text(
        "#!/bin/sh\n"
        "# called as: <this> -I -m sandbox_kernel.isolation.worker --fd N ...\n"
        "shift 3\n"
        f"exec '{sys.executable}' -I -c \"import sys; sys.modules['pyseccomp'] = None; "
        "from sandbox_kernel.isolation.worker import main; sys.exit(main())\" \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


@pytest.mark.skipif(not LINUX, reason="the kernel level is Linux's")
def test_a_missing_pyseccomp_refuses_cells_and_names_the_exact_fix(tmp_path):
    workdir = tmp_path / "work"
    backend = make_backend("kernel", PRESETS["data-science"], workdir=str(workdir), spare=False,
                           python=_python_without_pyseccomp(tmp_path))
    try:
        events: list = []
        done = backend.run_cell("open('ran.txt', 'w').write('x')", emit=events.append)
    finally:
        backend.shutdown()
    assert done["status"] == "error" and done["error"]["ename"] == "SandboxUnavailable"
    message = done["error"]["evalue"]
    assert f"'{sys.executable} -m pip install pyseccomp'" in message, message
    # how an operator runs cells meanwhile, and that a cell cannot do it
    assert "python -m sandbox_kernel install --isolation process" in message
    assert "--SandboxKernel.isolation_degraded=True" in message and "%sandbox_isolation cannot" in message
    assert "sandbox_kernel[kernel]" not in message   # wrong for an install from a checkout
    assert not (workdir / "ran.txt").exists(), "a cell ran although the level was not set up"


def test_missing_landlock_names_what_the_host_needs(monkeypatch):
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    with pytest.raises(landlock.LandlockError) as info:
        landlock.restrict(None)
    text = str(info.value)
    assert "Linux >= 5.13" in text and "lsm=" in text and "/sys/kernel/security/lsm" in text


@pytest.mark.skipif(not LINUX, reason="the kernel level is Linux's")
def test_the_worker_starts_with_the_kernel_before_any_cell(tmp_path):
    """The first cell must not wait for a worker that only starts when it arrives: once the kernel
    answers kernel_info, its worker is already there (no execute_request has been sent)."""
    client = start_client(cwd=str(tmp_path), isolation="kernel")
    try:
        kernel = psutil.Process(client.km.provisioner.pid)
        deadline = time.monotonic() + 60   # how long to look, not a claim about speed

        def workers():
            found = []
            for child in kernel.children(recursive=True):
                try:
                    if "sandbox_kernel.isolation.worker" in " ".join(child.cmdline()):
                        found.append(child)
                except psutil.Error:
                    pass
            return found

        while not workers() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert workers(), "no sandbox worker was started with the kernel"
        result = client.run("1 + 1")
        assert result["status"] == "ok"
    finally:
        client.shutdown()
