"""Data-parallel wrappers: NP503 ``ddp-device-ids`` (DDP ``device_ids=[local_rank]`` / ``output_device=``)
and NP508 ``data-parallel`` (single-process ``nn.DataParallel``)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.device_placement.ranks import rank_devices
from neuron_port.rules.distributed.tables import DATA_PARALLEL_QUALNAMES, DDP_QUALNAMES, SPAWN_QUALNAMES
from neuron_port.rules.helpers.calls import arg_named, remove_arg
from neuron_port.rules.helpers.names import is_none, last_segment, source_of
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid


def _is_index_zero(node) -> bool:
    """``0`` or ``[0]``."""
    if isinstance(node, (cst.List, cst.Tuple)) and len(node.elements) == 1:
        node = node.elements[0].value
    return isinstance(node, cst.Integer) and node.value == "0"


class DdpDeviceIds(PythonRule):
    """Drops ``device_ids=[local_rank]`` and ``output_device=`` from ``DistributedDataParallel``.

    ## What it does
    Finds ``DistributedDataParallel(model, device_ids=[i], output_device=i)`` (any import spelling,
    including ``from torch.nn.parallel import DistributedDataParallel as DDP``) and removes the two
    arguments. A ``device_ids`` list with more than one entry (a multi-device module) is only reported.

    ## Why is this bad?
    On Trainium there is one NeuronCore per process, pinned by ``init_process_group``; DDP needs no
    device list for a single-device module (it uses the module's device), and a rank-indexed
    ``device_ids`` names a core the process does not see: under ``torchrun`` each process sees one
    NeuronCore (``neuron`` == ``neuron:0``), so with ``device_ids=[local_rank]`` DDP moves the inputs to
    ``neuron:<local_rank>``, which fails on every rank but 0 (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html).

    ## Example
    ```python
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    ```
    Use instead:
    ```python
    model = DDP(model)
    ```

    ## Fix safety
    On the neuron target a rank-indexed list (``device_ids=[local_rank]``, ``output_device=local_rank``;
    a rank is a name or attribute whose last segment is ``rank``, ``local_rank``, ``*_local_rank``, ``gpu``,
    ``gpu_id`` or ``device_id``, ``LOCAL_RANK`` from ``os.environ``, or an alias: NP107 has the rule), keyword
    or positional, is rewritten to index 0, safely when every other rank device of the file is rewritten
    too (NP107; otherwise unsafe, so ``model.to(rank)`` and ``device_ids=[0]`` never meet): under torchrun the process's only NeuronCore is ``neuron:0`` on every
    rank, so DDP keeps moving inputs to the process's device, as it did on CUDA.
    Dropping the arguments (the other cases) is unsafe: with ``device_ids`` DDP moves forward inputs to ``device_ids[0]``; without it inputs must
    already be on the model's device (they are, when the code moves its batches with ``.to(device)``).
    The same rewrite is valid on CUDA, so the accelerator target uses it too. Left as it is, a
    rank-indexed ``device_ids`` fails on Trainium for rank >= 1, so apply this fix when porting DDP code.

    Under torchrun TorchNeuron's ``init_process_group`` pins each process to one NeuronCore
    (``NEURON_RT_VISIBLE_CORES=LOCAL_RANK`` when unset), so ``neuron`` is that core and ``neuron:<rank>``
    is invalid for every rank but 0. A program started with ``torch.multiprocessing.spawn`` has no
    ``LOCAL_RANK``: its rank is the first argument of the spawned function, passed to
    ``init_process_group(rank=...)``, which pins the process to the core of its position among the
    ranks of its host (the ranks register their host in the store). Index 0 is the process's own core
    there too, once ``init_process_group`` has run; the message names ``mp.spawn`` instead of torchrun.

    ## References
    - https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
    """

    CODE = "NP503"
    NAME = "ddp-device-ids"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = "DDP needs no `device_ids`/`output_device` with one NeuronCore per process: drop them"
    TRIGGERS = ("device_ids", "output_device")

    VALID = [
        Valid("from torch.nn.parallel import DistributedDataParallel as DDP\nmodel = DDP(model)\n"),
        Valid("import torch\nmodel = torch.nn.parallel.DistributedDataParallel(model, device_ids=None)\n"),
    ]
    INVALID = [
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "model = DDP(model, device_ids=[local_rank], output_device=local_rank)\n",
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "model = DDP(model, device_ids=[0], output_device=0)\n",
            unsafe_fixes=True,
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch.nn as nn\nmodel = nn.parallel.DistributedDataParallel(\n"
            "    model,\n    device_ids=[args.gpu],\n    find_unused_parameters=True,\n)\n",
            "import torch.nn as nn\nmodel = nn.parallel.DistributedDataParallel(\n"
            "    model,\n    find_unused_parameters=True,\n)\n",
            unsafe_fixes=True,
            target="accelerator",
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(model, device_ids=[rank])\n",
            "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(model, device_ids=[0])\n",
            message_contains="fails on every rank but 0",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "m = DDP(net, device_ids=[local_rank], output_device=local_rank)\n",
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "m = DDP(net, device_ids=[0], output_device=0)\n",
            not_runnable=FRAGMENT,
        ),
        # mp.spawn: the rank is the spawned function's first parameter; init_process_group pins the core
        Invalid(
            """
            import torch.distributed as dist
            import torch.multiprocessing as mp
            from torch.nn.parallel import DistributedDataParallel as DDP


            def worker(rank, world_size):
                dist.init_process_group('neuron', rank=rank, world_size=world_size)
                m = DDP(model.to(f'neuron:{rank}'), device_ids=[rank])


            mp.spawn(worker, args=(2,), nprocs=2)
            """,
            """
            import torch.distributed as dist
            import torch.multiprocessing as mp
            from torch.nn.parallel import DistributedDataParallel as DDP


            def worker(rank, world_size):
                dist.init_process_group('neuron', rank=rank, world_size=world_size)
                m = DDP(model.to(f'neuron:{rank}'), device_ids=[0])


            mp.spawn(worker, args=(2,), nprocs=2)
            """,
            message_contains="pins each mp.spawn process",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(model, device_ids=[dev])\n",
            None,  # not a rank: dropping is unsafe, not applied by default
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(model, device_ids=[0, 1])\n",
            None,  # several devices per process: reported only
            message_contains="several devices",
            unsafe_fixes=True,
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "device_ids = [local_rank]\nm = DDP(model, device_ids)\n",
            None,  # device_ids passed positionally: reported only
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import os
            import torch
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP

            dist.init_process_group('neuron')
            local_rank = int(os.environ['LOCAL_RANK'])
            model = torch.nn.Linear(4, 4).to('neuron')
            m = DDP(model, device_ids=[local_rank])
            m(torch.randn(2, 4, device='neuron')).sum().backward()
            dist.destroy_process_group()
            """,
            """
            import os
            import torch
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP

            dist.init_process_group('neuron')
            local_rank = int(os.environ['LOCAL_RANK'])
            model = torch.nn.Linear(4, 4).to('neuron')
            m = DDP(model, device_ids=[0])
            m(torch.randn(2, 4, device='neuron')).sum().backward()
            dist.destroy_process_group()
            """,
            runs=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._calls: list[cst.Call] = []
        self._spawned = False  # the file starts its processes with torch.multiprocessing.spawn

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname in SPAWN_QUALNAMES:
            self._spawned = True
        if qualname in DDP_QUALNAMES or (qualname is None and last_segment(node.func) == "DistributedDataParallel"):
            self._calls.append(node)  # a rank index is decided per file, at the end

    def leave_Module(self, original_node: cst.Module) -> None:
        for node in self._calls:
            self._ddp(node, original_node)

    def _ddp(self, node: cst.Call, module: cst.Module) -> None:
        device_ids = arg_named(node, "device_ids", 1)
        output_device = arg_named(node, "output_device", 2)
        drop = []
        if device_ids is not None and not is_none(device_ids.value):
            value = device_ids.value
            if isinstance(value, (cst.List, cst.Tuple)) and len(value.elements) > 1:
                self.report(node, "DDP with several devices per process is not supported on Trainium: run one "
                            "process per NeuronCore", effort="medium")
                return
            drop.append(device_ids)
        if output_device is not None:
            drop.append(output_device)
        if not drop:
            return
        ids = device_ids.value if device_ids is not None else None
        if self.context.target == "neuron" and _is_index_zero(ids) and (
            output_device is None or _is_index_zero(output_device.value)
        ):
            return  # already the process's own core (what the rank rewrite below produces)
        message = self.MESSAGE
        ranks = rank_devices(self.context, module) if self.context.target == "neuron" else None
        rank_indexed = (
            ranks is not None
            and isinstance(ids, (cst.List, cst.Tuple))
            and any(isinstance(e, cst.Element) and ranks.is_rank(e.value) for e in ids.elements)
        )
        if rank_indexed:
            assert ranks is not None and isinstance(ids, (cst.List, cst.Tuple))
            # The faithful translation: the process's own core is index 0 on every rank.
            zero = cst.Integer("0")
            new_values = {device_ids: ids.with_changes(elements=[ids.elements[0].with_changes(value=zero)])}
            if output_device is not None and ranks.is_rank(output_device.value):
                new_values[output_device] = zero
            replacement = node.with_changes(args=[
                a.with_changes(value=new_values[a]) if a in new_values else a for a in node.args])
            launcher = "mp.spawn process" if self._spawned else "process"
            message = (f"`device_ids={source_of(ids)}` fails on every rank but 0 (init_process_group pins each "
                       f"{launcher} to one NeuronCore): use index 0, its own core")
            if not ranks.consistent:
                message += " (unsafe: see NP107)"
            self.report(node, message, replacement=replacement, safety=ranks.safety)
            return
        if any(a.keyword is None for a in drop):
            self.report(node, message)  # positional device arguments: keep it simple, report only
            return
        replacement = node
        for arg in drop:
            current = next(a for a in replacement.args
                           if a.keyword is not None and a.keyword.value == arg.keyword.value)
            replacement = remove_arg(replacement, current)
        self.report(node, message, replacement=replacement, safety="unsafe")


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
