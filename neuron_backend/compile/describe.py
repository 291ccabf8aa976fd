"""What is being compiled, for the ``compile`` event (EVENTS.md): the compiled function (a module's
``forward`` for modules), Dynamo's compile id and the guard failures that caused a recompile, the
graph's inputs, and the dynamic dimensions that make TorchNeuron refuse it."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

_lock = threading.Lock()
_seen_reasons: dict[Any, int] = {}  # code object -> how many of Dynamo's guard failures were reported


def function_info() -> tuple[dict, Any]:
    """Name and source line of the compiled function (a module's forward for modules)."""
    from .. import events

    code = None
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        code = tx.f_code if tx is not None else None
    except Exception:  # noqa: BLE001
        code = None
    if code is not None and not events.is_internal(os.path.abspath(code.co_filename)):
        return ({"name": getattr(code, "co_qualname", code.co_name), "file": os.path.abspath(code.co_filename),
                 "line": code.co_firstlineno}, code)
    # A module whose forward lives in torch (nn.Sequential ...) is compiled through a wrapper frame:
    # find the OptimizedModule on the stack and report its module's forward.
    try:
        from torch._dynamo.eval_frame import OptimizedModule

        f = sys._getframe(1)
        while f is not None:
            s = f.f_locals.get("self") if "self" in f.f_code.co_varnames else None
            if isinstance(s, OptimizedModule):
                mod = s._orig_mod
                fc = type(mod).forward.__code__
                return ({"name": f"{type(mod).__qualname__}.forward", "file": os.path.abspath(fc.co_filename),
                         "line": fc.co_firstlineno, "module": type(mod).__qualname__}, code)
            f = f.f_back
    except Exception:  # noqa: BLE001
        pass
    if code is not None:
        return ({"name": code.co_name, "file": os.path.abspath(code.co_filename), "line": code.co_firstlineno}, code)
    return ({"name": "<unknown>"}, None)


def compile_id_and_reasons(code) -> tuple[str | None, list[str]]:
    """Dynamo's compile id ("frame/compile") and the guard failures that caused this recompile."""
    cid = None
    try:
        from torch._guards import CompileContext

        c = CompileContext.current_compile_id()
        cid = str(c) if c is not None else None
    except Exception:  # noqa: BLE001
        pass
    reasons: list[str] = []
    if code is not None:
        try:
            from torch._dynamo.utils import guard_failures

            allr = guard_failures.get(code, [])
            with _lock:
                start = _seen_reasons.get(code, 0)
                if start > len(allr):  # torch._dynamo.reset() cleared them
                    start = 0
                _seen_reasons[code] = len(allr)
            reasons = [str(r) for r in allr[start:]]
        except Exception:  # noqa: BLE001
            reasons = []
    return cid, reasons


def describe_inputs(gm, example_inputs) -> list[dict]:
    """Name, shape, dtype and device of each graph input (symbols and other values as text)."""
    import torch

    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    out = []
    for i, x in enumerate(example_inputs):
        d: dict[str, Any] = {"name": names[i] if i < len(names) else f"arg{i}"}
        if isinstance(x, torch.Tensor):
            d["shape"] = [s if isinstance(s, int) else str(s) for s in x.shape]
            d["dtype"] = str(x.dtype).replace("torch.", "")
            d["device"] = str(x.device)
            if isinstance(x, torch.nn.Parameter):
                d["parameter"] = True
        elif isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            d["symbol"] = str(x)
        else:
            d["value"] = repr(x)[:80]
        out.append(d)
    return out


def dynamic_dims(gm, example_inputs) -> list[str]:
    """The symbolic inputs and input sizes of a graph ("x.size(0)=s0"): TorchNeuron needs static shapes."""
    import torch

    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    dims: list[str] = []
    for i, x in enumerate(example_inputs):
        name = names[i] if i < len(names) else f"arg{i}"
        if isinstance(x, torch.SymInt):
            dims.append(name if name == str(x) else f"{name}={x}")
        elif isinstance(x, torch.Tensor):
            for j, s in enumerate(x.shape):
                if isinstance(s, torch.SymInt):
                    dims.append(f"{name}.size({j})={s}")
    return dims
