"""The content cache: a file whose bytes, kind, rules and configuration did not change is not parsed again.

Where: one ``.neuron-port-cache/`` per project root, the folder config discovery stops at
(``neuron_port.config.project_root``: the nearest folder with a pyproject.toml or ``.git``). Files under
different roots use each their own cache; a file with no project root is not cached. The folder holds
``.gitignore`` (``*``), ``CACHEDIR.TAG`` and ``rewrite-v2/<2 hex>/<name>.json``. `rewrite --check` and
`--diff` use no cache unless ``--cache`` asks for one (they write nothing).

Threat model. The cache folder lives in the user's tree, so anyone who can put files there (a commit in
a cloned repository, a shared folder) controls what an entry says. Such an entry must change nothing:
  * Entries are authenticated with HMAC-SHA256 under a per-user secret key kept outside every project,
    ``$XDG_CACHE_HOME/neuron-port/key`` (default ``~/.cache/neuron-port/key``; 32 random bytes, created
    0600, refused when it is a symbolic link, not ours or readable by others). An entry's file name is
    the HMAC of the file's bytes, its kind and the fingerprint below, so entries written with another key
    are never even looked up; its content carries a second HMAC over the name and the payload, so an
    entry copied to another name, edited or truncated is discarded and the file processed again. Anyone
    who can read the key can forge entries; they can already write the user's files.
  * An entry stores no output text: the findings, and the rewrite as one edit (a byte range of the
    file's own bytes and the engine's replacement for it), applied to the bytes just read.
  * Nothing is created through a symbolic link: a cache folder (or subfolder) that is a symbolic link,
    not a folder or owned by another user is refused (one warning, the run goes on without the cache);
    every open and create is relative to a folder descriptor opened with O_NOFOLLOW and checked with
    lstat before and fstat after, and every file is written as a temporary file created with
    O_EXCL | O_NOFOLLOW and renamed over the entry (concurrent runs see whole entries only).
The key (the name) also covers what decides a result besides the bytes: the file kind (python,
notebook), the tool version, REGISTRY_VERSION and a hash of the rule modules' and engine's source, the
libcst and Python versions and the run options (selected rules, target, unsafe fixes, size limit).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import os
import sys
from pathlib import Path
from typing import Optional

from neuron_port.config import project_root
from neuron_port.results import FileResult, Finding, Fix
from neuron_port.rewrite.cache_files import CacheRefused, SafeFolder, load_secret_key
from neuron_port.rewrite.sources import file_kind

CACHE_DIR_NAME = ".neuron-port-cache"
ENTRY_FORMAT = "rewrite-v2"
_TAG_FILES = ((".gitignore", b"# created by neuron-port\n*\n"),
              ("CACHEDIR.TAG", b"Signature: 8a477f597d28d172789f06886806bc55\n"
                               b"# neuron-port result cache; see https://bford.info/cachedir/\n"))

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
    them except want_diff, which the main process recomputes from the cached edit)."""
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


@dataclasses.dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    stored: int = 0
    discarded: int = 0  # corrupt, forged or invalid entries removed
    warnings: list[str] = dataclasses.field(default_factory=list)  # why a cache was not used (once each)


class _ProjectCache:
    """The cache folder of one project root, opened (and created) without following symbolic links."""

    def __init__(self, root: Path, stats: CacheStats) -> None:
        self.folder = root / CACHE_DIR_NAME
        self.stats = stats
        self.enabled = True
        self._safe: Optional[SafeFolder] = None
        self._entries: Optional[SafeFolder] = None
        try:  # refuse a planted folder before reading anything from it
            SafeFolder.check_existing(root, CACHE_DIR_NAME)
        except (CacheRefused, OSError) as exc:
            self._refuse(exc)

    def _refuse(self, exc: Exception) -> None:
        if self.enabled:
            reason = exc.args[0] if isinstance(exc, CacheRefused) else (exc.strerror or str(exc))
            self.stats.warnings.append(f"{self.folder}: {reason}; running without the result cache there")
        self.enabled = False
        self.close()

    def _open(self, create: bool) -> Optional[SafeFolder]:
        if self._entries is None and self.enabled:
            try:
                if self._safe is None:
                    self._safe = SafeFolder.open(self.folder.parent, CACHE_DIR_NAME, create=create)
                if self._safe is None:
                    return None
                if create:
                    for name, text in _TAG_FILES:
                        self._safe.write_if_absent(name, text)
                self._entries = self._safe.subfolder(ENTRY_FORMAT, create=create)
            except (CacheRefused, OSError) as exc:
                self._refuse(exc)
        return self._entries

    def read(self, name: str) -> Optional[bytes]:
        entries = self._open(create=False)
        if entries is None:
            return None
        try:
            return entries.read(name[:2], f"{name}.json")
        except CacheRefused as exc:
            self._refuse(exc)
        except OSError:
            pass
        return None

    def remove(self, name: str) -> None:
        if self._entries is not None:
            self._entries.remove(name[:2], f"{name}.json")

    def write(self, name: str, data: bytes) -> bool:
        entries = self._open(create=True)
        if entries is None:
            return False
        try:
            entries.write(name[:2], f"{name}.json", data)
            return True
        except (CacheRefused, OSError) as exc:  # a planted link, a read-only project, a full disk
            self._refuse(exc)
            return False

    def close(self) -> None:
        for folder in (self._entries, self._safe):
            if folder is not None:
                folder.close()
        self._entries = self._safe = None


class ResultCache:
    """Lookup and store of per-file results, each file in its project root's cache. Used only by the main
    process (see runner.run_files): ``key`` names a file's entry (None: not cached), ``get`` returns a
    verified hit, ``put`` stores a result."""

    def __init__(self, fingerprint: str, base: Path, secret: Optional[bytes], stats: CacheStats) -> None:
        self.fingerprint = fingerprint.encode()
        self.base = base
        self.stats = stats
        self._secret = secret
        self._roots: dict[Path, Optional[_ProjectCache]] = {}  # project root -> its cache
        self._folder_root: dict[str, Optional[_ProjectCache]] = {}  # a file's folder -> its root's cache
        self._pending: dict[str, tuple[_ProjectCache, str, bytes]] = {}  # key -> (cache, entry name, bytes)

    @classmethod
    def for_run(cls, options, base: Optional[Path] = None) -> "ResultCache":
        """``base``: the folder display paths are relative to (default: the working directory)."""
        stats = CacheStats()
        try:
            secret: Optional[bytes] = load_secret_key()
        except (CacheRefused, OSError, RuntimeError) as exc:  # RuntimeError: Path.home() without a home
            reason = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) else str(exc.args[0])
            stats.warnings.append(f"{reason}; running without the result cache")
            secret = None
        return cls(config_fingerprint(options), Path(base or Path.cwd()), secret, stats)

    def _cache_for(self, display: str) -> Optional[_ProjectCache]:
        folder = os.path.dirname(display)
        if folder not in self._folder_root:
            root = project_root(self.base / folder)  # the link's folder, not its target's: stay in the project
            if root is not None and root not in self._roots:
                self._roots[root] = _ProjectCache(root, self.stats)
            self._folder_root[folder] = self._roots[root] if root is not None else None
        return self._folder_root[folder]

    def key(self, raw: bytes, display: str, kind: str) -> Optional[str]:
        """The lookup key of a file with these bytes and kind, or None when it is not cached (no project
        root, a refused cache folder, no secret key)."""
        if self._secret is None:
            return None
        cache = self._cache_for(display)
        if cache is None or not cache.enabled:
            return None
        mac = hmac.new(self._secret, self.fingerprint + b"\0" + kind.encode() + b"\0", hashlib.sha256)
        mac.update(raw)
        name = mac.hexdigest()
        key = f"{id(cache)}:{name}"
        self._pending[key] = (cache, name, raw)
        return key

    def _sign(self, name: str, payload: bytes) -> bytes:
        assert self._secret is not None
        return hmac.new(self._secret, name.encode() + b"\0" + payload, hashlib.sha256).hexdigest().encode()

    # -- lookup ---------------------------------------------------------------------------------
    def get(self, key: str, display: str, real_path: str) -> Optional[FileResult]:
        if key not in self._pending:
            return None
        cache, name, raw = self._pending[key]
        data = cache.read(name)
        if data is None:
            self.stats.misses += 1
            return None
        mac, _, payload = data.partition(b"\n")
        result = None
        if hmac.compare_digest(mac, self._sign(name, payload)):
            try:
                result = _decode(json.loads(payload), raw, display, real_path)
            except Exception:  # anything wrong with an authenticated entry: discard it, recompute
                result = None
        if result is None:
            self.stats.discarded += 1
            self.stats.misses += 1
            cache.remove(name)
            return None
        del self._pending[key]
        self.stats.hits += 1
        return result

    # -- store ----------------------------------------------------------------------------------
    def put(self, key: str, result: FileResult) -> None:
        pending = self._pending.pop(key, None)
        if pending is None or not cacheable(result):
            return
        cache, name, raw = pending
        payload = json.dumps(_encode(result, raw), separators=(",", ":")).encode()
        if cache.write(name, self._sign(name, payload) + b"\n" + payload):
            self.stats.stored += 1

    def close(self) -> None:
        for cache in self._roots.values():
            if cache is not None:
                cache.close()
        self._pending.clear()


def cacheable(result: FileResult) -> bool:
    """Results that depend only on the key: not internal errors (a bug may be fixed) or I/O failures."""
    if result.error is None:
        return True
    return "internal error" not in result.error and "cannot read" not in result.error


def _edit(old: bytes, new: bytes) -> list:
    """``new`` as one edit of ``old``: [start, end, replacement] with ``new == old[:start] + replacement +
    old[end:]`` (the common prefix and suffix are not stored)."""
    limit = min(len(old), len(new))
    start = _longest(lambda n: old[:n] == new[:n], limit)
    tail = _longest(lambda n: old[len(old) - n:] == new[len(new) - n:], limit - start)
    return [start, len(old) - tail, base64.b64encode(new[start:len(new) - tail]).decode("ascii")]


def _longest(same, limit: int) -> int:
    # binary search with slice comparisons (memcmp): a few ms for a 2 MB file, not a Python loop per byte
    low, high = 0, limit
    while low < high:
        mid = (low + high + 1) // 2
        if same(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _encode(result: FileResult, raw: bytes) -> dict:
    findings = []
    for f in result.findings:
        item = {name: getattr(f, name) for name in _FINDING_FIELDS}
        item["fix"] = [f.fix.available, f.fix.applied, f.fix.safety]
        findings.append(item)
    return {
        "findings": findings,
        "fixes_applied": result.fixes_applied,
        "edit": None if result.new_bytes is None else _edit(raw, result.new_bytes),
        "error": None if result.error is None else _relative_error(result.error, result.path),
        "skipped": result.skipped,
    }


def _relative_error(message: str, display: str) -> str:
    # messages start with the displayed path; store them without it so another spelling of the path works
    return "\0" + message[len(display):] if message.startswith(display) else message


def _decode(data: object, raw: bytes, display: str, real_path: str) -> Optional[FileResult]:
    if not isinstance(data, dict):
        return None
    findings_in, fixes, edit, error, skipped = (
        data["findings"], data["fixes_applied"], data["edit"], data["error"], data["skipped"])
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
        related = item["related"]  # JSON lists: [line, column, code] each
        if not isinstance(related, list) or not all(
                isinstance(r, list) and len(r) == 3 and type(r[0]) is int and type(r[1]) is int
                and isinstance(r[2], str) for r in related):
            return None
        item["related"] = tuple(tuple(r) for r in related)
        findings.append(Finding(path=display, fix=Fix(available=fix[0], applied=fix[1], safety=fix[2]), **item))
    new_bytes = None
    if edit is not None:
        start, end, replacement = edit
        if not (type(start) is int and type(end) is int and 0 <= start <= end <= len(raw)
                and isinstance(replacement, str)):
            return None
        new_bytes = raw[:start] + base64.b64decode(replacement.encode("ascii"), validate=True) + raw[end:]
    if error is not None:
        if not isinstance(error, str):
            return None
        if error.startswith("\0"):
            error = display + error[1:]
    result = FileResult(path=display, real_path=real_path, findings=findings, fixes_applied=fixes,
                        new_bytes=new_bytes, error=error, skipped=skipped)
    if new_bytes is not None and file_kind(display) == "python":  # as file_work does for a fresh result
        from neuron_port.rewrite.line_map import line_map

        result.line_map = line_map(raw, new_bytes)
    return result
