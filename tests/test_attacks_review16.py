"""Review 16 of Sandboxed Python (sandbox_kernel) at isolation level `none` (the engine in this process),
policy `data-science`. Each test runs its cells in a fresh child process (harness/_harness.py, written by
run_cells) with a host secret module sys.modules['host_secret'].SECRET, an env var HOST_SECRET_ENV and a file
/tmp/review16/outside/secret.txt.

Start: Fri Nov 27 03:03:34 UTC 2026 (date)   End: see the last line of this docstring   HEAD: 2426448 (git -C /work/main rev-parse --short HEAD)

TARGET MOVED DURING THE REVIEW: every finding below was checked against 2426448 with a clean tree; each xfail test
failed on its own assertion under --runxfail until 04:00. At 04:04 /work/main was at e9dbfc7 (committed 04:02:25)
with uncommitted edits to gates.py, guards.py and confine.py (not mine). There, update_wrapper refuses names other
than WRAPPER_ASSIGNMENTS/WRAPPER_UPDATES, and the tests of R16-2, R16-3 (a, b, c), R16-4, R16-5, R16-11 (a, b), R16-12,
R16-13 (a, b) and R16-14 XPASS (strict: reported as failures). Those marks should become plain tests once the fix is
in. R16-1, R16-6 to R16-10 and R16-15 to R16-18 still xfail there.
(Since then, by the lead: all closed but R16-7, R16-9 and R16-10, which xfail below.)

FINDINGS (xfail strict; each fails on its own assertion under --runxfail)
  R16-1  LESSER  contextlib.ExitStack.enter_context.__wrapped__ is the original the sandbox patched (functools.wraps
                 in gates._refuse_opaque_managers_in_exit_stacks): it enters an opaque lock; with
                 np.random.get_bit_generator().lock the host's global RNG lock stays held after the cell
                 (another thread's acquire fails / np.random.random() blocks).
  R16-2  FULL    inspect's builtin-signature path (_signature_fromstr.wrap_value, allowed by confine's
                 _builtin_signature_name for any object that is not a sandbox class/function/instance) evals the
                 dotted names of a __text_signature__ in the object's module dict and in sys.modules. A staticmethod
                 (callable, __get__ without __set__: "builtin") given __signature__=None and __text_signature__ by
                 functools.update_wrapper (the guard accepts staticmethod targets) -> help(sm) prints
                 host_secret.SECRET.
  R16-3  FULL    functools.update_wrapper(staticmethod, X, updated=(name,)) runs getattr(wrapper, name).update(
                 getattr(wrapped, name)) in host code: with the staticmethod's __globals__ set (assigned=) to a cell
                 object, its update() receives any function's live globals -> real builtins (__import__, getattr,
                 open, eval), sys.modules, os.environ (secrets read); atexit.register(os.system, ...) runs a process
                 after the cell; and inside the cell, sandbox_kernel.confine._FS.set(None) and _ACTIVE[0] = None turn
                 the audit hook's confinement off, so os.system('id > /outside/...') runs (tests 3a, 3b, 3c).
  R16-4  FULL    the same `updated` call with a cell function (always accepted) whose __wrapped__ is a cell object
                 hands it guarded functions' originals (scipy.linalg.lu_solve without its pivot check): LAPACK swaps a
                 heap word at a cell-chosen offset (read and write; pointers came back).
  R16-5  FULL    update_wrapper(cell_fn, X(), updated=('__globals__',)) merges a cell-chosen dict into the live cell
                 namespace: a planted '__st_own__' (contains everything) turns every `name.attr` read into a raw read
                 (pandas.core.frame.sys.modules['host_secret'], pandas.io.common.os.environ).
  R16-6  LESSER  np.einsum / ndarray @ (matmul, dot, tensordot) do n**3 work in one uncharged C call: einsum('i,j,k->') of
                 3000-vectors ran 30 s past a 1 s limit (O(n) memory, so unbounded); 4000x4000 @ ran 9x past 0.5 s
                 and the cell reported ok. (scipy.optimize.linear_sum_assignment is uncharged too: a random
                 5000x5000 ran 7.7 s against 3 s; lfilter, convolve, linalg are charged.)
  R16-7  LESSER  ndarray.tolist() of a structured dtype of zero-size ('V0') fields makes one 60-tuple per element in
                 one C call through pymalloc arenas (no bounded allocator, no 1 MB raw hook): 1 GB peak under a
                 128 MB limit, linear in N.
  R16-8  LESSER  next(itertools.islice(range(N), k, None)) skips k items in C, uncharged and uninterruptible:
                 3e8 took 3.6 s past 0.5 s (and 10**12 is hours).
  R16-9  LESSER  int(decimal.Decimal('1e<n>')) is a quadratic C conversion, uncharged and uninterruptible: 1e1000000
                 41 s, 1e2000000 156 s past 0.2 s; 1e8000000 did not end in 300 s (also past the int size cap).
  R16-10 LESSER  reductions over zero-stride views: np.broadcast_to(np.ones(1), (n, n)).sum() is n*n work with no
                 allocation: 4e10 ran 10.9 s past 0.5 s. (sliding_window_view(x, w).sum() likewise: n*w work, 1e8
                 summed under a 10**6-tick budget, reported ok.)
  R16-11 FULL    a second route to R16-2's sink without update_wrapper: dunder keys go into an own instance's
                 __dict__ past the write gate (directly through obj.__dict__, test 11b, or copy.deepcopy(own_obj, memo)
                 with the memo mapping id('ts') -> '__text_signature__', test 11); functools.lru_cache(obj) copies
                 them onto its C wrapper (a method descriptor); help() evals host_secret.SECRET.
  R16-12 FULL    _harmless_special_method trusts a '__st_confined__' mark in a function's __dict__; an own instance's
                 __dict__ takes that key, and functools.singledispatch(own_obj) copies it onto its library wrapper,
                 which then passes as K.__repr__ while its registry holds partial(np.save, outside, ...): the host's
                 repr(k) after the cell (a variable view, a log line) writes outside the working directory.
                 (Needs the host to call the special method after the cell; gc finalizers and the kernel's own
                 complete/inspect were found confined or static.)
  R16-13 FULL    the same trust in '__st_raw_guard__': planted (update_wrapper(cell_fn, own_obj), or singledispatch as
                 above), a class's __getattr__ is not wrapped against numpy's raw protocols, and
                 np.asarray(obj) reads and writes any address the cell names (id(b'...') + 32 read back; a[0] = ord('J')
                 turned the immutable b'HELLO...' into b'JELLO...').
  R16-14 FULL    update_wrapper(cell_fn, contextlib.closing.__exit__, assigned=('__code__',)) writes a library's
                 bytecode into the cell's function past the write gate (_WRITE_NEVER lists __code__): it still counts
                 as the cell's function (its builtins are the sandbox's), binds as K.__repr__, and has no first tick:
                 the host's repr(k) after the cell runs self.thing.close() = partial(np.save, outside, ...). (As
                 __del__ collected by the host's gc it stayed confined: the collection is confined.) Inside a cell
                 the swapped function runs unrewritten library bytecode with the cell's namespace as its globals;
                 no route to real frames or builtins was found that way in the time.
  R16-15 LESSER  math.gcd (math.lcm, Fraction normalisation) of ints under the 8M-bit cap: Lehmer's gcd in C has
                 no signal check and no charge: 1.6M-bit operands ran 3.2 s past 0.3 s (about 25x that at the cap).
                 (Long division '//' checks signals: held.)
  R16-16 LESSER  pickle writing is denied by object rules (DataFrame/Series/NDFrame.to_pickle, ndarray.dump) but
                 pandas.to_pickle(obj, path) writes one (and np.save pickles object arrays); an own instance's __dict__
                 takes '__reduce_ex__', so the pickle calls np.savetxt('/outside/...', ['echo pwned'], '%s') when the
                 operator loads it later: a payload for whoever trusts the working directory's pickles.
  R16-17 LESSER  the 8M-bit int cap holds only where the gates look: random.getrandbits(10**9) returns a 1e9-bit int
                 (int(Decimal('1e8000000')) a 26M-bit one) that +, ^, >> keep using; with math.gcd (R16-15) the
                 work on it is unbounded.
  R16-18 FULL    pandas' ABC checks (pandas.core.dtypes.generic) read a '_typ' class attribute: an own class with
                 _typ='index', a CategoricalDtype and _values._codes passes as an Index; pd.Categorical(fake) keeps the
                 codes (recode_for_categories copies them when the categories match), and take_nd reads
                 categories[code] without bounds: heap words and pointers came back at offsets the cell chose (int8
                 codes here; more categories give int16/int32 codes, so farther offsets); with object categories
                 the kernel process died (SIGSEGV). The subclass rules (_C_INDEX_DATA_MODULES) never see it: no base.
                 Every pandas ABC (generic.py: Series, DataFrame, MultiIndex, Categorical, extension arrays) is
                 decided the same way; only the Categorical route was followed to the end.
  (R16-2..R16-5, R16-14 share update_wrapper's `assigned`/`updated`, which read any attribute with the host's getattr and
  call .update on whatever the wrapper holds; R16-2 and R16-11 share the inspect sink; R16-11b, R16-12 and R16-13
  start from an own instance's __dict__, which takes any key, dunders and '__st_*' marks included.)

NOTE (design, not a finding test): confine reads every sys.path directory like the installation. An embedding
script's own directory is sys.path[0]: with the harness at /tmp/review16/_harness.py, /tmp/review16/outside/* was
listed by glob and read by pandas. The kernel itself starts with -P; the tests keep the harness in its own folder.

ATTEMPT CLASSES AND RESULTS
  functools.wraps/__wrapped__ of stand-ins (np.load, lu_solve, itertools) ........ held (originals substituted)
  __wrapped__ of in-place patched class methods (ExitStack.enter_context) ........ LESSER R16-1
  inspect text-signature eval via help()/obj? .................................... FULL R16-2, R16-11
  functools.update_wrapper assigned/updated with staticmethod / cell fn targets .. FULL R16-3, R16-4, R16-5
  copy.deepcopy memo key renaming ................................................ FULL R16-11 (scipy dists held:
                                                                                    deep copies refused)
  scipy rv_continuous _parse_arg_template (private write, deepcopy) .............. held
  format strings ('{0.__class__}', format_map, Template), f-strings .............. held
  attrgetter/methodcaller/getattr with built names, vars(), dir(), type().__dict__  held
  generators/frames/tracebacks (gi_frame, tb_frame) .............................. held
  imports (import os in exec, np.lib.format, pandas.io/core via module attrs) ..... held
  pandas string-function resolution (agg('__dict__'), agg('_mgr'), apply) ........ held
  opaque locks (acquire, __enter__, ExitStack.enter_context, type(lock)) ......... held
  process-wide library state (pandas options, csv dialects/limit, calendar,
    decimal.DefaultContext, numpy/random global seeds, plotly templates) ......... held (swapped per engine)
  module/class writes (np.foo, json.dumps, DataFrame.foo, string.whitespace) ..... held
  numpy raw memory (object views/fields, buffers, strides, rec, ctypes) .......... held
  __getattr__ answering __array_interface__ (unmarked) ........................... held (wrapped)
  runtime marks planted through own __dict__ + functools copies ................... FULL R16-12, R16-13
  library finalizer objects (netcdf_file.fp / cycles) ........................... held (read-only)
  pandas Categorical deepcopy memo (codes) ....................................... held
  staticmethod/own-instance dunder writes through the gate ........................ held
  C loops: deque(range), convolve, lfilter, linalg, regex backtracking, 3-arg pow,
    Fraction('1e20000000'), time.sleep ........................................... held
  host state: scipy.special.seterr, html.entities / json.decoder tables ........... held
  C loops: einsum/matmul, islice skip, int(Decimal), broadcast reductions ........ LESSER R16-6, -8, -9, -10
  memory: tolist() of zero-size structured fields ................................ LESSER R16-7
  memory: str.split of a large text into many small strings ....................... held (the growing list is refused)
  big ints: gcd ................................................................. LESSER R16-15
  big ints past the cap from library calls (getrandbits, int(Decimal)) ............ LESSER R16-17
  big ints: '//' of multi-million-bit ints ........................................ held (interrupted)
  host complete/inspect on cell objects with str-subclass dict keys ............... held
  pickle writers (pd.to_pickle, np.save of object arrays) ........................ LESSER R16-16
  pandas dataframe interchange with fake buffer pointers ......................... held
  own classes spoofing pandas' ABC checks with _typ ('index') ...................... FULL R16-18
  pickle readers (pd.read_pickle, np.load(allow_pickle)), read_csv('file://') .... held
  cell function __code__ swapped by update_wrapper (special method, host call) ... FULL R16-14
  gc-time finalizers after the cell (swapped __del__, library finalizers) ....... held (collection is confined)
  numpy fallback in pandas' string aggregation (s.agg('fromfile')) . held in effect (first
                                                                                    argument is the Series)
  cwd config files (ipython_config.py / jupyter_*_config.py in the working dir) . not loaded by the installed
                                                                                    IPython/jupyter_server
  operator.attrgetter/methodcaller through copy/partial/map/sorted ............... held
  %timeit -v / x = %time targets naming gate names or __class__ ................. held
  glob outside the working directory (harness artifact, see NOTE) ................ design note

Totals: 18 findings. FULL 9: R16-2, R16-3, R16-4, R16-5, R16-11, R16-12, R16-13, R16-14, R16-18 (R16-12 and R16-14
need the host to call a special method of the cell's object after the cell). LESSER 9: R16-1, R16-6, R16-7, R16-8,
R16-9, R16-10, R16-15, R16-16, R16-17.
End: Fri Nov 27 04:03:38 UTC 2026
"""
import os
import subprocess
import sys
import textwrap

import pytest

PY = sys.executable
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = "/tmp/review16"
WORK = ROOT + "/work"
OUTSIDE = ROOT + "/outside"

HARNESS = r'''
import os, sys, types, json
sys.path.insert(0, "@REPO@")
os.environ["HOST_SECRET_ENV"] = "ENVSECRET_42"
m = types.ModuleType("host_secret"); m.SECRET = "MODSECRET_42"; sys.modules["host_secret"] = m
os.makedirs("/tmp/review16/outside", exist_ok=True)
os.makedirs("/tmp/review16/work", exist_ok=True)
with open("/tmp/review16/outside/secret.txt", "w") as fh:
    fh.write("FILESECRET_42")
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
e = Engine(PRESETS["data-science"], workdir="/tmp/review16/work")
RESULTS = []
from sandbox_kernel.policy import Limits
import resource
def run(src, limits=None):
    events = []
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    done = e.run_cell(src, emit=events.append, limits=Limits(**limits) if limits else None)
    text = "".join(ev.get("text", "") for ev in events if ev.get("type") == "stream")
    errs = [(ev.get("ename"), str(ev.get("evalue"))) for ev in events if ev.get("type") == "error"]
    RESULTS.append({"status": done.get("status"), "text": text, "errors": errs,
                    "peak_growth_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before,
                    "denials": [ev.get("record", {}).get("message", "") for ev in events if ev.get("type") == "denial"]})
    return RESULTS[-1]
CELLS = json.loads(sys.argv[1])
for c in CELLS:
    run(*c) if isinstance(c, list) else run(c)
POST = sys.argv[2] if len(sys.argv) > 2 else ""
POST_OUT = {}
if POST:
    exec(POST)
print("@@RESULT@@" + json.dumps({"cells": RESULTS, "post": POST_OUT}))
'''


def run_cells(cells, post=""):
    """Runs the cells in a fresh child process (the engine in-process there); returns the parsed record,
    or {'crashed': returncode} when the child died."""
    import json
    os.makedirs(WORK, exist_ok=True)
    # (its own directory: the script's directory is sys.path[0], which confine reads like the installation)
    os.makedirs(ROOT + "/harness", exist_ok=True)
    path = ROOT + "/harness/_harness.py"
    with open(path, "w") as fh:
        fh.write(HARNESS.replace("@REPO@", REPO))
    proc = subprocess.run([PY, path, json.dumps([[textwrap.dedent(c[0]), c[1]] if isinstance(c, tuple) else textwrap.dedent(c)
                                           for c in cells]), textwrap.dedent(post)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    for line in proc.stdout.splitlines():
        if line.startswith("@@RESULT@@"):
            return json.loads(line[len("@@RESULT@@"):])
    return {"crashed": proc.returncode, "stderr": proc.stderr[-3000:], "stdout": proc.stdout[-3000:]}


def all_text(rec):
    return "\n".join(c["text"] + repr(c["errors"]) for c in rec.get("cells", []))


SECRETS = ("MODSECRET_42", "ENVSECRET_42", "FILESECRET_42")


def assert_no_secret(rec):
    assert "cells" in rec, rec
    text = all_text(rec)
    for s in SECRETS:
        assert s not in text, f"secret {s} reached the cell's output: {text[:2000]}"


# ---------------------------------------------------------------------------------------------------------
# Findings
# ---------------------------------------------------------------------------------------------------------

# R16-1: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_1_exitstack_wrapped_enters_host_lock():
    rec = run_cells(["""
        import numpy as np
        import contextlib
        lk = np.random.get_bit_generator().lock
        s = contextlib.ExitStack()
        contextlib.ExitStack.enter_context.__wrapped__(s, lk)
        print("entered")
    """], post="""
import threading, numpy as np
got = []
def try_it():
    lock = np.random.get_bit_generator().lock
    got.append(lock.acquire(blocking=False))
    if got[0]:
        lock.release()
t = threading.Thread(target=try_it)
t.start(); t.join()
POST_OUT["other_thread_acquired"] = got[0]
""")
    assert "cells" in rec, rec
    assert rec["post"]["other_thread_acquired"] is True, "the host's numpy RNG lock is held after the cell"


# R16-2: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_2_help_text_signature_reads_host_module():
    rec = run_cells(["""
        import functools
        class X:
            __signature__ = None
            __text_signature__ = "(a=host_secret.SECRET)"
        def g(a):
            return a
        sm = staticmethod(g)
        try:
            functools.update_wrapper(sm, X(), assigned=("__signature__", "__text_signature__"), updated=())
        except AttributeError:
            pass   # staticmethod's __wrapped__ is read-only: the assigned names are written already
        help(sm)
    """])
    assert_no_secret(rec)


_COLLECT_GLOBALS = """
    import functools, json
    got = []
    class Collector:
        def update(self, d):
            got.append(d)
    class X:
        __globals__ = Collector()
    def g():
        pass
    sm = staticmethod(g)
    try:   # sm.__globals__ = X().__globals__ (the cell's Collector), written by functools from host code
        functools.update_wrapper(sm, X(), assigned=("__globals__",), updated=())
    except AttributeError:
        pass   # staticmethod's __wrapped__ is read-only; the rest is done
    try:   # sm.__globals__.update(json.dumps.__globals__): the Collector receives json's live module dict
        functools.update_wrapper(sm, json.dumps, assigned=(), updated=("__globals__",))
    except AttributeError:
        pass
    b = got[0]["__builtins__"]          # subscripts are not gated: the real builtins dict
    imp, ga = b["__import__"], b["getattr"]
"""


# R16-3: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_3a_update_wrapper_hands_out_real_builtins():
    rec = run_cells([_COLLECT_GLOBALS + """
    sysm = imp("sys")
    osm = imp("os")
    print(ga(ga(sysm, "modules")["host_secret"], "SECRET"))
    print(ga(osm, "environ")["HOST_SECRET_ENV"])
    """])
    assert_no_secret(rec)


# R16-3: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_3b_update_wrapper_atexit_runs_process_after_cell():
    marker = OUTSIDE + "/pwned_atexit"
    if os.path.exists(marker):
        os.remove(marker)
    rec = run_cells([_COLLECT_GLOBALS + """
    osm = imp("os")
    ga(imp("atexit"), "register")(ga(osm, "system"), "touch /tmp/review16/outside/pwned_atexit")
    print("registered")
    """])
    assert "cells" in rec, rec
    assert not os.path.exists(marker), "a process started by the cell ran (after the cell, at exit)"


# R16-4: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_4_update_wrapper_unwraps_guarded_lu_solve():
    rec = run_cells(["""
        import functools
        import numpy as np
        import scipy.linalg as sl
        got = []
        class Collector:
            def update(self, d):
                got.append(d)
        def h():
            pass
        h.__wrapped__ = Collector()
        functools.update_wrapper(h, sl.lu_solve, assigned=(), updated=("__wrapped__",))
        raw = got[0]
        lu = np.eye(1)
        try:
            r = raw((lu, np.array([5], dtype=np.int32)), np.array([7.0]), check_finite=False)
            raw((lu, np.array([5], dtype=np.int32)), r.copy(), check_finite=False)   # swap the word back
            print("OUT-OF-BOUNDS PIVOT ACCEPTED, read", r[0])
        except ValueError as e:
            print("refused", e)
    """])
    assert "cells" in rec, rec
    assert "OUT-OF-BOUNDS PIVOT ACCEPTED" not in all_text(rec)


# R16-5: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_5_update_wrapper_plants_gate_names_in_namespace():
    rec = run_cells(["""
        import functools
        class Everything:
            def __contains__(self, item):
                return True
        class X:
            __globals__ = {"__st_own__": Everything()}
        def h():
            pass
        functools.update_wrapper(h, X(), assigned=(), updated=("__globals__",))
    """, """
        import pandas as pd
        m = pd
        c = m.core
        fr = c.frame
        s = fr.sys
        mods = s.modules
        hs = mods["host_secret"]
        print(hs.SECRET)
        io = m.io
        cm = io.common
        osm = cm.os
        env = osm.environ
        print(env["HOST_SECRET_ENV"])
    """])
    assert_no_secret(rec)


# R16-6: closed (einsum, and matrix products however written: charges.py, the binop gate for @)
@pytest.mark.parametrize("expr", ["np.einsum('i,j,k->', a, a, a)",
                                  "np.ones((4000, 4000), np.float32) @ np.ones((4000, 4000), np.float32)"])
def test_r16_6_einsum_matmul_work_is_charged(expr):
    # 1000**3 = 1e9 label combinations over three operands, 0.3 s of C at the charged speed: past a 10**6 tick
    # budget (0.1 s)
    rec = run_cells([(f"""
        import numpy as np
        a = np.ones(1000)
        r = {expr}
        print("finished")
    """, {"ticks": 10**6, "timeout": 600.0})])
    assert "cells" in rec, rec
    cell = rec["cells"][0]
    assert cell["status"] == "error" and any("Tick" in e[0] for e in cell["errors"]), cell


# ---------------------------------------------------------------------------------------------------------
# Attempts that held (regression net)
# ---------------------------------------------------------------------------------------------------------

_HELD_READS = {
    "format_field_dunder": "'{0.__class__.__mro__}'.format(1)",
    "format_map_globals": "'{x.__globals__}'.format_map({'x': f})",
    "attrgetter_globals": "operator.attrgetter('__globals__')(f)",
    "methodcaller_reduce": "operator.methodcaller('__reduce_ex__', 2)(f)",
    "getattr_built_name": "getattr(f, '__glo' + 'bals__')",
    "vars_of_module": "vars(np)",
    "tuple_base": "().__class__.__base__",
    "generator_frame": "gen().gi_frame",
    "import_os_in_exec": "exec('import os')",
    "object_getattribute": "object.__getattribute__(f, '__globals__')",
    "type_dict": "type(f).__dict__",
    "subclasses": "object.__subclasses__()",
    "series_agg_dict": "pd.Series([1.0]).agg('__dict__')",
    "series_agg_private": "pd.Series([1.0]).agg('_mgr')",
    "frame_apply_reduce": "pd.DataFrame({'a': [1.0]}).apply('__reduce_ex__', args=(2,))",
    "private_of_library_subclass": "D(name='d', a=-1, b=1)._parse_arg_template",
    "staticmethod_dunder_write": "setattr(staticmethod(f), '__text_signature__', '(a=host_secret.SECRET)')",
    "random_private": "random._inst",
}


@pytest.mark.parametrize("name", sorted(_HELD_READS))
def test_held_reads_are_refused(name):
    rec = run_cells([f"""
        import operator, random, numpy as np, pandas as pd, scipy.stats as st
        def f():
            pass
        def gen():
            yield 1
        class D(st.rv_continuous):
            def _pdf(self, x):
                return 0.5 * (x > -1) * (x < 1)
        try:
            r = {_HELD_READS[name]}
            print("GOT", type(r).__name__)
        except Exception as e:
            print("refused", type(e).__name__)
    """])
    assert "cells" in rec, rec
    assert "GOT" not in all_text(rec), all_text(rec)


@pytest.mark.xfail(strict=True, reason="FINDING R16-7 (lesser): ndarray.tolist() of a structured dtype of zero-size fields "
                   "builds one tuple per element in one C call (pymalloc arenas: neither the bounded numpy allocator nor the "
                   "1 MB raw-allocation hook sees them, and the RSS sampler only after): 1 GB made under a 128 MB limit, "
                   "~8x, and more with N")
def test_r16_7_tolist_of_zero_size_fields_exceeds_memory_limit():
    rec = run_cells(["import numpy as np", ("""
        N = 2_000_000
        dt = np.dtype([('f%d' % i, 'V0') for i in range(60)])
        l = np.zeros(N, dtype=dt).tolist()
        print(len(l))
    """, {"memory_mb": 128, "timeout": 120.0})])
    assert "cells" in rec, rec
    growth_mb = rec["cells"][1]["peak_growth_kb"] / 1024
    assert growth_mb < 2 * 128, f"the cell's peak memory grew by {growth_mb:.0f} MB under a 128 MB limit"


# R16-8: closed for the start (and one step) of a slice: charged when it is made (guards._charge_islice_skips)
def test_r16_8_islice_skip_is_charged():
    rec = run_cells([("""
        import itertools
        print(next(itertools.islice(range(10**10), 3 * 10**8, None)))
    """, {"ticks": 10**6, "timeout": 600.0}), ("""
        print(list(itertools.islice(range(10**10), 0, None, 3 * 10**8))[:2])
    """, {"ticks": 10**6, "timeout": 600.0}), ("""
        print("honest", list(itertools.islice(range(100), 90, None, 3)))
    """, {"ticks": 10**6, "timeout": 600.0})])
    assert "cells" in rec, rec
    for cell in rec["cells"][:2]:
        assert cell["status"] == "error" and any("Tick" in e[0] for e in cell["errors"]), cell
    assert rec["cells"][2]["text"] == "honest [90, 93, 96, 99]\n", rec["cells"][2]


def test_held_deque_of_huge_range_is_charged():
    rec = run_cells([("""
        import collections
        collections.deque(range(10**12), 0)
    """, {"ticks": 10**6, "timeout": 600.0})])
    assert "cells" in rec, rec
    assert any("Tick" in e[0] for e in rec["cells"][0]["errors"]), rec


def test_held_convolve_work_is_charged():
    rec = run_cells([("""
        import numpy as np
        a = np.ones(100000)
        np.convolve(a, a)
    """, {"ticks": 10**6, "timeout": 600.0})])
    assert "cells" in rec, rec
    assert any("Tick" in e[0] for e in rec["cells"][0]["errors"]), rec


def test_held_regex_backtracking_stops_at_time_limit():
    rec = run_cells([("""
        import re
        re.match(r'(a|a)+$', 'a' * 40 + '!')
        print("finished")
    """, {"timeout": 1.0})])
    assert "cells" in rec, rec
    assert any("Time" in e[0] for e in rec["cells"][0]["errors"]) and "finished" not in all_text(rec), rec


@pytest.mark.xfail(strict=True, reason="FINDING R16-9 (lesser): int(decimal.Decimal('1e<n>')) converts base 10**k to binary "
                   "in one quadratic C call that nothing charges or interrupts: 1e1000000 ran 41 s and 1e2000000 156 s "
                   "past a 0.2 s limit; 1e8000000 did not end in 300 s (the result is past the int size cap too)")
def test_r16_9_int_of_huge_decimal_is_charged():
    rec = run_cells([("""
        import decimal
        x = int(decimal.Decimal('1e300000'))
        print("finished", x.bit_length())
    """, {"ticks": 10**6, "timeout": 600.0})])
    assert "cells" in rec, rec
    assert "finished" not in all_text(rec), rec


@pytest.mark.xfail(strict=True, reason="FINDING R16-10 (lesser): a reduction over a zero-stride view "
                   "(np.broadcast_to(np.ones(1), (n, n)).sum()) runs n*n additions in one C call with no allocation, "
                   "so neither the allocator bound nor the tick sees it: 4e10 ran 10.9 s past a 0.5 s limit; "
                   "(10**9, 10**9) is centuries")
def test_r16_10_reduction_over_broadcast_view_is_charged():
    rec = run_cells([("""
        import numpy as np
        print(np.broadcast_to(np.ones(1), (8000, 8000)).sum())
    """, {"ticks": 10**6, "timeout": 600.0})])
    assert "cells" in rec, rec
    cell = rec["cells"][0]
    assert cell["status"] == "error" and any("Tick" in e[0] for e in cell["errors"]), cell


_HELD_NUMPY = {
    "getfield_object": "a.getfield(np.dtype(object), 0)",
    "view_as_object": "a.view(object)",
    "frombuffer_object": "np.frombuffer(bytes(16), dtype=object)",
    "ndarray_over_buffer_object": "np.ndarray((2,), dtype=object, buffer=bytearray(16))",
    "ndarray_strides_past_buffer": "np.ndarray((2,), dtype=np.int64, buffer=bytearray(16), strides=(2**40,))",
    "overlapping_object_fields": "np.zeros(2, dtype=np.dtype({'names': ['a', 'b'], 'formats': [np.int64, object], "
                                 "'offsets': [0, 0]}))",
    "rec_fromstring_object": "np.rec.fromstring(bytes(16), formats='O')",
    "lib_format_module": "np.lib.format",
    "as_strided": "np.lib.stride_tricks.as_strided",
    "ndarray_ctypes": "a.ctypes",
    "array_interface": "a.__array_interface__",
    "bitgenerator_ctypes": "np.random.PCG64().ctypes",
}


@pytest.mark.parametrize("name", sorted(_HELD_NUMPY))
def test_held_numpy_raw_memory_routes(name):
    rec = run_cells([f"""
        import numpy as np
        a = np.zeros(4, dtype=np.int64)
        try:
            r = {_HELD_NUMPY[name]}
            print("GOT", type(r).__name__)
        except Exception as e:
            print("refused", type(e).__name__)
    """])
    assert "cells" in rec, rec
    assert "GOT" not in all_text(rec), all_text(rec)


# R16-11: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_11_deepcopy_memo_plants_text_signature_on_lru_wrapper():
    rec = run_cells(["""
        import functools, copy
        class X:
            "a callable"
            def __call__(self, a):
                return a
        x = X()
        x.ts = "(a=host_secret.SECRET)"
        x.sig = None
        y = copy.deepcopy(x, {id("ts"): "__text_signature__", id("sig"): "__signature__"})
        help(functools.lru_cache(y))
    """])
    assert_no_secret(rec)


# R16-11: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_11b_own_dict_plants_text_signature_on_lru_wrapper():
    rec = run_cells(["""
        import functools
        class X:
            "a callable"
            def __call__(self, a):
                return a
        x = X()
        d = x.__dict__
        d["__text_signature__"] = "(a=host_secret.SECRET)"
        d["__signature__"] = None
        help(functools.lru_cache(x))
    """])
    assert_no_secret(rec)


# R16-12: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_12_marked_singledispatch_special_method_runs_library_callable_after_cell():
    marker = OUTSIDE + "/pwn_after_cell.npy"
    if os.path.exists(marker):
        os.remove(marker)
    rec = run_cells(["""
        import functools, numpy as np
        class X:
            def __call__(self, obj):
                return "x"
        x = X()
        x.__dict__["__st_confined__"] = True
        sd = functools.singledispatch(x)
        class K:
            pass
        sd.register(K, functools.partial(np.save, "/tmp/review16/outside/pwn_after_cell.npy", np.arange(3)))
        K.__repr__ = sd
        k = K()
    """], post="""
try:
    repr(e.namespace["k"])   # the host touching a cell's object after the cell (a variable view, a log line)
except Exception:
    pass
""")
    assert "cells" in rec, rec
    assert not os.path.exists(marker), "a library callable bound by the cell ran after the cell and wrote outside"


def test_held_library_finalizer_object_is_read_only():
    marker = OUTSIDE + "/pwn_gc.npy"
    if os.path.exists(marker):
        os.remove(marker)
    rec = run_cells(["""
        import scipy.io, numpy as np, functools
        w = scipy.io.netcdf_file("t.nc", "w")
        w.createDimension("x", 3)
        w.createVariable("v", "i", ("x",))[:] = [1, 2, 3]
        w.close()
        f = scipy.io.netcdf_file("t.nc", "r")
        class K:
            closed = False
            close = functools.partial(np.save, "/tmp/review16/outside/pwn_gc.npy", np.arange(3))
        try:
            f.fp = K()
        except Exception:
            pass
        try:
            f.cycle = [f]
        except Exception:
            pass
        del f
    """], post="import gc\ngc.collect()\n")
    assert "cells" in rec, rec
    assert not os.path.exists(marker)


def test_held_host_does_not_see_cell_seeds_or_options():
    rec = run_cells(["""
        import numpy as np, random, pandas as pd, csv, calendar
        np.random.seed(1234)
        random.seed(1234)
        pd.set_option("display.precision", 1)
        csv.field_size_limit(5)
        calendar.setfirstweekday(3)
    """], post="""
import numpy as np, random, pandas as pd, csv, calendar
POST_OUT["np"] = bool(np.random.random() == np.random.RandomState(1234).random())
POST_OUT["random"] = bool(random.random() == random.Random(1234).random())
POST_OUT["pd"] = pd.get_option("display.precision")
POST_OUT["csv"] = csv.field_size_limit()
POST_OUT["cal"] = calendar.firstweekday()
""")
    assert "cells" in rec, rec
    post = rec["post"]
    assert post["np"] is False and post["random"] is False
    assert post["pd"] != 1 and post["csv"] != 5 and post["cal"] != 3, post


def test_held_opaque_lock_methods_refused():
    rec = run_cells(["""
        import numpy as np, contextlib, operator
        lk = np.random.get_bit_generator().lock
        for attempt in (lambda: lk.acquire(), lambda: lk.__enter__(), lambda: contextlib.ExitStack().enter_context(lk),
                        lambda: operator.methodcaller("acquire")(lk), lambda: type(lk)):
            try:
                attempt()
                print("GOT")
            except Exception as e:
                print("refused", type(e).__name__)
    """])
    assert "cells" in rec, rec
    assert "GOT" not in all_text(rec), all_text(rec)


_RAW_READ_PRELUDE = """
    import functools, numpy as np
    secret = b"HELLO-RAW-MEMORY-READ"
    addr = id(secret) + 32          # the bytes' characters: an address the cell chose
"""


# R16-13: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_13_planted_raw_guard_mark_reads_memory():
    rec = run_cells([_RAW_READ_PRELUDE + """
    class M:
        pass
    m = M()
    m.__dict__["__st_raw_guard__"] = True
    def ga(self, name):
        if name == "__array_interface__":
            return {"data": (addr, False), "shape": (21,), "typestr": "|u1", "version": 3}
        raise AttributeError(name)
    functools.update_wrapper(ga, m)
    class P:
        __getattr__ = ga
    try:
        print(bytes(np.asarray(P())))
    except Exception as e:
        print("refused", type(e).__name__)
    """])
    assert "cells" in rec, rec
    assert "HELLO-RAW-MEMORY-READ" not in all_text(rec).replace('b"HELLO', ""), all_text(rec)


# R16-13: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_13b_singledispatch_carries_raw_guard_mark():
    rec = run_cells([_RAW_READ_PRELUDE + """
    class G:
        def __call__(self, obj, name):
            if name == "__array_interface__":
                return {"data": (addr, False), "shape": (21,), "typestr": "|u1", "version": 3}
            raise AttributeError(name)
    g = G()
    g.__dict__["__st_raw_guard__"] = True
    class P:
        __getattr__ = functools.singledispatch(g)
    try:
        print(bytes(np.asarray(P())))
    except Exception as e:
        print("refused", type(e).__name__)
    """])
    assert "cells" in rec, rec
    assert "HELLO-RAW-MEMORY-READ" not in all_text(rec).replace('b"HELLO', ""), all_text(rec)


def test_held_getattr_answering_array_interface_is_wrapped():
    rec = run_cells([_RAW_READ_PRELUDE + """
    class P:
        def __getattr__(self, name):
            if name == "__array_interface__":
                return {"data": (addr, False), "shape": (21,), "typestr": "|u1", "version": 3}
            raise AttributeError(name)
    try:
        print(bytes(np.asarray(P())))
    except Exception as e:
        print("refused", type(e).__name__)
    """])
    assert "cells" in rec, rec
    assert "HELLO-RAW-MEMORY-READ" not in all_text(rec), all_text(rec)


# R16-14: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_14_code_swapped_cell_function_runs_without_tick_after_cell():
    marker = OUTSIDE + "/pwn_code.npy"
    if os.path.exists(marker):
        os.remove(marker)
    rec = run_cells(["""
        import contextlib, functools, numpy as np
        class T:
            pass
        t = T()
        t.close = functools.partial(np.save, "/tmp/review16/outside/pwn_code.npy", np.arange(3))
        def d(self, *a):
            pass
        functools.update_wrapper(d, contextlib.closing.__exit__, assigned=("__code__",), updated=())
        class K:
            __repr__ = d
        k = K()
        k.thing = t
    """], post="""
try:
    repr(e.namespace["k"])   # the host touching a cell's object after the cell
except Exception:
    pass
""")
    assert "cells" in rec, rec
    assert not os.path.exists(marker), "the cell's (code-swapped) function ran library code after the cell, unconfined"


def test_held_gc_finalizers_after_the_cell_are_confined():
    marker = OUTSIDE + "/pwn_del.npy"
    if os.path.exists(marker):
        os.remove(marker)
    rec = run_cells(["""
        import contextlib, functools, numpy as np
        class T:
            pass
        t = T()
        t.close = functools.partial(np.save, "/tmp/review16/outside/pwn_del.npy", np.arange(3))
        def d(self, *a):
            pass
        functools.update_wrapper(d, contextlib.closing.__exit__, assigned=("__code__",), updated=())
        class K:
            __del__ = d
        k = K()
        k.thing = t
        k.me = k
        del k
    """], post="import gc\ngc.collect()\n")
    assert "cells" in rec, rec
    assert not os.path.exists(marker)


def test_held_complete_and_inspect_do_not_compare_cell_keys():
    marker = OUTSIDE + "/pwn_complete.npy"
    if os.path.exists(marker):
        os.remove(marker)
    rec = run_cells(["""
        import contextlib, functools, numpy as np
        class T:
            pass
        t = T()
        t.close = functools.partial(np.save, "/tmp/review16/outside/pwn_complete.npy", np.arange(3))
        def d(self, *a):
            pass
        functools.update_wrapper(d, contextlib.closing.__exit__, assigned=("__code__",), updated=())
        class S(str):
            __hash__ = str.__hash__
            __eq__ = d
        key = S("attr")
        key.thing = t
        class O:
            pass
        o = O()
        o.__dict__[key] = 1
        o.plain = 2
    """], post="""
POST_OUT["complete"] = e.complete("o.")["matches"][:5]
POST_OUT["inspect"] = e.inspect("o.plain").get("found")
POST_OUT["inspect_attr"] = e.inspect("o.attr").get("found")
""")
    assert "cells" in rec, rec
    assert not os.path.exists(marker)


# R16-15: closed (math.gcd and math.lcm charged where fractions reads them too: charges.py)
@pytest.mark.parametrize("call", ["math.gcd(a, b)", "math.lcm(a, b)", "fractions.Fraction(a, b)"])
def test_r16_15_gcd_of_big_ints_is_charged(call):
    rec = run_cells([(f"""
        import math, fractions
        a = 3 ** 600000
        b = 7 ** 340000 + 1
        print("made")
        print("finished", {call} is not None, math.gcd(12, 18))
    """, {"ticks": 10**6, "timeout": 600.0})])
    assert "cells" in rec, rec
    assert "made" in all_text(rec) and "finished" not in all_text(rec), rec
    assert any("Tick" in e[0] for e in rec["cells"][0]["errors"]), rec


# R16-16: closed (pandas.to_pickle denied like the methods; numpy's savers never pickle)
def test_r16_16_pd_to_pickle_writes_a_loaded_later_payload():
    payload = WORK + "/payload16.pkl"
    marker = OUTSIDE + "/pwn_unpickled.txt"
    for f in (payload, marker, WORK + "/payload16.npy"):
        if os.path.exists(f):
            os.remove(f)
    rec = run_cells(["""
        import pandas as pd, numpy as np
        class P:
            pass
        p = P()
        def red(proto):
            return (np.savetxt, ("/tmp/review16/outside/pwn_unpickled.txt", np.array(["echo pwned"]), "%s"))
        p.__dict__["__reduce_ex__"] = red
        try:
            pd.to_pickle(p, "payload16.pkl")
        except Exception as e:
            print("refused", type(e).__name__)
        try:
            np.save("payload16.npy", np.array([p], dtype=object))
        except Exception as e:
            print("refused", type(e).__name__)
        np.save("honest16.npy", np.arange(3))
        print("honest", np.load("honest16.npy").tolist())
    """])
    assert "cells" in rec, rec
    assert "honest [0, 1, 2]" in all_text(rec), all_text(rec)
    npy = WORK + "/payload16.npy"
    assert not os.path.exists(npy) or b"savetxt" not in open(npy, "rb").read(), "numpy pickled an object array"
    if os.path.exists(payload):   # what the operator's pd.read_pickle / pickle.load would do later
        subprocess.run([PY, "-c", f"import pickle; pickle.load(open({payload!r}, 'rb'))"], capture_output=True)
    assert not os.path.exists(payload), "the cell wrote a pickle despite the to_pickle denials"
    assert not os.path.exists(marker)


_INTERCHANGE_CELL = 'import pandas as pd, numpy as np\nsecret = b"HELLO-INTERCHANGE-READ!!"\naddr = id(secret) + 32\nn = 24\nclass Buf:\n    def __init__(self):\n        self.ptr = addr\n        self.bufsize = n\n    def __dlpack__(self):\n        raise NotImplementedError\n    def __dlpack_device__(self):\n        return (1, None)\nclass Col:\n    def size(self):\n        return n\n    @property\n    def offset(self):\n        return 0\n    @property\n    def dtype(self):\n        return (pd.api.interchange.from_dataframe.__module__ and 0, 8, "C", "=") if False else (0, 8, "c", "=")\n    @property\n    def describe_null(self):\n        return (0, None)\n    @property\n    def null_count(self):\n        return 0\n    def num_chunks(self):\n        return 1\n    def get_chunks(self, n_chunks=None):\n        yield self\n    def get_buffers(self):\n        return {"data": (Buf(), (1, 8, "C", "=")), "validity": None, "offsets": None}\n    @property\n    def metadata(self):\n        return {}\nclass DF:\n    def __dataframe__(self, nan_as_null=False, allow_copy=True):\n        return self\n    def num_chunks(self):\n        return 1\n    def get_chunks(self, n_chunks=None):\n        yield self\n    def column_names(self):\n        return ["a"]\n    def get_column_by_name(self, name):\n        return Col()\n    def num_columns(self):\n        return 1\n    def num_rows(self):\n        return n\n    @property\n    def metadata(self):\n        return {}\ntry:\n    out = pd.api.interchange.from_dataframe(DF())\n    print(bytes(out["a"].to_numpy().astype(np.uint8)))\nexcept Exception as e:\n\n    print("E", type(e).__name__, str(e)[:300])\n'


def test_held_dataframe_interchange_with_fake_buffers_refused():
    rec = run_cells([_INTERCHANGE_CELL])
    assert "cells" in rec, rec
    assert "HELLO-INTERCHANGE" not in all_text(rec).replace("b\"HELLO-INTERCHANGE-READ!!\"", ""), all_text(rec)


# R16-17: closed for getrandbits (module function, instances, SystemRandom: Gates.random_bits); int(Decimal) is R16-9
def test_r16_17_getrandbits_past_int_cap():
    rec = run_cells([("""
        import random
        for make in (lambda: random.getrandbits(10**8), lambda: random.Random(1).getrandbits(10**8),
                     lambda: random.Random.getrandbits(random.SystemRandom(), 10**8)):
            try:
                x = make()
                print("bits", x.bit_length() > 8 * 2**20)
            except Exception as e:
                print("refused", type(e).__name__)
        print("honest", random.getrandbits(64).bit_length() <= 64)
    """, {"timeout": 600.0})])
    assert "cells" in rec, rec
    assert "bits True" not in all_text(rec) and all_text(rec).count("refused SizeDenied") == 3, rec
    assert "honest True" in all_text(rec), rec


# R16-18: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_18_typ_spoofed_index_gives_categorical_unchecked_codes():
    rec = run_cells(["""
        import pandas as pd, numpy as np
        class V:
            _codes = np.array([0, 1, 20, 40, 60, 100, 127], dtype=np.int8)
        class F:
            _typ = "index"
            dtype = pd.CategoricalDtype(pd.Index([7, 9], dtype="int64"))
            _values = V()
            name = None
            def __iter__(self):
                return iter([])
            def __len__(self):
                return 7
        try:
            c = pd.Categorical(F())
            print("values", sorted(set(np.asarray(c).tolist()) - {7, 9}))
        except Exception as e:
            print("refused", type(e).__name__)
    """])
    assert "cells" in rec, rec
    text = all_text(rec)
    assert "values" not in text or "values []" in text, text


# R16-18: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_18b_typ_spoofed_index_over_object_categories_crashes_host():
    rec = run_cells(['import pandas as pd, numpy as np\nclass V:\n    _codes = np.array([0, 1, 100, 127], dtype=np.int8)\nclass F:\n    _typ = "index"\n    dtype = pd.CategoricalDtype(["a", "b"])\n    _values = V()\n    name = None\n    def __iter__(self):\n        return iter([])\n    def __len__(self):\n        return 4\ntry:\n    c = pd.Categorical(F())\n    print("made", c.codes)\nexcept Exception as e:\n    print("E", type(e).__name__, str(e)[:300])\nfor name, fn in [("asarray", lambda: np.asarray(c)), ("tolist", lambda: c.tolist()), ("astype_obj", lambda: c.astype(object)),\n                 ("list", lambda: list(c)), ("series_vals", lambda: pd.Series(c).to_numpy()), ("repr", lambda: repr(c)),\n                 ("to_numpy_str", lambda: c.astype(str)), ("getitem", lambda: c[3]), ("categories_take", lambda: np.asarray(c)[2:])]:\n    try:\n        r = fn(); print(name, "OK", repr(r)[:150])\n    except Exception as e:\n        print(name, "E", type(e).__name__, str(e)[:120])\n'])
    assert "cells" in rec, f"the host process died: {rec}"


def test_held_instance_dict_array_interface_is_absent():
    rec = run_cells([_RAW_READ_PRELUDE + """
    class P:
        pass
    p = P()
    p.__dict__["__array_interface__"] = {"data": (addr, False), "shape": (21,), "typestr": "|u1", "version": 3}
    try:
        print(bytes(np.asarray(p)))
    except Exception as e:
        print("refused", type(e).__name__)
    """])
    assert "cells" in rec, rec
    assert "HELLO-RAW-MEMORY-READ" not in all_text(rec), all_text(rec)


@pytest.mark.parametrize("expr", ["@x.__globals__", "a.__class__.__mro__", "@x.__code__", "a.values.ctypes",
                                  "@x.__class__.__subclasses__()"])
def test_held_pandas_eval_expressions_are_gated(expr):
    rec = run_cells([f"""
        import pandas as pd
        df = pd.DataFrame({{"a": [1, 2]}})
        def f():
            pass
        def g():
            x = f
            try:
                r = df.eval({expr!r})
                print("GOT", type(r).__name__)
            except Exception as e:
                print("refused", type(e).__name__)
        g()
    """])
    assert "cells" in rec, rec
    assert "GOT" not in all_text(rec), all_text(rec)


# R16-3: closed (review 16's fixes); the test performs the attack and asserts that it failed
def test_r16_3c_update_wrapper_turns_confinement_off_and_runs_process():
    marker = OUTSIDE + "/pwn_incell.txt"
    if os.path.exists(marker):
        os.remove(marker)
    rec = run_cells([_COLLECT_GLOBALS + """
    confine = ga(imp("sys"), "modules")["sandbox_kernel.confine"]
    ga(confine, "_FS").set(None)
    ga(confine, "_ACTIVE")[0] = None
    try:
        ga(imp("os"), "system")("id > /tmp/review16/outside/pwn_incell.txt")
    except Exception as e:
        print("refused", type(e).__name__)
    """])
    assert "cells" in rec, rec
    assert not os.path.exists(marker), "the cell ran a process inside the cell"


@pytest.mark.parametrize("cell", ["%timeit -n1 -r1 -v __st_own__ pass",
                                  "class A:\n    pass\na = A()\n%timeit -n1 -r1 -v a.__class__ pass",
                                  "x = %time __st_own__"])
def test_held_magic_targets_are_checked(cell):
    rec = run_cells([cell])
    assert "cells" in rec, rec
    assert rec["cells"][0]["status"] == "error", rec
