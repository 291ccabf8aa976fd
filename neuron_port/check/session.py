"""One `check` run: the static scan of the folder, the user's command on the simulated device (in the
folder, or in a rewritten preview copy), the events it wrote, and one Report with both.

Without a preview, the static scan runs while the command starts up (it needs nothing from the run);
with one, the scan comes first because the copy is made from its rewrites. Temporary folders (events,
the preview copy, torchrun's logs) are removed whatever happens (a SIGKILLed run's by its watcher, or
by the next run: scratch.py). SIGINT and SIGTERM (interrupts.py) end
the command's processes; the report then covers what ran before, with ``runtime.status.interrupted``.
Static findings are then checked against the run (premises.py).
"""

from __future__ import annotations

import json
import shlex
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

from neuron_port.check.aggregate.command import not_ported_hint, with_next_step
from neuron_port.check.aggregate.no_device_work import no_device_work_finding
from neuron_port.check.interrupts import Interrupted, InterruptGuard
from neuron_port.check.preview import PreviewError, PreviewTree, make_preview, run_from_original
from neuron_port.check.runner import INTERPRETER, PYTHON_NAMES, CommandError, OutputSink, RunStatus, build_command, run_command
from neuron_port.check.estimate import build_estimate, estimate_options, withheld_reason
from neuron_port.check.events import lost_records, read_events, read_worker_exits
from neuron_port.check.premises import check_static_findings, imported_files
from neuron_port.check.runtime import build_runtime
from neuron_port.check.scratch import CHECK_PREFIX, remove_dead_runs_folders, scratch_folder
from neuron_port.check.sites import SiteMapper
from neuron_port.doctor import build_problem, torch_install_problem
from neuron_port.config import Settings
from neuron_port.errors import UsageError
from neuron_port.report import Report
from neuron_port.results import FileError
from neuron_port.rewrite.scan import scan_project
from neuron_port.rules.registry import is_selected


def shown_command(command: list[str], nproc: Optional[int]) -> list[str]:
    """The command as the report shows it: what the user typed, with torchrun spelled out for --nproc."""
    if not nproc:
        return command
    rest = command[1:] if INTERPRETER.fullmatch(Path(command[0]).name) else command
    return ["torchrun", f"--nproc_per_node={nproc}", *rest]


def run_check(
    path: Path,
    command: list[str],
    settings: Settings,
    *,
    nproc: Optional[int],
    timeout: float,
    preview: bool,
    use_cache: bool,
    shape_only: bool = False,
    size_rules: Optional[dict[str, int]] = None,
    world_size: Optional[int] = None,
    on_tick: Optional[Callable[[float], None]] = None,
    on_output: Optional[OutputSink] = None,
) -> Report:
    if not path.is_dir():
        raise UsageError(f"{path}: not a folder")
    if not command and settings.check_command:
        command = shlex.split(settings.check_command)
    if not command:
        raise UsageError("no command to run: give one after `--` (neuron-port check PATH -- python train.py) "
                         "or set check-command in [tool.neuron-port]")
    if nproc or command[0] in PYTHON_NAMES:  # the command runs this interpreter: it needs a CPU torch
        problem = torch_install_problem() or build_problem()
        if problem is not None:
            raise UsageError(f"cannot run the command on the simulated neuron device: {problem}")
    if size_rules and not shape_only:
        raise UsageError("--size-rule sets data-dependent sizes of a shape-only run: add --shape-only")
    if world_size and not shape_only:
        raise UsageError("--world-size runs one process as rank 0 of a fake world, which only a shape-only run can "
                         "(no values to communicate): add --shape-only, or use --nproc N for real processes")
    if shape_only and nproc:
        # collectives carry values (DDP compares the ranks' parameter counts): fake tensors have none
        raise UsageError("--shape-only runs one process: --nproc is not supported with it yet (a fake process "
                         "group moves no values, so ranks are not separate processes): use --world-size N for "
                         "rank 0 of an N-rank job, or a real run with --nproc")
    with InterruptGuard() as guard:
        return _run(path, command, settings, guard, nproc=nproc, timeout=timeout, preview=preview,
                    use_cache=use_cache, on_tick=on_tick, on_output=on_output,
                    mode_env=mode_environment(shape_only, size_rules or {}, world_size))


def mode_environment(shape_only: bool, size_rules: dict[str, int], world_size: Optional[int] = None) -> dict[str, str]:
    """The variables that make the simulator run shape-only (neuron_backend/shape_only/), and for a fake
    world the ones torchrun would give rank 0 (neuron_backend/distributed/fake_world.py)."""
    if not shape_only:
        return {}
    env = {"NEURON_PORT_SHAPE_ONLY": "1"}
    if size_rules:
        env["NEURON_PORT_SIZE_RULES"] = json.dumps(size_rules, sort_keys=True)
    if world_size:
        env.update({"NEURON_PORT_FAKE_WORLD": str(world_size), "RANK": "0", "WORLD_SIZE": str(world_size),
                    "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": "29500"})
    return env


def _run(path: Path, command: list[str], settings: Settings, guard: InterruptGuard, *, nproc: Optional[int],
         timeout: float, preview: bool, use_cache: bool, on_tick: Optional[Callable[[float], None]],
         on_output: Optional[OutputSink], mode_env: dict[str, str]) -> Report:
    static: list[Report] = []

    def scan() -> None:
        static.append(scan_project([path], settings, command="check", relative_to=path, use_cache=use_cache))

    shown = shown_command(command, nproc)
    scratch: Optional[Path] = None
    tree: Optional[PreviewTree] = None
    try:
        remove_dead_runs_folders()  # what a SIGKILLed run left (scratch.py)
        scratch = scratch_folder(CHECK_PREFIX)
        rank_logs, events_dir = scratch / "ranks", scratch / "events"
        notes: list[str] = []
        argv = build_command(command, nproc, cwd=path, rank_logs=rank_logs, notes=notes)
        if on_output is not None:  # said before the command's own output (the interpreter `--nproc` chose)
            for note in notes:
                on_output("stderr", f"neuron-port: {note}\n")
        cwd = path.resolve()
        if preview:  # the copy needs the rewrites first
            try:
                with guard.cuttable():
                    scan()
                    rewritten = {Path(r.real_path): r.new_bytes for r in static[0].files if r.changed and r.new_bytes}
                    tree = make_preview(path, rewritten, scratch / "tree")
            except Interrupted:
                return _interrupted_before_start(path, shown, guard, settings, static)
            cwd = tree.root
            argv = run_from_original(argv, path, tree)
        status = run_command(argv, cwd, events_dir, timeout, while_running=None if preview else scan,
                             on_tick=on_tick, on_output=on_output, rank_logs=rank_logs, guard=guard,
                             extra_env=mode_env or None)
        status.command = shown
        processes = read_events(events_dir, token=status.events_token)
        status.worker_exits = read_worker_exits(events_dir, token=status.events_token)
        status.processes = len(processes)  # with those that died before writing a snapshot
        lost = lost_records(events_dir, token=status.events_token)  # the folder removed, forked children's work
        runtime, findings = build_runtime(processes, status, SiteMapper(path, tree), lost)
        estimate = build_estimate(processes, estimate_options(settings.source))
        withheld = withheld_reason(processes, status.succeeded) if estimate is not None else None
        peak = (estimate.get("work") or {}).get("peak_bytes") if withheld and estimate else None
        runtime = replace(runtime, estimate=None if withheld else estimate, estimate_withheld=withheld,
                          device_peak_bytes=peak,
                          mode="shape_only" if mode_env else "real")
    except (CommandError, PreviewError) as exc:
        raise UsageError(str(exc)) from None
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    # a signal while the events were read: the run is complete, but check still exits as interrupted
    status.interrupted = status.interrupted or guard.interrupted
    if not static and not status.interrupted:  # the scan did not run alongside the command
        scan()
    report = static[0] if static else Report(command="check", target=settings.target)
    report.runtime = runtime
    if tree is None:  # the command ran the folder as it is: a failure of unported code says what to do first
        hint = not_ported_hint(status, runtime.failures, {r.path for r in report.files if r.changed})
        runtime = report.runtime = replace(runtime, next_step=hint)
        findings = [with_next_step(f, hint) for f in findings]
    imported = imported_files(processes, SiteMapper(path, tree))
    # a run that put nothing on the device: at the line that chose the CPU (the scan's findings show it)
    idle = no_device_work_finding(runtime, processes, report.files, imported, path, fixes_pending=tree is None)
    findings = [*findings, *([idle] if idle else [])]
    report.runtime_findings = [f for f in findings if is_selected(f.code, settings.select, settings.ignore)]
    # a static finding whose premise the run showed false: "not seen in this run", info
    check_static_findings(report, imported)
    if tree is not None:  # links the copy could only keep as they are
        report.errors.extend(FileError(rel, f"{what}: kept as it is in the --preview copy")
                             for rel, what in tree.problems)
    return report


def _interrupted_before_start(path: Path, shown: list[str], guard: InterruptGuard, settings: Settings,
                              static: list[Report]) -> Report:
    """The report when `check` was stopped before the command started: the scan, if it finished."""
    status = RunStatus(command=shown, interrupted=guard.interrupted)
    runtime, findings = build_runtime([], status, SiteMapper(path, None))
    report = static[0] if static else Report(command="check", target=settings.target)
    report.runtime = runtime
    report.runtime_findings = [f for f in findings if is_selected(f.code, settings.select, settings.ignore)]
    return report
