"""Source files as text: what kind a file is, reading its bytes (regular files only), decoding with its own
encoding (BOM, PEP 263 cookie) and encoding back the same way. It only reads and decodes: the write step
(the writable check, the atomic write, the diff shown instead of a write) is neuron_port/rewrite/writer.py.

Nothing of the user's is lost: a file is read as bytes and decoded with its own encoding, and written
back (by neuron_port/rewrite/writer.py through neuron_port/atomic.py) with the same encoding, BOM and
newlines (the CST keeps them; the one it drops, a lone CR ending the file, is put back by
``keep_final_cr``). A file whose encoding does not give its bytes back (iso2022_jp, utf-7: decoding then
encoding changes bytes outside the edit) is never rewritten (``DecodedSource.round_trips``).
"""

from __future__ import annotations

import codecs
import io
import os
import re
import stat
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

# Besides Python: notebooks, and the launch scripts and configs of neuron_port/rewrite/line_files.py. A name
# matches when it ends with one of these (so "Makefile" matches the file Makefile).
NOTEBOOK_SUFFIXES = (".ipynb",)
LAUNCH_SUFFIXES: dict[str, str] = {
    ".sh": "shell", ".bash": "shell", ".mk": "make", "Makefile": "make", "makefile": "make",
    "GNUmakefile": "make", ".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml",
}
# CUDA C++ sources: discovered and reported once per file (NP709, neuron_port/rewrite/cuda_files.py), never parsed.
CUDA_SUFFIXES = (".cu", ".cuh")
SOURCE_SUFFIXES = (".py",) + NOTEBOOK_SUFFIXES + tuple(LAUNCH_SUFFIXES) + CUDA_SUFFIXES


# The interpreter of a shebang line (`#!/bin/bash`, `#!/usr/bin/env -S python3 -u`), for scripts without
# a suffix; versions such as python3.12 or bash5 count.
_SHEBANG_KINDS = {"python": "python", "sh": "shell", "bash": "shell", "zsh": "shell", "dash": "shell",
                  "ksh": "shell", "make": "make"}
_INTERPRETER = re.compile(r"([a-z]+?)[\d.]*")
SHEBANG_BYTES = 256


def file_kind(name: str, head: Optional[str] = None) -> str:
    """"python", "notebook", "cuda" (a .cu / .cuh source), or a launch/config kind ("shell", "make", "yaml", "json", "toml"), by the
    name's suffix. A name without one (``bin/train``, as pre-commit hands over executable scripts) is read
    by its shebang: ``head`` is the start of the text, or the first bytes of the file ``name`` are read
    (a regular file only). Anything else is Python (a file given explicitly is taken as Python source
    whatever its name)."""
    if name.endswith(".py"):
        return "python"
    if name.endswith(NOTEBOOK_SUFFIXES):
        return "notebook"
    if name.endswith(CUDA_SUFFIXES):
        return "cuda"
    for suffix, kind in LAUNCH_SUFFIXES.items():
        if name.endswith(suffix):
            return kind
    if "." not in os.path.basename(name):
        return shebang_kind(_file_head(name) if head is None else head) or "python"
    return "python"


def shebang_kind(head: str) -> Optional[str]:
    """The kind a ``#!`` first line names (None: no shebang, or an interpreter neuron-port does not read)."""
    first = head.split("\n", 1)[0]
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if words and os.path.basename(words[0]) == "env":  # env [-S] [-i] [NAME=value]... program
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    match = _INTERPRETER.fullmatch(os.path.basename(words[0])) if words else None
    return _SHEBANG_KINDS.get(match.group(1)) if match else None


def _file_head(name: str) -> str:
    try:  # non-blocking and fstat-checked, as read_regular_bytes: a FIFO named `train` is never waited on
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return ""
        return handle.read(SHEBANG_BYTES).decode("latin-1")


class SourceError(Exception):
    """A file that cannot be read as Python source; the message says why (and where)."""


@dataclass(frozen=True)
class DecodedSource:
    text: str
    encoding: str  # a Python codec name; "utf-8-sig" when the file starts with a BOM
    round_trips: bool = True  # encoding ``text`` gives the file's bytes back (stateful codecs may not)

    def require_round_trip(self, path: str) -> None:
        """Raise SourceError when rewriting the file would change bytes outside the edit."""
        if not self.round_trips:
            raise SourceError(
                f"{path}: its encoding {self.encoding} does not give the same bytes back when re-encoded "
                "(bytes outside the fix would change); not rewritten. Convert it to UTF-8 to apply fixes"
            )


# Strict UTF-8 decoding is a bijection, so only other codecs need the (cheap) re-encoding check.
_EXACT_CODECS = frozenset({"utf-8", "utf-8-sig"})


def decode_source(raw: bytes, path: str) -> DecodedSource:
    if b"\0" in raw:
        raise SourceError(f"{path}: not a text file (contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as exc:
        raise SourceError(f"{path}: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    try:
        codecs.lookup(encoding)
        text = raw.decode(encoding)
    except LookupError:
        raise SourceError(f"{path}: unknown encoding {encoding!r} in the coding cookie") from None
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise SourceError(
            f"{path}:{line}: cannot decode byte {raw[exc.start]:#04x} as {encoding} ({exc.reason})"
        ) from None
    round_trips = True
    if codecs.lookup(encoding).name not in _EXACT_CODECS:
        try:
            round_trips = text.encode(encoding) == raw
        except UnicodeEncodeError:
            round_trips = False
    return DecodedSource(text=text, encoding=encoding, round_trips=round_trips)


def keep_final_cr(old: str, new: str) -> str:
    """``new`` with the lone CR that ended ``old`` (old Mac line endings) put back: LibCST drops a CR
    that is the file's last character. Only that character is touched."""
    if old.endswith("\r") and not new.endswith("\r"):
        return new + "\r"
    return new


def encode_source(text: str, encoding: str, path: str) -> bytes:
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise SourceError(f"{path}: the rewritten text cannot be encoded as {encoding}: {exc.reason}") from None


def file_type_name(mode: int) -> str:
    """What a non-regular file is, for messages."""
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "an unknown kind of file")


def read_regular_bytes(path: Path, display: str) -> bytes:
    """The bytes of a regular file. Anything else (a FIFO, device, socket, directory) is a SourceError
    and is never read: stat first, and the open is non-blocking and checked again with fstat, so a path
    that became a FIFO in between cannot make the run wait for a writer."""
    try:
        mode = path.stat().st_mode
        if stat.S_ISREG(mode):
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as handle:
                mode = os.fstat(handle.fileno()).st_mode
                if stat.S_ISREG(mode):
                    return handle.read()
    except OSError as exc:
        raise SourceError(f"{display}: cannot read: {exc.strerror or exc}") from None
    raise SourceError(f"{display}: not a regular file ({file_type_name(mode)}); not read")


def read_source(path: Path, display: str) -> DecodedSource:
    return decode_source(read_regular_bytes(path, display), display)
