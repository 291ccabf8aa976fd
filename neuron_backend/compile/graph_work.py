"""The work inside torch.compile graphs, for the cost model (neuron_port/check/estimate, docs/estimate.md).

While a compiled graph runs the core's per-op accounting is paused (one NEFF, not eager ops), so its ops
have no signatures of their own. Here each compiled ATen graph is described once, when it is compiled:
its ops with signatures in the core's format (``bf16[4,32,64]``, scalars as text) from the shapes the
compiler traced, and it counts its runs (one Python increment per graph call, nothing per op). At exit
one ``graph_work`` event per graph that ran is recorded (neuron_backend/EVENTS.md).
"""

from __future__ import annotations

import atexit
import re
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
        if len(value) > MAX_LIST:  # as the core: the omitted tensors' elements and bytes
            rest = [_numel_bytes(v) for v in value[MAX_LIST:]]
            rest = [r for r in rest if r is not None]
            totals = f" {sum(n for n, _ in rest)}e {sum(b for _, b in rest)}B" if rest else ""
            items.append(f"...+{len(value) - MAX_LIST}{totals}")
        return "[" + ", ".join(items) + "]"
    return str(value)


def _value(value: Any) -> Any:
    meta = getattr(value, "meta", None)
    return meta.get("val", meta.get("example_value")) if meta is not None else value


def _numel_bytes(value: Any) -> Any:
    """(elements, bytes) of a traced tensor, None for anything else (or a symbolic size)."""
    value = _value(value)
    try:
        n = int(value.numel())
        return n, n * int(value.element_size())
    except (AttributeError, TypeError, RuntimeError):
        return None


def _bytes(value: Any) -> int:
    value = _value(value)
    if isinstance(value, (list, tuple)):
        return sum(_bytes(v) for v in value)
    counted = _numel_bytes(value)
    return counted[1] if counted is not None else 0


def describe_flow(g, ops: list[dict]) -> list[list]:
    """The graph's dataflow, for the cost model's fused regions (docs/estimate.md, "Fusion"): one entry per
    ATen call, in graph order, ``[op index in ops, output bytes, graph output (0/1), [[producer, bytes],
    ...]]``; a producer is the index of an earlier entry, or -1 for a graph input (its tensors are counted
    per input: ``[-1 - k, bytes]`` for the k-th input)."""
    index = {(o["op"], tuple(o["signature"])): i for i, o in enumerate(ops)}
    entry_of: dict[Any, int] = {}  # fx node -> entry (getitem: its source's)
    inputs: dict[Any, int] = {}
    flow: list[list] = []
    for node in g.graph.nodes:
        if node.op == "placeholder":
            inputs[node] = -1 - len(inputs)
            continue
        if node.op != "call_function":
            continue
        schema = getattr(node.target, "_schema", None)
        if schema is None:  # operator.getitem of a multi-output op: the same producer
            sources = node.all_input_nodes
            if sources and sources[0] in entry_of:
                entry_of[node] = entry_of[sources[0]]
            continue
        name, sig = _call(node, schema)
        producers = []
        for source in node.all_input_nodes:
            producer = entry_of.get(source, inputs.get(source))
            if producer is not None:
                producers.append([producer, _bytes(source)])
        entry_of[node] = len(flow)
        flow.append([index.get((name, tuple(sig)), -1), _bytes(node), 0, producers])
    for node in g.graph.nodes:  # mark the graph's outputs (getitems resolved above)
        if node.op == "output":
            for arg in node.all_input_nodes:
                at = entry_of.get(arg)
                if at is not None:
                    flow[at][2] = 1
    return flow


def _call(node, schema) -> tuple[str, list[str]]:
    """The op name and signature of one fx call, in the core's format."""
    name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    sig = []
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            sig.append(_describe(node.args[i]))
        elif arg.name in node.kwargs:
            sig.append(_describe(node.kwargs[arg.name]))
        else:
            sig.append(str(arg.default_value) if arg.has_default_value() else "None")
    return name, sig


LOOKUPS = ("aten::embedding", "aten::embedding_bag", "aten::_embedding_bag")  # their indices count the tokens
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')


def _lookup_origin(node) -> dict:
    """Where an embedding lookup of a graph came from, for the tokens per step: ``module``, the innermost
    module of the node's ``nn_module_stack`` (Dynamo's ``L['self'].wte`` as ``wte``), and ``site``, the
    last user frame of its ``stack_trace`` (absent when the tracer kept neither)."""
    out: dict = {}
    stack = node.meta.get("nn_module_stack") or {}
    if stack:
        path = str(list(stack.values())[-1][0])
        out["module"] = re.sub(r"^L\[['\"][^'\"]*['\"]\]\.?", "", path) or None
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    if frames:
        out["site"] = {"file": frames[-1][0], "line": int(frames[-1][1])}
    return out


def describe_graph(g) -> list[dict]:
    """(op, signature, count) of the ATen calls of graph module ``g``, in the core's signature format; an
    embedding lookup also with its ``module`` and ``site`` (``_lookup_origin``)."""
    counts: dict[tuple[str, tuple[str, ...]], int] = {}
    origins: dict[tuple[str, tuple[str, ...]], dict] = {}
    for node in g.graph.nodes:
        schema = getattr(node.target, "_schema", None)
        if node.op != "call_function" or schema is None:
            continue
        name, sig = _call(node, schema)
        key = (name, tuple(sig))
        counts[key] = counts.get(key, 0) + 1
        if name.split(".")[0] in LOOKUPS and key not in origins:
            origins[key] = _lookup_origin(node)
    return [{"op": op, "signature": list(sig), "count": n, **origins.get((op, sig), {})}
            for (op, sig), n in counts.items()]


def track(g, info: dict, run: Callable) -> Callable:
    """``run`` (a graph's boxed runner) counting its calls; the graph's ops described now."""
    global _registered
    from ..events import steps

    clock = steps.totals()
    ops = describe_graph(g)
    entry = {"graph": info.get("graph"), "key": info.get("key"), "runs": 0, "ops": ops, "flow": describe_flow(g, ops),
             "first_seen": {"optimizer_step": clock.get("optimizer_steps", 0), "forward": clock.get("forwards", 0)}}
    with _lock:
        _graphs[id(entry)] = entry
        if not _registered:  # registered after the events module's exit flush: atexit runs it first
            _registered = True
            atexit.register(_at_exit)
            from ..events import phase_calls

            phase_calls.add_source(_runs)  # its runs in phases that were not training steps

    def counted(args):
        entry["runs"] += 1
        return run(args)

    counted._boxed_call = True  # type: ignore[attr-defined]
    return counted


def _runs() -> dict:
    with _lock:
        return {("graph", key): e["runs"] for key, e in _graphs.items()}


def _at_exit() -> None:
    from .. import events
    from ..events import steps

    try:
        outside = steps.outside_calls(None)
    except Exception:  # noqa: BLE001 - never break interpreter shutdown
        outside = {}
    with _lock:
        ran = [{**e, **({"outside_runs": outside[("graph", k)]} if ("graph", k) in outside else {})}
               for k, e in _graphs.items() if e["runs"]]
    for entry in ran:
        try:
            events.record("graph_work", site=None, **entry)
        except Exception:  # noqa: BLE001 - never break interpreter shutdown
            return
