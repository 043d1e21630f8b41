"""%sandbox_files: the kernel lists a directory inside its working directory (what SandboxSession.listdir
uses behind a gateway, where the client does not have the kernel's files). The kernel reads it, so it
must hold the same lines a cell's open() holds: nothing outside the working directory, no symbolic link
followed, nothing when the policy gives no files."""
import json

import pytest

from kernel_helpers import start_client


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    root = tmp_path_factory.mktemp("files-magic")
    workdir = root / "work"
    workdir.mkdir()
    (root / "secret-outside.txt").write_text("not yours")
    (workdir / "data.csv").write_text("a\n1\n")
    (workdir / "sub").mkdir()
    (workdir / "sub" / "deep.txt").write_text("x")
    (workdir / "escape").symlink_to(root)
    client = start_client(cwd=str(workdir))
    yield client, workdir
    client.shutdown()


def listing(client, args: str) -> dict:
    r = client.run(f"%sandbox_files --json {args}")
    assert r["status"] == "ok", r
    return {e["name"]: e for e in json.loads(r["output"])["entries"]}


def test_lists_the_working_directory_with_kinds_and_sizes(scene):
    client, _ = scene
    entries = listing(client, "")
    assert entries["data.csv"] == {"name": "data.csv", "kind": "file", "size": 4}
    assert entries["sub"]["kind"] == "dir" and entries["escape"]["kind"] == "symlink"
    assert list(listing(client, "sub")) == ["deep.txt"]


def test_a_person_gets_a_readable_listing(scene):
    client, _ = scene
    r = client.run("%sandbox_files")
    assert r["status"] == "ok" and "data.csv" in r["output"] and "symlink" in r["output"]


@pytest.mark.parametrize("path", ["..", "/", "/etc", "sub/../..", "escape", "escape/work"])
def test_nothing_outside_is_listed(scene, path):
    client, _ = scene
    r = client.run(f"%sandbox_files --json {path}")
    assert r["status"] == "error", r
    assert r["denials"] and r["denials"][0]["kind"] == "file", r
    assert "secret-outside.txt" not in r["output"] + json.dumps(r["outputs"])


def test_a_policy_without_files_lists_nothing(scene):
    client, _ = scene
    r = client.run("%%sandbox --policy strict\n%sandbox_files --json")
    assert r["status"] == "error" and "data.csv" not in json.dumps(r["outputs"]), r


def test_the_kernel_is_still_there(scene):
    client, _ = scene
    assert client.run("1 + 1")["outputs"][-1]["data"]["text/plain"] == "2"
