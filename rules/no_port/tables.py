"""Data for the NP7xx rules (code with no automatic port): package roots, per-symbol advice, efforts.

Each table maps a dotted-name prefix to ``(advice, effort)``; the longest matching prefix wins, the
entry for the package root is the default. Sources: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (flash-attention,
xformers, Triton, custom CUDA kernels, TransformerEngine and bitsandbytes -> SDPA or NKI kernels
registered with ``@torch_neuronx.nki_op``; profiling with ``ProfilerActivity.PrivateUse1``), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html
(supported distributed stacks) and https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/guidelines-memory-management.html (float8).
"""

from __future__ import annotations

import re

Advice = dict[str, tuple[str, str]]

# the short form for messages: the family's docs (rules/no_port/__init__.py, NP701) give the recipe
# (check aws-neuron/nki-library first; `@torch_neuronx.nki_op("ns::name", mutates_args=...)`, plus
# `register_autograd()` for training)
NKI_ROUTE = "write an NKI kernel (`@torch_neuronx.nki_op`)"
# TorchNeuron runs SDPA on its NKI flash-attention kernel when seq len % 512 == 0, head dim <= 128, no
# dropout (NP702's docs)
SDPA_ROUTE = "use `F.scaled_dot_product_attention`"

TRITON: Advice = {
    "triton": ("Triton compiles for GPUs only: " + NKI_ROUTE, "high"),
    "triton.cdiv": ("replace `triton.cdiv(a, b)` by `(a + b - 1) // b`", "low"),
    "triton.next_power_of_2": ("replace by `1 << (n - 1).bit_length()`", "low"),
    "triton.testing": ("time with `torch.utils.benchmark` (synchronise with `torch.neuron.synchronize()`)", "low"),
    "triton.runtime": ("Triton's runtime has no Trainium backend: " + NKI_ROUTE, "high"),
}

FLASH_ATTN: Advice = {
    "flash_attn": ("flash-attn's kernels are CUDA-only: " + SDPA_ROUTE, "medium"),
    "flash_attn.flash_attn_func": (
        SDPA_ROUTE + " on `q.transpose(1, 2)` ... and transpose back",
        "medium"),
    "flash_attn.flash_attn_interface": (SDPA_ROUTE, "medium"),
    "flash_attn.flash_attn_qkvpacked_func": (SDPA_ROUTE + " on `qkv.unbind(dim=2)`", "medium"),
    "flash_attn.flash_attn_kvpacked_func": (SDPA_ROUTE + " on `kv.unbind(dim=2)`", "medium"),
    "flash_attn.flash_attn_varlen_func": (
        "variable-length attention has no static-shape equivalent: pad the batch and use SDPA with a mask",
        "high"),
    "flash_attn.flash_attn_with_kvcache": ("use SDPA over a static KV cache (HF StaticCache)", "high"),
    "flash_attn.bert_padding": ("unpad/pad helpers serve varlen kernels: keep padded batches and masks", "medium"),
    "flash_attn.layers.rotary": ("use the real-valued rotary formulation `x * cos + rotate_half(x) * sin`",
                                 "low"),
    "flash_attn.ops": ("use the torch op (`nn.RMSNorm`, `nn.LayerNorm`, `F.gelu`, ...)", "low"),
    "flash_attn.losses": ("use `torch.nn.CrossEntropyLoss`", "low"),
    "flash_attn.modules": ("use `nn.MultiheadAttention` or a module built on SDPA", "medium"),
}

XFORMERS: Advice = {
    "xformers": ("xformers' kernels are CUDA-only: use the PyTorch ops each one fuses (attention: "
                 + SDPA_ROUTE.removeprefix("use ") + ")", "medium"),
    # its fused non-attention ops: the torch ops they fuse, not SDPA
    "xformers.ops": ("xformers' ops are CUDA/Triton kernels: use the PyTorch ops each one fuses", "medium"),
    "xformers.ops.scaled_index_add": ("use `input.index_add(0, index, source * scaling, alpha=alpha)`", "low"),
    "xformers.ops.index_select_cat": (
        "use `torch.cat([s.index_select(0, i).flatten() for s, i in zip(sources, indices)])`", "low"),
    "xformers.ops.memory_efficient_attention": (
        SDPA_ROUTE + " on (batch, heads, seq, dim): xformers takes (batch, seq, heads, dim)", "medium"),
    "xformers.ops.fmha": ("attention biases map to SDPA's `attn_mask` / `is_causal=True` "
                          "(LowerTriangularMask is `is_causal=True`)", "medium"),
    "xformers.ops.LowerTriangularMask": ("use `is_causal=True` in SDPA", "low"),
    "xformers.ops.SwiGLU": ("write SwiGLU with torch ops: `w2(F.silu(w1(x)) * w3(x))`", "low"),
    "xformers.ops.unbind": ("use `torch.unbind`", "low"),
}

APEX: Advice = {
    "apex": ("apex is a CUDA extension library: use the torch equivalent", "medium"),
    "apex.amp": ("use `torch.autocast(device_type=\"neuron\", dtype=torch.bfloat16)` (no loss scaling in bf16)",
                 "medium"),
    "apex.optimizers": ("use `torch.optim.AdamW` / `torch.optim.SGD` / `torch.optim.Adam`", "low"),
    "apex.normalization.FusedLayerNorm": ("use `torch.nn.LayerNorm`", "low"),
    "apex.normalization.FusedRMSNorm": ("use `torch.nn.RMSNorm`", "low"),
    "apex.normalization.MixedFusedLayerNorm": ("use `torch.nn.LayerNorm`", "low"),
    "apex.normalization.MixedFusedRMSNorm": ("use `torch.nn.RMSNorm`", "low"),
    "apex.normalization": ("use `torch.nn.LayerNorm` / `torch.nn.RMSNorm`", "low"),
    "apex.parallel.DistributedDataParallel": (
        "use `torch.nn.parallel.DistributedDataParallel` with the `neuron` process-group backend", "low"),
    "apex.parallel.convert_syncbn_model": ("use `torch.nn.SyncBatchNorm.convert_sync_batchnorm`", "low"),
    "apex.parallel.SyncBatchNorm": ("use `torch.nn.SyncBatchNorm`", "low"),
    "apex.contrib": ("apex.contrib kernels are CUDA-only: use torch ops or " + NKI_ROUTE, "high"),
    "apex.transformer": ("use FSDP2 / DTensor tensor parallelism (supported by TorchNeuron)", "high"),
}

TRANSFORMER_ENGINE: Advice = {
    "transformer_engine": (
        "TransformerEngine's kernels are CUDA-only: use the torch modules under bf16 autocast", "high"),
    "transformer_engine.pytorch.Linear": ("use `torch.nn.Linear`", "low"),
    "transformer_engine.pytorch.LayerNorm": ("use `torch.nn.LayerNorm`", "low"),
    "transformer_engine.pytorch.RMSNorm": ("use `torch.nn.RMSNorm`", "low"),
    "transformer_engine.pytorch.LayerNormLinear": ("use `nn.LayerNorm` followed by `nn.Linear`", "low"),
    "transformer_engine.pytorch.LayerNormMLP": ("use `nn.LayerNorm` and an MLP of `nn.Linear` layers", "medium"),
    "transformer_engine.pytorch.DotProductAttention": (SDPA_ROUTE, "medium"),
    "transformer_engine.pytorch.TransformerLayer": ("build the layer from torch modules and SDPA", "high"),
    "transformer_engine.pytorch.fp8_autocast": (
        "no fp8 recipes on Trainium: use `torch.autocast(device_type=\"neuron\", dtype=torch.bfloat16)`",
        "medium"),
    "transformer_engine.common.recipe": ("FP8 recipes have no Neuron equivalent: train in bf16", "medium"),
}

DEEPSPEED: Advice = {
    "deepspeed": (
        "DeepSpeed has no Trainium accelerator: use DDP, FSDP2 or DTensor parallelism", "high"),
    "deepspeed.initialize": (
        "replace the engine by FSDP2 (`fully_shard`, as ZeRO-3) or DDP with a torch optimizer", "high"),
    "deepspeed.init_distributed": ("use `dist.init_process_group(backend=\"neuron\")`", "low"),
    "deepspeed.zero.Init": ("initialise on `device=\"meta\"` and shard with FSDP2 (`to_empty` after)", "medium"),
    "deepspeed.zero": ("ZeRO corresponds to FSDP2 sharding", "high"),
    "deepspeed.checkpointing": ("use `torch.utils.checkpoint.checkpoint`", "low"),
    "deepspeed.ops": ("use the torch op (`torch.optim.AdamW` for FusedAdam / DeepSpeedCPUAdam)", "low"),
    "deepspeed.comm": ("use `torch.distributed` with the `neuron` backend", "low"),
    "deepspeed.add_config_arguments": ("drop the DeepSpeed command-line arguments", "low"),
    "accelerate.DeepSpeedPlugin": ("use accelerate's FSDP plugin (FSDP2) instead of DeepSpeed", "medium"),
    "accelerate.utils.DeepSpeedPlugin": ("use accelerate's FSDP plugin (FSDP2) instead of DeepSpeed", "medium"),
}

BITSANDBYTES: Advice = {
    "bitsandbytes": ("bitsandbytes ships CUDA kernels only: use the torch equivalent in bf16", "high"),
    "bitsandbytes.optim": ("use `torch.optim.AdamW` (no 8-bit optimizer states on Neuron)", "low"),
    "bitsandbytes.nn.Linear8bitLt": ("use `torch.nn.Linear` with bf16 weights", "medium"),
    "bitsandbytes.nn.Linear4bit": ("use `torch.nn.Linear` with bf16 weights (QLoRA becomes LoRA)", "medium"),
    "bitsandbytes.nn.StableEmbedding": ("use `torch.nn.Embedding` followed by `nn.LayerNorm`", "low"),
    "bitsandbytes.nn.Embedding": ("use `torch.nn.Embedding`", "low"),
    "bitsandbytes.functional": ("quantization kernels have no Neuron port", "high"),
}

CPP_EXTENSION_CALLS: frozenset[str] = frozenset({
    "torch.utils.cpp_extension.load",
    "torch.utils.cpp_extension.load_inline",
    "torch.utils.cpp_extension.CUDAExtension",
    "torch.utils.cpp_extension.CppExtension",
})
CUDA_SOURCE_RE = re.compile(r"^[\w./\\*{}$-]*\.(cu|cuh)$")

NVTX: Advice = {
    "nvtx": ("NVTX ranges are CUDA tooling: use `torch.profiler.record_function(name)`", "low"),
}

GPU_MONITORING: Advice = {
    "pynvml": ("NVML sees no devices on Trainium: use `neuron-monitor` / `torch.neuron.device_count()`", "low"),
    "nvidia_smi": ("use `neuron-ls` / `neuron-monitor` (nvidia-ml-py's nvidia_smi sees no devices)", "low"),
    "py3nvml": ("use `neuron-ls` / `neuron-monitor`", "low"),
    "GPUtil": ("GPUtil parses nvidia-smi: use `torch.neuron.device_count()` / `neuron-ls`", "low"),
    "gpustat": ("use `neuron-top` / `neuron-monitor`", "low"),
    "nvitop": ("use `neuron-top` / `neuron-monitor`", "low"),
}
NVIDIA_SMI_ADVICE = (
    "`nvidia-smi` does not exist on a Trainium host: use `neuron-ls`, `neuron-top` or `neuron-monitor` "
    "(in code `torch.neuron.device_count()`)"
)
SHELL_CALLS: frozenset[str] = frozenset({
    "subprocess.run", "subprocess.call", "subprocess.check_call", "subprocess.check_output",
    "subprocess.Popen", "subprocess.getoutput", "subprocess.getstatusoutput", "os.system", "os.popen",
})
# The spellings of ProfilerActivity.CUDA (NP712).
PROFILER_ACTIVITY_CUDA = ("torch.profiler.ProfilerActivity.CUDA", "torch.autograd.ProfilerActivity.CUDA",
                          "torch._C._profiler.ProfilerActivity.CUDA", "torch.autograd.profiler.ProfilerActivity.CUDA")

# Exceptions whose handler makes a `try:` body an optional (guarded) import.
GUARD_EXCEPTIONS: frozenset[str] = frozenset(
    {"ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OSError", "RuntimeError"}
)
# `if is_flash_attn_2_available():`, `if importlib.util.find_spec("triton"):`, `if HAS_TRITON:`
AVAILABILITY_CALL_RE = re.compile(r"^_?(is_\w*available|find_spec|find_loader|has_\w+|\w*_available)$")
AVAILABILITY_FLAG_RE = re.compile(r"^_?(HAS_\w+|has_\w+|\w+_AVAILABLE|\w+_available|USE_\w+|use_\w+|HAVE_\w+)$")

# NP714-NP716: raw CUDA reached from Python without a kernel language NP701-NP708 know.
CUDA_ARRAYS: Advice = {
    "cupy": ("CuPy runs on NVIDIA GPUs only: use torch tensors on `neuron`", "high"),
    "cupy.RawKernel": ("CUDA C compiled by NVRTC: " + NKI_ROUTE, "high"),
    "cupy.RawModule": ("CUDA C compiled by NVRTC: " + NKI_ROUTE, "high"),
    "pycuda": ("PyCUDA drives the CUDA driver directly: use torch on `neuron`", "high"),
    "cuda.bindings": ("cuda-python calls the CUDA driver directly: use torch on `neuron`", "high"),
    "cuda.core": ("cuda-python's cuda.core compiles and launches CUDA code: " + NKI_ROUTE, "high"),
}
NUMBA_CUDA: Advice = {
    "numba.cuda": ("numba's CUDA target is NVIDIA-only: write the kernel with torch ops", "high"),
    "numba.cuda.to_device": ("use `tensor.to(\"neuron\")`", "medium"),
    "numba.cuda.is_available": ("use `torch.neuron.is_available()`", "low"),
}
TORCH_RAW_CUDA: Advice = {
    "torch.cuda._compile_kernel": ("compiles CUDA C with NVRTC: " + NKI_ROUTE, "high"),
    "torch._C": ("a private CUDA binding (torch._C._cuda_*): use the public `torch.neuron` API", "medium"),
    "torch._C._cudart": ("direct CUDA runtime access has no neuron equivalent", "high"),
}
# Which torch._C names NP716 reports (the advice of TORCH_RAW_CUDA["torch._C"]): its CUDA bindings only.
TORCH_C_CUDA_RE = re.compile(r"^torch\._C\._cuda")

# NP717: a module that imports one of these at top level (unguarded) is CUDA-only as a whole, and a function
# decorated by one of them is a kernel: neither is edited inside. Prefixes of dotted names.
# (CUDA extension builds stay NP708's, site by site: a setup.py is not a module to keep, it has nothing to edit.)
KERNEL_LIBRARIES = ("triton", "tilelang", "cutlass", "helion", "cupy", "pycuda", "numba.cuda", "cuda.bindings",
                    "cuda.core", "tensorrt", "torch_tensorrt")  # TensorRT: engines built and run on NVIDIA GPUs

# NP717 too: packages that run on NVIDIA GPUs or the CPU and have no Trainium build, which the program's own
# code calls with a device (a simulator's ``sim_device="cuda:0"``, a GPU data pipeline's ``device_id``). The
# device values passed into their calls are theirs, not the program's device choice: kept as they are (the
# model and the optimizer beside them are ported), reported once per call. Prefixes of dotted names; sources:
# Isaac Gym / IsaacGymEnvs (``sim_device``, ``rl_device``: "cuda:N" or "cpu", PhysX GPU or CPU pipeline,
# https://github.com/isaac-sim/IsaacGymEnvs README), Isaac Lab (https://isaac-sim.github.io/IsaacLab/, device
# "cuda:N" or "cpu"), NVIDIA DALI (https://docs.nvidia.com/deeplearning/dali/: ``device_id`` of a GPU),
# RAPIDS cuDF / cuML / cuGraph (https://docs.rapids.ai/: NVIDIA GPUs only).
CUDA_ONLY_PACKAGES = ("isaacgym", "isaacgymenvs", "isaaclab", "omni.isaac", "nvidia.dali", "cudf", "cuml", "cugraph")
CUDA_ONLY_PACKAGE_ADVICE = "has no Trainium build"

# NP718: compiled CUDA extension modules imported by name. The naming convention (``CUDA_EXTENSION_NAME_RE``:
# ``*_cuda``, ``*_cuda_*``, ``cuda_*``, as setup.py files name what nvcc builds) finds them without a list;
# the table gives the torch alternative of the common ones, and names those whose name says nothing
# (apex's ``amp_C``, flash-attn's ``rotary_emb``, mmcv's ``_ext``). Prefixes of dotted names.
CUDA_EXTENSION_NAME_RE = re.compile(r"(?i)^(?:\w+_cuda(?:_\w+)?|cuda_\w+)$")
CUDA_EXTENSIONS: Advice = {
    "flash_attn_2_cuda": (SDPA_ROUTE, "medium"),
    "flash_attn_cuda": (SDPA_ROUTE, "medium"),
    "amp_C": ("use torch optimizers with `foreach=True`, `clip_grad_norm_`, `torch._foreach_*`", "medium"),
    "apex_C": ("use `torch._utils._flatten_dense_tensors` / `_unflatten_dense_tensors`", "low"),
    "fused_layer_norm_cuda": ("use `torch.nn.LayerNorm` / `torch.nn.RMSNorm`", "low"),
    "fused_adam_cuda": ("use `torch.optim.AdamW`", "low"),
    "syncbn": ("use `torch.nn.SyncBatchNorm`", "low"),
    "selective_scan_cuda": ("use the torch reference scan (`selective_scan_ref`) or an NKI kernel", "high"),
    "causal_conv1d_cuda": ("use `F.conv1d(x, weight, padding=width - 1, groups=dim)[..., :seqlen]`", "low"),
    "deform_conv_cuda": ("use `torchvision.ops.deform_conv2d`", "medium"),
    "mmcv._ext": ("use `torchvision.ops` (nms, roi_align, deform_conv2d) or torch ops", "medium"),
    "rotary_emb": ("use the real-valued rotary formulation `x * cos + rotate_half(x) * sin`", "low"),
    "dropout_layer_norm": ("use `F.dropout` followed by `torch.nn.LayerNorm`", "low"),
    "xentropy_cuda_lib": ("use `torch.nn.CrossEntropyLoss` (`label_smoothing=`)", "low"),
    "fused_dense_lib": ("use `torch.nn.Linear` (and `F.gelu`)", "low"),
    "fused_softmax_lib": ("use `torch.softmax` (with the mask added first)", "low"),
}
CUDA_EXTENSION_DEFAULT = ("use the torch ops it fuses, or " + NKI_ROUTE, "high")
# packages other NP7xx rules report (a module inside them is theirs), and names that are not extensions
NOT_CUDA_EXTENSIONS = ("torch", "numba", "cuda", "cupy", "pycuda", "triton", "flash_attn", "apex", "xformers",
                       "transformer_engine", "deepspeed", "bitsandbytes")
