#!/usr/bin/env bash
# The demo of the README: rewrite a copy of the bundled GPT-style fixture, then run it on the simulated
# neuron device and show the report. The fixture in the repository is never modified.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r fixtures/gpt_trainer "$work/gpt_trainer"
echo "== neuron-port rewrite --diff (nothing written yet) =="
.venv/bin/neuron-port rewrite --diff "$work/gpt_trainer" || true
echo
echo "== neuron-port rewrite (safe fixes applied in the copy) =="
.venv/bin/neuron-port rewrite "$work/gpt_trainer" || true
echo
echo "== a second run changes nothing =="
.venv/bin/neuron-port rewrite --check "$work/gpt_trainer" --fail-on never
echo
echo "== neuron-port check: 6 training steps with a varying sequence length on the simulated device =="
echo "(the first run builds the simulator's C++ extension, about a minute)"
.venv/bin/neuron-port check "$work/gpt_trainer" -- python train.py --steps 6 --variable-length || true
