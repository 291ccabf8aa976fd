#!/usr/bin/env bash
# Creates .venv (if missing) and installs neuron-port with the simulator, test, zoo, html and ray extras (zoo:
# the pinned transformers of the model-zoo sweep, whose 5-architecture subset runs in the test suite; html:
# matplotlib for `check --html`; ray: the one test of `check --model --engine ray`). The headless browser of the HTML report's test is the test set-up's
# (scripts/setup_browser.sh, run by scripts/test.sh), not the demo's. Each step says what it installs and, when
# it ends, how long it took; a long step prints a line every 30 s. Two set-ups of one clone at once (the demo
# and the tests side by side) take turns (flock on .venv.lock) instead of installing into one venv together.
#
# torch is the CPU build, pinned: from the public index alone, a Linux torch==2.13.0 is the CUDA build with
# its nvidia-* and triton packages (several GB) that the simulator does not use. So on Linux torch is
# asked for as torch==2.13.0+cpu, a version only CPU wheels have: from PyTorch's CPU wheel index when it
# answers (NEURON_PORT_TORCH_INDEX, default https://download.pytorch.org/whl/cpu; empty: do not try it),
# else from what pip's own configuration finds (a local wheel, a mirror: `pip config list`). Where
# neither has it, the set-up stops and says so rather than install the CUDA build. The rest comes from
# pip's configured index (PyPI). The script prints which source torch came from, and checks the result
# (torch.version.cuda is None, no nvidia-* package).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
TORCH_VERSION=2.13.0
TORCH_INDEX="${NEURON_PORT_TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
if command -v flock >/dev/null 2>&1; then
  exec 9>.venv.lock
  if ! flock -n 9; then
    echo "neuron-port: another set-up of this clone is running; waiting for it to finish..." >&2
    flock 9
  fi
fi
if [ ! -x .venv/bin/python ]; then
  echo "neuron-port: creating .venv" >&2
  "$PYTHON" -m venv .venv
fi
pip_install() {  # quiet pip; its output (but one harmless notice) shown, its exit status kept; a line every 30 s
  local log status=0 start ticker
  log="$(mktemp)"
  start=$SECONDS
  ( while sleep 30 >/dev/null 2>&1; do echo "neuron-port:   ... still installing ($((SECONDS - start)) s)" >&2; done ) &
  ticker=$!
  .venv/bin/python -m pip install -q --disable-pip-version-check "$@" >"$log" 2>&1 || status=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  grep -v "is ignored: it is neither a file nor a directory" "$log" >&2 || true
  rm -f "$log"
  [ "$status" = 0 ] && echo "neuron-port:   done in $((SECONDS - start)) s" >&2
  return "$status"
}
# Quiet unless something goes wrong; the stamp skips pip when nothing changed since the last install.
stamp=.venv/.neuron-port-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
  torch_spec="torch==$TORCH_VERSION"
  [ "$(uname -s)" = Linux ] && torch_spec="torch==$TORCH_VERSION+cpu"  # macOS and Windows wheels are CPU-only
  reachable=no
  if [ -n "$TORCH_INDEX" ] && .venv/bin/python - "$TORCH_INDEX/torch/" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="HEAD"), timeout=15)
EOF
  then reachable=yes
  fi
  if [ "$reachable" = yes ]; then
    echo "neuron-port: [1/2] installing $torch_spec (CPU build, ~200 MB; 1-5 min) from PyTorch's CPU wheel index ($TORCH_INDEX)" >&2
    pip_install --index-url "$TORCH_INDEX" "$torch_spec"
  else
    sources="$(.venv/bin/python -m pip config list 2>/dev/null | grep -E 'index-url|find-links' | tr '\n' ' ' || true)"
    echo "neuron-port: [1/2] PyTorch's CPU wheel index (${TORCH_INDEX:-not tried}) is not reachable; installing" \
         "$torch_spec (CPU build, ~200 MB; 1-5 min) from pip's own configuration (${sources:-its default index})" >&2
    if ! pip_install "$torch_spec"; then
      echo "neuron-port: error: $torch_spec is in neither place; make PyTorch's CPU wheel index reachable, or" \
           "put the CPU wheel where pip finds it (pip install --find-links FOLDER), then run this again" >&2
      exit 1
    fi
  fi
  echo "neuron-port: [2/2] installing neuron-port[sim,dev,zoo,html,ray] into .venv (transformers, matplotlib, ray, ...;" \
       "1-5 min; the rest from pip's configured index)" >&2
  pip_install -e ".[sim,dev,zoo,html,ray]"
  .venv/bin/python -c "import torch, libcst, typer, rich, transformers, matplotlib" # fail loudly if the install did not work
  .venv/bin/python - "$TORCH_VERSION" <<'EOF'
import sys
from importlib import metadata

import torch

assert torch.__version__.split("+")[0] == sys.argv[1], f"torch {torch.__version__}, not {sys.argv[1]}"
assert torch.version.cuda is None, f"torch {torch.__version__} is a CUDA build (CUDA {torch.version.cuda})"
nvidia = sorted(d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"].startswith("nvidia-"))
assert not nvidia, f"CUDA packages were installed: {', '.join(nvidia)}"
print(f"neuron-port: torch {torch.__version__} (CPU build, no CUDA packages)", file=sys.stderr)
EOF
  touch "$stamp"
fi
# The package's bytecode, written as pip writes it for a regular install: an editable install writes none at
# install time, and where PYTHONDONTWRITEBYTECODE is set none is ever written, so every process compiled
# ~100 of its modules (~0.1 s) and LibCST's dataclass methods (~0.05 s, rewrite/dataclass_code.py) again; the
# test suite starts hundreds. Only what changed is compiled again (a fraction of a second).
.venv/bin/python -m compileall -q neuron_port neuron_backend rules >/dev/null
PYTHONDONTWRITEBYTECODE= .venv/bin/python -c "from neuron_port.rewrite.file_work import load_engines; load_engines()"
