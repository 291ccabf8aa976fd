"""NP520-NP525: launch scripts (``*.sh``, Makefiles) and YAML / JSON / TOML configs.

These rules do not visit Python: ``neuron_port/launch_configs.py`` matches the files line by line and
reports with these codes (this module is their registry entry: docs, severity, effort, examples). They
are selected by ``--select``/``--ignore`` and the target like every static rule; the runner sends them
only the files named in ``FILE_KINDS``. Their examples are scripts and configs of the kind given in each
example (tests/test_launch_configs.py runs them).

Codes (stable):

- NP520 ``launch-cuda-visible-devices``: ``CUDA_VISIBLE_DEVICES`` in scripts and configs.
- NP521 ``launch-process-count``: ``torchrun --nproc_per_node=N`` and GPU counts in configs.
- NP522 ``config-cuda-device``: ``device: cuda`` keys, ``--device cuda`` arguments -> ``neuron``.
- NP523 ``config-nccl-backend``: ``backend: nccl`` keys, ``--backend nccl`` arguments -> ``neuron``.
- NP524 ``launch-cuda-env-var``: ``NCCL_*`` / ``PYTORCH_CUDA_ALLOC_CONF`` / ... settings.
- NP525 ``launch-nvidia-smi``: ``nvidia-smi`` in scripts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from neuron_port.rules.base import Invalid, Rule, Valid

ALL_KINDS = ("shell", "make", "yaml", "json", "toml")


@dataclass(frozen=True)
class FileValid(Valid):
    kind: str = "shell"
    neuron_cores: Optional[int] = None


@dataclass(frozen=True)
class FileInvalid(Invalid):
    kind: str = "shell"
    neuron_cores: Optional[int] = None


class LaunchRule(Rule):
    """Base of the NP52x entries: never part of a Python pass (no triggers); FILE_KINDS says which files."""

    FILE_KINDS: tuple[str, ...] = ALL_KINDS
    TRIGGERS = ()


class LaunchCudaVisibleDevices(LaunchRule):
    """``CUDA_VISIBLE_DEVICES`` in a launch script, Makefile or config.

    ## What it does
    Reports every ``CUDA_VISIBLE_DEVICES`` in shell scripts, Makefiles and YAML/JSON/TOML configs. As an
    unsafe fix (neuron target only):

    - ``CUDA_VISIBLE_DEVICES=0,1 torchrun ...`` (an assignment prefixing a ``torchrun`` /
      ``python -m torch.distributed.launch|run`` command): the assignment is dropped;
    - ``export CUDA_VISIBLE_DEVICES=...`` on its own line in a script that runs ``torchrun``: the line is
      deleted;
    - any other assignment is renamed to ``NEURON_RT_VISIBLE_CORES``, a contiguous list ``0,1,2,3``
      becoming the documented range form ``0-3``.

    References (``$CUDA_VISIBLE_DEVICES``) and config keys are reported only.

    ## Why is this bad?
    The Neuron runtime ignores ``CUDA_VISIBLE_DEVICES``; it selects logical NeuronCores with
    ``NEURON_RT_VISIBLE_CORES``. Under ``torchrun``, TorchNeuron's ``init_process_group`` sets
    ``NEURON_RT_VISIBLE_CORES=<LOCAL_RANK>`` for each rank when the variable is unset; a range exported
    to every rank would instead give each of them all those cores (one device per process is enforced).

    ## Example
    ```bash
    CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 train.py
    CUDA_VISIBLE_DEVICES=0 python eval.py
    ```
    Use instead:
    ```bash
    torchrun --nproc_per_node=2 train.py
    NEURON_RT_VISIBLE_CORES=0 python eval.py
    ```

    ## Fix safety
    Unsafe: a GPU index is not a NeuronCore index (4 logical cores per Trainium2 chip at LNC=2), and the
    right choice of cores depends on what else runs on the instance. Same reasoning as NP505 for Python.

    ## References
    - shared/torchneuron.md section 1.4 (NEURON_RT_VISIBLE_CORES, ranges such as "0-3") and 6 (one core
      per process, set by init_process_group)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html
    """

    CODE = "NP520"
    NAME = "launch-cuda-visible-devices"
    SEVERITY = "warning"
    FIX = "unsafe"
    EFFORT = "low"
    MESSAGE = "CUDA_VISIBLE_DEVICES has no effect on Trainium"
    VALID = [
        FileValid("NEURON_RT_VISIBLE_CORES=0-3 python eval.py\n"),
        FileValid("# CUDA_VISIBLE_DEVICES=0,1 is what we used on GPUs\n"),
    ]
    INVALID = [
        FileInvalid("CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 train.py\n",
                    "torchrun --nproc_per_node=2 train.py\n", unsafe_fixes=True),
        FileInvalid("export CUDA_VISIBLE_DEVICES=0,1,2,3\npython eval.py\n",
                    "export NEURON_RT_VISIBLE_CORES=0-3\npython eval.py\n", unsafe_fixes=True),
        FileInvalid("CUDA_VISIBLE_DEVICES=0 python eval.py\n", None),
        FileInvalid("env:\n  - name: CUDA_VISIBLE_DEVICES\n    value: \"0\"\n", None, kind="yaml",
                    unsafe_fixes=True),
    ]


class LaunchProcessCount(LaunchRule):
    """``torchrun --nproc_per_node=N`` and GPU counts in configs.

    ## What it does
    Reports ``--nproc_per_node`` / ``--nproc-per-node`` of ``torchrun`` and ``python -m
    torch.distributed.launch|run``, and config keys that count GPUs (``nproc_per_node``, ``num_gpus``,
    ``n_gpu``, ``gpus``, ``num_processes``...), with the number of processes a Trainium node needs. With
    ``neuron-port rewrite --instance NAME`` (or ``--neuron-cores N``), a literal count (or ``gpu`` /
    ``auto``) of ``--nproc_per_node`` and of the per-node config keys (``nproc_per_node``,
    ``gpus_per_node``) becomes the instance's logical NeuronCore count as an unsafe fix, and a count
    that already equals it is not reported.

    Known instances (logical NeuronCores per node at the default LNC=2; LNC=1 doubles them):
    trn2.3xlarge 4 (1 Trainium2 chip), trn2.48xlarge 64 (16 chips), trn2u.48xlarge 64 (one node of a Trn2
    UltraServer), trn3-ultraserver-gen1 64 per node (4 servers x 16 Trainium3), trn3-ultraserver-gen2 16
    per node (36 servers x 4). Trn3 single-instance sizes are not documented in our sources: use
    ``--neuron-cores N`` for them.

    ## Why is this bad?
    On Trainium the unit is the logical NeuronCore, one process per core, not the GPU: a trn2.48xlarge
    runs 64 processes, a trn2.3xlarge 4. ``--nproc_per_node=8`` on a trn2.3xlarge asks for cores that do
    not exist; on a trn2.48xlarge it leaves 56 of 64 cores idle.

    ## Example
    ```bash
    torchrun --nproc_per_node=8 train.py
    ```
    Use instead (``--instance trn2.48xlarge``):
    ```bash
    torchrun --nproc_per_node=64 train.py
    ```

    ## Fix safety
    Unsafe, and only with ``--instance``/``--neuron-cores``: the global batch is the per-process batch
    times the process count, so batch size, learning rate, gradient accumulation and mesh shapes written
    for 8 GPUs need review. Counts that are not literals (``$NGPUS``) are reported only.

    ## References
    - shared/torchneuron.md section 1.4 (4 logical cores per Trainium2 chip at LNC=2, 64 on
      trn2.48xlarge), 6 (one process per logical NeuronCore) and 8.2 (instances; Trn3 single-instance
      sizes NOT found)
    """

    CODE = "NP521"
    NAME = "launch-process-count"
    SEVERITY = "warning"
    FIX = "unsafe"
    EFFORT = "low"
    MESSAGE = "one process per GPU: on Trainium one process per logical NeuronCore"
    VALID = [
        FileValid("torchrun --nproc_per_node=64 train.py\n", neuron_cores=64),
        FileValid("batch_size: 8\n", kind="yaml"),
    ]
    INVALID = [
        FileInvalid("torchrun --nproc_per_node=8 train.py\n", None, message_contains="64 on trn2.48xlarge"),
        FileInvalid("torchrun --nproc_per_node=8 train.py\n", "torchrun --nproc_per_node=64 train.py\n",
                    unsafe_fixes=True, neuron_cores=64),
        FileInvalid("python -m torch.distributed.launch --nproc-per-node 2 train.py\n",
                    "python -m torch.distributed.launch --nproc-per-node 4 train.py\n",
                    unsafe_fixes=True, neuron_cores=4),
        FileInvalid('{"num_gpus": 8}\n', None, kind="json", neuron_cores=64, unsafe_fixes=True),
    ]


class ConfigCudaDevice(LaunchRule):
    """``device: cuda`` in a config and ``--device cuda`` in a script.

    ## What it does
    Finds config keys naming a device (``device``, ``device_type``, ``device_map``, ``*_device``) whose
    value is ``cuda`` or ``cuda:N`` in YAML, JSON and TOML files, and ``--device cuda`` /
    ``--device=cuda:0`` / ``--device_type cuda`` arguments in scripts, and swaps the value for ``neuron``
    (``neuron:N``). Everything else on the line (quotes, comments, spacing) is kept.

    ## Why is this bad?
    The program hands the value to ``torch.device``; ``cuda`` raises "Torch not compiled with CUDA
    enabled" on a Trainium host, where the device is ``neuron``.

    ## Example
    ```yaml
    device: cuda   # where evaluation runs
    ```
    Use instead:
    ```yaml
    device: neuron   # where evaluation runs
    ```

    ## Fix safety
    Safe on the neuron target: a plain value swap, the same one NP101 makes for the string in Python.
    On the accelerator target it is reported only (a config has no device-agnostic spelling).

    ## References
    - shared/torchneuron.md section 7 ("`.to('cuda')` -> `.to('neuron')`")
    """

    CODE = "NP522"
    NAME = "config-cuda-device"
    SEVERITY = "error"
    FIX = "safe"
    EFFORT = "low"
    MESSAGE = "a CUDA device: on Trainium the device is `neuron`"
    VALID = [
        FileValid("device: neuron\nname: cuda-test\n", kind="yaml"),
        FileValid("python train.py --device cpu\n"),
    ]
    INVALID = [
        FileInvalid("device: cuda   # eval\n", "device: neuron   # eval\n", kind="yaml"),
        FileInvalid('{"train": {"device": "cuda:0"}}\n', '{"train": {"device": "neuron:0"}}\n', kind="json"),
        FileInvalid('[run]\ndevice = "cuda"\n', '[run]\ndevice = "neuron"\n', kind="toml"),
        FileInvalid("python eval.py --device=cuda\n", "python eval.py --device=neuron\n"),
        FileInvalid("device: cuda\n", None, kind="yaml", target="accelerator"),
    ]


class ConfigNcclBackend(LaunchRule):
    """``backend: nccl`` in a config and ``--backend nccl`` in a script.

    ## What it does
    Finds config keys naming a process-group backend (``backend``, ``dist_backend``, ``ddp_backend``,
    ``*_backend``) set to ``nccl``, and ``--backend nccl`` / ``--dist-backend=nccl`` arguments in scripts,
    and swaps the value for ``neuron``.

    ## Why is this bad?
    NCCL does not exist on Trainium; TorchNeuron registers the ``neuron`` process-group backend.

    ## Example
    ```yaml
    dist_backend: nccl
    ```
    Use instead:
    ```yaml
    dist_backend: neuron
    ```

    ## Fix safety
    Safe on the neuron target (the same swap NP501 makes in Python); reported only on the accelerator
    target.

    ## References
    - shared/torchneuron.md sections 6 and 7
    """

    CODE = "NP523"
    NAME = "config-nccl-backend"
    SEVERITY = "error"
    FIX = "safe"
    EFFORT = "low"
    MESSAGE = "the NCCL backend does not exist on Trainium: use `neuron`"
    VALID = [FileValid("backend: gloo\n", kind="yaml")]
    INVALID = [
        FileInvalid("dist_backend: nccl\n", "dist_backend: neuron\n", kind="yaml"),
        FileInvalid("python train.py --dist-backend nccl\n", "python train.py --dist-backend neuron\n"),
    ]


class LaunchCudaEnvVar(LaunchRule):
    """CUDA and NCCL environment settings in scripts and configs.

    ## What it does
    Reports ``NCCL_*`` / ``TORCH_NCCL_*``, ``PYTORCH_CUDA_ALLOC_CONF``, ``CUDA_LAUNCH_BLOCKING``,
    ``CUDA_DEVICE_MAX_CONNECTIONS`` and similar variables set in scripts, Makefiles and configs, with what
    to use instead.

    ## Why is this bad?
    They do nothing on Trainium: NCCL is not used and the neuron caching allocator does not read the CUDA
    allocator settings. Keeping them suggests a tuning that does not happen.

    ## Example
    ```bash
    export NCCL_DEBUG=INFO
    ```
    Use instead: drop it (see NEURON_RT_* / TORCH_NEURONX_* variables for the Neuron runtime).

    ## Fix safety
    No automatic fix (harmless to leave; deleting lines is the user's call).

    ## References
    - shared/torchneuron.md sections 6 and 10
    """

    CODE = "NP524"
    NAME = "launch-cuda-env-var"
    SEVERITY = "info"
    FIX = "none"
    EFFORT = "low"
    MESSAGE = "a CUDA/NCCL setting that does nothing on Trainium"
    VALID = [FileValid("export NEURON_RT_LOG_LEVEL=INFO\n")]
    INVALID = [
        FileInvalid("export NCCL_DEBUG=INFO\nPYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python t.py\n", None),
    ]


class LaunchNvidiaSmi(LaunchRule):
    """``nvidia-smi`` in a script.

    ## What it does
    Reports ``nvidia-smi`` commands in shell scripts and Makefiles.

    ## Why is this bad?
    ``nvidia-smi`` does not exist on a Trainium host: the command fails, and a script with ``set -e``
    stops there. The Neuron tools are ``neuron-ls`` (devices, cores, LNC) and ``neuron-top``
    (utilisation).

    ## Example
    ```bash
    nvidia-smi --query-gpu=name --format=csv
    ```
    Use instead:
    ```bash
    neuron-ls
    ```

    ## Fix safety
    No automatic fix: the output formats differ, so whatever parses it needs rewriting.

    ## References
    - shared/torchneuron.md section 7 (diagnostics: neuron-ls, neuron-top)
    """

    CODE = "NP525"
    NAME = "launch-nvidia-smi"
    SEVERITY = "warning"
    FIX = "none"
    EFFORT = "low"
    MESSAGE = "nvidia-smi does not exist on a Trainium host"
    FILE_KINDS = ("shell", "make")
    VALID = [FileValid("neuron-ls\n"), FileValid("# nvidia-smi showed 8 GPUs here\n")]
    INVALID = [FileInvalid("nvidia-smi\n", None)]
