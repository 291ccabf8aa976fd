"""Calls of each signature outside the training steps (EVENTS.md, "Phases", ``outside_calls``).

A signature's ``calls`` are totals over the run, so a shape that a training step and an evaluation (or
a generation) share has one count for both. When the phase changes (one Python call per phase, never per
op), the calls each signature made in the phase that ends are read from the C++ core's op table (by its
first-sighting sequence number) and, when no optimizer step completed during that phase, added to the
tally of its kind, by the reader's rules (neuron_port/check/aggregate/phases.py): ``setup`` (phase 0,
before any outermost call), ``generation`` (no DataLoader batches, and new signatures first seen at two or
more of its calls after the first: its inputs keep changing as it decodes) or ``evaluation``. A phase
of a single outermost call followed by more optimizer steps (a frozen teacher under ``no_grad``) is part of
the training step it runs in, as the reader takes it: such a phase is held aside until the clock shows
whether training went on after it.
"""

from __future__ import annotations

from . import state

KINDS = ("setup", "evaluation", "generation")

# Keys: a signature's first-sighting sequence number (int), or an op's name (str) for its calls in all
_at_start: dict = {}  # key -> its calls when the current phase began
_outside: dict[str, dict] = {}  # kind -> key -> its calls in phases of that kind
_single: list[tuple[int, str, dict]] = []  # one-call phases without a step: (steps at end, kind, calls)
# Counters kept in Python (the runs of each torch.compile graph, compile/graph_work.py): callables that
# return {key: count}, their keys tuples so they never meet a signature's or an op's
_sources: list = []


def add_source(counts) -> None:
    """Count ``counts()`` (``{key: count}``, tuple keys) per phase as the op table is."""
    _sources.append(counts)


def _counts(raw=None) -> dict:
    if raw is None:
        raw = state.C.op_stats() if state.C is not None else []
    counts: dict = {}
    for name, _policy, calls, sigs in raw:
        counts[name] = calls
        for c, seq, _flags, _u, _desc in sigs:
            counts[seq] = c
    for source in _sources:
        counts.update(source())
    return counts


def _since_start(now: dict) -> dict:
    return {seq: c - _at_start.get(seq, 0) for seq, c in now.items() if c > _at_start.get(seq, 0)}


def kind(number: int, loader: bool, decoding: bool = False) -> str:
    """``decoding``: new signatures were first seen at two or more of the phase's calls after its first."""
    return "setup" if number == 0 else "generation" if decoding and not loader else "evaluation"


def phase_ended(number: int, loader: bool, start_step: int, end_step: int, calls: int,
                decoding: bool = False) -> None:
    """Phase ``number`` ended with ``end_step`` optimizer steps completed (``start_step`` when it began)
    after ``calls`` outermost calls; the next phase begins now."""
    if state.C is None:
        return
    now = _counts()
    if end_step == start_step:
        made = _since_start(now)
        if number > 0 and calls <= 1:
            _single.append((end_step, kind(number, loader, decoding), made))
        else:
            _add(_outside, kind(number, loader, decoding), made)
    _single[:] = [s for s in _single if s[0] >= end_step]  # training went on after it: part of its step
    _at_start.clear()
    _at_start.update(now)


def _add(tally: dict[str, dict], which: str, made: dict) -> None:
    into = tally.setdefault(which, {})
    for seq, c in made.items():
        into[seq] = into.get(seq, 0) + c


def outside_calls(raw, number: int, loader: bool, start_step: int, steps_now: int, decoding: bool = False) -> dict:
    """Per signature (and per op, by name), its calls outside the training steps so far, by kind: the ended phases', the held
    one-call phases after which no optimizer step completed, and the current phase's when no step has
    completed in it (the last phase of a run, e.g. a generation after training)."""
    tally = {k: dict(v) for k, v in _outside.items()}
    for end_step, which, made in _single:
        if end_step >= steps_now:
            _add(tally, which, made)
    if state.C is not None and steps_now == start_step:
        _add(tally, kind(number, loader, decoding), _since_start(_counts(raw)))
    out: dict = {}
    for which, made in tally.items():
        for seq, c in made.items():
            out.setdefault(seq, {})[which] = c
    return out
