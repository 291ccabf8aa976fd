"""Shape-only benchmark (issue 23): one training step of big decoders under
``neuron-port check --shape-only``, and the per-op cost of the shape-only mode.

Each training workload runs ``neuron-port check project --shape-only -o REPORT -- python train.py ...``
(project/train.py, project/models.py) as a child process; the runner measures its wall seconds and the
peak RSS of the whole process tree (the sum of VmRSS over check and its descendants, polled every
0.1 s from /proc; also ``ru_maxrss`` of wait4, the largest single process), reads the per-phase times the
script prints and, from the JSON report, the op calls and the peak device memory
(``estimate.work.peak_bytes`` = the events file's ``peak_allocated_bytes``). The 1-minute load average
is recorded before and after each run. Workloads run one at a time.

    .venv/bin/python bench/shape_only/run.py --size small            # everything, reduced sizes
    .venv/bin/python bench/shape_only/run.py --size full --json bench/shape_only/results/full.json
    .venv/bin/python bench/shape_only/run.py --only gpt2_124m --only op_cost

"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROJECT = HERE / "project"
VENV_BIN = Path(sys.executable).parent
NEURON_PORT = VENV_BIN / "neuron-port"
GB = 1e9

GPT2_124M = ["--model", "gpt2", "--layers", "12", "--d", "768", "--heads", "12", "--vocab", "50257", "--seq", "1024"]
GPT2_1_5B = ["--model", "gpt2", "--layers", "48", "--d", "1600", "--heads", "25", "--vocab", "50257", "--seq", "1024"]
LLAMA3_8B = ["--model", "llama", "--layers", "32", "--d", "4096", "--heads", "32", "--kv-heads", "8", "--ffn", "14336",
             "--vocab", "128256", "--seq", "8192"]
LLAMA3_8B_8L = LLAMA3_8B[:LLAMA3_8B.index("--layers") + 1] + ["8"] + LLAMA3_8B[LLAMA3_8B.index("--layers") + 2:]
LLAMA3_405B = ["--model", "llama", "--layers", "126", "--d", "16384", "--heads", "128", "--kv-heads", "8", "--ffn",
               "53248", "--vocab", "128256", "--seq", "8192"]
SMALL_GPT = ["--model", "gpt2", "--layers", "2", "--d", "128", "--heads", "4", "--vocab", "1000", "--seq", "128"]
SMALL_LLAMA = ["--model", "llama", "--layers", "2", "--d", "128", "--heads", "4", "--kv-heads", "2", "--ffn", "352",
               "--vocab", "1000", "--seq", "256"]

# name -> (full args, small args, goal wall s, goal peak tree RSS GB, what)
WORKLOADS = {
    "gpt2_124m": (GPT2_124M + ["--batch", "64", "--build", "cpu"], SMALL_GPT + ["--batch", "4", "--build", "cpu"],
                  60, 1.5, "GPT-2 124M, batch 64, seq 1024, built on CPU then .to('neuron')"),
    "gpt2_124m_device": (GPT2_124M + ["--batch", "64", "--build", "device"],
                         SMALL_GPT + ["--batch", "4", "--build", "device"],
                         60, 1.5, "same, built under `with torch.device('neuron')`"),
    "gpt2_124m_accum4": (GPT2_124M + ["--batch", "16", "--micro-steps", "4", "--build", "cpu"],
                         SMALL_GPT + ["--batch", "2", "--micro-steps", "4", "--build", "cpu"],
                         None, None, "GPT-2 124M, 4 micro-steps of batch 16 (gradient accumulation), one step"),
    "gpt2_1.5b": (GPT2_1_5B + ["--batch", "16", "--build", "cpu"], SMALL_GPT + ["--batch", "4", "--build", "cpu"],
                  90, None, "GPT-2 1.5B, batch 16, seq 1024, one micro-step, built on CPU then .to('neuron')"),
    "gpt2_1.5b_device": (GPT2_1_5B + ["--batch", "16", "--build", "device"],
                         SMALL_GPT + ["--batch", "4", "--build", "device"],
                         90, None, "same, built under `with torch.device('neuron')`"),
    "llama3_8b": (LLAMA3_8B + ["--batch", "2", "--build", "device", "--gqa", "sdpa"],
                  SMALL_LLAMA + ["--batch", "2", "--build", "device", "--gqa", "sdpa"],
                  180, 2.0, "Llama-3-8B shape, batch 2, seq 8192, GQA via SDPA enable_gqa, built on the device, "
                            "single process (no FSDP world)"),
    "llama3_8b_repeat": (LLAMA3_8B + ["--batch", "2", "--build", "device", "--gqa", "repeat"],
                         SMALL_LLAMA + ["--batch", "2", "--build", "device", "--gqa", "repeat"],
                         180, 2.0, "same, GQA via repeat_interleave of the KV heads"),
    "llama3_8b_fsdp64": (LLAMA3_8B + ["--batch", "2", "--build", "device", "--gqa", "sdpa", "--fsdp"],
                         SMALL_LLAMA + ["--batch", "2", "--build", "device", "--gqa", "sdpa", "--fsdp"],
                         180, 2.0, "Llama-3-8B shape, batch 2, seq 8192, FSDP2 (fully_shard per block) over a "
                                   "64-rank fake world (check --world-size 64): rank 0 of 64"),
    # issue 36 item 3: the fake world's cost grows with the model, not the world (rank 0 makes only its pieces)
    "llama8l_fsdp8": (LLAMA3_8B_8L + ["--batch", "2", "--build", "device", "--gqa", "sdpa", "--fsdp"],
                      SMALL_LLAMA + ["--batch", "2", "--build", "device", "--gqa", "sdpa", "--fsdp"],
                      None, None, "8-layer Llama-3-8B-width decoder, batch 2, seq 8192, FSDP2 over an 8-rank fake "
                                  "world: rank 0 of 8"),
    "llama8l_fsdp4096": (LLAMA3_8B_8L + ["--batch", "2", "--build", "device", "--gqa", "sdpa", "--fsdp"],
                         SMALL_LLAMA + ["--batch", "2", "--build", "device", "--gqa", "sdpa", "--fsdp"],
                         None, None, "same model as rank 0 of 4,096 (goal: its shard phase <= 2x llama8l_fsdp8's)"),
    "llama405b_fsdp1024": (LLAMA3_405B + ["--batch", "1", "--build", "device", "--gqa", "sdpa", "--fsdp"],
                           SMALL_LLAMA + ["--batch", "1", "--build", "device", "--gqa", "sdpa", "--fsdp"],
                           180, 2.0, "Llama-3.1-405B shape (126 x 16384, 128/8 heads, FFN 53248, vocab 128256), "
                                     "batch 1, seq 8192, FSDP2 per block, as rank 0 of a 1,024-rank fake world"),
    "llama_small_cpu": (SMALL_LLAMA + ["--batch", "2", "--build", "cpu", "--gqa", "sdpa"],
                        SMALL_LLAMA + ["--batch", "2", "--build", "cpu", "--gqa", "sdpa"],
                        None, None, "reduced Llama built on CPU then .to('neuron') (the 8B fp32 model, 32 GB, "
                                    "cannot be built on this 23 GB machine's CPU)"),
}
CHECK_OPTIONS = {"llama3_8b_fsdp64": ["--world-size", "64"],  # check's own options per workload
                 "llama8l_fsdp8": ["--world-size", "8"], "llama8l_fsdp4096": ["--world-size", "4096"],
                 "llama405b_fsdp1024": ["--world-size", "1024"]}
# workload -> (the same model at a small world, the most its shard phase may take, as a multiple of that one's)
SHARD_SCALING = {"llama8l_fsdp4096": ("llama8l_fsdp8", 2.0)}
OP_COST_MODES = ("shape_only", "fake", "meta", "simulator", "cpu")
OP_COST_CASES = ("add16", "mm1024", "view", "linear_bwd", "add_new_sig")
OP_GOAL_US = 50.0


# ---------------------------------------------------------------- process tree RSS

def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out.extend(int(c) for c in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss(root: int) -> int:
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _rss(pid)
        todo.extend(_children(pid))
    return total


class Poller(threading.Thread):
    def __init__(self, pid: int, interval: float = 0.1):
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak, self.done = pid, interval, 0, threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            self.done.wait(self.interval)


def run_measured(argv: list[str], cwd: Path, env: dict, timeout: float) -> dict:
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=err)
        poller = Poller(proc.pid)
        poller.start()
        deadline = t0 + timeout
        status, ru = None, None
        while status is None:
            pid, st, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status, ru = st, usage
                break
            if time.perf_counter() > deadline:
                proc.kill()
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        poller.done.set()
        poller.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return {"wall_s": round(wall, 2), "exit_code": proc.returncode, "peak_tree_rss_bytes": poller.peak,
            "max_single_rss_bytes": ru.ru_maxrss * 1024, "cpu_s": round(ru.ru_utime + ru.ru_stime, 2),
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
            "stdout": stdout, "stderr": stderr}


# ---------------------------------------------------------------- workloads

def run_training(name: str, size: str, timeout: float) -> dict:
    full, small, goal_wall, goal_rss, what = WORKLOADS[name]
    args = full if size == "full" else small
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_PORT_")}
    with tempfile.TemporaryDirectory(prefix="so-bench-") as tmp:
        report_path = Path(tmp) / "report.json"
        argv = [str(NEURON_PORT), "check", str(PROJECT), "--shape-only", *CHECK_OPTIONS.get(name, []), "--exit-zero",
                "--timeout", str(int(timeout)), "-o", str(report_path), "--", "python", "train.py", *args]
        r = run_measured(argv, ROOT, env, timeout + 120)
        report = json.loads(report_path.read_text()) if report_path.exists() else None
    phases: dict[str, float] = {}
    for m in re.finditer(r"^phase (\w+) ([0-9.]+)$", r["stdout"], re.M):
        phases[m.group(1)] = round(phases.get(m.group(1), 0.0) + float(m.group(2)), 3)
    grab = lambda pat: (m.group(1) if (m := re.search(pat, r["stdout"], re.M)) else None)  # noqa: E731
    res = {"workload": name, "what": what, "size": size, "args": args,
           "goal_wall_s": goal_wall if size == "full" else None, "goal_rss_gb": goal_rss if size == "full" else None,
           **{k: v for k, v in r.items() if k not in ("stdout", "stderr")}, "phases": phases,
           "parameters": int(p) if (p := grab(r"^parameters (\d+)$")) else None,
           "loss_line": grab(r"^(step \d+ loss .*)$"),
           "max_memory_allocated": int(p) if (p := grab(r"^max_memory_allocated (\d+)$")) else None}
    if report is not None:
        rt, est = report.get("runtime") or {}, report.get("estimate") or {}
        res["op_calls"] = (rt.get("ops") or {}).get("calls")
        res["unique_signatures"] = (rt.get("ops") or {}).get("unique_signatures")
        res["peak_allocated_bytes"] = ((est.get("work") or {}).get("peak_bytes"))
        st = rt.get("status") or {}
        res["command_exit_code"] = st.get("exit_code")
        res["command_duration_s"] = st.get("duration")
        if st.get("exit_code"):
            res["stderr_tail"] = st.get("stderr_tail")
        res["failures"] = rt.get("failures")
    ok = r["exit_code"] == 0 and res.get("command_exit_code") == 0 and res["loss_line"] is not None
    res["ok"] = ok
    if not ok:
        res["stdout_tail"] = r["stdout"].splitlines()[-40:]
        res["stderr_tail_check"] = r["stderr"].splitlines()[-40:]
    res["goal_met"] = None
    if ok and goal_wall is not None and size == "full":
        res["goal_met"] = r["wall_s"] <= goal_wall and (goal_rss is None or r["peak_tree_rss_bytes"] <= goal_rss * GB)
    return res


def _events_counts(events_dir: Path) -> dict:
    counts: dict = {"op_calls": 0, "explicit": 0, "ops": {}}
    for f in events_dir.glob("neuron-events-*.jsonl"):
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            if rec.get("kind") == "summary":
                counts["op_calls"] += rec["op_calls"]
            elif rec.get("kind") == "explicit_ops":
                counts["explicit"] += sum(rec["counts"].values())
            elif rec.get("kind") == "op":
                counts["ops"][rec["op"]] = counts["ops"].get(rec["op"], 0) + rec["calls"]
    return counts


def run_op_cost(size: str) -> dict:
    n, n_new, repeats = (20000, 2000, 5) if size == "full" else (2000, 200, 2)
    base = [sys.executable, str(HERE / "op_cost.py"), "--n", str(n), "--n-new", str(n_new), "--repeats", str(repeats)]
    res: dict = {"workload": "op_cost", "size": size, "n": n, "n_new": n_new, "repeats": repeats,
                 "load_before": [round(x, 2) for x in os.getloadavg()], "modes": {}, "counted": {}}
    for mode in OP_COST_MODES:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_PORT_")}
        if mode in ("shape_only", "simulator"):
            env["NEURON_PORT_SIMULATE"] = "1"
        if mode == "shape_only":
            env["NEURON_PORT_SHAPE_ONLY"] = "1"
        out = subprocess.run(base + ["--mode", mode], env=env, capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            res["modes"][mode] = {"error": out.stderr.splitlines()[-5:]}
            continue
        res["modes"][mode] = json.loads(out.stdout.splitlines()[-1])
    # op counts per iteration from the events file: one shape-only process per case, minus the set-up
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_PORT_")}
    env.update(NEURON_PORT_SIMULATE="1", NEURON_PORT_SHAPE_ONLY="1")
    per_case = {}
    for case in ("none",) + OP_COST_CASES:
        with tempfile.TemporaryDirectory(prefix="so-opcost-") as tmp:
            env["NEURON_PORT_EVENTS_DIR"] = tmp
            out = subprocess.run(base + ["--mode", "shape_only", "--case", case], env=env, capture_output=True,
                                 text=True, cwd=ROOT)
            if out.returncode:
                per_case[case] = {"error": out.stderr.splitlines()[-5:]}
                continue
            per_case[case] = {"events": _events_counts(Path(tmp)), "run": json.loads(out.stdout.splitlines()[-1])}
    setup = per_case.get("none", {}).get("events")
    for case in OP_COST_CASES:
        pc = per_case.get(case, {})
        if setup is None or "events" not in pc:
            res["counted"][case] = pc
            continue
        ev = pc["events"]
        accounted = ev["op_calls"] - setup["op_calls"]
        explicit = ev["explicit"] - setup["explicit"]
        iters = pc["run"]["loop_calls"][case]
        sec = pc["run"]["seconds_per_call"].get(case)
        res["counted"][case] = {
            "iterations": iters, "accounted_calls": accounted, "explicit_calls": explicit,
            "accounted_per_iteration": round(accounted / iters, 3),
            "explicit_per_iteration": round(explicit / iters, 3),
            "seconds_per_iteration": sec,
            "seconds_per_accounted_call": (sec / (accounted / iters)) if sec and accounted else None,
        }
    res["load_after"] = [round(x, 2) for x in os.getloadavg()]
    so, fake = res["modes"].get("shape_only", {}), res["modes"].get("fake", {})
    so_add = (so.get("seconds_per_call") or {}).get("add16")
    fake_add = (fake.get("seconds_per_call") or {}).get("add16")
    res["add16_us"] = so_add * 1e6 if so_add else None
    res["add16_recording_us"] = (so_add - fake_add) * 1e6 if so_add and fake_add else None
    res["goal_met"] = res["add16_us"] is not None and res["add16_us"] <= OP_GOAL_US
    return res


# ---------------------------------------------------------------- table

def _gb(b):
    return f"{b / GB:.2f}" if b else "-"


def table(results: list[dict]) -> str:
    rows = ["| workload | size | wall s | goal s | peak tree RSS GB | goal GB | largest process RSS GB | op calls | "
            "device peak GB | phases (s) | load before -> after | goal |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for r in results:
        if r["workload"] == "op_cost":
            continue
        phases = ", ".join(f"{k} {v:.1f}" for k, v in r.get("phases", {}).items())
        goal = "-" if r.get("goal_met") is None else ("met" if r["goal_met"] else "**missed**")
        if not r.get("ok"):
            goal = "**failed**"
        rows.append(f"| {r['workload']} | {r['size']} | {r['wall_s']:.1f} | "
                    f"{r.get('goal_wall_s') or '-'} | {_gb(r['peak_tree_rss_bytes'])} | {r.get('goal_rss_gb') or '-'} | "
                    f"{_gb(r['max_single_rss_bytes'])} | {r.get('op_calls') or '-'} | "
                    f"{_gb(r.get('peak_allocated_bytes'))} | {phases} | {r['load_before'][0]} -> {r['load_after'][0]} "
                    f"| {goal} |")
    for r in results:
        if r["workload"] != "op_cost":
            continue
        rows += ["", "| case | " + " | ".join(f"{m} us" for m in OP_COST_MODES) +
                 " | accounted calls / iter | shape-only us / accounted call |",
                 "|---|" + "---:|" * (len(OP_COST_MODES) + 2)]
        for case in OP_COST_CASES:
            cells = []
            for m in OP_COST_MODES:
                v = ((r["modes"].get(m) or {}).get("seconds_per_call") or {}).get(case)
                cells.append(f"{v * 1e6:.1f}" if v is not None else "-")
            c = r["counted"].get(case) or {}
            per = c.get("seconds_per_accounted_call")
            rows.append(f"| {case} | " + " | ".join(cells) + f" | {c.get('accounted_per_iteration', '-')} | "
                        f"{per * 1e6:.1f} |" if per else f"| {case} | " + " | ".join(cells) +
                        f" | {c.get('accounted_per_iteration', '-')} | - |")
        if r["add16_us"] is None or r["add16_recording_us"] is None:
            rows.append(f"\nop_cost incomplete: {[m for m, v in r['modes'].items() if 'error' in v]} failed")
        else:
            rows.append(f"\nadd16 in shape-only mode: {r['add16_us']:.1f} us/op (goal <= {OP_GOAL_US:.0f}: "
                        f"{'met' if r['goal_met'] else 'missed'}); of which over plain FakeTensorMode: "
                        f"{r['add16_recording_us']:.1f} us; load {r['load_before'][0]} -> {r['load_after'][0]}")
    return "\n".join(rows)


def shard_scaling(results: list[dict]) -> list[dict]:
    """The shard phase of a big fake world against the same model's at a small one (SHARD_SCALING)."""
    by_name = {r["workload"]: r for r in results}
    rows = []
    for name, (base, goal) in SHARD_SCALING.items():
        big, small = by_name.get(name), by_name.get(base)
        if not big or not small or "shard" not in big.get("phases", {}) or "shard" not in small.get("phases", {}):
            continue
        ratio = big["phases"]["shard"] / max(small["phases"]["shard"], 1e-9)
        rows.append({"workload": name, "baseline": base, "shard_s": big["phases"]["shard"],
                     "baseline_shard_s": small["phases"]["shard"], "ratio": round(ratio, 3), "goal_ratio": goal,
                     "goal_met": ratio <= goal})
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", choices=("small", "full"), default="small")
    p.add_argument("--only", action="append", choices=(*WORKLOADS, "op_cost"))
    p.add_argument("--timeout", type=float, default=1200)
    p.add_argument("--json", type=Path, help="write the results here")
    a = p.parse_args()
    names = a.only or [*WORKLOADS, "op_cost"]
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": platform.platform(), "cpus": os.cpu_count(),
            "python": platform.python_version()}
    try:
        import torch
        meta["torch"] = torch.__version__
    except ImportError:
        pass
    meta["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                    text=True).stdout.strip()
    digest = hashlib.sha256()  # which simulator ran (the working tree may differ from the commit)
    for f in sorted((ROOT / "neuron_backend").rglob("*")):
        if f.suffix in (".py", ".cpp", ".h", ".toml") and "__pycache__" not in f.parts:
            digest.update(str(f.relative_to(ROOT)).encode() + f.read_bytes())
    meta["neuron_backend_sha256"] = digest.hexdigest()[:12]
    results = []
    for name in names:
        print(f"== {name} ({a.size}) load {os.getloadavg()[0]:.2f}", flush=True)
        r = run_op_cost(a.size) if name == "op_cost" else run_training(name, a.size, a.timeout)
        results.append(r)
        if name != "op_cost":
            print(f"   wall {r['wall_s']} s, tree RSS {_gb(r['peak_tree_rss_bytes'])} GB, ok {r['ok']}, "
                  f"phases {r['phases']}", flush=True)
            if not r["ok"]:
                print("   " + "\n   ".join((r.get("stderr_tail") or r.get("stderr_tail_check") or [])[-8:]), flush=True)
        if a.json:
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    scaling = shard_scaling(results)
    if scaling and a.json:
        a.json.write_text(json.dumps({"meta": meta, "results": results, "shard_scaling": scaling}, indent=1) + "\n")
    print(table(results))
    for row in scaling:
        print(f"\nshard phase {row['workload']} {row['shard_s']:.3f} s vs {row['baseline']} {row['baseline_shard_s']:.3f} s:"
              f" {row['ratio']:.2f}x (goal <= {row['goal_ratio']}x: {'met' if row['goal_met'] else 'missed'})")


if __name__ == "__main__":
    main()
