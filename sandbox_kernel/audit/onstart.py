"""The self-audit a kernel runs when it starts (``--SandboxKernel.audit_on_start=True``).

The audit command runs in a child process with the kernel's exact configuration (its starting policy,
isolation level, worker options and MIME allowlist): its engine, workers and canaries never run in the
kernel's process, and a canary that breached would not have breached the kernel. The child is started
from a background thread, so the kernel answers kernel_info meanwhile; cells wait for the result and are
refused unless the audit passed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

from .report import summary

# The child imports the package from the kernel's own sys.path (never from its current directory, which
# `-I` leaves out), then runs the audit command.
_LAUNCH = ("import json, sys\nsys.path[:] = json.loads(sys.argv[1])\n"
           "from sandbox_kernel.audit.cli import main\nsys.exit(main(sys.argv[2:]))\n")
TIMEOUT = 300.0


class StartupAudit:
    def __init__(self, policy, level: str, options: dict | None = None, mime_allowlist=None):
        self.policy_name = policy.name
        self.level = level
        self.state = "running"          # running | passed | failed | error
        self.started = time.time()
        self.finished: float | None = None
        self.report: dict | None = None
        self.problem: str | None = None
        self._proc: subprocess.Popen | None = None
        self._done = threading.Event()
        args = (policy.to_dict(), json.dumps(options or {}, default=str), list(mime_allowlist or ()))
        threading.Thread(target=self._run, args=args, name="sandbox-self-audit", daemon=True).start()

    def _command(self, policy_file: str, options: str, allowlist: list) -> list[str]:
        cwd = os.getcwd()
        path = [p for p in sys.path if p not in ("", ".") and os.path.abspath(p) != cwd]
        command = [sys.executable, "-I", "-c", _LAUNCH, json.dumps(path), "--policy", policy_file,
                   "--isolation", self.level, "--options", options, "--json"]
        return command + (["--mime-allowlist", ",".join(allowlist)] if allowlist else [])

    def _run(self, policy: dict, options: str, allowlist: list) -> None:
        try:
            with tempfile.TemporaryDirectory(prefix="sandbox-audit-config-") as tmp:
                policy_file = os.path.join(tmp, "policy.json")
                with open(policy_file, "w", encoding="utf-8") as fh:
                    json.dump(policy, fh)
                self._proc = subprocess.Popen(self._command(policy_file, options, allowlist), cwd=tmp,
                                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE)
                try:
                    out, err = self._proc.communicate(timeout=TIMEOUT)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.communicate()
                    self.state, self.problem = "error", f"the audit did not finish within {TIMEOUT:.0f} s"
                    return
            try:
                report = json.loads(out)
            except ValueError:
                report = None
            if isinstance(report, dict) and isinstance(report.get("passed"), bool):
                self.report = report
                self.state = "passed" if report["passed"] and self._proc.returncode == 0 else "failed"
                return
            last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
            self.state = "error"
            self.problem = f"the audit command ended with status {self._proc.returncode}: {last[0][:300]}"
        except Exception as exc:  # noqa: BLE001 - reported; cells are refused
            self.state, self.problem = "error", f"the audit could not start: {type(exc).__name__}: {exc}"
        finally:
            self.finished = time.time()
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def _command_hint(self) -> str:
        return f"python -m sandbox_kernel audit --policy {self.policy_name} --isolation {self.level}"

    def refusal(self) -> str | None:
        """None when the audit passed; otherwise why cells do not run. Waits for a running audit."""
        self.wait(TIMEOUT + 30)
        if self.state == "passed":
            return None
        what = (f"failed ({summary(self.report)})" if self.report is not None
                else f"could not run ({self.problem or 'it did not finish'})")
        return (f"the self-audit run when this kernel started {what}; cells do not run. The table of canaries: "
                f"{self._command_hint()}; %sandbox_status shows the result.")

    def status_line(self) -> str:
        config = f"policy '{self.policy_name}', isolation '{self.level}'"
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.finished or self.started))
        if self.state == "running":
            return f"self-audit: running since {when} ({config}); cells wait for it"
        if self.report is not None:
            seconds = self.report.get("seconds")
            return (f"self-audit: {summary(self.report)} at {when} in {seconds} s ({config})"
                    f"{'' if self.state == 'passed' else '; cells are refused'}")
        return f"self-audit: could not run at {when} ({config}): {self.problem}; cells are refused"

    def stop(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
