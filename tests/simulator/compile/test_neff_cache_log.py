"""Issue 35, noise: the NEFF cache's lookup lines follow TorchNeuron's own log level, not the program's
logging. TorchNeuron logs "[NEFF_CACHE] Cache HIT/MISS for key:" at INFO through its C++ logger, whose level
is TORCH_NEURONX_LOG_LEVEL (default warning; csrc/core/NeuronLogging.h), so a program that calls
``logging.basicConfig(level=logging.INFO)`` does not get one line per lookup (1,048 lines in one run before)."""

from __future__ import annotations

import pytest

from ..conftest import PRELUDE

pytestmark = pytest.mark.slow

PROGRAM = PRELUDE + """
import logging
logging.basicConfig(level=logging.INFO)
logging.getLogger("user").info("the program's own INFO line")
for n in (2, 3, 4):
    (torch.ones(n, device="neuron") * 2).sum().item()
result({})
"""


def test_lookups_follow_torchneuronx_log_level_not_the_programs(run_sim, tmp_path):
    cache = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "neff")}
    quiet = run_sim(PROGRAM, env=cache)
    assert quiet.proc.returncode == 0, quiet.proc.stderr[-3000:]
    assert "the program's own INFO line" in quiet.proc.stderr
    assert "NEFF_CACHE" not in quiet.proc.stderr
    loud = run_sim(PROGRAM, env={**cache, "TORCH_NEURONX_LOG_LEVEL": "2"})
    assert loud.proc.returncode == 0, loud.proc.stderr[-3000:]
    lines = [ln for ln in loud.proc.stderr.splitlines() if "[NEFF_CACHE]" in ln]
    assert lines and all(ln.startswith("[Neuron] [INFO] [NEFF_CACHE] ") for ln in lines), loud.proc.stderr[-2000:]
    assert any("Cache HIT for key:" in ln for ln in lines)  # the second run finds the first run's entries
