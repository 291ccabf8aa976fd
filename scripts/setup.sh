#!/usr/bin/env bash
# Creates .venv (if missing) and installs neuron-port with the simulator and test extras.
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
  echo "neuron-port: installing torch==2.13.0 and neuron-port[sim,dev] into .venv" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
  .venv/bin/python -m pip install -q --disable-pip-version-check "torch==2.13.0" -e ".[sim,dev]" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
  .venv/bin/python -c "import torch, libcst, typer, rich" # fail loudly if the install did not work
  touch "$stamp"
fi
