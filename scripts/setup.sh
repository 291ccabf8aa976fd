#!/usr/bin/env bash
# Creates .venv (if missing) and installs neuron-port with the simulator, test, zoo and html extras (zoo:
# the pinned transformers of the model-zoo sweep, whose 5-architecture subset runs in the test suite; html:
# matplotlib for `check --html`). torch is pinned here: an unpinned torch would pull a multi-GB CUDA build.
# As root with apt-get, it also installs Debian's chromium, the headless browser the HTML report's test
# opens the page in (tests/reporters/html/test_html_report.py); NEURON_PORT_NO_APT=1 skips that.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  echo "neuron-port: creating .venv" >&2
  "$PYTHON" -m venv .venv
fi
# Quiet unless something goes wrong; the stamp skips pip when nothing changed since the last install.
stamp=.venv/.neuron-port-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "neuron-port: installing torch==2.13.0 and neuron-port[sim,dev,zoo,html] into .venv" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0" -e ".[sim,dev,zoo,html]" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  .venv/bin/python -c "import torch, libcst, typer, rich, transformers, matplotlib" # fail loudly if the install did not work
  .venv/bin/python -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
  touch "$stamp"
fi
# The browser of the HTML report's test: Debian's package (never a browser download).
if ! command -v chromium >/dev/null 2>&1 && [ -z "${NEURON_PORT_NO_APT:-}" ] && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null 2>&1; then
  echo "neuron-port: installing chromium (Debian) for the HTML report's browser test" >&2
  { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || echo "neuron-port: warning: chromium could not be installed; the HTML report's browser test needs it" >&2
fi
