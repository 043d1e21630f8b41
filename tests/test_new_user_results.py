"""The agents' convention, `result = {"output": ..., "chart": ...}`, as a person sees it in a notebook:
what a cell prints shows once, as in stock ipykernel, plus the chart; the convention's output is for
agents, in the reply's metadata (seed 002: the output is `result["output"]` when it is set, else what
the cell printed). The engine once also wrote it to the cell's stdout, so a cell that printed its
summary and handed it over showed it twice."""
import pytest

from kernel_helpers import start_client

CELL = ("summary = 'mean T1 45.2 us'\n"
        "print(summary)\n"
        "result = {'output': summary, 'chart': {'data': [{'type': 'scatter', 'y': [1, 2, 3]}]}}")


def test_a_printed_summary_handed_over_shows_once(run):
    r = run(CELL)
    assert r.ok, r
    assert r.stdout.count("mean T1 45.2 us") == 1, r.stdout
    assert "mean T1 45.2 us" in r.done["output"] and len(r.displays) == 1


def test_the_conventions_output_alone_is_for_agents_not_printed(run):
    r = run("result = {'output': 'for the agent'}")
    assert r.ok and r.stdout == "", r.stdout
    assert r.done["output"].strip() == "for the agent"


def test_in_a_notebook_the_output_shows_once_and_the_metadata_has_it(tmp_path):
    client = start_client(cwd=str(tmp_path))
    try:
        result = client.run(CELL)
    finally:
        client.shutdown()
    shown = "".join(o.get("text", "") for o in result["outputs"] if o["type"] == "stream")
    assert shown.count("mean T1 45.2 us") == 1, shown
    assert "mean T1 45.2 us" in result["output"] and result["charts"]
