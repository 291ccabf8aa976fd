"""The static path under every CPython 3.10-3.13 on the machine (pyenv's, and the current one): each gets a
venv with neuron-port installed from a wheel (non-editable, no torch), runs `python -m neuron_port rewrite`
on the fixture projects and must give the expected trees, the same `--check --diff` output as the current
interpreter, and no warning (deprecations shown, a terminal on stderr so the progress bar runs while the
worker pool forks).

The venvs are cached under ~/.cache/neuron-port/test-venvs/<hash of pyproject.toml>/ (dependencies change
only with pyproject.toml); the wheel of the checkout is reinstalled into them on every run. The test ids
name each interpreter.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, run_cli

pytestmark = pytest.mark.slow

SUPPORTED = ((3, 10), (3, 11), (3, 12), (3, 13))
PROJECTS = ["gpt_trainer", "vision_classifier", "distributed_sharding", "hf_finetune"]
WARNING_RE = re.compile(r"\w*Warning\b|fork\(\)")


def _version(python: str) -> tuple[int, int, int] | None:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:3])"], capture_output=True,
                             text=True, timeout=60).stdout.split()
        return tuple(int(x) for x in out)  # type: ignore[return-value]
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def _interpreters() -> dict[str, str]:
    """One CPython per supported minor version other than the current one: {"3.12.1": path}."""
    roots = [os.path.expanduser("~/.pyenv")]
    if shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip()
        if root:
            roots.insert(0, root)
    found: dict[tuple[int, int], tuple[tuple[int, int, int], str]] = {}
    for root in dict.fromkeys(roots):
        for python in sorted(glob.glob(os.path.join(root, "versions", "*", "bin", "python"))):
            version = _version(python)
            if version is None or version[:2] not in SUPPORTED or version[:2] == sys.version_info[:2]:
                continue
            if version[:2] not in found or version > found[version[:2]][0]:
                found[version[:2]] = (version, python)
    return {".".join(map(str, v)): p for v, p in sorted(found.values())}


INTERPRETERS = _interpreters()


def test_at_least_two_other_interpreters_were_found():
    assert len(INTERPRETERS) >= 2, (f"found {sorted(INTERPRETERS) or 'none'} besides the current "
                                    f"{sys.version.split()[0]}; install more with pyenv (3.10-3.13)")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out), str(REPO)],
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    (found,) = out.glob("neuron_port-*.whl")
    return found


def _venv(python: str, version: str, wheel: Path) -> Path:
    key = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")))
    env_dir = cache / "neuron-port" / "test-venvs" / key / version
    ready = env_dir / ".dependencies-installed"
    target = env_dir / "bin" / "python"
    if not ready.exists():
        shutil.rmtree(env_dir, ignore_errors=True)
        subprocess.run([python, "-m", "venv", str(env_dir)], check=True, timeout=300)
        installed = subprocess.run([str(target), "-m", "pip", "install", "--quiet", str(wheel)],
                                   capture_output=True, text=True, timeout=900)
        assert installed.returncode == 0, installed.stderr[-3000:]
        ready.touch()
    else:  # the dependencies are cached; the checkout's code is not
        installed = subprocess.run([str(target), "-m", "pip", "install", "--quiet", "--no-deps",
                                    "--force-reinstall", str(wheel)], capture_output=True, text=True, timeout=900)
        assert installed.returncode == 0, installed.stderr[-3000:]
    return target


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and ".neuron-port-cache" not in p.parts}


def _run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NEURON_PORT_SIMULATE")}
    env["PYTHONWARNINGS"] = "default"  # deprecations too, wherever they are raised
    return subprocess.run([str(python), "-m", "neuron_port", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def _run_on_terminal(python: Path, *args: str, cwd: Path) -> str:
    """stderr on a pseudo-terminal (the progress bar shows), returns what the terminal got."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NEURON_PORT_SIMULATE")}
    env.update(PYTHONWARNINGS="default", TERM="xterm", COLUMNS="120")
    leader, follower = pty.openpty()
    with subprocess.Popen([str(python), "-m", "neuron_port", *args], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=follower) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        proc.wait(timeout=600)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")


@pytest.fixture(scope="module")
def current_checks(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """`rewrite --check --diff` of each project under the current interpreter: what every version must
    print, run once for all of them."""
    out = {}
    for name in PROJECTS:
        here = tmp_path_factory.mktemp(f"{name}-current")
        shutil.copytree(FIXTURES / name, here, dirs_exist_ok=True)
        out[name] = run_cli("rewrite", "--check", "--diff", ".", cwd=here)
    return out


@pytest.mark.parametrize("version", sorted(INTERPRETERS))
def test_static_path_under(version, wheel, current_checks, tmp_path):
    python = _venv(INTERPRETERS[version], version, wheel)
    assert subprocess.run([str(python), "-c", "import importlib.util as u, sys; "
                           "sys.exit(u.find_spec('torch') is not None or u.find_spec('ninja') is not None)"]
                          ).returncode == 0, "the static install must not bring torch or ninja"
    for name in PROJECTS:
        there = tmp_path / f"{name}-{version}"
        shutil.copytree(FIXTURES / name, there)
        expected = current_checks[name]
        checked = _run(python, "rewrite", "--check", "--diff", ".", cwd=there)
        assert (checked.returncode, checked.stdout) == (expected.returncode, expected.stdout), (version, name)
        assert not WARNING_RE.search(checked.stderr), (version, name, checked.stderr)
        rewritten = _run(python, "rewrite", ".", cwd=there)
        assert not WARNING_RE.search(rewritten.stderr), (version, name, rewritten.stderr)
        assert _tree(there) == _tree(FIXTURES / "expected" / name), (version, name)
        assert _run(python, "rewrite", "--diff", ".", cwd=there).stdout == ""  # a second run changes nothing

    # every fixture at once (more files than the pool threshold: workers fork) with the progress bar on
    everything = tmp_path / "all"
    shutil.copytree(FIXTURES, everything, ignore=shutil.ignore_patterns("expected"))
    terminal = _run_on_terminal(python, "rewrite", "--check", ".", "--jobs", "2", cwd=everything)
    assert not WARNING_RE.search(terminal), (version, terminal[-3000:])
    assert _run(python, "rules", cwd=tmp_path).returncode == 0
