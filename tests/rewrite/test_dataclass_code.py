"""rewrite/dataclass_code.py: the engine's import takes LibCST's dataclass methods from a file of code
objects, and gets the same methods as an import that compiles them; a damaged file is compiled afresh and
replaced; nothing is written where Python writes no bytecode; the hook writes the file once.

Each run is a fresh interpreter with its own PYTHONPYCACHEPREFIX (where the file goes, as .pyc files do)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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
