#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: creates .venv, installs the package with
# its test extras (and Arize Phoenix for the OTLP export's tests), then lint (ruff), types
# (mypy), the layering (lint-imports) and pytest against a real embedded PostgreSQL (or the
# server in LGX_TEST_DSN). This full run, with no arguments, is what CI runs (.ci/run).
#
# Extra arguments go to pytest and make it a quick run of what they name (one test file):
# no ruff, mypy or lint-imports (the full run and CI do those), and no install when the
# test extras are installed already and pyproject.toml has not changed since.
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
# written after the test extras were installed: a quick run skips the install while it is
# newer than pyproject.toml (the demo installs less, and writes no stamp)
STAMP=.venv/.lgx-test-extras
if [ "$#" -eq 0 ] || [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
  # [phoenix]: a real Arize Phoenix server for the OTLP export's integration tests
  .venv/bin/python -m pip install -q -e '.[test,phoenix]' 2> >(grep -v "is ignored: it is neither" >&2)
  touch "$STAMP"
fi
export MEM0_TELEMETRY=False
# the Phoenix tests must run here, not skip: a missing server fails them
export LGX_TEST_REQUIRE_PHOENIX=1
if [ "$#" -eq 0 ]; then
  .venv/bin/ruff check langgraph_external tests benchmarks examples
  .venv/bin/ruff format --check langgraph_external
  .venv/bin/mypy
  # the layering (contracts in pyproject.toml [tool.importlinter])
  .venv/bin/lint-imports
fi
# a private temp dir under the checkout (several suites may run on one machine); a
# --basetemp given on the command line comes later and wins
.venv/bin/python -m pytest -q --basetemp="$PWD/.pytest_tmp" "$@"
