"""Must-block: string formatting traversal (CVE-2023-41039 in RestrictedPython): '{0.__class__}'.format,
unbound str.format, format_map, string.Formatter. Public fields and format specs still work
(see test_allow_language.py)."""
from __future__ import annotations

import pytest

SETUP = """\
import pandas as pd
import functools, string
def f():
    return 1
class S(str):
    pass
class Obj:
    def __init__(self):
        self._hidden = 'HIDDEN-VALUE'
        self.name = 'public'
o = Obj()
"""

FORMAT_ATTACKS = [
    '"{0.__class__}".format(1)',
    '"{0.__class__.__mro__}".format(1)',
    '"{0.__globals__}".format(f)',
    '"{0.__init__.__globals__}".format(o)',
    '"{x.__class__}".format(x=1)',
    '"{x.__class__}".format_map({"x": 1})',
    'str.format("{0.__class__}", 1)',
    'str.format_map("{x.__class__}", {"x": 1})',
    '"".__class__.format("{0.__class__}", 1)',
    'type("").format("{0.__class__}", 1)',
    'getattr("{0.__class__}", "format")(1)',
    'getattr(str, "format")("{0.__class__}", 1)',
    '"{0[0].__class__}".format([1])',
    '"{0:{1.__class__}}".format(1, 2)',
    '"{0!r:{1.__class__}}".format(1, 2)',
    'list(map("{0.__class__}".format, [1]))',
    'functools.partial(str.format, "{0.__class__}")(1)',
    'S("{0.__class__}").format(1)',
    'S.format(S("{0.__class__}"), 1)',
    '"{0.__globals__[os]}".format(pd.read_csv)',
    '"{0._hidden}".format(o.__init__)',
    '"{0.gi_frame}".format((x for x in [1]))',
]


@pytest.mark.parametrize("expr", FORMAT_ATTACKS)
def test_format_traversal_is_refused(sandbox, expr):
    assert sandbox.run(SETUP).ok
    r = sandbox.run(f"x = 0\nout = {expr}\nprint(out)")
    assert not r.ok, r
    assert r.denied("attribute", line=2), r
    assert "<class" not in r.stdout and "module" not in r.stdout
    assert "out" not in sandbox.ns


@pytest.mark.parametrize("src", [
    "string.Formatter().get_field('0.__class__', [1], {})",
    "string.Formatter().vformat('{0.__class__}', [1], {})",
    "string.Formatter",
    "from string import Formatter",
    "import string as s2\nF = s2.Formatter",
    "import _string",
])
def test_string_formatter_is_not_available(sandbox, src):
    assert sandbox.run(SETUP).ok
    r = sandbox.run(src)
    assert not r.ok, r
    assert r.denials, r


def test_format_reaching_host_secret(sandbox, host_secret):
    assert sandbox.run(SETUP).ok
    r = sandbox.run('print("{0.__globals__[os].sys.modules[sandbox_test_host_secret].SECRET}".format(pd.read_csv))')
    assert not r.ok and r.denied("attribute", line=1), r
    assert not r.leaked(host_secret)


def test_super_format_on_str_subclass(sandbox, host_secret):
    assert sandbox.run(SETUP).ok
    r = sandbox.run('s = S("{0.__globals__[os].sys.modules[sandbox_test_host_secret].SECRET}")\n'
                    'print(super(S, s).format(pd.read_csv))\n')
    assert not r.leaked(host_secret), r
    assert not r.ok and r.denied("attribute", line=2), r


def test_super_format_inside_method(sandbox):
    assert sandbox.run(SETUP).ok
    r = sandbox.run('class T(str):\n'
                    '    def leak(self, obj):\n'
                    '        return super().format(obj)\n'
                    'out = T("{0.__globals__}").leak(f)\n')
    assert "out" not in sandbox.ns, r


def test_format_spec_width_cannot_hide_traversal(run):
    # nested replacement fields inside the spec are fields too
    r = run('x = "{0:{1.__class__.__name__}}".format(1, 2)')
    assert not r.ok and r.denied("attribute", line=1), r


def test_public_fields_still_work_after_denials(sandbox):
    assert sandbox.run(SETUP).ok
    sandbox.run('"{0.__class__}".format(1)')
    r = sandbox.run('print("{0.name:>8}|{1:.2f}|{2!r}".format(o, 3.14159, "s"))')
    assert r.ok and r.stdout == "  public|3.14|'s'\n", r
