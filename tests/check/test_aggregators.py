"""The runtime aggregators on small hand-written events (two ranks merging per site), and build_runtime
on a folder of hand-written event files. No simulator needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from neuron_port.check.aggregate.command import command_failed_finding
from neuron_port.check.aggregate.compiles import CompileAggregator, CompileFailure
from neuron_port.check.aggregate.demotions import DemotionAggregator, Float64DemotionEntry, Int64DemotionEntry
from neuron_port.check.aggregate.distributed import DistributedAggregator
from neuron_port.check.aggregate.fallbacks import FallbackAggregator
from neuron_port.check.aggregate.neff_cache import NeffCacheAggregator
from neuron_port.check.aggregate.ops import OpsAggregator, OpTotals
from neuron_port.check.aggregate.shapes import ShapeAggregator
from neuron_port.check.aggregate.unsupported import UnsupportedAggregator
from neuron_port.check.events import (
    CompileEvent,
    CompileInput,
    DemotionEvent,
    DistributedEvent,
    EagerCompileEvent,
    FallbackEvent,
    FallbackSite,
    FunctionRef,
    NeffCacheCounts,
    NeffCacheEvent,
    OpEvent,
    Site,
    SummaryEvent,
    UnsupportedEvent,
    read_events,
)
from neuron_port.check.preview import PreviewTree
from neuron_port.check.runner import RunStatus
from neuron_port.check.runtime import build_runtime
from neuron_port.check.sites import SiteMapper, UserSite
from neuron_port.reporters.text.check import render_check
from neuron_port.report import Report


@pytest.fixture
def root(tmp_path) -> Path:
    return tmp_path


@pytest.fixture
def mapper(root) -> SiteMapper:
    return SiteMapper(root)


def at(root: Path, line: int, code: str = "x = f(y)", file: str = "train.py", function: str = "step") -> Site:
    return Site(file=str(root / file), line=line, function=function, code=code)


def shown(line: int, code: str = "x = f(y)", path: str = "train.py", function: str = "step") -> UserSite:
    return UserSite(path=path, line=line, function=function, code=code)


def test_ops_totals_and_readiness():
    ops = OpsAggregator()
    assert ops.totals(unique_signatures=0).readiness is None
    ops.add(OpEvent("aten::mm", "native", calls=6), 0)
    ops.add(OpEvent("aten::view", "native_no_neff", calls=2), 1)
    ops.add(OpEvent("aten::multinomial", "fallback", calls=2), 1)
    totals = ops.totals(unique_signatures=5)
    assert totals == OpTotals(calls=10, native_calls=8, fallback_calls=2, unique_signatures=5)
    assert totals.to_json() == {"calls": 10, "native_calls": 8, "fallback_calls": 2, "unique_signatures": 5,
                                "readiness": 0.8}


def test_fallbacks_merge_two_ranks_per_site(root, mapper):
    fallbacks = FallbackAggregator(mapper)
    fallbacks.add(FallbackEvent("aten::multinomial", 5, (FallbackSite(at(root, 137), 4),
                                                        FallbackSite(at(root, 140), 1))), 0)
    fallbacks.add(FallbackEvent("aten::multinomial", 3, (FallbackSite(at(root, 137), 3),)), 1)
    fallbacks.add(FallbackEvent("aten::nonzero", 20, (FallbackSite(None, 20),)), None)
    nonzero, multinomial = fallbacks.entries()
    assert (nonzero.op, nonzero.calls, nonzero.sites[0].site, nonzero.sites[0].ranks) == ("aten::nonzero", 20, None, ())
    assert multinomial.to_json() == {"op": "aten::multinomial", "calls": 8, "sites": [
        {"path": "train.py", "line": 137, "function": "step", "code": "x = f(y)", "calls": 7, "ranks": [0, 1]},
        {"path": "train.py", "line": 140, "function": "step", "code": "x = f(y)", "calls": 1, "ranks": [0]}]}
    assert nonzero.to_json()["sites"] == [{"calls": 20, "ranks": []}]
    assert [(f.code, f.path, f.line, f.message) for f in fallbacks.findings()] == [
        ("NP901", "<unknown>", 1, "`aten::nonzero` falls back to the CPU on Trainium (20 call(s) here)"),
        ("NP901", "train.py", 137, "`aten::multinomial` falls back to the CPU on Trainium (7 call(s) here)"),
        ("NP901", "train.py", 140, "`aten::multinomial` falls back to the CPU on Trainium (1 call(s) here)")]
    assert fallbacks.findings()[1].end_column == len("x = f(y)") + 1


def test_shapes_merge_ranks_per_op_and_line(root, mapper):
    """The per-line eager compile entries (the steady-state analysis is in test_shapes.py)."""
    shapes = ShapeAggregator(mapper)
    for rank, length in ((0, 8), (0, 16), (1, 16), (1, 32)):  # the 16 signature from both ranks counts once
        shapes.add(EagerCompileEvent("aten::bmm", (f"f32[4,{length},64]", "f32[64]"), 2, 1, at(root, 30)), rank)
        shapes.add(EagerCompileEvent("aten::add.Tensor", (f"f32[4,{length}]", 1), 1, 0, at(root, 30)), rank)
    for width in (64, 256):
        shapes.add(EagerCompileEvent("aten::mm", (f"f32[{width},64]",), 1, 0, at(root, 40)), 0)
    for length in (3, 5, 9):
        shapes.add(EagerCompileEvent("aten::relu", (f"f32[{length}]",), 1, 0, None), 0)
    assert shapes.unique_signatures == 3 + 3 + 2 + 3
    eager = shapes.entries()
    assert [(e.op, e.site and e.site.line, e.unique_signatures, e.calls) for e in eager] == [
        ("aten::add.Tensor", 30, 3, 4), ("aten::bmm", 30, 3, 8), ("aten::relu", None, 3, 3), ("aten::mm", 40, 2, 2)]


def test_compiles_merge_per_call_site(root, mapper):
    compiles = CompileAggregator(mapper)
    (root / "job.py").write_text("import torch\n\ndef f(x):\n    return x\n")
    function = FunctionRef(name="f", file=str(root / "job.py"), line=3)
    call = at(root, 8, "g(x)", file="job.py", function="<module>")
    compiles.add(CompileEvent(event="compile", function=function, status="compiled",
                              inputs=(CompileInput(name="x", shape=(2, 3)),), site=call), 0)
    compiles.add(CompileEvent(event="recompile", function=function, status="compiled", reason="size of x changed",
                              inputs=(CompileInput(name="x", shape=(4, "s0")), CompileInput(name="n", value="1")),
                              site=call), 0)
    compiles.add(CompileEvent(event="recompile_limit", function="'f' (job.py:3)", reason="limit reached",
                              site=call), 0)
    compiles.add(CompileEvent(event="compile", function=function, status="fallback", message="boom", site=call), 1)
    compiles.add(CompileEvent(event="compile", status="compiled", site=at(root, 20)), 1)
    entry, anonymous = compiles.entries()
    assert anonymous.function == "<compiled function>" and anonymous.ranks == (1,)
    assert entry.to_json() == {
        "function": "f", "definition": {"path": "job.py", "line": 3, "function": "f", "code": ""},
        "site": {"path": "job.py", "line": 8, "function": "<module>", "code": "g(x)"}, "count": 2,
        "reasons": ["size of x changed", "limit reached"], "recompile_limit_hits": 1,
        "failures": [{"status": "fallback", "reason": "boom", "action": "fell back to eager"}],
        "shapes": [[[2, 3]], [[4, "s0"], None]], "ranks": [0, 1], "graphs": []}
    assert entry.failures == (CompileFailure("fallback", "boom", "fell back to eager"),)
    assert [(f.code, f.line, f.message) for f in compiles.findings()] == [
        ("NP903", 8, "`f` was compiled 2 times by torch.compile(backend=\"neuron\"): limit reached"),
        ("NP904", 8, "`f` hit the recompile limit and falls back to eager: limit reached"),
        ("NP908", 8, "`f` failed to compile for neuron: boom")]


def test_demotions_float64_per_site_and_the_int64_aggregate(root, mapper):
    demotions = DemotionAggregator(mapper)
    demotions.add(DemotionEvent("aten::mul.Tensor", "float64", "float32", calls=3, site=at(root, 113)), 0)
    demotions.add(DemotionEvent("aten::add.Tensor", "float64", "float32", calls=2, site=at(root, 113)), 1)
    demotions.add(DemotionEvent("aten::mul.Tensor", "float64", "float32", calls=1, site=at(root, 113)), 1)
    demotions.add(DemotionEvent("aten::div.Tensor", "float64", "float32", calls=1, site=at(root, 126)), 0)
    many = tuple(at(root, line) for line in range(60, 68))
    demotions.add(DemotionEvent("aten::_to_copy", "int64", calls=2, aggregated=True, sites=(None, *many)), 0)
    demotions.add(DemotionEvent("aten::_to_copy", "int64", calls=3, aggregated=True, sites=(many[1],)), 1)
    entries = demotions.entries()
    assert [(type(e), e.op, e.calls) for e in entries] == [
        (Float64DemotionEntry, "aten::mul.Tensor", 4), (Float64DemotionEntry, "aten::add.Tensor", 2),
        (Float64DemotionEntry, "aten::div.Tensor", 1), (Int64DemotionEntry, "aten::_to_copy", 5)]
    assert entries[0].to_json() == {"dtype": "float64", "computed_as": "float32", "op": "aten::mul.Tensor",
                                    "calls": 4, "site": shown(113).to_json()}
    assert entries[3].to_json() == {"dtype": "int64", "op": "aten::_to_copy", "calls": 5,
                                    "sites": [shown(line).to_json() for line in range(60, 64)]}  # first 5, one null
    assert [(f.code, f.line, f.message) for f in demotions.findings()] == [
        ("NP905", 113, "float64 `aten::add.Tensor, aten::mul.Tensor` is computed in float32 on Trainium "
                       "(6 call(s) here)"),
        ("NP905", 126, "float64 `aten::div.Tensor` is computed in float32 on Trainium (1 call(s) here)")]


def test_unsupported_features_merge_ranks(root, mapper):
    unsupported = UnsupportedAggregator(mapper)
    for rank in (0, 1):
        unsupported.add(UnsupportedEvent("complex", "aten::empty.memory_format", "[neuron-port simulator] no complex",
                                         "RuntimeError", "raised", 1, at(root, 10)), rank)
    [entry] = unsupported.entries()
    assert entry.to_json() == {"feature": "complex", "op": "aten::empty.memory_format",
                               "message": "[neuron-port simulator] no complex", "error": "RuntimeError",
                               "action": "raised", "count": 2, "site": shown(10).to_json()}
    [finding] = unsupported.findings()
    assert (finding.code, finding.severity, finding.message) == (
        "NP906", "error", "complex: [neuron-port simulator] no complex")


def test_distributed_merges_ranks_per_collective_and_site(root, mapper):
    distributed = DistributedAggregator(mapper)
    for rank in (0, 1):
        distributed.add(DistributedEvent(event="process_group", backend="neuron", group_rank=rank, group_size=2,
                                         site=at(root, 86)), rank)
        distributed.add(DistributedEvent(event="collective", op="all_reduce", count=2, bytes=8, site=at(root, 96)),
                        rank)
    distributed.add(DistributedEvent(event="unsupported", op="all_to_all", message="[neuron-port simulator] no",
                                     error="RuntimeError", action="raised", site=at(root, 99)), 1)
    all_reduce, group, violation = distributed.entries()
    assert all_reduce.to_json() == {"op": "all_reduce", "event": "collective", "site": shown(96).to_json(), "count": 4,
                                    "bytes": 16, "ranks": [0, 1], "error": None, "message": None, "action": None}
    assert (group.op, group.count, group.ranks) == ("process_group", 2, (0, 1))
    assert (violation.error, violation.ranks) == ("RuntimeError", (1,))
    [finding] = distributed.findings()
    assert (finding.code, finding.line, finding.message) == ("NP907", 99, "[neuron-port simulator] no")


def test_neff_cache_sums_processes_or_falls_back_to_the_summaries():
    neff = NeffCacheAggregator()
    neff.add_summary(SummaryEvent(eager_compiles=7, eager_cache_hits=3))
    neff.add_summary(None)
    assert neff.totals().to_json() == {"hits": 3, "misses": 7}  # no neff_cache event: eager compiles are misses
    for rank in (0, 1):
        neff.add(NeffCacheEvent(eager=NeffCacheCounts(hits=4, misses=1, signatures=5),
                                compiled=NeffCacheCounts(hits=1, misses=0, graphs=1), hits=5, misses=1), rank)
    assert neff.totals().to_json() == {"hits": 10, "misses": 2, "eager": {"hits": 8, "misses": 2},
                                       "compiled": {"hits": 2, "misses": 0}}


@pytest.mark.parametrize("status, message", [
    (RunStatus(command=["python", "t.py"], exit_code=3, stderr_tail=["Traceback", "SystemExit: 3", " "]),
     "the command exited with code 3: SystemExit: 3"),
    (RunStatus(command=["python", "t.py"], exit_code=-11, signal="SIGSEGV"), "the command was killed by SIGSEGV"),
    (RunStatus(command=["python", "t.py"], exit_code=-15, timed_out=True, duration=15.4, processes=1),
     "the command timed out after 15 s"),
    (RunStatus(command=["nope"], error="No such file or directory: 'nope'"),
     "the command could not start: No such file or directory: 'nope'"),
])
def test_command_failed(status, message):
    finding = command_failed_finding(status)
    assert finding is not None
    assert (finding.code, finding.severity, finding.path, finding.line, finding.message) == (
        "NP909", "error", ".", 1, message)
    assert command_failed_finding(RunStatus(command=["python", "t.py"], exit_code=0)) is None


def test_sites_of_a_preview_copy_map_back_to_the_users_lines(tmp_path):
    project, copy = tmp_path / "project", tmp_path / "copy"
    project.mkdir()
    copy.mkdir()
    (project / "train.py").write_text("import torch\nx = torch.ones(2, device='cuda')\n")
    tree = PreviewTree(root=copy, original_root=project, line_maps={"train.py": [0, 1, 1, 2]})
    mapper = SiteMapper(project, tree)
    site = mapper(Site(file=str(copy / "train.py"), line=3, function="<module>", code="x = ...", thread="autograd"))
    assert site == UserSite("train.py", 2, "<module>", "x = torch.ones(2, device='cuda')", "autograd")
    assert site.to_json()["thread"] == "autograd"
    outside = mapper(Site(file="/elsewhere/lib.py", line=5, code="y()"))
    assert outside == UserSite("/elsewhere/lib.py", 5, None, "y()")
    assert mapper(None) is None


def write_events(folder: Path, name: str, *events: dict) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(json.dumps(e) + "\n" for e in events))


def process_line(rank, pid):
    return {"kind": "process", "schema": 1, "simulator": "neuron-port", "pid": pid, "rank": rank,
            "local_rank": rank, "world_size": 2, "argv": ["train.py"], "cwd": "/p", "started": 1.0, "written": 2.0,
            "status": "exited", "torchneuron_release": {}, "unsupported_mode": "raise", "torch": "2.13.0+cpu"}


def test_build_runtime_on_a_folder_of_event_files(tmp_path):
    root, events = tmp_path / "project", tmp_path / "events"
    root.mkdir()
    site = {"file": str(root / "train.py"), "line": 12, "function": "step", "code": "y = x.double() * 2"}
    for rank, pid in ((0, 100), (1, 101)):
        write_events(events, f"neuron-events-rank{rank}-pid{pid}.jsonl",
                     process_line(rank, pid),
                     {"kind": "op", "op": "aten::mul.Tensor", "policy": "native", "calls": 3, "unique_signatures": 1},
                     {"kind": "op", "op": "aten::multinomial", "policy": "fallback", "calls": 1,
                      "unique_signatures": 1},
                     {"kind": "fallback", "op": "aten::multinomial", "calls": 1, "sites": [{"site": site, "calls": 1}]},
                     {"kind": "eager_compile", "op": "aten::mul.Tensor", "signature": ["f64[4]", 2], "calls": 3,
                      "cache_hits": 2, "site": site},
                     {"kind": "demotion", "dtype": "float64", "computed_as": "float32", "op": "aten::mul.Tensor",
                      "calls": 3, "signatures": 1, "site": site},
                     {"kind": "distributed", "event": "collective", "op": "all_reduce", "count": 1, "bytes": 32,
                      "site": site, "time": 0.5},
                     {"kind": "explicit_ops", "counts": {"aten::view": 1}},
                     {"kind": "summary", "op_calls": 4, "native_calls": 3, "fallback_calls": 1, "fallback_ops": 1,
                      "eager_compiles": 1, "eager_cache_hits": 2, "complete": True})
    with open(events / "neuron-events-rank1-pid101.jsonl", "a") as f:  # malformed lines are skipped
        f.write('{"kind": "op", "op": "aten::mm", "calls": "x"}\n{"kind": "fallback", "op": "a", "sites": 5}\n'
                '{"kind": "eager_compile", "op": "aten::mm", "site": []}\n{"kind": "op", "op"\n[1]\n')
    processes = read_events(events)
    assert [p.bad_lines for p in processes] == [0, 5]
    status = RunStatus(command=["torchrun", "--nproc_per_node=2", "train.py"], exit_code=0, duration=1.23456,
                       processes=2)
    section, findings = build_runtime(processes, status, SiteMapper(root))
    user_site = {"path": "train.py", "line": 12, "function": "step", "code": "y = x.double() * 2"}
    runtime = section.to_json()
    # the report names each skipped line (file:line: ignored: why) on the process it belongs to
    notes = runtime["processes"][1].pop("notes")
    assert len(notes) == 5 and all(n.startswith("neuron-events-rank1-pid101.jsonl:") and ": ignored: " in n
                                   for n in notes), notes
    assert runtime == {
        "mode": "real",
        "status": {"command": ["torchrun", "--nproc_per_node=2", "train.py"], "exit_code": 0, "signal": None,
                   "timed_out": False, "duration": 1.235, "processes": 2, "stderr_tail": [], "stdout_tail": []},
        "processes": [{"rank": 0, "pid": 100, "status": "exited", "complete": True},
                      {"rank": 1, "pid": 101, "status": "exited", "complete": True}],
        "ops": {"calls": 8, "native_calls": 6, "fallback_calls": 2, "unique_signatures": 1, "readiness": 0.75},
        "fallbacks": [{"op": "aten::multinomial", "calls": 2, "sites": [{**user_site, "calls": 2, "ranks": [0, 1]}]}],
        "eager_compiles": [{"op": "aten::mul.Tensor", "site": user_site, "unique_signatures": 1, "calls": 6,
                            "after_warmup": 0, "first_seen": [{"step": 0, "signatures": 1}], "modules": []}],
        "shapes": {"clock": "signatures", "warmup_steps": 2, "last_step": 0, "last_phase": None, "first_run_compiles": 1,
                   "after_warmup": 0, "varying_sites": 0, "uneven_batch_sites": 0, "phases": []},
        "shape_variance": [],
        "compiles": [],
        "demotions": [{"dtype": "float64", "computed_as": "float32", "op": "aten::mul.Tensor", "calls": 6,
                       "site": user_site}],
        "unsupported": [],
        "distributed": [{"op": "all_reduce", "event": "collective", "site": user_site, "count": 2, "bytes": 64,
                         "ranks": [0, 1], "error": None, "message": None, "action": None}],
        "neff_cache": {"hits": 4, "misses": 2},
        "shape_only": {"placeholder_sites": 0, "size_rule_sites": 0, "placeholders": [], "size_rules": []},
        "failures": [],
    }
    assert [(f.code, f.path, f.line, f.message) for f in findings] == [
        ("NP901", "train.py", 12, "`aten::multinomial` falls back to the CPU on Trainium (2 call(s) here)"),
        ("NP905", "train.py", 12, "float64 `aten::mul.Tensor` is computed in float32 on Trainium (6 call(s) here)")]
    assert all(f.source == "runtime" and not f.fix.available for f in findings)

    console = Console(record=True, width=200)
    render_check(console, Report(command="check", target="neuron", runtime=section, runtime_findings=findings))
    text = console.export_text()
    assert "readiness: 75.0% of 8 op calls ran natively" in text and "train.py:12" in text


def test_build_runtime_without_events_and_a_failed_command(tmp_path):
    status = RunStatus(command=["python", "t.py"], exit_code=1, stderr_tail=["ValueError: bad"])
    section, findings = build_runtime(read_events(tmp_path / "missing"), status, SiteMapper(tmp_path))
    assert section.processes == () and section.ops.readiness is None
    assert section.neff_cache.to_json() == {"hits": 0, "misses": 0}
    assert [(f.code, f.message) for f in findings] == [("NP909", "the command exited with code 1: ValueError: bad")]


def test_a_fallback_without_a_user_frame_renders(tmp_path):
    events = tmp_path / "events"
    write_events(events, "neuron-events-norank-pid1.jsonl", process_line(None, 1),
                 {"kind": "fallback", "op": "aten::nonzero", "calls": 1, "sites": [{"site": None, "calls": 1}]})
    section, findings = build_runtime(read_events(events), RunStatus(command=["python", "t.py"], exit_code=0),
                                      SiteMapper(tmp_path))
    console = Console(record=True, width=200)
    render_check(console, Report(command="check", target="neuron", runtime=section, runtime_findings=findings))
    assert "(no user frame)" in console.export_text()
