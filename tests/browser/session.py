"""One notebook run in one fresh browser, and the evidence it left: flags the payloads set, requests
the page made, connections the sink received, navigations, windows, and what the probes found."""
from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import urlsplit

from . import chromium
from .attacks import ATTACKS, HELPERS
from .notebook import Notebook, write_notebook
from .sink import Sink

SETTLE_MS = 3_000        # after the last cell, for loads a render started late (map styles, tiles)
CLICK_SETTLE_MS = 500    # after a click, before reading and closing the windows it opened


class Session:
    def __init__(self, playwright, lab, base: Path, name: str, kernelspec: dict,
                 cells: list[tuple[str, str]], artifacts: Path):
        """`cells` are (name, source) pairs that follow the helpers cell; attacks are named by id."""
        self.playwright = playwright
        self.lab = lab
        self.base = base / name
        self.name = name
        self.kernelspec = kernelspec
        self.cells = [("helpers", HELPERS)] + list(cells)
        self.index = {cell_name: i for i, (cell_name, _) in enumerate(self.cells)}
        self.attacks = [a for a in ATTACKS if a.id in self.index]
        self.artifacts = artifacts
        self.sink = Sink()
        self.browser = None
        self.notebook = None
        self.timings: dict[str, float] = {}
        self.cell_seconds: dict[str, float] = {}   # run and interaction, per cell: for the artefacts
        self.interactions: dict[str, str] = {}
        self.outputs: dict[str, str] = {}
        self.probes: dict[str, str] = {}
        self.flags: dict[str, list[str]] = {}
        self.remote_requests: list[str] = []
        self.hits: list = []

    def run(self) -> "Session":
        started = time.monotonic()
        self.base.mkdir(parents=True, exist_ok=True)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.sink.start()
        write_notebook(self.lab.root / f"{self.name}.ipynb", [source for _, source in self.cells], self.kernelspec)
        self.browser = chromium.Chromium(self.playwright, str(self.base / "profile"), self.sink.port,
                                         str(self.base / "home")).start()
        self.notebook = Notebook(self.browser.page, self.lab.notebook_url(self.name), self.kernelspec)
        self.notebook.open()
        self.timings["open"] = time.monotonic() - started
        attacks = {attack.id: attack for attack in self.attacks}
        for name, index in self.index.items():
            cell_started = time.monotonic()
            self.notebook.run_cell(index)
            if name in attacks:
                self.interactions[name] = self._interact(attacks[name])
            self.cell_seconds[name] = round(time.monotonic() - cell_started, 2)
        self.browser.page.wait_for_timeout(SETTLE_MS)
        self.timings["run"] = time.monotonic() - started
        self._collect()
        self.browser.page.screenshot(path=str(self.artifacts / "viewport.png"))
        for name, index in self.index.items():
            self.notebook.screenshot(index, self.artifacts / f"{index:02d}-{name}.png")
        self.timings["collect"] = time.monotonic() - started
        self._save()
        return self

    def _interact(self, attack) -> str:
        index = self.index[attack.id]
        done = []
        if attack.mime == "plotly":
            done.append(self.notebook.wait_for_chart(index))
        if attack.hover:
            done.append(f"hovered {self.notebook.hover(index)} elements")
        if attack.click:
            done.append(f"clicked {self.notebook.click(index, attack.click)} '{attack.click}'")
            self.browser.page.wait_for_timeout(CLICK_SETTLE_MS)
            self.browser.close_popups()
        return ", ".join(done)

    def _collect(self) -> None:
        texts = self.notebook.output_texts()
        for name, index in self.index.items():
            self.outputs[name] = texts[index] if index < len(texts) else ""
        for attack in self.attacks:
            if attack.probe:
                self.probes[attack.id] = self.notebook.probe(self.index[attack.id], attack.probe)
        self.flags = self.browser.flags()
        self.remote_requests = self.browser.log.remote_requests()
        self.hits = self.sink.snapshot()

    def evidence(self, attack) -> list[str]:
        """Everything that shows the attack acted in the browser."""
        found = [f"script ran: window.__pwned_{attack.id} was set in {url}"
                 for url, names in self.flags.items() if attack.id in names]
        marker = f"/{attack.id}/"

        def ours(url: str) -> bool:
            return marker in url or (urlsplit(url).hostname or "") in attack.hosts

        found += [f"the page requested {url}" for url in self.remote_requests if ours(url)]
        found += [f"the sink received {hit}" for hit in self.hits
                  if marker in hit.request or hit.host in attack.hosts]
        found += [f"the page navigated to {url}" for url in self.browser.log.navigations if ours(url)]
        found += [f"a window opened at {url}" for url in self.browser.log.popups if ours(url)]
        if self.probes.get(attack.id):
            found.append(self.probes[attack.id])
        return found

    def _save(self) -> None:
        log = self.browser.log
        summary = {
            "kernel": self.kernelspec["name"],
            "timings_s": self.timings,
            "cell_seconds": self.cell_seconds,
            "interactions": self.interactions,
            "flags": self.flags,
            "remote_requests": self.remote_requests,
            "sink": [str(hit) for hit in self.hits],
            "navigations": log.navigations,
            "popups": log.popups,
            "dialogs": log.dialogs,
            "console_errors": log.console[:200],
            "evidence": {a.id: self.evidence(a) for a in self.attacks},
            "outputs": self.outputs,
        }
        (self.artifacts / "evidence.json").write_text(json.dumps(summary, indent=2))

    def close(self) -> None:
        if self.browser is not None:
            self.browser.stop()
        self.sink.stop()
