"""A device handed to a CUDA-only package is the package's, not the program's (issue 34 item 3, NP717): an
RL script builds an Isaac Gym environment with ``sim_device="cuda:0" if torch.cuda.is_available() else "cpu"``
and trains its model on ``device``. After ``neuron-port rewrite .`` the model's device is ``neuron``, the
simulator's device arguments are as they were (on a host without CUDA their own test picks the CPU), and the
program runs under ``neuron-port check``. Isaac Gym has no build outside NVIDIA hosts, so the program imports
a stand-in written here, outside the project (it takes ``"cpu"`` or ``"cuda:N"`` only, as Isaac Gym's
device parser does, and returns observations on ``rl_device``)."""

from __future__ import annotations

import json
import os
import textwrap

from tests.conftest import run_cli, simulator_env

PROGRAM = """
import isaacgymenvs
import torch
import torch.nn as nn

use_cuda = True
device = torch.device("cuda" if torch.cuda.is_available() and use_cuda else "cpu")
envs = isaacgymenvs.make(
    seed=1,
    task="Ant",
    num_envs=4,
    sim_device="cuda:0" if torch.cuda.is_available() and use_cuda else "cpu",
    rl_device="cuda:0" if torch.cuda.is_available() and use_cuda else "cpu",
    graphics_device_id=0 if torch.cuda.is_available() and use_cuda else -1,
    headless=False if torch.cuda.is_available() and use_cuda else True,
)
agent = nn.Linear(3, 2).to(device)
obs = envs.reset()["obs"].to(device)
print("agent on", next(agent.parameters()).device.type, "loss", agent(obs).square().mean().item())
"""

STAND_IN = """
import torch


def _device(name):
    if name != "cpu" and not name.startswith("cuda"):
        raise ValueError(f"Invalid device string: {name!r} (Isaac Gym simulates on cuda:N or cpu)")
    return torch.device(name)


class _Env:
    def __init__(self, num_envs, rl_device):
        self.num_envs, self.rl_device = num_envs, rl_device

    def reset(self):
        return {"obs": torch.ones(self.num_envs, 3, device=self.rl_device)}


def make(seed, task, num_envs, sim_device, rl_device, graphics_device_id=-1, headless=True, **kwargs):
    _device(sim_device)
    return _Env(num_envs, _device(rl_device))
"""


def test_simulator_devices_kept_and_the_model_ported(tmp_path, sim_build):
    project, packages = tmp_path / "project", tmp_path / "site"
    project.mkdir()
    (project / ".git").mkdir()
    (project / "r.py").write_text(textwrap.dedent(PROGRAM).lstrip("\n"))
    (packages / "isaacgymenvs").mkdir(parents=True)
    (packages / "isaacgymenvs" / "__init__.py").write_text(textwrap.dedent(STAND_IN).lstrip("\n"))

    rewritten = run_cli("rewrite", ".", "--output-format", "json", cwd=project)
    assert rewritten.returncode in (0, 1), rewritten.stderr
    code = (project / "r.py").read_text()
    assert 'torch.device("neuron" if torch.neuron.is_available() and use_cuda else "cpu")' in code
    assert code.count('"cuda:0" if torch.cuda.is_available() and use_cuda else "cpu"') == 2
    assert "graphics_device_id=0 if torch.cuda.is_available()" in code
    report = json.loads(rewritten.stdout)
    (kept,) = [f for f in report["findings"] if f["code"] == "NP717"]
    assert kept["line"] == 7 and "`sim_device`" in kept["message"] and "model's device" in kept["message"]

    env = simulator_env()
    env["PYTHONPATH"] = str(packages) + os.pathsep + env["PYTHONPATH"]
    checked = run_cli("check", ".", "--exit-zero", "--", "python", "r.py", cwd=project, env=env)
    assert checked.returncode == 0, checked.stdout[-3000:] + checked.stderr[-3000:]
    assert "agent on neuron loss" in checked.stdout, checked.stdout[-3000:]
