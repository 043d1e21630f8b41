"""%time, %timeit, %%time, %%timeit and `obj?` in the engine: the timed statement is the cell's own
code (rewritten, gated, under the cell's limits), printed like IPython's; counts, not clocks, are
asserted."""
from __future__ import annotations

import re

import pytest

TIMEIT_LINE = re.compile(r"^\S+ \S+ \u00b1 \S+ \S+ per loop \(mean \u00b1 std\. dev\. of (\d+) runs?, ([\d,]+) loops? each\)$",
                         re.M)


def timeit_figures(text: str) -> tuple[int, int]:
    m = TIMEIT_LINE.search(text)
    assert m, text
    return int(m.group(1)), int(m.group(2).replace(",", ""))


def test_time_prints_cpu_and_wall_and_shows_the_value(run):
    r = run("x = 20\n%time x + 22")
    assert r.ok and r.result_text == "42", r
    assert re.search(r"^CPU times: user .+, sys: .+, total: .+\nWall time: .+$", r.stdout, re.M), r.stdout


def test_time_assignments_stay_and_the_rest_of_the_cell_runs(sandbox):
    r = sandbox.run("before = 1\n%time made = [i for i in range(5)]\nafter = len(made)")
    assert r.ok and sandbox.ns["after"] == 5 and sandbox.ns["before"] == 1, r
    r = sandbox.run("y = %time 6 * 7\ny")
    assert r.ok and r.result_text == "42" and "Wall time" in r.stdout, r


def test_cell_time_runs_the_body_and_shows_its_last_value(sandbox):
    r = sandbox.run("%%time\ntotal = 0\nfor i in range(4):\n    total += i\ntotal")
    assert r.ok and r.result_text == "6" and r.stdout.count("Wall time") == 1, r
    r = sandbox.run("%%time\nz = 3;")
    assert r.ok and r.result_text is None and sandbox.ns["z"] == 3, r


def test_time_of_a_failing_statement_prints_the_times_then_the_error_at_the_magics_line(run):
    r = run("a = 1\n%time 1 / 0")
    assert not r.ok and r.error_name == "ZeroDivisionError" and r.error_line == 2, r
    assert "Wall time" in r.stdout
    r = run("x = 1\n%time ().__class__.__bases__")
    assert not r.ok and r.denied("attribute", line=2), r


def test_timeit_runs_the_statement_number_times_repeat(sandbox):
    r = sandbox.run("calls = []\n%timeit -n 3 -r 2 calls.append(1)")
    assert r.ok and len(sandbox.ns["calls"]) == 6, r
    assert timeit_figures(r.stdout) == (2, 3)
    r = sandbox.run("calls.clear()\n%timeit -n5 -r1 calls.append(1)")
    assert r.ok and len(sandbox.ns["calls"]) == 5 and timeit_figures(r.stdout) == (1, 5), r


def test_cell_timeit_runs_its_setup_once_per_run(sandbox):
    r = sandbox.run("%%timeit -n 4 -r 3 calls = []\ncalls.append('body')\nseen.append(len(calls))",)
    assert not r.ok and r.error_name == "NameError", r    # `seen` is not defined yet: a normal error
    sandbox.run("seen = []")
    r = sandbox.run("%%timeit -n 4 -r 3 calls = []\ncalls.append('body')\nseen.append(len(calls))")
    assert r.ok, r
    assert sandbox.ns["seen"] == [1, 2, 3, 4] * 3 and "calls" not in sandbox.ns


def test_timeit_statement_runs_in_a_function_like_ipythons(sandbox):
    r = sandbox.run("%timeit -n 1 -r 1 leaked = 1")
    assert r.ok and "leaked" not in sandbox.ns, r
    r = sandbox.run("def f(n):\n    %timeit -n 2 -r 1 n + 1\n    return n\nf(5)")
    assert r.ok and r.result_text == "5" and timeit_figures(r.stdout) == (1, 2), r
    assert not [k for k in sandbox.ns if not k.isidentifier()]


def test_timeit_results_and_quiet(sandbox):
    r = sandbox.run("t = %timeit -o -q -n 10 -r 2 sum([1, 2])\n(t.loops, t.repeat, len(t.all_runs), t.best <= t.worst)")
    assert r.ok and r.result_text == "(10, 2, 2, True)" and r.stdout == "", r
    r = sandbox.run("%timeit -o -n 1 -r 1 1 + 1")
    assert r.ok and r.result_text.startswith("<TimeitResult : ") and "per loop" in r.result_text, r


def test_automatic_timeit_stays_within_the_cells_ticks(sandbox):
    """IPython would run 7 runs of loops that take 0.2 s each; the cell's budget decides here."""
    r = sandbox.run("x = 3\n%timeit x * 2", ticks=2 * 10**6)
    assert r.ok, r
    runs, loops = timeit_figures(r.stdout)
    assert runs * loops <= 10**6 and loops >= 1, r.stdout
    assert r.done["ticks"] <= 2 * 10**6


def test_explicit_timeit_counts_are_held_to_the_limits(sandbox):
    r = sandbox.run("%timeit -n 1000000 -r 7 None", ticks=10**6)
    assert not r.ok and r.error_name == "TickLimitExceeded", r


@pytest.mark.parametrize("cell, message", [
    ("%time (1", "never closed"),
    ("%timeit -x 1", "option -x not recognized"),
    ("%timeit -n 1", ""),
    ("%%time x = 1\ny = 2", "directly after"),
])
def test_magic_syntax_errors_name_the_magics_line(run, cell, message):
    r = run(cell)
    if cell == "%timeit -n 1":   # nothing to time: nothing happens
        assert r.ok and r.stdout == "", r
        return
    assert not r.ok and r.error_name == "SyntaxError" and message in r.error_value, r


def test_timed_statement_that_binds_a_runtime_name_is_refused(run):
    r = run("%time __st_getattr__ = 1")
    assert not r.ok and r.denied("name", line=1), r
    r = run("%timeit -n 1 -r 1 __builtins__")
    assert not r.ok and r.denied("name"), r


def test_magics_inside_blocks(sandbox):
    r = sandbox.run("out = []\nfor i in range(3):\n    %time out.append(i)\nif out:\n    len?")
    assert r.ok and sandbox.ns["out"] == [0, 1, 2] and r.stdout.count("Wall time") == 3, r
    assert "Help on built-in function len" in r.stdout


@pytest.mark.parametrize("cell", ["len?", "len??", "?len", "??len", "  len?"])
def test_help_syntax_prints_the_signature_and_docstring(run, cell):
    r = run(cell)
    assert r.ok and r.stdout.startswith("Help on built-in function len"), r
    assert "len(obj, /)" in r.stdout and "Return the number of items" in r.stdout


def test_help_syntax_on_names_that_are_not_there(run):
    r = run("nothing_here?")
    assert r.ok and r.stdout == "Object `nothing_here` not found.\n", r
    r = run("import math\nmath.nothing_here??")
    assert r.ok and "not found" in r.stdout, r


def test_help_of_cell_functions_and_classes(run):
    r = run("def area(w, h=2):\n    'Width times height.'\n    return w * h\n"
            "class Box:\n    'A box.'\n    def grow(self, by=1):\n        'Make it bigger.'\n"
            "    def _hidden(self):\n        pass\n"
            "help(area)\nBox?")
    assert r.ok, r
    assert "area(w, h=2)\n    Width times height." in r.stdout
    assert "class Box" in r.stdout and "A box." in r.stdout and "grow(self, by=1)" in r.stdout
    assert "Make it bigger." in r.stdout and "_hidden" not in r.stdout


def test_help_of_library_objects_lists_what_the_policy_shows(run):
    r = run("import numpy as np, pandas as pd\nhelp(np)\nhelp(pd.DataFrame)\nnp.mean?")
    assert r.ok, r
    out = r.stdout
    assert "Help on module numpy" in out and "Help on class DataFrame" in out and "merge(" in out
    assert "ctypeslib" not in out and "_mgr" not in out and "to_pickle(" not in out
    assert "mean(a, axis=None" in out
    import sys
    assert sys.prefix not in out and "site-packages/" not in out


def test_help_runs_cell_code_only_under_the_limits(run):
    r = run("class Slow:\n    def __call__(self):\n        pass\n    @property\n    def __doc__(self):\n"
            "        while True:\n            pass\nhelp(Slow())", ticks=10**5)
    assert not r.ok and r.error_name == "TickLimitExceeded", r


def test_help_takes_an_object(run):
    r = run("help()")
    assert not r.ok and r.error_name == "TypeError" and "help(len)" in r.error_value, r
    r = run("help('len')")
    assert r.ok and "len(obj, /)" in r.stdout, r
    r = run("help('os')")
    assert r.ok and "No documentation found" in r.stdout, r


def test_writefile_writes_the_cells_text_in_the_working_directory(sandbox):
    r = sandbox.run("%%writefile helper.py\ndef double(x):\n    return 2 * x")
    assert r.ok and r.stdout == "Writing helper.py\n", r
    assert (sandbox.workdir / "helper.py").read_text() == "def double(x):\n    return 2 * x\n"
    r = sandbox.run("%%file -a helper.py\n# appended, not run: !ls %magic")
    assert r.ok and r.stdout == "Appending to helper.py\n", r
    assert (sandbox.workdir / "helper.py").read_text().endswith("# appended, not run: !ls %magic\n")
    r = sandbox.run("%%writefile helper.py\nx")
    assert r.ok and r.stdout == "Overwriting helper.py\n", r
    r = sandbox.run("import helper")   # a file the cell wrote is never imported
    assert not r.ok and r.denied("import"), r


@pytest.mark.parametrize("name", ["../outside.txt", "/tmp/outside.txt", ".bashrc", "__pycache__/x.pyc"])
def test_writefile_is_confined_like_open(sandbox, outside, name):
    r = sandbox.run(f"%%writefile {name}\npwned")
    assert not r.ok and r.denied("file"), r
    assert not (sandbox.workdir.parent / "outside.txt").exists() and not (sandbox.workdir / ".bashrc").exists()


def test_writefile_needs_files(strict):
    r = strict.run("%%writefile notes.txt\nhello")
    assert not r.ok and r.denied("builtin"), r
    assert not (strict.workdir / "notes.txt").exists()
