"""`neuron-port check --model ID_OR_PATH ...`: the options' checks, and the one table of several models.

One model gives `check`'s own report (cli.py renders it as any check's: text, JSON, SARIF, --output,
--html, the exit code); several give one table (text) or one JSON document ``{"models": [...]}`` of each
model's row and report, the models run by neuron_port/check/model_run/engines.py.
"""

from __future__ import annotations

import json
from typing import Any, Optional

from neuron_port.errors import UsageError

DEFAULT_BATCH, DEFAULT_SEQ = 8, 2048


def path_with_model(ctx, path) -> None:
    """UsageError for a PATH given with --model (the first word of a command after `--` is taken for it)."""
    from neuron_port.commands.check_args import ARGV_KEY

    given = ctx.meta.get(ARGV_KEY, [])
    if "--" in given and given[given.index("--") + 1:][:1] == [str(path)]:
        raise UsageError("--model runs a generated training step: give no command after `--` (or drop --model)")
    raise UsageError(f"{path}: --model runs no project folder; give PATH or --model, not both")


def refuse_with_model(*, command: list[str], nproc: Optional[int], preview: bool, size_rules: dict) -> None:
    """UsageError for what `--model` does not take: a command (the step is generated), --nproc, --preview,
    --size-rule."""
    if command:
        raise UsageError("--model runs a generated training step: give no command after `--` (or drop --model)")
    if nproc:
        raise UsageError("--model runs shape-only: --nproc is not taken (use --world-size N for a fake world)")
    if preview:
        raise UsageError("--model runs a generated training step: --preview has no project to rewrite")
    if size_rules:
        raise UsageError("--model runs a generated training step: --size-rule names no line of it")


def refuse_without_model(given: dict[str, Any]) -> None:
    """UsageError for an option of `--model` given without it."""
    for option, value in given.items():
        if value not in (None, False, [], ()):
            raise UsageError(f"{option} is an option of --model (neuron-port check --model ID_OR_PATH {option} ...)")


def several_models_options(*, html, statistics: bool) -> None:
    """UsageError for the options that render one report (several models give one table, not a report each)."""
    if html is not None:
        raise UsageError("--html writes one model's report; several models give one table (run one --model per "
                         "--html, or use --output-format json for every model's report)")
    if statistics:
        raise UsageError("--statistics counts one model's findings; several models give one table (run one --model "
                         "with --statistics)")


def model_runs_of(models: list[str], *, command: list[str], nproc: Optional[int], preview: bool, size_rules: dict,
                  tasks: list[str], batch: Optional[int], seq: Optional[int], precision: Optional[str],
                  world_size: Optional[int], compile: bool, engine: Optional[str] = None) -> list:
    """The runs of `--model` (neuron_port/check/model_run/spec.py), defaults applied; UsageError for what is
    wrong, before anything runs."""
    from neuron_port.check.model_run import ENGINES, model_runs

    refuse_with_model(command=command, nproc=nproc, preview=preview, size_rules=size_rules)
    if engine is not None and engine not in ENGINES:
        raise UsageError(f"--engine {engine}: expected one of {', '.join(ENGINES)}")
    return model_runs(models, tasks=tasks, batch=DEFAULT_BATCH if batch is None else batch,
                      seq=DEFAULT_SEQ if seq is None else seq, precision=precision or "bf16", world_size=world_size,
                      compile=compile)


def one_model_report(run, timeout: Optional[float], on_output):
    """One model's `check` report (rendered by cli.py as any check's)."""
    from neuron_port.check.model_run import check_model

    return check_model(run, timeout, on_output)


def print_table(results: list[dict[str, Any]], quiet: bool) -> None:
    from rich.table import Table

    from neuron_port.check.model_run import table_rows
    from neuron_port.commands.console import out

    header, rows = table_rows(results)
    table = Table(title=None if quiet else "check --model: one training step per model, shape-only")
    for i, name in enumerate(header):  # the model's name folds; the figures keep their lines
        table.add_column(name, overflow="fold", no_wrap=i > 0)
    for row in rows:
        table.add_row(*row)
    console = out()
    console.width = max(console.width, 132)  # as wide as check's panels, on a pipe too
    console.print(table)


def one_model_table(report, run, output_format: str, quiet: bool) -> None:
    """After one model's `check` report (text): its row of the table of several models."""
    if output_format != "text":
        return
    from neuron_port.check.model_run import row_of
    from neuron_port.reporters.json_report import render

    print_table([{"model": run.name, "task": run.task, "row": row_of(json.loads(render(report)))}], quiet)


def several_models_exit(runs: list, engine: Optional[str], timeout: Optional[float], output_format: str, output,
                        quiet: bool, exit_zero: bool) -> int:
    """Run the models (`--engine`), print the table (or the JSON document), write --output; the exit code:
    0 when every model's step ran (or --exit-zero), 1 when one failed."""
    from neuron_port.atomic import atomic_write
    from neuron_port.check.estimate.options import CLI_OPTIONS
    from neuron_port.check.model_run import run_models
    from neuron_port.commands.console import err, out

    if output_format not in ("text", "json"):
        raise UsageError(f"--output-format {output_format}: several models print text or json (one table)")
    results = run_models(runs, engine or "local", timeout, flags=CLI_OPTIONS.get())

    failed = [r for r in results if r.get("row") is None or r["row"]["exit_code"] != 0]
    doc = json.dumps({"models": results}, indent=2)
    code = 0 if exit_zero or not failed else 1
    if output is not None:
        try:
            atomic_write(output, doc.encode())
        except OSError as exc:
            err().print(f"neuron-port: cannot write {output}: {exc.strerror or exc}", style="bold red", markup=False)
            code = 2
    if output_format == "json":
        out().print(doc, markup=False, highlight=False, soft_wrap=True)
        return code
    print_table(results, quiet)
    if failed and not quiet:
        for r in failed:
            why = r.get("error") or "; ".join((r.get("report") or {}).get("runtime", {}).get("status", {}).get(
                "stderr_tail", [])[-1:])
            err().print(f"neuron-port: {r['model']}: the step failed: {why}", markup=False)
    return code
