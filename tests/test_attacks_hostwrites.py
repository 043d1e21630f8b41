"""Must-block: granted modules and classes must stay unchanged on the host even when the write is done
by a library helper on the cell's behalf (copy's reduce protocol, functools.update_wrapper,
dataclasses.dataclass, typing decorators) or by item assignment into module-level containers.
Every test restores the host objects it may have damaged, so a bypass cannot break later tests."""
from __future__ import annotations

import contextlib
import json
import math
import sys

import pandas as pd
import pytest

from childcell import host_probe_any, run_cell_in_child, savetxt_writer


@contextlib.contextmanager
def restored(*objs):
    snaps = [(o, dict(vars(o))) for o in objs]
    try:
        yield
    finally:
        for o, snap in snaps:
            if isinstance(o, type):
                for k in set(vars(o)) - set(snap):
                    with contextlib.suppress(Exception):
                        delattr(o, k)
                for k, v in snap.items():
                    if vars(o).get(k) is not v:
                        with contextlib.suppress(Exception):
                            setattr(o, k, v)
            elif isinstance(o, dict):
                pass
            else:
                vars(o).clear()
                vars(o).update(snap)


def _unchanged(obj, snap) -> bool:
    now = dict(vars(obj))
    return set(now) == set(snap) and all(now[k] is snap[k] for k in snap)


@pytest.mark.parametrize("fn", ["copy", "deepcopy"])
def test_copy_reduce_protocol_cannot_write_modules(sandbox, fn):
    snap = dict(vars(math))
    with restored(math):
        sandbox.run("import copy, math\n"
                    "def get_math():\n    return math\n"
                    "class X:\n    def __reduce_ex__(self, proto):\n"
                    "        return (get_math, (), {'floor': lambda v: 42, 'sandbox_was_here': True})\n"
                    f"copy.{fn}(X())\n")
        assert _unchanged(math, snap), "the host's math module was modified"


@pytest.mark.parametrize("call", ["functools.update_wrapper(math, f)", "functools.wraps(f)(math)"])
def test_update_wrapper_cannot_write_modules(sandbox, call):
    snap = dict(vars(math))
    with restored(math):
        sandbox.run("import functools, math\ndef f():\n    pass\nf.sqrt = lambda v: 43\n"
                    f"try:\n    {call}\nexcept Exception:\n    pass\n")
        assert math.__name__ == "math"
        assert _unchanged(math, snap), "the host's math module was modified"


@pytest.mark.parametrize("call,target", [
    ("dataclasses.dataclass(json.JSONDecoder)", json.JSONDecoder),
    ("typing.no_type_check(pd.DataFrame)", pd.DataFrame),
])
def test_class_decorators_cannot_write_library_classes(sandbox, call, target):
    snap = dict(vars(target))
    with restored(target):
        sandbox.run(f"import dataclasses, typing, json, pandas as pd\ntry:\n    {call}\nexcept Exception:\n    pass\n")
        assert _unchanged(target, snap), f"{target.__name__} was modified"


def test_module_level_containers_are_read_only(sandbox):
    import numpy as np
    original = dict(np.sctypeDict)
    try:
        sandbox.run("import numpy as np\nnp.sctypeDict['float64'] = np.int8\n")
        assert np.dtype("float64") == np.float64, "the host's numpy dtype table changed"
    finally:
        np.sctypeDict.clear()
        np.sctypeDict.update(original)


def test_direct_writes_stay_refused(run):
    for src in ("import math\nmath.__dict__.update({'floor': 1})", "import math\nvars(math).update(floor=1)",
                "import math\nsetattr(math, 'floor', 1)"):
        r = run(src)
        assert not r.ok and r.denials, (src, r)
    assert math.floor(1.5) == 1


# ====================================================================================================
# From review round 5: variants of the in-progress fixes (printf widths
# that are not literals).
# ====================================================================================================

# --- copy guard checks only the top-level object -------------------------------------------------------

@pytest.mark.parametrize("call", ["copy.deepcopy([X()])", "copy.deepcopy({'k': X()})", "copy.deepcopy((X(),))",
                                  "copy.deepcopy(Holder())"])
def test_copy_guard_nested(sandbox, call):
    import math
    snap = dict(vars(math))
    try:
        sandbox.run("import copy, math\ndef get_math():\n    return math\n"
                    "class X:\n    def __reduce_ex__(self, proto):\n"
                    "        return (get_math, (), {'floor': lambda v: 42})\n"
                    "class Holder:\n    def __init__(self):\n        self.x = X()\n"
                    f"try:\n    {call}\nexcept Exception:\n    pass\n")
        assert dict(vars(math)).keys() == snap.keys() and all(vars(math)[k] is snap[k] for k in snap), \
            "the host's math module was modified"
    finally:
        vars(math).clear()
        vars(math).update(snap)


# --- the "target must be the cell's" guard only looks at a positional target ---------------------------

@pytest.mark.parametrize("call,probe", [
    ("functools.update_wrapper(wrapper=math, wrapped=f)", "math"),
    ("typing.no_type_check(arg=pd.DataFrame)", "DataFrame"),
])
def test_target_guard_by_keyword(sandbox, call, probe):
    import math
    import pandas as pd
    target = math if probe == "math" else pd.DataFrame
    snap = dict(vars(target))
    try:
        sandbox.run("import functools, typing, math, pandas as pd\ndef f():\n    pass\nf.sqrt = lambda v: 43\n"
                    f"try:\n    {call}\nexcept Exception:\n    pass\n")
        now = dict(vars(target))
        assert now.keys() == snap.keys() and all(now[k] is snap[k] for k in snap), f"{probe} was modified"
    finally:
        if target is math:
            vars(math).clear()
            vars(math).update(snap)
        else:
            for k in set(vars(target)) - set(snap):
                delattr(target, k)
            for k, v in snap.items():
                if vars(target).get(k) is not v:
                    setattr(target, k, v)


# ====================================================================================================================
# Sink: process-wide registries (host modules and classes a library helper writes on the cell's behalf), and
# copy's reduction protocol.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 1 (docs/reviews.md, "Review 1").
def test_reduce_cannot_replace_a_module_function_through_copy(run):
    r = run("""\
import copy, json
def getmod(): return json
class A:
    def __reduce__(self):
        return (getmod, (), {"dumps": len})
copy.copy(A())
""")
    assert not r.ok and r.error_name == "NameDenied", r
    assert json.dumps.__module__ == "json" and json.dumps.__name__ == "dumps"


# From review 2 (docs/reviews.md, "Review 2").
# --- N2-2: enum.global_enum writes into any loaded module --------------------------------------------------

GLOBAL_ENUM_ROUTES = {
    "functional_module_argument": "import enum\nE = enum.Enum('E', {'loads': 1}, module='json')\nenum.global_enum(E)",
    "module_dunder_written": "import enum\nclass E(enum.Enum):\n    loads = 1\nE.__module__ = 'json'\n"
                             "enum.global_enum(E)",
}


REPORT_JSON_LOADS = """\
def probe_host(report):
    import json, types
    report["loads_is_a_function"] = isinstance(json.loads, types.FunctionType)
"""


@pytest.mark.parametrize("route", sorted(GLOBAL_ENUM_ROUTES))
def test_global_enum_does_not_write_host_modules(route):
    result = run_cell_in_child(GLOBAL_ENUM_ROUTES[route], probe=REPORT_JSON_LOADS, hard_exit=True, timeout=60)
    assert result.get("loads_is_a_function") is True, result


GLOBAL_ENUM_ESCAPE = """\
import enum, functools
E = enum.Enum("E", {{"_confinement": 1, "__call__": functools.partial({{}}.get, 0)}},
              module="sandbox_kernel.confine")
enum.global_enum(E)
#CELL
import pandas as pd
try:
    read_secret = "{secret}" in str(pd.read_csv({secret_file!r}).columns[0])
except Exception:
    read_secret = False
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
try:
    D(name="d")
except Exception:
    pass
"""


def test_global_enum_is_not_a_full_escape(tmp_path, outside, host_secret):
    marker = outside / "pwned-by-global-enum"
    result = run_cell_in_child(GLOBAL_ENUM_ESCAPE.format(secret=host_secret, secret_file=str(tmp_path / "secret.txt"),
                                                         marker=marker),
                               ns=("read_secret",), hard_exit=True, timeout=60)
    escaped = [what for what, happened in (("a process ran", marker.exists()),
                                           ("a secret outside the workdir was read", result.get("read_secret")))
               if happened]
    assert not escaped, (escaped, result)


ENUM_CONVERT_WRITES_A_MODULE = """\
import enum
import sys
class E(enum.Enum):
    pass
C = E._convert_("C", "json", lambda name: name == "decoder")
"""


REPORT_JSON_DECODER = """\
def probe_host(report):
    import json, types
    report["decoder_is_a_module"] = isinstance(json.decoder, types.ModuleType)
"""


def test_enum_convert_does_not_write_host_modules():
    result = run_cell_in_child(ENUM_CONVERT_WRITES_A_MODULE, probe=REPORT_JSON_DECODER, hard_exit=True, timeout=60)
    assert result.get("decoder_is_a_module") is True, result


def test_global_enum_puts_the_cells_enum_into_the_cells_names(run):
    r = run("import enum\n@enum.global_enum\nclass Color(enum.Enum):\n    RED = 1\n    GREEN = 2\n"
            "print(RED is Color.RED, GREEN.name)\n")
    assert r.ok and r.stdout == "True GREEN\n", r


@pytest.mark.parametrize("target", ["re.RegexFlag", "enum.Enum('F', 'A B')"])
def test_global_enum_of_a_class_the_cell_did_not_define_is_refused(run, target):
    import re
    flags = dict(vars(re))
    r = run(f"import enum, re\nenum.global_enum({target})\n")
    assert not r.ok and r.error_name == "CallDenied", r
    assert dict(vars(re)) == flags


# --- N2-5: typing helpers that write their argument -----------------------------------------------------------

def test_dataclass_transform_does_not_write_library_classes(run):
    import pandas as pd
    try:
        run("import typing, pandas as pd\ntyping.dataclass_transform(field_specifiers=(1,))(pd.DataFrame)")
        assert "__dataclass_transform__" not in vars(pd.DataFrame), "a host class was written"
    finally:
        if "__dataclass_transform__" in vars(pd.DataFrame):
            del pd.DataFrame.__dataclass_transform__


def test_typing_final_does_not_write_library_classes(run):
    import pandas as pd
    r = run("import typing, pandas as pd\ntyping.final(pd.DataFrame)")
    assert not r.ok and r.error_name == "CallDenied", r
    assert "__final__" not in vars(pd.DataFrame)


WRITING_HELPERS = {
    "dataclass_transform_function": ("typing.dataclass_transform()(pd.read_csv)", "read_csv",
                                     "__dataclass_transform__"),
    "no_type_check_decorator": ("typing.no_type_check_decorator(lambda x: pd.DataFrame)(1)", "DataFrame",
                                "__no_type_check__"),
    "abstractclassmethod": ("abc.abstractclassmethod(pd.DataFrame.apply)", "DataFrame.apply", "__isabstractmethod__"),
    "abstractstaticmethod": ("abc.abstractstaticmethod(pd.read_csv)", "read_csv", "__isabstractmethod__"),
}


if sys.version_info >= (3, 12):
    WRITING_HELPERS["override"] = ("typing.override(pd.DataFrame.apply)", "DataFrame.apply", "__override__")


@pytest.mark.parametrize("helper", sorted(WRITING_HELPERS))
def test_typing_and_abc_helpers_do_not_write_library_objects(run, helper):
    import functools
    import pandas as pd
    call, path, attribute = WRITING_HELPERS[helper]
    target = functools.reduce(getattr, path.split("."), pd)
    try:
        r = run(f"import abc, typing, pandas as pd\n{call}\n")
        assert not r.ok and r.error_name == "CallDenied", r
        assert attribute not in vars(target), "a host object was written"
    finally:   # (a failure must not leave the host's pandas changed for the tests after it)
        if attribute in vars(target):
            delattr(target, attribute)


def test_the_helpers_still_work_on_the_cells_own_classes_and_functions(run):
    r = run("import abc, typing\nclass A(abc.ABC):\n    @abc.abstractclassmethod\n    def make(cls):\n        pass\n"
            "class B(A):\n    @classmethod\n    def make(cls):\n        return 'made'\n"
            "@typing.dataclass_transform()\nclass Model:\n    pass\n"
            "@typing.no_type_check_decorator\ndef plain(f):\n    return f\n@plain\ndef g(x: int):\n    return x\n"
            "print(B.make(), isinstance(A.__dict__['make'], abc.abstractclassmethod), g(2))\n")
    assert r.ok and r.stdout == "made True 2\n", r


# --- sibling of N2-1/N2-2 (found in this round): copy's reduction writes a module ------------------------------
# copy._reconstruct calls what __reduce_ex__ answered and writes the answered state into what it made; a cell
# class's __getattribute__ answers __reduce_ex__, and libraries deep-copy the cell's objects themselves (the
# copy guard saw only the outermost object of the cell's own call).

REDUCES_TO_A_MODULE = """\
import copy, dataclasses, math
import pandas as pd
class Evil:
    def __getattribute__(self, name):
        if name == "__reduce_ex__":
            return lambda protocol: (lambda: math, (), {{"tau": 3.0}})
        return object.__getattribute__(self, name)
@dataclasses.dataclass
class Holder:
    item: object
{route}
"""


DEEPCOPY_ROUTES = {
    "nested_deepcopy": "copy.deepcopy([Evil()])",
    "dataclasses_asdict": "dataclasses.asdict(Holder(Evil()))",
    "pandas_attrs": "df = pd.DataFrame({'a': [1]})\ndf.attrs['k'] = Evil()\ndf2 = df + 1",
}


REPORT_TAU_AND_ERROR = """\
def probe_host(report):
    import math
    report["tau"] = math.tau
"""


@pytest.mark.parametrize("route", sorted(DEEPCOPY_ROUTES))
def test_a_reduction_cannot_make_a_copy_write_a_module(route):
    result = run_cell_in_child(REDUCES_TO_A_MODULE.format(route=DEEPCOPY_ROUTES[route]), probe=REPORT_TAU_AND_ERROR,
                               hard_exit=True, timeout=60)
    assert result.get("tau") == math.tau, f"host module written: {result}"
    assert result.get("ename") == "CallDenied", result


def test_honest_deep_copies_still_work(run):
    r = run("import copy, collections, dataclasses, enum, fractions, numpy as np, pandas as pd\n"
            "@dataclasses.dataclass\nclass P:\n    x: list\nclass C(enum.Enum):\n    A = 1\n"
            "things = [np.arange(3), pd.DataFrame({'a': [1.5]}), P([1]), C.A, fractions.Fraction(1, 3),\n"
            "          collections.deque([1]), collections.OrderedDict(a=1), np.float64(2.5), range(3),\n"
            "          np.dtype('f8')]\n"
            "copies = copy.deepcopy(things)\nprint([type(a) is type(b) for a, b in zip(things, copies)].count(True),\n"
            "      dataclasses.asdict(P([things[0]]))['x'][0].sum(), copy.copy(P([2])).x)\n")
    assert r.ok and r.stdout == "10 3 [2]\n", r


# --- attempts that failed (kept as regressions) ---------------------------------------------------------------

def test_class_statement_cannot_name_its_module(run):
    r = run("import enum\nclass E(enum.Enum):\n    __module__ = 'json'\n    dumps = 1\n")
    assert not r.ok and r.error_name == "NameDenied", r
    assert not hasattr(json.dumps, "_value_")


# From review 3 (docs/reviews.md, "Review 3").
MODULE_DICT_WRITES = [
    "exec('zz = 1', json.decoder.BACKSLASH)",
    "operator.setitem(json.decoder.BACKSLASH, 'zz', 1)",
    "pd.eval('zz = 1', target=json.decoder.BACKSLASH, inplace=True)",
    "json.decoder.BACKSLASH.update(zz=1)",
]


@pytest.mark.parametrize("write", MODULE_DICT_WRITES)
def test_module_level_dicts_stay_read_only_through_exec_operator_and_pandas_eval(run, write):
    import json.decoder

    before = dict(json.decoder.BACKSLASH)
    r = run(f"import json.decoder, operator, pandas as pd\ntry:\n    {write}\nexcept Exception:\n    pass\n")
    assert r.ok, r
    assert json.decoder.BACKSLASH == before


# From review 6 (docs/reviews.md, "Review 6").
def test_module_level_dicts_take_no_item_writes(outside):
    target = outside / "ufunc-domain.sh"
    cell = f"import functools, numpy as np\nnp.ma.core.ufunc_domain[np.sqrt] = {savetxt_writer(target)}\n"
    result = run_cell_in_child(cell, report=("status", "ename"),
                               probe=host_probe_any("import numpy as np\nnp.sqrt(np.ma.array([4.0]))"), hard_exit=True)
    assert result["ename"] == "TypeError", result
    assert not target.exists(), result
