"""CUDA -> neuron mapping tables (data, not logic), as HIPIFY keeps its CUDA2HIP tables.

Each entry names the ``torch.cuda`` attribute (relative to ``torch.cuda``), what it becomes on the
``neuron`` target (``torch.neuron.<name>``) and on the ``accelerator`` target (a full dotted name, or
None when the device-agnostic API has no equivalent), with a note for the docs. The facts behind the
neuron column are in https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/neuron.py, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/memory-profiling-guide.html (the ``torch.neuron`` module of TorchNeuron).
"""

from __future__ import annotations

from typing import NamedTuple, Optional


class ApiMapping(NamedTuple):
    neuron: str  # name under torch.neuron
    accelerator: Optional[str]  # full dotted name, or None
    note: str = ""


# torch.cuda.<key> -> torch.neuron.<neuron> / <accelerator>
TORCH_CUDA_API: dict[str, ApiMapping] = {
    "is_available": ApiMapping("is_available", "torch.accelerator.is_available"),
    "device_count": ApiMapping("device_count", "torch.accelerator.device_count",
                               "counts logical NeuronCores (4 per Trainium2 chip at LNC=2)"),
    "current_device": ApiMapping("current_device", "torch.accelerator.current_device_index"),
    "set_device": ApiMapping("set_device", "torch.accelerator.set_device_index"),
    "device": ApiMapping("device", None, "context manager selecting a NeuronCore"),
    "synchronize": ApiMapping("synchronize", "torch.accelerator.synchronize"),
    "is_initialized": ApiMapping("is_initialized", None),
    "init": ApiMapping("init", None),
    "manual_seed": ApiMapping("manual_seed", "torch.manual_seed"),
    "manual_seed_all": ApiMapping("manual_seed_all", "torch.manual_seed"),
    "seed": ApiMapping("seed", "torch.seed"),
    "seed_all": ApiMapping("seed_all", "torch.seed"),
    "initial_seed": ApiMapping("initial_seed", "torch.initial_seed"),
    "get_rng_state": ApiMapping("get_rng_state", None),
    "set_rng_state": ApiMapping("set_rng_state", None),
    "empty_cache": ApiMapping("empty_cache", "torch.accelerator.empty_cache"),
    "memory_stats": ApiMapping("memory_stats", "torch.accelerator.memory_stats",
                               "call torch.neuron.synchronize() first: neuron memory stats are asynchronous"),
    "memory_allocated": ApiMapping("memory_allocated", "torch.accelerator.memory_allocated"),
    "max_memory_allocated": ApiMapping("max_memory_allocated", "torch.accelerator.max_memory_allocated"),
    "memory_reserved": ApiMapping("memory_reserved", "torch.accelerator.memory_reserved"),
    "max_memory_reserved": ApiMapping("max_memory_reserved", "torch.accelerator.max_memory_reserved"),
    "reset_peak_memory_stats": ApiMapping("reset_peak_memory_stats", "torch.accelerator.reset_peak_memory_stats"),
    "reset_accumulated_memory_stats": ApiMapping(
        "reset_accumulated_memory_stats", "torch.accelerator.reset_accumulated_memory_stats"),
    # a deprecated CUDA alias (it calls reset_peak_memory_stats); torch.neuron lists only the new name
    "reset_max_memory_allocated": ApiMapping(
        "reset_peak_memory_stats", "torch.accelerator.reset_peak_memory_stats",
        "the deprecated CUDA name of reset_peak_memory_stats"),
    "memory_summary": ApiMapping("memory_summary", None),
    "Stream": ApiMapping("Stream", "torch.Stream"),
    "Event": ApiMapping("Event", "torch.Event"),
    "stream": ApiMapping("stream", None),
    "current_stream": ApiMapping("current_stream", "torch.accelerator.current_stream"),
    "default_stream": ApiMapping("default_stream", None),
    "set_stream": ApiMapping("set_stream", "torch.accelerator.set_stream"),
    "get_device_name": ApiMapping("get_device_name", None, 'returns "neuron:N", not a hardware name'),
    "get_device_properties": ApiMapping("get_device_properties", None),
    "is_bf16_supported": ApiMapping("is_bf16_supported", None, "always True on Trainium"),
}

# torch.cuda.<key> with no neuron equivalent: advice and effort for the report.
TORCH_CUDA_NO_EQUIVALENT: dict[str, tuple[str, str]] = {
    "get_device_capability": (
        "no compute capability on Trainium; branch on the feature (bf16 is always supported)", "low"),
    "get_arch_list": ("there are no CUDA architectures on Trainium; drop the check", "low"),
    "is_tf32_supported": ("TF32 flags have no effect on Trainium; drop the check", "low"),
    "nvtx": ("NVTX ranges: use torch.profiler.record_function", "low"),
    "memory_snapshot": ("use torch_neuronx memory snapshots, viewable in Neuron Explorer", "medium"),
    "memory._record_memory_history": ("use torch_neuronx memory snapshots in Neuron Explorer", "medium"),
    "memory._dump_snapshot": ("use torch_neuronx memory snapshots in Neuron Explorer", "medium"),
    "memory._snapshot": ("it raises on Trainium: use torch-neuronx memory snapshots (Neuron memory profiling "
                         "guide)", "medium"),
    # torch.neuron has get_rng_state(i) / set_rng_state(state, i) but no *_all variants
    # (https://github.com/parmoham-aws/test-repo-parmoham/blob/98154b86/torch_neuronx/neuron.py)
    "get_rng_state_all": ("use [torch.neuron.get_rng_state(i) for i in range(torch.neuron.device_count())]",
                          "low"),
    "set_rng_state_all": ("call torch.neuron.set_rng_state(state, i) for each saved state", "low"),
    "random.get_rng_state_all": ("use [torch.neuron.get_rng_state(i) for i in range(torch.neuron.device_count())]",
                                 "low"),
    "random.set_rng_state_all": ("call torch.neuron.set_rng_state(state, i) for each saved state", "low"),
    "mem_get_info": ("use torch.neuron.get_device_properties(i).total_memory minus "
                     "torch.neuron.memory_reserved(i)", "low"),
    "set_per_process_memory_fraction": ("not available on neuron; partition cores with "
                                        "NEURON_RT_VISIBLE_CORES instead", "low"),
    "utilization": ("use neuron-top or Neuron Observer (nobs) for device utilisation", "low"),
    "temperature": ("use Neuron Observer (nobs) for device health", "low"),
    "power_draw": ("use Neuron Observer (nobs) for device telemetry", "low"),
    "list_gpu_processes": ("use neuron-ls / neuron-top to see processes on NeuronCores", "low"),
    "ipc_collect": ("CUDA IPC has no neuron equivalent; drop the call", "low"),
    "jiterator": ("jiterator compiles CUDA kernels at run time; write an NKI kernel registered as a "
                  "PyTorch op instead", "high"),
    "cudart": ("direct CUDA runtime access has no neuron equivalent", "high"),
    "get_allocator_backend": ("the neuron caching allocator is not configurable this way", "low"),
    "caching_allocator_alloc": ("raw allocator access has no neuron equivalent", "medium"),
    "caching_allocator_delete": ("raw allocator access has no neuron equivalent", "medium"),
    "MemPool": ("CUDA memory pools have no neuron equivalent", "medium"),
    "use_mem_pool": ("CUDA memory pools have no neuron equivalent", "medium"),
}

# torch.cuda names that are CUDA spellings of device-generic ones, reported by NP202 with advice (no
# torch.neuron name to rename them to): key -> (advice, effort).
TORCH_CUDA_GENERIC_NAMES: dict[str, tuple[str, str]] = {
    # torch.cuda.OutOfMemoryError is torch.OutOfMemoryError (c10::OutOfMemoryError) in PyTorch 2.13
    "OutOfMemoryError": ("spell it torch.OutOfMemoryError (what TorchNeuron raises is not documented)", "low"),
}

# Other dotted names (outside torch.cuda) with no neuron equivalent, reported by NP202.
OTHER_NO_EQUIVALENT: dict[str, tuple[str, str]] = {
    "torch.version.cuda": (
        "torch.version.cuda is None on a Trainium host; test torch.neuron.is_available() instead", "low"),
    "torch.backends.cuda.is_built": (
        "test torch.neuron.is_available() instead of whether torch was built with CUDA", "low"),
}
