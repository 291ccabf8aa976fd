"""`check --preview`: a temporary copy of the tree with the rewrites applied, plus the line map that sends
runtime sites back to the user's own lines.

The copy is a real copy, so the command can change nothing of the project: each file is cloned
(copy-on-write, FICLONE, where the filesystem offers it: instant and free) or else copied, up to
NEURON_PORT_PREVIEW_MAX_COPY_MB of copied bytes (default 2048); a bigger project is refused with a
message naming the largest files, rather than linked (a link would let writes through). Symbolic
links are kept as links: into the tree they point to the copy's counterpart (dangling if that is in a
skipped tool folder), out of it to the same place as before (outside the project); a loop or a
dangling link is copied as it is (a loop is reported).
Tool folders are skipped, not copied: version control (.git ...), caches (__pycache__ ...) and
environments (.venv, venv, any folder with a pyvenv.cfg, node_modules ...) are not the project's
code or data, can be huge, and regenerate; a command whose program lies in one (.venv/bin/python) runs
it from the project (``run_from_original``). Build outputs (build/, dist/) are copied like the rest.
"""

from __future__ import annotations

import difflib
import errno
import fcntl
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

VCS_FOLDERS = {".git", ".hg", ".svn", ".bzr"}
CACHE_FOLDERS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".neuron-port-cache",
                 ".ipynb_checkpoints"}
ENVIRONMENT_FOLDERS = {".venv", "venv", ".tox", ".nox", "__pypackages__", "site-packages", "node_modules", ".eggs"}
SKIPPED_FOLDERS = VCS_FOLDERS | CACHE_FOLDERS | ENVIRONMENT_FOLDERS
DEFAULT_MAX_COPY_MB = 2048
FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)


class PreviewError(Exception):
    """The preview copy cannot be made (the message names the path)."""


@dataclass
class PreviewTree:
    root: Path  # the temporary copy
    original_root: Path
    # relative path -> list mapping rewritten line number (index) to original line number
    line_maps: dict[str, list[int]] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)  # (relative path, what): links kept as they are
    copied_bytes: int = 0  # bytes copied (clones cost nothing)

    def original_line(self, rel: str, line: int) -> int:
        mapping = self.line_maps.get(rel)
        if mapping is None or not (0 < line < len(mapping)):
            return line
        return mapping[line]

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def line_map(old: str, new: str) -> list[int]:
    """``result[new_line] = old_line`` (1-based; index 0 unused) for a rewrite of ``old`` into ``new``."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    mapping = [0] * (len(new_lines) + 1)
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for j in range(j1, j2):
            if tag == "equal":
                i = i1 + (j - j1)
            elif tag == "replace":
                i = min(i1 + (j - j1), i2 - 1)
            else:  # inserted lines (e.g. an added import) belong to the line they were inserted at
                i = max(min(i1, len(old_lines) - 1), 0)
            mapping[j + 1] = i + 1
    return mapping


def max_copy_bytes() -> int:
    value = os.environ.get("NEURON_PORT_PREVIEW_MAX_COPY_MB", str(DEFAULT_MAX_COPY_MB))
    try:
        return int(float(value) * 1024 * 1024)
    except ValueError:
        raise PreviewError(f"NEURON_PORT_PREVIEW_MAX_COPY_MB={value!r}: not a number of megabytes") from None


def is_skipped_folder(folder: Path) -> bool:
    return folder.name in SKIPPED_FOLDERS or (folder / "pyvenv.cfg").is_file()


def make_preview(original_root: Path, rewritten: dict[Path, bytes], destination: Path) -> PreviewTree:
    """Copy ``original_root`` to ``destination`` (see the module's docstring): rewritten files (.py,
    notebooks, launch scripts, configs) with their new content, other files cloned or copied, links
    kept pointing where they did (into the copy for targets inside the tree), tool folders skipped.
    Raises PreviewError when the copy is too big to make without copy-on-write, or cannot be written."""
    original_root = original_root.resolve()
    tree = PreviewTree(root=destination, original_root=original_root)
    budget = max_copy_bytes()
    destination.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(original_root):
        here = Path(dirpath)
        rel_dir = here.relative_to(original_root)
        target_dir = destination / rel_dir
        kept = []
        for name in dirnames:
            src = here / name
            if src.is_symlink():
                _copy_link(src, target_dir / name, tree)
            elif not is_skipped_folder(src):
                kept.append(name)
                _do(src, lambda: (target_dir / name).mkdir())
        dirnames[:] = kept
        for name in filenames:
            src = here / name
            dst = target_dir / name
            try:
                mode = src.lstat().st_mode
            except OSError:
                continue  # gone meanwhile
            if stat.S_ISLNK(mode):
                _copy_link(src, dst, tree)
            elif not stat.S_ISREG(mode):
                continue  # a socket or a FIFO belongs to a running program, not to the project
            elif src in rewritten:
                new = rewritten[src]
                _do(src, lambda: (dst.write_bytes(new), shutil.copymode(src, dst)))  # scripts stay executable
                if name.endswith(".py"):
                    old = src.read_bytes()
                    rel = (rel_dir / name).as_posix()
                    tree.line_maps[rel] = line_map(old.decode("utf-8", "replace"), new.decode("utf-8", "replace"))
            else:
                if not _do(src, lambda: _clone(src, dst)):
                    tree.copied_bytes += src.stat().st_size
                    if tree.copied_bytes > budget:
                        raise PreviewError(_too_big(original_root, budget))
    return tree


def _do(src: Path, action):  # type: ignore[no-untyped-def]
    try:
        return action()
    except OSError as exc:
        raise PreviewError(f"{src}: cannot copy it into the --preview copy: {exc.strerror or exc}") from None


def _clone(src: Path, dst: Path) -> bool:
    """Copy ``src`` to ``dst`` with its mode and times; True when the filesystem cloned it (no bytes copied)."""
    with open(src, "rb") as source, open(dst, "wb") as target:
        try:
            fcntl.ioctl(target.fileno(), FICLONE, source.fileno())
            cloned = True
        except OSError:  # not offered here (ext4, tmpfs, another filesystem): a plain in-kernel copy
            cloned = False
    if not cloned:
        shutil.copyfile(src, dst)
    shutil.copystat(src, dst)
    return cloned


def _copy_link(src: Path, dst: Path, tree: PreviewTree) -> None:
    rel = src.relative_to(tree.original_root).as_posix()
    try:
        real = src.resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # RuntimeError: Python < 3.13 reports a loop so
        if isinstance(exc, RuntimeError) or getattr(exc, "errno", None) == errno.ELOOP:
            tree.problems.append((rel, "symbolic link loop"))  # a dangling link is common and harmless
        _do(src, lambda: os.symlink(os.readlink(src), dst))  # as it is: the program sees what it would see
        return
    try:
        inside = real.relative_to(tree.original_root)
    except ValueError:
        inside = None
    # into the project: the copy's counterpart (which a skipped tool folder lacks: then the link dangles,
    # as writes through it must not reach the original); outside it: the same place as before
    target = os.path.relpath(tree.root / inside, dst.parent) if inside is not None else str(real)
    _do(src, lambda: os.symlink(target, dst))


def _too_big(root: Path, budget: int) -> str:
    sizes = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not is_skipped_folder(Path(dirpath, d))]
        for name in filenames:
            try:
                sizes.append((os.lstat(os.path.join(dirpath, name)).st_size, os.path.join(dirpath, name)))
            except OSError:
                pass
    largest = ", ".join(f"{os.path.relpath(p, root)} ({size / 2**20:.0f} MB)" for size, p in sorted(sizes)[::-1][:3])
    return (f"{root}: --preview copies the project, and this filesystem cannot clone files, so at most "
            f"{budget / 2**20:.0f} MB are copied (NEURON_PORT_PREVIEW_MAX_COPY_MB); the largest files: {largest}. "
            "Move large data out of the project folder, raise the limit, or run without --preview")


def run_from_original(argv: list[str], original_root: Path, tree: PreviewTree) -> list[str]:
    """A program named by a relative path that the copy lacks (.venv/bin/python: tool folders are not
    copied) runs from the project; a venv's interpreter finds its packages from its own path."""
    program = argv[0]
    if os.sep in program and not os.path.isabs(program) and not (tree.root / program).exists() \
            and (original_root / program).exists():
        return [str(original_root.resolve() / program), *argv[1:]]
    return argv
