"""One allocation past the limit: a single C call of the interpreter, a library or a C library's own allocator
builds gigabytes at once, before the memory sampler looks again (`str.expandtabs`, `re.sub('', ...)`, `split`,
`unicodedata.normalize`, pandas' `.str.pad`/`cat` calling str's methods from its own code, `hashlib.scrypt`'s OpenSSL
work memory). Each must be refused before C allocates, reported as the memory limit (or the size gate).

Sink: docs/security.md, "Inventory of sinks", row *one allocation past the limit*. The attacks come from the
independent reviews at level none (docs/reviews.md): review 4 (N4-13), review 5 (N5-4), review 8 (N8-4).
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child

# From review 4 (docs/reviews.md, "Review 4").
# --- N4-13: str.expandtabs is estimated by its tab size, not by tabs x tab size ----------------------------------
# The padding gate refuses expandtabs(n) when n alone is too large; a string of many tabs multiplies it. At the
# data-science policy's 2048 MB (one step may build 2 GB), 100 tabs x 300,000,000 is 30 GB that C allocates
# and fills at once: the memory sampler (every 50 ms) cannot stop it, and at level none there is no RLIMIT_AS.

EXPANDTABS_CELLS = {   # cell, the policy's memory limit (MB), the child's RLIMIT_AS (GB)
    "str": ("s = ('\\t' * 100).expandtabs(300000000)\n", 2048, 8),
    "bytes": ("s = (b'\\t' * 100).expandtabs(300000000)\n", 2048, 8),
    "re_sub_empty_pattern": ("import re\ns = re.sub('', 'x' * 1000000, 'a' * 10000)\n", 2048, 8),
    "str_split": ("s = 'ab ' * 60000000\nparts = s.split()\n", 512, 2),
    "str_splitlines": ("s = 'ab\\n' * 60000000\nparts = s.splitlines()\n", 512, 2),
    "unicodedata_normalize": ("import unicodedata\ns = unicodedata.normalize('NFKD', '\\ufdfa' * 30000000)\n", 512, 2),
}


SIZED_NOW = ("str", "bytes")   # expandtabs: estimated as len + tabs x tab size since this review


@pytest.mark.parametrize("route", sorted(EXPANDTABS_CELLS))
def test_expandtabs_is_sized_by_tabs_times_tab_size(route):
    """FINDING N4-13, fixed: expandtabs by the size gate; re.sub, split, splitlines and normalize by the bound
    on the interpreter's large allocations (_numpyguard.c: refused before C allocates, whatever code asks)."""
    cell, memory_mb, address_space_gb = EXPANDTABS_CELLS[route]
    result = run_cell_in_child(cell, limits={"timeout": 30, "memory_mb": memory_mb},
                               rlimits={"RLIMIT_AS": address_space_gb << 30}, report=("status", "ename", "evalue"),
                               timeout=120)
    if route in SIZED_NOW:
        assert result.get("ename") == "SizeDenied", result
    else:
        assert result.get("ename") == "MemoryLimitExceeded" and "refused before it was made" in result["evalue"], \
            result


# From review 5 (docs/reviews.md, "Review 5").
# --- N5-4: pandas' .str accessor pads and joins past the size gates ---------------------------------------------
# The padding gate estimates the cell's own str.center/ljust/zfill/expandtabs calls; pandas calls the same
# methods from its own code (lib.map_infer over the values) and joins with sep in Python, where no gate looks.

STR_SIZES = {
    "pad_wide_fill": "s = pd.Series(['a']).str.pad(3_000_000_000, fillchar='\\U0001F600')\n",
    "center": "s = pd.Series(['a']).str.center(3_000_000_000)\n",
    "zfill": "s = pd.Series(['a']).str.zfill(3_000_000_000)\n",
    "cat_sep": "s = pd.Series(['a' * 1000] * 1000).str.cat(sep='x' * 10_000_000)\n",
}


# FINDING N5-4, fixed: the interpreter's large allocations are bounded while a cell runs (_numpyguard.c), so
# pandas' own calls of str's methods are refused before C allocates.
@pytest.mark.parametrize("route", sorted(STR_SIZES))
def test_pandas_string_accessor_sizes_are_estimated(route):
    result = run_cell_in_child("import pandas as pd\n" + STR_SIZES[route],
                               limits={"timeout": 5.0, "ticks": 10**8, "memory_mb": 256},
                               rlimits={"RLIMIT_AS": 4 << 30}, report=("status", "ename", "evalue"), timeout=180)
    assert result.get("ename") == "MemoryLimitExceeded" and "refused before it was made" in result["evalue"], result


# From review 8 (docs/reviews.md, "Review 8").
# --- N8-4 (lesser): memory allocated by a C library's own allocator (OpenSSL via hashlib.scrypt) ------------------

# The child's peak resident memory, less what it had before the engine ran its first cell (the engine and the
# libraries imported, their bytecode compiled: a fresh checkout compiles it in whichever child imports it first, which
# moved the absolute peak past the bound on a loaded CI run). The probe's top level runs after those imports.
MAXRSS_BEFORE = "import resource as _r\n_PEAK_BEFORE = _r.getrusage(_r.RUSAGE_SELF).ru_maxrss\n"
MAXRSS = ("import resource\nreport['maxrss_mb'] = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - _PEAK_BEFORE)"
          " // 1024")


def test_without_scrypt_the_child_stays_small():
    result = run_cell_in_child("x = 1\n", limits={"memory_mb": 256, "timeout": 60.0}, report=("status",),
                               probe=MAXRSS_BEFORE + "def probe_host(report):\n" + "\n".join("    " + l for l in MAXRSS.splitlines()),
                               hard_exit=True)
    assert result["maxrss_mb"] < 700, result


def test_scrypt_work_memory_is_bounded_by_the_memory_limit():
    cell = "import hashlib\nk = hashlib.scrypt(b'x', salt=b'y', n=2**20, r=8, p=1, maxmem=2**31 - 1, dklen=8)\n"
    result = run_cell_in_child(cell, limits={"memory_mb": 256, "timeout": 60.0}, report=("status", "ename"),
                               probe=MAXRSS_BEFORE + "def probe_host(report):\n" + "\n".join("    " + l for l in MAXRSS.splitlines()),
                               hard_exit=True, timeout=120)
    assert result["ename"] == "MemoryLimitExceeded" or result["maxrss_mb"] < 700, result


# From review 9 (docs/reviews.md, "Review 9").
# --- N9-4 (lesser): C++ allocations inside one library call -----------------------------------------------------
# cKDTree.query_pairs filled a C++ std::vector (operator new, not Python's raw allocator) with n**2/2 pairs in one C
# call: 2.1 GB resident under a 256 MB limit before the limit looked. The pairs are counted first (count_neighbors
# keeps none) and a result that cannot fit is refused before the call, read from the instance or the class, and
# through scipy's Python KDTree.

@pytest.mark.parametrize("call", ["cKDTree(np.zeros((12000, 2))).query_pairs(1.0, output_type='ndarray')",
                                  "cKDTree.query_pairs(cKDTree(np.zeros((12000, 2))), 1.0)",
                                  "KDTree(np.zeros((12000, 2))).query_pairs(0.5, eps=1.0)"])
def test_kdtree_pairs_meet_the_memory_limit(call):
    cell = f"import numpy as np\nfrom scipy.spatial import cKDTree, KDTree\np = {call}\n"
    result = run_cell_in_child(cell, limits={"timeout": 30.0, "ticks": 10**8, "memory_mb": 256},
                               report=("status", "ename", "evalue"), hard_exit=True, timeout=120,
                               probe=MAXRSS_BEFORE + "def probe_host(report):\n" + "\n".join("    " + l for l in MAXRSS.splitlines()))
    assert "crashed" not in result, result
    assert result["ename"] == "SizeDenied" and "query_pairs" in result["evalue"], result
    assert result["maxrss_mb"] < 1024, result   # the limit's 256 MB plus the interpreter and libraries


def test_kdtree_pairs_that_fit_are_found(run):
    r = run("import numpy as np\nfrom scipy.spatial import cKDTree, KDTree\n"
            "pts = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.05, 5.0]])\n"
            "print(sorted(cKDTree(pts).query_pairs(0.2)), KDTree(pts).query_pairs(0.2, output_type='ndarray').tolist())")
    assert r.ok and r.stdout == "[(0, 1), (2, 3)] [[0, 1], [2, 3]]\n", r
