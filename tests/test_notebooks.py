"""Every notebook in notebooks/ runs with the Sandboxed Python kernel under nbclient. Cells tagged
`raises-exception` must really fail (a demo that claims a refusal must show one); others must not."""
import glob
import os
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from kernel_helpers import KERNEL_NAME, require_kernelspec

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))


def test_there_is_a_tour():
    assert os.path.join(ROOT, "notebooks", "tour.ipynb") in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, tmp_path):
    require_kernelspec()
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == KERNEL_NAME
    shutil.copy(path, tmp_path)
    NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if "raises-exception" in cell.metadata.get("tags", []):
            assert errors, f"cell tagged raises-exception did not fail:\n{cell.source}"
            assert len(errors[0].traceback) <= 6, "a refusal should read as a line or two, not a dump"
        else:
            assert not errors, f"unexpected error in:\n{cell.source}\n{errors}"


def test_tour_shows_each_feature(tmp_path):
    nb = nbformat.read(os.path.join(ROOT, "notebooks", "tour.ipynb"), as_version=4)
    NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    mimes = {m for c in nb.cells if c.cell_type == "code" for o in c.outputs for m in o.get("data", {})}
    assert {"text/html", "application/vnd.plotly.v1+json"} <= mimes
    assert (tmp_path / "tour-sales.csv").exists() and (tmp_path / "tour-notes.txt").exists()
    assert not (tmp_path.parent / "outside-the-sandbox.txt").exists()
    text = "\n".join(o.get("text", "") + "\n".join(o.get("traceback", []))
                     for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    missing = [m for m in ("ImportDenied", "FileDenied", "time limit") if m not in text]
    assert not missing, f"missing {missing} in the tour's outputs:\n{text[-6000:]}"


def test_run_command_prints_each_cells_outputs():
    require_kernelspec()
    out = subprocess.run([sys.executable, "-m", "sandbox_kernel", "run",
                          os.path.join(ROOT, "notebooks", "tour.ipynb")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "--- cell" in out.stdout and "[raises-exception]" in out.stdout
    assert "application/vnd.plotly.v1+json" in out.stdout and "best city" in out.stdout
    assert not os.path.exists(os.path.join(ROOT, "notebooks", "tour-sales.csv"))


def test_run_command_fails_on_an_unexpected_error(tmp_path):
    require_kernelspec()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import socket")],
                                  metadata={"kernelspec": {"name": KERNEL_NAME, "display_name": "x",
                                                           "language": "python"}})
    path = tmp_path / "fails.ipynb"
    nbformat.write(nb, path)
    out = subprocess.run([sys.executable, "-m", "sandbox_kernel", "run", str(path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "ImportDenied" in out.stdout
