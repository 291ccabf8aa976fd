"""NP101 ``cuda-device-string``: ``'cuda'`` / ``'cuda:N'`` literals and templates used as device values."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.cuda_api.kept_arguments import kept_cuda_calls
from neuron_port.rules.device_placement import device_string_examples
from neuron_port.rules.device_placement.string_roles import DeviceStringRule
from neuron_port.rules.device_placement.tables import GLOBAL_RANK_ADVICE, GLOBAL_RANK_CALLS, GLOBAL_RANK_ENV_VARS
from neuron_port.rules.helpers.names import dotted_name, last_segment, source_of
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.spec import Valid


def is_global_rank(node: cst.BaseExpression) -> bool:
    """``dist.get_rank()``, ``os.environ["RANK"]`` / ``os.environ.get("RANK")`` / ``os.getenv("RANK")``, or
    ``int()`` / ``str()`` of one: the global rank, a NeuronCore index on one node only."""
    if isinstance(node, cst.Call):
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if isinstance(node.func, cst.Name) and node.func.value in ("int", "str") and len(node.args) == 1 and positional:
            return is_global_rank(positional[0].value)
        if last_segment(node.func) in GLOBAL_RANK_CALLS:
            return True
        name = dotted_name(node.func) or ""
        return bool((name.endswith("environ.get") or name.endswith("getenv")) and positional
                    and string_value(positional[0].value) in GLOBAL_RANK_ENV_VARS)
    if isinstance(node, cst.Subscript) and (dotted_name(node.value) or "").endswith("environ") and len(node.slice) == 1:
        index = node.slice[0].slice
        return isinstance(index, cst.Index) and string_value(index.value) in GLOBAL_RANK_ENV_VARS
    return False


class CudaDeviceString(DeviceStringRule):
    """Rewrites ``'cuda'`` / ``'cuda:N'`` device strings (and templates that build them) to ``neuron``.

    ## What it does
    Finds string literals that are exactly ``cuda`` or ``cuda:N`` where they are used as a device value:
    assignments (``device = 'cuda'``), ``torch.device('cuda', i)``, ``device='cuda'`` keywords in any call
    (factories, ``torch.Generator``, ``torch.set_default_device``) and function defaults, ``.to('cuda')``,
    argparse ``default='cuda'`` and ``choices=['cpu', 'cuda']``, config dict values, ternaries, and the
    templates ``f"cuda:{local_rank}"``, ``'cuda:%d' % i``, ``'cuda:' + str(i)`` and ``"cuda:{}".format(i)``.
    It rewrites them to ``neuron`` / ``neuron:N``, keeping the quote style and the index: a device indexed
    by the process's local rank (``f"cuda:{local_rank}"``, ``'cuda:%d' % args.gpu``,
    ``torch.device('cuda', local_rank)``) becomes ``f"neuron:{local_rank}"`` / ``torch.device('neuron',
    local_rank)``, the process's own NeuronCore. An index that is the *global* rank (``dist.get_rank()``,
    ``os.environ["RANK"]``) is renamed too, and the message adds that it should be ``LOCAL_RANK``. Strings that are not devices
    stay: docstrings, prose (``"cuda is not available"``), log and print arguments, ``getattr(torch, 'cuda')``,
    and the keys of a ``map_location`` dict (they name the device the checkpoint was *saved* on).
    A ``'cuda'`` in a list, tuple or set literal of device types (``'cuda'`` and another device-type name:
    ``choices=['cpu', 'cuda']``, ``capturable_supported_devices = ['cuda', 'xpu', 'hpu']``, a function that
    returns such a list) is a table of what each device type supports or may be, not a device choice: it
    stays, and ``'neuron'`` is added beside it, as torch's own tables add the PrivateUse1 backend's name
    (``torch/optim/optimizer.py``, ``_get_capturable_supported_devices``); a table the code already extends
    with ``torch._C._get_privateuse1_backend_name()`` holds ``'neuron'`` on Trainium and is left alone. A
    literal that is unpacked, indexed or iterated (``src, dst = 'cuda', 'cpu'``, ``DEVICES[0]``, ``for d in
    ['cpu', 'cuda']:``) holds devices used one by one, renamed as usual.
    Comparisons are NP102; ``device_type=`` (autocast), ``device_map=`` and ``accelerator=`` belong to the
    NP3xx and NP6xx families and ``init_device_mesh('cuda', ...)`` to NP504.

    With ``--target accelerator``, ``'cuda' if torch.cuda.is_available() else 'cpu'`` (and a ``'cuda'``
    inside an ``if torch.cuda.is_available():`` block) becomes
    ``torch.accelerator.current_accelerator().type`` (NP201 rewrites the test). Elsewhere the same
    rewrite is an unsafe fix, and strings in lists, dict keys and %/+/format templates are reported only.

    ## Why is this bad?
    A ``'cuda'`` device raises "Torch not compiled with CUDA enabled" on a Trainium host; the device
    there is ``neuron`` (``torch.device("neuron")``, ``"neuron:0"``, ``device="neuron"``).

    ## Example
    ```python
    device = 'cuda' if torch.cuda.is_available() else 'cpu'
    parser.add_argument('--device', default='cuda', choices=['cpu', 'cuda'])
    device = f'cuda:{local_rank}'
    ```
    Use instead:
    ```python
    device = 'neuron' if torch.neuron.is_available() else 'cpu'
    parser.add_argument('--device', default='neuron', choices=['cpu', 'cuda', 'neuron'])
    device = f'neuron:{local_rank}'  # under torchrun the process's NeuronCore
    ```

    ## Fix safety
    Safe on the neuron target: only exact device strings in value positions are changed. A ``'cuda'``
    used as a dict key or subscript (``{'cuda': ..., 'cpu': ...}[device.type]``) may be a label rather than
    a device, so that rewrite is unsafe. On the accelerator target the rewrite is safe only under an
    availability test: ``torch.accelerator.current_accelerator()`` is ``None`` on a CPU-only host, so an
    unguarded ``current_accelerator().type`` (say, an argparse default) raises where the literal did not.

    A rank-indexed device keeps its index, as every other rename: under ``torchrun`` TorchNeuron's
    ``init_process_group`` gives each process one NeuronCore, and that core is ``neuron:<LOCAL_RANK>``, the
    process's current device (c10_neuron: ``device_count()`` is the local world size,
    ``set_local_device_start_index(local_rank)``), so ``f"neuron:{local_rank}"``,
    ``torch.neuron.set_device(local_rank)`` (NP201) and DDP's ``device_ids=[local_rank]`` (NP503) all name
    it, as on CUDA, and a plain ``"neuron"`` is the same core. ``neuron:0`` on rank 1 is another process's
    core and fails ("Attempted to access device that doesn't attach to this process"). The global rank
    equals the local rank on one node only, hence the advice. On the accelerator target the index is kept
    too (``f"{...current_accelerator().type}:{local_rank}"``).

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst ("`.to('cuda')` -> `.to('neuron')`")
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html (one NeuronCore per process; tensors on ``torch.device("neuron")``)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/index.html
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
    - https://docs.pytorch.org/docs/stable/accelerator.html
    """

    CODE = "NP101"
    NAME = "cuda-device-string"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "`{old}` is a CUDA device string: use `{new}`"
    TRIGGERS = ("'cuda", '"cuda')

    def __init__(self, context) -> None:
        super().__init__(context)
        self._in_cuda_calls: list = []  # candidates inside torch.cuda calls, decided at the end

    VALID = [
        Valid("device = 'neuron' if torch.neuron.is_available() else 'cpu'\n"),
        Valid('"""Runs on cuda."""\nprint("cuda is not available")\nlogger.info("cuda")\n'),
        Valid("import torch\nhas = hasattr(torch, 'cuda')\nmod = getattr(torch, 'cuda')\n"),
        # an enum member's value is what its callers pass (`TimerType("cuda")`), not a device
        Valid("import enum\n\n\nclass TimerType(str, enum.Enum):\n    CPU = 'cpu'\n    CUDA = 'cuda'\n"),
        Valid("ctx = torch.autocast(device_type='cuda', dtype=torch.bfloat16)\n"),  # NP3xx
        Valid("model = AutoModel.from_pretrained(name, device_map='cuda')\n"),  # NP6xx
        Valid("if device.type == 'cuda':\n    pass\n"),  # NP102
        Valid("state = torch.load(f, map_location={'cuda:1': 'cpu'})\n"),
        # arguments of torch.cuda calls that stay CUDA's (a call is rewritten whole or not at all)
        Valid("import torch\nmajor, minor = torch.cuda.get_device_capability('cuda')\n"
              "props = torch.cuda.get_device_properties(torch.device('cuda'))\nprint(props.major)\n"),
        Valid("x = torch.zeros(3, device='cpu')\ny = b'cuda'\nz = 'cudagraphs'\n"),
        # a table of device types the code extends with the PrivateUse1 backend's name ('neuron' on Trainium)
        Valid("import torch\n\ndef capturable_devices():\n    supported = ['cuda', 'xpu', 'hpu']\n"
              "    if not torch.jit.is_scripting():\n"
              "        supported.append(torch._C._get_privateuse1_backend_name())\n    return supported\n"),
        Valid("import torch\nFOREACH = ['cuda', 'xpu', torch._C._get_privateuse1_backend_name()]\n"),
        Valid("SUPPORTED = ('cuda', 'neuron', 'cpu')\n"),
    ]
    INVALID = device_string_examples.INVALID  # (many: their own module)

    def _candidate(self, role_node: cst.CSTNode, literal: cst.CSTNode, kind: str) -> None:
        if self._role(role_node) in ("skip", "check", "multibackend"):
            return
        if self._in_cuda_call():  # decided at the end: an argument of a kept torch.cuda call stays
            self._in_cuda_calls.append((role_node, literal, kind))
            return
        self._decide(role_node, literal, kind)

    def _decide(self, role_node: cst.CSTNode, literal: cst.CSTNode, kind: str) -> None:
        role = self._role(role_node)
        old = source_of(role_node)
        if literal in self._tables and role == "container" and self.context.target != "accelerator":
            fix = self._table_fix(literal)
            if fix is not None:
                self._report_table(literal, fix)
                return
        if self.context.target == "accelerator":
            built = None if role in ("key", "container") else self._accelerator_version(literal, kind)
            if built is None:
                self.report(
                    literal,
                    f"`{old}` is a CUDA device string with no torch.accelerator spelling here: derive it from "
                    "`torch.accelerator.current_accelerator()`",
                )
                return
            replacement, imports = built
            safety = "safe" if self._guarded(role_node) else "unsafe"
            self.report(
                literal,
                self.MESSAGE.format(old=old, new=source_of(replacement))
                + ("" if safety == "safe" else " (unsafe: None on CPU-only hosts)"),
                replacement=replacement,
                safety=safety,
                imports=imports,
            )
            return
        advice = ""
        if role in ("value", "container"):
            indexed = self._index_of(role_node, literal, kind)
            if indexed is not None and is_global_rank(indexed[0]):
                advice = GLOBAL_RANK_ADVICE
        self._report_neuron(role_node, literal, role, advice)

    def _index_of(self, role_node: cst.CSTNode, literal: cst.CSTNode, kind: str):
        """(index expression, node to replace) of a device built from an index, else None."""
        if kind == "fstring" and isinstance(literal, cst.FormattedString):
            parts = literal.parts
            if len(parts) == 2 and isinstance(parts[1], cst.FormattedStringExpression):
                return parts[1].expression, literal
            return None
        if kind == "template" and isinstance(role_node, cst.BinaryOperation):
            right = role_node.right
            if isinstance(right, cst.Tuple) and len(right.elements) == 1:
                right = right.elements[0].value
            return right, role_node
        if kind == "template" and isinstance(role_node, cst.Call):
            if len(role_node.args) == 1 and role_node.args[0].keyword is None and not role_node.args[0].star:
                return role_node.args[0].value, role_node
            return None
        if kind == "literal" and literal in self._device_calls:
            call, index_arg = self._device_calls[literal]
            return index_arg.value, call
        return None

    def leave_Module(self, original_node: cst.Module) -> None:
        if self._in_cuda_calls:
            kept = kept_cuda_calls(self.context, original_node).nodes
            for role_node, literal, kind in self._in_cuda_calls:
                if literal not in kept:
                    self._decide(role_node, literal, kind)

    def _report_table(self, literal: cst.CSTNode, fix) -> None:
        if fix is False:
            return  # it holds "neuron" (or adds the PrivateUse1 name): nothing to port
        element, replacement = fix
        self.report(element, f"`{source_of(literal)}` in a table of device types: add `'neuron'` beside it "
                    "(CUDA stays in the table)", replacement=replacement, safety="safe")

    def _report_neuron(self, role_node: cst.CSTNode, literal: cst.CSTNode, role: str, advice: str = "") -> None:
        old = source_of(role_node)
        replacement = self._neuron_version(literal)
        new = old.replace(source_of(literal), source_of(replacement), 1)
        if role == "key":
            self.report(
                literal,
                f"`{old}` is a CUDA device name used as a dict key or index: rename it to `{source_of(replacement)}` "
                "if it is looked up by device type (unsafe: it may be a plain label)",
                replacement=replacement,
                safety="unsafe",
            )
            return
        self.report(literal, self.MESSAGE.format(old=old, new=new) + advice, replacement=replacement, safety="safe")
