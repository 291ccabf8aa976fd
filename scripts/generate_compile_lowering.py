"""Generate rules/compile_lowering.toml: which ATen ops TorchNeuron's compile path can lower, measured
by running the real Torch-MLIR lowering (not a hand list).

TorchNeuron's ``torch.compile(backend="neuron")`` hands each AOTAutograd graph to Torch-MLIR
(``torch_neuronx/neuron_dynamo_backend/fx/fx_transform.py``: import to the raw torch dialect, Neuron's own
``torch-raw-to-neuron-backend-pipeline``, then ``torchdynamo-export-to-torch-backend-pipeline``, whose
DecomposeComplexOps pass rewrites composite ops, then ``torch-backend-to-stablehlo-backend-pipeline``: the
TorchToStablehlo conversions) before neuronx-cc. Neuron's own pass is not public, so what it lowers
first is not seen (unconfirmed). This script runs the public part of that pipeline, from the pinned torch-mlir wheel, on one-op
graphs: every ATen op overload that PyTorch's OpInfo samples reach, forward and backward (traced at the
ATen level with make_fx, no decomposition; in-place and out= overloads, which AOTAutograd functionalizes,
are left out), is exported alone and lowered to StableHLO with no PyTorch
decomposition applied first. An op "lowers" when that pipeline accepts it; one that fails is recorded
with Torch-MLIR's first diagnostic. The simulator (neuron_backend/compile/lowering.py) adds PyTorch's
core ATen decompositions on top, as TorchNeuron's AOTAutograd step does.

Set-up (a throwaway environment; torch-mlir is not a dependency of neuron-port):

    python -m pip download torch-mlir==20261001 --no-deps -d /tmp/tm && unzip -q /tmp/tm/*.whl -d /tmp/tm/x
    PYTHONPATH=/tmp/tm/x .venv/bin/python scripts/generate_compile_lowering.py

``--check`` compares the probe with the committed table and exits 1 on a difference.
"""

from __future__ import annotations

import argparse
import types
import unittest
import os
import re
import sys
import tempfile
from pathlib import Path

TORCH_MLIR_VERSION = "20261001"
OUT = Path(__file__).resolve().parent.parent / "rules" / "compile_lowering.toml"
PIPELINE = ("func.func(torch-match-quantized-custom-ops), torchdynamo-export-to-torch-backend-pipeline, "
            "torch-backend-to-stablehlo-backend-pipeline")


def op_key(target) -> str:
    name = target._schema.name.split("::", 1)[1]
    return name if target._overloadname == "default" else f"{name}.{target._overloadname}"


def joint_function(info, sample, backward: bool = True):
    """(fn, tensors): ``info``'s op on ``sample`` as a function of the sample's tensors that also takes the
    gradients of its differentiable outputs (the backward ops), so make_fx traces forward and backward;
    with ``backward=False`` the forward alone."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten

    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    tensors = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]

    def fn(*ts):
        vals = list(leaves)
        for i, t in zip(tensors, ts):
            vals[i] = t
        inp, args, kwargs = tree_unflatten(vals, spec)
        out = info.op(inp, *args, **kwargs)
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
        wrt = [t for t in ts if t.requires_grad]
        if backward and outs and wrt:
            return out, torch.autograd.grad(sum(o.sum() for o in outs), wrt, allow_unused=True)
        return out

    return fn, [leaves[i] for i in tensors]


def traced_ops(op_db) -> dict:
    """ATen op overload -> one traced node using it (forward and backward of each OpInfo's first sample)."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    found: dict = {}
    for info in op_db:
        try:
            samples = list(info.sample_inputs("cpu", torch.float32, requires_grad=info.supports_autograd))[:2]
        except Exception:  # noqa: BLE001 - an OpInfo without float32 samples
            continue
        for s in samples:
            fn, args = joint_function(info, s)
            try:
                g = make_fx(fn)(*args)
            except Exception:  # noqa: BLE001 - an untraceable joint (e.g. a complex output: no real loss)
                # The op itself is still probed through its forward alone (polar, whose complex output
                # has no implicit gradient, was never reached before).
                try:
                    g = make_fx(joint_function(info, s, backward=False)[0])(*args)
                except Exception:  # noqa: BLE001 - an untraceable sample
                    continue
            for n in g.graph.nodes:
                # In-place and out= overloads never reach the compile path: AOTAutograd functionalizes them.
                if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) \
                        and n.target.namespace == "aten" and not n.target._schema.is_mutable:
                    found.setdefault(op_key(n.target), n)
    return found


def probe(node) -> str | None:
    """None when Torch-MLIR lowers ``node``'s op alone to StableHLO, else its first diagnostic."""
    import torch
    from torch.utils._pytree import tree_flatten, tree_unflatten
    from torch_mlir import fx

    def concrete(a):
        if isinstance(a, torch.fx.Node):
            v = a.meta.get("val")
            if isinstance(v, torch.Tensor):
                return torch.zeros(v.shape, dtype=v.dtype)
            return v
        return a

    args = torch.fx.node.map_aggregate(node.args, concrete)
    kwargs = torch.fx.node.map_aggregate(node.kwargs, concrete)
    leaves, spec = tree_flatten((args, kwargs))
    idx = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
    target = node.target

    class One(torch.nn.Module):
        def forward(self, *ts):
            vals = list(leaves)
            for i, t in zip(idx, ts):
                vals[i] = t
            a, k = tree_unflatten(vals, spec)
            return target(*a, **k)

    # MLIR prints its diagnostics on fd 2, not into the exception: capture them.
    with tempfile.TemporaryFile(mode="w+") as cap:
        saved = os.dup(2)
        os.dup2(cap.fileno(), 2)
        try:
            fx.export_and_import(One(), *[leaves[i] for i in idx], output_type="stablehlo",
                                 decomposition_table=[])
            return None
        except Exception as e:  # noqa: BLE001 - the diagnostic is the result
            error = e
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        cap.seek(0)
        diagnostics = cap.read()
    return diagnostic(op_key(target), str(error), diagnostics)


def diagnostic(op: str, message: str, diagnostics: str) -> str:
    """One line: the pipeline stage that failed and the op Torch-MLIR could not legalize."""
    stage = "StableHLO conversion" if "StableHLO" in message else (
        "Torch backend pipeline" if "Torch Backend IR" in message else "export")
    m = re.search(r'name = "torch\.(aten\.[\w.]+)"', diagnostics) or \
        re.search(r"failed to legalize operation '(torch\.aten\.[\w.]+)'", diagnostics)
    if m:
        return f"{stage}: failed to legalize {m.group(1).removeprefix('torch.')}"
    m = re.search(r"error: ([^\n]+)", diagnostics)
    if stage == "export":
        return "export: " + (next((ln for ln in message.splitlines() if ln.strip()), "failed"))[:160]
    if m and "torch.constant" not in m.group(1) and "torch.aten" not in m.group(1):
        return f"{stage}: aten.{op} not converted ({m.group(1)[:120]})"
    return f"{stage}: aten.{op} not converted"


def fx_decompositions() -> list[str]:
    """The PyTorch decompositions Torch-MLIR's FX import path runs before import
    (torch_mlir.extras.fx_decomp_util.get_decomposition_table: the core ATen table less the ops Torch-MLIR
    decomposes itself, plus a few extra overloads), as ``name.overload``."""
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    return sorted({op_key(k) for k in get_decomposition_table() if k.namespace == "aten"})


def importer_drops() -> list[str]:
    """The ATen ops Torch-MLIR's FX importer removes from a graph instead of importing them: the entries of
    its canonicalization table (torch_mlir/extras/fx_importer.py NODE_CANONICALIZE, applied to every op node
    by ``_import_torch_op_overload``, which skips a node its canonicalizer turns into None) that return None.
    ``aten._assert_async.msg`` is one ("TODO: A more suitable op to replace it?"): the asserts PyTorch's
    ``one_hot`` decomposition adds never reach StableHLO. Each canonicalizer is called on a bare node; one
    that needs the node's arguments rewrites it rather than drops it, and is not listed."""
    import torch
    from torch_mlir.extras import fx_importer

    dropped = []
    for op, canonicalize in fx_importer.NODE_CANONICALIZE.items():
        node = torch.fx.Graph().call_function(op, ())
        try:
            if canonicalize(node) is None:
                dropped.append(op_key(op))
        except Exception:  # noqa: BLE001 - reads the node's arguments: a rewrite, not a drop
            pass
    return sorted(dropped)


def render(lowers: list[str], fails: dict[str, str], torch_version: str, decomps: list[str],
           dropped: list[str]) -> str:
    q = lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'  # noqa: E731
    lines = [
        "# Generated by scripts/generate_compile_lowering.py; do not edit (re-run the script).",
        "# Which ATen ops TorchNeuron's compile path (Torch-MLIR -> StableHLO) lowers, measured by running the",
        "# real Torch-MLIR pipeline on one-op graphs of every op PyTorch's OpInfo samples reach (forward and",
        "# backward), with no PyTorch decomposition applied first. neuron_backend/compile/lowering.py reads it.",
        "[source]",
        f"torch_mlir = {q(TORCH_MLIR_VERSION)}  # the PyPI wheel torch-mlir=={TORCH_MLIR_VERSION}",
        f"torch = {q(torch_version)}  # the torch that traced the probes",
        f"pipeline = {q(PIPELINE)}",
        "code = \"llvm/torch-mlir: lib/Conversion/TorchToStablehlo/*.cpp (Basic, Pooling, Reduction, Linear, "
        "GatherScatter, ViewLike, ...), lib/Dialect/Torch/Transforms/DecomposeComplexOps.cpp\"",
        "",
        "[lowering]",
        "lowers = [",
    ]
    lines += [f"    {q(op)}," for op in lowers]
    lines += ["]", "", "[lowering.fails]", "# op = Torch-MLIR's first diagnostic"]
    lines += [f"{q(op)} = {q(msg)}" for op, msg in sorted(fails.items())]
    lines += ["", "[import]",
              "# Ops Torch-MLIR's FX importer drops before import (torch_mlir/extras/fx_importer.py: a NODE_CANONICALIZE",
              "# entry that returns None; _import_torch_op_overload then skips the node): nothing to lower, no check at",
              "# run time. TorchNeuron imports with a subclass of that importer (neuron_dynamo_backend/fx/fx_importer.py",
              "# NeuronFxImporter, fx/fx_transform.py stateless_fx_import).",
              "dropped = ["]
    lines += [f"    {q(op)}," for op in dropped]
    lines += ["]"]
    lines += ["", "[decompositions]",
              "# The PyTorch decompositions Torch-MLIR's FX path applies before import (torch_mlir/extras/",
              "# fx_decomp_util.py get_decomposition_table: core ATen less the ops Torch-MLIR decomposes itself in",
              "# DecomposeComplexOps, e.g. roll, plus extra overloads, e.g. grid_sampler_2d).",
              "torch_mlir_fx = ["]
    lines += [f"    {q(op)}," for op in decomps]
    lines += ["]"]
    return "\n".join(lines) + "\n"


def stub_expecttest() -> None:
    """common_methods_invocations imports expecttest (a PyTorch test dependency); only op_db and its
    sample inputs are used, so a stand-in module is enough when it is missing."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        m = types.ModuleType("expecttest")
        m.TestCase = unittest.TestCase
        sys.modules["expecttest"] = m


def worker(start: int) -> int:
    """Probe the ops from index ``start`` on, one result line each (flushed): Torch-MLIR can crash the
    process on an op (a segfault in its C API), so the parent runs this in a subprocess and goes on
    after the op that crashed."""
    import json
    import logging

    stub_expecttest()
    from torch.testing._internal.common_methods_invocations import op_db

    logging.disable(logging.WARNING)
    nodes = sorted(traced_ops(op_db).items())
    known = os.environ.get("NP_PROBE_KNOWN")  # --new-only: the committed table's ops are not probed again
    if known:
        nodes = [(op, n) for op, n in nodes if op not in set(known.split(","))]
    print(f"COUNT\t{len(nodes)}", flush=True)
    for i in range(start, len(nodes)):
        op, node = nodes[i]
        print(f"START\t{i}\t{op}", flush=True)
        print(f"RESULT\t{i}\t{op}\t{json.dumps(probe(node))}", flush=True)
    return 0


def probe_all(known: frozenset = frozenset()) -> tuple[list[str], dict[str, str]]:
    import json
    import subprocess

    lowers, fails = [], {}
    start, count = 0, None
    while count is None or start < count:
        env = dict(os.environ, NP_PROBE_KNOWN=",".join(sorted(known))) if known else None
        proc = subprocess.Popen([sys.executable, __file__, "--worker", str(start)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env)
        current = None
        for line in proc.stdout:
            kind, *rest = line.rstrip("\n").split("\t")
            if kind == "COUNT":
                count = int(rest[0])
            elif kind == "START":
                current = (int(rest[0]), rest[1])
            elif kind == "RESULT":
                i, op, err = int(rest[0]), rest[1], json.loads(rest[2])
                (lowers.append(op) if err is None else fails.__setitem__(op, err))
                print(f"[{i + 1}/{count}] {op}: {'lowers' if err is None else err}", file=sys.stderr)
                current, start = None, i + 1
        rc = proc.wait()
        if current is not None:  # the worker died inside this op's probe
            i, op = current
            fails[op] = f"Torch-MLIR crashed on it (worker exit {rc})"
            print(f"[{i + 1}/{count}] {op}: crashed ({rc})", file=sys.stderr)
            start = i + 1
        elif rc != 0 or count is None:
            sys.exit(f"generate_compile_lowering.py: the probe worker failed (exit {rc}) before any op")
    return sorted(lowers), fails


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed table; exit 1 on a difference")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--import-only", action="store_true",
                    help="re-probe only the importer's drops, keeping the committed one-op probe results")
    ap.add_argument("--new-only", action="store_true",
                    help="probe only the ops the trace reaches that the committed table lacks, keeping the rest")
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    ns = ap.parse_args(argv)
    try:
        import torch_mlir  # noqa: F401
    except ImportError:
        sys.exit("generate_compile_lowering.py: torch_mlir is not importable; see the set-up in this script's docstring")
    if ns.worker is not None:
        return worker(ns.worker)
    import torch

    if ns.import_only or ns.new_only:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib
        committed = tomllib.loads(ns.out.read_text())
        lowers, fails = committed["lowering"]["lowers"], committed["lowering"].get("fails", {})
        torch_version = committed["source"]["torch"]
        if ns.new_only:
            new_lowers, new_fails = probe_all(frozenset(lowers) | frozenset(fails))
            lowers, fails = sorted(set(lowers) | set(new_lowers)), {**fails, **new_fails}
    else:
        lowers, fails = probe_all()
        torch_version = torch.__version__.split("+")[0]
    text = render(lowers, fails, torch_version, fx_decompositions(), importer_drops())
    if ns.check:
        same = ns.out.is_file() and ns.out.read_text() == text
        print("compile_lowering.toml is up to date" if same else "compile_lowering.toml differs from the probe")
        return 0 if same else 1
    fd, tmp = tempfile.mkstemp(dir=ns.out.parent, prefix=".compile_lowering.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, ns.out)
    print(f"wrote {ns.out}: {len(lowers)} ops lower, {len(fails)} fail")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
