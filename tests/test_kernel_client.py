"""The agent API (sandbox_kernel.client) and the runnable examples in docs/agents.md."""
import os
import re
import subprocess
import sys

import pytest

from kernel_helpers import require_kernelspec, start_client
from sandbox_kernel.client import SandboxTimeout, run_code

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_blocks(path):
    text = open(path, encoding="utf-8").read()
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def test_agents_doc_jupyter_client_example_runs_and_prints_what_it_says(tmp_path):
    require_kernelspec()
    doc = os.path.join(ROOT, "docs", "agents.md")
    example = python_blocks(doc)[0]
    out = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    promised = re.search(r"prints\n\n```\n(.*?)```", open(doc, encoding="utf-8").read(), re.DOTALL).group(1)
    assert out.stdout == promised


def test_client_result_and_timeout(tmp_path):
    client = start_client(cwd=str(tmp_path))
    try:
        r = client.run("values = [3, 1, 2]\nresult = {'output': f'max={max(values)}', "
                       "'chart': {'data': [{'y': values, 'type': 'bar'}]}}")
        assert r["output"].strip() == "max=3" and r["charts"][0]["data"][0]["type"] == "bar"
        assert r["execution_count"] == 1 and r["status"] == "ok"
        with pytest.raises(SandboxTimeout):
            client.run("while True:\n    pass", timeout=2)
        # The timed-out cell was interrupted; the kernel answers the next one.
        assert client.run("'usable'", timeout=30)["status"] == "ok"
    finally:
        client.shutdown()


def test_run_code_one_shot(tmp_path):
    require_kernelspec()
    r = run_code("print(sum(range(5)))", cwd=str(tmp_path))
    assert r["output"] == "10\n" and r["error"] is None and r["denials"] == []
