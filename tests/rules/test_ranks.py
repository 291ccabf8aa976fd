"""Issue 11, items 1-4, with every rule enabled (the per-rule examples run one rule at a time): rank
devices keep their index (TorchNeuron's core of a torchrun process is neuron:<LOCAL_RANK>; issue 35 item 7),
capability checks are never rewritten into code that raises, and device tests that guard CUDA-only code
are kept."""

from __future__ import annotations

import inspect
import textwrap

import pytest

from neuron_port.api import Settings, rewrite_source
from neuron_port.rules.registry import all_rules

HEAD = ("import os\nimport torch\nimport torch.nn as nn\nimport torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n")


def rewrite(code: str, **settings):
    new, findings = rewrite_source(HEAD + textwrap.dedent(code), "train.py", Settings(**settings))
    again, _ = rewrite_source(new, "train.py", Settings(**settings))
    assert again == new, "a second run changes nothing"
    return new[len(HEAD):], findings


def test_defect_1_a_rank_device_keeps_its_index():
    """TorchNeuron's core of a torchrun process is neuron:<LOCAL_RANK> (c10_neuron), so a rank device is a
    plain rename; the rules wrote index 0 (`.to("neuron")`, `device_ids=[0]`) and rank 1 failed."""
    new, findings = rewrite("""\
        dist.init_process_group("nccl"); rank = int(os.environ["LOCAL_RANK"])
        model = nn.Linear(4, 4).to(rank); ddp = DDP(model, device_ids=[rank])
        ddp(torch.randn(2, 4)).sum().backward()
        """)
    assert "model = nn.Linear(4, 4).to(rank); ddp = DDP(model, device_ids=[rank])" in new
    assert {f.code for f in findings} == {"NP501"}


def test_rank_devices_written_every_way_are_renamed_with_their_index():
    new, findings = rewrite("""\
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group(backend="nccl")
        device = torch.device(f"cuda:{local_rank}")
        x = torch.zeros(3, device=local_rank).cuda(local_rank)
        y = x.to(local_rank % torch.cuda.device_count())
        m = DDP(net.to(local_rank), device_ids=[local_rank], output_device=local_rank)
        ckpt = torch.load(p, map_location=lambda s, l: s.cuda(local_rank))
        used = torch.cuda.memory_allocated(local_rank)
        """)
    assert "torch.neuron.set_device(local_rank)" in new
    assert 'device = torch.device(f"neuron:{local_rank}")' in new
    assert "x = torch.zeros(3, device=local_rank).to(local_rank)" in new
    assert "y = x.to(local_rank % torch.neuron.device_count())" in new
    assert "DDP(net.to(local_rank), device_ids=[local_rank], output_device=local_rank)" in new
    assert 'map_location=f"neuron:{local_rank}"' in new
    assert "torch.neuron.memory_allocated(local_rank)" in new
    assert "cuda" not in new and all(f.fix.safety == "safe" for f in findings if f.fix.available)


def test_defect_2_names_ending_in_local_rank_are_renamed_too():
    new, _ = rewrite("""\
        ddp_local_rank = int(os.environ["LOCAL_RANK"])
        device = f'cuda:{ddp_local_rank}'
        """)
    assert "device = f'neuron:{ddp_local_rank}'" in new


def test_a_set_device_inside_an_expression_no_longer_holds_the_other_rank_devices_back():
    """The old model removed `set_device(rank)`, so one it could not remove made every rank fix of the
    file unsafe; a rename has no such case."""
    new, findings = rewrite("""\
        dist.init_process_group("nccl")
        ok = torch.neuron.set_device(args.gpu) or True
        model = model.cuda(args.gpu)
        device = f"cuda:{args.gpu}"
        """)
    assert "model = model.to(args.gpu)" in new and 'device = f"neuron:{args.gpu}"' in new
    assert all(f.fix.applied for f in findings if f.fix.available)


def test_the_global_rank_as_an_index_is_renamed_with_advice():
    new, findings = rewrite("""\
        dist.init_process_group("nccl")
        x = torch.ones(2, device=f"cuda:{dist.get_rank()}")
        y = torch.ones(2, device=f"cuda:{os.environ['RANK']}")
        z = torch.ones(2, device=f"cuda:{os.environ['LOCAL_RANK']}")
        """)
    assert 'f"neuron:{dist.get_rank()}"' in new and "f\"neuron:{os.environ['RANK']}\"" in new
    advised = sorted(f.line - HEAD.count("\n") for f in findings if "index by LOCAL_RANK" in f.message)
    assert advised == [2, 3]


def test_the_accelerator_target_keeps_rank_indices():
    new, _ = rewrite("model = model.to(local_rank)\nd = f'cuda:{local_rank}'\n", target="accelerator")
    assert "model.to(local_rank)" in new and ":{local_rank}'" in new


def test_defect_3_capability_reads_are_never_renamed_into_a_crash():
    new, findings = rewrite("""\
        major = torch.cuda.get_device_properties(torch.device('cuda')).major
        if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8:
            print("ampere")
        dtype = torch.bfloat16 if torch.cuda.get_device_capability() >= (8, 0) else torch.float16
        mem = torch.cuda.get_device_properties(0).total_memory
        """)
    # the read is kept for .major, and so is its argument: a neuron device inside a kept torch.cuda call
    # would break the CUDA branch on a GPU (issue 20, item 3: the whole expression or none of it)
    assert "torch.cuda.get_device_properties(torch.device('cuda')).major" in new
    assert 'if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8:' in new
    assert "dtype = torch.bfloat16 if torch.neuron.is_bf16_supported() else torch.float16" in new
    assert "torch.neuron.get_device_properties(0).total_memory" in new
    left = {f.code for f in findings if not f.fix.available}
    assert "NP201" in left  # said, not silently "done"
    # the report is the rewritten text's (issue 34's fixed point): NP210's fix replaced the capability read
    # that NP202 reported on the bf16 line, so that finding is not left
    assert [f.fix.applied for f in findings if f.code == "NP210"] == [True] and "NP202" not in left


def test_defect_4_is_cuda_guarding_cuda_only_code_is_kept_and_reported():
    new, findings = rewrite("""\
        try:
            from flash_attn import flash_attn_func
        except ImportError:
            flash_attn_func = None

        def attend(q, k, v):
            if q.is_cuda:
                return flash_attn_func(q, k, v)
            return sdpa(q, k, v)

        def pin(x):
            return x.pin_memory() if not x.is_cuda else x
        """)
    assert "if q.is_cuda:" in new and "not x.is_neuron" in new
    [branch] = [f for f in findings if f.code == "NP720"]
    assert "flash_attn_func" in branch.message
    assert not [f for f in findings if f.code == "NP104" and f.line == branch.line]


def test_the_retired_rank_rules_are_gone():
    """NP107 (integer rank devices to index 0) and NP502 (drop `set_device(rank)`) encoded the old model of
    one visible core per process; their codes are retired, and no rule keeps a per-file rank analysis."""
    codes = {r.CODE for r in all_rules()}
    assert not codes & {"NP107", "NP502"}
    assert not [r for r in all_rules() if "rank_devices(" in inspect.getsource(inspect.getmodule(r))]


def test_device_passed_as_device_id_keeps_its_index():
    new, _ = rewrite("""\
        local_rank = int(os.environ["LOCAL_RANK"])
        device = torch.device("cuda", local_rank)
        dist.init_process_group(backend="nccl", device_id=device)
        model = nn.Linear(4, 4).to(device)
    """)
    assert 'device = torch.device("neuron", local_rank)\n' in new
    assert "device_id=device" in new and "to(device)" in new


def test_fstring_of_a_variable_device_type_and_the_rank_is_left_alone():
    new, findings = rewrite("""\
        local_rank = int(os.environ["LOCAL_RANK"])
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
        dist.init_process_group(backend="nccl")
        x = torch.ones(2).to(f"{device_type}:{local_rank}")
    """)
    assert 'x = torch.ones(2).to(f"{device_type}:{local_rank}")' in new


def test_fstring_of_two_ranks_or_a_format_spec_is_left_alone():
    new, _ = rewrite("""\
        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group(backend="nccl")
        tag = f"{local_rank}:{local_rank}"
        name = f"{run_name}:{local_rank:03d}"
    """)
    assert 'tag = f"{local_rank}:{local_rank}"' in new and 'name = f"{run_name}:{local_rank:03d}"' in new


# -- issue 20, pattern 4: a string naming the device of a serialized artifact is not this process's ------

def test_prefix_test_on_a_serialized_archive_constant_is_not_rewritten():
    source = """\
        def retarget(archive):
            for node in archive.graph.nodes():
                if node.kind() == "prim::Constant" and str(node["value"]).startswith("cuda"):
                    node.s_("value", "cpu")
            return archive
        """
    new, findings = rewrite(source, unsafe_fixes=True)
    assert 'startswith("cuda")' in new
    assert not [f for f in findings if f.code == "NP102"]


def test_prefix_test_on_a_config_device_field_is_still_a_device_test():
    new, _ = rewrite("""\
        use_amp = cfg["device"].startswith("cuda")
        """)
    assert 'cfg["device"].startswith("neuron")' in new
