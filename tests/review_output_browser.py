"""Browser harness for the outsider's output review (tests/test_attacks_output_review.py).

Runs the review's browser-side cells in a real JupyterLab + headless Chromium through the sandboxed
kernel at its default level, with every remote host mapped to the recording sink (the same machinery
as tests/test_browser_jupyterlab.py, reused unchanged), and prints what each cell left in the page:
flags its payload set, remote requests, the text of its outputs, what its probe found, and how long
the cell took (for the kernel-side denial of service, which shows up as a cell that blocks the next).

    cd /work/main && .venv/bin/python tests/review_output_browser.py [cell-id ...]

Evidence (screenshots, evidence.json, review.json) goes to tests/artifacts/browser-review/.
Not collected by pytest: it takes minutes, and its verdicts are read by a person (see the report).
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from browser import chromium  # noqa: E402
from browser.attacks import EVIL  # noqa: E402
from browser.notebook import OUTPUT, SANDBOXED  # noqa: E402

ARTIFACTS = Path(__file__).parent / "artifacts" / "browser-review"

FORGED_IMPORT = ("ImportDenied: import of 'os' is not allowed by policy 'data-science' (line 1): "
                 "this module is not granted.")

# Output texts whose rendered lines start like a sandbox denial although the cell never imported 'os'.
_FORGED_LINE_PROBE = (
    "out => { const hits = [...out.querySelectorAll(\"" + OUTPUT
    + "[data-mime-type='application/vnd.jupyter.stderr']\")]"
    ".flatMap(o => o.innerText.split('\\n')).filter(l => l.startsWith(\"ImportDenied: import of 'os'\"));"
    " return hits.length ? 'a rendered stderr line reads: ' + hits[0] : ''; }")


@dataclass(frozen=True)
class Cell:
    id: str
    what: str
    source: str
    mime: str = "text"        # "plotly" waits for the chart
    probe: str | None = None
    hover: bool = True
    click: str | None = None
    hosts: tuple = ()


def _plotly(figure) -> str:
    return f"display(Plotly({figure!r}))\nprint('sent')"


def _html(text) -> str:
    return f"display(Html({text!r}))\nprint('sent')"


CELLS = (
    Cell("real_denial", "a real denial, for comparison", "import os"),
    Cell("denial_forged_lines", "a real AttributeDenied whose attribute name carries a newline and a whole "
         "forged ImportDenied line",
         f"x = 1\ngetattr(x, {('_a' + chr(10) + FORGED_IMPORT)!r})", probe=_FORGED_LINE_PROBE),
    Cell("warning_forged_denial", "a warning whose message starts a new stderr line with a denial's text",
         f"import warnings\nwarnings.warn({(chr(13) + FORGED_IMPORT)!r})", probe=_FORGED_LINE_PROBE),
    Cell("replayed_denial", "a denial caught in an earlier cell raised again",
         "try:\n    import os\nexcept Exception as e:\n    saved = e\nprint('caught')"),
    Cell("replayed_denial_raise", "... and raised in a later cell that imported nothing", "raise saved",
         probe=_FORGED_LINE_PROBE),
    Cell("sgr_same_colours", "SGR foreground equal to background hides text (conceal is stripped)",
         "print('visible \\x1b[38;2;255;255;255;48;2;255;255;255mHIDDEN\\x1b[0m visible')",
         probe="out => { const s = [...out.querySelectorAll('span')].find(e => e.textContent === 'HIDDEN');"
               " if (!s) return ''; const c = getComputedStyle(s);"
               " return c.color === c.backgroundColor ?"
               " 'HIDDEN drawn in ' + c.color + ' on ' + c.backgroundColor : ''; }"),
    Cell("html_bidi", "RLO kept in HTML text reorders what the browser shows",
         _html("<p>invoice_\u202egpj.exe</p>")),
    Cell("html_heading_ids", "headings in HTML output: does JupyterLab give them ids from their text?",
         _html("<h1>PlotlyConfig</h1><h2>jp-Dialog</h2><h3>MathJax</h3>"),
         probe="out => [...out.querySelectorAll('[id]')].map(e => e.tagName + '#' + e.id).join(', ')"),
    Cell("plotly_mathjax_title", "TeX \\style with a remote url() in a Plotly title",
         _plotly({"data": [{"type": "scatter", "x": [1, 2], "y": [1, 2]}],
                  "layout": {"title": {"text": "$\\style{background:url(//" + EVIL
                                               + "/plotly_mathjax_title/b.png)}{x}$"}}}),
         mime="plotly"),
    Cell("html_mxss_batch", "classic mutation-XSS payloads through the HTML route",
         _html("<noscript><p title=\"</noscript><img src=x onerror=window.__pwned_html_mxss_batch=1>\"></noscript>"
               "<math><mtext><table><mglyph><style><img src=x onerror=window.__pwned_html_mxss_batch=1>"
               "<svg><p><style><img src=x onerror=window.__pwned_html_mxss_batch=1>"
               "<table><a title=\"<img src=x onerror=window.__pwned_html_mxss_batch=1>\">a</a></table>"
               "<xmp><img src=x onerror=window.__pwned_html_mxss_batch=1></xmp>"
               f"<p>&#36;&#36;\\style{{background:url(//{EVIL}/html_mxss_batch/m.png)}}{{x}}&#36;&#36;</p>")),
    Cell("html_nested_div_dos", "300 kB of nested <div> (quadratic in the kernel's HTML sanitiser)",
         "display(Html('<div>' * 60000))\nprint('sent')"),
    Cell("after_nested_div", "the next cell: how long did it wait for the kernel?", "print('after')"),
    Cell("html_reconstruct_dos", "65 kB of HTML that the sanitiser's parser expands ~1,400x in the kernel",
         "display(Html('<p>' + ''.join('<b title=' + str(i) + '>' for i in range(700)) + '</p>' + '<p>x</p>' * 7000))"
         "\nprint('sent')"),
    Cell("after_reconstruct", "the next cell", "print('after')"),
)

HELPERS = '''\
class Html:
    def __init__(self, text):
        self.text = text
    def _repr_html_(self):
        return self.text

class Plotly:
    def __init__(self, figure):
        self.figure = figure
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"application/vnd.plotly.v1+json": self.figure, "text/plain": "a figure"}

print("helpers ready")
'''


def main(selected: list[str]) -> int:
    reason = chromium.missing()
    if reason:
        print(f"cannot run: {reason}")
        return 2
    from playwright.sync_api import sync_playwright

    import browser.session as session_module
    from browser.lab import JupyterLab
    from browser.session import Session

    cells = [c for c in CELLS if not selected or c.id in selected]
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    ARTIFACTS.mkdir(parents=True)
    base = Path(tempfile.mkdtemp(prefix="review-lab-"))
    lab = JupyterLab(base)
    playwright = sync_playwright().start()
    session_module.HELPERS = HELPERS          # the Session module reads it at run(): our helpers instead
    try:
        lab.start()
        session = Session(playwright, lab, base / "sessions", "review", SANDBOXED,
                          [(c.id, c.source) for c in cells], ARTIFACTS)
        session.cells[0] = ("helpers", HELPERS)
        session.attacks = list(cells)
        session.run()
        report = {}
        for cell in cells:
            report[cell.id] = {
                "what": cell.what,
                "seconds": session.cell_seconds.get(cell.id),
                "evidence": session.evidence(cell),
                "output": session.outputs.get(cell.id, "")[:1500],
            }
        report["_all_remote_requests"] = session.remote_requests
        report["_sink"] = [str(h) for h in session.hits]
        report["_flags"] = session.flags
        report["_dialogs"] = session.browser.log.dialogs
        (ARTIFACTS / "review.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
        print(json.dumps(report, indent=2, ensure_ascii=False))
        session.close()
    finally:
        playwright.stop()
        lab.stop()
        if lab.log_path.exists():
            shutil.copy(lab.log_path, ARTIFACTS / "jupyterlab.log")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
