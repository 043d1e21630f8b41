"""Third independent review at level `none`: attacks by an outsider told only the threat model.

Each test performs the real attack in an Engine with the data-science policy and asserts that it failed
and nothing happened (no file outside the working directory, no secret in the cell's output, host state
unchanged). Attacks that may take the process down run in a child process. Findings are strict xfails
until fixed (all three are fixed; N3-3's process-wide data is kept per engine (guards.LIBRARY_STATE), and a
cell class's special methods must be its own code (tests/test_attacks_special_methods.py). N3-1 and N3-2: the engine keeps a cell's exception as plain data once the cell
is over and introspects by exact types only; the kernel logs backend failures without running the
exception's code).

Log of what was tried (one line per attempt class) and the result:
  glob with dir_fd= (a descriptor the kernel holds) / root_dir='/'        refused (FileDenied)      held
  inspect_request on a str/int/list subclass whose __repr__ is a library
    callable (functools.partial(np.savetxt, outside_path, ...))           file written outside    FINDING N3-1
  complete_request / inspect_request on an instance whose class has
    __getattribute__ = library callable (isinstance() reads __class__)     file written outside    FINDING N3-1
  an exception class with __getattribute__ = library callable: the
    engine's isinstance(exc, ...) raises out of run_cell (the cell's
    denial escapes the engine), the kernel logs it with exc_info and the
    logging traceback reads __notes__ on the cell's exception, unconfined  file written outside,
                                                                           kernel process dies     FINDING N3-2
  both confirmed through a real kernel at level none (inspect_request; a cell raising E)
  process-wide library state with no code: dateutil parserinfo.JUMP (a
    class-level list), calendar.setfirstweekday, pio.templates + default  changed in the host     FINDING N3-3 (lesser)
  module-level dicts through exec(text, d), operator.setitem, pd.eval(target=d, inplace=True), .update
                                                                          read-only proxies        held
  pandas query/eval: target= setitem, resolvers, @names, attribute calls  same as the cell's own   held (read)
  %timeit -p -5 / -p 10**9, -v NAME, x = %time EXPR                       bounded, rewritten       held
  library finalizers that could call a cell object after the cell
    (NpzFile.__del__, ZipFile.__del__ over a cell file-like)              no call into the cell    held (read)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from childcell import REPO

PAYLOAD = "echo PWNED-BY-REVIEW3"


def _savetxt_partial(path) -> str:
    """A library callable that writes PAYLOAD to `path`, whatever extra positional argument it is given
    (np.savetxt writes the rows before it looks at `footer`)."""
    return (f"functools.partial(np.savetxt, {str(path)!r}, np.array([{PAYLOAD!r}], dtype=object), "
            "'%s', ' ', '\\n', '')")


# --- N3-1: completion and inspection touch the cell's objects outside the cell ---------------------------
# engine.complete/inspect (kernel.do_complete/do_inspect at level none) say they never run sandbox code, but
# they call repr() on instances of subclasses of builtin data and isinstance() on any object (which reads
# __class__ through the class's __getattribute__). A class body may bind a *library* callable (a
# functools.partial of np.savetxt) to those slots: not cell code, so no tick refuses it, and outside the cell
# no confinement holds. The user only has to press Tab or Shift+Tab (JupyterLab's Contextual Help panel
# sends inspect requests as the cursor moves).

REPR_CLASSES = {"str": "S(str)", "int": "S(int)", "list": "S(list)", "dict": "S(dict)", "float": "S(float)"}
REPR_VALUES = {"str": "S('x')", "int": "S(7)", "list": "S([1])", "dict": "S(a=1)", "float": "S(1.5)"}


@pytest.mark.parametrize("base", sorted(REPR_CLASSES))
def test_inspect_does_not_run_a_library_repr_unconfined(sandbox, outside, base):
    target = outside / f"inspect-repr-{base}.sh"
    r = sandbox.run(f"import functools, numpy as np\nclass {REPR_CLASSES[base]}:\n"
                    f"    __repr__ = {_savetxt_partial(target)}\ns = {REPR_VALUES[base]}\n")
    assert r.ok or r.denied("attribute"), r   # refused at class creation since the special-method rule
    assert not target.exists(), "the cell itself wrote outside the workdir"
    sandbox.engine.inspect("s", 1)
    assert not target.exists(), "inspecting a name ran a library callable of the cell's unconfined"


GETATTRIBUTE_CELL = "import functools, numpy as np\nclass G:\n    __getattribute__ = {writer}\ng = G()\n"


@pytest.mark.parametrize("request_kind", ["complete", "inspect"])
def test_completion_and_inspection_do_not_run_a_library_getattribute(sandbox, outside, request_kind):
    target = outside / f"{request_kind}-getattribute.sh"
    r = sandbox.run(GETATTRIBUTE_CELL.format(writer=_savetxt_partial(target)))
    assert r.ok or r.denied("attribute"), r   # refused at class creation since the special-method rule
    assert not target.exists(), "the cell itself wrote outside the workdir"
    if request_kind == "complete":
        sandbox.engine.complete("g.", 2)
    else:
        sandbox.engine.inspect("g", 1)
    assert not target.exists(), f"a {request_kind} request ran a library callable of the cell's unconfined"


def test_inspection_of_plain_cell_objects_still_answers(sandbox):
    r = sandbox.run("class P:\n    '''doc of P'''\n    def m(self):\n        pass\np = P()\ns = 'text'\n")
    assert r.ok, r
    assert "m" in sandbox.engine.complete("p.", 2)["matches"]
    assert sandbox.engine.inspect("s", 1)["found"] is True


# --- N3-2: a cell's exception escapes run_cell and the kernel's log formats it unconfined -------------------
# In Engine._execute the handler asks isinstance(exc, StopIteration) while the confinement still holds: for an
# exception class whose __getattribute__ is np.savetxt's partial, the write is refused there, and that
# FileDenied (with the cell's exception as its __context__) escapes run_cell. The kernel catches it and logs
# `exc_info=True` (kernel.py, "sandbox backend failed"); logging's traceback reads __notes__ on the context,
# the cell's exception, through the same __getattribute__: outside the cell, unconfined.

KERNEL_LIKE_CHILD = textwrap.dedent("""
    import io, json, logging, sys, tempfile
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS
    log = logging.getLogger("kernel-like")
    log.addHandler(logging.StreamHandler(io.StringIO()))
    eng = Engine(PRESETS["data-science"], workdir=tempfile.mkdtemp())
    report = {}
    try:
        done = eng.run_cell(sys.argv[1], emit=lambda e: None)
        report["status"] = done["status"]
    except BaseException as exc:
        report["run_cell_raised"] = type(exc).__name__
        log.error("sandbox backend failed", exc_info=True)   # what kernel.py does with it
    print(json.dumps(report))
""")


def _run_like_the_kernel(source: str) -> dict:
    out = subprocess.run([sys.executable, "-c", KERNEL_LIKE_CHILD, source], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"crashed": out.returncode, "stderr": out.stderr[-500:]}


EXCEPTION_GETATTRIBUTE = "import functools, numpy as np\nclass E(Exception):\n    __getattribute__ = {writer}\nraise E()\n"


def test_a_cell_exception_with_a_library_getattribute_writes_nothing_when_the_kernel_logs_it(outside):
    target = outside / "exception-getattribute.sh"
    result = _run_like_the_kernel(EXCEPTION_GETATTRIBUTE.format(writer=_savetxt_partial(target)))
    assert not target.exists(), f"the kernel's log ran the cell's library callable unconfined: {result}"


def test_run_cell_returns_an_error_for_an_exception_with_a_hostile_getattribute(outside):
    result = _run_like_the_kernel("import functools, numpy as np\nclass E(Exception):\n"
                                  "    __getattribute__ = functools.partial(divmod, 1)\nraise E()\n")
    assert result.get("status") == "error", result


# --- N3-1 and N3-2 through a real kernel at level none ------------------------------------------------------

def _kernel(workdir):
    from kernel_helpers import start_client

    workdir.mkdir(parents=True, exist_ok=True)
    return start_client(cwd=str(workdir), isolation="none")


def test_kernel_inspect_request_runs_nothing_of_the_cells(tmp_path, outside):
    from kernel_helpers import shell_request

    target = outside / "kernel-inspect.sh"
    client = _kernel(tmp_path / "kernel-work")
    try:
        r = client.run(f"import functools, numpy as np\nclass S(str):\n    __repr__ = {_savetxt_partial(target)}\n"
                       f"s = S('x')\n", timeout=60)
        assert r["status"] == "ok" or any(d["kind"] == "attribute" for d in r["denials"]), r
        shell_request(client, "inspect_request", {"code": "s", "cursor_pos": 1, "detail_level": 0}, timeout=30)
    finally:
        client.shutdown()
    assert not target.exists(), "an inspect request ran the cell's library callable unconfined"


def test_kernel_survives_a_cell_exception_with_a_library_getattribute(tmp_path, outside):
    target = outside / "kernel-exception.sh"
    client = _kernel(tmp_path / "kernel-work")
    try:
        try:
            client.run(EXCEPTION_GETATTRIBUTE.format(writer=_savetxt_partial(target)), timeout=30)
        except Exception:   # noqa: BLE001 - a kernel that died times out; judged below
            pass
        written = target.exists()
        alive = client.km.is_alive()
        after = None
        if alive:
            try:
                after = client.run("print(6 * 7)", timeout=30)["output"]
            except Exception as exc:   # noqa: BLE001
                after = repr(exc)
    finally:
        client.shutdown()
    assert not written, "the kernel ran the cell's library callable unconfined"
    assert alive and after == "42\n", (alive, after)


# --- N3-3 (lesser): host state a cell changes with no code in it ---------------------------------------------
# Not code, but process-wide state of granted libraries that outlives the cell at level none: the class-level
# lists of dateutil's parserinfo (dateutil's *instances* are read-only for exactly this reason), calendar's
# module-level TextCalendar (calendar.setfirstweekday), plotly's template registry and its default.

HOST_STATE_WRITES = {
    "dateutil_parserinfo_class_list": ("import dateutil.parser as dp\ndp.parserinfo.JUMP.append('zzjump')\n",
                                       "import dateutil.parser as dp\nvalue = 'zzjump' in dp.parserinfo.JUMP"),
    "calendar_firstweekday": ("import calendar\ncalendar.setfirstweekday(6)\n",
                              "import calendar\nvalue = calendar.firstweekday() != 0"),
    "plotly_template_default": ("import plotly.io as pio\npio.templates['zz'] = {'layout': {'title': {'text': 'X'}}}\n"
                                "pio.templates.default = 'zz'\n",
                                "import plotly.io as pio\nvalue = pio.templates.default == 'zz'"),
}

REPORT_HOST_STATE = """\
def probe_host(report):
{check}
    report["changed"] = bool(value)
"""


@pytest.mark.parametrize("write", sorted(HOST_STATE_WRITES))
def test_library_process_state_is_not_changed_by_a_cell(write):
    from childcell import run_cell_in_child

    cell, check = HOST_STATE_WRITES[write]
    result = run_cell_in_child(cell, probe=REPORT_HOST_STATE.format(check=textwrap.indent(check, "    ")),
                               hard_exit=True, timeout=60)
    assert result.get("status") == "ok", result
    assert result.get("changed") is False, result


# --- attempts that held (regressions) ---------------------------------------------------------------------------

@pytest.mark.parametrize("call", ["glob.glob('*', dir_fd=3)", "glob.glob('*', root_dir='/')", "glob.glob('/*')",
                                  "glob.glob('../*')"])
def test_glob_lists_nothing_outside_the_workdir(run, call):
    r = run(f"import glob\ntry:\n    found = {call}\nexcept Exception as exc:\n    found = type(exc).__name__\n"
            f"print(found)")
    assert r.ok, r
    assert r.stdout.strip() in ("[]", "FileDenied"), r


MODULE_DICT_WRITES = [
    "exec('zz = 1', json.decoder.BACKSLASH)",
    "operator.setitem(json.decoder.BACKSLASH, 'zz', 1)",
    "pd.eval('zz = 1', target=json.decoder.BACKSLASH, inplace=True)",
    "json.decoder.BACKSLASH.update(zz=1)",
]


@pytest.mark.parametrize("write", MODULE_DICT_WRITES)
def test_module_level_dicts_stay_read_only_through_exec_operator_and_pandas_eval(run, write):
    import json.decoder

    before = dict(json.decoder.BACKSLASH)
    r = run(f"import json.decoder, operator, pandas as pd\ntry:\n    {write}\nexcept Exception:\n    pass\n")
    assert r.ok, r
    assert json.decoder.BACKSLASH == before


@pytest.mark.parametrize("precision", ["-5", "1000000000"])
def test_timeit_precision_extremes_print_a_bounded_line(run, precision):
    r = run(f"%timeit -p {precision} -n 1 -r 1 x = 1\n")
    assert r.ok, r
    assert len(r.stdout) < 500, r
