#!/usr/bin/env bash
# Creates the vision sweep's own venv (bench/zoo/.venv, ignored by git through the repo's `.venv/` rule;
# NEURON_PORT_VISION_VENV puts it elsewhere) with torch 2.14.1, torchvision 0.29.1 and timm 1.0.31, installs
# neuron-port (editable, `sim` extra) into it and builds the simulator against that torch.
#
# Why a second venv: the project's .venv has torch 2.13.0+cpu, and no torchvision on the package index
# imports beside it (PyPI's torchvision wheels are CUDA builds whose C++ ops do not load with a CPU torch:
# `operator torchvision::nms does not exist`), and timm imports torchvision at `import timm`
# (timm/layers/create_norm.py). torch 2.14.1 with torchvision 0.29.1 is a matching pair; it is a CUDA
# build (about 5.5 GB in the venv) that runs on the CPU, and the simulator's `sim` extra admits it
# (torch>=2.13,<2.15). Nothing else is downloaded later: models get random weights (torchvision
# weights=None and weights_backbone=None, timm pretrained=False).
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${NEURON_PORT_VISION_VENV:-bench/zoo/.venv}"
PYTHON="${PYTHON:-python3}"
TORCH=2.14.1 TORCHVISION=0.29.1 TIMM=1.0.31
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup_vision: creating $VENV" >&2
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.vision-installed-$TORCH-$TORCHVISION-$TIMM"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup_vision: installing torch==$TORCH torchvision==$TORCHVISION timm==$TIMM and neuron-port[sim] (several GB)" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check \
      "torch==$TORCH" "torchvision==$TORCHVISION" "timm==$TIMM" -e ".[sim]" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
  "$VENV/bin/python" - "$TORCH" "$TORCHVISION" "$TIMM" <<'EOF'
import sys
import timm, torch, torchvision
got = (torch.__version__.split("+")[0], torchvision.__version__.split("+")[0], timm.__version__)
assert got == tuple(sys.argv[1:]), f"installed {got}, wanted {tuple(sys.argv[1:])}"
torchvision.ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)  # the C++ ops load
print(f"setup_vision: torch {torch.__version__}, torchvision {torchvision.__version__}, timm {timm.__version__}", file=sys.stderr)
EOF
  touch "$stamp"
fi
# the simulator's C++ core for this torch (cached per torch version and source hash; 1-6 min the first time)
"$VENV/bin/python" -c "import neuron_backend.build as b; print('setup_vision: simulator', b.build())"
echo "setup_vision: ready; run $VENV/bin/python bench/zoo/vision_sweep.py" >&2
