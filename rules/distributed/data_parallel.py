"""Data-parallel wrappers: NP503 ``ddp-device-ids`` (DDP over several devices per process) and NP508
``data-parallel`` (single-process ``nn.DataParallel``)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.distributed.tables import DATA_PARALLEL_QUALNAMES, DDP_QUALNAMES
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import last_segment
from neuron_port.rules.spec import Invalid, PythonRule, Valid


class DdpDeviceIds(PythonRule):
    """Reports ``DistributedDataParallel`` over several devices per process (``device_ids=[0, 1]``).

    ## What it does
    Finds ``DistributedDataParallel(model, device_ids=[a, b, ...])`` with more than one device (any
    import spelling, including ``from torch.nn.parallel import DistributedDataParallel as DDP``). A
    one-device ``device_ids=[local_rank]`` / ``output_device=local_rank`` is left as it is: it names the
    process's own NeuronCore.

    ## Why is this bad?
    TorchNeuron runs one process per NeuronCore and asserts it ("Attempted to have more than one device
    per process in distributed setup"), and PyTorch 2.13 itself refuses a DDP module replicated over several
    devices of one process ("device_ids can only be None or contain a single element."). Under ``torchrun`` each process's core is
    ``neuron:<LOCAL_RANK>``, its current device (c10_neuron: ``device_count()`` is the local world size,
    ``set_local_device_start_index(local_rank)``), so ``device_ids=[local_rank]`` means on Trainium what it
    meant on CUDA and needs no change (nor does an ``mp.spawn`` worker's ``device_ids=[rank]`` on one node).

    ## Example
    ```python
    model = DDP(model, device_ids=[2 * local_rank, 2 * local_rank + 1])
    ```
    Use instead:
    ```python
    # torchrun --nproc_per_node=<NeuronCores> train.py
    model = DDP(model.to(f"neuron:{local_rank}"), device_ids=[local_rank])
    ```

    ## Fix safety
    No fix: splitting the module over processes changes how the script is launched.

    ## References
    - https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
    - TorchNeuron source: https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/csrc/core/NeuronDevice.cpp
      (device_count, set_local_device_start_index)
    """

    CODE = "NP503"
    NAME = "ddp-device-ids"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "never"
    EFFORT = "medium"
    MESSAGE = "DDP with several devices per process is not supported on Trainium: run one process per NeuronCore"
    TRIGGERS = ("DistributedDataParallel",)

    VALID = [
        Valid("from torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(model)\n"),
        Valid("import torch\nmodel = torch.nn.parallel.DistributedDataParallel(model, device_ids=None)\n"),
        Valid("from torch.nn.parallel import DistributedDataParallel as DDP\n"
              "model = DDP(model, device_ids=[local_rank], output_device=local_rank)\n"),
        Valid("from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(model, device_ids=[dev])\n"),
    ]
    INVALID = [
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(model, device_ids=[0, 1])\n",
            None,  # several devices per process: reported only
            message_contains="several devices",
        ),
        Invalid(
            "import torch\nm = torch.nn.parallel.DistributedDataParallel(net, [2 * rank, 2 * rank + 1])\n",
            None,
            target="accelerator",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if not (qualname in DDP_QUALNAMES or (qualname is None and last_segment(node.func) == "DistributedDataParallel")):
            return
        device_ids = arg_named(node, "device_ids", 1)
        if (device_ids is not None and isinstance(device_ids.value, (cst.List, cst.Tuple))
                and len(device_ids.value.elements) > 1):
            self.report(node)


class DataParallel(PythonRule):
    """Reports ``nn.DataParallel`` (single-process, multi-device data parallelism).

    ## What it does
    Finds calls of ``torch.nn.DataParallel`` / ``torch.nn.parallel.data_parallel`` in any import spelling.

    ## Why is this bad?
    TorchNeuron runs one process per NeuronCore ("Attempted to have more than one device per process in
    distributed setup"); ``DataParallel`` replicates a module over several devices inside one process with
    CUDA-only scatter/gather.

    ## Example
    ```python
    model = nn.DataParallel(model)
    ```
    Use instead:
    ```python
    # torchrun --nproc_per_node=<NeuronCores> train.py
    dist.init_process_group("neuron")
    model = DDP(model.to("neuron"))
    ```

    ## Fix safety
    No fix: moving to DDP changes how the script is launched.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
    - https://docs.pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead
    """

    CODE = "NP508"
    NAME = "data-parallel"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = (
        "`DataParallel` (one process, several devices) is not supported on Trainium: use DDP with one process "
        "per NeuronCore"
    )
    TRIGGERS = ("DataParallel", "data_parallel")

    VALID = [
        Valid("from torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(model)\n"),
        Valid("import torch.nn as nn\nraw = model.module if isinstance(model, nn.DataParallel) else model\n"),
    ]
    INVALID = [
        Invalid("import torch.nn as nn\nmodel = nn.DataParallel(model)\n"),
        Invalid("import torch\nmodel = torch.nn.DataParallel(model, device_ids=[0, 1])\n"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) in DATA_PARALLEL_QUALNAMES:
            self.report(node)
