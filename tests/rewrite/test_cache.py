"""The content cache (neuron_port/rewrite/cache.py): hits, misses on content and configuration changes, corrupt
entries discarded, --no-cache, concurrent runs. Its safety (forged entries, links, project roots, --check)
is in test_cache_safety.py. Rewrite runs here pass --check --cache: --check alone uses no cache."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from conftest import FIXTURES, REPO
from neuron_port.rewrite import cache as cache_mod
from neuron_port.rewrite import engine, runner
from neuron_port.rewrite.cache import CACHE_DIR_NAME, ResultCache, config_fingerprint, fingerprinted_files
from neuron_port.rewrite.discovery import discover
from neuron_port.rules.registry import all_rules, select_rules
from neuron_port.rewrite.options import RunOptions
from neuron_port.rewrite.runner import run_files

CUDA = 'import torch\nx = torch.zeros(3).cuda()\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n'
PLAIN = "import os\n\n\ndef f(a):\n    return os.path.join(a, 'b')\n"
STATS_RE = re.compile(r"cache: (\d+) hit\(s\), (\d+) miss\(es\), (\d+) stored, (\d+) discarded")


def make_tree(root: Path, n_cuda: int = 3, n_plain: int = 2) -> Path:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for i in range(n_cuda):
        (root / f"cuda_{i}.py").write_text(CUDA + f"y{i} = {i}\n")
    for i in range(n_plain):
        (root / f"plain_{i}.py").write_text(PLAIN + f"z = {i}\n")
    return root


@pytest.fixture(autouse=True)
def private_cache_key(tmp_path_factory, monkeypatch):
    """Each test's runs (and their CLI children) use a fresh per-user key, not the real ~/.cache one."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg")))


def entry_payload(path: Path) -> dict:
    """An entry's JSON (after its HMAC line)."""
    return json.loads(path.read_bytes().partition(b"\n")[2])


def stats(result: subprocess.CompletedProcess) -> tuple[int, int, int, int]:
    match = STATS_RE.search(result.stderr)
    assert match, result.stderr
    return tuple(int(g) for g in match.groups())  # type: ignore[return-value]


def entries(root: Path) -> list[Path]:
    return sorted((root / CACHE_DIR_NAME).rglob("*.json"))


def options(**kw) -> RunOptions:
    codes = tuple(r.CODE for r in select_rules(None, None, kw.get("target", "neuron")))
    return RunOptions(rule_codes=codes, **kw)


def test_second_run_hits_and_is_not_parsed_again(tmp_path, monkeypatch):
    make_tree(tmp_path)
    files, _ = discover([str(tmp_path)])
    opts = options(max_bytes=2 * 2**20)
    first_cache = ResultCache.for_run(opts)
    first = run_files(files, opts, jobs=1, cache=first_cache)
    assert first_cache.stats.misses == 5 and first_cache.stats.stored == 5  # pre-filtered files have entries too
    assert (tmp_path / CACHE_DIR_NAME / ".gitignore").read_text().splitlines()[-1] == "*"

    calls = []
    real = engine.transform_source  # the runner imports the engine when a file needs it
    monkeypatch.setattr(engine, "transform_source", lambda *a, **k: calls.append(a) or real(*a, **k))
    second_cache = ResultCache.for_run(opts)
    second = run_files(files, opts, jobs=1, cache=second_cache)
    assert calls == [], "a cached file was parsed again"
    assert second_cache.stats.hits == 5 and second_cache.stats.misses == 0
    assert [(r.path, r.findings, r.new_bytes, r.fixes_applied, r.error, r.skipped) for r in second] == \
           [(r.path, r.findings, r.new_bytes, r.fixes_applied, r.error, r.skipped) for r in first]


def test_cli_hits_then_content_change_misses(tmp_path, cli):
    make_tree(tmp_path)
    assert stats(cli("rewrite", "--check", "--cache", "-v", ".", cwd=tmp_path))[:3] == (0, 5, 5)
    assert stats(cli("rewrite", "--check", "--cache", "-v", ".", cwd=tmp_path))[:3] == (5, 0, 0)
    (tmp_path / "cuda_1.py").write_text(CUDA + "changed = True\n")
    assert stats(cli("rewrite", "--check", "--cache", "-v", ".", cwd=tmp_path))[:3] == (4, 1, 1)


@pytest.mark.parametrize("args", [("--select", "NP1"), ("--target", "accelerator"), ("--unsafe-fixes",),
                                  ("--max-file-size", "1")])
def test_config_change_misses(tmp_path, cli, args):
    make_tree(tmp_path, n_cuda=2, n_plain=0)
    cli("rewrite", "--check", "--cache", ".", cwd=tmp_path)
    assert stats(cli("rewrite", "--check", "--cache", "-v", *args, ".", cwd=tmp_path))[:2] == (0, 2)
    assert stats(cli("rewrite", "--check", "--cache", "-v", *args, ".", cwd=tmp_path))[:2] == (2, 0)


def test_key_covers_tool_registry_and_rule_source(monkeypatch):
    opts = options()
    base = config_fingerprint(opts)
    assert config_fingerprint(options(want_diff=True)) == base  # the diff is recomputed from the cached edit
    monkeypatch.setattr("neuron_port.rules.registry.REGISTRY_VERSION", 999)
    assert config_fingerprint(opts) != base
    monkeypatch.undo()
    monkeypatch.setitem(cache_mod._fingerprint_memo, "code", "edited rule source")
    assert config_fingerprint(opts) != base
    monkeypatch.undo()
    monkeypatch.setattr("neuron_port.__version__", "9.9.9")
    assert config_fingerprint(opts) != base


def test_corrupt_entry_is_discarded_and_result_still_correct(tmp_path, cli):
    make_tree(tmp_path)
    clean = cli("rewrite", "--check", "--no-cache", "--output-format", "json", ".", cwd=tmp_path)
    cli("rewrite", "--check", "--cache", ".", cwd=tmp_path)
    assert len(entries(tmp_path)) == 5
    found = [p for p in entries(tmp_path) if entry_payload(p)["findings"]]
    assert len(found) == 3
    found[0].write_bytes(b"\x00garbage{not json")
    mac, _, payload = found[1].read_bytes().partition(b"\n")  # valid JSON, wrong content: not trusted either
    data = json.loads(payload)
    data["findings"][0]["line"] = "one"
    found[1].write_bytes(mac + b"\n" + json.dumps(data).encode())
    mac, _, payload = found[2].read_bytes().partition(b"\n")
    data = json.loads(payload)
    data["edit"][2] = data["edit"][2][:-4] + "AAA="  # an edit that does not match its HMAC
    found[2].write_bytes(mac + b"\n" + json.dumps(data).encode())
    again = cli("rewrite", "--check", "--cache", "-v", "--output-format", "json", ".", cwd=tmp_path)
    assert json.loads(again.stdout) == json.loads(clean.stdout)
    hits, misses, stored, discarded = stats(cli("rewrite", "--check", "--cache", "-v", ".", cwd=tmp_path))
    assert (hits, misses, discarded) == (5, 0, 0)  # the bad entries were replaced


def test_corrupt_entry_counted_as_discarded(tmp_path, cli):
    make_tree(tmp_path, n_cuda=1, n_plain=0)
    cli("rewrite", "--check", "--cache", ".", cwd=tmp_path)
    (entry,) = entries(tmp_path)
    entry.write_bytes(entry.read_bytes()[:20])  # a truncated write
    assert stats(cli("rewrite", "--check", "--cache", "-v", ".", cwd=tmp_path)) == (0, 1, 1, 1)


def test_no_cache_writes_nothing(tmp_path, cli):
    make_tree(tmp_path)
    result = cli("rewrite", "--check", "--no-cache", "-v", ".", cwd=tmp_path)
    assert result.returncode == 1
    assert not (tmp_path / CACHE_DIR_NAME).exists()
    assert "cache:" not in result.stderr


def test_cached_result_is_applied_on_write(tmp_path, cli):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = make_tree(tmp_path / "a"), make_tree(tmp_path / "b")
    cli("rewrite", "--check", "--cache", ".", cwd=a)  # fills the cache
    cli("rewrite", "-v", ".", cwd=a)  # writes from cached results
    cli("rewrite", "--no-cache", ".", cwd=b)
    for name in ("cuda_0.py", "cuda_1.py", "plain_0.py"):
        assert (a / name).read_bytes() == (b / name).read_bytes()
    assert ".to(\"neuron\")" in (a / "cuda_0.py").read_text()
    diff_cached = cli("rewrite", "--diff", "--cache", ".", cwd=b)
    diff_fresh = cli("rewrite", "--diff", "--no-cache", ".", cwd=b)
    assert diff_cached.stdout == diff_fresh.stdout


def test_cache_folder_in_the_project_root(tmp_path, cli):
    make_tree(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(CUDA)
    cli("rewrite", "--check", "--cache", "pkg", cwd=tmp_path)
    assert (tmp_path / CACHE_DIR_NAME / ".gitignore").is_file()
    assert not (tmp_path / "pkg" / CACHE_DIR_NAME).exists()


def test_parallel_runs_leave_a_valid_cache(tmp_path):
    make_tree(tmp_path, n_cuda=24, n_plain=4)  # above the pool threshold: workers in both runs
    argv = [sys.executable, "-m", "neuron_port", "rewrite", "--check", "--cache", "--output-format", "json",
            "-j", "2", "."]
    procs = [subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    docs = [json.loads(out) for out, _ in outs]
    assert all(d == docs[0] for d in docs)
    found = entries(tmp_path)
    assert len(found) == 28
    assert not [p for p in (tmp_path / CACHE_DIR_NAME).rglob("*") if p.name.endswith(".tmp")]
    opts = options(max_bytes=2 * 2**20)
    cache = ResultCache.for_run(opts)
    files, _ = discover([str(tmp_path)])
    run_files(files, opts, jobs=1, cache=cache)
    assert (cache.stats.hits, cache.stats.misses, cache.stats.discarded) == (28, 0, 0)


def test_the_code_fingerprint_covers_every_rule_and_rewrite_module():
    """A rule edited in any family package (or the engine) must invalidate the cache."""
    covered = {path.resolve() for _label, path in fingerprinted_files()}
    wanted = set((REPO / "rules").rglob("*.py")) | set((REPO / "rules").rglob("*.toml")) | set(
        (REPO / "neuron_port" / "rewrite").rglob("*.py"))
    wanted = {path.resolve() for path in wanted if "__pycache__" not in path.parts}
    assert wanted - covered == set()
    assert all(path.exists() for path in covered)
