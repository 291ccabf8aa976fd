"""Discovery honours git's other ignore files, as git does: the repository's ``info/exclude`` (also from a
linked work tree, where it lives in the main repository's git folder) and the global excludes file
(``core.excludesFile``, by default ``$XDG_CONFIG_HOME/git/ignore``), with git's precedence. Each test
compares the files `neuron-port rewrite` scans with what ``git ls-files --others --exclude-standard``
lists, in a real repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_CONFIG_HOME"))}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    env.update(extra)
    return env


def _git(cwd: Path, env: dict[str, str], *args: str) -> str:
    return subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=cwd, env=env, check=True,
                          capture_output=True, text=True).stdout


def _scanned(cli, cwd: Path, env: dict[str, str]) -> set[str]:
    result = cli("rewrite", "--check", "--output-format", "json", ".", cwd=cwd, env=env)
    assert result.returncode in (0, 1), result.stderr
    return {f["path"] for f in json.loads(result.stdout)["files"]}


def _git_lists(cwd: Path, env: dict[str, str]) -> set[str]:
    listed = _git(cwd, env, "ls-files", "--others", "--cached", "--exclude-standard")
    return {line for line in listed.splitlines() if line.endswith(".py")}


def _project(root: Path, env: dict[str, str]) -> Path:
    root.mkdir(parents=True)
    _git(root, env, "init", "-q")
    for name in ("train.py", "scratch.py", "local_notes.py", "keep.py", "sub/model.py", "sub/tmp_run.py",
                 "generated/out.py"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text('device = "cuda"\n')
    return root


@pytest.fixture
def home(tmp_path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


def test_info_exclude_is_honoured(cli, tmp_path, home):
    env = _env(home)
    project = _project(tmp_path / "project", env)
    (project / ".git" / "info").mkdir(exist_ok=True)
    (project / ".git" / "info" / "exclude").write_text("# local only\nscratch.py\ngenerated/\ntmp_*.py\n")
    scanned = _scanned(cli, project, env)
    assert scanned == {"train.py", "local_notes.py", "keep.py", "sub/model.py"}
    assert scanned == _git_lists(project, env)


def test_global_excludes_file_from_git_config(cli, tmp_path, home):
    excludes = home / "my-ignores"
    excludes.write_text("local_*.py\n")
    (home / ".gitconfig").write_text("[core]\n\texcludesFile = ~/my-ignores\n")  # `~` as git expands it
    env = _env(home)
    project = _project(tmp_path / "project", env)
    scanned = _scanned(cli, project, env)
    assert "local_notes.py" not in scanned and "train.py" in scanned
    assert scanned == _git_lists(project, env)


def test_default_global_excludes_file_under_xdg_config_home(cli, tmp_path, home):
    config = tmp_path / "xdg"
    (config / "git").mkdir(parents=True)
    (config / "git" / "ignore").write_text("sub/\n")
    env = _env(home, XDG_CONFIG_HOME=str(config))
    project = _project(tmp_path / "project", env)
    scanned = _scanned(cli, project, env)
    assert not any(path.startswith("sub/") for path in scanned)
    assert scanned == _git_lists(project, env)


def test_gitignore_negation_overrides_info_exclude_as_in_git(cli, tmp_path, home):
    """A .gitignore has precedence over info/exclude: its `!keep.py` brings back what `*.py` there
    excluded; and a deeper .gitignore over a shallower one."""
    env = _env(home)
    project = _project(tmp_path / "project", env)
    (project / ".git" / "info" / "exclude").write_text("*.py\n")
    (project / ".gitignore").write_text("!keep.py\n")
    (project / "sub" / ".gitignore").write_text("!model.py\n")
    scanned = _scanned(cli, project, env)
    assert scanned == {"keep.py", "sub/model.py"}
    assert scanned == _git_lists(project, env)


def test_linked_worktree_reads_the_main_repository_exclude(cli, tmp_path, home):
    env = _env(home)
    project = _project(tmp_path / "project", env)
    _git(project, env, "add", "-A")
    _git(project, env, "commit", "-q", "-m", "init")
    (project / ".git" / "info" / "exclude").write_text("scratch.py\n")
    worktree = tmp_path / "linked"
    _git(project, env, "worktree", "add", "-q", str(worktree))
    assert (worktree / ".git").is_file()
    (worktree / "scratch.py").write_text('device = "cuda"\n')  # tracked files come along; this one is excluded
    _git(worktree, env, "rm", "-q", "--cached", "scratch.py")
    scanned = _scanned(cli, worktree, env)
    assert "scratch.py" not in scanned and "train.py" in scanned
    assert scanned == _git_lists(worktree, env)


def test_outside_a_repository_no_git_excludes_apply(cli, tmp_path, home):
    config = tmp_path / "xdg"
    (config / "git").mkdir(parents=True)
    (config / "git" / "ignore").write_text("*.py\n")
    env = _env(home, XDG_CONFIG_HOME=str(config))
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "train.py").write_text('device = "cuda"\n')
    assert _scanned(cli, folder, env) == {"train.py"}
