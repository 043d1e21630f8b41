"""python -m sandbox_kernel mcp: Sandboxed Python as Model Context Protocol tools.

Tools: execute_python, upload_file, download_file, list_files, reset. Each MCP client gets its own
sandbox session (its own kernel, namespace and working directory):

- stdio: the server process serves one client, so it holds one session;
- streamable HTTP, on loopback only (there is no authentication): a client that keeps a protocol
  session (``Mcp-Session-Id``, protocol versions up to 2025-11-25) gets one sandbox per protocol
  session; the stateless protocol (2026-07-28) has no sessions, so the first call returns a handle and
  later calls pass it back as the tool argument ``session``. Idle sandboxes are closed after
  `idle_timeout`; at most `max_sessions` live at once.

Charts come back as embedded JSON resources (``application/vnd.plotly.v1+json``), PNG/JPEG displays as
image content, and a cell that failed (a denial included, with the line that asked) as a tool error.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import ipaddress
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (BlobResourceContents, CallToolResult, EmbeddedResource, ImageContent, TextContent,
                       TextResourceContents)

from .client import (AsyncSandboxSession, ExecutionResult, SandboxDenied, SandboxError, SandboxTimeout)
from .client.results import PLOTLY_MIME

INSTRUCTIONS = (
    "Runs Python in a sandbox with a persistent namespace (variables survive between calls) and a private "
    "working directory. pandas, numpy, scipy and plotly are usually granted; the policy refuses imports "
    "such as os or subprocess, files outside the working directory and the network, with a one-line "
    "reason naming the line. Show charts with plotly (fig.show()); print what you want to read.")
STDIO_KEY = "stdio"
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024


@dataclass
class SessionSettings:
    """How every sandbox session of this server is launched (the operator's choice)."""

    policy: str | None = None
    isolation: str | None = None
    limits: dict = field(default_factory=dict)
    kernel_name: str | None = None
    options: list[str] = field(default_factory=list)
    gateway_url: str | None = None
    timeout: float = 120

    def new_session(self) -> AsyncSandboxSession:
        kwargs: dict[str, Any] = {"timeout": self.timeout}
        if self.kernel_name:
            kwargs["kernel_name"] = self.kernel_name
        if self.gateway_url:
            return AsyncSandboxSession(gateway_url=self.gateway_url, **kwargs)
        return AsyncSandboxSession(self.policy, self.isolation, self.limits or None, options=self.options, **kwargs)


class SessionRegistry:
    """The live sandbox sessions, by the key of the MCP client they belong to."""

    def __init__(self, settings: SessionSettings, *, max_sessions: int, idle_timeout: float):
        self.settings = settings
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self._sessions: dict[str, tuple[AsyncSandboxSession, float]] = {}
        self._lock = asyncio.Lock()

    async def get(self, key: str, *, create: bool) -> AsyncSandboxSession:
        async with self._lock:
            await self._close_idle()
            entry = self._sessions.get(key)
            if entry is None:
                if not create:
                    raise LookupError("unknown or expired sandbox session; call without `session` to start a new one")
                if len(self._sessions) >= self.max_sessions:
                    raise LookupError(f"this server already runs {self.max_sessions} sandbox sessions")
                session = await self.settings.new_session().start()
            else:
                session = entry[0]
            self._sessions[key] = (session, time.monotonic())
            return session

    async def drop(self, key: str) -> None:
        entry = self._sessions.pop(key, None)
        if entry is not None:
            with contextlib.suppress(Exception):
                await entry[0].close()

    def __contains__(self, key: str) -> bool:
        return key in self._sessions

    def touch(self, key: str) -> None:
        if key in self._sessions:
            self._sessions[key] = (self._sessions[key][0], time.monotonic())

    async def _close_idle(self) -> None:
        now = time.monotonic()
        for key in [k for k, (_, used) in self._sessions.items() if now - used > self.idle_timeout]:
            session, _ = self._sessions.pop(key)
            with contextlib.suppress(Exception):
                await session.close()

    async def close_all(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session, _ in sessions:
            with contextlib.suppress(Exception):
                await session.close()

    def __len__(self) -> int:
        return len(self._sessions)


def build_server(settings: SessionSettings, *, stdio: bool, max_sessions: int = 8,
                 idle_timeout: float = 1800) -> MCPServer:
    registry = SessionRegistry(settings, max_sessions=1 if stdio else max_sessions, idle_timeout=idle_timeout)

    @contextlib.asynccontextmanager
    async def lifespan(_server):
        try:
            yield registry
        finally:
            await registry.close_all()

    server = MCPServer("sandboxed-python", instructions=INSTRUCTIONS, lifespan=lifespan)
    server.sessions = registry  # for tests and embedding

    async def session_for(ctx: Context, handle: str | None) -> tuple[str, AsyncSandboxSession, str | None]:
        """(key, session, the handle of a sandbox just made for a client without protocol sessions)."""
        if stdio:
            return STDIO_KEY, await registry.get(STDIO_KEY, create=True), None
        if handle:
            return "h:" + handle, await registry.get("h:" + handle, create=False), None
        protocol_session = (ctx.headers or {}).get("mcp-session-id")
        if protocol_session:
            key = "s:" + protocol_session
            fresh = key not in registry
            sandbox = await registry.get(key, create=True)
            if fresh:
                _close_with_connection(ctx, registry, key)
            return key, sandbox, None
        handle = secrets.token_urlsafe(18)
        return "h:" + handle, await registry.get("h:" + handle, create=True), handle

    async def guarded(ctx: Context, handle: str | None, action) -> CallToolResult:
        try:
            key, session, minted = await session_for(ctx, handle)
        except LookupError as exc:
            return _error_result(str(exc))
        try:
            result = await action(session)
        except SandboxDenied as exc:
            result = _denied_result(exc)
        except (SandboxError, SandboxTimeout, OSError, ValueError, TypeError) as exc:
            result = _error_result(f"{type(exc).__name__}: {exc}")
        finally:
            registry.touch(key)
        if minted:
            result.content.append(TextContent(text=f"sandbox session: {minted} (pass it as `session` to keep "
                                                   f"this namespace and its files)"))
            if isinstance(result.structured_content, dict):
                result.structured_content["session"] = minted
        return result

    session_doc = ("`session`: the handle an earlier call returned; needed only by clients without protocol "
                   "sessions (stateless HTTP).")

    @server.tool(description="Run Python code in the sandbox and return its printed output, the value of the "
                             "last expression, charts (Plotly JSON), images and errors. Variables persist "
                             "between calls. " + session_doc)
    async def execute_python(code: str, ctx: Context, timeout: float | None = None,
                             session: str | None = None) -> CallToolResult:
        async def action(sandbox: AsyncSandboxSession) -> CallToolResult:
            return _execution_result(await sandbox.run(code, timeout))
        return await guarded(ctx, session, action)

    @server.tool(description="Write a file into the sandbox's working directory (text, or base64 with "
                             "encoding='base64'). " + session_doc)
    async def upload_file(path: str, content: str, ctx: Context, encoding: str = "utf-8",
                          session: str | None = None) -> CallToolResult:
        async def action(sandbox: AsyncSandboxSession) -> CallToolResult:
            data = base64.b64decode(content, validate=True) if encoding == "base64" else content.encode("utf-8")
            await sandbox.upload(path, data)
            return CallToolResult(content=[TextContent(text=f"wrote {len(data):,} bytes to {path}")],
                                  structured_content={"path": path, "bytes": len(data)})
        return await guarded(ctx, session, action)

    @server.tool(description="Read a file from the sandbox's working directory: text as text, images as "
                             "images, other bytes as a base64 resource. " + session_doc)
    async def download_file(path: str, ctx: Context, session: str | None = None) -> CallToolResult:
        async def action(sandbox: AsyncSandboxSession) -> CallToolResult:
            return _file_result(path, await sandbox.download(path, max_bytes=MAX_DOWNLOAD_BYTES))
        return await guarded(ctx, session, action)

    @server.tool(description="List a directory of the sandbox's working directory (default: its top). "
                 + session_doc)
    async def list_files(ctx: Context, path: str = ".", session: str | None = None) -> CallToolResult:
        async def action(sandbox: AsyncSandboxSession) -> CallToolResult:
            entries = await sandbox.listdir(path)
            lines = [f"{e.name}{'/' if e.kind == 'dir' else ' -> (link)' if e.kind == 'symlink' else ''}"
                     f"{f'  {e.size:,} bytes' if e.kind == 'file' else ''}" for e in entries]
            return CallToolResult(content=[TextContent(text="\n".join(lines) or "(empty)")],
                                  structured_content={"entries": [e.__dict__ for e in entries]})
        return await guarded(ctx, session, action)

    @server.tool(description="Restart the sandbox: every variable is gone, files in the working directory "
                             "stay. " + session_doc)
    async def reset(ctx: Context, session: str | None = None) -> CallToolResult:
        async def action(sandbox: AsyncSandboxSession) -> CallToolResult:
            await sandbox.restart()
            return CallToolResult(content=[TextContent(text="the sandbox restarted: the namespace is empty, "
                                                            "files stay")])
        return await guarded(ctx, session, action)

    return server


def _close_with_connection(ctx: Context, registry: SessionRegistry, key: str) -> None:
    """Close the sandbox when its protocol session ends (a DELETE or the SDK's idle timeout). The SDK
    keeps the connection private; where it is not found, the registry's idle timeout closes it."""
    connection = getattr(ctx.session, "_connection", None)
    exit_stack = getattr(connection, "exit_stack", None)
    if exit_stack is not None and getattr(connection, "session_id", None):
        exit_stack.push_async_callback(registry.drop, key)


def _execution_result(result: ExecutionResult) -> CallToolResult:
    parts = []
    if result.output:
        parts.append(result.output.rstrip("\n"))
    for bundle in result.displays:  # tables and other displays, as their text form
        text = bundle.get("text/plain")
        if isinstance(text, str) and PLOTLY_MIME not in bundle and not any(m.startswith("image/") for m in bundle):
            parts.append(text)
    if result.result is not None:
        parts.append(f"Out: {result.result}")
    if result.stderr:
        parts.append(f"[stderr]\n{result.stderr.rstrip()}")
    if result.error is not None:
        parts.append(str(result.error) if result.error.denial else
                     "\n".join(result.error.traceback[-12:]) or str(result.error))
    if result.truncated:
        parts.append("[output was cut to the sandbox's limits]")
    content: list = [TextContent(text="\n".join(parts) or "(no output)")]
    for index, chart in enumerate(result.charts):
        content.append(EmbeddedResource(resource=TextResourceContents(
            uri=f"sandbox://charts/{index}.json", mime_type=PLOTLY_MIME, text=json.dumps(chart))))
    for mime, data in result.images:
        content.append(ImageContent(data=data, mime_type=mime))
    summary = {"status": result.status, "output": result.output, "result": result.result,
               "error": None if result.error is None else {"ename": result.error.ename, "evalue": result.error.evalue,
                                                           "line": result.error.line, "denial": result.error.denial},
               "denials": [d.__dict__ for d in result.denials], "charts": len(result.charts),
               "truncated": result.truncated, "elapsed_ms": result.elapsed_ms}
    return CallToolResult(content=content, structured_content=summary, is_error=result.error is not None)


def _file_result(path: str, data: bytes) -> CallToolResult:
    if data.startswith(b"\x89PNG\r\n\x1a\n") or data.startswith(b"\xff\xd8\xff"):
        mime = "image/png" if data[:1] == b"\x89" else "image/jpeg"
        return CallToolResult(content=[ImageContent(data=base64.b64encode(data).decode("ascii"), mime_type=mime)])
    try:
        return CallToolResult(content=[TextContent(text=data.decode("utf-8"))])
    except UnicodeDecodeError:
        return CallToolResult(content=[EmbeddedResource(resource=BlobResourceContents(
            uri=f"sandbox://files/{path}", mime_type="application/octet-stream",
            blob=base64.b64encode(data).decode("ascii")))])


def _denied_result(exc: SandboxDenied) -> CallToolResult:
    denial = exc.denial.__dict__ if exc.denial is not None else None
    return CallToolResult(content=[TextContent(text=str(exc))], structured_content={"denial": denial},
                          is_error=True)


def _error_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(text=text)], is_error=True)


# -- command line ----------------------------------------------------------------------------------

def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox_kernel mcp",
                                     description="Serve Sandboxed Python as MCP tools (stdio by default).")
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address for --transport http")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--policy", help="the sessions' policy (a preset or a --policies-dir name)")
    parser.add_argument("--isolation", choices=("none", "process", "kernel"),
                        help="the sessions' isolation level (default: the kernel's, kernel on Linux)")
    parser.add_argument("--limits", help='JSON limits, e.g. \'{"timeout": 30, "memory_mb": 1024}\'')
    parser.add_argument("--kernel", help="kernelspec name (default sandboxed-python)")
    parser.add_argument("--option", action="append", default=[], metavar="--SandboxKernel.X=Y",
                        help="another kernel option (repeatable)")
    parser.add_argument("--gateway-url", help="run the sessions' kernels behind this Kernel Gateway")
    parser.add_argument("--timeout", type=float, default=120, help="seconds allowed per tool call's cell")
    parser.add_argument("--max-sessions", type=int, default=8, help="sandboxes at once (http)")
    parser.add_argument("--idle-timeout", type=float, default=1800, help="close a sandbox idle this long (s)")
    ns = parser.parse_args(argv)
    settings = SessionSettings(policy=ns.policy, isolation=ns.isolation,
                               limits=json.loads(ns.limits) if ns.limits else {}, kernel_name=ns.kernel,
                               options=ns.option, gateway_url=ns.gateway_url, timeout=ns.timeout)
    if not ns.gateway_url:
        settings.new_session()  # check the options before serving
    if ns.transport == "http" and not _loopback(ns.host):
        parser.error(f"--host {ns.host} is not a loopback address: the MCP server has no authentication")
    server = build_server(settings, stdio=ns.transport == "stdio", max_sessions=ns.max_sessions,
                          idle_timeout=ns.idle_timeout)
    if ns.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=ns.host, port=ns.port)
    return 0
