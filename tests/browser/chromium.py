"""Debian's Chromium, headless, driven by Playwright, with every network request on the record.

Every host but loopback resolves to the sink (tests/browser/sink.py), so a request to a remote host
is recorded twice: by Playwright as the page makes it, and by the sink as it arrives. Navigations to a
remote host (a form, a meta refresh, a clicked link) are recorded and then aborted, so the notebook
page stays where it is for the rest of the test.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

CHROMIUM = os.environ.get("SANDBOX_TEST_CHROMIUM", "/usr/bin/chromium")
# Debian's /usr/bin/chromium is a shell wrapper that exports Google API keys and enables remote
# extensions: the browser itself then calls Google's sign-in, autofill and update services, which the
# sink would record as leaks. The binary it wraps runs with only the flags given here.
DEBIAN_BINARY = "/usr/lib/chromium/chromium"
# Flags that work on a closed network as root: no sandbox (root), no GPU, no background connections.
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# The browser's own services (sign-in, Google APIs, component updates) would call Google even on a
# blank page, and the sink would record that as a leak: they are pointed at a closed loopback port.
OWN_SERVICE_FLAGS = ("--gaia-url={dead}", "--google-apis-url={dead}", "--lso-url={dead}",
                     "--component-updater=url-source={dead}", "--autofill-server-url={dead}/",
                     "--disable-domain-reliability",
                     "--disable-client-side-phishing-detection")
# Everything a payload sets on window when its script ran.
READ_FLAGS = "() => Object.keys(window).filter(k => k.startsWith('__pwned_')).map(k => k.slice(8))"
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


def missing() -> str | None:
    """Why the browser test cannot run here, or None."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        found = shutil.which("chromium")
        return (f"Chromium is not installed at {CHROMIUM} (apt-get install chromium; .ci/run does)"
                + (f"; found {found}, set SANDBOX_TEST_CHROMIUM to use it" if found else ""))
    for module, package in (("playwright", "playwright"), ("jupyterlab", "jupyterlab")):
        if importlib.util.find_spec(module) is None:
            return f"the Python package {package} is not installed (pip install -e '.[test]')"
    return None


def browser_binary() -> str:
    if CHROMIUM == "/usr/bin/chromium" and os.access(DEBIAN_BINARY, os.X_OK):
        return DEBIAN_BINARY
    return CHROMIUM


def is_local(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "chrome-error", "javascript"):
        return True
    return (parts.hostname or "") in LOCAL_HOSTS or parts.netloc in LOCAL_HOSTS


@dataclass
class NetworkLog:
    requests: list = field(default_factory=list)     # every URL any page or frame asked for
    navigations: list = field(default_factory=list)  # remote navigations, aborted
    dialogs: list = field(default_factory=list)      # alert/confirm/prompt messages
    popups: list = field(default_factory=list)       # URLs of pages opened besides the notebook
    popup_flags: dict = field(default_factory=dict)  # flags read in popups before they were closed
    console: list = field(default_factory=list)      # console errors, for the failure message

    def remote_requests(self) -> list[str]:
        return [url for url in self.requests if not is_local(url)]


class Chromium:
    def __init__(self, playwright, profile_dir: str, sink_port: int, home: str):
        """`playwright`: the started sync Playwright driver (one per thread; it may launch several
        browsers)."""
        self._playwright = playwright
        self.profile_dir = profile_dir
        self.home = home
        self.sink_port = sink_port
        self.log = NetworkLog()
        self._closed_port = None
        self.context = None
        self.page = None

    def start(self) -> "Chromium":
        rules = f"MAP * 127.0.0.1:{self.sink_port}, EXCLUDE 127.0.0.1, EXCLUDE localhost"
        self._closed_port = socket.socket()          # bound, never listening: connections are refused
        self._closed_port.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{self._closed_port.getsockname()[1]}"
        own_services = [flag.format(dead=dead) for flag in OWN_SERVICE_FLAGS]
        env = {**os.environ, "HOME": self.home, "XDG_CONFIG_HOME": os.path.join(self.home, ".config"),
               "XDG_CACHE_HOME": os.path.join(self.home, ".cache")}
        self.context = self._playwright.chromium.launch_persistent_context(
            self.profile_dir, executable_path=browser_binary(), headless=True, env=env,
            args=CHROMIUM_FLAGS + own_services + [f"--host-resolver-rules={rules}"],
            viewport={"width": 1280, "height": 1000}, accept_downloads=False)
        self.context.on("request", lambda request: self.log.requests.append(request.url))
        self.context.on("page", self._watch_page)
        self.context.route(lambda url: not is_local(url), self._remote_route)
        self.page = self.context.pages[0] if self.context.pages else self.context.new_page()
        self._watch_page(self.page, popup=False)
        return self

    def _watch_page(self, page, popup: bool = True) -> None:
        if popup:
            self.log.popups.append(page.url)
            page.on("framenavigated", lambda frame: self.log.popups.append(frame.url))
        page.on("dialog", self._dialog)
        page.on("console", lambda msg: msg.type == "error" and self.log.console.append(msg.text))

    def _dialog(self, dialog) -> None:
        self.log.dialogs.append(f"{dialog.type}: {dialog.message}")
        if dialog.type == "beforeunload":
            dialog.accept()     # let a navigation go on to the route, which records and aborts it
        else:
            dialog.dismiss()

    def _remote_route(self, route) -> None:
        request = route.request
        if request.is_navigation_request():
            self.log.navigations.append(request.url)
            route.abort("aborted")
        else:
            route.continue_()

    def flags(self) -> dict[str, list[str]]:
        """The __pwned_ flags set in every page and frame, by URL (closed popups included)."""
        found = {url: list(names) for url, names in self.log.popup_flags.items()}
        for page in self.context.pages:
            for url, names in _frame_flags(page).items():
                found.setdefault(url, []).extend(names)
        return found

    def close_popups(self) -> None:
        """Reads and closes every page but the notebook: an open popup takes the foreground, and
        JupyterLab's rendering stalls in a background tab."""
        for page in self.context.pages:
            if page is not self.page:
                for url, names in _frame_flags(page).items():
                    self.log.popup_flags.setdefault(f"popup {url}", []).extend(names)
                page.close()
        self.page.bring_to_front()

    def stop(self) -> None:
        if self.context is not None:
            self.context.close()
        if self._closed_port is not None:
            self._closed_port.close()


def _frame_flags(page) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for frame in page.frames:
        try:
            names = frame.evaluate(READ_FLAGS)
        except Exception:  # noqa: BLE001 - a frame that navigated away has nothing to read
            continue
        if names:
            found.setdefault(frame.url, []).extend(names)
    return found
