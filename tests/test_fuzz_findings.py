"""What the generated attacks (tests/test_fuzz_attacks.py, scripts/fuzz.py) found.

Each test is the real attack, minimised from the fuzzer's cell, asserting that it failed and that nothing
happened. An unfixed one is a strict xfail, so CI fails the day the sandbox fixes it: then drop the mark,
and its entry in tests/fuzz_oracles.py KNOWN_FINDINGS (which lets the fuzzer count the same breach as
known, not new).

  F1  (lesser; fixed with N2-5 in 3ba18e3, kept as a regression test) `typing.dataclass_transform(...)
      (module)` wrote `__dataclass_transform__`, with objects of the cell's choosing, into a granted
      module's dict in the host.
  F2  (lesser when found, fixed: review 9 showed it a full escape, N9-7) a granted library starts a process: scipy's `differential_evolution(...,
      workers=2)` makes a multiprocessing pool, whose resource tracker (`python -c "from
      multiprocessing.resource_tracker import main ..."`) is started through `_posixsubprocess.fork_exec`,
      which raises no audit event, before the pool itself is refused. The command is multiprocessing's own,
      not the cell's; the process outlives the cell. At the worker levels seccomp refuses it.
  F3  (FULL ESCAPE at level `none`: raw memory read and write in the kernel's process) a str subclass
      that compares unequal while the sandbox checks a class namespace's names and equal when numpy looks
      the name up (its hash is the real name's) plants `__array_interface__` in a class through enum's
      functional API: `confine._guard_enum_namespace` (`key in _ARRAY_INTERFACE_NAMES`) and the class
      creation check both compare with ==, and the name lands in the class dict. `np.asarray(member)`
      then lays an array over any address. Found while judging a fuzzer report (an unhashable key at
      confine.py's enum guard); the grammar now has such names (`Late`). Closed: a class namespace made while
      a cell runs takes plain str keys only (gates._class_denial, confine's enum guard).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def test_dataclass_transform_does_not_write_a_granted_module(run):
    assert "__dataclass_transform__" not in vars(numpy)
    try:
        r = run("import typing, numpy as np\n"
                "class Mine:\n"
                "    pass\n"
                "typing.dataclass_transform(field_specifiers=(Mine(),))(np)")
        assert "__dataclass_transform__" not in vars(numpy), "the host's numpy module was written"
        assert not r.ok and r.denials, r
    finally:
        vars(numpy).pop("__dataclass_transform__", None)


# Run in a fresh interpreter: a resource tracker this test process already has would hide a new one.
_SPAWN_PROBE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from fuzz_oracles import child_processes
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
work = sys.argv[2]
events = []
done = Engine(PRESETS["data-science"], workdir=work).run_cell(
    "import scipy.optimize\n"
    "scipy.optimize.differential_evolution(lambda x: 0.0, [(0, 1)], workers=2, maxiter=1)",
    emit=events.append)
started = child_processes()
for pid, _ in started:
    os.kill(pid, 9)
print(json.dumps({"status": done["status"], "denials": done["denials"], "started": started}))
"""


def test_library_starts_multiprocessing_resource_tracker(tmp_path):
    """F2 (lesser when found; review 9 made it a full escape, N9-7): differential_evolution(workers=2) started
    multiprocessing's resource tracker through _posixsubprocess.fork_exec, which raises no audit event; the
    function itself is guarded now (confine._guard_fork_exec)."""
    proc = subprocess.run([sys.executable, "-c", _SPAWN_PROBE, HERE, str(tmp_path)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["status"] == "error" and report["denials"], report
    assert report["started"] == [], f"processes were started: {report['started']}"


# A fresh interpreter: the attack writes the kernel process's memory (math.tau's value), which a test run
# must not keep. AFTER is how many comparisons the name survives unequal before it turns equal.
_LATE_NAME_CELL = """
import enum, math
import numpy as np
IFACE = {"shape": (1,), "typestr": "<f8", "data": (id(math.tau) + 16, False), "version": 3}
class Late(str):
    def __eq__(self, other):
        Late.compared.append(1)
        return len(Late.compared) > AFTER and str.__eq__(self, other)
    def __hash__(self):
        return str.__hash__(self)
Late.compared = []
E = enum.Enum("E", [("A", 1), (Late("__array_interface__"), IFACE)])
np.asarray(E.A)[0] = 3.0
"""
_LATE_NAME_PROBE = r"""
import json, math, sys
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
engine = Engine(PRESETS["data-science"], workdir=sys.argv[2])
outcomes = []
for after in range(8):
    done = engine.run_cell(sys.argv[1].replace("AFTER", str(after)), emit=lambda event: None)
    outcomes.append([after, done["status"], (done["error"] or {}).get("ename")])
print(json.dumps({"tau": math.tau, "outcomes": outcomes}))
"""


def test_late_equal_name_plants_a_raw_array_protocol_through_enum(tmp_path):
    proc = subprocess.run([sys.executable, "-c", _LATE_NAME_PROBE, _LATE_NAME_CELL, str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["tau"] == 6.283185307179586, f"the host's memory was written: {report}"
    assert all(status == "error" for _, status, _ in report["outcomes"]), report
