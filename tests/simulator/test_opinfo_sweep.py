"""PyTorch's OpInfo samples of the native ops on the simulated neuron device, compared with the CPU.

The normal run sweeps a fixed representative subset (opinfo_sweep.SUBSET, a few seconds); set
NEURON_PORT_FULL_OPINFO=1 (or NEURON_PORT_FULL_SWEEPS=1, every full sweep of the suite) to sweep every
OpInfo of a native op (about 200 OpInfos, 1-2 minutes on a loaded 2-core machine). Every failure must be a
documented TorchNeuron limitation listed in rules/op_limitations.toml, and every listed limitation of a
swept op must still fail.
"""

from __future__ import annotations

import json
import os

import pytest
from conftest import FULL_SWEEPS

from neuron_backend import policy

from . import opinfo_sweep
from .conftest import PRELUDE

pytestmark = pytest.mark.slow

FULL = os.environ.get("NEURON_PORT_FULL_OPINFO", "").strip() == "1" or FULL_SWEEPS
SWEEP_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "opinfo_sweep.py")


def run_sweep(run_sim, names: list[str] | None) -> dict:
    code = PRELUDE + f"""
import importlib.util
spec = importlib.util.spec_from_file_location("opinfo_sweep", {SWEEP_FILE!r})
sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sweep)
result(sweep.sweep({names!r}))
"""
    r = run_sim(code, timeout=1800)
    assert r.proc.returncode == 0, r.proc.stderr[-5000:]
    return r.result


def matches(lim: dict, failure: dict) -> bool:
    return (lim["op"] == failure["op"] and failure["dtype"] in lim["dtypes"] and lim["kind"] == failure["kind"]
            and lim["match"] in failure["message"])


def compare_with_limitations(res: dict) -> tuple[list[dict], list[tuple[str, str]]]:
    """(failures that no limitation explains, (op, dtype) of limitations of swept ops that did not fail)."""
    limits = policy.limitations()
    unexplained = [f for f in res["failures"] if not any(matches(lim, f) for lim in limits)]
    swept = set(res["ops"]) | {op + "_" for op in res["ops"]}
    stale = []
    for lim in limits:
        if lim["op"] not in swept:
            continue
        for dt in lim["dtypes"]:
            if not any(matches(lim, f) for f in res["failures"] if f["dtype"] == dt):
                stale.append((lim["op"], dt))
    return unexplained, stale


def report(res: dict) -> str:
    return (f"{len(res['ops'])} OpInfos, {res['cases']} (op, dtype, variant) cases, {res['samples']} samples "
            f"({res['by_dtype']}), {len(res['failures'])} failure groups")


def test_subset_names_are_native_opinfos():
    """Every name of the CI subset selects an OpInfo of a native op (the subset cannot shrink silently)."""
    from torch.testing._internal.common_methods_invocations import op_db  # noqa: F401 (after the shim)

    ops = opinfo_sweep.native_opinfos(set(policy.native_ops()))
    names = {opinfo_sweep.full_name(o) for o in ops} | {o.name for o in ops}
    missing = [n for n in opinfo_sweep.SUBSET if n not in names]
    assert not missing, missing
    assert len(opinfo_sweep.SUBSET) >= 40


def test_limitations_are_documented():
    limits = policy.limitations()
    assert limits, "rules/op_limitations.toml lists no limitation"
    for lim in limits:
        assert {"op", "dtypes", "kind", "match", "what", "source"} <= set(lim), lim
        assert set(lim["dtypes"]) <= set(opinfo_sweep.DTYPE_NAMES.values()), lim
        assert lim["kind"] in ("error", "mismatch"), lim
        assert lim["source"].strip() and lim["what"].strip(), lim


def test_opinfo_subset(run_sim):
    res = run_sweep(run_sim, list(opinfo_sweep.SUBSET))
    assert {n.split(".")[0] for n in opinfo_sweep.SUBSET} <= {n.split(".")[0] for n in res["ops"]}
    assert res["samples"] > 3000, report(res)
    assert set(res["by_dtype"]) == set(opinfo_sweep.DTYPE_NAMES.values()), res["by_dtype"]
    unexplained, stale = compare_with_limitations(res)
    assert not unexplained, f"{report(res)}; failures not in rules/op_limitations.toml:\n" + "\n".join(
        json.dumps(f) for f in unexplained)
    assert not stale, f"limitations that no longer fail (remove them from rules/op_limitations.toml): {stale}"


@pytest.mark.skipif(not FULL, reason="the whole OpInfo sweep runs with NEURON_PORT_FULL_OPINFO=1 (or _SWEEPS=1)")
def test_opinfo_full(run_sim):
    res = run_sweep(run_sim, None)
    print(report(res))
    assert len(res["ops"]) > 150, report(res)
    unexplained, stale = compare_with_limitations(res)
    assert not unexplained, f"{report(res)}; failures not in rules/op_limitations.toml:\n" + "\n".join(
        json.dumps(f) for f in unexplained)
    assert not stale, f"limitations that no longer fail (remove them from rules/op_limitations.toml): {stale}"
