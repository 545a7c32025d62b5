"""A class's case inputs and references, made once per grading run and read by every judge.

Every submission of a ``grade`` run is judged with the run's one seed, so a case's inputs
and float64 reference (``judge.prepare``) are the same for every student: making them again
for each (1-2 s a student for a tune exercise's measured size on a GPU, the profile says)
is work the class pays for nothing.  With ``GradeSettings.shared_inputs`` (``grade`` sets
it) the judge takes them from here: each is made once, by the first judge that needs it,
while the others that need it wait, and kept while the grading process lives, up to
:data:`LIMIT_BYTES` (the least recently used go first).

What may cross: only what trusted code made from the spec and the run's seed; nothing a
submission sent ever enters.  Every array kept is read-only, so no judge can change what the
next one compares against, and each launch still gets fresh buffers
(``judge.Prepared.buffers``).  A notebook's ``course.check`` (a fresh seed each time) and the
leaderboard (a seed per submission) never use it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from . import judge

LIMIT_BYTES = 2 << 30  # inputs and references kept at once (a GPU class: a few tune cases)
_lock = threading.Lock()
_kept: OrderedDict = OrderedDict()  # key -> (Prepared, bytes)
_making: dict = {}  # key -> the lock its maker holds
_held = 0


def prepare(spec, case, key: tuple, rng_of, guard: bool = True) -> judge.Prepared:
    """``judge.prepare(spec, case, rng_of(), guard)``, made once per ``key`` (what the
    inputs depend on besides the case: the seed and the case's index, ``cases.py``)."""
    k = (spec.name, case.name, repr(sorted(case.params.items())), key, guard)
    with _lock:
        if k in _kept:
            _kept.move_to_end(k)
            return _kept[k][0]
        maker = _making.setdefault(k, threading.Lock())
    with maker:  # one judge makes it; the others wait for it here
        with _lock:
            if k in _kept:
                return _kept[k][0]
        try:
            prep = judge.prepare(spec, case, rng_of(), guard)
            _keep(k, frozen(prep))
            return prep
        finally:
            with _lock:
                _making.pop(k, None)


def frozen(prep: judge.Prepared) -> judge.Prepared:
    """``prep`` with every array of its inputs and references made read-only."""
    for part in (prep.host, prep.expected):
        for value in part.values():
            if isinstance(value, np.ndarray):
                value.flags.writeable = False
    return prep


def _keep(k, prep: judge.Prepared) -> None:
    global _held
    size = sum(
        v.nbytes
        for part in (prep.host, prep.expected)
        for v in part.values()
        if isinstance(v, np.ndarray)
    )
    if size > LIMIT_BYTES:
        return
    with _lock:
        while _kept and _held + size > LIMIT_BYTES:
            _, (_, dropped) = _kept.popitem(last=False)
            _held -= dropped
        _kept[k] = (prep, size)
        _held += size


def clear() -> None:
    """Forget everything kept (tests; a process that grades another run)."""
    global _held
    with _lock:
        _kept.clear()
        _held = 0
