"""Every notebook in notebooks/ runs with the Sandboxed Python kernel under nbclient. Cells tagged
`raises-exception` must really fail (a demo that claims a refusal must show one); others must not.
Each notebook is executed once per test run (kernels are the slow part) and its tests read the result."""
import glob
import json
import os
import re
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from kernel_helpers import KERNEL_NAME, require_kernelspec
from sandbox_kernel.policy import PRESETS, Policy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))
PLOTLY = "application/vnd.plotly.v1+json"
_EXECUTED: dict = {}


def executed(name: str, tmp_path_factory):
    """(the executed notebook, its working directory), run once per test session."""
    if name not in _EXECUTED:
        require_kernelspec()
        path = os.path.join(ROOT, "notebooks", name)
        nb = nbformat.read(path, as_version=4)
        workdir = tmp_path_factory.mktemp(name.replace(".ipynb", "")) / "work"
        workdir.mkdir()
        NotebookClient(nb, kernel_name=KERNEL_NAME, timeout=120,
                       resources={"metadata": {"path": str(workdir)}}).execute()
        _EXECUTED[name] = (nb, workdir)
    return _EXECUTED[name]


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def text_of(cell) -> str:
    return "\n".join(o.get("text", "") + "\n".join(o.get("traceback", [])) + o.get("data", {}).get("text/plain", "")
                     for o in cell.outputs)


def test_there_is_a_tour():
    assert os.path.join(ROOT, "notebooks", "tour.ipynb") in NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path, tmp_path_factory):
    assert nbformat.read(path, as_version=4).metadata["kernelspec"]["name"] == KERNEL_NAME
    nb, _ = executed(os.path.basename(path), tmp_path_factory)
    for cell in code_cells(nb):
        errors = [o for o in cell.outputs if o.output_type == "error"]
        if "raises-exception" in cell.metadata.get("tags", []):
            assert errors, f"cell tagged raises-exception did not fail:\n{cell.source}"
            assert len(errors[0].traceback) <= 6, "a refusal should read as a line or two, not a dump"
        else:
            assert not errors, f"unexpected error in:\n{cell.source}\n{errors}"


def test_tour_shows_each_feature(tmp_path_factory):
    nb, tmp_path = executed("tour.ipynb", tmp_path_factory)
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
    assert "--- cell In [1]" in out.stdout and "[raises-exception]" in out.stdout
    # the tour's explanations are printed too (its first markdown cell's heading)
    first_markdown = next(c for c in nbformat.read(os.path.join(ROOT, "notebooks", "tour.ipynb"), as_version=4).cells
                          if c.cell_type == "markdown").source.strip().splitlines()[0]
    assert first_markdown in out.stdout
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


def test_the_analysis_notebook_fits_and_charts_the_trend(tmp_path_factory):
    """The seed's agent use, as a person sees it: pandas, scipy fits, a Plotly chart of the points
    and the trend line, and the agent's result convention shown once."""
    nb, workdir = executed("analysis.ipynb", tmp_path_factory)
    text = "\n".join(text_of(c) for c in code_cells(nb))
    slope = re.search(r"slope ([-+]\d+\.\d+) us per week", text)
    assert slope and float(slope.group(1)) < 0, text[-3000:]   # the generated drift is found by the fit
    charts = [o.data[PLOTLY] for c in code_cells(nb) for o in c.outputs if PLOTLY in o.get("data", {})]
    assert charts, "no Plotly chart"
    traces = charts[0]["data"]
    assert [t.get("mode") for t in traces] == ["markers", "lines"] and traces[1]["name"] == "trend"
    points = traces[0]["y"]
    assert (isinstance(points, list) and len(points) == 60) or (isinstance(points, dict) and "bdata" in points)
    assert (workdir / "t1_history.csv").read_text().startswith("date,t1_us,t1_err_us,trend_us")
    last = code_cells(nb)[-1]
    assert text_of(last).count("Q3 T1 is getting worse") == 1   # the convention's output, once
    assert any(PLOTLY in o.get("data", {}) for o in last.outputs)


def test_the_operators_notebook_shows_presets_ceiling_and_audit(tmp_path_factory):
    nb, _ = executed("operators.ipynb", tmp_path_factory)
    cells = code_cells(nb)
    by_source = {c.source.splitlines()[0]: text_of(c) for c in cells}
    assert "ceiling: data-science" in by_source["%sandbox_policy"]
    assert "isolation: kernel" in by_source["%sandbox_status"] or sys.platform != "linux"
    refused_import = next(text for source, text in by_source.items() if source.startswith("import pandas"))
    assert "ImportDenied" in refused_import and "policy 'strict' (line 1)" in refused_import
    assert "beyond the ceiling" in by_source["%%sandbox --timeout 3600"]
    assert "never printed" not in by_source["%%sandbox --timeout 3600"]
    assert "weaker than this kernel's ceiling" in by_source["%sandbox_isolation none"]
    audit = by_source["%sandbox_audit"]
    assert "import of 'pandas'" in audit and "beyond the ceiling" in audit and "isolation 'none'" in audit


def test_the_operators_notebooks_policy_file_is_a_valid_policy_within_its_ceiling():
    """The policy file the operators notebook shows loads as written, and the ceiling it names holds it."""
    nb = nbformat.read(os.path.join(ROOT, "notebooks", "operators.ipynb"), as_version=4)
    blocks = [b for c in nb.cells if c.cell_type == "markdown" for b in re.findall(r"```json\n(.*?)```", c.source, re.S)]
    assert len(blocks) == 1
    policy = Policy.from_dict(json.loads(blocks[0]))
    assert policy.name == "reporting" and not policy.files and policy.limits.timeout == 20
    assert policy.exceeds(PRESETS["data-science"]) == []
