"""bench/run.py works: a minimal invocation produces the documented JSON shape. Never asserts timing."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "bench", "run.py")


def test_bench_quick_json_shape(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--only", "loop_arith,json_roundtrip", "--modes", "plain,engine",
         "--reps", "1", "--trivial-reps", "2", "--scale", "0.05", "--json", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(out.read_text())

    assert set(data) >= {"meta", "workloads", "geomean", "trivial"}
    meta = data["meta"]
    for key in ("python", "cpu_count", "reps", "scale", "modes", "timing"):
        assert key in meta
    assert meta["modes"]["plain"]["available"] is True
    assert meta["modes"]["engine"]["available"] is True

    assert set(data["workloads"]) == {"loop_arith", "json_roundtrip"}
    for name, w in data["workloads"].items():
        assert w["set"] in ("pure", "library")
        for mode in ("plain", "engine"):
            assert len(w["times_ms"][mode]) == 1
            assert isinstance(w["median_ms"][mode], (int, float))
        assert isinstance(w["ratio_vs_plain"]["engine"], (int, float))
        assert w["same_result_as_plain"] == {"engine": True}, w
        assert not w["errors"] and not w["setup_error"]

    assert data["workloads"]["loop_arith"]["set"] == "pure"
    assert set(data["geomean"]) == {"pure", "library"}
    for g in data["geomean"].values():
        assert isinstance(g["vs_plain"]["engine"], (int, float))
        assert "target" in g["target"]
    assert set(data["trivial"]["median_ms"]) == {"plain", "engine"}
