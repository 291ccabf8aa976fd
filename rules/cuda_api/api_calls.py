"""NP201 ``cuda-api-call``: ``torch.cuda.<api>`` with a ``torch.neuron`` (or ``torch.accelerator``)
equivalent, renamed as ``tables.TORCH_CUDA_API`` says."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.cuda_api.references import TorchCudaReference, cuda_api_key
from neuron_port.rules.cuda_api.tables import TORCH_CUDA_API
from neuron_port.rules.device_placement.ranks import is_rank_expression
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.helpers.nodes import expr, replace_attr_chain_head
from neuron_port.rules.spec import Invalid, Valid


class CudaApiCall(TorchCudaReference):
    """Rewrites ``torch.cuda.<api>`` to its ``torch.neuron`` (or ``torch.accelerator``) equivalent.

    ## What it does
    Finds references to ``torch.cuda`` functions and classes that TorchNeuron's ``torch.neuron`` module
    provides with the same meaning (device selection and count, synchronisation, seeds, memory
    statistics, streams and events, device name and properties, ``is_bf16_supported``) and renames them.
    Aliases are followed: ``import torch as th``, ``from torch import cuda`` and
    ``from torch.cuda import synchronize`` are all found. With ``--target accelerator`` the
    device-agnostic ``torch.accelerator`` spelling is used where one exists.

    ## Why is this bad?
    On a Trainium host ``torch.cuda.is_available()`` is False and most other ``torch.cuda`` calls raise
    "Torch not compiled with CUDA enabled", so CUDA-gated code silently takes its CPU path.

    ## Example
    ```python
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    ```
    Use instead:
    ```python
    if torch.neuron.is_available():
        torch.neuron.synchronize()
    ```

    ## Fix safety
    Safe: the ``torch.neuron`` functions have the CUDA signatures and semantics. Note that
    ``device_count()`` counts logical NeuronCores (4 per Trainium2 chip at the default LNC=2), and
    memory statistics are asynchronous (call ``torch.neuron.synchronize()`` before reading them).

    One exception: ``torch.cuda.set_device(local_rank)`` (the argument is a rank, see NP101) is not
    renamed on the neuron target. Under ``torchrun`` TorchNeuron's ``init_process_group`` leaves each
    process exactly one visible NeuronCore, so ``torch.neuron.set_device(local_rank)`` raises
    ``ValueError("Invalid device id")`` on every rank but 0; NP502 removes the call instead. A
    non-rank argument (``set_device(device)`` with ``device = torch.device("neuron")``) is renamed.

    ## References
    - TorchNeuron ``torch.neuron`` module: shared/torchneuron.md section 1.2
    - One NeuronCore per process under torchrun: shared/torchneuron.md section 6
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html
    - https://docs.pytorch.org/docs/stable/accelerator.html
    """

    CODE = "NP201"
    NAME = "cuda-api-call"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = "`torch.cuda.{api}` has a neuron equivalent: `{new}`"
    TRIGGERS = ("cuda",)
    TABLE = TORCH_CUDA_API

    VALID = [
        Valid("import torch\nif torch.neuron.is_available():\n    torch.neuron.synchronize()\n"),
        Valid("import torch\ntorch.accelerator.synchronize()\n"),
        # a rank argument: NP502 removes the call (neuron:<local_rank> is invalid for rank >= 1)
        Valid("import torch\ntorch.cuda.set_device(local_rank)\ntorch.cuda.set_device(args.gpu)\n"),
        Valid("import os, torch\ntorch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"),
        Valid("import torch\nscaler = torch.cuda.amp.GradScaler()\n"),  # NP3xx's business
        Valid("from torch.cuda import synchronize\n"),  # the import itself is left alone
    ]
    INVALID = [
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
            "import torch\nif torch.neuron.is_available():\n    torch.neuron.synchronize()\n",
        ),
        Invalid(
            "import torch as th\nn = th.cuda.device_count()\nth.cuda.manual_seed_all(0)\n",
            "import torch as th\nn = th.neuron.device_count()\nth.neuron.manual_seed_all(0)\n",
        ),
        Invalid(
            "from torch import cuda\ncuda.empty_cache()\n",
            "from torch import cuda\nimport torch\n\ntorch.neuron.empty_cache()\n",
        ),
        Invalid(
            "from torch.cuda import max_memory_allocated\nprint(max_memory_allocated() / 2**20)\n",
            "from torch.cuda import max_memory_allocated\nimport torch\n\n"
            "print(torch.neuron.max_memory_allocated() / 2**20)\n",
        ),
        Invalid(
            "import torch\nstart = torch.cuda.Event(enable_timing=True)\ntorch.cuda.set_device(rank)\n",
            "import torch\nstart = torch.Event(enable_timing=True)\ntorch.accelerator.set_device_index(rank)\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\ndevice = torch.device('neuron')\ntorch.cuda.set_device(device)\n",
            "import torch\ndevice = torch.device('neuron')\ntorch.neuron.set_device(device)\n",
        ),
        Invalid(
            "import torch\ntorch.cuda.set_device(local_rank)\n",
            "import torch\ntorch.accelerator.set_device_index(local_rank)\n",
            target="accelerator",
        ),
        Invalid(
            "import torch\nprops = torch.cuda.get_device_properties(0)\n",
            None,  # no device-agnostic equivalent: reported only
            target="accelerator",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        # set_device(<rank>) on the neuron target is NP502's (removed, not renamed)
        if self.context.target != "neuron":
            return
        if cuda_api_key(self.context.qualname(node.func), self.TABLE) != "set_device":
            return
        arg = arg_named(node, "device", 0)
        if arg is not None and not arg.star and is_rank_expression(arg.value):
            self.not_uses.add(node.func)

    def on_reference(self, node: cst.BaseExpression, qualname: str, key: str) -> None:
        mapping = TORCH_CUDA_API[key]
        if self.context.target == "accelerator":
            if mapping.accelerator is None:
                self.report(
                    node,
                    f"`torch.cuda.{key}` has no torch.accelerator equivalent; it is `torch.neuron.{mapping.neuron}` "
                    "on Trainium: guard it by device type",
                    effort="low",
                )
                return
            torch_name, imports = self.context.torch_module_name()
            new = mapping.accelerator.replace("torch.", f"{torch_name}.", 1)
            self.report(node, self.MESSAGE.format(api=key, new=mapping.accelerator),
                        replacement=expr(new), imports=imports)
            return
        new_name = f"torch.neuron.{mapping.neuron}"
        message = self.MESSAGE.format(api=key, new=new_name) + (f" ({mapping.note})" if mapping.note else "")
        head = dotted_name(node)
        if head is not None and head.split(".")[0] in self.context.torch_names and mapping.neuron == key:
            # keep the user's spelling of torch: th.cuda.x -> th.neuron.x
            replacement = replace_attr_chain_head(node, "cuda", "neuron")
            if replacement is not None:
                self.report(node, message, replacement=replacement)
                return
        torch_name, imports = self.context.torch_module_name()
        self.report(node, message, replacement=expr(f"{torch_name}.neuron.{mapping.neuron}"), imports=imports)
