"""Importing the engine without compiling LibCST's dataclass methods on every start.

`import libcst` defines ~290 frozen dataclasses, and for each the dataclasses module writes the source
of its ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__`` and ``__delattr__`` and
compiles it with ``exec()``: over half of the import, ~55 of ~100 ms of the pre-commit hook's start
(bench/README.md). The texts are the same on every start, so while the engine is imported
(``compiled_once()``), dataclasses' ``exec`` takes the code object of a text it has seen from a file
kept beside this module's bytecode, and compiles the others as before. The file lives where Python
keeps this module's ``.pyc`` and under the same rules: under ``sys.pycache_prefix`` when that is set,
not written when ``sys.dont_write_bytecode``, one per interpreter's bytecode (``MAGIC_NUMBER``, cache
tag, optimisation level); whoever can write it can already write the install's code. A code object is
what ``compile()`` makes of the text, so the classes are the same ones: the test compares every
method of every LibCST class with an import that compiles them (tests/rewrite/test_dataclass_code.py).
"""

from __future__ import annotations

import builtins
import dataclasses
import marshal
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import MAGIC_NUMBER, cache_from_source
from types import CodeType
from typing import Any, Optional

_HEADER = MAGIC_NUMBER + b"neuron-port dataclass code 1\n"
# A file holding more texts than this was filled by different imports: it is written afresh with the texts
# of the current import only, so it cannot grow without bound.
_MAX_TEXTS = 5000


def cache_path() -> Optional[str]:
    """Where the code objects are kept, or None when this interpreter keeps no bytecode."""
    tag = sys.implementation.cache_tag
    if tag is None:
        return None
    try:
        pyc = cache_from_source(__file__)
    except (NotImplementedError, ValueError):
        return None
    level = sys.flags.optimize
    return os.path.join(os.path.dirname(pyc), f"dataclass-code.{tag}{f'.opt-{level}' if level else ''}.marshal")


def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return {}
    if not data.startswith(_HEADER):
        return {}
    try:
        codes = marshal.loads(memoryview(data)[len(_HEADER):])
    except (EOFError, ValueError, TypeError):  # a truncated or damaged file: compiled afresh, then replaced
        return {}
    return codes if type(codes) is dict else {}


def _write(path: str, codes: dict[str, CodeType]) -> None:
    """Replaces the file at once (a reader sees the old file or the new one); a failure leaves it as it was."""
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "wb") as handle:
            handle.write(_HEADER + marshal.dumps(codes))
        os.replace(temporary, path)
    except (OSError, ValueError):
        try:
            os.unlink(temporary)
        except OSError:
            pass


@contextmanager
def compiled_once() -> Iterator[None]:
    """Within this block, dataclasses compiles each method text once per install (see the module's text)."""
    path = cache_path()
    if path is None or dataclasses.__dict__.get("exec") is not None:  # no bytecode here, or already inside
        yield
        return
    loaded: list[dict[str, Any]] = []  # the file, read at the first class made: an import of nothing new reads nothing
    used: dict[str, CodeType] = {}
    compiled: list[str] = []

    def exec_known(source: Any, globals: Any = None, locals: Any = None) -> None:
        if type(source) is str:
            if not loaded:
                loaded.append(_load(path))
            code = loaded[0].get(source)
            if type(code) is not CodeType:
                # what exec() compiles: the flags of dataclasses.py (no __future__ imports), not this module's
                code = compile(source, "<string>", "exec", dont_inherit=True)
                compiled.append(source)
            used[source] = code
            source = code
        builtins.exec(source, globals, locals)

    dataclasses.exec = exec_known  # type: ignore[attr-defined]  # a module global: found before the builtin
    try:
        yield
    finally:
        del dataclasses.exec  # type: ignore[attr-defined]
    if compiled and not sys.dont_write_bytecode:
        merged = {text: code for text, code in loaded[0].items() if type(code) is CodeType} | used
        _write(path, merged if len(merged) <= _MAX_TEXTS else used)
