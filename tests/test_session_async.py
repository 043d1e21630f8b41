"""AsyncSandboxSession (asyncio) and sessions on warm kernels from sandbox_kernel.pool.KernelPool."""
import asyncio
import os

import pytest

from kernel_helpers import DEFAULT_TEST_ISOLATION, KERNEL_NAME, require_kernelspec
from sandbox_kernel.client import AsyncSandboxSession, SandboxDenied, SandboxSession, SandboxTimeout


def test_async_session_runs_streams_and_moves_data(tmp_path):
    require_kernelspec()

    async def scenario():
        async with AsyncSandboxSession(isolation=DEFAULT_TEST_ISOLATION, cwd=str(tmp_path),
                                       kernel_name=KERNEL_NAME) as sandbox:
            await sandbox.put("values", [3, 1, 2])
            r = await sandbox.run("print(sorted(values))\nmax(values)")
            assert (r.output, r.result) == ("[1, 2, 3]\n", "3")
            kinds = [e.kind async for e in sandbox.stream("print('x')\ndisplay({'a': 1})\n1")]
            assert kinds == ["stream", "display", "result", "done"]
            # two coroutines at once: cells are queued, not interleaved
            first, second = await asyncio.gather(sandbox.run("order = ['first']"),
                                                 sandbox.run("order.append('second')\norder"))
            assert first.ok and second.result == "['first', 'second']"
            await sandbox.upload("a.txt", "async")
            assert await sandbox.download("a.txt") == b"async"
            assert [e.name for e in await sandbox.listdir()] == ["a.txt"]
            with pytest.raises(SandboxDenied):
                await sandbox.download("../a.txt")
            with pytest.raises(SandboxTimeout):
                await sandbox.run("while True:\n    pass", timeout=2)
            assert (await sandbox.get("values")) == [3, 1, 2]
            assert (await sandbox.status()).kernel_alive

    asyncio.run(scenario())


@pytest.fixture(scope="module")
def pool():
    require_kernelspec()
    from sandbox_kernel.pool import KernelPool

    with KernelPool(1, kernel_name=KERNEL_NAME,
                    options=[f"--SandboxKernel.isolation={DEFAULT_TEST_ISOLATION}"]) as kernels:
        yield kernels


def test_sessions_from_a_pool_get_their_own_kernel_and_directory(pool):
    with SandboxSession(pool=pool) as first:
        first_cwd = first.cwd
        assert os.path.isdir(first_cwd)
        first.put("secret", "first session's")
        first.upload("left.txt", b"first")
        assert first.run("secret").result == "\"first session's\""
        assert first.status().where == "pool"
        with pytest.raises(SandboxTimeout):
            first.run("while True:\n    pass", timeout=2)
        first.restart()
        assert first.run("secret").error.ename == "NameError"
        assert first.download("left.txt") == b"first"   # restart keeps the pooled kernel's directory
    with SandboxSession(pool=pool) as second:
        assert second.cwd != first_cwd
        assert second.run("secret").error.ename == "NameError"
        assert second.listdir() == []
        assert second.run("1 + 1").result == "2"


def test_a_pooled_session_cannot_change_the_pools_options(pool):
    for options in ({"policy": "strict"}, {"isolation": "kernel"}, {"limits": {"timeout": 1}},
                    {"cwd": "/tmp"}, {"options": ["--SandboxKernel.policy=strict"]}):
        with pytest.raises(ValueError):
            SandboxSession(pool=pool, **options)
