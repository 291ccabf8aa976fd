"""The work inside torch.compile graphs, for the cost model (neuron_port/check/estimate, docs/estimate.md).

While a compiled graph runs the core's per-op accounting is paused (one NEFF, not eager ops), so its ops
have no signatures of their own. Here each compiled ATen graph is described once, when it is compiled:
its ops with signatures in the core's format (``bf16[4,32,64]``, scalars as text) from the shapes the
compiler traced, and it counts its runs (one Python increment per graph call, nothing per op). At exit
one ``graph_work`` event per graph that ran is recorded (neuron_backend/EVENTS.md).
"""

from __future__ import annotations

import atexit
import threading
from typing import Any, Callable

DTYPES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16", "int64": "i64",
          "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8", "complex64": "c64",
          "complex128": "c128"}
MAX_LIST = 8  # as the core: lists truncated after 8 items, "...+N" for the rest

_lock = threading.Lock()
_graphs: dict[int, dict] = {}
_registered = False


def _describe(value: Any) -> str:
    meta = getattr(value, "meta", None)
    if meta is not None:  # an fx Node: its traced value
        value = meta.get("val", meta.get("example_value"))
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        dims = ",".join(str(int(d)) if str(d).lstrip("-").isdigit() else str(d) for d in shape)
        return f"{DTYPES.get(str(dtype).replace('torch.', ''), str(dtype))}[{dims}]"
    if isinstance(value, (list, tuple)):
        items = [_describe(v) for v in value[:MAX_LIST]]
        if len(value) > MAX_LIST:
            items.append(f"...+{len(value) - MAX_LIST}")
        return "[" + ", ".join(items) + "]"
    return str(value)


def describe_graph(g) -> list[dict]:
    """(op, signature, count) of the ATen calls of graph module ``g``, in the core's signature format."""
    counts: dict[tuple[str, tuple[str, ...]], int] = {}
    for node in g.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None:
            continue
        name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        sig = []
        for i, arg in enumerate(schema.arguments):
            if i < len(node.args):
                sig.append(_describe(node.args[i]))
            elif arg.name in node.kwargs:
                sig.append(_describe(node.kwargs[arg.name]))
            else:
                sig.append(str(arg.default_value) if arg.has_default_value() else "None")
        key = (name, tuple(sig))
        counts[key] = counts.get(key, 0) + 1
    return [{"op": op, "signature": list(sig), "count": n} for (op, sig), n in counts.items()]


def track(g, info: dict, run: Callable) -> Callable:
    """``run`` (a graph's boxed runner) counting its calls; the graph's ops described now."""
    global _registered
    from ..events import steps

    clock = steps.totals()
    entry = {"graph": info.get("graph"), "key": info.get("key"), "runs": 0, "ops": describe_graph(g),
             "first_seen": {"optimizer_step": clock.get("optimizer_steps", 0), "forward": clock.get("forwards", 0)}}
    with _lock:
        _graphs[id(entry)] = entry
        if not _registered:  # registered after the events module's exit flush: atexit runs it first
            _registered = True
            atexit.register(_at_exit)

    def counted(args):
        entry["runs"] += 1
        return run(args)

    counted._boxed_call = True  # type: ignore[attr-defined]
    return counted


def _at_exit() -> None:
    from .. import events

    with _lock:
        ran = [dict(e) for e in _graphs.values() if e["runs"]]
    for entry in ran:
        try:
            events.record("graph_work", site=None, **entry)
        except Exception:  # noqa: BLE001 - never break interpreter shutdown
            return
