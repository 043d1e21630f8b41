#!/usr/bin/env python
"""Share of real notebook cells that run unchanged in the sandbox, against stock ipykernel.

    python bench/notebook_corpus.py                       # every notebook of every repository below
    python bench/notebook_corpus.py --repos whirlwind --limit 3
    python bench/notebook_corpus.py --reuse-stock         # stock results from the last run's JSON
    python bench/notebook_corpus.py --report-only         # print the figure from the last run's JSON

The corpus is public notebooks nobody on this project wrote (teaching material and library
documentation), pinned by commit in REPOSITORIES. The notebooks are not part of this repository: each
repository is read from a local git mirror (``--mirrors``, one ``owner+name/repo`` git directory per
repository, as the project's fetch tool lays them out; ``git clone --mirror`` works too, named so).

Each notebook runs twice, cell by cell in order, in a fresh copy of its directory: in stock ipykernel
(kernelspec ``python3``) and in the Sandboxed Python kernel (kernelspec ``sandboxed-python``, level
``--isolation``, default ``kernel``). The network is closed where this runs, so cells that download
data fail in stock ipykernel too and are left out, as is every cell that fails there for any reason
(a library that is not installed, a cell that depends on one that failed, a deliberate error).

The figure: of the cells that succeed in stock ipykernel, the share that also succeed in the sandbox.
"Succeed" is an ``execute_reply`` with status ok. A cell whose magic line the sandbox skipped (with a
note) reports ok but did not do what the notebook asked, so it is counted twice: once as run (the
lenient figure) and once as not unchanged (the strict figure, the one to quote). Failures are grouped
by the sandbox's denial record (kind and target), by "follow-on" when an earlier cell of the same
notebook failed only in the sandbox, and otherwise by exception name and message.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import fnmatch
import json
import os
import queue
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "results", "notebook_corpus.json")

# (short name, owner/name, commit, notebook path patterns, format, patterns left out and why)
REPOSITORIES = [
    ("handbook", "jakevdp/PythonDataScienceHandbook", "d66231454ef753818dc9213c9b5942e067266966",
     ["notebooks/*.ipynb"], "ipynb", []),
    ("whirlwind", "jakevdp/WhirlwindTourOfPython", "6f1daf714fe52a8dde6a288674ba46a7feed8816",
     ["*.ipynb"], "ipynb", []),
    ("pydata-book", "wesm/pydata-book", "d86d8056fa17b180e2a7dc1d9ae1cfb830967d50",
     ["*.ipynb"], "ipynb", []),
    ("pandas-cookbook", "jvns/pandas-cookbook", "69d3389e4d9fee6dcf8e59e4c91397e81da79163",
     ["cookbook/*.ipynb"], "ipynb", []),
    ("sci-lectures", "jrjohansson/scientific-python-lectures", "a2a76136ac06ff5fa91343ae095f1223c914d944",
     ["*.ipynb"], "ipynb", []),
    ("plotly-docs", "plotly/plotly.py", "de4f21b322b5859f003e126fd8b94489e6f6ca17",
     ["doc/python/*.md"], "jupytext-md", []),
]

STOCK_KERNEL = "python3"
SANDBOX_KERNEL = "sandboxed-python"
_NOTE = re.compile(r"^note: (?:line \d+: )?(%\S+|!|\S+\?)", re.M)


# -- reading the corpus ------------------------------------------------------------------------------

def mirror_dir(mirrors: str, repo: str) -> str:
    return os.path.join(mirrors, repo.replace("/", "+"), "repo")


def git(mirror: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", mirror, *args], check=True, capture_output=True).stdout


def notebook_paths(mirror: str, commit: str, patterns, excluded) -> list[str]:
    names = git(mirror, "ls-tree", "-r", "--name-only", commit).decode().splitlines()
    return sorted(n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)
                  and not any(fnmatch.fnmatchcase(n, p) for p in excluded))


def code_cells(text: str, fmt: str) -> list[str]:
    if fmt == "ipynb":
        nb = json.loads(text)
        cells = nb.get("cells")
        if cells is None:   # nbformat 3
            cells = [c for ws in nb.get("worksheets", []) for c in ws.get("cells", [])]
        out = []
        for cell in cells:
            if cell.get("cell_type") != "code":
                continue
            source = cell.get("source", cell.get("input", ""))
            source = "".join(source) if isinstance(source, list) else source
            if source.strip():
                out.append(source)
        return out
    # jupytext markdown: ```python fences (options after the language name are allowed)
    return [m.group(1) for m in re.finditer(r"^```python[^\n]*\n(.*?)^```", text, re.S | re.M)
            if m.group(1).strip()]


def materialise(mirror: str, commit: str, path: str, dest: str) -> None:
    """The notebook's directory (its data files) at the commit. A snapshot may lack its largest files:
    then the files it has, one by one (a cell that reads a missing one fails in both kernels)."""
    folder = os.path.dirname(path) or "."
    archive = subprocess.run(["git", "-C", mirror, "archive", "--format=tar", commit, folder], capture_output=True)
    if archive.returncode == 0:
        with tempfile.TemporaryFile() as fh:
            fh.write(archive.stdout)
            fh.seek(0)
            with tarfile.open(fileobj=fh) as tar:
                tar.extractall(dest, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(dest)
        return
    listing = git(mirror, "ls-tree", "-r", "-z", commit, "--", folder).decode().split("\0")
    for entry in filter(None, listing):
        meta, name = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind != "blob" or mode == "120000":
            continue
        blob = subprocess.run(["git", "-C", mirror, "cat-file", "blob", sha], capture_output=True)
        if blob.returncode != 0:
            continue
        target = os.path.join(dest, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(blob.stdout)


# -- running one notebook in one kernel --------------------------------------------------------------

def run_notebook(kernel: str, cells: list[str], cwd: str, timeout: float, extra_args=()) -> list[dict]:
    from jupyter_client import KernelManager

    km = KernelManager(kernel_name=kernel)
    km.start_kernel(cwd=cwd, extra_arguments=list(extra_args), stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    kc = km.client()
    kc.start_channels()
    results = []
    try:
        kc.wait_for_ready(timeout=120)
        for source in cells:
            results.append(_run_cell(km, kc, source, timeout))
            if results[-1]["status"] == "dead":
                results.extend({"status": "dead", "ename": "KernelDied", "evalue": ""}
                               for _ in cells[len(results):])
                break
    finally:
        kc.stop_channels()
        try:
            km.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001 - the notebook's results are kept whatever shutdown does
            pass
    return results


def _run_cell(km, kc, source: str, timeout: float) -> dict:
    msg_id = kc.execute(source, allow_stdin=False, stop_on_error=False)
    deadline = time.monotonic() + timeout
    stderr, error, reply, idle = [], None, None, False
    started = time.monotonic()
    while not (reply and idle):
        if time.monotonic() > deadline:
            km.interrupt_kernel()
            try:
                kc.get_shell_msg(timeout=30)
            except queue.Empty:
                return {"status": "dead", "ename": "Timeout", "evalue": f"no reply in {timeout:.0f} s"}
            return {"status": "timeout", "ename": "Timeout", "evalue": f"over {timeout:.0f} s"}
        if not km.is_alive():
            return {"status": "dead", "ename": "KernelDied", "evalue": ""}
        try:
            msg = kc.get_iopub_msg(timeout=0.05)
            if msg["parent_header"].get("msg_id") == msg_id:
                kind, content = msg["msg_type"], msg["content"]
                if kind == "stream" and content.get("name") == "stderr":
                    stderr.append(content.get("text", ""))
                elif kind == "error":
                    error = content
                elif kind == "status" and content.get("execution_state") == "idle":
                    idle = True
        except queue.Empty:
            pass
        if reply is None:
            try:
                msg = kc.get_shell_msg(timeout=0.01)
                if msg["parent_header"].get("msg_id") == msg_id:
                    reply = msg
            except queue.Empty:
                pass
    content = reply["content"]
    sandbox = reply.get("metadata", {}).get("sandbox") or {}
    out = {"status": content.get("status"), "seconds": round(time.monotonic() - started, 3)}
    if content.get("status") != "ok":
        out["ename"] = content.get("ename") or (error or {}).get("ename", "")
        out["evalue"] = (content.get("evalue") or (error or {}).get("evalue", ""))[:300]
    denials = sandbox.get("denials") or []
    if denials:
        out["denials"] = [{k: str(d.get(k, ""))[:120] for k in ("kind", "target", "rule")} for d in denials[:5]]
    notes = _NOTE.findall("".join(stderr))
    if notes:
        out["skipped"] = notes[:5]
    return out


# -- the figure -----------------------------------------------------------------------------------

def failure_class(cell: dict, follow_on: bool) -> str:
    for d in cell.get("denials") or []:
        if d["kind"] != "limit":
            return f"{d['kind']}: {d['target']}"
    if cell.get("denials"):
        return f"limit: {cell['denials'][0]['target']}"
    if follow_on and cell.get("ename") in ("NameError", "KeyError", "AttributeError", "TypeError", "ValueError"):
        return f"follow-on {cell.get('ename')}"
    evalue = re.sub(r"'[^']*'", "'…'", cell.get("evalue", ""))[:90]
    return f"{cell.get('ename')}: {evalue}"


def summarise(results: dict) -> dict:
    total = both = lenient = 0
    classes: collections.Counter = collections.Counter()
    examples: dict = {}
    per_repo = collections.defaultdict(lambda: [0, 0])
    for key, nb in sorted(results["notebooks"].items()):
        stock, sandbox, sources = nb.get("stock"), nb.get("sandbox"), nb.get("cells")
        if not stock or not sandbox:
            continue
        failed_before = False
        for i, (s, b) in enumerate(zip(stock, sandbox)):
            if s["status"] != "ok":
                continue
            total += 1
            per_repo[key.split(":")[0]][0] += 1
            if b["status"] == "ok":
                lenient += 1
                if not b.get("skipped"):
                    both += 1
                    per_repo[key.split(":")[0]][1] += 1
                    continue
                cls = "skipped magic: " + b["skipped"][0]
            else:
                cls = failure_class(b, failed_before)
                failed_before = True
            classes[cls] += 1
            examples.setdefault(cls, f"{key} cell {i + 1}: {sources[i][:160]!r}" if sources else key)
    return {"cells_ok_in_stock": total, "unchanged": both, "share": round(both / total, 4) if total else None,
            "share_lenient": round(lenient / total, 4) if total else None,
            "per_repository": {r: {"cells": t, "unchanged": u, "share": round(u / t, 4) if t else None}
                               for r, (t, u) in sorted(per_repo.items())},
            "classes": classes.most_common(), "examples": examples}


def print_summary(summary: dict, top: int) -> None:
    print(f"cells that succeed in stock ipykernel: {summary['cells_ok_in_stock']}")
    print(f"of these, unchanged in the sandbox:    {summary['unchanged']} "
          f"({100 * (summary['share'] or 0):.1f} %; {100 * (summary['share_lenient'] or 0):.1f} % "
          f"counting skipped magic lines as run)")
    for repo, row in summary["per_repository"].items():
        print(f"  {repo:16} {row['unchanged']:5} / {row['cells']:5}  {100 * (row['share'] or 0):5.1f} %")
    print("failure classes (cells):")
    for cls, n in summary["classes"][:top]:
        print(f"  {n:4}  {cls}\n        e.g. {summary['examples'][cls][:200]}")


# -- main -----------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mirrors", default=os.environ.get("CORPUS_MIRRORS", "/work/.mirror"))
    ap.add_argument("--repos", default="", help="short names, comma separated (default: all)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many notebooks per repository")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds per cell")
    ap.add_argument("--isolation", default="kernel")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--sandbox-kernel", default=SANDBOX_KERNEL,
                    help="kernelspec of the sandbox (a baseline: a kernelspec whose interpreter imports an "
                         "earlier sandbox_kernel; workers run with -I, so PYTHONPATH does not reach them)")
    ap.add_argument("--reuse-stock", action="store_true", help="take stock results from --out")
    ap.add_argument("--only-sandbox-failures", action="store_true",
                    help="with --reuse-stock: rerun only notebooks where a stock-ok cell failed in the sandbox")
    ap.add_argument("--resume", action="store_true", help="skip notebooks --out already has both results for")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)

    previous = {}
    if os.path.exists(args.out):
        with open(args.out, encoding="utf-8") as fh:
            previous = json.load(fh)
    if args.report_only:
        print_summary(summarise(previous), args.top)
        return 0

    chosen = [r for r in REPOSITORIES if not args.repos or r[0] in args.repos.split(",")]
    results = {"isolation": args.isolation, "repositories": [
        {"name": r[0], "repo": r[1], "commit": r[2], "patterns": r[3]} for r in REPOSITORIES],
        "notebooks": dict(previous.get("notebooks", {}))}
    sandbox_args = [f"--SandboxKernel.isolation={args.isolation}"]
    for short, repo, commit, patterns, fmt, excluded in chosen:
        mirror = mirror_dir(args.mirrors, repo)
        if not os.path.isdir(mirror):
            print(f"skipping {repo}: no mirror at {mirror}", file=sys.stderr)
            continue
        paths = notebook_paths(mirror, commit, patterns, excluded)
        if args.limit:
            paths = paths[:args.limit]
        for path in paths:
            key = f"{short}:{path}"
            cells = code_cells(git(mirror, "show", f"{commit}:{path}").decode("utf-8", "replace"), fmt)
            if not cells:
                continue
            old = previous.get("notebooks", {}).get(key, {})
            if args.resume and old.get("stock") and old.get("sandbox") and len(old["sandbox"]) == len(cells):
                continue
            reuse = args.reuse_stock and old.get("stock") and len(old["stock"]) == len(cells)
            if reuse and args.only_sandbox_failures and old.get("sandbox") and not any(
                    s["status"] == "ok" and (b["status"] != "ok" or b.get("skipped"))
                    for s, b in zip(old["stock"], old["sandbox"])):
                continue
            started = time.monotonic()
            with tempfile.TemporaryDirectory() as stock_dir, tempfile.TemporaryDirectory() as sandbox_dir:
                for d in (stock_dir, sandbox_dir):
                    materialise(mirror, commit, path, d)
                where = os.path.dirname(path)
                with concurrent.futures.ThreadPoolExecutor(2) as pool:
                    stock = None if reuse else pool.submit(
                        run_notebook, STOCK_KERNEL, cells, os.path.join(stock_dir, where), args.timeout)
                    sandbox = pool.submit(run_notebook, args.sandbox_kernel, cells, os.path.join(sandbox_dir, where),
                                          args.timeout, sandbox_args)
                    entry = {"cells": cells, "stock": old["stock"] if reuse else stock.result(),
                             "sandbox": sandbox.result()}
            results["notebooks"][key] = entry
            ok = sum(1 for s, b in zip(entry["stock"], entry["sandbox"])
                     if s["status"] == "ok" and b["status"] == "ok" and not b.get("skipped"))
            stock_ok = sum(1 for s in entry["stock"] if s["status"] == "ok")
            print(f"{key}: {ok}/{stock_ok} of {len(cells)} cells ({time.monotonic() - started:.0f} s)", flush=True)
            os.makedirs(os.path.dirname(args.out), exist_ok=True)
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump(results, fh, indent=1)
    summary = summarise(results)
    results["summary"] = {k: v for k, v in summary.items() if k != "examples"}
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=1)
    print_summary(summary, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
