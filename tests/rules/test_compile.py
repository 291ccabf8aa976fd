"""NP4xx beyond the per-rule examples: torch.compile aliases and decorators, every fix on one call, flag
statements removed (blocks kept valid, comments, suppression, positions), reads of the flags, CUDA
graphs reported."""

from __future__ import annotations

from neuron_port.rules.registry import all_rules, select_rules
from rule_runs import findings_of as codes, rewrite_twice as run
from rule_runs import rules_by_code as _rules, run_rules as _run, settled as _settled, snippet as _src


# -- torch.compile ---------------------------------------------------------------------------------

def test_compile_alias_and_decorators():
    source = """
        import torch as th
        from torch import compile as tcompile

        @th.compile
        def f(x):
            return x

        @tcompile(mode="max-autotune")
        def g(x):
            return x

        h = th.compile(model, backend="inductor", dynamic=True)
        """
    out = _settled(source, _rules("NP401", "NP402", "NP403", "NP404"), unsafe_fixes=True)
    assert out.code == _src("""
        import torch as th
        from torch import compile as tcompile

        @th.compile(backend="neuron")
        def f(x):
            return x

        @tcompile(backend="neuron")
        def g(x):
            return x

        h = th.compile(model, backend="neuron", dynamic=False)
        """)


def test_compile_call_with_every_fix_settles():
    source = 'import torch\nm = torch.compile(m, mode="reduce-overhead", dynamic=True, options={"max_autotune": True})\n'
    out = _settled(source, select_rules(select=["NP4"]), unsafe_fixes=True)
    assert out.code == (
        'import torch\nm = torch.compile(m, dynamic=False, options={"max_autotune": True}, backend="neuron")\n'
    )
    assert sorted(f.code for f in out.findings) == ["NP401", "NP403", "NP404", "NP405"]


# -- statement removal (NP407) ---------------------------------------------------------------------

def test_flag_removal_keeps_blocks_valid_and_comments():
    source = """
        import torch

        def setup(cfg):
            if cfg.fast:
                torch.backends.cudnn.benchmark = True
            # keep this comment: determinism
            torch.backends.cudnn.deterministic = True
            seed = 1; torch.backends.cuda.matmul.allow_tf32 = True
            return seed
        """
    out = _settled(source, _rules("NP407"), unsafe_fixes=True)
    assert out.code == _src("""
        import torch

        def setup(cfg):
            if cfg.fast:
                pass
            # keep this comment: determinism
            torch.backends.cudnn.deterministic = True
            seed = 1
            return seed
        """)
    kept = [f for f in out.findings if not f.fix.applied]
    assert [f.line for f in kept] == [7] and "comment" in kept[0].message


def test_flag_removal_not_offered_on_accelerator_target():
    out = _run("import torch\ntorch.backends.cudnn.benchmark = True\n", select_rules(target="accelerator"),
               target="accelerator", unsafe_fixes=True)
    assert out.code == "import torch\ntorch.backends.cudnn.benchmark = True\n"


def test_suppression_comment():
    source = "import torch\ntorch.backends.cudnn.benchmark = True  # neuron-port: ignore[NP407]\n"
    out = _run(source, _rules("NP407"), unsafe_fixes=True)
    assert out.code == source and out.findings == []


def test_finding_positions_point_at_the_statement():
    source = "import torch\n\n\ntorch.set_float32_matmul_precision('high')\n"
    out = _run(source, _rules("NP407"))
    assert [(f.line, f.column) for f in out.findings] == [(4, 1)]


# -- NP407: reads of CUDA flags --------------------------------------------------------------------

def test_reads_of_tf32_flags_are_reported_and_a_plain_save_is_not():
    _, findings = run("import torch\nif torch.backends.cuda.matmul.allow_tf32:\n"
                      "    print(torch.backends.cuda.matmul.allow_tf32)\nold = torch.backends.cudnn.benchmark\n")
    assert [f.line for f in codes(findings, "NP407")] == [2, 3]
    assert all(not f.fix.available for f in codes(findings, "NP407"))


# -- NP409: CUDA graphs ----------------------------------------------------------------------------

def test_cuda_graph_capture_reported_not_rewritten():
    source = """
        import torch
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.graph(g):
            out = model(static_in)
        g.replay()
        """
    out = _run(source, all_rules(), unsafe_fixes=True)
    graphs = [f for f in out.findings if f.code == "NP409"]
    assert [(f.line, f.effort, f.severity) for f in graphs] == [(2, "high", "error"), (4, "high", "error")]
    assert "torch.cuda.CUDAGraph()" in out.code and "torch.cuda.graph(g)" in out.code
    assert "torch.neuron.Stream()" in out.code  # NP201 still renames the rest


def test_graph_annotations_are_reported_as_warnings():
    _, findings = run("import torch\nfrom torch.cuda._graph_annotations import mark_kernels\n"
                      "with mark_kernels('attn'):\n    y = attn(x)\npool = torch.cuda.graphs._graph_pool_handle()\n")
    found = {(f.line, f.severity) for f in codes(findings, "NP409")}
    assert found == {(3, "warning"), (5, "error")}
