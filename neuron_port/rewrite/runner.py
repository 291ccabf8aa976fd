"""Runs the engine over files in worker processes and collects typed FileResults.

Workers only read and compute; the main process does every write (atomically, one file at a time),
so an interrupted run leaves each file either old or new.

A worker that dies (a crash in native code, the out-of-memory killer) breaks the pool: the files it
had not finished are run again one at a time in a fresh worker, so the file that kills a worker is
found and reported as an error while every other file is still processed (the pool: pool.py). Workers ignore SIGINT: a
Ctrl-C reaches the whole process group, and only the main process answers it (it cancels the pool and
ends the workers); SIGTERM is turned into the same interrupt by ``interrupts_as_exceptions``.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence

from neuron_port.results import FileResult
from neuron_port.rewrite.discovery import SourceFile
from neuron_port.rewrite.file_work import digest, import_engines, process_file
from neuron_port.rewrite.memory import memory_budget
from neuron_port.rewrite.options import RunOptions
from neuron_port.rewrite.prefilter import could_match, pattern_for
from neuron_port.rewrite.sources import SourceError, decode_source, file_kind
from neuron_port.rewrite.writer import note_read, unified_diff

if TYPE_CHECKING:  # pragma: no cover
    from neuron_port.rewrite.cache import ResultCache
    from neuron_port.rewrite.pool import Item, Workers

# Below this many files a process pool costs more than it saves (pre-commit runs on a handful).
PARALLEL_THRESHOLD = 8


def _main_side(source: SourceFile, options: RunOptions, cache: Optional["ResultCache"]):
    """What the main process settles for a file without a worker: a cache hit or a pre-filter skip.

    Returns (result, None) when settled, else (None, (raw bytes or None, cache key or None, whether the
    text passed the pre-filter here)) for a worker.
    The cache is asked first (a lookup is one hash and one small read), so skipped files are cached too.
    Anything unusual (unreadable, too large, undecodable, launch files) goes to process_file as is, and
    so do notebooks: their cells are pre-filtered one by one there (the JSON escapes the code's text).
    """
    kind = file_kind(source.display)
    if kind not in ("python", "notebook"):  # launch scripts and configs: not cached
        return None, (None, None, False)
    try:
        raw = source.real.read_bytes()
    except OSError:
        return None, (None, None, False)
    if options.max_bytes and len(raw) > options.max_bytes:
        return None, (None, None, False)
    key = cache.key(raw, source.display, kind) if cache is not None else None
    if key is not None:
        hit = cache.get(key, source.display, str(source.real))
        if hit is not None:
            if hit.new_bytes is not None:  # the writer checks the file still has these bytes
                note_read(str(source.real), digest(raw))
            if options.want_diff and hit.new_bytes is not None:
                try:
                    hit.diff = unified_diff(decode_source(raw, source.display).text,
                                            decode_source(hit.new_bytes, source.display).text, source.display)
                except SourceError:
                    return None, (raw, None, False)
            return hit, None
    try:
        text = decode_source(raw, source.display).text
    except SourceError:
        return None, (raw, key, False)
    # the pattern is compiled on first use: a run whose files all hit the cache never needs it
    if kind == "python" and not could_match(text, pattern_for(options.rule_codes)):  # most files stop here
        result = FileResult(path=source.display, real_path=str(source.real), skipped=True)
        if cache is not None and key is not None:
            cache.put(key, result)
        return result, None
    return None, (raw, key, kind == "python")  # a Python file passed the pre-filter


def _run(files, options, jobs, on_result, cache: Optional["ResultCache"], budget: int) -> list[FileResult]:
    """The main process reads each file once, looks it up in the cache and pre-filters it (most files stop
    here); the rest go to workers with their bytes, one file per task (each is parsed: >= ~10 ms, so the
    IPC costs nothing), and their results are stored in the cache by the main process. The pool starts
    as soon as there is enough work for it, so workers parse while the main process is still reading.
    Results come back in ``files`` order."""
    slots: list[Optional[FileResult]] = [None] * len(files)
    pending: list[Item] = []

    def done(index: int, key: Optional[str], result: FileResult, digest: Optional[bytes]) -> None:
        slots[index] = result
        if digest is not None:
            note_read(result.real_path, digest)
        if key is not None and cache is not None:  # (a worker's death is not cached: it comes with no key)
            cache.put(key, result)
        if on_result:
            on_result(result)

    workers: Optional["Workers"] = None  # made when there is enough work for a pool
    try:
        for index, source in enumerate(files):
            result, todo = _main_side(source, options, cache)
            if result is not None:
                slots[index] = result
                if on_result:
                    on_result(result)
                continue
            raw, key, passed = todo
            pending.append((index, key, (source, options, raw, passed)))
            if jobs > 1 and (workers is not None or len(pending) >= PARALLEL_THRESHOLD):
                if workers is None:
                    from neuron_port.rewrite.pool import Workers

                    import_engines(options.rule_codes)  # once, before forking: workers inherit them
                    workers = Workers(jobs, done, budget)
                for item in pending:
                    workers.submit(item)
                pending.clear()
                workers.poll()
        if workers is not None and workers.started:
            for item in pending:
                workers.submit(item)
            pending.clear()
            workers.finish()
        for index, key, args in pending:  # too few for a pool (or --jobs 1)
            done(index, key, *process_file(*args))
    finally:
        if workers is not None:
            workers.stop()
    return [r for r in slots if r is not None]


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived during a run; ``signum`` says which (the exit code is 128 + signum)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def interrupts_as_exceptions() -> Iterator[None]:
    """While active (in the main thread), SIGINT and SIGTERM raise Interrupted, so SIGTERM cleans up like
    Ctrl-C: workers ended, no temporary file left, each file old or completely new (writer.py holds both
    signals during a file's write). Elsewhere, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        raise Interrupted(signum)

    previous = {number: signal.signal(number, handler) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, old in previous.items():
            signal.signal(number, old)


def available_cores() -> int:
    """The CPU cores this process may run on (its affinity mask: a container's or taskset's limit)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worker_count(requested: Optional[int], files: int, cores: int) -> int:
    """Workers for ``files`` files: ``requested`` (default: every core), but never more than the cores (a
    parsing worker uses one whole core: more only add memory) nor than the files (the pool forks all its
    workers at once: `-j 99999` forked hundreds, ~6 GB, for a handful of files)."""
    return max(1, min(requested or cores, cores, files))


def run_files(
    files: Sequence[SourceFile],
    options: RunOptions,
    jobs: Optional[int] = None,
    on_result: Optional[Callable[[FileResult], None]] = None,
    cache: Optional["ResultCache"] = None,
) -> list[FileResult]:
    jobs = worker_count(jobs, len(files), available_cores())
    return _run(files, options, jobs, on_result, cache, memory_budget())
