"""NP710 - NP712: NVIDIA profiling and monitoring tools: the ``nvtx`` package, ``nvidia-smi`` and the
NVML packages, and ``ProfilerActivity.CUDA`` (rewritten to ``ProfilerActivity.PrivateUse1``).
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from neuron_port.rules.helpers.calls import arg_named
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.no_port.common import PackageRule
from neuron_port.rules.no_port.tables import (
    GPU_MONITORING,
    NVIDIA_SMI_ADVICE,
    NVTX,
    PROFILER_ACTIVITY_CUDA,
    SHELL_CALLS,
)
from neuron_port.rules.spec import FRAGMENT, Invalid, PythonRule, Valid


class NvtxPackage(PackageRule):
    """Reports the ``nvtx`` package (NVIDIA Tools Extension ranges).

    ## What it does
    Reports every import of the ``nvtx`` package and every use (``@nvtx.annotate``,
    ``nvtx.push_range`` / ``pop_range``). ``torch.cuda.nvtx`` is reported by NP202.

    ## Why is this bad?
    NVTX ranges are consumed by Nsight tools; on a Trainium host the package may import but nothing
    records the ranges.

    ## Example
    ```python
    with nvtx.annotate("forward"):
        y = model(x)
    ```
    Use instead:
    ```python
    with torch.profiler.record_function("forward"):
        y = model(x)
    ```

    ## Fix safety
    No automatic fix: ``nvtx.annotate`` is also a decorator and takes colours and domains.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (profiling with ``ProfilerActivity.PrivateUse1``)
    """

    CODE = "NP710"
    NAME = "nvtx-package"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = "NVTX ranges are CUDA tooling: use torch.profiler.record_function"
    TRIGGERS = ("nvtx",)
    LABEL = "NVTX"
    ADVICE = NVTX

    VALID = [
        Valid("import torch\nwith torch.profiler.record_function('fwd'):\n    pass\n"),
        Valid("import torch\ntorch.cuda.nvtx.range_push('fwd')\n"),  # NP202
    ]
    INVALID = [Invalid("import nvtx\n\n@nvtx.annotate('step', color='blue')\ndef step():\n    pass\n", None)]


def _command_head(node: cst.BaseExpression) -> Optional[str]:
    """The program a shell call runs: the first word of a command string, or the first list element."""
    if isinstance(node, (cst.List, cst.Tuple)) and node.elements:
        return string_value(node.elements[0].value)
    value = string_value(node)
    if value is None and isinstance(node, cst.Call) and node.args:  # shlex.split("nvidia-smi ...")
        value = string_value(node.args[0].value)
    if value is None:
        return None
    words = value.split()
    return words[0] if words else None


class GpuMonitoring(PackageRule):
    """Reports ``nvidia-smi`` calls and NVML-based GPU monitoring packages.

    ## What it does
    Reports ``subprocess.run(["nvidia-smi", ...])``, ``check_output("nvidia-smi ...", shell=True)``,
    ``os.system("nvidia-smi")`` / ``os.popen(...)``, and every import and use of ``pynvml``,
    ``nvidia_smi``, ``py3nvml``, ``GPUtil``, ``gpustat`` and ``nvitop``.

    ## Why is this bad?
    ``nvidia-smi`` and NVML do not exist on a Trainium host: the subprocess fails (``FileNotFoundError``)
    or NVML reports no devices, so GPU-count and memory logic breaks.

    ## Example
    ```python
    out = subprocess.check_output(["nvidia-smi", "--query-gpu=memory.used", "--format=csv"])
    ```
    Use instead:
    ```python
    used = torch.neuron.memory_allocated()      # in-process
    info = subprocess.check_output(["neuron-ls", "--json-output"])  # devices
    ```

    ## Fix safety
    No automatic fix: the output formats differ.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (diagnostics: neuron-ls, neuron-top, Neuron Observer), https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/neuron.py, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html
    """

    CODE = "NP711"
    NAME = "gpu-monitoring"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = NVIDIA_SMI_ADVICE
    TRIGGERS = ("nvidia-smi", "nvidia_smi", "pynvml", "nvml", "GPUtil", "gpustat", "nvitop")
    LABEL = "GPU monitoring"
    ADVICE = GPU_MONITORING

    VALID = [
        Valid("import subprocess\nsubprocess.run(['neuron-ls', '--json-output'])\n"),
        Valid("print('run nvidia-smi to check')\n"),
    ]
    INVALID = [
        Invalid("import subprocess\nout = subprocess.check_output(['nvidia-smi', '--query-gpu=memory.used'])\n",
                None, message_contains="neuron-ls"),
        Invalid("import os\nos.system('nvidia-smi -L')\n", None),
        Invalid("import pynvml\npynvml.nvmlInit()\n", None),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) not in SHELL_CALLS:
            return
        arg = arg_named(node, "args", 0) or arg_named(node, "cmd", 0) or arg_named(node, "command", 0)
        if arg is not None and _command_head(arg.value) == "nvidia-smi":
            self.report(node, severity=self.severity_for())


class ProfilerActivityCuda(PythonRule):
    """Rewrites ``ProfilerActivity.CUDA`` to ``ProfilerActivity.PrivateUse1``.

    ## What it does
    Finds ``torch.profiler.ProfilerActivity.CUDA`` (any import spelling) and rewrites it to
    ``ProfilerActivity.PrivateUse1``, the activity under which TorchNeuron's Kineto plugin records
    device events. A list that already names ``PrivateUse1`` next to ``CUDA`` (multi-backend code) is
    left alone. With ``--target accelerator`` it is reported only.

    ## Why is this bad?
    With ``ProfilerActivity.CUDA`` on a Trainium host the profiler records CPU events only: the trace
    shows no device time at all.

    ## Example
    ```python
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        model(x)
    ```
    Use instead:
    ```python
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        model(x)
    ```

    ## Fix safety
    Safe on the neuron target: the same request for device events, on the device that exists. (Neuron
    Explorer's device mode reserves about 5 GB of HBM on Trn2.) On the accelerator target there is no
    device-agnostic activity: keep ``CUDA`` for GPUs and add ``PrivateUse1`` when
    ``torch.accelerator.current_accelerator().type == "neuron"``.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (profiling: ``ProfilerActivity.CPU`` + ``ProfilerActivity.PrivateUse1``)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/tools/neuron-explorer/how-to-profile-pytorch.html
    """

    CODE = "NP712"
    NAME = "profiler-activity-cuda"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    MESSAGE = (
        "`ProfilerActivity.CUDA` records nothing on Trainium: use `ProfilerActivity.PrivateUse1` (TorchNeuron's "
        "device activity)"
    )
    TRIGGERS = ("ProfilerActivity",)

    VALID = [
        Valid("from torch.profiler import ProfilerActivity\n"
              "acts = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]\n"),
        Valid("from torch.profiler import ProfilerActivity as PA\nacts = [PA.CPU, PA.CUDA, PA.PrivateUse1]\n"),
    ]
    INVALID = [
        Invalid(
            "from torch.profiler import profile, ProfilerActivity\n"
            "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:\n    model(x)\n",
            "from torch.profiler import profile, ProfilerActivity\n"
            "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:\n    model(x)\n",
            not_runnable=FRAGMENT,
        ),
        Invalid(
            "import torch\nacts = [torch.profiler.ProfilerActivity.CUDA]\n",
            "import torch\nacts = [torch.profiler.ProfilerActivity.PrivateUse1]\n",
            runs=True,
        ),
        Invalid("import torch\nacts = [torch.profiler.ProfilerActivity.CUDA]\n", None, target="accelerator"),
        Invalid(
            """
            import torch
            from torch.profiler import profile, ProfilerActivity

            model = torch.nn.Linear(4, 2).to('neuron')
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                model(torch.randn(3, 4, device='neuron'))
            """,
            """
            import torch
            from torch.profiler import profile, ProfilerActivity

            model = torch.nn.Linear(4, 2).to('neuron')
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
                model(torch.randn(3, 4, device='neuron'))
            """,
            runs=True,
        ),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._multibackend: set[cst.CSTNode] = set()

    def _container(self, node) -> None:
        values = [e.value for e in node.elements if isinstance(e, cst.Element)]
        if any(isinstance(v, cst.Attribute) and v.attr.value == "PrivateUse1" for v in values):
            self._multibackend.update(values)

    def visit_List(self, node: cst.List) -> None:
        self._container(node)

    def visit_Tuple(self, node: cst.Tuple) -> None:
        self._container(node)

    def visit_Set(self, node: cst.Set) -> None:
        self._container(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "CUDA" or node in self._multibackend:
            return
        if self.context.qualname(node) not in PROFILER_ACTIVITY_CUDA:
            return
        if self.context.target != "neuron":
            self.report(node, self.MESSAGE + " when the current accelerator is neuron", effort="low")
            return
        self.report(node, replacement=node.with_changes(attr=cst.Name("PrivateUse1")))
