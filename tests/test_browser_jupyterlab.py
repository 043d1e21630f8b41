"""Proof in a real JupyterLab that nothing a sandboxed cell outputs acts in the browser.

JupyterLab trusts the outputs of cells the user ran: their HTML is inserted without a sanitiser and
their scripts run with the Jupyter server's origin. The kernel's output filter is the wall. This test
starts JupyterLab on loopback, opens a "Sandboxed Python" notebook in Debian's Chromium (headless,
driven by Playwright), runs every cell through the UI, hovers and clicks the outputs, and then asserts
that no payload's script ran, no request left for a remote host (every remote host resolves to a
recording sink), and honest outputs still render. Each attack is reported as its own test.

The control: the same attack cells run through the stock ipykernel (no filter) in a second browser,
and each attack must act there, so a test here cannot pass because its attack went stale.

Skipped where Chromium, Playwright or JupyterLab is missing, unless SANDBOX_BROWSER_TEST=required
(.ci/run sets it once Chromium is installed), where a missing piece fails instead.
Screenshots, the evidence and the JupyterLab log go to tests/artifacts/browser/ on every run.
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from browser import chromium
from browser.attacks import ATTACKS, HONEST, INERT_IN_JUPYTERLAB
from browser.notebook import OUTPUT, SANDBOXED, STOCK

ARTIFACTS = Path(__file__).parent / "artifacts" / "browser"
REQUIRED = os.environ.get("SANDBOX_BROWSER_TEST") == "required"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """One JupyterLab server on loopback for the module."""
    reason = chromium.missing()
    if reason and REQUIRED:
        pytest.fail(f"SANDBOX_BROWSER_TEST=required but {reason}")
    if reason:
        pytest.skip(f"browser test skipped: {reason}")
    from browser.lab import JupyterLab

    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    server = JupyterLab(tmp_path_factory.mktemp("jupyterlab"))
    try:
        server.start()
        specs = server.kernelspecs()
        if SANDBOXED["name"] not in specs:
            pytest.fail(f"JupyterLab does not see the kernelspec '{SANDBOXED['name']}': run `python -m "
                        "sandbox_kernel install --sys-prefix` (scripts/test.sh does)")
        yield server
    finally:
        server.stop()
        if server.log_path.exists():
            shutil.copy(server.log_path, ARTIFACTS / "jupyterlab.log")


@pytest.fixture(scope="module")
def driver(lab):
    """Playwright's driver: one per thread, shared by the module's browsers."""
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    yield playwright
    playwright.stop()


def _session(driver, lab, name, kernelspec, cells):
    from browser.session import Session

    return Session(driver, lab, lab.base / "sessions", name, kernelspec, cells, ARTIFACTS / name)


@pytest.fixture(scope="module")
def sandboxed(driver, lab):
    """The honest cells and every attack, run through the sandboxed kernel at its default level."""
    cells = [(h.id, h.source) for h in HONEST] + [(a.id, a.source) for a in ATTACKS]
    session = _session(driver, lab, "sandboxed", SANDBOXED, cells)
    try:
        yield session.run()
    finally:
        session.close()


@pytest.fixture(scope="module")
def control(driver, lab):
    """The same attacks through the stock ipykernel, whose outputs nothing filters."""
    if STOCK["name"] not in lab.kernelspecs():
        pytest.fail("JupyterLab does not see the stock 'python3' kernelspec (ipykernel installs it)")
    session = _session(driver, lab, "control", STOCK, [(a.id, a.source) for a in ATTACKS])
    try:
        yield session.run()
    finally:
        session.close()


def _outputs(session, name: str) -> str:
    return session.outputs.get(name, "")[:3000]


# -- The setup the proof stands on ---------------------------------------------------------------


def test_jupyterlab_serves_the_plotly_extension(lab):
    assert "jupyterlab-plotly" in lab.lab_extensions()


def test_notebook_runs_sandboxed_at_the_default_level(sandboxed):
    status = sandboxed.outputs["status"]
    assert "policy: data-science" in status, status
    if sys.platform.startswith("linux"):
        assert "isolation: kernel" in status, status
    assert "helpers ready" in sandboxed.outputs["helpers"], sandboxed.outputs["helpers"]


def test_outputs_are_trusted_by_jupyterlab(sandboxed):
    """The attacks go through JupyterLab's trusted path (no sanitiser in the browser), or the test
    would prove nothing about the kernel's filter. (Plotly's renderer does not mark trust.)"""
    untrusted = sandboxed.notebook.page.evaluate(
        f"() => [...document.querySelectorAll('{OUTPUT}:not(.jp-RenderedPlotly)')]"
        ".filter(e => !e.classList.contains('jp-mod-trusted')).map(e => e.textContent.slice(0, 80))")
    assert untrusted == []


# -- Honest outputs still render -----------------------------------------------------------------


def test_dataframe_renders_as_a_table(sandboxed):
    cell = sandboxed.notebook.cell(sandboxed.index["dataframe"])
    table = cell.locator(f"{OUTPUT} table")
    assert table.count() == 1, _outputs(sandboxed, "dataframe")
    text = table.inner_text()
    assert "Oslo" in text and "22" in text and table.locator("tbody tr").count() == 2


def test_plotly_chart_renders_interactive(sandboxed):
    cell = sandboxed.notebook.cell(sandboxed.index["plotly"])
    assert cell.locator(".js-plotly-plot").count() == 1, _outputs(sandboxed, "plotly")
    assert cell.locator(".js-plotly-plot .modebar-container").count() == 1   # zoom, pan, download
    assert cell.locator(".js-plotly-plot .bars .point").count() == 2
    assert "honest bars" in cell.locator(".js-plotly-plot .gtitle").text_content()


def test_large_plotly_chart_renders_from_typed_arrays(sandboxed):
    """Issue 11, 8: a 100k-point Scattergl arrives with its numbers as typed arrays (the kernel packed
    the cell's lists) and jupyterlab-plotly's plotly.js decodes all of them."""
    cell = sandboxed.notebook.cell(sandboxed.index["plotly_large"])
    assert cell.locator(".js-plotly-plot").count() == 1, _outputs(sandboxed, "plotly_large")
    drawn = cell.locator(".js-plotly-plot").evaluate(
        "gd => [gd._fullData[0].type, gd._fullData[0].x.length, gd._fullData[0].x[99999], gd.data[0].x.dtype]")
    assert drawn == ["scattergl", 100_000, 99_999, "i4"], drawn


def test_markdown_renders_as_formatted_text(sandboxed):
    cell = sandboxed.notebook.cell(sandboxed.index["markdown"])
    assert cell.locator(f"{OUTPUT} h1").count() == 1, _outputs(sandboxed, "markdown")
    assert "Title" in cell.locator(f"{OUTPUT} h1").inner_text()
    assert cell.locator(f"{OUTPUT} em").inner_text() == "em"
    assert cell.locator(f"{OUTPUT} strong").inner_text() == "strong"


def test_denial_is_one_readable_line(sandboxed):
    cell = sandboxed.notebook.cell(sandboxed.index["denial"])
    error = cell.locator(f"{OUTPUT}[data-mime-type='application/vnd.jupyter.stderr']")
    assert error.count() == 1, _outputs(sandboxed, "denial")
    text = error.inner_text()
    lines = [line for line in text.splitlines() if "'os'" in line]
    assert len(lines) == 1 and "ImportDenied" in lines[0] and "not allowed" in lines[0], text
    assert "Traceback (most recent call last)" not in text and "\x1b[" not in text
    assert "sandbox_kernel" not in text and "site-packages" not in text


# -- Nothing a cell outputs acts in the browser --------------------------------------------------


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.id)
def test_attack_does_nothing_in_the_browser(sandboxed, attack):
    output = sandboxed.outputs[attack.id]
    assert f"sent {attack.id}" in output, f"the attack cell did not get past display():\n{output[:3000]}"
    evidence = sandboxed.evidence(attack)
    assert not evidence, (f"{attack.what} [{sandboxed.interactions.get(attack.id, '')}]:\n  "
                          + "\n  ".join(evidence))


def test_no_request_left_for_a_remote_host(sandboxed):
    """Also what no single attack claims: a request without an attack's id in it."""
    assert sandboxed.remote_requests == [], "\n".join(sandboxed.remote_requests)
    assert sandboxed.hits == [], "\n".join(map(str, sandboxed.hits))


def test_no_script_dialog_or_window(sandboxed):
    log = sandboxed.browser.log
    assert sandboxed.flags == {}
    assert log.dialogs == [] and log.popups == [] and log.navigations == []


# -- The control: without the filter, each attack acts -------------------------------------------


@pytest.mark.parametrize("attack", [a for a in ATTACKS if a.id not in INERT_IN_JUPYTERLAB], ids=lambda a: a.id)
def test_attack_acts_without_the_filter(control, attack):
    output = control.outputs[attack.id]
    assert f"sent {attack.id}" in output, f"the attack cell failed in the stock kernel:\n{output[:3000]}"
    assert control.evidence(attack), (f"{attack.what} did nothing through the stock ipykernel either "
                                      f"[{control.interactions.get(attack.id, '')}]: the attack went stale")
