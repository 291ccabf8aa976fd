"""Issue 33, item 2: the NEFF cache counts only this user's own entries. An entry is written 0644 and its
shard folders 0755 whatever the umask; something at an entry's name that another user could have put or
changed there (another user's file, a file others may write, a link, an entry for another key, damaged
JSON) is a miss and is replaced by a good entry; no entry is written through a shard folder that is a
link. The cache is TORCH_NEURONX_NEFF_CACHE_DIR, which users point at shared folders (/tmp/neff_cache on
Trainium).

Each step calls the cache's lookup (``lookup_or_store``: what a compiled graph and the at-exit check of
eager signatures call) for a few keys, in a process of its own, and reports which were hits."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

KEYS = ["aten::add(f32[2, 3])", "aten::mm(f32[2, 3], f32[3, 4])", "aten::relu(bf16[8])"]

# One process serves every lookup of this module (torch's import, which the key needs, takes seconds):
# each request line is {"root", "umask"}; it answers a line with the keys, their entry paths, which were
# hits, and what the cache logged (a user's program shows those warnings on its stderr).
WORKER = r'''
import json, logging, os, sys
sys.path.insert(0, sys.argv[1])
from neuron_backend.compile import neff_cache
texts = json.loads(sys.argv[2])
logged = []
class Collect(logging.Handler):
    def emit(self, record):
        logged.append(record.getMessage())
neff_cache.log.addHandler(Collect())
neff_cache.log.setLevel(logging.INFO)  # the warning is said once per process, then logged at INFO
for line in sys.stdin:
    request = json.loads(line)
    os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = request["root"]
    os.umask(request["umask"])
    del logged[:]
    keys = [neff_cache.cache_key("eager", text) for text in texts]
    hits = [neff_cache.lookup_or_store(key, {"kind": "eager", "op": text}) for key, text in zip(keys, texts)]
    print(json.dumps({"keys": keys, "paths": [str(neff_cache.entry_path(key)) for key in keys], "hits": hits,
                      "logged": "\\n".join(logged)}), flush=True)
'''


@pytest.fixture(scope="module")
def worker():
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_NEURONX_")}
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(REPO), json.dumps(KEYS)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    yield proc
    proc.stdin.close()
    proc.wait(timeout=60)


@pytest.fixture
def lookup(worker):
    def run(root: Path, umask: int = 0o022) -> dict:
        worker.stdin.write(json.dumps({"root": str(root), "umask": umask}) + "\n")
        worker.stdin.flush()
        line = worker.stdout.readline()
        assert line, "the lookup process ended"
        return json.loads(line)
    return run


def good_entry(path: Path, key: str) -> bool:
    st = path.lstat()
    return (stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o644
            and json.loads(path.read_text())["key"] == key)


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o022])
def test_entries_and_shard_folders_only_their_owner_can_write(tmp_path, lookup, umask):
    first = lookup(tmp_path / "neff", umask=umask)
    assert first["hits"] == [False] * 3
    for key, path in zip(first["keys"], map(Path, first["paths"])):
        assert good_entry(path, key)
        assert [oct(stat.S_IMODE(p.stat().st_mode)) for p in (path.parent, path.parent.parent)] == [oct(0o755)] * 2
    assert lookup(tmp_path / "neff", umask=umask)["hits"] == [True] * 3


@pytest.mark.parametrize("bad", ["another user's", "writable by others", "a link to a good entry", "another key's",
                                 "damaged", "empty", "a folder"])
def test_an_entry_that_is_not_ours_is_a_miss_and_is_replaced(tmp_path, lookup, bad):
    root = tmp_path / "neff"
    first = lookup(root)
    key, path = first["keys"][0], Path(first["paths"][0])
    other = Path(first["paths"][1])
    if bad == "another user's":
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(path, 65534, 65534)
    elif bad == "writable by others":
        path.chmod(0o666)
    elif bad == "a link to a good entry":
        kept = tmp_path / "kept.neff"
        shutil.copyfile(path, kept)
        kept.chmod(0o644)
        path.unlink()
        path.symlink_to(kept)
    elif bad == "another key's":
        shutil.copyfile(other, path)
    elif bad == "damaged":
        path.write_bytes(path.read_bytes()[:-9] + b"\xff")
    elif bad == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()
        path.mkdir()
    second = lookup(root)
    assert second["hits"] == [False, True, True]  # only the bad entry is a miss
    assert "ignoring and replacing the NEFF cache entry" in second["logged"]
    if bad == "a folder":  # a folder cannot be renamed over: the entry stays a miss, and the run goes on
        assert path.is_dir() and lookup(root)["hits"] == [False, True, True]
        return
    assert good_entry(path, key)
    assert lookup(root)["hits"] == [True] * 3


def test_no_entry_is_written_through_a_shard_folder_that_is_a_link(tmp_path, lookup):
    root = tmp_path / "neff"
    first = lookup(root)
    shard = Path(first["paths"][0]).parent.parent  # root/ab
    elsewhere = tmp_path / "elsewhere"
    shutil.move(shard, elsewhere)
    shard.symlink_to(elsewhere)
    before = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    for path in elsewhere.rglob("*.neff"):
        path.unlink()  # what is there is missing now: a lookup would store it
    second = lookup(root)
    assert second["hits"][0] is False
    assert not list(elsewhere.rglob("*.neff")) and sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) \
        == [p for p in before if p.suffix != ".neff"]
