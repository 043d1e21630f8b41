"""Where a session's kernel lives: started here, taken from a pool, or behind a Kernel Gateway.

Every transport offers the same small async surface to the session: `send` a request on a channel,
a queue of ``(channel, message)`` pairs as they arrive, `interrupt`, `restart`, `alive`, `close`.
`local_cwd` is the working directory's path when it is on this machine (listing needs it).
"""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager


class Transport:
    where = "?"
    local_cwd: str | None = None

    def __init__(self) -> None:
        self.messages: asyncio.Queue = asyncio.Queue()

    async def start(self) -> None: ...
    async def send(self, channel: str, msg_type: str, content: dict) -> str: ...
    async def interrupt(self) -> None: ...
    async def restart(self) -> None: ...
    async def alive(self) -> bool: ...
    async def close(self) -> None: ...


class _ClientTransport(Transport):
    """A jupyter_client AsyncKernelClient whose shell and iopub messages are pumped into the queue."""

    def __init__(self, startup_timeout: float) -> None:
        super().__init__()
        self.startup_timeout = startup_timeout
        self.kc: AsyncKernelClient | None = None
        self._pumps: list[asyncio.Task] = []

    async def _attach(self, kc: AsyncKernelClient) -> None:
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=self.startup_timeout)
        except BaseException:
            kc.stop_channels()
            raise
        self.kc = kc
        self._pumps = [asyncio.ensure_future(self._pump("shell", kc.get_shell_msg)),
                       asyncio.ensure_future(self._pump("iopub", kc.get_iopub_msg))]

    async def _pump(self, channel: str, receive) -> None:
        while True:
            msg = await receive(timeout=None)
            self.messages.put_nowait((channel, msg))

    async def _detach(self) -> None:
        for task in self._pumps:
            task.cancel()
        for task in self._pumps:
            with contextlib.suppress(BaseException):
                await task
        self._pumps = []
        if self.kc is not None:
            self.kc.stop_channels()
            self.kc = None

    async def send(self, channel: str, msg_type: str, content: dict) -> str:
        if self.kc is None:
            raise ConnectionError("the session is not connected to a kernel")
        chan = self.kc.shell_channel if channel == "shell" else self.kc.control_channel
        msg = self.kc.session.msg(msg_type, content)
        chan.send(msg)
        return msg["header"]["msg_id"]


class LocalTransport(_ClientTransport):
    """A kernel this process starts from the kernelspec, with the session's options on its command line."""

    where = "local"

    def __init__(self, kernel_name: str, options: list[str], cwd: str, env: dict | None,
                 startup_timeout: float) -> None:
        super().__init__(startup_timeout)
        self.kernel_name, self.options, self.local_cwd, self.env = kernel_name, options, cwd, env
        self.km: AsyncKernelManager | None = None

    async def start(self) -> None:
        self.km = AsyncKernelManager(kernel_name=self.kernel_name)
        # The kernel's own stdout goes to our stderr: a program that speaks a protocol on its stdout (the
        # MCP server over stdio) must not get the kernel's or its worker's stray prints in it.
        kwargs: dict[str, Any] = {"extra_arguments": list(self.options), "cwd": self.local_cwd, "stdout": 2}
        if self.env is not None:
            kwargs["env"] = self.env
        await self.km.start_kernel(**kwargs)
        try:
            await self._attach(self.km.client())
        except BaseException:
            await self.close()
            raise

    async def interrupt(self) -> None:
        await self.km.interrupt_kernel()

    async def restart(self) -> None:
        await self._detach()
        await self.km.restart_kernel(now=False)  # a graceful stop: the kernel ends its workers
        await self._attach(self.km.client())

    async def alive(self) -> bool:
        return self.km is not None and await self.km.is_alive()

    async def close(self) -> None:
        await self._detach()
        if self.km is not None and self.km.has_kernel:
            with contextlib.suppress(Exception):
                await self.km.shutdown_kernel(now=True)
        self.km = None


class PooledTransport(_ClientTransport):
    """A warm kernel from a KernelPool (sandbox_kernel.pool): acquired at start, released (shut down and
    replaced by the pool, never handed to another session) at close. The pool's kernel manager is
    synchronous, so its calls run in a thread; the session talks to the kernel with its own async client."""

    where = "pool"

    def __init__(self, pool: Any, startup_timeout: float) -> None:
        super().__init__(startup_timeout)
        self.pool = pool
        self.pooled: Any = None

    async def start(self) -> None:
        self.pooled = await asyncio.to_thread(self.pool.acquire, timeout=self.startup_timeout)
        self.local_cwd = getattr(self.pooled, "cwd", None)
        # The session talks through its own client; the pool's would buffer every output unread.
        await asyncio.to_thread(self.pooled.kc.stop_channels)
        try:
            await self._attach(self._client())
        except BaseException:
            await self.close()
            raise

    def _client(self) -> AsyncKernelClient:
        kc = AsyncKernelClient()
        kc.load_connection_info(self.pooled.km.get_connection_info())
        return kc

    async def interrupt(self) -> None:
        await asyncio.to_thread(self.pooled.km.interrupt_kernel)

    async def restart(self) -> None:
        await self._detach()
        await asyncio.to_thread(self.pooled.km.restart_kernel, now=False)  # its worker ends with it
        await self._attach(self._client())

    async def alive(self) -> bool:
        return self.pooled is not None and await asyncio.to_thread(self.pooled.km.is_alive)

    async def close(self) -> None:
        await self._detach()
        pooled, self.pooled = self.pooled, None
        if pooled is not None:
            await asyncio.to_thread(pooled.release)
