"""`python -m sandbox_kernel eg-launch`, Enterprise Gateway's kernel launcher protocol, checked against
Enterprise Gateway's own server-side code.

The launcher runs as a real process, as EG's kernelspecs and kernel images start it. The gateway's side
is EG's code itself, run in the interpreter that has it (see EG_PYTHON below): its ResponseManager makes
the RSA key pair, listens on the response address, receives and decrypts the launcher's payload; a
RemoteProcessProxy (DistributedProcessProxy, the class EG uses for remote hosts) takes the connection
information the way EG does (`_setup_connection_info`: the pid/pgid taken out, `ip` set to the kernel's
host, the communication port recorded) and sends signals, polls and the listener shutdown through the
communication port with EG's own methods. jupyter_client then connects to the kernel with that
connection information and runs sandboxed cells.

A whole Enterprise Gateway server (`jupyter enterprisegateway`, EG's DistributedProcessProxy on this host)
then runs a SandboxSession through its REST and WebSocket API with a kernelspec whose argv is this
launcher. Not covered: Kubernetes, Docker and YARN (EG's KubernetesProcessProxy makes the pod and talks to
the Kubernetes API; what runs inside the pod is this launcher, exercised the same way here).
"""
from __future__ import annotations

import json
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from sandbox_kernel.gateway_launcher import LauncherError, parse_args, port_range

# Enterprise Gateway pins jupyter_client<7, jupyter_server<2 and pyzmq<25, which this package's own
# dependencies (jupyter_client 8, JupyterLab 4) exclude, so it lives in an interpreter of its own:
#     python -m venv /opt/eg && /opt/eg/bin/pip install jupyter_enterprise_gateway
#     SANDBOX_EG_PYTHON=/opt/eg/bin/python pytest tests/test_gateway_launcher.py
EG_PYTHON = os.environ.get("SANDBOX_EG_PYTHON") or sys.executable


def _eg_available() -> str | None:
    probe = subprocess.run([EG_PYTHON, "-c", "import enterprise_gateway.services.processproxies.distributed"],
                           capture_output=True, text=True, timeout=120)
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["?"])[-1]


# The gateway's side, in EG's interpreter: one JSON line out per step; commands come in on stdin.
GATEWAY_SIDE = r'''
import asyncio, json, logging, os, sys, types
os.environ.setdefault("EG_RESPONSE_IP", "127.0.0.1")
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
from enterprise_gateway.services.processproxies.processproxy import RemoteProcessProxy, ResponseManager
from enterprise_gateway.services.processproxies.distributed import DistributedProcessProxy

def say(**kw):
    print(json.dumps(kw), flush=True)

async def main():
    kernel_id = sys.argv[1]
    manager = ResponseManager.instance()
    manager.register_event(kernel_id)
    say(public_key=manager.public_key, response_address=manager.response_address)
    info = None
    for _ in range(int(60 / 0.05)):
        try:
            info = await manager.get_connection_info(kernel_id)
            break
        except asyncio.TimeoutError:
            await asyncio.sleep(0.05)
    if info is None:
        say(error="no connection information within 60 s")
        return
    received = dict(info)
    # The process proxy EG makes for a kernel on a remote host, without its kernel manager's launch.
    loaded = {}
    proxy = DistributedProcessProxy.__new__(DistributedProcessProxy)
    proxy.log = logging.getLogger("proxy")
    proxy.kernel_id = kernel_id
    proxy.kernel_manager = types.SimpleNamespace(load_connection_info=lambda info: loaded.update(info))
    proxy.assigned_host = proxy.assigned_ip = "127.0.0.1"
    proxy.ip, proxy.pid, proxy.pgid, proxy.local_proc = None, 0, 0, None
    proxy.comm_ip, proxy.comm_port, proxy.response_socket, proxy.tunnel_processes = None, 0, None, {}
    proxy._setup_connection_info(info)
    say(received=received, loaded=loaded, pid=proxy.pid, pgid=proxy.pgid, comm_port=proxy.comm_port)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        command = json.loads(line)
        if "signal" in command:
            say(result=proxy.send_signal(int(command["signal"])))
        elif "poll" in command:
            say(result=proxy.poll())
        elif "shutdown_listener" in command:     # DistributedProcessProxy's: SIGTERM, then the shutdown
            say(result=proxy.shutdown_listener())
        elif "container_shutdown_listener" in command:
            # ContainerProcessProxy's (Kubernetes, Docker) before it deletes the pod: the shutdown alone.
            say(result=RemoteProcessProxy.shutdown_listener(proxy))

asyncio.run(main())
'''


class Gateway:
    """EG's response manager and process proxy in a child process (EG's interpreter)."""

    def __init__(self, kernel_id: str, log_path):
        self.log = open(log_path, "w+")
        self.proc = subprocess.Popen([EG_PYTHON, "-c", GATEWAY_SIDE, kernel_id], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, bufsize=1)

    def read(self, timeout: float = 90) -> dict:
        import select

        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.log.seek(0)
            pytest.fail(f"the gateway side said nothing:\n{self.log.read()[-4000:]}")
        return json.loads(line)

    def ask(self, **command):
        self.proc.stdin.write(json.dumps(command) + "\n")
        return self.read()["result"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def run_cell(kc, code: str, timeout: float = 90) -> tuple[dict, list[dict]]:
    msg_id = kc.execute(code)
    outputs, reply, idle = [], None, False
    deadline = time.monotonic() + timeout
    while reply is None or not idle:
        assert time.monotonic() < deadline, f"no answer to {code!r}"
        try:
            msg = kc.get_iopub_msg(timeout=0.1)
            if msg["parent_header"].get("msg_id") == msg_id:
                if msg["msg_type"] == "status":
                    idle = msg["content"]["execution_state"] == "idle"
                elif msg["msg_type"] in ("stream", "execute_result", "error"):
                    outputs.append({"type": msg["msg_type"], **msg["content"]})
        except queue.Empty:
            pass
        if reply is None:
            try:
                msg = kc.get_shell_msg(timeout=0.01)
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply = msg
            except queue.Empty:
                pass
    return reply, outputs


@pytest.fixture
def launched(tmp_path):
    """A launcher started as EG starts it, its connection information received by EG's code, and a
    jupyter_client connected with that information."""
    pytest.importorskip("Cryptodome", reason="the launcher needs pycryptodomex (the `gateway` extra)")
    missing = _eg_available()
    if missing:
        pytest.skip(f"Enterprise Gateway is not importable by {EG_PYTHON} ({missing}); its pins conflict "
                    f"with this environment: install jupyter_enterprise_gateway in its own venv and set "
                    f"SANDBOX_EG_PYTHON to its python")
    from jupyter_client import BlockingKernelClient

    kernel_id = str(uuid.uuid4())
    gateway = Gateway(kernel_id, tmp_path / "gateway.log")
    hello = gateway.read()
    low = random.randrange(20000, 50000)
    ports = f"{low}..{low + 1000}"
    workdir = tmp_path / "work"
    workdir.mkdir()
    log = open(tmp_path / "launcher.log", "w+")
    # As EG's kernelspecs pass them (bootstrap-kernel.sh adds the Spark mode and, from the client's
    # KERNEL_CLASS_NAME, a kernel class), with an operator option for the kernel.
    launcher = subprocess.Popen(
        [sys.executable, "-P", "-m", "sandbox_kernel", "eg-launch", "--kernel-id", kernel_id,
         "--port-range", ports, "--response-address", hello["response_address"],
         "--public-key", hello["public_key"], "--spark-context-initialization-mode", "none",
         "--kernel-class-name", "ipykernel.ipkernel.IPythonKernel", "--ip", "127.0.0.1",
         "--SandboxKernel.isolation=kernel"],
        cwd=workdir, env={**os.environ, "TMPDIR": str(tmp_path)}, stdout=log, stderr=subprocess.STDOUT)
    kc = None
    try:
        handshake = gateway.read()
        assert "error" not in handshake, handshake
        # The launcher answers as soon as the kernel is started (as EG's does); the kernel binds its
        # ports once it has imported itself, which a loaded machine makes slow.
        deadline = time.monotonic() + 120
        for name in ("hb", "shell", "control", "iopub"):
            while not listening(handshake["loaded"][f"{name}_port"]):
                assert launcher.poll() is None and time.monotonic() < deadline, "the kernel never listened"
                time.sleep(0.1)
        kc = BlockingKernelClient()
        kc.load_connection_info(handshake["loaded"])
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        yield gateway, launcher, kc, handshake, (low, low + 1000), log
    finally:
        if kc is not None:
            kc.stop_channels()
        if launcher.poll() is None:
            launcher.terminate()                             # ends the kernel and removes its files
            try:
                launcher.wait(30)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait()
        gateway.close()
        log.seek(0)
        print(log.read()[-4000:])
        log.close()


def test_the_handshake_reaches_enterprise_gateways_code_and_the_kernel_runs_sandboxed(launched, tmp_path):
    gateway, launcher, kc, handshake, (low, high), log = launched
    received, loaded = handshake["received"], handshake["loaded"]
    # What EG's ResponseManager decrypted: the connection file and the launcher's process information.
    assert received["kernel_id"] and received["pid"] == launcher.pid == handshake["pid"]
    assert received["pgid"] == os.getpgid(launcher.pid) == handshake["pgid"]
    assert handshake["comm_port"] == received["comm_port"] and low <= received["comm_port"] <= high
    ports = [loaded[f"{name}_port"] for name in ("shell", "iopub", "stdin", "hb", "control")]
    assert all(low <= p <= high for p in ports) and len(set(ports)) == 5
    assert loaded["ip"] == "127.0.0.1" and loaded["signature_scheme"] == "hmac-sha256" and loaded["key"]

    # The kernel is this package's, started as its kernelspec starts it: a child of the launcher.
    (kernel_pid,) = children(launcher.pid)
    with open(f"/proc/{kernel_pid}/cmdline", "rb") as fh:
        argv = fh.read().split(b"\0")
    assert argv[1:5] == [b"-P", b"-m", b"sandbox_kernel", b"-f"] and b"--SandboxKernel.isolation=kernel" in argv
    (connection_file,) = tmp_path.glob("kernel-*/connection.json")   # private, outside the working directory
    assert argv[5] == str(connection_file).encode() and connection_file.stat().st_mode & 0o077 == 0
    assert connection_file.parent.stat().st_mode & 0o077 == 0

    reply, outputs = run_cell(kc, "sum(range(10)) * 2")
    assert reply["content"]["status"] == "ok", outputs
    assert outputs[-1]["data"]["text/plain"] == "90"
    sandbox = reply["metadata"]["sandbox"]
    assert sandbox["isolation"] == "kernel", sandbox
    reply, outputs = run_cell(kc, "import os\nos.system('id')")
    assert reply["content"]["status"] == "error"
    assert "os" in reply["content"]["evalue"] and reply["metadata"]["sandbox"].get("denials"), reply
    reply, outputs = run_cell(kc, "open('/etc/passwd').read()")
    assert reply["content"]["status"] == "error", outputs

    # An interrupt as EG sends it (signal_kernel -> the process proxy's send_signal over the
    # communication port): the launcher relays SIGINT and the running cell ends.
    msg_id = kc.execute("import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.05)")
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "the cell never started"
        try:
            msg = kc.get_iopub_msg(timeout=0.2)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
            break
    assert gateway.ask(signal=int(signal.SIGINT)) is None     # None: sent
    reply = kc.get_shell_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "error", reply
    reply, outputs = run_cell(kc, "'still here'")
    assert outputs[-1]["data"]["text/plain"] == "'still here'"

    # EG's poll while the kernel lives: signal 0 over the communication port, None means alive.
    assert gateway.ask(poll=True) is None

    # EG's shutdown of a kernel in a container: a shutdown_request to the kernel, then the listener's
    # shutdown; the kernel ends by itself (EG then deletes the pod).
    shutdown_id = kc.shutdown()
    deadline = time.monotonic() + 60
    while True:
        assert time.monotonic() < deadline, "no shutdown_reply"
        try:
            msg = kc.control_channel.get_msg(timeout=0.5)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") == shutdown_id:
            break
    assert gateway.ask(container_shutdown_listener=True) is None
    assert launcher.wait(60) == 0
    # (the kernel normally ends by itself on the shutdown request; on a loaded machine it may miss the launcher's
    # 10 s grace and get SIGTERM: either way it is gone, which is what is asserted, not how long it took)
    assert not alive(kernel_pid)
    assert gateway.ask(poll=True) is False                   # the port is closed: EG's "no process"
    assert not list(tmp_path.glob("kernel-*"))              # the connection file's directory is gone


def test_a_signal_through_the_communication_port_ends_the_kernel_and_the_launcher(launched, tmp_path):
    gateway, launcher, kc, handshake, _, log = launched
    (kernel_pid,) = children(launcher.pid)
    reply, outputs = run_cell(kc, "40 + 2")
    assert outputs[-1]["data"]["text/plain"] == "42"
    # A cell is running when the gateway ends the kernel (DistributedProcessProxy.shutdown_listener:
    # SIGTERM over the communication port, then the shutdown), with no shutdown_request first.
    kc.execute("while True:\n    pass")
    time.sleep(1)
    assert gateway.ask(shutdown_listener=True) is None
    assert launcher.wait(60) == 0
    assert not list(tmp_path.glob("kernel-*"))
    assert not alive(kernel_pid)
    assert gateway.ask(poll=True) is False


def test_the_kernel_ends_with_its_launcher(launched, tmp_path):
    gateway, launcher, kc, handshake, _, log = launched
    (kernel_pid,) = children(launcher.pid)
    launcher.send_signal(signal.SIGTERM)                     # a pod being deleted
    assert launcher.wait(60) == 0
    assert not list(tmp_path.glob("kernel-*"))
    assert not alive(kernel_pid)
    assert gateway.ask(poll=True) is False


def test_the_kernel_dies_even_when_its_launcher_is_killed(launched):
    gateway, launcher, kc, handshake, _, log = launched
    (kernel_pid,) = children(launcher.pid)
    launcher.kill()
    launcher.wait(30)
    deadline = time.monotonic() + 30
    while alive(kernel_pid):                                 # PR_SET_PDEATHSIG, set before exec
        assert time.monotonic() < deadline, "the kernel outlived its killed launcher"
        time.sleep(0.1)


# -- a whole Enterprise Gateway server -------------------------------------------------------------

EG_TOKEN = "eg-test-token-7a2d"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launchers_of(kernel_id: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    argv = fh.read().split(b"\0")
            except OSError:
                continue
            if b"eg-launch" in argv and kernel_id.encode() in argv and alive(int(entry)):
                found.append(int(entry))
    return found


@pytest.fixture(scope="module")
def enterprise_gateway(tmp_path_factory):
    """`jupyter enterprisegateway` (EG's interpreter) on loopback with a kernelspec whose argv runs
    this launcher through EG's DistributedProcessProxy: for a host that is the gateway's own, EG runs
    the argv as a local process and then treats it as a remote kernel (handshake, communication port)."""
    pytest.importorskip("Cryptodome", reason="the launcher needs pycryptodomex (the `gateway` extra)")
    missing = _eg_available()
    if missing:
        pytest.skip(f"Enterprise Gateway is not importable by {EG_PYTHON} ({missing}); see SANDBOX_EG_PYTHON")
    root = tmp_path_factory.mktemp("eg")
    # `signal`: interrupts go through the communication port to the launcher; `message`: the control channel.
    for mode in ("signal", "message"):
        spec_dir = root / "share" / "jupyter" / "kernels" / f"sandboxed-python-eg-{mode}"
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps({
            "display_name": f"Sandboxed Python (Enterprise Gateway, {mode})", "language": "python",
            "interrupt_mode": mode,
            "metadata": {"process_proxy": {
                "class_name": "enterprise_gateway.services.processproxies.distributed.DistributedProcessProxy",
                "config": {"remote_hosts": "localhost"}}},
            "argv": [sys.executable, "-P", "-m", "sandbox_kernel", "eg-launch", "--kernel-id", "{kernel_id}",
                     "--port-range", "{port_range}", "--response-address", "{response_address}",
                     "--public-key", "{public_key}", "--ip", "127.0.0.1"]}))
    port = free_port()
    env = {**os.environ, "JUPYTER_PATH": str(root / "share" / "jupyter"), "EG_RESPONSE_IP": "127.0.0.1",
           "EG_RESPONSE_PORT": str(free_port()), "EG_KERNEL_LOG_DIR": str(root),
           "EG_UNAUTHORIZED_USERS": "nobody"}   # EG refuses kernels to root by default; tests may run as root
    log = open(root / "gateway.log", "w+")
    proc = subprocess.Popen([EG_PYTHON, "-m", "enterprise_gateway", "--ip=127.0.0.1", f"--port={port}",
                             f"--EnterpriseGatewayApp.auth_token={EG_TOKEN}"],
                            cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    import urllib.request

    for _ in range(600):
        try:
            urllib.request.urlopen(urllib.request.Request(f"{url}/api", headers={
                "Authorization": f"token {EG_TOKEN}"}), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    if proc.poll() is not None:
        log.seek(0)
        pytest.fail(f"Enterprise Gateway did not start:\n{log.read()[-3000:]}")
    yield url, root
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


@pytest.mark.parametrize("interrupt_mode", ["signal", "message"])
def test_a_sandboxed_session_through_enterprise_gateway(enterprise_gateway, interrupt_mode):
    from sandbox_kernel.client import SandboxSession, SandboxTimeout

    url, root = enterprise_gateway
    with SandboxSession(gateway_url=url, gateway_headers={"Authorization": f"token {EG_TOKEN}"},
                        kernel_name=f"sandboxed-python-eg-{interrupt_mode}") as session:
        r = session.run("print('via enterprise gateway')\n6 * 7")
        assert r.ok and r.output == "via enterprise gateway\n" and r.result == "42", r.error
        assert r.isolation == "kernel" and {"landlock", "seccomp"} <= set(r.os_layers)
        r = session.run("import os\nos.system('id')")
        assert r.error.denial and r.denials[0].kind == "import"
        status = session.status()
        assert status.where == "gateway" and status.kernel_alive and not status.degraded
        kernel_id = session.session._transport.kernel_id
        (launcher,) = launchers_of(kernel_id)
        session.run("kept = 1")
        with pytest.raises(SandboxTimeout):   # the client interrupts through EG's REST API
            session.run("while True:\n    pass", timeout=3)
        assert session.run("kept").result == "1"
    # Closing the session deletes the kernel: EG's shutdown_request, SIGTERM and listener shutdown.
    deadline = time.monotonic() + 60
    while alive(launcher):
        assert time.monotonic() < deadline, "the launcher outlived the kernel's deletion"
        time.sleep(0.2)
    kernel_log = (root / f"kernel-{kernel_id}.log").read_text()
    assert "gateway: shutdown" in kernel_log, kernel_log
    # In signal mode the interrupt was EG's SIGINT relayed by the launcher; in message mode it was not.
    assert ("gateway: signal 2 for the kernel" in kernel_log) == (interrupt_mode == "signal"), kernel_log


# -- arguments (no gateway needed) -----------------------------------------------------------------


def test_arguments_take_egs_names_its_environment_and_only_trait_options_for_the_kernel():
    ns = parse_args(["--RemoteProcessProxy.kernel-id", "k1", "--RemoteProcessProxy.response-address",
                     "10.0.0.1:8877", "--RemoteProcessProxy.public-key", "KEY",
                     "--SandboxKernel.policy=strict", "--", "--SandboxKernel.isolation=kernel"], environ={})
    assert (ns.kernel_id, ns.response_address, ns.public_key) == ("k1", "10.0.0.1:8877", "KEY")
    assert ns.kernel_options == ["--SandboxKernel.policy=strict", "--SandboxKernel.isolation=kernel"]
    ns = parse_args(["--SandboxKernel.policy=strict"],
                    environ={"KERNEL_ID": "k2", "RESPONSE_ADDRESS": "a:1", "PUBLIC_KEY": "P",
                             "EG_PORT_RANGE": "40000..41000", "KERNEL_CLASS_NAME": "evil.Kernel"})
    assert (ns.kernel_id, ns.response_address, ns.port_range, ns.kernel_class_name) == \
        ("k2", "a:1", "40000..41000", None)
    for bad in (["--kernel-id", "k", "--response-address", "a:1", "--public-key", "P", "-c", "x"],
                ["--kernel-id", "k", "--response-address", "a:1"],
                ["--response-address", "a:1", "--public-key", "P"]):
        with pytest.raises(SystemExit):
            parse_args(bad, environ={})
    assert port_range("0..0") == (0, 0) and port_range("40000..41000") == (40000, 41000)
    for bad in ("40000..40010", "5..x", "41000..40000"):
        with pytest.raises(LauncherError):
            port_range(bad, environ={})
