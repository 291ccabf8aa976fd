"""What ``check --model`` runs for one model, checked before anything runs: the model's ``config.json``
found (a local folder or file, else a Hugging Face hub ID through the user's cache or the hub, as
transformers finds it, ``HF_HUB_OFFLINE`` respected), the task (given, else read from the config's
``architectures``), the numbers. Every problem is one ``UsageError`` line naming the path or the option.
No torch here: this runs in the command's own process.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

from neuron_port.errors import UsageError

TASKS = ("causal-lm", "seq2seq", "masked-lm", "image-classification")
PRECISIONS = ("bf16", "fp16", "fp32")
# the class-name endings of `architectures` in a config.json, per task (transformers' own head names)
_HEADS = (("ForCausalLM", "causal-lm"), ("LMHeadModel", "causal-lm"), ("ForConditionalGeneration", "seq2seq"),
          ("ForSeq2SeqLM", "seq2seq"), ("ForMaskedLM", "masked-lm"), ("ForImageClassification", "image-classification"))


@dataclass(frozen=True)
class ModelRun:
    """One model's run: ``name`` as the user gave it, ``config`` the config.json read (a dict)."""

    name: str
    config: dict
    task: str
    batch: int
    seq: int
    precision: str = "bf16"
    world_size: Optional[int] = None
    compile: bool = False

    def choices(self) -> dict[str, Any]:
        """model_run.json: what the generated script reads (neuron_backend/shape_only/model_step.py)."""
        return {k: v for k, v in asdict(self).items() if k != "config"}

    def tokens_per_step(self) -> int:
        """The job's tokens (images, for image classification) per step: every rank's batch."""
        per_rank = self.batch if self.task == "image-classification" else self.batch * self.seq
        return per_rank * (self.world_size or 1)


def config_file(source: str) -> Path:
    """The config.json of ``source``: a folder holding one, the file itself, else a hub ID resolved as
    transformers resolves it (the user's HF cache first; the hub when reachable and HF_HUB_OFFLINE unset)."""
    path = Path(source).expanduser()
    if path.is_dir():
        found = path / "config.json"
        if not found.is_file():
            raise UsageError(f"--model {source}: no config.json in {path}")
        return found
    if path.is_file():
        return path
    if path.is_absolute() or source.startswith((".", "~")) or source.count("/") > 1:
        raise UsageError(f"--model {source}: no such folder or file")
    return _from_hub(source)


def _from_hub(model_id: str) -> Path:
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        raise UsageError(f"--model {model_id}: not a local folder, and huggingface_hub (the zoo extra) is not "
                         "installed to look it up as a hub ID") from None
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    try:
        return Path(hf_hub_download(model_id, "config.json", local_files_only=offline))
    except LocalEntryNotFoundError:
        why = "HF_HUB_OFFLINE is set" if offline else "the hub cannot be reached"
        raise UsageError(f"--model {model_id}: not a local folder, and its config.json is not in the HF cache "
                         f"({why})") from None
    except Exception as exc:  # an unknown or gated repository, a bad ID: the hub's own words
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"--model {model_id}: not a local folder, and the hub gave no config.json: {first}") from None


def read_config(path: Path, source: str) -> dict:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--model {source}: cannot read {path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"--model {source}: {path}:{exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        raise UsageError(f"--model {source}: {path}: no model_type (not a transformers config.json)")
    return config


def task_of(config: dict) -> str:
    """The task a config's ``architectures`` name (its first head class), else seq2seq for an
    encoder-decoder, else causal-lm."""
    for architecture in config.get("architectures") or ():
        for ending, task in _HEADS:
            if str(architecture).endswith(ending):
                return task
    return "seq2seq" if config.get("is_encoder_decoder") else "causal-lm"


def positive(value: Optional[int], option: str) -> None:
    if value is not None and value < 1:
        raise UsageError(f"{option} {value}: expected a whole number of at least 1")


def model_runs(models: list[str], *, tasks: list[str], batch: int, seq: int, precision: str,
               world_size: Optional[int], compile: bool) -> list[ModelRun]:
    """One run per ``--model``; ``--task`` given once applies to every model, given as often as
    ``--model`` to each in turn. UsageError names what is wrong."""
    for value, option in ((batch, "--batch"), (seq, "--seq"), (world_size, "--world-size")):
        positive(value, option)
    if precision not in PRECISIONS:
        raise UsageError(f"--precision {precision}: expected one of {', '.join(PRECISIONS)}")
    for task in tasks:
        if task not in TASKS:
            raise UsageError(f"--task {task}: unknown task (known: {', '.join(TASKS)})")
    if len(tasks) > 1 and len(tasks) != len(models):
        raise UsageError(f"--task given {len(tasks)} times for {len(models)} --model: give it once, or once per "
                         "--model")
    runs = []
    for i, source in enumerate(models):
        config = read_config(config_file(source), source)
        task = tasks[i] if len(tasks) > 1 else tasks[0] if tasks else task_of(config)
        runs.append(ModelRun(source, config, task, batch, seq, precision, world_size, compile))
    return runs
