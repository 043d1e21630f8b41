"""What a session hands back: results, errors, denials, events, file entries, status.

Everything here is built from what the kernel sent (JSON the client parsed) and is treated as data:
strings, numbers, lists and dicts, never objects the kernel could choose.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

PLOTLY_MIME = "application/vnd.plotly.v1+json"
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error", "update_display_data", "clear_output")


class SandboxError(RuntimeError):
    """A session operation failed (the kernel is gone, a helper cell failed, a value did not fit)."""


class SandboxTimeout(TimeoutError):
    """The kernel did not answer in time (the cell was interrupted)."""


class SandboxDenied(SandboxError, PermissionError):
    """The sandbox refused an operation: `denial` is the kernel's record (kind, target, rule, line,
    policy, hint, message), the same one a cell gets for the same request."""

    def __init__(self, message: str, denial: "Denial | None" = None, error: "ExecutionError | None" = None):
        super().__init__(message)
        self.denial = denial
        self.error = error


@dataclass(frozen=True)
class Denial:
    """One refusal by the sandbox (docs/agents.md lists the kinds)."""

    kind: str | None
    target: str | None
    rule: str | None
    line: int | None
    policy: str | None
    hint: str | None
    message: str | None
    by: str | None = None

    @classmethod
    def from_record(cls, record: Any) -> "Denial | None":
        if not isinstance(record, dict):
            return None
        text = {k: record.get(k) if isinstance(record.get(k), str) else None
                for k in ("kind", "target", "rule", "policy", "hint", "message", "by")}
        line = record.get("line")
        return cls(line=line if type(line) is int else None, **text)


@dataclass(frozen=True)
class ExecutionError:
    """The error a cell ended with: `line` is the cell line it points at, `denial` whether the
    sandbox raised it (a refusal) rather than the cell's own code."""

    ename: str
    evalue: str
    line: int | None = None
    traceback: tuple[str, ...] = ()
    denial: bool = False

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line and f"line {self.line}" not in self.evalue else ""
        return f"{self.ename}: {self.evalue}{where}"


@dataclass(frozen=True)
class Event:
    """One message of a running cell, as it arrives: `kind` is ``stream`` (`name` stdout or stderr,
    `text`), ``display`` or ``result`` (`data`: a MIME bundle), ``error`` (`content` has ename,
    evalue, traceback), ``clear_output``, or ``done`` (the last one; `result` is the ExecutionResult)."""

    kind: str
    content: dict = field(default_factory=dict)
    result: "ExecutionResult | None" = None

    @property
    def name(self) -> str | None:
        return self.content.get("name") if self.kind == "stream" else None

    @property
    def text(self) -> str | None:
        return self.content.get("text") if self.kind == "stream" else None

    @property
    def data(self) -> dict | None:
        return self.content.get("data") if self.kind in ("display", "result") else None


_EVENT_KINDS = {"stream": "stream", "display_data": "display", "update_display_data": "display",
                "execute_result": "result", "error": "error", "clear_output": "clear_output"}


def event_from_message(msg_type: str, content: dict) -> Event | None:
    kind = _EVENT_KINDS.get(msg_type)
    return Event(kind, dict(content)) if kind else None


@dataclass
class ExecutionResult:
    """One cell's outcome.

    `output` is the cell's stdout (with seed 002's ``result["output"]``), `displays` every MIME bundle
    it displayed, `charts` its Plotly figures as JSON, `result` the last expression's text/plain,
    `error` what it ended with, `denials` every refusal (also ones the cell caught), `truncated`
    whether the kernel cut output to the cell's caps. `summary` is the kernel's whole
    ``execute_reply.metadata["sandbox"]`` and `outputs` every iopub output message in order."""

    status: str
    output: str = ""
    stderr: str = ""
    displays: list[dict] = field(default_factory=list)
    charts: list[dict] = field(default_factory=list)
    result: str | None = None
    error: ExecutionError | None = None
    denials: list[Denial] = field(default_factory=list)
    truncated: bool = False
    elapsed_ms: float = 0.0
    ticks: int | float = 0
    policy: str | None = None
    isolation: str | None = None
    os_layers: list[str] = field(default_factory=list)
    execution_count: int | None = None
    worker: dict | None = None
    summary: dict = field(default_factory=dict)
    outputs: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def images(self) -> list[tuple[str, str]]:
        """(MIME type, base64 data) of every PNG or JPEG the cell displayed."""
        return [(mime, bundle[mime]) for bundle in self.displays for mime in ("image/png", "image/jpeg")
                if isinstance(bundle.get(mime), str)]

    def to_dict(self) -> dict:
        """Seed 002's shape: ``{"output": str | None, "chart": dict | list[dict] | None,
        "error": str | None}``."""
        chart: dict | list | None = None
        if len(self.charts) == 1:
            chart = self.charts[0]
        elif self.charts:
            chart = list(self.charts)
        return {"output": self.output or None, "chart": chart,
                "error": str(self.error) if self.error is not None else None}

    def to_json(self) -> dict:
        """Every field as plain JSON data (for logs, MCP answers, other processes)."""
        return {"status": self.status, "output": self.output, "stderr": self.stderr, "displays": self.displays,
                "charts": self.charts, "result": self.result,
                "error": None if self.error is None else {**self.error.__dict__, "traceback": list(self.error.traceback)},
                "denials": [d.__dict__ for d in self.denials], "truncated": self.truncated,
                "elapsed_ms": self.elapsed_ms, "ticks": self.ticks, "policy": self.policy,
                "isolation": self.isolation, "os_layers": self.os_layers, "execution_count": self.execution_count,
                "worker": self.worker}


def build_result(reply: dict, outputs: list[dict]) -> ExecutionResult:
    """An ExecutionResult from the execute_reply and the cell's iopub output messages."""
    content = reply.get("content") or {}
    metadata = reply.get("metadata") or {}
    summary = metadata.get("sandbox") if isinstance(metadata.get("sandbox"), dict) else {}
    streamed = [o for o in outputs if o["type"] == "stream" and isinstance(o.get("text"), str)]
    if any(o.get("name") == "stdout" for o in streamed):
        stdout = "".join(o["text"] for o in streamed if o.get("name") == "stdout")
    else:  # a silent cell publishes nothing: its stdout is the summary's copy
        stdout = summary.get("output") if isinstance(summary.get("output"), str) else ""
    displays, result_text = [], None
    for o in outputs:
        data = o.get("data") if isinstance(o.get("data"), dict) else None
        if data is None:
            continue
        if o["type"] in ("display_data", "update_display_data"):
            displays.append(data)
        elif o["type"] == "execute_result":
            text = data.get("text/plain")
            result_text = text if isinstance(text, str) else None
            if set(data) - {"text/plain"}:
                displays.append(data)
    charts = [c for c in summary.get("charts") or [] if isinstance(c, dict)]
    shown = [d[PLOTLY_MIME] for d in displays if isinstance(d.get(PLOTLY_MIME), dict)]
    if len(shown) > len(charts):  # a chart whose summary copy did not fit the display cap
        charts = shown
    status = content.get("status") if content.get("status") in ("ok", "error", "aborted") else "error"
    return ExecutionResult(
        status=status,
        output=stdout,
        stderr="".join(o["text"] for o in streamed if o.get("name") == "stderr"),
        displays=displays,
        charts=charts,
        result=result_text,
        error=_error(summary.get("error"), content),
        denials=[d for d in map(Denial.from_record, summary.get("denials") or []) if d is not None],
        truncated=summary.get("truncated") is True,
        elapsed_ms=_number(summary.get("elapsed_ms")),
        ticks=_number(summary.get("ticks")),
        policy=summary.get("policy") if isinstance(summary.get("policy"), str) else None,
        isolation=summary.get("isolation") if isinstance(summary.get("isolation"), str) else None,
        os_layers=[str(x) for x in summary.get("os_layers") or [] if isinstance(x, str)],
        execution_count=content.get("execution_count") if type(content.get("execution_count")) is int else None,
        worker=summary.get("worker") if isinstance(summary.get("worker"), dict) else None,
        summary=summary,
        outputs=outputs,
    )


def _error(summary_error: Any, content: dict) -> ExecutionError | None:
    source = summary_error if isinstance(summary_error, dict) else None
    if source is None:
        if content.get("status") != "error":
            return None
        source = content
    traceback = source.get("traceback") if isinstance(source.get("traceback"), list) else []
    line = source.get("line")
    return ExecutionError(ename=str(source.get("ename") or "Error"), evalue=str(source.get("evalue") or ""),
                          line=line if type(line) is int else None,
                          traceback=tuple(t for t in traceback if isinstance(t, str)),
                          denial=source.get("denial") is True)


def _number(value: Any) -> float | int:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


@dataclass(frozen=True)
class FileInfo:
    """One entry of the working directory: `kind` is file, dir, symlink (never followed) or other."""

    name: str
    kind: str
    size: int


@dataclass
class SessionStatus:
    """What `%sandbox_status` reports, parsed, plus what the client knows about the kernel."""

    policy: str | None
    ceiling: str | None
    limits: dict
    files: bool
    network: bool
    isolation: str | None
    weakest_isolation: str | None
    protection: str
    os_layers: dict
    worker: dict | None
    degraded: bool
    kernel_alive: bool
    where: str
    text: str

    @classmethod
    def parse(cls, text: str, *, kernel_alive: bool, where: str) -> "SessionStatus":
        fields: dict[str, str] = {}
        for line in text.splitlines():
            key, sep, value = line.partition(": ")
            if sep and key and key not in fields:
                fields[key] = value
        policy, _, rest = fields.get("policy", "").partition(" (ceiling: ")
        isolation, _, weakest = fields.get("isolation", "").partition(" (weakest allowed: ")
        layers = _json_field(fields.get("os layer details"))
        worker = _json_field(fields.get("worker"))
        files_network = fields.get("files", "")
        return cls(policy=policy or None, ceiling=rest.rstrip(")") or None,
                   limits=_parse_limits(fields.get("limits", "")),
                   files=files_network.startswith("working directory"), network="network: on" in files_network,
                   isolation=isolation or None, weakest_isolation=weakest.rstrip(")") or None,
                   protection=fields.get("protection", ""),
                   os_layers=layers if isinstance(layers, dict) else {},
                   worker=worker if isinstance(worker, dict) else None,
                   degraded=isinstance(layers, dict) and layers.get("degraded") is True,
                   kernel_alive=kernel_alive, where=where, text=text)


def _json_field(value: str | None) -> Any:
    if not value or len(value) > 100_000:
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


_LIMIT_WORDS = {"timeout": "timeout", "memory": "memory_mb", "ticks": "ticks", "output": "output_bytes"}


def _parse_limits(text: str) -> dict:
    """'timeout 60 s, memory 2048 MB, ticks 200000000, output 1000000 bytes' -> numbers (None: unlimited)."""
    out: dict = {}
    for part in text.split(", "):
        words = part.split()
        if len(words) >= 2 and words[0] in _LIMIT_WORDS:
            try:
                out[_LIMIT_WORDS[words[0]]] = None if words[1] == "unlimited" else float(words[1])
            except ValueError:
                continue
            value = out[_LIMIT_WORDS[words[0]]]
            if value is not None and value.is_integer() and words[0] != "timeout":
                out[_LIMIT_WORDS[words[0]]] = int(value)
    return out
