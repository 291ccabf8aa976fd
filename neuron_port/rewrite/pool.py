"""The worker pool of a rewrite run: files go to worker processes while their estimated memory fits the
budget, and a pool whose worker died runs the unfinished files again one at a time (runner.py's module
docstring). Imported only when a run has enough files for a pool (multiprocessing is ~5 ms of every
start, a one-file pre-commit hook's included)."""

from __future__ import annotations

import ctypes  # here, so forked workers inherit it (die_with_parent)
import multiprocessing
import os
import signal
import sys
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Optional

from neuron_port.results import FileResult
from neuron_port.rewrite.discovery import SourceFile
from neuron_port.rewrite.file_work import process_file
from neuron_port.rewrite.memory import is_large, memory_estimate
from neuron_port.rewrite.options import RunOptions
from neuron_port.rewrite.signals import release_held, signals_held


def work(args: tuple[SourceFile, RunOptions, Optional[bytes], bool]) -> tuple[FileResult, Optional[bytes]]:
    """One file's pass (file_work.process_file), in whichever process runs it."""
    return process_file(*args)


def _pool_context():
    # fork is the cheapest start on Linux (the registry is already imported); elsewhere use spawn
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


Item = tuple[int, Optional[str], tuple[SourceFile, RunOptions, Optional[bytes], bool]]


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent: int) -> None:
    """Have Linux SIGKILL this worker when the thread that forked it ends (PR_SET_PDEATHSIG): a SIGKILLed
    `rewrite` left its workers waiting for work for good. Then exit at once if ``parent`` (the pid that
    forked it) is already gone, since it may have died before the request and no signal would ever come.
    The pool forks from the thread that runs the scan, which waits for the workers' results."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl (another libc): the worker lives as before
        return
    if os.getppid() != parent:
        os._exit(1)


def _worker_init(parent: int) -> None:
    die_with_parent(parent)
    # the terminal sends Ctrl-C to the whole process group: only the main process answers it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    release_held()  # forked while the main process held them (_submit)


def _executor(processes: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=processes, mp_context=_pool_context(), initializer=_worker_init,
                               initargs=(os.getpid(),))


def _submit(executor: ProcessPoolExecutor, item: Item) -> Future:
    """``executor.submit``, which forks the pool's workers on its first call, with SIGINT and SIGTERM held: a
    Ctrl-C between a fork and the executor's record of the new process left a worker that ``stop()`` did not
    know, alive after the run, waiting for work for good and holding the terminal's output open."""
    with signals_held():
        return executor.submit(_work_indexed, item)


def _work_indexed(item: Item):
    index, key, args = item
    return (index, key, *work(args))


def _died(item: Item) -> FileResult:
    source = item[2][0]
    return FileResult(path=source.display, real_path=str(source.real), error=(
        f"{source.display}: the worker process died while processing this file (a crash, or killed by a "
        "signal such as the out-of-memory killer's); file left unchanged"))


def _estimate(item: Item) -> int:
    source, _options, raw, _passed = item[2]
    return memory_estimate(source.real, raw)


class Workers:
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
        self.executor = _executor(processes)
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
            executor = _executor(1)
            future = _submit(executor, item)
            self.solo[future] = executor
            self.running[future] = item
            self.in_flight += _estimate(item)
            return
        executor = self.executor or self._start(self.jobs)
        try:
            self.running[_submit(executor, item)] = item
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
                self.done(*_submit(executor, item).result())
            except BrokenProcessPool:
                self.stop()
                self.done(item[0], None, _died(item), None)

    def stop(self, solo: bool = True) -> None:
        """End the workers now (a broken pool, or an interrupt): cancel what has not started and kill
        the workers that are busy, instead of waiting for them. ``solo``: the large files' own processes too."""
        executor, self.executor = self.executor, None
        ending = [executor] if executor is not None else []
        if solo:
            ending += self.solo.values()
            for future in self.solo:
                self.running.pop(future, None)
            self.solo.clear()
        _end(*ending)


def _end(*executors: ProcessPoolExecutor) -> None:
    """Shut the executors down now, killing their busy processes (all of them before any wait: a worker of
    one holds the pipes of the pools made before it)."""
    ending = []
    for executor in executors:
        # the executor's own processes: they ignore SIGINT and may be busy for seconds on a big file
        processes = list((getattr(executor, "_processes", None) or {}).values())
        # shutdown(wait=False) forgets the manager thread and the result queue: keep them
        manager = getattr(executor, "_executor_manager_thread", None)
        results = getattr(executor, "_result_queue", None)
        executor.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            if process.is_alive():
                process.kill()
        ending.append((results, processes, manager))
    for _results, processes, _manager in ending:
        for process in processes:
            process.join()
    for results, _processes, manager in ending:
        # a worker killed while it wrote a result leaves the manager thread reading the rest of it for good:
        # this process holds the result pipe's other end. Closed, the read ends (the pool is broken); else
        # the interpreter's exit waited for that thread forever after a Ctrl-C
        writer = getattr(results, "_writer", None)
        if writer is not None:
            writer.close()
        # now that its workers are gone, wait for the executor's manager thread: left running, it closes
        # its wake-up pipe while the interpreter's exit hook writes to it (a traceback at exit)
        if manager is not None:
            manager.join(timeout=30)
