"""User sites in the report: event sites (absolute paths, possibly in a ``--preview`` copy) mapped to
paths relative to the checked folder and, for a preview run, back to the user's original lines."""

from __future__ import annotations

import linecache
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from neuron_port.check.events import Site
from neuron_port.check.preview import PreviewTree

SiteKey = tuple[str, int]


@dataclass(frozen=True)
class UserSite:
    """A site as the report shows it: ``path`` relative to the checked folder when it is inside it."""

    path: str
    line: int
    function: Optional[str]
    code: str
    thread: Optional[str] = None

    @property
    def key(self) -> SiteKey:
        return (self.path, self.line)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "line": self.line, "function": self.function, "code": self.code}
        if self.thread:
            out["thread"] = self.thread
        return out


def site_key(site: Optional[UserSite]) -> SiteKey:
    """What events are merged by: the (path, line) of the site, or ("", 0) for no user frame."""
    return site.key if site is not None else ("", 0)


def site_json(site: Optional[UserSite]) -> Optional[dict[str, Any]]:
    return site.to_json() if site is not None else None


def is_under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


class SiteMapper:
    """Maps absolute file paths in events to paths relative to the checked folder (and, for a
    preview run, from the rewritten copy back to the user's original lines)."""

    def __init__(self, root: Path, preview: Optional[PreviewTree] = None) -> None:
        self.root = root.resolve()
        self.preview = preview

    def __call__(self, site: Optional[Site]) -> Optional[UserSite]:
        if site is None:
            return None
        line = site.line
        code = site.code
        path = site.file
        resolved = Path(site.file)
        if self.preview is not None and is_under(resolved, self.preview.root):
            rel = resolved.relative_to(self.preview.root).as_posix()
            line = self.preview.original_line(rel, line)
            original = self.root / rel
            code = linecache.getline(str(original), line).strip() or code
            path = rel
        elif is_under(resolved, self.root):
            path = resolved.relative_to(self.root).as_posix()
        return UserSite(path=path, line=line, function=site.function, code=code, thread=site.thread or None)
