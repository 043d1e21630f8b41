"""The kernelspec, the installer and the launch command line."""
import json
import os
import struct
import subprocess
import sys
import zlib
from importlib import resources

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from sandbox_kernel.install import DEFAULT_NAME, build_spec, kernel_argv, make_logo_png

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_template_declares_what_jupyter_needs():
    spec = json.loads((resources.files("sandbox_kernel") / "kernelspec" / "kernel.json").read_text())
    assert spec["language"] == "python"
    assert spec["display_name"] == "Sandboxed Python"
    assert spec["interrupt_mode"] == "message"
    assert spec["metadata"]["debugger"] is False
    assert spec["env"]["PLOTLY_RENDERER"] == "plotly_mimetype"


@pytest.mark.parametrize("size", [32, 64])
def test_logos_are_pngs_of_their_size(size):
    data = (resources.files("sandbox_kernel") / "kernelspec" / f"logo-{size}x{size}.png").read_bytes()
    assert _png_size(data) == (size, size)
    assert _png_size(make_logo_png(size)) == (size, size)
    # The IDAT chunk decompresses to one filter byte plus RGBA per pixel per row.
    length = struct.unpack(">I", data[33:37])[0]
    assert len(zlib.decompress(data[41:41 + length])) == size * (1 + 4 * size)


def test_build_spec_fills_the_absolute_interpreter_and_options(tmp_path):
    spec = build_spec(str(tmp_path), display_name="Sandboxed (strict)",
                      options=["--SandboxKernel.policy=strict"])
    written = json.loads((tmp_path / "kernel.json").read_text())
    assert written == spec
    assert os.path.isabs(spec["argv"][0]) and spec["argv"][0] == sys.executable
    assert "{connection_file}" in spec["argv"] and spec["argv"][-1] == "--SandboxKernel.policy=strict"
    assert spec["display_name"] == "Sandboxed (strict)"
    assert sorted(os.listdir(tmp_path)) == ["kernel.json", "logo-32x32.png", "logo-64x64.png"]


def test_install_command_into_a_prefix(tmp_path):
    out = subprocess.run([sys.executable, "-m", "sandbox_kernel", "install", "--prefix", str(tmp_path),
                          "--name", "sbx-test", "--display-name", "SBX", "--policy", "strict"],
                         capture_output=True, text=True, check=True)
    assert "Installed kernelspec 'sbx-test'" in out.stdout
    spec_dir = tmp_path / "share" / "jupyter" / "kernels" / "sbx-test"
    spec = json.loads((spec_dir / "kernel.json").read_text())
    assert spec["display_name"] == "SBX" and "--SandboxKernel.policy=strict" in spec["argv"]
    found = KernelSpecManager(kernel_dirs=[str(tmp_path / "share" / "jupyter" / "kernels")]).find_kernel_specs()
    assert "sbx-test" in found


def test_installed_spec_is_found_by_jupyter():
    spec = KernelSpecManager().get_kernel_spec(DEFAULT_NAME)
    assert spec.display_name == "Sandboxed Python" and spec.interrupt_mode == "message"


def test_kernel_argv_keeps_the_working_directory_off_sys_path(tmp_path):
    """Attack: a cell with file access plants `sandbox_kernel.py` (or any module) in the working
    directory; the next kernel start must not import it."""
    (tmp_path / "sandbox_kernel.py").write_text("raise SystemExit('planted module ran')\n")
    (tmp_path / "planted.py").write_text("raise SystemExit('planted module ran')\n")
    check = ("import sys, sandbox_kernel; print(sandbox_kernel.__file__)\n"
             "try:\n import planted\nexcept ImportError:\n print('not importable')")
    argv = kernel_argv(sys.executable)[:-2]  # drop "-f {connection_file}"
    launch = "from sandbox_kernel.__main__ import main; main()"
    if argv[-2] == "-m":  # Python 3.11+: python -P -m sandbox_kernel; the same flags with -c
        assert argv[-1] == "sandbox_kernel", argv
        probe = [*argv[:-2], "-c", check]
    else:  # Python 3.10: python -c "<path fix>; <launch>"; the same path fix, then the check
        assert argv[-2] == "-c" and argv[-1].endswith(launch), argv
        probe = [*argv[:-1], argv[-1][:-len(launch)] + "\n" + check]
    out = subprocess.run(probe, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out
    assert "planted module ran" not in out.stderr + out.stdout
    assert "not importable" in out.stdout
    assert str(tmp_path) not in out.stdout.splitlines()[0]


def test_top_level_kernelspec_dir_points_to_the_package_copy():
    text = open(os.path.join(ROOT, "kernelspec", "README.md"), encoding="utf-8").read()
    assert "sandbox_kernel/kernelspec" in text
