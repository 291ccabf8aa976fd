"""NP502 ``distributed-set-device``: ``set_device(local_rank)`` in a torchrun-style worker (removed on the
neuron target, where each process sees one NeuronCore)."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.device_placement.ranks import is_rank_expression, rank_devices
from neuron_port.rules.distributed.prose import SkipProse
from neuron_port.rules.distributed.tables import SET_DEVICE_QUALNAMES
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import last_segment, source_of
from neuron_port.rules.spec import OTHER_RULES, Invalid, Valid


class DistributedSetDevice(SkipProse):
    """Removes ``set_device(local_rank)``: under torchrun a process has one NeuronCore, ``neuron``.

    ## What it does
    Finds ``torch.cuda.set_device(...)`` (and the ``torch.neuron.set_device`` /
    ``torch.accelerator.set_device_index`` spellings) in a file that calls ``init_process_group``, or
    whose argument is a rank. When the argument is a rank (a name or attribute whose last segment is
    ``rank``, ``local_rank``, ``*_local_rank``, ``gpu``, ``gpu_id`` or ``device_id``,
    ``int(os.environ["LOCAL_RANK"])``, or an alias of one; NP107 has the rule) and the call is a statement
    of its own, the neuron target offers to delete it (``pass`` when it is the only statement of its
    block); NP201 leaves that call alone. A ``torch.cuda.set_device`` whose argument is not a rank is
    NP201's alone (renamed; one finding per call); other calls are reported: a ``torch.neuron`` spelling
    with a non-rank argument is left alone (what NP201's rename gives), and on the accelerator target the call
    is what CUDA needs.

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
    own is reported only. Either way it is one of the file's rank devices, which change together or not
    at all (NP107): a ``set_device(rank)`` that is not removed safely makes every rank fix of the file
    unsafe, and NP107 says so.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html (init_process_group behaviour, one device per process)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
    """

    CODE = "NP502"
    NAME = "distributed-set-device"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "each process has one NeuronCore: drop `set_device({arg})`{extra}"
    TRIGGERS = ("set_device",)

    VALID = [
        Valid("import torch\ntorch.cuda.set_device(1)\n"),  # not distributed
        Valid("import torch.distributed as dist\ndist.init_process_group('neuron')\n"),
        # not a rank, torch.cuda spelling: NP201 renames it, and that is the only finding on the line
        Valid("import torch\nimport torch.distributed as dist\ndist.init_process_group('nccl')\n"
              "device = torch.device('neuron')\ntorch.cuda.set_device(device)\n"),
        # not a rank, the neuron spelling (what NP201's rename gives): nothing asks to drop it again
        Valid("import torch\nimport torch.distributed as dist\ndist.init_process_group('neuron')\n"
              "torch.neuron.set_device(device)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch.distributed as dist\n"
            "torch.cuda.set_device(args.local_rank)\ndist.init_process_group('nccl')\n",
            "import torch\nimport torch.distributed as dist\ndist.init_process_group('nccl')\n",
            message_contains="before init_process_group",
            not_runnable=OTHER_RULES,
        ),
        Invalid(
            "import torch\nimport torch.distributed as dist\n\n\ndef main(local_rank):\n"
            "    dist.init_process_group('neuron')\n    # one GPU per process\n"
            "    torch.cuda.set_device(local_rank)\n    train()\n",
            "import torch\nimport torch.distributed as dist\n\n\ndef main(local_rank):\n"
            "    dist.init_process_group('neuron')\n    train()\n",
            message_contains="Invalid device id",
            runs=True,
        ),
        Invalid(
            "import os\nimport torch\ntorch.neuron.set_device(int(os.environ['LOCAL_RANK']))\nmain()\n",
            "import os\nimport torch\nmain()\n",
            unsafe_fixes=True,
        ),
        Invalid(
            # the only statement of its block becomes `pass`
            "import torch\nimport torch.distributed as dist\ndist.init_process_group('neuron')\n"
            "if torch.cuda.is_available():\n    torch.cuda.set_device(local_rank)\n",
            "import torch\nimport torch.distributed as dist\ndist.init_process_group('neuron')\n"
            "if torch.cuda.is_available():\n    pass\n",
            runs=True,
        ),
        Invalid(
            # not a statement of its own: reported only
            "import torch\nok = torch.cuda.set_device(gpu) or True\n",
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
            """
            import os
            import torch
            import torch.distributed as dist

            dist.init_process_group('neuron')
            local_rank = int(os.environ['LOCAL_RANK'])
            torch.cuda.set_device(local_rank)
            x = torch.ones(2, device='neuron')
            dist.all_reduce(x)
            dist.destroy_process_group()
            """,
            """
            import os
            import torch
            import torch.distributed as dist

            dist.init_process_group('neuron')
            local_rank = int(os.environ['LOCAL_RANK'])
            x = torch.ones(2, device='neuron')
            dist.all_reduce(x)
            dist.destroy_process_group()
            """,
            runs=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._calls: list[tuple[cst.Call, bool]] = []
        self._init_seen = False

    def _on_call(self, node: cst.Call) -> None:
        last = last_segment(node.func)
        if last == "init_process_group":
            self._init_seen = True
            return
        if self.context.qualname(node.func) in SET_DEVICE_QUALNAMES and node.args:
            self._calls.append((node, self._init_seen))

    def leave_Module(self, original_node: cst.Module) -> None:
        # on the neuron target the rank question and the removal are the file's rank-device analysis
        ranks = rank_devices(self.context, original_node) if self._calls and self.context.target == "neuron" else None
        for node, after_init in self._calls:
            arg = arg_named(node, "device", 0) or node.args[0]
            rank = not arg.star and (ranks.sets_rank_device(arg.value, node) if ranks is not None
                                     else is_rank_expression(arg.value))
            source = source_of(arg.value)
            source = source if len(source) <= 20 else "..."
            if not (self._init_seen or rank or "rank" in source.lower()):
                continue
            extra = (
                "; called before init_process_group: too early"
                if self._init_seen and not after_init
                else ""
            )
            if rank and ranks is not None:
                extra += "; renamed: \"Invalid device id\" on ranks > 0"
                message = self.MESSAGE.format(arg=source, extra=extra)
                fix = ranks.set_device_fixes.get(node)
                if fix is not None:  # the statement goes (`pass` if its block would be left empty)
                    statement, replacement = fix
                    self.report(statement, message + ranks.note(), replacement=replacement, safety=ranks.safety)
                    continue
                self.report(node, message)
                continue
            if self.context.target == "neuron" and self.context.qualname(node.func) in (
                    "torch.cuda.set_device", "torch.neuron.set_device"):
                # not a rank: NP201's rename is the one finding on this call (one cause, one finding), and
                # what it renames is not asked to be dropped after the fix (the fixed point, issue 34)
                continue
            self.report(node, f"each process has one NeuronCore, `neuron`: drop `set_device({source})` where it "
                        f"names a rank{extra}")
