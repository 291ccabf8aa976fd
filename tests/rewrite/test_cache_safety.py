"""Issue 12, items 12-15: a result cache that cannot inject code and writes nothing outside the project.

Every test drives the real CLI in a child process on a temporary tree, as a user (or an attacker who
commits files to the user's repository) would. Each gets its own per-user key folder (XDG_CACHE_HOME).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from neuron_port.api import rewrite_source
from neuron_port.rewrite.cache import CACHE_DIR_NAME, ENTRY_FORMAT

CUDA = "import torch\nx = torch.zeros(3).cuda()\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n"
PLAIN = "import os\n\n\ndef f(a):\n    return os.path.join(a, 'b')\n"
INJECTED = "import os; os.system('touch /tmp/neuron-port-pwned')\n"


@pytest.fixture(autouse=True)
def private_cache_key(tmp_path_factory, monkeypatch):
    """The victim's per-user key folder (the CLI children inherit it)."""
    home = tmp_path_factory.mktemp("victim-xdg")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    return home


def make_project(root: Path, marker: str = "pyproject.toml") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if marker == "pyproject.toml":
        (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    else:
        (root / ".git").mkdir()
    (root / "train.py").write_text(CUDA)
    (root / "util.py").write_text(PLAIN)
    return root


def entries(project: Path) -> list[Path]:
    return sorted((project / CACHE_DIR_NAME / ENTRY_FORMAT).rglob("*.json"))


def engine_output(text: str, name: str = "train.py") -> str:
    return rewrite_source(text, name)[0]


def tree(root: Path) -> dict[str, bytes]:
    """Every path under ``root`` (links as their target text), to compare before and after."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            found[rel] = b"-> " + os.readlink(path).encode()
        elif path.is_file():
            found[rel] = path.read_bytes()
        else:
            found[rel] = b"<dir>"
    return found


def git(*args: str, cwd: Path) -> None:
    env = dict(os.environ, GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@x", GIT_COMMITTER_NAME="a",
               GIT_COMMITTER_EMAIL="a@x")
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def forge(entry: Path, key: bytes | None) -> None:
    """What an attacker does to an entry: the rewrite becomes code that starts the file, and every check
    they can see is recomputed: the HMAC with their own key when they have one, else a plain SHA-256."""
    mac, _, payload = entry.read_bytes().partition(b"\n")
    data = json.loads(payload)
    data["edit"] = [0, 0, base64.b64encode(INJECTED.encode()).decode()]
    data["fixes_applied"] = 1
    data["skipped"] = False
    payload = json.dumps(data, separators=(",", ":")).encode()
    if key is None:
        mac = hashlib.sha256(payload).hexdigest().encode()
    else:
        import hmac
        mac = hmac.new(key, entry.stem.encode() + b"\0" + payload, hashlib.sha256).hexdigest().encode()
    entry.write_bytes(mac + b"\n" + payload)


@pytest.mark.parametrize("attacker", ["commits entries made and signed with their own key",
                                      "edits the victim's own entries without the key"])
def test_item12_an_edited_committed_entry_cannot_inject_code(tmp_path, cli, attacker, tmp_path_factory):
    upstream = make_project(tmp_path / "upstream")
    if attacker.startswith("commits"):
        attacker_home = tmp_path_factory.mktemp("attacker-xdg")
        env = {"XDG_CACHE_HOME": str(attacker_home)}
        assert cli("rewrite", "--check", "--cache", ".", cwd=upstream, env=env).returncode == 1
        key = bytes.fromhex((attacker_home / "neuron-port" / "key").read_text().strip())
        for entry in entries(upstream):
            forge(entry, key)
        git("init", "-q", ".", cwd=upstream)
        git("add", "-A", cwd=upstream)
        git("add", "-f", CACHE_DIR_NAME, cwd=upstream)  # the cache ignores itself; a forced add commits it
        git("commit", "-qm", "cache", cwd=upstream)
        git("clone", "-q", str(upstream), str(tmp_path / "victim"), cwd=tmp_path)
        victim = tmp_path / "victim"
        assert entries(victim), "the forged entries were committed and cloned"
    else:
        victim = upstream
        assert cli("rewrite", "--check", "--cache", ".", cwd=victim).returncode == 1
        for entry in entries(victim):
            forge(entry, None)
    patch = cli("rewrite", "-v", "--check", "--cache", "--diff", ".", cwd=victim)
    assert "os.system" not in patch.stdout + patch.stderr
    assert "cache: 0 hit(s), 2 miss(es), 2 stored" in patch.stderr, patch.stderr  # the forged ones never hit
    assert patch.stdout == cli("rewrite", "--diff", "--no-cache", ".", cwd=victim).stdout
    cli("rewrite", ".", cwd=victim)  # the real write (hits the victim's own entries now)
    assert (victim / "train.py").read_text() == engine_output(CUDA)
    assert (victim / "util.py").read_text() == PLAIN
    assert not Path("/tmp/neuron-port-pwned").exists()
    again = cli("rewrite", "-v", ".", cwd=victim)  # a second run changes nothing
    assert (victim / "train.py").read_text() == engine_output(CUDA)
    assert "0 rewritten" in again.stderr or "rewritten" not in again.stderr


def test_item12_the_key_is_private_to_the_user(tmp_path, cli, private_cache_key):
    project = make_project(tmp_path / "p")
    cli("rewrite", "--check", "--cache", ".", cwd=project)
    key = private_cache_key / "neuron-port" / "key"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert len(bytes.fromhex(key.read_text().strip())) == 32
    assert str(private_cache_key) not in "".join(p.read_text(errors="replace") for p in entries(project))
    key.chmod(0o644)  # readable by others: anyone could sign entries, so it is not used
    result = cli("rewrite", "--check", "--cache", "-v", ".", cwd=project)
    assert result.stderr.count(f"{key}: the cache key must be a file of this user") == 1, result.stderr
    assert result.returncode == 1 and "NP103" in result.stdout


def notebook(code: str) -> str:
    return json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                  "source": code.splitlines(keepends=True)}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def test_item13_the_key_covers_the_file_kind(tmp_path, cli):
    project = make_project(tmp_path / "p")
    (project / "nb.ipynb").write_text(notebook(CUDA))
    cli("rewrite", "--check", "--cache", ".", cwd=project)
    shutil.copyfile(project / "nb.ipynb", project / "data.py")  # same bytes, another kind
    cached = cli("rewrite", "--check", "--cache", "-v", "--output-format", "json", "data.py", cwd=project)
    fresh = cli("rewrite", "--check", "--no-cache", "--output-format", "json", "data.py", cwd=project)
    assert "cache: 0 hit(s), 1 miss(es)" in cached.stderr
    assert json.loads(cached.stdout) == json.loads(fresh.stdout)
    cli("rewrite", ".", cwd=project)
    assert (project / "data.py").read_text() == engine_output(notebook(CUDA), "data.py")
    assert (project / "nb.ipynb").read_text() == engine_output(notebook(CUDA), "nb.ipynb")
    assert (project / "data.py").read_text() != (project / "nb.ipynb").read_text()


PLANTED = {
    "the cache folder is a link": lambda cache, elsewhere: cache.symlink_to(elsewhere),
    "the entries folder is a link": lambda cache, elsewhere: (cache.mkdir(),
                                                               (cache / ENTRY_FORMAT).symlink_to(elsewhere)),
    "the cache folder is a file": lambda cache, elsewhere: cache.write_text("not a folder\n"),
}


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_item14_a_committed_link_is_never_written_through(tmp_path, cli, planted):
    project = make_project(tmp_path / "p")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    PLANTED[planted](project / CACHE_DIR_NAME, Path("..") / "elsewhere"
                     if planted == "the cache folder is a link" else elsewhere)
    check = cli("rewrite", "--check", ".", cwd=project)  # no cache under --check: not even a warning
    assert check.returncode == 1 and "warning" not in check.stderr
    for args in (("--check", "--cache"), ()):
        result = cli("rewrite", *args, ".", cwd=project)
        assert result.stderr.count("running without the result cache") == 1, result.stderr
        assert str(project / CACHE_DIR_NAME) in result.stderr
        assert list(elsewhere.iterdir()) == []
    assert (project / "train.py").read_text() == engine_output(CUDA)


def test_item14_marker_files_that_are_links_are_left_alone(tmp_path, cli):
    project = make_project(tmp_path / "p")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / CACHE_DIR_NAME).mkdir()
    for name in (".gitignore", "CACHEDIR.TAG"):
        (project / CACHE_DIR_NAME / name).symlink_to(elsewhere / name)  # dangling: creating it would write there
    cli("rewrite", "--check", "--cache", ".", cwd=project)
    assert list(elsewhere.iterdir()) == []
    assert len(entries(project)) == 2
    assert (project / CACHE_DIR_NAME / ".gitignore").is_symlink()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_item14_a_cache_folder_of_another_user_is_refused(tmp_path, cli):
    project = make_project(tmp_path / "p")
    (project / CACHE_DIR_NAME).mkdir()
    os.chown(project / CACHE_DIR_NAME, 4242, 4242)
    result = cli("rewrite", ".", cwd=project)
    assert result.stderr.count("is owned by another user (uid 4242)") == 1, result.stderr
    assert list((project / CACHE_DIR_NAME).iterdir()) == []
    assert (project / "train.py").read_text() == engine_output(CUDA)


def test_item15_one_cache_per_project_root_and_none_without_one(tmp_path, cli):
    a = make_project(tmp_path / "a")
    b = make_project(tmp_path / "b", marker=".git")
    (b / "pkg").mkdir()
    (b / "pkg" / "m.py").write_text(CUDA)
    loose = tmp_path / "loose"  # no pyproject.toml or .git up to the working directory: no project root
    loose.mkdir()
    (loose / "s.py").write_text(CUDA)
    before = tree(tmp_path)
    for args in (("--check",), ("--diff",)):  # write nothing: not even a cache
        cli("rewrite", *args, "a", "b/pkg", "loose", cwd=tmp_path)
        assert tree(tmp_path) == before
    result = cli("rewrite", "-v", "a/train.py", "b/pkg", "loose/s.py", cwd=tmp_path)
    assert "cache: 0 hit(s), 2 miss(es), 2 stored" in result.stderr, result.stderr
    assert len(entries(a)) == 1 and len(entries(b)) == 1
    assert not (tmp_path / CACHE_DIR_NAME).exists() and not (loose / CACHE_DIR_NAME).exists()
    assert not (b / "pkg" / CACHE_DIR_NAME).exists()
    for path in (a / "train.py", b / "pkg" / "m.py", loose / "s.py"):
        assert path.read_text() == engine_output(CUDA)


def test_item12_runs_killed_at_random_points_leave_a_cache_that_gives_the_engine_output(tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for i in range(30):
        (project / f"m{i}.py").write_text(CUDA + f"y = {i}\n" if i % 3 else PLAIN + f"z = {i}\n")
    expected = {f"m{i}.py": engine_output((project / f"m{i}.py").read_text()) for i in range(30)}
    argv = [sys.executable, "-m", "neuron_port", "rewrite", "--check", "--cache", "-j", "2", "."]
    rng = random.Random(12)
    for _round in range(5):
        proc = subprocess.Popen(argv, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        time.sleep(rng.uniform(0.3, 2.5))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    done = subprocess.run([sys.executable, "-m", "neuron_port", "rewrite", "-v", "."], cwd=project,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert {name: (project / name).read_text() for name in expected} == expected
