"""Simulated on-disk NEFF cache of the neuron device (``TORCH_NEURONX_NEFF_CACHE_DIR``).

On Trainium every new eager op signature and every ``torch.compile`` graph is compiled to a NEFF by
neuronx-cc and stored in a persistent cache, so a second run of the same program loads NEFFs instead
of compiling. The simulator keeps the same bookkeeping without the
NEFFs: one small file per cache key, so a second run reports cache hits where the first reported
compiles.

Layout and behaviour follow TorchNeuron's PersistentCacheBackend:

* root: ``TORCH_NEURONX_NEFF_CACHE_DIR``; default ``<neuron-port cache>/neff-cache``
  (``$NEURON_PORT_CACHE_DIR`` or ``~/.cache/neuron-port``), not the real ``/tmp/neff_cache``;
* two-level sharding ``root/ab/cd/abcd....neff``;
* written atomically (temporary file + ``os.replace``), so concurrent ranks sharing the folder
  never see a partial entry (the last writer of an identical entry wins);
* only this user's own entries count: a hit is an entry that is a regular file (not a link) owned by
  this user, writable by no one else, whose content names its key and this simulator; anything else
  at an entry's name (planted in a shared cache folder, edited, truncated) is a miss and is replaced.
  Entries are written 0644 and shard folders 0755 (minus the umask) whatever the umask, and never
  through a shard folder that is a link or another user's. Nothing in an entry is executed or
  unpickled (JSON, read only to check it);
* ``TORCH_NEURONX_NEFF_DISABLE_CACHE`` / ``TORCH_NEURONX_DISABLE_NEFF_CACHE`` = 1/true/yes
  disables it (every compile is a miss and nothing is written);
* key: a 128-bit hash (BLAKE2b here, XXH3-128 on Trainium) of the simulator version string, the
  kind (eager op / compiled graph) and the op or graph text with shapes and dtypes.

Messages: TorchNeuron logs each lookup (``[NEFF_CACHE] Cache HIT for key:``, ``MISS``, ``Storing NEFF``) at
INFO through its own C++ logger (csrc/core/NeuronLogging.h), whose level is ``TORCH_NEURONX_LOG_LEVEL``
(0 error, 1 warning, 2 info, 3 debug; default warning), not Python's logging: a program's
``logging.basicConfig(level=logging.INFO)`` does not show them. The simulator's logger does the same: its own
stderr handler at that level, not propagated to the program's root logger.

Cost: compiled graphs are looked up when they are compiled (rare). Eager signatures are looked up
once, at process exit, from the C++ core's signature table: nothing runs per op.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import stat
import threading
from functools import lru_cache
from pathlib import Path
from typing import Optional

from neuron_port.atomic import temp_prefix, temp_suffix

__all__ = ["cache_dir", "enabled", "cache_key", "lookup_or_store", "compiled_graph", "counters", "register"]

CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
DISABLE_ENVS = ("TORCH_NEURONX_NEFF_DISABLE_CACHE", "TORCH_NEURONX_DISABLE_NEFF_CACHE")
FORMAT = 1  # bump when the key text changes, so old simulator entries stop matching
MAX_ENTRY_BYTES = 1 << 16  # an entry is a line of JSON; anything larger is not ours
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # NONBLOCK: a FIFO
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH

LOG_LEVEL_ENV = "TORCH_NEURONX_LOG_LEVEL"
_LOG_LEVELS = (logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)


def _logger() -> logging.Logger:
    """TorchNeuron's log: its own level (``TORCH_NEURONX_LOG_LEVEL``) and stderr line, whatever the program's
    logging configuration (NeuronLogging.h: "[Neuron] [INFO] ...")."""
    logger = logging.getLogger("neuron_backend.neff_cache")
    try:
        level = _LOG_LEVELS[int(os.environ.get(LOG_LEVEL_ENV, "1"))]
    except (ValueError, IndexError):
        level = logging.WARNING
    logger.setLevel(level)
    logger.propagate = False
    if not logger.handlers:
        handler = logging.StreamHandler()  # sys.stderr at the time of each message
        handler.setFormatter(logging.Formatter("[Neuron] [%(levelname)s] %(message)s"))
        logger.addHandler(handler)
    return logger


log = _logger()
_lock = threading.Lock()
_counts = {"eager": {"signatures": 0, "hits": 0, "misses": 0},
           "compiled": {"graphs": 0, "hits": 0, "misses": 0}}
_registered = False
_done_at_exit = False
_warned_bad_entry = False


def enabled() -> bool:
    return not any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes") for v in DISABLE_ENVS)


def cache_dir() -> Path:
    d = os.environ.get(CACHE_DIR_ENV, "").strip()
    if d:
        return Path(d).expanduser()
    from ..build import cache_root

    return cache_root() / "neff-cache"


@lru_cache(maxsize=1)
def sim_version() -> str:
    """What a key depends on besides the op or graph: simulator format, TorchNeuron release, torch."""
    import torch

    try:
        from ..policy import release

        rel = release().get("torch_neuronx", "?")
    except Exception:  # noqa: BLE001 - the policy file is optional for the key
        rel = "?"
    return f"neuron-port-neff/{FORMAT};torch_neuronx={rel};torch={torch.__version__}"


def cache_key(kind: str, text: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(sim_version().encode())
    h.update(b"\0" + kind.encode() + b"\0")
    h.update(text.encode())
    return h.hexdigest()


def entry_path(key: str, root: Path | None = None) -> Path:
    root = cache_dir() if root is None else root
    return root / key[:2] / key[2:4] / f"{key}.neff"


def _own_entry(path: Path, key: str) -> Optional[bool]:
    """True when ``path`` is a good entry for ``key`` (see the module's text), None when nothing is
    there, False when something else is."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError:  # a link (ELOOP), a shard that is a file (ENOTDIR), unreadable
        return False if os.path.lexists(path) else None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & _OTHERS_WRITE
                or st.st_size > MAX_ENTRY_BYTES):
            return False
        data = os.read(fd, MAX_ENTRY_BYTES + 1)
    except OSError:
        return False
    finally:
        os.close(fd)
    try:
        entry = json.loads(data)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError among them
        return False
    return type(entry) is dict and entry.get("key") == key and entry.get("simulator") == sim_version()


def _own_folder(folder: Path) -> None:
    """Create ``folder`` (0755 minus the umask) when missing; OSError when it is a link, not a folder or
    not this user's (an entry is never written through a folder someone else controls)."""
    try:
        os.mkdir(folder, 0o755)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise OSError(f"{folder} is a link, not a folder or another user's")


def _write(path: Path, data: bytes) -> None:
    """``data`` as ``path``: a new temporary file (O_EXCL | O_NOFOLLOW, 0644 minus the umask) renamed
    over whatever has the name (a link there is replaced, never followed)."""
    path.parent.parent.parent.mkdir(parents=True, exist_ok=True)
    _own_folder(path.parent.parent)
    _own_folder(path.parent)
    tmp = path.parent / f"{temp_prefix(path.name)}{os.urandom(4).hex()}{temp_suffix()}"
    try:
        with os.fdopen(os.open(tmp, _CREATE_FLAGS, 0o644), "wb") as handle:
            os.fchmod(handle.fileno(), stat.S_IMODE(os.fstat(handle.fileno()).st_mode) & ~_OTHERS_WRITE)
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def lookup_or_store(key: str, meta: dict, root: Path | None = None) -> bool:
    """True on a cache hit; on a miss (nothing there, or an entry that is not ours: replaced), store the
    entry (atomically) and return False."""
    path = entry_path(key, root)
    found = _own_entry(path, key)
    if found:
        log.info("[NEFF_CACHE] Cache HIT for key: %s", key)
        return True
    if found is False:  # said once per process: a planted cache folder must not flood the program's output
        global _warned_bad_entry
        log.log(logging.INFO if _warned_bad_entry else logging.WARNING, "neuron-port: ignoring and replacing "
                "the NEFF cache entry %s: not a file of this user that only this user can write, or not an "
                "entry for its key", path)
        _warned_bad_entry = True
    log.info("[NEFF_CACHE] Cache MISS for key: %s", key)
    try:
        payload = {"key": key, "simulator": sim_version(), "pid": os.getpid(), "rank": os.environ.get("RANK"), **meta}
        _write(path, (json.dumps(payload, default=str) + "\n").encode())
        log.info("[NEFF_CACHE] Storing NEFF for key: %s", key)
    except OSError as e:  # a read-only or full cache folder must not break the run
        log.warning("neuron-port: could not write the NEFF cache entry %s: %s", path, e)
    return False


def compiled_graph(kind: str, graph_text: str, meta: dict) -> dict:
    """Look up one compiled (torch.compile) graph; returns what the compile event records."""
    key = cache_key("graph", graph_text)
    if not enabled():
        with _lock:
            _counts["compiled"]["graphs"] += 1
            _counts["compiled"]["misses"] += 1
        return {"graph": kind, "key": key, "neff_cache": "disabled"}
    hit = lookup_or_store(key, {"kind": "graph", "graph": kind, **meta})
    with _lock:
        _counts["compiled"]["graphs"] += 1
        _counts["compiled"]["hits" if hit else "misses"] += 1
    return {"graph": kind, "key": key, "neff_cache": "hit" if hit else "miss"}


def _eager_signatures() -> list[tuple[str, str]]:
    """(op, signature text) of every native (NEFF-compiling) eager signature seen by the C++ core."""
    from ..device import runtime

    c = runtime.C
    if c is None:
        return []
    out = []
    native = int(c.Policy.native)  # a new signature of a native op is an eager NEFF compile
    for name, pol, calls, sigs in c.op_stats():
        if pol != native or calls == 0:
            continue
        for _calls, _site, _flags, _unsupported, desc in sigs:
            out.append((name, ", ".join(desc)))
    return out


def check_eager() -> dict:
    """Look up every eager signature of this process (once, at exit)."""
    # signatures whose printed form is identical (e.g. they differ only in a scalar value the core
    # hashes but does not print) share one key
    sigs = sorted(set(_eager_signatures()))
    hits = misses = 0
    if enabled():
        root = cache_dir()
        for op, desc in sigs:
            if lookup_or_store(cache_key("eager", f"{op}({desc})"), {"kind": "eager", "op": op, "signature": desc}, root):
                hits += 1
            else:
                misses += 1
    else:
        misses = len(sigs)
    with _lock:
        _counts["eager"] = {"signatures": len(sigs), "hits": hits, "misses": misses}
    return dict(_counts["eager"])


def counters() -> dict:
    with _lock:
        return {k: dict(v) for k, v in _counts.items()}


def _at_exit() -> None:
    """Runs before the events module's own exit flush (atexit is LIFO and register() runs after it)."""
    global _done_at_exit
    if _done_at_exit:
        return
    _done_at_exit = True
    try:
        check_eager()
        from .. import events

        c = counters()
        events.record("neff_cache", site=None, dir=str(cache_dir()), enabled=enabled(), eager=c["eager"],
                      compiled=c["compiled"], hits=c["eager"]["hits"] + c["compiled"]["hits"],
                      misses=c["eager"]["misses"] + c["compiled"]["misses"])
    except Exception as e:  # noqa: BLE001 - never break interpreter shutdown
        log.warning("neuron-port: NEFF cache bookkeeping failed at exit: %s", e)


def register() -> None:
    """Called by neuron_backend.enable() after events.install(): check eager signatures at exit."""
    global _registered
    if _registered:
        return
    _registered = True
    atexit.register(_at_exit)
