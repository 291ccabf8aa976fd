"""Issue 11, the idioms that used to pass with no finding: with every rule enabled (as `neuron-port
rewrite` runs them), torch.cuda.amp imports follow the rewritten calls (NP306 with NP301/NP303/NP305),
and the new table entries, NP407 reads, NP409 private graph helpers, NP501 case variants, NP512 and
NP713 report what they should."""

from __future__ import annotations

import ast

import pytest

from neuron_port.api import Settings, rewrite_source
from neuron_port.rewrite.engine import EngineOptions, transform_source
from neuron_port.rules.registry import all_rules, rule_by_code


def run(source: str, target: str = "neuron", unsafe: bool = False, path: str = "train.py"):
    code, findings = rewrite_source(source, path=path, settings=Settings(target=target, unsafe_fixes=unsafe))
    ast.parse(code)
    again, _ = rewrite_source(code, path=path, settings=Settings(target=target, unsafe_fixes=unsafe))
    assert again == code, "a second run changes nothing"
    return code, findings


def codes(findings, code: str):
    return [f for f in findings if f.code == code]


# -- NP306: torch.cuda.amp imports --------------------------------------------------------------------
def test_module_level_import_goes_with_its_ported_calls():
    code, findings = run(
        "import torch\nfrom torch.cuda.amp import GradScaler, autocast\n\n"
        "scaler = GradScaler()\nwith autocast(dtype=torch.bfloat16):\n    loss = model(x)\n")
    assert code == ('import torch\n\nscaler = torch.amp.GradScaler("neuron")\n'
                    'with torch.autocast(device_type="neuron", dtype=torch.bfloat16):\n    loss = model(x)\n')
    [finding] = codes(findings, "NP306")
    assert finding.fix.applied and finding.fix.safety == "safe" and "ported" in finding.message


def test_function_level_and_module_alias_imports_go():
    code, _ = run(
        "import torch\n\n\ndef evaluate(model, x):\n    from torch.cuda.amp import autocast as ac\n"
        "    with ac(dtype=torch.bfloat16):\n        return model(x)\n\n\n"
        "def train(model, x):\n    from torch.cuda import amp\n    with amp.autocast(enabled=True, dtype=torch.bfloat16):\n"
        "        return model(x)\n")
    assert "cuda" not in code
    assert code.count('torch.autocast(device_type="neuron"') == 2


@pytest.mark.parametrize("guard", [
    "try:\n    from torch.amp import GradScaler\nexcept ImportError:  # PyTorch < 2.3\n"
    "    from torch.cuda.amp import GradScaler\n",
    "if TORCH_VERSION >= (2, 3):\n    from torch.amp import GradScaler\nelse:\n    from torch.cuda.amp import GradScaler\n",
])
def test_a_version_guarded_import_whose_name_is_no_longer_used_goes_whole(guard):
    code, findings = run("import torch\n" + guard + "\nscaler = GradScaler(enabled=use_fp16)\n")
    assert code == 'import torch\n\nscaler = torch.amp.GradScaler("neuron", enabled=use_fp16)\n'
    [finding] = codes(findings, "NP306")
    assert finding.fix.applied and "goes whole" in finding.message


def test_a_guarded_import_the_rewritten_calls_still_use_points_at_torch_amp():
    # the tracker binds GradScaler to the last import (torch.amp): NP303 keeps the name and adds the device
    code, findings = run("if OLD_TORCH:\n    from torch.cuda.amp import GradScaler\nelse:\n"
                         "    from torch.amp import GradScaler\nscaler = GradScaler()\n")
    assert code == 'from torch.amp import GradScaler\nscaler = GradScaler("neuron")\n'
    assert codes(findings, "NP306")[0].fix.applied


def test_an_import_with_a_use_no_rule_ports_stays_and_is_reported():
    source = "from torch.cuda.amp import autocast\nctx = autocast if use_amp else nullcontext\n"
    code, findings = run(source)
    assert code == source
    [finding] = codes(findings, "NP306")
    assert not finding.fix.available and "still used" in finding.message
    assert codes(findings, "NP301")  # the use itself


def test_a_partly_ported_import_keeps_the_names_still_used():
    code, _ = run("import torch\nfrom torch.cuda.amp import GradScaler, autocast\n"
                  "scaler = GradScaler()\nctx = autocast if use_amp else nullcontext\n")
    assert code.startswith("import torch\nfrom torch.cuda.amp import autocast\n")


def test_accelerator_target_takes_the_unsafe_safety_of_the_call_rewrites():
    source = "import torch\nfrom torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    code, findings = run(source, target="accelerator")
    assert code == source and codes(findings, "NP306")[0].fix.safety == "unsafe"
    code, _ = run(source, target="accelerator", unsafe=True)
    assert "torch.cuda.amp" not in code and "current_accelerator" in code


def test_a_suppressed_use_keeps_the_import():
    source = ("import torch\nfrom torch.cuda.amp import GradScaler\n"
              "scaler = GradScaler()  # neuron-port: ignore[NP303]\n")
    code, findings = run(source)
    assert code == source and not codes(findings, "NP306")[0].fix.applied


def test_selecting_only_np306_never_removes_a_used_import():
    source = "import torch\nfrom torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    outcome = transform_source(source, [rule_by_code("NP306")], EngineOptions())
    assert outcome.code == source


def test_a_comment_above_keeps_the_import():
    source = "import torch\n# mixed precision\nfrom torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    code, findings = run(source)
    assert code.startswith("import torch\n# mixed precision\nfrom torch.cuda.amp import GradScaler\n")
    assert "comment above" in codes(findings, "NP306")[0].message


def test_an_import_alone_in_its_block_leaves_pass():
    code, _ = run("import torch\nif HAVE_AMP:\n    from torch.cuda.amp import autocast\n"
                  "with autocast(dtype=torch.bfloat16):\n    pass\n")
    assert code.startswith("import torch\nif HAVE_AMP:\n    pass\n")


def test_notebook_cells_are_reported_without_a_fix():
    source = "import torch\nfrom torch.cuda.amp import GradScaler\nscaler = GradScaler()\n"
    outcome = transform_source(source, list(all_rules()), EngineOptions(), path="nb.ipynb")
    assert "from torch.cuda.amp import GradScaler" in outcome.code
    assert "notebook" in codes(outcome.findings, "NP306")[0].message


# -- torch.cuda tables (NP201 / NP202) ----------------------------------------------------------------
def test_reset_max_memory_allocated_becomes_reset_peak_memory_stats():
    code, _ = run("import torch\ntorch.cuda.reset_max_memory_allocated()\n")
    assert code == "import torch\ntorch.neuron.reset_peak_memory_stats()\n"
    code, _ = run("import torch\ntorch.cuda.reset_max_memory_allocated()\n", target="accelerator")
    assert code == "import torch\ntorch.accelerator.reset_peak_memory_stats()\n"


@pytest.mark.parametrize("line, needle", [
    ("snap = torch.cuda.memory._snapshot()", "memory snapshots"),
    ("from torch.cuda.memory import _record_memory_history\n_record_memory_history(max_entries=100)", "history"),
    ("states = torch.cuda.random.get_rng_state_all()", "get_rng_state(i)"),
    ("torch.cuda.set_rng_state_all(states)", "set_rng_state(state, i)"),
    ("try:\n    step()\nexcept torch.cuda.OutOfMemoryError:\n    pass", "torch.OutOfMemoryError"),
    ("free, total = torch.cuda.mem_get_info()", "total_memory"),  # the entries before stay
    ("torch.cuda.ipc_collect()", "CUDA IPC"),
])
def test_torch_cuda_idioms_without_a_neuron_name_are_reported(line, needle):
    _, findings = run("import torch\n" + line + "\n")
    assert any(needle in f.message for f in codes(findings, "NP202"))


# -- NP407: reads of CUDA flags ------------------------------------------------------------------------
def test_reads_of_tf32_flags_are_reported_and_a_plain_save_is_not():
    _, findings = run("import torch\nif torch.backends.cuda.matmul.allow_tf32:\n"
                      "    print(torch.backends.cuda.matmul.allow_tf32)\nold = torch.backends.cudnn.benchmark\n")
    assert [f.line for f in codes(findings, "NP407")] == [2, 3]
    assert all(not f.fix.available for f in codes(findings, "NP407"))


# -- NP409: private CUDA-graph helpers ----------------------------------------------------------------
def test_graph_annotations_are_reported_as_warnings():
    _, findings = run("import torch\nfrom torch.cuda._graph_annotations import mark_kernels\n"
                      "with mark_kernels('attn'):\n    y = attn(x)\npool = torch.cuda.graphs._graph_pool_handle()\n")
    found = {(f.line, f.severity) for f in codes(findings, "NP409")}
    assert found == {(3, "warning"), (5, "error")}


# -- NP501: NCCL in other cases ------------------------------------------------------------------------
def test_upper_case_nccl_backends_are_rewritten_only_where_a_backend_is_named():
    code, _ = run('import torch\nimport torch.distributed as dist\n'
                  'dist.init_process_group(backend="NCCL" if torch.cuda.is_available() else "gloo")\n'
                  'timings = {"NCCL": 0.0}\n')
    assert 'backend="neuron" if torch.neuron.is_available() else "gloo"' in code
    assert 'timings = {"NCCL": 0.0}' in code


# -- NP512: torch.cuda.nccl ----------------------------------------------------------------------------
def test_torch_cuda_nccl_import_and_version_are_reported():
    _, findings = run("import torch.cuda.nccl as nccl\nprint(nccl.version())\n")
    found = codes(findings, "NP512")
    assert [(f.line, f.severity) for f in found] == [(1, "warning"), (2, "error")]
    assert "torch-neuronx" in found[1].message


# -- NP713: custom ops registered only for CUDA -------------------------------------------------------
@pytest.mark.parametrize("source, reported", [
    ("import torch\nlib = torch.library.Library('ns', 'DEF')\nlib.impl('op', fn, 'CUDA')\n", True),
    ("import torch\nlib = torch.library.Library('ns', 'DEF')\ntorch.library.impl(lib, 'op', 'CUDA')(fn)\n", True),
    ("import torch\nlib = torch.library.Library('ns', 'DEF')\nlib.impl('op', fn, 'CUDA')\n"
     "lib.impl('op', ref, 'CPU')\n", False),
    ("import torch\n\n@torch.library.custom_op('ns::op', mutates_args=(), device_types='cuda')\n"
     "def op(x: torch.Tensor) -> torch.Tensor:\n    return x\n\n@op.register_kernel('cpu')\n"
     "def _(x):\n    return x\n", False),
    ("import torch\n\n@torch.library.custom_op('ns::op', mutates_args=(), device_types=['cuda'])\n"
     "def op(x: torch.Tensor) -> torch.Tensor:\n    return x\n", True),
    ("import torch\ntorch.library.register_kernel('ns::op', 'cuda', fn)\n"
     "torch.library.impl('ns::op', 'CompositeImplicitAutograd', ref)\n", False),
])
def test_custom_ops_with_only_a_cuda_kernel_are_reported(source, reported):
    _, findings = run(source)
    assert bool(codes(findings, "NP713")) == reported
