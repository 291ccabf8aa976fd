"""rewrite/dataclass_code.py: the engine's import takes LibCST's dataclass methods from a file of code
objects, and gets the same methods as an import that compiles them; a damaged file is compiled afresh and
replaced; nothing is written where Python writes no bytecode; the hook writes the file once. Issue 33: the
file is written 0644 whatever the umask, and a file that is not this user's, is writable by others, is a
link, or whose content is not what this user's run signed (a planted code object, any of 100 random
corruptions) is never unmarshalled or run: it is compiled afresh and replaced, and the output is the same.
The suite runs the first two corruptions of each kind of the 100 (NEURON_PORT_FULL_SWEEPS=1: all 100).

Each run is a fresh interpreter with its own PYTHONPYCACHEPREFIX (where the file goes, as .pyc files do) and
its own per-user key folder (XDG_CACHE_HOME), and PYTHONDONTWRITEBYTECODE unset (else no file is written)."""

from __future__ import annotations

import json
import marshal
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FULL_SWEEPS

# Prints {"path": the cache file, "compiled": dataclass method texts compiled in the run, "methods": {class
# method: a description of its code and function}} for the engine's import (inside compiled_once() unless
# "plain").
PROBE = r'''
import dataclasses, json, sys, types

def describe(code):
    fields = ["co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_code", "co_names",
              "co_varnames", "co_freevars", "co_cellvars", "co_filename", "co_name", "co_qualname",
              "co_firstlineno", "co_linetable", "co_exceptiontable", "co_stacksize", "co_nlocals"]
    out = []
    for name in fields:
        value = getattr(code, name, None)
        out.append(value.hex() if isinstance(value, bytes) else repr(value))
    out.append([describe(c) if isinstance(c, types.CodeType)
                else sorted(map(repr, c)) if isinstance(c, frozenset)  # its order is the process's hash seed's
                else repr(c) for c in code.co_consts])
    return out

compiled = []

def count(event, args):  # an audit hook: sees exec()'s own compiles too, and calls nothing in between
    if event == "compile" and args[1] == "<string>":
        source = args[0] if isinstance(args[0], str) else bytes(args[0] or b"").decode("utf-8", "replace")
        if source.startswith("def __create_fn__"):
            compiled.append(source)

sys.addaudithook(count)
from neuron_port.rewrite import dataclass_code
if sys.argv[1] == "plain":
    import neuron_port.rewrite.engine
else:
    with dataclass_code.compiled_once():
        import neuron_port.rewrite.engine
methods = {}
for module_name, module in list(sys.modules.items()):
    if not module_name.startswith(("libcst", "neuron_port")):
        continue
    for cls in list(vars(module).values()):
        if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == module_name:
            for attr, value in vars(cls).items():
                code = getattr(value, "__code__", None)
                if code is not None and code.co_filename == "<string>":
                    methods[f"{module_name}.{cls.__qualname__}.{attr}"] = [
                        describe(code), repr(value.__defaults__), repr(value.__kwdefaults__),
                        repr(value.__annotations__)]
print(json.dumps({"path": dataclass_code.cache_path(), "compiled": len(compiled), "methods": methods}))
'''


# LibCST's ~290 classes: a text per method up to Python 3.12, one per class since 3.13
MANY_TEXTS = 150


@pytest.fixture(scope="module")
def prefix(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pycache")  # shared: the .pyc files of one test serve the next


def _env(prefix: Path, write: bool = True) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    env["XDG_CACHE_HOME"] = str(prefix.with_name(prefix.name + "-xdg"))  # the per-user key the file is signed with
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _probe(prefix: Path, mode: str = "cached", write: bool = True) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], env=_env(prefix, write), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _cache(probe: dict, prefix: Path) -> Path:
    path = Path(probe["path"])
    assert path.is_relative_to(prefix)  # beside the .pyc files, under the prefix
    return path


def test_cached_methods_are_the_compiled_ones(prefix):
    plain = _probe(prefix, "plain")
    _cache(plain, prefix).unlink(missing_ok=True)
    cold = _probe(prefix)
    path = _cache(cold, prefix)
    assert plain["compiled"] > MANY_TEXTS and path.is_file() and cold["compiled"] > MANY_TEXTS
    warm = _probe(prefix)
    assert warm["compiled"] == 0  # every method's code came from the file
    assert len(plain["methods"]) > 500
    assert cold["methods"] == plain["methods"]
    assert warm["methods"] == plain["methods"]


@pytest.mark.parametrize("damage", ["truncated", "garbage", "other header", "values not code", "empty"])
def test_a_damaged_file_is_compiled_afresh_and_replaced(prefix, damage):
    plain = _probe(prefix, "plain")
    path = _cache(plain, prefix)
    _probe(prefix)  # a good file
    good = path.read_bytes()
    header_end = good.index(b"\n") + 1
    if damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "garbage":
        path.write_bytes(good[:header_end] + os.urandom(4096))
    elif damage == "other header":
        path.write_bytes(b"\x00\x00\r\n" + good[4:])
    elif damage == "values not code":
        import marshal

        path.write_bytes(good[:header_end] + marshal.dumps({"def f(): pass": 1, "x": "y"}))
    else:
        path.write_bytes(b"")
    repaired = _probe(prefix)
    assert repaired["methods"] == plain["methods"]
    assert repaired["compiled"] > MANY_TEXTS
    assert _probe(prefix)["compiled"] == 0  # the file was replaced by a good one


def test_nothing_is_written_where_python_writes_no_bytecode(prefix):
    path = _cache(_probe(prefix, "plain"), prefix)
    path.unlink(missing_ok=True)
    probe = _probe(prefix, write=False)
    assert probe["compiled"] > MANY_TEXTS
    assert not path.exists()
    assert not list(path.parent.glob("*.tmp"))


def test_the_hook_writes_the_file_once(prefix, tmp_path):
    path = _cache(_probe(prefix, "plain"), prefix)
    path.unlink(missing_ok=True)
    script = tmp_path / "train.py"
    script.write_text("import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    hook = [sys.executable, "-m", "neuron_port", "rewrite", "--check", "--diff", "-q", "--no-cache", "train.py"]
    first = subprocess.run(hook, cwd=tmp_path, env=_env(prefix), capture_output=True, text=True, timeout=300)
    assert first.returncode == 1 and "NP" in first.stderr, first.stderr
    written = path.stat()
    second = subprocess.run(hook, cwd=tmp_path, env=_env(prefix), capture_output=True, text=True, timeout=300)
    assert (second.returncode, second.stdout, second.stderr) == (first.returncode, first.stdout, first.stderr)
    again = path.stat()
    assert (again.st_ino, again.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)


# `python -m neuron_port ARGS`, counting the opens of the compiled-methods file (an audit hook).
COUNT_OPENS = r'''
import atexit, runpy, sys
opened = []
sys.addaudithook(lambda event, args: opened.append(1) if event == "open" and "dataclass-code." in str(args[0]) else None)
atexit.register(lambda: sys.__stderr__.write(f"\nOPENS {len(opened)}\n"))
runpy.run_module("neuron_port", run_name="__main__", alter_sys=True)
'''


def test_a_run_over_many_files_reads_the_file_once(prefix, tmp_path):
    _probe(prefix)  # the file is there
    for i in range(5):
        (tmp_path / f"train{i}.py").write_text("import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n")
    run = subprocess.run([sys.executable, "-c", COUNT_OPENS, "rewrite", "--check", "-q", "--no-cache", "-j", "1", "."],
                         cwd=tmp_path, env=_env(prefix), capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and run.stdout.count("NP") == 5, run.stderr
    assert run.stderr.splitlines()[-1] == "OPENS 1"  # not once per file: the engine is imported once


# -- issue 33: only this user's own file is used ---------------------------------------------------------------

CUDA_SCRIPT = "import torch\n\nmodel = torch.nn.Linear(2, 2).cuda()\n"
HOOK = ["rewrite", "--check", "--diff", "-q", "--no-cache", "train.py"]  # what the pre-commit hook runs


def _hook(prefix: Path, cwd: Path, umask: int = -1) -> subprocess.CompletedProcess:
    (cwd / "train.py").write_text(CUDA_SCRIPT)
    run = subprocess.run([sys.executable, "-m", "neuron_port", *HOOK], cwd=cwd, env=_env(prefix), umask=umask,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and "NP103" in run.stderr and "+model" in run.stdout, run.stderr
    return run


def _split(data: bytes) -> tuple[bytes, dict]:
    """(what precedes the marshalled texts, the texts), read as someone who edits the file would: whatever
    the header holds, the texts are the dict after its last line."""
    at = data.index(b"dataclass code")
    while not (data[at - 1:at] == b"\n" and data[at:at + 1] in (b"{", b"\xfb")):  # a dict, with or without FLAG_REF
        at += 1
    return data[:at], marshal.loads(data[at:])


@pytest.mark.parametrize("umask", [0o000, 0o002, 0o022])
def test_the_file_is_created_0644_whatever_the_umask(prefix, tmp_path, umask):
    path = _cache(_probe(prefix, "plain"), prefix)
    path.unlink(missing_ok=True)
    _hook(prefix, tmp_path, umask=umask)
    st = path.stat()
    assert (oct(stat.S_IMODE(st.st_mode)), st.st_uid) == (oct(0o644), os.geteuid())
    _hook(prefix, tmp_path, umask=umask)
    again = path.stat()
    assert (again.st_ino, again.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)  # used as it is, not written again


def test_a_planted_code_object_is_never_run(prefix, tmp_path):
    path = _cache(_probe(prefix, "plain"), prefix)
    _probe(prefix)  # a good file
    head, codes = _split(path.read_bytes())
    marker = tmp_path / "planted-code-ran"
    # the issue's attack: the first methods' code objects replaced in place; they still define the method,
    # so a run that took them would look normal
    for text in list(codes)[:3]:
        codes[text] = compile(f"__import__('os').system('touch {marker}')\n{text}", "<string>", "exec",
                              dont_inherit=True)
    planted = head + marshal.dumps(codes)
    path.write_bytes(planted)
    _hook(prefix, tmp_path)  # the normal output
    assert not marker.exists()
    assert path.read_bytes() != planted  # replaced by this run's own
    replaced = path.stat()
    _hook(prefix, tmp_path)
    again = path.stat()
    assert (again.st_ino, again.st_mtime_ns) == (replaced.st_ino, replaced.st_mtime_ns) and not marker.exists()


@pytest.mark.parametrize("wrong", ["owned by another user", "mode 0666", "mode 0664", "a symbolic link"])
def test_a_file_others_could_have_written_is_refused_and_replaced(prefix, tmp_path, wrong):
    path = _cache(_probe(prefix, "plain"), prefix)
    _probe(prefix)  # a good file: only its owner, mode or kind is wrong below
    if wrong == "owned by another user":
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(path, 65534, 65534)
    elif wrong.startswith("mode"):
        path.chmod(int(wrong[-4:], 8))
    else:
        elsewhere = tmp_path / "elsewhere.marshal"
        shutil.copyfile(path, elsewhere)
        path.unlink()
        path.symlink_to(elsewhere)
    assert _probe(prefix)["compiled"] > MANY_TEXTS  # refused: every method compiled
    st = path.lstat()
    assert stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o644
    assert _probe(prefix)["compiled"] == 0  # the replacement is used


# Runs the real CLI (`python -m neuron_port HOOK`) once on the good file, then once per seeded corruption of
# it, each in a child forked from one process that has imported the CLI's own modules but not LibCST (each
# child imports LibCST and reads the file itself, as a fresh process does; a fork saves the interpreter's
# start). The corruptions are drawn from the seed whatever runs; with PER_KIND > 0 only the first PER_KIND of
# each kind run. Prints, as JSON, the clean run, each corruption's kind, run and whether the file was replaced,
# and a last run on the last replacement (and whether it left the file as it was).
CORRUPTIONS = r'''
import json, os, random, runpy, sys
import neuron_port.commands.entry, neuron_port.commands.rewrite_run
assert "libcst" not in sys.modules
path, count, seed, per_kind, argv = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]

def cli():
    sys.stdout.flush()
    sys.stderr.flush()
    with open("out", "w+b") as out, open("err", "w+b") as err:
        pid = os.fork()
        if pid == 0:
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            code = 70
            try:
                sys.argv = ["neuron-port", *argv]
                runpy.run_module("neuron_port", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        status = os.waitpid(pid, 0)[1]
        out.seek(0)
        err.seek(0)
        return [os.waitstatus_to_exitcode(status), out.read().decode("utf-8", "replace"),
                err.read().decode("utf-8", "replace")]

def corrupt(rng, good):
    kind = rng.choice(["bit", "bit", "bit", "bit", "byte", "header bit", "truncated", "inserted", "zeroed"])
    at = rng.randrange(len(good))
    data = bytearray(good)
    if kind == "bit":
        data[at] ^= 1 << rng.randrange(8)
    elif kind == "byte":
        data[at] = (data[at] + rng.randrange(1, 256)) % 256
    elif kind == "header bit":
        data[at % 120] ^= 1 << rng.randrange(8)
    elif kind == "truncated":
        del data[at:]
    elif kind == "inserted":
        data[at:at] = rng.randbytes(rng.randrange(1, 16))
    else:
        data[at:at + 32] = bytes(len(data[at:at + 32]))
    return kind, bytes(data)

clean = cli()
good = open(path, "rb").read()
rng = random.Random(seed)
cases = []
while len(cases) < count:
    kind, data = corrupt(rng, good)
    if data != good:
        cases.append((kind, data))
if per_kind:
    cases = [(kind, data) for i, (kind, data) in enumerate(cases)
             if [k for k, _ in cases[:i]].count(kind) < per_kind]
runs = []
for kind, data in cases:
    with open(path, "wb") as handle:
        handle.write(data)
    run = cli()
    runs.append({"kind": kind, "run": run, "replaced": open(path, "rb").read() != data})
before = os.stat(path)
last = cli()
after = os.stat(path)
kept = (before.st_ino, before.st_mtime_ns) == (after.st_ino, after.st_mtime_ns)  # the replacement is accepted
print(json.dumps({"clean": clean, "runs": runs, "last": last, "kept": kept}))
'''


CORRUPTION_KINDS = {"bit", "byte", "header bit", "truncated", "inserted", "zeroed"}


def test_random_corruptions_are_replaced_and_the_output_is_unchanged(prefix, tmp_path):
    """100 seeded corruptions, or in the suite the first two of each kind (12: every kind, bits at two
    random places of the file and two in its header)."""
    _probe(prefix)  # a good file
    path = _cache(_probe(prefix), prefix)
    (tmp_path / "train.py").write_text(CUDA_SCRIPT)
    per_kind = 0 if FULL_SWEEPS else 2
    done = subprocess.run([sys.executable, "-c", CORRUPTIONS, str(path), "100", "33", str(per_kind), *HOOK],
                          cwd=tmp_path, env=_env(prefix), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    clean = report["clean"]
    assert clean[0] == 1 and "NP103" in clean[2] and "+model" in clean[1], clean
    kinds = [r["kind"] for r in report["runs"]]
    assert set(kinds) == CORRUPTION_KINDS and len(kinds) == (100 if FULL_SWEEPS else 2 * len(CORRUPTION_KINDS))
    wrong = [(i, r["kind"], r["run"][0], r["run"][2][-300:]) for i, r in enumerate(report["runs"])
             if r["run"] != clean or not r["replaced"]]
    assert not wrong, wrong
    assert report["last"] == clean and report["kept"]  # the last replacement is a good file, used as it is


def test_a_temporary_file_a_killed_writer_left_is_removed_by_the_next_write(prefix):
    path = _cache(_probe(prefix, "plain"), prefix)
    orphan = path.parent / f".{path.name[:32]}.deadbeef.neuron-port.tmp"  # atomic.py's name, no live owner
    orphan.write_bytes(b"\0" * 4096)
    os.utime(orphan, (1, 1))  # older than any write takes
    path.unlink(missing_ok=True)
    _probe(prefix)
    assert path.is_file() and not orphan.exists()
