"""What honest notebooks do with globals(), locals(), vars(), dir(), eval() and exec() works; what they
get are copies of the cell's own names (the escapes are tests/test_attacks_evalexec.py)."""
from __future__ import annotations

HANDBOOK_DISPLAY = '''
class display(object):
    """Display HTML representation of multiple objects"""
    template = """<div style="float: left; padding: 10px;">
    <p style='font-family:"Courier New", Courier, monospace'>{0}</p>{1}
    </div>"""
    def __init__(self, *args):
        self.args = args

    def _repr_html_(self):
        return '\\n'.join(self.template.format(a, eval(a)._repr_html_())
                         for a in self.args)

    def __repr__(self):
        return '\\n\\n'.join(a + '\\n' + repr(eval(a))
                           for a in self.args)
'''


def test_the_handbooks_display_helper(run):
    """A helper that shows frames by name (PythonDataScienceHandbook, chapter 3): eval() in a method
    the renderer calls."""
    r = run(HANDBOOK_DISPLAY + "import pandas as pd\ndf1 = pd.DataFrame({'A': [1, 2]})\ndf2 = df1 * 2\n"
                               "display('df1', 'df2', 'pd.concat([df1, df2])')")
    assert r.ok, r
    assert r.result_text.startswith("df1\n   A\n0  1\n1  2") and "pd.concat([df1, df2])" in r.result_text


def test_globals_holds_the_cells_names_only(sandbox):
    r = sandbox.run("import numpy as np\nx = 1\ndef f():\n    pass\n"
                    "g = globals()\nprint(sorted(k for k in g if not k.startswith('__')), 'df' in g, g.get('x'))\n"
                    "print([k for k in g if k.startswith('__')])")
    assert r.ok and r.stdout == "['f', 'np', 'x'] False 1\n['__name__', '__doc__']\n", r


def test_globals_in_a_function_and_agent_style_checks(run):
    r = run("data = [3, 1, 2]\n"
            "def summary():\n    if 'data' in globals():\n        return sorted(globals()['data'])\n"
            "summary(), type(globals()).__name__, isinstance(globals(), dict), dict(globals()) is not None")
    assert r.ok and r.result_text == "([1, 2, 3], 'NamespaceSnapshot', True, True)", r


def test_locals_vars_and_dir(run):
    r = run("class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n"
            "    def as_dict(self):\n        return vars(self)\n"
            "def f(a, b=2):\n    c = a + b\n    return sorted(locals().items())\n"
            "p = Point(1, 2)\n"
            "print(f(1), p.as_dict(), dir(p), sorted(vars(Point))[:3])\n"
            "print('p' in vars(), 'Point' in dir())")
    assert r.ok, r
    assert r.stdout == ("[('a', 1), ('b', 2), ('c', 3)] {'x': 1, 'y': 2} ['as_dict', 'x', 'y'] "
                        "['__doc__', '__init__', '__module__']\nTrue True\n"), r


def test_dir_of_library_objects_shows_what_the_policy_shows(run):
    r = run("import numpy as np, pandas as pd\nd = dir(np)\ns = dir(pd.Series([1]))\n"
            "print('mean' in d, 'ctypeslib' in d, 'sum' in s, 'to_pickle' in s, any(n.startswith('_') for n in s))")
    assert r.ok and r.stdout == "True False True False False\n", r


def test_dataclass_vars_and_copy_of_globals(run):
    r = run("import dataclasses, copy\n@dataclasses.dataclass\nclass Row:\n    a: int\n    b: str = 'x'\n"
            "print(vars(Row(1)), type(dict(globals())).__name__, type(copy.copy(globals())).__name__,\n"
            "      len(copy.deepcopy({'k': globals()['Row']})))")
    assert r.ok and r.stdout == "{'a': 1, 'b': 'x'} dict NamespaceSnapshot 1\n", r


def test_exec_and_eval_as_notebooks_use_them(sandbox):
    r = sandbox.run("for i in range(3):\n    exec(f'frame_{i} = i * 10')\n"
                    "names = [n for n in globals() if n.startswith('frame_')]\n"
                    "exec('total = sum(eval(n) for n in names)', globals())\n"
                    "ns = {}\nexec('def helper(x):\\n    return x + 1', ns)\n"
                    "config = eval(\"{'alpha': 0.5, 'n': [1, 2]}\")\n"
                    "print(total, ns['helper'](1), config['alpha'], eval('  1 + 1'))")
    assert r.ok and r.stdout == "30 2 0.5 2\n", r
    assert sandbox.ns["frame_2"] == 20


def test_eval_errors_read_like_pythons(run):
    r = run("x = 1\ny = eval('x +')")
    assert not r.ok and r.error_name == "SyntaxError" and r.error_line == 2, r
    r = run("def f():\n    return eval('undefined_name')\nf()")
    assert not r.ok and r.error_name == "NameError" and r.error_line == 2, r
    assert any("Cell In[text:eval" in line or "line 1" in line for line in r.error["traceback"]), r.error
