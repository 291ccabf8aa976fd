"""The root cause of a failed distributed run (issue 21, item 8), through the real CLI: rank 1 raises
first; rank 0 then fails on a collective whose peer is gone. NP909 names rank 1, its exception and its
line, not rank 0's connection error nor torchrun's separator lines."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""\
    import os
    import time
    import torch
    import torch.distributed as dist

    dist.init_process_group(backend="neuron")
    rank = dist.get_rank()
    model = torch.nn.Linear(4, 2).to("neuron")
    for step in range(3):
        loss = model(torch.randn(8, 4, device="neuron")).square().mean()
        loss.backward()
        if rank == 1 and step == 1:
            time.sleep(0.5)  # rank 0 is waiting in the collective
            raise ValueError("bad batch on rank 1")  # ROOT CAUSE
        dist.all_reduce(model.weight.grad)  # COLLECTIVE: rank 0 fails here once rank 1 is gone
    dist.destroy_process_group()
    """)


def line_of(path: Path, marker: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if marker in line)


def test_np909_names_the_rank_that_raised_first_and_its_line(tmp_path: Path, cli):
    project = tmp_path / "project"
    project.mkdir()
    script = project / "train.py"
    script.write_text(SCRIPT)
    # torchrun stops the other ranks once it sees one exit: a 2 s monitor interval (default 0.1 s) lets
    # rank 0 reach its own error first, as on a slower launcher, so the run has two failed ranks
    result = cli("check", str(project), "--output-format", "json", "--", "torchrun", "--nproc_per_node=2",
                 "--monitor-interval=2", "train.py")
    assert result.stdout, result.stderr
    doc = json.loads(result.stdout)
    np909, = [f for f in doc["findings"] if f["code"] == "NP909"]
    assert "rank 1 failed with ValueError: bad batch on rank 1" in np909["message"], np909
    assert Path(np909["path"]).name == "train.py" and np909["line"] == line_of(script, "# ROOT CAUSE"), np909
    assert "=====" not in np909["message"]
    failures = doc["runtime"]["failures"]
    assert [f["rank"] for f in failures] == [1, 0], failures  # rank 0 failed too, later, on the collective
    assert failures[0]["exception"].startswith("ValueError"), failures


def test_without_a_process_that_raised_np909_quotes_the_last_line_that_is_not_a_separator():
    from neuron_port.check.aggregate.command import command_failed_finding
    from neuron_port.check.runner import RunStatus

    tail = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "=" * 40, "train.py FAILED",
            "-" * 40, "Failures:", "  <NO_OTHER_FAILURES>", "=" * 40]
    finding = command_failed_finding(RunStatus(command=["torchrun", "train.py"], exit_code=1, stderr_tail=tail))
    assert finding.message.endswith(": <NO_OTHER_FAILURES>"), finding.message
