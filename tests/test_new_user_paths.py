"""A file a cell names is reported by the name the cell used, as in plain Python: `open("x.txt")` that
fails says `'x.txt'`, not the confined absolute path the sandbox opened (which also tells a cell where
its working directory lives on the host).

The uncaught error's text is already cleaned (the engine removes host paths from what it reports);
what a cell catches is not: the exception's `filename`, its `str()`, and an open file's `name` carry
the absolute path. The confined open() (confine.py ConfinedFiles.open) gives both the cell's name back."""
import pytest

@pytest.mark.parametrize("call, name", [
    ("open('does_not_exist.txt')", "does_not_exist.txt"),
    ("open('sub/missing.txt')", "sub/missing.txt"),
    ("import pandas as pd\npd.read_csv('missing.csv')", "missing.csv"),
])
def test_a_missing_file_is_named_as_the_cell_named_it(run, sandbox, call, name):
    body = "\n".join("    " + line for line in call.splitlines())
    r = run(f"try:\n{body}\nexcept FileNotFoundError as exc:\n    caught = (exc.filename, str(exc))")
    assert r.ok, r
    filename, message = sandbox.ns["caught"]
    assert filename == name, filename
    assert str(sandbox.workdir) not in message and repr(name) in message, message


def test_an_open_file_has_the_name_the_cell_gave(run, sandbox):
    r = run("fh = open('notes.txt', 'w')\nname = fh.name\nfh.close()")
    assert r.ok, r
    assert sandbox.ns["name"] == "notes.txt"


def test_the_uncaught_error_already_names_the_file_as_the_cell_did(run, sandbox):
    r = run("open('does_not_exist.txt')")
    assert r.error_name == "FileNotFoundError" and r.error_line == 1
    assert "'does_not_exist.txt'" in r.error_value and str(sandbox.workdir) not in r.everything
