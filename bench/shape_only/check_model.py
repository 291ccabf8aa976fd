"""`neuron-port check --model` at the size users rent (issue 36 item 2): a local folder holding a
Llama-3-8B-shaped config.json (written here from transformers' LlamaConfig with Meta's published sizes:
32 x 4096, 32/8 heads, FFN 14336, vocab 128256; nothing downloaded), one training step at batch 8 x 2048 per
rank, as rank 0 of a 64-rank FSDP2 job (`--world-size 64`), and the same without a world. Measured as
run.py measures (wall, peak RSS of the whole process tree polled from /proc, CPU seconds).

    .venv/bin/python bench/shape_only/check_model.py [--json OUT] [--world-size 64] [--no-single]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import run_measured  # noqa: E402

REPO = HERE.parents[1]
LLAMA3_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192, rope_theta=500000.0,
                 rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001)


def write_config(folder: Path) -> None:
    code = ("import sys, json; from transformers import LlamaConfig; c = LlamaConfig(**json.loads(sys.argv[2])); "
            "c.architectures = ['LlamaForCausalLM']; c.dtype = 'bfloat16'; c.save_pretrained(sys.argv[1])")
    subprocess.run([sys.executable, "-c", code, str(folder), json.dumps(LLAMA3_8B)], check=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--json", type=Path)
    p.add_argument("--world-size", type=int, default=64)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--timeout", type=float, default=1800)
    a = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "llama3-8b"
        write_config(folder)
        for world in (a.world_size, None):
            report = Path(tmp) / f"report-{world}.json"
            argv = [sys.executable, "-m", "neuron_port", "check", "--model", str(folder), "--batch", str(a.batch),
                    "--seq", str(a.seq), "--output-format", "json", "-o", str(report)] + (
                ["--world-size", str(world)] if world else [])
            result = run_measured(argv, REPO, dict(os.environ), a.timeout)
            doc = json.loads(report.read_text()) if report.exists() else {}
            work = (doc.get("estimate") or {}).get("work") or {}
            row = {"world_size": world, **{k: v for k, v in result.items() if k not in ("stdout", "stderr")},
                   "step_exit_code": ((doc.get("runtime") or {}).get("status") or {}).get("exit_code"),
                   "device_peak_bytes": work.get("peak_bytes"),
                   "stdout_tail": result["stdout"][-1500:], "stderr_tail": result["stderr"][-1500:]}
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("_tail")}), flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
