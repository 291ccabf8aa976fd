"""File handling: discovery (honouring .gitignore and excludes), decoding and atomic writes.

Nothing of the user's is lost: a file is read as bytes and decoded with its own encoding (BOM, PEP 263
cookie), written back with the same encoding, BOM and newlines (the CST keeps them), through a
temporary file in the same folder that is renamed over the original, with the original's mode.
"""

from __future__ import annotations

import codecs
import fnmatch
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import pathspec

# Folders no one wants scanned (as ruff's defaults).
DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", ".eggs", "__pycache__",
    "__pypackages__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".neuron-port-cache",
    "node_modules", "site-packages", "build", "dist", "_build", "buck-out", ".ipynb_checkpoints",
)
# Besides Python: notebooks, and the launch scripts and configs of neuron_port/launch_configs.py. A name
# matches when it ends with one of these (so "Makefile" matches the file Makefile).
NOTEBOOK_SUFFIXES = (".ipynb",)
LAUNCH_SUFFIXES: dict[str, str] = {
    ".sh": "shell", ".bash": "shell", ".mk": "make", "Makefile": "make", "makefile": "make",
    "GNUmakefile": "make", ".yaml": "yaml", ".yml": "yaml", ".json": "json", ".toml": "toml",
}
SOURCE_SUFFIXES = (".py",) + NOTEBOOK_SUFFIXES + tuple(LAUNCH_SUFFIXES)


def file_kind(name: str) -> str:
    """"python", "notebook", or a launch/config kind ("shell", "make", "yaml", "json", "toml"). Anything
    else is Python (a file given explicitly is taken as Python source whatever its name)."""
    if name.endswith(".py"):
        return "python"
    if name.endswith(NOTEBOOK_SUFFIXES):
        return "notebook"
    for suffix, kind in LAUNCH_SUFFIXES.items():
        if name.endswith(suffix):
            return kind
    return "python"


class SourceError(Exception):
    """A file that cannot be read as Python source; the message says why (and where)."""


@dataclass(frozen=True)
class DecodedSource:
    text: str
    encoding: str  # a Python codec name; "utf-8-sig" when the file starts with a BOM


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
    return DecodedSource(text=text, encoding=encoding)


def encode_source(text: str, encoding: str, path: str) -> bytes:
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise SourceError(f"{path}: the rewritten text cannot be encoded as {encoding}: {exc.reason}") from None


def read_source(path: Path, display: str) -> DecodedSource:
    try:
        raw = path.read_bytes()
    except IsADirectoryError:
        raise SourceError(f"{display}: is a directory") from None
    except OSError as exc:
        raise SourceError(f"{display}: cannot read: {exc.strerror or exc}") from None
    return decode_source(raw, display)


def check_writable(path: Path, display: str) -> None:
    try:
        st = path.stat()
    except OSError as exc:
        raise SourceError(f"{display}: cannot stat: {exc.strerror or exc}") from None
    if not st.st_mode & stat.S_IWUSR:
        raise SourceError(f"{display}: file is read-only; not rewritten (make it writable to apply fixes)")
    if not os.access(path.parent, os.W_OK):
        raise SourceError(f"{display}: its folder is not writable; not rewritten")


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` atomically, keeping its mode. Either the old or the new file exists."""
    st = path.stat()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".neuron-port.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        try:
            os.chown(tmp, st.st_uid, st.st_gid)
        except OSError:
            pass  # not permitted for other owners unless root; the mode is what matters
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# -- discovery -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SourceFile:
    display: str  # path shown to the user (relative to the working directory when possible)
    real: Path  # resolved path (symlinks followed) used for reading and writing


def _display(path: Path, cwd: Path) -> str:
    """Relative to the working directory when the path is inside it, else absolute."""
    if not path.is_absolute():
        return str(path)
    try:
        return path.relative_to(cwd).as_posix()
    except ValueError:
        return str(path)


def _load_gitignore(folder: Path) -> Optional[pathspec.PathSpec]:
    ignore_file = folder / ".gitignore"
    try:
        lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return pathspec.PathSpec.from_lines("gitwildmatch", lines)


def _excluded(rel: str, name: str, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(rel, f"{pattern}/*"):
            return True
    return False


def discover(
    paths: Sequence[str],
    exclude: Sequence[str] = (),
    suffixes: Sequence[str] = SOURCE_SUFFIXES,
    cwd: Optional[Path] = None,
) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """Source files under ``paths`` and (path, reason) for paths that could not be used.

    Directories are walked without following symlinked folders (so loops cannot happen); file
    symlinks are followed only when they point inside the walked tree. ``.gitignore`` files are
    honoured per folder; files given explicitly are always taken unless excluded.
    """
    cwd = cwd or Path.cwd()
    found: dict[Path, SourceFile] = {}
    problems: list[tuple[str, str]] = []
    for given in paths:
        p = Path(given)
        if not p.exists() and not p.is_symlink():
            problems.append((given, "no such file or directory"))
            continue
        if p.is_file():
            if p.is_symlink() and not p.exists():
                problems.append((given, "broken symlink"))
                continue
            real = p.resolve()
            if _excluded(_display(p, cwd), p.name, exclude):
                continue
            found.setdefault(real, SourceFile(_display(p.absolute(), cwd), real))
            continue
        if p.is_symlink() and not p.exists():
            problems.append((given, "broken symlink"))
            continue
        root = p.resolve()
        for file in _walk(root, exclude, suffixes, problems, cwd):
            rel = file.relative_to(root)
            shown = _display(p.absolute() / rel, cwd)
            try:
                real = file.resolve(strict=True)
            except (OSError, RuntimeError):
                problems.append((shown, "cannot resolve symlink; not followed"))
                continue
            if file.is_symlink():
                try:
                    real.relative_to(root)
                except ValueError:
                    problems.append((shown, "symlink points outside the tree; not followed"))
                    continue
            found.setdefault(real, SourceFile(shown, real))
    return sorted(found.values(), key=lambda f: f.display), problems


def _walk(root: Path, exclude: Sequence[str], suffixes: Sequence[str], problems, cwd: Path) -> Iterator[Path]:
    ignores: list[tuple[Path, pathspec.PathSpec]] = []
    # .gitignore files of parent folders inside the repository also apply
    parent = root
    chain = []
    while True:
        chain.append(parent)
        if (parent / ".git").exists() or parent.parent == parent:
            break
        parent = parent.parent
    for folder in reversed(chain[1:]):
        spec = _load_gitignore(folder)
        if spec is not None:
            ignores.append((folder, spec))

    def ignored(path: Path, is_dir: bool) -> bool:
        for base, spec in ignores:
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            if spec.match_file(rel + ("/" if is_dir else "")):
                return True
        return False

    def walk(folder: Path) -> Iterator[Path]:
        spec = _load_gitignore(folder)
        pushed = spec is not None
        if pushed:
            ignores.append((folder, spec))
        try:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError as exc:
                problems.append((_display(folder, cwd), f"cannot list: {exc.strerror or exc}"))
                return
            for entry in entries:
                path = Path(entry.path)
                rel = path.relative_to(root).as_posix()
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in DEFAULT_EXCLUDES or _excluded(rel, entry.name, exclude) or ignored(path, True):
                        continue
                    yield from walk(path)
                elif entry.name.endswith(tuple(suffixes)):
                    if entry.is_symlink():
                        try:
                            if not entry.is_file():
                                continue  # broken link or a link to a folder
                        except OSError:
                            problems.append((_display(path, cwd), "symlink loop; not followed"))
                            continue
                    if _excluded(rel, entry.name, exclude) or ignored(path, False):
                        continue
                    yield path
        finally:
            if pushed:
                ignores.pop()

    yield from walk(root)
