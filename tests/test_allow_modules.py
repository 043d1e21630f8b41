"""Modules real notebooks import (docs/policy.md, "Modules"): dateutil, glob, the rest of time's clocks,
html. Each works, and its neighbours stay closed."""
from __future__ import annotations

import pytest


def test_dateutil_parser_relativedelta_and_tz(run):
    r = run("from dateutil import parser, tz\nfrom dateutil.relativedelta import relativedelta\nimport datetime\n"
            "d = parser.parse('4th of July, 2021')\n"
            "print(d.date(), datetime.date(2021, 1, 31) + relativedelta(months=1))\n"
            "paris = tz.gettz('Europe/Paris')\n"
            "print(paris.utcoffset(datetime.datetime(2021, 1, 1)), tz.UTC.utcoffset(None))\n"
            "from dateutil.rrule import rrule, DAILY\n"
            "print(len(list(rrule(DAILY, count=3, dtstart=d))))")
    assert r.ok and r.stdout == "2021-07-04 2021-02-28\n1:00:00 0:00:00\n3\n", r


def test_dateutil_objects_pandas_hands_out_are_usable(run):
    r = run("import pandas as pd, datetime\n"
            "s = pd.Series(pd.date_range('2020-01-01', periods=2, tz='dateutil/Europe/Paris'))\n"
            "s.dt.tz.utcoffset(datetime.datetime(2020, 7, 1))")
    assert r.ok and r.result_text == "datetime.timedelta(seconds=7200)", r


def test_a_cells_own_parserinfo_works(run):
    r = run("from dateutil import parser\nclass Info(parser.parserinfo):\n    MONTHS = parser.parserinfo.MONTHS\n"
            "i = Info()\ni.note = 'mine'\nparser.parse('1 Jan 2020', parserinfo=i).year")
    assert r.ok and r.result_text == "2020", r


@pytest.mark.parametrize("cell", [
    "from dateutil import parser\nparser.DEFAULTPARSER.info = None",
    "from dateutil import tz\ntz.UTC.utcoffset = print",
    "from dateutil import tz\nsetattr(tz.gettz('UTC'), 'utcoffset', print)",
])
def test_dateutils_shared_objects_are_read_only(run, cell):
    """The default parser and the time zone singletons are the process's (at level none the kernel's
    own message parsing uses dateutil): a cell cannot plant anything in them."""
    r = run(cell + "\nfrom dateutil import parser\nprint(parser.parse('2020-01-02').day)")
    assert not r.ok and r.denied("attribute", line=2), r
    assert run("from dateutil import parser, tz\nparser.parse('2020-01-02').day, tz.UTC.utcoffset(None)").result_text \
        == "(2, datetime.timedelta(0))"


@pytest.mark.parametrize("cell", ["from dateutil import zoneinfo", "import dateutil.tzwin", "import dateutil.tz.win",
                                  "import dateutil.zoneinfo.rebuild", "from dateutil import _common"])
def test_dateutils_other_corners_stay_denied(run, cell):
    r = run(cell)
    assert not r.ok and (r.denied("import") or r.denied("attribute")), r


def test_dateutil_reads_no_file_outside(run, host_secret, tmp_path):
    secret_file = str(tmp_path / "secret.txt")
    r = run("from dateutil import tz\nimport warnings\nwarnings.simplefilter('ignore')\n"
            f"print(tz.gettz({secret_file!r}), tz.gettz('../secret.txt'))\n"
            f"tz.tzfile({secret_file!r})")
    assert not r.ok and r.denied("file", line=5) and r.stdout == "None None\n", r
    assert not r.leaked(host_secret)


def test_dateutil_loops_stop_at_the_time_limit(run):
    r = run("from dateutil.rrule import rrule, DAILY\nimport datetime\n"
            "list(rrule(DAILY, count=10**9, dtstart=datetime.datetime(2020, 1, 1)))", timeout=1)
    assert not r.ok and r.error_name == "TimeLimitExceeded", r


def test_glob_lists_the_working_directory(sandbox):
    for name in ("a.csv", "b.csv", "notes.txt"):
        (sandbox.workdir / name).write_text("x")
    (sandbox.workdir / "sub").mkdir()
    (sandbox.workdir / "sub" / "c.csv").write_text("x")
    r = sandbox.run("import glob\nprint(sorted(glob.glob('*.csv')), sorted(glob.glob('**/*.csv', recursive=True)))")
    assert r.ok and r.stdout == "['a.csv', 'b.csv'] ['a.csv', 'b.csv', 'sub/c.csv']\n", r


@pytest.mark.parametrize("pattern", ["/etc/*", "/etc/passwd", "../*", "../../*/*", "/proc/self/*", "sub/../../*"])
def test_glob_sees_nothing_outside(sandbox, outside, pattern):
    (outside / "secret.csv").write_text("x")
    r = sandbox.run(f"import glob\nprint(glob.glob({pattern!r}), glob.glob('*', root_dir={str(outside)!r}))")
    assert r.ok and r.stdout == "[] []\n", r


@pytest.mark.parametrize("cell", ["import glob\nglob.os", "import glob\nglob.fnmatch", "import glob\nglob.glob1",
                                  "import pathlib", "from pathlib import Path"])
def test_globs_neighbours_and_pathlib_stay_denied(run, cell):
    r = run(cell)
    assert not r.ok and r.denials, r


def test_glob_needs_the_files_policy(strict):
    r = strict.run("import glob")
    assert not r.ok and r.denied("import"), r


def test_more_of_time_and_html(strict):
    r = strict.run("import time, html\n"
                   "print(time.process_time() >= 0, time.strptime('2021-03', '%Y-%m').tm_mon, type(time.timezone),\n"
                   "      html.escape('<b>&'), html.unescape('&lt;'))")
    assert r.ok and r.stdout == "True 3 <class 'int'> &lt;b&gt;&amp; <\n", r
    for cell in ("import time\ntime.tzset()", "import time\ntime.clock_settime"):
        r = strict.run(cell)
        assert not r.ok and r.denied("attribute"), (cell, r)
