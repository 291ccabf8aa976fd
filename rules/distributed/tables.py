"""Data for the NP5xx (distributed) rules, Python (NP501-NP511) and launch files (NP520-NP525): backend
names, qualified names of DDP / DataParallel / point-to-point ops, world-size names, environment
variables and the advice that goes with them. Sources: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/get-started/quickstart-build-first-model.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst.
"""

from __future__ import annotations

import re

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
    "NCCL is not used on Trainium (the `neuron` backend uses the Neuron runtime's collectives): drop it"
)

CORES_ADVICE = (
    "count logical NeuronCores (torch.neuron.device_count()): 4 per Trainium2 chip, 64 on a trn2.48xlarge"
)
