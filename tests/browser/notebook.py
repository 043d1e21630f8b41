"""Drives one notebook in JupyterLab through its UI: open it, run every cell with Shift+Enter, hover
and click what the outputs show, and read back what happened in the page."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

SANDBOXED = {"name": "sandboxed-python", "display_name": "Sandboxed Python", "language": "python"}
STOCK = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
CELLS = ".jp-Notebook .jp-Cell"
OUTPUT = ".jp-OutputArea-output"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
HOVER_LIMIT = 150   # elements hovered per output: payload outputs are small; a cap keeps a flood bounded


def write_notebook(path: Path, sources: list[str], kernelspec: dict) -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = kernelspec
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(notebook, path)


class Notebook:
    def __init__(self, page, url: str, kernelspec: dict):
        self.page = page
        self.url = url
        self.kernelspec = kernelspec

    def open(self, timeout_ms: int = 180_000) -> None:
        """Opens the notebook and waits until JupyterLab's status bar shows its kernel idle."""
        self.page.goto(self.url, wait_until="domcontentloaded", timeout=timeout_ms)
        self.page.wait_for_selector(CELLS, timeout=timeout_ms)
        idle = re.escape(self.kernelspec["display_name"]) + r" \| Idle"
        self.page.wait_for_function(
            "re => [...document.querySelectorAll('.jp-StatusBar-Widget')].some(e => new RegExp(re).test(e.textContent))",
            arg=idle, timeout=timeout_ms)

    def cell(self, index: int):
        return self.page.locator(CELLS).nth(index)

    def _executed(self, index: int, timeout_ms: int) -> None:
        self.page.wait_for_function(
            "([sel, i]) => { const c = document.querySelectorAll(sel)[i];"
            " const p = c && c.querySelector('.jp-InputPrompt'); return !!p && /\\[\\d+\\]/.test(p.textContent); }",
            arg=[CELLS, index], timeout=timeout_ms)

    def run_cell(self, index: int, timeout_ms: int = 120_000) -> None:
        """Selects the cell by its prompt and runs it with Shift+Enter, as a person would, then waits
        for its execution count. One cell at a time, not Run All: a cell that fails must not abort
        the cells queued after it, and each attack's output is hovered and clicked before the next
        cell can cover the page."""
        self.cell(index).locator(".jp-InputPrompt").click(timeout=10_000)
        self.page.keyboard.press("Shift+Enter")
        self._executed(index, timeout_ms)

    def wait_for_chart(self, index: int, timeout_ms: int = 60_000) -> str:
        """Waits until plotly.js drew the cell's chart or reported an error; says which."""
        try:
            return self.page.wait_for_function(
                """([sel, i, mime]) => {
                    const cell = document.querySelectorAll(sel)[i];
                    if (cell.querySelector('.js-plotly-plot .main-svg')) return 'chart drawn';
                    const outputs = [...cell.querySelectorAll('.jp-OutputArea-output')];
                    const failed = outputs.find(o => /Javascript Error/.test(o.textContent));
                    if (failed) return 'plotly.js error: ' + failed.textContent.slice(0, 200);
                    if (!outputs.some(o => o.dataset.mimeType === mime)) return 'no plotly output';
                    return null;
                }""", arg=[CELLS, index, PLOTLY_MIME], timeout=timeout_ms).json_value()
        except Exception:  # noqa: BLE001 - reported, and the evidence still decides
            return f"chart not drawn within {timeout_ms // 1000} s"

    def hover(self, index: int) -> int:
        """Moves the mouse over each visible element of the cell's outputs (outside Plotly charts)."""
        output = self.cell(index).locator(".jp-Cell-outputArea")
        output.scroll_into_view_if_needed(timeout=5_000)
        centres = output.evaluate(
            """(out, [selector, limit]) => [...out.querySelectorAll(selector)].slice(0, limit)
                .filter(e => !e.closest('.js-plotly-plot'))
                .map(e => { e.scrollIntoView({block: 'nearest'}); const r = e.getBoundingClientRect();
                            return r.width > 0 && r.height > 0 ? [r.x + r.width / 2, r.y + r.height / 2] : null; })
                .filter(Boolean)""", [f"{OUTPUT} *", HOVER_LIMIT])
        for x, y in centres:
            self.page.mouse.move(x, y)
        self.page.mouse.move(0, 0)
        return len(centres)

    def click(self, index: int, selector: str) -> int:
        clicked = 0
        for element in self.cell(index).locator(f"{OUTPUT} {selector}").element_handles():
            try:
                element.click(timeout=5_000, force=True, no_wait_after=True)
                clicked += 1
            except Exception:  # noqa: BLE001 - an element that cannot be clicked did nothing
                continue
        return clicked

    def output_texts(self) -> list[str]:
        """The rendered text of every cell's outputs, in cell order."""
        return self.page.evaluate(
            "sel => [...document.querySelectorAll(sel)].map(c => "
            "(c.querySelector('.jp-Cell-outputArea') || {innerText: ''}).innerText)", CELLS)

    def probe(self, index: int, probe: str) -> str:
        """Runs `out => ...` over the cell's output area; returns what it found ('' when nothing)."""
        result = self.cell(index).evaluate(
            f"(cell) => {{ const out = cell.querySelector('.jp-Cell-outputArea'); return ({probe})(out); }}")
        return str(result or "")

    def screenshot(self, index: int, path: Path) -> None:
        try:
            self.cell(index).screenshot(path=str(path), timeout=10_000)
        except Exception:  # noqa: BLE001 - a missing screenshot must not hide the test's verdict
            pass

