"""Child runner for test_review17: runs cells (JSON list on stdin) in one engine, prints a JSON report."""
import json, os, sys, types
os.environ["HOST_SECRET_ENV"] = "envsecret-abc123"
m = types.ModuleType("host_secret"); m.SECRET = "modsecret-def456"; sys.modules["host_secret"] = m
sys.path.insert(0, "/work/main")
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS, Limits
req = json.load(sys.stdin)
os.makedirs(req["workdir"], exist_ok=True)
e = Engine(PRESETS[req.get("policy", "data-science")], workdir=req["workdir"])
for src in req.get("setup") or ():
    e.run_cell(src, emit=lambda ev: None)
results = []
for src in req["cells"]:
    ev = []
    kw = {}
    if req.get("limits"):
        kw["limits"] = Limits(**req["limits"])
    done = e.run_cell(src, emit=ev.append, **kw)
    text = []
    for x in ev:
        if x["type"] == "stream": text.append(x["text"])
        elif x["type"] in ("result", "display"): text.append(str(x["data"].get("text/plain")))
        elif x["type"] == "error": text.append("ERR %s: %s\n" % (x["ename"], x["evalue"]))
    results.append({"status": done.get("status"), "elapsed_ms": done.get("elapsed_ms"), "out": "".join(text)})
probe = req.get("probe")
extra = None
if probe:
    g = {"engine": e}
    exec(probe, g)
    extra = g.get("RESULT")
print("@@REPORT@@" + json.dumps({"cells": results, "probe": extra}, default=repr))
