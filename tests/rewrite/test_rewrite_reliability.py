"""Issue 12: the rewrite never hangs, never loses a file and stays byte-exact. Each test runs the real CLI
(a child process, as users run it) in a temporary tree; the signal tests send real signals at random
moments, several times, and then check that no temporary file is left, that every file is either as it
was or completely rewritten, and the exit code."""

from __future__ import annotations

import ctypes
import json
import os
import random
import select
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from neuron_port.atomic import TEMP_SUFFIX

CUDA = "import torch\ntorch.cuda.synchronize()\n"
PORTED = "import torch\ntorch.neuron.synchronize()\n"


def heavy(i: int) -> str:
    """A file that takes the engine a while (many statements, one fix)."""
    body = "".join(f"def f{i}_{n}(x):\n    return [x * {n} for _ in range(3)]\n\n" for n in range(300))
    return CUDA + body


def make_tree(root: Path, count: int, text=heavy) -> dict[Path, str]:
    files = {root / f"m{i:03d}.py": text(i) for i in range(count)}
    for path, body in files.items():
        path.write_text(body)
    return files


def start(root: Path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"}
    return subprocess.Popen([sys.executable, "-m", "neuron_port", "rewrite", "--no-cache", *args, "."], cwd=root,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group, as a terminal gives it


def temp_files(root: Path) -> list[str]:
    return [str(p) for p in root.rglob(f"*{TEMP_SUFFIX}")]


def assert_old_or_new(files: dict[Path, str]) -> int:
    """Every file is its original text or its complete rewrite; returns how many were rewritten."""
    rewritten = 0
    for path, old in files.items():
        now = path.read_text()
        assert now in (old, old.replace("torch.cuda.synchronize", "torch.neuron.synchronize")), path
        rewritten += now != old
    return rewritten


# -- item 4 -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_item04_deep_nesting_is_a_per_file_error(tmp_path, cli, jobs):
    deep = "import torch\ntorch.cuda.synchronize()\nx = " + "(" * 2000 + "1" + ")" * 2000 + "\n"
    unclosed = "import torch\ntorch.cuda.synchronize()\nx = " + "[" * 60000 + "\n"  # longer: CPython checks first
    files = make_tree(tmp_path, 9, lambda i: CUDA)
    (tmp_path / "deep.py").write_text(deep)
    (tmp_path / "unclosed.py").write_text(unclosed)
    result = cli("rewrite", "-j", jobs, "--output-format", "json", ".", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    errors = {e["path"]: e["message"] for e in json.loads(result.stdout)["errors"]}
    assert set(errors) == {"deep.py", "unclosed.py"}
    assert all("nested too deeply" in m and "internal error" not in m for m in errors.values()), errors
    assert assert_old_or_new(files) == len(files)
    assert (tmp_path / "deep.py").read_text() == deep and (tmp_path / "unclosed.py").read_text() == unclosed


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_item04_a_dead_worker_does_not_hang_the_run(tmp_path):
    """The out-of-memory killer's SIGKILL to a worker, at a random moment, three times: the run ends,
    every file is old or new and none is lost; a file whose worker died is run again or reported."""
    files = make_tree(tmp_path, 40)
    rng = random.Random(4)
    for _round in range(3):
        for path, text in files.items():
            path.write_text(text)
        proc = start(tmp_path, "-j", "2", "--output-format", "json")
        deadline = time.monotonic() + 60
        killed = False
        while not killed and proc.poll() is None and time.monotonic() < deadline:
            workers = _children(proc.pid)
            if len(workers) >= 2:
                time.sleep(rng.uniform(0.0, 1.5))
                victims = [w for w in _children(proc.pid) if w in workers]
                if victims:
                    os.kill(rng.choice(victims), signal.SIGKILL)
                    killed = True
            time.sleep(0.01)
        out, err = proc.communicate(timeout=120)  # before the fix: waited forever
        assert killed, "no worker seen"
        doc = json.loads(out)
        died = {e["path"] for e in doc["errors"] if "worker process died" in e["message"]}
        assert {e["path"] for e in doc["errors"]} == died, err
        assert proc.returncode in (0, 1) and (proc.returncode == 1) == bool(died)
        assert assert_old_or_new(files) == len(files) - len(died)
        assert temp_files(tmp_path) == []


# -- item 5 -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_item05_interrupt_stops_cleanly(tmp_path, signum, code):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) or SIGTERM (to neuron-port) at a
    random moment of a parallel run, four times: one message, no traceback, the exit code of the signal,
    no temporary file, every file old or new."""
    files = make_tree(tmp_path, 30)
    rng = random.Random(int(signum))
    # how long an uninterrupted run takes here and now, so the signals land while it runs
    began = time.monotonic()
    start(tmp_path, "-j", "2").communicate(timeout=300)
    whole = time.monotonic() - began
    outcomes = []
    for _round in range(4):
        for path, text in files.items():
            path.write_text(text)
        proc = start(tmp_path, "-j", "2")
        time.sleep(rng.uniform(0.3, 0.85) * whole)
        if proc.poll() is None:
            if signum == signal.SIGINT:
                os.killpg(proc.pid, signal.SIGINT)
            else:
                os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)  # before the fix: hung until two more Ctrl-C
        assert temp_files(tmp_path) == []
        rewritten = assert_old_or_new(files)
        outcomes.append((proc.returncode, rewritten))
        if proc.returncode == code:
            assert "Traceback" not in err, err
            assert err.count("neuron-port: interrupted") == 1, err
        elif proc.returncode == -signum:  # before the handler exists (interpreter start-up, exit): default action
            assert "neuron-port: interrupted" not in err
        else:  # the run had finished before the signal
            assert proc.returncode == 0 and rewritten == len(files), err
    assert any(rc == code for rc, _ in outcomes), outcomes


def test_item05_sigkill_leaves_no_half_file_and_the_next_run_removes_its_temp_files(tmp_path):
    """SIGKILL (nothing can clean up) at random moments, four times: every file is old or new; a temporary
    file it may have left is removed by the next run that writes that file, once it is old enough not to
    be a concurrent run's."""
    files = make_tree(tmp_path, 30)
    rng = random.Random(9)
    for _round in range(4):
        proc = start(tmp_path, "-j", "2")
        time.sleep(rng.uniform(1.0, 6.0))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        assert_old_or_new(files)
        for leftover in tmp_path.rglob(f"*{TEMP_SUFFIX}"):  # as if the kill happened a while ago
            os.utime(leftover, (time.time() - 3600, time.time() - 3600))
        for path, text in files.items():  # the next run writes every file again
            path.write_text(text)
    # a killed write's temp file, as the kill leaves it, beside a file the next run writes
    stale = tmp_path / f".m000.py.abcd1234{TEMP_SUFFIX}"
    stale.write_text("half a file")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    fresh = tmp_path / f".m001.py.efgh5678{TEMP_SUFFIX}"  # young: could be a concurrent run's
    fresh.write_text("being written")
    proc = start(tmp_path, "-j", "2")
    proc.communicate(timeout=300)
    assert proc.returncode in (0, 1)
    assert assert_old_or_new(files) == len(files)
    assert temp_files(tmp_path) == [str(fresh)]


# -- item 7 -----------------------------------------------------------------------------------------------
IN_CLOSE_NOWRITE = 0x10


def _wait_for_read(path: Path, timeout: float) -> bool:
    """Block until some process opens ``path`` for reading and closes it (Linux inotify)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_CLOEXEC)
    assert fd >= 0
    try:
        assert libc.inotify_add_watch(fd, os.fsencode(path), IN_CLOSE_NOWRITE) >= 0
        ready, _, _ = select.select([fd], [], [], timeout)
        if ready:
            os.read(fd, 4096)
        return bool(ready)
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify")
def test_item07_a_file_edited_during_the_run_is_not_overwritten(tmp_path):
    files = make_tree(tmp_path, 25)
    first = tmp_path / "a.py"  # read first (discovery sorts), written after every other file was scanned
    first.write_text(CUDA)
    proc = start(tmp_path, "-j", "1", "--output-format", "json")
    assert _wait_for_read(first, 60)
    edited = "import torch\n# the user's new line\ntorch.cuda.synchronize()\n"
    first.write_text(edited)
    out, err = proc.communicate(timeout=120)
    doc = json.loads(out)
    assert proc.returncode == 1, err
    assert [e["message"] for e in doc["errors"]] == ["a.py: changed during the run; not rewritten (run again to "
                                                     "rewrite it)"]
    assert first.read_text() == edited  # before the fix: the old text plus the fix
    assert assert_old_or_new(files) == len(files)


# -- item 8 -----------------------------------------------------------------------------------------------
def test_item08_line_endings_encodings_names_and_owners(tmp_path, cli):
    cases = {
        "cr_end.py": b"import torch\ntorch.cuda.synchronize()\na = 1\r",
        "cr_only.py": b"import torch\rtorch.cuda.synchronize()\ra = 1\r",
        "mixed.py": b"import torch\r\ntorch.cuda.synchronize()\ra = 1\n",
    }
    for name, raw in cases.items():
        (tmp_path / name).write_bytes(raw)
    # encodings that do not give the same bytes back: a redundant escape (iso2022_jp), an encoded ASCII
    # letter (utf-7); a rewrite would change bytes outside the fix
    iso = b"# -*- coding: iso2022_jp -*-\nimport torch\n\x1b(Btorch.cuda.synchronize()\n"
    utf7 = b"# coding: utf-7\nimport torch\ntorch.cuda.synchronize()\nx = +AGE-\n"
    (tmp_path / "iso.py").write_bytes(iso)
    (tmp_path / "utf7.py").write_bytes(utf7)
    long_name = "n" * 250 + ".py"  # NAME_MAX is 255 bytes: the temp name must be shorter than ".<name>.XXXXXXXX..."
    (tmp_path / long_name).write_text(CUDA)
    result = cli("rewrite", "--output-format", "json", ".", cwd=tmp_path)
    errors = {e["path"]: e["message"] for e in json.loads(result.stdout)["errors"]}
    assert result.returncode == 1
    assert set(errors) == {"iso.py", "utf7.py"}, errors
    assert "does not give the same bytes back" in errors["iso.py"] and "iso2022_jp" in errors["iso.py"]
    assert (tmp_path / "iso.py").read_bytes() == iso and (tmp_path / "utf7.py").read_bytes() == utf7
    for name, raw in cases.items():
        assert (tmp_path / name).read_bytes() == raw.replace(b"cuda", b"neuron"), name
    assert (tmp_path / long_name).read_text() == PORTED
    assert temp_files(tmp_path) == []
    again = cli("rewrite", "--output-format", "json", *cases, long_name, cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["summary"]["files_changed"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create a file owned by another user")
def test_item08_file_owner_and_mode_are_kept(cli):
    """As root, a rewritten file keeps its owner, group and mode; as another user, a file it does not own
    (in a folder it may write) is skipped with a message, not taken over."""
    tmp_path = Path(tempfile.mkdtemp(prefix="np-owner-"))  # pytest's folder is private to root
    try:
        _owner_case(tmp_path, cli)
    finally:
        shutil.rmtree(tmp_path)


def _owner_case(tmp_path: Path, cli) -> None:
    other = tmp_path / "other.py"
    other.write_text(CUDA)
    os.chown(other, 12345, 23456)
    os.chmod(other, 0o640)
    os.chmod(tmp_path, 0o777)
    result = cli("rewrite", ".", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    st = other.stat()
    assert other.read_text() == PORTED and (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (12345, 23456, 0o640)

    other.write_text(CUDA)
    os.chmod(other, 0o666)
    mine = tmp_path / "mine.py"
    mine.write_text(CUDA)
    os.chown(mine, 4242, 4242)
    env = {k: v for k, v in os.environ.items() if k != "NEURON_PORT_SIMULATE"}
    warm = tmp_path / "warm"
    warm.mkdir()
    (warm / "w.py").write_text(CUDA)
    # the same CLI as user 4242, who owns mine.py but not other.py; everything is imported first, as root
    # (this interpreter's files may not be readable by that user), by a run that writes as the second
    # one does (a --check run does not import what only a write needs)
    as_user = subprocess.run(
        [sys.executable, "-c", "import contextlib, io, os, sys; from neuron_port.commands.entry import main\n"
         "args = ['neuron-port', 'rewrite', '-j', '1', '--no-cache', '--output-format', 'json']\n"
         f"sys.argv = args + [{str(warm)!r}]\n"
         "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()): main()\n"
         "os.setgroups([]); os.setgid(4242); os.setuid(4242)\n"
         "sys.argv = args + ['.']; main()"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert as_user.returncode == 1, as_user.stderr
    assert "other.py: owned by another user (uid 12345); not rewritten" in as_user.stdout + as_user.stderr
    assert other.read_text() == CUDA and other.stat().st_uid == 12345
    assert mine.read_text() == PORTED and mine.stat().st_uid == 4242


# -- item 10 ----------------------------------------------------------------------------------------------
@pytest.mark.skipif(sys.version_info >= (3, 12), reason="needs a Python older than 3.12")
def test_item10_newer_syntax_says_which_python(tmp_path, cli):
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    newer = {
        "alias.py": CUDA + "type Vector = list[float]\n",
        "generic.py": CUDA + "def first[T](xs: list[T]) -> T:\n    return xs[0]\n",
        "fstring.py": CUDA + "names = ['a']\nprint(f'{', '.join(names)}')\n",
        "big.py": CUDA + "x = 1\n" * 5000 + "class Box[T]:\n    pass\n",  # long: CPython's parser goes first
    }
    for name, text in newer.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "bad.py").write_text(CUDA + "def broken(:\n")
    result = cli("rewrite", "--output-format", "json", ".", cwd=tmp_path)
    errors = {e["path"]: e["message"] for e in json.loads(result.stdout)["errors"]}
    assert result.returncode == 1
    for name in newer:
        assert f"needs Python 3.12 (running {running})" in errors[name], errors[name]
        assert "internal error" not in errors[name]
        assert (tmp_path / name).read_text() == newer[name]
    assert "syntax error" in errors["bad.py"] and "needs Python" not in errors["bad.py"]


# -- item 19 ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["sarif", "json", "github", "text"])
def test_item19_non_utf8_file_name_and_odd_notebook_metadata(tmp_path, cli, fmt):
    (tmp_path / os.fsdecode(b"lat\xe9.py")).write_text(CUDA)
    cell = {"cell_type": "code", "source": CUDA, "metadata": {}, "outputs": [], "execution_count": None}
    for name, metadata in {"str.ipynb": {"language_info": "python"}, "list.ipynb": {"kernelspec": ["x"]},
                           "num.ipynb": {"language_info": {"name": 3}}, "top.ipynb": "python"}.items():
        (tmp_path / name).write_text(json.dumps({"cells": [cell], "metadata": metadata, "nbformat": 4,
                                                 "nbformat_minor": 5}))
    result = cli("rewrite", "--check", "--output-format", fmt, ".", cwd=tmp_path,
                 env={"PYTHONIOENCODING": "utf-8"})  # strict UTF-8 streams, as under a UTF-8 locale
    assert result.returncode == 1, result.stderr  # --check: changes pending
    assert "internal error" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr
    if fmt == "sarif":
        doc = json.loads(result.stdout)
        uris = {loc["physicalLocation"]["artifactLocation"]["uri"]
                for r in doc["runs"][0]["results"] for loc in r["locations"]}
        assert "lat%E9.py" in uris
        assert {"str.ipynb", "list.ipynb", "num.ipynb", "top.ipynb"} <= uris
    elif fmt == "json":
        doc = json.loads(result.stdout)
        assert doc["errors"] == []
        assert "lat\ufffd.py" in {f["path"] for f in doc["files"]}
        assert result.stdout.isascii()  # every character escaped, and no lone surrogate escape
        assert "\\udc" not in result.stdout
    else:
        assert "lat" in result.stdout and "str.ipynb" in result.stdout
