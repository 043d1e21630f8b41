#!/usr/bin/env bash
# Creates .venv (if missing), installs the package with its test extras and kernelspec (scripts/venv.sh: skipped
# when nothing changed), runs pytest.
# Extra arguments go to pytest (after the defaults, so they win).
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=test
. scripts/venv.sh
# Two worker processes, one test file per worker at a time (a file's module fixtures, such as the
# browser test's JupyterLab, start once). SANDBOX_TEST_WORKERS=0 runs in one process; a later -n wins.
exec .venv/bin/python -m pytest -n "${SANDBOX_TEST_WORKERS:-2}" --dist loadfile "$@"
