"""Must-block: host paths outside the working directory do not reach the cell's output (module reprs)."""
from __future__ import annotations

import sys

import pytest


@pytest.mark.parametrize("src", ["import numpy as np\nnp", "import numpy as np\nprint(np.lib)",
                                 "import json\nprint(repr(json))", "import json\ndisplay(json)",
                                 "import json\nraise ValueError(repr(json))"])
def test_module_repr_hides_host_paths(run, src):
    r = run(src)
    assert r.ok or "raise" in src, r
    assert sys.prefix not in r.everything and sys.base_prefix not in r.everything, r
    assert "<python>" in r.everything or "<site-packages>" in r.everything, r


def test_error_messages_hide_installation_paths(run):
    r = run("import numpy as np\nnp.load('missing.npy')")
    assert not r.ok
    assert sys.prefix not in r.everything, r


# ====================================================================================================
# From review round 8: against the mechanisms of the second session
# (the C fast paths, the per-function own-instance flag, the stand-ins for numpy arrays, decimal contexts,
# deque and C iterators, the bounded numpy allocator, and the scrubbing of host paths from output).
# ====================================================================================================

# --- 9. host paths in output ------------------------------------------------------------------------------

def _host_prefixes():
    return {p for p in (sys.prefix, sys.base_prefix) if p and len(p) > 1}


@pytest.mark.parametrize("src", [
    "import numpy as np\ngetattr(np, '_' + repr(np))",
    "import numpy as np\nclass J:\n    def _repr_json_(self):\n        return {'p': repr(np)}\nJ()",
    "import numpy as np\nresult = {'chart': {'data': [{'type': 'bar', 'x': [repr(np)], 'y': [1]}]}}",
])
def test_host_paths_never_reach_structured_output(run, src):
    r = run(src)
    for prefix in _host_prefixes():
        assert prefix not in r.everything, r


@pytest.mark.xfail(strict=True, reason=(
    "BYPASS R8-9: cells can read host paths as strings (repr(module), np.get_include()); scrubbing "
    "output for the literal path cannot stop the cell printing it reversed or encoded"))
@pytest.mark.parametrize("src", [
    "import numpy as np\nprint(repr(np)[::-1])",
    "import numpy as np\nprint(np.get_include()[::-1])",
])
def test_host_paths_are_not_readable_by_cells(run, src):
    r = run(src)
    for prefix in _host_prefixes():
        assert prefix[::-1] not in r.everything, r


def test_module_repr_is_scrubbed_in_plain_output(run):
    r = run("import numpy as np\nprint(repr(np))\nnp")
    assert r.ok, r
    for prefix in _host_prefixes():
        assert prefix not in r.everything, r
