"""Issue 12, hostile inputs in the tree: non-regular files, odd .gitignore lines, malformed suppressions,
symlinks on the command line, a pyproject.toml above the project, and configuration errors. Each test
runs the real CLI in a temporary tree and checks the message, the exit code and that the other files
were still rewritten (or, for a usage error, that nothing was touched)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
from pathlib import Path

import pytest

CUDA = "import torch\ntorch.cuda.synchronize()\n"
PORTED = "import torch\ntorch.neuron.synchronize()\n"


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def as_json(result) -> dict:
    assert result.stdout, result.stderr
    return json.loads(result.stdout)


# -- item 6 -----------------------------------------------------------------------------------------------
def test_item06_fifo_named_py_is_skipped(tmp_path, cli):
    write(tmp_path, {"a.py": CUDA, "pkg/b.py": CUDA})
    os.mkfifo(tmp_path / "x.py")
    os.mkfifo(tmp_path / "pkg" / "run.sh")
    os.mkfifo(tmp_path / ".gitignore")  # read by discovery: must not block either
    try:  # /dev/zero as zero.py: a read would never end (needs CAP_MKNOD; containers may refuse it)
        os.mknod(tmp_path / "pkg" / "zero.py", 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    except (PermissionError, OSError):
        pass
    sock = socket.socket(socket.AF_UNIX)
    here = os.getcwd()
    try:
        os.chdir(tmp_path)  # a short relative name: AF_UNIX paths are limited to ~107 bytes
        sock.bind("pkg/s.py")
    finally:
        os.chdir(here)
    try:
        # the tree as a folder: the FIFOs and the socket are skipped unopened (a read of x.py would
        # wait forever for a writer; the CLI fixture's subprocess timeout would then fail the test)
        doc = as_json(cli("rewrite", "--output-format", "json", ".", cwd=tmp_path))
        assert doc["errors"] == []
        assert sorted(f["path"] for f in doc["files"]) == ["a.py", "pkg/b.py"]
        assert (tmp_path / "a.py").read_text() == PORTED and (tmp_path / "pkg/b.py").read_text() == PORTED
        assert stat.S_ISFIFO((tmp_path / "x.py").lstat().st_mode)

        # given explicitly: an error naming the file (exit 1), and the other file is still rewritten
        (tmp_path / "a.py").write_text(CUDA)
        result = cli("rewrite", "x.py", "pkg/s.py", "a.py", cwd=tmp_path)
        assert result.returncode == 1
        assert "x.py: not a regular file (a FIFO); not read" in result.stdout + result.stderr
        assert "pkg/s.py: not a regular file (a socket); not read" in result.stdout + result.stderr
        assert (tmp_path / "a.py").read_text() == PORTED

        # `check` scans the tree too (before and while its command runs): it must finish, not hang
        (tmp_path / "a.py").write_text(CUDA)
        result = cli("check", ".", "--timeout", "5", "--output-format", "json", "--", "true", cwd=tmp_path)
        doc = as_json(result)
        assert doc["runtime"]["status"]["exit_code"] == 0 and not doc["runtime"]["status"]["timed_out"]
        assert "a.py" in {f["path"] for f in doc["findings"]}
    finally:
        sock.close()


# -- item 9 -----------------------------------------------------------------------------------------------
BAD_GITIGNORE_LINES = ["!", "foo\\", "[z-a]", "[z-a]*.py"]


def test_item09_odd_gitignore_lines_warn_and_are_read_as_git_reads_them(tmp_path, cli):
    if shutil.which("git") is None:
        pytest.skip("git is needed to compare with git's own reading")
    repo = tmp_path / "repo"
    write(repo, {
        ".gitignore": "\n".join(["ignored.py", *BAD_GITIGNORE_LINES]) + "\n",  # the repository's root: a parent
        "proj/.gitignore": "local.py\n[9-0].py\n",
        **{f"proj/{name}": CUDA for name in ("a.py", "ignored.py", "local.py", "z.py", "9.py", "0.py", "foo.py")},
    })
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    # git's own reading of the same files: `!` and `foo\` match nothing; a reversed range [z-a] matches
    # its first character (git's wildmatch tests it before it sees the `-`)
    listed = subprocess.run(["git", "ls-files", "--others", "--exclude-standard", "proj"], cwd=repo,
                            capture_output=True, text=True, check=True).stdout.split()
    by_git = sorted(p for p in listed if p.endswith(".py"))
    assert by_git == ["proj/0.py", "proj/a.py", "proj/foo.py"]

    result = cli("rewrite", "--output-format", "json", "proj", cwd=repo)
    doc = as_json(result)
    assert result.returncode == 0, result.stderr
    assert sorted(f["path"] for f in doc["files"]) == by_git  # the same files as git's
    for number, line in enumerate(BAD_GITIGNORE_LINES, start=2):
        assert f"warning: .gitignore:{number}: `{line}` " in result.stderr
    assert "warning: .gitignore:4: `[z-a]` has a reversed range; read as `[z]`, as git does" in result.stderr
    assert "warning: .gitignore:2: `!` matches nothing in git" in result.stderr
    assert "warning: proj/.gitignore:2: `[9-0].py` has a reversed range" in result.stderr
    assert result.stderr.count("warning:") == len(BAD_GITIGNORE_LINES) + 1  # once each
    for name in ("0.py", "a.py", "foo.py"):
        assert (repo / "proj" / name).read_text() == PORTED
    for name in ("ignored.py", "local.py", "z.py", "9.py"):
        assert (repo / "proj" / name).read_text() == CUDA


# -- item 11 ----------------------------------------------------------------------------------------------
def test_item11_malformed_suppression_suppresses_nothing_and_is_reported(tmp_path, cli):
    write(tmp_path, {
        "a.py": (
            "import torch\n"
            "torch.cuda.synchronize()  # neuron-port: ignore[NP201;NP202]\n"  # 2: malformed
            "torch.cuda.synchronize()  # neuron-port: ignore[*]\n"  # 3: malformed
            "torch.cuda.synchronize()  # neuron-port: ignore[NP201\n"  # 4: unclosed
            "torch.cuda.synchronize()  # neuron-port: ignore[NP201, NP999]\n"  # 5: valid, one unknown code
            "torch.cuda.synchronize()  # neuron-port: ignore\n"  # 6: bare: every code, as documented
            "torch.cuda.synchronize()  # neuron-port: ignore[np2]\n"  # 7: a prefix, any case
        ),
        "b.py": CUDA,
        "run.sh": "CUDA_VISIBLE_DEVICES=0 python train.py  # neuron-port: ignore[*]\n",
    })
    result = cli("rewrite", "--output-format", "json", ".", cwd=tmp_path)
    doc = as_json(result)
    lines = (tmp_path / "a.py").read_text().splitlines()
    assert [line.split("  #")[0] for line in lines[1:]] == [
        "torch.neuron.synchronize()", "torch.neuron.synchronize()", "torch.neuron.synchronize()",
        "torch.cuda.synchronize()", "torch.cuda.synchronize()", "torch.cuda.synchronize()"]
    np799 = {f["line"]: f["message"] for f in doc["findings"] if f["code"] == "NP799" and f["path"] == "a.py"}
    assert sorted(np799) == [2, 3, 4, 5]
    assert "`# neuron-port: ignore[NP201;NP202]` is malformed and suppresses nothing" in np799[2]
    assert "`# neuron-port: ignore[*]` is malformed" in np799[3]
    assert "never closed" in np799[4]
    assert np799[5].startswith("`NP999` in `# neuron-port: ignore[NP201, NP999]` is not a rule code")
    assert all(f["severity"] == "warning" for f in doc["findings"] if f["code"] == "NP799")
    assert (tmp_path / "b.py").read_text() == PORTED
    # in a launch script the malformed comment suppresses nothing either (NP520 is still reported)
    assert any(f["code"] == "NP520" and f["path"] == "run.sh" for f in doc["findings"])
    assert result.returncode == 0, result.stderr  # what is left is warnings (NP799, NP520)
    # a second run changes nothing and reports the same NP799 findings
    again = as_json(cli("rewrite", "--output-format", "json", "--check", ".", cwd=tmp_path))
    assert again["summary"]["files_changed"] == 0
    assert {f["line"] for f in again["findings"] if f["code"] == "NP799"} == {2, 3, 4, 5}


# -- item 16 ----------------------------------------------------------------------------------------------
def test_item16_command_line_symlink_out_of_the_tree_is_refused(tmp_path, cli):
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    write(tree, {"pyproject.toml": "[project]\nname = 'demo'\n", "a.py": CUDA, "pkg/b.py": CUDA})
    write(outside, {"x.py": CUDA, "lib/y.py": CUDA})
    (tree / "link.py").symlink_to(outside / "x.py")
    (tree / "linkdir").symlink_to(outside / "lib", target_is_directory=True)
    (tree / "pkg" / "alias.py").symlink_to(tree / "a.py")  # inside the project: fine

    for given in ("link.py", "linkdir"):
        result = cli("rewrite", "a.py", given, cwd=tree)
        assert result.returncode == 2, result.stderr
        assert f"{given}: leads through a symlink to {outside.resolve()}" in result.stderr
        assert "outside the tree; not followed" in result.stderr
        assert (outside / "x.py").read_text() == CUDA and (outside / "lib/y.py").read_text() == CUDA
        assert (tree / "a.py").read_text() == CUDA  # a usage error stops the run before any write

    # a link to a file of the same project is taken (once), given from a subfolder too
    result = cli("rewrite", "alias.py", "b.py", cwd=tree / "pkg")
    assert result.returncode == 0, result.stderr
    assert (tree / "a.py").read_text() == PORTED and (tree / "pkg/b.py").read_text() == PORTED
    assert (tree / "pkg" / "alias.py").is_symlink()

    # walking the tree: the links out of it are not followed, the rest is rewritten
    write(tree, {"a.py": CUDA})
    doc = as_json(cli("rewrite", "--output-format", "json", ".", cwd=tree))
    assert sorted(f["path"] for f in doc["files"]) == ["a.py", "pkg/b.py"]
    assert any("link.py: symlink points outside the tree" in e["message"] for e in doc["errors"])
    assert (tree / "a.py").read_text() == PORTED and (outside / "x.py").read_text() == CUDA


# -- item 17 ----------------------------------------------------------------------------------------------
HOSTILE = '[tool.neuron-port]\nexclude = ["*"]\ncheck-command = "touch pwned"\n'


def test_item17_pyproject_above_the_project_is_not_used(tmp_path, cli):
    write(tmp_path, {"pyproject.toml": HOSTILE, "proj/a.py": CUDA, "proj/sub/b.py": CUDA})
    proj = tmp_path / "proj"
    # no .git anywhere: a pyproject.toml above the working directory is not this project's
    result = cli("rewrite", ".", cwd=proj)
    assert result.returncode == 0, result.stderr
    assert (proj / "a.py").read_text() == PORTED and (proj / "sub/b.py").read_text() == PORTED
    result = cli("check", ".", cwd=proj)  # its check-command is not run
    assert result.returncode == 2 and "no command to run" in result.stderr
    assert not (proj / "pwned").exists() and not (tmp_path / "pwned").exists()

    # a pyproject.toml above the repository root is never used, even from the working directory
    write(tmp_path, {"proj/a.py": CUDA})
    (proj / ".git").mkdir()
    result = cli("rewrite", "proj", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (proj / "a.py").read_text() == PORTED

    # ruff's rule inside the repository: the closest pyproject.toml *with* [tool.neuron-port] applies
    write(proj, {"pyproject.toml": '[tool.neuron-port]\nexclude = ["skipped.py"]\n',
                 "sub/pyproject.toml": "[project]\nname = 'sub'\n", "sub/skipped.py": CUDA, "sub/c.py": CUDA})
    result = cli("rewrite", ".", cwd=proj / "sub")
    assert result.returncode == 0, result.stderr
    assert (proj / "sub/skipped.py").read_text() == CUDA and (proj / "sub/c.py").read_text() == PORTED


# -- item 20 ----------------------------------------------------------------------------------------------
CONFIG_ERRORS = [
    ("max-file-size = nan", "max-file-size = nan: must be a number of MB"),
    ("max-file-size = inf", "max-file-size = inf: must be a number of MB"),
    ("max-file-size = 1e308", "max-file-size = 1e+308: must be a number of MB"),
    ("max-file-size = -1", "max-file-size = -1: must be a number of MB"),
    ('max-file-size = "2"', 'max-file-size = "2": must be a number of MB'),
    ("select = 5", "select = 5: must be a list of strings"),
    ('select = ["NP1", 2]', "select = [\"NP1\", 2]: must be a list of strings"),
    ('ignore = ["NP999"]', "'NP999' matches no rule code"),
    ('exclude = [""]', "exclude = [\"\"]: has an empty entry"),
    ("extend-exclude = {a = 1}", "extend-exclude = {a = 1}: must be a list of strings"),
    ('target = "gpu"', 'target = "gpu": must be one of neuron, accelerator'),
    ("fail-on = 3", "fail-on = 3: must be one of info, warning, error, never"),
    ('unsafe-fixes = "yes"', 'unsafe-fixes = "yes": must be true or false'),
    ("check-command = \"python 'x\"", "cannot be split into arguments"),
    ("check-command = []", "check-command = []: must be a command line"),
    ("colour = true", "unknown key(s) in [tool.neuron-port]: colour"),
]


@pytest.mark.parametrize("line, message", CONFIG_ERRORS, ids=[c[0].split(" =")[0] + str(i) for i, c in
                                                            enumerate(CONFIG_ERRORS)])
def test_item20_config_value_errors_exit_2_naming_file_line_and_key(tmp_path, cli, line, message):
    write(tmp_path, {"pyproject.toml": f"[project]\nname = 'demo'\n\n[tool.neuron-port]\n{line}\n", "a.py": CUDA})
    result = cli("rewrite", ".", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "internal error" not in result.stderr
    assert "pyproject.toml:5: " in result.stderr and message in result.stderr
    assert (tmp_path / "a.py").read_text() == CUDA


@pytest.mark.parametrize("content, message", [
    (b"tool = 5\n", "pyproject.toml:1: `tool` must be a table"),
    (b"[tool]\nneuron-port = \"x\"\n", "pyproject.toml:2: [tool.neuron-port] must be a table, not a string"),
    (b"[project]\nname = \"caf\xe9\"\n", "pyproject.toml:2: not UTF-8 (byte 0xe9)"),
    (b"[tool.neuron-port\n", "pyproject.toml: invalid TOML"),
], ids=["tool-not-a-table", "table-not-a-table", "not-utf8", "invalid-toml"])
def test_item20_config_file_errors_exit_2(tmp_path, cli, content, message):
    (tmp_path / "pyproject.toml").write_bytes(content)
    write(tmp_path, {"a.py": CUDA})
    for args in (["rewrite", "."], ["rewrite", "--config", "pyproject.toml", "a.py"], ["check", ".", "--", "true"]):
        result = cli(*args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "internal error" not in result.stderr
    assert (tmp_path / "a.py").read_text() == CUDA


def test_item20_command_line_max_file_size_inf_is_a_usage_error(tmp_path, cli):
    write(tmp_path, {"a.py": CUDA})
    for value in ("inf", "1e308", "nan"):
        result = cli("rewrite", "--max-file-size", value, ".", cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "--max-file-size" in result.stderr and "internal error" not in result.stderr
    os.mkfifo(tmp_path / "fifo.toml")
    result = cli("rewrite", "--config", "fifo.toml", ".", cwd=tmp_path)  # never opened, so no hang
    assert result.returncode == 2 and "fifo.toml: not a regular file" in result.stderr
    assert (tmp_path / "a.py").read_text() == CUDA
    result = cli("rewrite", "--max-file-size", "0", ".", cwd=tmp_path)  # 0 = no limit, still fine
    assert result.returncode == 0 and (tmp_path / "a.py").read_text() == PORTED
