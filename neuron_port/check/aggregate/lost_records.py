"""NP912: device work the run's counts miss (check/events/lost.py): the events folder removed while the command
ran, or a forked child that used the device. One finding per loss, about the project (no line of the user's
code is known for it), so that a run whose records went missing never reads as "no op reached the neuron
device" or as a clean success."""

from __future__ import annotations

from typing import Sequence

from neuron_port.check.aggregate.findings import project_finding, rule_message
from neuron_port.check.events import LostRecords
from neuron_port.results import Finding


def lost_records_findings(lost: Sequence[LostRecords]) -> list[Finding]:
    return [project_finding("NP912", rule_message("NP912", what=loss.describe())) for loss in lost]
