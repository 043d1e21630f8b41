"""Must-block, fourth round: variants of the fixes in fef0bc7 (string dispatch reached through the class,
not the instance)."""
from __future__ import annotations

import pytest

RCE = """\
import pandas as pd
import functools
df = pd.DataFrame({{'a': [1, 2]}})
def ev(expr):
    try:
        return {route}
    except Exception as e:
        return e
ev("@inspect.sys.modules.get('sandbox_kernel.confine')._FS.set(None)")
ev("@inspect.os.system('echo PWNED > {marker}')")
"""

CLASS_ROUTES = [
    "pd.DataFrame.apply(df, 'eval', expr=expr, engine='python')",
    "type(df).apply(df, 'eval', expr=expr, engine='python')",
    "type(df).agg(df, 'eval', expr=expr, engine='python')",
    "pd.DataFrame.aggregate(df, 'eval', expr=expr, engine='python')",
    "pd.DataFrame.transform(df, 'eval', expr=expr, engine='python')",
    "functools.partial(pd.DataFrame.apply, df)('eval', expr=expr, engine='python')",
]


@pytest.mark.xfail(strict=True, reason="BYPASS: the pandas string-dispatch guard wraps instance methods only; "
                                       "pd.DataFrame.apply(df, 'eval', ...) -> DataFrame.eval -> "
                                       "'@inspect.os.system(...)' -> os.system")
@pytest.mark.parametrize("route", CLASS_ROUTES)
def test_string_dispatch_through_the_class(sandbox, outside, route):
    marker = outside / "class_dispatch.txt"
    sandbox.run(RCE.format(route=route, marker=marker))
    assert not marker.exists(), "os.system ran"


def test_string_dispatch_through_the_instance_is_refused(sandbox, outside):
    marker = outside / "instance_dispatch.txt"
    r = sandbox.run(RCE.format(route="df.apply('eval', expr=expr, engine='python')", marker=marker))
    assert not marker.exists()
    assert r.denials, r
