"""Random generators' state: numpy.random's bit generators index their key and buffer by a position stored in
the state, so every route to a state setter must check it (MT19937 `pos`, Philox `buffer_pos`, `RandomState.set_state`
and the process-wide `np.random.set_state`); a cell subclass of the abstract `BitGenerator` is refused; the `random`
module's generator is the engine's, not the host's.

Sink: docs/security.md, "Inventory of sinks", row *random generators' state*. The attacks come from the independent
reviews at level none (docs/reviews.md): review 5 (N5-3, N5-7) and review 6 (N6-5).
"""
from __future__ import annotations

import pytest

from childcell import run_cell_in_child, run_reporting

# From review 5 (docs/reviews.md, "Review 5").
# --- N5-3: numpy.random's state setters take a position past the state ------------------------------------------
# MT19937.state = {..., 'pos': 700} and Philox.state = {..., 'buffer_pos': -100} are stored unchecked; each draw
# then reads key[pos++] / buffer[buffer_pos++] past the state struct: MT19937's output is the heap word
# tempered (invertible), Philox's is the raw 64-bit word (heap addresses come back). RandomState.set_state with
# pos=10**5 segfaults. np.random.set_state does the same to the process-wide legacy RandomState: the host's
# next np.random draw after the cell crashes the kernel.

RNG_READS = {
    # variants of the same setters (added with the fix)
    "mt19937_setattr": ("bg = np.random.MT19937(1)\nst = bg.state\nst['state']['pos'] = 10**5\nsetattr(bg, 'state', st)\n"
                        "v = np.random.Generator(bg).integers(0, 2**32, size=8, dtype=np.uint32)\n"),
    "mt19937_short_key": ("bg = np.random.MT19937(1)\nst = bg.state\nst['state']['key'] = st['state']['key'][:3]\n"
                          "bg.state = st\nv = np.random.Generator(bg).integers(0, 2**32, size=8, dtype=np.uint32)\n"),
    "generator_bit_generator": ("g = np.random.default_rng(1)\nst = np.random.Philox(1).state\nst['buffer_pos'] = -5\n"
                                "g2 = np.random.Generator(np.random.Philox(2))\ng2.bit_generator.state = st\n"
                                "v = g2.integers(0, 2**63, size=8)\n"),
    "randomstate_from_the_class": ("rs = np.random.RandomState(1)\ns = rs.get_state()\n"
                                   "np.random.RandomState.set_state(rs, (s[0], s[1], 100000))\nv = rs.randint(0, 9)\n"),
    "legacy_dict_form": ("rs = np.random.RandomState(1)\ns = rs.get_state(legacy=False)\ns['state']['pos'] = 10**5\n"
                         "rs.set_state(s)\nv = rs.randint(0, 9)\n"),
    "mt19937_pos": ("bg = np.random.MT19937(1)\nst = bg.state\nst['state']['pos'] = 700\nbg.state = st\n"
                    "v = np.random.Generator(bg).integers(0, 2**32, size=8, dtype=np.uint32)\n"),
    "philox_buffer_pos": ("bg = np.random.Philox(1)\nst = bg.state\nst['buffer_pos'] = -100\nbg.state = st\n"
                          "v = np.random.Generator(bg).integers(0, 2**63, size=8)\n"),
    "randomstate_set_state": ("rs = np.random.RandomState(1)\ns = rs.get_state()\n"
                              "rs.set_state((s[0], s[1], 100000))\nv = rs.randint(0, 2**31, size=8)\n"),
}


# FINDING N5-3, fixed: every state setter gets a checked copy (guards.checked_random_state).
@pytest.mark.parametrize("route", sorted(RNG_READS))
def test_bit_generator_state_positions_are_checked(route):
    result = run_reporting("import numpy as np\n" + RNG_READS[route])
    assert "crashed" not in result, f"the process died: {result}"
    assert result["status"] == "error", f"the draws read past the generator's state: {result}"


def test_saving_and_restoring_a_generators_state_still_works():
    result = run_reporting("import numpy as np\n"
                  "bg = np.random.MT19937(3)\nst = bg.state\na = np.random.Generator(bg).random(3)\nbg.state = st\n"
                  "b = np.random.Generator(bg).random(3)\n"
                  "ph = np.random.Philox(3)\nsp = ph.state\nc = np.random.Generator(ph).random(3)\nph.state = sp\n"
                  "d = np.random.Generator(ph).random(3)\n"
                  "s = np.random.get_state()\ne = np.random.rand(3)\nnp.random.set_state(s)\nf = np.random.rand(3)\n"
                  "rs = np.random.RandomState(5)\nr = rs.get_state(legacy=False)\ng = rs.rand(2)\nrs.set_state(r)\n"
                  "v = bool((a == b).all() and (c == d).all() and (e == f).all() and (g == rs.rand(2)).all())\n",
                  ns=("v",))
    assert result["status"] == "ok" and result.get("v") is True, result


HOST_DRAWS = """
def probe_host(report):
    import numpy as np
    report['host_drew'] = int(np.random.randint(0, 2**31, size=1000).sum()) >= 0
"""


@pytest.mark.parametrize("setter", ["np.random.set_state", "set_state", "np.random.mtrand.set_state"])
def test_global_random_state_set_by_a_cell_does_not_crash_the_host(setter):
    result = run_cell_in_child("import numpy as np\nimport numpy.random.mtrand\nfrom numpy.random import set_state\n"
                               f"s = np.random.get_state()\n{setter}((s[0], s[1], 10**6))\n",
                               report=("status", "ename"), probe=HOST_DRAWS, hard_exit=True)
    assert result.get("ename") == "ValueError", result
    assert "crashed" not in result, f"the host crashed after the cell: {result}"


# --- N5-7: a cell subclass of numpy.random.BitGenerator ------------------------------------------------------------
# BitGenerator.__init__ (run by the subclass) makes the capsule over its bitgen_t struct, whose function pointers
# only the concrete generators fill in; Generator(B(0)).random() calls a NULL function pointer.

# FINDING N5-7, fixed: the abstract BitGenerator cannot be subclassed by a cell (gates._class_refusal).
@pytest.mark.parametrize("make", ["class B(np.random.BitGenerator):\n    pass\n",
                                  "B = type('B', (np.random.bit_generator.BitGenerator,), {})\n"])
def test_bit_generator_subclass_without_functions_does_not_crash(make):
    result = run_reporting("import numpy as np\nimport numpy.random.bit_generator\n" + make +
                  "g = np.random.Generator(B(0))\nv = g.random()\n")
    assert "crashed" not in result, f"the process died: {result}"
    assert result["ename"] == "BuiltinDenied", result


@pytest.mark.parametrize("cls", ["np.random.Generator", "np.random.RandomState", "np.random.MT19937"])
def test_random_classes_without_their_init_refuse(cls):
    result = run_reporting(f"import numpy as np\nclass C({cls}):\n    def __init__(self):\n        pass\n"
                  "c = C()\nv = np.random.Generator(c).random() if isinstance(c, np.random.BitGenerator) else "
                  "c.random_sample() if hasattr(c, 'random_sample') else c.random()\n")
    assert "crashed" not in result, result
    assert result["status"] == "error", result


# From review 6 (docs/reviews.md, "Review 6").
# --- N6-5 (lesser): the random module's generator is the process's -------------------------------------------------

RANDOM_HOST = """
def probe_host(report):
    import random
    first = random.random()
    random.seed(12345)
    report['seeded_by_cell'] = first == random.random()
"""


def test_random_seed_in_a_cell_is_not_the_hosts():
    result = run_cell_in_child("import random\nrandom.seed(12345)\n", report=("status",), probe=RANDOM_HOST,
                               hard_exit=True)
    assert result["status"] == "ok", result
    assert result["seeded_by_cell"] is False, result
