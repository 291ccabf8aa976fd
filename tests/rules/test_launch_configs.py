"""Launch scripts and configs (NP520-NP525): the rules' own examples, value swaps that keep every other
byte, --instance / --neuron-cores, discovery, and the CLI on the hf_finetune fixture."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import FIXTURES
from neuron_port.rewrite.line_files import transform_text
from neuron_port.rules.instances import INSTANCES, InstanceError, resolve_instance
from neuron_port.rules.registry import check_rule_metadata, rules_of_kind
from neuron_port.rules.spec import LineOptions
from neuron_port.rules.spec import Valid

LAUNCH_RULES = rules_of_kind("line")


def _options(example, unsafe=False):
    cores = example.neuron_cores
    return LineOptions(target=example.target, unsafe_fixes=unsafe,
                       cores=resolve_instance(None, cores) if cores else None)


def _cases(kind):
    for rule in LAUNCH_RULES:
        for i, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.CODE}-{rule.NAME}-{kind.lower()}{i}")


def test_the_launch_family_is_registered():
    # the line rules: the launch family, and NP611 (Lightning's `accelerator:` in its YAML/JSON configs)
    assert {r.CODE for r in LAUNCH_RULES} == {f"NP52{i}" for i in range(6)} | {"NP611"}
    for rule in LAUNCH_RULES:
        assert check_rule_metadata(rule) == []
        assert rule.KIND == "line" and set(rule.FILE_KINDS) <= {"shell", "make", "yaml", "json", "toml"}


@pytest.mark.parametrize("rule, example", list(_cases("VALID")))
def test_valid(rule, example):
    example = example if isinstance(example, Valid) else Valid(example)
    out = transform_text(example.source(), example.kind, _options(example, unsafe=True), [rule])
    assert out.findings == [] and out.text == example.source()


@pytest.mark.parametrize("rule, example", list(_cases("INVALID")))
def test_invalid(rule, example):
    options = _options(example, unsafe=example.unsafe_fixes)
    source = example.source()
    out = transform_text(source, example.kind, options, [rule])
    mine = [f for f in out.findings if f.code == rule.CODE]
    assert mine, f"{rule.CODE} reported nothing"
    if example.message_contains:
        assert any(example.message_contains in f.message for f in mine), [f.message for f in mine]
    expected = example.expected_source()
    assert out.text == (source if expected is None else expected)
    again = transform_text(out.text, example.kind, options, [rule])
    assert again.text == out.text and not any(f.fix.applied for f in again.findings)


def test_explain_works_for_each(cli):
    for rule in LAUNCH_RULES:
        result = cli("explain", rule.CODE)
        assert result.returncode == 0 and "## Fix safety" in result.stdout, rule.CODE


def test_value_swaps_keep_everything_else():
    yaml = ("# settings\r\ntrain:\r\n  device: 'cuda:1'   # keep this comment\r\n  eval_device: \"cuda\"\r\n"
            "  backend: nccl\r\nname: cuda-experiment\r\ndevice_map: auto\r\n")
    out = transform_text(yaml, "yaml", LineOptions())
    assert out.text == ("# settings\r\ntrain:\r\n  device: 'neuron:1'   # keep this comment\r\n"
                        "  eval_device: \"neuron\"\r\n  backend: neuron\r\nname: cuda-experiment\r\ndevice_map: auto\r\n")
    assert out.fixes_applied == 3
    toml = '[trainer]\ndevice = "cuda"  # gpu\nnum_gpus = 8\n'
    out = transform_text(toml, "toml", LineOptions())
    assert out.text == '[trainer]\ndevice = "neuron"  # gpu\nnum_gpus = 8\n'
    assert [f.code for f in out.findings] == ["NP522", "NP521"]
    js = '{\n    "device": "cuda",\n    "note": "runs on cuda",\n    "NCCL_DEBUG": "INFO"\n}\n'
    out = transform_text(js, "json", LineOptions())
    assert out.text == js.replace('"device": "cuda"', '"device": "neuron"')
    assert [f.code for f in out.findings] == ["NP522", "NP524"]


def test_shell_details():
    script = (
        "#!/bin/bash\n"
        "# CUDA_VISIBLE_DEVICES=0 is the GPU setup\n"
        "export CUDA_VISIBLE_DEVICES=0,1,2,3\n"
        "CUDA_VISIBLE_DEVICES=4,6 python eval.py --device cuda  # neuron-port: ignore[NP522]\n"
        "echo $CUDA_VISIBLE_DEVICES\n"
    )
    out = transform_text(script, "shell", LineOptions(unsafe_fixes=True))
    assert out.text == (
        "#!/bin/bash\n"
        "# CUDA_VISIBLE_DEVICES=0 is the GPU setup\n"
        "export NEURON_RT_VISIBLE_CORES=0-3\n"
        "NEURON_RT_VISIBLE_CORES=4,6 python eval.py --device cuda  # neuron-port: ignore[NP522]\n"
        "echo $CUDA_VISIBLE_DEVICES\n"
    )
    assert [(f.line, f.code, f.fix.applied) for f in out.findings] == [
        (3, "NP520", True), (4, "NP520", True), (5, "NP520", False)]
    # a script that runs torchrun: the exported list is deleted, the inline prefix dropped
    torchrun = ("export CUDA_VISIBLE_DEVICES=0,1\nCUDA_VISIBLE_DEVICES=0,1 \\\n"
                "  torchrun --nnodes=1 --nproc_per_node 2 train.py\n")
    out = transform_text(torchrun, "shell", LineOptions(unsafe_fixes=True, cores=resolve_instance("trn2.3xlarge", None)))
    assert out.text == "\\\n  torchrun --nnodes=1 --nproc_per_node 4 train.py\n"
    # safe fixes only: nothing unsafe is applied
    out = transform_text(torchrun, "shell", LineOptions(cores=resolve_instance("trn2.3xlarge", None)))
    assert out.text == torchrun and {f.fix.safety for f in out.findings} == {"unsafe"}


def test_makefile():
    make = ("GPUS ?= 0,1\ntrain:\n\tCUDA_VISIBLE_DEVICES=$(GPUS) torchrun --nproc_per_node=2 train.py --dist-backend=nccl\n"
            "smi:\n\t@nvidia-smi\n")
    out = transform_text(make, "make", LineOptions())
    assert out.text == make.replace("--dist-backend=nccl", "--dist-backend=neuron")
    assert [f.code for f in out.findings] == ["NP520", "NP521", "NP523", "NP525"]


def test_accelerator_target_reports_only():
    text = "device: cuda\nbackend: nccl\n"
    out = transform_text(text, "yaml", LineOptions(target="accelerator", unsafe_fixes=True))
    assert out.text == text and len(out.findings) == 2 and not any(f.fix.available for f in out.findings)


def test_instances():
    assert resolve_instance("trn2.3xlarge", None)[0] == 4
    assert resolve_instance("TRN2.48xlarge", None)[0] == 64
    assert resolve_instance("trn3-ultraserver-gen2", None)[0] == 16
    assert resolve_instance(None, 32) == (32, "--neuron-cores 32")
    assert resolve_instance(None, None) is None
    assert all(i.cores == 4 * i.chips for i in INSTANCES.values())  # LNC=2: 4 logical cores per chip
    with pytest.raises(InstanceError, match="Trn3 single-instance sizes are not documented"):
        resolve_instance("trn3.48xlarge", None)
    with pytest.raises(InstanceError, match="is a GPU instance .8 x NVIDIA H100 SXM., not a Trainium one"):
        resolve_instance("p5.48xlarge", None)
    with pytest.raises(InstanceError, match="unknown instance"):
        resolve_instance("p9.96xlarge", None)
    with pytest.raises(InstanceError, match="not both"):
        resolve_instance("trn2.3xlarge", 4)


def test_cli_instance_on_the_fixture(tmp_path, cli):
    work = tmp_path / "hf"
    shutil.copytree(FIXTURES / "hf_finetune", work)
    bad = cli("rewrite", "--instance", "trn3.2xlarge", ".", cwd=work)
    assert bad.returncode == 2 and "--neuron-cores" in bad.stderr
    cli("rewrite", "--instance", "trn2.48xlarge", "--unsafe-fixes", ".", cwd=work)
    launch = (work / "launch.sh").read_text()
    assert "torchrun --nproc_per_node=64 finetune.py" in launch
    assert "CUDA_VISIBLE_DEVICES" not in launch
    assert "NEURON_RT_VISIBLE_CORES=0 python finetune.py --config config.yaml --device neuron:0" in launch
    assert "export NCCL_DEBUG" in launch and "nvidia-smi" in launch  # report-only
    assert (work / "launch.sh").stat().st_mode & 0o111  # still executable
    again = cli("rewrite", "--instance", "trn2.48xlarge", "--unsafe-fixes", "--diff", ".", cwd=work)
    assert again.stdout == ""


def test_discovery_skips_data_and_checkpoints(tmp_path, cli):
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / "config.yaml").write_text("device: cuda\n")
    (tmp_path / "big.json").write_text('{"device": "cuda", "x": "' + "a" * 3 * 2**20 + '"}')
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\ndevice: cuda\n")
    (tmp_path / "plain.yaml").write_text("name: demo\n")
    (tmp_path / "run.yaml").write_text("device: cuda\n")
    result = cli("rewrite", "--check", "--output-format", "json", ".", cwd=tmp_path)
    doc = json.loads(result.stdout)
    assert [f["path"] for f in doc["files"]] == ["run.yaml"]
    assert doc["errors"] == []
