#!/usr/bin/env bash
# The test command of the README (and of .ci/run): set up .venv, then run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"
