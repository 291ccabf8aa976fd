"""Communication the neuron process-group backend does not support: NP509 ``p2p-communication``
(send / recv / isend / irecv / batch_isend_irecv, monitored_barrier), NP510 ``barrier-non-default-group``
and NP511 ``uneven-all-to-all``."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.distributed.tables import DIST, P2P_OPS
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.names import dotted_name, is_none
from neuron_port.rules.spec import Invalid, PythonRule, Valid


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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    """

    CODE = "NP509"
    NAME = "p2p-communication"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = (
        "{what} (`dist.{name}`) is not supported by the neuron backend: use collectives (broadcast, all_gather, "
        "all_to_all_single)"
    )
    TRIGGERS = (r"\.[ \t]*(?:send|recv|isend|irecv|batch_isend_irecv|P2POp|recv_anysource|monitored_barrier)\b", r"import\b[^\n]*\b(?:send|recv|isend|irecv|batch_isend_irecv|P2POp|recv_anysource|monitored_barrier)\b", r"send(?<=[\s(,]send)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"recv(?<=[\s(,]recv)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"isend(?<=[\s(,]isend)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"irecv(?<=[\s(,]irecv)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"batch_isend_irecv(?<=[\s(,]batch_isend_irecv)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"P2POp(?<=[\s(,]P2POp)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"recv_anysource(?<=[\s(,]recv_anysource)\b[ \t]*(?:[,)\\]|as\b|\r?$)", r"monitored_barrier(?<=[\s(,]monitored_barrier)\b[ \t]*(?:[,)\\]|as\b|\r?$)")

    VALID = [
        Valid("import torch.distributed as dist\ndist.broadcast(t, src=0)\n"),
        Valid("sock.send(data)\n"),
    ]
    INVALID = [
        Invalid(
            "import torch.distributed as dist\nif rank == 0:\n    dist.send(t, dst=1)\nelse:\n    dist.recv(t, src=0)\n"
        ),
        Invalid(
            "from torch.distributed import P2POp, batch_isend_irecv, isend\n"
            "reqs = batch_isend_irecv([P2POp(isend, t, 1)])\n"
        ),
        Invalid("import torch\ntorch.distributed.monitored_barrier()\n"),
    ]

    def _check(self, node: cst.BaseExpression) -> None:
        qualname = self.context.qualname(node)  # None too for what is not a reference (a hash each: not asked)
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
    if is_none(node):
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
    """

    CODE = "NP510"
    NAME = "barrier-non-default-group"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = (
        "the neuron backend implements barrier only on the default group: use dist.barrier() or an all_reduce "
        "on the group"
    )
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
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
        qualname = self.context.qualname(node.func)
        if qualname not in (DIST + "all_to_all_single", DIST + "distributed_c10d.all_to_all_single"):
            return
        for keyword, position in (("output_split_sizes", 2), ("input_split_sizes", 3)):
            arg = arg_named(node, keyword, position)
            if arg is not None and not is_none(arg.value):
                self.report(node)
                return
