#!/usr/bin/env python
"""Overhead of the sandbox versus plain CPython and stock ipykernel, in one interleaved run.

    python bench/run.py                 # full run (about 10-15 minutes on 2 cores)
    python bench/run.py --quick         # fewer repetitions, quarter-size workloads (< 60 s)
    python bench/run.py --json out.json --only loop_arith,oop_attrs --modes plain,engine

Modes (each skipped with a note when it cannot run):
  plain           ``exec`` of the same sources in this process (the baseline)
  engine          ``Engine(PRESETS["data-science"]).run_cell`` in this process, every limit of the
                  policy active (ticks, wall time with its SIGALRM, memory sampling, output cap)
  ipykernel       stock IPython kernel (kernelspec ``python3``) via jupyter_client, execute round trip
  sandbox_kernel  the "Sandboxed Python" kernel (kernelspec ``sandboxed-python``), execute round trip
  process/kernel  ``sandbox_kernel.isolation.make_backend(level, ...)`` run_cell, in this process's view

Every workload (bench/workloads.py) has an untimed setup cell that defines data and ``run()``, and the
timed cell ``_bench_result = run()``. For the engine and the backends the timed part is the *whole*
``run_cell`` of that one-line cell (parse, rewrite, compile, arming the limits, running, the done
record); nothing is subtracted. For kernels it is the client-side time from sending execute_request to
having both the execute_reply and the iopub ``idle`` status. Before each in-process run
(plain, engine) the bench process runs ``gc.collect()``, so that a full collection of a heap holding
both namespaces does not land at random in one mode's timing (kernels and workers collect on their own
schedule, which is part of their figures). Repetitions are round-robin over
(workload, mode) with the mode order rotated each round; each figure is the median (the minimum, a cross-check that is less sensitive to other load on
the machine, is in the JSON as ``min_ms`` / ``ratio_vs_plain_min``).
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from workloads import CALL, LIBRARY, PURE, TRIVIAL, WORKLOADS, setup_source  # noqa: E402

ALL_MODES = ("plain", "engine", "ipykernel", "sandbox_kernel", "process", "kernel")
TARGETS = {PURE: {"target": 2.0, "stretch": 1.3}, LIBRARY: {"target": 1.1}}
KERNEL_TIMEOUT = 120.0


# ------------------------------------------------------------------------------------------------
# Runners: setup(name, source) -> None; run(source) -> (seconds, ok, error text); result() -> repr
# ------------------------------------------------------------------------------------------------

class Skip(Exception):
    """A mode that cannot run here; the message says why."""


class PlainRunner:
    mode = "plain"

    def __init__(self, workdir):
        self.ns: dict = {}
        self.workdir = workdir

    def setup(self, source):
        self.ns = {"__name__": "__main__"}
        exec(compile(source, "<bench-setup>", "exec"), self.ns)  # noqa: S102 - the benchmark's own sources

    def run(self, source):
        code = compile(source, "<bench>", "exec")
        gc.collect()
        t0 = time.perf_counter()
        exec(code, self.ns)  # noqa: S102
        return time.perf_counter() - t0, True, None

    def trivial(self):
        code = compile(TRIVIAL, "<bench>", "eval")
        t0 = time.perf_counter()
        eval(code, self.ns)  # noqa: S307
        return time.perf_counter() - t0, True, None

    def result(self):
        return repr(self.ns.get("_bench_result"))

    def close(self):
        pass


class EngineRunner:
    """The engine (or an isolation backend, which offers the same run_cell) driven in-process."""

    def __init__(self, mode, workdir):
        from sandbox_kernel.policy import PRESETS

        self.mode = mode
        self.policy = PRESETS["data-science"]
        self.workdir = workdir
        self.last_ticks = None
        if mode == "engine":
            from sandbox_kernel.engine import Engine

            self.backend = Engine(self.policy, workdir=workdir)
        else:
            from sandbox_kernel.isolation import make_backend

            try:
                self.backend = make_backend(mode, self.policy, workdir=workdir)
            except NotImplementedError as exc:
                raise Skip(f"make_backend({mode!r}) raised NotImplementedError: {exc}") from None
            except Exception as exc:  # noqa: BLE001 - any failure to start is reported, not fatal
                raise Skip(f"make_backend({mode!r}) failed: {type(exc).__name__}: {exc}") from None
            t0 = time.perf_counter()
            _, ok, err = self._cell("pass")
            if not ok:
                raise Skip(f"{mode}: first cell failed: {err}")
            self.first_cell_s = time.perf_counter() - t0

    def _cell(self, source):
        events: list = []
        t0 = time.perf_counter()
        done = self.backend.run_cell(source, emit=events.append)
        elapsed = time.perf_counter() - t0
        ok = isinstance(done, dict) and done.get("status") == "ok"
        err = None
        if not ok:
            e = (done or {}).get("error") or {}
            err = f"{e.get('ename')}: {e.get('evalue')}" if e else repr(done)[:300]
        if isinstance(done, dict):
            self.last_ticks = done.get("ticks")
        return elapsed, ok, err

    def setup(self, source):
        if self.mode == "engine":
            self.backend.reset()   # one workload's data at a time in this process's heap, as for plain
        _, ok, err = self._cell(source)
        if not ok:
            raise RuntimeError(f"setup failed: {err}")

    def run(self, source):
        gc.collect()   # this process's collector; a worker's heap is its own
        return self._cell(source)

    def trivial(self):
        return self._cell(TRIVIAL)

    def result(self):
        events: list = []
        self.backend.run_cell("repr(_bench_result)", emit=events.append)
        for e in events:
            if e.get("type") == "result":
                text = e["data"].get("text/plain", "")
                try:
                    import ast

                    return ast.literal_eval(text)
                except (ValueError, SyntaxError):
                    return text
        return None

    def close(self):
        shutdown = getattr(self.backend, "shutdown", None)
        if shutdown is not None:
            try:
                shutdown()
            except Exception:  # noqa: BLE001
                pass


class KernelRunner:
    """A Jupyter kernel started through jupyter_client; times execute round trips."""

    def __init__(self, mode, kernel_name, workdir):
        self.mode = mode
        try:
            from jupyter_client import KernelManager
            from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
        except ImportError as exc:
            raise Skip(f"jupyter_client is not installed: {exc}") from None
        try:
            KernelSpecManager().get_kernel_spec(kernel_name)
        except NoSuchKernel:
            raise Skip(f"kernelspec {kernel_name!r} is not installed") from None
        self.km = KernelManager(kernel_name=kernel_name)
        try:
            t0 = time.perf_counter()
            self.km.start_kernel(cwd=workdir, stderr=subprocess.DEVNULL)
            self.kc = self.km.client()
            self.kc.start_channels()
            self.kc.wait_for_ready(timeout=60)
            self.startup_s = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001
            self.close()
            raise Skip(f"kernel {kernel_name!r} did not start: {type(exc).__name__}: {exc}") from None
        _, ok, err = self._execute("pass")
        if not ok:
            self.close()
            raise Skip(f"kernel {kernel_name!r}: first cell failed: {err}")

    def _execute(self, source, user_expressions=None):
        kc = self.kc
        t0 = time.perf_counter()
        msg_id = kc.execute(source, store_history=False, user_expressions=user_expressions or {})
        reply = None
        idle = False
        error = None
        deadline = time.monotonic() + KERNEL_TIMEOUT
        while reply is None:
            msg = kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") == msg_id:
                reply = msg
        while not idle:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and msg["content"].get("execution_state") == "idle":
                idle = True
            elif kind == "error":
                error = f"{msg['content'].get('ename')}: {msg['content'].get('evalue')}"
        elapsed = time.perf_counter() - t0
        ok = reply["content"].get("status") == "ok" and error is None
        if not ok and error is None:
            c = reply["content"]
            error = f"{c.get('ename')}: {c.get('evalue')}"
        self._last_reply = reply
        return elapsed, ok, error

    def setup(self, source):
        try:
            _, ok, err = self._execute(source)
        except queue.Empty:
            raise RuntimeError("setup timed out") from None
        if not ok:
            raise RuntimeError(f"setup failed: {err}")

    def run(self, source):
        try:
            return self._execute(source)
        except queue.Empty:
            return KERNEL_TIMEOUT, False, "timed out"

    def trivial(self):
        return self.run(TRIVIAL)

    def result(self):
        try:
            _, ok, _ = self._execute("pass", user_expressions={"r": "repr(_bench_result)"})
        except queue.Empty:
            return None
        r = self._last_reply["content"].get("user_expressions", {}).get("r", {})
        text = (r.get("data") or {}).get("text/plain")
        if text is None:
            return None
        import ast

        try:
            return ast.literal_eval(text)   # the kernel shows repr(repr(x)); unwrap one level
        except (ValueError, SyntaxError):
            return text

    def close(self):
        try:
            self.kc.stop_channels()
        except Exception:  # noqa: BLE001
            pass
        try:
            self.km.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001
            pass


def make_runner(mode, workdir):
    if mode == "plain":
        return PlainRunner(workdir)
    if mode in ("engine", "process", "kernel"):
        return EngineRunner(mode, workdir)
    if mode == "ipykernel":
        return KernelRunner(mode, "python3", workdir)
    if mode == "sandbox_kernel":
        return KernelRunner(mode, "sandboxed-python", workdir)
    raise ValueError(mode)


# ------------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------------

def geomean(values):
    values = [v for v in values if v and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _git_rev():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "sandbox_kernel"],
                               cwd=ROOT, capture_output=True, text=True, timeout=5).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 repetitions, quarter-size workloads (< 60 s)")
    ap.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    ap.add_argument("--only", metavar="NAMES", help="comma-separated workload names")
    ap.add_argument("--modes", metavar="MODES", default=",".join(ALL_MODES),
                    help=f"comma-separated subset of {','.join(ALL_MODES)} (default: all)")
    ap.add_argument("--reps", type=int, help="timed repetitions per workload and mode")
    ap.add_argument("--trivial-reps", type=int, help="repetitions of the trivial cell")
    ap.add_argument("--scale", type=float, help="workload size factor (default 1.0, 0.5 with --quick)")
    ap.add_argument("--no-trivial", action="store_true", help="skip the trivial-cell round trip")
    ap.add_argument("--markdown", metavar="JSON", help="print the Markdown tables of an earlier --json run and exit")
    args = ap.parse_args(argv)
    if args.markdown:
        with open(args.markdown, encoding="utf-8") as fh:
            print(render_markdown(json.load(fh)))
        return 0

    reps = args.reps or (3 if args.quick else 11)
    trivial_reps = args.trivial_reps or (10 if args.quick else 60)
    scale = args.scale or (0.25 if args.quick else 1.0)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(WORKLOADS)
    for n in names:
        if n not in WORKLOADS:
            ap.error(f"unknown workload {n!r}; choose from {', '.join(WORKLOADS)}")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in ALL_MODES:
            ap.error(f"unknown mode {m!r}; choose from {', '.join(ALL_MODES)}")
    if "plain" not in modes:
        modes.insert(0, "plain")

    started = time.time()
    git_rev = _git_rev()
    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    tmp_root = tempfile.mkdtemp(prefix="sandbox-bench-")
    runners: dict = {}
    mode_info: dict = {}
    try:
        for mode in modes:
            workdir = os.path.join(tmp_root, mode)
            os.makedirs(workdir)
            t0 = time.perf_counter()
            try:
                runners[mode] = make_runner(mode, workdir)
                info = {"available": True, "start_s": round(time.perf_counter() - t0, 3)}
                if hasattr(runners[mode], "first_cell_s"):
                    info["first_cell_s"] = round(runners[mode].first_cell_s, 3)
                mode_info[mode] = info
                log(f"[bench] {mode}: ready in {time.perf_counter() - t0:.2f} s")
            except Skip as exc:
                mode_info[mode] = {"available": False, "note": str(exc)}
                log(f"[bench] {mode}: skipped ({exc})")
        active = [m for m in modes if m in runners]

        # Workload by workload: set it up in every mode (untimed), one warm-up call per mode (fills
        # caches: imports, gate decisions, plotly validators), then `reps` rounds that visit every
        # mode once each (order rotated per round), then an untimed check that the results agree.
        results: dict = {}
        log(f"[bench] {len(names)} workloads x {len(active)} modes x {reps} repetitions (scale {scale:g})")
        for name in names:
            r = results[name] = {"set": WORKLOADS[name]["set"], "what": WORKLOADS[name]["what"],
                                 "times_ms": {}, "errors": {}, "setup_error": {}}
            src = setup_source(name, scale)
            ready = []
            for mode in active:
                try:
                    runners[mode].setup(src)
                    runners[mode].run(CALL)
                    ready.append(mode)
                except Exception as exc:  # noqa: BLE001
                    r["setup_error"][mode] = str(exc)[:300]
                    log(f"[bench] {name}/{mode}: {exc}")
            for rep in range(reps):
                order = ready[rep % len(ready):] + ready[:rep % len(ready)] if ready else []
                for mode in order:
                    seconds, ok, err = runners[mode].run(CALL)
                    if ok:
                        r["times_ms"].setdefault(mode, []).append(round(seconds * 1000, 3))
                    else:
                        r["errors"][mode] = err
                    if mode == "engine":
                        r["engine_ticks"] = runners[mode].last_ticks
            expected = runners["plain"].result() if "plain" in ready else None
            r["same_result_as_plain"] = {m: runners[m].result() == expected for m in ready if m != "plain"}
            med = {m: statistics.median(v) for m, v in r["times_ms"].items()}
            log(f"[bench] {name}: " + "  ".join(f"{m} {v * 1:.1f} ms" for m, v in med.items())
                + f"  ({time.time() - started:.0f} s)")

        trivial: dict = {"source": TRIVIAL, "times_ms": {}}
        if not args.no_trivial:
            for rep in range(trivial_reps):
                order = active[rep % len(active):] + active[:rep % len(active)]
                for mode in order:
                    seconds, ok, err = runners[mode].trivial()
                    if ok:
                        trivial["times_ms"].setdefault(mode, []).append(round(seconds * 1000, 4))
                    else:
                        trivial.setdefault("errors", {})[mode] = err
            trivial["median_ms"] = {m: round(statistics.median(v), 4) for m, v in trivial["times_ms"].items()}
            base = trivial["median_ms"].get("ipykernel")
            trivial["ratio_vs_ipykernel"] = {m: round(v / base, 3) for m, v in trivial["median_ms"].items()
                                             if base and m != "plain"}
    finally:
        for r in runners.values():
            r.close()
        shutil.rmtree(tmp_root, ignore_errors=True)

    # Figures
    for name, r in results.items():
        r["median_ms"] = {m: round(statistics.median(v), 3) for m, v in r["times_ms"].items() if v}
        r["min_ms"] = {m: round(min(v), 3) for m, v in r["times_ms"].items() if v}
        if r["times_ms"]:
            r["spread_pct"] = {m: round(100 * (max(v) - min(v)) / statistics.median(v), 1)
                               for m, v in r["times_ms"].items() if len(v) > 1 and statistics.median(v) > 0}
        plain = r["median_ms"].get("plain")
        ipy = r["median_ms"].get("ipykernel")
        r["ratio_vs_plain"] = {m: round(v / plain, 3) for m, v in r["median_ms"].items() if plain and m != "plain"}
        r["ratio_vs_ipykernel"] = {m: round(v / ipy, 3) for m, v in r["median_ms"].items()
                                   if ipy and m not in ("plain", "ipykernel")}
        best = r["min_ms"].get("plain")
        r["ratio_vs_plain_min"] = {m: round(v / best, 3) for m, v in r["min_ms"].items() if best and m != "plain"}
    geo: dict = {}
    for group in (PURE, LIBRARY):
        members = [r for r in results.values() if r["set"] == group]
        if not members:
            continue
        g = {"workloads": len(members), "vs_plain": {}, "vs_ipykernel": {}, "vs_plain_min": {}}
        for mode in active:
            if mode == "plain":
                continue
            ratios = [r["ratio_vs_plain"].get(mode) for r in members]
            if all(ratios):
                g["vs_plain"][mode] = round(geomean(ratios), 3)
            ratios = [r["ratio_vs_plain_min"].get(mode) for r in members]
            if all(ratios):
                g["vs_plain_min"][mode] = round(geomean(ratios), 3)
            ratios = [r["ratio_vs_ipykernel"].get(mode) for r in members]
            if mode != "ipykernel" and all(ratios):
                g["vs_ipykernel"][mode] = round(geomean(ratios), 3)
        eng = g["vs_plain"].get("engine")
        t = TARGETS[group]
        g["target"] = t
        if eng is not None:
            g["engine_meets_target"] = eng <= t["target"]
            if "stretch" in t:
                g["engine_meets_stretch"] = eng <= t["stretch"]
        geo[group] = g

    out = {
        "meta": {
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "python": platform.python_version(),
            "implementation": platform.python_implementation(),
            "platform": platform.platform(),
            "cpu_count": os.cpu_count(),
            "git": git_rev,
            "loadavg_1_5_15": {"start": load_before,
                               "end": os.getloadavg() if hasattr(os, "getloadavg") else None},
            "quick": args.quick,
            "reps": reps,
            "trivial_reps": trivial_reps,
            "scale": scale,
            "policy": "data-science",
            "timed_cell": CALL.replace("run()", "run_<workload>()"),
            "timing": "engine/backends: whole run_cell of the one-line cell; kernels: execute_request to "
                      "execute_reply + iopub idle; plain: exec of the same cell. Median of round-robin reps.",
            "modes": mode_info,
            "duration_s": round(time.time() - started, 1),
        },
        "workloads": results,
        "geomean": geo,
        "trivial": trivial,
    }
    print(render_table(out))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1, sort_keys=False)
    return 0


def render_table(out) -> str:
    results = out["workloads"]
    modes = [m for m in ALL_MODES if out["meta"]["modes"].get(m, {}).get("available")]
    lines = []
    head = f"{'workload':16s} {'set':7s}" + "".join(f"{m + ' ms':>18s}" for m in modes)
    head += "  eng/plain  sbk/ipyk  same"
    lines.append(head)
    for name, r in results.items():
        row = f"{name:16s} {r['set']:7s}"
        for m in modes:
            v = r["median_ms"].get(m)
            row += f"{v:18.1f}" if v is not None else f"{'-':>18s}"
        ep = r["ratio_vs_plain"].get("engine")
        sk = r["ratio_vs_ipykernel"].get("sandbox_kernel")
        row += f"  {ep:9.2f}" if ep else f"  {'-':>9s}"
        row += f"  {sk:8.2f}" if sk else f"  {'-':>8s}"
        same = r.get("same_result_as_plain", {})
        row += "  " + ("yes" if same and all(same.values()) else "NO " + ",".join(k for k, v in same.items() if not v)
                       if same else "-")
        lines.append(row)
    for group, g in out["geomean"].items():
        lines.append(f"geomean {group}: vs plain {g['vs_plain']}  vs ipykernel {g['vs_ipykernel']}  target {g['target']}")
    t = out.get("trivial", {})
    if t.get("median_ms"):
        lines.append(f"trivial cell {t['source']!r} median ms: {t['median_ms']}")
    for m, info in out["meta"]["modes"].items():
        if not info.get("available"):
            lines.append(f"skipped {m}: {info.get('note')}")
    for name, r in results.items():
        for m, e in {**r.get("setup_error", {}), **r.get("errors", {})}.items():
            lines.append(f"error {name}/{m}: {e}")
    return "\n".join(lines)


_LABEL = {"plain": "plain", "engine": "engine", "ipykernel": "ipykernel", "sandbox_kernel": "sandboxed kernel",
          "process": "process", "kernel": "kernel"}


def render_markdown(out) -> str:
    """The tables docs/performance.md shows."""
    modes = [m for m in ALL_MODES if out["meta"]["modes"].get(m, {}).get("available")]
    lines = ["| workload | set | " + " | ".join(f"{_LABEL[m]} ms" for m in modes)
             + " | engine / plain | sandboxed kernel / ipykernel | engine / plain (min) |",
             "|---|---|" + "---:|" * len(modes) + "---:|---:|---:|"]
    for name, r in out["workloads"].items():
        cells = [f"{r['median_ms'][m]:.1f}" if m in r["median_ms"] else "-" for m in modes]
        ep = r["ratio_vs_plain"].get("engine")
        sk = r["ratio_vs_ipykernel"].get("sandbox_kernel")
        em = r.get("ratio_vs_plain_min", {}).get("engine")
        lines.append(f"| {name} | {r['set']} | " + " | ".join(cells)
                     + f" | {ep:.2f}x |" if ep else f"| {name} | {r['set']} | " + " | ".join(cells) + " | - |")
        lines[-1] += (f" {sk:.2f}x |" if sk else " - |") + (f" {em:.2f}x |" if em else " - |")
    lines.append("")
    lines.append("| geometric mean | " + " | ".join(f"{_LABEL[m]} / plain" for m in modes if m != "plain")
                 + " | " + " | ".join(f"{_LABEL[m]} / ipykernel" for m in modes if m not in ("plain", "ipykernel"))
                 + " | target (engine / plain) |")
    n = len([m for m in modes if m != "plain"]) + len([m for m in modes if m not in ("plain", "ipykernel")])
    lines.append("|---|" + "---:|" * (n + 1))
    for group, g in out["geomean"].items():
        t = g["target"]
        target = f"<= {t['target']}x" + (f" (stretch {t['stretch']}x)" if "stretch" in t else "")
        row = [f"{g['vs_plain'].get(m, 0):.2f}x" for m in modes if m != "plain"]
        row += [f"{g['vs_ipykernel'].get(m, 0):.2f}x" for m in modes if m not in ("plain", "ipykernel")]
        lines.append(f"| {group} ({g['workloads']} workloads) | " + " | ".join(row) + f" | {target} |")
    t = out.get("trivial") or {}
    if t.get("median_ms"):
        lines.append("")
        lines.append(f"| trivial cell `{t['source']}` | " + " | ".join(_LABEL[m] for m in modes) + " |")
        lines.append("|---|" + "---:|" * len(modes))
        lines.append("| median ms | " + " | ".join(f"{t['median_ms'].get(m, 0):.3f}" for m in modes) + " |")
        lines.append("| / ipykernel | " + " | ".join(
            f"{t.get('ratio_vs_ipykernel', {}).get(m, 0):.2f}x" if m not in ("plain",) else "-" for m in modes) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
