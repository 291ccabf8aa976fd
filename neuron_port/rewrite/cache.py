"""The content cache: a file whose bytes, rules and configuration did not change is not parsed again.

An entry holds one file's result without its paths (findings relative to the file, the rewritten bytes,
the error) and is keyed by the SHA-256 of the file's bytes plus a fingerprint of everything else that
decides the result: the tool version, REGISTRY_VERSION and a hash of the rule modules' and engine's
source (editing a rule invalidates the cache), the libcst and Python versions, and the configuration
(selected rule codes, target, unsafe fixes, size limit).

Layout: ``.neuron-port-cache/`` next to the project's pyproject.toml (or at the common root of the given
paths) holds ``.gitignore`` (``*``, so users' repositories ignore it), ``CACHEDIR.TAG`` and
``rewrite-v1/<2 hex>/<key>.json``, one file per entry. Entries are written by the main process through
a temporary file renamed over the entry, so concurrent runs only ever see whole entries (the last
writer wins; both wrote the same result). An entry that does not parse or validate is deleted and the
file is processed again: the cache is never trusted over the source.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from neuron_port.atomic import atomic_write
from neuron_port.results import FileResult, Finding, Fix

CACHE_DIR_NAME = ".neuron-port-cache"
ENTRY_FORMAT = "rewrite-v1"
ENV_DIR = "NEURON_PORT_CACHE_DIR"  # overrides the location (tests, CI caches)

_FINDING_FIELDS = {f.name: f for f in dataclasses.fields(Finding) if f.name not in ("path", "fix")}
_fingerprint_memo: dict[str, str] = {}


def fingerprinted_files() -> list[tuple[str, Path]]:
    """(label, path) of the source that decides a result: every module and data file of the registry,
    the rewrite half (engine, traversal, runner, notebooks, line files, sources) and the result types."""
    import neuron_port
    import neuron_port.rules as rules_pkg

    here = Path(neuron_port.__file__).parent
    files = [("neuron_port/results.py", here / "results.py")]
    for label, root, patterns in (("rules", Path(rules_pkg.__file__).parent, ("*.py", "*.toml")),
                                  ("neuron_port/rewrite", here / "rewrite", ("*.py",))):
        found = {path for pattern in patterns for path in root.rglob(pattern)}
        files += [(f"{label}/{path.relative_to(root).as_posix()}", path) for path in sorted(found)]
    return files


def code_fingerprint() -> str:
    """Hash of ``fingerprinted_files()``: editing a rule or the engine invalidates every entry."""
    if "code" in _fingerprint_memo:
        return _fingerprint_memo["code"]
    h = hashlib.sha256()
    for label, path in fingerprinted_files():
        try:
            h.update(label.encode() + b"\0" + path.read_bytes() + b"\0")
        except OSError:
            h.update(label.encode() + b"\0missing\0")
    _fingerprint_memo["code"] = h.hexdigest()
    return _fingerprint_memo["code"]


def config_fingerprint(options) -> str:
    """``options``: the runner's RunOptions; every field that decides a result is part of the key (all of
    them except want_diff, which the main process recomputes from the cached bytes)."""
    from importlib.metadata import PackageNotFoundError, version

    from neuron_port import __version__
    from neuron_port.rules.registry import REGISTRY_VERSION

    try:
        libcst_version = version("libcst")
    except PackageNotFoundError:  # pragma: no cover
        libcst_version = "?"
    data = {
        "format": ENTRY_FORMAT,
        "tool": __version__,
        "registry": REGISTRY_VERSION,
        "code": code_fingerprint(),
        "libcst": libcst_version,
        "python": sys.version_info[:2],
        "options": {k: v for k, v in sorted(dataclasses.asdict(options).items()) if k != "want_diff"},
    }
    data["options"]["rule_codes"] = sorted(data["options"]["rule_codes"])
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def cache_root(paths: Sequence[Path], pyproject: Optional[str]) -> Path:
    """Where ``.neuron-port-cache`` goes: next to the pyproject.toml, else at the common root of the paths."""
    override = os.environ.get(ENV_DIR)
    if override:
        return Path(override)
    if pyproject:
        return Path(pyproject).resolve().parent / CACHE_DIR_NAME
    folders = []
    for p in paths or [Path.cwd()]:
        p = Path(p).resolve()
        folders.append(str(p if p.is_dir() else p.parent))
    try:
        common = Path(os.path.commonpath(folders))
    except ValueError:  # different drives
        common = Path(folders[0])
    return common / CACHE_DIR_NAME


@dataclasses.dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    stored: int = 0
    discarded: int = 0  # corrupt or invalid entries removed


class ResultCache:
    """Lookup and store of per-file results. Used only by the main process (see runner.run_files)."""

    def __init__(self, folder: Path, fingerprint: str) -> None:
        self.folder = Path(folder)
        self.entries = self.folder / ENTRY_FORMAT
        self.fingerprint = fingerprint
        self.stats = CacheStats()
        self.enabled = True
        self._made: set[str] = set()

    @classmethod
    def for_run(cls, paths: Sequence[Path], pyproject: Optional[str], options) -> "ResultCache":
        return cls(cache_root(paths, pyproject), config_fingerprint(options))

    def key(self, raw: bytes) -> str:
        h = hashlib.sha256(self.fingerprint.encode())
        h.update(raw)
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.entries / key[:2] / f"{key}.json"

    # -- lookup ---------------------------------------------------------------------------------
    def get(self, key: str, display: str, real_path: str) -> Optional[FileResult]:
        if not self.enabled:
            return None
        path = self._path(key)
        try:
            data = path.read_bytes()
        except OSError:
            self.stats.misses += 1
            return None
        try:
            result = _decode(json.loads(data), key, display, real_path)
        except Exception:  # anything wrong with the entry: discard it, recompute
            result = None
        if result is None:
            self.stats.discarded += 1
            self.stats.misses += 1
            try:
                path.unlink()
            except OSError:
                pass
            return None
        self.stats.hits += 1
        return result

    # -- store ----------------------------------------------------------------------------------
    def put(self, key: str, result: FileResult) -> None:
        if not self.enabled or not cacheable(result):
            return
        payload = json.dumps(_encode(key, result), separators=(",", ":")).encode()
        path = self._path(key)
        try:
            if path.parent.name not in self._made:
                self._prepare()
                path.parent.mkdir(parents=True, exist_ok=True)
                self._made.add(path.parent.name)
            atomic_write(path, payload, mode=0o644)
            self.stats.stored += 1
        except OSError:
            self.enabled = False  # read-only project, full disk: run on without the cache

    def _prepare(self) -> None:
        if self._made:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        for name, text in ((".gitignore", "# created by neuron-port\n*\n"),
                           ("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n"
                                            "# neuron-port result cache; see https://bford.info/cachedir/\n")):
            target = self.folder / name
            if not target.exists():
                atomic_write(target, text.encode(), mode=0o644)


def cacheable(result: FileResult) -> bool:
    """Results that depend only on the key: not internal errors (a bug may be fixed) or I/O failures."""
    if result.error is None:
        return True
    return "internal error" not in result.error and "cannot read" not in result.error


def _encode(key: str, result: FileResult) -> dict:
    findings = []
    for f in result.findings:
        item = {name: getattr(f, name) for name in _FINDING_FIELDS}
        item["fix"] = [f.fix.available, f.fix.applied, f.fix.safety]
        findings.append(item)
    new = result.new_bytes
    return {
        "key": key,
        "findings": findings,
        "fixes_applied": result.fixes_applied,
        "new": None if new is None else base64.b64encode(new).decode("ascii"),
        "new_sha256": None if new is None else hashlib.sha256(new).hexdigest(),
        "error": None if result.error is None else _relative_error(result.error, result.path),
        "skipped": result.skipped,
    }


def _relative_error(message: str, display: str) -> str:
    # messages start with the displayed path; store them without it so another spelling of the path works
    return "\0" + message[len(display):] if message.startswith(display) else message


def _decode(data: object, key: str, display: str, real_path: str) -> Optional[FileResult]:
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    findings_in, fixes, new, new_sha, error, skipped = (
        data["findings"], data["fixes_applied"], data["new"], data["new_sha256"], data["error"], data["skipped"])
    if not isinstance(findings_in, list) or type(fixes) is not int or not isinstance(skipped, bool):
        return None
    findings = []
    for item in findings_in:
        if not isinstance(item, dict) or set(item) != set(_FINDING_FIELDS) | {"fix"}:
            return None
        fix = item.pop("fix")
        if (not isinstance(fix, list) or len(fix) != 3 or not all(isinstance(v, bool) for v in fix[:2])
                or not isinstance(fix[2], str)):
            return None
        for name in ("code", "name", "severity", "message", "source"):
            if not isinstance(item[name], str):
                return None
        for name in ("line", "column", "end_line", "end_column"):
            if type(item[name]) is not int:
                return None
        findings.append(Finding(path=display, fix=Fix(available=fix[0], applied=fix[1], safety=fix[2]), **item))
    new_bytes = None
    if new is not None:
        if not isinstance(new, str):
            return None
        new_bytes = base64.b64decode(new.encode("ascii"), validate=True)
        if hashlib.sha256(new_bytes).hexdigest() != new_sha:
            return None
    if error is not None:
        if not isinstance(error, str):
            return None
        if error.startswith("\0"):
            error = display + error[1:]
    return FileResult(path=display, real_path=real_path, findings=findings, fixes_applied=fixes,
                      new_bytes=new_bytes, error=error, skipped=skipped)
