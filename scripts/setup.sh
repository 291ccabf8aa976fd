#!/usr/bin/env bash
# Creates .venv (if missing) and installs neuron-port with the simulator, test and zoo extras (zoo:
# the pinned transformers of the model-zoo sweep, whose 5-architecture subset runs in the test suite).
# torch is pinned here: an unpinned torch would pull a multi-GB CUDA build.
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
  echo "neuron-port: installing torch==2.13.0 and neuron-port[sim,dev,zoo] into .venv" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0" -e ".[sim,dev,zoo]" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  .venv/bin/python -c "import torch, libcst, typer, rich, transformers" # fail loudly if the install did not work
  .venv/bin/python -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
  touch "$stamp"
fi
