"""What leaves a cell: stdout/stderr as stream events while the cell runs, capped per cell, and every
event without the host's install paths.

Up to half the cap is passed on live; past it, only the last half-cap is kept and sent at the end,
after a marker saying how much was cut (head + tail, as a person reading a flood wants it). The engine's
teardown runs this file's code, and limits.py lets no limit land here.
"""
from __future__ import annotations

import os
import site
import sys
import time
from collections import deque


def _host_paths() -> list[tuple[str, str]]:
    """Where Python and its packages live on the host, longest first, with what a cell sees instead."""
    named = [(os.path.dirname(os.path.abspath(__file__)), "<sandbox_kernel>")]
    try:
        named += [(p, "<site-packages>") for p in site.getsitepackages() + [site.getusersitepackages()]]
    except AttributeError:   # a virtualenv's old site.py
        pass
    named += [(p, "<python>") for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)]
    seen, out = set(), []
    for path, label in sorted(named, key=lambda pair: len(pair[0]), reverse=True):
        if path and len(path) > 1 and path not in seen:
            seen.add(path)
            out.append((path, label))
    return out


_HOST_PATHS = _host_paths()


def hide_host_paths(text: str) -> str:
    """Output never shows where the host's Python lives (a module's repr, a library's warning)."""
    for path, label in _HOST_PATHS:
        if path in text:
            text = text.replace(path, label)
    return text


def without_host_paths(data):
    """hide_host_paths on every string inside plain JSON data (events, denial records, charts)."""
    t = type(data)
    if t is str:
        return hide_host_paths(data)
    if t is dict:
        return {without_host_paths(k) if type(k) is str else k: without_host_paths(v) for k, v in data.items()}
    if t is list or t is tuple:
        return [without_host_paths(v) for v in data]
    return data


FLUSH_INTERVAL = 0.05
FLUSH_BYTES = 8192


class _Stream:
    encoding = "utf-8"
    errors = "replace"

    def __init__(self, owner: "OutputStreams", name: str):
        self._owner = owner
        self.name = name

    def write(self, text) -> int:
        if type(text) is not str:
            if isinstance(text, str):
                text = str.__str__(text)
            else:
                raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._owner.write(self.name, text)
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._owner.flush()

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False


class OutputStreams:
    def __init__(self, emit, cap: int):
        self._emit = lambda event: emit(without_host_paths(event))
        self._head_budget = cap // 2
        self._tail_budget = cap - self._head_budget
        self._pending: list[tuple[str, str]] = []
        self._pending_size = 0
        self._last_flush = time.monotonic()
        self._tail: deque = deque()
        self._tail_size = 0
        self._cut = 0
        self._captured: list[str] = []
        self._flagged = False
        self.stdout = _Stream(self, "stdout")
        self.stderr = _Stream(self, "stderr")

    _busy = False

    @property
    def truncated(self) -> bool:
        """Whether anything of the cell's output was left out: text cut here, or a display the engine
        did not pass on (it sets this; the display's own note says what and why)."""
        return self._cut > 0 or self._flagged

    @truncated.setter
    def truncated(self, value: bool) -> None:
        self._flagged = self._flagged or bool(value)

    def write(self, name: str, text: str) -> None:
        if not text:
            return
        self._busy = True
        try:
            self._write(name, text)
        finally:
            self._busy = False

    def emit_event(self, event: dict) -> None:
        """Any other event of the cell: pending text goes first, and the alarm's flush cannot
        interleave with it."""
        if self._busy:
            self._emit(event)
            return
        self._busy = True
        try:
            self._flush_pending()
            self._emit(event)
        finally:
            self._busy = False

    def flush_if_due(self) -> None:
        """Called from the budget's alarm (between two bytecodes of the cell's thread): sends what a
        cell printed before it went quiet (print, then a long computation or a sleep)."""
        if not self._busy and self._pending and time.monotonic() - self._last_flush >= FLUSH_INTERVAL:
            self.flush()

    def _write(self, name: str, text: str) -> None:
        if self._head_budget > 0:
            head = text[: self._head_budget]
            self._head_budget -= len(head)
            self._queue(name, head)
            text = text[len(head):]
            if not text:
                return
        self._tail.append((name, text))
        self._tail_size += len(text)
        while self._tail_size > self._tail_budget and self._tail:
            n, t = self._tail[0]
            over = self._tail_size - self._tail_budget
            if len(t) <= over:
                self._tail.popleft()
                self._tail_size -= len(t)
                self._cut += len(t)
            else:
                self._tail[0] = (n, t[over:])
                self._tail_size -= over
                self._cut += over

    def _queue(self, name: str, text: str) -> None:
        self._pending.append((name, text))
        self._pending_size += len(text)
        if name == "stdout":
            self._captured.append(text)
        now = time.monotonic()
        if self._pending_size >= FLUSH_BYTES or now - self._last_flush >= FLUSH_INTERVAL:
            self._flush_pending()

    def flush(self) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            self._flush_pending()
        finally:
            self._busy = False

    def _flush_pending(self) -> None:
        if not self._pending:
            return
        merged: list[list] = []
        for name, text in self._pending:
            if merged and merged[-1][0] == name:
                merged[-1][1].append(text)
            else:
                merged.append([name, [text]])
        self._pending = []
        self._pending_size = 0
        self._last_flush = time.monotonic()
        for name, parts in merged:
            self._emit({"type": "stream", "name": name, "text": "".join(parts)})

    def close(self) -> None:
        """End of cell: pending text, then the marker and the kept tail (once)."""
        self.flush()
        if getattr(self, "_closed", False):
            return
        self._closed = True
        if self._cut:  # a marker only when text was cut (a display left out has its own note)
            marker = f"\n[... {self._cut:,} characters of output cut ...]\n"
            self._emit({"type": "stream", "name": "stderr", "text": marker})
        if self._tail:
            for name, text in self._tail:
                self._pending.append((name, text))
                if name == "stdout":
                    self._captured.append(text)
            self._tail.clear()
            self.flush()

    def captured_stdout(self) -> str:
        return hide_host_paths("".join(self._captured))
