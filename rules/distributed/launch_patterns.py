"""What the launch-file rules (NP520-NP525) match in shell scripts, Makefiles and YAML / JSON / TOML
configs, and the hits they share.

Scripts are matched per logical line (comments stripped by the line engine); configs per ``key: value``
/ ``key = value`` pair. A fix replaces only the matched characters, so quoting, spacing and comments stay.
"""

from __future__ import annotations

import re
from typing import Iterator, Optional

from neuron_port.rules.distributed.tables import CUDA_ENV_ADVICE, NCCL_ENV_ADVICE, NCCL_ENV_RE
from neuron_port.rules.spec import LineHit, LineOptions

SHELL, MAKE, YAML, JSON, TOML = "shell", "make", "yaml", "json", "toml"
SCRIPT_KINDS = (SHELL, MAKE)
CONFIG_KINDS = (YAML, JSON, TOML)

CVD = "CUDA_VISIBLE_DEVICES"
NRT_CORES = "NEURON_RT_VISIBLE_CORES"
LAUNCHER_RE = re.compile(r"(^|[\s;&|(`])(torchrun|python[\d.]*\s+(-\S+\s+)*-m\s+torch\.distributed\.(launch|run))\b")
CVD_ASSIGN_RE = re.compile(
    r"(?<![\w$])(?P<export>export\s+)?CUDA_VISIBLE_DEVICES(?P<op>\s*[:?+]?=\s*|=)(?P<value>\"[^\"]*\"|'[^']*'|[^\s;&|)]*)"
)
CVD_TOKEN_RE = re.compile(r"\bCUDA_VISIBLE_DEVICES\b")
NPROC_RE = re.compile(r"(?P<flag>--nproc[_-]per[_-]node)(?P<sep>=|\s+)(?P<value>\"[^\"]*\"|'[^']*'|[^\s;&|\\)]+)")
DEVICE_ARG_RE = re.compile(
    r"(?P<flag>--(?:[\w-]*[_-])?device(?:[_-]type|[_-]map)?)(?P<sep>=|\s+)(?P<q>[\"']?)(?P<value>cuda(?::\d+)?)(?P=q)(?![\w:])"
)
BACKEND_ARG_RE = re.compile(
    r"(?P<flag>--(?:[\w-]*[_-])?backend)(?P<sep>=|\s+)(?P<q>[\"']?)(?P<value>nccl)(?P=q)(?![\w:])"
)
ENV_ASSIGN_RE = re.compile(r"(?<![\w$])(?:export\s+)?(?P<name>[A-Z][A-Z0-9_]*)\s*[:?+]?=")
SMI_RE = re.compile(r"(?<![\w/-])nvidia-smi\b")
CONFIG_KV_RE = re.compile(
    r"(?P<key>\"[^\"\n]+\"|'[^'\n]+'|[A-Za-z_][\w.-]*)\s*(?P<colon>:|=)\s*"
    r"(?P<q>[\"']?)(?P<value>[\w:.+-]+)(?P=q)(?=\s*(?:[,}\]#]|$))"
)
CUDA_VALUE_RE = re.compile(r"cuda:\d+")
COUNT_KEYS = {"nproc_per_node", "nproc-per-node", "num_gpus", "n_gpu", "n_gpus", "ngpus", "ngpu", "gpus",
              "gpus_per_node", "num_processes", "num_procs", "nprocs"}
PER_NODE_COUNT_KEYS = {"nproc_per_node", "nproc-per-node", "gpus_per_node"}


def unquote(value: str) -> tuple[str, str]:
    """``"0,1"`` -> (``0,1``, ``"``); an unquoted value comes back with an empty quote."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1], value[0]
    return value, ""


def as_core_range(value: str) -> str:
    """A contiguous GPU list "0,1,2,3" as the documented NEURON_RT_VISIBLE_CORES range "0-3"."""
    parts = value.split(",")
    if len(parts) > 1 and all(p.isdigit() for p in parts):
        numbers = [int(p) for p in parts]
        if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            return f"{numbers[0]}-{numbers[-1]}"
    return value


def env_advice(name: str) -> Optional[str]:
    """What to do about a CUDA / NCCL environment variable, None when the name is not one."""
    if name in CUDA_ENV_ADVICE:
        return CUDA_ENV_ADVICE[name]
    if NCCL_ENV_RE.match(name):
        return NCCL_ENV_ADVICE
    return None


# -- config pairs ----------------------------------------------------------------------------------
class ConfigPair:
    """One ``key: value`` of a config line, classified the way the rules split them between them."""

    def __init__(self, match: re.Match) -> None:
        self.match = match
        self.key, _ = unquote(match.group("key"))
        self.leaf_key = self.key.lower().rsplit(".", 1)[-1]
        self.value = match.group("value")

    @property
    def is_cuda_value(self) -> bool:
        return self.value == "cuda" or CUDA_VALUE_RE.fullmatch(self.value) is not None

    @property
    def is_device_key(self) -> bool:
        return self.leaf_key in ("device", "device_type", "device_map") or self.leaf_key.endswith(("_device", "-device"))

    @property
    def is_nccl_backend(self) -> bool:
        return self.value == "nccl" and (self.leaf_key == "backend" or self.leaf_key.endswith(("_backend", "-backend")))

    @property
    def is_process_count(self) -> bool:
        return self.leaf_key in COUNT_KEYS and (self.value.isdigit() or self.value in ("gpu", "auto"))

    @property
    def is_other_setting(self) -> bool:
        """Neither a device, a backend nor a count: what is left for the environment-variable rule."""
        return not (self.is_cuda_value or self.is_nccl_backend or self.is_process_count)


def config_pairs(code: str, kind: str) -> Iterator[ConfigPair]:
    for match in CONFIG_KV_RE.finditer(code):
        if kind == JSON and not match.group("q") and not match.group("value").isdigit():
            continue  # JSON strings are quoted; true/false/null are not devices
        yield ConfigPair(match)


# -- hits shared by scripts and configs ------------------------------------------------------------
def count_advice(cores: Optional[tuple[int, str]]) -> str:
    if cores is None:
        return "one process per NeuronCore: 4 on trn2.3xlarge, 64 on trn2.48xlarge (--instance rewrites it)"
    return f"one process per logical NeuronCore: {cores[0]} ({cores[1]})"


def process_count_hit(match: re.Match, what: str, options: LineOptions, fixable: bool) -> Optional[LineHit]:
    """NP521 for ``--nproc_per_node N`` or a count key; the count becomes the instance's core count
    (unsafe) when --instance / --neuron-cores is given and ``fixable``."""
    value, quote = unquote(match.group("value"))
    cores = options.cores
    if cores is not None and value.isdigit() and int(value) == cores[0]:
        return None  # already the instance's core count
    hit = LineHit(match.start(), match.end(),
                  f"`{what}` counts GPUs; on Trainium {count_advice(cores)}")
    if cores is not None and fixable and (value.isdigit() or value in ("gpu", "auto")):
        hit.start, hit.end = match.start("value"), match.end("value")
        hit.replacement = f"{quote}{cores[0]}{quote}"
        hit.safety = "unsafe"
        hit.message += " (unsafe: review the batch size and learning rate)"
    return hit


def device_hit(match: re.Match, shown: str, options: LineOptions) -> LineHit:
    """NP522: the value ``cuda[:N]`` becomes ``neuron[:N]`` on the neuron target."""
    value = match.group("value")
    new = "neuron" + value[len("cuda"):]
    hit = LineHit(match.start("value"), match.end("value"),
                  f"`{shown}` is a CUDA device; on Trainium the device is `{new}`")
    if options.target == "neuron":
        hit.replacement, hit.safety = new, "safe"
    else:
        hit.message += " (no device-agnostic spelling in a config)"
    return hit


def backend_hit(match: re.Match, shown: str, options: LineOptions) -> LineHit:
    """NP523: the value ``nccl`` becomes ``neuron`` on the neuron target."""
    hit = LineHit(match.start("value"), match.end("value"),
                  f"`{shown}`: the NCCL backend does not exist on Trainium; the process-group backend is `neuron`")
    if options.target == "neuron":
        hit.replacement, hit.safety = "neuron", "safe"
    return hit
