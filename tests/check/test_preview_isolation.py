"""`check --preview` runs a real copy: whatever the command writes (data files, build outputs, its own
.py files, through every symbolic link it finds), the project stays byte-identical."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import textwrap
from pathlib import Path

import jsonschema
import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow

# Writes everything it can reach from its folder: appends to every file, through every link (files and
# folders), and adds a file in every folder.
VANDAL = textwrap.dedent("""\
    import os
    with open("data.txt", "a") as f:
        f.write("appended\\n")
    os.makedirs("build", exist_ok=True)
    with open("build/cache.bin", "wb") as f:
        f.write(b"new cache")
    with open(__file__, "a") as f:
        f.write("# edited by the run\\n")
    touched = 0
    for dirpath, dirnames, filenames in os.walk(".", followlinks=True):
        if "loop" in dirpath:
            continue
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            try:
                if os.path.isdir(path):
                    open(os.path.join(path, "added-by-run"), "w").write("x")
                else:
                    open(path, "a").write("vandal\\n")
                touched += 1
            except OSError:
                pass
    print("touched", touched)
    x = "cuda"  # torch.cuda below gives the rewrite something to change
    import torch
    print(torch.cuda.is_available())
""")


def tree_state(root: Path) -> dict[str, tuple]:
    """Every entry without following links: a link's target, a file's mode and hash, a folder's mode."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                state[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                state[rel] = ("dir", st.st_mode)
            else:
                state[rel] = ("file", st.st_mode, hashlib.sha256(path.read_bytes()).hexdigest())
    return state


def make_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "build").mkdir()
    (project / ".git").mkdir()
    (project / "env").mkdir()
    (project / "train.py").write_text(VANDAL)
    (project / "data.txt").write_text("data\n")
    (project / "build" / "cache.bin").write_bytes(b"old cache")
    (project / "sub" / "inner.txt").write_text("inner\n")
    (project / ".git" / "config").write_text("[core]\n")
    (project / "env" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (project / "env" / "lib.txt").write_text("lib\n")
    os.symlink("data.txt", project / "relative-link.txt")
    os.symlink(project / "sub" / "inner.txt", project / "absolute-link.txt")
    os.symlink("sub", project / "folder-link")
    os.symlink(project / "sub", project / "absolute-folder-link")
    os.symlink(project / ".git" / "config", project / "link-into-git")
    return project


def test_preview_never_changes_the_project(tmp_path, report_schema):
    project = make_project(tmp_path)
    before = tree_state(project)
    result = run_cli("check", str(project), "--preview", "--output-format", "json", "--no-cache",
                     "--", "python", "train.py", env={"TMPDIR": str(tmp_path)})
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, report_schema)
    status = doc["runtime"]["status"]
    assert status["exit_code"] == 0, status["stderr_tail"]
    touched = int(next(line for line in status["stdout_tail"] if line.startswith("touched")).split()[1])
    assert touched >= 8  # it did write through the links and into the folders of the copy
    assert tree_state(project) == before, "--preview changed the project"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project"], "a temporary folder was left"


def test_preview_reports_a_symbolic_link_loop_and_runs(tmp_path, report_schema):
    project = make_project(tmp_path)
    os.symlink("loop", project / "loop")
    os.symlink("loop-b", project / "loop-a")
    os.symlink("loop-a", project / "loop-b")
    before = tree_state(project)
    result = run_cli("check", str(project), "--preview", "--output-format", "json", "--no-cache",
                     "--", "python", "train.py", env={"TMPDIR": str(tmp_path)})
    assert "internal error" not in result.stderr
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, report_schema)
    assert doc["runtime"]["status"]["exit_code"] == 0, doc["runtime"]["status"]["stderr_tail"]
    loops = {e["path"] for e in doc["errors"] if "symbolic link loop" in e["message"]}
    assert loops == {"loop", "loop-a", "loop-b"}
    assert result.returncode == 1  # files that could not be processed, as for rewrite
    assert tree_state(project) == before


def _clones(folder: Path) -> bool:
    src, dst = folder / "clone-src", folder / "clone-dst"
    src.write_bytes(b"x")
    try:
        with open(src, "rb") as s, open(dst, "wb") as d:
            fcntl.ioctl(d.fileno(), 0x40049409, s.fileno())
        return True
    except OSError:
        return False
    finally:
        src.unlink()
        dst.unlink(missing_ok=True)


def test_a_project_too_big_to_copy_is_refused_with_the_largest_file_named(tmp_path):
    project = make_project(tmp_path)
    (project / "weights.bin").write_bytes(os.urandom(3 * 2**20))
    before = tree_state(project)
    clones = _clones(tmp_path)
    result = run_cli("check", str(project), "--preview", "--no-cache", "--", "python", "train.py",
                     env={"TMPDIR": str(tmp_path), "NEURON_PORT_PREVIEW_MAX_COPY_MB": "1"})
    if clones:  # copy-on-write: nothing is copied, so nothing is over the limit
        assert result.returncode in (0, 1), result.stderr
    else:
        assert result.returncode == 2, result.stderr
        assert "weights.bin (3 MB)" in result.stderr and "NEURON_PORT_PREVIEW_MAX_COPY_MB" in result.stderr
    assert tree_state(project) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["project"]


def test_a_program_in_a_skipped_environment_runs_from_the_project(tmp_path):
    import subprocess
    import sys

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("import sys, pathlib\nprint('prefix', sys.prefix)\n"
                                      "pathlib.Path('out.txt').write_text('ran')\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(project / ".venv")], check=True)
    before = tree_state(project)
    result = run_cli("check", str(project), "--preview", "--output-format", "json", "--no-cache",
                     "--", ".venv/bin/python", "train.py", env={"TMPDIR": str(tmp_path)})
    doc = json.loads(result.stdout)
    status = doc["runtime"]["status"]
    assert status["exit_code"] == 0, status["stderr_tail"]
    assert f"prefix {project.resolve() / '.venv'}" in status["stdout_tail"]  # the project's venv, not a copy
    assert tree_state(project) == before  # out.txt went to the copy
