"""The sandbox's own IPython.display (provided_modules) is sandboxed source: a cell that takes it apart finds
only what a cell could have written itself. Each test performs the attack and asserts that it failed and
that nothing happened."""
import pytest

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("route", [
    "HTML.__init__.__globals__",
    "display.__globals__['_show']",
    "DisplayHandle.update.__globals__",
    "HTML.__init__.__code__",
    "getattr(HTML.__init__, '__globals__')",
    "HTML.__init__.__builtins__",
    "type(HTML('x')).__mro__[-1].__subclasses__()",
    "clear_output.__globals__",
])
def test_runtime_callables_in_its_globals_are_not_reachable(run, route):
    result = run(f"from IPython.display import *\nx = {route}")
    assert not result.ok, (route, result)
    assert result.error_name in ("AttributeDenied", "BuiltinDenied", "NameError", "ValidationDenied",
                                 "AttributeError"), (route, result)


def test_image_file_outside_the_workdir_is_not_read(run, outside, host_secret):
    (outside / "secret.png").write_bytes(PNG + host_secret.encode())
    result = run(f"from IPython.display import Image\nimg = Image(filename={str(outside / 'secret.png')!r})\n"
                 "print(img.data)")
    assert not result.ok, result
    assert not result.leaked(host_secret)


def test_html_from_a_host_file_is_not_read(run, tmp_path, host_secret):
    result = run(f"from IPython.display import HTML\nprint(HTML(filename={str(tmp_path / 'secret.txt')!r}).data)")
    assert not result.ok, result
    assert not result.leaked(host_secret)


def test_changing_the_module_changes_only_this_engine(sandbox, tmp_path):
    from conftest import Sandbox

    assert sandbox.run("import IPython.display as d\nd.HTML = None\nd.display = print").ok
    other = Sandbox(tmp_path / "other")
    result = other.run("from IPython.display import HTML, display\ndisplay(HTML('<b>fine</b>'))")
    assert result.ok, result
    assert result.events[0]["data"]["text/html"] == "<b>fine</b>"


def test_its_classes_are_not_the_hosts_ipython(run):
    import IPython.display as real

    before = dict(vars(real.HTML))
    result = run("from IPython.display import HTML\nHTML._repr_html_ = lambda self: '<script>x</script>'\n"
                 "HTML('a')")
    assert result.ok, result
    assert "<script>" in str(result.events[-1]["data"].get("text/html"))   # the cell's own class: its output
    assert dict(vars(real.HTML)) == before   # the host's IPython is untouched


def test_building_it_is_charged_to_the_cell(run):
    result = run("import IPython.display", ticks=20)   # building it takes about 40
    assert not result.ok and result.error_name == "TickLimitExceeded", result
    assert run("from IPython.display import HTML\nHTML('ok')").ok


@pytest.mark.parametrize("display_id", ["a b", "x" * 201, "<script>", "é", ""])
def test_a_display_id_the_kernel_cannot_use_is_dropped(display_id):
    from sandbox_kernel.outputfilter import CellOutput

    assert CellOutput.display_id({"display_id": display_id}) is None
    assert CellOutput.display_id({"display_id": "sandbox-display-1"}) == "sandbox-display-1"
    assert CellOutput.display_id({"display_id": 7}) is None
