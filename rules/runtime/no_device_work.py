"""NP913: a run that succeeded with no op on the neuron device: it trained (or ran) on the CPU."""

from __future__ import annotations

from neuron_port.rules.spec import Invalid, RuntimeRule, Valid

CPU_ONLY = """import torch

model = torch.nn.Linear(4, 2)
print(model(torch.randn(8, 4)).sum().item())
"""

CPU_WITHOUT_CUDA = """import torch

device = "cuda" if torch.cuda.is_available() else "cpu"
model = torch.nn.Linear(4, 2).to(device)
print(model(torch.randn(8, 4, device=device)).sum().item())
"""

ON_THE_DEVICE = """import torch

model = torch.nn.Linear(4, 2).to("neuron")
print(model(torch.randn(8, 4, device="neuron")).sum().item())
"""


class NoDeviceWork(RuntimeRule):
    """A run that finished without one op on the `neuron` device.

    ## What it does
    Reports a command that succeeded while no op of it reached the simulated `neuron` device (no op call, no
    compiled graph, no collective): the program ran on the CPU. The finding is at the line that chose the
    CPU where the run shows one: the call of a framework without a Trainium accelerator that the run
    imported (Lightning's `Trainer` / `Fabric`, NP610), a device choice with a safe fix not applied yet
    (`"cuda" if torch.cuda.is_available() else "cpu"`: the CPU without CUDA), else the first line of the
    command's script that moves or creates the model on a device (`.to(...)`, `device=`); else about the
    project. Not reported for a run whose records were lost (NP912) or that failed (NP909, the
    simulated device could not be loaded among them): those are their own findings.

    ## Why is this bad?
    The run "succeeds", its losses equal a CPU run's, and nothing of it says how the program does on
    Trainium: no fallback, no compile, no estimate. On Trainium the same program also trains on the host's
    CPU, leaving the NeuronCores idle.

    ## Example
    ```python
    device = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU on Trainium
    model = Net().to(device)
    ```
    Use instead: `neuron-port rewrite` (the device choice becomes `"neuron" if torch.neuron.is_available()
    else "cpu"`), or `model.to("neuron")`; for Lightning, a custom Accelerator for the `neuron` device or a
    PyTorch / accelerate loop (NP610).

    ## Fix safety
    No automatic fix here (the static findings at the same line have theirs).

    ## References
    - neuron_backend/EVENTS.md, "summary" (`op_calls`, `frameworks`)
    - https://lightning.ai/docs/pytorch/stable/extensions/accelerator.html
    """

    CODE = "NP913"
    NAME = "no-device-work"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "no op reached the neuron device: {what}; {next}"
    VALID = [Valid(ON_THE_DEVICE)]
    INVALID = [
        Invalid(CPU_ONLY, message_contains="no op reached the neuron device"),
        Invalid(CPU_WITHOUT_CUDA, message_contains="run `neuron-port rewrite` first"),
    ]
