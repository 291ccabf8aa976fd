#!/usr/bin/env bash
# The test command of the README (and of .ci/run): set up .venv (and the browser test's chromium), then run
# the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_browser.sh
exec .venv/bin/python -m pytest "$@"
