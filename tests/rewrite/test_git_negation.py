"""Negated folder patterns (`!dir/`) as git applies them: they re-include the folder, never by themselves a
file below it that another line ignores, and nothing comes back from below an ignored folder. Each case
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

FILES = ("a.py", "src/b.py", "src/deep/c.py", "sub/d.py", "sub/deep/e.py", "gen/f.py", "out/keep/g.py",
         "out/h.py")

CASES = {
    "nested negated folder under an outer *.py": {".gitignore": "*.py\n", "sub/.gitignore": "!deep/\n"},
    "folder ignored then re-included": {".gitignore": "gen/\n!gen/\n"},
    "negated folder and negated files": {".gitignore": "*.py\n!src/\n!src/*.py\n"},
    "nothing comes back from an ignored folder": {".gitignore": "out/\n!out/keep/\n!out/keep/g.py\n"},
    "everything but folders and .py": {".gitignore": "*\n!*/\n!*.py\n"},
    "anchored: only src": {".gitignore": "/*\n!/src/\n"},
    "a deeper ignore file decides": {".gitignore": "!sub/deep/\n", "sub/.gitignore": "deep/\n"},
    "negated folder with a trailing space": {".gitignore": "*.py\n", "sub/.gitignore": "!deep/  \n"},
}


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_CONFIG_HOME"))}
    env.update(HOME=str(home), GIT_CONFIG_NOSYSTEM="1")
    return env


def _repository(root: Path, ignore_files: dict[str, str], env: dict[str, str]) -> None:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, env=env, check=True)
    for name in FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text('device = "cuda"\n')
    for name, text in ignore_files.items():
        (root / name).write_text(text)


def _git_lists(root: Path, env: dict[str, str], *paths: str) -> set[str]:
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", *paths], cwd=root, env=env,
                            check=True, capture_output=True, text=True).stdout
    return {line for line in listed.splitlines() if line.endswith(".py")}


def _scanned(cli, root: Path, env: dict[str, str], path: str = ".") -> set[str]:
    result = cli("rewrite", "--check", "--no-cache", "--output-format", "json", path, cwd=root, env=env)
    assert result.returncode in (0, 1), result.stderr
    return {f["path"] for f in json.loads(result.stdout)["files"]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_negated_folders_match_git(tmp_path, cli, case):
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home)
    root = tmp_path / "repo"
    _repository(root, CASES[case], env)
    assert _scanned(cli, root, env) == _git_lists(root, env)


def test_a_given_folder_inside_an_ignored_one(tmp_path, cli):
    home = tmp_path / "home"
    home.mkdir()
    env = _env(home)
    root = tmp_path / "repo"
    _repository(root, {".gitignore": "out/\ngen\n"}, env)
    for given in ("out/keep", "gen", "src"):
        assert _scanned(cli, root, env, given) == _git_lists(root, env, given), given
