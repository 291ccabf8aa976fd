"""NP708 / NP709: CUDA code built from source: ``torch.utils.cpp_extension`` builds and the ``.cu`` /
``.cuh`` files named in Python.
"""

from __future__ import annotations

import libcst as cst

from neuron_port.rules.helpers.names import is_none, is_true
from neuron_port.rules.helpers.nodes import string_value
from neuron_port.rules.no_port.tables import CPP_EXTENSION_CALLS, CUDA_SOURCE_RE, NKI_ROUTE
from neuron_port.rules.spec import Invalid, PythonRule, Valid


def _string_literals(node: cst.CSTNode):
    """String literals directly in an argument value or in a list/tuple/set literal there."""
    if isinstance(node, cst.SimpleString):
        yield node
    elif isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        for element in node.elements:
            if isinstance(element.value, cst.SimpleString):
                yield element.value


def _is_cuda_source(node: cst.SimpleString) -> bool:
    return bool(CUDA_SOURCE_RE.match(string_value(node) or ""))


class CudaExtension(PythonRule):
    """Reports ``torch.utils.cpp_extension`` builds: CUDA extensions have no Trainium equivalent.

    ## What it does
    Reports ``torch.utils.cpp_extension.load(...)``, ``load_inline(...)``, ``CUDAExtension(...)`` and
    ``CppExtension(...)`` calls. A build with CUDA sources (``CUDAExtension``, ``cuda_sources=``,
    ``with_cuda=True``, a ``.cu`` file in ``sources``) is an error; a C++-only build is a warning (it
    works, on CPU tensors).

    ## Why is this bad?
    CUDA extensions need nvcc and a CUDA toolkit to build and run their kernels on NVIDIA GPUs. Custom
    device code for Trainium is written in NKI and registered as a PyTorch op. A C++ extension runs on
    the host CPU: given neuron tensors it needs them copied to the CPU first.

    ## Example
    ```python
    ext = load(name="fused", sources=["fused.cpp", "fused_kernel.cu"])
    ```
    Use instead: the torch expression the kernel fuses (``torch.compile(backend="neuron")`` fuses it),
    or an NKI kernel registered with ``@torch_neuronx.nki_op``.

    ## Fix safety
    No automatic fix: kernels have to be rewritten. ``.cu`` source files are NP709.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (custom CUDA kernels -> NKI)
    - https://docs.pytorch.org/docs/stable/cpp_extension.html
    """

    CODE = "NP708"
    NAME = "cuda-extension"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "`{api}` builds a CUDA extension, which cannot run on Trainium: " + NKI_ROUTE
    TRIGGERS = ("cpp_extension",)

    VALID = [
        Valid("from torch.utils.cpp_extension import include_paths\npaths = include_paths()\n"),
        Valid("import torch\nlib = torch.library.Library('mylib', 'DEF')\n", target="accelerator"),
    ]
    INVALID = [
        Invalid("from torch.utils.cpp_extension import load\n"
                "ext = load(name='fused', sources=['fused.cpp', 'fused_kernel.cu'])\n", None),
        Invalid("from torch.utils.cpp_extension import CUDAExtension\n"
                "ext = CUDAExtension('ops', sources=srcs)\n", None),
        Invalid("import torch.utils.cpp_extension as ce\nm = ce.load_inline('m', cpp_sources=src)\n", None,
                message_contains="C++ extension"),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        qualname = self.context.qualname(node.func)
        if qualname not in CPP_EXTENSION_CALLS:
            return
        api = qualname.rsplit(".", 1)[-1]
        cuda = api == "CUDAExtension"
        for arg in node.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword == "cuda_sources" and not is_none(arg.value):
                cuda = True
            elif keyword == "with_cuda" and is_true(arg.value):
                cuda = True
            elif any(_is_cuda_source(s) for s in _string_literals(arg.value)):
                cuda = True
        if cuda:
            self.report(node, self.MESSAGE.format(api=api))
        else:
            self.report(
                node,
                f"`{api}` builds a C++ extension: it runs on the CPU (neuron tensors need `.cpu()`); check "
                "its sources hold no CUDA code",
                severity="warning",
                effort="medium",
            )


class CudaSourceFile(PythonRule):
    """Reports ``.cu`` / ``.cuh`` CUDA source files: no Trainium compiler for them.

    ## What it does
    In Python, reports string literals naming CUDA sources (``"kernel.cu"``, ``"csrc/*.cu"``,
    ``"helpers.cuh"``) outside the ``cpp_extension`` calls NP708 already reports, e.g. source lists
    built for ``setup.py``. The project discovery reports the ``.cu`` files of a tree under the same
    code.

    ## Why is this bad?
    CUDA C++ compiles with nvcc for NVIDIA GPUs only. Each kernel needs an NKI port (or a torch
    expression) to run on Trainium.

    ## Example
    ```python
    sources = ["csrc/attention.cpp", "csrc/attention_kernel.cu"]
    ```
    Use instead: an NKI kernel registered with ``@torch_neuronx.nki_op``, or the torch ops it fuses.

    ## Fix safety
    No automatic fix.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    """

    CODE = "NP709"
    NAME = "cuda-source-file"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "CUDA source `{name}` cannot be compiled for Trainium: " + NKI_ROUTE
    TRIGGERS = (r"""\.cu['"]""", r"\.cuh")

    VALID = [
        Valid("path = 'model.cpp'\nurl = 'http://example.cu/x'\n"),
        Valid("from torch.utils.cpp_extension import load\next = load('f', sources=['f.cu'])\n"),  # NP708
    ]
    INVALID = [
        Invalid("sources = ['csrc/attention.cpp', 'csrc/attention_kernel.cu']\n", None),
        Invalid('import glob\nsrcs = glob.glob("csrc/*.cu")\n', None, target="accelerator"),
    ]

    def __init__(self, context) -> None:
        super().__init__(context)
        self._extension_depth = 0
        self._extension_calls: set[cst.CSTNode] = set()

    def visit_Call(self, node: cst.Call) -> None:
        if self.context.qualname(node.func) in CPP_EXTENSION_CALLS:
            self._extension_calls.add(node)
            self._extension_depth += 1

    def leave_Call(self, original_node: cst.Call) -> None:
        if original_node in self._extension_calls:
            self._extension_depth -= 1

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if not self._extension_depth and _is_cuda_source(node):
            self.report(node, self.MESSAGE.format(name=string_value(node)))
