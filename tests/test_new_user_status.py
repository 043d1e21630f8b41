"""%sandbox_status for people: a short summary that reports the worker's real layers (it waits for a
worker still starting instead of saying 'active: none'), and every detail as JSON with --json."""
import json
import sys

import pytest

from kernel_helpers import start_client

LINUX = sys.platform.startswith("linux")


@pytest.fixture(scope="module")
def fresh_kernel(tmp_path_factory):
    client = start_client(cwd=str(tmp_path_factory.mktemp("status")), isolation="kernel" if LINUX else "process")
    yield client
    client.shutdown()


def test_the_first_cell_of_a_kernel_sees_the_layers_in_force(fresh_kernel):
    out = fresh_kernel.run("%sandbox_status")["output"]   # the kernel's first cell: its worker may be starting
    assert '"state": "ready"' in out, out
    if LINUX:
        assert "os layers: active: " in out and "active: none" not in out, out


def test_the_summary_is_short_and_the_rules_are_in_the_json(fresh_kernel):
    out = fresh_kernel.run("%sandbox_status")["output"]
    assert max(len(line) for line in out.splitlines()) < 400, out
    assert "%sandbox_status --json" in out
    detail = json.loads(fresh_kernel.run("%sandbox_status --json")["output"])
    assert detail["policy"] == "data-science" and detail["limits"]["timeout"] == 60
    assert detail["worker"]["state"] == "ready" and detail["worker"]["pid"]
    if LINUX:
        assert detail["isolation"] == "kernel"
        assert set(detail["os_layers"]["active"]) >= {"landlock", "seccomp", "rlimits"}
        assert "seccomp" in detail["os_layers"]["details"]   # what the summary leaves out
        assert '"details"' not in out


def test_an_unknown_argument_is_refused(fresh_kernel):
    r = fresh_kernel.run("%sandbox_status --verbose\nprint('not run')")
    assert r["status"] == "error" and "--json" in r["error"]["evalue"] and "not run" not in r["output"]
