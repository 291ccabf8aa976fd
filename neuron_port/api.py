"""The Python API of neuron-port. The `neuron-port` command line is options, rendering and exit codes over
these three functions.

    from neuron_port.api import Settings, check, rewrite, rewrite_source

    report = rewrite(["src/"], Settings(unsafe_fixes=True))          # rewrites files in place
    report = rewrite(["src/"], write=False)                          # only reports (like --check)
    new_code, findings = rewrite_source("x = y.cuda()\\n")           # a string, nothing on disk
    report = check("project/", ["python", "train.py", "--steps", "4"])  # run on the simulated device

``Report`` (neuron_port.results) holds per-file results (``files``), the findings (``findings``, sorted),
errors for files that could not be processed (``errors``) and, for ``check``, the ``runtime`` section.
Reporters (neuron_port.reporters) turn it into text, JSON, SARIF or GitHub annotations. Bad arguments
raise ``UsageError``; a file that cannot be processed never raises, it becomes an entry of ``errors``.
The static half (``rewrite``, ``rewrite_source``) never imports torch.
"""

from __future__ import annotations

from dataclasses import replace
from os import PathLike
from pathlib import Path
from typing import Callable, Optional, Sequence, Union

from neuron_port.config import ConfigError, Settings, load_settings
from neuron_port.errors import UsageError
from neuron_port.results import FileResult, Finding
from neuron_port.report import Report
from neuron_port.rewrite.scan import run_options, scan_project
from neuron_port.rewrite.writer import write_results

__all__ = ["ConfigError", "Report", "Settings", "UsageError", "check", "load_settings", "rewrite",
           "rewrite_source"]

StrPath = Union[str, "PathLike[str]"]


def rewrite(
    paths: Sequence[StrPath],
    settings: Optional[Settings] = None,
    *,
    write: bool = True,
    diff: bool = False,
    jobs: Optional[int] = None,
    use_cache: Optional[bool] = None,
    instance: Optional[str] = None,
    neuron_cores: Optional[int] = None,
    on_files: Optional[Callable[[int], None]] = None,
    on_result: Optional[Callable[[FileResult], None]] = None,
) -> Report:
    """Rewrite the CUDA-specific code under ``paths`` (files or folders; .gitignore is honoured).

    ``write=False`` changes nothing on disk (what `--check` and `--diff` do); ``diff`` adds a unified diff
    to each changed file's result. ``settings`` default to ``Settings()``; read a project's
    ``[tool.neuron-port]`` with ``load_settings(folder)``. ``instance`` / ``neuron_cores``: the Trainium
    layout that GPU counts in launch scripts become. ``on_files(n)`` and ``on_result(file_result)``
    report progress. ``use_cache``: read and write the result cache of each project root (default: only
    when writing, so ``write=False`` writes nothing at all). Every file is either left as it was or
    completely rewritten.
    """
    settings = settings or Settings()
    report = scan_project([Path(p) for p in paths], settings, command="rewrite", want_diff=diff, jobs=jobs,
                          instance=instance, neuron_cores=neuron_cores,
                          use_cache=write if use_cache is None else use_cache,
                          on_files=on_files, on_result=on_result)
    if not write:
        return report
    files, errors = write_results(report.files)
    return replace(report, files=files, errors=report.errors + errors, wrote=True)


def rewrite_source(
    code: str,
    path: str = "<string>",
    settings: Optional[Settings] = None,
    *,
    instance: Optional[str] = None,
    neuron_cores: Optional[int] = None,
    on_first_pass: Optional[Callable[[list[Finding]], None]] = None,
) -> tuple[str, list[Finding]]:
    """Rewrite one file's text: returns the new text and the findings (a finding's ``fix.applied`` says
    its fix is in the new text). ``path`` only names the file in findings and decides how it is read:
    ``.py`` (or anything else) is Python, ``.ipynb`` a notebook, ``.sh`` / Makefiles / ``.yaml`` /
    ``.json`` / ``.toml`` launch files; a name without a suffix goes by the text's shebang
    (``#!/bin/bash``: a shell script). Raises RewriteError (neuron_port.rewrite.engine) for text that
    does not parse, UsageError for bad settings. ``on_first_pass`` (Python files): called with the
    findings of ``code`` as it is, at its own places, when a fix applies, before the rewrite's further
    passes reach its fixed point (the returned findings); the language server publishes them early."""
    from neuron_port.rewrite.file_work import load_engines

    load_engines()
    from neuron_port.rewrite.engine import EngineOptions, transform_source
    from neuron_port.rewrite.line_files import line_rules, transform_text
    from neuron_port.rewrite.notebooks import transform_notebook
    from neuron_port.rewrite.sources import SHEBANG_BYTES, file_kind, keep_final_cr
    from neuron_port.rules.instances import describe_cores
    from neuron_port.rules.registry import rule_by_code
    from neuron_port.rules.spec import LineOptions

    settings = settings or Settings()
    options = run_options(settings, instance=instance, neuron_cores=neuron_cores)
    rules = [rule_by_code(code_) for code_ in options.rule_codes]
    kind = file_kind(path, head=code[:SHEBANG_BYTES])
    if kind == "cuda":  # a .cu / .cuh source: reported (NP709), never parsed or changed
        from neuron_port.rewrite.cuda_files import cuda_text_findings

        return code, cuda_text_findings(code, path, options.rule_codes)
    if kind in ("python", "notebook"):
        engine = EngineOptions(target=options.target, unsafe_fixes=options.unsafe_fixes)
        if kind == "notebook":
            outcome = transform_notebook(code, rules, engine, path=path)
        else:
            outcome = transform_source(code, rules, engine, path=path, on_first_pass=on_first_pass)
        # as the file runner does: LibCST drops a lone CR that ends the text (old Mac line endings)
        return (keep_final_cr(code, outcome.code) if kind == "python" else outcome.code), outcome.findings
    scan = LineOptions(target=options.target, unsafe_fixes=options.unsafe_fixes,
                       cores=describe_cores(instance, neuron_cores))
    outcome = transform_text(code, kind, scan, line_rules(options.rule_codes), path=path)
    return outcome.text, outcome.findings


def check(
    path: StrPath,
    command: Sequence[str],
    settings: Optional[Settings] = None,
    *,
    nproc: Optional[int] = None,
    timeout: Optional[float] = None,
    preview: bool = False,
    shape_only: bool = False,
    size_rules: Optional[dict[str, int]] = None,
    world_size: Optional[int] = None,
    use_cache: bool = True,
    on_tick: Optional[Callable[[float], None]] = None,
    on_output: Optional[Callable[[str, str], None]] = None,
) -> Report:
    """Run ``command`` (argv; ``python`` means this interpreter) from the folder ``path`` on the simulated
    neuron device and report what Trainium would do, with the static findings for ``path``.

    ``nproc``: run it under torchrun with that many processes. ``preview``: run a temporary rewritten
    copy (safe fixes applied, unsafe ones too with ``settings.unsafe_fixes``); the project is never
    changed. ``shape_only``: every neuron tensor is fake (no storage, no compute; docs/shape-only.md);
    ``size_rules`` ({"train.py:57": 128}) sets data-dependent sizes at those lines; ``world_size`` (with
    ``shape_only``) runs one process as rank 0 of that many over a fake process group. ``timeout`` (seconds, default 30 minutes): SIGTERM, then SIGKILL. ``on_tick(seconds)`` is
    called about four times a second while the command runs; ``on_output(stream, text)`` gets the
    command's output as it is written (stream "stdout" or "stderr"; without it the output is only kept
    for the report's tails). SIGINT or SIGTERM while it runs (in the main thread) end every process the
    command started and return the report of what ran, with ``runtime.status.interrupted`` set. A
    command that cannot start raises UsageError. Needs torch (the `sim` extra)."""
    from neuron_port.check import DEFAULT_TIMEOUT_SECONDS
    from neuron_port.check.session import run_check

    return run_check(Path(path), list(command), settings or Settings(), nproc=nproc,
                     timeout=DEFAULT_TIMEOUT_SECONDS if timeout is None else timeout, preview=preview,
                     shape_only=shape_only, size_rules=size_rules, world_size=world_size, use_cache=use_cache,
                     on_tick=on_tick,
                     on_output=on_output)
