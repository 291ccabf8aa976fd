"""Every assumed constant of the cost model: name, value, unit, what it means, its source (None: an
assumption of ours, stated in docs/estimate.md) and where the user sets it (``[tool.neuron-port.estimate]``
key, same name with dashes, or a flag). The order is the order of docs/estimate.md."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Optional

TORCH_COMPILE_DOC = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/how-to-optimize-with-torch-compile.html"


@dataclass(frozen=True)
class Assumption:
    name: str
    value: float
    unit: str
    doc: str
    source: Optional[str] = None

    @property
    def key(self) -> str:
        return self.name.replace("_", "-")

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "unit": self.unit, "doc": self.doc, "source": self.source,
                "configurable": f"[tool.neuron-port.estimate] {self.key}"}


DEFAULTS: tuple[Assumption, ...] = (
    Assumption("dispatch_seconds_per_op", 2e-05, "s",
               "Host time to issue one eager op (look up its cached NEFF, launch it); ops inside a compiled graph "
               "pay none. No published Trainium figure; PyTorch's CPU-side cost per eager op on an H100 is put "
               "at 5-25 us (third-party), and the same value serves the GPU row.",
               "https://jiahuanglin.xyz/all_lessons/gpu_kernel_serving/18_pytorch_to_kernel.html"),
    Assumption("graph_call_seconds", 3.8e-05, "s",
               "Host time of one call of a torch.compile graph beyond its kernels: Dynamo's guards, "
               "AOTAutograd's runtime wrapper, the backend's call. Measured on this project's 2-core x86 CI "
               "machine, one thread: 38 us a call of a one-op graph (aot_eager) against 7 us eager "
               "(bench/README.md \"estimate\"); a server core is faster, so an upper end. Tried 10-40 us."),
    Assumption("kernel_launch_seconds", 5e-06, "s",
               "GPU: host time to launch one kernel of a compiled graph (Inductor's wrapper calls each fused "
               "kernel and each library GEMM). Third-party: each cudaLaunchKernel costs 'roughly 5 to 20 "
               "microseconds'; the low end taken. Tried 3-20 us.",
               "https://factryze.ai/scale-atlas/compute/tensor-core-throughput"),
    Assumption("gemm_latency_seconds", 4.8e-06, "s",
               "GPU: fixed time of one GEMM kernel beyond its tiles at the matmul rate (pipeline fill and "
               "drain, the epilogue): what keeps small matmuls below the large-GEMM rate. Derived from a "
               "third-party cuBLAS table (B200, bf16): 2048^3 at 1006 TFLOPS against 8192^3 at 1610, i.e. "
               "17.1 us where the large-GEMM rate and the wave quantization (148 SMs) give 12.3 us; assumed to "
               "carry to the H100 and A100. Tried 2-8 us.", "https://pyptx.dev/performance/"),
    Assumption("neff_execution_seconds", 3e-05, "s",
               "Trainium: fixed device time of one NEFF execution of a compiled graph (the runtime starts its "
               "instruction streams and DMA queues). Assumed: no published steady-state figure (AWS notes "
               "about 1 ms of start-up for a NEFF's first execution only, aws-neuron-sdk issue 994). Tried "
               "10-100 us."),
    Assumption("compute_fraction", 0.5, "",
               "Achievable fraction of peak FLOP/s for the 'expected' time of ops without a device efficiency "
               "(matmuls and attention have theirs). Assumed; 0.3-0.8 tried (docs/estimate.md)."),
    Assumption("memory_fraction", 0.7, "",
               "Achievable fraction of peak HBM bandwidth for the 'expected' time. Assumed; 0.6-0.9 tried."),
    Assumption("collective_overlap", 0.5, "",
               "Share of the step's device time a collective can hide behind (DDP's bucketed all-reduce runs "
               "during the backward, about 2/3 of a step; FSDP prefetches its all-gathers). Assumed; 0-1 tried."),
    Assumption("host_link_gbps", 16.0, "GB/s",
               "Device<->host copy bandwidth for the inputs and results of a CPU-fallback op. Assumed; "
               "8-64 GB/s tried."),
    Assumption("host_fallback_gflops", 100.0, "GFLOP/s",
               "Host compute rate of a CPU-fallback op's kernel where the run measured none (a shape-only run): "
               "about what a 2-core x86 CI machine sustains on fp32 matmul (bench/README.md)."),
    Assumption("host_fallback_gbps", 10.0, "GB/s",
               "Host memory bandwidth of a CPU-fallback op's kernel where the run measured none (its tensors' "
               "bytes read and written once). Assumed: below this machine's measured copy rate."),
    Assumption("host_transfer_seconds", 0.0007, "s",
               "Fixed cost of one host<->device round trip of a CPU-fallback op. Assumed (no source with an "
               "address: a third-party project's notes, read without their address, give 0.7-3.5 ms a round trip "
               "on a trn2.3xlarge with torch-neuronx 2.14.3); 0.7-3.5 ms tried, the low end taken."),
    Assumption("eager_neff_compile_seconds", 3.0, "s",
               "neuronx-cc time for one eager NEFF (one new op signature) on a cold cache. Assumed: no published "
               "figure; moves only the first-run time."),
    Assumption("graph_compile_minutes", 5.0, "min",
               "neuronx-cc time for one torch.compile graph on a cold cache (AWS: the first call 'can take "
               "several minutes for large models'; third-party ports report 13-50 min).", TORCH_COMPILE_DOC),
    Assumption("neff_load_seconds", 0.05, "s",
               "Time to load one NEFF from a warm shared cache instead of compiling it. Assumed: no published "
               "figure."),
)


def assumptions(overrides: Optional[Mapping[str, float]] = None) -> tuple[Assumption, ...]:
    """The defaults with the user's values (keys with dashes or underscores); unknown keys raise KeyError."""
    by_name = {a.name: a for a in DEFAULTS}
    out = dict(by_name)
    for key, value in (overrides or {}).items():
        name = key.replace("-", "_")
        if name not in by_name:
            raise KeyError(key)
        out[name] = replace(by_name[name], value=float(value))
    return tuple(out[a.name] for a in DEFAULTS)


def values(items: Iterable[Assumption]) -> dict[str, float]:
    return {a.name: a.value for a in items}
