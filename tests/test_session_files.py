"""Attacks on the session's file operations: `..`, absolute paths and symlinks planted in the working
directory must not let upload, download or listdir reach a host file, at level none (the Python
confinement) and at level kernel (Landlock underneath). Each attack is tried for real; the test asserts
the refusal, that the secret never came back, and that nothing outside changed."""
import os

import pytest

from kernel_helpers import KERNEL_NAME, require_kernelspec
from sandbox_kernel.client import SandboxDenied, SandboxSession

SECRET = "host-secret-7f3a9c"


@pytest.fixture(scope="module", params=["none", "kernel"])
def box(request, tmp_path_factory):
    require_kernelspec()
    root = tmp_path_factory.mktemp(f"files-{request.param}")
    work, outside = root / "work", root / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (outside / "target.txt").write_text("original")
    # What a breached worker could leave behind: links from the working directory to the host.
    os.symlink(outside / "secret.txt", work / "link_to_secret.txt")
    os.symlink(outside / "target.txt", work / "link_to_target.txt")
    os.symlink(outside, work / "link_to_outside")
    with SandboxSession(isolation=request.param, cwd=str(work), kernel_name=KERNEL_NAME) as s:
        yield s, outside


def untouched(outside):
    assert sorted(os.listdir(outside)) == ["secret.txt", "target.txt"]
    assert (outside / "secret.txt").read_text() == SECRET
    assert (outside / "target.txt").read_text() == "original"


@pytest.mark.parametrize("path", ["../outside/secret.txt", "link_to_secret.txt", "link_to_outside/secret.txt",
                                  "/etc/passwd", "sub/../../outside/secret.txt"])
def test_download_outside_is_refused_like_a_cell(box, path):
    session, outside = box
    with pytest.raises(SandboxDenied) as denied:
        session.download(path)
    assert denied.value.denial.kind == "file" and SECRET not in str(denied.value)
    # the same refusal a cell of the agent's gets for the same path
    cell = session.run(f"open({path!r}, 'rb').read()")
    assert cell.error.denial and cell.denials[-1].kind == "file"
    assert cell.denials[-1].rule == denied.value.denial.rule
    untouched(outside)


@pytest.mark.parametrize("path", ["../outside/target.txt", "link_to_target.txt", "link_to_outside/new.txt",
                                  "/tmp/sandbox-session-planted.txt"])
def test_upload_outside_is_refused_and_writes_nothing(box, path):
    session, outside = box
    with pytest.raises(SandboxDenied):
        session.upload(path, b"overwritten")
    untouched(outside)
    assert not os.path.exists("/tmp/sandbox-session-planted.txt")


@pytest.mark.parametrize("path", ["..", "../outside", "link_to_outside", "/", "/etc"])
def test_listdir_outside_is_refused(box, path):
    session, outside = box
    with pytest.raises(SandboxDenied):
        session.listdir(path)


def test_listing_shows_links_as_links_without_following_them(box):
    session, outside = box
    entries = {e.name: e for e in session.listdir()}
    assert {entries[n].kind for n in ("link_to_secret.txt", "link_to_target.txt", "link_to_outside")} == {"symlink"}
    assert entries["link_to_secret.txt"].size == 0
    untouched(outside)
