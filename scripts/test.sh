#!/usr/bin/env bash
# The test command of the README (and of .ci/run): set up .venv (and the browser test's chromium), then run
# the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_browser.sh
# Two-core CI: the tests are mostly single-threaded child processes (OMP_NUM_THREADS=1) that also wait (process
# start-up, torchrun, timeouts, signals), so one pytest worker per core plus one (pytest-xdist) keeps both cores
# busy: on sleep-heavy files 169 s against 210 s with one per core (2026-12-06, load ~5); the whole suite from a
# fresh clone then kept the cores 97% busy (21:45, 3,271 tests): it is CPU-bound now; `--dist loadfile`
# keeps each file on one worker, so a module's shared fixture (a check run several tests read) runs once.
# `-n 0` (after the command) runs in one process.
exec .venv/bin/python -m pytest -n "$(( $(nproc) + 1 ))" --dist loadfile "$@"
