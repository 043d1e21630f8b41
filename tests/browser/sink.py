"""A loopback TCP server that stands in for every remote host.

Chromium maps every host but loopback here (--host-resolver-rules), so a fetch to evil.example or a
CDN arrives at this server and is recorded instead of being lost to the closed network. Plain HTTP is
recorded by its request line and Host header; TLS by the server name in the ClientHello.
"""
from __future__ import annotations

import socket
import socketserver
import threading
from dataclasses import dataclass


@dataclass(frozen=True)
class Hit:
    """One connection the browser opened to a remote host."""

    host: str       # Host header (HTTP) or server name (TLS), lower case; "" when unknown
    request: str    # "GET /path HTTP/1.1", or "TLS ClientHello", or the first bytes seen

    def __str__(self) -> str:
        return f"{self.host or '?'}: {self.request}"


def tls_server_name(data: bytes) -> str:
    """The SNI host name of a TLS ClientHello, or ""."""
    try:
        if data[0] != 0x16 or data[5] != 0x01:
            return ""
        i = 5 + 4 + 2 + 32                      # record header, handshake header, version, random
        i += 1 + data[i]                        # session id
        i += 2 + int.from_bytes(data[i:i + 2], "big")   # cipher suites
        i += 1 + data[i]                        # compression methods
        end = i + 2 + int.from_bytes(data[i:i + 2], "big")
        i += 2
        while i + 4 <= end:
            kind = int.from_bytes(data[i:i + 2], "big")
            size = int.from_bytes(data[i + 2:i + 4], "big")
            if kind == 0:                       # server_name: list length, name type, name length
                length = int.from_bytes(data[i + 7:i + 9], "big")
                return data[i + 9:i + 9 + length].decode("ascii", "replace").lower()
            i += 4 + size
    except IndexError:
        pass
    return ""


def _read_head(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        try:
            chunk = conn.recv(4096)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
        if data[:1] == b"\x16" and len(data) >= 5 + int.from_bytes(data[3:5], "big"):
            break                               # a whole TLS record: enough for the server name
    return data


def parse_hit(data: bytes) -> Hit:
    if data[:1] == b"\x16":
        return Hit(tls_server_name(data), "TLS ClientHello")
    text = data.decode("latin-1")
    lines = text.split("\r\n")
    host = ""
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "host":
            host = value.strip().lower()
            break
    return Hit(host, lines[0][:500] if lines[0] else repr(data[:80]))


class Sink:
    """Records every connection; answers HTTP with an empty 404 and drops anything else."""

    def __init__(self):
        self.hits: list[Hit] = []
        self._lock = threading.Lock()
        sink = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                self.request.settimeout(5)
                data = _read_head(self.request)
                if not data:
                    return
                hit = parse_hit(data)
                with sink._lock:
                    sink.hits.append(hit)
                if not data.startswith(b"\x16"):
                    try:
                        self.request.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n"
                                             b"Access-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n")
                    except OSError:
                        pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="browser-sink", daemon=True)

    def start(self) -> "Sink":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def snapshot(self) -> list[Hit]:
        with self._lock:
            return list(self.hits)
