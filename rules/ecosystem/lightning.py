"""NP608 ``lightning-accelerator`` (``accelerator="cuda"|"gpu"``, ``gpus=N``), NP609
``lightning-precision`` (``precision="16-mixed"`` -> ``"bf16-mixed"``) and NP610 ``lightning-cpu-on-trainium``
(``accelerator="auto"`` or none: the CPU on Trainium) in Lightning ``Trainer`` and ``Fabric`` calls; NP611
``lightning-config-accelerator``: ``accelerator: gpu`` in a YAML / JSON / TOML config (Hydra's
``configs/trainer/gpu.yaml``), the same choice made where the Python code does not show it."""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.distributed.launch_patterns import config_pairs
from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.decision_groups import decision_groups
from neuron_port.rules.helpers.device_flags import GPU_ACCELERATOR_NAMES
from neuron_port.rules.helpers.kept_values import keep_device_value
from neuron_port.rules.helpers.names import int_value, is_false, is_none, last_segment, source_of, walk
from neuron_port.rules.helpers.nodes import replace_string, string_value
from neuron_port.rules.spec import LAUNCH_FILE, Invalid, LineHit, LineOptions, LineRule, PythonRule, ScriptLine, Valid

LIGHTNING_ROOTS = ("lightning", "pytorch_lightning", "lightning_fabric")
LIGHTNING_CALLEES = frozenset({"Trainer", "Fabric"})


def _is_lightning_callee(context, func: cst.BaseExpression) -> bool:
    if last_segment(func) not in LIGHTNING_CALLEES:
        return False
    qualname = context.qualname(func) or ""
    return qualname.split(".")[0] in LIGHTNING_ROOTS


class LightningAccelerator(PythonRule):
    """Reports Lightning ``Trainer`` / ``Fabric`` set up for CUDA GPUs.

    ## What it does
    Finds ``accelerator="cuda"`` / ``"gpu"`` and the pre-2.0 ``gpus=N`` in ``lightning.Trainer``,
    ``pytorch_lightning.Trainer`` and ``lightning.Fabric`` calls, and reports them.

    ## Why is this bad?
    On a Trainium host there is no CUDA device, so the Trainer fails at start-up ("CUDAAccelerator can
    not run on your system since the accelerator is not available"). Whether Lightning ships a neuron
    accelerator is **not confirmed** (the Neuron docs list transformers, diffusers, PEFT and accelerate
    as running natively, not Lightning), so there is no spelling to rewrite to; ``accelerator="auto"``
    would silently train on the CPU (NP610).

    ## Example
    ```python
    trainer = L.Trainer(accelerator="gpu", devices=8, precision="16-mixed")
    ```
    Use instead: a custom ``lightning.pytorch.accelerators.Accelerator`` subclass for the ``neuron``
    device (``setup_device`` -> ``torch.neuron.set_device``, ``auto_device_count`` ->
    ``torch.neuron.device_count``), or a plain PyTorch / accelerate training loop.

    An accelerator held by a name is reported when a device test chooses it (``accelerator = "gpu" if
    torch.cuda.is_available() else "cpu"``): that test is then kept with it, since flipping it alone
    would ask Lightning for a GPU on Trainium where the program ran on the CPU without CUDA. A ``"gpu"``
    chosen by a device test is reported and kept the same way where the Trainer call is out of sight (a
    notebook's next cell, ``trainer_kwargs["accelerator"] = accelerator`` passed to another module): no
    neuron spelling of it exists.

    ## Fix safety
    No automatic fix (see above). ``devices=N`` counts logical NeuronCores (4 per Trainium2 chip at
    LNC=2), not GPUs. The device test choosing the accelerator is left as it is (one decision with it), and so
    are the tests choosing the same call's other arguments (``devices = torch.cuda.device_count() if ...``).

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst ("Hugging Face transformers, diffusers, PEFT, and accelerate run
      natively"); https://lightning.ai/docs/pytorch/stable/extensions/accelerator.html
    """

    CODE = "NP608"
    NAME = "lightning-accelerator"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = (
        "Lightning `{what}` needs CUDA GPUs (no confirmed neuron accelerator): write a custom Accelerator or "
        "port the loop to PyTorch"
    )
    # the last: a "gpu" literal (JSON-escaped in a notebook's text)
    TRIGGERS = (r"accelerator(?<!\waccelerator)\s*=", r"gpus(?<!\wgpus)\s*=", r"""gpu(?<!\wgpu)["'\\]""")

    VALID = [
        Valid('import lightning as L\ntrainer = L.Trainer(accelerator="cpu", devices=1)\n'),
        Valid('import torch\nprint("gpu" if torch.cuda.is_available() else "cpu")\n'),  # chosen, not held
        Valid("from accelerate import Accelerator\nacc = Accelerator(mixed_precision='bf16')\n"),
        Valid('trainer = Trainer(model=model, args=args)\n'),  # transformers.Trainer
        Valid('import lightning as L\nt = L.Trainer(accelerator="mps")\n', target="accelerator"),
    ]
    INVALID = [
        Invalid('import lightning as L\ntrainer = L.Trainer(accelerator="gpu", devices=8)\n', None),
        Invalid("from pytorch_lightning import Trainer\ntrainer = Trainer(gpus=2)\n", None),
        Invalid("from lightning.fabric import Fabric\nfabric = Fabric(accelerator='cuda')\n", None,
                target="accelerator"),
        Invalid('import torch, lightning as L\nacc = "gpu" if torch.cuda.is_available() else "cpu"\n'
                'trainer = L.Trainer(accelerator=acc)\n', None, message_contains="the test choosing it is kept"),
        Invalid('import torch\nkwargs = {}\nkwargs["accelerator"] = "gpu" if torch.cuda.is_available() else "cpu"\n',
                None, message_contains="the test is kept with it"),
    ]
    CHOSEN = ("Lightning `accelerator={value}` is {names} where CUDA is available, and Lightning has no neuron "
              "accelerator: the test choosing it is kept (write a custom Accelerator)")

    GPU_CHOSEN = ('`"gpu"` chosen by a device test names a GPU accelerator (Lightning\'s) with no neuron spelling: '
                  "the test is kept with it (write a custom Accelerator)")

    def __init__(self, context) -> None:
        super().__init__(context)
        self._chosen: list[tuple[cst.Arg, cst.Call]] = []  # accelerators held by a name: a device test may choose
        self._gpu: list[cst.SimpleString] = []
        self._assigned: dict[str, list[cst.BaseExpression]] = {}  # a module's name -> the values assigned to it

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                self._assigned.setdefault(target.target.value, []).append(node.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if string_value(node) in GPU_ACCELERATOR_NAMES:
            self._gpu.append(node)

    def leave_Module(self, original_node: cst.Module) -> None:
        """The value and the test choosing it are one decision (helpers/decision_groups.py): an accelerator
        a device test chooses keeps the test, reported at the Trainer's argument, else at the "gpu" itself
        (a notebook cell, a Trainer's keyword dict filled in another module)."""
        if not (self._chosen or self._gpu):
            return
        groups = decision_groups(self.context, original_node)
        covered = set()
        for arg, call in self._chosen:
            held = groups.cuda_literals_of(arg.value)
            if held:
                covered |= held
                keep_device_value(self.context, arg.value, arg)
                names = " or ".join(sorted({f'"{string_value(n)}"' for n in held}))
                self.report(arg.value, self.CHOSEN.format(value=source_of(arg.value), names=names))
                self._keep_beside(groups, call, arg)
        for literal in self._gpu:
            if literal not in covered and groups.member_group.get(literal) is not None:
                keep_device_value(self.context, literal, literal)
                self.report(literal, self.GPU_CHOSEN)

    def _keep_beside(self, groups, call: cst.Call, kept: cst.Arg) -> None:
        """The Trainer's other arguments chosen by device tests (``devices = torch.cuda.device_count() if
        torch.cuda.is_available() else 1``) configure the same device as its kept accelerator: their tests
        are kept with it (a NeuronCore count beside the CPU accelerator would start a process per core)."""
        for arg in call.args:
            if arg is kept or not isinstance(arg.value, cst.Name):
                continue
            for value in self._assigned.get(arg.value.value, ()):
                for node in walk(value):
                    if groups.member_group.get(node) is not None:
                        keep_device_value(self.context, node, kept)

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_lightning_callee(self.context, node.func):
            return
        for arg in node.args:
            if arg.keyword is None:
                continue
            if arg.keyword.value == "accelerator" and string_value(arg.value) in ("cuda", "gpu"):
                self.report(arg.value, self.MESSAGE.format(what=f'accelerator="{string_value(arg.value)}"'))
            elif arg.keyword.value == "accelerator" and not isinstance(arg.value, cst.SimpleString):
                self._chosen.append((arg, node))
            elif (arg.keyword.value == "gpus" and not (is_none(arg.value) or is_false(arg.value))
                  and int_value(arg.value) != 0):
                self.report(arg, self.MESSAGE.format(what="gpus="))


class LightningPrecision(PythonRule):
    """Advises ``precision="bf16-mixed"`` instead of float16 in Lightning.

    ## What it does
    Finds ``precision="16-mixed"`` / ``"16"`` / ``16`` / ``"16-true"`` in Lightning ``Trainer`` and
    ``Fabric`` calls and offers ``"bf16-mixed"`` (``"bf16-true"``).

    ## Why is this bad?
    float16 mixed precision needs loss scaling; bfloat16 is the recommended precision on Trainium and
    does not. (The accelerator itself is NP608.)

    ## Example
    ```python
    trainer = L.Trainer(precision="16-mixed")
    ```
    Use instead:
    ```python
    trainer = L.Trainer(precision="bf16-mixed")
    ```

    ## Fix safety
    Unsafe: a precision change (see NP604).

    ## References
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html, https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/utils.py
    - https://lightning.ai/docs/pytorch/stable/common/precision_basic.html
    """

    CODE = "NP609"
    NAME = "lightning-precision"
    SEVERITY = "info"
    FIX_AVAILABILITY = "always"
    FIX_SAFETY = "unsafe"
    MESSAGE = "float16 precision {value}: use `{new}` (bfloat16 is recommended on Trainium, no loss scaling)"
    TRIGGERS = ('precision(?<!\\wprecision)\\s*=\\s*\\(*\\s*[rRuU]?["\']?16',)

    VALID = [
        Valid('import lightning as L\ntrainer = L.Trainer(precision="bf16-mixed")\n'),
        Valid("from accelerate import Accelerator\nacc = Accelerator(mixed_precision='fp16')\n"),
    ]
    INVALID = [
        Invalid(
            'import lightning as L\ntrainer = L.Trainer(accelerator="gpu", precision="16-mixed")\n',
            'import lightning as L\ntrainer = L.Trainer(accelerator="gpu", precision="bf16-mixed")\n',
            unsafe_fixes=True,
        ),
        Invalid(
            "import pytorch_lightning as pl\ntrainer = pl.Trainer(precision=16)\n",
            'import pytorch_lightning as pl\ntrainer = pl.Trainer(precision="bf16-mixed")\n',
            unsafe_fixes=True,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_lightning_callee(self.context, node.func):
            return
        arg = arg_named(node, "precision")
        if arg is None:
            return
        value = arg.value
        text = string_value(value)
        if text is None and int_value(value) == 16:
            text = "16"
        if text not in ("16", "16-mixed", "16-true"):
            return
        new = "bf16-true" if text == "16-true" else "bf16-mixed"
        message = self.MESSAGE.format(value=f"`{text}`", new=f'"{new}"')
        if isinstance(value, cst.SimpleString):
            self.report(value, message, replacement=replace_string(value, new))
        else:
            self.report(value, message, replacement=cst.SimpleString(f'"{new}"'))


class LightningCpuOnTrainium(PythonRule):
    """Reports Lightning ``Trainer`` / ``Fabric`` that would pick the CPU on Trainium.

    ## What it does
    Finds ``lightning.Trainer``, ``pytorch_lightning.Trainer`` and ``lightning.Fabric`` calls with
    ``accelerator="auto"`` or no ``accelerator`` at all (Lightning's default is ``"auto"``), and reports the
    call. A call that passes ``**kwargs`` is not reported (the accelerator may be in them); ``"cuda"`` /
    ``"gpu"`` is NP608's.

    ## Why is this bad?
    Lightning has no Trainium accelerator: ``"auto"`` tries CUDA, MPS and XLA TPUs, then takes the CPU. On a
    Trainium host the script runs without an error, and trains on the host's CPU, leaving the NeuronCores
    idle (frameworks that detect TorchNeuron, such as transformers and accelerate, pick the ``neuron``
    device themselves; Lightning does not). `neuron-port check` reports such a run as NP913, naming
    Lightning.

    ## Example
    ```python
    fabric = L.Fabric()  # "auto": the CPU on Trainium
    ```
    Use instead: a custom ``lightning.pytorch.accelerators.Accelerator`` subclass for the ``neuron``
    device (``setup_device`` -> ``torch.neuron.set_device``, ``auto_device_count`` ->
    ``torch.neuron.device_count``, ``is_available`` -> ``torch.neuron.is_available``) passed as
    ``accelerator=NeuronAccelerator()``, or a plain PyTorch / accelerate training loop.

    ## Fix safety
    No automatic fix: there is no Lightning spelling for the ``neuron`` device to rewrite to.

    ## References
    - https://lightning.ai/docs/pytorch/stable/extensions/accelerator.html (the built-in accelerators and
      ``"auto"``), https://lightning.ai/docs/fabric/stable/api/fabric_args.html#accelerator
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
      (the frameworks that run natively on TorchNeuron: Hugging Face transformers, diffusers, PEFT, accelerate)
    """

    CODE = "NP610"
    NAME = "lightning-cpu-on-trainium"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = ("Lightning `{callee}(...)` {how} trains on the CPU on Trainium (no neuron accelerator): pass a custom "
               "Accelerator or port the loop")
    TRIGGERS = (r"Trainer\s*\(", r"Fabric\s*\(")

    VALID = [
        Valid('import lightning as L\ntrainer = L.Trainer(accelerator="cpu", devices=1)\n'),
        Valid("import lightning as L\nfabric = L.Fabric(accelerator=NeuronAccelerator())\n"),
        Valid("from lightning.fabric import Fabric\nfabric = Fabric(**settings)\n"),
        Valid('trainer = Trainer(model=model, args=args)\n'),  # transformers.Trainer
        Valid("from transformers import Trainer\ntrainer = Trainer(model=model, args=args)\n"),
    ]
    INVALID = [
        Invalid("from lightning.fabric import Fabric\nfabric = Fabric()\n", None,
                message_contains='`Fabric(...)` with no accelerator ("auto") trains on the CPU'),
        Invalid('import lightning as L\ntrainer = L.Trainer(accelerator="auto", max_epochs=1)\n', None,
                message_contains='`Trainer(...)` with accelerator="auto"'),
        Invalid("import pytorch_lightning as pl\ntrainer = pl.Trainer(max_epochs=3)\n", None),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if not _is_lightning_callee(self.context, node.func):
            return
        if any(arg.star == "**" for arg in node.args) or arg_named(node, "gpus") is not None:
            return  # the accelerator may be in the kwargs; gpus=N is NP608's
        accelerator = arg_named(node, "accelerator")
        if accelerator is None:
            how = 'with no accelerator ("auto")'
        elif string_value(accelerator.value) == "auto":
            how = 'with accelerator="auto"'
        else:
            return
        self.report(node, self.MESSAGE.format(callee=last_segment(node.func), how=how))


class LightningConfigAccelerator(LineRule):
    """Reports ``accelerator: gpu`` / ``cuda`` in a config file (Hydra / LightningCLI configs of a Trainer).

    ## What it does
    Finds a config key ``accelerator`` (plain or dotted: ``trainer.accelerator``) set to ``gpu`` or ``cuda``
    in YAML, JSON and TOML files, the way Hydra and ``LightningCLI`` projects choose the Trainer's device
    (``configs/trainer/gpu.yaml``), and reports the line. The GPU count beside it (``gpus: 2``,
    ``devices: 2`` with the accelerator) is counted as GPUs: ``gpus`` is NP521's.

    ## Why is this bad?
    The config reaches ``Trainer(**cfg.trainer)`` (``hydra.utils.instantiate``), which NP608 cannot see in
    the Python code. On a Trainium host Lightning finds no CUDA device and stops at start-up ("No supported
    gpu backend found!"). Lightning has no Trainium accelerator, so no value maps to the ``neuron`` device:
    ``cpu`` or ``auto`` runs, on the host's CPU (NP610).

    ## Example
    ```yaml
    _target_: lightning.pytorch.trainer.Trainer
    accelerator: gpu
    devices: 1
    ```
    Use instead: a custom ``lightning.pytorch.accelerators.Accelerator`` subclass for the ``neuron`` device,
    named by the config (``accelerator: {_target_: mypkg.NeuronAccelerator}``), or a plain PyTorch /
    accelerate training loop.

    ## Fix safety
    No automatic fix: there is no Lightning spelling for the ``neuron`` device to rewrite to.

    ## References
    - https://lightning.ai/docs/pytorch/stable/extensions/accelerator.html (the built-in accelerators),
      https://lightning.ai/docs/pytorch/stable/cli/lightning_cli.html (Trainer arguments from a config)
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
      (the frameworks that run natively on TorchNeuron: Hugging Face transformers, diffusers, PEFT, accelerate)
    """

    CODE = "NP611"
    NAME = "lightning-config-accelerator"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = ("Lightning `accelerator: {value}` needs CUDA GPUs and Lightning has no Trainium accelerator: "
               "name a custom Accelerator or port the loop (NP610)")
    # Lightning's configs are YAML (LightningCLI, Hydra) or JSON; no other rule reads TOML, and scanning it
    # would add every pyproject.toml to a rewrite's files
    FILE_KINDS = ("yaml", "json")
    # the key with a GPU value, not the word: a config that only mentions "accelerator" (pyproject's
    # `target = "accelerator"`) is not scanned, nor listed among the rewrite's files
    TRIGGERS = (r"""accelerator["']?\s*[:=]\s*["']?(?:gpu|GPU|Gpu|cuda|CUDA)""",)

    VALID = [
        Valid("accelerator: cpu\ndevices: 1\n", kind="yaml"),
        Valid("accelerator_name: gpu\n", kind="yaml"),
        Valid("# accelerator: gpu\n", kind="yaml"),
    ]
    INVALID = [
        Invalid("_target_: lightning.pytorch.trainer.Trainer\naccelerator: gpu   # on the cluster\ndevices: 1\n",
                None, kind="yaml", message_contains="`accelerator: gpu` needs CUDA GPUs",
                not_runnable=LAUNCH_FILE),
        Invalid('{"trainer": {"accelerator": "cuda", "devices": 2}}\n', None, kind="json",
                not_runnable=LAUNCH_FILE),
    ]

    def scan(self, line: ScriptLine, file_kind: str, options: LineOptions):
        for pair in config_pairs(line.code, file_kind):
            if pair.leaf_key == "accelerator" and pair.value.lower() in ("gpu", "cuda"):
                yield LineHit(pair.match.start(), pair.match.end(), self.MESSAGE.format(value=pair.value))
