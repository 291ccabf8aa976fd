"""One `check` run: the static scan of the folder, the user's command on the simulated device (in the
folder, or in a rewritten preview copy), the events it wrote, and one Report with both.

Without a preview, the static scan runs while the command starts up (it needs nothing from the run);
with one, the scan comes first because the copy is made from its rewrites. Temporary folders (events,
the preview copy) are removed whatever happens.
"""

from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Optional

from neuron_port.check.preview import make_preview
from neuron_port.check.runner import CommandError, OutputSink, build_command, run_command
from neuron_port.check.events import read_events
from neuron_port.check.runtime import build_runtime
from neuron_port.check.sites import SiteMapper
from neuron_port.config import Settings
from neuron_port.errors import UsageError
from neuron_port.report import Report
from neuron_port.rewrite.scan import scan_project
from neuron_port.rules.registry import is_selected


def shown_command(command: list[str], nproc: Optional[int]) -> list[str]:
    """The command as the report shows it: what the user typed, with torchrun spelled out for --nproc."""
    if not nproc:
        return command
    rest = command[1:] if command[0] in ("python", "python3") else command
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
    scratch = Path(tempfile.mkdtemp(prefix="neuron-port-check-"))
    rank_logs = scratch / "ranks"
    try:
        argv = build_command(command, nproc, cwd=path, rank_logs=rank_logs)
    except CommandError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise UsageError(str(exc)) from None

    static: list[Report] = []

    def scan() -> None:
        static.append(scan_project([path], settings, command="check", relative_to=path, use_cache=use_cache))

    try:
        tree = None
        cwd = path.resolve()
        if preview:  # the copy needs the rewrites first
            scan()
            rewritten = {Path(r.real_path): r.new_bytes for r in static[0].files if r.changed and r.new_bytes}
            tree = make_preview(path, rewritten, scratch / "tree")
            cwd = tree.root
        events_dir = scratch / "events"
        events_dir.mkdir()
        status = run_command(argv, cwd, events_dir, timeout, while_running=None if preview else scan,
                             on_tick=on_tick, on_output=on_output, rank_logs=rank_logs)
        status.command = shown_command(command, nproc)
        runtime, findings = build_runtime(read_events(events_dir), status, SiteMapper(path, tree))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not static:  # the command could not start, so the scan did not run alongside it
        scan()
    report = static[0]
    report.runtime = runtime
    report.runtime_findings = [f for f in findings if is_selected(f.code, settings.select, settings.ignore)]
    return report
