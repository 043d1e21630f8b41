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


# ====================================================================================================================
# Sink: objects of libraries the policy does not grant.
# Its row in docs/security.md, "Inventory of sinks". The attacks below come from the independent reviews at
# level none (docs/reviews.md); each group names its review and finding. Tests and assertions as the reviews
# wrote them.
# ====================================================================================================================

# From review 1 (docs/reviews.md, "Review 1").
# --- Finding 1: jinja2's Environment reached through pandas' Styler is an ungated getattr ----------------
# df.style.env (a class attribute of pandas' Styler) and df.style.template_html.environment hand the
# cell a jinja2.Environment. Its getattr/getitem methods look up any name, dunders included, in Python
# outside the attribute gate, and return the object: pd.read_csv.__globals__ gives the real os, sys and
# builtins (eval, exec, __import__). The audit hook reads a ContextVar, so os.system run through a fresh
# contextvars.Context().run(...) (contextvars is in sys.modules) is not refused: `id` ran, and a file
# outside the working directory was read with os.open/os.read.

JINJA_ROUTES = {
    "styler_env": "pd.DataFrame({'a': [1]}).style.env",
    "template_environment": "pd.DataFrame({'a': [1]}).style.template_html.environment",
}


JINJA_ESCAPE = """\
import pandas as pd
env = {route}
G = env.getattr
I = env.getitem
gl = G(pd.read_csv, "__globals__")
os = I(gl, "os")
cv = I(G(I(gl, "sys"), "modules"), "contextvars")
run = G(G(cv, "Context")(), "run")
run(G(os, "system"), "id > {marker}")
fd = run(G(os, "open"), "{secret_file}", 0)
print(run(G(os, "read"), fd, 200))
"""


@pytest.mark.parametrize("route", sorted(JINJA_ROUTES))
def test_jinja_environment_from_styler_is_not_a_full_escape(run, tmp_path, outside, host_secret, route):
    marker = outside / "pwned-by-jinja"
    r = run(JINJA_ESCAPE.format(route=JINJA_ROUTES[route], marker=marker, secret_file=tmp_path / "secret.txt"))
    escaped = [what for what, happened in (("a process ran", marker.exists()),
                                           ("a file outside the working directory was read", r.leaked(host_secret)))
               if happened]
    assert not escaped, escaped
    assert not r.ok, r


def test_jinja_module_and_private_numpy_helpers_are_not_importable(run):
    r = run("import jinja2")
    assert not r.ok and r.error_name == "ImportDenied", r
    r = run("import numpy as np\nD = np.lib._stride_tricks_impl.DummyArray")
    assert not r.ok and r.error_name == "AttributeDenied", r


# From review 2 (docs/reviews.md, "Review 2").
JINJA_CALLABLE_READS = {
    "filters_attr": "env.filters['attr']",
    "globals_cycler": "env.globals['cycler']",
    "tests": "env.tests",
    "policies": "env.policies",
}


@pytest.mark.parametrize("name", sorted(JINJA_CALLABLE_READS))
def test_jinja_environment_tables_are_opaque(run, name):
    r = run(f"import pandas as pd\nenv = pd.DataFrame({{'a': [1]}}).style.env\ngot = {JINJA_CALLABLE_READS[name]}\n")
    assert not r.ok and r.error_name == "AttributeDenied", r


# -- review 12: objects of the standard library's dangerous modules, handed out by a library --------------------
# R12-1: plotly's logger (`_plotly_utils.optional_imports.logger`) is a real logging.Logger; from it every logger of
# the process and their live handler lists. A cell appended an object whose `handle` was np.savetxt bound to a path
# outside: the next time the host logged, logging called it unconfined. Such objects are opaque now, like an
# ungranted library's (plain data only, read-only).

def test_a_handler_planted_in_the_process_loggers_never_runs_for_the_host(tmp_path):
    from childcell import host_probe_any, run_cell_in_child, savetxt_writer

    target = tmp_path / "pwned_by_a_log_handler"
    cell = ("import functools, numpy as np\nimport _plotly_utils.optional_imports as oi\n"
            "class H:\n    pass\nh = H()\nh.level = 0\n"
            f"h.handle = {savetxt_writer(target)}\n"
            "for route in (lambda: oi.logger.parent.handlers, lambda: oi.logger.handlers,\n"
            "              lambda: [getattr(l, 'handlers', []) for l in oi.logger.manager.loggerDict.values()][0]):\n"
            "    try:\n        route().append(h)\n    except Exception:\n        pass\n"
            "for write in (lambda: setattr(oi.logger, 'disabled', True), lambda: setattr(oi.logger, 'level', 0)):\n"
            "    try:\n        write()\n    except Exception:\n        pass\n")
    probe = ("import logging\napp = logging.getLogger('IPKernelApp')\napp.propagate = False\n"
             "app.addHandler(logging.NullHandler())\n" +
             host_probe_any("app.warning('completion failed')\nlogging.getLogger('_plotly_utils.optional_imports')"
                            ".warning('x')\nlogging.getLogger().error('y')\n"
                            "report['disabled'] = logging.getLogger('_plotly_utils.optional_imports').disabled",
                            detail=True))
    result = run_cell_in_child(cell, report=("status", "ename", "evalue"), probe=probe, hard_exit=True,
                               limits={"timeout": 30.0})
    assert "crashed" not in result and result["status"] == "ok", result
    assert not target.exists(), "the host ran the cell's handler"
    assert result["disabled"] is False, result


@pytest.mark.parametrize("read", [
    "oi.logger.handlers", "oi.logger.parent", "oi.logger.manager", "oi.logger.addHandler",
    "np.finfo.epsneg.lock.acquire",
])
def test_objects_of_dangerous_stdlib_modules_are_opaque(run, read):
    r = run(f"import numpy as np\nimport _plotly_utils.optional_imports as oi\nx = {read}\n")
    assert not r.ok and r.error_name == "AttributeDenied", (read, r)


def test_their_plain_data_and_the_cells_files_still_read(run):
    r = run("import io, _plotly_utils.optional_imports as oi\ns = io.StringIO()\ns.write('a')\n"
            "f = open('x.txt', 'w')\nf.write('hi')\nf.close()\n"
            "print(oi.logger.name, s.getvalue(), open('x.txt').buffer.raw.name, open('x.txt').read())")
    assert r.ok and r.stdout == "_plotly_utils.optional_imports a x.txt hi\n", r
