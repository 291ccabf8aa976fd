"""The estimate's command line (docs/estimate.md): the `--price`, `--cores` and `--tokens-per-step` options of
`check` (``with_estimate_options`` adds them to the command and hands them to the run through
``CLI_OPTIONS``), and `neuron-port estimate REPORT.json`, which recomputes the estimate of a saved report
without running anything. cli.py registers both."""

from __future__ import annotations

import functools
import inspect
import json
import sys
import typing
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer
from neuron_port.commands.console import err, out
from neuron_port.commands.help import PlainHelpCommand

PRICE_HELP = ("USD per chip-hour (H100: per GPU-hour) for a device of the table, e.g. trn2-chip=1.50; "
              "repeat for several. Overrides [tool.neuron-port.estimate] prices and the shipped defaults.")
CORES_HELP = "Logical NeuronCores the step runs on (data parallel). Default: one per process of the run."
INSTANCE_HELP = ("Run the rows of an instance's chip on its chips: NAME or NAME:N instances, e.g. trn2.48xlarge "
                 "(16 Trainium2 chips), p5.48xlarge (8 H100), p4d.24xlarge (8 A100 40GB); repeat for several. "
                 "Rows of other chips keep --cores (rules/instances.toml lists the instances).")
TOKENS_HELP = ("Tokens one step processes (all cores together), for the price per million tokens: a number, or "
               "counted from the recorded shapes: `embedding` (the run's one embedding lookup), "
               "`embedding@FILE:LINE` or `embedding@MODULE` (e.g. transformer.wte) for one of several; "
               "the elements of its index tensor per steady step, summed over processes.")

MEASURED_HELP = ("The step time you measured on a GPU of the table, in seconds, and the instance it ran on: "
                 "DEVICE=SECONDS[@INSTANCE], e.g. h100-sxm=0.216@p5.48xlarge. The report shows the model's "
                 "ratio there (measured / estimated) and each Trainium row calibrated by it, beside the "
                 "model's own estimate.")
COMPARE_HELP = ("Which Trainium rows a job of N GPUs is compared with: like-for-like (default: the instance "
                "that holds N chips, e.g. trn2.48xlarge for 8 H100, equal chips and equal HBM) or cores (the "
                "job's logical cores, whole chips and one core each). An --instance of a Trainium sizes its "
                "chip's rows either way.")

TOKENS_METAVAR = "N|embedding[@WHERE]"


def _fail(message: str) -> typer.Exit:
    err().print(f"neuron-port: {message}", style="bold red", markup=False)
    return typer.Exit(2)


def flag_options(prices: Optional[List[str]], cores: Optional[int], tokens: Optional[str],
                 instances: Optional[List[str]] = None, measured: Optional[List[str]] = None,
                 compare: Optional[str] = None):
    """EstimateOptions of the flags; typer.Exit(2) with the reason for a bad --price, --tokens-per-step,
    --instance, --measured or --compare."""
    from neuron_port.check.estimate.devices import load_devices
    from neuron_port.check.estimate.options import (
        EstimateOptions, chip_ids, parse_compare, parse_measured, parse_price, parse_tokens)
    from neuron_port.check.estimate.sizing import parse_instances

    parsed = {}
    chips = chip_ids()
    for text in prices or []:
        try:
            device, value = parse_price(text, chips)
        except ValueError as exc:
            raise _fail(str(exc)) from None
        parsed[device] = value
    try:
        spec = None if tokens is None else parse_tokens(tokens)
    except ValueError as exc:
        raise _fail(f"--tokens-per-step: {exc}") from None
    try:
        sized = tuple(s.spec for s in parse_instances(instances or []))
    except ValueError as exc:
        raise _fail(str(exc)) from None
    try:
        chosen = None if compare is None else parse_compare(compare)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    one = None
    if len(measured or []) > 1:
        raise _fail(f"--measured given {len(measured or [])} times: give the one GPU step you measured")
    if measured:
        table = load_devices()
        try:
            one = parse_measured(measured[0], {d.id: d.kind for d in table if d.per == "chip"})
        except ValueError as exc:
            raise _fail(str(exc)) from None
        clash = next((p for p in sized if one.instance and p != one.instance and _holds(p, one.device)), None)
        if clash is not None:
            raise _fail(f"--measured {measured[0]!r} ran on {one.instance}, --instance {clash!r} sizes the same "
                        f"{one.device} row; give one")
        listed = any(d.id == one.device and d.listed for d in table)
        if not listed and one.instance is None and not any(_holds(p, one.device) for p in sized):
            raise _fail(f"--measured {measured[0]!r}: {one.device} is a row only on an instance that holds it; "
                        f"give it: {one.device}=SECONDS@INSTANCE")
    return EstimateOptions(cores=cores, tokens_per_step=spec, prices=parsed, instances=sized, measured=one,
                           compare=chosen)


def _holds(spec: str, device: str) -> bool:
    from neuron_port.check.estimate.sizing import parse_instance

    return parse_instance(spec).device == device


def _extra_parameters() -> list[inspect.Parameter]:
    keyword = inspect.Parameter.KEYWORD_ONLY
    return [
        inspect.Parameter("price", keyword, annotation=Optional[List[str]],
                          default=typer.Option(None, "--price", metavar="DEVICE=USD", help=PRICE_HELP)),
        inspect.Parameter("cores", keyword, annotation=Optional[int],
                          default=typer.Option(None, "--cores", min=1, metavar="N", help=CORES_HELP)),
        inspect.Parameter("instance", keyword, annotation=Optional[List[str]],
                          default=typer.Option(None, "--instance", metavar="NAME[:N]", help=INSTANCE_HELP)),
        inspect.Parameter("tokens_per_step", keyword, annotation=Optional[str],
                          default=typer.Option(None, "--tokens-per-step", metavar=TOKENS_METAVAR, help=TOKENS_HELP)),
        inspect.Parameter("measured", keyword, annotation=Optional[List[str]],
                          default=typer.Option(None, "--measured", metavar="DEVICE=SECONDS[@INSTANCE]",
                                               help=MEASURED_HELP)),
        inspect.Parameter("compare", keyword, annotation=Optional[str],
                          default=typer.Option(None, "--compare", metavar="like-for-like|cores", help=COMPARE_HELP)),
    ]


def with_estimate_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Adds --price, --cores and --tokens-per-step to ``command`` (`check`); the run reads them from
    ``CLI_OPTIONS`` while the command runs."""
    extra = _extra_parameters()

    @functools.wraps(command)
    def wrapper(*args: Any, price: Optional[List[str]] = None, cores: Optional[int] = None,
                instance: Optional[List[str]] = None, tokens_per_step: Optional[str] = None,
                measured: Optional[List[str]] = None, compare: Optional[str] = None, **kwargs: Any) -> Any:
        from neuron_port.check.estimate.options import CLI_OPTIONS  # not at import: `rewrite` never needs it

        token = CLI_OPTIONS.set(flag_options(price, cores, tokens_per_step, instance, measured, compare))
        try:
            return command(*args, **kwargs)
        finally:
            CLI_OPTIONS.reset(token)

    # the command's annotations resolved in its own module (cli.py's Annotated option types, written as
    # strings there): typer would otherwise look the strings up in this module and lose their help texts
    hints = typing.get_type_hints(command, include_extras=True)
    signature = inspect.signature(command)
    parameters = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()]
    wrapper.__signature__ = signature.replace(parameters=[*parameters, *extra],  # type: ignore[attr-defined]
                                              return_annotation=hints.get("return", signature.return_annotation))
    wrapper.__annotations__ = {**hints, **{p.name: p.annotation for p in extra}}
    return wrapper


def estimate(
    report: Path = typer.Argument(..., metavar="REPORT", help="A JSON report of `neuron-port check` (--output-format json or -o)."),
    price: Optional[List[str]] = typer.Option(None, "--price", metavar="DEVICE=USD", help=PRICE_HELP),
    cores: Optional[int] = typer.Option(None, "--cores", min=1, metavar="N", help=CORES_HELP),
    instance: Optional[List[str]] = typer.Option(None, "--instance", metavar="NAME[:N]", help=INSTANCE_HELP),
    tokens_per_step: Optional[str] = typer.Option(None, "--tokens-per-step", metavar=TOKENS_METAVAR, help=TOKENS_HELP),
    measured: Optional[List[str]] = typer.Option(None, "--measured", metavar="DEVICE=SECONDS[@INSTANCE]",
                                                 help=MEASURED_HELP),
    compare: Optional[str] = typer.Option(None, "--compare", metavar="like-for-like|cores", help=COMPARE_HELP),
    output_format: Optional[str] = typer.Option(None, "--output-format", metavar="FORMAT",
                                                help="text or json (the `estimate` section). Default: text."),
    format_alias: Optional[str] = typer.Option(None, "--format", metavar="FORMAT", hidden=True,
                                               help="The former name of --output-format."),
) -> None:
    """Recompute the estimate of a saved `check` report with other prices, core counts or tokens per step,
    without running the project again. Options not given keep the report's values."""
    from neuron_port.check.estimate import TokensError, recompute
    from neuron_port.check.estimate.saved import DamagedSection
    from neuron_port.reporters.text.estimate import render_estimate

    # --output-format, as every command spells it; --format (its first name) still works
    if output_format is not None and format_alias is not None and output_format != format_alias:
        raise _fail(f"--output-format {output_format!r} and --format {format_alias!r} disagree; give one")
    option = "--output-format" if output_format is not None or format_alias is None else "--format"
    output_format = output_format or format_alias or "text"
    if output_format not in ("text", "json"):
        raise _fail(f"{option} {output_format!r}: expected text or json")
    try:
        document = json.loads(report.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _fail(f"{report}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _fail(f"{report}: not a JSON report: {exc}") from None
    except RecursionError:  # the reader recurses per level of nesting
        raise _fail(f"{report}: not a JSON report: nested too deeply") from None
    section = document.get("estimate") if isinstance(document, dict) else None
    if not isinstance(section, dict) or not isinstance(section.get("work"), dict):
        raise _fail(f"{report}: no `estimate` section with its per-step work (a `neuron-port check` JSON report "
                    "of a run that reached the neuron device)")
    options = flag_options(price, cores, tokens_per_step, instance, measured, compare)
    try:
        result = recompute(section, options)
    except TokensError as exc:
        raise _fail(f"{report}: {exc}") from None
    except DamagedSection as exc:  # names the key: estimate.work.work[0].calls: expected a finite number ...
        raise _fail(f"{report}: the `estimate` section is damaged: {exc}") from None
    except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise _fail(f"{report}: the `estimate` section is damaged: {type(exc).__name__}: {exc}") from None
    try:  # JSON has no NaN or Infinity: finite values near the float maximum can still overflow on the way
        text = json.dumps(result, indent=2, allow_nan=False)
    except ValueError:
        raise _fail(f"{report}: the `estimate` section is damaged: its numbers are too large to estimate from "
                    "(the estimate overflows to Infinity)") from None
    if output_format == "json":
        sys.stdout.write(text + "\n")
    else:
        render_estimate(out(), result)
