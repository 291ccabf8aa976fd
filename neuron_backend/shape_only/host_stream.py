"""The host's random stream in a shape-only run: the draws a real run makes are owed, and made when read.

A real (simulated) run moves the host's default CPU generator at two device calls (compat.py's module
docstring): SDPA's dropout seed (one 64-bit ``random_()``) and ``native_dropout``'s mask, the CPU kernel's
``bernoulli_`` of the input's size: one 64-bit draw per element where the kernel draws per element
(PyTorch's default kernel; MKL's, on Intel CPUs, draws one seed per call). At a real size that is 67M draws,
about 0.5 CPU-s, per dropout of 8 x 2048 x 4096, in a mode that computes nothing. Only a later read of the
stream can tell when they were made, so they are owed (a count per kind of draw) and made just before one:

* a host op that draws from a generator (tagged ``nondeterministic_seeded``: LayerDrop's ``torch.rand([])``,
  ``randperm``, ``random_`` or ``bernoulli_`` of a CPU tensor), which the recording mode hands here before it
  runs (``before_host_call``). Any generator counts: one passed to an op reaches it as a new Python object,
  so the default one is not told from another cheaply (paying early costs time, never a value);
* ``torch.get_rng_state`` (also as ``torch.random.get_rng_state``): ``fork_rng``, ``torch.utils.checkpoint``,
  Dynamo's compiles, the HF Trainer's and accelerate's checkpoints read the state so.

``torch.manual_seed``, ``torch.seed`` and ``torch.set_rng_state`` (and their ``torch.random`` names) replace the
state: what was owed before them can never be observed, and is dropped.

Why paying late is exact: the state depends only on how many 32-bit words the generator's engine gave
(``bernoulli_`` and an int64 ``random_()`` take two per element whatever the dtype or p, and neither touches
the cached normal sample), so the owed draws, made later and in any order, leave the state a real run has at
the read, and the reading op draws what it draws there. They are made as int64 ``random_()``s where a probe on a
private generator shows the same words (1.6x faster than ``bernoulli_``), else as the kernel made them.

Not seen: the generator object's own methods (``torch.default_generator.get_state()``, ``.set_state()``,
``.manual_seed()``: a C type, whose methods cannot be replaced) and these functions imported under their own
names before the run started (``from torch import get_rng_state``). A read so sees the stream without what is
owed: no hook is cheap there (paying at every device call would be the eager cost again). A reseed so is
caught when the debt is paid: the generator's initial seed changed since the first owed draw, and the debt is
dropped (a reseed with the same seed is not told from draws, and the debt is paid).
Values computed on the CPU for a random device op whose inputs are all known (values.py) pay first, so they
come from where a real run's stream stands.

The modes are never exited (mode.py's ``enter``: for the rest of the process), so their exit is the process's:
there the debt is dropped, not paid, as the state dies with the process. A read before that
(an ``atexit`` handler reading through the functions above) pays first, and a forked child (a DataLoader
worker) inherits the debt with the state and pays on its own reads.
"""

from __future__ import annotations

import contextlib
import functools
import threading

import torch
from torch.utils._python_dispatch import _disable_current_modes

_CHUNK = 1 << 20  # elements per host buffer while paying: the same words, a bounded buffer
_lock = threading.Lock()
_owed: dict[tuple, int] = {}  # (kind, dtype, p) -> elements (per-element kernel) or calls
_seed: list = []  # the generator's initial seed when the first owed draw was noted
_seeded: dict = {}  # op -> whether it draws from a generator
_words: dict = {}  # (kind, dtype, p) -> whether its draws are an int64 random_()'s (_as_random64)
_per_element: list = []  # whether a CPU bernoulli_ draws once per element (one seed per call: MKL's kernel)
BERNOULLI, RANDOM64 = "bernoulli_", "random_"


def bernoulli_per_element() -> bool:
    """Whether this build's CPU ``bernoulli_`` takes one draw per element (a private generator tells)."""
    if not _per_element:
        with _disable_current_modes():
            g = torch.Generator().manual_seed(0)
            torch.empty(1).bernoulli_(0.5, generator=g)
            one = g.get_state()
            torch.empty(2).bernoulli_(0.5, generator=g.manual_seed(0))
            _per_element.append(not torch.equal(one, g.get_state()))
    return _per_element[0]


def owe(kind: str, dtype: torch.dtype, p: float, count: int) -> None:
    """``count`` draws the real kernel makes (``bernoulli_(p)`` or ``random_()`` of ``count`` elements of
    ``dtype``; for MKL's bernoulli, ``count`` calls), to be made before the stream is next read."""
    with _lock:
        if not _owed:
            _seed[:] = [torch.default_generator.initial_seed()]
        key = (kind, dtype, p)
        _owed[key] = _owed.get(key, 0) + count


def drop() -> None:
    with _lock:
        _owed.clear()


def _as_random64(kind: str, dtype: torch.dtype, p: float) -> bool:
    """Whether ``count`` owed draws of this kind leave the state an int64 ``random_()`` of ``count`` elements
    leaves (two words an element: bernoulli's uniform double), so they are made so: 1.6x faster than
    ``bernoulli_`` here (3.9 against 6.1-6.8 ns an element). A private generator tells, once per kind."""
    key = (kind, dtype, p)
    same = _words.get(key)
    if same is None:
        g = torch.Generator()
        torch.empty(3, dtype=torch.int64).random_(generator=g.manual_seed(0))
        state = g.get_state()
        t = torch.empty(3, dtype=dtype)
        t.bernoulli_(p, generator=g.manual_seed(0)) if kind == BERNOULLI else t.random_(generator=g.manual_seed(0))
        same = _words[key] = torch.equal(state, g.get_state())
    return same


def pay() -> None:
    """Make the owed draws on the host's default generator, as the real kernels made them."""
    if not _owed:
        return
    with _lock, _disable_current_modes():
        if _seed and torch.default_generator.initial_seed() != _seed[0]:
            _owed.clear()  # reseeded through the generator object itself: what was owed is unobservable
            return
        per_element = bernoulli_per_element()
        words = 0  # int64 elements of random_() that make the same draws
        while _owed:
            (kind, dtype, p), count = _owed.popitem()
            if kind == BERNOULLI and not per_element:
                for _ in range(count):
                    torch.empty(1, dtype=dtype).bernoulli_(p)
            elif _as_random64(kind, dtype, p):
                words += count
            else:
                _draw(count, dtype, lambda part: part.bernoulli_(p) if kind == BERNOULLI else part.random_())
        if words:
            _draw(words, torch.int64, lambda part: part.random_())


def _draw(count: int, dtype: torch.dtype, draw) -> None:
    buffer = torch.empty(min(count, _CHUNK), dtype=dtype)
    while count:
        n = min(count, _CHUNK)
        draw(buffer[:n])
        count -= n


def before_host_call(func) -> None:
    """Pay before a real host op that draws from a generator (the recording mode's plain CPU calls)."""
    if not _owed:
        return
    seeded = _seeded.get(func)
    if seeded is None:
        seeded = _seeded[func] = torch.Tag.nondeterministic_seeded in func.tags
    if seeded:
        pay()


@contextlib.contextmanager
def kept():
    """The body's draws leave the default generator's state as it was, and what is owed stays owed (draws no
    real run makes: metas.py's twins of a random op; ``fork_rng`` would read the state, and so pay)."""
    state = torch.default_generator.get_state()
    try:
        yield
    finally:
        torch.default_generator.set_state(state)


def _after(first, fn):
    """``fn`` with ``first()`` (pay or drop what is owed) run before each call."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        first()
        return fn(*args, **kwargs)

    wrapper._neuron_port_stream = True
    return wrapper


def install() -> None:
    """Reads of the state pay what is owed; writes of a new state drop it (the module docstring)."""
    import torch.random

    for name, first in (("get_rng_state", pay), ("set_rng_state", drop), ("manual_seed", drop), ("seed", drop)):
        for module in (torch, torch.random):
            original = getattr(module, name)
            if not getattr(original, "_neuron_port_stream", False):
                setattr(module, name, _after(first, original))
