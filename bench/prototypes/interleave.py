"""All prototype configurations in ONE process, interleaved round-robin with plain CPython.

The prototypes (the first session's profiling; docs/performance.md) are switches in a patched COPY of sandbox_kernel; the
engine's own files are not touched:

    mkdir /tmp/proto && cp -r sandbox_kernel /tmp/proto/
    (cd /tmp/proto && patch -p3 < $REPO/bench/prototypes/perf-prototypes.diff)
    PROTO_ROOT=/tmp/proto python bench/prototypes/interleave.py 7 [workload,workload...]

Switches (unsafe ones are for measurement only): modkey plainpure boundfirst supercache (cache fixes),
augfast mulspec mulfast (one-call augattr, `*` closure), fastself fastparam (unchecked reads of cell
instances), notick nobinop (measurement only). The diff was made against the working tree of
2026-11-26 00:00 UTC and may need small fixes to apply to later versions.
"""
import sys, os, time, json, statistics, tempfile, math
ROOT = os.environ.get("PROTO_ROOT", "/tmp/proto2")
sys.path.insert(0, ROOT); sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from workloads import WORKLOADS, CALL, setup_source
import sandbox_kernel.gates as G
import sandbox_kernel.rewriter as R
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
assert G.__file__.startswith(ROOT), "set PROTO_ROOT to a patched copy"

CACHES = "modkey,plainpure,boundfirst,supercache"
CONFIGS = {
    "A current": "",
    "T no ticks (measure only)": "notick",
    "B no * gate (measure only)": "nobinop",
    "C cache fixes": CACHES,
    "D C + augattr/mul fast": CACHES + ",augfast,mulspec,mulfast",
    "E D + fast self": CACHES + ",augfast,mulspec,mulfast,fastself",
    "F D + fast params": CACHES + ",augfast,mulspec,mulfast,fastparam",
}
ORIG_AUG = G.Gates.augattr

def apply(flags):
    fl = set(filter(None, flags.split(",")))
    G.PROTO.clear(); G.PROTO.update(fl); R.PROTO.clear(); R.PROTO.update(fl)
    G._MODKEY = "modkey" in fl; G._PLAINPURE = "plainpure" in fl; G._BOUNDFIRST = "boundfirst" in fl
    G._SUPERCACHE = "supercache" in fl
    G.Gates.augattr = G.Gates.augattr_fast if "augfast" in fl else ORIG_AUG

reps = int(sys.argv[1]) if len(sys.argv) > 1 else 7
only = sys.argv[2].split(",") if len(sys.argv) > 2 else list(WORKLOADS)
engines = {}
for name, flags in CONFIGS.items():
    apply(flags)
    engines[name] = Engine(PRESETS["data-science"], workdir=tempfile.mkdtemp())
res = {}
for w in only:
    src = setup_source(w)
    ns = {"__name__": "__main__"}
    exec(compile(src, "<s>", "exec"), ns); code = compile(CALL, "<c>", "exec"); exec(code, ns)
    for name, flags in CONFIGS.items():
        apply(flags); ev = []
        d = engines[name].run_cell(src, emit=ev.append); assert d["status"] == "ok", (w, name, d["error"])
        d = engines[name].run_cell(CALL, emit=ev.append); assert d["status"] == "ok", (w, name, d["error"])
        assert engines[name].namespace["_bench_result"] == ns["_bench_result"], (w, name)
    times = {k: [] for k in ["plain", *CONFIGS]}
    order = list(times)
    for rep in range(reps):
        rot = order[rep % len(order):] + order[:rep % len(order)]
        for k in rot:
            if k == "plain":
                t = time.perf_counter(); exec(code, ns); times[k].append(time.perf_counter() - t)
            else:
                apply(CONFIGS[k]); ev = []
                t = time.perf_counter(); d = engines[k].run_cell(CALL, emit=ev.append); times[k].append(time.perf_counter() - t)
                assert d["status"] == "ok"
    med = {k: statistics.median(v) for k, v in times.items()}
    mn = {k: min(v) for k, v in times.items()}
    res[w] = {"set": WORKLOADS[w]["set"], "median_ms": {k: v * 1000 for k, v in med.items()},
              "ratio": {k: med[k] / med["plain"] for k in CONFIGS}, "ratio_min": {k: mn[k] / mn["plain"] for k in CONFIGS}}
    print(f"{w:16s} " + " ".join(f"{res[w]['ratio'][k]:6.2f}" for k in CONFIGS), flush=True)
geo = {}
for s in ("pure", "library"):
    ws = [r for r in res.values() if r["set"] == s]
    if ws:
        geo[s] = {k: math.exp(sum(math.log(r["ratio"][k]) for r in ws) / len(ws)) for k in CONFIGS}
        geo[s + "_min"] = {k: math.exp(sum(math.log(r["ratio_min"][k]) for r in ws) / len(ws)) for k in CONFIGS}
        print(f"{'geo ' + s:16s} " + " ".join(f"{geo[s][k]:6.2f}" for k in CONFIGS))
        print(f"{'geo ' + s + ' min':16s} " + " ".join(f"{geo[s + '_min'][k]:6.2f}" for k in CONFIGS))
print("configs:", list(CONFIGS))
json.dump({"configs": CONFIGS, "workloads": res, "geomean": geo, "reps": reps,
           "loadavg": os.getloadavg()}, open(os.environ.get("OUT", "interleave.json"), "w"), indent=1)
