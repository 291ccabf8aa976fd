"""CUDA C++ sources (``.cu`` / ``.cuh``) found in a tree: one NP709 finding per file, with the number of
kernels it defines. The file is read as text, never parsed, and never changed."""

from __future__ import annotations

import re

from neuron_port.results import Finding, Fix
from neuron_port.rewrite.discovery import SourceFile
from neuron_port.rewrite.options import RunOptions
from neuron_port.rewrite.sources import SourceError, read_source

CODE = "NP709"
_KERNEL = re.compile(r"\b__global__\b")


def cuda_file_findings(source: SourceFile, options: RunOptions) -> list[Finding]:
    """The NP709 finding of one ``.cu`` / ``.cuh`` file (none when NP709 is not selected)."""
    if CODE not in options.rule_codes:
        return []
    try:
        text = read_source(source.real, source.display).text
    except (OSError, SourceError):
        text = ""  # still a CUDA source: reported, kernels not counted
    return cuda_text_findings(text, source.display, options.rule_codes)


def cuda_text_findings(text: str, path: str, rule_codes) -> list[Finding]:
    """The NP709 finding of the text of a CUDA source named ``path`` (none when NP709 is not selected)."""
    if CODE not in rule_codes:
        return []
    from neuron_port.rules.registry import rule_by_code

    rule = rule_by_code(CODE)
    kernels = len(_KERNEL.findall(text))
    counted = f", {kernels} `__global__` kernel{'s' * (kernels != 1)}" if kernels else ""
    message = (f"CUDA C++ source file{counted}: nvcc builds it for NVIDIA GPUs only; port each kernel to NKI "
               "(registered with `@torch_neuronx.nki_op`) or replace it by the torch ops it fuses")
    return [Finding(code=CODE, name=rule.NAME, severity=rule.SEVERITY, path=path, line=1, column=1,
                    end_line=1, end_column=1, message=message, fix=Fix(available=False, applied=False,
                    safety="none"), effort=rule.EFFORT)]
