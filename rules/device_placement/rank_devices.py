"""NP107 ``rank-device-index``: integer rank devices (``.to(rank)``, ``torch.device(rank)``, ``device=rank``,
FSDP's ``device_id=rank``) and the one finding that explains a file whose rank devices are left alone."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.device_placement.ranks import (
    INDEX_KEYWORD_CALLEES,
    is_rank_expression,
    kind_rank_fstring,
    rank_devices,
)
from neuron_port.rules.device_placement.tables import ONE_CORE_PER_PROCESS
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import last_segment, source_of
from neuron_port.rules.helpers.nodes import replace_string, string_value
from neuron_port.rules.spec import FRAGMENT, OTHER_RULES, Invalid, PythonRule, Valid

_DDP = "from torch.nn.parallel import DistributedDataParallel as DDP\n"
_INIT = "import os\nimport torch\nimport torch.distributed as dist\ndist.init_process_group('nccl')\n"


class RankDeviceIndex(PythonRule):
    """Rewrites integer rank devices (``.to(local_rank)``, ``torch.device(rank)``, ``device=local_rank``) to
    the process's one NeuronCore, and explains a file whose rank devices cannot all be rewritten.

    ## What it does
    Finds devices given as the process's rank, as an integer: ``x.to(rank)``, ``x.to(device=local_rank)``,
    ``torch.device(local_rank)``, ``torch.device(kind, local_rank)``, ``device=local_rank`` in any call, and
    ``device_id=local_rank`` of FSDP and ``init_process_group``. On the neuron target they become
    ``"neuron"`` (``.to("neuron")``, ``torch.device("neuron")``, ``device="neuron"``; ``torch.device(kind)``)
    and ``device_id=0``.

    A rank is a name or attribute whose last segment is ``rank``, ``local_rank``, ``*_local_rank``
    (``ddp_local_rank``), ``gpu``, ``gpu_id`` or ``device_id`` (``args.gpu``, ``self.gpu_id``), a
    ``LOCAL_RANK`` / ``RANK`` read from ``os.environ`` (``int(os.environ["LOCAL_RANK"])``,
    ``os.environ.get("LOCAL_RANK", 0)``), ``dist.get_rank()``, ``int()`` / ``str()`` of one, or
    ``<rank> % n``; a name bound by a ``for`` loop or comprehension (``for gpu in range(n)``) is not. A
    name (or ``self.x``) every assignment of which in the file is a rank, and that is no function
    parameter, is one too (``device = int(os.environ["LOCAL_RANK"])`` makes ``.to(device)`` a rank
    device). NP101, NP103, NP106, NP201, NP502 and NP503 use the same rule.

    The decision is per file. The rank devices of a file are written many ways, each rewritten by its own
    rule: ``f"cuda:{rank}"`` (NP101), ``.cuda(rank)`` (NP103), ``storage.cuda(rank)`` in ``map_location``
    (NP106), ``torch.cuda.memory_allocated(rank)`` (NP201), ``set_device(rank)`` (NP502), ``device_ids=[rank]``
    (NP503) and the integer forms above (this rule). Either all of them become the process's device or
    none does: when one cannot be rewritten safely (``set_device(rank)`` inside an expression or in a
    file that does not call ``init_process_group``, ``device_ids=[rank, rank + 1]``, ``storage.cuda(rank,
    non_blocking=True)``, ``.cuda(rank)`` in a file that defines its own ``cuda`` method), every rank fix of
    the file is marked unsafe and this rule reports that blocker once, saying why.

    ## Why is this bad?
    An integer device is an index of the current accelerator: on Trainium ``.to(local_rank)`` is
    ``neuron:<local_rank>``. Under torchrun each process sees exactly one NeuronCore (TorchNeuron's
    ``init_process_group`` sets ``NEURON_RT_VISIBLE_CORES=<LOCAL_RANK>``), so that device does not exist on
    any rank but 0. Rewriting only some of a file's rank devices is worse: with ``device_ids=[0]`` but
    ``model.to(rank)``, rank 1 fails with "Expected all tensors to be on the same device, but found at
    least two devices, neuron:1 and neuron:0!".

    ## Example
    ```python
    rank = int(os.environ["LOCAL_RANK"])
    model = nn.Linear(4, 4).to(rank)
    ddp = DDP(model, device_ids=[rank])
    noise = torch.randn(2, 4, device=rank)
    ```
    Use instead:
    ```python
    rank = int(os.environ["LOCAL_RANK"])
    model = nn.Linear(4, 4).to("neuron")
    ddp = DDP(model, device_ids=[0])  # NP503
    noise = torch.randn(2, 4, device="neuron")
    ```

    ## Fix safety
    Safe when every rank device of the file is rewritten: ``neuron`` is ``neuron:0``, the process's only
    NeuronCore, on every rank, and on rank 0, where the old index was valid, it is the same device. A
    single-process script that picks a core with ``--gpu 3`` now runs on the first visible core (set
    ``NEURON_RT_VISIBLE_CORES=3`` instead). Unsafe, with the finding that names the blocker, when some rank
    device of the file cannot be rewritten: rewriting only the others would put the process's tensors on
    two devices (``neuron`` and ``neuron:<rank>``), so that finding asks to rewrite the blocker by hand
    and run again. The accelerator target keeps the index, which is what CUDA needs, so the rule runs on
    the neuron target only.

    TorchNeuron's ``init_process_group`` pins each process to one NeuronCore
    (``NEURON_RT_VISIBLE_CORES`` from ``LOCAL_RANK`` under torchrun; a program started with
    ``torch.multiprocessing.spawn``, whose rank is the spawned function's first parameter, is pinned to
    its position among the ranks of its host), so ``neuron`` is that core and ``neuron:<rank>`` is
    invalid for every rank but 0; the messages say "each process sees one NeuronCore".

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html (one NeuronCore per process; ``init_process_group`` and
      ``NEURON_RT_VISIBLE_CORES``)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
    - https://docs.pytorch.org/docs/stable/tensor_attributes.html#torch-device (an integer is an index of
      the current accelerator)
    """

    CODE = "NP107"
    NAME = "rank-device-index"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`{old}` puts tensors on `neuron:<rank>`: use `{new}`; " + ONE_CORE_PER_PROCESS
    TARGETS = ("neuron",)
    TRIGGERS = ("rank", "RANK", "gpu", "device_id")

    VALID = [
        Valid("x = x.to(device)\ny = torch.zeros(2, device=dev)\n"),
        Valid("for gpu in range(4):\n    parts[gpu] = parts[gpu].to(gpu)\n"),
        Valid("model = model.to('neuron')\nddp = DDP(model, device_ids=[0])\n"),
        Valid("def run(rank, device):\n    return x.to(device)\n"),  # a parameter is no alias
        Valid("if rank == 0:\n    print(rank)\n"),
    ]
    INVALID = [
        Invalid(
            _INIT + _DDP + "rank = int(os.environ['LOCAL_RANK'])\n"
            "model = nn.Linear(4, 4).to(rank)\nddp = DDP(model, device_ids=[rank])\n"
            "noise = torch.randn(2, 4, device=rank)\n",
            _INIT + _DDP + "rank = int(os.environ['LOCAL_RANK'])\n"
            "model = nn.Linear(4, 4).to(\"neuron\")\nddp = DDP(model, device_ids=[rank])\n"
            "noise = torch.randn(2, 4, device=\"neuron\")\n",
            message_contains="one NeuronCore",
            not_runnable=OTHER_RULES,
        ),
        Invalid(
            "import os\nimport torch\ndevice = int(os.environ['LOCAL_RANK'])\nx = x.to(device, non_blocking=True)\n"
            "g = torch.device(ddp_local_rank)\nm = FSDP(model, device_id=self.gpu_id)\n"
            "h = torch.device(args.device_type, local_rank)\n",
            "import os\nimport torch\ndevice = int(os.environ['LOCAL_RANK'])\n"
            "x = x.to(\"neuron\", non_blocking=True)\ng = torch.device(\"neuron\")\nm = FSDP(model, device_id=0)\n"
            "h = torch.device(args.device_type)\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(  # a device that reaches device_id= through a name keeps its index (0, the process's core)
            "import os\nimport torch\nimport torch.distributed as dist\n"
            "local_rank = int(os.environ['LOCAL_RANK'])\ndevice = torch.device('cuda', local_rank)\n"
            "dist.init_process_group(backend='nccl', device_id=device)\n",
            "import os\nimport torch\nimport torch.distributed as dist\n"
            "local_rank = int(os.environ['LOCAL_RANK'])\ndevice = torch.device('neuron', 0)\n"
            "dist.init_process_group(backend='nccl', device_id=device)\n",
            message_contains="torch.device('neuron', 0)",
            not_runnable=OTHER_RULES,
        ),
        Invalid(
            _INIT + "local_rank = int(os.environ['LOCAL_RANK'])\ndevice_type = args.device\n"
            "x = x.to(f\"{device_type}:{local_rank}\")\n",
            _INIT + "local_rank = int(os.environ['LOCAL_RANK'])\ndevice_type = args.device\n"
            "x = x.to(f\"{device_type}\")\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            _INIT + "local_rank = int(os.environ['LOCAL_RANK'])\n"
            "dist.init_process_group('nccl', device_id=torch.device(local_rank))\n",
            _INIT + "local_rank = int(os.environ['LOCAL_RANK'])\n"
            "dist.init_process_group('nccl', device_id=torch.device(\"neuron\", 0))\n",
            not_runnable=OTHER_RULES,
        ),
        Invalid(
            # a set_device(rank) that NP502 cannot remove: no rank device of the file changes
            _INIT + "ok = torch.cuda.set_device(args.gpu) or True\nmodel = model.to(args.gpu)\n",
            None,
            message_contains="change together or not at all",
        ),
        Invalid(
            _INIT + "ok = torch.cuda.set_device(args.gpu) or True\nmodel = model.to(args.gpu)\n",
            _INIT + "ok = torch.cuda.set_device(args.gpu) or True\nmodel = model.to(\"neuron\")\n",
            unsafe_fixes=True,
        ),
        Invalid(
            """
            import os
            import torch
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP

            dist.init_process_group('neuron')
            rank = int(os.environ['LOCAL_RANK'])
            model = torch.nn.Linear(4, 4).to(rank)
            ddp = DDP(model)
            noise = torch.randn(2, 4, device=rank)
            ddp(noise).sum().backward()
            dist.destroy_process_group()
            """,
            """
            import os
            import torch
            import torch.distributed as dist
            from torch.nn.parallel import DistributedDataParallel as DDP

            dist.init_process_group('neuron')
            rank = int(os.environ['LOCAL_RANK'])
            model = torch.nn.Linear(4, 4).to("neuron")
            ddp = DDP(model)
            noise = torch.randn(2, 4, device="neuron")
            ddp(noise).sum().backward()
            dist.destroy_process_group()
            """,
            runs=True,
        ),
        Invalid(
            """
            import os
            import torch
            local_rank = int(os.environ['LOCAL_RANK'])
            model = torch.nn.Linear(2, 2).to(local_rank)
            g = torch.Generator(device=local_rank)
            t = torch.randn(2, 2, device=local_rank, generator=g)
            print(model(t).device)
            """,
            """
            import os
            import torch
            local_rank = int(os.environ['LOCAL_RANK'])
            model = torch.nn.Linear(2, 2).to("neuron")
            g = torch.Generator(device="neuron")
            t = torch.randn(2, 2, device="neuron", generator=g)
            print(model(t).device)
            """,
            runs=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        # (node to replace, the rank expression, how to build the replacement)
        self._candidates: list[tuple[cst.CSTNode, cst.BaseExpression, str]] = []
        self._maybe = False

    def visit_Call(self, node: cst.Call) -> None:
        if not self._maybe:  # a rank among the arguments: the file may have rank devices of other rules
            self._maybe = any(is_rank_expression(a.value) for a in node.args) or any(
                isinstance(a.value, (cst.List, cst.Tuple)) and any(
                    isinstance(e, cst.Element) and is_rank_expression(e.value) for e in a.value.elements)
                for a in node.args)
        qualname = self.context.qualname(node.func) or ""
        last = last_segment(node.func)
        if last in ("to", "cuda") and isinstance(node.func, cst.Attribute) and not qualname.startswith("torch"):
            if last == "to":
                arg = arg_named(node, "device", 0)
                if arg is not None and not arg.star:
                    self._candidates.append((arg, arg.value, "device"))
            return  # .cuda(rank) is NP103's
        if qualname.startswith("torch.cuda.") or last in ("DistributedDataParallel", "DDP"):
            return  # NP201's and NP503's
        if qualname == "torch.device":
            positional = [a for a in node.args if a.keyword is None and not a.star]
            if len(node.args) == 1 and positional:
                self._candidates.append((node, positional[0].value, "torch-device"))
            elif len(node.args) == 2 and len(positional) == 2:
                self._candidates.append((node, positional[1].value, "drop-index"))
            return
        for arg in node.args:
            if arg.keyword is None or arg.star:
                continue
            if arg.keyword.value == "device":
                self._candidates.append((arg, arg.value, "device"))
            elif arg.keyword.value in INDEX_KEYWORD_CALLEES and last in INDEX_KEYWORD_CALLEES[arg.keyword.value]:
                self._candidates.append((arg, arg.value, "index"))

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        first = node.parts[0] if node.parts else None
        if isinstance(first, cst.FormattedStringText) and first.value == "cuda:":
            self._maybe = True  # f"cuda:{rank}" (NP101's): the analysis tells whether it is a rank
        kind_rank = kind_rank_fstring(node)
        if kind_rank is not None and self.context.target == "neuron" and not is_rank_expression(kind_rank[0]):
            # f"{device_type}:{local_rank}": "neuron:<rank>" once device_type is "neuron"; the type alone
            self._candidates.append((node, kind_rank[1], "drop-fstring-index"))

    def leave_Module(self, original_node: cst.Module) -> None:
        if not (self._candidates or self._maybe):
            return
        ranks = rank_devices(self.context, original_node)
        for node, index, how in self._candidates:
            if not ranks.is_rank(index):
                continue
            replacement = self._replacement(node, how, ranks)
            if replacement is None:
                continue
            self.report(
                node,
                self.MESSAGE.format(old=source_of(node).strip().rstrip(","), new=source_of(replacement).strip())
                + ranks.note(),
                replacement=replacement,
                safety=ranks.safety,
            )
        if ranks.blockers and ranks.sites > len(ranks.blockers):
            first = ranks.blockers[0]
            self.report(
                first.node,
                f"rank devices change together or not at all: `{first.what}` {first.why}; rewrite it by hand",
                severity="warning",
            )

    @staticmethod
    def _replacement(node: cst.CSTNode, how: str, ranks) -> Optional[cst.CSTNode]:
        neuron = cst.SimpleString('"neuron"')
        if how == "drop-fstring-index":  # f"{kind}:{<rank>}" -> f"{kind}"
            assert isinstance(node, cst.FormattedString)
            if ranks.needs_index(node):
                return node.with_changes(parts=[node.parts[0], node.parts[1], cst.FormattedStringText("0")])
            return node.with_changes(parts=[node.parts[0]])
        if how == "index":  # device_id=<rank> -> device_id=0
            assert isinstance(node, cst.Arg)
            return node.with_changes(value=cst.Integer("0"))
        assert isinstance(node, cst.Call) or how == "device"
        if how == "drop-index":  # torch.device(kind, <rank>) -> torch.device(kind) (, 0 where an index is needed)
            assert isinstance(node, cst.Call)
            kind = node.args[0]
            literal = string_value(kind.value) if isinstance(kind.value, cst.SimpleString) else None
            if literal == "cuda":  # the whole expression, as NP101 writes it: never a half-renamed device
                kind = kind.with_changes(value=replace_string(kind.value, "neuron"))
            if not ranks.needs_index(node):
                return node.with_changes(args=[kind.with_changes(comma=cst.MaybeSentinel.DEFAULT)])
            return node.with_changes(args=[kind, node.args[1].with_changes(value=cst.Integer("0"))])
        if how == "torch-device":  # torch.device(<rank>) -> torch.device("neuron") (, 0 where an index is needed)
            assert isinstance(node, cst.Call)
            first = node.args[0].with_changes(value=neuron, keyword=None, equal=cst.MaybeSentinel.DEFAULT)
            if not ranks.needs_index(node):
                return node.with_changes(args=[first])
            return node.with_changes(args=[
                first.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                cst.Arg(value=cst.Integer("0"))])
        assert isinstance(node, cst.Arg)
        return node.with_changes(value=neuron)
