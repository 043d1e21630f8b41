"""IPython.display as real notebooks use it (issue 11): the sandbox's own version, sandboxed source run
like a cell (sandbox_kernel/provided/ipython_display.py). What it shows goes through the output filter;
what it cannot show safely (remote pages and images, script) is named on one line of text."""
import base64
import json

PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


def displays(result):
    return [e for e in result.events if e["type"] in ("display", "result")]


def test_every_import_form_reaches_the_same_module(run):
    result = run("from IPython.display import display, HTML\n"
                 "import IPython.display\n"
                 "import IPython.display as ipd\n"
                 "from IPython import display as d2\n"
                 "from IPython.core.display import HTML as H2\n"
                 "import IPython\n"
                 "print(HTML is IPython.display.HTML is ipd.HTML is d2.HTML is H2, display is ipd.display)")
    assert result.ok, result
    assert result.stdout == "True True\n"


def test_star_import_gives_the_public_names(run):
    result = run("from IPython.display import *\nnames = dir()\nprint(sorted(n for n in ['HTML', 'Image', "
                 "'clear_output', 'display', 'Markdown', 'IFrame', 'JSON', '_Bundle', '_read'] if n in names))")
    assert result.ok, result
    assert result.stdout == "['HTML', 'IFrame', 'Image', 'JSON', 'Markdown', 'clear_output', 'display']\n"


def test_html_markdown_json_and_text_classes_display(run):
    result = run("from IPython.display import display, HTML, Markdown, JSON, Pretty, Latex, Math, Code\n"
                 "display(HTML('<b>bold</b>'), Markdown('# title'), JSON({'a': [1, 2]}), Pretty('pretty text'))\n"
                 "display(Latex(r'$\\alpha$'), Math('x^2'), Code('x = 1', language='python'))")
    assert result.ok, result
    data = [e["data"] for e in displays(result)]
    assert data[0]["text/html"] == "<b>bold</b>"
    assert data[1]["text/markdown"] == "# title"
    assert data[2]["application/json"] == {"a": [1, 2]}
    assert data[3] == {"text/plain": "pretty text"}
    assert data[4] == {"text/plain": "$\\alpha$"} and data[5] == {"text/plain": "$$x^2$$"}
    assert data[6] == {"text/plain": "x = 1"}


def test_last_expression_shows_like_ipython(run):
    result = run("from IPython.display import HTML\nHTML('<i>it</i>')")
    assert result.ok, result
    assert result.events[-1]["type"] == "result" and result.events[-1]["data"]["text/html"] == "<i>it</i>"


def test_image_from_bytes_and_from_a_workdir_file(sandbox):
    (sandbox.workdir / "dot.png").write_bytes(PNG)
    result = sandbox.run("from IPython.display import Image, display\n"
                         f"display(Image(data={PNG!r}))\n"
                         "display(Image(filename='dot.png'))\n"
                         "display(Image('dot.png', width=10))")
    assert result.ok, result
    shown = [e["data"] for e in displays(result)]
    assert [base64.b64decode(d["image/png"]) for d in shown] == [PNG, PNG, PNG]


def test_remote_content_is_named_never_loaded(run):
    result = run("from IPython.display import IFrame, Image, YouTubeVideo, display\n"
                 "display(IFrame('https://example.com/app', width='100%', height=600))\n"
                 "display(Image(url='https://example.com/a.png'))\n"
                 "display(YouTubeVideo('abc'))")
    assert result.ok, result
    shown = [e["data"] for e in displays(result)]
    assert [set(d) for d in shown] == [{"text/plain"}] * 3
    assert "https://example.com/app" in shown[0]["text/plain"] and "not loaded" in shown[0]["text/plain"]
    assert "not loaded" in shown[1]["text/plain"] and "youtube.com/embed/abc" in shown[2]["text/plain"]


def test_javascript_and_svg_never_reach_the_output(run):
    result = run("from IPython.display import Javascript, SVG, display, display_javascript\n"
                 "display(Javascript('alert(1)'))\n"
                 "display(SVG('<svg onload=alert(1)></svg>'))\n"
                 "display_javascript('alert(2)', raw=True)")
    assert result.ok, result
    text = json.dumps(result.events)
    assert "alert" not in text and "onload" not in text
    assert all(set(e["data"]) == {"text/plain"} for e in displays(result))


def test_raw_bundles_are_displayed_as_given_for_the_kernel_to_filter(run):
    result = run("from IPython.display import display, publish_display_data\n"
                 "display({'text/html': '<p>raw</p>', 'text/plain': 'raw'}, raw=True)\n"
                 "publish_display_data({'text/plain': 'published'})")
    assert result.ok, result
    shown = [e["data"] for e in displays(result)]
    assert shown[0]["text/html"] == "<p>raw</p>" and shown[1]["text/plain"] == "published"


def test_display_id_update_and_clear_output_are_events(run):
    result = run("from IPython.display import display, update_display, clear_output, HTML\n"
                 "h = display(HTML('one'), display_id=True)\n"
                 "h.update(HTML('two'))\n"
                 "display('x', display_id='progress')\n"
                 "update_display('y', display_id='progress')\n"
                 "print('before')\n"
                 "clear_output(wait=True)\n"
                 "print('after')")
    assert result.ok, result
    kinds = [(e["type"], e.get("transient", {}).get("display_id"), e.get("update")) for e in result.events
             if e["type"] in ("display", "clear_output")]
    first = kinds[0][1]
    assert kinds == [("display", first, False), ("display", first, True), ("display", "progress", False),
                     ("display", "progress", True), ("clear_output", None, None)]
    order = [e["type"] for e in result.events]
    assert order.index("clear_output") > [i for i, e in enumerate(result.events)
                                          if e["type"] == "stream" and "before" in e["text"]][0]


def test_reading_a_file_for_display_follows_the_policy(strict, outside):
    (outside / "secret.png").write_bytes(PNG)
    result = strict.run(f"from IPython.display import Image\nImage(filename={str(outside / 'secret.png')!r})")
    assert not result.ok and result.error_name == "BuiltinDenied", result
    assert "does not allow files" in result.error_value and result.error_line == 2


def test_strict_policy_has_it_too(strict):
    result = strict.run("from IPython.display import display, Markdown\ndisplay(Markdown('*ok*'))")
    assert result.ok, result
    assert displays(result)[0]["data"]["text/markdown"] == "*ok*"


def test_the_rest_of_ipython_stays_out(run):
    result = run("from IPython import get_ipython")
    assert result.error_name == "ImportError" and "provides IPython.display" in result.error_value, result
    for module in ("IPython.core.interactiveshell", "IPython.core", "IPython.display.os", "IPython.utils"):
        result = run(f"import {module}")
        assert result.error_name == "ImportDenied", (module, result)
