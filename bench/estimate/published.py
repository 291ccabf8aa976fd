"""The estimate against published GPU training runs, as a benchmark (docs/estimate.md, "Validation against
published runs"; bench/README.md, "estimate"). Each configuration runs once as `neuron-port check
--shape-only --world-size N` (rank 0 of the N-GPU job, FakeTensor shapes; the training step is
tests/check/estimate/published/train.py and the models bench/shape_only/project/models.py, as in the CI test), then:

1. the expected step time and the lower bound on the GPU the run used, against the published step time;
2. the same reports recomputed (`estimate` on the saved work, nothing re-run) with each assumption of the
   model at the ends of its tried range, one at a time: how far each one moves every row (the "range
   tried" of docs/estimate.md "Assumptions"); the Trainium2 row alongside, which has no published run.

    python bench/estimate/published.py [--only NAME ...] [--jobs N] [--json FILE]

RUNS has each published figure with its source (torchtitan's: local batch 2 x 8192 tokens over its TPS per GPU).
The many-small-graphs row (a Muon-style optimizer step, compiled per weight) has no published figure: it is
bench/estimate/muon.py's, against a measurement on this CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PUBLISHED = REPO / "tests" / "check" / "estimate" / "published"  # train.py, the training step
MODELS = REPO / "bench" / "shape_only" / "project" / "models.py"  # the one copy of the models
LLAMA8B = "--model llama --layers 32 --d 4096 --heads 32 --kv-heads 8 --ffn 14336 --vocab 128256 --batch 2 --seq 8192"
TORCHTITAN = "torchtitan benchmarks/llama3_h100_202412_torchtitan.md"

# name: (published seconds per step, device, world size, train.py arguments, tokens spec, source); the torchtitan
# rows run on its own GPU, the H100 96GB HBM2e at 500 W of its Grand Teton hosts (--instance, INSTANCES), with
# its selective activation checkpointing (train.py --ac selective)
TITAN = "h100-hbm2e-500w"
RUNS = {
    "gpt2-124m-a100": (0.300, "a100-sxm", 8, "--model gpt2 --layers 12 --d 768 --heads 12 --batch 64 --seq 1024 "
                       "--dp allreduce --compile", "embedding@wte",
                       'llm.c scripts/run_gpt2_124M.sh: 524,288 tokens a step "in ~300ms/iter", 8x A100 80GB'),
    "gpt2-350m-a100": (0.820, "a100-sxm", 8, "--model gpt2 --layers 24 --d 1024 --heads 16 --batch 64 --seq 1024 "
                       "--dp allreduce --compile", "embedding@wte",
                       'llm.c scripts/run_gpt2_350M.sh: 524,288 tokens a step, "on 8X A100 80GB SXM ... steps in '
                       '~820ms/iter"'),
    "gpt2-774m-a100": (1.7, "a100-sxm", 8, "--model gpt2 --layers 36 --d 1280 --heads 20 --batch 32 --seq 1024 "
                       "--micro-steps 2 --dp allreduce --compile", "embedding@wte",
                       'llm.c scripts/run_gpt2_774M.sh: 524,288 tokens a step (2 x 32 x 1024 per GPU), "on 8X A100 '
                       '80GB SXM ... steps in ~1.7s/iter"'),
    "gpt2-1558m-h100": (2.80, "h100-sxm", 8, "--model gpt2 --layers 48 --d 1600 --heads 25 --batch 16 --seq 1024 "
                        "--micro-steps 8 --dp allreduce --compile", "embedding@wte",
                        'llm.c scripts/run_gpt2_1558M.sh: 1,048,576 tokens "in 2.80s/iter", 8x H100'),
    "llama3-8b-fsdp8-h100": (16384 / 5762, TITAN, 8, f"{LLAMA8B} --dp fsdp --ac selective", "embedding@tok",
                             f"{TORCHTITAN} Table 1: FSDP, 8 GPUs, 5,762 TPS/GPU"),
    "llama3-8b-fsdp8-compile-h100": (16384 / 6667, TITAN, 8, f"{LLAMA8B} --dp fsdp --ac selective --compile",
                                     "embedding@tok", f"{TORCHTITAN} Table 1: FSDP + torch.compile, 8 GPUs, "
                                     "6,667 TPS/GPU"),
    "llama3-8b-fsdp128-h100": (16384 / 5605, TITAN, 128, f"{LLAMA8B} --dp fsdp --ac selective", "embedding@tok",
                               f"{TORCHTITAN} Table 3: FSDP, 128 GPUs, 5,605 TPS/GPU"),
    "llama3-8b-fsdp128-compile-h100": (16384 / 6514, TITAN, 128, f"{LLAMA8B} --dp fsdp --ac selective --compile",
                                       "embedding@tok", f"{TORCHTITAN} Table 3: FSDP + torch.compile, 128 GPUs, "
                                       "6,514 TPS/GPU"),
}
# the instance that holds a row's device (rules/instances.toml), sized to the world: 8 GPUs a host
INSTANCES = {TITAN: "grand-teton-h100"}
# The assumptions that move a step (the compile and NEFF ones move only the first run), at the ends of the
# range docs/estimate.md says was tried
RANGES = {
    "dispatch_seconds_per_op": (5e-6, 2.5e-5),
    "compute_fraction": (0.3, 0.8),
    "memory_fraction": (0.6, 0.9),
    "collective_overlap": (0.0, 1.0),
    "host_link_gbps": (8.0, 64.0),
    "host_transfer_seconds": (0.0007, 0.0035),
    "graph_call_seconds": (1e-5, 4e-5),
    "kernel_launch_seconds": (3e-6, 2e-5),
    "gemm_latency_seconds": (2e-6, 8e-6),
    "neff_execution_seconds": (1e-5, 1e-4),
}
TRAINIUM = "trn2-chip"


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "TORCH_NEURONX_"))}
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["OMP_NUM_THREADS"] = "1"
    return env


def check_command(project: Path, name: str) -> tuple[list[str], Path]:
    _, device, world, args, tokens, _ = RUNS[name]
    out = project / f"{name}.json"
    instance = [f"--instance={INSTANCES[device]}:{world // 8}"] if device in INSTANCES else []
    return ([sys.executable, "-m", "neuron_port", "check", str(project), "--shape-only", "--world-size", str(world),
             *instance, "--tokens-per-step", tokens, "--exit-zero", "-o", str(out), "--", "python", "train.py", *args.split()],
            out)


def run_all(names: list[str], jobs: int, project: Path) -> dict[str, dict]:
    """Each configuration's report and the wall seconds of its check, ``jobs`` at a time."""
    pending, running, done = list(names), {}, {}
    while pending or running:
        while pending and len(running) < jobs:
            name = pending.pop(0)
            command, out = check_command(project, name)
            log = open(project / f"{name}.log", "w")
            running[name] = (subprocess.Popen(command, cwd=project, env=child_env(), stdout=log,
                                              stderr=subprocess.STDOUT), out, time.monotonic(), log)
        for name, (child, out, started, log) in list(running.items()):
            if child.poll() is None:
                continue
            log.close()
            if child.returncode != 0:
                raise SystemExit(f"{name}: check exited {child.returncode}; see {project / (name + '.log')}")
            done[name] = {"report": json.loads(out.read_text()), "wall_seconds": time.monotonic() - started}
            del running[name]
        time.sleep(0.5)
    return done


def row(section: dict, device: str) -> dict:
    return next(r for r in section["per_device"] if r["device"] == device)


def measure(name: str, report: dict) -> dict:
    from neuron_port.check.estimate import recompute
    from neuron_port.check.estimate.options import EstimateOptions

    published, device, world, _, _, source = RUNS[name]
    section = report["estimate"]
    gpu, trn = row(section, device), row(section, TRAINIUM)
    result = {"name": name, "device": device, "world_size": world, "source": source, "published_seconds": published,
              "expected_seconds": gpu["step_seconds"]["expected"], "lower_seconds": gpu["step_seconds"]["lower"],
              "ratio": gpu["step_seconds"]["expected"] / published,
              "collective_seconds": gpu["collectives"]["seconds"],
              "exposed_collective_seconds": gpu["collectives"]["exposed_seconds"],
              "sharding": gpu["collectives"]["sharding"],
              "tokens_per_step": section["steps"]["tokens_per_step"],
              "trainium": {"device": TRAINIUM, "expected_seconds": trn["step_seconds"]["expected"],
                           "chips": trn["price"]["chips"]},
              "sensitivity": {}}
    for assumption, values in RANGES.items():
        ratios, trainium = [], []
        for value in values:
            again = recompute(section, EstimateOptions(assumptions={assumption: value}))
            ratios.append(row(again, device)["step_seconds"]["expected"] / published)
            trainium.append(row(again, TRAINIUM)["step_seconds"]["expected"])
        result["sensitivity"][assumption] = {"values": list(values), "ratio": ratios, "trainium_seconds": trainium}
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", action="append", choices=sorted(RUNS))
    parser.add_argument("--jobs", type=int, default=1, help="checks at a time (each is one process)")
    parser.add_argument("--json")
    args = parser.parse_args()
    names = args.only or list(RUNS)
    with tempfile.TemporaryDirectory(prefix="neuron-port-published-") as tmp:
        project = Path(tmp)
        shutil.copy(PUBLISHED / "train.py", project / "train.py")
        shutil.copy(MODELS, project / "models.py")
        load_before = os.getloadavg()[0]
        done = run_all(names, args.jobs, project)
        load_after = os.getloadavg()[0]
    rows = [{**measure(name, done[name]["report"]), "wall_seconds": done[name]["wall_seconds"]} for name in names]
    print(f"{'run':32} {'published':>10} {'expected':>10} {'lower':>10} {'ratio':>6}  {TRAINIUM:>10}  check")
    for r in rows:
        print(f"{r['name']:32} {r['published_seconds']:9.3f}s {r['expected_seconds']:9.3f}s "
              f"{r['lower_seconds']:9.3f}s {r['ratio']:6.2f}  {r['trainium']['expected_seconds']:9.3f}s  "
              f"{r['wall_seconds']:5.0f}s")
    print("\nestimate / published at the ends of each assumption's range (one at a time):")
    for assumption, values in RANGES.items():
        cells = [f"{r['name']} {r['sensitivity'][assumption]['ratio'][0]:.2f}-{r['sensitivity'][assumption]['ratio'][1]:.2f}"
                 for r in rows]
        print(f"  {assumption} {values[0]:g}..{values[1]:g}: " + "; ".join(cells))
    if args.json:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True).stdout.strip()
        Path(args.json).write_text(json.dumps({"commit": commit, "load": [load_before, load_after], "rows": rows},
                                              indent=2) + "\n")


if __name__ == "__main__":
    main()
