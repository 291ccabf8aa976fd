"""NP909: the command did not finish successfully (could not start, timed out, killed, non-zero exit)."""

from __future__ import annotations

from typing import Optional

from neuron_port.check.aggregate.findings import project_finding, rule_message
from neuron_port.check.runner import RunStatus
from neuron_port.results import Finding


def describe_failure(status: RunStatus) -> str:
    """What happened to the command, completing "the command ..."."""
    if status.error:
        return f"could not start: {status.error}"
    if status.timed_out:
        return f"timed out after {status.duration:.0f} s"
    if status.signal:
        return f"was killed by {status.signal}"
    return f"exited with code {status.exit_code}"


def command_failed_finding(status: RunStatus) -> Optional[Finding]:
    """The NP909 finding with the last non-blank line of stderr, or None when the command succeeded."""
    if status.succeeded:
        return None
    last = next((line for line in reversed(status.stderr_tail) if line.strip()), "")
    message = rule_message("NP909", what=describe_failure(status)) + (f": {last.strip()}" if last else "")
    return project_finding("NP909", message, severity="error")
