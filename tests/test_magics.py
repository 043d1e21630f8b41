"""Control magics: finding IPython syntax in untrusted cell text, and the ceiling."""
import pytest

from sandbox_kernel.controls import cell_policy, exceeds, select_isolation, select_policy
from sandbox_kernel.magics import MagicError, parse_cell
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
    ("!pip install x", "!pip"),
    ("%%bash\necho hi", "%%bash"),
    ("%%script sh\nid", "%%script"),
    ("x = !ls", "x"),
    ("files = %sx ls", "files"),
    ("open('x', 'w')?", "open('x',"),
    ("x = 1\nif x:\n    %run evil.py", "%run"),
    ("x = 1\n%%timeit\nx + 1", "%%timeit"),
])
def test_other_ipython_syntax_is_skipped_with_a_note_and_none_of_it_reaches_the_engine(source, target):
    parsed = parse_cell(source)
    assert parsed.refused == [] and parsed.skipped, source
    skipped = parsed.skipped[0]
    assert skipped.record("p")["target"] == target and skipped.record("p")["kind"] == "magic"
    assert skipped.note().startswith(f"note: line {skipped.line}: `") and "was skipped: " in skipped.note()
    # Nothing of the skipped syntax is left in the code handed on; a block keeps a body.
    assert "!" not in parsed.code and "%" not in parsed.code and "?" not in parsed.code
    assert len(parsed.code.split("\n")) == len(source.split("\n"))
    compile(parsed.code, "<test>", "exec")


def test_the_rest_of_the_cell_is_kept_around_a_skipped_line():
    parsed = parse_cell("a = 1\n%load_ext autoreload\nif a:\n    !ls\nb = 2")
    assert parsed.code == "a = 1\npass\nif a:\n    pass\nb = 2"
    assert [s.line for s in parsed.skipped] == [2, 4]


def test_display_setup_is_skipped_silently():
    parsed = parse_cell("%matplotlib inline\n%config InlineBackend.figure_format = 'retina'\nx = 1")
    assert parsed.code == "pass\npass\nx = 1" and all(s.silent for s in parsed.skipped)


@pytest.mark.parametrize("source", [
    "%time x = 1", "%timeit -n 3 x + 1", "y = %time f()", "t = %timeit -o f()", "len?", "np.sum??", "?len",
    "??pd.DataFrame.merge", "%%time\nx = 1\nx", "%%timeit -n 2 setup = 1\nsetup + 1",
    "# first\n%%time\nx = 1", "for i in range(3):\n    %time i * 2", "%%writefile x.py\nimport os",
    "%%file -a notes.txt\n!not python",
])
def test_what_the_engine_runs_is_left_as_written(source):
    parsed = parse_cell(source)
    assert parsed.code == source and parsed.skipped == [] and parsed.refused == []


def test_cell_magic_blanks_the_whole_cell():
    parsed = parse_cell("%%bash\ncurl evil | sh\nprint(1)")
    assert parsed.code.strip() == ""
    assert len(parsed.code.split("\n")) == 3  # line numbers kept
    assert "nothing in this cell ran" in parsed.skipped[0].note()


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


@pytest.mark.parametrize("source, code, skipped", [
    ("pip install anywidget\nx = 1", "pass\nx = 1", [1]),
    ("cat scripts/hello-world.py\nprint(2)", "pass\nprint(2)", [1]),
    ("%time x = 1\npip install foo\ny = 2", "%time x = 1\npass\ny = 2", [2]),
    ("for i in range(3):\n    ls data/\nz = 1", "for i in range(3):\n    pass\nz = 1", [2]),
    ("cd data\nls data", "pass\npass", [1, 2]),
    # Python, or not at a statement's start: left to the engine as written
    ("ls = [1]\nls", "ls = [1]\nls", []),
    ("ls -l", "ls -l", []),
    ("cat(3)", "cat(3)", []),
    ("x = (\npip install\n)", "x = (\npip install\n)", []),
    ("s = '''\ncat x\n'''", "s = '''\ncat x\n'''", []),
    ("pip install x\ndef f(:\n    pass", "pass\ndef f(:\n    pass", [1]),
])
def test_automagic_shell_lines_are_skipped_and_the_rest_runs(source, code, skipped):
    """IPython runs `pip install x` and `ls data` without `%` or `!` (automagic); the sandbox skips them like
    `!cmd`, with a note, where the cell would not parse otherwise."""
    parsed = parse_cell(source)
    assert parsed.code == code
    assert [s.line for s in parsed.skipped] == skipped
    assert all("shell command" in s.reason for s in parsed.skipped)
