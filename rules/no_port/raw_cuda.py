"""NP714 / NP715 / NP716: raw CUDA reached from Python: CuPy, PyCUDA and cuda-python (NP714), numba's
CUDA target (NP715), and PyTorch's private CUDA bindings (NP716: NVRTC through
``torch.cuda._compile_kernel``, ``torch._C._cuda_*``).
"""

from __future__ import annotations

from typing import Optional

from neuron_port.rules.no_port.common import PackageRule
from neuron_port.rules.no_port.tables import CUDA_ARRAYS, NKI_ROUTE, NUMBA_CUDA, TORCH_C_CUDA_RE, TORCH_RAW_CUDA
from neuron_port.rules.spec import Invalid, Valid


class CudaArrayLibrary(PackageRule):
    """Reports CuPy, PyCUDA and cuda-python: array and kernel libraries that drive NVIDIA GPUs directly.

    ## What it does
    Reports every import of ``cupy``, ``pycuda``, ``cuda.bindings`` / ``cuda.core`` (cuda-python) and every
    use of them (``cupy.RawKernel``, ``cupy.asarray``, ``pycuda.driver``), with the torch or NKI route.

    ## Why is this bad?
    These libraries allocate on, compile for and launch on NVIDIA GPUs through the CUDA driver and NVRTC;
    a Trainium host has neither, so the import fails (or, guarded, the GPU path is never taken and its
    work silently moves elsewhere).

    ## Example
    ```python
    import cupy as cp
    x = cp.asarray(batch)
    ```
    Use instead: torch tensors on the ``neuron`` device (``torch.as_tensor(batch, device="neuron")``);
    a ``RawKernel`` becomes an NKI kernel registered with ``@torch_neuronx.nki_op``.

    ## Fix safety
    No automatic fix (effort high: the array code has to be moved to torch). Guarded imports are reported
    one severity lower.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html (custom kernels -> NKI)
    """

    CODE = "NP714"
    NAME = "cuda-array-library"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "CuPy / PyCUDA / cuda-python run on NVIDIA GPUs only: " + NKI_ROUTE
    TRIGGERS = ("cupy", "pycuda", r"cuda\.bindings", r"cuda\.core", r"from\s+cuda\s+import")
    LABEL = "raw CUDA"
    ADVICE = CUDA_ARRAYS
    PACKAGES = ("cupy", "pycuda", "cuda.bindings", "cuda.core")

    VALID = [
        Valid("import torch\nx = torch.as_tensor(batch, device='neuron')\n"),
        Valid("import numpy as np\nx = np.asarray(batch)\n"),
    ]
    INVALID = [
        Invalid("import cupy as cp\nx = cp.asarray(batch)\n", None, message_contains="import of `cupy`"),
        Invalid("import cupy\nk = cupy.RawKernel(SRC, 'add')\n", None, message_contains="NVRTC"),
        Invalid("try:\n    import cupy\nexcept ImportError:\n    cupy = None\n", None, message_contains="guarded"),
        Invalid("from cuda.bindings import driver\n", None, message_contains="cuda-python"),
        Invalid("import pycuda.autoinit\n", None, message_contains="PyCUDA"),
    ]


class NumbaCuda(PackageRule):
    """Reports numba's CUDA target: ``from numba import cuda``, ``@cuda.jit`` kernels, ``cuda.to_device``.

    ## What it does
    Reports every import of ``numba.cuda`` and every use of it (a ``@cuda.jit`` kernel, a launch's
    ``cuda.to_device``, ``cuda.is_available()``). numba's CPU ``@numba.jit`` is not reported.

    ## Why is this bad?
    ``numba.cuda`` compiles Python kernels to PTX for NVIDIA GPUs; there is no Trainium target, so the
    kernels cannot run and their arrays cannot live on the device.

    ## Example
    ```python
    from numba import cuda

    @cuda.jit
    def scale(x, out):
        i = cuda.grid(1)
        out[i] = 2 * x[i]
    ```
    Use instead: the torch expression (``out = 2 * x`` on ``neuron``), or an NKI kernel registered with
    ``@torch_neuronx.nki_op`` for what torch ops cannot express.

    ## Fix safety
    No automatic fix (effort high).

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html (custom kernels -> NKI)
    """

    CODE = "NP715"
    NAME = "numba-cuda"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "numba's CUDA target has no Trainium backend: " + NKI_ROUTE
    TRIGGERS = (r"numba",)
    LABEL = "numba.cuda"
    ADVICE = NUMBA_CUDA
    PACKAGES = ("numba.cuda",)

    VALID = [
        Valid("import numba\n\n@numba.jit(nopython=True)\ndef f(x):\n    return x + 1\n"),
        Valid("from numba import njit\n"),
    ]
    INVALID = [
        Invalid("from numba import cuda\n", None, message_contains="import of `numba.cuda`"),
        Invalid("from numba import cuda\n\n@cuda.jit\ndef scale(x, out):\n    i = cuda.grid(1)\n    out[i] = 2 * x[i]\n",
                None, message_contains="`numba.cuda.jit`"),
        Invalid("import numba.cuda\nok = numba.cuda.is_available()\n", None,
                message_contains="torch.neuron.is_available()"),
    ]


class TorchRawCuda(PackageRule):
    """Reports PyTorch's private CUDA entry points: ``torch.cuda._compile_kernel`` (NVRTC) and
    ``torch._C._cuda_*`` bindings.

    ## What it does
    Reports ``torch.cuda._compile_kernel(source, name)``, which compiles CUDA C with NVRTC when it runs
    (often at import), and every use of a ``torch._C._cuda_*`` / ``torch._C._cudart`` binding, the
    private layer under ``torch.cuda``.

    ## Why is this bad?
    Both reach the CUDA toolkit directly, under the public ``torch.cuda`` API the other rules port: on
    Trainium there is no NVRTC and no CUDA runtime, so the call fails, and no rename can fix a CUDA C
    source string.

    ## Example
    ```python
    add = torch.cuda._compile_kernel(ADD_SRC, "add")
    ```
    Use instead: the torch expression the kernel computes, or an NKI kernel registered with
    ``@torch_neuronx.nki_op``; for a ``torch._C._cuda_*`` binding, the public ``torch.accelerator`` /
    ``torch.neuron`` call it implements.

    ## Fix safety
    No automatic fix.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html (custom kernels -> NKI)
    """

    CODE = "NP716"
    NAME = "torch-private-cuda"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "private CUDA API with no neuron counterpart"
    TRIGGERS = (r"_compile_kernel", r"_C\._cuda")
    LABEL = "private CUDA API"
    ADVICE = TORCH_RAW_CUDA
    PACKAGES = ("torch.cuda._compile_kernel", "torch._C")

    def lookup(self, qualname: str) -> Optional[str]:
        # of torch._C only the CUDA bindings (torch._C._cuda_getDeviceCount, torch._C._cudart)
        if qualname.startswith("torch._C") and not TORCH_C_CUDA_RE.match(qualname):
            return None
        return super().lookup(qualname)

    VALID = [
        Valid("import torch\nn = torch.accelerator.device_count()\n"),
        Valid("import torch\nk = my_compiler._compile_kernel(SRC, 'k')\n"),
        Valid("import torch\nok = torch._C._get_tracing_state()\n"),
    ]
    INVALID = [
        Invalid("import torch\nadd = torch.cuda._compile_kernel(SRC, 'add')\n", None, message_contains="NVRTC"),
        Invalid("import torch\nn = torch._C._cuda_getDeviceCount()\n", None, message_contains="torch._C._cuda_*"),
        Invalid("import torch\nrt = torch._C._cudart\n", None, message_contains="CUDA runtime access"),
    ]
