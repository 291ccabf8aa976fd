"""Discovery: the source files under the given paths, honouring .gitignore files and excludes.

Directories are walked without following symlinked folders (so loops cannot happen); file symlinks are
followed only when they point inside the walked tree. A path given on the command line whose target
(through symlinks) is outside the tree is refused (UsageError). Only regular files are taken: a FIFO,
device or socket named ``x.py`` is never opened (opening a FIFO for reading waits for a writer).
.gitignore lines are read as git reads them, with one warning naming file:line where pathspec would
refuse them: a lone ``!`` or a trailing backslash matches nothing, a reversed range ``[z-a]`` matches
its first character. Never fatal. Inside a git repository the repository's ``info/exclude`` and git's
global excludes file (``core.excludesFile``, by default ``$XDG_CONFIG_HOME/git/ignore``) apply too, with
git's precedence: the deepest .gitignore that has a say decides, then ``info/exclude``, then the global file.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

from neuron_port.atomic import TEMP_SUFFIX, seen_temp_files
from neuron_port.errors import UsageError
from neuron_port.rewrite.sources import SOURCE_SUFFIXES, file_type_name

# Warnings that are not about one file's result (a .gitignore line) go to the "neuron_port" logger: the CLI's
# stderr, the API's callers' logging. (logging, pathspec and git are imported by the walk of a folder only:
# files named on the command line, a pre-commit hook's, never need them.)

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


class _Gitignores:
    """Each folder's .gitignore and each repository's excludes files, read once per run (so a bad line
    warns once)."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.specs: dict[Path, Optional[IgnoreFile]] = {}
        self.repository_specs: dict[Path, list[IgnoreFile]] = {}

    def load(self, folder: Path) -> Optional["IgnoreFile"]:
        if folder not in self.specs:
            self.specs[folder] = self._read(folder / ".gitignore")
        return self.specs[folder]

    def repository(self, top: Path) -> list["IgnoreFile"]:
        """The specs of the repository whose work tree is ``top``, lowest precedence first: the global
        excludes file, then ``info/exclude``."""
        if top not in self.repository_specs:
            specs = []
            for ignore_file in (_global_excludes_file(top), _info_exclude_file(top)):
                spec = self._read(ignore_file) if ignore_file is not None else None
                if spec is not None:
                    specs.append(spec)
            self.repository_specs[top] = specs
        return self.repository_specs[top]

    def _read(self, ignore_file: Path) -> Optional["IgnoreFile"]:
        try:
            if not stat.S_ISREG(ignore_file.stat().st_mode):
                return None  # a FIFO named .gitignore is never opened
            lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return None
        kept = []
        for number, line in enumerate(lines, start=1):
            readable, problem = _git_line(line)
            if problem is not None:
                import logging
                logging.getLogger("neuron_port").warning("neuron-port: warning: %s:%d: `%s` %s",
                                                         _display(ignore_file, self.cwd), number, line, problem)
            if readable is not None:
                kept.append(readable)
        return IgnoreFile(kept)


class IgnoreFile:
    """One ignore file's lines, applied as git applies them: the last line that matches the path itself
    decides.

    pathspec also matches a line against everything below a folder it matches (``/*`` matches
    ``src/b.py`` through ``src``); git does not, and a file below an ignored folder is ignored only
    because git never enters the folder (the walk does the same). So where pathspec's regex marks a
    folder match (its ``ps_d`` group), only a match that ends with the path counts: ``/*`` with
    ``!/src/`` keeps ``src/b.py``, and a nested ``!deep/`` re-includes the folder ``deep`` but not
    ``deep/x.py`` that an outer ``*.py`` ignores, as ``git ls-files --others --exclude-standard`` says.
    A regex without that group (``*``, or any line under pathspec before 1.0) is taken at its word."""

    def __init__(self, lines: list[str]) -> None:
        import pathspec
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
        # the last line first; where pathspec marks a folder match, only a match of the whole path counts
        self.lines = [(p.include, _whole_path(p.regex)) for p in reversed(spec.patterns)
                      if p.include is not None and p.regex is not None]

    def verdict(self, rel: str, is_dir: bool) -> Optional[bool]:
        """True: ignored, False: re-included, None: no line of this file matches the path itself."""
        path = rel + "/" if is_dir else rel
        return next((include for include, regex in self.lines if regex.search(path)), None)


def _whole_path(regex: "re.Pattern[str]") -> "re.Pattern[str]":
    if "ps_d" not in regex.groupindex:
        return regex
    return re.compile(rf"(?:{regex.pattern})\Z", regex.flags)


def _git_dir(top: Path) -> Optional[Path]:
    """The repository's common git folder: ``.git`` itself, or for a linked work tree (``.git`` is a
    file saying ``gitdir: ...``) the folder its ``commondir`` names, where ``info/exclude`` lives."""
    marker = top / ".git"
    if marker.is_dir():
        return marker
    try:
        text = marker.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if not text.startswith("gitdir:"):
        return None
    git_dir = (top / text[len("gitdir:"):].strip()).resolve()
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return git_dir
    return (git_dir / common).resolve()


def _info_exclude_file(top: Path) -> Optional[Path]:
    git_dir = _git_dir(top)
    return git_dir / "info" / "exclude" if git_dir is not None else None


def _global_excludes_file(top: Path) -> Optional[Path]:
    """git's ``core.excludesFile`` as git itself resolves it (``~`` expanded, the user's and the system
    configuration), or its default ``$XDG_CONFIG_HOME/git/ignore``; None where git is not installed."""
    import shutil
    import subprocess
    git = shutil.which("git")
    if git is None:
        return None
    try:
        answer = subprocess.run([git, "config", "--type=path", "--get", "core.excludesFile"], cwd=top,
                                capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    if answer.returncode == 0 and answer.stdout.strip():
        return (top / answer.stdout.strip()).resolve()
    if answer.returncode not in (0, 1):  # 1: not set; anything else: git could not read its configuration
        return None
    config_home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(config_home) / "git" / "ignore"


# a bracket expression of a pattern: [...] or [!...] / [^...], where a "]" right after the opening is literal
BRACKET_RE = re.compile(r"\[[!^]?\]?[^\]]*\]")
RANGE_RE = re.compile(r"([^\\])-([^\\\]])")


def _git_line(line: str) -> tuple[Optional[str], Optional[str]]:
    """A .gitignore line as git reads it (None: it matches nothing), and what to warn about (None:
    nothing).

    A lone ``!`` and a trailing backslash match nothing in git; pathspec refuses them, so the line is
    dropped. A reversed range (``[z-a]``) is no error in git: its wildmatch compares each character of
    a bracket before it sees the ``-``, so ``[z-a]`` matches ``z`` alone; pathspec's regex refuses it, so
    it is read as git reads it."""
    import pathspec
    try:
        pathspec.GitIgnoreSpec.from_lines([line])
        return line, None
    except re.error:
        fixed = BRACKET_RE.sub(lambda bracket: RANGE_RE.sub(
            lambda r: r.group(1) if r.group(1) > r.group(2) else r.group(0), bracket.group(0)), line)
        try:
            pathspec.GitIgnoreSpec.from_lines([fixed])
            return fixed, f"has a reversed range; read as `{fixed}`, as git does"
        except (ValueError, re.error):
            return None, "cannot be read; ignored"
    except ValueError:  # GitIgnorePatternError (GitWildMatchPatternError before pathspec 1.0)
        return None, "matches nothing in git (a lone `!` or a trailing backslash); ignored"


def _excluded(rel: str, name: str, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(name, pattern) or fnmatch.fnmatch(rel, f"{pattern}/*"):
            return True
    return False


def excluded_file(given: str, exclude: Sequence[str], cwd: Optional[Path] = None) -> bool:
    """Whether a file named on the command line (or as --stdin-filename) is excluded, as ``discover``
    decides for a file given by name: the exclude patterns against its path and its name."""
    path = Path(given)
    return _excluded(_display(path, cwd or Path.cwd()), path.name, exclude)


def _lexical_root(path: Path) -> Path:
    """The tree a path given on the command line belongs to, found without following symlinks: the
    nearest folder above it with ``.git`` or ``pyproject.toml`` (the project), else its own folder."""
    parent = Path(os.path.abspath(path)).parent
    for folder in (parent, *parent.parents):
        if (folder / ".git").exists() or (folder / "pyproject.toml").is_file():
            return folder
    return parent


def _tree_roots(paths: Sequence[str]) -> list[Path]:
    """The resolved folders a given path may lead into: each given folder that is not itself a symlink,
    and the project (see _lexical_root) of each given file or symlink."""
    roots = []
    for given in paths:
        p = Path(given)
        roots.append(p.resolve() if p.is_dir() and not p.is_symlink() else _lexical_root(p).resolve())
    return roots


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def _explicit_problem(real: Path) -> Optional[str]:
    """Why a file given on the command line cannot be read as a source file (None: it can)."""
    try:
        mode = real.stat().st_mode
    except OSError as exc:
        return f"cannot stat: {exc.strerror or exc}"
    if not stat.S_ISREG(mode):
        return f"not a regular file ({file_type_name(mode)}); not read"
    return None


def discover(
    paths: Sequence[str],
    exclude: Sequence[str] = (),
    suffixes: Sequence[str] = SOURCE_SUFFIXES,
    cwd: Optional[Path] = None,
) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """Source files under ``paths`` and (path, reason) for paths that could not be used.

    Directories are walked without following symlinked folders (so loops cannot happen); file symlinks are
    followed only when they point inside the walked tree. ``.gitignore`` files are honoured per folder; files
    given explicitly are always taken unless excluded. Raises UsageError for a given path that leads, through
    a symlink, outside every given folder and project. Temporary files passed are noted (seen_temp_files)."""
    cwd = cwd or Path.cwd()
    seen_temp_files().clear()  # the walk notes the temporary files it passes (a writing run removes orphans)
    found: dict[Path, SourceFile] = {}
    problems: list[tuple[str, str]] = []
    gitignores = _Gitignores(cwd)
    roots = _tree_roots([given for given in paths if Path(given).exists()])
    for given in paths:
        p = Path(given)
        if not p.exists() and not p.is_symlink():
            problems.append((given, "no such file or directory"))
            continue
        if p.is_symlink() and not p.exists():
            problems.append((given, "broken symlink"))
            continue
        real = p.resolve()
        if not _inside(real, roots):
            raise UsageError(f"{given}: leads through a symlink to {real}, outside the tree; not followed "
                             "(symlinks are followed only to files inside the given folders or the project)")
        if not p.is_dir():
            if _excluded(_display(p, cwd), p.name, exclude):
                continue
            problem = _explicit_problem(real)
            if problem is not None:
                problems.append((given, problem))
                continue
            found.setdefault(real, SourceFile(_display(p.absolute(), cwd), real))
            continue
        root = real
        for file in _walk(root, exclude, suffixes, problems, cwd, gitignores):
            rel = file.relative_to(root)
            shown = _display(p.absolute() / rel, cwd)
            try:
                real_file = file.resolve(strict=True)
            except (OSError, RuntimeError):
                problems.append((shown, "cannot resolve symlink; not followed"))
                continue
            if file.is_symlink():
                try:
                    real_file.relative_to(root)
                except ValueError:
                    problems.append((shown, "symlink points outside the tree; not followed"))
                    continue
            found.setdefault(real_file, SourceFile(shown, real_file))
    return sorted(found.values(), key=lambda f: f.display), problems


def _is_regular(entry: os.DirEntry) -> bool:
    """A regular file (a symlink: its target is one); FIFOs, devices and sockets are skipped unopened."""
    try:
        return stat.S_ISREG(entry.stat(follow_symlinks=True).st_mode)
    except OSError:
        return False


def _walk(root: Path, exclude: Sequence[str], suffixes: Sequence[str], problems, cwd: Path,
          gitignores: _Gitignores) -> Iterator[Path]:
    # Lowest precedence first: the repository's excludes files, then the .gitignore files of parent
    # folders inside the repository, then (pushed while walking) those of the walked folders.
    ignores: list[tuple[Path, IgnoreFile]] = []
    parent = root
    chain = []
    while True:
        chain.append(parent)
        if (parent / ".git").exists():
            ignores.extend((parent, spec) for spec in gitignores.repository(parent))
            break
        if parent.parent == parent:
            break
        parent = parent.parent
    for folder in reversed(chain[1:]):
        spec = gitignores.load(folder)
        if spec is not None:
            ignores.append((folder, spec))

    def ignored(path: Path, is_dir: bool) -> bool:
        # as git: the most precise source with a matching line decides (a deeper `!name` re-includes)
        for base, spec in reversed(ignores):
            if base == path:
                continue  # a folder's own .gitignore is about what is below it
            try:
                rel = path.relative_to(base).as_posix()
            except ValueError:
                continue
            include = spec.verdict(rel, is_dir)
            if include is not None:
                return include
        return False

    # a root inside an ignored folder (`rewrite build/` with `build/` ignored): git lists nothing below it
    outer = chain[-1]  # the repository root (or the file system's, outside one)
    if any(ignored(folder, True) for folder in [root, *root.parents] if outer in folder.parents):
        return

    def walk(folder: Path) -> Iterator[Path]:
        spec = gitignores.load(folder)
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
                elif entry.name.endswith(TEMP_SUFFIX):
                    seen_temp_files().append(path)
                elif entry.name.endswith(tuple(suffixes)):
                    if entry.is_symlink():
                        try:
                            os.stat(entry.path)
                        except OSError as exc:
                            if exc.errno == errno.ELOOP:
                                problems.append((_display(path, cwd), "symlink loop; not followed"))
                            continue  # broken links are skipped
                    if not _is_regular(entry):
                        continue  # a folder link, FIFO, device or socket
                    if _excluded(rel, entry.name, exclude) or ignored(path, False):
                        continue
                    yield path
        finally:
            if pushed:
                ignores.pop()

    yield from walk(root)
