"""Data for the NP4xx rules (torch.compile and CUDA-only backend flags): which names mean what.

Kept apart from the rule classes, as the NP2xx tables live in ``rules/cuda_api/tables.py``, so the docs,
the statistics and a reviewer can read them as data. ``COMPILE_FUNCS`` is also imported by the NP8xx
rules (``rules/precision_features``). Facts: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/about-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/how-to-optimize-with-torch-compile.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst.
"""

from __future__ import annotations

from typing import NamedTuple

COMPILE_FUNCS = frozenset({"torch.compile"})
# torch._dynamo.optimize(backend, ...): the pre-2.0 spelling; its backend is renamed like compile's
DYNAMO_OPTIMIZE = frozenset({"torch._dynamo.optimize"})


class BackendInfo(NamedTuple):
    safety: str  # of the rename to "neuron" on the neuron target
    why: str
    default: bool = False  # the torch.compile default: dropping the argument is the device-agnostic fix


# String backends of torch.compile that cannot run on neuron tensors. Device-agnostic debug backends
# ("eager", "aot_eager", ...) and user-registered names are not listed and are left alone.
CUDA_BACKENDS: dict[str, BackendInfo] = {
    "inductor": BackendInfo("safe", "TorchNeuron does not use TorchInductor", default=True),
    "cudagraphs": BackendInfo("safe", "CUDA graphs have no Trainium equivalent"),
    "tensorrt": BackendInfo("unsafe", "TensorRT is NVIDIA-only"),
    "torch_tensorrt": BackendInfo("unsafe", "TensorRT is NVIDIA-only"),
    "onnxrt": BackendInfo("unsafe", "ONNX Runtime has no neuron execution provider for torch.compile"),
    "tvm": BackendInfo("unsafe", "TVM has no neuron target for torch.compile"),
}

# torch.compile(mode=...) values. TorchNeuron logs "Neuron backend does not support mode='...',
# falling back to default mode." for every mode but "default".
MODE_NOTES: dict[str, str] = {
    "reduce-overhead": "it captures CUDA graphs",
    "max-autotune": "Triton autotuning and CUDA graphs",
    "max-autotune-no-cudagraphs": "Triton autotuning",
}

# torch.compile(options={...}) keys the neuron backend reads; every other key is an Inductor setting.
NEURON_COMPILE_OPTIONS = frozenset({"model_name", "fallback_execution"})

INDUCTOR_CONFIG = "torch._inductor.config"
INDUCTOR_CUDA_GRAPH_KEYS = frozenset({"triton.cudagraphs", "triton.cudagraph_trees"})

# Dynamic shapes (rejected by the neuron backend).
MARK_DYNAMIC = frozenset({"torch._dynamo.mark_dynamic", "torch._dynamo.maybe_mark_dynamic"})
# torch._dynamo.config settings that turn dynamic shapes on, with the value that does so. Other dynamo
# settings (recompile_limit / cache_size_limit, suppress_errors, capture_scalar_outputs, optimize_ddp,
# ...) are backend-independent and matter on neuron as well: they are left alone.
DYNAMO_DYNAMIC_CONFIG: dict[str, bool] = {
    "torch._dynamo.config.assume_static_by_default": False,
    "torch._dynamo.config.dynamic_shapes": True,  # removed in PyTorch 2.1, still in older code bases
}

# Assignments to CUDA/cuDNN math flags: qualified name -> why it is moot on Trainium. Removal is the fix.
CUDA_FLAG_ASSIGNMENTS: dict[str, str] = {
    "torch.backends.cudnn.benchmark": "cuDNN autotuning; the Neuron compiler chooses kernels itself",
    "torch.backends.cudnn.benchmark_limit": "cuDNN autotuning; the Neuron compiler chooses kernels itself",
    "torch.backends.cudnn.deterministic": (
        "a cuDNN setting; for reproducible runs call torch.use_deterministic_algorithms(True)"),
    "torch.backends.cudnn.enabled": "there is no cuDNN on Trainium",
    "torch.backends.cudnn.allow_tf32": "TF32 is a CUDA math mode (convolutions)",
    "torch.backends.cudnn.fp32_precision": "TF32 is a CUDA math mode (convolutions)",
    "torch.backends.cudnn.conv.fp32_precision": "TF32 is a CUDA math mode (convolutions)",
    "torch.backends.cudnn.rnn.fp32_precision": "TF32 is a CUDA math mode (RNNs)",
    "torch.backends.cuda.matmul.allow_tf32": "TF32 is a CUDA math mode (cuBLAS matmuls)",
    "torch.backends.cuda.matmul.fp32_precision": "TF32 is a CUDA math mode (cuBLAS matmuls)",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": "a cuBLAS reduction setting",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction": "a cuBLAS reduction setting",
    "torch.backends.cuda.cufft_plan_cache.max_size": "a cuFFT setting",
}

# Statement calls that only configure CUDA libraries: qualified name -> why. Removal is the fix.
CUDA_FLAG_CALLS: dict[str, str] = {
    "torch.set_float32_matmul_precision": (
        "it selects TF32 paths of CUDA matmuls; neuron matmuls follow the tensor dtypes"),
    "torch.backends.cuda.enable_flash_sdp": (
        "it selects a CUDA SDPA kernel; on neuron SDPA picks its NKI flash path itself"),
    "torch.backends.cuda.enable_mem_efficient_sdp": (
        "it selects a CUDA SDPA kernel; on neuron SDPA picks its NKI path itself"),
    "torch.backends.cuda.enable_math_sdp": "it selects a CUDA SDPA kernel; on neuron SDPA picks its NKI path itself",
    "torch.backends.cuda.enable_cudnn_sdp": "it selects a CUDA SDPA kernel; on neuron SDPA picks its NKI path itself",
    "torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp": "a CUDA SDPA setting",
    "torch.backends.cuda.preferred_linalg_library": "it chooses between cuSOLVER and MAGMA",
    "torch.backends.cuda.preferred_blas_library": "it chooses between cuBLAS and cuBLASLt",
}

# Context managers that set cuDNN flags for a block: reported, not removed (the `with` body would
# need dedenting).
CUDA_FLAG_CONTEXTS: dict[str, str] = {
    "torch.backends.cudnn.flags": "cuDNN flags have no effect on Trainium",
}

# Contexts (or calls) that select CUDA SDPA kernels: reported, not removed (a `with` body would need
# dedenting).
SDPA_CONTEXTS = frozenset({
    "torch.backends.cuda.sdp_kernel",
    "torch.nn.attention.sdpa_kernel",
})

# CUDA graphs: torch.cuda.<name> (also reached through torch.cuda.graphs) -> (advice, effort).
CUDA_GRAPH_APIS: dict[str, tuple[str, str]] = {
    "CUDAGraph": ("run the captured step eagerly or compile it with torch.compile(backend=\"neuron\")", "high"),
    "graph": ("run the captured region eagerly or compile it with torch.compile(backend=\"neuron\")", "high"),
    "make_graphed_callables": ("drop the wrapper, or use torch.compile(backend=\"neuron\")", "medium"),
    "graph_pool_handle": ("CUDA-graph memory pools have no Trainium equivalent; drop it with the "
                          "capture code", "medium"),
    "is_current_stream_capturing": ("there is no stream capture on Trainium; the answer is always no", "low"),
    # private helpers (torch.cuda._<name>, also reached through torch.cuda.graphs and torch._C)
    "_graph_annotations": ("kernel annotations of a captured graph: drop them with the capture code", "low"),
    "_annotate_cuda_graph_trace": ("it post-processes profiler traces of CUDA graphs; drop it with the capture "
                                   "code", "low"),
    "_POOL_HANDLE": ("CUDA-graph memory pool handles have no Trainium equivalent; drop them with the capture "
                     "code", "medium"),
    "_graph_pool_handle": ("CUDA-graph memory pools have no Trainium equivalent; drop it with the capture code",
                           "medium"),
    "_CUDAGraph": ("run the captured step eagerly or compile it with torch.compile(backend=\"neuron\")", "high"),
    "_cuda_isCurrentStreamCapturing": ("there is no stream capture on Trainium; the answer is always no", "low"),
}
# the torch._C names of the private graph helpers (reported like torch.cuda._<name>)
CUDA_GRAPH_C_NAMES = frozenset({"_CUDAGraph", "_graph_pool_handle", "_cuda_isCurrentStreamCapturing"})
# keyword arguments that switch CUDA-graph capture on in libraries (Megatron, NeMo, TE, Lightning...)
CUDA_GRAPH_KEYWORDS = frozenset({
    "use_cuda_graph", "use_cuda_graphs", "cuda_graph", "cuda_graphs", "enable_cuda_graph",
    "enable_cuda_graphs", "cudagraphs", "use_cudagraphs", "enable_cudagraph",
})
