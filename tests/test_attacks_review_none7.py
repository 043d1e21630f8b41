"""Seventh independent review at level `none`: attacks by an outsider told only the threat model.

Start 2026-11-26 17:55 UTC, end 18:03 UTC by `date` (this machine's clock runs slow: it read 17:59:44 after about
30 minutes of work; the review was stopped at about 45 minutes by the reviewer's own count), against HEAD 1305416. Each test performs
the real attack in an Engine with the data-science policy in a child process (tests/childcell.py): the cell plants,
then the probe acts as the host after the cell. Findings are strict xfails named FINDING N7-k; attempts that held are
plain regression tests.

The mechanism behind all three findings: security.md's "library objects" row says it does not cover "a library-owned
list or dict other than these mutated in place (append, item writes)". The attribute-write gate and the read-only
singletons stop `obj.attr = v`, but a list or dict that a class or a shared library object holds is handed to the
cell as itself, and `append`/`x[i] = v` on it change the process. Module-level lists come out as copies and
module-level dicts as mappingproxy, but the containers *inside* those dicts, and the ones held by classes and by
module-level instances, do not. Listed by walking the public classes and module-level instances of every granted
module for list/dict/set attributes.

Log of what was tried (one line per attempt class) and the result:
  class-level containers of granted stdlib classes, mutated in place: textwrap.TextWrapper.unicode_whitespace_trans
    [ord('a')] = 'PWNED' (the host's textwrap.fill('banana') is 'bPWNEDnPWNEDnPWNED' afterwards; the engine's help()
    text uses textwrap.wrap), calendar.HTMLCalendar.cssclasses[0] = '"><script>...' (the host's
    HTMLCalendar().formatmonth() carries it into its HTML); nested lists in module-level mappingproxies:
    plotly.colors.PLOTLY_SCALES['Greys'].append(...)                      process-wide change  FINDING N7-1 (lesser)
  pandas' module-level Holiday instances hold their offsets in a list: EasterMonday.offset.append(pd.DateOffset(
    days=1)), GoodFriday.offset[1] = ... (no attribute write): the host's EasterMonday.dates()/GoodFriday.dates()
    (and every calendar with these rules) return shifted holidays after the cell   process-wide change  FINDING N7-2 (lesser)
    (the same list given a cell subclass of pd.DateOffset whose _apply/_apply_array are
    partial(np.savetxt, outside, ...): DatetimeArray._add_offset calls _add_datetime_ndarray, which the
    library-override rule refuses as a partial (AttributeDenied); _apply/_apply_array are accepted but not called on
    this path: nothing written by the host)                                                       held
  plotly's validators are read-only objects, but their `values` (EnumeratedValidator) and `flags`/`extras`
    (FlaglistValidator) are plain lists: ValidatorCache.get_validator('scatter', 'mode').flags.append('PWN'),
    get_validator('scatter', 'fill').values += ['/.*/', ...]. The host's go.Scatter(mode='PWN+lines') is accepted,
    and the kernel's output wall, which builds each field's leaf lazily from the same validator (plotlyfigure._leaf
    reads .values/.flags and compiles '/.../' values as regexes), passes fill='<img src=x onerror=alert(1)>' and
    mode='PWN' verbatim to the browser (without the cell both are removed)
                                                   wall schema widened / process-wide change  FINDING N7-3 (lesser)
  contextlib.redirect_stdout(W()) entered through ExitStack.enter_context and never exited, W.write/flush =
    partial(np.savetxt, outside, ...) (non-special names): the engine puts the host's sys.stdout back at the end of
    the cell; the host's print writes nothing outside (printing inside the cell: FileDenied)          held
  library class attribute writes (json.JSONEncoder.default/iterencode/item_separator, JSONDecoder.object_hook,
    ndarray/DataFrame/OrderedDict new attributes), module attribute writes (json.encoder.INFINITY), function
    __defaults__/__kwdefaults__ of library functions                                   AttributeDenied  held
  module-level dicts (np.sctypeDict, np.typecodes) item writes: mappingproxy (TypeError); module-level lists
    (plotly.colors.qualitative.Plotly[0] = ..., sequential.Viridis.append): a copy, the host's list unchanged   held
  compile(text, '<an installed file name>') to get code the confinement would take for installed code:
    BuiltinDenied; exec('def f(): ...') then f.__code__: AttributeDenied                              held
  considered and not pursued for lack of a route: ReDoS in the output wall's regexes (_HTML_TAG_OR_TEXT runs over
    nh3's output, where every '<' starts a well-formed tag); TOCTOU of a cell __fspath__ between the C converter and
    the audit hook (every granted library converts a path to str before it opens it); dateutil's gettz cache keyed
    by a str subclass (the cached tzfile keeps an exact str path, not the key)
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from childcell import REPO, host_probe, run_cell_in_child, savetxt_writer


def _writer(path) -> str:
    return savetxt_writer(path, "PWNED-BY-REVIEW7")


def _probe(use: str) -> str:
    return host_probe(use, catch="BaseException", detail=True)


def _run(cell: str, use: str) -> dict:
    result = run_cell_in_child(cell, report=("status", "ename", "evalue"), probe=_probe(use), hard_exit=True)
    assert "crashed" not in result, result
    return result


# --- N7-1: class-level containers of granted classes, and lists nested in module-level dicts ------------------------

STDLIB_CONTAINERS = {
    "textwrap_whitespace_table": (
        "import textwrap\ntextwrap.TextWrapper.unicode_whitespace_trans[ord('a')] = 'PWNED'\n",
        "import textwrap\nreport['host'] = textwrap.fill('banana')",
        "banana"),
    "calendar_css_classes": (
        "import calendar\ncalendar.HTMLCalendar.cssclasses[0] = '\"><script>alert(1)</script>'\n",
        "import calendar\nreport['host'] = 'script' in calendar.HTMLCalendar().formatmonth(2026, 1)",
        False),
    "plotly_scales_nested_list": (
        "import plotly.colors as pc\npc.PLOTLY_SCALES['Greys'].append([1, 'PWNED'])\n",
        "import plotly.colors as pc\nreport['host'] = len(pc.PLOTLY_SCALES['Greys'])",
        2),
}


@pytest.mark.parametrize("case", sorted(STDLIB_CONTAINERS))
def test_library_class_containers_are_not_changed_for_the_host(case):
    cell, use, expected = STDLIB_CONTAINERS[case]
    result = _run(cell, use)
    assert result.get("host") == expected, json.dumps(result)


# --- N7-2: pandas' module-level Holiday rules keep their offsets in a list ------------------------------------------

HOST_EASTER = ("from pandas.tseries.holiday import EasterMonday, GoodFriday\n"
               "report['host'] = [str(d.date()) for d in EasterMonday.dates('2020-01-01', '2022-01-01')]"
               " + [str(d.date()) for d in GoodFriday.dates('2020-01-01', '2022-01-01')]")
EASTER_TRUE = ["2020-04-13", "2021-04-05", "2020-04-10", "2021-04-02"]


def test_the_host_holidays_are_right_without_a_cell():
    result = _run("x = 1\n", HOST_EASTER)
    assert result.get("host") == EASTER_TRUE, result


def test_holiday_offset_lists_are_not_changed_for_the_host():
    cell = ("import pandas as pd\nfrom pandas.tseries.holiday import EasterMonday, GoodFriday\n"
            "EasterMonday.offset.append(pd.DateOffset(days=1))\n"
            "GoodFriday.offset[1] = pd.DateOffset(days=-1)\n")
    result = _run(cell, HOST_EASTER)
    assert result.get("host") == EASTER_TRUE, json.dumps(result)


def test_a_cell_offset_in_the_holiday_list_runs_no_library_callable_in_the_host(outside):
    target = outside / "easter-apply.txt"
    cell = ("import functools, numpy as np, pandas as pd\nfrom pandas.tseries.holiday import EasterMonday\n"
            f"W = {_writer(target)}\n"
            "class Off(pd.DateOffset):\n    _apply_array = W\n    _apply = W\n"
            "EasterMonday.offset.append(Off(days=1))\n")
    result = _run(cell, HOST_EASTER)
    assert not target.exists(), f"the host ran the cell's planted callable: {json.dumps(result)}"


def test_a_cell_offset_overriding_add_datetime_ndarray_with_a_partial_is_refused(outside):
    target = outside / "easter-add.txt"
    cell = ("import functools, numpy as np, pandas as pd\nfrom pandas.tseries.holiday import EasterMonday\n"
            f"W = {_writer(target)}\n"
            "class Off(pd.DateOffset):\n    _add_datetime_ndarray = W\n"
            "EasterMonday.offset.append(Off(days=1))\n")
    result = _run(cell, HOST_EASTER)
    # refused at the library override (AttributeDenied), and since review 8 already at the class: a cell may not
    # subclass pandas' _libs classes (BuiltinDenied)
    assert result["ename"] in ("AttributeDenied", "BuiltinDenied"), result
    assert result.get("host") == EASTER_TRUE, result
    assert not target.exists()


# --- N7-3: plotly validators' value lists, read by plotly and by the kernel's output wall ---------------------------

PLANT_VALIDATORS = ("from plotly.validator_cache import ValidatorCache\n"
                    "ValidatorCache.get_validator('scatter', 'mode').flags.append('PWN')\n"
                    "ValidatorCache.get_validator('scatter', 'fill').values.append('/.*/')\n")
XSS = "<img src=x onerror=alert(1)>"
HOST_WALL = f"""
from sandbox_kernel import plotlyfigure
try:
    out = plotlyfigure.validate_figure({{'data': [{{'type': 'scatter', 'x': [1], 'y': [1], 'fill': {XSS!r},
                                                    'mode': 'PWN'}}], 'layout': {{}}}})
    trace = out['data'][0]
    report['wall'] = [trace.get('fill'), trace.get('mode')]
except plotlyfigure.FigureRejected:
    report['wall'] = 'rejected'
"""
HOST_PLOTLY = """
import plotly.graph_objects as go
try:
    go.Scatter(mode='PWN+lines')
    report['plotly'] = 'accepted'
except ValueError:
    report['plotly'] = 'refused'
"""


def test_the_wall_removes_an_unknown_fill_and_mode_without_a_cell():
    result = _run("x = 1\n", HOST_WALL + HOST_PLOTLY)
    assert result.get("wall") in ("rejected", [None, None]), result
    assert result.get("plotly") == "refused", result


def test_plotly_validator_lists_do_not_widen_the_output_wall():
    result = _run(PLANT_VALIDATORS, HOST_WALL)
    assert result.get("wall") in ("rejected", [None, None]), json.dumps(result)


def test_plotly_validator_lists_are_not_changed_for_the_host():
    result = _run(PLANT_VALIDATORS, HOST_PLOTLY)
    assert result.get("plotly") == "refused", json.dumps(result)


# Through the kernel's own backend (added with the fix): the validators' lists a cell reads are its own copies
# (gates.Gates._containers_copied: validators are process-wide objects), so the wall the kernel builds after
# the cell is plotly's own.
KERNEL_WALL = textwrap.dedent("""
    import json, sys, tempfile
    from sandbox_kernel.isolation import make_backend
    from sandbox_kernel.policy import PRESETS
    backend = make_backend("none", PRESETS["data-science"], tempfile.mkdtemp())
    done = backend.run_cell(sys.argv[1], emit=lambda e: None)
    report = {"status": done["status"]}
""") + HOST_WALL + "\nprint(json.dumps(report))\n"


def test_the_kernels_wall_at_level_none_is_not_widened_by_a_cell():
    out = subprocess.run([sys.executable, "-c", KERNEL_WALL, PLANT_VALIDATORS], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok", result   # the cell changed its own copies
    assert result["wall"] in ("rejected", [None, None]), result


# --- held ---------------------------------------------------------------------------------------------------------

def test_a_redirected_stdout_left_entered_is_not_the_hosts(outside):
    target = outside / "stdout.txt"
    cell = ("import contextlib, functools, numpy as np\n"
            f"class W:\n    write = {_writer(target)}\n    flush = {_writer(target)}\n"
            "es = contextlib.ExitStack()\nes.enter_context(contextlib.redirect_stdout(W()))\n")
    use = "import sys\nprint('host output')\nsys.stdout.flush()\nreport['stdout'] = type(sys.stdout).__name__"
    result = _run(cell, use)
    assert result["status"] == "ok", result
    assert not target.exists(), f"the host's print ran the cell's planted write: {json.dumps(result)}"


def test_printing_through_a_planted_stdout_in_the_cell_is_refused(outside):
    target = outside / "stdout-cell.txt"
    cell = ("import contextlib, functools, numpy as np\n"
            f"class W:\n    write = {_writer(target)}\n"
            "es = contextlib.ExitStack()\nes.enter_context(contextlib.redirect_stdout(W()))\nprint('x')\n")
    result = _run(cell, "")
    assert result["ename"] == "FileDenied", result
    assert not target.exists()


LIBRARY_WRITES = [
    "json.JSONEncoder.default = W", "json.JSONEncoder.iterencode = W", "json.JSONEncoder.item_separator = 'x'",
    "json.JSONDecoder.object_hook = W", "json.encoder.INFINITY = 'x'", "np.ndarray.foo = 1",
    "pd.DataFrame.foo = 1", "collections.OrderedDict.foo = 1", "json.dumps.__defaults__ = (W,)",
    "json.dump.__kwdefaults__ = {}",
]


@pytest.mark.parametrize("stmt", LIBRARY_WRITES)
def test_library_class_and_function_writes_are_refused(outside, stmt):
    cell = ("import json, json.encoder, collections, functools, numpy as np, pandas as pd\n"
            f"W = {_writer(outside / 'w.txt')}\n{stmt}\n")
    result = _run(cell, "")
    assert result["ename"] == "AttributeDenied", result


def test_module_level_containers_are_copies_or_read_only():
    cell = ("import numpy as np, plotly.colors as pc\nout = []\n"
            "try:\n    np.sctypeDict['float64'] = np.int8\n    out.append('written')\n"
            "except TypeError:\n    out.append('refused')\n"
            "try:\n    np.typecodes['All'] = 'x'\n    out.append('written')\n"
            "except TypeError:\n    out.append('refused')\n"
            "pc.qualitative.Plotly[0] = '#123456'\npc.sequential.Viridis.append('#000000')\n"
            "assert out == ['refused', 'refused'], out\n")
    use = ("import numpy as np, plotly.colors as pc\n"
           "report['host'] = [str(np.dtype('float64')), pc.qualitative.Plotly[0], pc.sequential.Viridis[-1]]")
    result = _run(cell, use)
    assert result["status"] == "ok", result
    assert result.get("host") == ["float64", "#636EFA", "#fde725"], result


@pytest.mark.parametrize("stmt", [
    "compile('1', '/usr/lib/python3.11/os.py', 'eval')",
    "exec('def f(): return 1', globals()); f.__code__",
])
def test_code_objects_under_an_installed_name_are_refused(stmt):
    result = _run(stmt + "\n", "")
    assert result["ename"] in ("BuiltinDenied", "AttributeDenied"), result
