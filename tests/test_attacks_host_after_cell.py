"""The host touching a cell's objects after the cell: Tab completion, Shift+Tab inspection, and the kernel's log of
a failure must not run a cell class's special methods (`__repr__`, `__getattribute__`) or a library callable bound
there, unconfined; a cell's exception with a hostile `__getattribute__` is an error of the cell, and the kernel
survives it.

Sink: docs/security.md, "Inventory of sinks", row *the host touching a cell's objects after the cell*. The attacks come
from the independent review 3 at level none (N3-1, N3-2; docs/reviews.md), through a real kernel too.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from childcell import REPO, savetxt_writer

# From review 3 (docs/reviews.md, "Review 3").
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
                    f"    __repr__ = {savetxt_writer(target)}\ns = {REPR_VALUES[base]}\n")
    assert r.ok or r.denied("attribute"), r   # refused at class creation since the special-method rule
    assert not target.exists(), "the cell itself wrote outside the workdir"
    sandbox.engine.inspect("s", 1)
    assert not target.exists(), "inspecting a name ran a library callable of the cell's unconfined"


GETATTRIBUTE_CELL = "import functools, numpy as np\nclass G:\n    __getattribute__ = {writer}\ng = G()\n"


@pytest.mark.parametrize("request_kind", ["complete", "inspect"])
def test_completion_and_inspection_do_not_run_a_library_getattribute(sandbox, outside, request_kind):
    target = outside / f"{request_kind}-getattribute.sh"
    r = sandbox.run(GETATTRIBUTE_CELL.format(writer=savetxt_writer(target)))
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
    result = _run_like_the_kernel(EXCEPTION_GETATTRIBUTE.format(writer=savetxt_writer(target)))
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
        r = client.run(f"import functools, numpy as np\nclass S(str):\n    __repr__ = {savetxt_writer(target)}\n"
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
            client.run(EXCEPTION_GETATTRIBUTE.format(writer=savetxt_writer(target)), timeout=30)
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
