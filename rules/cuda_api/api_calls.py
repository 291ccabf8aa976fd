"""NP201 ``cuda-api-call``: ``torch.cuda.<api>`` with a ``torch.neuron`` (or ``torch.accelerator``)
equivalent, renamed as ``tables.TORCH_CUDA_API`` says."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.cuda_api.references import TorchCudaReference, cuda_api_key
from neuron_port.rules.cuda_api.tables import TORCH_CUDA_API
from neuron_port.rules.cuda_api.capability import CAPABILITY_CALLS, capability_checks
from neuron_port.rules.device_placement.ranks import rank_devices
from neuron_port.rules.device_placement.tables import CUDA_API_DEVICE_ARGS, ONE_CORE_PER_PROCESS
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import dotted_name, source_of
from neuron_port.rules.helpers.nodes import expr, replace_attr_chain_head
from neuron_port.rules.helpers.ranks_guards import nodes_in, regions_where
from neuron_port.rules.no_port.cuda_only_branches import cuda_only_guards, is_cuda_availability_test
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

    A rank passed as the device (``torch.cuda.memory_allocated(local_rank)``, ``torch.cuda.device(args.gpu)``,
    ``torch.cuda.synchronize(device=rank)``) becomes ``0`` as the call is renamed: under ``torchrun`` the
    process's only NeuronCore is ``neuron:0``. A rank is a name or attribute whose last segment is ``rank``,
    ``local_rank``, ``*_local_rank`` (``ddp_local_rank``), ``gpu``, ``gpu_id`` or ``device_id`` (``args.gpu``,
    ``self.gpu_id``), a ``LOCAL_RANK`` / ``RANK`` read from ``os.environ``, ``dist.get_rank()``, ``<rank> % n``,
    or an alias of one (NP107 has the whole rule); the rank devices of a file are rewritten all together or
    not at all (NP107).

    Compute-capability reads are never renamed into code that raises: ``torch.neuron.get_device_properties``
    has ``name`` and ``total_memory`` only, so a ``get_device_properties(d)`` whose result is read for
    ``.major``, ``.minor``, ``.multi_processor_count`` (directly or through the name it is assigned to) is
    reported and left as it is, and so is a ``torch.cuda.is_available()`` test guarding such a read or a
    ``get_device_capability()`` call (NP202) that NP210 does not rewrite: on Trainium the test stays False
    and the CUDA check is skipped, instead of becoming True and raising. For the same reason a
    ``torch.cuda.is_available()`` test that guards other CUDA-only code (flash-attn, Triton, a CUDA
    extension, a CUDA graph, a ``torch.cuda`` API with no neuron equivalent such as ``mem_get_info``: what
    NP720 finds), directly or through a name it is assigned to (``use_cuda = torch.cuda.is_available()``
    ... ``if use_cuda:``), is kept and reported, not renamed; on the accelerator target so is one guarding
    a ``torch.cuda`` API that has no ``torch.accelerator`` spelling (``get_device_name``, ``stream``...),
    which stays ``torch.cuda`` and would run, and raise, on any other accelerator.

    One exception: ``torch.cuda.set_device(local_rank)`` (the argument is a rank, see NP101) is not
    renamed on the neuron target. Under ``torchrun`` TorchNeuron's ``init_process_group`` leaves each
    process exactly one visible NeuronCore, so ``torch.neuron.set_device(local_rank)`` raises
    ``ValueError("Invalid device id")`` on every rank but 0; NP502 removes the call instead. A
    non-rank argument (``set_device(device)`` with ``device = torch.device("neuron")``) is renamed.

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
            "used = torch.neuron.memory_allocated(0)\nwith torch.neuron.device(0):\n    pass\n",
            message_contains="becomes 0",
            runs=True,
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
            x = torch.ones(2, device='neuron')
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
            x = torch.ones(2, device='neuron')
            used = torch.neuron.memory_allocated(0)
            peak = torch.neuron.max_memory_allocated(device=0)
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
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._calls: dict[cst.CSTNode, cst.Call] = {}  # func -> the call it is the callee of
        self._references: list[tuple[cst.BaseExpression, str, str]] = []
        self._capability_calls = False  # the capability analysis is needed only then

    def visit_Call(self, node: cst.Call) -> None:
        self._calls[node.func] = node
        if not self._capability_calls and self.context.qualname(node.func) in CAPABILITY_CALLS:
            self._capability_calls = True

    def on_reference(self, node: cst.BaseExpression, qualname: str, key: str) -> None:
        self._references.append((node, qualname, key))  # decided per file, at the end (ranks, capabilities)

    def leave_Module(self, original_node: cst.Module) -> None:
        if not self._references:
            return
        caps = capability_checks(self.context, original_node) if self._capability_calls else None
        ranks = None  # the file's rank analysis, computed only if a call may pass a rank as its device
        guarding = None  # is_available() tests that guard CUDA-only code (NP720), computed only if one is seen
        for node, qualname, key in self._references:
            if caps is not None and node in caps.rewritten:
                continue  # inside a capability comparison NP210 rewrites
            if caps is not None and node in caps.kept_guards:
                self.report(
                    node,
                    f"`torch.cuda.{key}()` is kept: it guards `{caps.kept_guards[node]}`, a compute-capability read "
                    "that has no Trainium equivalent, so on Trainium this test is False and the CUDA-only check is "
                    "skipped; decide what the check is for (bf16 is always supported; flash-attn, TF32 and FP8 "
                    "are not) and rewrite it, then this test can become torch.neuron.is_available()",
                    effort="low",
                )
                continue
            if caps is not None and node in caps.kept_properties:
                self.report(
                    node,
                    f"`torch.cuda.{key}(...)` is read for `.{caps.kept_properties[node]}`, which "
                    "torch.neuron.get_device_properties does not have (only `name` and `total_memory`): not "
                    "renamed; there is no compute capability on Trainium, branch on the feature instead (bf16 is "
                    "always supported; flash-attn, TF32 and FP8 are not)",
                    effort="low",
                )
                continue
            if key == "is_available":
                if guarding is None:
                    guarding = dict(cuda_only_guards(self.context, original_node).kept_availability)
                    if self.context.target == "accelerator":
                        guarding.update(self._guarding_unrenamed(original_node))
                # a capability read is the capability analysis's to decide (NP210 may rewrite it)
                if node in guarding and guarding[node][0].split(".")[-1] != "get_device_capability":
                    call, what, effort = guarding[node]
                    self.report(
                        node,
                        f"`torch.cuda.is_available()` is kept: it guards {what} (`{call}`), which cannot run on "
                        "Trainium, so there the test stays False and that code is skipped, as before; "
                        "port it, then this test can become torch.neuron.is_available()",
                        effort=effort,
                    )
                    continue
            call = self._calls.get(node)
            if (self.context.target == "neuron" and call is not None and call.args
                    and (key == "set_device" or key in CUDA_API_DEVICE_ARGS)):
                ranks = ranks or rank_devices(self.context, original_node)
                if self._rank_call(node, key, call, ranks):
                    continue
            self._rename(node, key)

    def _guarding_unrenamed(self, module: cst.Module) -> dict[cst.CSTNode, tuple[str, str, str]]:
        """Accelerator target: the is_available references whose guarded code keeps a torch.cuda API that has
        no torch.accelerator spelling (it stays torch.cuda, which raises where the renamed test is True)."""
        left = {node: key for node, _, key in self._references if TORCH_CUDA_API[key].accelerator is None}
        kept: dict[cst.CSTNode, tuple[str, str, str]] = {}
        for atom, region in regions_where(module, lambda n: True if is_cuda_availability_test(n) else None) \
                if left else ():
            found = next((left[n] for n in nodes_in(region) if n in left), None)
            if found is not None:
                what = "a CUDA API with no torch.accelerator spelling"
                kept.setdefault(atom.func, (f"torch.cuda.{found}", what, "low"))
        return kept

    def _rank_call(self, node: cst.BaseExpression, key: str, call: cst.Call, ranks) -> bool:
        """``set_device(<rank>)`` is NP502's; ``torch.cuda.<api>(<rank>)`` is renamed with index 0 (the
        process's only NeuronCore). True when handled here."""
        position = 0 if key == "set_device" else CUDA_API_DEVICE_ARGS.get(key)
        if position is None:
            return False
        arg = arg_named(call, "device", position)
        if arg is None or arg.star or not ranks.is_rank(arg.value):
            return False
        if key == "set_device":
            return True  # removed by NP502: torch.neuron.set_device(local_rank) raises on every rank but 0
        renamed = self._renamed(node, key)
        if renamed is None:
            return False
        new_func, imports = renamed
        replacement = call.with_changes(func=new_func, args=[
            a.with_changes(value=cst.Integer("0")) if a is arg else a for a in call.args])
        self.report(
            call,
            self.MESSAGE.format(api=key, new=f"torch.neuron.{TORCH_CUDA_API[key].neuron}")
            + f"; the rank `{source_of(arg.value)}` becomes 0: {ONE_CORE_PER_PROCESS}" + ranks.note(),
            replacement=replacement, safety=ranks.safety, imports=imports,
        )
        return True

    def _renamed(self, node: cst.BaseExpression, key: str):
        """(the neuron spelling of the reference, imports) on the neuron target."""
        mapping = TORCH_CUDA_API[key]
        head = dotted_name(node)
        if head is not None and head.split(".")[0] in self.context.torch_names and mapping.neuron == key:
            # keep the user's spelling of torch: th.cuda.x -> th.neuron.x
            replacement = replace_attr_chain_head(node, "cuda", "neuron")
            if replacement is not None:
                return replacement, ()
        torch_name, imports = self.context.torch_module_name()
        return expr(f"{torch_name}.neuron.{mapping.neuron}"), imports

    def _rename(self, node: cst.BaseExpression, key: str) -> None:
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
        replacement, imports = self._renamed(node, key)
        self.report(node, message, replacement=replacement, imports=imports)
