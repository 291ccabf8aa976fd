"""One process is one process (issue 21, item 9), through the real CLI: a script that sets ``RANK`` /
``WORLD_SIZE`` itself before ``init_process_group`` is one process on one logical core, and a file the
program writes into the events folder is not a process."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""\
    import os
    import torch
    import torch.distributed as dist

    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
    dist.init_process_group(backend="neuron")
    model = torch.nn.Linear(4, 2).to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 4, device="neuron")).square().mean()
        loss.backward()
        dist.all_reduce(model.weight.grad)
        opt.step()
        opt.zero_grad()
    events = os.environ.get("NEURON_PORT_EVENTS_DIR")
    if events:  # a program that logs next to whatever folder it is handed
        with open(os.path.join(events, "metrics.jsonl"), "w") as f:
            f.write(json.dumps({"kind": "process", "pid": 1, "rank": 7}) + "\\n")
            f.write(json.dumps({"loss": float(loss)}) + "\\n")
        with open(os.path.join(events, "neuron-events-rank7-pid1.jsonl"), "w") as f:  # named so, not of this run
            f.write(json.dumps({"kind": "process", "pid": 1, "rank": 7}) + "\\n")
            f.write(json.dumps({"kind": "summary", "complete": True}) + "\\n")
    dist.destroy_process_group()
    """).replace("import os\n", "import json\nimport os\n", 1)


def test_a_script_that_sets_its_own_rank_is_one_process(tmp_path: Path, cli):
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(SCRIPT)
    result = cli("check", str(project), "--output-format", "json", "--", "python", "train.py")
    assert result.stdout, result.stderr
    doc = json.loads(result.stdout)
    runtime = doc["runtime"]
    processes = runtime["processes"]
    assert len(processes) == 1, processes
    assert processes[0]["pid"] != 1 and processes[0].get("rank") == 0, processes  # not the rank7-pid1 file
    assert "metrics.jsonl" not in json.dumps(processes)
