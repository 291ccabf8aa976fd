"""Discovery: the source files under the given paths, honouring .gitignore files and excludes.

Directories are walked without following symlinked folders (so loops cannot happen); file symlinks are
followed only when they point inside the walked tree.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import pathspec

from neuron_port.rewrite.sources import SOURCE_SUFFIXES

# Folders no one wants scanned (as ruff's defaults).
DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", ".eggs", "__pycache__",
    "__pypackages__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".neuron-port-cache",
    "node_modules", "site-packages", "build", "dist", "_build", "buck-out", ".ipynb_checkpoints",
)


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
