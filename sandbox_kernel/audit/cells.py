"""The canaries the audit runs as cells through the real engine (or worker), under the policy audited.

Each is a real attempt whose effect the host can see: a marker file a started process would create, a
tag the loopback listener would receive, a file outside the working directory that would change, the
secret a read would print, the word REACHED a cell prints the moment a gadget route hands it what the
gates must never hand out (and then it tries to use it). A canary holds when no effect is seen and the
cell ended with an error (a refusal); a cell that completed is a breach unless the canary's route is
one the sandbox closes silently (numpy's raw protocols read as absent), which the cell then says.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from ..policy import Limits
from .browser import active_content
from .outcome import BREACHED, ERROR, HELD, NOT_APPLICABLE, Outcome

REACHED = "REACHED"


@dataclass(frozen=True)
class Canary:
    id: str
    group: str
    title: str
    source: Callable            # (scene) -> cell text
    judge: Callable             # (outcome, scene, context) -> (verdict, detail)
    limits: Callable | None = None   # (the policy's limits) -> the cell's limits


def _effect(out: Outcome, scene, evidence: list[str]) -> tuple[str, str]:
    """The common judgement of an attempt: evidence is a breach; so is a cell nothing stopped."""
    if REACHED in out.stdout:
        evidence = ["the route handed out what the gates must refuse"] + evidence
    if scene.token in out.everything():
        evidence = ["the secret outside the working directory was read"] + evidence
    if evidence:
        return BREACHED, "; ".join(evidence)
    if out.ok:
        return BREACHED, "the cell completed: nothing refused the attempt"
    return HELD, out.refusal()


def _marker_judge(canary_id, what="a process ran"):
    def judge(out, scene, context):
        found = [f"{what} (its marker file was created)"] if scene.exists(scene.marker(canary_id)) else []
        return _effect(out, scene, found)
    return judge


def _network_judge(tag):
    def judge(out, scene, context):
        if context["policy"].network:
            return NOT_APPLICABLE, "the policy allows network"
        found = [f"the loopback listener received {tag!r}"] if scene.listener.saw(tag) else []
        return _effect(out, scene, found)
    return judge


def _read_judge(out, scene, context):
    return _effect(out, scene, [])


def _write_judge(canary_id, new=False):
    def judge(out, scene, context):
        if new:
            changed = "a file was created outside" if scene.exists(scene.marker(canary_id)) else None
        else:
            changed = scene.target_changed(canary_id)
        return _effect(out, scene, [changed] if changed else [])
    return judge


def _signal_judge(out, scene, context):
    caught = scene.victim.signals()
    return _effect(out, scene, [f"the victim process caught {caught}"] if caught else [])


def _silent_judge(out, scene, context):
    """Routes the sandbox may close silently (numpy reads the protocol as absent): the cell says which."""
    if REACHED in out.stdout or scene.token in out.everything():
        return _effect(out, scene, [])
    if out.ok and "CLOSED" in out.stdout:
        return HELD, "numpy saw no raw protocol (the route reads as absent)"
    if out.ok:
        return BREACHED, "the cell completed without showing the route closed"
    return HELD, out.refusal()


def _cmd(scene, canary_id) -> str:
    """A command line that creates the canary's marker (what a started process would do)."""
    import shlex

    code = f"open({scene.marker(canary_id)!r}, 'x').close()"
    return f"{shlex.quote(scene.python)} -I -S -c {shlex.quote(code)}"


def _argv(scene, canary_id) -> list[str]:
    return [scene.python, "-I", "-S", "-c", f"open({scene.marker(canary_id)!r}, 'x').close()"]


def _os_effect(scene, canary_id, os_name="osm") -> str:
    """Cell text that uses an os module it reached to create the canary's marker."""
    return f"{os_name}.close({os_name}.open({scene.marker(canary_id)!r}, {os_name}.O_CREAT | {os_name}.O_WRONLY))\n"


def _builtins_effect(scene, canary_id) -> str:
    """Cell text that imports os through the real builtins of the globals `glb` it reached."""
    return ("b = glb['__builtins__']\nosm = (b['__import__'] if type(b) is dict else b.__import__)('os')\n"
            + _os_effect(scene, canary_id))


def _indent(text: str) -> str:
    return "".join("    " + line + "\n" for line in text.splitlines())


def _process(canary_id, title, make):
    return Canary(canary_id, "process", title, make, _marker_judge(canary_id))


def _gadget(canary_id, title, make, group="gadget"):
    return Canary(canary_id, group, title, make, _marker_judge(canary_id, "the os module it reached was used"))


# -- start a process ------------------------------------------------------------------------------------
PROCESS = [
    _process("subprocess", "subprocess.run",
             lambda s: f"import subprocess\nsubprocess.run({_argv(s, 'subprocess')!r})\n"),
    _process("os-system", "os.system",
             lambda s: f"import os\nos.system({_cmd(s, 'os-system')!r})\n"),
    _process("dunder-import", "__import__('os').posix_spawn",
             lambda s: f"osm = __import__('o' + 's')\nosm.posix_spawn({s.python!r}, {_argv(s, 'dunder-import')!r}, {{}})\n"),
]

# -- the loopback listener --------------------------------------------------------------------------------
NETWORK = [
    Canary("socket", "network", "socket.create_connection to loopback",
           lambda s: f"import socket\nsocket.create_connection(('127.0.0.1', {s.listener.port}), 2)"
                     f".sendall(b'AUDIT-socket')\n", _network_judge("AUDIT-socket")),
    Canary("urllib", "network", "urllib.request.urlopen of loopback",
           lambda s: f"import urllib.request\nurllib.request.urlopen('http://127.0.0.1:{s.listener.port}/AUDIT-urllib', "
                     f"timeout=2)\n", _network_judge("AUDIT-urllib")),
    Canary("pandas-url", "network", "pandas.read_csv of a loopback URL",
           lambda s: f"import pandas as pd\npd.read_csv('http://127.0.0.1:{s.listener.port}/AUDIT-pandas.csv')\n",
           _network_judge("AUDIT-pandas")),
]

# -- files outside the working directory --------------------------------------------------------------------
FILES = [
    Canary("read-open", "files", "open() a file outside, read it",
           lambda s: f"print(open({s.secret!r}).read())\n", _read_judge),
    Canary("read-relative", "files", "open() by a relative path that climbs out",
           lambda s: f"print(open('../outside/{s.secret.rsplit('/', 1)[1]}').read())\n",
           _read_judge),
    Canary("read-pandas", "files", "pandas.read_csv of a file outside",
           lambda s: f"import pandas as pd\nprint(pd.read_csv({s.secret!r}).columns.tolist())\n", _read_judge),
    Canary("write-open", "files", "open() a file outside for appending",
           lambda s: f"open({s.target('write-open')!r}, 'a').write('BREACHED')\n", _write_judge("write-open")),
    Canary("create-open", "files", "open() a new file outside for writing",
           lambda s: f"open({s.marker('create-open')!r}, 'w').write('BREACHED')\n", _write_judge("create-open", new=True)),
    Canary("write-pandas", "files", "DataFrame.to_csv over a file outside",
           lambda s: f"import pandas as pd\npd.DataFrame({{'a': [1]}}).to_csv({s.target('write-pandas')!r})\n",
           _write_judge("write-pandas")),
    Canary("write-numpy", "files", "numpy.save to a new file outside",
           lambda s: f"import numpy as np\nnp.save({s.marker('write-numpy') + '.npy'!r}, np.zeros(1))\n",
           lambda out, s, c: _effect(out, s, ["a file was created outside"]
                                     if s.exists(s.marker("write-numpy") + ".npy") else [])),
]

# -- a signal to another process ------------------------------------------------------------------------------
SIGNALS = [
    Canary("signal", "signal", "os.kill of another process",
           lambda s: f"import os, signal\nos.kill({s.victim.pid}, signal.SIGWINCH)\n", _signal_judge),
]

# -- os, sys and the real builtins through known gadget routes -------------------------------------------------
GADGETS = [
    _gadget("subclasses", "().__class__.__base__.__subclasses__() to os._wrap_close",
            lambda s: "wc = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]\n"
                      f"print({REACHED!r})\nosm = wc.__init__.__globals__['sys'].modules['os']\n"
                      + _os_effect(s, "subclasses")),
    _gadget("print-self", "print.__self__ (the builtins module) to __import__",
            lambda s: f"b = print.__self__\nprint({REACHED!r})\nosm = b.__import__('os')\n" + _os_effect(s, "print-self")),
    _gadget("module-attribute", "dataclasses.sys, a granted module's import of sys",
            lambda s: f"import dataclasses\nsy = dataclasses.sys\nprint({REACHED!r})\nosm = sy.modules['os']\n"
                      + _os_effect(s, "module-attribute")),
    _gadget("computed-name", "getattr with a computed dunder name",
            lambda s: f"base = getattr(getattr((), '__cla' + 'ss__'), '__ba' + 'se__')\nprint({REACHED!r})\n"
                      "wc = [c for c in getattr(base, '__subcla' + 'sses__')() if c.__name__ == '_wrap_close'][0]\n"
                      "osm = wc.__init__.__globals__['sys'].modules['os']\n" + _os_effect(s, "computed-name")),
    _gadget("format", "str.format field traversal to __subclasses__",
            lambda s: f"t = '{{0.__class__.__base__.__subclasses__}}'.format(())\nprint({REACHED!r}, t[:20])\n"),
    _gadget("format-map", "str.format_map field traversal to a function's __globals__",
            lambda s: "import json\n"
                      f"t = '{{f.__globals__[codecs]}}'.format_map({{'f': json.dumps}})\nprint({REACHED!r}, t[:20])\n"),
    _gadget("styler-env", "pandas Styler.env (jinja2) getattr to read_csv.__globals__",
            lambda s: "import pandas as pd\nenv = pd.DataFrame({'a': [1]}).style.env\n"
                      f"g = env.getattr(pd.read_csv, '__globals__')\nprint({REACHED!r})\n"
                      "osm = g['sys'].modules['os']\n" + _os_effect(s, "styler-env")),
    Canary("numpy-interface", "gadget", "numpy raw memory: __array_interface__ planted in a function's __dict__",
           lambda s: "import functools, math, numpy as np\nclass W:\n    pass\nw = W()\n"
                     "w.__dict__['__array_interface__'] = {'shape': (1,), 'typestr': '<u8', "
                     "'data': (id(math.tau) + 16, False), 'version': 3}\n"
                     "def f():\n    pass\nfunctools.update_wrapper(f, w)\na = np.asarray(f)\n"
                     f"print({REACHED!r} if a.dtype == np.uint64 else 'CLOSED')\n", _silent_judge),
    Canary("numpy-object-buffer", "gadget", "numpy raw memory: an object array laid over bytes",
           lambda s: "import numpy as np\nbuf = bytearray(8)\narr = np.ndarray((1,), dtype=object, buffer=buf)\n"
                     f"print({REACHED!r})\n", _silent_judge),
]

# -- frames -----------------------------------------------------------------------------------------------------
FRAMES = [
    _gadget("generator-frame", "a running generator's gi_frame.f_back chain to the host's globals",
            lambda s: "def g():\n    fr = gen.gi_frame\n    while fr.f_back is not None:\n        fr = fr.f_back\n"
                      "    yield fr.f_globals\ngen = g()\n"
                      f"for glb in gen:\n    print({REACHED!r})\n" + _indent(_builtins_effect(s, "generator-frame")),
            group="frames"),
    _gadget("traceback-frame", "an exception's __traceback__.tb_frame.f_back chain",
            lambda s: "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    fr = e.__traceback__.tb_frame\n"
                      f"print({REACHED!r})\nwhile fr.f_back is not None:\n    fr = fr.f_back\n"
                      "glb = fr.f_globals\n" + _builtins_effect(s, "traceback-frame"),
            group="frames"),
    _gadget("coroutine-frame", "a coroutine's cr_frame",
            lambda s: "async def c():\n    return 1\nco = c()\ntry:\n    fr = co.cr_frame\nfinally:\n    co.close()\n"
                      f"print({REACHED!r})\n", group="frames"),
]


# -- limits: each must fire and be reported --------------------------------------------------------------------
def _limit_judge(expected: tuple[str, ...], word: str):
    def judge(out, scene, context):
        if out.error_name in expected and word in out.error_value.lower():
            reported = any(d.get("kind") == "limit" for d in out.denials)
            return (HELD, out.refusal()) if reported else (BREACHED, f"{out.error_name} was not recorded as a denial")
        if out.worker_loss == "memory" and word == "memory":
            return HELD, "the worker was stopped: out of memory (reported)"
        if out.ok:
            return BREACHED, "the cell completed: the limit did not fire"
        return BREACHED, f"ended otherwise: {out.refusal()}"
    return judge


def _output_judge(out, scene, context):
    cap = context["cell_limits"].output_bytes
    sent = len(out.stdout.encode())
    if out.done.get("truncated") is True and sent <= cap + 1000:
        return HELD, f"output cut at the cap: {sent:,} of 200,000 bytes sent, reported truncated"
    return BREACHED, f"{sent:,} bytes sent (cap {cap:,}), truncated={out.done.get('truncated')!r}"


# Every canary runs under the policy's limits tightened to these (a canary must not wait a minute).
AUDIT_LIMITS = Limits(ticks=20_000_000, timeout=15.0, memory_mb=2048, output_bytes=1_000_000)


def _tight(**changes):
    """The audit's limits with one tightened further, or turned off (None) so that another one fires."""
    def limits(policy_limits: Limits) -> Limits:
        base = policy_limits.tighten(AUDIT_LIMITS)
        return dataclasses.replace(base, **{k: v if v is None or getattr(base, k) is None else min(v, getattr(base, k))
                                           for k, v in changes.items()})
    return limits


LIMITS = [
    Canary("ticks", "limits", "an endless loop against the tick limit",
           lambda s: "while True:\n    pass\n", _limit_judge(("TickLimitExceeded",), "tick"),
           _tight(ticks=100_000)),
    Canary("ticks-swallowed", "limits", "a tick limit caught by a bare except, in a loop",
           lambda s: "while True:\n    try:\n        while True:\n            pass\n    except:\n"
                     "        pass\n", _limit_judge(("TickLimitExceeded",), "tick"), _tight(ticks=200_000)),
    Canary("time", "limits", "an endless loop against the time limit",
           lambda s: "while True:\n    pass\n", _limit_judge(("TimeLimitExceeded",), "time"),
           _tight(ticks=None, timeout=0.5)),
    Canary("memory", "limits", "10 MB strings kept until the memory limit",
           lambda s: "chunks = []\nwhile True:\n    chunks.append('a' * 10_000_000)\n",
           _limit_judge(("MemoryLimitExceeded", "MemoryError"), "memory"), _tight(memory_mb=256, timeout=30.0)),
    Canary("output", "limits", "200 kB printed against the output limit",
           lambda s: "for i in range(200):\n    print('x' * 999)\n", _output_judge, _tight(output_bytes=10_000)),
]


# -- script for the browser: the kernel's output filter must rebuild it away -----------------------------------
def _browser_judge(out, scene, context):
    cell = context["output_filter"].cell(context["cell_limits"].output_bytes)
    published = [p for p in (cell.bundle(data, metadata) for data, metadata in out.bundles) if p is not None]
    if not published:
        if out.error_name == "ImportDenied":
            return HELD, f"the library is not granted ({out.refusal()})"
        return ERROR, f"the payload produced no output to filter ({out.refusal()})"
    problems = [p for data, _ in published for p in active_content(data)]
    if problems:
        return BREACHED, "the filter published " + ", ".join(sorted(set(problems))[:6])
    kinds = sorted({m for data, _ in published for m in data})
    return HELD, "rebuilt without it: " + ", ".join(kinds)


HTML_PAYLOAD = ("<script>alert('AUDIT')</script><img src=x onerror=\"alert(1)\"><a href=\"javascript:alert(1)\">a</a>"
                "<iframe src=\"//evil.example/\"></iframe><div onclick=\"alert(1)\" style=\"position:fixed\">d</div>"
                "<img src=\"https://evil.example/p.png\"><svg><script>alert(2)</script></svg>")
MARKDOWN_PAYLOAD = ("![x]($\" onerror=\"alert(1)//$)\n\n[click](javascript:alert(1))\n\n<script>alert(1)</script>\n\n"
                    "<img src=x onerror=alert(1)>\n\n![r](https://evil.example/x.png)")
EVIL_FIGURE = {"data": [{"type": "scatter", "x": [1], "y": [1], "text": ['<a href="javascript:alert(1)">t</a>'],
                         "hovertemplate": '<a href="https://evil.example">h</a>'}],
               "layout": {"title": {"text": '<a href="javascript:alert(1)">title</a>'},
                          "images": [{"source": "https://evil.example/x.png", "x": 0, "y": 0}]}}

BROWSER = [
    Canary("html", "browser", "_repr_html_ with script, handlers, frames, remote loads",
           lambda s: f"class H:\n    def _repr_html_(self):\n        return {HTML_PAYLOAD!r}\nH()\n", _browser_judge),
    Canary("markdown", "browser", "_repr_markdown_ with math-span handler, javascript: link, raw HTML",
           lambda s: f"class M:\n    def _repr_markdown_(self):\n        return {MARKDOWN_PAYLOAD!r}\nM()\n",
           _browser_judge),
    Canary("mimebundle", "browser", "_repr_mimebundle_ with JavaScript, SVG and LaTeX",
           lambda s: "class J:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n"
                     "        return {'application/javascript': 'alert(1)', "
                     "'image/svg+xml': '<svg onload=\"alert(1)\"/>', 'text/latex': '\\\\href{javascript:alert(1)}{x}', "
                     "'text/plain': 'J'}\ndisplay(J())\n", _browser_judge),
    Canary("chart-dict", "browser", "result['chart'] with link markup and a remote image",
           lambda s: f"result = {{'output': 'x', 'chart': {EVIL_FIGURE!r}}}\n", _browser_judge),
    Canary("plotly-figure", "browser", "a plotly Figure with link markup and a remote layout image",
           lambda s: "import plotly.graph_objects as go\n"
                     "fig = go.Figure(go.Scatter(x=[1], y=[1], text=['<a href=\"javascript:alert(1)\">t</a>']))\n"
                     "fig.add_layout_image(source='https://evil.example/x.png', x=0, y=0)\nfig\n", _browser_judge),
]

ENGINE_CANARIES = PROCESS + NETWORK + FILES + SIGNALS + GADGETS + FRAMES + BROWSER + LIMITS

CONTROL = "print(6 * 7)\n"
