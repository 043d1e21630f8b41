#!/usr/bin/env bash
# Creates .venv (if missing), installs the package with its test extras and kernelspec (scripts/venv.sh: skipped
# when nothing changed), runs pytest.
# Extra arguments go to pytest (after the defaults, so they win).
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=test
. scripts/venv.sh
# Enterprise Gateway (tests/test_gateway_launcher.py receives eg-launch's handshake with EG's own code) pins
# older jupyter_client/jupyter_server/pyzmq, so it lives in a venv of its own; without it those tests skip.
if [ -z "${SANDBOX_EG_PYTHON:-}" ]; then
    if [ ! -x .venv-eg/bin/python ]; then
        { "${PYTHON:-python3}" -m venv .venv-eg &&
          .venv-eg/bin/python -m pip install --quiet jupyter_enterprise_gateway pycryptodomex; } ||
            { echo "scripts: could not install Enterprise Gateway: its tests will skip" >&2; rm -rf .venv-eg; }
    fi
    if [ -x .venv-eg/bin/python ]; then
        export SANDBOX_EG_PYTHON="$PWD/.venv-eg/bin/python"
    fi
fi
# Two worker processes, one test file per worker at a time (a file's module fixtures, such as the
# browser test's JupyterLab, start once). SANDBOX_TEST_WORKERS=0 runs in one process; a later -n wins.
exec .venv/bin/python -m pytest -n "${SANDBOX_TEST_WORKERS:-2}" --dist loadfile "$@"
