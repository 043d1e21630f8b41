"""Must-block: process-wide registries a cell's class or function joins (the registry sink).

A class a cell defines is recorded in places the whole process consults: its bases' subclass lists (an
ABC asks every subclass's __subclasshook__), ABC registries and caches, warnings filters. Code the cell
put there then runs, or answers, outside the cell: in the host's isinstance() checks, in another
thread, after the cell ended (where its first tick raises LimitExceeded into the host's code: the
kernel died inside ipykernel's logging). Each registry is either refused to a cell or confined to it:
outside a running cell the cell's hooks answer NotImplemented and nothing the cell decided persists.
The checks run in a child process: the host's ABCs are process-wide.
"""
from __future__ import annotations

import decimal
import json
import textwrap
import threading

import pytest

from childcell import host_probe_any, run_cell_in_child, run_in_engine, run_with_host, savetxt_writer
from conftest import Sandbox

HOST_CHECKS = """\
import collections.abc, numbers, warnings
def probe_host(report):
    def ask(name, fn):
        try:
            report[name] = fn()
        except BaseException as exc:
            report[name] = "raised " + type(exc).__name__
    ask("list_is_mapping", lambda: isinstance([], collections.abc.Mapping))
    ask("int_is_mapping", lambda: isinstance(3, collections.abc.Mapping))
    ask("str_is_number", lambda: isinstance("a", numbers.Number))
    ask("dict_is_mapping", lambda: isinstance({}, collections.abc.Mapping))
    ask("int_is_number", lambda: isinstance(3, numbers.Number))
    def warn():
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("default")
            warnings.warn("host warning", UserWarning)
        return len(seen)
    ask("host_warnings_seen", warn)
    def warn_plain():
        warnings.warn("host warning 2", RuntimeWarning)
        return "ok"
    ask("host_warn", warn_plain)
"""

HOST_UNCHANGED = {"list_is_mapping": False, "int_is_mapping": False, "str_is_number": False,
                  "dict_is_mapping": True, "int_is_number": True, "host_warnings_seen": 1, "host_warn": "ok"}

# --- Issue 10, finding 3: a cell subclass of a library ABC answers every isinstance() of that ABC -----------
# ABCMeta asks each subclass's __subclasshook__ (recursively, through Mapping.__subclasses__()), caches
# the positive answers in the library ABC, and consults the subclass's own registry: a cell class made
# isinstance([], Mapping) True for the whole process, and after the cell its hook raised LimitExceeded
# inside the host's isinstance().

REGISTRATIONS = {
    "subclasshook_true": "import collections.abc\nclass M(collections.abc.Mapping):\n"
                         "    @classmethod\n    def __subclasshook__(cls, C):\n        return True\n"
                         "isinstance([], collections.abc.Mapping)",
    "subclasshook_raises_after_the_cell": "import numbers\nclass N(numbers.Number):\n"
                                          "    @classmethod\n    def __subclasshook__(cls, C):\n        return 1 / 0\n",
    "subclasshook_loops_after_the_cell": "import collections.abc\nclass M(collections.abc.Mapping):\n"
                                         "    @classmethod\n    def __subclasshook__(cls, C):\n"
                                         "        while True:\n            pass\n",
    "register_on_a_cell_subclass": "import collections.abc\nclass M(collections.abc.Mapping):\n    pass\n"
                                   "try:\n    M.register(int)\nexcept Exception:\n    pass\n",
    "register_on_a_deeper_subclass": "import numbers\nclass A(numbers.Number):\n    pass\nclass B(A):\n    pass\n"
                                     "try:\n    B.register(str)\nexcept Exception:\n    pass\n",
    "subclasscheck_classmethod": "import collections.abc\nclass M(collections.abc.Mapping):\n"
                                 "    @classmethod\n    def __subclasscheck__(cls, C):\n        return True\n"
                                 "    @classmethod\n    def __instancecheck__(cls, x):\n        return True\n"
                                 "    @classmethod\n    def __subclasshook__(cls, C):\n        return True\n",
    "warning_category_abc": "import abc, warnings\nclass W(UserWarning, metaclass=abc.ABCMeta):\n"
                            "    @classmethod\n    def __subclasshook__(cls, C):\n        return 1 / 0\n"
                            "warnings.filterwarnings('error', category=W)\n",
    "warnings_filter_error": "import warnings\nwarnings.simplefilter('error')\n",
    "warnings_filter_ignore_everything": "import warnings\nwarnings.filterwarnings('ignore')\n",
}


@pytest.mark.parametrize("variant", sorted(REGISTRATIONS))
def test_cell_classes_do_not_answer_for_the_host(variant):
    result = run_cell_in_child(REGISTRATIONS[variant], report=("status",), probe=HOST_CHECKS, timeout=60)
    status = result.pop("status", None)
    assert "crashed" not in result, result
    assert result == HOST_UNCHANGED, f"{variant}: the host's answers changed ({status}: {result})"


def test_cell_hooks_still_answer_inside_the_cell(run):
    r = run("import collections.abc, abc, warnings\n"
            "class Duck(abc.ABC):\n    @classmethod\n    def __subclasshook__(cls, C):\n"
            "        return hasattr(C, 'quack') or NotImplemented\n"
            "class D:\n    def quack(self):\n        pass\n"
            "class M(collections.abc.Mapping):\n    def __getitem__(self, k):\n        return 1\n"
            "    def __len__(self):\n        return 0\n    def __iter__(self):\n        return iter(())\n"
            "class Mine(abc.ABC):\n    pass\nclass Other:\n    pass\nMine.register(Other)\n"
            "warnings.simplefilter('ignore')\nwarnings.warn('quiet')\n"
            "print(isinstance(D(), Duck), isinstance(1, Duck), isinstance(M(), collections.abc.Mapping), "
            "isinstance(Other(), Mine))")
    assert r.ok, r
    assert r.stdout == "True False True True\n", r.stdout
    assert r.stderr == "", r.stderr


def test_warnings_filters_of_a_cell_persist_for_its_later_cells(run):
    assert run("import warnings\nwarnings.simplefilter('ignore')").ok
    r = run("import warnings\nwarnings.warn('quiet')\nprint('done')")
    assert r.ok and r.stderr == "", r


# ====================================================================================================
# From review round 3: state that leaks from a cell into the host
# thread, silent denials, private library state reached by shadowing the name in a sandbox subclass, C-level
# arithmetic past the limit.
# ====================================================================================================

def test_decimal_context_does_not_leak_to_host(run):
    ctx = decimal.getcontext()
    saved = (ctx.prec, dict(ctx.traps))
    try:
        run("import decimal\ndecimal.getcontext().prec = 3\ndecimal.getcontext().traps[decimal.Inexact] = True\n")
        assert decimal.getcontext().prec == saved[0]
        assert decimal.Decimal(1) / decimal.Decimal(3) == decimal.Decimal("0.3333333333333333333333333333")
    finally:
        ctx.prec = saved[0]
        for k, v in saved[1].items():
            ctx.traps[k] = v


# ====================================================================================================
# From review round 6: C consumers of huge iterators that are not among
# the sized builtins.
# ====================================================================================================

HOST_ABCS = """
    import collections.abc, numbers
    def probe_host(report):
        report["str_is_number"] = isinstance("a", numbers.Number)
        report["list_is_mapping"] = isinstance([], collections.abc.Mapping)
"""


@pytest.mark.parametrize("src", ["import numbers\nnumbers.Number.register(str)",
                                 "import collections.abc\ncollections.abc.Mapping.register(list)"])
def test_abc_register_does_not_change_host_semantics(src):
    result = run_cell_in_child(src, report=(), probe=HOST_ABCS, timeout=60)
    assert result == {"str_is_number": False, "list_is_mapping": False}, result


# ====================================================================================================================
# Sink: process-wide registries.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 2 (docs/reviews.md, "Review 2").
# --- N2-4: process-wide library registries run the cell's callables in the host ----------------------------

PANDAS_FLOAT_FORMAT = """\
import functools, numpy as np, pandas as pd
pd.set_option("display.float_format", {formatter})
"""


REPORT_HOST_DATAFRAME_REPR = """\
def probe_host(report):
    import os, pandas as pd
    try:
        report["host_repr"] = "1.5" in repr(pd.DataFrame({{"a": [1.5]}}))
    except BaseException as exc:   # LimitExceeded is a BaseException
        report["host_repr"] = type(exc).__name__
    report["written"] = os.path.exists({path!r})
"""


def test_pandas_float_format_library_callable_does_not_run_in_the_host(outside):
    target = outside / "float-format.sh"
    result = run_cell_in_child(PANDAS_FLOAT_FORMAT.format(formatter=savetxt_writer(target)),
                               probe=REPORT_HOST_DATAFRAME_REPR.format(path=str(target)), hard_exit=True, timeout=60)
    assert result.get("written") is False, result
    assert not target.exists()


def test_pandas_float_format_cell_function_does_not_outlive_the_cell(outside):
    result = run_cell_in_child(PANDAS_FLOAT_FORMAT.format(formatter="lambda x: 'CELL'"),
                               probe=REPORT_HOST_DATAFRAME_REPR.format(path=str(outside / "none")), hard_exit=True,
                               timeout=60)
    assert result.get("host_repr") is True, result


UARRAY_GLOBAL_BACKEND = """\
import functools, numpy as np, pandas as pd, scipy.fft
w = {writer}
backend = pd.Series(["numpy.scipy.fft", w], index=["__ua_domain__", "__ua_function__"], dtype=object)
scipy.fft.set_global_backend(backend)
"""


REPORT_HOST_FFT = """\
def probe_host(report):
    import os, numpy as np, scipy.fft
    try:
        report["host_fft"] = len(scipy.fft.fft(np.ones(4))) == 4
    except BaseException as exc:
        report["host_fft"] = type(exc).__name__
    report["written"] = os.path.exists({path!r})
"""


def test_uarray_global_backend_does_not_run_in_the_host(outside):
    target = outside / "uarray.sh"
    result = run_cell_in_child(UARRAY_GLOBAL_BACKEND.format(writer=savetxt_writer(target)),
                               probe=REPORT_HOST_FFT.format(path=str(target)), hard_exit=True, timeout=60)
    assert result.get("written") is False, result
    assert result.get("host_fft") is True, result


MASKED_PRINT_OPTION = """\
import functools, numpy as np
class Shown:
    __str__ = {writer}
np.ma.masked_print_option.set_display(Shown())
"""


REPORT_HOST_MASKED_REPR = """\
def probe_host(report):
    import os, numpy as np
    try:
        report["host_repr"] = str(np.ma.masked_array([1, 2], mask=[1, 0]))
    except BaseException as exc:
        report["host_repr"] = type(exc).__name__
    report["written"] = os.path.exists({path!r})
"""


def test_masked_print_option_set_by_a_cell_does_not_run_in_the_host(outside):
    target = outside / "masked-print.sh"
    result = run_cell_in_child(MASKED_PRINT_OPTION.format(writer=savetxt_writer(target)),
                               probe=REPORT_HOST_MASKED_REPR.format(path=str(target)), hard_exit=True, timeout=60)
    # the class itself is refused since a cell class's special methods must be the cell's own code
    assert result.get("status") == "ok" or result.get("ename") == "AttributeDenied", result
    assert result.get("written") is False and result.get("host_repr") == "[-- 2]", result
    assert not target.exists()


def test_pandas_options_apply_to_the_engines_cells_and_never_to_the_host(sandbox, tmp_path):
    import pandas as pd
    host_rows, host_format = pd.get_option("display.max_rows"), pd.get_option("display.float_format")
    r = sandbox.run("import pandas as pd\npd.set_option('display.max_rows', 4)\n"
                    "pd.options.display.float_format = '<{:.1f}>'.format\n"
                    "df = pd.DataFrame({'a': [x + 0.25 for x in range(10)]})\ndf")
    assert r.ok and "..." in r.result_text and "<0.2>" in r.result_text, r
    assert pd.get_option("display.max_rows") == host_rows and pd.get_option("display.float_format") is host_format
    assert "..." not in repr(pd.DataFrame({"a": range(10)}))
    r = sandbox.run("print(pd.get_option('display.max_rows'))\ndf")   # a later cell of the same engine
    assert r.ok and r.stdout == "4\n" and "<9.2>" in r.result_text, r
    other = Sandbox(tmp_path / "other")   # another engine in the same process starts from the host's
    r = other.run("import pandas as pd\nprint(pd.get_option('display.max_rows'))")
    assert r.ok and r.stdout == f"{host_rows}\n", r
    assert pd.get_option("display.max_rows") == host_rows


PANDAS_OPTION_ROUTES = {
    "set_option": "pd.set_option('display.max_rows', 3)",
    "options_attribute": "pd.options.display.max_rows = 3",
    "option_context_left_open": "pd.option_context('display.max_rows', 3).__enter__()",
    "styler_formatter": "pd.set_option('styler.format.formatter', lambda v: 'CELL')",
    "reset_after_host_change": "pd.reset_option('display.max_rows')",
    # review 12, R12-2: the live tree (pd.options.d): a section replaced, a leaf deleted, the root section's dict
    "section_replaced": "d = pd.options.d\ndisp = dict(d['display'])\ndisp['max_rows'] = 3\nd['display'] = disp",
    "leaf_deleted": "del pd.options.d['display']['max_rows']",
    "nested_section_replaced": "pd.options.d['styler']['format'] = {'formatter': lambda v: 'CELL'}",
}


@pytest.mark.parametrize("route", sorted(PANDAS_OPTION_ROUTES))
def test_no_route_changes_the_hosts_pandas_options(run, route):
    import pandas as pd
    before = _every_pandas_option()
    with pd.option_context("display.max_rows", 7):   # the host's own value differs from the default
        r = run(f"import pandas as pd\n{PANDAS_OPTION_ROUTES[route]}\n")
        assert r.ok, r
        assert pd.get_option("display.max_rows") == 7
    after = _every_pandas_option()
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)


def _every_pandas_option() -> dict:
    from pandas._config import config
    values = {}
    for key in config._registered_options:
        root, leaf = config._get_root(key)
        values[key] = root[leaf]
    return values


def test_uarray_backends_set_by_a_cell_stay_in_its_engine(run):
    import numpy as np
    import scipy.fft
    r = run("import numpy as np, scipy.fft\nclass Doubling:\n    __ua_domain__ = 'numpy.scipy.fft'\n"
            "    @staticmethod\n    def __ua_function__(method, args, kwargs):\n        return 'CELL'\n"
            "scipy.fft.set_global_backend(Doubling)\nscipy.fft.register_backend(Doubling)\n"
            "scipy.fft.set_backend(Doubling).__enter__()\nprint(scipy.fft.fft(np.ones(2)))\n")
    assert r.ok and r.stdout == "CELL\n", r
    assert len(scipy.fft.fft(np.ones(4))) == 4   # the host's transforms are scipy's own
    r = run("print(scipy.fft.fft(np.ones(2)))\nwith scipy.fft.set_backend('scipy', only=True):\n"
            "    print(len(scipy.fft.fft(np.ones(2))))\n")
    assert r.ok and r.stdout == "CELL\n2\n", r
    assert len(scipy.fft.fft(np.ones(4))) == 4


def test_csv_dialects_registered_by_a_cell_stay_in_its_engine(run):
    import csv
    r = run("import csv\ncsv.register_dialect('excel', delimiter=';')\ncsv.register_dialect('mine', delimiter='|')\n"
            "csv.field_size_limit(10)\n")
    assert r.ok, r
    assert csv.get_dialect("excel").delimiter == "," and "mine" not in csv.list_dialects()
    assert csv.field_size_limit() == 131072
    r = run("print(csv.get_dialect('excel').delimiter, csv.get_dialect('mine').delimiter, csv.field_size_limit())")
    assert r.ok and r.stdout == "; | 10\n", r


def test_numpy_print_and_error_state_stay_in_the_cell(run):
    import numpy as np
    r = run("import numpy as np\nnp.set_printoptions(formatter={'float': lambda x: 'CELL'})\n"
            "def cb(*a):\n    pass\nnp.seterrcall(cb)\nnp.seterr(all='call')\n")
    assert r.ok, r
    assert "CELL" not in repr(np.array([1.5]))
    assert np.geterrcall() is None and np.geterr()["divide"] != "call"


KERNEL_THREAD_FINALIZER = """\
import pandas as pd
from scipy import stats
EVIL = ("import os\\n"
        "os.system('id > {marker}')\\n"
        "def _parse_args(self, *a, **k): return a, 0, 1\\n"
        "_parse_args_stats = _parse_args_rvs = _parse_args\\n")
class D(stats.rv_continuous):
    _parse_arg_template = EVIL
    def _construct_argparser(self, *args, **kwargs):
        pass
    def _pdf(self, x):
        return 1.0
got = []
class X:
    def __del__(self):
        try:
            got.append(str(pd.read_csv({secret_file!r}).columns[0]))
            D(name="d")
        except Exception as exc:
            got.append(type(exc).__name__)
for i in range(20):
    x = X()
    x.me = x
    del x
n = 0
while not got and n < 10**6:   # the cell runs on while a kernel thread collects the cycles
    n += 1
print(got)
"""


def test_a_cell_finalizer_collected_on_a_kernel_thread_during_the_cell_is_confined(run, tmp_path, outside, host_secret):
    # Stands in for ipykernel's iopub thread at level none, which allocates (and so collects) while a
    # cell prints; here a thread of the host collects explicitly, so the race is won every time.
    import gc
    marker = outside / "pwned-by-kernel-thread-finalizer"
    stop = threading.Event()

    def collect():   # a full collection every 20 ms: often enough to meet the cell, rarely enough not to starve it
        while not stop.is_set():
            gc.collect()
            stop.wait(0.02)

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    try:
        r = run(KERNEL_THREAD_FINALIZER.format(marker=marker, secret_file=str(tmp_path / "secret.txt")))
    finally:
        stop.set()
        collector.join()
    escaped = [what for what, happened in (("a process ran", marker.exists()),
                                           ("a secret outside the workdir was read", r.leaked(host_secret)))
               if happened]
    assert not escaped, (escaped, r)


# From review 3 (docs/reviews.md, "Review 3").
# --- N3-3 (lesser): host state a cell changes with no code in it ---------------------------------------------
# Not code, but process-wide state of granted libraries that outlives the cell at level none: the class-level
# lists of dateutil's parserinfo (dateutil's *instances* are read-only for exactly this reason), calendar's
# module-level TextCalendar (calendar.setfirstweekday), plotly's template registry and its default.

HOST_STATE_WRITES = {
    "dateutil_parserinfo_class_list": ("import dateutil.parser as dp\ndp.parserinfo.JUMP.append('zzjump')\n",
                                       "import dateutil.parser as dp\nvalue = 'zzjump' in dp.parserinfo.JUMP"),
    "calendar_firstweekday": ("import calendar\ncalendar.setfirstweekday(6)\n",
                              "import calendar\nvalue = calendar.firstweekday() != 0"),
    "plotly_template_default": ("import plotly.io as pio\npio.templates['zz'] = {'layout': {'title': {'text': 'X'}}}\n"
                                "pio.templates.default = 'zz'\n",
                                "import plotly.io as pio\nvalue = pio.templates.default == 'zz'"),
}


REPORT_HOST_STATE = """\
def probe_host(report):
{check}
    report["changed"] = bool(value)
"""


@pytest.mark.parametrize("write", sorted(HOST_STATE_WRITES))
def test_library_process_state_is_not_changed_by_a_cell(write):
    from childcell import run_cell_in_child

    cell, check = HOST_STATE_WRITES[write]
    result = run_cell_in_child(cell, probe=REPORT_HOST_STATE.format(check=textwrap.indent(check, "    ")),
                               hard_exit=True, timeout=60)
    assert result.get("status") == "ok", result
    assert result.get("changed") is False, result


# From review 4 (docs/reviews.md, "Review 4").
def test_print_options_do_not_reach_the_host(outside):
    target = outside / "printoptions.sh"
    cell = ("import functools, numpy as np\nnp.set_printoptions(formatter={{'float': {writer}}})\n"
            .format(writer=savetxt_writer(target)))
    probe = "def probe_host(report):\n    import numpy as np\n    report['text'] = repr(np.array([1.5]))\n"
    result = run_cell_in_child(cell, report=("status",), probe=probe)
    assert result.get("text") == "array([1.5])", result
    assert not target.exists()


def test_csv_dialects_and_field_size_limit_stay_in_the_engine():
    cell = "import csv\ncsv.register_dialect('excel', delimiter=';')\ncsv.field_size_limit(5)\n"
    probe = ("def probe_host(report):\n    import csv\n"
             "    report['delimiter'] = csv.get_dialect('excel').delimiter\n"
             "    report['limit'] = csv.field_size_limit()\n")
    result = run_cell_in_child(cell, report=("status",), probe=probe)
    assert result["status"] == "ok", result
    assert result["delimiter"] == "," and result["limit"] != 5, result


# From review 5 (docs/reviews.md, "Review 5").
PROCESS_STATE = {
    "warnings_simplefilter": ("import warnings\nwarnings.simplefilter('error')\n",
                              "import warnings\n    try:\n        warnings.warn('host', UserWarning)\n"
                              "        report['changed'] = False\n    except UserWarning:\n"
                              "        report['changed'] = True"),
    "decimal_context": ("import decimal\ndecimal.getcontext().prec = 3\n",
                        "import decimal\n    report['changed'] = decimal.getcontext().prec == 3"),
    "decimal_setcontext": ("import decimal\ndecimal.setcontext(decimal.Context(prec=3))\n",
                           "import decimal\n    report['changed'] = decimal.getcontext().prec == 3"),
    "decimal_default_context": ("import decimal\ndecimal.DefaultContext.prec = 3\n",
                                "import decimal\n    report['changed'] = decimal.DefaultContext.prec == 3"),
    "numpy_seterr": ("import numpy as np\nnp.seterr(all='raise')\n",
                     "import numpy as np\n    report['changed'] = np.geterr()['divide'] == 'raise'"),
    "numpy_seterrcall": ("import numpy as np\nnp.seterrcall(print)\nnp.seterr(all='call')\n",
                         "import numpy as np\n    report['changed'] = np.geterrcall() is not None"),
    "pandas_option": ("import pandas as pd\npd.set_option('display.max_rows', 3)\n",
                      "import pandas as pd\n    report['changed'] = pd.get_option('display.max_rows') == 3"),
}


@pytest.mark.parametrize("route", sorted(PROCESS_STATE))
def test_process_wide_settings_stay_the_hosts(route):
    cell, use = PROCESS_STATE[route]
    result = run_cell_in_child(cell, report=("status", "ename"), probe="def probe_host(report):\n    " + use + "\n")
    assert "crashed" not in result, result
    assert result.get("changed") is False, result


@pytest.mark.parametrize("cell", [
    "import warnings\nwarnings.filters.insert(0, ('error', None, Warning, None, 0))\n",
    "import json\njson._default_encoder.indent = 5\n",
    "import copy\ncopy._deepcopy_dispatch[int] = print\n",
    "import numpy as np\nnp.random.mtrand._rand.seed(1)\n",
    "import collections.abc\ncollections.abc.Callable.register(str)\n",
    "import numbers\nnumbers.Number.register(str)\n",
    "import functools, numpy as np, pandas as pd\nclass PlantedDtype(pd.api.extensions.ExtensionDtype):\n"
    "    name = 'planted'\npd.api.extensions.register_extension_dtype(PlantedDtype)\n",
    "import pandas as pd\n@pd.api.extensions.register_dataframe_accessor('planted')\nclass Acc:\n"
    "    def __init__(self, obj):\n        pass\n",
])
def test_shared_registries_and_private_state_are_refused(tmp_path, cell):
    done, _ = run_in_engine(cell, tmp_path)
    assert done["status"] == "error" and done["denials"], done


# From review 6 (docs/reviews.md, "Review 6").
@pytest.mark.parametrize("how", ["set_global_backend(B)", "register_backend(B)", "set_global_backend(B())"])
def test_scipy_fft_backends_are_kept_per_engine(outside, how):
    target = outside / "fft-backend"
    cell = ("import functools, numpy as np, scipy.fft\nclass B:\n    __ua_domain__ = 'numpy.scipy.fft'\n"
            f"    __ua_function__ = staticmethod(functools.partial(np.savez, {str(target)!r}))\n"
            f"scipy.fft.{how}\n")
    result = run_cell_in_child(cell, report=("status", "ename"),
                               probe=host_probe_any("import numpy as np, scipy.fft\nscipy.fft.fft(np.arange(4.0))"),
                               hard_exit=True)
    assert "crashed" not in result and "host_error" not in result, result
    assert not list(outside.iterdir()), result


# From review 7 (docs/reviews.md, "Review 7").
# --- held ---------------------------------------------------------------------------------------------------------

def test_a_redirected_stdout_left_entered_is_not_the_hosts(outside):
    target = outside / "stdout.txt"
    cell = ("import contextlib, functools, numpy as np\n"
            f"class W:\n    write = {savetxt_writer(target)}\n    flush = {savetxt_writer(target)}\n"
            "es = contextlib.ExitStack()\nes.enter_context(contextlib.redirect_stdout(W()))\n")
    use = "import sys\nprint('host output')\nsys.stdout.flush()\nreport['stdout'] = type(sys.stdout).__name__"
    result = run_with_host(cell, use)
    assert result["status"] == "ok", result
    assert not target.exists(), f"the host's print ran the cell's planted write: {json.dumps(result)}"


def test_printing_through_a_planted_stdout_in_the_cell_is_refused(outside):
    target = outside / "stdout-cell.txt"
    cell = ("import contextlib, functools, numpy as np\n"
            f"class W:\n    write = {savetxt_writer(target)}\n"
            "es = contextlib.ExitStack()\nes.enter_context(contextlib.redirect_stdout(W()))\nprint('x')\n")
    result = run_with_host(cell, "")
    assert result["ename"] == "FileDenied", result
    assert not target.exists()


# --- process-wide C state: the locale (review 9, N9-8), and what held ------------------------------------------------

def test_cell_leaves_the_process_locale_alone():
    """calendar.different_locale entered through an ExitStack and never left set the host's LC_TIME for good; the
    locale is kept per engine now (guards._ProcessLocale)."""
    cell = ("import calendar, contextlib\nst = contextlib.ExitStack()\n"
            "st.enter_context(calendar.different_locale('C.UTF-8'))\n")
    probe = ("import locale\nBEFORE = locale.setlocale(locale.LC_TIME)\ndef probe_host(report):\n"
             "    report['before'] = BEFORE\n    report['after'] = locale.setlocale(locale.LC_TIME)\n")
    result = run_cell_in_child(cell, report=("status", "ename", "evalue"), probe=probe, hard_exit=True, timeout=120)
    assert result["status"] == "ok" and result["after"] == result["before"], json.dumps(result)


def test_process_wide_decimal_contexts_stay_the_hosts():
    cell = ("import decimal\ndecimal.DefaultContext.prec = 3\ndecimal.DefaultContext.traps[decimal.Inexact] = True\n"
            "decimal.BasicContext.prec = 2\n")
    probe = ("import decimal\ndef probe_host(report):\n"
             "    report['host'] = [decimal.DefaultContext.prec, decimal.DefaultContext.traps[decimal.Inexact],"
             " decimal.BasicContext.prec]\n")
    result = run_cell_in_child(cell, report=("status", "ename", "evalue"), probe=probe, hard_exit=True, timeout=120)
    assert result["status"] == "ok" and result["host"] == [28, False, 9], json.dumps(result)


def test_std_streams_redirected_and_never_restored_stay_the_hosts():
    cell = ("import contextlib\nclass W:\n    def write(self, s):\n        return len(s)\n    def flush(self):\n"
            "        pass\nst = contextlib.ExitStack()\nst.enter_context(contextlib.redirect_stdout(W()))\n"
            "st.enter_context(contextlib.redirect_stderr(W()))\n")
    probe = ("import sys\ndef probe_host(report):\n"
             "    report['streams'] = [type(sys.stdout).__name__, type(sys.stderr).__name__]\n")
    result = run_cell_in_child(cell, report=("status", "ename", "evalue"), probe=probe, hard_exit=True, timeout=120)
    assert result["status"] == "ok" and result["streams"] == ["TextIOWrapper", "TextIOWrapper"], json.dumps(result)


def test_a_replaced_option_section_does_not_hand_the_host_a_callable(outside):
    """R12-2: the cell replaced pandas' 'display' section with its own dict holding a library callable as
    float_format; the per-engine swap restored the host's values into the detached old dict, and the host's next
    DataFrame print wrote the cell's file."""
    target = outside / "float-format-section.sh"
    cell = ("import functools, numpy as np, pandas as pd\nd = pd.options.d\ndisplay = dict(d['display'])\n"
            f"display['float_format'] = {savetxt_writer(target)}\nd['display'] = display\n")
    result = run_cell_in_child(cell, probe=REPORT_HOST_DATAFRAME_REPR.format(path=str(target)), hard_exit=True,
                               timeout=60)
    assert result.get("written") is False, result
    assert not target.exists()


def test_the_engines_own_option_changes_through_the_tree_stay_its_own(sandbox):
    import pandas as pd
    host_rows = pd.get_option("display.max_rows")
    r = sandbox.run("import pandas as pd\nd = pd.options.d\ndisp = dict(d['display'])\ndisp['max_rows'] = 5\n"
                    "d['display'] = disp\n")
    assert r.ok, r
    assert pd.get_option("display.max_rows") == host_rows
    r = sandbox.run("import pandas as pd\nprint(pd.get_option('display.max_rows'))")
    assert r.ok and r.stdout == f"{host_rows}\n", r   # the section the cell made is not the tree pandas reads


def test_numpys_global_random_state_is_the_engines(run):
    """R12-5: np.random.seed in a cell decided the host's later np.random draws (and another engine's)."""
    import numpy as np
    np.random.seed(1)
    expected = np.random.random()
    np.random.seed(1)
    r = run("import numpy as np\nnp.random.seed(12345)\nfirst = np.random.random()")
    assert r.ok, r
    assert np.random.random() == expected
    r = run("import numpy as np\nnp.random.seed(12345)\na = np.random.random()\n")
    r2 = run("b = np.random.random()\nnp.random.seed(12345)\nprint(a == first, np.random.random() == a)")
    assert r2.ok and r2.stdout == "True True\n", r2   # the engine's own stream, across its cells


# From review 15 (docs/reviews.md, "Review 15").
# --- R15-3 (lesser): a host lock entered for the cell and held after it ------------------------------------
# numpy's BitGenerator hands out its lock (an RLock: opaque, its methods refused), but `with lock:` ran its
# __enter__ all the same, and a generator suspended inside the `with` (or an ExitStack never closed) kept the lock
# after the cell: every other thread's np.random blocked for good.

LOCK_FREE_FOR_ANOTHER_THREAD = """\
def probe_host(report):
    import threading, numpy as np
    lock = np.random.get_bit_generator().lock
    got = []
    def try_it():
        got.append(lock.acquire(blocking=False))
        if got[0]:
            lock.release()
    t = threading.Thread(target=try_it)
    t.start()
    t.join()
    report['free'] = got[0]
"""


@pytest.mark.parametrize("hold", [
    "def hold():\n    with lock:\n        yield 1\nit = hold()\nnext(it)",
    "import contextlib\nstack = contextlib.ExitStack()\nstack.enter_context(lock)",
])
def test_a_host_lock_is_not_entered_for_the_cell(hold):
    cell = "import numpy as np\nlock = np.random.get_bit_generator().lock\n" + hold + "\nentered = True\n"
    result = run_cell_in_child(cell, report=("status", "ename"), ns=("entered",), probe=LOCK_FREE_FOR_ANOTHER_THREAD,
                               hard_exit=True)
    assert result["free"] is True and not result["entered"], result


def test_with_on_library_and_cell_managers_still_works(run):
    r = run("import contextlib, warnings, decimal, numpy as np\n"
            "with warnings.catch_warnings():\n    warnings.simplefilter('ignore')\n"
            "with np.errstate(divide='ignore'):\n    x = np.float64(1) / 0\n"
            "with decimal.localcontext() as c:\n    c.prec = 5\n"
            "class M:\n    def __enter__(self):\n        return 3\n    def __exit__(self, *a):\n        return False\n"
            "with contextlib.ExitStack() as s:\n    y = s.enter_context(M())\n"
            "with open('f.txt', 'w') as f:\n    f.write('ok')\n"
            "print(x, y, open('f.txt').read())")
    assert r.ok and r.stdout == "inf 3 ok\n", r


# From review 17 (docs/reviews.md, "Review 17").
# --- a cell's objects as keys of process-wide caches ----------------------------------------------------------------
# dateutil's tz.gettz, _strptime's format cache and typing's _tp_cache keep what they were given for the whole
# process; the host's next lookup with an equal hash compared against the cell's key and ran its __eq__ after the
# cell (LimitExceeded in the host). Outside a running cell a cell class's __eq__/__ne__/__hash__ answer by identity
# (gates._confined_key_method): the host's lookup misses the cell's key.

CACHE_KEYS = {
    "gettz": ("import dateutil.tz as tz\n{key}\ntz.gettz(K('Europe/Paris'))",
              "import dateutil.tz\nreport['host'] = str(dateutil.tz.gettz('Europe/Paris'))[:8]", "tzfile("),
    "strptime_format": ("import datetime\n{key}\ndatetime.datetime.strptime('2020', K('%Y'))",
                        "import datetime, time\nreport['host'] = (datetime.datetime.strptime('2021', '%Y').year, "
                        "time.strptime('2022', '%Y').tm_year)", [2021, 2022]),
    "typing_cache": ("import typing\nH = hash(bytes)\nclass K:\n    def __hash__(self):\n        return H\n"
                     "    def __eq__(self, other):\n        return True\ntyping.Optional[K()]\ntyping.List[K()]",
                     "import typing\nreport['host'] = [str(typing.Optional[bytes]), str(typing.List[bytes])]",
                     ["typing.Optional[bytes]", "typing.List[bytes]"]),
}
STR_KEY_ALWAYS_EQUAL = ("class K(str):\n    def __hash__(self):\n        return str.__hash__(self)\n"
                        "    def __eq__(self, other):\n        return True")


@pytest.mark.parametrize("cache", sorted(CACHE_KEYS))
def test_a_cells_key_in_a_process_cache_is_not_compared_after_the_cell(cache):
    cell, use, expected = CACHE_KEYS[cache]
    result = run_with_host(cell.format(key=STR_KEY_ALWAYS_EQUAL), use)
    assert result["status"] == "ok", result
    assert "host_error" not in result, result
    host = result.get("host")
    assert (host.startswith(expected) if isinstance(expected, str) else host == expected), result


# the same key, its __eq__ bound other ways: each answers by identity outside the cell
KEY_CLASSES = {
    "staticmethod": "class K:\n    __hash__ = lambda self: H\n    __eq__ = staticmethod(lambda other: True)",
    "written_after_creation": "class K:\n    pass\ndef eq(self, other):\n    return True\n"
                              "K.__eq__ = eq\nK.__hash__ = lambda self: H",
    "partial": "import functools\ndef eq(flag, self, other):\n    return flag\nclass K:\n"
               "    __hash__ = lambda self: H\n    __eq__ = functools.partialmethod(eq, True)",
    "inherited": "class B:\n    def __eq__(self, other):\n        return True\n    def __hash__(self):\n"
                 "        return H\nclass K(B):\n    pass",
}


@pytest.mark.parametrize("key", sorted(KEY_CLASSES))
def test_a_cells_key_bound_any_way_is_not_compared_after_the_cell(key):
    cell = "import typing\nH = hash(bytes)\n" + KEY_CLASSES[key] + "\ntyping.Optional[K()]\nprint(K() == 1)"
    result = run_with_host(cell, "import typing\nreport['host'] = str(typing.Optional[bytes])")
    assert result["status"] == "ok", result
    assert "host_error" not in result and result.get("host") == "typing.Optional[bytes]", result


def test_classes_an_import_makes_during_a_cell_keep_their_own_comparisons():
    """The key methods wrapped are the cell's only: pandas imported first by a cell makes its Index classes then,
    and the host's df.sales afterwards compares names with Index's own __eq__/__hash__ (a wrap of every class made
    during a cell answered by identity, and the host's column lookup failed)."""
    probe = ("import sys\nPANDAS_BEFORE = 'pandas' in sys.modules\n" +
             host_probe_any("import pandas as pd\nreport['host'] = int(pd.DataFrame({'sales': [2]}).sales.sum())\n"
                            "report['before'] = PANDAS_BEFORE\nreport['index'] = 'sales' in pd.Index(['sales'])"))
    result = run_cell_in_child("import pandas as pd\nprint(pd.DataFrame({'a': [1]}).a.sum())", probe=probe,
                               report=("status", "ename"), hard_exit=True)
    assert result["status"] == "ok" and result.get("before") is False, result
    assert result.get("host") == 2 and result.get("index") is True and "host_error" not in result, result


def test_a_cells_comparisons_still_run_in_its_cells(run):
    r = run("class K(str):\n    def __eq__(self, other):\n        return True\n    def __hash__(self):\n"
            "        return 1\nclass P:\n    def __init__(self, x):\n        self.x = x\n"
            "    def __eq__(self, other):\n        return isinstance(other, P) and self.x == other.x\n"
            "    def __ne__(self, other):\n        return not self == other\n    def __hash__(self):\n"
            "        return hash(self.x)\n"
            "print(K('a') == 'b', hash(K('a')), P(1) == P(1), P(1) != P(2), len({P(1), P(1), P(2)}))")
    assert r.ok and r.stdout == "True 1 True True 2\n", r


def test_the_host_compares_a_cells_objects_by_identity(sandbox):
    sandbox.run("class P:\n    def __eq__(self, other):\n        return True\n    def __hash__(self):\n"
                "        return 7\np = P()")
    p = sandbox.ns["p"]
    assert (p == 1, p == p, p != 1, hash(p) == object.__hash__(p)) == (False, True, True, True)


def test_a_generator_evicted_from_a_host_cache_runs_nothing_after_the_cell(outside):
    """Held in review 17: a cell generator hung on a key of _strptime's cache; the host's later strptime calls evict
    it and collect it, and its finally block (a file write) must not run outside the cell."""
    marker = outside / "finally.txt"
    cell = ("import datetime, pandas as pd\ndef g():\n    try:\n        yield 1\n    finally:\n"
            f"        pd.DataFrame({{'a': [1]}}).to_csv({str(marker)!r})\n"
            "it = g()\nnext(it)\nclass K(str):\n    pass\nk = K('%Y-%m')\nk.gen = it\n"
            "datetime.datetime.strptime('2020-01', k)\ndel it, k")
    use = ("import datetime, gc\nfor i in range(120):\n    datetime.datetime.strptime('2020' + 'x' * i, '%Y' + 'x' * i)\n"
           "gc.collect()\nreport['host'] = 'ok'")
    result = run_with_host(cell, use)
    assert result["status"] == "ok" and result.get("host") == "ok", result
    assert not marker.exists()

