"""NP5xx: distributed training and sharding.

Codes (stable):

- NP501 ``nccl-backend``: ``"nccl"`` process-group backends -> ``"neuron"``.
- NP502 ``distributed-set-device``: ``set_device(local_rank)`` next to ``init_process_group`` (removed; safe
  in a file that calls ``init_process_group``, unsafe elsewhere).
- NP503 ``ddp-device-ids``: DDP ``device_ids=[local_rank]`` / ``output_device=`` (dropped, unsafe).
- NP504 ``cuda-device-mesh``: ``init_device_mesh("cuda", ...)`` / ``DeviceMesh("cuda", ...)``.
- NP505 ``cuda-visible-devices``: ``CUDA_VISIBLE_DEVICES`` -> ``NEURON_RT_VISIBLE_CORES`` (unsafe).
- NP506 ``gpu-count-world-size``: ``torch.cuda.device_count()`` as a world size / ``nprocs`` (advice).
- NP507 ``cuda-env-var``: ``NCCL_*`` / ``PYTORCH_CUDA_ALLOC_CONF`` / ``CUDA_LAUNCH_BLOCKING`` settings.
- NP508 ``data-parallel``: ``nn.DataParallel``.
- NP509 ``p2p-communication``: ``dist.send/recv/isend/irecv/batch_isend_irecv``.
- NP510 ``barrier-non-default-group``: ``dist.barrier(group=...)``.
- NP511 ``uneven-all-to-all``: ``all_to_all_single`` with split sizes.

FSDP's ``device_id=torch.cuda.current_device()`` needs no rule of its own: NP201 turns it into
``torch.neuron.current_device()`` (an int), and FSDP maps an int through ``torch.device(int)``, which
resolves to the current accelerator (neuron) in PyTorch 2.13.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.spec import Invalid, PythonRule, Valid
from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.device_placement.ranks import is_rank_expression
from neuron_port.rules.helpers.guards import AvailabilityMixin
from neuron_port.rules.helpers.names import last_segment, source_of
from neuron_port.rules.distributed.tables import (
    BACKEND_MAP_RE,
    CORES_ADVICE,
    CUDA_ENV_ADVICE,
    CUDA_VISIBLE_DEVICES,
    DATA_PARALLEL_QUALNAMES,
    DDP_QUALNAMES,
    DIST,
    NCCL,
    NCCL_ENV_ADVICE,
    NCCL_ENV_RE,
    NEURON_BACKEND,
    NEURON_RT_VISIBLE_CORES,
    P2P_OPS,
    SET_DEVICE_QUALNAMES,
    WORLD_SIZE_NAME_RE,
)
from neuron_port.rules.device_placement.tables import ONE_CORE_PER_PROCESS
from neuron_port.rules.helpers.calls import arg_named, remove_arg
from neuron_port.rules.helpers.nodes import expr, replace_string, string_value


class _SkipProse(PythonRule):
    """Tracks strings that are docstrings or arguments of print/log calls (never configuration)."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._prose: set[cst.CSTNode] = set()

    def visit_Expr(self, node: cst.Expr) -> None:
        self._prose.add(node.value)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        name = last_segment(func)
        receiver = (dotted_name(func.value) or "").lower() if isinstance(func, cst.Attribute) else ""
        if name in ("print", "getattr", "hasattr") and isinstance(func, cst.Name) or "log" in receiver:
            for arg in node.args:
                self._prose.add(arg.value)
        self._on_call(node)

    def _on_call(self, node: cst.Call) -> None:
        pass


class NcclBackend(AvailabilityMixin, _SkipProse):
    """Rewrites the ``"nccl"`` process-group backend to ``"neuron"``.

    ## What it does
    Finds the string ``"nccl"`` wherever it names a backend: ``init_process_group("nccl")``,
    ``backend="nccl"``, ``"nccl" if torch.cuda.is_available() else "gloo"``, argparse defaults and
    choices of ``--dist-backend``, ``dist.get_backend() == "nccl"``; also ``dist.Backend.NCCL`` and the
    ``cuda:nccl`` entry of a ``"cpu:gloo,cuda:nccl"`` device map. On the accelerator target the backend
    becomes ``torch.distributed.get_default_backend_for_device(torch.accelerator.current_accelerator())``.

    ## Why is this bad?
    NCCL does not exist on Trainium; ``init_process_group("nccl")`` fails. TorchNeuron registers the
    ``neuron`` backend (``ProcessGroupNeuron``) for the ``neuron`` device.

    ## Example
    ```python
    dist.init_process_group(backend="nccl")
    ```
    Use instead:
    ```python
    dist.init_process_group(backend="neuron")
    ```

    ## Fix safety
    Safe on the neuron target. On the accelerator target the rewrite is safe under a
    ``torch.cuda.is_available()`` test and unsafe elsewhere (``current_accelerator()`` is None on CPU-only
    hosts, so an argparse default would raise at start-up).

    ## References
    - shared/torchneuron.md sections 6 and 7
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
    """

    CODE = "NP501"
    NAME = "nccl-backend"
    SEVERITY = "error"
    FIX_AVAILABILITY = "always"
    EFFORT = "low"
    MESSAGE = "the NCCL backend does not exist on Trainium: use `{new}`"
    TRIGGERS = ("nccl", "NCCL")

    VALID = [
        Valid("import torch.distributed as dist\ndist.init_process_group(backend='neuron')\n"),
        Valid('"""Uses nccl."""\nprint("nccl")\nx = "nccl_test"\n'),
    ]
    INVALID = [
        Invalid(
            "import torch.distributed as dist\ndist.init_process_group('nccl')\n"
            "parser.add_argument('--dist-backend', default='nccl', type=str)\n",
            "import torch.distributed as dist\ndist.init_process_group('neuron')\n"
            "parser.add_argument('--dist-backend', default='neuron', type=str)\n",
        ),
        Invalid(
            'import torch\nimport torch.distributed as dist\n'
            'backend = "nccl" if torch.cuda.is_available() else "gloo"\n'
            'dist.init_process_group(backend=dist.Backend.NCCL)\nb = "cpu:gloo,cuda:nccl"\n',
            'import torch\nimport torch.distributed as dist\n'
            'backend = "neuron" if torch.cuda.is_available() else "gloo"\n'
            'dist.init_process_group(backend="neuron")\nb = "cpu:gloo,neuron:neuron"\n',
        ),
        Invalid(
            'import torch\nbackend = "nccl" if torch.cuda.is_available() else "gloo"\n',
            "import torch\nbackend = torch.distributed.get_default_backend_for_device("
            'torch.accelerator.current_accelerator()) if torch.cuda.is_available() else "gloo"\n',
            target="accelerator",
        ),
        Invalid("import torch\ndist.init_process_group('nccl')\n", None, target="accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._guarded: set[cst.CSTNode] = set()

    def visit_IfExp(self, node: cst.IfExp) -> None:
        if self.is_availability_check(node.test):
            self._guarded.add(node.body)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node in self._prose:
            return
        value = string_value(node)
        if value == NCCL:
            self._backend(node, node)
        elif value and "cuda:nccl" in value and BACKEND_MAP_RE.match(value) and self.context.target == "neuron":
            new = value.replace("cuda:nccl", f"neuron:{NEURON_BACKEND}")
            self.report(node, self.MESSAGE.format(new=new), replacement=replace_string(node, new))

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "NCCL" and self.context.qualname(node) in (
            "torch.distributed.Backend.NCCL",
            "torch.distributed.distributed_c10d.Backend.NCCL",
        ):
            self._backend(node, None)

    def _backend(self, node: cst.BaseExpression, literal: Optional[cst.SimpleString]) -> None:
        if self.context.target == "accelerator":
            torch_name, imports = self.context.torch_module_name()
            new = (
                f"{torch_name}.distributed.get_default_backend_for_device("
                f"{torch_name}.accelerator.current_accelerator())"
            )
            safety = "safe" if node in self._guarded else "unsafe"
            self.report(
                node,
                self.MESSAGE.format(new=new)
                + ("" if safety == "safe" else " (unsafe: current_accelerator() is None on CPU-only hosts)"),
                replacement=expr(new),
                safety=safety,
                imports=imports,
            )
            return
        replacement = replace_string(literal, NEURON_BACKEND) if literal is not None else cst.SimpleString('"neuron"')
        self.report(node, self.MESSAGE.format(new=source_of(replacement)), replacement=replacement)


class DistributedSetDevice(_SkipProse):
    """Removes ``set_device(local_rank)``: under torchrun a process has one NeuronCore, ``neuron``.

    ## What it does
    Finds ``torch.cuda.set_device(...)`` (and the ``torch.neuron.set_device`` /
    ``torch.accelerator.set_device_index`` spellings) in a file that calls ``init_process_group``, or
    whose argument is a rank. When the argument is a rank (a name or attribute ending in ``local_rank``,
    ``rank``, ``gpu``, ``gpu_id`` or ``device_id``, or ``int(os.environ["LOCAL_RANK"])``; see NP101) and
    the call is a whole statement on its own line in a block that keeps another statement, the neuron
    target offers to delete it; NP201 leaves that call alone. Other calls are reported: a non-rank
    argument (``set_device(device)``) is renamed by NP201, and on the accelerator target the call is
    what CUDA needs.

    ## Why is this bad?
    TorchNeuron's ``init_process_group`` sets ``NEURON_RT_VISIBLE_CORES=<LOCAL_RANK>`` (when unset) and
    allows exactly one device per process ("Attempted to have more than one device per process in
    distributed setup"), so under ``torchrun`` each process sees one NeuronCore: ``neuron``, which is
    ``neuron:0``. ``torch.neuron.set_device(local_rank)`` then raises ``ValueError("Invalid device id")``
    on every rank but 0, and, called *before* ``init_process_group``, may initialise the runtime too
    early ("Neuron runtime should not be initialized before the init_process_group."). The same holds
    for rank-indexed devices such as ``f"cuda:{local_rank}"``, which NP101 rewrites to ``"neuron"``.

    ## Example
    ```python
    torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl")
    device = torch.device(f"cuda:{local_rank}")
    ```
    Use instead:
    ```python
    dist.init_process_group("neuron")  # pins this process to NeuronCore LOCAL_RANK
    device = torch.device("neuron")
    ```

    ## Fix safety
    Safe in a file that calls ``init_process_group``: there the process is a torchrun-style worker, the
    call raises on Trainium as written (``torch.cuda``) and on every rank but 0 as renamed, and deleting
    it leaves exactly TorchNeuron's own pinning. Unsafe elsewhere: a single-process script that picks a
    core with ``set_device(args.gpu)``, or a job that sets ``NEURON_RT_VISIBLE_CORES`` to several cores
    per process itself, would now run on the first visible core. A call that is not a statement of its
    own, or is the only statement of its block, is reported only.

    ## References
    - shared/torchneuron.md section 6 (init_process_group behaviour, one device per process)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
    """

    CODE = "NP502"
    NAME = "distributed-set-device"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = (
        "TorchNeuron's init_process_group pins each process to NeuronCore LOCAL_RANK (NEURON_RT_VISIBLE_CORES), "
        "so the process sees one device, `neuron`: drop `set_device({arg})`{extra}"
    )
    TRIGGERS = ("set_device",)

    VALID = [
        Valid("import torch\ntorch.cuda.set_device(1)\n"),  # not distributed
        Valid("import torch.distributed as dist\ndist.init_process_group('neuron')\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch.distributed as dist\n"
            "torch.cuda.set_device(args.local_rank)\ndist.init_process_group('nccl')\n",
            "import torch\nimport torch.distributed as dist\ndist.init_process_group('nccl')\n",
            message_contains="before init_process_group",
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\n\n\ndef main(local_rank):\n"
            "    dist.init_process_group('neuron')\n    # one GPU per process\n"
            "    torch.cuda.set_device(local_rank)\n    train()\n",
            "import torch\nimport torch.distributed as dist\n\n\ndef main(local_rank):\n"
            "    dist.init_process_group('neuron')\n    train()\n",
            message_contains="Invalid device id",
        ),
        Invalid(
            "import os\nimport torch\ntorch.neuron.set_device(int(os.environ['LOCAL_RANK']))\nmain()\n",
            "import os\nimport torch\nmain()\n",
            unsafe_fixes=True,
        ),
        Invalid(
            # the only statement of its block, or not a statement of its own: reported only
            "import torch\nif torch.cuda.is_available():\n    torch.cuda.set_device(local_rank)\n"
            "ok = torch.cuda.set_device(gpu) or True\n",
            None,
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\ndist.init_process_group('nccl')\n"
            "torch.cuda.set_device(local_rank)\n",
            None,  # CUDA needs it: the accelerator target only reports
            target="accelerator",
            unsafe_fixes=True,
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\ndist.init_process_group('neuron')\n"
            "torch.neuron.set_device(device)\n",
            None,  # not a rank: advice only
            unsafe_fixes=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._calls: list[tuple[cst.Call, bool]] = []
        self._init_seen = False
        # call -> (its statement line, the block holding it) for calls that are a whole statement
        self._statements: dict[cst.Call, tuple[cst.SimpleStatementLine, cst.CSTNode]] = {}

    def _record_block(self, block: cst.CSTNode, body) -> None:
        for statement in body:
            if (
                isinstance(statement, cst.SimpleStatementLine)
                and len(statement.body) == 1
                and isinstance(statement.body[0], cst.Expr)
                and isinstance(statement.body[0].value, cst.Call)
            ):
                self._statements[statement.body[0].value] = (statement, block)

    def visit_Module(self, node: cst.Module) -> None:
        self._record_block(node, node.body)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._record_block(node, node.body)

    def _on_call(self, node: cst.Call) -> None:
        last = last_segment(node.func)
        if last == "init_process_group":
            self._init_seen = True
            return
        if self.context.qualname(node.func) in SET_DEVICE_QUALNAMES and node.args:
            self._calls.append((node, self._init_seen))

    def leave_Module(self, original_node: cst.Module) -> None:
        found = []
        for node, after_init in self._calls:
            arg = arg_named(node, "device", 0) or node.args[0]
            rank = not arg.star and is_rank_expression(arg.value)
            source = source_of(arg.value)
            if not (self._init_seen or rank or "rank" in source.lower()):
                continue
            extra = (
                "; called before init_process_group it may initialise the Neuron runtime, which "
                "init_process_group rejects"
                if self._init_seen and not after_init
                else ""
            )
            if rank and self.context.target == "neuron":
                extra += (
                    f"; `torch.neuron.set_device({source})` raises ValueError(\"Invalid device id\") on every "
                    f"rank but 0: {ONE_CORE_PER_PROCESS}"
                )
            found.append((node, self.MESSAGE.format(arg=source, extra=extra), rank))
        # a block must keep at least one statement
        removable: dict[cst.CSTNode, int] = {}
        for node, _, rank in found:
            if rank and self.context.target == "neuron" and node in self._statements:
                block = self._statements[node][1]
                removable[block] = removable.get(block, 0) + 1
        for node, message, rank in found:
            entry = self._statements.get(node) if rank and self.context.target == "neuron" else None
            if entry is not None:
                statement, block = entry
                if removable[block] < len(block.body):  # type: ignore[attr-defined]
                    safety = "safe" if self._init_seen else "unsafe"  # see "Fix safety"
                    self.report(statement, message, replacement=cst.RemoveFromParent(), safety=safety)
                    continue
            self.report(node, message)


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
    ``neuron:<local_rank>``, which fails on every rank but 0 (shared/torchneuron.md section 6).

    ## Example
    ```python
    model = DDP(model, device_ids=[local_rank], output_device=local_rank)
    ```
    Use instead:
    ```python
    model = DDP(model)
    ```

    ## Fix safety
    On the neuron target a rank-indexed list (``device_ids=[local_rank]``, ``output_device=local_rank``)
    is rewritten to index 0, safely: under torchrun the process's only NeuronCore is ``neuron:0`` on every
    rank, so DDP keeps moving inputs to the process's device, as it did on CUDA.
    Dropping the arguments (the other cases) is unsafe: with ``device_ids`` DDP moves forward inputs to ``device_ids[0]``; without it inputs must
    already be on the model's device (they are, when the code moves its batches with ``.to(device)``).
    The same rewrite is valid on CUDA, so the accelerator target uses it too. Left as it is, a
    rank-indexed ``device_ids`` fails on Trainium for rank >= 1, so apply this fix when porting DDP code.

    ## References
    - https://docs.pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html
    - shared/torchneuron.md section 6
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
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "m = DDP(net, device_ids=[local_rank], output_device=local_rank)\n",
            "from torch.nn.parallel import DistributedDataParallel as DDP\n"
            "m = DDP(net, device_ids=[0], output_device=0)\n",
        ),
        Invalid(
            "from torch.nn.parallel import DistributedDataParallel as DDP\nm = DDP(model, device_ids=[dev])\n",
            None,  # not a rank: dropping is unsafe, not applied by default
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname not in DDP_QUALNAMES and not (
            qualname is None and last_segment(node.func) == "DistributedDataParallel"
        ):
            return
        device_ids = arg_named(node, "device_ids", 1)
        output_device = arg_named(node, "output_device", 2)
        drop = []
        if device_ids is not None and not (isinstance(device_ids.value, cst.Name) and device_ids.value.value == "None"):
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
        rank_indexed = (
            self.context.target == "neuron"
            and isinstance(ids, (cst.List, cst.Tuple))
            and any(isinstance(e, cst.Element) and is_rank_expression(e.value) for e in ids.elements)
        )
        if rank_indexed:
            message += (
                f" (`device_ids={source_of(ids)}` moves inputs to `neuron:<rank>`, which fails on every rank but 0: "
                f"{ONE_CORE_PER_PROCESS})"
            )
            if all(a.keyword is not None for a in drop):
                # The faithful translation: the process's own core is index 0 on every rank.
                zero = cst.Integer("0")
                replacement = node
                for arg in drop:
                    current = next(a for a in replacement.args
                                   if a.keyword is not None and a.keyword.value == arg.keyword.value)
                    if arg is device_ids:
                        new_value = ids.with_changes(elements=[ids.elements[0].with_changes(value=zero)])
                    elif is_rank_expression(arg.value):
                        new_value = zero
                    else:
                        continue
                    replacement = replacement.with_changes(args=[
                        a.with_changes(value=new_value) if a is current else a for a in replacement.args])
                self.report(node, message + "; rewritten to index 0, the process's own NeuronCore (or drop both)",
                            replacement=replacement, safety="safe")
                return
        if any(a.keyword is None for a in drop):
            self.report(node, message)  # positional device arguments: keep it simple, report only
            return
        replacement = node
        for arg in drop:
            current = next(a for a in replacement.args if a.keyword is not None and a.keyword.value == arg.keyword.value)
            replacement = remove_arg(replacement, current)
        self.report(node, message, replacement=replacement, safety="unsafe")


class CudaDeviceMesh(PythonRule):
    """Rewrites ``init_device_mesh("cuda", ...)`` and ``DeviceMesh("cuda", ...)`` to ``"neuron"``.

    ## What it does
    Finds the device type of a device mesh (first argument or ``device_type=``) when it is ``"cuda"`` and
    rewrites it to ``"neuron"`` (``torch.accelerator.current_accelerator().type`` on the accelerator
    target). The message reminds to size the mesh in NeuronCores.

    ## Why is this bad?
    A ``cuda`` mesh cannot be created on Trainium; DTensor tensor/sequence parallelism runs on a
    ``neuron`` mesh, and mesh dimensions count logical NeuronCores (4 per Trainium2 chip at LNC=2).

    ## Example
    ```python
    mesh = init_device_mesh("cuda", (dp, tp), mesh_dim_names=("dp", "tp"))
    ```
    Use instead:
    ```python
    mesh = init_device_mesh("neuron", (dp, tp), mesh_dim_names=("dp", "tp"))
    ```

    ## Fix safety
    Safe: the string is used at once to create the mesh, which fails with ``"cuda"`` on any host without
    CUDA, so neither rewrite changes behaviour where the original worked.

    ## References
    - shared/torchneuron.md section 6
    - https://docs.pytorch.org/docs/stable/distributed.html#torch.distributed.device_mesh.init_device_mesh
    """

    CODE = "NP504"
    NAME = "cuda-device-mesh"
    SEVERITY = "error"
    FIX_AVAILABILITY = "always"
    EFFORT = "low"
    MESSAGE = "a `cuda` device mesh does not exist on Trainium: use `{new}` and size the mesh in NeuronCores"
    TRIGGERS = ("init_device_mesh", "DeviceMesh")

    VALID = [
        Valid("from torch.distributed.device_mesh import init_device_mesh\nm = init_device_mesh('neuron', (8,))\n"),
        Valid("m = init_device_mesh(device_type, (2, 4))\n"),
    ]
    INVALID = [
        Invalid(
            "from torch.distributed.device_mesh import init_device_mesh\n"
            "mesh = init_device_mesh('cuda', (dp, tp), mesh_dim_names=('dp', 'tp'))\n",
            "from torch.distributed.device_mesh import init_device_mesh\n"
            "mesh = init_device_mesh('neuron', (dp, tp), mesh_dim_names=('dp', 'tp'))\n",
        ),
        Invalid(
            "import torch\nfrom torch.distributed.device_mesh import DeviceMesh\nm = DeviceMesh(device_type=\"cuda\", mesh=[0, 1])\n",
            "import torch\nfrom torch.distributed.device_mesh import DeviceMesh\n"
            "m = DeviceMesh(device_type=torch.accelerator.current_accelerator().type, mesh=[0, 1])\n",
            target="accelerator",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if last_segment(node.func) not in ("init_device_mesh", "DeviceMesh"):
            return
        arg = arg_named(node, "device_type", 0)
        if arg is None or string_value(arg.value) != "cuda" or not isinstance(arg.value, cst.SimpleString):
            return
        if self.context.target == "accelerator":
            torch_name, imports = self.context.torch_module_name()
            new = f"{torch_name}.accelerator.current_accelerator().type"
            self.report(arg.value, self.MESSAGE.format(new=new), replacement=expr(new), imports=imports)
            return
        replacement = replace_string(arg.value, "neuron")
        self.report(arg.value, self.MESSAGE.format(new=source_of(replacement)), replacement=replacement)


class CudaVisibleDevices(_SkipProse):
    """Rewrites ``CUDA_VISIBLE_DEVICES`` in Python to ``NEURON_RT_VISIBLE_CORES``.

    ## What it does
    Finds the string ``"CUDA_VISIBLE_DEVICES"`` in Python code (``os.environ[...] = ...``,
    ``os.environ.get(...)``, ``os.getenv``, ``setdefault``, ``env={...}`` dicts for subprocesses) and, as an
    unsafe fix, renames it to ``NEURON_RT_VISIBLE_CORES``. The accelerator target only reports it.

    ## Why is this bad?
    The Neuron runtime ignores ``CUDA_VISIBLE_DEVICES``; core selection is ``NEURON_RT_VISIBLE_CORES``
    (``NEURON_RT_NUM_CORES`` for a count).

    ## Example
    ```python
    os.environ["CUDA_VISIBLE_DEVICES"] = str(local_rank)
    ```
    Use instead:
    ```python
    os.environ["NEURON_RT_VISIBLE_CORES"] = str(local_rank)
    ```

    ## Fix safety
    Unsafe: the values mean different things. CUDA takes a comma list of GPU indices ("0,1"); the Neuron
    runtime takes logical NeuronCore indices, documented as ranges ("0-1"), and a GPU index is not a core
    index (4 cores per Trainium2 chip at LNC=2). Also, ``init_process_group`` sets the variable from
    ``LOCAL_RANK`` itself when it is unset, so under ``torchrun`` the line can usually be deleted.

    ## References
    - shared/torchneuron.md sections 1.4 and 6
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html
    """

    CODE = "NP505"
    NAME = "cuda-visible-devices"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = (
        "CUDA_VISIBLE_DEVICES has no effect on Trainium: use NEURON_RT_VISIBLE_CORES (values are NeuronCore "
        "indices or ranges like \"0-3\"; init_process_group sets it from LOCAL_RANK when unset)"
    )
    TRIGGERS = (CUDA_VISIBLE_DEVICES,)

    VALID = [
        Valid('import os\nos.environ["NEURON_RT_VISIBLE_CORES"] = "0-3"\n'),
        Valid('"""Set CUDA_VISIBLE_DEVICES before running."""\n'),
    ]
    INVALID = [
        Invalid(
            "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = str(local_rank)\ngpus = os.environ.get('CUDA_VISIBLE_DEVICES', '')\n",
            "import os\nos.environ['NEURON_RT_VISIBLE_CORES'] = str(local_rank)\ngpus = os.environ.get('NEURON_RT_VISIBLE_CORES', '')\n",
            unsafe_fixes=True,
        ),
        Invalid("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n", None),
        Invalid("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n", None, target="accelerator", unsafe_fixes=True),
    ]

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node in self._prose or string_value(node) != CUDA_VISIBLE_DEVICES:
            return
        if self.context.target == "accelerator":
            self.report(node)
            return
        self.report(node, replacement=replace_string(node, NEURON_RT_VISIBLE_CORES), safety="unsafe")


class GpuCountWorldSize(PythonRule):
    """Reports ``torch.cuda.device_count()`` used as a world size or process count.

    ## What it does
    Finds ``torch.cuda.device_count()`` assigned to a name like ``world_size`` / ``ngpus_per_node`` /
    ``nprocs``, or passed as ``nprocs=`` / ``world_size=`` (``mp.spawn(main, nprocs=torch.cuda.device_count())``),
    and reports the number of workers a Trainium host needs. NP201 renames the call itself.

    ## Why is this bad?
    On Trainium the unit of data parallelism is the logical NeuronCore, not the chip: a trn2.48xlarge has
    16 chips but 64 NeuronCores at LNC=2. Batch sizes, learning-rate scaling and mesh shapes written for
    8 GPUs need review.

    ## Example
    ```python
    mp.spawn(main, nprocs=torch.cuda.device_count())
    ```
    Use instead:
    ```python
    mp.spawn(main, nprocs=torch.neuron.device_count())  # logical NeuronCores: 64 on trn2.48xlarge
    ```

    ## Fix safety
    No fix of its own (NP201 does the rename); the advice is about the numbers around the call.

    ## References
    - shared/torchneuron.md sections 1.4 and 6
    """

    CODE = "NP506"
    NAME = "gpu-count-world-size"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = "GPU count used as {what}: " + CORES_ADVICE
    TRIGGERS = ("device_count",)

    VALID = [Valid("import torch\nif torch.cuda.device_count() > 1:\n    pass\n")]
    INVALID = [
        Invalid("import torch\nimport torch.multiprocessing as mp\nmp.spawn(main, nprocs=torch.cuda.device_count())\n"),
        Invalid("import torch\nworld_size = torch.cuda.device_count()\n", message_contains="64 on a trn2.48xlarge"),
        Invalid("from torch.cuda import device_count\nngpus_per_node = device_count()\n", target="accelerator"),
    ]

    def _is_count(self, node: cst.BaseExpression) -> bool:
        return isinstance(node, cst.Call) and self.context.qualname(node.func) == "torch.cuda.device_count"

    def visit_Assign(self, node: cst.Assign) -> None:
        if not self._is_count(node.value):
            return
        for target in node.targets:
            name = last_segment(target.target)
            if name and WORLD_SIZE_NAME_RE.match(name):
                self.report(node.value, self.MESSAGE.format(what=f"`{name}`"))
                return

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and WORLD_SIZE_NAME_RE.match(node.keyword.value) and self._is_count(node.value):
            self.report(node.value, self.MESSAGE.format(what=f"`{node.keyword.value}=`"))


class CudaEnvVar(_SkipProse):
    """Reports ``NCCL_*``, ``PYTORCH_CUDA_ALLOC_CONF``, ``CUDA_LAUNCH_BLOCKING`` and similar settings.

    ## What it does
    Finds environment-variable names of NCCL and of the CUDA runtime/allocator in Python strings
    (``os.environ["NCCL_DEBUG"] = "INFO"``, ``os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")``)
    and reports that they have no effect on Trainium, with the Neuron equivalent where one exists.

    ## Why is this bad?
    They do nothing there, and leaving them suggests tuning that is not happening (for example an NCCL
    timeout or debug level while debugging a hang).

    ## Example
    ```python
    os.environ["NCCL_DEBUG"] = "INFO"
    os.environ["CUDA_LAUNCH_BLOCKING"] = "1"
    ```
    Use instead:
    ```python
    os.environ["NEURON_LAUNCH_BLOCKING"] = "1"
    ```

    ## Fix safety
    No fix: removing a line of configuration is left to the user.

    ## References
    - shared/torchneuron.md sections 1.1, 6 and 10
    """

    CODE = "NP507"
    NAME = "cuda-env-var"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = "`{name}` has no effect on Trainium: {advice}"
    TRIGGERS = ("NCCL_", *CUDA_ENV_ADVICE)

    VALID = [Valid('import os\nos.environ["NEURON_RT_VISIBLE_CORES"] = "0"\nprint("NCCL_DEBUG")\n')]
    INVALID = [
        Invalid('import os\nos.environ["NCCL_DEBUG"] = "INFO"\n', message_contains="NCCL is not used"),
        Invalid('import os\nos.environ.setdefault("CUDA_LAUNCH_BLOCKING", "1")\n', message_contains="NEURON_LAUNCH_BLOCKING"),
    ]

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if node in self._prose:
            return
        value = string_value(node)
        if value is None:
            return
        if value in CUDA_ENV_ADVICE:
            self.report(node, self.MESSAGE.format(name=value, advice=CUDA_ENV_ADVICE[value]))
        elif NCCL_ENV_RE.match(value):
            self.report(node, self.MESSAGE.format(name=value, advice=NCCL_ENV_ADVICE))


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
    - shared/torchneuron.md section 6
    - https://docs.pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead
    """

    CODE = "NP508"
    NAME = "data-parallel"
    SEVERITY = "warning"
    EFFORT = "medium"
    MESSAGE = (
        "`DataParallel` is single-process multi-device, which Trainium does not support: use "
        "DistributedDataParallel with one process per NeuronCore (torchrun --nproc_per_node=<cores>)"
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


class PointToPoint(PythonRule):
    """Reports point-to-point communication (``dist.send/recv/isend/irecv/batch_isend_irecv``).

    ## What it does
    Finds references to ``torch.distributed`` point-to-point operations (``send``, ``recv``, ``isend``,
    ``irecv``, ``batch_isend_irecv``, ``P2POp``, ``recv_anysource``) and ``monitored_barrier``.

    ## Why is this bad?
    The ``neuron`` process-group backend does not implement them: they raise ``NotImplementedError``.

    ## Example
    ```python
    if rank == 0:
        dist.send(t, dst=1)
    else:
        dist.recv(t, src=0)
    ```
    Use instead:
    ```python
    dist.broadcast(t, src=0)  # or all_gather / all_to_all_single with even splits
    ```

    ## Fix safety
    No fix: the communication pattern has to be redesigned around collectives.

    ## References
    - shared/torchneuron.md sections 6 and 7
    """

    CODE = "NP509"
    NAME = "p2p-communication"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "{what} (`dist.{name}`) is not supported by the neuron backend: use collectives (broadcast, all_gather, all_to_all_single)"
    TRIGGERS = ("send", "recv", "P2POp", "monitored_barrier")

    VALID = [
        Valid("import torch.distributed as dist\ndist.broadcast(t, src=0)\n"),
        Valid("sock.send(data)\n"),
    ]
    INVALID = [
        Invalid("import torch.distributed as dist\nif rank == 0:\n    dist.send(t, dst=1)\nelse:\n    dist.recv(t, src=0)\n"),
        Invalid("from torch.distributed import P2POp, batch_isend_irecv, isend\nreqs = batch_isend_irecv([P2POp(isend, t, 1)])\n"),
        Invalid("import torch\ntorch.distributed.monitored_barrier()\n"),
    ]

    def _check(self, node: cst.BaseExpression) -> None:
        if not self.context.is_reference(node):
            return
        qualname = self.context.qualname(node)
        if qualname is None:
            return
        for prefix in (DIST, DIST + "distributed_c10d."):
            name = qualname[len(prefix):] if qualname.startswith(prefix) else None
            if name in P2P_OPS:
                self.report(node, self.MESSAGE.format(what=P2P_OPS[name], name=name))
                return

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._check(node)

    def visit_Name(self, node: cst.Name) -> None:
        self._check(node)


def _is_default_group(node: cst.BaseExpression) -> bool:
    if isinstance(node, cst.Name) and node.value == "None":
        return True
    name = dotted_name(node) or ""
    return name.endswith("group.WORLD") or name.endswith("GroupMember.WORLD")


class BarrierNonDefaultGroup(PythonRule):
    """Reports ``dist.barrier(group=...)`` on a group other than the default one.

    ## What it does
    Finds ``torch.distributed.barrier`` calls with a ``group`` argument that is not ``None`` or
    ``group.WORLD``.

    ## Why is this bad?
    The neuron backend implements ``barrier`` only for the default group ("Barrier is implemented only for
    default group").

    ## Example
    ```python
    dist.barrier(group=tp_group)
    ```
    Use instead:
    ```python
    dist.barrier()  # or an all_reduce of a small tensor on tp_group
    ```

    ## Fix safety
    No fix: a barrier on every rank is a different synchronisation.

    ## References
    - shared/torchneuron.md section 6
    """

    CODE = "NP510"
    NAME = "barrier-non-default-group"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "the neuron backend implements barrier only on the default group: use dist.barrier() or an all_reduce on the group"
    TRIGGERS = ("barrier",)

    VALID = [
        Valid("import torch.distributed as dist\ndist.barrier()\ndist.barrier(group=dist.group.WORLD)\n"),
    ]
    INVALID = [Invalid("import torch.distributed as dist\ndist.barrier(group=tp_group)\n")]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) not in (DIST + "barrier", DIST + "distributed_c10d.barrier"):
            return
        group = arg_named(node, "group", 0)
        if group is not None and not _is_default_group(group.value):
            self.report(node)


class UnevenAllToAll(PythonRule):
    """Reports ``all_to_all_single`` with explicit split sizes.

    ## What it does
    Finds ``torch.distributed.all_to_all_single`` calls that pass ``output_split_sizes`` or
    ``input_split_sizes`` (other than ``None``).

    ## Why is this bad?
    The neuron backend supports only even splits ("alltoall_base: Only even split sizes are supported"),
    and all-to-all only for world sizes 4, 8, 16 or multiples of 32 (MoE token routing usually has
    uneven splits).

    ## Example
    ```python
    dist.all_to_all_single(out, inp, output_split_sizes=recv_counts, input_split_sizes=send_counts)
    ```
    Use instead:
    ```python
    # pad every rank's chunk to the same capacity, then
    dist.all_to_all_single(out, inp)
    ```

    ## Fix safety
    No fix: padding to a fixed capacity changes the algorithm.

    ## References
    - shared/torchneuron.md section 6
    """

    CODE = "NP511"
    NAME = "uneven-all-to-all"
    SEVERITY = "warning"
    EFFORT = "high"
    MESSAGE = (
        "the neuron backend supports all_to_all_single only with even splits (and world sizes 4, 8, 16 or "
        "multiples of 32): pad chunks to a fixed capacity"
    )
    TRIGGERS = ("all_to_all_single",)

    VALID = [Valid("import torch.distributed as dist\ndist.all_to_all_single(out, inp)\n")]
    INVALID = [
        Invalid(
            "import torch.distributed as dist\n"
            "dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send)\n"
        )
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) not in (DIST + "all_to_all_single", DIST + "distributed_c10d.all_to_all_single"):
            return
        for keyword, position in (("output_split_sizes", 2), ("input_split_sizes", 3)):
            arg = arg_named(node, keyword, position)
            if arg is not None and not (isinstance(arg.value, cst.Name) and arg.value.value == "None"):
                self.report(node)
                return
