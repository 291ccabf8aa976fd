"""NP201 ``cuda-api-call``: ``torch.cuda.<api>`` with a ``torch.neuron`` (or ``torch.accelerator``)
equivalent, renamed as ``tables.TORCH_CUDA_API`` says."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.cuda_api.api_renames import rename
from neuron_port.rules.cuda_api.capability import CAPABILITY_CALLS, capability_checks
from neuron_port.rules.cuda_api.kept_arguments import kept_cuda_calls
from neuron_port.rules.cuda_api.kept_references import (availability_guard_message, availability_guards,
                                                        capability_guard_message, capability_properties_message,
                                                        kept_argument_message)
from neuron_port.rules.cuda_api.references import TorchCudaReference
from neuron_port.rules.cuda_api.tables import TORCH_CUDA_API
from neuron_port.rules.spec import FRAGMENT, OTHER_RULES, Invalid, Valid


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

    A rank passed as the device (``torch.cuda.set_device(local_rank)``,
    ``torch.cuda.memory_allocated(local_rank)``) is kept as the call is renamed: under ``torchrun``
    TorchNeuron's ``init_process_group`` makes the process's one NeuronCore ``neuron:<LOCAL_RANK>``, its
    current device, and ``device_count()`` the local world size (c10_neuron), so
    ``torch.neuron.set_device(local_rank)`` and ``rank % torch.neuron.device_count()`` mean what they meant
    on CUDA.

    Capability reads are never renamed into code that raises: ``torch.neuron.get_device_properties`` has
    ``name`` and ``total_memory`` only, so a ``get_device_properties(d)`` read for ``.major``, ``.minor``,
    ``.multi_processor_count`` (directly or through the name it is assigned to) is reported and left as it
    is, and so is a ``torch.cuda.is_available()`` test guarding such a read or a ``get_device_capability()``
    call (NP202) that NP210 does not rewrite: on Trainium the test stays False and the CUDA check is
    skipped. So is a ``torch.cuda.is_available()`` test that guards other CUDA-only code (what NP720
    finds), directly or through a name it is assigned to (``use_cuda = torch.cuda.is_available()``), and,
    on the accelerator target, one guarding a ``torch.cuda`` API with no ``torch.accelerator`` spelling.
    A test that decides code not known to run on Trainium (NP102's allow list: an import, another
    package's call, a raise naming the GPU) is an unsafe rename. The arguments of a ``torch.cuda`` call
    that stays (``get_device_capability('cuda')``, a stream passed to ``torch.cuda.graph``) stay too.

    ## References
    - TorchNeuron ``torch.neuron`` module: https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/neuron.py, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html
    - One NeuronCore per process under torchrun: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
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
        Valid("import torch\nscaler = torch.cuda.amp.GradScaler()\n"),  # NP3xx's business
        Valid("from torch.cuda import synchronize\n"),  # the import itself is left alone
    ]
    INVALID = [
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
            "import torch\nif torch.neuron.is_available():\n    torch.neuron.synchronize()\n",
            runs=True,
        ),
        Invalid(
            "import torch as th\nn = th.cuda.device_count()\nth.cuda.manual_seed_all(0)\n",
            "import torch as th\nn = th.neuron.device_count()\nth.neuron.manual_seed_all(0)\n",
            runs=True,
        ),
        Invalid(
            "from torch import cuda\ncuda.empty_cache()\n",
            "from torch import cuda\nimport torch\n\ntorch.neuron.empty_cache()\n",
            runs=True,
        ),
        Invalid(
            "from torch.cuda import max_memory_allocated\nprint(max_memory_allocated() / 2**20)\n",
            "from torch.cuda import max_memory_allocated\nimport torch\n\n"
            "print(torch.neuron.max_memory_allocated() / 2**20)\n",
            runs=True,
        ),
        Invalid(
            "import torch\nstart = torch.cuda.Event(enable_timing=True)\ntorch.cuda.set_device(rank)\n",
            "import torch\nstart = torch.Event(enable_timing=True)\ntorch.accelerator.set_device_index(rank)\n",
            target="accelerator",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\ndevice = torch.device('neuron')\ntorch.cuda.set_device(device)\n",
            "import torch\ndevice = torch.device('neuron')\ntorch.neuron.set_device(device)\n",
            runs=True,
        ),
        Invalid(
            "import torch\ntorch.cuda.set_device(local_rank)\n",
            "import torch\ntorch.accelerator.set_device_index(local_rank)\n",
            target="accelerator",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\nprops = torch.cuda.get_device_properties(0)\n",
            None,  # no device-agnostic equivalent: reported only
            target="accelerator",
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\ndist.init_process_group('neuron')\n"
            "used = torch.cuda.memory_allocated(ddp_local_rank)\nwith torch.cuda.device(args.gpu):\n    pass\n",
            "import torch\nimport torch.distributed as dist\ndist.init_process_group('neuron')\n"
            "used = torch.neuron.memory_allocated(ddp_local_rank)\nwith torch.neuron.device(args.gpu):\n    pass\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            # the properties are read for .major (torch.neuron's have only name and total_memory), and the
            # availability test guards that read: both stay CUDA's, so Trainium skips the check
            "import torch\nprops = torch.cuda.get_device_properties(torch.device('cuda'))\n"
            "if torch.cuda.is_available() and props.major >= 8:\n    pass\n"
            "mem = torch.cuda.get_device_properties(0).total_memory\n",
            "import torch\nprops = torch.cuda.get_device_properties(torch.device('cuda'))\n"
            "if torch.cuda.is_available() and props.major >= 8:\n    pass\n"
            "mem = torch.neuron.get_device_properties(0).total_memory\n",
            message_contains="only `name` and `total_memory`",
            not_runnable=OTHER_RULES,
        ),
        Invalid(
            "import torch\nok = torch.cuda.is_available() and torch.cuda.get_device_capability()[1] == 0\n",
            None,
            message_contains="is kept: it guards `torch.cuda.get_device_capability()`",
        ),
        Invalid(
            """
            import os
            import torch
            import torch.distributed as dist

            dist.init_process_group('neuron')
            local_rank = int(os.environ['LOCAL_RANK'])
            torch.cuda.set_device(local_rank)
            x = torch.ones(2, device=f'neuron:{local_rank}')
            used = torch.cuda.memory_allocated(local_rank)
            peak = torch.cuda.max_memory_allocated(device=local_rank)
            dist.destroy_process_group()
            """,
            """
            import os
            import torch
            import torch.distributed as dist

            dist.init_process_group('neuron')
            local_rank = int(os.environ['LOCAL_RANK'])
            torch.neuron.set_device(local_rank)
            x = torch.ones(2, device=f'neuron:{local_rank}')
            used = torch.neuron.memory_allocated(local_rank)
            peak = torch.neuron.max_memory_allocated(device=local_rank)
            dist.destroy_process_group()
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            x = torch.ones(8, 8, device='neuron') @ torch.ones(8, 8, device='neuron')
            end.record()
            torch.cuda.synchronize()
            ms = start.elapsed_time(end)
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                y = x + 1
            torch.cuda.current_stream().wait_stream(s)
            """,
            """
            import torch
            start = torch.neuron.Event(enable_timing=True)
            end = torch.neuron.Event(enable_timing=True)
            start.record()
            x = torch.ones(8, 8, device='neuron') @ torch.ones(8, 8, device='neuron')
            end.record()
            torch.neuron.synchronize()
            ms = start.elapsed_time(end)
            s = torch.neuron.Stream()
            with torch.neuron.stream(s):
                y = x + 1
            torch.neuron.current_stream().wait_stream(s)
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            x = torch.ones(8, 8, device='neuron') @ torch.ones(8, 8, device='neuron')
            end.record()
            torch.cuda.synchronize()
            ms = start.elapsed_time(end)
            s = torch.cuda.Stream()
            torch.cuda.set_stream(s)
            torch.cuda.set_device(0)
            n = torch.cuda.current_device()
            """,
            """
            import torch
            start = torch.Event(enable_timing=True)
            end = torch.Event(enable_timing=True)
            start.record()
            x = torch.ones(8, 8, device='neuron') @ torch.ones(8, 8, device='neuron')
            end.record()
            torch.accelerator.synchronize()
            ms = start.elapsed_time(end)
            s = torch.Stream()
            torch.accelerator.set_stream(s)
            torch.accelerator.set_device_index(0)
            n = torch.accelerator.current_device_index()
            """,
            target='accelerator',
            runs=True,
        ),
        Invalid(
            """
            import torch
            state = torch.cuda.get_rng_state()
            torch.cuda.set_rng_state(state)
            torch.cuda.manual_seed_all(0)
            name = torch.cuda.get_device_name(0)
            stats = torch.cuda.memory_stats()
            print(torch.cuda.memory_summary())
            torch.cuda.reset_max_memory_allocated()
            """,
            """
            import torch
            state = torch.neuron.get_rng_state()
            torch.neuron.set_rng_state(state)
            torch.neuron.manual_seed_all(0)
            name = torch.neuron.get_device_name(0)
            stats = torch.neuron.memory_stats()
            print(torch.neuron.memory_summary())
            torch.neuron.reset_peak_memory_stats()
            """,
            runs=True,
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F


            def attention(q, k, v):
                if torch.cuda.is_available():
                    from flash_attn import flash_attn_func
                    return flash_attn_func(q, k, v)
                return F.scaled_dot_product_attention(q, k, v)


            if torch.cuda.is_available():
                free, total = torch.cuda.mem_get_info()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            q = torch.randn(1, 2, 4, 8, device='neuron')
            print(attention(q, q, q).shape)
            """,
            """
            import torch
            import torch.nn.functional as F


            def attention(q, k, v):
                if torch.cuda.is_available():
                    from flash_attn import flash_attn_func
                    return flash_attn_func(q, k, v)
                return F.scaled_dot_product_attention(q, k, v)


            if torch.cuda.is_available():
                free, total = torch.cuda.mem_get_info()
            if torch.neuron.is_available():
                torch.neuron.synchronize()
            q = torch.randn(1, 2, 4, 8, device='neuron')
            print(attention(q, q, q).shape)
            """,
            message_contains='is kept: it guards flash-attn',
            runs=True,
        ),
        Invalid(
            "import torch\n\nuse_cuda = torch.cuda.is_available()\nif use_cuda:\n"
            "    torch.cuda.set_per_process_memory_fraction(0.5)\ntorch.cuda.manual_seed(0)\n",
            "import torch\n\nuse_cuda = torch.cuda.is_available()\nif use_cuda:\n"
            "    torch.cuda.set_per_process_memory_fraction(0.5)\ntorch.neuron.manual_seed(0)\n",
            message_contains='guards a CUDA API with no Trainium equivalent (`torch.cuda.set_per_process',
            runs=True,
        ),
        Invalid(
            "import torch\n\nif torch.cuda.is_available():\n    print(torch.cuda.get_device_name(0))\n"
            "torch.cuda.synchronize()\n",
            "import torch\n\nif torch.cuda.is_available():\n    print(torch.cuda.get_device_name(0))\n"
            "torch.accelerator.synchronize()\n",
            target="accelerator",
            message_contains="no torch.accelerator spelling",
            runs=True,
        ),
        Invalid(  # a stream passed to a CUDA graph stays CUDA's; the test decides code not known to be portable
            "import torch\n\ng = torch.cuda.CUDAGraph()\ns = torch.cuda.Stream()\nwith torch.cuda.graph(g, stream=s):\n"
            "    pass\nif not torch.cuda.is_available():\n    config = None\nelse:\n    config = load_kernels()\n",
            None,
            message_contains="an argument of a `torch.cuda` call that stays CUDA's",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._references: list[tuple[cst.BaseExpression, str, str]] = []
        self._capability_calls = False  # the capability analysis is needed only then

    def visit_Call(self, node: cst.Call) -> None:
        if not self._capability_calls and self.context.qualname(node.func) in CAPABILITY_CALLS:
            self._capability_calls = True

    def on_reference(self, node: cst.BaseExpression, qualname: str, key: str) -> None:
        self._references.append((node, qualname, key))  # decided per file, at the end (capabilities)

    def leave_Module(self, original_node: cst.Module) -> None:
        """Each reference: kept (``kept_references.py``, ``kept_arguments.py``) or renamed (``api_renames.py``)."""
        if not self._references:
            return
        caps = capability_checks(self.context, original_node) if self._capability_calls else None
        guarding = None  # the is_available() tests kept or unsafe: computed when needed
        kept = kept_cuda_calls(self.context, original_node).nodes  # arguments of kept torch.cuda calls
        for node, qualname, key in self._references:
            if caps is not None and node in caps.rewritten:
                continue  # inside a capability comparison NP210 rewrites
            if node in kept:
                self.report(node, kept_argument_message(key), effort="low")
                continue
            if caps is not None and node in caps.kept_guards:
                self.report(node, capability_guard_message(key, caps.kept_guards[node]), effort="low")
                continue
            if caps is not None and node in caps.kept_properties:
                self.report(node, capability_properties_message(key, caps.kept_properties[node]), effort="low")
                continue
            if key == "is_available" or key == "device_count":
                if guarding is None:
                    guarding = availability_guards(self.context, original_node, self._references)
                # a capability read is the capability analysis's to decide (NP210 may rewrite it)
                if node in guarding and guarding[node][0].split(".")[-1] != "get_device_capability":
                    call, what, effort = guarding[node]
                    self.report(node, availability_guard_message(call, what), effort=effort)
                    continue
            rename(self, node, key, unsafe=guarding.unsafe.get(node) if guarding is not None else None)
