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

from .channel import (EXIT_OUT_OF_MEMORY, MAX_EVENT_BYTES, MAX_REQUEST_BYTES, REQUEST_TYPES, Channel,
                      ChannelClosed, ChannelError)

PR_SET_PDEATHSIG = 1
PLOTLY_MIME = "application/vnd.plotly.v1+json"
# Leave room for the frame header and a note when an event must be cut.
_EVENT_BUDGET = MAX_EVENT_BYTES - 64 * 1024
# Address space held for the warm-up imports after the OS layers (numpy, pandas and Plotly map about 180 MB
# here, most of it numpy's and OpenBLAS's): the cell's memory limit is not spent on them.
WARM_RESERVE_MB = 512
# A reply outside a cell (completion, inspection, user_expressions) fits the budget the host states in
# its request (``max_bytes``), this by default; the host refuses anything larger.
DEFAULT_REPLY_BYTES = 1024 * 1024


def _die_with_parent(pdeathsig: bool, parent: int | None):
    """SIGKILL when the kernel's process dies (the host starts every worker from a thread that lives as
    long as it). The filter refuses to change it later, so no cell can outlive the kernel."""
    if pdeathsig:
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except Exception:  # noqa: BLE001 - best effort; the host also kills us on shutdown
            pass
    if os.getppid() != (parent or os.getppid()) or os.getppid() == 1:
        os._exit(0)  # the kernel died before the signal was armed


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
        self._sent_charts: list = []  # (event number, Plotly data) of this cell's events
        self._sent_stdout: list = []
        self._display_cap: int | None = None  # the kernel's cap on a cell's displays (the request says)
        self._display_sent = 0
        self._withheld: list = []  # charts not sent: past the display cap
        self._last_cell_policy = None
        self._policy_cache: tuple[str, object] | None = None
        self._rid = 0  # the id of the request being served, echoed in everything sent for it
        self._done_budget = _EVENT_BUDGET  # the host's limit for this cell's done (its request says)
        self.protected: dict = {}  # oslayers.protect_process()'s answer, reported in ready
        self.warm_pending: list = []  # modules start() leaves for warm_while_idle()
        self._warm_done = False
        self.tasks_fd: int | None = None  # where the host waits for the task listener (level kernel)

    # -- sending -------------------------------------------------------------------------------

    def send(self, message: dict) -> None:
        self.channel.send_body(self._frame(message))

    def _frame(self, message: dict) -> bytes:
        """One frame's body. Messages of a request start with its type and id (the host may classify a
        frame by that prefix alone); anything too large to send is replaced by a note saying so."""
        kind = message.get("type")
        if kind in REQUEST_TYPES:
            tagged = {"type": kind, "id": self._rid}
            tagged.update(message)  # keeps type and id first (the engine's own events carry no id)
            tagged["id"] = self._rid
            message = tagged
        try:
            data = self._encode(message)
        except MemoryError:
            data = None
        budget = self._done_budget if kind == "done" else _EVENT_BUDGET
        if data is None or len(data) > budget:
            why = ("could not be encoded: the sandbox worker is out of memory" if data is None else
                   f"of {len(data) / 2 ** 20:.1f} MB was too large to send")
            data = None
            note = f"[sandbox] an output {why}, so it was dropped"
            if kind == "done":  # the summary without its copies of the output; the cell's verdict stays
                self.send({"type": "stream", "name": "stderr",
                           "text": f"[sandbox] the cell's summary {why}; its output and charts are left out of it\n"})
                small = {k: message.get(k) for k in ("type", "id", "status", "ticks", "elapsed_ms", "policy",
                                                      "execution_count", "error")}
                small["truncated"] = True
                small = _plain(small)
                if len(self._encode(small)) > 65536:
                    small["error"] = {"ename": "OutputTooLarge", "evalue": note, "traceback": [note]}
            elif kind == "reply":
                small = {"type": "reply", "id": self._rid, "value": None, "error": note}
            else:
                small = {"type": "stream", "id": self._rid, "name": "stderr", "text": note + "\n"}
            data = self._encode(small)
        return data

    @staticmethod
    def _encode(message: dict) -> bytes:
        try:
            body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError):
            body = json.dumps(_plain(message), ensure_ascii=False, separators=(",", ":"))
        try:
            return body.encode("utf-8")
        except UnicodeEncodeError:  # a cell's lone surrogates ('\ud800') become U+FFFD, as in the kernel
            return body.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")

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
                             places=places, landlock_abi=init.get("landlock_abi"), tasks_fd=self.tasks_fd)
        if record.tasks is None and self.tasks_fd is not None:
            try:
                os.close(self.tasks_fd)  # not handed over: the host's wait for it ends (EOF)
            except OSError:
                pass
        self.tasks_fd = None
        # plotly.io loads nbformat (and through it jsonschema's format checkers, which compile dozens of
        # grammars: 1-7 s) only for its own notebook renderer, which a worker never uses: fig.show() and
        # pio.show() are the sandbox's display. Without this the first cell waits for those seconds.
        sys.modules.setdefault("nbformat", None)
        # The data libraries are imported after "ready", while no request waits (warm_while_idle): a first
        # cell need not wait for them, and one that imports them finds them loaded or loads them itself.
        self.warm_pending = [str(m) for m in init.get("warm", ())]
        engine_factory = init.get("engine") or "sandbox_kernel.engine:Engine"
        modname, _, attr = engine_factory.partition(":")
        factory = getattr(__import__(modname, fromlist=[attr]), attr)
        warm_ms = (time.perf_counter() - t0) * 1000
        from . import rlimits

        oslayers.apply_late(record, memory_mb=init.get("memory_mb", policy.limits.memory_mb),
                            network=policy.network, fsize_mb=init.get("fsize_mb"), nofile=init.get("nofile"),
                            cpu_hours=init.get("cpu_hours"), max_syscall=init.get("max_syscall"),
                            warm_reserve_mb=WARM_RESERVE_MB if self.warm_pending else 0)
        record.layers["non_dumpable"] = {"active": self.protected.get("dumpable") is False, **self.protected}
        self.memory_mb = init.get("memory_mb", policy.limits.memory_mb)
        self.engine = factory(policy, workdir=workdir["engine"])
        self._policy_cache = (json.dumps(policy.to_dict(), sort_keys=True), policy)
        signal.signal(signal.SIGINT, self._on_interrupt)
        summary = record.summary()
        self.send({"type": "ready", "pid": os.getpid(), "layers": summary,
                   "python": sys.version.split()[0],
                   "baseline_mb": round(rlimits.address_space_bytes() / 2 ** 20, 1),
                   "warm_ms": round(warm_ms, 1)})

    def warm_while_idle(self) -> None:
        """The warm-up imports, one module at a time, for as long as no request waits; the first cell ends the
        warm-up for good (a module left is imported by the cell that uses it, as any other module is). Done
        after the OS layers, as a cell's own import would be, outside any cell. The address space held for
        them is given back once they are all in (the limit becomes what is mapped then plus the cell's
        memory); a warm-up cut short keeps it, WARM_RESERVE_MB at most, for the imports the cells make."""
        while self.warm_pending and self.channel.pending() is None:
            try:
                __import__(self.warm_pending.pop(0))
            except Exception:  # noqa: BLE001 - a missing optional library is not fatal
                pass
        if self.warm_pending or self._warm_done:
            return
        self._warm_done = True
        if self.memory_mb is not None:
            from . import rlimits
            try:
                rlimits.tighten_address_space(self.memory_mb)
            except (OSError, ValueError):
                pass

    def stop_warming(self) -> None:
        self.warm_pending = []

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
        rid = req.get("id")
        self._rid = rid if type(rid) is int else 0
        if op == "shutdown":
            return False
        if op == "run_cell":
            self.run_cell(req)
            return True
        budget = req.get("max_bytes")
        budget = min(budget if type(budget) is int and budget > 0 else DEFAULT_REPLY_BYTES, _EVENT_BUDGET)
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
                from . import rlimits
                value = {"pid": os.getpid(), "warm_left": list(self.warm_pending),
                         "address_space_mb": rlimits.address_space_limit_mb()}
            else:
                raise ValueError(f"unknown request {op!r}")
            self.send_reply(op, value, budget)
        except BaseException as exc:  # noqa: B902 - reported to the host, the worker lives on
            if isinstance(exc, (ChannelError, BrokenPipeError, ConnectionError)):
                raise
            _quiet_alarm()
            self.send({"type": "reply", "value": None, "error": f"{type(exc).__name__}: {exc}"[:2000]})
        return True

    def send_reply(self, op: str, value, budget: int) -> None:
        """The reply, trimmed (and saying so) when its frame would pass ``budget`` bytes: a reply the
        host refuses would cost the worker, and with it the notebook's variables."""
        message = {"type": "reply", "id": self._rid, "value": value}
        data = self._encode(message)
        if len(data) > budget:
            value = fit_reply(op, value, budget - 4096)
            data = self._encode({**message, "value": value})
            if len(data) > budget:
                data = self._encode({"type": "reply", "id": self._rid, "value": None,
                                     "error": f"the answer to '{op}' was too large to send"})
        self.channel.send_body(data)

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
            self._cell_events += 1
            self.channel.send_body(self._display_frame(kind, event))
            return
        self._cell_events += 1
        self.send(event)

    def _display_frame(self, kind: str, event: dict) -> bytes:
        """A display or result, or, past the kernel's display cap for the cell, a note in its place: the
        kernel could not publish it, and sending it would only look like a flood."""
        chart = event["data"].get(PLOTLY_MIME)
        data = self._frame(event)
        if self._display_cap is not None and self._display_sent + len(data) > self._display_cap:
            if chart is not None:
                self._withheld.append(chart)
            note = (f"[display of {len(data) / 1e6:.1f} MB not shown: over the cell's display limit of "
                    f"{self._display_cap / 1e6:.1f} MB]")
            return self._frame({"type": kind, "data": {"text/plain": note}, "metadata": {}})
        self._display_sent += len(data)
        if chart is not None:
            self._sent_charts.append((self._cell_events - 1, chart))
        return data

    def _chart_refs(self, done: dict) -> None:
        """What this cell's events already carried travels once: ``done.output`` equal to the stdout
        sent becomes {"$stdout": true}; a chart sent in a display/result event becomes {"$event": n}.
        The host puts back the data it relayed itself. Charts are matched by value, in order: the
        engine hands out copies (host paths scrubbed), so identity cannot match them."""
        output = done.get("output")
        if type(output) is str and output and output == "".join(self._sent_stdout):
            done["output"] = {"$stdout": True}  # the host joins the stdout it relayed
        charts = done.get("charts")
        if not isinstance(charts, list):
            return
        refs, start = [], 0
        for chart in charts:
            for j in range(start, len(self._sent_charts)):
                number, sent = self._sent_charts[j]
                if sent is chart or sent == chart:
                    refs.append({"$event": number})
                    start = j + 1
                    break
            else:
                if any(held == chart for held in self._withheld):
                    done["truncated"] = True  # not displayed (over the cap): not in the summary either
                else:
                    refs.append(chart)
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
        budget = req.get("max_done_bytes")
        self._done_budget = min(budget, _EVENT_BUDGET) if type(budget) is int and budget > 0 else _EVENT_BUDGET
        cap = req.get("display_bytes")
        self._display_cap = cap if type(cap) is int and cap >= 0 else None
        self._display_sent = 0
        self._withheld = []
        self.running = True
        self._cell_events = 0
        self._sent_charts = []
        self._sent_stdout = []
        try:
            done = self.engine.run_cell(req["source"], emit=self._emit, policy=policy, limits=limits,
                                        execution_count=req.get("execution_count"), display_bytes=self._display_cap)
            if isinstance(done, dict) and isinstance(done.get("error"), dict):
                done["error"] = self._explain(done["error"])
            if isinstance(done, dict):
                done = dict(done)
                self._chart_refs(done)
        except (ChannelClosed, BrokenPipeError):
            raise
        except BaseException as exc:  # noqa: B902 - an engine failure must still close the cell
            if isinstance(exc, MemoryError):  # the engine itself ran out: say so; the worker lives on
                err = self._explain({"ename": "MemoryError", "evalue": "", "traceback": ["MemoryError"]})
            else:
                msg = f"internal error in the sandbox engine: {type(exc).__name__}"
                err = {"ename": "SandboxInternalError", "evalue": msg, "traceback": [msg]}
            del exc
            self.send({"type": "error", **err, "denial": None})
            done = {"type": "done", "status": "error", "error": err}
        finally:
            self.running = False
            _quiet_alarm()
        self.send(done)
        self._sent_charts = []
        self._sent_stdout = []
        self._withheld = []


def _json_size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode("utf-8"))


def _cut_text(text: str, room: int) -> str:
    """The longest head of ``text`` (halving) whose JSON encoding fits ``room`` bytes."""
    n = max(min(len(text), room - 16), 0)
    while n and _json_size(text[:n]) > room:
        n //= 2
    return text[:n]


def fit_reply(op: str, value, room: int):
    """A reply value whose encoding fits ``room`` bytes: completion keeps the first matches that fit,
    inspection and user_expressions keep the head of text/plain (other MIME types are dropped). Each
    says what was trimmed."""
    if not isinstance(value, dict):
        return value
    if op == "complete" and isinstance(value.get("matches"), list):
        matches, kept, used = value["matches"], [], 1024
        for match in matches:
            used += _json_size(match) + 1
            if used > room:
                break
            kept.append(match)
        note = f"{len(matches)} names match; the first {len(kept)} fit in a reply"
        return {**value, "matches": kept, "metadata": {"sandbox_trimmed": note}, "trimmed": note}
    if op in ("inspect", "evaluate") and isinstance(value.get("data"), dict):
        text = value["data"].get("text/plain")
        text = text if isinstance(text, str) else ""
        dropped = sorted(k for k in value["data"] if k != "text/plain" and isinstance(k, str))
        note = (f"[... trimmed by the sandbox to fit a reply of {room // 1024} kB"
                + (f"; not shown: {', '.join(dropped)[:200]}" if dropped else "") + "]")
        head = _cut_text(text, room - 1024 - _json_size(note))
        cut = len(text) - len(head)
        if cut:
            note = note[:-1] + f"; {cut:,} characters cut]"
        return {**value, "data": {"text/plain": f"{head}\n{note}" if head else note}, "metadata": {},
                "trimmed": note}
    return value


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
    parser.add_argument("--parent", type=int, default=None, help="the host's pid")
    parser.add_argument("--tasks-fd", type=int, default=None, help="socket for the task listener (kernel)")
    args = parser.parse_args(argv)
    from .oslayers import protect_process

    protected = protect_process()  # before anything else: no process of the user may open our /proc files
    _die_with_parent(args.die_with_parent, args.parent)
    parent = os.getppid()
    import faulthandler

    faulthandler.enable()  # a crash leaves its C-level traceback in the host's diagnostics (stderr tail)
    # A Ctrl-C in the kernel's terminal must not reach us; the host signals us explicitly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=args.fd)
    channel = Channel(sock, max_recv=MAX_REQUEST_BYTES, max_send=MAX_EVENT_BYTES)
    worker = Worker(channel)
    worker.protected = protected
    worker.tasks_fd = args.tasks_fd
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
            worker.warm_while_idle()
            req = channel.recv()
            if req.get("op") in ("run_cell", "evaluate", "reset"):   # (completion and inspection let it go on)
                worker.stop_warming()
            try:
                if not worker.handle(req):
                    return 0
            except (ChannelError, BrokenPipeError, ConnectionError, MemoryError):
                raise
            except Exception:  # noqa: BLE001 - a stray limit or engine bug between requests
                _quiet_alarm()
                msg = "internal error in the sandbox worker"
                if req.get("op") == "run_cell":  # the host waits for the cell's done
                    worker.send({"type": "done", "status": "error",
                                 "error": {"ename": "SandboxInternalError", "evalue": msg, "traceback": [msg]}})
                else:
                    worker.send({"type": "reply", "value": None, "error": msg})
    except (ChannelError, BrokenPipeError, ConnectionError):
        return 0
    except MemoryError:
        # The worker's own code ran out of memory (a cell left none): a status the host reads as such,
        # rather than Python's generic 1. os._exit allocates nothing.
        os._exit(EXIT_OUT_OF_MEMORY)


if __name__ == "__main__":
    sys.exit(main())
