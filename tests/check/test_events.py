"""Reading the simulator's event files (neuron_backend/EVENTS.md) into typed events: every kind parses
into its dataclass, malformed lines are counted and skipped, never raised. No simulator needed: the
lines are written as neuron_backend/events/writer.py writes them (json.dumps of one dict per line)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_port.check.events import (
    CompileEvent,
    CompileInput,
    DemotionEvent,
    DistributedEvent,
    EagerCompileEvent,
    EagerCompileTruncatedEvent,
    ExceptionInfo,
    ExplicitOpsEvent,
    FallbackEvent,
    FallbackSite,
    FirstSeen,
    FirstSeenCount,
    FunctionRef,
    MalformedEvent,
    NeffCacheCounts,
    NeffCacheEvent,
    OpEvent,
    ProcessEvent,
    Site,
    SummaryEvent,
    UnsupportedEvent,
    parse_event,
    parse_events_file,
    read_events,
)

SITE = {"file": "/work/proj/train.py", "line": 42, "function": "train_step", "code": "loss.backward()"}
TYPED_SITE = Site(file="/work/proj/train.py", line=42, function="train_step", code="loss.backward()")
PROCESS = {"kind": "process", "schema": 1, "simulator": "neuron-port", "pid": 4242, "rank": 1, "local_rank": 1,
           "world_size": 2, "argv": ["train.py", "--steps", "2"], "cwd": "/work/proj", "started": 1796070148.09,
           "written": 1796070150.52, "status": "exception",
           "torchneuron_release": {"torch_neuronx": "2.14.3.0", "neuron_sdk": "2.33.0", "pytorch": "2.14.0"},
           "unsupported_mode": "raise", "torch": "2.13.0+cpu",
           "exception": {"type": "RuntimeError", "message": "boom", "site": SITE}}
SUMMARY = {"kind": "summary", "op_calls": 14, "native_calls": 13, "fallback_calls": 1, "fallback_ops": 1,
           "eager_compiles": 12, "eager_cache_hits": 1, "complete": True}


def line(fields: dict) -> str:
    return json.dumps(fields)


EXAMPLES = [
    (PROCESS, ProcessEvent(
        schema=1, simulator="neuron-port", pid=4242, rank=1, local_rank=1, world_size=2,
        argv=("train.py", "--steps", "2"), cwd="/work/proj", torch="2.13.0+cpu",
        torchneuron_release={"torch_neuronx": "2.14.3.0", "neuron_sdk": "2.33.0", "pytorch": "2.14.0"},
        unsupported_mode="raise", started=1796070148.09, written=1796070150.52, status="exception",
        exception=ExceptionInfo("RuntimeError", "boom", TYPED_SITE))),
    ({"kind": "op", "op": "aten::addmm", "policy": "native", "calls": 10, "unique_signatures": 3},
     OpEvent(op="aten::addmm", policy="native", calls=10, unique_signatures=3)),
    ({"kind": "fallback", "op": "aten::multinomial", "calls": 16,
      "sites": [{"site": SITE, "calls": 15}, {"site": None, "calls": 1}]},
     FallbackEvent(op="aten::multinomial", calls=16,
                   sites=(FallbackSite(TYPED_SITE, 15), FallbackSite(None, 1)))),
    ({"kind": "eager_compile", "op": "aten::fill_.Scalar", "signature": ["f32[1024,3]", "1.", None, [1, 2]],
      "calls": 3, "cache_hits": 2, "site": {**SITE, "thread": "autograd"}},
     EagerCompileEvent(op="aten::fill_.Scalar", signature=("f32[1024,3]", "1.", None, [1, 2]), calls=3,
                       cache_hits=2, site=Site(**{**SITE, "thread": "autograd"}))),
    ({"kind": "eager_compile_truncated", "op": "aten::add.out", "omitted_signatures": 7, "omitted_calls": 9},
     EagerCompileTruncatedEvent(op="aten::add.out", omitted_signatures=7, omitted_calls=9)),
    # the step clock: when a signature was first seen, in which module; per-step counts of omitted ones
    ({"kind": "eager_compile", "op": "aten::bmm", "signature": ["f32[4,8,16]", "f32[4,16,8]"], "calls": 2,
      "cache_hits": 1, "site": {**SITE, "module": "blocks.3.attn"},
      "first_seen": {"optimizer_step": 3, "forward": 4, "seq": 117}},
     EagerCompileEvent(op="aten::bmm", signature=("f32[4,8,16]", "f32[4,16,8]"), calls=2, cache_hits=1,
                       site=Site(**SITE, module="blocks.3.attn"), first_seen=FirstSeen(3, 4, 117))),
    ({"kind": "eager_compile_truncated", "op": "aten::cat", "omitted_signatures": 3, "omitted_calls": 3,
      "first_seen": [{"optimizer_step": 0, "forward": 250, "signatures": 1},
                     {"optimizer_step": 0, "forward": 251, "signatures": 2}]},
     EagerCompileTruncatedEvent(op="aten::cat", omitted_signatures=3, omitted_calls=3,
                                first_seen=(FirstSeenCount(0, 250, 1), FirstSeenCount(0, 251, 2)))),
    ({**SUMMARY, "optimizer_steps": 6, "forwards": 7},
     SummaryEvent(op_calls=14, native_calls=13, fallback_calls=1, fallback_ops=1, eager_compiles=12,
                  eager_cache_hits=1, complete=True, optimizer_steps=6, forwards=7)),
    ({"kind": "demotion", "dtype": "float64", "computed_as": "float32", "op": "aten::mul.Tensor", "calls": 4,
      "signatures": 2, "site": SITE},
     DemotionEvent(op="aten::mul.Tensor", dtype="float64", computed_as="float32", calls=4, signatures=2,
                   site=TYPED_SITE)),
    ({"kind": "demotion", "dtype": "int64", "op": "aten::_to_copy", "calls": 2, "aggregated": True,
      "sites": [SITE, {"site": SITE}, None]},
     DemotionEvent(op="aten::_to_copy", dtype="int64", calls=2, aggregated=True,
                   sites=(TYPED_SITE, TYPED_SITE, None))),
    ({"kind": "unsupported", "feature": "complex", "op": "aten::empty.memory_format",
      "message": "[neuron-port simulator] complex dtypes are not supported", "error": "RuntimeError",
      "action": "raised", "count": 1, "site": SITE},
     UnsupportedEvent(feature="complex", op="aten::empty.memory_format",
                      message="[neuron-port simulator] complex dtypes are not supported", error="RuntimeError",
                      action="raised", count=1, site=TYPED_SITE)),
    ({"kind": "explicit_ops", "counts": {"aten::view": 3, "aten::_local_scalar_dense": 0}},
     ExplicitOpsEvent(counts={"aten::view": 3, "aten::_local_scalar_dense": 0})),
    ({"kind": "compile", "event": "recompile", "backend": "neuron", "compile_id": "0/1",
      "function": {"name": "f", "file": "/work/proj/job.py", "line": 3},
      "inputs": [{"name": "l_x_", "shape": [4, "s0"], "dtype": "float32", "device": "neuron:0"},
                 {"name": "n", "value": "3"}],
      "reasons": ["0/0: tensor 'x' size mismatch at index 0. expected 2, actual 4"],
      "reason": "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 4", "mode": "default",
      "status": "compiled", "graphs": [{"graph": "inference", "key": "d478", "neff_cache": "hit", "ops": 2}],
      "site": SITE, "time": 1.82},
     CompileEvent(event="recompile", backend="neuron", compile_id="0/1",
                  function=FunctionRef(name="f", file="/work/proj/job.py", line=3),
                  inputs=(CompileInput(name="l_x_", shape=(4, "s0"), dtype="float32", device="neuron:0"),
                          CompileInput(name="n", value="3")),
                  reasons=("0/0: tensor 'x' size mismatch at index 0. expected 2, actual 4",),
                  reason="0/0: tensor 'x' size mismatch at index 0. expected 2, actual 4", mode="default",
                  status="compiled", graphs=({"graph": "inference", "key": "d478", "neff_cache": "hit", "ops": 2},),
                  site=TYPED_SITE, time=1.82)),
    ({"kind": "compile", "event": "recompile_limit", "backend": "neuron", "limit_type": "recompile_limit",
      "limit": 8, "function": "'f' (job.py:3)", "reason": None, "message": "hit the limit", "site": SITE,
      "time": 2.4},
     CompileEvent(event="recompile_limit", backend="neuron", limit_type="recompile_limit", limit=8,
                  function="'f' (job.py:3)", message="hit the limit", site=TYPED_SITE, time=2.4)),
    ({"kind": "distributed", "event": "collective", "op": "all_reduce", "count": 2, "bytes": 264, "group_size": 2,
      "group": "0", "ranks": [0, 1], "site": SITE, "time": 2.02},
     DistributedEvent(event="collective", op="all_reduce", count=2, bytes=264, group_size=2, group="0",
                      ranks=(0, 1), site=TYPED_SITE, time=2.02)),
    ({"kind": "distributed", "event": "process_group", "backend": "neuron", "group_rank": 0, "group_size": 2,
      "implementation": "gloo (host memory)", "site": SITE, "time": 1.1},
     DistributedEvent(event="process_group", backend="neuron", group_rank=0, group_size=2,
                      implementation="gloo (host memory)", site=TYPED_SITE, time=1.1)),
    ({"kind": "neff_cache", "dir": "/root/.cache/neuron-port/neff-cache", "enabled": True,
      "eager": {"signatures": 14, "hits": 10, "misses": 4}, "compiled": {"graphs": 8, "hits": 8, "misses": 0},
      "hits": 18, "misses": 4, "site": None, "time": 2.4},
     NeffCacheEvent(dir="/root/.cache/neuron-port/neff-cache", enabled=True,
                    eager=NeffCacheCounts(hits=10, misses=4, signatures=14),
                    compiled=NeffCacheCounts(hits=8, misses=0, graphs=8), hits=18, misses=4, time=2.4)),
    (SUMMARY, SummaryEvent(op_calls=14, native_calls=13, fallback_calls=1, fallback_ops=1, eager_compiles=12,
                           eager_cache_hits=1, complete=True)),
]


@pytest.mark.parametrize("fields, expected", EXAMPLES, ids=[f"{f['kind']}-{i}" for i, (f, _) in enumerate(EXAMPLES)])
def test_each_kind_parses_into_its_dataclass(fields, expected):
    assert parse_event(line(fields)) == expected


def test_absent_and_null_fields_take_the_defaults():
    assert parse_event(line({"kind": "unsupported", "count": None, "site": None})) == UnsupportedEvent(count=1)
    assert parse_event(line({"kind": "distributed", "op": "broadcast", "bytes": None})) == DistributedEvent(
        op="broadcast", count=1, bytes=0)
    assert parse_event(line({"kind": "op", "op": "aten::mm", "extra": {"unknown": "fields are ignored"}})) == OpEvent(
        op="aten::mm")
    # a site with no keys is no site; a site without a file keeps its line
    assert parse_event(line({"kind": "eager_compile", "op": "aten::mm", "site": {}})).site is None
    assert parse_event(line({"kind": "eager_compile", "op": "aten::mm", "site": {"line": 3}})).site == Site(line=3)


MALFORMED = [
    "{\"kind\": \"op\", \"op\": \"aten::mm\", \"calls\"",  # torn
    "not json at all",
    "[1, 2, 3]",  # not an object
    "\"process\"",
    "null",
    "17",
    "{\"op\": \"aten::mm\", \"calls\": 3}",  # no kind
    line({"kind": "mystery", "op": "aten::mm"}),  # unknown kind
    line({"kind": 5}),
    line({"kind": "op", "op": "aten::mm", "calls": "x"}),
    line({"kind": "op", "op": "aten::mm", "calls": 1.5}),
    line({"kind": "op", "op": "aten::mm", "calls": True}),
    line({"kind": "op", "calls": 3}),  # op is required
    line({"kind": "fallback", "op": "aten::multinomial", "calls": 1, "sites": 5}),
    line({"kind": "fallback", "op": "aten::multinomial", "calls": 1, "sites": [5]}),
    line({"kind": "fallback", "op": "aten::multinomial", "calls": 1, "sites": [{"site": SITE, "calls": "2"}]}),
    line({"kind": "eager_compile", "op": "aten::mm", "signature": ["f32[2]"], "site": []}),
    line({"kind": "eager_compile", "op": "aten::mm", "signature": "f32[2]"}),
    line({"kind": "eager_compile", "op": "aten::mm", "site": {**SITE, "line": "42"}}),
    line({"kind": "eager_compile", "op": ["aten::mm"]}),
    line({"kind": "demotion", "dtype": "int64", "op": "aten::copy_", "aggregated": "yes"}),
    line({"kind": "demotion", "dtype": "int64", "op": "aten::copy_", "aggregated": True, "sites": [3]}),
    line({"kind": "unsupported", "feature": "complex", "count": "1"}),
    line({"kind": "compile", "function": 3}),
    line({"kind": "compile", "inputs": 5}),
    line({"kind": "compile", "inputs": [{"shape": [1.5]}]}),
    line({"kind": "compile", "inputs": ["x"]}),
    line({"kind": "compile", "reasons": "size mismatch"}),
    line({"kind": "distributed", "op": "all_reduce", "bytes": "264"}),
    line({"kind": "distributed", "op": "all_reduce", "ranks": ["0"]}),
    line({"kind": "neff_cache", "hits": 3, "eager": 5}),
    line({"kind": "explicit_ops", "counts": {"aten::view": "3"}}),
    line({**PROCESS, "rank": "0"}),
    line({**PROCESS, "exception": "boom"}),
    line({**SUMMARY, "complete": "yes"}),
    line({**SUMMARY, "optimizer_steps": 1.5}),
    line({"kind": "eager_compile", "op": "aten::mm", "first_seen": 3}),
    line({"kind": "eager_compile", "op": "aten::mm", "first_seen": {"optimizer_step": "3"}}),
    line({"kind": "eager_compile", "op": "aten::mm", "site": {**SITE, "module": 3}}),
    line({"kind": "eager_compile_truncated", "op": "aten::mm", "first_seen": [{"signatures": True}]}),
    "[" * 100_000 + "]" * 100_000,  # deeper than the JSON parser recurses
    "{\"kind\": \"op\", \"op\": \"aten::mm\", \"calls\": " + "9" * 5000 + "}",  # beyond int()'s digit limit
]


@pytest.mark.parametrize("raw", MALFORMED, ids=range(len(MALFORMED)))
def test_malformed_lines_raise_malformed_event(raw):
    with pytest.raises(MalformedEvent):
        parse_event(raw)


def test_malformed_lines_are_counted_and_skipped_per_file(tmp_path):
    good = [line(PROCESS), line({"kind": "op", "op": "aten::mm", "policy": "fallback", "calls": 2}), line(SUMMARY)]
    text = "\n".join([good[0], *MALFORMED, good[1], "", "   ", good[2]]) + "\n"
    processes = parse_events_file(tmp_path / "x.jsonl", text)
    assert processes.bad_lines == len(MALFORMED)  # blank lines are not bad
    assert processes.process is not None and processes.rank == 1
    assert processes.events == (OpEvent(op="aten::mm", policy="fallback", calls=2),)
    assert processes.summary is not None and processes.summary.complete


def test_read_events_reads_every_jsonl_file_in_name_order(tmp_path):
    (tmp_path / "neuron-events-rank1-pid20.jsonl").write_text(line({**PROCESS, "rank": 1}) + "\n")
    (tmp_path / "neuron-events-rank0-pid10.jsonl").write_text(line({**PROCESS, "rank": 0}) + "\nnot json\n")
    (tmp_path / "neuron-events-rank0-pid10.jsonl.tmp140").write_text("a temp file of a writer: ignored\n")
    (tmp_path / "notes.txt").write_text("ignored\n")
    (tmp_path / "neuron-events-norank-pid5.jsonl").mkdir()  # unreadable: skipped
    (tmp_path / "neuron-events-rank2-pid30.jsonl").write_bytes(b"\xff\xfe\n" + line(SUMMARY).encode() + b"\n")
    processes = read_events(tmp_path)
    assert [p.path.name for p in processes] == [
        "neuron-events-rank0-pid10.jsonl", "neuron-events-rank1-pid20.jsonl", "neuron-events-rank2-pid30.jsonl"]
    assert [p.rank for p in processes] == [0, 1, None]
    assert [p.bad_lines for p in processes] == [1, 0, 1]  # undecodable bytes make a bad line, not an error
    assert processes[2].summary is not None


def test_an_empty_or_missing_folder_gives_no_processes(tmp_path):
    assert read_events(tmp_path) == []
    assert read_events(tmp_path / "missing") == []
    (tmp_path / "neuron-events-norank-pid1.jsonl").write_text("")
    [empty] = read_events(tmp_path)
    assert (empty.process, empty.events, empty.summary, empty.bad_lines) == (None, (), None, 0)


def test_the_last_process_and_summary_lines_win():
    text = "\n".join([line({**PROCESS, "status": "running"}), line({**PROCESS, "status": "exited"}),
                      line({**SUMMARY, "complete": False}), line(SUMMARY)])
    processes = parse_events_file(Path("x.jsonl"), text)
    assert processes.process is not None and processes.process.status == "exited"
    assert processes.summary is not None and processes.summary.complete
