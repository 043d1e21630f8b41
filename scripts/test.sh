#!/usr/bin/env bash
# Creates .venv (if missing), installs the package with its test extras and kernelspec, runs pytest.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
.venv/bin/python -m sandbox_kernel install --sys-prefix >/dev/null
exec .venv/bin/python -m pytest "$@"
