"""Must-block: network access, directly or through granted libraries, against a loopback listener the
test starts. The listener must receive nothing and the cell must record a network denial."""
from __future__ import annotations

import socket
import threading

import pytest


class Listener:
    """A loopback TCP listener that records every connection (and the first bytes sent)."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(0.5)
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                self.received.append(data or b"<connected>")
                try:
                    conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/csv\r\n\r\na,b\n1,2\n")
                except OSError:
                    pass

    def close(self):
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def listener():
    lst = Listener()
    yield lst
    lst.close()


def test_listener_works_from_the_host(listener):
    """The fixture itself can observe a connection (so the tests below can fail)."""
    with socket.create_connection(("127.0.0.1", listener.port), timeout=2) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        s.recv(100)
    import time
    for _ in range(50):
        if listener.received:
            break
        time.sleep(0.02)
    assert listener.received


NETWORK_ATTACKS = [
    "import pandas as pd\nx = pd.read_csv(URL + '/x.csv')",
    "import pandas as pd\nx = pd.read_csv(URL + '/x.csv', storage_options={'User-Agent': 'x'})",
    "import pandas as pd\nx = pd.read_json(URL + '/x.json')",
    "import pandas as pd\nx = pd.read_table(URL + '/x.tsv')",
    "import pandas as pd\nx = pd.read_fwf(URL + '/x.txt')",
    "import pandas as pd\nx = pd.read_html(URL + '/x.html')",
    "import pandas as pd\nx = pd.read_xml(URL + '/x.xml')",
    "import pandas as pd\nx = pd.read_excel(URL + '/x.xlsx')",
    "import pandas as pd\nx = pd.read_csv(URL.replace('http', 'ftp') + '/x.csv')",
    "import numpy as np\nx = np.loadtxt(URL + '/x.txt', delimiter=',', skiprows=1)",
    "import numpy as np\nx = np.genfromtxt(URL + '/x.txt', delimiter=',')",
    "import numpy as np\nx = np.load(URL + '/x.npy')",
    "import numpy as np\nx = np.lib.npyio.DataSource().open(URL + '/x.txt')",
    "import scipy.io\nx = scipy.io.loadmat(URL + '/x.mat')",
    "import pandas as pd\nx = pd.io.common.urlopen(URL + '/x')",
    "import pandas as pd\nx = pd.io.common.get_handle(URL + '/x', 'r')",
    "import plotly.io as pio\nx = pio.read_json(URL + '/fig.json')",
]


@pytest.mark.parametrize("src", NETWORK_ATTACKS, ids=[a.split("\n")[1][:50] for a in NETWORK_ATTACKS])
def test_network_through_granted_library_is_refused(sandbox, listener, src):
    r = sandbox.run(f"URL = 'http://127.0.0.1:{listener.port}'\n" + src + "\nprint('after', x)")
    assert not r.ok, r
    assert "after" not in r.stdout
    assert listener.received == [], "the listener received a connection"
    assert r.denials or r.error_name in ("ImportError", "ModuleNotFoundError", "ValueError", "OSError",
                                         "FileNotFoundError"), r
    assert "x" not in sandbox.ns


def test_read_csv_url_records_a_network_denial(sandbox, listener):
    r = sandbox.run(f"import pandas as pd\ndf = pd.read_csv('http://127.0.0.1:{listener.port}/x.csv')")
    assert not r.ok
    assert r.denied("network", line=2), r
    assert listener.received == []


@pytest.mark.parametrize("src", ["import socket", "import urllib.request", "import http.client",
                                 "import ssl", "import select", "import asyncio"
                                 ])
def test_network_modules_are_not_reachable(run, src):
    r = run(src)
    assert not r.ok and r.denials, r


def test_network_denied_for_strict_too(strict, listener):
    r = strict.run("import json\nx = json.loads('1')\nimport urllib.request\n")
    assert not r.ok and r.denied("import", line=3), r
    assert listener.received == []


def test_network_not_reachable_after_cell_by_library_callbacks(sandbox, listener):
    """A lazy object (a generator of URLs) handed to a library after the cell ended still cannot connect."""
    r = sandbox.run("import pandas as pd\n"
                    f"urls = (f'http://127.0.0.1:{listener.port}/{{i}}.csv' for i in range(2))\n")
    assert r.ok
    r = sandbox.run("for u in urls:\n    try:\n        pd.read_csv(u)\n    except Exception as e:\n        print(type(e).__name__)\n")
    assert listener.received == []
