"""Files of the result cache, opened and written without following symbolic links (see cache.py for why).

Every operation is relative to a folder descriptor: a folder is checked with lstat (a real folder, owned
by this user), opened with O_DIRECTORY | O_NOFOLLOW and checked again with fstat (the same inode), so a
link swapped in between is caught; files are read with O_NOFOLLOW and written as a temporary file
created with O_EXCL | O_NOFOLLOW, then renamed over the name (a link at the name is replaced, never
followed). Also the per-user secret key that authenticates entries.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
import sys
from pathlib import Path
from typing import Optional

KEY_BYTES = 32
MAX_ENTRY_BYTES = 64 * 2**20  # an entry holds at most one file's replacement text (files are <= the size limit)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)  # NONBLOCK: a FIFO
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class CacheRefused(Exception):
    """A cache path that must not be used; the message names it and says why."""


def _check_folder(st: os.stat_result, where: str) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise CacheRefused(f"{where} is a symbolic link")
    if not stat.S_ISDIR(st.st_mode):
        raise CacheRefused(f"{where} is not a folder")
    if st.st_uid != os.geteuid():
        raise CacheRefused(f"{where} is owned by another user (uid {st.st_uid})")


def _open_folder(name: str, dir_fd: Optional[int], where: str, create: bool) -> Optional[int]:
    """A descriptor of the folder ``name`` (in ``dir_fd``), created when missing and ``create``, else
    None when missing; CacheRefused when it is a link, not a folder or not ours."""
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        if not create:
            return None
        try:
            os.mkdir(name, 0o755, dir_fd=dir_fd)
        except FileExistsError:
            pass  # another run made it (or planted something): checked below
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    _check_folder(before, where)
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise CacheRefused(f"{where} was replaced while it was opened") from None
        raise
    after = os.fstat(fd)
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino):
        os.close(fd)
        raise CacheRefused(f"{where} was replaced while it was opened")
    return fd


def _write_new(dir_fd: int, name: str, data: bytes, mode: int) -> None:
    """``data`` as ``name`` in ``dir_fd``: a new temporary file renamed over it."""
    tmp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    fd = os.open(tmp, _CREATE_FLAGS, mode, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


class SafeFolder:
    """An opened cache folder; every path below it is reached through descriptors, never by name."""

    def __init__(self, fd: int, where: str) -> None:
        self.fd: Optional[int] = fd
        self.where = where

    @staticmethod
    def check_existing(parent: Path, name: str) -> None:
        """CacheRefused when ``parent/name`` exists but is a link, not a folder or not ours."""
        try:
            st = os.lstat(parent / name)
        except FileNotFoundError:
            return
        _check_folder(st, str(parent / name))

    @classmethod
    def open(cls, parent: Path, name: str, create: bool) -> Optional["SafeFolder"]:
        """``parent/name`` (``parent`` is the project root, already resolved), or None when it is missing
        and not ``create``."""
        parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        try:
            fd = _open_folder(name, parent_fd, str(parent / name), create)
        finally:
            os.close(parent_fd)
        return None if fd is None else cls(fd, str(parent / name))

    def subfolder(self, name: str, create: bool) -> Optional["SafeFolder"]:
        fd = _open_folder(name, self.fd, f"{self.where}/{name}", create)
        return None if fd is None else SafeFolder(fd, f"{self.where}/{name}")

    def write_if_absent(self, name: str, data: bytes) -> None:
        """A marker file (.gitignore, CACHEDIR.TAG): written when nothing has that name; whatever has it
        (a file, a link) is left alone."""
        try:
            os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            _write_new(self.fd, name, data, 0o644)

    def read(self, folder: str, name: str) -> Optional[bytes]:
        """The bytes of ``folder/name`` if it is a regular file, else None (missing or a link, a FIFO...:
        the caller discards it)."""
        sub = _open_folder(folder, self.fd, f"{self.where}/{folder}", create=False)
        if sub is None:
            return None
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=sub)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return b""  # a link where an entry should be: read as invalid, then removed
            raise
        finally:
            os.close(sub)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
                return b""
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def remove(self, folder: str, name: str) -> None:
        """Unlinks ``folder/name`` (a link itself, never its target); nothing when that fails."""
        try:
            sub = _open_folder(folder, self.fd, f"{self.where}/{folder}", create=False)
        except (CacheRefused, OSError):
            return
        if sub is None:
            return
        try:
            os.unlink(name, dir_fd=sub)
        except OSError:
            pass
        finally:
            os.close(sub)

    def write(self, folder: str, name: str, data: bytes) -> None:
        sub = _open_folder(folder, self.fd, f"{self.where}/{folder}", create=True)
        assert sub is not None
        try:
            _write_new(sub, name, data, 0o644)
        finally:
            os.close(sub)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def user_cache_folder() -> Path:
    """neuron-port's folder in the user's cache, where platformdirs puts it on each platform: on Linux
    ``$XDG_CACHE_HOME/neuron-port``, else ``~/.cache/neuron-port`` (a relative XDG_CACHE_HOME is ignored,
    as the XDG spec says); ``~/Library/Caches/neuron-port`` on macOS; ``%LOCALAPPDATA%\\neuron-port\\Cache``
    on Windows."""
    folder = _linux_cache_folder()
    if folder is not None:
        return folder
    from platformdirs import user_cache_path

    folder = user_cache_path("neuron-port", appauthor=False)
    # platformdirs takes a relative XDG_CACHE_HOME as it is: a key there would move with the working folder
    return folder if folder.is_absolute() else Path.home() / ".cache" / "neuron-port"


def _linux_cache_folder() -> Optional[Path]:
    """platformdirs' answer on Linux with an absolute HOME or XDG_CACHE_HOME, without importing it (~5 ms of
    every rewrite's start, which reads the key: dataclass_code.py); None elsewhere (platformdirs decides).
    tests/rewrite/test_cache_folders.py compares the two."""
    if sys.platform != "linux" or hasattr(sys, "getandroidapilevel") or (
            os.environ.get("ANDROID_DATA") == "/data" and os.environ.get("ANDROID_ROOT") == "/system"):
        return None
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if posixpath.isabs(xdg):
        return Path(xdg) / "neuron-port"
    if posixpath.isabs(os.environ.get("HOME", "")):
        return Path(os.path.expanduser("~/.cache")) / "neuron-port"
    return None


def secret_key_path() -> Path:
    """The per-user key: ``key`` in ``user_cache_folder()`` (``~/.cache/neuron-port/key`` by default)."""
    return user_cache_folder() / "key"


_secret_memo: dict[str, bytes] = {}


def load_secret_key(create: bool = True) -> Optional[bytes]:
    """This user's secret key for the caches' HMACs, created (0600, random) on first use; without
    ``create``, None when there is none yet. CacheRefused when the key is a link, not a regular file, not
    ours, readable by others or malformed."""
    path = secret_key_path()
    if str(path) in _secret_memo:
        return _secret_memo[str(path)]
    if not create and not path.parent.is_dir():
        return None
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # the key's folder may be a link (a moved ~/.cache); it only has to be ours, so no one else can swap the key
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        if os.fstat(dir_fd).st_uid != os.geteuid():
            raise CacheRefused(f"{path.parent} is owned by another user")
        key = _read_key(dir_fd, path)
        if key is None and not create:
            return None
        if key is None:
            tmp = f".key.{os.getpid()}.{os.urandom(4).hex()}.tmp"
            fd = os.open(tmp, _CREATE_FLAGS, 0o600, dir_fd=dir_fd)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(os.urandom(KEY_BYTES).hex().encode() + b"\n")
                    handle.flush()
                    os.fsync(handle.fileno())
                try:  # link, unlike rename, fails when another run created the key first: use theirs
                    os.link(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
                except FileExistsError:
                    pass
            finally:
                os.unlink(tmp, dir_fd=dir_fd)
            key = _read_key(dir_fd, path)
        if key is None:
            raise CacheRefused(f"{path}: the cache key could not be created")
    finally:
        os.close(dir_fd)
    _secret_memo[str(path)] = key
    return key


def _read_key(dir_fd: int, path: Path) -> Optional[bytes]:
    try:
        fd = os.open(path.name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CacheRefused(f"{path}: the cache key is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise CacheRefused(f"{path}: the cache key must be a file of this user readable by no one else "
                               "(chmod 600)")
        text = os.read(fd, 4 * KEY_BYTES).strip()
    finally:
        os.close(fd)
    try:
        key = bytes.fromhex(text.decode("ascii"))
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise CacheRefused(f"{path}: the cache key is malformed; remove it and a new one is made")
    return key
