"""NP907 / NP909: collectives and process-group setups the ``neuron`` backend does not support, and a checked
command that did not finish successfully.
"""

from __future__ import annotations

from neuron_port.rules.spec import Invalid, RuntimeRule, Valid


class DistributedConstraint(RuntimeRule):
    """A collective or a process-group setup that TorchNeuron's `neuron` backend does not support.

    ## What it does
    Reports point-to-point `send`/`recv`, barriers on non-default groups, uneven `all_to_all` splits
    and unsupported all_to_all group sizes seen during the run, per rank, merged by user line. Also the
    one-NeuronCore-per-process setup of `init_process_group(backend="neuron")`: a tensor on the device
    before it ("Neuron runtime should not be initialized before the init_process_group."), a process
    that sees several cores ("Attempted to have more than one device per process in distributed
    setup"), more local ranks than NeuronCores, a device index other than the process's one core,
    `neuron:<LOCAL_RANK>` (`torch.neuron.set_device(0)` on rank 1: "Device index 0 is out of range. Valid
    range is 1 to 1 for this process"), and, recorded without an error, `set_device(i)` of another core
    before `init_process_group`. And a process group with no backend for `neuron` tensors
    (`init_process_group(backend="gloo")`, at that line): its first collective on a `neuron` tensor fails
    with PyTorch's "No backend type associated with device type neuron".

    ## Why is this bad?
    They raise `NotImplementedError`/`RuntimeError`/`AssertionError`/`ValueError` on Trainium. PyTorch gives
    a process group one backend per device type (`Backend.backend_capability["gloo"]` is cpu and cuda) and
    TorchNeuron registers its `neuron` backend for the `neuron` device alone, so a gloo-only group has no
    backend for `neuron` tensors. The cases TorchNeuron's sources leave open are simulator decisions, listed
    in `rules/op_policy.toml` [distributed].

    ## Example
    ```python
    dist.send(t, dst=1)
    ```
    Use instead: collectives (`all_gather`, `broadcast`), equal all_to_all splits, barriers on the
    default group; `init_process_group("neuron")` (or `"cpu:gloo,neuron:neuron"` to keep gloo for CPU
    tensors) before anything touches the device, then `torch.device("neuron")`.

    ## Fix safety
    No automatic fix.

    ## References
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html
    - rules/op_policy.toml [distributed]
    """

    CODE = "NP907"
    NAME = "distributed-constraint"
    SEVERITY = "error"
    EFFORT = "high"
    MESSAGE = "{message}"
    VALID = [Valid("import torch\n")]
    INVALID = [Invalid(
        "import os, torch, torch.distributed as dist\n"
        "os.environ.setdefault('MASTER_ADDR', '127.0.0.1'); os.environ.setdefault('MASTER_PORT', '29533')\n"
        "dist.init_process_group('neuron', rank=0, world_size=1)\n"
        "try:\n    dist.send(torch.ones(2, device='neuron'), dst=0)\nexcept Exception:\n    pass\n"
        "dist.destroy_process_group()\n"
    ), Invalid(
        "import os, torch, torch.distributed as dist\n"
        "os.environ.setdefault('MASTER_ADDR', '127.0.0.1'); os.environ.setdefault('MASTER_PORT', '29534')\n"
        "x = torch.ones(2, device='neuron')\n"
        "try:\n    dist.init_process_group('neuron', rank=0, world_size=1)\nexcept AssertionError:\n    pass\n",
        message_contains="Neuron runtime should not be initialized before the init_process_group.",
    )]


class CommandFailed(RuntimeRule):
    """The checked command did not finish successfully on the simulated device.

    ## What it does
    Reports a non-zero exit code, a signal (segmentation fault, OOM kill) or a timeout of the command
    that `neuron-port check` ran, with the last lines of its standard error in the report. Under torchrun
    it names the process that failed first: the rank that raised first, at its line, or a rank that ended
    without a Python exception before it ("rank 1 was killed by SIGKILL (signal 9)", as torchrun's own
    process saw it end), not the peers that then fail on a collective ("Connection closed by peer").

    ## Why is this bad?
    Whatever stopped the run on the simulator will very likely stop it on Trainium; the findings after
    that point are missing from the report.

    ## Example
    ```python
    raise SystemExit(3)
    ```
    Use instead: fix the error shown in `runtime.status.stderr_tail` and run the check again.

    ## Fix safety
    No automatic fix.

    ## References
    - `neuron-port check --help`
    """

    CODE = "NP909"
    NAME = "command-failed"
    SEVERITY = "error"
    EFFORT = "medium"
    MESSAGE = "the command {what}"
    VALID = [Valid("print('ok')\n")]
    INVALID = [Invalid("raise SystemExit(3)\n", message_contains="exited with code 3")]
