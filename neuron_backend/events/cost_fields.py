"""Fields of the events file that feed the cost model (neuron_port/check/estimate, docs/estimate.md):
the host time and signatures of the CPU-fallback ops, the signatures of the native copies (``_to_copy``,
``copy_``, ``clone``: no NEFF, but bytes moved), and the peak bytes allocated on the simulated
device. Read when a snapshot is written, never per op (the host time is summed in C++)."""

from __future__ import annotations

from typing import Any, Callable, Optional

MAX_SIGNATURES = 50  # per fallback or native copy op, the most-called: their tensors give the bytes they move


def signature_lines(sigs: list, first_seen: Callable[[int], Any], outside: Optional[dict] = None) -> list[dict]:
    """The most-called signatures of one op (``MAX_SIGNATURES`` of them), each with its calls, when it was
    first seen and its calls outside the training steps (``outside``: phase_calls.py)."""
    lines = []
    for calls, seq, _flags, _unsupported, desc in sorted(sigs, key=lambda g: -g[0])[:MAX_SIGNATURES]:
        line: dict[str, Any] = {"signature": desc, "calls": calls}
        first = first_seen(seq)
        if first is not None:
            line["first_seen"] = first
        if outside and seq in outside:
            line["outside_calls"] = outside[seq]
        lines.append(line)
    return lines


def fallback_fields(c_module: Any, name: str, sigs: list, first_seen: Callable[[int], Any],
                    outside: Optional[dict] = None) -> dict:
    """``host_seconds`` (the kernel runs on the host, summed in C++) and ``signatures`` of one fallback op:
    their inputs give the device/host copy bytes."""
    host_ns = dict(c_module.fallback_host_ns()) if c_module is not None else {}
    signatures = signature_lines(sigs, first_seen, outside)
    from . import state

    if state.mode == "shape_only":  # nothing ran: no host time was measured (the estimate models it)
        return {"signatures": signatures}
    return {"host_seconds": host_ns.get(name, 0) / 1e9, "signatures": signatures}


def summary_fields(c_module: Any) -> dict:
    """``peak_allocated_bytes``: the most bytes allocated at once on any simulated device of the process
    (since start, or since the user's last ``reset_peak_memory_stats``); ``float32_matmul_precision``:
    ``torch.get_float32_matmul_precision()`` at the end (the GPU rows run fp32 matmuls at TF32 when it is
    not "highest")."""
    if c_module is None:
        return {}
    peaks = []
    for device in range(c_module.device_count()):
        try:
            peaks.append(int(c_module.memory_stats(device)["allocated_bytes.all.peak"]))
        except (RuntimeError, ValueError, IndexError):  # a core this process may not use
            continue
    out: dict = {"peak_allocated_bytes": max(peaks)} if peaks else {}
    try:  # TF32 matmuls on a GPU when "high"/"medium" (allow_tf32 sets the same state)
        import torch

        out["float32_matmul_precision"] = torch.get_float32_matmul_precision()
    except Exception:  # noqa: BLE001 - a summary is never lost for it
        pass
    return out
