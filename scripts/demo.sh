#!/usr/bin/env bash
# The demo of the README: rewrite a copy of the bundled GPT-style fixture, then run it on the simulated
# neuron device and show the report. The fixture in the repository is never modified.
# Each step's findings are the demo's output, not a failure (--exit-zero); a step that fails (a file that
# could not be processed, a command that failed on the simulator, a usage error) stops the demo with its
# exit status and says which step it was.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
work="$(mktemp -d)"
step="set-up"
trap 'rm -rf "$work"' EXIT
trap 'status=$?; echo "neuron-port demo: the step \"$step\" failed (exit status $status)" >&2; exit $status' ERR
cp -r fixtures/gpt_trainer "$work/gpt_trainer"
step="rewrite --diff"
echo "== neuron-port rewrite --diff (nothing written yet) =="
.venv/bin/neuron-port rewrite --diff --exit-zero "$work/gpt_trainer"
echo
step="rewrite"
echo "== neuron-port rewrite (safe fixes applied in the copy) =="
.venv/bin/neuron-port rewrite --exit-zero "$work/gpt_trainer"
echo
step="second rewrite"
echo "== a second run changes nothing =="
.venv/bin/neuron-port rewrite --check "$work/gpt_trainer" --fail-on never
echo
step="check"
echo "== neuron-port check: 6 training steps with a varying sequence length on the simulated device =="
echo "(the first run builds the simulator's C++ extension: a few minutes on 2 cores; later runs load it)"
.venv/bin/neuron-port check --exit-zero "$work/gpt_trainer" -- python train.py --steps 6 --variable-length
