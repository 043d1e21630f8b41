"""The sandbox worker: ``python -I -m sandbox_kernel.isolation.worker --fd N``.

Started by :mod:`sandbox_kernel.isolation.process` with one end of a socketpair as fd N. Its life:

1. read the ``init`` request (level, working directory, policy, options) from the host;
2. confine itself (see oslayers.py): Landlock and capabilities while single-threaded, then the
   warm-up imports, then rlimits and seccomp; a layer that fails ends the worker with a ``fatal``
   message, unless the operator allowed degraded mode;
3. create the engine and answer ``ready`` with exactly which layers took effect;
4. loop: one request, the engine's events streamed back as they happen, the reply.

Everything the worker sends is plain JSON. It trusts the host (its parent) and nothing else.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import sys
import time

from .channel import MAX_EVENT_BYTES, MAX_REQUEST_BYTES, Channel, ChannelClosed, ChannelError

PR_SET_PDEATHSIG = 1
PLOTLY_MIME = "application/vnd.plotly.v1+json"
# Leave room for the frame header and a note when an event must be cut.
_EVENT_BUDGET = MAX_EVENT_BYTES - 64 * 1024


def _die_with_parent(pdeathsig: bool):
    if not pdeathsig:
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort; the host also kills us on shutdown
        pass
    if os.getppid() == 1:
        os._exit(0)


def _plain(value, depth=0):
    """A JSON-safe copy: non-finite floats become None, unknown objects a fixed placeholder.
    Never calls repr/str on an unknown object: that could run sandbox-defined code outside the limits."""
    if depth > 60:
        return None
    if value is None or isinstance(value, (bool, int, str)):
        return value if type(value) in (bool, int, str) or value is None else None
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k if type(k) is str else "<key>": _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    return "<unserialisable>"


class Worker:
    def __init__(self, channel: Channel):
        self.channel = channel
        self.engine = None
        self.running = False
        self.memory_mb = None
        self._cell_events = 0
        self._sent_charts: dict = {}
        self._sent_stdout: list = []
        self._last_cell_policy = None
        self._policy_cache: tuple[str, object] | None = None

    # -- sending -------------------------------------------------------------------------------

    def send(self, message: dict) -> None:
        try:
            body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            body = json.dumps(_plain(message), ensure_ascii=False, separators=(",", ":"))
        data = body.encode("utf-8")
        if len(data) > _EVENT_BUDGET:
            note = f"[sandbox] an output of {len(data) // 2 ** 20} MB was too large to send and was dropped"
            if message.get("type") == "done":
                small = {k: message.get(k) for k in ("type", "status", "ticks", "elapsed_ms", "policy",
                                                      "execution_count")}
                small["truncated"] = True
                small["error"] = {"ename": "OutputTooLarge", "evalue": note, "traceback": [note]}
                small = _plain(small)
            else:
                small = {"type": "stream", "name": "stderr", "text": note + "\n"}
            data = json.dumps(small, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.channel.send_body(data)

    # -- start-up ------------------------------------------------------------------------------

    def start(self, init: dict) -> None:
        from ..policy import Policy
        from . import oslayers

        level = init["level"]
        policy = Policy.from_dict(init["policy"])
        places = [tuple(p) for p in init.get("protected", ())]
        workdir = _enter_workdir(init, policy, places)
        for p in init.get("extra_sys_path", ()):
            if p not in sys.path:
                sys.path.append(p)

        record = oslayers.LayerRecord(level, bool(init.get("degraded_ok")))
        record.workdir = {"files_in_workdir": workdir["writable"] == workdir["workdir"], "why_not": workdir["why_not"]}
        t0 = time.perf_counter()
        oslayers.apply_early(record, workdir=workdir["writable"], network=policy.network,
                             extra_read=tuple(init.get("extra_read", ())) + tuple(init.get("extra_sys_path", ())),
                             places=places, landlock_abi=init.get("landlock_abi"))
        for mod in init.get("warm", ()):
            try:
                __import__(mod)
            except Exception:  # noqa: BLE001 - a missing optional library is not fatal
                pass
        engine_factory = init.get("engine") or "sandbox_kernel.engine:Engine"
        modname, _, attr = engine_factory.partition(":")
        factory = getattr(__import__(modname, fromlist=[attr]), attr)
        warm_ms = (time.perf_counter() - t0) * 1000
        from . import rlimits

        oslayers.apply_late(record, memory_mb=init.get("memory_mb", policy.limits.memory_mb),
                            network=policy.network, fsize_mb=init.get("fsize_mb"), nofile=init.get("nofile"))
        self.memory_mb = init.get("memory_mb", policy.limits.memory_mb)
        self.engine = factory(policy, workdir=workdir["engine"])
        self._policy_cache = (json.dumps(policy.to_dict(), sort_keys=True), policy)
        signal.signal(signal.SIGINT, self._on_interrupt)
        summary = record.summary()
        self.send({"type": "ready", "pid": os.getpid(), "layers": summary,
                   "python": sys.version.split()[0],
                   "baseline_mb": round(rlimits.address_space_bytes() / 2 ** 20, 1),
                   "warm_ms": round(warm_ms, 1)})

    def _on_interrupt(self, signum, frame):
        if self.running and self.engine is not None:
            self.engine.cancel()

    # -- requests ------------------------------------------------------------------------------

    def _policy(self, data):
        if data is None:
            return None
        from ..policy import Policy

        key = json.dumps(data, sort_keys=True)
        if self._policy_cache and self._policy_cache[0] == key:
            return self._policy_cache[1]
        policy = Policy.from_dict(data)
        self._policy_cache = (key, policy)
        return policy

    def handle(self, req: dict) -> bool:
        """Serve one request; False when the worker should exit."""
        op = req.get("op")
        rid = req.get("id", 0)
        if op == "shutdown":
            return False
        if op == "run_cell":
            self.run_cell(req)
            return True
        try:
            if op == "evaluate":
                value = self.engine.evaluate(req["expression"], policy=self._policy(req.get("policy")))
                _quiet_alarm()
            elif op == "complete":
                value = self.engine.complete(req["code"], req.get("cursor_pos"))
            elif op == "inspect":
                value = self.engine.inspect(req["code"], req.get("cursor_pos"), req.get("detail_level", 0))
            elif op == "reset":
                value = self.engine.reset()
            elif op == "ping":
                value = {"pid": os.getpid()}
            else:
                raise ValueError(f"unknown request {op!r}")
            self.send({"type": "reply", "id": rid, "value": value})
        except BaseException as exc:  # noqa: B902 - reported to the host, the worker lives on
            if isinstance(exc, (ChannelError, BrokenPipeError, ConnectionError)):
                raise
            _quiet_alarm()
            self.send({"type": "reply", "id": rid, "value": None, "error": f"{type(exc).__name__}: {exc}"})
        return True

    def _explain(self, err: dict) -> dict:
        """A MemoryError raised because the worker hit its address-space limit says so."""
        if err.get("ename") == "MemoryError" and self.memory_mb:
            note = (f"out of memory: the sandbox worker's memory limit is {self.memory_mb} MB; "
                    "the cell stopped, the variables bound before it are kept")
            detail = err.get("evalue") or ""
            err = {**err, "evalue": f"{note} ({detail})" if detail else note}
            tb = list(err.get("traceback") or [])
            if tb:
                tb[-1] = f"MemoryError: {err['evalue']}"
            err["traceback"] = tb
        return err

    def _emit(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "error":
            event = self._explain(event)
        elif kind == "stream" and event.get("name") == "stdout" and type(event.get("text")) is str:
            self._sent_stdout.append(event["text"])
        elif kind in ("display", "result") and isinstance(event.get("data"), dict):
            chart = event["data"].get(PLOTLY_MIME)
            if chart is not None:
                self._sent_charts[id(chart)] = (self._cell_events, chart)
        self._cell_events += 1
        self.send(event)

    def _chart_refs(self, done: dict) -> None:
        """What this cell's events already carried travels once: ``done.output`` equal to the stdout
        sent becomes {"$stdout": true}; a chart sent in a display/result event becomes {"$event": n}.
        The host puts back the data it relayed itself."""
        output = done.get("output")
        if type(output) is str and output and output == "".join(self._sent_stdout):
            done["output"] = {"$stdout": True}  # the host joins the stdout it relayed
        charts = done.get("charts")
        if not isinstance(charts, list):
            return
        refs = []
        for chart in charts:
            hit = self._sent_charts.get(id(chart))
            refs.append({"$event": hit[0]} if hit is not None and hit[1] is chart else chart)
        done["charts"] = refs

    def run_cell(self, req: dict) -> None:
        from ..policy import Limits
        from . import rlimits

        if req.get("policy_ref") == "last":
            policy = self._last_cell_policy
        else:
            policy = self._last_cell_policy = self._policy(req.get("policy"))
        limits = Limits(**req["limits"]) if req.get("limits") else None
        effective = limits or (policy or self.engine.policy).limits
        if effective.timeout:
            rlimits.set_cell_cpu_budget((effective.timeout + 5) * max(1, os.cpu_count() or 1))
        else:
            rlimits.set_cell_cpu_budget(None)
        self.running = True
        self._cell_events = 0
        self._sent_charts = {}
        self._sent_stdout = []
        try:
            done = self.engine.run_cell(req["source"], emit=self._emit, policy=policy, limits=limits,
                                        execution_count=req.get("execution_count"))
            if isinstance(done, dict) and isinstance(done.get("error"), dict):
                done["error"] = self._explain(done["error"])
            if isinstance(done, dict):
                done = dict(done)
                self._chart_refs(done)
        except (ChannelClosed, BrokenPipeError):
            raise
        except BaseException as exc:  # noqa: B902 - an engine failure must still close the cell
            msg = f"internal error in the sandbox engine: {type(exc).__name__}"
            err = {"ename": "SandboxInternalError", "evalue": msg, "traceback": [msg]}
            self.send({"type": "error", **err, "denial": None})
            done = {"type": "done", "status": "error", "error": err}
        finally:
            self.running = False
            _quiet_alarm()
        self.send(done)
        self._sent_charts = {}
        self._sent_stdout = []


def _enter_workdir(init: dict, policy, places) -> dict:
    """Choose the one directory this worker may write (workdir.writable_dir: the working directory only
    when the policy has files and no protected place is within reach; else the host's private scratch
    directory; else none), make it the current directory, HOME and TMPDIR. The engine confines files to
    it too; with none, to a path that does not exist."""
    from ..workdir import writable_dir

    requested = os.path.realpath(init["workdir"])
    files = bool(policy.files) and init.get("workdir_files", True) is not False
    scratch = init.get("scratch")
    if files:
        try:
            os.makedirs(requested, exist_ok=True)
        except OSError:
            pass
    writable, why_not = writable_dir(requested, scratch, files=files, places=places)
    home = writable or "/"
    os.chdir(home)
    os.environ.update({"HOME": home, "TMPDIR": home, "MPLCONFIGDIR": home})
    engine_dir = writable or os.path.join(scratch or "/nonexistent", "no-writable-directory")
    return {"workdir": requested, "writable": writable, "why_not": why_not, "engine": engine_dir}


def _quiet_alarm() -> None:
    """Between cells no timer may fire: a late SIGALRM from the engine's budget would otherwise raise
    inside the request loop and end the worker."""
    try:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
    except (OSError, ValueError):
        pass


def _watch_parent(parent: int) -> None:
    """Exit when the kernel is gone, even in the middle of a cell (started after Landlock, which must
    be applied while the worker is single-threaded; seccomp covers this thread too)."""
    import threading

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="sandbox_kernel.isolation.worker")
    parser.add_argument("--fd", type=int, required=True, help="inherited socketpair end")
    parser.add_argument("--die-with-parent", action="store_true", help="use PR_SET_PDEATHSIG")
    args = parser.parse_args(argv)
    _die_with_parent(args.die_with_parent)
    parent = os.getppid()
    import faulthandler

    faulthandler.enable()  # a crash leaves its C-level traceback in the host's diagnostics (stderr tail)
    # A Ctrl-C in the kernel's terminal must not reach us; the host signals us explicitly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=args.fd)
    channel = Channel(sock, max_recv=MAX_REQUEST_BYTES, max_send=MAX_EVENT_BYTES)
    worker = Worker(channel)
    try:
        init = channel.recv()
        if init.get("op") != "init":
            return 2
        try:
            worker.start(init)
        except Exception as exc:  # noqa: BLE001 - includes oslayers.LayerError: fail closed
            worker.send({"type": "fatal", "message": f"{exc}"[:2000]})
            return 3
        _watch_parent(parent)
        while True:
            req = channel.recv()
            try:
                if not worker.handle(req):
                    return 0
            except (ChannelError, BrokenPipeError, ConnectionError):
                raise
            except Exception:  # noqa: BLE001 - a stray limit or engine bug between requests
                _quiet_alarm()
                worker.send({"type": "reply", "id": req.get("id", 0), "value": None,
                             "error": "internal error in the sandbox worker"})
    except (ChannelError, BrokenPipeError, ConnectionError):
        return 0


if __name__ == "__main__":
    sys.exit(main())
