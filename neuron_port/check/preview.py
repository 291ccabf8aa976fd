"""`check --preview`: a temporary copy of the tree with the Python files rewritten, everything else
reached through symlinks, plus the line map that sends runtime sites back to the user's own lines."""

from __future__ import annotations

import difflib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from neuron_port.rewrite.discovery import DEFAULT_EXCLUDES


@dataclass
class PreviewTree:
    root: Path  # the temporary copy
    original_root: Path
    # relative path -> list mapping rewritten line number (index) to original line number
    line_maps: dict[str, list[int]] = field(default_factory=dict)

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


def make_preview(original_root: Path, rewritten: dict[Path, bytes], destination: Path) -> PreviewTree:
    """Copy ``original_root`` to ``destination``: .py files as real files (so ``__file__`` and relative
    imports resolve inside the copy), rewritten files (also notebooks, launch scripts and configs) with
    their new content, other files and tool folders as links."""
    original_root = original_root.resolve()
    tree = PreviewTree(root=destination, original_root=original_root)
    destination.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(original_root):
        here = Path(dirpath)
        rel_dir = here.relative_to(original_root)
        target_dir = destination / rel_dir
        target_dir.mkdir(parents=True, exist_ok=True)
        kept = []
        for name in dirnames:
            src = here / name
            if name in DEFAULT_EXCLUDES or src.is_symlink():
                os.symlink(src, target_dir / name, target_is_directory=True)
            else:
                kept.append(name)
        dirnames[:] = kept
        for name in filenames:
            src = here / name
            dst = target_dir / name
            real = src.resolve()
            if real in rewritten and not src.is_symlink():  # .py, notebooks, launch scripts, configs
                new = rewritten[real]
                dst.write_bytes(new)
                shutil.copymode(src, dst)  # launch scripts stay executable
                if name.endswith(".py"):
                    old = src.read_bytes()
                    rel = (rel_dir / name).as_posix()
                    tree.line_maps[rel] = line_map(old.decode("utf-8", "replace"), new.decode("utf-8", "replace"))
            elif name.endswith(".py") and not src.is_symlink():
                shutil.copy2(src, dst)
            else:
                os.symlink(src, dst)
    return tree
