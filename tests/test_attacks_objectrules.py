"""Must-block: the policy's object rules (pandas.DataFrame.query, numpy.fromfile ...) hold whatever loaded
the library first (the rule-resolution sink).

Object rules name a path (`pandas.DataFrame.to_pickle`); the gates resolve it to an identity once the
library is loaded. A decision may never depend on what happened to be imported first: a library a cell
never imported itself (pandas loaded by `px.data.gapminder()`, scipy by `Series.interpolate`, plotly by
pandas' plotting backend) is governed by the same rules, its C-level guards (pandas' closed evaluator,
numpy's checked constructor) are in place before the cell holds any of its objects, and an "allowed"
decision cached before a rule could be resolved never survives it. Runs in a child process per route:
which modules are loaded is process-wide.
"""
from __future__ import annotations

import importlib

import pytest

from childcell import run_cell_in_child
from sandbox_kernel.policy import DATA_SCIENCE

# Cell 1 loads a library by an indirect route and reads every rule it can reach from the objects it was
# handed; cell 2 (same engine) imports everything and reads every rule by its path. Each read must be refused.

INDIRECT_LOADS = {
    # plotly.express loads pandas only when a dataset is asked for
    "pandas_by_plotly_data": ("import plotly.express as px\nobj = px.data.gapminder()\n",
                              ["to_pickle", "to_clipboard", "to_hdf", "to_parquet", "to_feather",
                               "to_orc", "to_sql"]),
    # scipy loaded by pandas' interpolation
    "scipy_by_pandas_interpolate": ("import pandas as pd\nobj = pd.Series([1.0, None, 3.0])\n"
                                    "obj.interpolate(method='pchip')\n", ["to_pickle", "to_clipboard", "to_hdf", "to_sql"]),
    # plotly loaded by pandas' plotting backend
    "plotly_by_pandas_backend": ("import pandas as pd\npd.set_option('plotting.backend', 'plotly')\n"
                                 "obj = pd.DataFrame({'a': [1, 2]}).plot()\n",
                                 ["write_image", "to_image", "full_figure_for_development"]),
}

READ_EACH = """\
refused = []
for name in {names!r}:
    try:
        getattr(obj, name)
    except Exception as exc:
        refused.append(type(exc).__name__ == 'AttributeDenied')
    else:
        refused.append(False)
{flag} = all(refused) and len(refused) == {count}
"""

def _owner_module(path):
    """The longest prefix of a rule's path that is a module (imported here to find out)."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        return ".".join(parts[:i]), parts[i:]
    raise AssertionError(f"no module in {path}")


def _rules_cell(rules):
    """A cell that reads every rule by its path (imports and getattr written out: cells have no exec)."""
    lines = ["refused = {}"]
    for path in rules:
        module, attrs = _owner_module(path)
        lines.append(f"try:\n    import {module} as _m\n    _o = _m\n"
                     + "".join(f"    _o = getattr(_o, {a!r})\n" for a in attrs)
                     + f"    refused[{path!r}] = False\nexcept Exception as exc:\n"
                     f"    refused[{path!r}] = type(exc).__name__ in ('AttributeDenied', 'ImportDenied')")
    lines.append("second_cell_refused_all = all(refused.values())")
    lines.append("print([p for p, ok in refused.items() if not ok])")
    return "\n".join(lines)


@pytest.mark.parametrize("route", sorted(INDIRECT_LOADS))
def test_object_rules_hold_whatever_loaded_the_library(route):
    load, names = INDIRECT_LOADS[route]
    first = load + READ_EACH.format(names=names, count=len(names), flag="first_cell_refused_all")
    second = _rules_cell(DATA_SCIENCE.object_deny) + "\n" + READ_EACH.format(
        names=names, count=len(names), flag="read_again_refused_all")
    # both cells run in one engine: the decisions of the first may not leak into the second
    result = run_cell_in_child(first + "\n#CELL\n" + second, report=("status", "ename"), timeout=120,
                               ns=("first_cell_refused_all", "second_cell_refused_all", "read_again_refused_all"))
    assert result.get("first_cell_refused_all") is True, f"{route}: a rule read as allowed in the first cell ({result})"
    assert result.get("second_cell_refused_all") is True, f"{route}: a rule read as allowed by path ({result})"
    assert result.get("read_again_refused_all") is True, f"{route}: an early 'allowed' survived ({result})"


def test_pandas_evaluator_is_routed_when_pandas_was_loaded_by_a_library():
    """pandas' expression evaluator is replaced at its source (guards.py) when pandas is imported; loaded by
    a library during a call, pandas' own evaluator once ran the cell's expression. The sandbox's evaluator
    answers now: the query works, and a dunder in it is refused."""
    src = "import plotly.express as px\ndf = px.data.gapminder()\nright = len(df.query('year > 2000')) == 284"
    result = run_cell_in_child(src, report=("status", "ename", "denials"), ns=("right",), timeout=120)
    assert result.get("status") == "ok" and result.get("right") is True, result
    src = "import plotly.express as px\ndf = px.data.gapminder()\nn = df.query('year.__dict__')"
    result = run_cell_in_child(src, report=("status", "ename", "denials"), timeout=120)
    assert result.get("ename") == "AttributeDenied" and result.get("denials"), result
