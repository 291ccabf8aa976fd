"""Issue 33, item 2, for the result cache: only its owner can write what it keeps, whatever the umask. Its
entries are verified before use (an HMAC under the per-user key, checked before the JSON is read: see
test_cache.py's and test_cache_safety.py's damaged and forged entries, discarded and replaced); here, a
real `rewrite --cache` run under umask 000, 002 and 022 leaves no file or folder that others may write:
entries and marker files 0644, folders 0755, the key 0600 in a 0700 folder."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from neuron_port.rewrite.cache import CACHE_DIR_NAME

CUDA = "import torch\nx = torch.zeros(3).cuda()\n"


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o022])
def test_the_result_cache_is_written_for_its_owner_only(tmp_path, umask):
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for i in range(3):
        (project / f"train{i}.py").write_text(CUDA + f"y = {i}\n")  # an entry each (named by the bytes)
    xdg = tmp_path / "xdg"
    env = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"} | {"XDG_CACHE_HOME": str(xdg)}
    run = subprocess.run([sys.executable, "-m", "neuron_port", "rewrite", "--check", "--cache", "."], cwd=project,
                         env=env, umask=umask, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and run.stdout.count("NP103 [*]") == 3, run.stdout + run.stderr
    modes = {path.relative_to(tmp_path).as_posix(): oct(stat.S_IMODE(path.lstat().st_mode))
             for path in [project / CACHE_DIR_NAME, *(project / CACHE_DIR_NAME).rglob("*")]}
    assert len(modes) >= 3 + 2 + 3  # three entries, the marker files, the folders (the cache's, the format's, a shard)
    assert {path: mode for path, mode in modes.items()
            if mode != (oct(0o755) if (tmp_path / path).is_dir() else oct(0o644))} == {}
    key = xdg / "neuron-port" / "key"
    assert (oct(stat.S_IMODE(key.stat().st_mode)), oct(stat.S_IMODE(key.parent.stat().st_mode))) == \
        (oct(0o600), oct(0o700))
