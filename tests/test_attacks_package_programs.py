"""Programs inside packages: a package's `__main__` module runs its program when imported (IPython's app took
over the host's `sys.excepthook`); `np.info(toplevel=NAME)` imports any installed module by name. No `__main__`
module is imported while a cell runs, and np.info hands nothing back.

Sink: docs/security.md, "Inventory of sinks", row *programs inside packages*. The attacks come from the independent
reviews at level none (docs/reviews.md): review 5 (N5-9) and review 4 (held).
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child

# From review 4 (docs/reviews.md, "Review 4").
def test_np_info_of_a_denied_module_hands_nothing_back(sandbox):
    # np.info searches numpy only since review 18 (R18-2: toplevel= printed any module's strings)
    r = sandbox.run("import numpy as np\nv = np.info('getcwd', toplevel='os')\n")
    assert not r.ok and r.error_name == "CallDenied" and "toplevel" in r.error_value, r
    assert "v" not in sandbox.ns


# From review 5 (docs/reviews.md, "Review 5").
# --- N5-9 (lesser): np.info(toplevel=NAME) runs installed programs in the kernel process ----------------------------
# Recorded as "information only" in review none4: numpy's info() imports any module by name to list its
# names. Importing an unguarded __main__ module runs that program: IPython.__main__ (start_ipython(): the app
# replaces sys.excepthook with its crash handler, which the host keeps after the cell and which writes crash
# reports under ~/.ipython), jupyterlab/nbconvert/jsonschema.__main__ (sys.meta_path grows), numpy.f2py,
# coverage, tornado's test runner, jupyter_core (parses the kernel's argv and looks for jupyter-* commands):
# each ends in SystemExit inside the cell, after running with the process's argv and the working directory.

HOST_HOOKS = """
import sys
BEFORE = (sys.excepthook, len(sys.meta_path))
def probe_host(report):
    import sys
    report['excepthook_changed'] = sys.excepthook is not BEFORE[0]
    report['meta_path_changed'] = len(sys.meta_path) != BEFORE[1]
"""


# FINDING N5-9, fixed: the audit hook refuses importing any __main__ module while a cell runs.
@pytest.mark.parametrize("name", ["IPython.__main__", "jupyterlab.__main__", "numpy.f2py.__main__", "json.__main__"])
def test_numpy_info_toplevel_does_not_run_installed_programs(name):
    result = run_cell_in_child(f"import numpy as np\nnp.info('zzz', toplevel={name!r})\n",
                               report=("status", "ename"), probe=HOST_HOOKS, limits={"timeout": 30.0}, timeout=180)
    assert "crashed" not in result, result
    assert result["excepthook_changed"] is False and result["meta_path_changed"] is False, result
    # (np.info's toplevel= is refused since review 18, before the import the audit hook refuses)
    assert result["ename"] in ("CallDenied", "OperationDenied"), result
