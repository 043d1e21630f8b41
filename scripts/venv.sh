# Sourced by demo.sh and test.sh: makes .venv (if missing) and installs the package with the extras in $EXTRAS
# and its kernelspec, skipping pip when nothing it builds from has changed since the last install (the build
# files, the C extensions' sources, the extras, the Python). A fresh checkout always installs.
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
stamp=.venv/.sandbox-install-stamp
wanted=$( { echo "$EXTRAS"; .venv/bin/python -c 'import sys; print(sys.version)';
            cat pyproject.toml setup.py sandbox_kernel/*.c 2>/dev/null; } | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[$EXTRAS]"
    .venv/bin/python -m sandbox_kernel install --sys-prefix >/dev/null
    echo "$wanted" > "$stamp"
else
    echo "scripts: .venv is up to date (pip skipped; delete $stamp to reinstall)" >&2
fi
