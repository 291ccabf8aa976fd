"""The amp_custom_ops fixture end to end, through the real CLI: its rewrite is the expected tree (and a
second run changes nothing), and the rewritten project runs under `neuron-port check` (one process and
`--nproc 2`) with no manual edit, printing the same losses as the unrewritten script on CPU.

The baseline is the unrewritten script run on this CPU-only host: there `torch.cuda.is_available()` is
False, so it picks the CPU device and the gloo backend, autocast and the CUDA GradScaler disable
themselves, and the custom op's CUDA-only kernel is not called (the layer takes its torch path). The
data is made on the CPU from a fixed seed, so both runs see the same batches; `--amp` stays off, since a
bfloat16 neuron autocast region computes differently from the disabled CUDA one."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, simulator_env

pytestmark = pytest.mark.slow

NAME = "amp_custom_ops"
LOSS = re.compile(r"^(step \d+ loss|final eval loss) (\S+)$", re.M)


def tree_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and ".neuron-port-cache" not in p.parts}


def losses(text: str) -> list[tuple[str, float]]:
    return [(label, float(value)) for label, value in LOSS.findall(text)]


def cpu_baseline(project: Path, nproc: int = 1) -> list[tuple[str, float]]:
    env = {k: v for k, v in simulator_env().items() if k != "NEURON_PORT_SIMULATE"}
    command = [sys.executable, "train.py", "--steps", "4"]
    if nproc > 1:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                   "--standalone", "train.py", "--steps", "4"]  # a free port
    proc = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return losses(proc.stdout)


def test_the_rewrite_is_the_expected_tree(tmp_path, cli):
    work = tmp_path / NAME
    shutil.copytree(FIXTURES / NAME, work)
    result = cli("rewrite", "--no-cache", ".", cwd=work)
    assert result.returncode == 1, result.stderr  # report-only findings (NP512, NP713) are errors
    assert tree_files(work) == tree_files(FIXTURES / "expected" / NAME)
    again = cli("rewrite", "--no-cache", "--diff", ".", cwd=work)
    assert again.stdout == ""


@pytest.mark.parametrize("nproc", [1, 2])
def test_the_rewritten_project_runs_on_the_simulator_with_the_cpu_losses(tmp_path, cli, sim_build, nproc):
    project = tmp_path / NAME
    shutil.copytree(FIXTURES / NAME, project)
    expected = cpu_baseline(project, nproc)
    assert len(expected) == 5
    out = tmp_path / "report.json"
    result = cli("check", str(project), "--preview", "--no-cache", "--output", str(out),
                 *(["--nproc", str(nproc)] if nproc > 1 else []), "--", "python", "train.py", "--steps", "4",
                 env={"OMP_NUM_THREADS": "1"})
    doc = json.loads(out.read_text())
    status = doc["runtime"]["status"]
    assert status["exit_code"] == 0, status["stderr_tail"]
    printed = status["stdout_tail"] if nproc == 1 else status["ranks"][0]["stdout_tail"]
    assert losses("\n".join(printed)) == expected, result.stdout[-2000:]
    assert tree_files(project) == tree_files(FIXTURES / NAME), "--preview leaves the project alone"
    found = {(f["code"], f["path"], f["line"]) for f in doc["findings"]
             if f["source"] == "static" and not f["fix"]["available"]}
    # what is left after the rewrite: the report-only findings (the rewrite's fixed point: NP101 registers the
    # custom op for neuron, so its CUDA-only registration, NP713 on the original text, is gone, and the
    # rewritten project runs with the CPU's losses above)
    assert {code for code, _, _ in found} == {"NP202", "NP407", "NP512"}
    assert ("NP512", "train.py", 38) in found
