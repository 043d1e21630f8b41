"""What one canary did, and the verdicts the audit gives."""
from __future__ import annotations

HELD = "held"
BREACHED = "breached"
NOT_CONTAINED = "not contained at this level"   # a native canary at a level that promises no OS layer
NOT_APPLICABLE = "not applicable"               # the policy allows what the canary attempts
ERROR = "error"                                 # the canary could not be run: the audit proves nothing
FAILING = (BREACHED, ERROR)


class Outcome:
    """The events and closing summary of one cell."""

    def __init__(self, done: dict, events: list):
        self.done = done if isinstance(done, dict) else {}
        self.events = events

    @property
    def ok(self) -> bool:
        return self.done.get("status") == "ok"

    @property
    def error(self) -> dict:
        return self.done.get("error") or {}

    @property
    def error_name(self) -> str:
        return str(self.error.get("ename") or "")

    @property
    def error_value(self) -> str:
        return str(self.error.get("evalue") or "")

    def stream(self, name: str) -> str:
        return "".join(e.get("text", "") for e in self.events if e.get("type") == "stream" and e.get("name") == name)

    @property
    def stdout(self) -> str:
        return self.stream("stdout")

    @property
    def bundles(self) -> list[tuple[dict, dict]]:
        return [(e.get("data"), e.get("metadata")) for e in self.events if e.get("type") in ("display", "result")]

    @property
    def denials(self) -> list[dict]:
        return [d for d in self.done.get("denials") or [] if isinstance(d, dict)]

    @property
    def worker_loss(self) -> str | None:
        worker = self.done.get("worker")
        return worker.get("reason") if isinstance(worker, dict) and worker.get("lost") else None

    def refusal(self) -> str:
        """The error a cell ended with, in a few words (the evidence of a held canary)."""
        if not self.error_name:
            return "no error"
        value = " ".join(self.error_value.split())
        return f"{self.error_name}: {value[:90]}{'...' if len(value) > 90 else ''}" if value else self.error_name

    def everything(self) -> str:
        import json

        return json.dumps(self.events, default=str) + json.dumps(self.done, default=str)
