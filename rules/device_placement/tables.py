"""Data for the NP1xx (device placement) rules: names, patterns and advice.

Kept apart from the rule classes (as ``rules/cuda_api/tables.py`` is for NP2xx) so the docs, the rules and
the tests read the same facts. Other families read some of it: ``CUDA_DEVICE_RE`` in NP6xx; the NP5xx data itself
is in ``rules/distributed/tables.py``. Sources: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/get-started/quickstart-build-first-model.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst.
"""

from __future__ import annotations

import re

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

# A device indexed by the global rank (``f"cuda:{dist.get_rank()}"``, ``os.environ["RANK"]``): NP101 renames it
# (``neuron:<rank>``) and says this. Under torchrun TorchNeuron makes each process's core neuron:<LOCAL_RANK>
# (c10_neuron: device_count() is the local world size; rules/op_policy.toml [distributed.confirmed]
# device_index); the global rank equals it on one node only.
GLOBAL_RANK_ENV_VARS: frozenset[str] = frozenset({"RANK"})
GLOBAL_RANK_CALLS: frozenset[str] = frozenset({"get_rank"})
GLOBAL_RANK_ADVICE = "; index by LOCAL_RANK, the process's core on every node"

# Device types that name a NeuronCore (no rule reads it; it was a public name of the package before the split).
NEURON_DEVICE_VALUES = ("neuron",)

# Device-type names (c10's ``DeviceTypeName``, lower case, and the PrivateUse1 names backends register):
# a list, tuple or set literal holding ``"cuda"`` and another of these is a table of device types (which
# types support a feature, which a test accepts), not a device choice. NP101 / NP102 keep ``"cuda"`` in it
# and add ``"neuron"``, as torch's own tables do with the PrivateUse1 name
# (torch/optim/optimizer.py ``_get_capturable_supported_devices``: ``["cuda", "xpu", "hpu"]`` plus
# ``torch._C._get_privateuse1_backend_name()``); a table the code already extends with that name is left.
DEVICE_TYPE_NAMES: frozenset[str] = frozenset({
    "cpu", "cuda", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla", "vulkan", "metal",
    "xpu", "mps", "meta", "hpu", "lazy", "ipu", "mtia", "privateuseone",
    "neuron", "npu", "musa", "mlu", "gcu",  # PrivateUse1 backends' names
})
PRIVATEUSE1_NAME_CALL = "_get_privateuse1_backend_name"
