"""NP520-NP521: which cores and how many processes a launch script or config asks for.

Line rules (``LineRule``): the line engine (neuron_port/rewrite/line_files.py) hands them each line of a
shell script, Makefile or YAML / JSON / TOML config; what they match is in ``launch_patterns.py``.
"""

from __future__ import annotations

import re
from typing import Iterator

from neuron_port.rules.distributed.launch_patterns import (
    CVD,
    CVD_ASSIGN_RE,
    CVD_TOKEN_RE,
    LAUNCHER_RE,
    NPROC_RE,
    NRT_CORES,
    PER_NODE_COUNT_KEYS,
    SCRIPT_KINDS,
    as_core_range,
    config_pairs,
    process_count_hit,
    unquote,
)
from neuron_port.rules.spec import Invalid, LineHit, LineOptions, LineRule, ScriptLine, Valid


class LaunchCudaVisibleDevices(LineRule):
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/get-started/quickstart-build-first-model.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html (NEURON_RT_VISIBLE_CORES, ranges such as "0-3"), https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/tutorials/tutorial-torch-distributed.html (one core
      per process, set by init_process_group)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html
    """

    CODE = "NP520"
    NAME = "launch-cuda-visible-devices"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = "CUDA_VISIBLE_DEVICES has no effect on Trainium"
    VALID = [
        Valid("NEURON_RT_VISIBLE_CORES=0-3 python eval.py\n", kind="shell"),
        Valid("# CUDA_VISIBLE_DEVICES=0,1 is what we used on GPUs\n", kind="shell"),
    ]
    INVALID = [
        Invalid("CUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node=2 train.py\n",
                "torchrun --nproc_per_node=2 train.py\n", unsafe_fixes=True, kind="shell"),
        Invalid("export CUDA_VISIBLE_DEVICES=0,1,2,3\npython eval.py\n",
                "export NEURON_RT_VISIBLE_CORES=0-3\npython eval.py\n", unsafe_fixes=True, kind="shell"),
        Invalid("CUDA_VISIBLE_DEVICES=0 python eval.py\n", None, kind="shell"),
        Invalid("env:\n  - name: CUDA_VISIBLE_DEVICES\n    value: \"0\"\n", None, kind="yaml",
                unsafe_fixes=True),
    ]

    TRIGGERS = ("CUDA_VISIBLE_DEVICES",)

    def scan(self, line: ScriptLine, file_kind: str, options: LineOptions) -> Iterator[LineHit]:
        code = line.code
        if file_kind not in SCRIPT_KINDS:
            if CVD in code:
                for match in CVD_TOKEN_RE.finditer(code):
                    yield LineHit(match.start(), match.end(),
                                  f"{CVD} has no effect on Trainium: the Neuron runtime reads {NRT_CORES} (NeuronCore "
                                  "indices or ranges such as \"0-3\")")
            return
        covered: list[tuple[int, int]] = []
        for match in CVD_ASSIGN_RE.finditer(code):
            covered.append(match.span())
            yield self._assignment(match, line)
        for match in CVD_TOKEN_RE.finditer(code):
            if any(a <= match.start() < b for a, b in covered):
                continue
            yield LineHit(match.start(), match.end(),
                          f"{CVD} has no effect on Trainium: the Neuron runtime reads {NRT_CORES} (NeuronCore "
                          "indices or ranges such as \"0-3\")")

    @staticmethod
    def _assignment(match: re.Match, line: ScriptLine) -> LineHit:
        code = line.code
        value, _quote = unquote(match.group("value"))
        rest = code[match.end():]
        # `CUDA_VISIBLE_DEVICES=0,1 torchrun ...`: an assignment that prefixes a command
        inline = not match.group("export") and match.group("op") == "=" and rest[:1].isspace() and rest.strip() != ""
        base = f"{CVD} has no effect on Trainium (the Neuron runtime reads {NRT_CORES})"
        if inline and LAUNCHER_RE.search(line.logical):
            # CUDA_VISIBLE_DEVICES=... torchrun ...: each rank gets its own core from init_process_group
            end = match.end() + (len(rest) - len(rest.lstrip(" \t")))
            return LineHit(match.start(), end,
                           f"{base}; unset, each rank gets its own core: drop the assignment",
                           replacement="", safety="unsafe")
        if match.group("export") and line.in_launcher_script and code.strip() == match.group(0).strip():
            return LineHit(match.start(), match.end(),
                           f"{base}; torchrun's ranks each get their own core when it is unset: delete the line",
                           delete_line=True, safety="unsafe")
        new_value = as_core_range(value)
        raw = match.group("value")
        new_raw = raw.replace(value, new_value, 1) if value else raw
        replacement = (match.group("export") or "") + NRT_CORES + match.group("op") + new_raw
        return LineHit(match.start(), match.end(), f"{base}: `{NRT_CORES}{match.group('op')}{new_raw}`",
                       replacement=replacement, safety="unsafe")


class LaunchProcessCount(LineRule):
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
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/get-started/quickstart-build-first-model.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/api/nrt-env-var-reference.html (4 logical cores per Trainium2 chip at LNC=2, 64 on
      trn2.48xlarge)
    - https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/torch-distributed.html (one process per logical NeuronCore)
    - https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium2.rst, https://github.com/aws-neuron/aws-neuron-sdk/blob/81ce03ae/about-neuron/arch/neuron-hardware/trainium3.rst (instances; Trn3
      single-instance sizes are not documented)
    """

    CODE = "NP521"
    NAME = "launch-process-count"
    SEVERITY = "warning"
    FIX_AVAILABILITY = "sometimes"
    FIX_SAFETY = "unsafe"
    EFFORT = "low"
    MESSAGE = "one process per GPU: on Trainium one process per logical NeuronCore"
    VALID = [
        Valid("torchrun --nproc_per_node=64 train.py\n", neuron_cores=64, kind="shell"),
        Valid("batch_size: 8\n", kind="yaml"),
    ]
    INVALID = [
        Invalid("torchrun --nproc_per_node=8 train.py\n", None, message_contains="64 on trn2.48xlarge", kind="shell"),
        Invalid("torchrun --nproc_per_node=8 train.py\n", "torchrun --nproc_per_node=64 train.py\n",
                unsafe_fixes=True, neuron_cores=64, kind="shell"),
        Invalid("python -m torch.distributed.launch --nproc-per-node 2 train.py\n",
                "python -m torch.distributed.launch --nproc-per-node 4 train.py\n",
                unsafe_fixes=True, neuron_cores=4, kind="shell"),
        Invalid('{"num_gpus": 8}\n', None, kind="json", neuron_cores=64, unsafe_fixes=True),
    ]

    TRIGGERS = ("nproc", "gpu", "GPU", "num_processes")

    def scan(self, line: ScriptLine, file_kind: str, options: LineOptions) -> Iterator[LineHit]:
        if file_kind in SCRIPT_KINDS:
            for match in NPROC_RE.finditer(line.code):
                hit = process_count_hit(match, match.group(0), options, fixable=True)
                if hit:
                    yield hit
            return
        for pair in config_pairs(line.code, file_kind):
            if pair.is_process_count:
                hit = process_count_hit(pair.match, pair.match.group(0), options,
                                        fixable=pair.leaf_key in PER_NODE_COUNT_KEYS)
                if hit:
                    yield hit
