"""SandboxSession: one sandboxed kernel for an agent, sync and async.

    from sandbox_kernel.client import SandboxSession

    with SandboxSession(policy="data-science", limits={"timeout": 30}) as sandbox:
        sandbox.put("readings", [44.1, 45.9, 43.7])
        r = sandbox.run("import statistics\\nstatistics.mean(readings)")
        r.result, r.output, r.charts, r.error, r.denials

The policy, isolation level and limits are the operator's options for this session's kernel (its
command line), not magics a cell could undo. The async twin is AsyncSandboxSession (``async with``,
``await sandbox.run(...)``, ``async for event in sandbox.stream(...)``).
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import re
import shutil
import sys
import tempfile
import threading
from typing import Any, AsyncIterator, Callable, Iterator

from ..install import DEFAULT_NAME
from . import cells
from .localfiles import list_directory
from .results import (OUTPUT_TYPES, Denial, Event, ExecutionResult, FileInfo, SandboxDenied, SandboxError,
                      SandboxTimeout, SessionStatus, build_result, event_from_message)

ISOLATION_LEVELS = ("none", "process", "kernel")
LIMIT_KEYS = ("ticks", "timeout", "memory_mb", "output_bytes")
_POLICY_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}\Z")

# Transfer sizes. A helper cell's answer must fit the cell's text cap (1 MB by default, which the
# kernel charges for the live stream and again for the reply's copy), so chunks start well below it
# and halve when a policy's cap is smaller.
PUT_CHUNK_CHARS = 4_000_000
UPLOAD_CHUNK_BYTES = 1_500_000
READ_CHUNK_CHARS = 300_000
MIN_CHUNK = 4_096
MAX_TRANSFER_BYTES = 256 * 1024 * 1024


def kernel_options(policy: str | None = None, isolation: str | None = None, limits: dict | None = None,
                   options: list[str] | None = None) -> list[str]:
    """The kernel command-line options (traitlets) for a session's policy, isolation and limits."""
    out = []
    if policy is not None:
        if not isinstance(policy, str) or not _POLICY_NAME.match(policy):
            raise ValueError(f"policy must be a policy's name (a preset or a policies_dir file), not {policy!r}")
        out.append(f"--SandboxKernel.policy={policy}")
    if isolation is not None:
        if isolation not in ISOLATION_LEVELS:
            raise ValueError(f"isolation must be one of {', '.join(ISOLATION_LEVELS)}, not {isolation!r}")
        out.append(f"--SandboxKernel.isolation={isolation}")
    if limits:
        checked = {}
        for key, value in dict(limits).items():
            if key not in LIMIT_KEYS:
                raise ValueError(f"unknown limit {key!r}; limits are {', '.join(LIMIT_KEYS)}")
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not value > 0 or value != value or value == float("inf")):
                raise ValueError(f"limit {key!r} must be a positive number or None (unlimited), not {value!r}")
            checked[key] = float(value) if key == "timeout" and value is not None else value
        out.append(f"--SandboxKernel.limits={checked!r}")
    for option in options or []:
        if not isinstance(option, str) or not option.startswith("--"):
            raise ValueError(f"options are kernel command-line options such as '--SandboxKernel.X=Y', not {option!r}")
        out.append(option)
    return out


class AsyncSandboxSession:
    """One sandboxed kernel, driven with asyncio. Use ``async with`` (or `start` and `close`).

    `policy`, `isolation`, `limits` (keys ticks, timeout, memory_mb, output_bytes; None = unlimited)
    and `options` (more ``--SandboxKernel.*`` options) launch the kernel; `cwd` is its working
    directory, the sandbox's file area (default: a new temporary directory, removed at close).
    `gateway_url` drives a kernel behind Jupyter Kernel Gateway instead (its operator's kernelspec
    `kernel_name` sets the options there); `pool` takes a warm kernel from a
    sandbox_kernel.pool.KernelPool (the pool's options apply). `timeout` is the default for run()."""

    def __init__(self, policy: str | None = None, isolation: str | None = None, limits: dict | None = None,
                 kernel_name: str = DEFAULT_NAME, cwd: str | None = None, gateway_url: str | None = None,
                 pool: Any = None, *, options: list[str] | None = None, env: dict | None = None,
                 gateway_headers: dict | None = None, timeout: float = 120, startup_timeout: float = 60):
        launch = kernel_options(policy, isolation, limits, options)
        if (gateway_url is not None or pool is not None) and (launch or cwd is not None or env is not None):
            where = "a gateway's kernelspec" if gateway_url is not None else "the pool"
            raise ValueError(f"policy, isolation, limits, options, cwd and env are set by {where}; "
                             f"a session cannot change them")
        if gateway_url is not None and pool is not None:
            raise ValueError("choose gateway_url or pool, not both")
        self.policy, self.isolation, self.limits = policy, isolation, dict(limits or {})
        self.kernel_name = kernel_name
        self.options = launch
        self.gateway_url, self.pool = gateway_url, pool
        self.env, self.gateway_headers = env, gateway_headers
        self.timeout, self.startup_timeout = timeout, startup_timeout
        self._cwd, self._own_cwd = cwd, False
        self._transport = None
        self._lock: asyncio.Lock | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    @property
    def cwd(self) -> str | None:
        """The working directory on this machine (None behind a gateway)."""
        return self._transport.local_cwd if self._transport is not None else self._cwd

    @property
    def started(self) -> bool:
        return self._transport is not None

    async def start(self) -> "AsyncSandboxSession":
        if self._transport is not None:
            return self
        self._lock = asyncio.Lock()
        if self.gateway_url is not None:
            from .gateway import GatewayTransport

            transport = GatewayTransport(self.gateway_url, self.kernel_name, headers=self.gateway_headers,
                                         startup_timeout=self.startup_timeout)
        elif self.pool is not None:
            from .transports import PooledTransport

            transport = PooledTransport(self.pool, self.startup_timeout)
        else:
            from .transports import LocalTransport

            if self._cwd is None:
                self._cwd, self._own_cwd = tempfile.mkdtemp(prefix="sandbox-session-"), True
            transport = LocalTransport(self.kernel_name, self.options, self._cwd, self.env, self.startup_timeout)
        try:
            await transport.start()
        except BaseException:
            self._remove_own_cwd()
            raise
        self._transport = transport
        return self

    async def close(self) -> None:
        transport, self._transport = self._transport, None
        try:
            if transport is not None:
                await transport.close()
        finally:
            self._remove_own_cwd()

    def _remove_own_cwd(self) -> None:
        if self._own_cwd and self._cwd:
            shutil.rmtree(self._cwd, ignore_errors=True)
            self._cwd, self._own_cwd = None, False

    async def __aenter__(self) -> "AsyncSandboxSession":
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _require(self):
        if self._transport is None:
            raise SandboxError("the session is not started (use it as a context manager, or call start())")
        return self._transport

    # -- running code ------------------------------------------------------------------------------

    async def run(self, code: str, timeout: float | None = None, *,
                  on_event: Callable[[Event], Any] | None = None) -> ExecutionResult:
        """Run one cell. `on_event` receives each output Event as it arrives. A cell still running
        after `timeout` seconds (default: the session's) is interrupted and SandboxTimeout raised."""
        reply, outputs = await self._execute(code, timeout=timeout, on_event=on_event)
        return build_result(reply, outputs)

    async def stream(self, code: str, timeout: float | None = None) -> AsyncIterator[Event]:
        """Run one cell, yielding its Events as they arrive; the last one has kind ``done`` and the
        ExecutionResult in `result`."""
        events: asyncio.Queue = asyncio.Queue()
        task = asyncio.ensure_future(self.run(code, timeout, on_event=events.put_nowait))
        task.add_done_callback(lambda _: events.put_nowait(None))
        try:
            while (event := await events.get()) is not None:
                yield event
            yield Event("done", result=await task)
        finally:
            if not task.done():
                task.cancel()

    async def _execute(self, code: str, *, timeout: float | None, on_event=None,
                       silent: bool = False) -> tuple[dict, list[dict]]:
        transport = self._require()
        if not isinstance(code, str):
            raise TypeError("code must be a string")
        timeout = self.timeout if timeout is None else timeout
        async with self._lock:
            while not transport.messages.empty():  # what an earlier, interrupted cell left
                transport.messages.get_nowait()
            msg_id = await transport.send("shell", "execute_request", {
                "code": code, "silent": silent, "store_history": not silent, "user_expressions": {},
                "allow_stdin": False, "stop_on_error": False})
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            reply, idle, outputs = None, False, []
            while reply is None or not idle:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    try:
                        await transport.interrupt()
                    except Exception:
                        pass
                    raise SandboxTimeout(f"the cell did not finish within {timeout:g} s and was interrupted")
                try:
                    channel, msg = await asyncio.wait_for(transport.messages.get(), min(remaining, 2.0))
                except asyncio.TimeoutError:
                    if not await transport.alive():
                        raise SandboxError("the kernel is not running (it died or was shut down)") from None
                    continue
                if channel in ("closed", "restarted"):
                    raise SandboxError("the kernel's connection closed or it was restarted while the cell ran")
                if (msg.get("parent_header") or {}).get("msg_id") != msg_id:
                    continue
                kind, content = msg.get("msg_type"), msg.get("content") or {}
                if channel == "shell" and kind == "execute_reply":
                    reply = msg
                elif channel == "iopub" and kind == "status":
                    idle = content.get("execution_state") == "idle"
                elif channel == "iopub" and kind in OUTPUT_TYPES:
                    outputs.append({"type": kind, **content})
                    event = event_from_message(kind, content)
                    if on_event is not None and event is not None:
                        on_event(event)
            return reply, outputs

    async def _helper(self, code: str, what: str) -> str:
        """Run one of the session's own cells silently (no history, no execution count); its stdout,
        or the sandbox's refusal as SandboxDenied."""
        result = build_result(*await self._execute(code, timeout=self.timeout, silent=True))
        if result.error is not None:
            raise _failure(result, what)
        return result.output

    async def interrupt(self) -> None:
        """End the running cell (the kernel stays, with its namespace)."""
        await self._require().interrupt()

    async def restart(self) -> None:
        """A fresh namespace with the same options; files in the working directory stay."""
        transport = self._require()
        await transport.restart()
        transport.messages.put_nowait(("restarted", {}))

    async def status(self) -> SessionStatus:
        """Policy, ceiling, limits, isolation, the OS layers in force and worker health, as the kernel
        reports them (``%sandbox_status``), and whether the kernel process is alive."""
        transport = self._require()
        try:
            text = await self._helper("%sandbox_status\n", "status()")
        except (SandboxError, SandboxTimeout):
            text = ""
        return SessionStatus.parse(text, kernel_alive=await transport.alive(), where=transport.where)

    # -- data in and out ---------------------------------------------------------------------------

    async def put(self, name: str, value: Any) -> None:
        """Bind `name` in the sandbox's namespace to `value`: a JSON-able value (dict, list, str, number,
        bool, None; tuples arrive as lists) or a pandas DataFrame. The value travels as JSON text and
        the sandbox parses it with its own granted modules; nothing is pickled or evaluated."""
        cells.check_name(name)
        pandas = sys.modules.get("pandas")
        if pandas is not None and isinstance(value, pandas.DataFrame):
            text, build = value.to_json(orient="table", date_format="iso", force_ascii=True), cells.put_frame
        else:
            try:
                text, build = json.dumps(value, ensure_ascii=True), cells.put_json
            except (TypeError, ValueError) as exc:
                raise TypeError(f"put() takes JSON-able values or pandas DataFrames, not "
                                f"{type(value).__name__} ({exc})") from None
        parts = [text[i:i + PUT_CHUNK_CHARS] for i in range(0, len(text), PUT_CHUNK_CHARS)]
        for cell in build(name, parts):
            await self._helper(cell, f"put({name!r})")

    async def get(self, name: str) -> Any:
        """The value bound to `name`, if it is JSON-able (as JSON data) or a DataFrame (rebuilt from
        table-JSON). Serialised in the sandbox under its policy; parsed here as untrusted data."""
        cells.check_name(name)
        marker = cells.nonce()
        head = cells.framed(await self._helper(cells.get_setup(name, marker), f"get({name!r})"), marker)
        try:
            match = re.fullmatch(r"(\d{1,12}):([0-9a-f]{64})", head or "")
            if match is None:
                raise SandboxError(f"get({name!r}): the sandbox's answer was not readable")
            total, digest = int(match.group(1)), match.group(2)
            if total > MAX_TRANSFER_BYTES:
                raise SandboxError(f"get({name!r}): the value is {total:,} characters as JSON, more than "
                                   f"{MAX_TRANSFER_BYTES:,}")
            text = await self._read_slices(total, f"get({name!r})")
        finally:
            try:
                await self._helper(cells.get_cleanup(), "get()")
            except (SandboxError, SandboxTimeout):
                pass
        if hashlib.sha256(text.encode("ascii", "replace")).hexdigest() != digest:
            raise SandboxError(f"get({name!r}): the value changed on its way out of the sandbox")
        kind, _, payload = text.partition(":")
        if kind == "json":
            return json.loads(payload)
        if kind == "frame":
            import pandas

            return pandas.read_json(io.StringIO(payload), orient="table")
        raise SandboxError(f"get({name!r}): the sandbox's answer was not readable")

    async def _read_slices(self, total: int, what: str) -> str:
        chunks, position, size = [], 0, READ_CHUNK_CHARS
        while position < total:
            stop, marker = min(total, position + size), cells.nonce()
            piece = cells.framed(await self._helper(cells.get_slice(position, stop, marker), what), marker)
            if piece is None or len(piece) != stop - position:
                size = _smaller(size, what)
                continue
            chunks.append(piece)
            position = stop
        return "".join(chunks)

    # -- files in the working directory --------------------------------------------------------------

    async def upload(self, path: str, data: bytes | str) -> None:
        """Write `data` (bytes, or text as UTF-8) to `path` in the working directory, through a cell
        under the session's policy: a path the policy's file rules keep out is refused with the same
        SandboxDenied (kind ``file``) a cell gets."""
        cells.check_path(path)
        blob = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        for index, start in enumerate(range(0, max(len(blob), 1), UPLOAD_CHUNK_BYTES)):
            chunk = base64.b64encode(blob[start:start + UPLOAD_CHUNK_BYTES]).decode("ascii")
            await self._helper(cells.write_chunk(path, chunk, append=index > 0), f"upload({path!r})")

    async def download(self, path: str, *, max_bytes: int = MAX_TRANSFER_BYTES) -> bytes:
        """The bytes of `path` in the working directory, read by cells under the session's policy
        (the same refusals as a cell's), at most `max_bytes`."""
        cells.check_path(path)
        what, out, size = f"download({path!r})", bytearray(), READ_CHUNK_CHARS // 4 * 3
        while True:
            marker = cells.nonce()
            piece = cells.framed(await self._helper(cells.read_chunk(path, len(out), size, marker), what), marker)
            try:
                data = base64.b64decode(piece, validate=True) if piece is not None else None
            except ValueError:
                data = None
            if data is None or len(data) > size:
                size = _smaller(size, what)
                continue
            out += data
            if len(out) > max_bytes:
                raise SandboxError(f"{what}: the file is larger than {max_bytes:,} bytes")
            if len(data) < size:
                return bytes(out)

    async def listdir(self, path: str = ".") -> list[FileInfo]:
        """The entries of a directory inside the working directory (name, kind, size). The sandbox
        judges the path first (a cell opens it under the policy's file rules: the same refusal as a
        cell's); the listing is read on this machine without following any symbolic link."""
        cells.check_path(path)
        marker = cells.nonce()
        kind = cells.framed(await self._helper(cells.probe_directory(path, marker), f"listdir({path!r})"), marker)
        if kind == "file":
            raise NotADirectoryError(f"{path!r} is a file")
        if kind != "dir":
            raise SandboxError(f"listdir({path!r}): the sandbox's answer was not readable")
        root = self._require().local_cwd
        if root is None:   # behind a gateway: the kernel lists its own directory (%sandbox_files)
            text = await self._helper(f"%sandbox_files --json {path}\n", f"listdir({path!r})")
            try:
                entries = json.loads(text)["entries"]
                return [FileInfo(str(e["name"]), str(e["kind"]), int(e["size"])) for e in entries]
            except (ValueError, KeyError, TypeError):
                raise SandboxError(f"listdir({path!r}): the kernel's listing was not readable") from None
        return await asyncio.to_thread(list_directory, root, path)


def _smaller(size: int, what: str) -> int:
    if size <= MIN_CHUNK:
        raise SandboxError(f"{what}: the cell's output cap is too small to carry the data back")
    return max(MIN_CHUNK, size // 2)


_PLAIN_ERRORS = {"FileNotFoundError": FileNotFoundError, "IsADirectoryError": IsADirectoryError,
                 "NotADirectoryError": NotADirectoryError, "NameError": NameError}


def _failure(result: ExecutionResult, what: str) -> Exception:
    error = result.error
    if error.denial:
        denial = next((d for d in result.denials if d.message and d.message in error.evalue), None)
        denial = denial or (result.denials[-1] if result.denials else None)
        return SandboxDenied(f"{what}: {error}", denial or Denial.from_record({"message": error.evalue}), error)
    kind = _PLAIN_ERRORS.get(error.ename)
    if kind is not None:
        return kind(f"{what}: {error.evalue}")
    return SandboxError(f"{what} failed in the sandbox: {error}")


class SandboxSession:
    """The synchronous SandboxSession: the same API as AsyncSandboxSession, each call blocking until
    done. A private event loop in a daemon thread runs the async session, so this works inside
    programs that have (or are) an event loop of their own; `interrupt()` may be called from another
    thread while `run()` waits."""

    def __init__(self, policy: str | None = None, isolation: str | None = None, limits: dict | None = None,
                 kernel_name: str = DEFAULT_NAME, cwd: str | None = None, gateway_url: str | None = None,
                 pool: Any = None, **kwargs: Any):
        self.session = AsyncSandboxSession(policy, isolation, limits, kernel_name, cwd, gateway_url, pool, **kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def _call(self, coro):
        if self._loop is None:
            coro.close()
            raise SandboxError("the session is not started (use it as a context manager, or call start())")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def start(self) -> "SandboxSession":
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="sandbox-session", daemon=True)
            self._thread.start()
        try:
            self._call(self.session.start())
        except BaseException:
            self._stop_loop()
            raise
        return self

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            self._call(self.session.close())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=10)
            if not loop.is_running():
                loop.close()

    def __enter__(self) -> "SandboxSession":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def cwd(self) -> str | None:
        return self.session.cwd

    def run(self, code: str, timeout: float | None = None, *,
            on_event: Callable[[Event], Any] | None = None) -> ExecutionResult:
        """See AsyncSandboxSession.run; `on_event` is called in the session's own thread."""
        return self._call(self.session.run(code, timeout, on_event=on_event))

    def stream(self, code: str, timeout: float | None = None) -> Iterator[Event]:
        """Run one cell, yielding its Events as they arrive; the last has kind ``done``."""
        import queue

        events: queue.Queue = queue.Queue()
        future = asyncio.run_coroutine_threadsafe(self.session.run(code, timeout, on_event=events.put),
                                                  self._loop) if self._loop else None
        if future is None:
            raise SandboxError("the session is not started (use it as a context manager, or call start())")
        future.add_done_callback(lambda _: events.put(None))
        while (event := events.get()) is not None:
            yield event
        yield Event("done", result=future.result())

    def put(self, name: str, value: Any) -> None:
        self._call(self.session.put(name, value))

    def get(self, name: str) -> Any:
        return self._call(self.session.get(name))

    def upload(self, path: str, data: bytes | str) -> None:
        self._call(self.session.upload(path, data))

    def download(self, path: str, *, max_bytes: int = MAX_TRANSFER_BYTES) -> bytes:
        return self._call(self.session.download(path, max_bytes=max_bytes))

    def listdir(self, path: str = ".") -> list[FileInfo]:
        return self._call(self.session.listdir(path))

    def interrupt(self) -> None:
        self._call(self.session.interrupt())

    def restart(self) -> None:
        self._call(self.session.restart())

    def status(self) -> SessionStatus:
        return self._call(self.session.status())


for _method in ("put", "get", "upload", "download", "listdir", "interrupt", "restart", "status"):
    getattr(SandboxSession, _method).__doc__ = getattr(AsyncSandboxSession, _method).__doc__
