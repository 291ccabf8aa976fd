"""The ``torch.cuda`` calls no rule renames, whose arguments must then stay CUDA's too, and the allow list
of what runs on Trainium with this family's facts filled in.

A ``torch.cuda`` call that is kept on purpose (an API with no Trainium equivalent:
``get_device_capability``, ``mem_get_info``, ``nvtx``; a CUDA graph; a ``get_device_properties`` read for
``.major``, which NP201 keeps) runs only where CUDA does. Renaming its arguments
(``torch.cuda.get_device_properties(torch.device('neuron'))``, ``get_device_capability('neuron')``, a
neuron stream inside ``torch.cuda.graph(...)``) breaks that call on a GPU and fixes nothing on Trainium:
the whole expression is rewritten or none of it. ``kept_cuda_calls`` lists, per file, every node inside the
arguments of such a call (and the ``torch.cuda`` value of a name passed to one: ``s = torch.cuda.Stream()``
... ``torch.cuda.graph(g, stream=s)``); NP101 and NP201 leave those nodes alone.
"""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.cuda_api.capability import CAPABILITY_CALLS, capability_checks
from neuron_port.rules.cuda_api.tables import TORCH_CUDA_API
from neuron_port.rules.device_placement.legacy_aliases import legacy_aliases
from neuron_port.rules.device_placement.tables import LEGACY_CUDA_TENSOR_TYPES
from neuron_port.rules.helpers.names import walk
from neuron_port.rules.helpers.per_file import PerFileAnalysis, module_walk
from neuron_port.rules.helpers.portable import Portability

PREFIX = "torch.cuda."


def _capabilities(context, module: cst.Module, nodes):
    """The capability analysis, when the file reads a capability (else None: nothing to decide)."""
    if any(type(n) is cst.Call and context.qualname(n.func) in CAPABILITY_CALLS for n in nodes):
        return capability_checks(context, module)
    return None


def _renamed_keys(context) -> frozenset:
    """The ``torch.cuda`` keys NP201 renames for the target."""
    return frozenset(k for k, m in TORCH_CUDA_API.items() if context.target == "neuron" or m.accelerator is not None)


def portability_of(context, module: cst.Module, nodes) -> Portability:
    """The allow list for ``module`` (``nodes``: its walk): ``torch.cuda`` APIs count as portable where NP201
    renames them (not a ``get_device_properties`` it keeps for ``.major``), and the capability comparisons
    NP210 rewrites to a constant are no longer there."""
    caps = _capabilities(context, module, nodes)
    skip = frozenset(caps.rewritten) if caps is not None else frozenset()
    # the CUDA class of a legacy tensor-type alias NP105 ports whole (the alias line goes with it)
    skip |= {a.cuda_type for a in legacy_aliases(context, module).aliases if a.why_kept is None}
    kept = frozenset(caps.kept_properties) if caps is not None else frozenset()
    return Portability(context, module, _renamed_keys(context), skip, nodes, kept)


class KeptCudaCalls:
    """The nodes of one module that belong to a kept ``torch.cuda`` call (module docstring)."""

    def __init__(self, context, module: cst.Module) -> None:
        self.module = module
        self.nodes: set[cst.CSTNode] = set()
        nodes = module_walk(context, module).nodes
        calls = [n for n in nodes if isinstance(n, cst.Call) and (context.qualname(n.func) or "").startswith(PREFIX)]
        if not calls:
            return
        caps = _capabilities(context, module, nodes)
        kept_properties = caps.kept_properties if caps is not None else {}
        renamed = _renamed_keys(context)
        names: set[str] = set()
        for call in calls:
            key = (context.qualname(call.func) or "")[len(PREFIX):]
            if key.startswith("amp.") or key in LEGACY_CUDA_TENSOR_TYPES:
                continue  # rewritten whole by NP3xx / NP1xx
            if key in renamed and call.func not in kept_properties:
                continue  # NP201 renames the call: its arguments follow
            for arg in call.args:
                self.nodes.update(walk(arg.value))
                if isinstance(arg.value, cst.Name):
                    names.add(arg.value.value)
        if not names:
            return
        for node in nodes:  # `s = torch.cuda.Stream()` ... `torch.cuda.graph(g, stream=s)`
            if (isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name)
                    and node.targets[0].target.value in names and isinstance(node.value, cst.Call)
                    and (context.qualname(node.value.func) or "").startswith(PREFIX)):
                self.nodes.update(walk(node.value))


# The kept torch.cuda calls of a module, once per file and pass.
kept_cuda_calls = PerFileAnalysis(KeptCudaCalls)
