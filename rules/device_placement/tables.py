"""Data for the NP1xx (device placement) and NP5xx (distributed) rules: names, patterns and advice.

Kept apart from the rule classes (as ``mappings.py`` is for NP2xx) so the docs, the rules and the
tests read the same facts. Sources: shared/torchneuron.md sections 1.4, 6 and 7.
"""

from __future__ import annotations

import re

# -- NP1xx -------------------------------------------------------------------------------------------

# Legacy typed-tensor classes under torch.cuda -> the dtype they hold.
LEGACY_CUDA_TENSOR_TYPES: dict[str, str] = {
    "FloatTensor": "float32",
    "DoubleTensor": "float64",
    "HalfTensor": "float16",
    "BFloat16Tensor": "bfloat16",
    "ByteTensor": "uint8",
    "CharTensor": "int8",
    "ShortTensor": "int16",
    "IntTensor": "int32",
    "LongTensor": "int64",
    "BoolTensor": "bool",
}
# The strings Tensor.type() returns for them ("torch.cuda.FloatTensor").
LEGACY_CUDA_TYPE_STRINGS: frozenset[str] = frozenset(f"torch.cuda.{name}" for name in LEGACY_CUDA_TENSOR_TYPES)

# Device templates: the literal part of a %-, +- or str.format-template that yields "cuda:N".
# A device string: "cuda", "cuda:0", "cuda:12". Anything longer (prose, log text) is not a device.
CUDA_DEVICE_RE = re.compile(r"^cuda(:\d+)?$")
PERCENT_TEMPLATE_RE = re.compile(r"^cuda:%[dis]$")
FORMAT_TEMPLATE_RE = re.compile(r"^cuda:\{[A-Za-z0-9_]*(:d)?\}$")
PLUS_TEMPLATE = "cuda:"

# Calls whose string arguments are attribute or module names, or prose, not devices.
NAME_ARG_FUNCS: frozenset[str] = frozenset({"getattr", "hasattr", "setattr", "delattr", "print"})
LOG_METHODS: frozenset[str] = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "fatal"}
)
# Keywords whose 'cuda' value belongs to another family (NP3xx autocast, NP6xx ecosystem).
FOREIGN_DEVICE_KEYWORDS: frozenset[str] = frozenset({"device_type", "device_map", "accelerator"})
# Last name segments of callees whose device argument another rule owns.
FOREIGN_DEVICE_CALLEES: frozenset[str] = frozenset(
    {"autocast", "GradScaler", "custom_fwd", "custom_bwd", "get_autocast_dtype", "set_autocast_dtype",
     "is_autocast_enabled", "set_autocast_enabled", "is_autocast_available",
     "init_device_mesh", "DeviceMesh"}  # NP504
)

# Names of .cuda(i) arguments that hold a device *index* (so .to(i) means the same thing).
INDEX_NAME_RE = re.compile(
    r"(^|_)(rank|gpu|gpus|gpu_id|gpu_idx|id|idx|index|ordinal|i|j|k|n|device_id|device_idx|dev_id|"
    r"local_rank|device_index)$",
    re.IGNORECASE,
)

# Index expressions that are a process's rank: the last name segment of a Name/Attribute
# (``local_rank``, ``args.gpu``), or the environment variables torchrun sets. Under torchrun TorchNeuron
# gives each process exactly one NeuronCore (init_process_group sets NEURON_RT_VISIBLE_CORES=LOCAL_RANK),
# so a device indexed by one of these is simply ``neuron`` (shared/torchneuron.md section 6).
RANK_NAME_RE = re.compile(r"^(local_rank|rank|gpu|gpu_id|device_id)$", re.IGNORECASE)
RANK_ENV_VARS: frozenset[str] = frozenset({"LOCAL_RANK", "RANK"})
# Callees (last segment) that return a rank: dist.get_rank(), dist.get_node_local_rank(...).
RANK_CALLS: frozenset[str] = frozenset({"get_rank", "get_local_rank", "get_node_local_rank"})
ONE_CORE_PER_PROCESS = (
    "under torchrun TorchNeuron's init_process_group pins each process to one NeuronCore "
    "(NEURON_RT_VISIBLE_CORES=LOCAL_RANK), so `neuron` is that core and `neuron:<rank>` is invalid for every "
    "rank but 0 (torchneuron.md section 6)"
)

# -- NP5xx -------------------------------------------------------------------------------------------

NCCL = "nccl"
NEURON_BACKEND = "neuron"
# "cpu:gloo,cuda:nccl" style device->backend maps
BACKEND_MAP_RE = re.compile(r"^[a-z0-9_]+:[a-z0-9_]+(,[a-z0-9_]+:[a-z0-9_]+)*$")

DDP_QUALNAMES: frozenset[str] = frozenset(
    {"torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel"}
)
DATA_PARALLEL_QUALNAMES: frozenset[str] = frozenset(
    {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel",
     "torch.nn.parallel.data_parallel", "torch.nn.parallel.data_parallel.data_parallel"}
)
DIST = "torch.distributed."
P2P_OPS: dict[str, str] = {
    "send": "point-to-point send",
    "recv": "point-to-point recv",
    "isend": "point-to-point isend",
    "irecv": "point-to-point irecv",
    "batch_isend_irecv": "batched point-to-point ops",
    "P2POp": "point-to-point ops",
    "recv_anysource": "recv from any source",
    "monitored_barrier": "monitored_barrier",
}
SET_DEVICE_QUALNAMES: frozenset[str] = frozenset(
    {"torch.cuda.set_device", "torch.neuron.set_device", "torch.accelerator.set_device_index"}
)
SPAWN_QUALNAMES: frozenset[str] = frozenset({"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes"})
WORLD_SIZE_NAME_RE = re.compile(
    r"^(world_size|nprocs|nproc|nproc_per_node|ngpus?|n_gpus?|num_gpus|ngpus_per_node|gpus_per_node|"
    r"num_processes|num_procs|nr_gpus|gpu_count|n_devices|num_devices)$",
    re.IGNORECASE,
)

CUDA_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
NEURON_RT_VISIBLE_CORES = "NEURON_RT_VISIBLE_CORES"

# Environment variables that do nothing on Trainium, with what to use instead.
CUDA_ENV_ADVICE: dict[str, str] = {
    "PYTORCH_CUDA_ALLOC_CONF": "the neuron caching allocator does not read it",
    "PYTORCH_ALLOC_CONF": "the neuron caching allocator does not read it",
    "CUDA_LAUNCH_BLOCKING": "use NEURON_LAUNCH_BLOCKING=1 for synchronous execution when debugging",
    "CUDA_DEVICE_MAX_CONNECTIONS": "it tunes CUDA hardware queues; drop it",
    "CUDA_DEVICE_ORDER": "NeuronCores are numbered by the Neuron runtime; drop it",
    "CUDA_MODULE_LOADING": "it tunes CUDA module loading; drop it",
}
NCCL_ENV_RE = re.compile(r"^(TORCH_)?NCCL_[A-Z0-9_]+$")
NCCL_ENV_ADVICE = (
    "NCCL is not used on Trainium (the `neuron` process-group backend talks to the Neuron runtime "
    "collectives); drop it, or see NEURON_RT_ROOT_COMM_ID and the TORCH_NEURONX_* / NEURON_RT_* variables"
)

CORES_ADVICE = (
    "on Trainium the unit is the logical NeuronCore, one process per core: 4 per Trainium2 chip at the "
    "default LNC=2 (8 at LNC=1), 64 on a trn2.48xlarge; torch.neuron.device_count() returns that number"
)
