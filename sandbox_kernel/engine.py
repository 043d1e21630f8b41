"""One persistent namespace that runs one cell at a time and reports plain-JSON events.

The engine is the same object in the kernel's process (isolation ``none``) and in a worker; it never
hands its caller anything but JSON data. Events, in the order a cell produces them:

    {"type": "stream", "name": "stdout"|"stderr", "text": str}
    {"type": "display", "data": {mime: value}, "metadata": {}}
    {"type": "result", "data": {mime: value}, "metadata": {}}
    {"type": "denial", "record": {kind, target, rule, line, policy, hint, message}}
    {"type": "error", "ename": str, "evalue": str, "traceback": [str], "denial": record | None}

and ``run_cell`` returns the closing ``{"type": "done", ...}`` summary (status, ticks, elapsed_ms,
policy, denials, truncated, output, charts, error).
"""
from __future__ import annotations

import ast
import builtins as _host_builtins
import contextvars
import json
import inspect as _inspect
import keyword
import os
import re
import sys
import time
from collections import deque
from types import BuiltinFunctionType, FunctionType, MethodDescriptorType, ModuleType
from typing import Callable

from . import cellmagics, confine, helptext, limits, provided_modules, render
from .builtins_table import NamespaceSnapshot, documented_as, make_builtins, own_names
from .denials import (BuiltinDenied, CallDenied, LimitExceeded, MemoryLimitExceeded, SandboxViolation,
                      ValidationDenied, genuine, is_genuine, new_cell)
from .gates import CURRENT_GATES, TEXT_FILENAME_PREFIX, Gates, runtime_callable
from .limits import Budget, resident_bytes
from .policy import Limits, Policy
from .rewriter import (CELL_FILENAME_PREFIX, FORBIDDEN_NAMES, GATE_PREFIX, cell_filename, parse_cell, rewrite,
                       COMPILE_FLAGS)
from .streams import OutputStreams, hide_host_paths, without_host_paths

Emit = Callable[[dict], None]
_CO_COROUTINE = _inspect.CO_COROUTINE
_OWN_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


# The kernel's environment variable by which an operator accepts the Python fallbacks of the C guards.
PYTHON_GUARDS_VARIABLE = "SANDBOX_KERNEL_PYTHON_GUARDS"


class GuardsNotBuilt(RuntimeError):
    """The C extensions that hold several walls are missing or stale: no engine starts (fail closed)."""


def missing_c_guards() -> list[str]:
    """The C guard modules this process runs without (not built, or built from an older source)."""
    from . import gates, guards

    missing = [] if gates._fastgates is not None else ["sandbox_kernel._fastgates"]
    if guards._numpyguard is None or limits._numpyguard is None:
        missing.append("sandbox_kernel._numpyguard")
    return missing


def _check_c_guards() -> None:
    missing = missing_c_guards()
    if missing and os.environ.get(PYTHON_GUARDS_VARIABLE) != "1":
        raise GuardsNotBuilt(
            f"the sandbox's C guards are not built, or were built from an older source ({', '.join(missing)}), so "
            "no cell runs: they hold several walls (numpy's raw-memory, buffer and allocation checks, class "
            "creation and class writes, the tick), and the Python fallbacks do not close every route. Reinstall "
            "where a C compiler and Python's headers are available (Debian/Ubuntu: apt-get install build-essential "
            "python3-dev; then pip install --force-reinstall --no-deps sandbox_kernel, or pip install -e . in a "
            f"checkout). An operator who accepts the fallbacks' gaps (docs/security.md) sets "
            f"{PYTHON_GUARDS_VARIABLE}=1 in the kernel's environment.")


class Engine:
    def __init__(self, policy: Policy, *, workdir: str | None = None):
        _check_c_guards()
        self.policy = policy
        self.workdir = os.path.realpath(workdir or os.getcwd())
        self.audit: deque = deque(maxlen=500)
        self.execution_count = 0
        self._sources: dict[str, list[str]] = {}
        confine.install()
        self.reset()

    # -- state ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Drops the cell's objects with the finalizers they run confined (confine.dropping_cell_objects):
        a library's __del__ among them may call what the cell put in its objects."""
        with confine.dropping_cell_objects():
            self.namespace.clear()
            self.builtins.clear()

    def reset(self) -> None:
        """A fresh namespace (kernel restart, or after a worker was lost)."""
        if hasattr(self, "namespace"):
            self.close()
        self.builtins: dict = {}
        # An empty Context, not a copy: a copy shares the host's values (decimal's current context
        # object among them), and a cell's decimal.getcontext().prec = 3 would change the host's.
        self._context = contextvars.Context()
        # the memory limit counts from here: what earlier cells kept counts against later ones
        self._rss_baseline = resident_bytes()
        self.budget = Budget(self.builtins)
        self.namespace: dict = {"__name__": "__main__", "__doc__": None, "__builtins__": self.builtins}
        self._provided = None   # provided_modules' objects, once a cell imported one
        self.gates = Gates(self.policy, on_denial=self._record_denial, budget=self.budget,
                           namespace=self.namespace, display=self._display, provided=self._provided_module)
        self._context.run(CURRENT_GATES.set, self.gates)
        self._streams: OutputStreams | None = None
        self._limits: Limits = self.policy.limits
        self._emit: Emit = lambda e: None
        self._cell_denials: list = []
        self._charts: list = []
        self.magics = cellmagics.MagicRuntime(self)
        self._text_code: dict = {}   # (mode, text) -> code of eval()/exec() strings, most recent last
        self.builtins.update(make_builtins(self))

    def _use_policy(self, policy: Policy) -> None:
        if policy is not self.gates.policy:
            self.gates.set_policy(policy)
            self.builtins.update(make_builtins(self))

    # -- running a cell ------------------------------------------------------------------------

    def run_cell(self, source: str, *, emit: Emit, policy: Policy | None = None, limits: Limits | None = None,
                 execution_count: int | None = None, display_bytes: int | None = None) -> dict:
        """Runs one cell; returns its done summary. Never raises for anything the cell did: whatever escapes
        the engine's own finishing of the cell (a limit's alarm landing in the runtime's code, a bug) becomes
        the cell's error report. Only a failure of the caller's own ``emit`` is raised, without any chain.
        ``display_bytes``: what the cell's displays may add up to (the kernel's display cap, apart from the
        text limit, limits.output_bytes); past it a display becomes a note. Default: the text limit."""
        policy = policy or self.policy
        limits = limits or policy.limits
        new_cell()
        self.execution_count = execution_count or self.execution_count + 1
        filename = cell_filename(self.execution_count)
        self._use_policy(policy)
        self.magics.new_cell()
        self._cell_denials = []
        self._charts = []
        self._rich_bytes = 0
        self._display_bytes = display_bytes if type(display_bytes) is int and display_bytes >= 0 else \
            limits.output_bytes
        self._convention_output = None   # result["output"] of seed 002's convention, for the reply
        self._limits = limits
        # sizes are checked against this cell's memory limit (a %%sandbox --memory tightens them too)
        self.gates.set_memory_limit(limits.memory_mb)
        # The cell runs in the engine's own Context; its events are delivered in the caller's (the
        # kernel keys its parent message header on a ContextVar).
        caller = contextvars.copy_context()
        caller_failures: list = []
        streams = self._streams = OutputStreams(_deliver_once(caller, emit, sys.stdout, sys.stderr, caller_failures),
                                                limits.output_bytes)
        self._emit = streams.emit_event
        started = time.monotonic()
        caller_failure = None
        try:
            report = self._run(source, filename, policy, limits, streams)
        except BaseException as escaped:  # noqa: B902 - see the docstring; `escaped` is never looked into
            if any(escaped is failure for failure in caller_failures):
                caller_failure = escaped
            else:
                report = self._failure_report()
        if caller_failure is not None:
            _EXC_CONTEXT.__set__(caller_failure, None)   # it may have been raised while a cell's was handled
            raise caller_failure
        return self._done(started, policy, report, streams)

    def _run(self, source: str, filename: str, policy: Policy, limits: Limits, streams) -> dict | None:
        """Compiles and runs the cell; returns its error report (None: it ended well)."""
        result_before = self.namespace.get("result")
        try:
            compiled = self._compile(source, filename, "exec")
        except (SyntaxError, ValidationDenied) as exc:
            return self._report(exc, source)
        except (RecursionError, MemoryError) as exc:   # the parser's or the rewriter's own, on deeply nested text
            return self._report(CellError(type(exc), "the cell is nested too deeply to compile", None), source)

        body, last = compiled
        error, tripped = self._context.run(self._execute, body, last, policy, limits, streams, result_before)
        # From here on `error` is ours or a CellError (plain data): nothing of the cell's runs any more, and
        # the alarm is off.
        if tripped is not None and not isinstance(error, LimitExceeded):
            error = tripped   # the cell swallowed its limit; it still ended because of it
        elif error is not None and issubclass(_kind(error), MemoryError) and self.budget.numpy_refused:
            refused = genuine(MemoryLimitExceeded(
                f"memory limit exceeded: {limits.memory_mb} MB (policy '{policy.name}'): one allocation of "
                f"{self.budget.numpy_refused / 2**20:,.0f} MB (an array, a string, a list) was refused before it "
                f"was made", policy=policy.name))
            error = refused.with_traceback(error.__traceback__)   # the cell line that asked for it
        if error is not None and issubclass(_kind(error), KeyboardInterrupt):
            error = _as_cancel(error, policy)
        for own in (tripped, error):
            if own is not None and type(own) is not CellError:
                _drop_chain(own)   # a limit re-raised in the cell's except/finally chains to the cell's exceptions
        report = self._report(error, source) if error is not None else None
        streams.close()
        return report

    def _failure_report(self) -> dict:
        """The report of a cell whose finishing failed in the engine's own code. What failed is not looked
        at (it may be the cell's exception, or chain to it); a limit that tripped is named, as the cell
        ended because of it."""
        try:
            if self.budget.running:
                self.budget.stop()
        except BaseException:  # noqa: B902 - stop() disarms first; the report below still goes out
            pass
        message = "the sandbox failed while it ran this cell"
        limit = self.budget.tripped
        if limit is not None:
            detail = limit.detail if type(limit.detail) is str else ""
            message += f"; the cell had reached its {type(limit).__name__} ({detail})"
        report = {"ename": "SandboxInternalError", "evalue": message,
                  "traceback": [f"SandboxInternalError: {message}"], "line": None}
        try:
            if self._streams is not None:
                self._streams.close()
            self._emit({"type": "error", "ename": report["ename"], "evalue": message,
                        "traceback": report["traceback"], "denial": None})
        except BaseException:  # noqa: B902 - the done summary still carries the error
            pass
        return report

    def _execute(self, body, last, policy: Policy, limits: Limits, streams, result_before):
        """Runs in the engine's own contextvars.Context: ContextVars a cell sets (decimal's context,
        numpy's errstate) persist from cell to cell and never reach the host's code.
        Returns (the exception the cell ended with or None, the limit that tripped or None)."""
        error = None
        files = confine.ConfinedFiles(self.workdir, self.gates.deny) if policy.files else confine.NoFiles(self.gates.deny)
        tokens = confine.enter(files, policy.network, self.gates.deny)
        # The interpreter reports what a cell's finalizer raises through sys.unraisablehook, on the cell's
        # time: CPython's own hook prints it to the cell's stderr; a host's (pytest keeps the exception and
        # formats it later) would hold the cell's object past the cell and run Python code under its alarm.
        saved_streams = sys.stdout, sys.stderr, sys.unraisablehook
        sys.stdout, sys.stderr, sys.unraisablehook = streams.stdout, streams.stderr, sys.__unraisablehook__
        self.budget.on_alarm = streams.flush_if_due
        self.budget.start(ticks=limits.ticks, timeout=limits.timeout, memory_mb=limits.memory_mb,
                          policy_name=policy.name, memory_baseline=self._rss_baseline)
        tripped = None
        try:
            try:
                self._run_code(body)
                if last is not None:
                    value = self._run_code(last)
                    if value is not None:
                        data = self._bundle(value)
                        self._emit({"type": "result", "data": data, "metadata": {}})
                self._seed002_result(result_before, limits)
            except BaseException as exc:  # noqa: B902 - everything a cell raises is reported, never re-raised
                error = self._ended_with(exc)
        finally:
            # each step on its own, so that none can stop the next one from restoring the host
            try:
                tripped = self.budget.stop()
            finally:
                try:
                    sys.stdout, sys.stderr, sys.unraisablehook = saved_streams
                finally:
                    confine.leave(tokens)
        return error, tripped

    def _ended_with(self, exc: BaseException):
        """The exception the cell ended with, captured (see _captured) while its limits still hold. The
        alarm can land in the runtime's own code here and raise the limit that tripped (denials.py is not
        a teardown file): the cell ended because of that limit, which run_cell then reports. Anything else
        that escapes is the runtime's own failure; neither is looked into (it may chain to the cell's)."""
        try:
            error = exc
            if issubclass(type(exc), StopIteration) and self.budget.chain_lost():
                error = RecursionError("maximum recursion depth exceeded")
                error.__traceback__ = _traceback_of(exc)
            return self._captured(error)   # inside the limits and the confinement, like the cell
        except BaseException as escaped:  # noqa: B902 - only identity is asked of it, in this file's frame
            if escaped is self.budget.tripped:
                return escaped
            return CellError(SandboxInternalError, "the sandbox failed while it recorded the cell's error", None)

    def _captured(self, exc: BaseException):
        """The exception the cell ended with, as the engine keeps it once the cell is over: the runtime's
        own refusals and limits as they are, anything else as a CellError. A cell's exception is the
        cell's object: its class's __getattribute__, __str__ or __class__ (or a library callable put
        there) would run wherever the engine, the kernel or its log touched it after the cell, outside
        the confinement. Its message is rendered here, while the cell's limits and confinement hold."""
        if _is_ours(exc):
            self._message_of(exc)
            return exc
        kind = type(exc)
        syntax = None
        if issubclass(kind, SyntaxError):   # SyntaxError's own member descriptors, never the object's lookup
            syntax = tuple(SyntaxError.__dict__[n].__get__(exc, kind) for n in ("filename", "lineno", "msg"))
            syntax = tuple(v if type(v) in (str, int) else None for v in syntax)
        return CellError(kind, self._message_of(exc), _traceback_of(exc), syntax)

    def _message_of(self, exc: BaseException) -> str:
        """The exception's message, computed once while the cell's limits still hold (a cell-defined
        __str__ may loop or raise); cached on the engine for _report."""
        if getattr(self, "_messages_for", None) is exc:
            return self._message
        if type(exc) is CellError:
            return exc.message
        if _is_ours(exc):
            message = exc.sentence()
        else:
            try:
                message = str(exc)
                if type(message) is not str:
                    message = str.__str__(message)
            except BaseException:  # noqa: B902 - a message that cannot be rendered is reported as such
                message = f"<the message of this {_kind(exc).__name__} could not be rendered>"
        self._messages_for, self._message = exc, message
        return message

    def _compile(self, source: str, filename: str, mode: str):
        """(body code, last-expression code or None). The last expression is displayed as in
        IPython, unless the cell ends with ';'."""
        self._sources[filename] = source.splitlines()
        code, magic_sites = cellmagics.prepare(source) if mode == "exec" else (source, [])
        tree = rewrite(cellmagics.apply(parse_cell(code, filename, mode), magic_sites, filename))
        last = None
        if mode == "exec" and tree.body and isinstance(tree.body[-1], ast.Expr) \
                and not source.rstrip().endswith(";"):
            expr = ast.Expression(body=tree.body.pop().value)
            last = compile(expr, filename, "eval", flags=COMPILE_FLAGS, dont_inherit=True)
        body = compile(tree, filename, mode, flags=COMPILE_FLAGS, dont_inherit=True)
        return body, last

    def _run_code(self, code):
        value = eval(code, self.namespace)  # noqa: S307 - code is the rewritten, gated cell
        if code.co_flags & _CO_COROUTINE:
            value = _drive(value)
        return value

    # -- eval() and exec() of text: a cell's pipeline, the running cell's limits -------------------------

    def run_text(self, mode: str, source, globals=None, locals=None):
        """eval()/exec() for cells: the text is parsed, validated, rewritten and compiled like a cell and
        runs under the running cell's limits, in the caller's namespace, or in private copies of the dicts
        given (what the code binds is written back to them afterwards). The copies never hold the
        runtime's names (a dict naming a gate is refused) and get the cell's builtins, never the host's;
        the dicts themselves never reach the code."""
        name = f"{mode}()"
        if not self.budget.running:
            self.gates.deny(BuiltinDenied(name, "it runs only while a cell runs"))
        text = self._text_of(source, name)
        if mode == "eval":
            text = text.lstrip(" \t")
        write_back: list = []
        run_globals, run_locals = self._text_namespaces(name, _calling_cell_frame(), globals, locals, write_back)
        code = self._compile_text(text, mode)
        try:
            return eval(code, run_globals, run_locals)  # noqa: S307 - rewritten, gated text
        finally:
            for target, private, copied in write_back:
                _write_back(target, private, copied)

    def _text_of(self, source, name: str) -> str:
        if isinstance(source, str):
            return source if type(source) is str else str.__str__(source)
        if isinstance(source, (bytes, bytearray)):
            return bytes(source).decode("utf-8")
        self.gates.deny(CallDenied(f"{name} of a {type(source).__name__}",
                                   "eval() and exec() take the text of code in the sandbox"))

    def _text_namespaces(self, name: str, caller, globals, locals, write_back: list):
        """(globals, locals) to run the text in."""
        if globals is None:
            if caller is None:   # called from a library (df.apply(eval)): the cell's namespace
                run_globals = run_locals = self.namespace
            else:
                run_globals = caller.f_globals      # the namespace, or an outer exec()'s private copy
                scope = caller.f_locals
                run_locals = run_globals if scope is run_globals else own_names(scope)   # a function's: a copy
            if locals is not None:
                run_locals = self._text_dict(locals, "locals", name, write_back)
            return run_globals, run_locals
        run_globals = self._text_dict(globals, "globals", name, write_back)
        if run_globals is not self.namespace:
            run_globals["__builtins__"] = self.builtins
            run_globals["__name__"] = self.namespace["__name__"]
        return run_globals, run_globals if locals is None else self._text_dict(locals, "locals", name, write_back)

    def _text_dict(self, given, role: str, name: str, write_back: list) -> dict:
        if type(given) is NamespaceSnapshot:     # globals() / locals() of the cell: its namespace
            return self.namespace
        if type(given) is not dict:
            raise TypeError(f"{name}: {role} must be a dict in the sandbox, not {type(given).__name__}")
        private = {}
        for key, value in dict.items(given):
            if type(key) is not str or not key.isidentifier():
                continue   # not a name any code can read
            if key.startswith(GATE_PREFIX):
                self.gates.deny(CallDenied(f"{name} with {role} holding '{key[:60]}'",
                                           "names of the sandbox runtime cannot be given to code"))
            if key not in FORBIDDEN_NAMES and key != "__name__":   # __builtins__ & co: ignored
                private[key] = value
        write_back.append((given, private, set(private)))
        return private

    _TEXT_CODE_KEPT = 256
    _TEXT_KEPT_CHARS = 4096

    def _compile_text(self, text: str, mode: str):
        """The code of an eval()/exec() string, compiled once (the rewriter is pure: same text, same code).
        confine.py lets this function, and no other code of a running cell, compile: it compiles the
        rewritten tree, never text."""
        key = (mode, text)
        found = self._text_code.get(key)
        if found is not None:
            return found
        if len(self._text_code) >= self._TEXT_CODE_KEPT:
            for stale in [f for f in self._sources if f.startswith(_TEXT_FILENAME)]:
                del self._sources[stale]
            self._text_code.clear()
        kept = len(text) <= self._TEXT_KEPT_CHARS   # a long text is compiled each time, never kept
        filename = f"{_TEXT_FILENAME}{mode} {len(self._text_code) + 1 if kept else 'long'}>"
        try:
            tree = rewrite(parse_cell(text, f"<{mode} string>", mode))
        except ValidationDenied as exc:
            self.gates.deny(exc)
        tree = ast.fix_missing_locations(tree)
        code = compile(tree, filename, mode, dont_inherit=True)
        self._sources[filename] = text.splitlines()[:10_000]
        if kept:
            self._text_code[key] = code
        return code

    def _bundle(self, value) -> dict:
        cap = self._display_bytes
        data = render.bundle(value, self.gates, cap=cap)
        size = len(json.dumps(data))
        self._rich_bytes += size
        if self._rich_bytes > cap:
            if self._streams is not None:
                self._streams.truncated = True
            return {"text/plain": f"[display of {size:,} bytes not shown: the cell's output is capped at "
                                  f"{cap:,} bytes]"}
        chart = data.get(render.PLOTLY_MIME)
        if chart is not None:
            self._charts.append(chart)
        return data

    def _display(self, *objs, **kwargs):
        """The sandbox's ``display()``; also what ``fig.show()`` calls."""
        for obj in objs:
            self._emit({"type": "display", "data": self._bundle(obj), "metadata": {}})

    def _display_as(self, obj, display_id, update=False):
        """A display with an id, or (update) the replacement of the earlier displays with that id
        (IPython.display's display_id / DisplayHandle.update). The kernel checks the id."""
        if type(display_id) is not str:
            raise TypeError(f"a display id is a str, not {type(display_id).__name__}")
        self._emit({"type": "display", "data": self._bundle(obj), "metadata": {},
                    "transient": {"display_id": display_id[:200]}, "update": bool(update)})

    def _clear_output(self, wait=False):
        """IPython.display.clear_output: the cell's output so far is cleared (wait: when the next output
        arrives)."""
        self._emit({"type": "clear_output", "wait": bool(wait)})

    def _provided_module(self, name: str):
        """The sandbox's own IPython.display (provided_modules), built by the first cell that imports it,
        or None for any other name."""
        if name not in provided_modules.PROVIDED:
            return None
        if self._provided is None:
            self._provided = provided_modules.build(self.builtins, self._sources, {
                "_display": self.builtins["display"], "_show": runtime_callable(self._display_as),
                "_clear": runtime_callable(self._clear_output)})
        return self._provided[name]

    def _seed002_result(self, before, limits: Limits) -> None:
        """A cell that assigns ``result = {"output": ..., "chart": ...}`` publishes the charts; the output
        is for agents: it becomes the reply's output (the done record) instead of what the cell printed,
        and is not printed again (a cell that prints its summary and hands it over showed it twice).
        Rendered here, inside the cell's limits; capped like printed output."""
        result = self.namespace.get("result")
        if result is before or type(result) is not dict:
            return
        output = result.get("output")
        if output is not None:
            text = str(output)
            text = text if type(text) is str else str.__str__(text)
            if len(text) > limits.output_bytes:
                text = text[:limits.output_bytes]
                self._streams.truncated = True
            self._convention_output = text + "\n"
        chart = result.get("chart")
        charts = chart if isinstance(chart, list) else [chart] if chart is not None else []
        for spec in charts:
            data = render.chart_from_spec(spec)
            if data is None:
                continue
            size = len(json.dumps(data))
            self._rich_bytes += size
            if self._rich_bytes > self._display_bytes:  # the same cap as display(): nothing more is kept
                if self._streams is not None:
                    self._streams.truncated = True
                self._emit({"type": "display", "metadata": {}, "data": {
                    "text/plain": f"[chart of {size:,} bytes not shown: the cell's output is capped at "
                                  f"{self._display_bytes:,} bytes]"}})
                continue
            self._charts.append(data)
            self._emit({"type": "display", "data": {render.PLOTLY_MIME: data,
                                                    "text/plain": render.figure_summary(data)},
                        "metadata": {}})

    # -- denials and errors --------------------------------------------------------------------

    def _record_denial(self, exc) -> None:
        record = exc.record()
        self._cell_denials.append(record)
        self.audit.append({**record, "cell": self.execution_count, "time": time.time()})
        self._emit({"type": "denial", "record": record})

    def _report(self, exc: BaseException, source: str) -> dict:
        denial = None
        line = _innermost_cell_line(exc)
        if _is_ours(exc):
            exc.set_line(line)
            denial = exc.record()
            if isinstance(exc, LimitExceeded) or not any(
                    d["target"] == denial["target"] and d["kind"] == denial["kind"] for d in self._cell_denials):
                self._record_denial(exc)
        elif issubclass(_kind(exc), SyntaxError) and line is None:   # the cell's own text (not an eval() string)
            line = _syntax_of(exc)[1]
        ename = _kind(exc).__name__
        evalue = self._scrub(exc.sentence() if _is_ours(exc) else self._message_of(exc))
        traceback = self._traceback(exc, ename, evalue)
        event = {"type": "error", "ename": ename, "evalue": evalue, "traceback": traceback, "denial": denial}
        self._emit(event)
        return {"ename": ename, "evalue": evalue, "traceback": traceback, "line": line}

    def _scrub(self, text: str) -> str:
        """Error messages never show where the working directory or Python live on the host."""
        return hide_host_paths(text.replace(self.workdir + os.sep, "").replace(self.workdir, "."))

    def _traceback(self, exc: BaseException, ename: str, evalue: str) -> list[str]:
        lines = []
        if issubclass(_kind(exc), SyntaxError) and not issubclass(_kind(exc), SandboxViolation) \
                and _innermost_cell_line(exc) is None:     # the cell's text, before anything ran
            filename, lineno, msg = _syntax_of(exc)
            src = self._sources.get(filename or "", [])
            if lineno and 0 < lineno <= len(src):
                lines.append(f"Cell {_cell_label(filename)}, line {lineno}")
                lines.append("    " + src[lineno - 1].strip())
            lines.append(f"{ename}: {msg}")
            return lines
        tb = _traceback_of(exc)
        frames = []
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_filename.startswith(CELL_FILENAME_PREFIX):
                frames.append((code.co_filename, tb.tb_lineno, code.co_name))
            tb = tb.tb_next
        if frames:
            lines.append("Traceback (most recent call last):")
            for filename, lineno, name in frames:
                where = "" if name == "<module>" else f", in {name}"
                lines.append(f"  Cell {_cell_label(filename)}, line {lineno}{where}")
                src = self._sources.get(filename, [])
                if 0 < lineno <= len(src):
                    lines.append("    " + src[lineno - 1].strip())
        lines.append(f"{ename}: {evalue}" if evalue else ename)
        return lines

    def _done(self, started, policy: Policy, error, streams: "OutputStreams") -> dict:
        return without_host_paths({
            "type": "done",
            "status": "error" if error else "ok",
            "ticks": self.budget.ticks_used(),
            "elapsed_ms": round((time.monotonic() - started) * 1000, 3),
            "policy": policy.name,
            "denials": list(self._cell_denials),
            "truncated": streams.truncated,
            "output": self._convention_output if self._convention_output is not None else streams.captured_stdout(),
            "charts": list(self._charts),
            "error": error,
            "execution_count": self.execution_count,
        })

    # -- user_expressions ----------------------------------------------------------------------

    def evaluate(self, expression: str, *, policy: Policy | None = None) -> dict:
        """One expression through the same pipeline and limits as a cell; output is discarded."""
        events: list = []
        saved = self.execution_count
        done = self.run_cell(expression, emit=events.append, policy=policy, execution_count=saved)
        self.execution_count = saved
        if done["status"] == "error":
            err = done["error"]
            return {"status": "error", "ename": err["ename"], "evalue": err["evalue"],
                    "traceback": err["traceback"]}
        results = [e for e in events if e["type"] == "result"]
        data = results[-1]["data"] if results else {"text/plain": "None"}
        return {"status": "ok", "data": data, "metadata": {}}

    # -- completion and inspection: static, never runs sandbox code ----------------------------

    _TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\.?$")

    def complete(self, code: str, cursor_pos: int | None = None) -> dict:
        """Names the policy shows, found without running any of the cell's code; never raises."""
        cursor_pos = len(code) if cursor_pos is None else cursor_pos
        try:
            return self._complete(code, cursor_pos)
        except BaseException:  # noqa: B902 - an object of the cell's that fights introspection: no matches
            return {"matches": [], "cursor_start": cursor_pos, "cursor_end": cursor_pos, "metadata": {},
                    "status": "ok"}

    def inspect(self, code: str, cursor_pos: int | None = None, detail_level: int = 0) -> dict:
        """What a name is, found without running any of the cell's code; never raises."""
        cursor_pos = len(code) if cursor_pos is None else cursor_pos
        try:
            return self._inspect(code, cursor_pos, detail_level)
        except BaseException:  # noqa: B902
            return {"found": False, "data": {}, "metadata": {}, "status": "ok"}

    def _complete(self, code: str, cursor_pos: int) -> dict:
        m = self._TOKEN.search(code[:cursor_pos])
        token = m.group(0) if m else ""
        if "." in token:
            path, _, prefix = token.rpartition(".")
            obj, ok = self._resolve_static(path)
            names = self._visible_attributes(obj) if ok else []
        else:
            prefix = token
            names = self._visible_globals() + keyword.kwlist
        found = {n for n in names if n.startswith(prefix)}
        matches = sorted((n for n in found if len(n) <= MAX_MATCH_CHARS), key=lambda n: (n.startswith("_"), n.lower()))
        reply = {"matches": matches[:MAX_MATCHES], "cursor_start": cursor_pos - len(prefix),
                 "cursor_end": cursor_pos, "metadata": {}, "status": "ok"}
        if len(reply["matches"]) < len(found):  # capped where it is made: say so
            note = (f"{len(found)} names match; the first {len(reply['matches'])} are listed"
                    f"{f' (names longer than {MAX_MATCH_CHARS} characters are not)' if len(matches) < len(found) else ''}")
            reply["metadata"] = {"sandbox_trimmed": note}
            reply["trimmed"] = note
        return reply

    def _inspect(self, code: str, cursor_pos: int, detail_level: int) -> dict:
        end = cursor_pos
        while end < len(code) and (code[end].isalnum() or code[end] == "_"):
            end += 1
        m = self._TOKEN.search(code[:end])
        token = (m.group(0) if m else "").rstrip(".")
        if not token:
            return {"found": False, "data": {}, "metadata": {}, "status": "ok"}
        obj, ok = self._resolve_static(token)
        if not ok:
            return {"found": False, "data": {}, "metadata": {}, "status": "ok"}
        text = _describe(token, obj)
        reply = {"found": True, "data": {"text/plain": text}, "metadata": {}, "status": "ok"}
        if len(text) > MAX_INSPECT_CHARS:  # capped where it is made: say so
            reply["trimmed"] = f"[... {len(text) - MAX_INSPECT_CHARS:,} characters cut by the sandbox]"
            reply["data"]["text/plain"] = f"{text[:MAX_INSPECT_CHARS]}\n{reply['trimmed']}"
        return reply

    def _visible_globals(self) -> list[str]:
        names = [n for n in list(self.namespace) if type(n) is str and not n.startswith("__") and n.isidentifier()]
        names += [n for n in self.builtins if type(n) is str and not n.startswith("_") and n.isidentifier()]
        return names

    def _resolve_static(self, path: str):
        """Follow a dotted path through the namespace without running any code: module attributes and
        class-dict entries only, each step allowed by the policy's name rules."""
        first, *rest = path.split(".")
        if first.startswith(GATE_PREFIX) or first.startswith("__"):
            return None, False
        if first in self.namespace:
            obj = self.namespace[first]
        elif first in self.builtins:
            obj = self.builtins[first]
        else:
            return None, False
        for attr in rest:
            if attr not in self._visible_attributes(obj):
                return None, False
            found, obj = _static_lookup(obj, attr)
            if not found:
                return None, False
        return obj, True

    def _visible_attributes(self, obj) -> list[str]:
        gates = self.gates
        names = set()
        if type(obj) is ModuleType:
            modname = obj.__dict__.get("__name__")
            rule = gates.policy.module_rule(modname) if isinstance(modname, str) else None
            if rule is None:
                return []
            for n, v in list(obj.__dict__.items()):
                if type(n) is str and not n.startswith("_") and rule.attribute_allowed(n) \
                        and (obj, n) not in gates._denied_pairs:
                    if type(v) is ModuleType and not gates.policy.module_allowed(getattr(v, "__name__", "")):
                        continue
                    names.add(n)
            return sorted(names)
        is_class = issubclass(type(obj), type)   # never isinstance(): it asks a cell object's __class__
        cls = obj if is_class else type(obj)
        pools = [type.__dict__["__dict__"].__get__(k) for k in type.__dict__["__mro__"].__get__(cls)]
        inst = _instance_dict(obj) if not is_class else None
        if inst is not None:
            pools.append(inst)
        for pool in pools:
            for n in list(pool):
                if type(n) is not str:
                    continue
                if n.startswith("_"):   # completion never lists private names, even readable ones
                    continue
                if n in _NEVER_LISTED or gates._pair_denied(obj, n):
                    continue
                names.add(n)
        return sorted(names)

    # -- help(obj) and `obj?`: run inside the cell, like any call it makes ---------------------------

    def help(self, *args):
        """Prints the signature and docstring of obj, with the members the policy shows."""
        if len(args) != 1:
            raise TypeError("help() takes one object in the sandbox: help(len), help(pd.DataFrame.merge), "
                            "or obj? on a line of its own")
        obj = args[0]
        if type(obj) is str:
            obj, found = self._resolve_static(obj)
            if not found:
                print(f"No documentation found for {args[0][:100]!r} in the sandbox: give help() the object "
                      f"itself (help(len)).")
                return
        if obj is self.builtins.get("help"):
            obj = _host_builtins.help
        print(helptext.render(documented_as(obj), self._doc_of, self.visible_attributes, _static_lookup), end="")

    def help_on(self, getter, name: str, detail: int = 1):
        """`name?` and `name??`: help on what the name reads as in the cell, or IPython's note when it
        reads as nothing."""
        try:
            obj = getter()
        except (NameError, AttributeError, LookupError):
            print(f"Object `{name}` not found.")
            return
        self.help(obj)

    def _doc_of(self, obj):
        try:
            doc = self.gates.getattr(obj, "__doc__")
        except Exception:  # noqa: BLE001 - no docstring to show
            return None
        return doc if type(doc) is str else None

    def visible_attributes(self, obj) -> list[str]:
        """The public attribute names the policy lets a cell read on obj (dir() and help list these)."""
        return self._visible_attributes(obj)

    def cancel(self) -> None:
        self.budget.cancel()


# -- helpers ------------------------------------------------------------------------------------

_NEVER_LISTED = frozenset({"mro"})
# Completion and inspection replies are capped where they are made (any level): a cell can create
# millions of attributes or a name of any length, and the reply must still reach the front end.
MAX_MATCHES = 2000
MAX_MATCH_CHARS = 200
MAX_INSPECT_CHARS = 64_000


def _instance_dict(obj):
    """The instance __dict__ read through the C descriptor (never a class-level __dict__ property)."""
    for k in type(obj).__mro__:
        d = k.__dict__.get("__dict__")
        if d is not None:
            if type(d).__name__ != "getset_descriptor":
                return None
            try:
                value = d.__get__(obj, type(obj))
            except Exception:
                return None
            return value if type(value) is dict else None
    return None


def _static_lookup(obj, name):
    if type(obj) is ModuleType:
        if name in obj.__dict__:
            return True, obj.__dict__[name]
        return False, None
    is_class = issubclass(type(obj), type)
    inst = _instance_dict(obj) if not is_class else None
    if inst is not None and name in inst:
        return True, inst[name]
    cls = obj if is_class else type(obj)
    for k in type.__dict__["__mro__"].__get__(cls):
        namespace = type.__dict__["__dict__"].__get__(k)
        if name in namespace:
            value = namespace[name]
            if type(value) in (staticmethod, classmethod):
                value = value.__func__
            return True, value
    return False, None


def _describe(token: str, obj) -> str:
    """Runs nothing of the cell's: only exact types are looked at (a cell's subclass of str or list has its
    own __repr__, a cell class its own __getattribute__ and __class__), containers by their length."""
    kind = type(obj).__name__
    lines = [f"{token}: {kind}"]
    doc = None
    if type(obj) is FunctionType:
        lines.append(f"Signature: {obj.__name__}({_parameters(obj.__code__)})")
        doc = _static_doc(obj)
    elif type(obj) in (BuiltinFunctionType, MethodDescriptorType):
        try:
            lines.append(f"Signature: {obj.__name__}{_inspect.signature(obj)}")
        except (TypeError, ValueError):
            pass
        doc = _static_doc(obj)
    elif issubclass(type(obj), type):
        init = _static_lookup(obj, "__init__")[1]   # never inspect.signature(): it reads the class's attributes
        if type(init) is FunctionType:
            lines.append(f"Signature: {obj.__name__}({_parameters(init.__code__, skip=1)})")
        doc = _static_doc(obj)
    elif type(obj) in (int, float, str, bool):
        text = repr(obj)
        lines.append(f"Value: {text[:200]}{'...' if len(text) > 200 else ''}")
    elif type(obj) in (list, tuple, dict, set):
        lines.append(f"Length: {len(obj)}")
    if doc:
        lines.append("Docstring:\n" + doc.strip()[:2000])
    return "\n".join(lines)


def _parameters(code, skip: int = 0) -> str:
    """The parameter names of a function's code object, read without calling anything (skip: self)."""
    return ", ".join(code.co_varnames[skip:code.co_argcount + code.co_kwonlyargcount])


def _static_doc(obj) -> str | None:
    """__doc__ read from the object's own dict or its class's, never through a descriptor."""
    if type(obj) in (FunctionType, BuiltinFunctionType, MethodDescriptorType):
        doc = type(obj).__dict__["__doc__"].__get__(obj) if "__doc__" in type(obj).__dict__ else None
        return doc if type(doc) is str else None
    holders = [obj] if issubclass(type(obj), type) else []
    holders.append(type(obj))
    for holder in holders:
        for k in type.__dict__["__mro__"].__get__(holder):
            doc = type.__dict__["__dict__"].__get__(k).get("__doc__")
            if doc is not None:
                return doc if type(doc) is str else None
    return None


_TEXT_FILENAME = TEXT_FILENAME_PREFIX   # eval()/exec() strings: cell code for the sinks, the cell's line for denials


def _calling_cell_frame():
    """The frame of the cell code that called eval()/exec()/globals() (past the runtime's own frames), or
    None when a library called it."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_OWN_PACKAGE):
        frame = frame.f_back
    if frame is not None and frame.f_code.co_filename.startswith(CELL_FILENAME_PREFIX):
        return frame
    return None


def _write_back(target: dict, private: dict, copied: set) -> None:
    """What exec() bound, changed or deleted in its private copy, into the dict the cell gave."""
    for key in copied:
        if key not in private and key in target:
            del target[key]
    for key, value in private.items():
        if key not in ("__builtins__", "__name__") and (key not in target or target[key] is not value):
            target[key] = value


def _drive(coro):
    """Top-level await: sandbox coroutines only (no event loop is granted to cells)."""
    try:
        while True:
            yielded = coro.send(None)
            if yielded is not None:
                coro.close()
                raise RuntimeError("awaiting objects of an external event loop is not supported in the sandbox")
    except StopIteration as stop:
        return stop.value


def _deliver_once(caller: contextvars.Context, emit: Emit, host_stdout, host_stderr, failures: list) -> Emit:
    """Events delivered in the caller's Context, with the host's own sys.stdout/sys.stderr: what the
    host writes while it handles an event (the kernel logs its errors to sys.stderr) is not the cell's
    output, and must neither re-enter the delivery nor be published as the cell's text. What the
    caller's emit raises is kept in `failures` (run_cell raises it rather than report it as the cell's)."""
    busy = [False]

    def deliver(event):
        if busy[0]:
            return
        busy[0] = True
        cell_streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = host_stdout, host_stderr
        try:
            caller.run(emit, event)
        except BaseException as failure:  # noqa: B902 - kept by identity only, then raised on
            failures.append(failure)
            raise
        finally:
            sys.stdout, sys.stderr = cell_streams
            busy[0] = False

    return deliver


limits.QUIET_CODES.add(_deliver_once(None, None, None, None, []).__code__)


def _is_ours(exc: BaseException) -> bool:
    """A refusal or limit of the runtime itself (cells cannot subclass these; checked exactly anyway).
    By the object's real type only: isinstance() would ask a cell object's __class__."""
    return issubclass(type(exc), (SandboxViolation, LimitExceeded)) \
        and type(exc).__module__ == "sandbox_kernel.denials" and is_genuine(exc)


class CellError(Exception):
    """A cell's exception once its cell is over: its class, its message (rendered inside the cell) and
    its traceback. The engine reports from this and never touches the cell's object again."""

    def __init__(self, kind: type, message: str, traceback, syntax=None):
        super().__init__(message)
        self.kind, self.message, self.syntax = kind, message, syntax
        self.__traceback__ = traceback


class SandboxInternalError(Exception):
    """The engine's own finishing of a cell failed (not the cell's code); reported as the cell's error."""


_EXC_TRACEBACK = BaseException.__dict__["__traceback__"]
_EXC_CONTEXT = BaseException.__dict__["__context__"]
_EXC_CAUSE = BaseException.__dict__["__cause__"]


def _drop_chain(exc: BaseException) -> None:
    """One of the runtime's own exceptions forgets the exceptions it was raised during (the cell's): after
    the cell nothing may walk to them (a traceback printer asks each for __notes__, its message ...)."""
    _EXC_CONTEXT.__set__(exc, None)
    _EXC_CAUSE.__set__(exc, None)


def _traceback_of(exc: BaseException):
    """exc's traceback through BaseException's own descriptor (never exc's attribute lookup)."""
    return _EXC_TRACEBACK.__get__(exc, BaseException)


def _kind(exc) -> type:
    """The class of the exception a report is about (a CellError stands for one of the cell's)."""
    return exc.kind if type(exc) is CellError else type(exc)


def _syntax_of(exc) -> tuple:
    """(filename, lineno, msg) of a SyntaxError: the runtime's own (compile errors) or a cell's, captured."""
    if type(exc) is CellError:
        return exc.syntax or (None, None, "")
    return exc.filename, exc.lineno, exc.msg


def _innermost_cell_line(exc: BaseException) -> int | None:
    tb = _traceback_of(exc)
    line = None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name.startswith(CELL_FILENAME_PREFIX) and not name.startswith(TEXT_FILENAME_PREFIX):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _cell_label(filename: str | None) -> str:
    if filename and filename.startswith(CELL_FILENAME_PREFIX):
        return f"In[{filename[len(CELL_FILENAME_PREFIX):-1]}]"
    return "In[?]"


def _as_cancel(exc, policy):
    from .denials import Cancelled

    c = genuine(Cancelled("the cell was interrupted", policy=policy.name))
    c.__traceback__ = _traceback_of(exc)
    return c
