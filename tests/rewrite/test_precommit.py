"""The pre-commit hooks of .pre-commit-hooks.yaml, run by the real `pre-commit` tool.

pre-commit installs this repository into a virtualenv of its own (from PyPI, so the first run takes
a while). The hook repository is a temporary git copy of the working tree (tracked and untracked,
not ignored files), committed once per session, so the tests see uncommitted changes and work the
same in a fresh CI clone. `pre-commit run` with a `.pre-commit-config.yaml` pointing at that copy
(what users write) shares one PRE_COMMIT_HOME over the session: one hook environment is built.
`pre-commit try-repo` always builds in a fresh store of its own, so one test uses it, once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.slow

PRE_COMMIT = Path(sys.executable).with_name("pre-commit")

CUDA_FILE = '''import torch

device = "cuda"
model = torch.nn.Linear(4, 4).cuda()
print(torch.cuda.memory_allocated())
x = torch.zeros(2, 4, device=device)
'''

FIXED_FILE = '''import torch

device = "neuron"
model = torch.nn.Linear(4, 4).to("neuron")
print(torch.neuron.memory_allocated())
x = torch.zeros(2, 4, device=device)
'''

CLEAN_FILE = '''import torch

model = torch.nn.Linear(4, 4)
print(model(torch.zeros(2, 4)).sum())
'''


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.invalid", GIT_CONFIG_GLOBAL=os.devnull,
               GIT_CONFIG_NOSYSTEM="1")
    env.pop("NEURON_PORT_SIMULATE", None)
    return env


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=cwd, env=_git_env(), check=True,
                          capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="session")
def hook_repo(tmp_path_factory) -> tuple[Path, str]:
    """A git repository with this working tree committed: (path, commit)."""
    if not PRE_COMMIT.exists():
        pytest.skip("pre-commit is not installed (the `dev` extra)")
    root = tmp_path_factory.mktemp("hook-repo")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        source = REPO / rel
        if not source.is_file():  # deleted in the working tree
            continue
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "hook repository under test")
    return root, _git(root, "rev-parse", "HEAD")


@pytest.fixture(scope="session")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def _project(tmp_path: Path, files: dict[str, str], hook_repo: tuple[Path, str]) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    for name, text in files.items():
        (project / name).write_text(text)
    repo, rev = hook_repo
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {repo}\n  rev: {rev}\n  hooks:\n  - id: neuron-port\n  - id: neuron-port-fix\n")
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "project")
    return project


def _pre_commit(project: Path, home: Path, *args: str) -> subprocess.CompletedProcess:
    env = _git_env()
    env["PRE_COMMIT_HOME"] = str(home)
    env["PRE_COMMIT_COLOR"] = "never"
    env["NO_COLOR"] = "1"
    return subprocess.run([str(PRE_COMMIT), *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=900)


def test_check_hook_fails_fix_hook_fixes_then_both_pass(tmp_path, hook_repo, pre_commit_home):
    project = _project(tmp_path, {"train.py": CUDA_FILE}, hook_repo)

    check = _pre_commit(project, pre_commit_home, "run", "neuron-port", "--all-files")
    out = check.stdout + check.stderr
    assert check.returncode == 1, out
    assert "neuron-port (CUDA code for Trainium)" in out and "Failed" in out
    # the patch ...
    assert '-device = "cuda"' in out and '+device = "neuron"' in out
    assert '+model = torch.nn.Linear(4, 4).to("neuron")' in out
    # ... and the findings
    assert 'train.py:3:10 NP101 [*]' in out
    assert "train.py:4:" in out and "NP103" in out and "NP201" in out
    assert (project / "train.py").read_text() == CUDA_FILE  # the check hook writes nothing

    fix = _pre_commit(project, pre_commit_home, "run", "neuron-port-fix", "--all-files")
    out = fix.stdout + fix.stderr
    assert fix.returncode == 1, out  # a fixer that changed files fails, like other fixers
    assert "files were modified by this hook" in out
    assert (project / "train.py").read_text() == FIXED_FILE

    again = _pre_commit(project, pre_commit_home, "run", "--all-files")  # both hooks
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count("Passed") == 2, again.stdout


def test_clean_file_passes(tmp_path, hook_repo, pre_commit_home):
    project = _project(tmp_path, {"model.py": CLEAN_FILE, "notes.txt": "cuda\n"}, hook_repo)
    result = _pre_commit(project, pre_commit_home, "run", "--all-files")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("Passed") == 2, result.stdout


def test_hook_environment_has_no_torch(tmp_path, hook_repo, pre_commit_home):
    project = _project(tmp_path, {"model.py": CLEAN_FILE}, hook_repo)
    assert _pre_commit(project, pre_commit_home, "install-hooks").returncode == 0
    envs = [p for p in pre_commit_home.glob("repo*/py_env-*") if (p / "bin" / "python").exists()]
    assert len(envs) == 1, envs  # one environment for both hooks, built once per session
    python = envs[0] / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import importlib.util as u, neuron_port, libcst; "
                            "print(u.find_spec('torch') is None, u.find_spec('numpy') is None)"],
                           capture_output=True, text=True)
    assert probe.stdout.split() == ["True", "True"], probe.stdout + probe.stderr
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True)
    packages = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "neuron-port" in packages and "libcst" in packages and "pathspec" in packages, packages
    # only what the static path imports: no simulator toolchain, no CUDA stack
    assert not packages & {"torch", "ninja", "numpy", "triton"}, packages
    assert not any(p.startswith("nvidia-") for p in packages), packages


NOTEBOOK = json.dumps({"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                                  "source": ['import torch\n', 'x = torch.zeros(2).to("cuda")\n']}],
                       "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"

# One file of each kind neuron-port reads (neuron_port/rewrite/sources.py), each with something CUDA-only.
KINDS = {
    "notebook": ("analysis.ipynb", NOTEBOOK),
    "shell": ("launch.sh", "#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 torchrun --nproc-per-node 2 train.py\n"),
    "makefile": ("Makefile", "train:\n\tCUDA_VISIBLE_DEVICES=0 python train.py\n"),
    "yaml": ("config.yaml", "trainer:\n  device: cuda\n  backend: nccl\n"),
    "toml": ("config.toml", "[trainer]\ndevice = \"cuda\"\n"),
    "json": ("config.json", '{"device": "cuda", "backend": "nccl"}\n'),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_hooks_run_on_every_kind_of_file(kind, tmp_path, hook_repo, pre_commit_home):
    """The check hook sees the file (pre-commit hands it over: the file is named in the output) and
    fails on it, like `neuron-port rewrite --check` on the same file."""
    name, text = KINDS[kind]
    # launch-file findings are warnings: the project's configuration makes them fail, as a user would
    project = _project(tmp_path, {name: text, "pyproject.toml": '[tool.neuron-port]\nfail-on = "warning"\n'},
                       hook_repo)
    direct = subprocess.run([sys.executable, "-m", "neuron_port", "rewrite", "--check", name], cwd=project,
                            env=_git_env(), capture_output=True, text=True)
    assert direct.returncode == 1, direct.stdout + direct.stderr  # the tool itself finds something
    check = _pre_commit(project, pre_commit_home, "run", "neuron-port", "--all-files")
    out = check.stdout + check.stderr
    assert check.returncode == 1, out
    assert "Failed" in out and name in out, out
    assert (project / name).read_text() == text  # the check hook writes nothing


def test_extensionless_shell_script_is_not_handed_over(tmp_path, hook_repo, pre_commit_home):
    """identify tags `#!/bin/sh` scripts without a suffix as shell; neuron-port would read them as
    Python, so `files` keeps them out (walking a folder, neuron-port skips them too)."""
    project = _project(tmp_path, {"run": "#!/bin/sh\nCUDA_VISIBLE_DEVICES=0 python train.py\n",
                                  "model.py": CLEAN_FILE}, hook_repo)
    (project / "run").chmod(0o755)  # identify reads the shebang of executable files only
    _git(project, "add", "run")
    result = _pre_commit(project, pre_commit_home, "run", "neuron-port", "--all-files")
    assert result.returncode == 0, result.stdout + result.stderr


def test_try_repo_reports_findings(tmp_path, hook_repo):
    """The acceptance form: `pre-commit try-repo REPO neuron-port` (builds its own environment)."""
    project = _project(tmp_path, {"train.py": CUDA_FILE}, hook_repo)
    repo, _rev = hook_repo
    result = _pre_commit(project, tmp_path / "home", "try-repo", str(repo), "neuron-port", "--all-files")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "NP101" in out and '+device = "neuron"' in out
