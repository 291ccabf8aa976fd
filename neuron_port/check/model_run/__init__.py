"""``neuron-port check --model ID_OR_PATH``: any Hugging Face model by its config.json, one standard training
step shape-only, through the normal ``check`` path (docs/shape-only.md, "Any Hugging Face model by its
config"). spec.py: the runs, checked before anything runs; run.py: one model's project folder and check;
engines.py: several models in a process pool or as Ray tasks; table.py: their one table. No torch here."""

from neuron_port.check.model_run.engines import ENGINES, run_models
from neuron_port.check.model_run.run import check_model, check_model_json
from neuron_port.check.model_run.spec import PRECISIONS, TASKS, ModelRun, model_runs
from neuron_port.check.model_run.table import row_of, table_rows

__all__ = ["ENGINES", "PRECISIONS", "TASKS", "ModelRun", "check_model", "check_model_json", "model_runs",
           "row_of", "run_models", "table_rows"]
