"""SandboxKernel: the Jupyter protocol around the sandbox engine.

This file is the control plane. A cell's path reads parse (magics.py) -> controls (controls.py, within
the operator's ceiling) -> backend (the engine, in-process or in a worker) -> publish (the engine's JSON
events become iopub messages through the output filter). User code never reaches IPython's
``run_cell``: IPython would turn ``%``/``!`` lines into ``get_ipython()`` calls and silently drop an AST
transformer that raises. The IPython shell object exists only because ipykernel's
machinery (display hook, comm manager) expects one; nothing a cell sends runs in it.

Side doors closed here: the debugger and subshells (kernel_info advertises neither, requests are
refused), comms (no handlers), ``user_expressions`` (evaluated by the backend under the cell's
policy), completion and inspection (answered by the backend, which never runs sandbox code), history
(kept in memory, never IPython's database).
"""
from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections import deque

from ipykernel.ipkernel import IPythonKernel
from traitlets import Bool, Dict, Enum, Int, List, Unicode, default

from . import __version__
from .auditlog import AuditFile
from .controls import Controls, exceeds, isolation_rank
from .magics import MagicError, parse_cell
from .outputfilter import DEFAULT_MIME_ALLOWLIST, OutputFilter, clean_text, one_line, pack_message
from .denials import denial_names
from .policy import DEFAULT_POLICY, ISOLATION_LEVELS, Policy, PolicyError, load_policies
from .isolation import default_isolation
from .workdir import workdir_hazards

_LIMIT_KEYS = ("ticks", "timeout", "memory_mb", "output_bytes")
_HISTORY_KEPT = 10_000
# What a completion reply may carry: a front end shows a few hundred names at most.
_COMPLETIONS_KEPT = 2_000
_COMPLETION_CHARS = 500
_COMPLETION_BYTES = 256_000
_DENIALS_KEPT = 100  # per cell, in the reply summary
_DENIAL_KEYS = ("kind", "target", "rule", "line", "policy", "hint", "message")
_DENIAL_NAMES = denial_names() | {"SandboxDenied"}
# Audit records one cell may add (denials, limits, magics), whoever claims them; the rest are counted.
_AUDIT_RECORDS_PER_CELL = 100
_AUDIT_TEXT = 500  # characters kept of each text field in the audit log


class SandboxKernel(IPythonKernel):
    implementation = "sandboxed-python"
    implementation_version = __version__
    language_info = {
        "name": "python",
        "version": sys.version.split()[0],
        "mimetype": "text/x-python",
        "codemirror_mode": {"name": "python", "version": 3},
        "pygments_lexer": "python3",
        "nbconvert_exporter": "python",
        "file_extension": ".py",
    }
    help_links = List([
        {"text": "Python Reference", "url": "https://docs.python.org/%i.%i" % sys.version_info[:2]},
    ])

    # -- operator configuration (docs/operators.md describes each) ----------------------------------

    policy = Unicode(DEFAULT_POLICY, help="Policy cells start with (a preset or a policy file's name).").tag(config=True)
    policies_dir = Unicode("", help="Directory of *.json policy files added to the presets.").tag(config=True)
    ceiling_policy = Unicode(
        "", help="Most permissive policy a cell may select with %sandbox_policy or %%sandbox. "
                 "Empty: the starting policy.").tag(config=True)
    isolation = Enum(ISOLATION_LEVELS, default_value=default_isolation(),
                     help="Where cells run: none (in the kernel), process (a worker), kernel "
                          "(a worker the OS confines). Default: kernel on Linux, process on other "
                          "POSIX systems (docs/isolation.md says why).").tag(config=True)
    isolation_ceiling = Unicode(
        "", help="Weakest isolation level a cell may select with %sandbox_isolation. "
                 "Empty: the starting level.").tag(config=True)
    limits = Dict(
        help="Overrides for the limits of the starting policy and the ceiling: keys ticks, timeout "
             "(seconds), memory_mb, output_bytes; null means unlimited.").tag(config=True)
    max_output_bytes = Int(1_000_000, help="Per-cell cap on text output (streams, text/plain, "
                                           "tracebacks); head and tail are kept.").tag(config=True)
    max_display_bytes = Int(5_000_000, help="Per-cell cap on rich display data (HTML, images, Plotly JSON, "
                                            "counted as published, every copy included), separate from "
                                            "the text cap and the policy's output limit: a display over "
                                            "it is named on one stderr line and the reply says "
                                            "truncated.").tag(config=True)
    mime_allowlist = List(Unicode(), default_value=list(DEFAULT_MIME_ALLOWLIST),
                          help="MIME types sandboxed output may carry.").tag(config=True)
    extra_mime_types = List(Unicode(), default_value=[],
                            help="MIME types added to the allowlist: JSON data types (application/...+json) "
                                 "only, published re-serialised with every string cleaned; types whose known "
                                 "renderers fetch or run code (vega, vega-lite, GeoJSON, vdom, widgets, "
                                 "bokeh/holoviews) are ignored with a warning.").tag(config=True)
    audit_log = Unicode("", help="File that receives one JSON line per audited event (append): cells and their "
                                 "effective policy, denials, limits, magics, worker losses and restarts "
                                 "(docs/operators.md lists the fields).").tag(config=True)
    audit_log_max_bytes = Int(50_000_000, help="Rotate the audit log when a write would take it past this many "
                                               "bytes; 0: never (e.g. when logrotate does it).").tag(config=True)
    audit_log_backups = Int(5, help="Rotated audit logs kept (audit_log.1 is the newest); older ones are "
                                    "deleted.").tag(config=True)
    audit_size = Int(200, help="How many recent denials %sandbox_audit shows.").tag(config=True)
    workdir = Unicode("", help="The sandbox working directory (files policy). Empty: the directory the "
                               "kernel starts in (the notebook's).").tag(config=True)
    isolation_degraded = Bool(False, help="Let the kernel isolation level run cells when the OS cannot apply "
                                          "every restriction (it reports what took effect). Off: fail "
                                          "closed.").tag(config=True)
    protect_process = Bool(True, help="Make the kernel process non-dumpable at start (Linux), so no other "
                                      "process of the user (a breached worker without Landlock included) "
                                      "can open its /proc memory, environment or file descriptors. Costs: "
                                      "no same-user debugger (gdb -p, py-spy) and no core dumps.").tag(config=True)
    isolation_options = Dict(help="Extra keyword options for the worker backend (e.g. grace, "
                                  "cancel_grace, spare, fsize_mb, nofile).").tag(config=True)
    audit_on_start = Bool(False, help="Run the self-audit (python -m sandbox_kernel audit) with this kernel's "
                                      "starting configuration when it starts, in the background; cells wait "
                                      "for it and are refused unless it passed.").tag(config=True)

    @default("workdir")
    def _workdir_default(self):
        return os.getcwd()

    # -- setup -------------------------------------------------------------------------------------

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._count = 0
        self._history: list[tuple[int, int, str, str | None]] = []  # (session, line, input, output)
        self._audit: deque = deque(maxlen=max(self.audit_size, 1))
        self._audit_pending: list[dict] = []
        self._audit_seq = 0              # numbers every record, so a reader sees what is missing
        self._audit_in_cell = 0          # records the running cell added, and those over the cap
        self._audit_dropped = 0
        self._audit_lost: tuple | None = None   # (records, since, error) the log could not take
        self._audit_context: dict = {}   # the running cell's effective policy and output budget
        self._audit_digests: tuple | None = None
        self._cell_denials: list[dict] = []
        self._files_notice_shown = False
        self._running = threading.Event()
        self._backend = None
        self._startup_audit = None  # audit.onstart.StartupAudit when audit_on_start
        self.output_filter = OutputFilter(
            list(self.mime_allowlist) + list(self.extra_mime_types), self.max_output_bytes,
            self.max_display_bytes)
        if self.output_filter.ignored:
            self.log.warning("MIME types ignored (the kernel can only publish types it rebuilds, or JSON "
                             "data 'application/...+json' whose known renderers neither fetch nor run "
                             "code): %s", ", ".join(self.output_filter.ignored))
        if self.session is not None:
            # Every message leaves as valid UTF-8 JSON, whatever strings a cell or a worker produced.
            self.session.pack = pack_message
        self._policies = load_policies(self.policies_dir or None)
        self.files_off_reason = self._check_workdir()
        overrides = self._limit_overrides()
        ceiling_name = self.ceiling_policy or self.policy
        self.ceiling = self._named_policy(ceiling_name, overrides)
        self.current_policy = self._named_policy(self.policy, overrides)
        why = exceeds(self.current_policy, self.ceiling)
        if why:  # an operator error: fail closed rather than run above the ceiling
            raise PolicyError(f"SandboxKernel.policy '{self.policy}' exceeds SandboxKernel.ceiling_policy "
                              f"'{ceiling_name}' ({', '.join(why)})")
        self.isolation_floor = self.isolation_ceiling or self.isolation
        if self.isolation_floor not in ISOLATION_LEVELS:
            raise PolicyError(f"unknown SandboxKernel.isolation_ceiling '{self.isolation_floor}'")
        if isolation_rank(self.isolation) < isolation_rank(self.isolation_floor):
            raise PolicyError(f"SandboxKernel.isolation '{self.isolation}' is weaker than "
                              f"SandboxKernel.isolation_ceiling '{self.isolation_floor}'")
        self.current_isolation = self.isolation
        self.controls = Controls(self)
        # Comms: no handler runs for comm messages from a front end.
        for msg_type in ("comm_open", "comm_msg", "comm_close"):
            self.shell_handlers[msg_type] = self._ignore_comm
        # Older ipykernels route apply_request (unpickle and exec in the shell) and clear_request.
        for handlers in (self.shell_handlers, self.control_handlers):
            for msg_type in ("apply_request", "clear_request"):
                handlers.pop(msg_type, None)

    def _check_workdir(self) -> str | None:
        """Files stay off when the working directory holds places the host trusts (see workdir.py)."""
        hazards = workdir_hazards(self.workdir, {"the policies directory": self.policies_dir,
                                                 "the audit log": self.audit_log})
        if not hazards or not any(p.files for p in self._policies.values()):
            return None
        self._policies = {name: dataclasses.replace(p, files=False) for name, p in self._policies.items()}
        reason = (f"file access is off in this kernel: its working directory contains {hazards[0]}"
                  f"{f' (and {len(hazards) - 1} more)' if len(hazards) > 1 else ''}, where files written by "
                  f"cells could run outside the sandbox. Open the notebook from a project folder, or an "
                  f"operator sets --SandboxKernel.workdir to a dedicated directory.")
        self.log.warning(reason)
        return reason

    def _limit_overrides(self) -> dict:
        """The operator's limit overrides as numbers (a command line gives strings), or PolicyError."""
        unknown = set(self.limits) - set(_LIMIT_KEYS)
        if unknown:
            raise PolicyError(f"unknown SandboxKernel.limits keys: {', '.join(sorted(unknown))}")
        out = {}
        for key, value in self.limits.items():
            if isinstance(value, str):
                value = None if value.strip().lower() in ("none", "null", "") else value
            try:
                if value is None:
                    out[key] = None
                elif key == "timeout":
                    out[key] = float(value)
                else:
                    out[key] = int(value)
            except (TypeError, ValueError):
                raise PolicyError(f"SandboxKernel.limits['{key}'] must be a number or null, not {value!r}") from None
            if out[key] is not None and out[key] <= 0:
                raise PolicyError(f"SandboxKernel.limits['{key}'] must be positive")
        return out

    def _named_policy(self, name: str, overrides: dict) -> Policy:
        if name not in self._policies:
            raise PolicyError(f"unknown policy '{name}'; available: {', '.join(sorted(self._policies))}")
        policy = self._policies[name]
        if overrides:
            policy = dataclasses.replace(policy, limits=dataclasses.replace(policy.limits, **overrides))
        return policy

    def start(self):
        super().start()
        if self.protect_process:
            from .isolation.oslayers import protect_process

            self.process_protection = protect_process()
            if self.process_protection.get("dumpable"):
                self.log.warning("the kernel process could not be made non-dumpable: %s",
                                 self.process_protection.get("error"))
        # Signal-mode interrupts (SIGINT from a kernel manager) end the running cell; ipykernel
        # ignores SIGINT otherwise. The kernelspec uses message mode, which needs no signal.
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._on_sigint)
        try:  # start the engine (or its worker) now, so the first cell does not wait for it
            self.backend
        except Exception:
            self.log.error("the sandbox backend could not start; cells will report why", exc_info=True)
        if self.audit_on_start:
            from .audit.onstart import StartupAudit

            self._startup_audit = StartupAudit(
                self.current_policy, self.current_isolation,
                {**self.isolation_options, "degraded": self.isolation_degraded}, self.output_filter.allowlist)
        self._audit_kernel_start()

    @property
    def banner(self):
        return (f"Sandboxed Python {__version__} on Python {sys.version.split()[0]}: every cell runs under "
                f"policy '{self.current_policy.name}'. %sandbox_policy shows what is allowed.")

    @property
    def execution_count(self):
        return self._count

    @execution_count.setter
    def execution_count(self, value):
        self._count = value

    @property
    def kernel_info(self):
        info = dict(super().kernel_info)
        info["supported_features"] = []  # no debugger, no subshells
        return info

    # -- the backend -------------------------------------------------------------------------------

    @property
    def backend(self):
        """The engine's host for the current isolation level, created on first use."""
        if self._backend is None:
            from .isolation import make_backend

            options = dict(self.isolation_options)
            if self.current_isolation != "none":
                options.setdefault("degraded", self.isolation_degraded)
                # Places the worker gets no right on, beyond the ones it finds itself (home, SSH,
                # Jupyter's directories, the connection file): what this kernel's configuration names.
                extra = [p for p in (self.policies_dir, self.audit_log) if p]
                options["protect"] = list(options.get("protect") or []) + extra
                if self.files_off_reason:
                    options.setdefault("workdir_files", False)
            self._backend = make_backend(self.current_isolation, self.current_policy, workdir=self.workdir,
                                         **options)
        return self._backend

    def _replace_backend(self, level: str):
        self._audit_event("worker_restart", reason=f"isolation changes from '{self.current_isolation}' to "
                                                   f"'{level}'", isolation=level)
        old, self._backend = self._backend, None
        self.current_isolation = level
        if old is not None:
            try:
                old.shutdown()
            except Exception:
                self.log.warning("backend shutdown failed", exc_info=True)
        return self.backend

    def _cancel_running(self):
        if self._running.is_set() and self._backend is not None:
            self._backend.cancel()

    def _on_sigint(self, signum, frame):
        self._cancel_running()

    # -- publishing --------------------------------------------------------------------------------

    _cell_parent = None   # the execute_request being answered (see _execute)

    def _publish(self, msg_type: str, content: dict):
        # The parent is the request of the cell being run, captured when it started: a worker's events
        # may be relayed from another thread or task, where get_parent() would name another request
        # (and the front end would drop the output as someone else's).
        parent = self._cell_parent if self._cell_parent is not None else self.get_parent("shell")
        self.session.send(self.iopub_socket, msg_type, content, parent=parent,
                          ident=self._topic(msg_type))

    def _publish_streams(self, chunks):
        for name, text in chunks:
            if text:
                self._publish("stream", {"name": name, "text": text})

    def _record_denial(self, record: dict, source: str = "engine"):
        """Keep a denial for %sandbox_audit, the audit log and the cell's summary. Only the fields a
        denial has are kept, as capped clean text; when and in which cell come from the kernel, and
        `by` says who decided it: the kernel (magics) or the engine (which a worker level runs in a
        process the kernel does not trust)."""
        entry = _denial_fields(record)
        entry.update(time=time.time(), cell=self._count, by=source)
        self._audit.append(entry)
        self._audit_context["denials"] = self._audit_context.get("denials", 0) + 1
        # In the log a limit the engine hit is a `limit` record, and what a worker sent is its claim.
        self._audit_event("limit" if entry["kind"] == "limit" else "denial", **{k: entry[k] for k in _DENIAL_KEYS},
                          by=source, worker_claim=source == "engine" and self.current_isolation != "none")
        if len(self._cell_denials) < _DENIALS_KEPT:
            self._cell_denials.append({k: v for k, v in entry.items() if k not in ("time", "cell")})

    def _flush_audit(self):
        """Write pending records to the audit log. Called only between cells: while a cell runs
        in-process, the engine confines file access process-wide, this callback included. A log that
        cannot be written (disk full, no permission) costs a warning, never the kernel; the records
        are counted, and the first write that succeeds again begins with an `audit_gap` record."""
        pending, self._audit_pending = self._audit_pending, []
        if not (self.audit_log and pending):
            return
        lost = self._audit_lost
        if lost is not None:
            pending.insert(0, self._audit_entry("audit_gap", lost=lost[0], since=lost[1], error=lost[2]))
        try:
            AuditFile(self.audit_log, self.audit_log_max_bytes, self.audit_log_backups).append(pending)
        except Exception as exc:  # noqa: BLE001 - the log must never stop the kernel
            if lost is not None and self._audit_seq == pending[0]["seq"]:
                self._audit_seq -= 1   # an unwritten gap record is no hole: the next one takes its number
            count = len(pending) - (lost is not None) + (lost[0] if lost else 0)
            self._audit_lost = (count, lost[1] if lost else time.time(), f"{type(exc).__name__}: {exc}"[:300])
            self.log.warning("cannot write the audit log %s (%d records lost so far): %s", self.audit_log,
                             count, self._audit_lost[2], exc_info=lost is None)
        else:
            if lost is not None:
                self.log.warning("the audit log %s is written again; %d records were lost", self.audit_log,
                                 lost[0])
            self._audit_lost = None

    def _audit_entry(self, event: str, **fields) -> dict:
        """One audit record. Its frame is the kernel's own: what, when, a number in this kernel's
        sequence, the kernel's session and, during a cell, the cell and the request's client session."""
        self._audit_seq += 1
        entry = {"event": event, "time": time.time(), "seq": self._audit_seq,
                 "kernel_session": getattr(self.session, "session", None)}
        parent = self._cell_parent
        if parent is not None:
            header = parent.get("header") or {}
            entry.update(cell=self._count, client_session=_audit_field(header.get("session"), 100),
                         msg_id=_audit_field(header.get("msg_id"), 100))
        entry.update({k: _audit_field(v, _AUDIT_TEXT) if isinstance(v, str) else v for k, v in fields.items()})
        return entry

    def _audit_event(self, event: str, **fields) -> None:
        """Queue a record for the log (written after the cell). A cell adds at most
        _AUDIT_RECORDS_PER_CELL; past that they are counted in one `audit_dropped` record."""
        if not self.audit_log:
            return
        if self._cell_parent is not None and event not in ("cell", "audit_dropped"):
            if self._audit_in_cell >= _AUDIT_RECORDS_PER_CELL:
                self._audit_dropped += 1
                return
            self._audit_in_cell += 1
        self._audit_pending.append(self._audit_entry(event, **fields))

    def _audit_policy(self, policy: Policy) -> str:
        """sha256 of the policy's full definition: names can be reused, definitions cannot."""
        cached = self._audit_digests
        if cached is not None and (cached[0] is policy or cached[0] == policy):
            return cached[1]
        digest = hashlib.sha256(json.dumps(policy.to_dict(), sort_keys=True).encode()).hexdigest()
        self._audit_digests = (policy, digest)
        return digest

    def _audit_kernel_start(self) -> None:
        """The first record of a kernel: its process, its Jupyter kernel id (from the connection file's
        name, as Jupyter servers name them) and the operator's configuration in effect."""
        try:
            connection = os.path.basename(str(getattr(self.parent, "connection_file", "") or ""))
            kernel_id = connection[len("kernel-"):-len(".json")] if connection.startswith("kernel-") \
                and connection.endswith(".json") else None
            self._audit_event("kernel_start", kernel_id=kernel_id, **self._audit_config())
            self._flush_audit()
        except Exception:  # noqa: BLE001 - the audit must never stop the kernel
            self.log.warning("could not write the kernel's first audit record", exc_info=True)

    def _audit_config(self) -> dict:
        return {"pid": os.getpid(), "version": __version__,
                "python": sys.version.split()[0], "policy": self.current_policy.name,
                "policy_sha256": self._audit_policy(self.current_policy), "ceiling": self.ceiling.name,
                "ceiling_sha256": self._audit_policy(self.ceiling), "isolation": self.current_isolation,
                "isolation_floor": self.isolation_floor, "isolation_degraded": bool(self.isolation_degraded),
                "limits": _limits_fields(self.current_policy.limits), "workdir": self.workdir,
                "files_off": self.files_off_reason is not None, "max_output_bytes": self.max_output_bytes,
                "max_display_bytes": self.max_display_bytes}

    def _audit_cell(self, code: str, silent: bool, reply, started: float) -> None:
        """The cell's record, from the kernel's knowledge: the effective policy and isolation, the reply
        it sent, the time it measured; what the engine reported goes under `claimed` (a worker's word
        at the worker levels). Then the worker losses and the limits the kernel enforced itself."""
        try:
            if not self.audit_log:
                return
            context, summary = self._audit_context, getattr(self, "_last_summary", None) or {}
            policy, output = context.get("policy") or self.current_policy, context.get("output")
            if "os_layers" in summary:
                layers, degraded = summary["os_layers"], bool(summary.get("degraded"))
            else:
                layers, degraded = self._active_layers()
            reply = reply if isinstance(reply, dict) else {}
            worker = summary.get("worker") if isinstance(summary.get("worker"), dict) else {}
            status = reply.get("status", "error")
            entry = {"silent": bool(silent), "status": status, "policy": policy.name,
                     "policy_sha256": self._audit_policy(policy), "limits": _limits_fields(policy.limits),
                     "files": bool(policy.files), "network": bool(policy.network),
                     "isolation": self.current_isolation, "os_layers": layers, "degraded": degraded,
                     "elapsed_ms": round((time.monotonic() - started) * 1000, 3),
                     "code_bytes": len(code.encode("utf-8", "surrogatepass")),
                     "code_sha256": hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest(),
                     "denials": context.get("denials", 0),
                     "output_cut_bytes": output.cut_bytes if output is not None else 0,
                     "filtered": len(output.filtered) if output is not None else 0,
                     "worker_claim": self.current_isolation != "none"}
            claimed = {"ticks": summary.get("ticks", 0), "elapsed_ms": summary.get("elapsed_ms", 0.0),
                       "truncated": bool(summary.get("truncated"))}
            if status == "error":
                by_kernel = bool(worker) or any(d.get("by") == "kernel" for d in summary.get("denials") or [])
                ename = _audit_field(reply.get("ename"), 200)
                if by_kernel:
                    entry["error"] = ename
                else:
                    claimed["error"] = ename
            entry["claimed"] = claimed
            self._audit_event("cell", **entry)
            if worker.get("lost"):
                restarts = getattr(self._backend, "restarts", None)
                self._audit_event("worker_lost", reason=worker.get("reason"), when=worker.get("when"),
                                  message=worker.get("message"), state_lost=worker.get("state_lost"),
                                  recovery_ms=worker.get("recovery_ms"), restarts=restarts,
                                  isolation=self.current_isolation)
                if worker.get("reason") in ("timeout", "memory", "cpu", "flood"):
                    # The kernel's finding only when the backend saw the limit itself (its kill, its own
                    # measure); an exit status or signal the worker chose is the worker's account.
                    claim = worker.get("worker_claim") is not False
                    self._audit_event("limit", kind="limit", target=worker.get("reason"),
                                      message=worker.get("message"), by="worker" if claim else "kernel",
                                      worker_claim=claim)
            elif worker.get("reason") == "unavailable":
                self._audit_event("worker_unavailable", isolation=self.current_isolation,
                                  message=getattr(self._backend, "startup_error", None))
            if output is not None and (output.cut_bytes or output.displays_cut):
                left_out = f", {output.displays_cut} displays left out" if output.displays_cut else ""
                self._audit_event("limit", kind="limit", target="output", by="kernel", worker_claim=False,
                                  message=f"{output.cut_bytes} bytes of the cell's text were cut{left_out} at its "
                                          f"limits (text {output.text_bytes} bytes, displays {output.rich_bytes} bytes)")
            if self._audit_dropped:
                self._audit_event("audit_dropped", records=self._audit_dropped,
                                  message=f"the cell added more than {_AUDIT_RECORDS_PER_CELL} records; "
                                          "the rest are counted here")
        except Exception:  # noqa: BLE001 - the audit must never stop the kernel
            self.log.warning("could not build the audit record of a cell", exc_info=True)
        finally:
            self._audit_in_cell = self._audit_dropped = 0
            self._audit_context = {}

    # -- execute -----------------------------------------------------------------------------------

    async def do_execute(self, code, silent, store_history=True, user_expressions=None,
                         allow_stdin=False, *, cell_meta=None, cell_id=None):
        self._cell_parent = self.get_parent("shell")
        started, reply = time.monotonic(), None
        try:
            reply = self._execute(code, silent, store_history, user_expressions)
            return reply
        finally:
            self._audit_cell(code, silent, reply, started)
            self._cell_parent = None
            self._flush_audit()

    def _execute(self, code, silent, store_history, user_expressions):
        count = self._count
        policy = self.current_policy
        cell = self.output_filter.cell(policy.limits.output_bytes)
        summary = _empty_summary(policy.name, self.current_isolation)
        self._audit_context = {"policy": policy, "output": cell}
        self._cell_denials = []
        self._last_summary = summary
        if store_history and not silent:
            self._history.append((1, count, code, None))
            del self._history[:-_HISTORY_KEPT]

        def fail(ename: str, evalue: str, traceback: list[str], records: list[dict]):
            for record in records:
                self._record_denial(record, source="kernel")
            error = cell.error(ename, evalue, traceback, denial=bool(records))
            if not silent:
                self._publish_streams(cell.finish())
                self._publish("error", error)
            summary.update(status="error", error={**error, "denial": bool(records)}, denials=list(self._cell_denials))
            return {"status": "error", "execution_count": count, "user_expressions": {}, "payload": [],
                    **error}

        if self.files_off_reason and not self._files_notice_shown and not silent:
            self._files_notice_shown = True
            self._publish("stream", {"name": "stderr", "text": f"note: {self.files_off_reason}\n"})

        parsed = parse_cell(code, policy.name)
        if parsed.refused:
            first = parsed.refused[0]
            return fail("SandboxDenied", first.message, [f"SandboxDenied: {first.message}"],
                        [e.record() for e in parsed.refused])

        try:
            policy, notes = self.controls.apply(parsed.controls, policy)
        except MagicError as exc:
            return fail("SandboxDenied", exc.message, [f"SandboxDenied: {exc.message}"], [exc.record()])
        # The cell's own output limit (%%sandbox --output, a policy it selected) cuts its text here (the engine's
        # own cut is wider: _engine_limits); its displays have their own cap (display_bytes).
        cell.set_text_bytes(self.output_filter.text_cap(policy.limits.output_bytes))
        if not silent:
            self._publish_streams(cell.stream("stdout", notes) if notes else [])
        for skipped in parsed.skipped:   # IPython lines not run; the rest of the cell runs
            if not skipped.silent:
                self._record_denial(skipped.record(policy.name), source="kernel")
                if not silent:
                    self._publish_streams(cell.stream("stderr", skipped.note()))
        summary["policy"] = policy.name
        self._audit_context["policy"] = policy
        summary["isolation"] = self.current_isolation
        if notes:
            summary["output"] = notes

        if self._startup_audit is not None and (parsed.code.strip() or user_expressions):
            refusal = self._startup_audit.refusal()  # waits for an audit still running
            if refusal:
                return fail("SandboxUnavailable", refusal, [f"SandboxUnavailable: {refusal}"], [])

        if not parsed.code.strip():
            summary["denials"] = list(self._cell_denials)
            reply = {"status": "ok", "execution_count": count, "payload": [],
                     "user_expressions": self._user_expressions(user_expressions, policy, cell)}
            return reply

        done = self._run(parsed.code, policy, cell, silent, count)
        summary.update(_summary_from(done, cell))
        summary["denials"] = list(self._cell_denials)
        summary["os_layers"], degraded = self._active_layers()
        if degraded:
            summary["degraded"] = True
        if notes:
            summary["output"] = notes + summary["output"]
        if store_history and not silent and self._history:
            result_text = done.get("_result_text")
            if result_text is not None:
                session, line, source, _ = self._history[-1]
                self._history[-1] = (session, line, source, result_text)
        if done.get("status") == "error":
            error = summary["error"] or {"ename": "SandboxError", "evalue": "the cell failed", "traceback": []}
            return {"status": "error", "execution_count": count, "user_expressions": {}, "payload": [],
                    "ename": error["ename"], "evalue": error["evalue"], "traceback": error["traceback"]}
        return {"status": "ok", "execution_count": count, "payload": [],
                "user_expressions": self._user_expressions(user_expressions, policy, cell)}

    def _run(self, source: str, policy: Policy, cell, silent: bool, count: int) -> dict:
        """Run cell code in the backend, publishing its events as they arrive."""
        state = {"result_text": None}

        def emit(event: dict):
            try:
                publish(event)
            except Exception:  # a kernel-side fault must not become the cell's error
                self.log.error("could not publish a sandbox event", exc_info=True)

        def publish(event: dict):
            kind = event.get("type")
            if kind == "stream":
                chunks = cell.stream(event.get("name"), event.get("text"))
                if not silent:
                    self._publish_streams(chunks)
            elif kind in ("display", "result"):
                filtered = cell.bundle(event.get("data"), event.get("metadata"))
                notices = cell.take_notices()  # a display over the display limit, named on one line
                if silent:
                    return
                if filtered is None:
                    self._publish_streams(notices)
                    return
                data, metadata = filtered
                if kind == "result":
                    state["result_text"] = data.get("text/plain")
                    self._publish("execute_result", {"execution_count": count, "data": data,
                                                     "metadata": metadata})
                else:
                    display_id = cell.display_id(event.get("transient"))
                    transient = {} if display_id is None else {"display_id": display_id}
                    update = display_id is not None and event.get("update") is True
                    self._publish("update_display_data" if update else "display_data",
                                  {"data": data, "metadata": metadata, "transient": transient})
                self._publish_streams(notices)
            elif kind == "clear_output":
                if cell.clear() and not silent:
                    self._publish("clear_output", {"wait": event.get("wait") is True})
            elif kind == "error":
                traceback = event.get("traceback") or []
                denial = event.get("denial")
                ename = event.get("ename", "Error")
                if isinstance(denial, dict) and isinstance(denial.get("message"), str) and denial["message"]:
                    # A denial reads as one line: what, why, where, how to proceed.
                    traceback = [f"{ename}: {denial['message']}"]
                elif ename in _DENIAL_NAMES:
                    # The cell raised an exception by a denial's name (its own class, or one it made):
                    # it must not read as the sandbox's decision.
                    ename = f"{ename} (raised by the cell, not by the sandbox)"
                    traceback = [f"[{ename}]", *(traceback if isinstance(traceback, list) else [])]
                error = cell.error(ename, event.get("evalue", ""), traceback, denial=isinstance(denial, dict))
                state["error"] = {**error, "denial": isinstance(denial, dict)}
                if not silent:
                    self._publish_streams(cell.finish())
                    self._publish("error", error)
            elif kind == "denial":
                record = event.get("record")
                if isinstance(record, dict):
                    self._record_denial(record, source="engine")

        self._running.set()
        try:
            done = self.backend.run_cell(source, emit=emit, policy=policy,
                                         limits=_engine_limits(policy.limits, cell), execution_count=count,
                                         display_bytes=cell.upstream_bytes)
        except BaseException as exc:  # noqa: B902 - the backend failed: report, never crash the kernel
            # A limit can escape the engine (an alarm firing while it disarms); make sure no timer
            # keeps interrupting the kernel between cells.
            _silence_alarm()
            failure = describe_failure(exc)
            self.log.error("sandbox backend failed: %s", failure)
            done = {"type": "done", "status": "error", "policy": policy.name,
                    "error": {"ename": "SandboxError",
                              "evalue": f"the sandbox could not run the cell: {failure.splitlines()[0]}",
                              "traceback": []}}
            emit({"type": "error", **done["error"]})
        finally:
            self._running.clear()
        if not silent:
            self._publish_streams(cell.finish())
        if done.get("status") == "error" and "error" not in state and isinstance(done.get("error"), dict):
            # The backend ended with an error it did not emit (a lost worker): show it.
            emit({"type": "error", **done["error"]})
        done = dict(done)
        done["_result_text"] = state["result_text"]
        done["_error"] = state.get("error")
        return done

    def finish_metadata(self, parent, metadata, reply_content):
        metadata = super().finish_metadata(parent, metadata, reply_content)
        summary = getattr(self, "_last_summary", None)
        if summary is not None:
            metadata["sandbox"] = summary
            self._last_summary = None
        return metadata

    def _active_layers(self) -> tuple[list, bool]:
        """The OS layers confining the cell's worker (Landlock, seccomp, rlimits ...), and whether the
        level runs degraded (a layer it needs is missing, which the operator allowed), for agents."""
        if self._backend is None:
            return [], False
        try:
            layers = (self._backend.status() or {}).get("os_layers") or {}
        except Exception:
            return [], False
        active = layers.get("active") if isinstance(layers, dict) else None
        degraded = isinstance(layers, dict) and layers.get("degraded") is True
        return [str(a) for a in active] if isinstance(active, (list, tuple)) else [], degraded

    # -- user_expressions --------------------------------------------------------------------------

    def _user_expressions(self, expressions, policy: Policy, cell) -> dict:
        out = {}
        for name, expression in (expressions or {}).items():
            try:
                result = self.backend.evaluate(str(expression), policy=policy, display_bytes=cell.upstream_bytes)
            except Exception as exc:
                result = {"status": "error", "ename": "SandboxError", "evalue": str(exc), "traceback": []}
            if result.get("status") == "ok":
                filtered = cell.bundle(result.get("data") or {}, result.get("metadata"))
                data, metadata = filtered if filtered else ({"text/plain": ""}, {})
                out[name] = {"status": "ok", "data": data, "metadata": metadata}
            else:
                err = cell.error(result.get("ename", "Error"), result.get("evalue", ""),
                                 result.get("traceback") or [])
                out[name] = {"status": "error", **err}
        return out

    # -- completion, inspection, history -----------------------------------------------------------

    async def do_complete(self, code, cursor_pos):
        cursor_pos = len(code) if cursor_pos is None else cursor_pos
        try:
            result = self.backend.complete(code, cursor_pos)
        except Exception as exc:  # noqa: BLE001
            self.log.warning("completion failed: %s", describe_failure(exc))
            result = {}
        matches, used = [], 0
        raw = result.get("matches") if isinstance(result, dict) else None
        for match in raw if isinstance(raw, list) else []:
            if not isinstance(match, str) or len(match) > _COMPLETION_CHARS:
                continue
            used += len(match)
            if len(matches) >= _COMPLETIONS_KEPT or used > _COMPLETION_BYTES:
                break
            matches.append(clean_text(match))
        metadata = {}
        trimmed = (result.get("metadata") or {}).get("sandbox_trimmed") if isinstance(result, dict) else None
        if isinstance(trimmed, str) or len(matches) < len(raw if isinstance(raw, list) else []):
            metadata["sandbox_trimmed"] = clean_text(str(trimmed or f"the first {len(matches)} names are listed")[:300])
        return {"status": "ok", "matches": matches,
                "cursor_start": _position(result.get("cursor_start"), cursor_pos, len(code)),
                "cursor_end": _position(result.get("cursor_end"), cursor_pos, len(code)), "metadata": metadata}

    async def do_inspect(self, code, cursor_pos, detail_level=0, omit_sections=()):
        try:
            result = self.backend.inspect(code, cursor_pos, detail_level)
        except Exception as exc:  # noqa: BLE001
            self.log.warning("inspection failed: %s", describe_failure(exc))
            result = {}
        data = {}
        if result.get("found"):
            filtered = self.output_filter.cell().bundle(result.get("data") or {}, {})
            data = filtered[0] if filtered else {}
        return {"status": "ok", "found": bool(data), "data": data, "metadata": {}}

    async def do_history(self, hist_access_type, output, raw, session=0, start=0, stop=None, n=None,
                         pattern=None, unique=False, **kwargs):
        """History of this kernel's cells, kept in memory (IPython's database is never used)."""
        entries = self._history
        if hist_access_type == "tail":
            entries = entries[-n:] if n else entries
        elif hist_access_type == "range":
            entries = [e for e in entries if e[1] >= (start or 0) and (stop is None or e[1] < stop)]
        elif hist_access_type == "search":
            entries = [e for e in entries if fnmatch.fnmatchcase(e[2], pattern or "*")]
            if unique:
                seen, kept = set(), []
                for e in reversed(entries):
                    if e[2] not in seen:
                        seen.add(e[2])
                        kept.append(e)
                entries = kept[::-1]
            if n:
                entries = entries[-n:]
        else:
            entries = []
        history = [(s, line, (src, out) if output else src) for s, line, src, out in entries]
        return {"status": "ok", "history": history}

    # -- protocol side doors -----------------------------------------------------------------------

    async def interrupt_request(self, stream, ident, parent):
        """Message-mode interrupt (runs on the control thread): end the running cell."""
        self._cancel_running()
        self.session.send(stream, "interrupt_reply", {"status": "ok"}, parent, ident=ident)

    async def do_debug_request(self, msg):
        return {"type": "response", "request_seq": msg.get("seq"), "success": False,
                "command": msg.get("command"), "message": "the debugger is off in Sandboxed Python"}

    def dispatch_debugpy(self, msg):
        return None

    async def create_subshell_request(self, socket, ident, parent):
        self.session.send(socket, "create_subshell_reply",
                          {"status": "error", "ename": "SandboxDenied",
                           "evalue": "subshells are off in Sandboxed Python", "traceback": []}, parent, ident)

    async def delete_subshell_request(self, socket, ident, parent):
        self.session.send(socket, "delete_subshell_reply",
                          {"status": "error", "ename": "SandboxDenied",
                           "evalue": "subshells are off in Sandboxed Python", "traceback": []}, parent, ident)

    async def list_subshell_request(self, socket, ident, parent):
        self.session.send(socket, "list_subshell_reply", {"status": "ok", "subshell_id": []}, parent, ident)

    async def shell_channel_thread_main(self, msg):
        """ipykernel 7 routes each shell message by its header's ``subshell_id``. There are no
        subshells here, so any message naming one gets an error reply and goes no further. ipykernel
        7.4 replies like this itself, but 7.3 (the newest for Python 3.10) logs the message and drops
        it, leaving the client without a reply."""
        if self.session is not None and self._refuse_subshell_message(msg):
            return
        await super().shell_channel_thread_main(msg)

    def _refuse_subshell_message(self, msg) -> bool:
        """Runs in the shell channel thread, which owns the shell socket. Only the header is read;
        a message that does not parse is left for ipykernel to log and drop."""
        idents, rest = self.session.feed_identities(msg, copy=False)
        try:
            parsed = self.session.deserialize(rest, content=False, copy=False)
        except Exception:
            return False
        header = parsed["header"]
        if header.get("subshell_id") is None:
            return False
        msg_type = header.get("msg_type", "")
        self.log.warning("refused %s addressed to subshell %r: subshells are off", msg_type,
                         header.get("subshell_id"))
        content = {"status": "error", "ename": "SandboxDenied",
                   "evalue": "subshells are off in Sandboxed Python", "traceback": []}
        # Not finish_metadata: that takes the running cell's summary, which belongs to its own reply.
        metadata = self.init_metadata(parsed)
        metadata["status"] = "error"
        self._publish_status("busy", "shell", parent=parsed)
        self.session.send(self.shell_stream, msg_type.rsplit("_", 1)[0] + "_reply", content,
                          parsed, idents, metadata=metadata)
        self._publish_status("idle", "shell", parent=parsed)
        return True

    async def comm_info_request(self, stream, ident, parent):
        self.session.send(stream, "comm_info_reply", {"status": "ok", "comms": {}}, parent, ident)

    def _ignore_comm(self, stream, ident, parent):
        self.log.info("comm message refused: comms are off in Sandboxed Python")

    def do_apply(self, content, bufs, msg_id, reply_metadata):
        return {"status": "error", "ename": "SandboxDenied", "evalue": "apply requests are off",
                "traceback": []}, []

    def do_clear(self):
        return {"status": "error", "ename": "SandboxDenied", "evalue": "clear requests are off",
                "traceback": []}

    def do_shutdown(self, restart):
        self._audit_event("kernel_shutdown", restart=bool(restart))
        self._flush_audit()
        if self._startup_audit is not None:
            self._startup_audit.stop()
        if self._backend is not None:
            try:
                self._backend.shutdown()
            except Exception:
                self.log.warning("backend shutdown failed", exc_info=True)
            self._backend = None
        return super().do_shutdown(restart)


def describe_failure(exc: BaseException) -> str:
    """An exception out of the backend, described for the log and the user without running any of its
    code. At level none it may be a cell's object, or chain to one (a class whose __getattribute__,
    __str__ or __notes__ is the cell's, or a library callable put there): logging.exception() would walk
    its chain and render it in the kernel, outside every confinement. Named by its real type; its message
    only when its class is the runtime's or Python's own and its arguments plain text or numbers; the
    frames from its traceback (host code, through BaseException's own descriptor)."""
    kind = type(exc)
    text = kind.__name__ if type(kind.__name__) is str else "exception"
    module = type.__dict__["__module__"].__get__(kind)
    args = BaseException.__dict__["args"].__get__(exc, kind)
    if type(module) is str and (module == "builtins" or module.startswith("sandbox_kernel.")) \
            and all(type(a) in (str, int, float) for a in args):
        text += f": {BaseException.__str__(exc)}"
    frames = traceback.extract_tb(BaseException.__dict__["__traceback__"].__get__(exc, kind))
    return "\n".join([text[:2000]] + [f"  {f.filename}:{f.lineno} in {f.name}" for f in frames[-8:]])


def _silence_alarm() -> None:
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, signal.SIG_IGN)


def _engine_limits(limits, cell):
    """The limits the backend runs a cell under: the policy's, with a text limit twice the kernel's. The kernel
    makes the one cut a person sees (head and tail, outputfilter.CellOutput); the engine's own cut, where its
    head and tail meet, only bounds a flood before it crosses the channel, and must lie outside the kernel's."""
    wide = 2 * cell.text_bytes
    if limits.output_bytes is None or limits.output_bytes >= wide:
        return limits
    return dataclasses.replace(limits, output_bytes=wide)


def _empty_summary(policy: str, isolation: str) -> dict:
    return {"status": "ok", "output": "", "charts": [], "error": None, "denials": [], "truncated": False,
            "ticks": 0, "elapsed_ms": 0.0, "policy": policy, "isolation": isolation, "filtered": []}


def _summary_from(done: dict, cell) -> dict:
    """execute_reply.metadata["sandbox"]: seed 002's {output, chart, error}, generalised.

    Only what the engine computed comes from `done` (output, charts, ticks, elapsed time), each copy
    charged to the cell's output budget; the policy, isolation, denials and worker record are the
    kernel's own (the caller fills them)."""
    charts = []
    for chart in done.get("charts") or []:
        clean = cell.charge_chart(chart)
        if clean is not None:
            charts.append(clean)
    output = cell.charge_text(done.get("output") if isinstance(done.get("output"), str) else "")
    error = done.get("_error")
    if isinstance(error, dict):
        line = done.get("error", {}).get("line") if isinstance(done.get("error"), dict) else None
        error = {"ename": error.get("ename"), "evalue": error.get("evalue"),
                 "traceback": error.get("traceback") or [], "denial": bool(error.get("denial")),
                 **({"line": line} if type(line) is int else {})}
    else:
        error = None
    summary = {
        "status": "ok" if done.get("status") == "ok" else "error",
        "output": output,
        "charts": charts,
        "error": error,
        "truncated": bool(done.get("truncated")) or cell.truncated,
        "ticks": _number(done.get("ticks")),
        "elapsed_ms": _number(done.get("elapsed_ms")),
        "filtered": list(cell.filtered),
    }
    worker = _worker_fields(done.get("worker"))
    if worker is not None:
        summary["worker"] = worker
    return summary


def _number(value) -> float | int:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
        and abs(value) < 1e18 else 0


def _position(value, default, length: int) -> int:
    if type(value) is int and 0 <= value <= length:
        return value
    return default if type(default) is int and 0 <= default <= length else length


def _denial_fields(record: dict) -> dict:
    """The fields a denial record has, as capped, cleaned one-line text (the line as a number): a
    denied name can hold a line break, which must not start a line of its own in %sandbox_audit."""
    out = {}
    for key in _DENIAL_KEYS:
        value = record.get(key)
        if key == "line":
            out[key] = value if type(value) is int and 0 < value < 10 ** 9 else None
        elif isinstance(value, str):
            out[key] = one_line(value[:2000])
        else:
            out[key] = None
    return out


def _audit_field(value, limit: int):
    """A string field of an audit record: capped and cleaned (a terminal reading the log acts on nothing)."""
    return clean_text(value[:limit]) if isinstance(value, str) else None


def _limits_fields(limits) -> dict:
    return {key: getattr(limits, key, None) for key in _LIMIT_KEYS}


_WORKER_KEYS = {"lost": bool, "reason": str, "state_lost": bool, "message": str, "when": str,
                "recovery_ms": (int, float), "worker_claim": bool}


def _worker_fields(worker) -> dict | None:
    """The backend's record of a lost or unavailable worker, field by field."""
    if not isinstance(worker, dict):
        return None
    out = {}
    for key, kind in _WORKER_KEYS.items():
        value = worker.get(key)
        if isinstance(value, kind) and not (kind is not bool and isinstance(value, bool)):
            out[key] = clean_text(value[:2000]) if isinstance(value, str) else value
    return out
