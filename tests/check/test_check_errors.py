"""`check` given a command it cannot run or an --output it cannot write: a message and exit code 2,
before the command runs, and nothing left behind (no report temp file, no temporary folder)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import run_cli
from neuron_port.atomic import TEMP_SUFFIX, atomic_write, check_writable

MARKER_SCRIPT = "open('ran', 'w').write('yes')\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "train.py").write_text(MARKER_SCRIPT)
    return folder


def check(tmp_path: Path, project: Path, *args: str):
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    result = run_cli("check", str(project), *args, env={"TMPDIR": str(tmpdir)})
    assert "internal error" not in result.stderr, result.stderr
    assert not list(tmpdir.iterdir()), "check left temporary files"
    return result


@pytest.mark.parametrize("make, expect", [
    (lambda p: (p / "script.sh").write_text("#!/bin/sh\necho hi\n"), "is not executable"),  # mode 644
    (lambda p: None, "command not found: ./script.sh (no such file"),
    (lambda p: (p / "script.sh").mkdir(), "is a folder, not a program"),
])
def test_a_program_that_cannot_run_is_a_usage_error(tmp_path, project, make, expect):
    make(project)
    result = check(tmp_path, project, "--", "./script.sh")
    assert result.returncode == 2, result.stderr
    assert expect in result.stderr and "script.sh" in result.stderr


def test_an_executable_without_a_shebang_is_a_usage_error(tmp_path, project):
    script = project / "script.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    result = check(tmp_path, project, "--", "./script.sh")
    assert result.returncode == 2, result.stderr
    assert "#! line" in result.stderr


def test_a_bare_name_found_only_in_the_project_says_to_write_dot_slash(tmp_path, project):
    script = project / "np-test-script.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    result = check(tmp_path, project, "--", "np-test-script.sh")
    assert result.returncode == 2
    assert "./np-test-script.sh" in result.stderr


@pytest.mark.parametrize("where", ["/proc/r.json", "folder", "missing/r.json"])
def test_an_unwritable_output_fails_before_the_command_runs(tmp_path, project, where):
    (tmp_path / "folder").mkdir()
    output = Path(where) if where.startswith("/") else tmp_path / where
    result = check(tmp_path, project, "-o", str(output), "--", "python", "train.py")
    assert result.returncode == 2, result.stderr
    assert f"--output {output}" in result.stderr
    assert not (project / "ran").exists(), "the command ran although the report could not be written"
    if output.parent.is_dir() and not where.startswith("/"):
        assert sorted(p.name for p in output.parent.iterdir()) == sorted(
            ["folder", "project", "tmpdir"] if output.parent == tmp_path else []), "a temp file was left"
    assert not (tmp_path / "missing").exists()


def test_check_writable_accepts_a_new_or_existing_file_and_leaves_nothing(tmp_path):
    check_writable(tmp_path / "new.json")
    (tmp_path / "old.json").write_text("{}")
    check_writable(tmp_path / "old.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]


def test_a_read_only_output_folder_fails_before_the_command_runs(project):
    """A folder the user may not write into. Root may write anywhere, so as root (CI) the real CLI runs as
    `nobody`, in a world-readable folder of its own."""
    base = Path(tempfile.mkdtemp(prefix="np-read-only-"))
    try:
        base.chmod(0o755)
        (base / "train.py").write_text(MARKER_SCRIPT)
        folder = base / "ro"
        folder.mkdir(mode=0o555)
        folder.chmod(0o555)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
        result = subprocess.run(
            [*as_nobody, sys.executable, "-m", "neuron_port", "check", str(base), "-o", str(folder / "r.json"),
             "--", "python", "train.py"], cwd=base, capture_output=True, text=True, timeout=120)
        assert result.returncode == 2, result.stderr
        assert "cannot write the report there" in result.stderr and "Permission denied" in result.stderr
        assert not (base / "ran").exists() and list(folder.iterdir()) == []
    finally:
        (base / "ro").chmod(0o755)
        shutil.rmtree(base)


@pytest.mark.parametrize("make_target", [
    lambda t: (t / "a-folder").mkdir() or t / "a-folder",           # the rename fails
    lambda t: (t / "full").mkdir() or (t / "full" / "x").write_text("") or t / "full",  # a non-empty folder
])
def test_atomic_write_leaves_no_temp_file_when_it_fails(tmp_path, make_target):
    target = make_target(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(OSError):
        atomic_write(target, b"data")
    after = sorted(p.name for p in tmp_path.rglob("*"))
    assert after == before and not any(name.endswith(TEMP_SUFFIX) for name in after)


def test_atomic_write_removes_its_temp_file_when_the_write_raises(tmp_path):
    target = tmp_path / "r.json"
    with pytest.raises(TypeError):
        atomic_write(target, None)  # type: ignore[arg-type]  # the write itself raises, after the temp file exists
    assert list(tmp_path.iterdir()) == []


def test_no_compiler_and_nothing_built_is_refused_before_the_command_runs(tmp_path, project):
    """Doctor's message and exit 2, before the command runs and without attempting the build (issue 21, item 11)."""
    bin_dir = tmp_path / "bin"  # a PATH with python and nothing else: no c++, no g++
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    env = {"PATH": str(bin_dir), "NEURON_PORT_CACHE_DIR": str(cache), "TMPDIR": str(tmpdir), "CXX": "c++"}
    result = run_cli("check", str(project), "--", "python", "train.py", env=env)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "the simulator's C++ core is not built yet" in result.stderr, result.stderr
    assert "g++: missing: install a C++ compiler" in result.stderr and "neuron-port doctor" in result.stderr
    assert not (project / "ran").exists(), "the command ran"
    assert not list(cache.rglob("*")), "the build was attempted"
    assert not list(tmpdir.iterdir()), "check left temporary files"
