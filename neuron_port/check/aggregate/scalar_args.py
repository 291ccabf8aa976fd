"""NP902's message for one line: a shape that kept changing, or a number argument of an eager op that kept
changing (``shape_timeline.classify``'s ``scalar`` kind), with the argument named and the fix.

Which numbers can do that: TorchNeuron's eager kernels lift a Python int or float argument to a 0-d tensor
input and key the NEFF cache on its type only (torch_neuronx/kernels/base.py:146, get_cache_key: "For
scalars, include only type (not value). Values are runtime parameters, not compile-time constants";
python_ops/processors/argument_processor.py:106-109; docs/sources/scalar-arguments.md), so a scheduled
lr or Adam's bias corrections reuse one NEFF and the simulator does not see them change. The arguments an
op's registration declares static are compiled in by value (``rules/op_policy.toml`` [static_scalars]):
those are the ones this message is about, e.g. ``alpha`` of ``_foreach_add_.List``, which
``torch.optim.SGD`` passes ``-lr`` every step."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable

from neuron_port.check.aggregate.findings import rule_message
from neuron_port.check.aggregate.shape_entries import ShapeVarianceEntry
from neuron_port.check.aggregate.shape_timeline import DimTimeline
from neuron_port.rules.registry import rule_by_code

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["np902_message", "scalar_name", "static_args"]


def _base(op: str) -> str:
    return op.removeprefix("aten::").split(".")[0]


@lru_cache(maxsize=1)
def _static_table() -> dict[str, tuple[str, ...]]:
    import neuron_port.rules as rules

    with open(Path(rules.__file__).parent / "op_policy.toml", "rb") as f:
        entries = tomllib.load(f).get("static_scalars", {}).get("args", [])
    table: dict[str, list[str]] = {}
    for entry in entries:
        op, _, arg = entry.partition(":")
        table.setdefault(op, []).append(arg)
    return {op: tuple(args) for op, args in table.items()}


def static_args(op: str) -> tuple[str, ...]:
    """The number arguments of ``op`` (``aten::add_.Tensor``) that TorchNeuron compiles in by value."""
    name = op.removeprefix("aten::")
    table = _static_table()
    return table.get(name) or table.get(_base(op)) or ()


def scalar_name(op: str, timeline: DimTimeline) -> str:
    """The static argument's name when the op has one (``alpha``), else ``arg N``."""
    arg, element, _ = timeline.position
    named = static_args(op)
    if len(named) == 1:
        return f"`{named[0]}`"
    return f"arg {arg}" if element is None else f"arg {arg}[{element}]"


def _fix(op: str, name: str) -> str:
    base = _base(op)
    if base in ("add", "add_", "sub", "sub_", "_foreach_add", "_foreach_add_", "_foreach_sub", "_foreach_sub_") \
            and name == "`alpha`":
        example = ("`torch._foreach_add_(params, torch._foreach_mul(grads, -lr))`" if base.startswith("_foreach")
                   else "`p.add_(g * -lr)`")
        return (f"multiply the tensor by the number instead of passing it as {name} ({example}: a number in a "
                "tensor position is a runtime input), or keep it fixed")
    return "pass the number in a tensor position (a runtime input), or keep it fixed"


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
