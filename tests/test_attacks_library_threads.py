"""Must-block: threads a granted library starts while a cell runs (review 13).

pandas 3.1 parses a CSV of 5 MB or more on a ThreadPoolExecutor (mode.max_threads) and runs the cell's converters
there. Those threads started with an empty Context, so the gates found no engine on them (type() handed out the raw
_io.FileIO, which then read the host's open descriptors: R13-3); they outlived the cell's time limit, unconfined (a
library-callable converter wrote a file outside after the cell: R13-1); and the time limit, landing in the pool's
shutdown, freed its parsers under the threads (a segfault, no hostile code: R13-4). No thread starts while a cell
runs (confine._guard_thread_start); a descriptor number the cell did not open is refused (confine._CELL_DESCRIPTORS);
type() without an engine hands out nothing. Each test performs the attack in a child process.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from childcell import REPO

PY = sys.executable

# A child like childcell's, but each cell has its own limits (a preparation cell gets time to import pandas and
# write a big file; the attack cell gets a short time limit), and a probe may wait after the cells.
CHILD = textwrap.dedent("""
    import dataclasses, json, os, sys, tempfile
    from sandbox_kernel.engine import Engine
    from sandbox_kernel.policy import PRESETS
    opts = json.loads(sys.argv[2])
    def probe_host(report):
        pass
    exec(opts["probe"])
    p = PRESETS["data-science"]
    eng = Engine(p, workdir=opts["workdir"] or tempfile.mkdtemp())
    report = {"cells": []}
    for cell, lim in zip(sys.argv[1].split("\\n#CELL\\n"), opts["limits"]):
        done = eng.run_cell(cell, emit=lambda e: None, limits=dataclasses.replace(p.limits, **lim))
        report["cells"].append([done["status"], (done["error"] or {}).get("ename")])
    report.update((name, bool(eng.namespace.get(name))) for name in opts["ns"])
    probe_host(report)
    print(json.dumps(report))
    sys.stdout.flush()
    os._exit(0)
""")


def run_cells(source: str, limits: list, *, probe: str = "", ns=(), timeout: float = 150, workdir=None) -> dict:
    """Cells split by a '#CELL' line, each with its own limits, in one Engine working in `workdir` (made if given)."""
    if workdir is not None:
        os.makedirs(workdir, exist_ok=True)
    opts = {"limits": limits, "probe": textwrap.dedent(probe), "ns": list(ns),
            "workdir": str(workdir) if workdir is not None else None}
    out = subprocess.run([PY, "-P", "-c", CHILD, source, json.dumps(opts)], capture_output=True, text=True,
                         timeout=timeout, cwd=REPO)
    lines = out.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines else {"crashed": True}
    result["returncode"] = out.returncode
    return result


PREPARE = {"timeout": 60.0, "ticks": 10**8, "memory_mb": 1024}

# A CSV of ~11 MB (5600 rows of 2 KB): past pandas' 5 MB threshold, so read_csv splits it between pool threads.
BIG_CSV = textwrap.dedent("""
    import numpy as np, pandas as pd, functools
    pad = 'P' * 2000
    with open('big.csv', 'w') as f:
        f.write('a,b,c\\n' + ('{a},{b},' + pad + '\\n') * 5600)
""")




def test_r13_1_parallel_read_csv_converter_writes_outside_after_the_cell(tmp_path):
    canary = tmp_path / "outside" / "PWNED.sh"
    canary.parent.mkdir()
    # The converter of column b is DataFrame.to_string of a big frame: it formats for seconds, then opens its
    # first argument, which is the CSV field: the path outside. The cell ends (time limit) before the open.
    prepare = BIG_CSV.format(a="x", b=str(canary)) + textwrap.dedent("""
        payload = pd.DataFrame({'x': ['echo PWNED-BY-REVIEW13'] + ['#'] * 1000000})
        plant = functools.partial(payload.to_string, header=False, index=False)
    """)
    attack = textwrap.dedent("""
        pd.set_option('mode.max_threads', 2)
        df = pd.read_csv('big.csv', converters={'b': plant})
    """)
    probe = f"""
        import os, time
        def probe_host(report):
            for _ in range(120):            # the host just goes on; give the pool thread time
                if os.path.exists({str(canary)!r}):
                    break
                time.sleep(0.25)
    """
    try:
        run_cells(prepare + "\n#CELL\n" + attack, [PREPARE, {"timeout": 1.0, "ticks": 10**7, "memory_mb": 1024}],
                  probe=probe, workdir=tmp_path / "work")
    except subprocess.TimeoutExpired:
        pass
    assert not canary.exists(), canary.read_text()[:100]


def test_r13_3_type_on_a_pool_thread_hands_out_fileio_for_host_descriptors(tmp_path):
    secret = tmp_path / "host_secret.txt"
    secret.write_text("HOST-SECRET-R13\n")
    probe = f"""
        import os
        HOST_FD = os.open({str(secret)!r}, os.O_RDONLY)    # a descriptor the host holds, outside the workdir
    """
    attack = textwrap.dedent("""
        pd.set_option('mode.max_threads', 2)
        box = []
        def conv(v):
            if not box:
                box.append(type(open('big.csv', 'rb', buffering=0)))   # raw _io.FileIO on the pool thread
            return v
        pd.read_csv('big.csv', converters={'a': conv})
    """)
    use = textwrap.dedent("""
        FileIO = box[0]                     # back on the cell's own thread, in a later cell
        leaked = False
        for fd in range(3, 64):
            try:
                if b'HOST-SECRET-R13' in FileIO(fd, 'r', closefd=False).read(4096):
                    leaked = True
            except Exception:
                pass
    """)
    result = run_cells(BIG_CSV.format(a="1", b="y") + "\n#CELL\n" + attack + "\n#CELL\n" + use,
                       [PREPARE, PREPARE, PREPARE], probe=probe, ns=("leaked",), workdir=tmp_path / "work")
    assert result.get("leaked") is False, result



def test_a_time_limit_during_a_parallel_read_is_a_refusal_not_a_crash(tmp_path):
    """R13-4: a 0.3 s limit landing in pandas' parallel read_csv segfaulted the kernel (3 of 3 runs). No pool starts
    now (pandas is told one worker while a cell runs): the limit ends a serial read, and the kernel lives on."""
    prepare = textwrap.dedent("""
        import pandas as pd
        with open('big.csv', 'w') as f:
            f.write('a,b,c,d\\n' + '1.5,2.25,abc,7\\n' * 4000000)
    """)
    attack = "pd.set_option('mode.max_threads', 2)\ndf = pd.read_csv('big.csv')"
    result = run_cells(prepare + "\n#CELL\n" + attack + "\n#CELL\nx = 1", [PREPARE, {"timeout": 0.3, "ticks": 10**7,
                       "memory_mb": 1024}, PREPARE], workdir=tmp_path / "work")
    assert result["returncode"] == 0 and "crashed" not in result, result
    # pandas reads serially while a cell runs (guards._serial_pandas_reads): the time limit ends the read cleanly
    assert result["cells"][1] == ["error", "TimeLimitExceeded"] and result["cells"][2] == ["ok", None], result


def test_a_descriptor_the_cell_did_not_open_is_refused_even_to_the_raw_file_class(sandbox, tmp_path, host_secret):
    """Assume the raw class has leaked (R12-3 and R13-3 both handed it out): FileIO(fd) of a descriptor the host
    holds is refused at the open itself; the cell's own files still open."""
    import io

    fd = os.open(str(tmp_path / "secret.txt"), os.O_RDONLY)
    try:
        sandbox.ns["FileIO"] = io.FileIO   # planted by the test, as a leak would
        r = sandbox.run(f"data = FileIO({fd}, 'r', closefd=False).read()")
        assert not r.ok and r.error_name == "OperationDenied" and not r.leaked(host_secret), r
        r = sandbox.run("with open('mine.txt', 'w') as f:\n    f.write('mine')\nprint(open('mine.txt').read())")
        assert r.ok and r.stdout == "mine\n", r
    finally:
        os.close(fd)
