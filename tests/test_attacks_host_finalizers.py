"""Finalizers the host runs for a cell's objects: a library's `__del__` (scipy's `netcdf_file`, the
`TextIOWrapper` pandas puts around a binary file) calls what the cell left in its objects after the cell, when the
host's garbage collector frees them (on the kernel's thread or another) or the host drops the namespace. No cell code
runs, so no tick refuses it: the host's time must be confined to the last cell's files.

Sink: docs/security.md, "Inventory of sinks", row *finalizers the host runs for a cell's objects*. The attacks come
from the independent review 4 at level none (N4-8; docs/reviews.md).
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child, savetxt_writer

# From review 4 (docs/reviews.md, "Review 4").
# --- N4-8: a library finalizer calls the cell's object's methods after the cell ------------------------------
# scipy.io.netcdf_file takes any object with .seek as its file, and its __del__ (= close) reads fp.closed,
# flushes (fp.seek, fp.write ...) and calls fp.close(). The cell's class binds library callables to those
# plain method names: no cell code runs, so the idle tick refuses nothing. Left in a reference cycle, the
# netcdf_file is freed by the host's garbage collector after the cell (any allocation may trigger it), where
# nothing is confined. Objects *of* a class with a library finalizer take no attributes (gates._library_finalizer);
# the objects such a finalizer *holds* are the cell's.

TEXTIO_FINALIZER_CELL = """
import functools, operator, numpy as np, pandas as pd
class CellBinaryFile:
    mode = 'rb'
    closed = False
    close = {writer7}
    readable = functools.partial(bool, 1)
    writable = functools.partial(bool, 0)
    seekable = functools.partial(bool, 0)
    read = functools.partial(operator.mul, b'a\\n')
    read1 = functools.partial(operator.mul, b'a\\n')
    flush = functools.partial(int)
cycle = [pd.read_csv(CellBinaryFile(), iterator=True, engine='python')]
cycle.append(cycle)
del cycle
"""


NETCDF_FINALIZER_CELL = """
import functools, numpy as np, scipy.io
class CellFile:
    closed = False
    close = {writer7}
    seek = functools.partial(int)
    tell = functools.partial(int)
    write = functools.partial(len)
    flush = functools.partial(int)
cycle = [scipy.io.netcdf_file(CellFile(), 'w')]
cycle.append(cycle)
del cycle
"""


# Closed at the sink (confine.py, "the host's time"): every garbage collection outside a cell's own
# confinement, on any thread, and the host dropping a namespace (engine reset, restart, shutdown) run
# confined to the last cell's files. The host's ways of freeing a cell's object are the variants.
HOST_FREES = {
    "collects": "def probe_host(report):\n    import gc\n    gc.collect()\n",
    "collects_on_a_kernel_thread": (
        "def probe_host(report):\n    import gc, threading\n"
        "    t = threading.Thread(target=gc.collect)\n    t.start()\n    t.join()\n"),
    # no cycle: the last reference is the namespace's, dropped by the host
    "resets_the_namespace": "def probe_host(report):\n    eng.reset()\n",
}


FINALIZER_ROUTES = {"scipy_netcdf_file": NETCDF_FINALIZER_CELL, "pandas_read_csv_text_wrapper": TEXTIO_FINALIZER_CELL}


@pytest.mark.parametrize("host", sorted(HOST_FREES))
@pytest.mark.parametrize("route", sorted(FINALIZER_ROUTES))
def test_a_library_finalizer_does_not_call_the_cells_object_after_the_cell(outside, route, host):
    target = outside / f"finalizer-{route}-{host}.sh"
    writer7 = savetxt_writer(target)[:-1] + ", '')"
    cell = FINALIZER_ROUTES[route].format(writer7=writer7)
    if host == "resets_the_namespace":
        cell = cell.replace("del cycle\n", "kept = cycle.pop(0)\ndel cycle\n")
    result = run_cell_in_child(cell, report=("status", "ename"), probe=HOST_FREES[host])
    assert "crashed" not in result, result
    assert result["status"] == "ok", result
    assert not target.exists(), f"the host's garbage collector ran the cell's close() unconfined: {result}"
