"""The ``torch.cuda`` references NP201 (``api_calls.py``) keeps instead of renaming, and what it says
about each: a compute-capability read or a test guarding one (``capability.py`` decides which), and a
``torch.cuda.is_available()`` test that guards CUDA-only code (NP720's analysis, ``cuda_only_guards``)
or, on the accelerator target, a ``torch.cuda`` API with no ``torch.accelerator`` spelling (it stays
``torch.cuda``, which raises where the renamed test is True)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.cuda_api.tables import TORCH_CUDA_API
from neuron_port.rules.helpers.ranks_guards import nodes_in, regions_where
from neuron_port.rules.no_port.cuda_only_branches import cuda_only_guards, is_cuda_availability_test

# one reference NP201 collected: (node, qualified name, key in TORCH_CUDA_API)
Reference = tuple[cst.BaseExpression, str, str]


def capability_guard_message(key: str, read: str) -> str:
    """An availability test kept because it guards the capability read ``read``."""
    return (
        f"`torch.cuda.{key}()` is kept: it guards `{read}`, a compute-capability read "
        "that has no Trainium equivalent, so on Trainium this test is False and the CUDA-only check is "
        "skipped; decide what the check is for (bf16 is always supported; flash-attn, TF32 and FP8 "
        "are not) and rewrite it, then this test can become torch.neuron.is_available()"
    )


def capability_properties_message(key: str, attribute: str) -> str:
    """``get_device_properties(...)`` kept because it is read for ``.attribute``."""
    return (
        f"`torch.cuda.{key}(...)` is read for `.{attribute}`, which "
        "torch.neuron.get_device_properties does not have (only `name` and `total_memory`): not "
        "renamed; there is no compute capability on Trainium, branch on the feature instead (bf16 is "
        "always supported; flash-attn, TF32 and FP8 are not)"
    )


def availability_guard_message(call: str, what: str) -> str:
    """An availability test kept because it guards ``what`` (``call``), code that cannot run on Trainium."""
    return (
        f"`torch.cuda.is_available()` is kept: it guards {what} (`{call}`), which cannot run on "
        "Trainium, so there the test stays False and that code is skipped, as before; "
        "port it, then this test can become torch.neuron.is_available()"
    )


def availability_guards(context, module: cst.Module,
                        references: list[Reference]) -> dict[cst.CSTNode, tuple[str, str, str]]:
    """The ``is_available`` references that guard CUDA-only code: node -> (the guarded call, what it is,
    effort)."""
    guarding = dict(cuda_only_guards(context, module).kept_availability)
    if context.target == "accelerator":
        guarding.update(guarding_unrenamed(module, references))
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
