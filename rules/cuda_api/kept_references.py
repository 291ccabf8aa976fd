"""The ``torch.cuda`` references NP201 (``api_calls.py``) keeps instead of renaming, and what it says
about each: a compute-capability read or a test guarding one (``capability.py`` decides which), and a
``torch.cuda.is_available()`` test that guards CUDA-only code (NP720's analysis, ``cuda_only_guards``)
or, on the accelerator target, a ``torch.cuda`` API with no ``torch.accelerator`` spelling (it stays
``torch.cuda``, which raises where the renamed test is True)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.cuda_api.tables import TORCH_CUDA_API
from neuron_port.rules.helpers.ranks_guards import nodes_in, regions_where
from neuron_port.rules.no_port.cuda_only_guards import cuda_only_guards, is_cuda_availability_test

# one reference NP201 collected: (node, qualified name, key in TORCH_CUDA_API)
Reference = tuple[cst.BaseExpression, str, str]


def capability_guard_message(key: str, read: str) -> str:
    """An availability test kept because it guards the capability read ``read``."""
    return (
        f"`torch.cuda.{key}()` is kept: it guards `{read}`, a compute-capability read with no Trainium "
        "equivalent"
    )


def capability_properties_message(key: str, attribute: str) -> str:
    """``get_device_properties(...)`` kept because it is read for ``.attribute``."""
    return (
        f"`torch.cuda.{key}(...)` is read for `.{attribute}`: not renamed (torch.neuron's has only `name` and "
        "`total_memory`)"
    )


def availability_guard_message(call: str, what: str) -> str:
    """An availability test kept because it guards ``what`` (``call``), code that cannot run on Trainium."""
    return (
        f"`torch.cuda.is_available()` is kept: it guards {what} (`{call}`), CUDA-only"
    )


def kept_argument_message(key: str) -> str:
    """A ``torch.cuda`` reference inside the arguments of a ``torch.cuda`` call that stays as it is."""
    return (f"`torch.cuda.{key}` is kept: it is an argument of a `torch.cuda` call that stays CUDA's (no "
            "Trainium equivalent), and a call is rewritten whole or not at all")


class AvailabilityGuards(dict):
    """The ``is_available`` references that guard CUDA-only code: node -> (the guarded call, what it is,
    effort); ``unsafe``: those whose rename would change whether code not known to run on Trainium runs
    (node -> that code)."""

    unsafe: dict


def availability_guards(context, module: cst.Module, references: list[Reference]) -> AvailabilityGuards:
    guards = cuda_only_guards(context, module)
    guarding = AvailabilityGuards(guards.kept_availability)
    if context.target == "accelerator":
        guarding.update(guarding_unrenamed(module, references))
    guarding.unsafe = guards.unsafe_availability
    return guarding


def guarding_unrenamed(module: cst.Module, references: list[Reference]) -> dict[cst.CSTNode, tuple[str, str, str]]:
    """Accelerator target: the is_available references whose guarded code keeps a torch.cuda API that has
    no torch.accelerator spelling (it stays torch.cuda, which raises where the renamed test is True)."""
    left = {node: key for node, _, key in references if TORCH_CUDA_API[key].accelerator is None}
    kept: dict[cst.CSTNode, tuple[str, str, str]] = {}
    for atom, region in regions_where(module, lambda n: True if is_cuda_availability_test(n) else None) \
            if left else ():
        found = next((left[n] for n in nodes_in(region) if n in left), None)
        if found is not None:
            what = "a CUDA API with no torch.accelerator spelling"
            kept.setdefault(atom.func, (f"torch.cuda.{found}", what, "low"))
    return kept
