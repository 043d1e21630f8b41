"""Objects of libraries the policy does not grant (gates._foreign_class): attribute lookup by string in
helpers the gates never see.

pandas' Styler hands out a jinja2 Environment (Styler.env, Styler.template_html.environment). Its
getattr/getitem methods, its filters ('attr', 'map'), its globals look up any name, dunders included,
in jinja2's own code, outside the attribute gate: review R10-1 read pd.read_csv.__globals__ and got the
real os, sys and builtins. Any third-party package a granted library depends on (jinja2, dateutil,
pytz, narwhals, markupsafe) is code the policy never granted: its objects are opaque to the cell (it
may hold them, pass them back to a granted library, print them, read their plain data), and its
functions and classes are never handed out.
"""
from __future__ import annotations

import pytest

from conftest import HOST_SECRET_MODULE

STYLER = "import operator, pandas as pd\nsty = pd.DataFrame({'a': [1]}).style\nenv = sty.env\n"

JINJA_READS = {
    "env_getattr": "env.getattr(pd.read_csv, '__globals__')",
    "env_getitem": "env.getitem(pd.read_csv, '__globals__')",
    "env_globals": "env.globals",
    "env_filters_attr": "env.filters['attr'](env, pd.read_csv, '__globals__')",
    "env_from_string": "env.from_string('{{ 1 }}')",
    "template_environment": "sty.template_html.environment",
    "template_module": "sty.template_html.module",
    "template_render": "sty.template_html.render",
    "class_read": "type(env).getattr",
    "class_dict": "type(env).__dict__",
    "class_of_instance": "env.__class__",
    "loader": "sty.loader.get_source",
    "via_builtin_getattr": "getattr(env, 'getattr')",
    "via_attrgetter": "operator.attrgetter('getattr')(env)",
}


@pytest.mark.parametrize("name", sorted(JINJA_READS))
def test_jinja_objects_are_opaque(run, name):
    r = run(STYLER + f"got = {JINJA_READS[name]}")
    assert not r.ok and r.error_name in ("AttributeDenied", "ImportDenied"), r


def test_jinja_getattr_does_not_read_host_objects(run, host_secret):
    r = run(STYLER + f"""\
G = env.getattr
gl = G(pd.read_csv, '__globals__')
print(G(G(gl['sys'], 'modules')['{HOST_SECRET_MODULE}'], 'SECRET'))
""")
    assert not r.ok and r.error_name == "AttributeDenied", r
    assert not r.leaked(host_secret)


def test_a_subclass_of_an_ungranted_class_is_refused(run):
    r = run(STYLER + "class E(type(env)):\n    pass\n")
    assert not r.ok and r.error_name == "BuiltinDenied", r


def test_plain_data_of_an_ungranted_object_stays_readable(run):
    r = run(STYLER + "print(env.trim_blocks, sty.template_html.name, repr(env).startswith('<jinja2.environment'))")
    assert r.ok and r.stdout == "True html.tpl True\n", r


def test_granted_and_standard_library_objects_are_not_opaque(run):
    r = run("import pandas as pd, numpy as np, decimal, io, re, fractions\n"
            "ts = pd.Timestamp('2024-01-01', tz='UTC')\n"
            "print(ts.tz.utcoffset(ts), np.random.default_rng(0).integers(5, size=2).shape, "
            "decimal.Decimal('1.5').quantize(decimal.Decimal('1')), io.StringIO('x').read(), "
            "re.compile('a').sub('b', 'a'), fractions.Fraction(1, 3).limit_denominator(2))")
    assert r.ok and r.stdout == "0:00:00 (2,) 2 x b 1/2\n", r


def test_styler_renders_for_display(run):
    """Honest use of the Styler still works: the object that hands out the Environment is pandas'."""
    r = run("import pandas as pd\ndf = pd.DataFrame({'a': [1.25, 2.5]})\n"
            "s = df.style.format('{:.1f}').highlight_max().set_caption('c')\nh = s.to_html()\n"
            "print('1.2' in h or '1.3' in h, '<caption>c</caption>' in h)\ns")
    assert r.ok and r.stdout == "True True\n", r
    assert "text/html" in r.events[-1]["data"], r.events[-1]
