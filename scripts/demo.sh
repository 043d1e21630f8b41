#!/usr/bin/env bash
# Creates .venv (if missing), installs the package and its kernelspec, and runs the tour notebook
# through the "Sandboxed Python" kernel, printing each cell's outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
.venv/bin/python -m sandbox_kernel install --sys-prefix
exec .venv/bin/python -m sandbox_kernel run notebooks/tour.ipynb
