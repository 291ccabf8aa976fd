"""Importing the engine without compiling LibCST's dataclass methods on every start.

`import libcst` defines ~290 frozen dataclasses, and for each the dataclasses module writes the source
of its ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__`` and ``__delattr__`` and
compiles it with ``exec()``: over half of the import, ~55 of ~100 ms of the pre-commit hook's start
(bench/README.md). The texts are the same on every start, so while the engine is imported
(``compiled_once()``), dataclasses' ``exec`` takes the code object of a text it has seen from a file
kept beside this module's bytecode, and compiles the others as before. The file lives where Python
keeps this module's ``.pyc``: under ``sys.pycache_prefix`` when that is set, not written when
``sys.dont_write_bytecode``, one per interpreter's bytecode (``MAGIC_NUMBER``, cache tag, optimisation
level). A code object is what ``compile()`` makes of the text, so the classes are the same ones: the
test compares every method of every LibCST class with an import that compiles them
(tests/rewrite/test_dataclass_code.py).

The file is code this process runs, so it is only used when nobody but this user can have written it:
  * it must be a regular file (opened with O_NOFOLLOW) owned by this user and writable by no one else;
    it is written 0644 minus the umask (never group or world writable, whatever the umask: as the
    ``.pyc`` files beside it), through a new temporary file renamed over it;
  * its content carries an HMAC-SHA256, checked before anything is unmarshalled, under the per-user
    secret key of the result cache (``~/.cache/neuron-port/key``, 0600, rewrite/cache_files.py). The
    MAC is in the file but its key is not: whoever can write the file or its folder (a group-writable
    ``__pycache__``, another user of a shared install) cannot make a MAC this user accepts, so an
    edited, planted or damaged file is never unmarshalled or run; it is compiled afresh and replaced.
    (A plain hash beside the file would be rewritten along with it; one in our package cannot be known
    in advance, the texts depend on Python's and LibCST's versions.)
A file that fails any check is replaced where this user may write it; where not (an install of
another user) every start compiles, as without the file.
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import hmac
import marshal
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import MAGIC_NUMBER, cache_from_source
from types import CodeType
from typing import Any, Optional

from neuron_port.rewrite.cache_files import CacheRefused, load_secret_key

_HEADER = MAGIC_NUMBER + b"neuron-port dataclass code 2\n"
_MAC_HEX = 64  # HMAC-SHA256 in hex, then a newline, then the marshalled texts
_BODY_AT = len(_HEADER) + _MAC_HEX + 1
_MAX_BYTES = 64 * 2**20  # ~1 MB is normal; more than this is not ours
# A file holding more texts than this was filled by different imports: it is written afresh with the texts
# of the current import only, so it cannot grow without bound.
_MAX_TEXTS = 5000
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # NONBLOCK: a FIFO
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_NOT_OTHERS = stat.S_IWGRP | stat.S_IWOTH


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


def _secret(create: bool) -> Optional[bytes]:
    try:
        return load_secret_key(create=create)
    except (CacheRefused, OSError, RuntimeError):  # no usable key (RuntimeError: no home): compile, keep nothing
        return None


def _mac(key: bytes, path: str, body: bytes) -> bytes:
    # the file's name is signed too: a file of another interpreter or optimisation level is not this one
    mac = hmac.new(key, _HEADER + os.path.basename(path).encode() + b"\0", hashlib.sha256)
    mac.update(body)
    return mac.hexdigest().encode("ascii")


def trusted_bytes(path: str) -> Optional[bytes]:
    """The marshalled texts of the file at ``path`` when it passes every check of the module's text (a
    regular file of this user that no one else may write, this format, a MAC under this user's key),
    else None. Nothing of the file is unmarshalled here."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError:  # missing, or a symbolic link (ELOOP)
        return None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & _NOT_OTHERS
                or not _BODY_AT <= st.st_size <= _MAX_BYTES):
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if not data.startswith(_HEADER) or data[_BODY_AT - 1:_BODY_AT] != b"\n":
        return None
    key = _secret(create=False)
    body = data[_BODY_AT:]
    if key is None or not hmac.compare_digest(data[len(_HEADER):_BODY_AT - 1], _mac(key, path, body)):
        return None
    return body


def _load(path: str) -> dict[str, Any]:
    body = trusted_bytes(path)
    if body is None:
        return {}
    try:  # signed by this user's own run, so whole: a failure here is a Python that reads it otherwise
        codes = marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return {}
    return codes if type(codes) is dict else {}


def _write(path: str, codes: dict[str, CodeType]) -> None:
    """Replaces the file at once (a reader sees the old file or the new one); a failure leaves it as it was."""
    key = _secret(create=True)
    if key is None:
        return
    from pathlib import Path

    from neuron_port.atomic import remove_stale_temp_files, temp_prefix, temp_suffix

    body = marshal.dumps(codes)
    folder, name = os.path.split(path)
    # atomic.py's temporary names: one that a killed run left (~1 MB) is removed by the next write
    temporary = os.path.join(folder, f"{temp_prefix(name)}{os.urandom(4).hex()}{temp_suffix()}")
    try:
        os.makedirs(folder, exist_ok=True)
        # O_EXCL | O_NOFOLLOW: never through a link planted at the name; 0644 minus the umask, and the
        # group's and others' write bits cleared whatever the folder's default ACL gave
        with os.fdopen(os.open(temporary, _CREATE_FLAGS, 0o644), "wb") as handle:
            os.fchmod(handle.fileno(), stat.S_IMODE(os.fstat(handle.fileno()).st_mode) & ~_NOT_OTHERS)
            handle.write(_HEADER + _mac(key, path, body) + b"\n" + body)
        os.replace(temporary, path)
        remove_stale_temp_files(Path(path))
    except BaseException as exc:  # whatever failed, no temporary file is left
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if not isinstance(exc, (OSError, ValueError)):
            raise


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
