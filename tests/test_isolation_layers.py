"""The OS layers on their own: a child process confines itself exactly as a worker does (oslayers),
then tries to escape with raw system access (os, socket, subprocess, ctypes: what a rogue C extension
could do). Each test checks the attempt failed *and* that nothing happened on the host side; a control
run without the layers shows the same attempts would have worked, so the tests are not vacuous."""
import json
import subprocess
import sys
import textwrap

import pytest

from isolation_support import Listener, kernel_level_problem

_PROBLEM = kernel_level_problem()
pytestmark = pytest.mark.skipif(_PROBLEM is not None, reason=f"OS layers unavailable: {_PROBLEM}")

CHILD = textwrap.dedent(r"""
    import json, os, sys
    level, workdir, attacks = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    from sandbox_kernel.isolation import oslayers
    record = oslayers.LayerRecord(level, degraded_ok=False)
    oslayers.apply_early(record, workdir=workdir, network=False)
    import numpy, pandas, plotly.express  # the worker's warm-up imports
    oslayers.apply_late(record, memory_mb=1024, network=False)
    out = {"layers": record.summary()}
    for name, code in attacks.items():
        ns = {}
        try:
            exec(code, ns)
            out[name] = {"ok": True, "value": repr(ns.get("value"))[:200]}
        except BaseException as exc:
            out[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:200]}
    print(json.dumps(out))
""")


def run_child(level, workdir, attacks):
    proc = subprocess.run([sys.executable, "-I", "-c", CHILD, level, str(workdir), json.dumps(attacks)],
                          capture_output=True, text=True, timeout=120, cwd=str(workdir))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    root = tmp_path_factory.mktemp("layers")
    workdir = root / "work"
    workdir.mkdir()
    outside = root / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("TOP-SECRET-HOST-DATA")
    target = outside / "target.txt"
    target.write_text("original")
    listener = Listener()
    marker = outside / "spawned"
    attacks = {
        "os_system": f"value = os.system('echo spawned > {marker}')\nassert value == 0, value",
        "subprocess": f"import subprocess\nsubprocess.run(['/bin/sh', '-c', 'echo x > {marker}'], check=True)",
        "posix_spawn": f"value = os.posix_spawn('/bin/sh', ['sh', '-c', 'echo x > {marker}'], {{}})",
        "fork": "value = os.fork()\nif value == 0: os._exit(0)",
        "ctypes_system": f"import ctypes\nvalue = ctypes.CDLL(None).system(b'echo x > {marker}')\nassert value == 0",
        "socket_connect": f"import socket\ns = socket.create_connection(('127.0.0.1', {listener.port}), timeout=2)\n"
                          "s.sendall(b'EXFILTRATED')\ns.close()",
        "ctypes_socket": "import ctypes\nvalue = ctypes.CDLL(None, use_errno=True).socket(2, 1, 0)\n"
                         "assert value >= 0, ctypes.get_errno()",
        "read_outside": f"value = open({str(secret)!r}).read()",
        "read_etc": "value = open('/etc/passwd').read()",
        "write_outside": f"f = open({str(target)!r}, 'w')\nf.write('PWNED')\nf.close()",
        "create_outside": f"open({str(outside / 'new.txt')!r}, 'w').write('x')",
        "kill_parent": "os.kill(os.getppid(), 0)",
        # positive controls: what a notebook needs keeps working under the layers
        "write_inside": "open('inside.txt', 'w').write('ok')\nvalue = open('inside.txt').read()",
        "matmul_blas": "import numpy as np\na = np.random.rand(400, 400)\nvalue = float((a @ a).trace())",
        "lazy_import": "import scipy.stats, zoneinfo, decimal, statistics\nvalue = float(scipy.stats.norm.cdf(0))",
        "threads": "import threading\nt = threading.Thread(target=lambda: None)\nt.start()\nt.join()\nvalue = 'ok'",
        "pandas_csv": "import pandas as pd\npd.DataFrame({'a': [1, 2]}).to_csv('t.csv', index=False)\n"
                      "value = pd.read_csv('t.csv').shape",
    }
    yield {"root": root, "workdir": workdir, "secret": secret, "target": target, "marker": marker,
           "listener": listener, "attacks": attacks}
    listener.close()


@pytest.fixture(scope="module")
def confined(scene):
    result = run_child("kernel", scene["workdir"], scene["attacks"])
    result["_listener"] = (scene["listener"].connections, scene["listener"].data)
    return result


def test_every_required_layer_is_active(confined):
    layers = confined["layers"]
    assert layers["failed"] == [] and not layers["degraded"]
    assert set(layers["active"]) == {"rlimits", "landlock", "capabilities", "seccomp"}
    assert layers["details"]["rlimits"]["core_dumps"] is False


@pytest.mark.parametrize("attack", ["os_system", "subprocess", "posix_spawn", "fork", "ctypes_system"])
def test_process_creation_fails_and_nothing_ran(confined, scene, attack):
    assert not confined[attack]["ok"], confined[attack]
    assert not scene["marker"].exists()


@pytest.mark.parametrize("attack", ["socket_connect", "ctypes_socket"])
def test_network_fails_and_listener_received_nothing(confined, attack):
    assert not confined[attack]["ok"], confined[attack]
    assert confined["_listener"] == (0, b"")


def test_reading_outside_the_working_directory_fails(confined):
    for attack in ("read_outside", "read_etc"):
        assert not confined[attack]["ok"], confined[attack]
        assert "TOP-SECRET" not in json.dumps(confined[attack])


def test_writing_outside_fails_and_target_is_unchanged(confined, scene):
    assert not confined["write_outside"]["ok"]
    assert not confined["create_outside"]["ok"]
    assert scene["target"].read_text() == "original"
    assert not (scene["root"] / "outside" / "new.txt").exists()


def test_signals_cannot_leave_the_sandbox(confined):
    assert not confined["kill_parent"]["ok"]


@pytest.mark.parametrize("control", ["write_inside", "matmul_blas", "lazy_import", "threads", "pandas_csv"])
def test_the_data_stack_keeps_working(confined, control):
    assert confined[control]["ok"], confined[control]


def test_control_run_without_os_layers_shows_the_attacks_are_real(scene, tmp_path):
    """Same attempts at level `process` (rlimits only): reading the secret and reaching the listener
    succeed, so the failures above are the OS layers' doing."""
    attacks = {k: scene["attacks"][k] for k in ("read_outside", "ctypes_socket")}
    result = run_child("process", scene["workdir"], attacks)
    assert result["read_outside"]["ok"] and "TOP-SECRET" in result["read_outside"]["value"]
    assert result["ctypes_socket"]["ok"]


def test_landlock_refuses_a_multithreaded_process_fail_closed(tmp_path):
    """Landlock binds the calling thread only; applying it after threads exist must fail, not pretend."""
    code = textwrap.dedent("""
        import sys, threading, time, json
        from sandbox_kernel.isolation import oslayers
        t = threading.Thread(target=time.sleep, args=(2,), daemon=True); t.start()
        rec = oslayers.LayerRecord("kernel", degraded_ok=False)
        try:
            oslayers.apply_early(rec, workdir=sys.argv[1], network=False)
            print(json.dumps({"raised": False}))
        except oslayers.LayerError as exc:
            print(json.dumps({"raised": True, "msg": str(exc)}))
        rec2 = oslayers.LayerRecord("kernel", degraded_ok=True)
        oslayers.apply_early(rec2, workdir=sys.argv[1], network=False)
        print(json.dumps(rec2.summary()))
    """)
    proc = subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    first, second = (json.loads(line) for line in proc.stdout.strip().splitlines()[-2:])
    assert first["raised"] and "landlock" in first["msg"].lower()
    assert second["degraded"] is True and "landlock" in second["failed"]


def test_cpu_budget_ends_a_runaway_worker_and_file_size_is_capped(tmp_path):
    """The rlimit backstops: SIGXCPU after the cell's CPU budget; EFBIG beyond RLIMIT_FSIZE."""
    import signal

    code = textwrap.dedent("""
        import errno, os, sys
        from sandbox_kernel.isolation import rlimits
        rlimits.apply(memory_mb=256, fsize_mb=1, nofile=64)
        try:
            with open(os.path.join(sys.argv[1], "big.bin"), "wb") as fh:
                fh.write(b"x" * (2 * 1024 * 1024))
        except OSError as exc:
            print("EFBIG" if exc.errno == errno.EFBIG else f"other {exc}", flush=True)
        rlimits.set_cell_cpu_budget(0)  # the next whole CPU second
        while True:
            pass
    """)
    proc = subprocess.run([sys.executable, "-I", "-c", code, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    assert "EFBIG" in proc.stdout
    assert proc.returncode == -signal.SIGXCPU
    assert (tmp_path / "big.bin").stat().st_size <= 1024 * 1024
