"""Issue 35, item 1: under `neuron-port check` the simulated device is TorchNeuron to the libraries that look
for it by import name (transformers, accelerate, TRL with PEFT, diffusers), so they put the model on `neuron`
as on Trainium, and what they then do differently there (torch.compile backend "neuron" with dynamic=False,
torch.neuron's RNG state, bf16 autocast on "neuron", TRL's padding to 128, diffusers' CPU-drawn noise, the "neuron" process group under
torchrun) runs on the simulator. Outside `check` no `torch_neuronx` is found. Each program is a tiny model built
from a config (random weights, nothing downloaded), run through the real CLI with its JSON report (`-o`).
Before the identity (858089d) every one of these programs chose the CPU."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, simulator_env

pytestmark = pytest.mark.slow

TINY_LLAMA = """\
LlamaConfig(vocab_size={vocab}, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, eos_token_id=1, bos_token_id=None)"""

HF_TRAINER = """\
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

torch.manual_seed(0)
model = LlamaForCausalLM({config})
ids = torch.randint(2, 64, (8, 16))
train = [{{"input_ids": row, "labels": row}} for row in ids]
args = TrainingArguments(output_dir="out", max_steps=1, per_device_train_batch_size=4, report_to=[],
                         save_strategy="no", logging_strategy="no", disable_tqdm=True, torch_compile=True)
trainer = Trainer(model=model, args=args, train_dataset=train)
trainer.train()
print("device:", args.device, next(model.parameters()).device)
print("compile:", args.torch_compile_backend, "dynamic:", trainer.accelerator.state.dynamo_plugin.dynamic)
""".format(config=TINY_LLAMA.format(vocab=64))

ACCELERATE = """\
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed

set_seed(0)
accelerator = Accelerator(mixed_precision="bf16")
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.utils.data.TensorDataset(torch.randn(8, 16), torch.randint(0, 4, (8,)))
model, optimizer, loader = accelerator.prepare(model, optimizer, torch.utils.data.DataLoader(data, batch_size=4))
x, y = next(iter(loader))
autocast = []
model[0].register_forward_hook(lambda module, args, out: autocast.append(out.dtype))
loss = torch.nn.functional.cross_entropy(model(x), y)
accelerator.backward(loss)
optimizer.step()
accelerator.save_state("state")
accelerator.load_state("state")
states = torch.load("state/random_states_0.pkl", weights_only=False)
print("device:", accelerator.device, x.device, next(model.parameters()).device)
print("neuron rng saved:", "torch_neuron_manual_seed" in states)
print("autocast:", autocast)
"""

TRL_SFT = """\
from datasets import Dataset
from peft import LoraConfig
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
from trl import SFTConfig, SFTTrainer

words = "the a cat dog sat ran on mat log fast slow".split()
vocab = {{"<pad>": 0, "<eos>": 1, "<unk>": 2, **{{w: i + 3 for i, w in enumerate(words)}}}}
backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
backend.pre_tokenizer = pre_tokenizers.Whitespace()
tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
model = LlamaForCausalLM({config})
data = Dataset.from_dict({{"text": ["the cat sat on the mat", "a dog ran fast", "the dog sat on a log", "a cat ran"]}})
args = SFTConfig(output_dir="out", max_steps=1, per_device_train_batch_size=2, report_to=[], save_strategy="no",
                 logging_strategy="no", disable_tqdm=True)
trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer,
                     peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
trainer.train()
print("device:", args.device, next(trainer.model.parameters()).device)
print("pad_to_multiple_of:", args.pad_to_multiple_of)
""".format(config=TINY_LLAMA.format(vocab=14))

DIFFUSERS = """\
import torch
from accelerate import PartialState
from diffusers import DDPMScheduler, UNet2DModel
from diffusers.utils.torch_utils import randn_tensor

device = PartialState().device
unet = UNet2DModel(sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
                   norm_num_groups=4, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                   up_block_types=("AttnUpBlock2D", "UpBlock2D")).to(device)
scheduler = DDPMScheduler(num_train_timesteps=10)
scheduler.set_timesteps(2)
generator = torch.Generator().manual_seed(0)
sample = randn_tensor((1, 3, 8, 8), generator=generator, device=device)
with torch.no_grad():
    for t in scheduler.timesteps:
        sample = scheduler.step(unet(sample, t).sample, t, sample, generator=generator).prev_sample
print("device:", device, next(unet.parameters()).device, sample.device)
"""

RANKS = """\
import subprocess
import sys

import torch
from accelerate import PartialState
from accelerate.utils import gather

state = PartialState()
total = gather(torch.ones(2, device=state.device) * (state.process_index + 1))
probe = "import torch, importlib.util; print(importlib.util.find_spec('torch_neuronx') is not None)"
found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
print(f"rank {state.process_index}: {state.distributed_type} {state.backend} {state.device.type} {total.tolist()} {found}")
"""


def run_check(cli, tmp_path: Path, script: str, *options: str) -> dict:
    """`neuron-port check PROJECT [options] -o report.json -- python main.py`: the JSON report, after asserting
    that the program ran to its end and that its ops reached the simulated device."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "main.py").write_text(script)
    report = tmp_path / "report.json"
    # nothing downloaded: the hub is off for the program (its models and tokenizer are built in it)
    result = cli("check", str(project), *options, "-o", str(report), "--", "python", "main.py",
                 env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert report.exists(), result.stderr[-3000:]
    doc = json.loads(report.read_text())
    status = doc["runtime"]["status"]
    assert status["exit_code"] == 0, "\n".join(status["stderr_tail"])
    ops = doc["runtime"]["ops"]
    assert ops["native_calls"] > 0 and ops["readiness"] > 0.9, (ops, status["stdout_tail"])
    return doc


def printed(doc: dict, prefix: str) -> list[str]:
    return [line for line in doc["runtime"]["status"]["stdout_tail"] if line.startswith(prefix)]


def test_hf_trainer_trains_and_compiles_on_neuron(tmp_path, cli, sim_build):
    pytest.importorskip("accelerate")  # transformers' Trainer needs it
    doc = run_check(cli, tmp_path, HF_TRAINER)
    assert printed(doc, "device:") == ["device: neuron:0 neuron:0"]
    # TrainingArguments picks TorchNeuron's compile backend and accelerate's plugin static shapes
    assert printed(doc, "compile:") == ["compile: neuron dynamic: False"]
    [compiled] = doc["runtime"]["compiles"]
    assert compiled["function"] == "LlamaForCausalLM.forward" and not compiled["failures"], compiled


def test_accelerate_prepares_and_steps_on_neuron(tmp_path, cli, sim_build):
    pytest.importorskip("accelerate")
    doc = run_check(cli, tmp_path, ACCELERATE)
    assert printed(doc, "device:") == ["device: neuron neuron:0 neuron:0"]
    assert printed(doc, "neuron rng saved:") == ["neuron rng saved: True"]  # torch.neuron.get_rng_state_all
    assert printed(doc, "autocast:") == ["autocast: [torch.bfloat16]"]  # torch.autocast("neuron", bfloat16)


def test_trl_sft_with_peft_lora_trains_on_neuron(tmp_path, cli, sim_build):
    for module in ("accelerate", "datasets", "peft", "trl"):
        pytest.importorskip(module)
    doc = run_check(cli, tmp_path, TRL_SFT)
    assert printed(doc, "device:") == ["device: neuron:0 neuron:0"]
    assert printed(doc, "pad_to_multiple_of:") == ["pad_to_multiple_of: 128"]  # TRL's static shapes for Neuron


def test_diffusers_unet_on_the_device_accelerate_chose(tmp_path, cli, sim_build):
    for module in ("accelerate", "diffusers"):
        pytest.importorskip(module)
    doc = run_check(cli, tmp_path, DIFFUSERS)
    assert printed(doc, "device:") == ["device: neuron neuron:0 neuron:0"]


def test_torchrun_ranks_and_their_subprocesses_find_torch_neuronx(tmp_path, cli, sim_build):
    pytest.importorskip("accelerate")
    doc = run_check(cli, tmp_path, RANKS, "--nproc", "2")
    lines = sorted(line.split(":", 1)[1] for line in doc["runtime"]["status"]["stdout_tail"] if "]:rank " in line)
    # the device type only (each rank's index, neuron:<LOCAL_RANK>: tests/check/test_distributed_fidelity.py)
    assert lines == [f"rank {r}: DistributedType.MULTI_NEURON neuron neuron [1.0, 1.0, 2.0, 2.0] True"
                     for r in (0, 1)], doc["runtime"]["status"]["stdout_tail"]
    assert {d["op"] for d in doc["runtime"]["distributed"]} >= {"process_group", "all_gather_into_tensor"}


IMPORT_FIRST = """\
import torch_neuronx  # before torch, as a Trainium script may
import torch

x = torch.ones(2, device="neuron") * 2
print("device:", x.device, torch_neuronx.neuron is torch.neuron, torch_neuronx.device_count() > 0)
"""


def test_torch_neuronx_imported_before_torch(tmp_path, cli, sim_build):
    """On Trainium `import torch_neuronx` works before `import torch` (the package imports torch); under
    `check` too (neuron_backend/identity/early/). Failed with ModuleNotFoundError before."""
    doc = run_check(cli, tmp_path, IMPORT_FIRST)
    assert printed(doc, "device:") == ["device: neuron:0 True True"]


PROBE = """\
import importlib.util, sys
{setup}
assert importlib.util.find_spec("torch_neuronx") is None, "found"
from importlib import metadata
try:
    metadata.version("torch-neuronx")
    sys.exit("a torch-neuronx distribution is visible")
except metadata.PackageNotFoundError:
    pass
import torch_neuronx
"""


@pytest.mark.parametrize("setup", ["import torch", "import neuron_backend; assert neuron_backend.enable()"],
                         ids=["import-torch", "enable-by-hand"])
def test_no_torch_neuronx_outside_check(sim_build, setup):
    """Without `check` (no NEURON_PORT_SIMULATE), with neuron_backend importable and even enabled by hand,
    nothing named torch_neuronx exists: a user's environment never gets one from us."""
    env = simulator_env()
    env.pop("NEURON_PORT_SIMULATE", None)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE.format(setup=setup))], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == "ModuleNotFoundError: No module named 'torch_neuronx'"
