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
        (project / name).parent.mkdir(parents=True, exist_ok=True)
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
    assert 'train.py:3:10: NP101 [*]' in out
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


# -- extensionless scripts (issue 22, item 7) -------------------------------------------------------------
SUFFIXLESS = {
    "bin/train": "#!/usr/bin/env python3\nimport torch\nmodel = torch.nn.Linear(2, 2).cuda()\n",
    "bin/launch": "#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 torchrun --nproc-per-node 2 train.py\n",
}


def test_suffix_less_scripts_neuron_port_reads_are_handed_over(tmp_path, hook_repo, pre_commit_home):
    """identify tags an executable `bin/train` by its shebang; neuron-port reads it by the same shebang
    when named, so the hooks take it (python and bash here); a suffix-less file without a shebang
    (LICENSE) and a csh script (which neuron-port would read as Python) are not handed over."""
    files = {**SUFFIXLESS, "LICENSE": "device cuda\n", "bin/old": "#!/bin/csh\nsetenv CUDA_VISIBLE_DEVICES 0\n",
             "pyproject.toml": '[tool.neuron-port]\nfail-on = "warning"\n'}
    project = _project(tmp_path, files, hook_repo)
    for name in (*SUFFIXLESS, "bin/old"):
        (project / name).chmod(0o755)  # identify reads the shebang of executable files only
    _git(project, "add", "-A")
    direct = subprocess.run([sys.executable, "-m", "neuron_port", "rewrite", "--check", *SUFFIXLESS], cwd=project,
                            env=_git_env(), capture_output=True, text=True)
    assert direct.returncode == 1 and "bin/train:3:" in direct.stdout and "bin/launch:2:" in direct.stdout, \
        direct.stdout + direct.stderr
    check = _pre_commit(project, pre_commit_home, "run", "neuron-port", "--all-files", "--verbose")
    out = check.stdout + check.stderr
    assert check.returncode == 1, out
    assert "bin/train:3:" in out and "NP103" in out, out  # the Python script, by its shebang
    assert "bin/launch:2:" in out, out  # the bash script, with the launch-file rules
    assert "2 file(s) scanned" in out, out  # not LICENSE, not the csh script
    assert "bin/old" not in out and "LICENSE" not in out, out


def test_excluded_shells_are_those_neuron_port_does_not_read():
    """`exclude_types` lists exactly the shells identify knows whose shebang neuron-port does not read as
    shell: the rest of identify's shells reach the hook, and neuron-port reads each as shell."""
    import yaml
    from identify.interpreters import INTERPRETERS

    from neuron_port.rewrite.sources import shebang_kind

    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    shells = {name for name, tags in INTERPRETERS.items() if "shell" in tags}
    unread = {name for name in shells if shebang_kind(f"#!/bin/{name}\n") != "shell"}
    for hook in hooks:
        assert "shell" in hook["types_or"] and set(hook["exclude_types"]) == unread, hook


# -- file names that read as options (issue 22, item 2) -------------------------------------------------
ATTACKS = {
    "exclude": {"--exclude=*.py": CUDA_FILE},
    "config": {"--config=evil.toml": "[tool.neuron-port]\nexclude = [\"*\"]\n",
               "evil.toml": "[tool.neuron-port]\nexclude = [\"*\"]\n"},
    "fail-on": {"--fail-on=never.py": CLEAN_FILE},
    "output-format": {"--output-format=json.py": CLEAN_FILE},
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("hook", ["neuron-port", "neuron-port-fix"])
def test_a_file_named_like_an_option_cannot_switch_the_hook_off(attack, hook, tmp_path, hook_repo,
                                                               pre_commit_home):
    """pre-commit appends the file names after the entry; the entry's `--` makes each a path: the hook
    still scans every file (the attack file too) and fails on the CUDA code of train.py."""
    files = {"train.py": CUDA_FILE, **ATTACKS[attack]}
    project = _project(tmp_path, files, hook_repo)
    result = _pre_commit(project, pre_commit_home, "run", hook, "--all-files", "--verbose")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "Failed" in out and "0 file(s) scanned" not in out, out
    assert "error:" not in out and "Usage:" not in out, out  # no option was parsed from a file name
    if hook == "neuron-port":
        assert "train.py:4:" in out and "NP103" in out, out
        assert (project / "train.py").read_text() == CUDA_FILE
    else:
        assert "files were modified by this hook" in out, out
        assert (project / "train.py").read_text() == FIXED_FILE
    scanned = [name for name in files if name.endswith(".py")]  # configs with no CUDA setting are not counted
    assert f"{len(scanned)} file(s) scanned" in out, out


def test_the_cli_refuses_an_option_that_names_a_file(tmp_path):
    """The second line, for an entry written without `--`: a word before `--` that reads as an option
    and names a file here is refused (exit 2) with the fix; after `--` it is a path."""
    (tmp_path / "--exclude=*.py").write_text(CUDA_FILE)
    (tmp_path / "train.py").write_text(CUDA_FILE)
    run = [sys.executable, "-m", "neuron_port", "rewrite", "--check", "--diff"]
    refused = subprocess.run([*run, "--exclude=*.py", "train.py"], cwd=tmp_path, env=_git_env(),
                             capture_output=True, text=True)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "'--exclude=*.py' reads as an option but is also a file here" in refused.stderr
    assert "after `--`" in refused.stderr
    scanned = subprocess.run([*run, "--", "--exclude=*.py", "train.py"], cwd=tmp_path, env=_git_env(),
                             capture_output=True, text=True)
    assert scanned.returncode == 1 and "--exclude=*.py:4:" in scanned.stderr, scanned.stderr
    option = subprocess.run([*run, "--exclude=*.txt", "train.py"], cwd=tmp_path, env=_git_env(),
                            capture_output=True, text=True)  # an option that names no file: as always
    assert option.returncode == 1 and "train.py:4:" in option.stderr, option.stderr
    missing = subprocess.run([*run, "--", "--fail-on=warning", "train.py"], cwd=tmp_path, env=_git_env(),
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "--fail-on=warning: no such file or directory (after `--`" in missing.stderr


# -- the README's configurations (issue 22, item 7) -----------------------------------------------------
def _readme_blocks() -> list[dict]:
    """The YAML blocks of README.md's pre-commit section, parsed."""
    import re

    import yaml

    text = (REPO / "README.md").read_text()
    section = text[text.index("## pre-commit\n"):]
    section = section[:section.index("\n## ", 1)]
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", section, re.S)]


def test_readme_pins_a_revision_that_can_exist():
    """pre-commit needs a tag or a full commit sha as `rev:`: a tag the repository does not have fails
    every user's first run."""
    import re

    from neuron_port import __version__

    remote = [repo for block in _readme_blocks() for repo in block["repos"] if repo["repo"] != "local"]
    assert remote, "README shows no hook repository"
    tags = set(_git(REPO, "tag", "--list").split())
    released = set(re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (REPO / "CHANGELOG.md").read_text(), re.M))
    for repo in remote:
        rev = str(repo["rev"])
        assert rev == f"v{__version__}", f"README's rev: {rev} is not the release tag of version {__version__}"
        assert __version__ in released, f"CHANGELOG.md has no [{__version__}] section: version {__version__} is not released"
        # a clone that carries tags must carry this one; a clone without any (CI's shallow checkout, an
        # archive) cannot show it, and the version's CHANGELOG section above stands for the release
        if tags:
            assert rev in tags, f"README's rev: {rev} is not a tag of this repository (tags: {sorted(tags)})"


def test_readme_local_hook_runs_as_written(tmp_path, hook_repo):
    """The README's `repo: local` block, as written, with the neuron-port of this environment: it is the
    shipped hook (same entry and file selection) and fails on CUDA code."""
    import yaml

    local = [repo for block in _readme_blocks() for repo in block["repos"] if repo["repo"] == "local"]
    assert len(local) == 1, local
    hook = local[0]["hooks"][0]
    shipped = next(h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text()) if h["id"] == hook["id"])
    for key in ("entry", "types_or", "exclude_types", "files", "require_serial"):
        assert hook[key] == shipped[key], key
    project = _project(tmp_path, {"train.py": CUDA_FILE, "--exclude=*.py": CLEAN_FILE}, hook_repo)
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": local}))
    env = _git_env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(PRE_COMMIT_HOME=str(tmp_path / "home"), PRE_COMMIT_COLOR="never")
    result = subprocess.run([str(PRE_COMMIT), "run", "--all-files"], cwd=project, env=env, capture_output=True,
                            text=True, timeout=900)
    out = result.stdout + result.stderr
    assert result.returncode == 1 and "train.py:4:" in out and "2 file(s) scanned" in out, out


def test_try_repo_reports_findings(tmp_path, hook_repo):
    """The acceptance form: `pre-commit try-repo REPO neuron-port` (builds its own environment)."""
    project = _project(tmp_path, {"train.py": CUDA_FILE}, hook_repo)
    repo, _rev = hook_repo
    result = _pre_commit(project, tmp_path / "home", "try-repo", str(repo), "neuron-port", "--all-files")
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "NP101" in out and '+device = "neuron"' in out


# -- a file named `-` (issue 33, item 3) ----------------------------------------------------------------
def test_a_committed_file_named_dash_is_checked(tmp_path, hook_repo, pre_commit_home):
    """identify tags an executable `-` with a python shebang as Python, and pre-commit hands it over after
    the entry's `--`: the hook reads the file (not stdin, which is empty there) and fails on its CUDA code,
    with --all-files and with the file staged alone."""
    project = _project(tmp_path, {"-": "#!/usr/bin/env python3\n" + CUDA_FILE, "model.py": CLEAN_FILE}, hook_repo)
    (project / "-").chmod(0o755)
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "executable")
    every = _pre_commit(project, pre_commit_home, "run", "neuron-port", "--all-files", "--verbose")
    out = every.stdout + every.stderr
    assert every.returncode == 1, out
    assert "-:5:" in out and "NP103" in out and "2 file(s) scanned" in out, out
    alone = _pre_commit(project, pre_commit_home, "run", "neuron-port", "--files", "-", "--verbose")
    out = alone.stdout + alone.stderr
    assert alone.returncode == 1 and "-:5:" in out and "1 file(s) scanned" in out, out
    assert (project / "-").read_text() == "#!/usr/bin/env python3\n" + CUDA_FILE
