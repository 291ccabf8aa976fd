"""NP909: the command did not finish successfully (could not start, timed out, killed, non-zero exit), and
which process failed how: the rank, its exception and the last lines of its traceback.

A process whose events file ends with ``status: "exception"`` raised; its traceback comes from its own
output (torchrun's per-rank log, or the command's stderr for a single process). A torchrun worker that
ended without raising (killed by a signal, or a non-zero exit without a Python exception) is known from
torchrun's own process, which records when and how each worker ended (``worker_exit`` events): it counts
with the time it ended, so a rank SIGKILLed first is named, not its peer's "Connection reset by peer".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Collection, Optional, Sequence

from neuron_port.check.aggregate.findings import project_finding, rule_message, runtime_finding
from neuron_port.check.events import ProcessEvents
from neuron_port.check.runner import RunStatus
from neuron_port.check.sites import SiteMapper, UserSite, site_json
from neuron_port.results import Finding

TRACEBACK_LINES = 15
TRACEBACK_START = "Traceback (most recent call last):"
SEPARATOR_CHARS = set("=-*_ ")  # a line of these only is a separator (torchrun's ===== around its error summary)


@dataclass(frozen=True)
class ProcessFailure:
    """A process of the run that ended with an uncaught exception."""

    rank: Optional[int]
    pid: Optional[int]
    exception: str  # "RuntimeError: message"
    site: Optional[UserSite]  # the innermost user frame of the traceback
    traceback: tuple[str, ...]  # its last lines, from the process's own output
    raised_at: Optional[float] = None  # epoch seconds of its exception: the first to raise is the root cause
    how: Optional[str] = None  # a worker that ended without an exception: "was killed by SIGKILL", ...

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "pid": self.pid, "exception": self.exception, "site": site_json(self.site),
                "traceback": list(self.traceback)}

    def describe(self) -> str:
        who = "the process" if self.rank is None else f"rank {self.rank}"
        return f"{who} {self.how}" if self.how else f"{who} failed with {self.exception}"


# a collective or store call whose peer process went away (gloo's and c10d's TCP texts)
LOST_PEER = re.compile(r"Connection (?:closed|reset) by peer|remote worker crash|Broken pipe", re.IGNORECASE)
RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]: ?")  # torchrun --tee marks each line with its rank


FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line \d+')
LIBRARY_FILE = re.compile(r"site-packages|dist-packages|/lib/python3[.\d]*/|^<frozen ")


def last_traceback(lines: Sequence[str], limit: int = TRACEBACK_LINES) -> tuple[str, ...]:
    """The last Python traceback in ``lines``, as the user needs it: the header, the frames of their own
    code (with the code line), runs of frames inside libraries (torch, the standard library) folded into
    one line, and the exception; at most ``limit`` lines, keeping the end. Without a traceback: the last
    lines."""
    lines = [RANK_PREFIX.sub("", line) for line in lines]
    starts = [i for i, line in enumerate(lines) if TRACEBACK_START in line]
    if not starts:
        return tuple(line for line in lines if line.strip())[-limit:]
    block = [line for line in lines[starts[-1]:] if line.strip() and set(line.strip()) - set("^~")]
    out, hidden = [block[0]], 0
    i = 1
    while i < len(block):
        frame = FRAME.match(block[i])
        if frame is None:
            if hidden:
                out.append(f"  ... {hidden} frame(s) in libraries")
                hidden = 0
            out.append(block[i])
            i += 1
            continue
        end = i + 1  # the frame's code line(s): indented deeper than its "File" line
        indent = len(block[i]) - len(block[i].lstrip())
        while end < len(block) and not FRAME.match(block[end]) and len(block[end]) - len(block[end].lstrip()) > indent:
            end += 1
        if LIBRARY_FILE.search(frame.group("file")):
            hidden += 1
        else:
            if hidden:
                out.append(f"  ... {hidden} frame(s) in libraries")
                hidden = 0
            out.extend(block[i:end])
        i = end
    if hidden:
        out.append(f"  ... {hidden} frame(s) in libraries")
    return tuple(out[:1] + out[1:][-(limit - 1):]) if len(out) > limit else tuple(out)


def process_failures(processes: Sequence[ProcessEvents], status: RunStatus,
                     mapper: SiteMapper) -> list[ProcessFailure]:
    logs = {log.rank: log.stderr_tail for log in status.ranks}
    # under torchrun the launcher imports torch too, so it has an events file of its own (without a rank):
    # its ChildFailedError only repeats a worker's failure
    ranked = any(p.process is not None and p.process.rank is not None for p in processes)
    failures = []
    for process in processes:
        info = process.process
        if info is None or info.status != "exception" or info.exception is None:
            continue
        if ranked and info.rank is None:
            continue
        exc = info.exception
        exception = ": ".join(part for part in (exc.type, exc.message) if part) or "an exception"
        own = logs.get(info.rank) if info.rank is not None else None
        output = own if own is not None else (status.stderr_tail if len(processes) == 1 else [])
        failures.append(ProcessFailure(rank=info.rank, pid=info.pid, exception=exception, site=mapper(exc.site),
                                       traceback=last_traceback(output), raised_at=exc.time))
    failures.extend(_worker_deaths(status, {f.rank for f in failures}, logs))
    # the rank that failed first is the root cause: the others usually fail on a collective with its peer gone.
    # Such a failure (gloo's "Connection closed by peer ... typically caused by a remote worker crashing") comes
    # after the others whatever the clocks say: a worker's end is dated when torchrun's thread woke up, which on a
    # busy machine can be later than the peer's exception
    return sorted(failures, key=lambda f: (f.raised_at is None, bool(LOST_PEER.search(f.exception)),
                                           f.raised_at or 0.0, f.rank is None, f.rank or 0))


def _worker_deaths(status: RunStatus, raised: Collection[Optional[int]],
                   logs: dict[Optional[int], list[str]]) -> list[ProcessFailure]:
    """The torchrun workers that ended without a Python exception (a signal, or a non-zero exit code), from
    torchrun's own process (``status.worker_exits``), dated by their end; not those torchrun stopped after a
    failure (its SIGTERM), nor a rank whose exception is known (it says more)."""
    out = []
    for ended in status.worker_exits:
        how = ended.how()
        if how is None or ended.stopped_by_launcher or ended.rank in raised:
            continue
        out.append(ProcessFailure(rank=ended.rank, pid=ended.pid, exception=how, site=None,
                                  traceback=last_traceback(logs.get(ended.rank) or []), raised_at=ended.ended,
                                  how=how))
    return out


def describe_failure(status: RunStatus) -> str:
    """What happened to the command, completing "the command ..." (NP909's message)."""
    return _ending(status, summary=False)


def describe_outcome(status: Optional[RunStatus]) -> str:
    """How the command ended, completing "the command ..." in the text report (the check panel's outcome and
    the line of `check -q`), without markup; "not run" without a run."""
    return "not run" if status is None else _ending(status, summary=True)


def _ending(status: RunStatus, summary: bool) -> str:
    # One wording of a run's status, in two registers: NP909's message names a failure; the summary also
    # ends a success, and gives durations as the JSON report does (to the millisecond, then formatted).
    duration = round(status.duration, 3) if summary else status.duration
    if status.error:
        return f"could not start: {status.error}"
    if status.timed_out:  # no process recorded: it never used the device, so the runtime section is empty
        return f"timed out after {duration:.0f} s" + ("" if status.processes else
                                                      ", before any process used the neuron device (nothing ran "
                                                      "on it to report; give it a longer --timeout)")
    if status.interrupted:
        return (f"interrupted ({status.interrupted}) after {duration:.1f} s" if summary
                else f"was stopped: check was interrupted ({status.interrupted})")
    if status.signal:
        return f"killed by {status.signal}" if summary else f"was killed by {status.signal}"
    if status.exit_code != 0 or not summary:
        return f"exited with code {status.exit_code}"
    return f"succeeded in {duration:.1f} s"


def command_failed_finding(status: RunStatus, failures: Sequence[ProcessFailure] = ()) -> Optional[Finding]:
    """The NP909 finding, or None when the command succeeded: at the failing line with the failing rank and
    its exception when a process raised, else about the project with the last non-blank line of stderr."""
    if status.succeeded:
        return None
    what = rule_message("NP909", what=describe_failure(status))
    if failures:
        first = failures[0]
        more = f" (and {len(failures) - 1} more process(es))" if len(failures) > 1 else ""
        return runtime_finding("NP909", f"{what}: {first.describe()}{more}", first.site, severity="error") \
            if first.site is not None else project_finding("NP909", f"{what}: {first.describe()}{more}", "error")
    last = next((line for line in reversed(status.stderr_tail) if set(line.strip()) - SEPARATOR_CHARS), "")
    return project_finding("NP909", what + (f": {last.strip()}" if last else ""), severity="error")


NEXT_STEP = "run `neuron-port rewrite` first, or add `--preview`"
# a crash on a CUDA name (torch.cuda, "Torch not compiled with CUDA enabled", CUDAAccelerator, nccl, is_cuda,
# torch._C._cuda_*): the letters right before it are not a word's (so "barracuda" is not one)
CUDA_SHAPED = re.compile(r"(?<![a-z])_*(?:cuda|nccl|cudnn|cublas)", re.IGNORECASE)


def not_ported_hint(status: RunStatus, failures: Sequence[ProcessFailure],
                    pending_files: Collection[str]) -> Optional[str]:
    """"Not ported yet (why): run `neuron-port rewrite` first" when a failed run is one of unported code: its
    exception (or the traceback's lines) names CUDA, or the failing frame's file has safe fixes not applied
    (``pending_files``: their paths as the report names them). None for any other failure (a KeyError in a
    ported file is the program's own bug, whatever another file still has pending)."""
    if status.succeeded:
        return None
    if failures:
        texts = [text for f in failures[:1] for text in (f.exception, *f.traceback)]
        failing_file = failures[0].site.path if failures[0].site is not None else None
    else:  # no process recorded its exception: the command's own last traceback
        texts, failing_file = list(last_traceback(status.stderr_tail)), None
    pending = len(pending_files)
    if any(CUDA_SHAPED.search(text) for text in texts):
        why = "the run failed on CUDA, which the simulated neuron device does not have" + (
            f"; {pending} file(s) have safe fixes not applied yet" if pending else "")
    elif failing_file is not None and failing_file in pending_files:
        why = f"{failing_file}, where it failed, has safe fixes not applied yet"
    else:
        return None
    return f"Not ported yet ({why}): {NEXT_STEP}"


def with_next_step(finding: Finding, hint: Optional[str]) -> Finding:
    """NP909 with the next step for code that is not ported yet (``not_ported_hint``)."""
    if finding.code != "NP909" or not hint:
        return finding
    return replace(finding, message=f"{finding.message}. {hint}")
