"""Where the models of one ``check --model`` call run: each model is one independent call of
``check_model_json`` (run.py), in a local process pool (the default: at most one worker per core), or as
Ray tasks on an existing Ray cluster (``RAY_ADDRESS``, or one started on this machine with ``ray start``)
or, without one, a local Ray instance started for the call (``--engine ray``; the ``ray`` extra). The
results come back in the order of the models."""

from __future__ import annotations

import os
from typing import Any, Optional

from neuron_port.check.model_run.run import check_model_json
from neuron_port.check.model_run.spec import ModelRun
from neuron_port.errors import UsageError

ENGINES = ("local", "ray")


def run_models(runs: list[ModelRun], engine: str = "local", timeout: Optional[float] = None,
               jobs: Optional[int] = None, flags=None) -> list[dict[str, Any]]:
    """Each run's ``check_model_json``; ``flags``: the estimate's options of `check`'s flags, sent to every
    worker (a worker process or a Ray task does not share this process's context)."""
    if engine == "ray":
        return _ray(runs, timeout, flags)
    if engine != "local":
        raise UsageError(f"--engine {engine}: expected one of {', '.join(ENGINES)}")
    workers = max(1, min(len(runs), jobs or os.cpu_count() or 1))
    if workers == 1:
        return [check_model_json(run, timeout, flags) for run in runs]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(check_model_json, runs, [timeout] * len(runs), [flags] * len(runs)))


def _ray(runs: list[ModelRun], timeout: Optional[float], flags) -> list[dict[str, Any]]:
    try:
        import ray
    except ImportError:
        raise UsageError("--engine ray: ray is not installed (pip install 'neuron-port[ray]')") from None
    started = not ray.is_initialized()
    if started:
        # an existing cluster (RAY_ADDRESS, or `ray start` on this machine), else a local instance for this call
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    try:
        task = ray.remote(num_cpus=1)(check_model_json)
        return ray.get([task.remote(run, timeout, flags) for run in runs])
    finally:
        if started:
            ray.shutdown()
