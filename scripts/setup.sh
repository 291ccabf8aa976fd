#!/usr/bin/env bash
# Creates .venv (if missing) and installs neuron-port with the simulator, test, zoo and html extras (zoo:
# the pinned transformers of the model-zoo sweep, whose 5-architecture subset runs in the test suite; html:
# matplotlib for `check --html`). As root with apt-get, it also installs Debian's chromium, the headless
# browser the HTML report's test opens the page in (tests/reporters/html/test_html_report.py);
# NEURON_PORT_NO_APT=1 skips that.
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
if [ ! -x .venv/bin/python ]; then
  echo "neuron-port: creating .venv" >&2
  "$PYTHON" -m venv .venv
fi
pip_install() {  # quiet pip; its output (but one harmless notice) shown, its exit status kept
  local log status=0
  log="$(mktemp)"
  .venv/bin/python -m pip install -q --disable-pip-version-check "$@" >"$log" 2>&1 || status=$?
  grep -v "is ignored: it is neither a file nor a directory" "$log" >&2 || true
  rm -f "$log"
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
    echo "neuron-port: installing $torch_spec (CPU build) from PyTorch's CPU wheel index ($TORCH_INDEX)" >&2
    pip_install --index-url "$TORCH_INDEX" "$torch_spec"
  else
    sources="$(.venv/bin/python -m pip config list 2>/dev/null | grep -E 'index-url|find-links' | tr '\n' ' ' || true)"
    echo "neuron-port: PyTorch's CPU wheel index (${TORCH_INDEX:-not tried}) is not reachable; installing" \
         "$torch_spec (CPU build) from pip's own configuration (${sources:-its default index})" >&2
    if ! pip_install "$torch_spec"; then
      echo "neuron-port: error: $torch_spec is in neither place; make PyTorch's CPU wheel index reachable, or" \
           "put the CPU wheel where pip finds it (pip install --find-links FOLDER), then run this again" >&2
      exit 1
    fi
  fi
  echo "neuron-port: installing neuron-port[sim,dev,zoo,html] into .venv (the rest from pip's configured index)" >&2
  pip_install -e ".[sim,dev,zoo,html]"
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
# The browser of the HTML report's test: Debian's package (never a browser download).
if ! command -v chromium >/dev/null 2>&1 && [ -z "${NEURON_PORT_NO_APT:-}" ] && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null 2>&1; then
  echo "neuron-port: installing chromium (Debian) for the HTML report's browser test" >&2
  { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
    || echo "neuron-port: warning: chromium could not be installed; the HTML report's browser test needs it" >&2
fi
