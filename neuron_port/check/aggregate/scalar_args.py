"""NP902's message for one line: a shape that kept changing, or a Python number in an eager signature
that kept changing (``shape_timeline.classify``'s ``scalar`` kind), with the argument named and the fix
for the op that took it.

A Python float passed to an op is part of its eager signature (the simulator hashes its value; TorchNeuron
lowers it into the compiled graph as a constant, so each new value is a new NEFF: /work/shared
torchneuron.md 2.1, "non-tensor argument values"). The optimizers pass them every step: a fused AdamW the
learning rate a scheduler changes (``lr`` of ``_fused_adamw_``), a foreach Adam without ``capturable`` its
bias corrections, which change with the step count (``_foreach_div_.ScalarList``)."""

from __future__ import annotations

from typing import Callable

from neuron_port.check.aggregate.findings import rule_message
from neuron_port.check.aggregate.shape_entries import ShapeVarianceEntry
from neuron_port.check.aggregate.shape_timeline import DimTimeline
from neuron_port.rules.registry import rule_by_code

__all__ = ["np902_message", "scalar_name"]

_ADAM = {6: "lr", 7: "beta1", 8: "beta2", 9: "weight_decay", 10: "eps"}
# The float arguments of the fused optimizer kernels, by position (native_functions.yaml, PyTorch 2.13).
FUSED_ARGS = {"_fused_adam_": _ADAM, "_fused_adamw_": _ADAM,
              "_fused_sgd_": {3: "weight_decay", 4: "momentum", 5: "lr", 6: "dampening"},
              "_fused_adagrad_": {4: "lr", 5: "lr_decay", 6: "weight_decay", 7: "eps"}}


def _base(op: str) -> str:
    return op.removeprefix("aten::").split(".")[0]


def scalar_name(op: str, timeline: DimTimeline) -> str:
    """``lr`` (of a fused optimizer), ``scalars`` (a foreach op's list), else ``arg N``."""
    arg, element, _ = timeline.position
    named = FUSED_ARGS.get(_base(op), {}).get(arg)
    if named:
        return f"`{named}`"
    if _base(op).startswith("_foreach_"):
        return "the per-parameter scalars" if element is not None else "the scalar"
    return f"arg {arg}" if element is None else f"arg {arg}[{element}]"


def _fix(op: str, name: str) -> str:
    base = _base(op)
    if base in FUSED_ARGS:
        return f"pass {name} as a tensor (`{name.strip('`')}=torch.tensor(...)`; schedulers update it in place)"
    if base.startswith("_foreach_"):
        return ("create the optimizer with `capturable=True` (the step count stays on the device), with a tensor "
                "`lr=torch.tensor(...)` if a scheduler changes it")
    return "pass the number as a 0-d tensor on the device"


def np902_message(entry: ShapeVarianceEntry, steps: Callable[[tuple[int, ...]], str], phase: str) -> str:
    """The finding's message for ``entry`` (a ``varying`` or ``scalar`` shape-variance entry)."""
    dim = entry.varying[0]
    in_step = dim.in_step()
    within = f" ({in_step[1]} new values inside step {in_step[0]})" if in_step else ""
    if entry.kind != "scalar":
        return rule_message("NP902", op=entry.op, dim=dim.describe(), steps=steps(dim.late_steps) + within,
                            n=entry.signatures, late=entry.after_warmup, buckets=list(entry.suggested_buckets),
                            phase=phase)
    name = scalar_name(entry.op, dim)
    return rule_by_code("NP902").SCALAR_MESSAGE.format(
        op=entry.op, name=name, phase=phase, steps=steps(dim.late_steps) + within, dim=dim.describe(),
        n=entry.signatures, late=entry.after_warmup, fix=_fix(entry.op, name))
