"""The end of a raw-memory attack, shared by the attack files.

A cell prefix defines view(address, count) (a writable uint64 numpy view of any address, if the sandbox
let the attack build one) and sets made. The two tails then use it: overwrite the host's math.tau, or
go all the way (the real builtins dict -> exec -> os.system). The helpers run them in a child process and
assert that nothing happened.
"""
from __future__ import annotations

from childcell import run_cell_in_child

OVERWRITE_TAU = """\
if made:
    t[0] = 0x4008000000000000
ok_made = math.tau == 3.0
"""

FULL_ESCAPE = """\
if made:
    def rd(a):
        return int(view(a, 1)[0])
    def wr(a, v):
        view(a, 1)[0] = v
    L = [None]
    b = rd(id(json.dumps) + 24)          # a Python function's func_builtins: the real builtins dict
    wr(b, rd(b) + 1000)
    wr(rd(id(L) + 24), b)
    L[0]['exec']("import sandbox_kernel.confine as c\\nc._FS.set(None)\\nimport os\\nos.system('echo PWNED > MARKER')", {})
"""


def assert_no_raw_view(prefix: str, what: str, tail: str = OVERWRITE_TAU) -> None:
    """The cell could not build its view, and the host's math.tau is intact."""
    result = run_cell_in_child(prefix + tail, ns=("ok_made", "made"), hard_exit=True,
                               report=("status", "ename"), timeout=60)
    assert "crashed" not in result and result.get("ok_made") is False and result.get("made") is False, \
        f"{what} ({result})"


def assert_no_full_escape(prefix: str, tmp_path, tail: str = FULL_ESCAPE) -> None:
    """os.system never ran, and either the attempt was refused (a denial recorded) or the raw protocol
    was simply absent (numpy made no view: the sink on `object` answers "absent", which is no refusal)."""
    marker = tmp_path / "pwned.txt"
    result = run_cell_in_child(prefix + tail.replace("MARKER", str(marker)), hard_exit=True, ns=("made",),
                               report=("status", "ename", "denials"), timeout=60)
    assert not marker.exists(), f"os.system ran ({result})"
    assert result.get("denials") or result.get("made") is False, result
