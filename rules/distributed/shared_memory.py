"""NP513 ``device-shared-memory``: a model or tensor moved to the device and then shared between processes
(``model.share_memory()``, or handed to a ``torch.multiprocessing`` Process / spawn): Hogwild-style training."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.kept_values import keep_device_value
from neuron_port.rules.helpers.names import dotted_name
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.spec import Invalid, PythonRule, Valid

# torch.multiprocessing entry points that pickle their ``args`` for the child processes
PROCESS_QUALNAMES = frozenset({"torch.multiprocessing.Process", "torch.multiprocessing.spawn",
                               "torch.multiprocessing.start_processes"})
SHARE_METHODS = frozenset({"share_memory", "share_memory_"})
ADVICE = "keep it on the CPU, or use DDP"


def _moves_to_device(call: cst.Call) -> bool:
    """``x.cuda(...)``, or ``x.to(d)`` / ``x.to(device=d)`` with ``d`` not the CPU and not a dtype."""
    func = call.func
    if not isinstance(func, cst.Attribute):
        return False
    if func.attr.value == "cuda":
        return True
    if func.attr.value != "to":
        return False
    device = arg_named(call, "device", 0)
    if device is None or device.star:
        return False
    value = device.value
    if isinstance(value, (cst.SimpleString, cst.FormattedString)):
        text = string_value(value) if isinstance(value, cst.SimpleString) else None
        return text is None or not text.startswith("cpu")
    if isinstance(value, cst.Call) and (dotted_name(value.func) or "").endswith("device") and value.args:
        first = value.args[0].value
        return not (isinstance(first, cst.SimpleString) and (string_value(first) or "").startswith("cpu"))
    name = dotted_name(value) or ""
    # a dtype (`.to(torch.float16)`) or a tensor's own dtype is no device
    return not (name.startswith("torch.") and name != "torch.device") and not name.endswith("dtype")


def _move_of(node: cst.BaseExpression) -> Optional[cst.Call]:
    """The device move the expression's value comes out of (``Net().to(dev)``, ``w.cuda().requires_grad_()``)."""
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if _moves_to_device(node):
            return node
        node = node.func.value
    return None


def _moved_value(node: cst.BaseExpression) -> bool:
    return _move_of(node) is not None


class DeviceSharedMemory(PythonRule):
    """Reports a model or tensor that is moved to the device and then shared with other processes.

    ## What it does
    Follows the values of one scope (a function body, or the module's top level) in order: a name bound to
    the result of a device move (``m = Net().to(device)``, ``w = torch.zeros(3).cuda()``), or a module moved
    in place (``model.to(device)`` as a statement), is on the device until it is bound again. The rule
    reports ``.share_memory()`` / ``.share_memory_()`` on such a value (or on a move itself,
    ``model.to(device).share_memory()``), and, when the scope never calls it, the value passed in the
    ``args`` of ``torch.multiprocessing.Process`` / ``spawn`` / ``start_processes``. The device is what
    the move says: ``"cpu"`` and dtypes are not moves; a variable device (``device = "cuda" if ... else
    "cpu"``) is, since on Trainium it is ``neuron``.

    ## Why is this bad?
    Hogwild-style training shares one model between worker processes through shared memory. CUDA
    tensors pass between processes by CUDA IPC (``Tensor.share_memory_()`` is a no-op for them and the
    pickler sends an IPC handle); a ``neuron`` tensor has neither, so PyTorch's pickler falls back to the
    CPU file-descriptor path and the process start fails with ``RuntimeError: _share_fd_: only available
    on CPU`` (``torch/multiprocessing/reductions.py``, ``reduce_storage``; the same holds for every
    PrivateUse1 device).

    ## Example
    ```python
    model = Net().to(device)
    model.share_memory()
    workers = [mp.Process(target=train, args=(model,)) for _ in range(4)]
    ```
    Use instead:
    ```python
    model = Net()  # the shared copy stays on the CPU; each worker moves its batches as it needs
    model.share_memory()
    workers = [mp.Process(target=train, args=(model,)) for _ in range(4)]
    ```
    or one process per NeuronCore (``torchrun --nproc_per_node=<cores>``) with ``DistributedDataParallel``.

    ## Fix safety
    No fix: which of the two designs fits (a CPU-resident shared model, or data parallelism) is the
    author's choice. Until it is made, the device the shared value was moved to keeps the choice the program
    makes without CUDA: its ``"cuda"`` and the tests that choose it are left as they are (one decision,
    reported at their lines), so the rewritten program still runs, on the CPU, instead of failing at the
    sharing on ``neuron``.

    ## References
    - https://docs.pytorch.org/docs/stable/notes/multiprocessing.html (Hogwild, sharing CUDA tensors)
    - https://github.com/pytorch/pytorch/blob/v2.13.0/torch/multiprocessing/reductions.py (``reduce_storage``)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html (one process
      per NeuronCore)
    """

    CODE = "NP513"
    NAME = "device-shared-memory"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "`{what}` shares a device value across processes; neuron tensors have no IPC (`_share_fd_`): " + ADVICE
    TRIGGERS = ("share_memory", "multiprocessing")

    VALID = [
        Valid("import torch.multiprocessing as mp\nmodel = Net()\nmodel.share_memory()\n"
              "p = mp.Process(target=train, args=(model,))\n"),
        Valid("model = Net().to('cpu')\nmodel.share_memory()\n"),
        Valid("model = Net().to(device)\nmodel = Net()\nmodel.share_memory()\n"),  # bound again: on the CPU
        Valid("w = torch.zeros(3).to(torch.float16)\nw.share_memory_()\n"),  # a dtype, not a device
        Valid("def a():\n    model = Net().cuda()\n\ndef b(model):\n    model.share_memory()\n"),  # another scope
    ]
    INVALID = [
        Invalid(
            "import torch\nimport torch.multiprocessing as mp\n"
            "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')\n"
            "model = torch.nn.Linear(4, 1).to(device)\nmodel.share_memory()\n"
            "p = mp.Process(target=train, args=(model,))\n",
            message_contains="keep it on the CPU",
        ),
        Invalid("model = Net()\nmodel.cuda()\nmodel.share_memory()\n"),
        Invalid("import torch\nw = torch.zeros(3).to('neuron').requires_grad_()\nw.share_memory_()\n"),
        Invalid("def main(device):\n    Net().to(device).share_memory()\n"),
        Invalid(
            "import torch.multiprocessing as mp\n\ndef main():\n    model = Net().to('neuron')\n"
            "    mp.spawn(train, args=(model, 3), nprocs=2)\n",
            message_contains="`model` shares a device value",
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        # per scope: name -> the move while it holds a moved value; the names whose sharing was reported
        self._scopes: list[dict[str, Optional[cst.Call]]] = [{}]
        self._reported: list[set[str]] = [set()]

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append({})
        self._reported.append(set())

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()
        self._reported.pop()

    def leave_Assign(self, original_node: cst.Assign) -> None:  # after the value's own calls were visited
        moved = _move_of(original_node.value)
        for target in original_node.targets:
            name = dotted_name(target.target)
            if name is not None:
                self._scopes[-1][name] = moved

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if isinstance(call, cst.Call) and _moves_to_device(call) and isinstance(call.func, cst.Attribute):
            name = dotted_name(call.func.value)
            if name is not None:  # `model.to(device)`: a module moves in place
                self._scopes[-1][name] = call

    def _holds_moved(self, node: cst.BaseExpression) -> Optional[str]:
        name = dotted_name(node)
        return name if name is not None and self._scopes[-1].get(name) else None

    def _keep_device(self, move: Optional[cst.Call], cause: cst.CSTNode) -> None:
        """The shared value's device stays the one the program chose without CUDA (its CUDA choice and the
        tests that make it are kept as one decision, helpers/decision_groups.py), rather than a move to
        ``neuron`` that the sharing then fails on."""
        device = arg_named(move, "device", 0) if move is not None and move.func.attr.value == "to" else None
        if device is not None:
            keep_device_value(self.context, device.value, cause)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value in SHARE_METHODS:
            name = self._holds_moved(func.value)
            if name is not None or _moved_value(func.value):
                self._keep_device(self._scopes[-1].get(name) if name is not None else _move_of(func.value), node)
                self._reported[-1].add(name or "")
                what = f"{name}.{func.attr.value}()" if name is not None else f".{func.attr.value}()"
                self.report(node, self.MESSAGE.format(what=what))
            return
        if self.context.qualname(func) not in PROCESS_QUALNAMES:
            return
        # Process(group, target, name, args, ...); spawn / start_processes(fn, args, ...)
        args = arg_named(node, "args", 3 if self.context.qualname(func).endswith("Process") else 1)
        if args is None or not isinstance(args.value, (cst.Tuple, cst.List)):
            return
        for element in args.value.elements:
            name = self._holds_moved(element.value)
            if name is not None and name not in self._reported[-1]:
                self._keep_device(self._scopes[-1].get(name), node)
                self._reported[-1].add(name)
                self.report(element.value, self.MESSAGE.format(what=name))
