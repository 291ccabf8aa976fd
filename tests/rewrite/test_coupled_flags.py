"""Device flags and counts the rewrite must decide as one (issue 34, the real-project scoreboard's patterns
A, B, D and the DataParallel gate; rules/helpers/decision_groups.py, rules/no_port/cuda_only_guards.py).
Each repro is a small project a user rewrites with `neuron-port rewrite .` and runs with `neuron-port check
. -- python r.py` on the simulator: either everything tied together is ported and the program runs on the
neuron device, or it is kept together, reported at its lines, and runs as the original does on a host
without CUDA."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import run_cli, simulator_env
from neuron_port.api import Settings, rewrite_source

REPROS = {
    # A: a flag set with a conditional expression, the same truth as the test; a kept use of it
    "a_ternary_flag": """
        import torch
        cuda = True if torch.cuda.is_available() else False
        model = torch.nn.Linear(4, 1)
        if cuda:
            model.cuda()
        Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
        print("out", model(Tensor(8, 4).fill_(1.0)).sum().item())
        """,
    # B: a field set from a compound device test in __init__, read as the guard of stream code elsewhere
    "b_field_flag": """
        import torch
        class Prefetcher:
            def __init__(self, device):
                self.device = device
                self.is_cuda = device.type == "cuda" and torch.cuda.is_available()
            def load(self, x):
                if self.is_cuda:
                    s = torch.cuda.Stream(device=self.device)
                    with torch.cuda.stream(s):
                        y = x.to(self.device, non_blocking=True)
                    torch.cuda.current_stream(device=self.device).wait_stream(s)
                    return y
                return x.to(self.device)
        dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        print("out", Prefetcher(dev).load(torch.ones(2, 4)).sum().item(), dev.type)
        """,
    # D: a compound test whose else branch sets plain CPU-side values: the flip needs only the body
    "d_compound_else": """
        import argparse
        import torch
        import torch.backends.cudnn as cudnn
        parser = argparse.ArgumentParser()
        parser.add_argument("--disable-cuda", action="store_true")
        args = parser.parse_args([])
        if not args.disable_cuda and torch.cuda.is_available():
            args.device = torch.device('cuda')
            cudnn.benchmark = True
        else:
            args.device = torch.device('cpu')
            args.gpu_index = -1
        print("ran on", torch.ones(2, device=args.device).device.type)
        """,
    # the DataParallel gate: a Trainium host counts NeuronCores, so a renamed count enters DataParallel
    "dp_count_gate": """
        import torch
        import torch.nn as nn
        model = nn.Linear(4, 1)
        n_gpu = torch.cuda.device_count()
        if n_gpu > 1:
            model = nn.DataParallel(model)
        if torch.cuda.device_count() > 1:
            model = torch.nn.DataParallel(model)
        print("out", model(torch.ones(2, 4)).sum().item())
        """,
}

# what the rewritten program prints on the neuron device when the group is ported; else the lines at
# which the kept tests are reported (the program then runs as the original without CUDA)
PORTED = {"d_compound_else": "ran on neuron", "a_ternary_flag": "out"}  # a: with its legacy type alias (NP105)
KEPT_LINES = {"b_field_flag": (5, 7), "dp_count_gate": (4, 7)}


def _project(tmp_path, name):
    (tmp_path / ".git").mkdir()
    (tmp_path / "r.py").write_text(textwrap.dedent(REPROS[name]).lstrip("\n"))
    return tmp_path


@pytest.mark.parametrize("name", sorted(REPROS))
def test_repro_runs_after_the_default_rewrite(tmp_path, name, sim_build):
    project = _project(tmp_path, name)
    original = (project / "r.py").read_text()
    rewritten = run_cli("rewrite", ".", cwd=project)
    assert rewritten.returncode in (0, 1), rewritten.stderr
    code = (project / "r.py").read_text()
    checked = run_cli("check", ".", "--exit-zero", "--", "python", "r.py", cwd=project, env=simulator_env())
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    if name in PORTED:
        assert "torch.cuda" not in code and "'cuda'" not in code, code
        assert PORTED[name] in checked.stdout, checked.stdout[-3000:]
        return
    kept = [line for number, line in enumerate(original.splitlines(), 1) if number in KEPT_LINES[name]]
    assert all(line in code.splitlines() for line in kept), code  # the kept tests as they were
    assert "out" in checked.stdout, checked.stdout[-3000:]
    for number in KEPT_LINES[name]:
        assert f"r.py:{number}:" in checked.stdout, checked.stdout[-3000:]


def _rewrite(source: str, unsafe: bool = False) -> tuple[str, list]:
    return rewrite_source(textwrap.dedent(source).lstrip("\n"), path="train.py",
                          settings=Settings(unsafe_fixes=unsafe))


@pytest.mark.parametrize("flag", ["bool(torch.cuda.is_available())", "not not torch.cuda.is_available()",
                                  "True if torch.cuda.is_available() else False"])
def test_the_same_truth_of_a_test_is_the_test(flag):
    # the flag's kept use (a legacy CUDA tensor type used in an isinstance test, NP105) keeps the test that
    # sets it and the other use of it
    code, findings = _rewrite(f"""
        import torch
        cuda = {flag}
        model = torch.nn.Linear(4, 1)
        if cuda:
            model.cuda()
        Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
        print(isinstance(model.weight, Tensor))
        """)
    assert "neuron" not in code, code
    assert {f.line for f in findings if not f.fix.applied} >= {2, 5, 6}


def test_a_field_flag_is_flipped_whole_with_unsafe_fixes():
    code, _ = _rewrite(REPROS["b_field_flag"], unsafe=True)
    assert "cuda" not in code, code
    assert code.count("self.is_neuron") == 2


def test_the_assignment_of_an_own_is_cuda_flag_is_worded_as_one():
    _, findings = _rewrite(REPROS["b_field_flag"])
    message = next(f.message for f in findings if f.code == "NP104" and f.line == 5)
    assert "always False" not in message and "set here" in message


def test_a_plain_test_and_a_compound_one_are_decided_alike():
    plain, _ = _rewrite(REPROS["d_compound_else"].replace("not args.disable_cuda and ", ""))
    compound, _ = _rewrite(REPROS["d_compound_else"])
    assert "torch.neuron.is_available()" in plain and "torch.neuron.is_available()" in compound


def test_a_compound_test_whose_body_is_not_portable_stays_unsafe():
    # the body's code decides: an unknown package's call there keeps the flip unsafe
    code, findings = _rewrite("""
        import torch, somepkg
        def setup(args):
            if not args.cpu and torch.cuda.is_available():
                somepkg.pin_gpu()
            else:
                args.gpu_index = -1
        """)
    assert "neuron" not in code
    assert any("somepkg.pin_gpu" in f.message for f in findings if f.line == 3)


def test_a_count_gate_of_portable_code_is_still_renamed():
    code, _ = _rewrite("""
        import torch
        if torch.cuda.device_count() > 0:
            print("devices", torch.cuda.device_count())
        """)
    assert code.count("torch.neuron.device_count()") == 2


def test_a_tensorrt_engine_keeps_its_device_and_the_training_code_is_ported():
    code, findings = _rewrite("""
        import tensorrt as trt
        import torch

        def load_engine(path):
            runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
            with open(path, "rb") as f:
                engine = runtime.deserialize_cuda_engine(f.read())
            return engine, torch.device("cuda:0")

        def train(model, x):
            return model(x.cuda())
        """)
    assert 'torch.device("cuda:0")' in code and 'x.to("neuron")' in code, code
    assert any(f.code == "NP717" and "tensorrt" in f.message for f in findings)


def test_a_lightning_gpu_config_is_reported_at_its_line(tmp_path):
    (tmp_path / ".git").mkdir()
    trainer = tmp_path / "configs" / "trainer"
    trainer.mkdir(parents=True)
    (trainer / "gpu.yaml").write_text("defaults:\n  - default\n\naccelerator: gpu\ndevices: 1\n")
    (trainer / "cpu.yaml").write_text("defaults:\n  - default\n\naccelerator: cpu\ndevices: 1\n")
    result = run_cli("rewrite", ".", cwd=tmp_path)
    assert result.returncode in (0, 1), result.stderr
    out = result.stdout + result.stderr
    assert "configs/trainer/gpu.yaml:4:1: NP611" in out, out
    assert "cpu.yaml" not in out
    assert (trainer / "gpu.yaml").read_text().endswith("accelerator: gpu\ndevices: 1\n")  # reported, not edited
