"""One model's run, the function every engine runs (in this process, a local process pool, Ray tasks): a
project folder of its own holding the model's ``config.json``, the standard training step
(neuron_backend/shape_only/model_step.py as ``train.py``), ``model_run.json`` (the run's choices) and a
``pyproject.toml`` whose ``[tool.neuron-port.estimate]`` gives the job's tokens per step;
then the normal ``check`` of it, shape-only (``api.check``: the same runner, aggregation, findings and
estimate as any project). The folder is removed afterwards.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from neuron_port.check.model_run.spec import ModelRun
from neuron_port.check.model_run.table import row_of
from neuron_port.report import Report

COMMAND = ["python", "train.py"]


def step_script() -> Path:
    """model_step.py, found without importing neuron_backend (that imports torch)."""
    spec = importlib.util.find_spec("neuron_backend")
    if spec is None or spec.origin is None:
        raise RuntimeError("neuron_backend (the simulator) is not installed: `check --model` needs the sim extra")
    return Path(spec.origin).parent / "shape_only" / "model_step.py"


def write_project(run: ModelRun, folder: Path) -> None:
    (folder / "config.json").write_text(json.dumps(run.config, indent=1), encoding="utf-8")
    (folder / "model_run.json").write_text(json.dumps(run.choices(), indent=1), encoding="utf-8")
    shutil.copyfile(step_script(), folder / "train.py")
    (folder / "pyproject.toml").write_text(
        f"[tool.neuron-port]\n\n[tool.neuron-port.estimate]\ntokens-per-step = {run.tokens_per_step()}\n",
        encoding="utf-8")


def check_model(run: ModelRun, timeout: Optional[float] = None, on_output=None, flags=None) -> Report:
    """The ``check`` report of one standard training step of ``run``'s model, shape-only. ``flags``: the
    estimate's options from `check`'s flags (--instance, --price, --cores, --tokens-per-step), over the
    project's (its tokens per step: every rank's batch); None keeps those set in this process."""
    from neuron_port import api
    from neuron_port.check.estimate.options import CLI_OPTIONS
    from neuron_port.config import load_settings

    if flags is not None:
        token = CLI_OPTIONS.set(flags)
        try:
            return check_model(run, timeout, on_output)
        finally:
            CLI_OPTIONS.reset(token)

    folder = Path(tempfile.mkdtemp(prefix="neuron-port-model-"))
    try:
        write_project(run, folder)
        settings = load_settings(folder, folder / "pyproject.toml")
        return api.check(folder, COMMAND, settings, timeout=timeout, shape_only=True,
                         world_size=run.world_size, use_cache=False, on_output=on_output)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check_model_json(run: ModelRun, timeout: Optional[float] = None, flags=None) -> dict[str, Any]:
    """``check_model`` as plain data, what a pool or Ray task sends back: the model's name, its table row
    and the JSON report."""
    from neuron_port.reporters.json_report import render

    try:
        doc = json.loads(render(check_model(run, timeout, flags=flags)))
    except Exception as exc:  # one model's failure is its row, not the table's end
        return {"model": run.name, "task": run.task, "row": None, "error": f"{type(exc).__name__}: {exc}"}
    return {"model": run.name, "task": run.task, "row": row_of(doc), "report": doc}
