"""Enterprise Gateway's kernel launcher protocol, for this kernel.

    python -P -m sandbox_kernel eg-launch --kernel-id ID --response-address IP:PORT --public-key KEY
                                          [--port-range LOW..HIGH] [--ip ADDR] [--SandboxKernel.x=y ...]

Enterprise Gateway (EG) does not run a kernelspec's argv as the kernel: on Kubernetes, Docker, YARN or
remote hosts it starts a *launcher* in the kernel's pod/container/host, which

1. picks the five ZeroMQ ports (inside ``--port-range`` when one is given) and a signing key, and writes
   the connection file;
2. opens a *communication port* on which the gateway later sends, one TCP connection per request, a JSON
   object: ``{"signum": N}`` (a signal for the kernel; 0 asks whether it is still alive: the request is
   refused once the launcher is gone) or ``{"shutdown": 1}`` (the gateway is shutting the kernel down);
3. returns the connection information to the gateway: it connects to ``--response-address`` and sends
   ``base64(JSON {"version": 1, "key": base64(RSA-PKCS#1 v1.5(aes_key)), "conn_info":
   base64(AES-128-ECB(PKCS#7 padded JSON))})`` and closes; the JSON carries the connection file's
   fields plus ``pid``, ``pgid``, ``comm_port`` and ``kernel_id``. ``--public-key`` is the gateway's RSA
   public key (base64 DER, the PEM body). The gateway then replaces ``ip`` with the address it placed
   the kernel at and connects.

EG's own Python launcher (``launch_ipykernel.py``) does this and then runs ipykernel's stock
``IPKernelApp`` in its own process, which is not this kernel (it puts the working directory on
``sys.path``, runs IPython startup files and extensions, takes no options). This launcher does the same
handshake and then starts ``python -P -m sandbox_kernel -f <connection file> <options>`` as a child
process, relays the gateway's signals to it, and exits with it. It never imports a kernel class it is
told about (``--kernel-class-name`` comes from the client's ``KERNEL_CLASS_NAME`` in EG's images) and
starts no Spark or Dask context.

The argument names are EG's (``--kernel-id``, ``--port-range``, ``--response-address``,
``--public-key`` and their deprecated ``--RemoteProcessProxy.*`` spellings); missing ones are taken
from the environment variables EG's Kubernetes and Docker launchers give a kernel container
(``KERNEL_ID``, ``RESPONSE_ADDRESS``, ``PUBLIC_KEY``, ``PORT_RANGE`` or ``EG_PORT_RANGE``), so an image's
command can be just ``python -P -m sandbox_kernel eg-launch <operator options>``. The operator's kernel
options (``--SandboxKernel.policy=strict`` ...) are given on this command line (or after ``--``); no
environment variable, which EG lets clients set (``KERNEL_*``), reaches them.

The encryption needs pycryptodomex: ``pip install "sandbox_kernel[gateway]"``.
"""
from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

LAUNCHER_VERSION = 1          # the payload version EG's response manager decodes
REQUEST_LIMIT = 64 * 1024     # a gateway request is a few bytes; a larger one is dropped
REQUEST_TIMEOUT = 5.0         # seconds a connection on the communication port may take to send its request
SHUTDOWN_GRACE = 10.0         # after the gateway's shutdown: seconds the kernel has to end by itself
TERM_GRACE = 5.0              # after SIGTERM: seconds before SIGKILL
PR_SET_PDEATHSIG = 1
_OPTION = re.compile(r"--[A-Za-z_][\w]*\.[A-Za-z_][\w]*(=.*)?$", re.S)

log = logging.getLogger("sandbox_kernel.eg_launch")


class LauncherError(Exception):
    """The launcher cannot start: bad arguments, no free port in the range, no crypto library."""


# -- arguments -----------------------------------------------------------------------------------------


def parse_args(argv: list[str], environ=os.environ) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox_kernel eg-launch", allow_abbrev=False,
        description="Start the sandboxed kernel for Jupyter Enterprise Gateway: return its connection "
                    "information to the gateway (encrypted), then relay the gateway's signal and "
                    "shutdown requests to it. Unrecognised --Class.trait=value options (and everything "
                    "after --) are the kernel's.")
    for name, helptext in (("kernel-id", "the kernel's id (default $KERNEL_ID)"),
                           ("response-address", "IP:PORT of the gateway's response socket (default "
                                                "$RESPONSE_ADDRESS)"),
                           ("public-key", "the gateway's RSA public key, base64 (default $PUBLIC_KEY)"),
                           ("port-range", "LOW..HIGH for the kernel's ports and the communication port, "
                                          "0..0 for any (default $PORT_RANGE or $EG_PORT_RANGE)"),
                           ("spark-context-initialization-mode", "accepted for EG's images; only 'none'"),
                           ("cluster-type", "accepted for EG's images; only 'none'")):
        dest = name.replace("-", "_")
        parser.add_argument(f"--{name}", dest=dest, help=helptext)
        parser.add_argument(f"--RemoteProcessProxy.{name}", dest=f"rpp_{dest}", help=argparse.SUPPRESS)
    parser.add_argument("--kernel-class-name", help="accepted for EG's images and ignored: the kernel is "
                                                    "always sandbox_kernel's")
    parser.add_argument("--ip", default="0.0.0.0",
                        help="address the kernel's ports and the communication port bind to (default "
                             "0.0.0.0: the gateway connects from another pod or host)")
    parser.add_argument("connection_file", nargs="?", help="where to write the connection file (EG's "
                                                           "deprecated positional argument)")
    own, rest = _split_kernel_options(argv)
    ns, unknown = parser.parse_known_args(own)
    bad = [arg for arg in unknown if not _OPTION.match(arg)]
    if bad:
        parser.error(f"unrecognized arguments: {' '.join(bad)} (kernel options look like "
                     f"--SandboxKernel.policy=NAME)")
    ns.kernel_options = unknown + rest
    for dest, env_names in (("kernel_id", ("KERNEL_ID",)), ("response_address", ("RESPONSE_ADDRESS",)),
                            ("public_key", ("PUBLIC_KEY",)), ("port_range", ("PORT_RANGE", "EG_PORT_RANGE")),
                            ("spark_context_initialization_mode", ()), ("cluster_type", ())):
        value = getattr(ns, dest) or getattr(ns, f"rpp_{dest}")
        for env_name in env_names:
            value = value or environ.get(env_name)
        setattr(ns, dest, value or None)
    if not ns.kernel_id:
        parser.error("--kernel-id (or $KERNEL_ID) is required")
    if ns.response_address and not ns.public_key:
        parser.error("--public-key (or $PUBLIC_KEY) is required to return the connection information")
    return ns


def _split_kernel_options(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1:]
    return list(argv), []


def port_range(text: str | None, environ=os.environ) -> tuple[int, int]:
    """EG's LOW..HIGH; 0..0 (or nothing) means any port. A range must hold at least
    $MIN_PORT_RANGE_SIZE (EG's default 1000) ports, as EG's launcher requires."""
    if not text:
        return 0, 0
    try:
        low, high = (int(part) for part in text.split(".."))
    except ValueError:
        raise LauncherError(f"port range '{text}' is not LOW..HIGH") from None
    minimum = int(environ.get("MIN_PORT_RANGE_SIZE", environ.get("EG_MIN_PORT_RANGE_SIZE", "1000")))
    if (low, high) != (0, 0) and not (0 < low < high <= 65535 and high - low >= minimum):
        raise LauncherError(f"port range '{text}' must span at least {minimum} ports within 1..65535")
    return low, high


# -- ports, connection file, payload -------------------------------------------------------------------


def bind_socket(ip: str, low: int, high: int, attempts: int = 50) -> socket.socket:
    """A TCP socket bound to a free port of the range (any port for 0..0)."""
    for _ in range(attempts if high else 1):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((ip, random.randint(low, high) if high else 0))
            return sock
        except OSError:
            sock.close()
    raise LauncherError(f"no free port in {low}..{high} after {attempts} attempts")


def write_connection_file(path: str, ip: str, low: int, high: int) -> dict:
    from jupyter_client.connect import write_connection_file as jc_write

    held = [bind_socket(ip, low, high) for _ in range(5)]
    ports = [s.getsockname()[1] for s in held]
    for s in held:
        s.close()
    jc_write(fname=path, ip=ip, key=str(uuid.uuid4()).encode(), transport="tcp",
             shell_port=ports[0], iopub_port=ports[1], stdin_port=ports[2], hb_port=ports[3],
             control_port=ports[4])
    os.chmod(path, 0o600)
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def encrypt_payload(connection_info: dict, public_key: str) -> bytes:
    """The version-1 payload EG's ResponseManager decodes."""
    try:
        from Cryptodome.Cipher import AES, PKCS1_v1_5
        from Cryptodome.PublicKey import RSA
        from Cryptodome.Random import get_random_bytes
        from Cryptodome.Util.Padding import pad
    except ImportError as exc:
        raise LauncherError("the Enterprise Gateway launcher needs pycryptodomex: "
                            f"pip install 'sandbox_kernel[gateway]' ({exc})") from None
    aes_key = get_random_bytes(16)
    # ECB is what EG's receiver decrypts with (one message per key, its protocol's choice).
    sealed = AES.new(aes_key, AES.MODE_ECB).encrypt(pad(json.dumps(connection_info).encode(), 16))
    try:
        rsa_key = RSA.import_key(base64.b64decode(public_key.encode()))
    except (ValueError, IndexError, TypeError) as exc:
        raise LauncherError(f"--public-key is not a base64 RSA public key ({exc})") from None
    wrapped = PKCS1_v1_5.new(rsa_key).encrypt(aes_key)
    body = {"version": LAUNCHER_VERSION, "key": base64.b64encode(wrapped).decode(),
            "conn_info": base64.b64encode(sealed).decode()}
    return base64.b64encode(json.dumps(body).encode())


def send_connection_info(address: str, payload: bytes, timeout: float = 30.0) -> None:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise LauncherError(f"response address '{address}' is not IP:PORT")
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)


# -- the kernel process --------------------------------------------------------------------------------


def kernel_command(connection_file: str, options: list[str]) -> list[str]:
    from .install import kernel_argv

    return [connection_file if arg == "{connection_file}" else arg
            for arg in kernel_argv(sys.executable, options)]


def _die_with_launcher():  # runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # noqa: BLE001 - best effort: the launcher also ends the kernel when it exits
        pass


def kernel_environment(environ=os.environ) -> dict:
    """The launcher's environment minus the handshake's values, with the kernelspec's own env."""
    env = {k: v for k, v in environ.items() if k not in ("PUBLIC_KEY", "RESPONSE_ADDRESS", "EG_PUBLIC_KEY",
                                                          "EG_RESPONSE_ADDRESS")}
    env["PLOTLY_RENDERER"] = "plotly_mimetype"     # what the kernelspec sets
    env["JPY_PARENT_PID"] = str(os.getpid())      # ipykernel ends itself if the launcher goes away
    return env


class Launcher:
    def __init__(self, ns: argparse.Namespace):
        self.ns = ns
        self.kernel: subprocess.Popen | None = None
        self.comm: socket.socket | None = None
        self.tmpdir: str | None = None
        self.connection_file = ""
        self.stopping = False
        self.ended_by_gateway = False   # a shutdown or a terminating signal from the gateway (or SIGTERM)

    def prepare(self) -> dict:
        low, high = port_range(self.ns.port_range)
        path = self.ns.connection_file
        if not path or not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            # Never the working directory: cells may read and write there.
            self.tmpdir = tempfile.mkdtemp(prefix=f"kernel-{self.ns.kernel_id}-")
            path = os.path.join(self.tmpdir, "connection.json")
        self.connection_file = path
        info = write_connection_file(path, self.ns.ip, low, high)
        if self.ns.response_address:
            self.comm = bind_socket(self.ns.ip, low, high)
            self.comm.listen(8)
            info.update(pid=os.getpid(), pgid=os.getpgid(0), comm_port=self.comm.getsockname()[1],
                        kernel_id=self.ns.kernel_id)
        return info

    def start_kernel(self) -> None:
        command = kernel_command(self.connection_file, self.ns.kernel_options)
        log.info("starting the kernel: %s", " ".join(command))
        self.kernel = subprocess.Popen(command, env=kernel_environment(), preexec_fn=_die_with_launcher,
                                       close_fds=True)

    def handle(self, request: dict) -> None:
        signum = request.get("signum")
        if signum is not None:
            signum = int(signum)
            if signum:
                log.info("gateway: signal %d for the kernel", signum)
                if signum not in (signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
                    self.ended_by_gateway = True
                if self.kernel.poll() is None:
                    self.kernel.send_signal(signum)
        if request.get("shutdown"):
            log.info("gateway: shutdown; closing the communication port")
            self.stopping = self.ended_by_gateway = True

    def _read_request(self, conn: socket.socket) -> dict | None:
        conn.settimeout(REQUEST_TIMEOUT)
        data = b""
        deadline = time.monotonic() + REQUEST_TIMEOUT
        while len(data) <= REQUEST_LIMIT and time.monotonic() < deadline:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        else:
            return None
        try:
            request = json.loads(data.decode("utf-8"))
        except ValueError:
            return None
        return request if isinstance(request, dict) else None

    def serve(self) -> int:
        """Relay requests until the kernel ends (or the gateway's shutdown), then end it."""
        while self.kernel.poll() is None and not self.stopping:
            if self.comm is None:
                time.sleep(0.2)
                continue
            ready, _, _ = select.select([self.comm], [], [], 0.2)
            if not ready:
                continue
            try:
                conn, _ = self.comm.accept()
            except OSError:
                continue
            with conn:
                try:
                    request = self._read_request(conn)
                except OSError:
                    request = None
            if request is None:
                log.warning("communication port: a request that is not a JSON object was ignored")
                continue
            try:
                self.handle(request)
            except (TypeError, ValueError, OSError) as exc:
                log.warning("communication port: request %r failed: %s", request, exc)
        self.close_comm()
        return self.finish(SHUTDOWN_GRACE if self.stopping else 0)

    def close_comm(self) -> None:
        if self.comm is not None:
            self.comm.close()
            self.comm = None

    def finish(self, grace: float) -> int:
        """Wait up to `grace` seconds for the kernel to end, then SIGTERM, then SIGKILL."""
        kernel = self.kernel
        if kernel is not None:
            for sig, wait in ((None, grace), (signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, 30)):
                if sig is not None and kernel.poll() is None:
                    log.info("the kernel did not end; sending %s", signal.Signals(sig).name)
                    kernel.send_signal(sig)
                try:
                    kernel.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.cleanup()
        code = kernel.returncode if kernel is not None else 1
        log.info("the kernel ended (exit status %s)%s", code, " as the gateway asked" if self.ended_by_gateway else "")
        if self.ended_by_gateway:
            return 0     # an orderly end: a pod that ends this way is Completed, not Failed
        return code if code is not None and code >= 0 else 128 - (code or 0)

    def cleanup(self) -> None:
        self.close_comm()
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
        elif self.connection_file:
            try:
                os.unlink(self.connection_file)
            except OSError:
                pass

    def on_terminate(self, signum, frame) -> None:
        """SIGTERM/SIGHUP to the launcher (a pod being deleted: it is often PID 1, which gets no default
        handler): pass it on and end with the kernel."""
        if self.kernel is not None and self.kernel.poll() is None:
            self.kernel.send_signal(signal.SIGTERM)
        self.stopping = self.ended_by_gateway = True


def main(argv: list[str]) -> int:
    level = os.environ.get("LOG_LEVEL", os.environ.get("EG_LOG_LEVEL", "INFO"))
    logging.basicConfig(format="[%(levelname)1.1s %(asctime)s %(name)s] %(message)s",
                        level=int(level) if level.isdigit() else level.upper())
    ns = parse_args(argv)
    if ns.kernel_class_name:
        log.warning("--kernel-class-name %s ignored: this launcher starts only the sandboxed kernel",
                    ns.kernel_class_name)
    for option in ("spark_context_initialization_mode", "cluster_type"):
        value = getattr(ns, option)
        if value and value.lower() != "none":
            log.warning("--%s %s ignored: the sandboxed kernel starts no cluster context",
                        option.replace("_", "-"), value)
    launcher = Launcher(ns)
    # The kernel shares the launcher's process group (EG's fallback signals the group it was told);
    # a SIGINT to that group is the kernel's to handle, not the launcher's.
    signal.signal(signal.SIGINT, lambda *_: None)
    signal.signal(signal.SIGTERM, launcher.on_terminate)
    signal.signal(signal.SIGHUP, launcher.on_terminate)
    try:
        info = launcher.prepare()
        payload = encrypt_payload(info, ns.public_key) if ns.response_address else None
        launcher.start_kernel()
        if payload is not None:
            send_connection_info(ns.response_address, payload)
            log.info("connection information returned to %s (communication port %s)",
                     ns.response_address, info["comm_port"])
        else:
            log.warning("no --response-address: the gateway must read %s itself", launcher.connection_file)
    except (LauncherError, OSError) as exc:
        log.error("%s", exc)
        if launcher.kernel is not None:
            launcher.kernel.kill()
            launcher.kernel.wait()
        launcher.cleanup()
        return 1
    return launcher.serve()
