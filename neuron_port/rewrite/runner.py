"""Runs the engine over files in worker processes and collects typed FileResults.

Workers only read and compute; the main process does every write (atomically, one file at a time),
so an interrupted run leaves each file either old or new.

A worker that dies (a crash in native code, the out-of-memory killer) breaks the pool: the files it
had not finished are run again one at a time in a fresh worker, so the file that kills a worker is
found and reported as an error while every other file is still processed. Workers ignore SIGINT: a
Ctrl-C reaches the whole process group, and only the main process answers it (it cancels the pool and
ends the workers); SIGTERM is turned into the same interrupt by ``interrupts_as_exceptions``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence

from neuron_port.results import FileResult
from neuron_port.rewrite.discovery import SourceFile
from neuron_port.rewrite.file_work import digest, import_engines, process_file
from neuron_port.rewrite.memory import is_large, memory_budget, memory_estimate
from neuron_port.rewrite.options import RunOptions
from neuron_port.rewrite.prefilter import could_match, pattern_for
from neuron_port.rewrite.sources import SourceError, decode_source, file_kind
from neuron_port.rewrite.writer import note_read, unified_diff

if TYPE_CHECKING:  # pragma: no cover
    from neuron_port.rewrite.cache import ResultCache

# Below this many files a process pool costs more than it saves (pre-commit runs on a handful).
PARALLEL_THRESHOLD = 8


def _work(args: tuple[SourceFile, RunOptions, Optional[bytes]]) -> tuple[FileResult, Optional[bytes]]:
    return process_file(*args)


def _pool_context():
    # fork is the cheapest start on Linux (the registry is already imported); elsewhere use spawn
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _main_side(source: SourceFile, options: RunOptions, cache: Optional["ResultCache"]):
    """What the main process settles for a file without a worker: a cache hit or a pre-filter skip.

    Returns (result, None) when settled, else (None, (raw bytes or None, cache key or None)) for a worker.
    The cache is asked first (a lookup is one hash and one small read), so skipped files are cached too.
    Anything unusual (unreadable, too large, undecodable, launch files) goes to process_file as is, and
    so do notebooks: their cells are pre-filtered one by one there (the JSON escapes the code's text).
    """
    kind = file_kind(source.display)
    if kind not in ("python", "notebook"):  # launch scripts and configs: not cached
        return None, (None, None)
    try:
        raw = source.real.read_bytes()
    except OSError:
        return None, (None, None)
    if options.max_bytes and len(raw) > options.max_bytes:
        return None, (None, None)
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
                    return None, (raw, None)
            return hit, None
    try:
        text = decode_source(raw, source.display).text
    except SourceError:
        return None, (raw, key)
    # the pattern is compiled on first use: a run whose files all hit the cache never needs it
    if kind == "python" and not could_match(text, pattern_for(options.rule_codes)):  # most files stop here
        result = FileResult(path=source.display, real_path=str(source.real), skipped=True)
        if cache is not None and key is not None:
            cache.put(key, result)
        return result, None
    return None, (raw, key)


Item = tuple[int, Optional[str], tuple[SourceFile, RunOptions, Optional[bytes]]]


def _worker_init() -> None:
    # the terminal sends Ctrl-C to the whole process group: only the main process answers it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _work_indexed(item: Item):
    index, key, args = item
    return (index, key, *_work(args))


def _died(item: Item) -> FileResult:
    source = item[2][0]
    return FileResult(path=source.display, real_path=str(source.real), error=(
        f"{source.display}: the worker process died while processing this file (a crash, or killed by a "
        "signal such as the out-of-memory killer's); file left unchanged"))


def _estimate(item: Item) -> int:
    source, _options, raw = item[2]
    return memory_estimate(source.real, raw)


class _Workers:
    """A process pool that outlives its workers: when one dies, the files not yet finished are run again
    one at a time in a fresh single worker, so the one that kills a worker is reported and the rest
    are still processed."""

    def __init__(self, jobs: int, done: Callable[..., None], budget: int) -> None:
        self.jobs = jobs
        self.done = done
        self.executor: Optional[ProcessPoolExecutor] = None
        self.running: dict[Future, Item] = {}
        self.suspects: list[Item] = []  # unfinished when a worker died: run one by one
        self.started = False
        self.budget = budget
        self.waiting: deque[Item] = deque()  # not handed to the pool yet: over the memory budget
        self.deferred: deque[Item] = deque()  # large files that did not fit yet: they go first
        self.in_flight = 0  # the memory estimate of the files handed to the pool and not collected yet
        self.solo: dict[Future, ProcessPoolExecutor] = {}  # a large file's own one-process pool

    def _start(self, processes: int) -> ProcessPoolExecutor:
        self.started = True
        self.executor = ProcessPoolExecutor(max_workers=processes, mp_context=_pool_context(),
                                            initializer=_worker_init)
        return self.executor

    def submit(self, item: Item) -> None:
        if self.suspects:  # the pool broke: everything else waits for the one-by-one pass
            self.suspects.append(item)
            return
        self.waiting.append(item)
        self._dispatch()

    def _fits(self, item: Item) -> bool:
        return not self.running or self.in_flight + _estimate(item) <= self.budget

    def _dispatch(self) -> None:
        """Hand the pool what fits in the memory budget, in order: the large files that had to wait first,
        then the others. A large one (over half the budget) that does not fit waits aside, so the small
        files behind it go on; a small one that does not fit waits for results."""
        while self.deferred and not self.suspects and self._fits(self.deferred[0]):
            self._hand(self.deferred.popleft())
        while self.waiting and not self.suspects:
            item = self.waiting[0]
            if self._fits(item):
                self._hand(self.waiting.popleft())
            elif is_large(_estimate(item), self.budget):
                self.deferred.append(self.waiting.popleft())
            else:
                break

    def _hand(self, item: Item) -> None:
        if is_large(_estimate(item), self.budget):  # in a process of its own, which ends with it (memory.py)
            self.started = True
            executor = ProcessPoolExecutor(max_workers=1, mp_context=_pool_context(), initializer=_worker_init)
            future = executor.submit(_work_indexed, item)
            self.solo[future] = executor
            self.running[future] = item
            self.in_flight += _estimate(item)
            return
        executor = self.executor or self._start(self.jobs)
        try:
            self.running[executor.submit(_work_indexed, item)] = item
            self.in_flight += _estimate(item)
        except BrokenProcessPool:
            self._broken([item])

    def _broken(self, also: list[Item]) -> None:
        self.suspects.extend(item for future, item in self.running.items() if future not in self.solo)
        self.suspects.extend(also)
        self.suspects.extend(self.deferred)
        self.suspects.extend(self.waiting)
        self.deferred.clear()
        self.waiting.clear()
        self.running = {future: item for future, item in self.running.items() if future in self.solo}
        self.in_flight = sum(_estimate(item) for item in self.running.values())
        self.stop(solo=False)

    def _collect(self, futures) -> None:
        for future in futures:
            item = self.running.pop(future)
            self.in_flight -= _estimate(item)
            solo = self.solo.pop(future, None)
            if solo is not None:  # its own process: a death names the file
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    outcome = (item[0], None, _died(item), None)
                _end(solo)
                self.done(*outcome)
                continue
            try:
                self.done(*future.result())
            except BrokenProcessPool:
                self._broken([item])
                return
        self._dispatch()

    def poll(self) -> None:
        """Take in the results that are ready, without waiting."""
        self._collect([f for f in list(self.running) if f.done()])

    def finish(self) -> None:
        self._dispatch()
        while self.running:
            ready, _ = wait(list(self.running), return_when=FIRST_COMPLETED)
            self._collect(ready)
        suspects, self.suspects = sorted(self.suspects, key=lambda item: item[0]), []
        for item in suspects:  # one file per worker at a time: a death names its file
            executor = self.executor or self._start(1)
            try:
                self.done(*executor.submit(_work_indexed, item).result())
            except BrokenProcessPool:
                self.stop()
                self.done(item[0], None, _died(item), None)

    def stop(self, solo: bool = True) -> None:
        """End the workers now (a broken pool, or an interrupt): cancel what has not started and kill
        the workers that are busy, instead of waiting for them. ``solo``: the large files' own processes too."""
        executor, self.executor = self.executor, None
        if executor is not None:
            _end(executor)
        if solo:
            for future, own in list(self.solo.items()):
                _end(own)
                self.running.pop(future, None)
            self.solo.clear()


def _end(executor: ProcessPoolExecutor) -> None:
    """Shut ``executor`` down now, killing its busy processes."""
    # the executor's own processes: they ignore SIGINT and may be busy for seconds on a big file
    processes = list((getattr(executor, "_processes", None) or {}).values())
    # shutdown(wait=False) forgets the manager thread, so a later shutdown(wait=True) joins nothing: keep it
    manager = getattr(executor, "_executor_manager_thread", None)
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join()
    # now that its workers are gone, wait for the executor's manager thread: left running, it closes
    # its wake-up pipe while the interpreter's exit hook writes to it (a traceback at exit)
    if manager is not None:
        manager.join(timeout=30)


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

    workers = _Workers(jobs, done, budget) if jobs > 1 else None
    try:
        for index, source in enumerate(files):
            result, todo = _main_side(source, options, cache)
            if result is not None:
                slots[index] = result
                if on_result:
                    on_result(result)
                continue
            raw, key = todo
            pending.append((index, key, (source, options, raw)))
            if workers is not None and (workers.started or len(pending) >= PARALLEL_THRESHOLD):
                if not workers.started:
                    import_engines(options.rule_codes)  # once, before forking: workers inherit them
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
            done(index, key, *_work(args))
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


def run_files(
    files: Sequence[SourceFile],
    options: RunOptions,
    jobs: Optional[int] = None,
    on_result: Optional[Callable[[FileResult], None]] = None,
    cache: Optional["ResultCache"] = None,
) -> list[FileResult]:
    jobs = jobs or os.cpu_count() or 1
    return _run(files, options, jobs, on_result, cache, memory_budget())
