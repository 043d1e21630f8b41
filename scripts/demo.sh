#!/usr/bin/env bash
# Creates .venv (if missing), installs the package and its kernelspec, and runs the tour notebook
# through the "Sandboxed Python" kernel, printing each cell's outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=test
. scripts/venv.sh
exec .venv/bin/python -m sandbox_kernel run notebooks/tour.ipynb
