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
