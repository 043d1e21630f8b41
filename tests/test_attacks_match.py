"""Must-block: `match` class patterns read attributes without an Attribute node (sandtrap 0.5)."""
from __future__ import annotations

import types

import pytest

ANY_CLASS = """\
import abc
class Any(abc.ABC):
    __match_args__ = ({names})
    @classmethod
    def __subclasshook__(cls, C):
        return True
"""


@pytest.mark.parametrize("attr", ["__class__", "__globals__", "__dict__", "_private", "gi_frame", "f_back",
                                  "f_globals", "tb_frame", "cr_frame", "gi_code", "__traceback__", "__bases__"])
def test_keyword_class_pattern_attribute_is_refused(sandbox, attr):
    r = sandbox.run(f"print('ran')\ndef gen():\n    yield 1\nmatch gen():\n    case object({attr}=x):\n        print('bound')\n")
    assert not r.ok, r
    assert r.error_name == "ValidationDenied", r
    assert r.denied("syntax", line=5), r
    assert r.stdout == ""   # refused before anything ran
    assert "x" not in sandbox.ns


def test_keyword_class_pattern_nfkc_name_is_refused(sandbox):
    # 'ｇi_frame' (fullwidth g) is NFKC-normalised to 'gi_frame' by the parser
    r = sandbox.run("def gen():\n    yield 1\nmatch gen():\n    case object(\uff47i_frame=x):\n        pass\n")
    assert not r.ok and r.denied("syntax", line=4), r
    assert "x" not in sandbox.ns


def test_match_args_reads_globals_and_runs_os_system(sandbox, outside):
    marker = outside / "match_pwned.txt"
    r1 = sandbox.run(ANY_CLASS.format(names='"__globals__",') +
                     "import pandas as pd\n"
                     "try:\n"
                     "    match pd.read_csv:\n"
                     "        case Any(g):\n"
                     "            pass\n"
                     "except Exception:\n"
                     "    pass\n")
    r2 = sandbox.run(ANY_CLASS.format(names='"system",') +
                     "try:\n"
                     "    match g['os']:\n"
                     "        case Any(system):\n"
                     "            pass\n"
                     "except Exception:\n"
                     "    pass\n"
                     f"system('echo PWNED > {marker}')\n")
    assert not marker.exists(), "os.system ran"
    assert not r2.ok, (r1, r2)
    assert "g" not in sandbox.ns and "system" not in sandbox.ns


def test_match_args_cannot_bind_a_frame(sandbox):
    sandbox.run(ANY_CLASS.format(names='"gi_frame",') +
                "def gen():\n    yield 1\n"
                "g = gen()\n"
                "try:\n"
                "    match g:\n"
                "        case Any(fr):\n"
                "            pass\n"
                "except Exception:\n"
                "    pass\n")
    assert not isinstance(sandbox.ns.get("fr"), types.FrameType)


def test_match_args_private_names_stay_hidden(sandbox):
    r = sandbox.run(ANY_CLASS.format(names='"__class__", "__bases__"') +
                    "match int:\n"
                    "    case Any(c, b):\n"
                    "        pass\n"
                    "print(type(b).__name__)\n")
    assert "b" not in sandbox.ns, r


def test_match_keyword_mro_is_refused(sandbox):
    r = sandbox.run("match ZeroDivisionError:\n    case type(mro=m):\n        B = m()[-2]\nprint(B.__name__)\n")
    assert not r.ok and "B" not in sandbox.ns, r


def test_match_keyword_dunder_in_nested_pattern_is_refused(run):
    r = run("match [1]:\n    case [object(__class__=c)]:\n        pass\n")
    assert not r.ok and r.denied("syntax", line=2), r
    r = run("match {'k': 1}:\n    case {'k': int(__class__=c)}:\n        pass\n")
    assert not r.ok and r.denied("syntax", line=2), r


# ====================================================================================================
# From review round 2: the sandbox's own runtime objects and library
# frames reached through builtins that C code calls on the cell's behalf; output floods through rich display.
# ====================================================================================================

# --- match class patterns on builtin classes ---------------------------------------------------------

def test_match_object_keyword_reads_module_attributes(sandbox, outside):
    marker = outside / "match_object.txt"
    sandbox.run("import pandas as pd\n"
                "try:\n    match pd.core.common:\n        case object(builtins=b):\n            pass\n"
                "except Exception:\n    pass\n"
                "try:\n    match b:\n        case object(eval=ev):\n            pass\n"
                "except Exception:\n    pass\n"
                "ev(\"(__import__('sandbox_kernel.confine', fromlist=['_FS'])._FS.set(None), "
                f"__import__('os').system('echo PWNED > {marker}'))\")\n")
    assert not marker.exists(), "os.system ran"
    assert "ev" not in sandbox.ns and "b" not in sandbox.ns


@pytest.mark.parametrize("pattern,subject", [
    pytest.param("object(os=m)", "pd.io.common"),
    pytest.param("object(sys=m)", "pd.io.parsers.readers"),
    pytest.param("object(inspect=m)", "pd.core.common"),
    pytest.param("object(mro=m)", "ZeroDivisionError"),
    ("type(mro=m)", "ZeroDivisionError"),
    pytest.param("object(read_pickle=m)", "pd"),
    pytest.param("object(read_clipboard=m)", "pd"),
    pytest.param("object(to_pickle=m)", "pd.DataFrame"),
    pytest.param("object(tofile=m)", "np.zeros(1)"),
])
def test_match_keyword_pattern_cannot_bind_what_attribute_access_refuses(sandbox, pattern, subject):
    sandbox.run(f"import pandas as pd, numpy as np\ntry:\n    match {subject}:\n        case {pattern}:\n            pass\n"
                "except Exception:\n    pass\n")
    if pattern.endswith("(os=m)") or pattern.endswith("(sys=m)") or "inspect" in pattern:
        import types
        assert not isinstance(sandbox.ns.get("m"), types.ModuleType), pattern
    else:
        assert "m" not in sandbox.ns, f"{pattern} bound {sandbox.ns.get('m')!r}"


# --- Python's own reads in a class pattern ------------------------------------------------------------------
# 'case C(k=v)' reads subject.k itself, after the stand-in's isinstance check, and binds what it read: the
# gate's copy, read-only view or guarded stand-in never reached the cell. Found in this session's own review
# of the read path: a library class's list changed for the host, scipy's index array written in place (the
# N5-2 class of full escape), numpy's unguarded frombuffer bound. The check (Gates.pattern_read) now lets a
# pattern read only what the gate hands out as it is.

def test_a_class_pattern_cannot_bind_a_library_classs_list(run):
    import calendar
    before = list(calendar.HTMLCalendar.cssclasses)
    r = run("import calendar\nmatch calendar.HTMLCalendar:\n    case type(cssclasses=c):\n        c.append('planted')\n")
    assert not r.ok and r.denied("attribute", line=3), r
    assert "class pattern" in r.error_value and "case body" in r.error_value, r
    assert calendar.HTMLCalendar.cssclasses == before


def test_a_class_pattern_cannot_bind_a_sparse_arrays_index_array(sandbox):
    r = sandbox.run("import numpy as np, scipy.sparse as sp\nA = sp.csr_array(np.eye(3))\nmatch A:\n"
            "    case sp.csr_array(indices=ix):\n        ix[0] = 2\n")
    assert not r.ok and r.denied("attribute", line=4), r
    assert sandbox.ns["A"].indices.tolist() == [0, 1, 2] and "ix" not in sandbox.ns


def test_a_class_pattern_cannot_bind_a_guarded_module_function(sandbox):
    r = sandbox.run("import numpy as np, math\nModule = type(math)\nmatch np:\n"
                    "    case Module(frombuffer=fb):\n        pass\n")
    assert not r.ok and r.denied("attribute", line=4), r
    assert "fb" not in sandbox.ns


def test_class_patterns_still_match_and_read_once(run):
    r = run("log = []\nclass K:\n    @property\n    def c(self):\n        log.append('read')\n        return 3\n"
            "match K():\n    case K(c=3):\n        pass\n"
            "from dataclasses import dataclass\n@dataclass\nclass P:\n    x: int\n    y: int\n"
            "match P(1, 2):\n    case P(1, y):\n        print('y', y)\n"
            "import pandas as pd, math\nmatch pd.Timestamp('2020-01-02'):\n"
            "    case pd.Timestamp(year=yr, month=m):\n        print(yr, m)\n"
            "Module = type(math)\nmatch math:\n    case Module(pi=p):\n        print(round(p, 2))\n"
            "match 3 + 4j:\n    case complex(real=re, imag=im):\n        print(re, im)\n"
            "print(log)\n")
    assert r.ok, r
    assert r.stdout == "y 2\n2020 1\n3.14\n3.0 4.0\n['read']\n", r


# --- a match star capture is charged (R12-3) ------------------------------------------------------------------
def test_a_star_capture_is_charged_and_keeps_its_value(run):
    r = run("match range(3 * 10**6):\n    case [a, *rest]:\n        pass\n", ticks=10**6)
    assert r.error_name == "TickLimitExceeded", r
    r = run("match [1, 2, 3, 4]:\n    case [a, *rest, z] if z == 4:\n        print(a, rest, z)\n"
            "match {'k': (5, 6, 7)}:\n    case {'k': [x, *more]}:\n        print(x, more)\n")
    assert r.ok and r.stdout == "1 [2, 3] 4\n5 [6, 7]\n", r
