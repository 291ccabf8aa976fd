"""NP202 ``cuda-api-no-equivalent``: CUDA-only APIs with no Trainium equivalent
(``tables.TORCH_CUDA_NO_EQUIVALENT`` and ``tables.OTHER_NO_EQUIVALENT``), reported with advice."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.cuda_api.references import TorchCudaReference, cuda_api_key
from neuron_port.rules.cuda_api.tables import OTHER_NO_EQUIVALENT, TORCH_CUDA_GENERIC_NAMES, TORCH_CUDA_NO_EQUIVALENT
from neuron_port.rules.spec import Invalid, Valid


class CudaApiNoEquivalent(TorchCudaReference):
    """Reports CUDA-only APIs that have no Trainium equivalent, with what to do instead.

    ## What it does
    Finds ``torch.cuda.get_device_capability``, ``torch.cuda.nvtx``, memory snapshots and history
    recording (``torch.cuda.memory._snapshot()``, ``_record_memory_history(...)``), ``mem_get_info``,
    ``get_rng_state_all`` / ``set_rng_state_all`` (``torch.neuron`` has only the per-device
    ``get_rng_state`` / ``set_rng_state``), NVML telemetry (``utilization``, ``temperature``),
    ``torch.version.cuda`` and similar calls, and reports each with advice and an effort level. It also
    reports ``torch.cuda.OutOfMemoryError`` (``except torch.cuda.OutOfMemoryError:``), the CUDA
    spelling of ``torch.OutOfMemoryError``: what TorchNeuron raises when device memory runs out is not
    documented.

    ## Why is this bad?
    These calls either raise on a Trainium host or return values (``None``, a compute capability, an
    empty list of RNG states) that send the program down a path written for GPUs, or silently do
    nothing (a checkpoint that saves no device RNG state).

    ## Example
    ```python
    if torch.cuda.get_device_capability()[0] >= 8:
        dtype = torch.bfloat16
    ```
    Use instead:
    ```python
    dtype = torch.bfloat16  # always supported on Trainium
    ```

    ## Fix safety
    No automatic fix: the right replacement depends on what the code does with the value.

    ## References
    - https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/neuron.py, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html (the torch.neuron API), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html
    """

    CODE = "NP202"
    NAME = "cuda-api-no-equivalent"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = "`{api}` has no Trainium equivalent: {advice}"
    TRIGGERS = ("cuda",)
    TABLE = TORCH_CUDA_NO_EQUIVALENT

    VALID = [
        Valid("import torch\nname = torch.neuron.get_device_name(0)\n"),
        Valid("import torch\nv = torch.version.git_version\n"),
    ]
    INVALID = [
        Invalid("import torch\nmajor, minor = torch.cuda.get_device_capability()\n"),
        Invalid("import torch as t\nt.cuda.nvtx.range_push('fwd')\n", message_contains="NVTX"),
        Invalid("from torch.cuda import nvtx\nnvtx.range_pop()\n"),
        Invalid("import torch\nprint(torch.version.cuda)\n", message_contains="None on a Trainium host"),
        Invalid("import torch\ntorch.cuda.memory._record_memory_history(max_entries=100000)\n"),
        Invalid("import torch\nsnapshot = torch.cuda.memory._snapshot()\n", message_contains="memory profiling"),
        Invalid("import torch\nstates = torch.cuda.get_rng_state_all()\ntorch.cuda.set_rng_state_all(states)\n",
                message_contains="torch.neuron.get_rng_state(i)"),
        Invalid("import torch\ntry:\n    step()\nexcept torch.cuda.OutOfMemoryError:\n    skip()\n",
                message_contains="torch.OutOfMemoryError"),
    ]

    def lookup(self, qualname: str) -> Optional[str]:
        """A key of ``OTHER_NO_EQUIVALENT`` (the whole qualified name), of ``TORCH_CUDA_GENERIC_NAMES`` or of
        ``TABLE`` (both relative to torch.cuda); the tables' keys never coincide."""
        if qualname in OTHER_NO_EQUIVALENT:
            return qualname
        return cuda_api_key(qualname, TORCH_CUDA_GENERIC_NAMES) or super().lookup(qualname)

    def on_reference(self, node: cst.BaseExpression, qualname: str, key: str) -> None:
        if key in TORCH_CUDA_GENERIC_NAMES:
            advice, effort = TORCH_CUDA_GENERIC_NAMES[key]
            self.report(node, f"`{qualname}` is the CUDA spelling of a device-generic name: {advice}", effort=effort)
            return
        advice, effort = OTHER_NO_EQUIVALENT[key] if key in OTHER_NO_EQUIVALENT else TORCH_CUDA_NO_EQUIVALENT[key]
        self.report(node, self.MESSAGE.format(api=qualname, advice=advice), effort=effort)
