"""NP913: the command succeeded with no op on the neuron device (rules/runtime/no_device_work.py).

Made after the static scan (session.py), since the line that chose the CPU is found with it: the call of a
framework without a Trainium accelerator that the run imported (NP610 / NP608 at a file the run imported),
a device choice with a safe fix pending (the CPU where CUDA is missing), else the first line of the command's
script that moves or creates the model; else the finding is about the project.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

from neuron_port.check.aggregate.command import NEXT_STEP
from neuron_port.check.aggregate.findings import project_finding, rule_message, runtime_finding
from neuron_port.check.events import ProcessEvents
from neuron_port.check.sites import UserSite
from neuron_port.results import FileResult, Finding

if TYPE_CHECKING:  # the section is built from the aggregators (check/runtime.py)
    from neuron_port.check.runtime import RuntimeSection

FRAMEWORK_NAMES = {"lightning": "Lightning", "pytorch_lightning": "Lightning", "lightning_fabric": "Lightning"}
FRAMEWORK_CALLS = ("NP610", "NP608")  # Lightning's Trainer / Fabric that do not choose the neuron device
DEVICE_FAMILY = "NP1"  # device placement: a "cuda" device string, a CUDA check (a ternary's test)
# a line that moves or creates the model or its tensors on a device (a regex: the run records no CPU op)
MODEL_LINE = re.compile(r"\.(?:to|cuda|cpu)\(|\bdevice\s*=(?!=)|\bmodel\s*=(?!=)|\bnn\.[A-Z]\w*\(")
MAX_SCANNED_BYTES = 1_000_000


def no_device_work_finding(runtime: "RuntimeSection", processes: Sequence[ProcessEvents], files: Iterable[FileResult],
                           imported: set[str], folder: Path, fixes_pending: bool) -> Optional[Finding]:
    """NP913, or None: the run failed (NP909), lost its records (NP912), or put work on the device.
    ``files``: the static scan's results; ``imported``: the user's files the run imported (as the report
    names them); ``fixes_pending``: the command ran the folder as it is (no --preview copy)."""
    if not runtime.status.succeeded or runtime.lost_records or runtime.ops.calls or runtime.compiles \
            or runtime.distributed:
        return None
    if not processes:  # the simulator loads with torch: no process imported it (a wrapper, a wrong command)
        return project_finding("NP913", rule_message(
            "NP913", what="no process of the command imported torch",
            next="give `check` the command that runs the model (`-- python train.py`)"), severity="warning")
    frameworks = sorted({FRAMEWORK_NAMES.get(name, name) for p in processes if p.summary
                         for name in p.summary.frameworks})
    # check writes nothing: a safe fix "applied" by its scan is one the run did not have
    ran = [f for f in (finding for result in files if not result.written for finding in result.findings)
           if f.path in imported]
    if frameworks:
        names = " and ".join(frameworks)
        call = next((f for f in ran if f.code in FRAMEWORK_CALLS), None)
        what = f"{names} (imported by the run) chose the CPU: it has no Trainium accelerator"
        step = ("pass a custom Accelerator for the `neuron` device (`accelerator=NeuronAccelerator()`) or port "
                "the loop to PyTorch or accelerate (NP610)")
        return _at(call, rule_message("NP913", what=what, next=step))
    if fixes_pending:
        choice = next((f for f in ran if f.code.startswith(DEVICE_FAMILY) and f.fix.applied), None)
        if choice is not None:
            what = "the device chosen here is the CPU where CUDA is missing, as on Trainium (a safe fix not applied yet)"
            return _at(choice, rule_message("NP913", what=what, next=NEXT_STEP))
    site = _model_line(runtime.status.command, imported, folder)
    what = "the model and its tensors stayed on the CPU" + (" (moved or created here)" if site else "")
    step = 'move them to the device: `model.to("neuron")`, tensors with `device="neuron"`'
    message = rule_message("NP913", what=what, next=step)
    return runtime_finding("NP913", message, site) if site else project_finding("NP913", message)


def _at(finding: Optional[Finding], message: str) -> Finding:
    if finding is None:
        return project_finding("NP913", message)
    site = UserSite(path=finding.path, line=finding.line, function=None, code="")
    return runtime_finding("NP913", message, site)


def _model_line(command: Sequence[str], imported: set[str], folder: Path) -> Optional[UserSite]:
    """The first line of the command's script (the first imported file the command names) that moves or
    creates the model on a device; None when the command names none or no line matches."""
    script = next((arg for arg in command if arg in imported), None)
    if script is None:
        return None
    path = folder / script
    try:
        if path.stat().st_size > MAX_SCANNED_BYTES:
            return None
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for number, line in enumerate(lines, 1):
        code = line.split("#", 1)[0]
        if MODEL_LINE.search(code):
            return UserSite(path=script, line=number, function=None, code=line.strip())
    return None
