"""A kernel behind Jupyter Kernel Gateway or Enterprise Gateway: its REST API starts, interrupts,
restarts and deletes the kernel, one WebSocket carries every channel's messages as JSON.

The gateway's operator chose the kernelspec (and so the kernel's policy, isolation and limits); the
session only names it. Messages are parsed as JSON and treated as data, like the local transports'.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
from urllib.parse import quote, urlsplit, urlunsplit

from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

from .transports import Transport

# A display can be up to the kernel's display cap (20 MB by default) and the reply repeats charts.
MAX_MESSAGE_BYTES = 128 * 1024 * 1024


class GatewayTransport(Transport):
    where = "gateway"

    def __init__(self, url: str, kernel_name: str, *, headers: dict | None = None, startup_timeout: float = 60,
                 request_timeout: float = 60) -> None:
        super().__init__()
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"gateway_url must be an http(s) URL, not {url!r}")
        self.base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        self.ws_base = urlunsplit(("wss" if parts.scheme == "https" else "ws", parts.netloc, parts.path, "", ""))
        self.kernel_name = kernel_name
        self.headers = dict(headers or {})
        self.startup_timeout = startup_timeout
        self.request_timeout = request_timeout
        self.kernel_id: str | None = None
        self.session = Session()
        self._ws = None
        self._reader: asyncio.Task | None = None
        self._http = AsyncHTTPClient(force_instance=True)

    async def _request(self, method: str, path: str, body: dict | None = None) -> dict | None:
        request = HTTPRequest(self.base + path, method=method, headers={"Content-Type": "application/json",
                                                                         **self.headers},
                              body=None if body is None and method != "POST" else json.dumps(body or {}),
                              request_timeout=self.request_timeout)
        try:
            response = await self._http.fetch(request)
        except HTTPClientError as exc:
            detail = exc.response.body[:500].decode("utf-8", "replace") if exc.response is not None else ""
            raise ConnectionError(f"the gateway answered {method} {path} with {exc.code}: {detail}") from None
        if not response.body:
            return None
        data = json.loads(response.body)
        return data if isinstance(data, dict) else None

    async def start(self) -> None:
        model = await self._request("POST", "/api/kernels", {"name": self.kernel_name})
        kernel_id = (model or {}).get("id")
        if not isinstance(kernel_id, str) or not kernel_id:
            raise ConnectionError(f"the gateway did not start kernel {self.kernel_name!r}: {model!r}")
        self.kernel_id = kernel_id
        try:
            await self._connect()
        except BaseException:
            await self.close()
            raise

    async def _connect(self) -> None:
        url = f"{self.ws_base}/api/kernels/{quote(self.kernel_id, safe='')}/channels"
        self._ws = await websocket_connect(HTTPRequest(url, headers=self.headers,
                                                       request_timeout=self.request_timeout),
                                           max_message_size=MAX_MESSAGE_BYTES)
        self._reader = asyncio.ensure_future(self._read())
        await self._wait_ready()

    async def _read(self) -> None:
        while True:
            text = await self._ws.read_message()
            if text is None:  # closed
                self.messages.put_nowait(("closed", {}))
                return
            try:
                msg = json.loads(text)
            except (TypeError, ValueError):
                continue
            if isinstance(msg, dict) and isinstance(msg.get("header"), dict):
                msg.setdefault("parent_header", {})
                msg.setdefault("content", {})
                msg.setdefault("metadata", {})
                msg["msg_type"] = msg["header"].get("msg_type")
                self.messages.put_nowait((str(msg.get("channel")), msg))

    async def _wait_ready(self) -> None:
        """kernel_info until a reply arrives (the kernel may still be starting behind the gateway)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.startup_timeout
        while loop.time() < deadline:
            msg_id = await self.send("shell", "kernel_info_request", {})
            try:
                until = min(deadline, loop.time() + 2)
                while loop.time() < until:
                    channel, msg = await asyncio.wait_for(self.messages.get(), until - loop.time())
                    if channel == "closed":
                        raise ConnectionError("the gateway closed the kernel's channels")
                    if channel == "shell" and msg["parent_header"].get("msg_id") == msg_id:
                        return
            except asyncio.TimeoutError:
                continue
        raise TimeoutError(f"the kernel behind the gateway did not answer within {self.startup_timeout:g} s")

    async def send(self, channel: str, msg_type: str, content: dict) -> str:
        if self._ws is None:
            raise ConnectionError("the session is not connected to a kernel")
        msg = self.session.msg(msg_type, content)
        msg["channel"] = channel
        msg["buffers"] = []
        await self._ws.write_message(json.dumps(msg, default=json_default))
        return msg["header"]["msg_id"]

    async def interrupt(self) -> None:
        await self._request("POST", f"/api/kernels/{quote(self.kernel_id, safe='')}/interrupt")

    async def restart(self) -> None:
        await self._disconnect()
        await self._request("POST", f"/api/kernels/{quote(self.kernel_id, safe='')}/restart")
        await self._connect()

    async def alive(self) -> bool:
        if self.kernel_id is None:
            return False
        try:
            model = await self._request("GET", f"/api/kernels/{quote(self.kernel_id, safe='')}")
        except (ConnectionError, OSError):
            return False
        return isinstance(model, dict) and model.get("execution_state") not in ("dead", None)

    async def _disconnect(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
            self._reader = None
        if self._ws is not None:
            self._ws.close()
            self._ws = None
        while not self.messages.empty():
            self.messages.get_nowait()

    async def close(self) -> None:
        await self._disconnect()
        kernel_id, self.kernel_id = self.kernel_id, None
        if kernel_id is not None:
            with contextlib.suppress(Exception):
                await self._request("DELETE", f"/api/kernels/{quote(kernel_id, safe='')}")
        self._http.close()
