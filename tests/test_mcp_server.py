"""`python -m sandbox_kernel mcp`, driven by the MCP Python SDK's own client: over stdio (one sandbox
per server process) and over streamable HTTP on loopback (one sandbox per client: per protocol session
for handshake-era clients, per server-minted handle for the stateless 2026-07-28 protocol)."""
import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from kernel_helpers import DEFAULT_TEST_ISOLATION, require_kernelspec

mcp = pytest.importorskip("mcp", reason="the test extras include mcp; pip install -e '.[test]'")
from mcp import Client, StdioServerParameters  # noqa: E402

PLOTLY = "application/vnd.plotly.v1+json"
SERVER = [sys.executable, "-m", "sandbox_kernel", "mcp", "--isolation", DEFAULT_TEST_ISOLATION]
# A 1x1 PNG, shown by a cell object's _repr_png_ (base64 text, as the engine takes it).
PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC")


def text_of(result) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


async def stdio_scenario():
    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
    async with Client(params) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"execute_python", "upload_file", "download_file", "list_files", "reset"}
        assert "code" in tools["execute_python"].input_schema["properties"]

        r = await client.call_tool("execute_python", {"code": (
            "import plotly.express as px\nimport pandas as pd\n"
            "df = pd.DataFrame({'day': [1, 2, 3], 'v': [4.0, 5.0, 6.0]})\n"
            "print('mean', df.v.mean())\npx.line(df, x='day', y='v', title='trend').show()\n"
            f"class Pic:\n    def _repr_png_(self):\n        return {PNG!r}\n"
            "display(Pic())\nfloat(df.v.sum())")})
        assert not r.is_error
        assert "mean 5.0" in text_of(r) and "Out: 15.0" in text_of(r)
        charts = [b for b in r.content if b.type == "resource"]
        assert len(charts) == 1 and charts[0].resource.mime_type == PLOTLY
        assert json.loads(charts[0].resource.text)["layout"]["title"]["text"] == "trend"
        images = [b for b in r.content if b.type == "image"]
        assert [(i.mime_type, i.data) for i in images] == [("image/png", PNG)]
        assert r.structured_content["status"] == "ok" and r.structured_content["charts"] == 1

        # state persists between calls; a denial is a tool error naming what, why and the cell line
        r = await client.call_tool("execute_python", {"code": "total = float(df.v.sum())\nimport subprocess"})
        assert r.is_error and "ImportDenied" in text_of(r) and "(line 2)" in text_of(r)
        assert r.structured_content["denials"][0]["kind"] == "import"
        assert r.structured_content["error"]["line"] == 2
        r = await client.call_tool("execute_python", {"code": "total"})
        assert text_of(r) == "Out: 15.0"

        r = await client.call_tool("upload_file", {"path": "notes.txt", "content": "hello sandbox"})
        assert not r.is_error
        blob = bytes(range(256))
        await client.call_tool("upload_file", {"path": "raw.bin", "content": base64.b64encode(blob).decode(),
                                               "encoding": "base64"})
        r = await client.call_tool("list_files", {})
        names = {e["name"] for e in r.structured_content["entries"]}
        assert names == {"notes.txt", "raw.bin"}
        r = await client.call_tool("download_file", {"path": "notes.txt"})
        assert text_of(r) == "hello sandbox"
        r = await client.call_tool("download_file", {"path": "raw.bin"})
        assert base64.b64decode(r.content[0].resource.blob) == blob
        r = await client.call_tool("execute_python", {"code": "print(open('notes.txt').read())"})
        assert text_of(r) == "hello sandbox"
        for path in ("../escape.txt", "/etc/hostname"):
            r = await client.call_tool("upload_file", {"path": path, "content": "x"})
            assert r.is_error and "FileDenied" in text_of(r) and r.structured_content["denial"]["kind"] == "file"
            r = await client.call_tool("download_file", {"path": path})
            assert r.is_error and "FileDenied" in text_of(r)

        r = await client.call_tool("reset", {})
        assert not r.is_error
        r = await client.call_tool("execute_python", {"code": "total"})
        assert r.is_error and "NameError" in text_of(r)
        r = await client.call_tool("download_file", {"path": "notes.txt"})
        assert text_of(r) == "hello sandbox"   # files stay across a reset
        r = await client.call_tool("execute_python", {"code": "while True:\n    pass", "timeout": 2})
        assert r.is_error and "SandboxTimeout" in text_of(r)
        r = await client.call_tool("execute_python", {"code": "'alive'"})
        assert text_of(r) == "Out: 'alive'"


def test_stdio_server_with_the_sdk_client():
    """The SDK's default negotiation (the HTTP test below covers the handshake era too)."""
    require_kernelspec()
    asyncio.run(stdio_scenario())


# -- streamable HTTP ---------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kernel_children(pid: int) -> int:
    """Kernel processes (`-m sandbox_kernel -f ...`) whose parent is `pid`."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"sandbox_kernel" in cmdline and b"-f" in cmdline:
            count += 1
    return count


@pytest.fixture(scope="module")
def http_server(tmp_path_factory):
    require_kernelspec()
    port = free_port()
    log = open(tmp_path_factory.mktemp("mcp-http") / "server.log", "w+")
    proc = subprocess.Popen([*SERVER, "--transport", "http", "--port", str(port), "--max-sessions", "4"],
                            stdout=log, stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    else:
        proc.kill()
    if proc.poll() is not None:
        log.seek(0)
        pytest.fail(f"the MCP HTTP server did not start:\n{log.read()[-3000:]}")
    yield f"http://127.0.0.1:{port}/mcp", proc
    proc.terminate()
    proc.wait(30)
    log.close()


async def http_scenario(url: str, pid: int):
    async with Client(url, mode="legacy") as alice, Client(url, mode="legacy") as bob:
        await alice.call_tool("execute_python", {"code": "who = 'alice'"})
        await bob.call_tool("execute_python", {"code": "who = 'bob'"})
        assert text_of(await alice.call_tool("execute_python", {"code": "who"})) == "Out: 'alice'"
        assert text_of(await bob.call_tool("execute_python", {"code": "who"})) == "Out: 'bob'"
        await alice.call_tool("upload_file", {"path": "mine.txt", "content": "alice's"})
        r = await bob.call_tool("download_file", {"path": "mine.txt"})
        assert r.is_error and "FileNotFoundError" in text_of(r)   # separate working directories
        assert kernel_children(pid) == 2
    # each protocol session's sandbox is closed when the client ends it
    for _ in range(300):
        if kernel_children(pid) == 0:
            break
        await asyncio.sleep(0.1)
    assert kernel_children(pid) == 0

    async with Client(url) as carol:   # the stateless protocol: state travels in a handle
        assert carol.protocol_version == "2026-07-28"
        r = await carol.call_tool("execute_python", {"code": "who = 'carol'"})
        handle = r.structured_content["session"]
        assert handle and handle in text_of(r)
        r = await carol.call_tool("execute_python", {"code": "who", "session": handle})
        assert text_of(r) == "Out: 'carol'" and "session" not in r.structured_content
        r = await carol.call_tool("execute_python", {"code": "who"})   # no handle: a new sandbox
        assert r.is_error and "NameError" in text_of(r) and r.structured_content["session"] != handle
        r = await carol.call_tool("execute_python", {"code": "who", "session": "guessed-handle"})
        assert r.is_error and "unknown or expired" in text_of(r)


def test_http_server_gives_each_client_its_own_sandbox(http_server):
    url, proc = http_server
    asyncio.run(http_scenario(url, proc.pid))


def test_http_server_refuses_a_non_loopback_address():
    out = subprocess.run([*SERVER, "--transport", "http", "--host", "0.0.0.0"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 2 and "not a loopback address" in out.stderr
