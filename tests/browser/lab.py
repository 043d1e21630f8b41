"""A JupyterLab server on loopback for one test module, with nothing of the user's in reach.

Its root, HOME and every Jupyter/IPython directory are fresh temporary folders; kernelspecs and lab
extensions come from the virtualenv's prefix (scripts/test.sh installs `sandboxed-python` there with
--sys-prefix; the plotly package installs its lab extension there).
"""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

# User settings the test needs: every cell stays in the DOM (no virtual scrolling), no news prompt,
# no autosave writing into the root while the test runs.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                         "checkForUpdates": False},
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterLab:
    def __init__(self, base: Path):
        self.base = base
        self.root = base / "root"
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.log_path = base / "jupyterlab.log"
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("JUPYTER", "IPYTHON")) and k != "PYTHONSTARTUP"}
        dirs = {"HOME": "home", "JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data",
                "JUPYTER_RUNTIME_DIR": "runtime", "JUPYTERLAB_SETTINGS_DIR": "settings",
                "JUPYTERLAB_WORKSPACES_DIR": "workspaces", "IPYTHONDIR": "ipython"}
        for name, sub in dirs.items():
            path = self.base / sub
            path.mkdir(parents=True, exist_ok=True)
            env[name] = str(path)
        env["JUPYTER_PLATFORM_DIRS"] = "1"
        return env

    def _write_settings(self) -> None:
        for name, value in LAB_SETTINGS.items():
            path = self.base / "settings" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(value))

    def start(self, timeout: float = 180) -> "JupyterLab":
        self.root.mkdir(parents=True, exist_ok=True)
        env = self.environment()
        self._write_settings()
        command = [
            sys.executable, "-m", "jupyterlab",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
            "--ServerApp.open_browser=False", "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly", "--ServerApp.terminals_enabled=False",
        ]
        if os.geteuid() == 0:   # CI and these machines run as root
            command.append("--ServerApp.allow_root=True")
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, env=env, cwd=self.root, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                self.api("GET", "/api/status")
                return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.3)
        raise RuntimeError(f"JupyterLab did not answer within {timeout} s:\n{self.log_tail()}")

    def notebook_url(self, name: str) -> str:
        """`name`.ipynb in a workspace of its own, so one session's tabs never open in another's."""
        return f"{self.url}/lab/workspaces/{name}/tree/{name}.ipynb?token={self.token}"

    def api(self, method: str, path: str):
        request = urllib.request.Request(self.url + path, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def kernelspecs(self) -> dict:
        return self.api("GET", "/api/kernelspecs")["kernelspecs"]

    def lab_extensions(self) -> list[str]:
        """Names of the prebuilt lab extensions the server hands the page (from its page config)."""
        request = urllib.request.Request(self.url + "/lab", headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            page = response.read().decode("utf-8", "replace")
        start = page.index('id="jupyter-config-data"')
        start = page.index(">", start) + 1
        config = json.loads(page[start:page.index("</script>", start)])
        return [ext["name"] for ext in config.get("federated_extensions", [])]

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:   # kernels first, so none outlives the server
            for kernel in self.api("GET", "/api/kernels"):
                self.api("DELETE", f"/api/kernels/{kernel['id']}")
        except (urllib.error.URLError, OSError, ValueError):
            pass
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
