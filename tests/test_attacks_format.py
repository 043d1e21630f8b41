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


# --- format strings run by libraries (review R10-2) -------------------------------------------------------
# pandas' Styler.format / format_index / relabel_index call template.format(value) inside pandas, where the
# C str.format read any attribute. str.format and str.format_map are gated in the str type itself: while a
# cell runs, a template with attribute or item fields goes through the cell's field gate unless it is a
# constant of the library function formatting it. The reviewer's three routes are at the end of this file
# (from review 1); these are the variants.

LIBRARY_FORMAT_ROUTES = {
    "styler_formatter_dict": "pd.DataFrame({'a': [f]}, dtype=object).style.format({'a': FIELD}).to_html()",
    "styler_format_subset": "pd.DataFrame({'a': [f], 'b': [1]}, dtype=object).style.format(FIELD, subset=['a'])"
                            ".to_html()",
    "styler_format_index_columns": "pd.DataFrame({f: [1]}).style.format_index(FIELD, axis=1).to_html()",
    "styler_to_latex": "pd.DataFrame({'a': [f]}, dtype=object).style.format(FIELD).to_latex()",
    "styler_to_string": "pd.DataFrame({'a': [f]}, dtype=object).style.format(FIELD).to_string()",
    "styler_nested_spec": "pd.DataFrame({'a': [1]}).style.format('{0:{0.__class__.__name__}}').to_html()",
    "host_helper_format": "lib_format(FIELD, f)",
    "host_helper_format_map": "lib_format_map(FIELD.replace('{0', '{v'), {'v': f})",
    "host_helper_str_subclass": "lib_format(S(FIELD), f)",
}


@pytest.mark.parametrize("route", sorted(LIBRARY_FORMAT_ROUTES))
def test_library_formatting_of_a_cells_template_is_gated(sandbox, host_secret, route):
    sandbox.ns["lib_format"] = lambda template, value: template.format(value)   # a library's helper
    sandbox.ns["lib_format_map"] = lambda template, mapping: template.format_map(mapping)
    assert sandbox.run(SETUP).ok
    r = sandbox.run("FIELD = '{0.__globals__[os].sys.modules[sandbox_test_host_secret].SECRET}'\n"
                    f"print({LIBRARY_FORMAT_ROUTES[route]})")
    assert not r.ok and r.denied("attribute"), r
    assert not r.leaked(host_secret)


def test_a_librarys_own_template_is_its_own(sandbox):
    """A library's constant template reads what the library chose, dunders included."""
    sandbox.ns["describe"] = lambda value: "{0.__class__.__name__}:{0.real}".format(value)
    r = sandbox.run("print(describe(3))")
    assert r.ok and r.stdout == "int:3\n", r


def test_honest_library_formatting_still_works(run):
    r = run("import pandas as pd\n"
            "df = pd.DataFrame({'a': [1.2345, 2.5], 'c': [1+2j, 3j]}, index=['x', 'y'])\n"
            "h = df.style.format({'a': '{:.2f}', 'c': '{0.real:.1f}'}).format_index('[{}]').to_html()\n"
            "print('1.23' in h, '>1.0<' in h, '[x]' in h, '{0} {name}'.format(1, name='n'))")
    assert r.ok and r.stdout == "True True True 1 n\n", r


def test_the_host_formats_freely_between_cells(run):
    run("x = 1")
    assert "{0.__class__.__name__}".format(1) == "int" and "{a.real}".format_map({"a": 2}) == "2"


LIBRARY_FORMAT_WITHOUT_EXTENSION = """\
import json, sys, tempfile
sys.modules['sandbox_kernel._fastgates'] = None     # as if the C extension had not been built
import os; os.environ['SANDBOX_KERNEL_PYTHON_GUARDS'] = '1'   # the operator accepts the fallbacks (engine.py)
from sandbox_kernel.engine import Engine
from sandbox_kernel.policy import PRESETS
from sandbox_kernel import gates
assert gates._fastgates is None and getattr(str.__dict__['format'], '__st_format_gate__', False)
eng = Engine(PRESETS['data-science'], workdir=tempfile.mkdtemp())
report = {}
for name, src in (("attack", "import json, pandas as pd\\n"
                             "x = pd.DataFrame({'a': [json.dumps]}, dtype=object).style.format("
                             "'{0.__globals__[codecs].__name__}').to_html()"),
                  ("honest", "import pandas as pd\\nx = pd.DataFrame({'a': [1.5]}).style.format('{:.2f}').to_html()"
                             "\\ny = '{0.real}'.format(2)")):
    done = eng.run_cell(src, emit=lambda e: None)
    report[name] = (done['error'] or {}).get('ename')
report['host'] = '{0.__class__.__name__}|{self}'.format(1, self=2)
print(json.dumps(report))
"""


def test_library_formatting_is_gated_without_the_extension():
    import json
    import subprocess
    import sys
    from childcell import REPO
    out = subprocess.run([sys.executable, "-c", LIBRARY_FORMAT_WITHOUT_EXTENSION], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"attack": "AttributeDenied", "honest": None, "host": "int|2"}, report


# ====================================================================================================================
# Sink: format fields run by libraries.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 1 (docs/reviews.md, "Review 1").
# --- Finding 2: str.format fields run by pandas on a caller's format string ---------------------------------
# Styler.format / format_index / relabel_index take a format string and call formatter.format(value)
# inside pandas, where the attribute gate does not run: '{0.__globals__[codecs].sys.modules[...]}' walks
# from any function in a cell to any host object and prints it (host module attributes, os.environ).
# Read-only (format fields cannot call), but every value of the host process is readable.

FORMAT_ROUTES = {
    "styler_format": "pd.DataFrame({'a': [json.dumps]}, dtype=object).style.format(FIELD).to_html()",
    "styler_format_index": "pd.DataFrame({'a': [1]}, index=[json.dumps]).style.format_index(FIELD).to_html()",
    "styler_relabel_index": "pd.DataFrame({'a': [1]}, index=[json.dumps]).style.relabel_index([FIELD]).to_html()",
}


FORMAT_READ = """\
import json, pandas as pd
FIELD = "{0.__globals__[codecs].sys.modules[%s].SECRET}"
print({route})
"""


@pytest.mark.parametrize("route", sorted(FORMAT_ROUTES))
def test_styler_format_strings_do_not_read_host_objects(run, host_secret, route):
    from conftest import HOST_SECRET_MODULE
    r = run(FORMAT_READ.replace("{route}", FORMAT_ROUTES[route]) % HOST_SECRET_MODULE)
    assert not r.leaked(host_secret), "a host module's attribute was read"


@pytest.mark.parametrize("raw", ["format", "format_map"])
def test_the_raw_method_in_a_cells_hands_is_still_gated(sandbox, host_secret, raw):
    """Assume the stand-in has fallen (review 11: a partial's .args, a stale decision handed the cell the raw
    str.format): a template that is a constant of the *cell's* code is the cell's, not a library's, so the
    process-wide gate on str's methods still refuses its lookup fields."""
    sandbox.ns["raw"] = getattr(str, raw)   # planted by the test, as any leak would
    call = ("raw('{0.__init__.__globals__[sys].modules[sandbox_test_host_secret].SECRET}', pd.DataFrame())"
            if raw == "format" else
            "raw('{x.__init__.__globals__[sys].modules[sandbox_test_host_secret].SECRET}', {'x': pd.DataFrame()})")
    r = sandbox.run(f"import pandas as pd\nx = {call}\n")
    assert not r.ok and r.error_name == "AttributeDenied", r
    assert not r.leaked(host_secret)
    args = "'{0.__class__}', 1" if raw == "format" else "'{x.__class__}', {'x': 1}"
    r = sandbox.run(f"def helper():\n    return raw({args})\nhelper()\n")   # the cell's own function: the same
    assert not r.ok and r.error_name == "AttributeDenied", r
