"""Hand-computed checks of the cost model's rules (docs/estimate.md): fused-region bytes, the causal
schema positions, collective formulas, per-rank memory under DDP/FSDP, the precision rule and each
device's own fallbacks."""

from __future__ import annotations

import pytest

from neuron_port.check.estimate.assumptions import assumptions, values
from neuron_port.check.estimate.collectives import collective_seconds, per_rank_memory, ring_bytes, sharding
from neuron_port.check.estimate.devices import load_devices
from neuron_port.check.estimate.flops import IS_CAUSAL_ARG, Work
from neuron_port.check.estimate.fusion import fused_bytes
from neuron_port.check.estimate.roofline import device_time, item_seconds, precision_rule
from neuron_port.check.estimate.stepwork import CollectiveWork, StepWork, WorkItem

MB = 1_000_000


def device(device_id: str):
    return next(d for d in load_devices() if d.id == device_id)


def test_is_causal_positions_match_the_schemas():
    torch = pytest.importorskip("torch")
    for name, at in IS_CAUSAL_ARG.items():
        schema = getattr(torch.ops.aten, name).default._schema
        assert [a.name for a in schema.arguments].index("is_causal") == at, name


def test_a_chain_of_elementwise_ops_reads_its_input_once_and_writes_its_output_once():
    # mm -> add(bias) -> gelu -> mul(residual) -> mm : the three pointwise ops are one region
    works = [Work("matmul", 1.0, 3 * MB, "bf16"), Work("elementwise", 1.0, 3 * MB, "bf16"),
             Work("elementwise", 1.0, 2 * MB, "bf16"), Work("elementwise", 1.0, 3 * MB, "bf16")]
    flow = [[0, MB, 0, [[-1, MB], [-2, MB]]],          # mm(x, w)
            [1, MB, 0, [[0, MB], [-3, 1000]]],         # add(mm, bias)
            [2, MB, 0, [[1, MB]]],                     # gelu(add)
            [3, MB, 0, [[2, MB], [-1, MB]]],           # mul(gelu, x): x read again from outside
            [0, MB, 1, [[3, MB], [-2, MB]]]]           # mm(mul, w), a graph output
    fused = fused_bytes(works, flow)
    assert fused[1] == MB + 1000  # the mm's output and the bias, read once
    assert fused[2] == 0  # gelu: in and out stay in the region
    assert fused[3] == MB + MB  # x read; its output goes to the next mm: written once
    assert 0 not in fused  # the matmuls keep their own bytes
    unfused = sum(w.bytes for w in works[1:])
    assert sum(fused.values()) == 2 * MB + MB + 1000 < unfused


def test_a_view_between_regions_moves_nothing():
    works = [Work("elementwise", 1.0, 2 * MB, "bf16"), Work("copy/view", 0.0, 0.0, "bf16"),
             Work("matmul", 1.0, 3 * MB, "bf16")]
    flow = [[0, MB, 0, [[-1, MB]]], [1, MB, 0, [[0, MB]]], [2, MB, 1, [[1, MB], [-2, MB]]]]
    assert fused_bytes(works, flow) == {0: 2 * MB}  # read x, write what the mm reads through the view


def test_ring_formulas():
    assert ring_bytes("all_reduce", 800, 8) == 2 * 7 / 8 * 800
    assert ring_bytes("all_gather_into_tensor", 800, 8) == 7 / 8 * 800
    assert ring_bytes("reduce_scatter_tensor", 800, 8) == 7 / 8 * 800
    assert ring_bytes("broadcast", 800, 8) == 800
    assert ring_bytes("all_reduce", 800, 1) == 0
    h100 = device("h100-sxm")
    # FSDP over 8 H100s: an all-gather of 100 MB shards (800 MB gathered) at NVLink's 450 GB/s
    work = StepWork(processes=1, world_size=8, collectives=[CollectiveWork("all_gather_into_tensor", 8, 1, 100 * MB)])
    c = collective_seconds(work, h100, 8)
    assert c["bytes_per_rank"] == pytest.approx(7 * 100 * MB)
    assert c["seconds"] == pytest.approx(7 * 100 * MB / 450e9)
    # 16 GPUs span two p5 nodes: the network's 50 GB/s per GPU
    assert collective_seconds(work, h100, 16)["gbps"] == 50.0
    # nothing recorded but an optimizer: data parallel assumed, one gradient all-reduce
    dp = collective_seconds(StepWork(processes=1, parameter_bytes=400 * MB), h100, 4)
    assert dp["assumed"] and dp["bytes_per_rank"] == pytest.approx(2 * 3 / 4 * 400 * MB)
    assert "assumed data parallel" in dp["note"]
    none = collective_seconds(StepWork(processes=1), h100, 4)
    assert not none["modelled"] and none["note"].startswith("collectives not modelled")


def test_per_rank_memory_under_ddp_and_fsdp():
    ddp = StepWork(processes=8, collectives=[CollectiveWork("all_reduce", 8, 10, 400 * MB)], parameter_bytes=400 * MB)
    assert sharding(ddp) == "data_parallel"
    assert per_rank_memory(10_000 * MB, ddp, 64) == 10_000 * MB  # every rank holds the whole state
    fsdp = StepWork(processes=1, world_size=8, parameter_bytes=100 * MB,  # this rank's shard of 800 MB
                    collectives=[CollectiveWork("all_gather_into_tensor", 8, 1, 100 * MB)])
    assert sharding(fsdp) == "fsdp"
    state = 4 * 100 * MB  # params, grads, 2 Adam states of the shard
    assert per_rank_memory(5_000 * MB, fsdp, 8) == 5_000 * MB
    assert per_rank_memory(5_000 * MB, fsdp, 16) == pytest.approx(5_000 * MB - state / 2)
    assert per_rank_memory(5_000 * MB, fsdp, 4) == pytest.approx(5_000 * MB + state)


def test_precision_rule_tf32_on_a_gpu_only_when_the_run_set_it():
    a = values(assumptions())
    mm = WorkItem("aten::mm", "matmul", "fp32", 1, 1e12, 0.0)
    h100, trn2 = device("h100-sxm"), device("trn2-chip")
    highest, high = StepWork(float32_matmul_precision="highest"), StepWork(float32_matmul_precision="high")
    assert precision_rule(h100, highest)["fp32_matmul"] == "fp32"
    assert precision_rule(h100, high)["fp32_matmul"] == "tf32"
    assert item_seconds(mm, h100, 1.0, a, "tf32").lower == pytest.approx(1e12 / 494.7e12)
    assert item_seconds(mm, h100, 1.0, a, "fp32").lower == pytest.approx(1e12 / 66.9e12)
    rule = precision_rule(trn2, high)  # TorchNeuron: --auto-cast=none, fp32 stays fp32
    assert rule["fp32_matmul"] == "fp32" and "--auto-cast=none" in rule["why"]


def test_each_device_is_charged_its_own_fallbacks():
    a = values(assumptions())
    work = StepWork(processes=1, fallback_calls=100, fallback_flops=1e9, fallback_copy_bytes=100 * MB,
                    fallback_modeled_flops=1e9, fallback_modeled_bytes=100 * MB)
    trn2, h100 = device("trn2-chip"), device("h100-sxm")
    host = 1e9 / (a["host_fallback_gflops"] * 1e9) + 100 * MB / (a["host_fallback_gbps"] * 1e9)
    copies = 100 * MB / (a["host_link_gbps"] * 1e9)
    assert device_time(work, trn2, 1.0, 1.0, a).fallback == pytest.approx(host + copies + 100 * a["host_transfer_seconds"])
    # a CUDA kernel on the GPU: its bytes at the device's bandwidth, no host round trip
    assert device_time(work, h100, 1.0, 1.0, a).fallback == pytest.approx(100 * MB / (3350e9 * a["memory_fraction"]))


def test_gemm_utilization_counts_tile_and_wave_quantization_by_hand():
    """NVIDIA's GEMM guide's two effects: 1792 x 1792 in 256 x 128 tiles is 7 x 14 = 98 tiles, one wave
    of 108 SMs with 10 idle: 98/108; one more row (M = 1793) costs a whole row of tiles (8 x 14 = 112
    tiles: two waves of 108, mostly idle); a 128 x 128 array tiling M and K pads K = 200 to 256."""
    from neuron_port.check.estimate.efficiency import best_utilization, utilization

    assert utilization((1, 1792, 1792, 64), (256, 128, 0), 108) == pytest.approx(98 / 108)
    assert utilization((1, 1793, 1792, 64), (256, 128, 0), 108) == pytest.approx(1793 * 1792 / (2 * 108 * 256 * 128))
    assert utilization((1, 128, 512, 200), (128, 0, 128), 1) == pytest.approx(200 / 256)
    # either operand may be the tile's rows: M = 64, N = 256 fills a 128-row tile better as N
    assert best_utilization((1, 64, 256, 128), [(128, 0, 128)], 1) == pytest.approx(1.0)


def test_a_measured_family_rate_is_charged_in_its_direction_and_the_bound_keeps_the_peak():
    """The CPU's convolutions (calibrate.py): the forward at its measured rate, the backward at its own
    (oneDNN's backward has its own rate per nominal FLOP), the lower bound at the highest rate any of
    them, or the matmul peak, reaches."""
    from neuron_port.check.estimate.devices import Device

    cpu = Device(id="host-cpu", name="cpu", kind="cpu", per="chip", peak_tflops={"fp32": 0.1}, hbm_gbps=100.0,
                 hbm_gib=0.0, chip_cores=1, price_device="host-cpu",
                 family_peak_tflops={"convolution": 0.2, "convolution_backward": 0.05})
    a = values(assumptions())
    forward = WorkItem("aten::convolution_overrideable", "convolution", "fp32", 1, 1e9, 0.0)
    backward = WorkItem("aten::convolution_backward_overrideable", "convolution", "fp32", 1, 1e9, 0.0)
    mm = WorkItem("aten::mm", "matmul", "fp32", 1, 1e9, 0.0)
    fraction = a["compute_fraction"]
    assert item_seconds(forward, cpu, 1.0, a).expected == pytest.approx(1e9 / (0.2e12 * fraction))
    assert item_seconds(backward, cpu, 1.0, a).expected == pytest.approx(1e9 / (0.05e12 * fraction))
    assert item_seconds(backward, cpu, 1.0, a).lower == pytest.approx(1e9 / 0.2e12)
    assert item_seconds(mm, cpu, 1.0, a).expected == pytest.approx(1e9 / (0.1e12 * fraction))


def test_a_logical_core_group_spans_its_chips_not_one_chip_per_core():
    """64 logical cores at LNC=2 are 16 Trainium2 chips: one trn2.48xlarge, inside its NeuronLink."""
    from neuron_port.check.estimate.collectives import group_chips

    core, chip = device("trn2-lnc2-core"), device("trn2-chip")
    assert group_chips(core, 64) == group_chips(chip, 64) == 16
    assert core.collective_gbps(group_chips(core, 64)) == pytest.approx(1024.0 / 4)  # its share of the links
    assert core.collective_gbps(group_chips(core, 128)) == pytest.approx(25.0 / 4)  # two instances: EFA


def test_a_part_known_by_a_peak_range_runs_at_its_middle_and_the_bound_keeps_the_top(tmp_path):
    """h100-hbm2e-500w (torchtitan: "between SXM and NVL"): a compute-bound matmul's expected time is the
    SXM part's divided by the sustained share, memory time and the lower bound do not move; a share
    outside (0, 1] is an error naming the table entry."""
    from dataclasses import replace

    from neuron_port.check.estimate.devices import DeviceTableError

    capped, sxm = device("h100-hbm2e-500w"), device("h100-sxm")
    assert capped.sustained_compute_share == pytest.approx((835 + 989.4) / 2 / 989.4, abs=1e-3)
    assert sxm.sustained_compute_share == 1.0
    a = values(assumptions())
    uncapped = replace(capped, sustained_compute_share=1.0)
    mm = WorkItem("aten::mm", "matmul", "bf16", 1, 1e15, 1e6, gemm=(1, 8192, 8192, 8192))
    copy = WorkItem("aten::add", "elementwise", "bf16", 1, 1e6, 1e10)
    assert item_seconds(mm, capped, 1.0, a).expected == pytest.approx(
        item_seconds(mm, uncapped, 1.0, a).expected / capped.sustained_compute_share)
    assert item_seconds(mm, capped, 1.0, a).lower == item_seconds(mm, uncapped, 1.0, a).lower == pytest.approx(
        1e15 / 989.4e12)
    assert item_seconds(copy, capped, 1.0, a) == item_seconds(copy, uncapped, 1.0, a)
    table = tmp_path / "devices.toml"
    table.write_text('[devices.x]\nkind = "gpu"\npeak_tflops = { bf16 = 1.0 }\nhbm_gbps = 1.0\nhbm_gib = 1.0\n'
                     "sustained_compute_share = 1.5\n")
    with pytest.raises(DeviceTableError, match=r"devices\.x\.sustained_compute_share"):
        load_devices(table)
