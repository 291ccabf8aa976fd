#!/usr/bin/env bash
# The demo of the README: rewrite a copy of the bundled GPT-style fixture and show what changed and
# what is left. The fixture in the repository is never modified.
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
