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
