"""Run the real-project scoreboard (issue 34 item 5): for each project of projects.py, the original on the
CPU, then `neuron-port rewrite .` and `neuron-port check . -- <entry point>` on a second copy, as a new user
would; results in a JSON file and a markdown table.

    .venv/bin/python bench/projects/setup.py                            # once: sources + bench venv
    git worktree add --detach /tmp/np-bench HEAD                          # the neuron-port to measure
    nice -n 10 bench/projects/.work/venv/bin/python bench/projects/run.py --neuron-port /tmp/np-bench \
        [--only NAME ...] [--out DIR]

Run it with the bench venv's python (it has the projects' extras; `neuron-port` is run as
`<that python> -m neuron_port`). Per project, under RUNS/<name>/ (--runs, default
/tmp/neuron-port-bench-projects: outside this repository, so its .gitignore and configuration do not apply):
  orig/         the pinned source + synthetic data (+ patches/<patch> for the CPU run), run with cpu_cmd
  port/         the pinned source + the same data, `rewrite .` (default, safe fixes only), then `check`
  *.log         stdout+stderr of each step; rewrite.json (findings left), check.json (the check report),
  rewrite.diff  what the rewrite changed (read it: wrong safe edits are judged by hand)
Recorded: the original's exit status, the rewrite's edits and findings left, whether the rewritten project
trains under `check` with no edit, the losses of both runs and whether they are equal, the last error line
of a failed run. Whether a failure was caused by the rewrite, wrong safe edits and what is left by hand are
judged by hand from the logs and the diff, in judged.json (merged into results.md; `--table-only` redoes it).
`--shape-only --skip-orig --out DIR` runs `check --shape-only` instead: does the rewritten project run with
fake device tensors (its losses are placeholders)?
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
REPO_ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import data as data_writers  # noqa: E402
from projects import PROJECTS  # noqa: E402
from setup import source_dir  # noqa: E402

TAIL = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def python_cmd(cmd: tuple) -> list[str]:
    return [sys.executable if c == "python" else c for c in cmd]


def run(argv: list[str], cwd: Path, env: dict, log: Path, timeout: int) -> dict:
    start = time.monotonic()
    with open(log, "w") as out:
        out.write("$ " + " ".join(argv) + f"\n# cwd {cwd}\n")
        out.flush()
        try:
            proc = subprocess.run(["nice", "-n", "10", *argv], cwd=cwd, env=env, stdout=out,
                                  stderr=subprocess.STDOUT, timeout=timeout, stdin=subprocess.DEVNULL)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    return {"rc": rc, "seconds": round(time.monotonic() - start, 1)}


def last_error(log: Path) -> str:
    """The failure in a log: the check report's `failed:` line, else the last Python exception line."""
    lines = [line.rstrip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    for line in lines:
        m = re.search(r"[│|] failed: (.*?)\s*[│|]?$", line)
        if m:
            return m.group(1)[:300]
    for line in reversed(lines):
        if re.match(r"^(\[\w+\]:\[rank\d+\]: )?([A-Za-z_][\w.]*)?(Error|Exception|Exit|Interrupt)\b", line):
            return line[:300]
    return lines[-1][:300] if lines else ""


def read_losses(spec: str, log: Path, folder: Path) -> list[float] | None:
    if spec == "none":
        return None
    kind, _, arg = spec.partition(":")
    if kind == "stdout":
        text = log.read_text(errors="replace")
        return [float(m.group(1)) for m in re.finditer(arg, text)]
    if kind == "tensorboard":
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        values = []
        for path in sorted(glob.glob(str(folder / "**" / "events.out.tfevents.*"), recursive=True)):
            acc = EventAccumulator(path, size_guidance={"scalars": 0})
            acc.Reload()
            if arg in acc.Tags().get("scalars", []):
                values += [e.value for e in acc.Scalars(arg)]
        return values
    if kind == "csv":
        pattern, _, column = arg.rpartition(":")
        values = []
        for path in sorted(glob.glob(str(folder / pattern), recursive=True)):
            with open(path) as f:
                values += [float(row[column]) for row in csv.DictReader(f) if row.get(column)]
        return values
    raise SystemExit(f"run.py: unknown losses spec {spec!r}")


def compare(a: list[float] | None, b: list[float] | None) -> str:
    if a is None or b is None:
        return "n/a"
    if not a or not b:
        return "no losses"
    if len(a) != len(b):
        return f"different count ({len(a)} vs {len(b)})"
    worst = max(abs(x - y) / max(abs(x), 1e-8) for x, y in zip(a, b))
    if worst <= 1e-5:
        return "equal"
    if worst <= 1e-3:
        return f"close (max rel {worst:.1e})"
    return f"different (max rel {worst:.1e})"


def copy_project(src: Path, dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns(".bench-complete", ".bench-missing"))


def diff_stats(diff: str) -> dict:
    files = len(re.findall(r"^diff ", diff, flags=re.M))
    added = len(re.findall(r"^\+(?!\+\+)", diff, flags=re.M))
    removed = len(re.findall(r"^-(?!--)", diff, flags=re.M))
    return {"files": files, "lines_added": added, "lines_removed": removed}


def run_project(project, args) -> dict:
    src = source_dir(project.repo, project.commit, project.root)
    if not src.is_dir():
        raise SystemExit(f"run.py: {src} missing: run bench/projects/setup.py first")
    base = args.runs / project.name
    base.mkdir(parents=True, exist_ok=True)
    orig, port = base / "orig", base / "port"
    result = {"name": project.name, "repo": project.repo, "commit": project.commit, "kind": project.kind,
              "root": project.root, "nproc": project.nproc, "patch": project.patch}
    env = dict(os.environ)
    env.pop("NEURON_PORT_SIMULATE", None)
    env.update(project.env)  # "{root}" in a value: the copy's root, filled in per copy below
    # neuron-port (CLI and simulator) from --neuron-port, ahead of the editable install of the main venv
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(args.neuron_port), project.env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONHASHSEED"] = "0"
    cmd = python_cmd(project.check_cmd)
    cpu_cmd = python_cmd(project.cpu_cmd or project.check_cmd)
    result["check_command"] = " ".join(project.check_cmd)
    result["cpu_command"] = " ".join(project.cpu_cmd or project.check_cmd)

    # 1. the original, on the CPU
    copy_project(src, orig)
    getattr(data_writers, project.data)(orig)
    if project.patch:
        subprocess.run(["patch", "-p1", "-s", "-d", str(orig), "-i", str(HERE / "patches" / project.patch)],
                       check=True)
    if project.nproc > 1:
        cpu_cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={project.nproc}",
                   f"--master_port={free_port()}", *cpu_cmd[1:]]
    if not args.skip_orig:
        orig_env = {k: v.replace("{root}", str(orig)) for k, v in env.items()}
        result["orig"] = run(cpu_cmd, orig / project.cwd, orig_env, base / "orig.log", project.timeout)
        result["orig"]["error"] = last_error(base / "orig.log") if result["orig"]["rc"] != 0 else ""
        result["orig_losses"] = read_losses(project.losses, base / "orig.log", orig)

    # 2. a fresh copy: rewrite with the defaults, then check
    copy_project(src, port)
    getattr(data_writers, project.data)(port)
    before = base / "before"
    copy_project(src, before)
    getattr(data_writers, project.data)(before)
    env = {k: v.replace("{root}", str(port)) for k, v in env.items()}
    rw = run([sys.executable, "-m", "neuron_port", "rewrite", ".", "--output-format", "json", "--exit-zero",
              "--no-cache"], port, env, base / "rewrite.log", 1800)
    log_text = (base / "rewrite.log").read_text(errors="replace")
    json_start = log_text.find("\n[") if "\n[" in log_text else log_text.find("\n{")
    findings = []
    try:
        parsed = json.loads(log_text[json_start:].strip())
        findings = parsed if isinstance(parsed, list) else parsed.get("findings", parsed.get("results", []))
    except (ValueError, AttributeError):
        pass
    (base / "rewrite.json").write_text(json.dumps(findings, indent=1))
    diff = subprocess.run(["diff", "-ruN", "-x", "__pycache__", "-x", ".neuron-port-cache", "before", "port"],
                          cwd=base, capture_output=True, text=True).stdout
    (base / "rewrite.diff").write_text(diff)
    shutil.rmtree(before)
    left = [f for f in findings if isinstance(f, dict) and not (f.get("fix") or {}).get("applied")]
    codes: dict[str, int] = {}
    for f in left:
        codes[f["code"]] = codes.get(f["code"], 0) + 1
    result["rewrite"] = {"rc": rw["rc"], "seconds": rw["seconds"], **diff_stats(diff),
                         "fixes_applied": len(findings) - len(left), "findings_left": len(left),
                         "unsafe_fixes_left": sum(1 for f in left if (f.get("fix") or {}).get("available")),
                         "codes_left": dict(sorted(codes.items()))}
    check_argv = [sys.executable, "-m", "neuron_port", "check", ".", "--fail-on", "never", "--no-cache",
                  "-o", str(base / "check.json"), "--timeout", str(project.timeout)]
    if project.nproc > 1:
        check_argv += ["--nproc", str(project.nproc)]
    if args.shape_only:
        check_argv.append("--shape-only")
    check_argv += ["--", *project.check_cmd]
    if project.cwd:
        check_argv[check_argv.index(".")] = "."
    result["check"] = run(check_argv, port / project.cwd, env, base / "check.log", project.timeout + 300)
    result["check"]["error"] = last_error(base / "check.log") if result["check"]["rc"] != 0 else ""
    ops = {}
    try:
        report = json.loads((base / "check.json").read_text())
        ops = report.get("runtime", {}).get("ops", {}) or {}
        result["check"]["findings_left"] = report.get("summary", {}).get("findings_remaining")
    except (OSError, ValueError):
        pass
    result["check"]["neuron_op_calls"] = ops.get("calls")
    result["check"]["fallback_calls"] = ops.get("fallback_calls")
    # trains after the default rewrite: the command succeeded and its ops ran on the (simulated) neuron device
    result["trains_after_rewrite"] = result["check"]["rc"] == 0 and bool(ops.get("calls"))
    result["port_losses"] = read_losses(project.losses, base / "check.log", port)
    if "orig" in result:
        result["losses"] = compare(result.get("orig_losses"), result.get("port_losses"))
    return result


def table(results: list[dict]) -> str:
    """The scoreboard: measured columns from the results, judged ones from judged.json (by hand)."""
    judged_path = HERE / "judged.json"
    judged = json.loads(judged_path.read_text()) if judged_path.exists() else {}
    rows = ["| project | repo @ commit | kind | original on CPU | rewrite: files / fixes / left | "
            "trains after default rewrite | losses vs CPU | crash caused by rewrite | wrong safe edits (read) | "
            "still by hand | a finding names it |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        o = r.get("orig", {})
        orig = "ok" if o.get("rc") == 0 else f"failed ({o.get('rc')})" if o else "-"
        if r.get("patch"):
            orig += f" (patch {r['patch']})"
        if r.get("nproc", 1) > 1:
            orig += f", torchrun x{r['nproc']}"
        rw = r["rewrite"]
        if r["trains_after_rewrite"]:
            trains = "yes"
        elif r["check"]["rc"] == 0:
            trains = "no: ran on the CPU (no op on the neuron device)"
        else:
            trains = f"no: {r['check']['error'][:110]}"
        j = judged.get(r["name"], {})
        losses = r.get("losses", "-")
        if j.get("losses_note"):
            losses += f" ({j['losses_note']})"
        rows.append(f"| {r['name']} | {r['repo']}@{r['commit'][:10]} | {r['kind']} | {orig} | "
                    f"{rw['files']} / {rw.get('fixes_applied', '-')} / {rw['findings_left']} | {trains} | "
                    f"{losses} | {j.get('rewrite_crash', '?')} | {j.get('wrong_safe_edits', '?')} | "
                    f"{j.get('by_hand', '?')} | {j.get('named', '?')} |")
    return "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--skip-orig", action="store_true", help="do not run the originals")
    parser.add_argument("--table-only", action="store_true", help="only rewrite results.md from results.json")
    parser.add_argument("--shape-only", action="store_true",
                        help="`check --shape-only` (fake device tensors): whether the rewritten project runs "
                             "shape-only; its losses are placeholders, so compare them with nothing (use "
                             "--skip-orig and an --out of its own)")
    parser.add_argument("--neuron-port", type=Path, default=REPO_ROOT,
                        help="the neuron-port checkout to run (default: this one); a clean worktree of a commit "
                             "(`git worktree add --detach /tmp/np-bench HEAD`) keeps others' uncommitted edits "
                             "out of the numbers")
    parser.add_argument("--runs", type=Path, default=Path("/tmp/neuron-port-bench-projects"),
                        help="where the copies run; outside this repository, whose .gitignore and "
                             "[tool.neuron-port] table would otherwise apply to them")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.neuron_port = args.neuron_port.resolve()
    # neuron_port.rules installs from rules/ (package-dir); from a plain checkout on PYTHONPATH it is found
    # only through neuron_port/rules, else the main venv's editable finder would serve this checkout's rules
    alias = args.neuron_port / "neuron_port" / "rules"
    if args.neuron_port != REPO_ROOT and not alias.exists():
        alias.symlink_to(Path("..") / "rules")
    head = subprocess.run(["git", "-C", str(args.neuron_port), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(args.neuron_port), "status", "--porcelain", "--untracked-files=no",
                            "--", "neuron_port", "neuron_backend", "rules"], capture_output=True, text=True).stdout
    version = head[:12] + (" (with uncommitted changes)" if dirty.strip() else "")
    print(f"neuron-port: {args.neuron_port} at {version}", flush=True)
    results_path = args.out / "results.json"
    previous = {r["name"]: r for r in json.loads(results_path.read_text())} if results_path.exists() else {}
    if args.table_only:
        (args.out / "results.md").write_text(table([previous[p.name] for p in PROJECTS if p.name in previous]))
        return
    for project in PROJECTS:
        if args.only and project.name not in args.only:
            continue
        print(f"== {project.name}", flush=True)
        r = run_project(project, args)
        r["neuron_port"] = version
        r["shape_only"] = args.shape_only
        previous[project.name] = r
        print(f"   orig {r.get('orig', {}).get('rc')}  rewrite {r['rewrite']['files']} files, "
              f"{r['rewrite']['findings_left']} left  check {r['check']['rc']} ({r['check']['seconds']} s)  "
              f"losses {r.get('losses')}  {r['check']['error'][:120]}", flush=True)
        ordered = [previous[p.name] for p in PROJECTS if p.name in previous]
        results_path.write_text(json.dumps(ordered, indent=1) + "\n")
        (args.out / "results.md").write_text(table(ordered))


if __name__ == "__main__":
    main()
