"""NP522-NP525: CUDA devices, the NCCL backend, CUDA / NCCL environment settings and nvidia-smi in
launch scripts and configs.

Line rules (``LineRule``): the line engine (neuron_port/rewrite/line_files.py) hands them each line of a
shell script, Makefile or YAML / JSON / TOML config; what they match is in ``launch_patterns.py``.
"""

from __future__ import annotations

from typing import Iterator

from neuron_port.rules.distributed.launch_patterns import (
    BACKEND_ARG_RE,
    DEVICE_ARG_RE,
    ENV_ASSIGN_RE,
    SCRIPT_KINDS,
    SMI_RE,
    backend_hit,
    config_pairs,
    device_hit,
    env_advice,
)
from neuron_port.rules.spec import LAUNCH_FILE, Invalid, LineHit, LineOptions, LineRule, ScriptLine, Valid


class ConfigCudaDevice(LineRule):
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst ("`.to('cuda')` -> `.to('neuron')`")
    """

    CODE = "NP522"
    NAME = "config-cuda-device"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "a CUDA device: on Trainium the device is `neuron`"
    VALID = [
        Valid("device: neuron\nname: cuda-test\n", kind="yaml"),
        Valid("python train.py --device cpu\n", kind="shell"),
    ]
    INVALID = [
        Invalid("device: cuda   # eval\n", "device: neuron   # eval\n", kind="yaml", not_runnable=LAUNCH_FILE),
        Invalid('{"train": {"device": "cuda:0"}}\n', '{"train": {"device": "neuron:0"}}\n', kind="json",
                not_runnable=LAUNCH_FILE),
        Invalid('[run]\ndevice = "cuda"\n', '[run]\ndevice = "neuron"\n', kind="toml", not_runnable=LAUNCH_FILE),
        Invalid("python eval.py --device=cuda\n", "python eval.py --device=neuron\n", kind="shell",
                not_runnable=LAUNCH_FILE),
        Invalid("device: cuda\n", None, kind="yaml", target="accelerator"),
    ]

    TRIGGERS = ("cuda",)

    def scan(self, line: ScriptLine, file_kind: str, options: LineOptions) -> Iterator[LineHit]:
        if file_kind in SCRIPT_KINDS:
            for match in DEVICE_ARG_RE.finditer(line.code):
                yield device_hit(match, f"{match.group('flag')} {match.group('value')}", options)
            return
        for pair in config_pairs(line.code, file_kind):
            if pair.is_cuda_value and pair.is_device_key:
                yield device_hit(pair.match, f"{pair.key}: {pair.value}", options)


class ConfigNcclBackend(LineRule):
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst
    """

    CODE = "NP523"
    NAME = "config-nccl-backend"
    SEVERITY = "error"
    FIX_AVAILABILITY = "sometimes"
    EFFORT = "low"
    MESSAGE = "the NCCL backend does not exist on Trainium: use `neuron`"
    VALID = [Valid("backend: gloo\n", kind="yaml")]
    INVALID = [
        Invalid("dist_backend: nccl\n", "dist_backend: neuron\n", kind="yaml", not_runnable=LAUNCH_FILE),
        Invalid("python train.py --dist-backend nccl\n", "python train.py --dist-backend neuron\n", kind="shell",
                not_runnable=LAUNCH_FILE),
        Invalid("dist_backend: nccl\n", None, kind="yaml", target="accelerator"),
    ]

    TRIGGERS = ("nccl",)

    def scan(self, line: ScriptLine, file_kind: str, options: LineOptions) -> Iterator[LineHit]:
        if file_kind in SCRIPT_KINDS:
            for match in BACKEND_ARG_RE.finditer(line.code):
                yield backend_hit(match, f"{match.group('flag')} nccl", options)
            return
        for pair in config_pairs(line.code, file_kind):
            if pair.is_nccl_backend:
                yield backend_hit(pair.match, f"{pair.key}: nccl", options)


class LaunchCudaEnvVar(LineRule):
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html
    """

    CODE = "NP524"
    NAME = "launch-cuda-env-var"
    SEVERITY = "info"
    EFFORT = "low"
    MESSAGE = "a CUDA/NCCL setting that does nothing on Trainium"
    VALID = [Valid("export NEURON_RT_LOG_LEVEL=INFO\n", kind="shell")]
    INVALID = [
        Invalid("export NCCL_DEBUG=INFO\nPYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python t.py\n", None, kind="shell"),
    ]

    TRIGGERS = ("CUDA_", "NCCL")

    def scan(self, line: ScriptLine, file_kind: str, options: LineOptions) -> Iterator[LineHit]:
        if file_kind in SCRIPT_KINDS:
            for match in ENV_ASSIGN_RE.finditer(line.code):
                advice = env_advice(match.group("name"))
                if advice:
                    yield LineHit(match.start(), match.end(), f"{match.group('name')}: {advice}")
            return
        for pair in config_pairs(line.code, file_kind):
            advice = env_advice(pair.key) if pair.is_other_setting else None
            if advice:
                yield LineHit(pair.match.start(), pair.match.end(), f"{pair.key}: {advice}")


class LaunchNvidiaSmi(LineRule):
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/torchneuron-resources.html, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/frameworks/torch/pytorch-native-overview.rst (diagnostics: neuron-ls, neuron-top)
    """

    CODE = "NP525"
    NAME = "launch-nvidia-smi"
    SEVERITY = "warning"
    EFFORT = "low"
    MESSAGE = "nvidia-smi does not exist on a Trainium host"
    FILE_KINDS = ("shell", "make")
    VALID = [Valid("neuron-ls\n", kind="shell"), Valid("# nvidia-smi showed 8 GPUs here\n", kind="shell")]
    INVALID = [Invalid("nvidia-smi\n", None, kind="shell")]

    TRIGGERS = ("nvidia-smi",)

    def scan(self, line: ScriptLine, file_kind: str, options: LineOptions) -> Iterator[LineHit]:
        for match in SMI_RE.finditer(line.code):
            yield LineHit(match.start(), match.end(),
                          "nvidia-smi does not exist on a Trainium host (a `set -e` script stops here): use "
                          "neuron-ls (devices and cores) or neuron-top (utilisation)")
