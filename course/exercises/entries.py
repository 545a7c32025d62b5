"""The course's own fastest kernels as leaderboard entries, launched their own way.

A student's submission to a board is one ``@cuda.jit`` kernel in the board's signature,
launched by the board (``boards.py``).  The course's fastest kernels do not fit that mould:

- ``histogram_tuned`` (lesson 09) reads the data as uint32 words (four channels a load, the
  channels padded), runs 2-D blocks with 64 KB of dynamic shared memory and takes a
  rows-per-block argument: ``course.kernels.histogram.launch("tuned", ...)`` sets that up;
- ``flash_mma`` (lesson 08) links CUDA C++ (``mma.sync`` through NVRTC) and takes the float16
  inputs as float32 words: ``course.kernels.attention_mma.launch`` (GPU only).

An *entry* is such a kernel with the host launch the course's benchmark times.  The
instructor enters one by name (``POST /api/submissions`` with ``"course_kernel"``, or
``python -m course submit BOARD --course-kernel NAME``); the service judges it exactly like a
submission - the board's public and hidden cases, then the timed launch at the seed's shape
with the GPU's measuring lock held, its outputs judged - in the same measuring process.  Only
the course's own code runs there (an entry carries a name, not code), so nothing is gated.

On the board an entry's row is ``course:NAME``: the time to beat, measured on the class GPU
by the same timer as every student's, beside the seed's static reference rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


class EntryError(ValueError):
    """An entry that does not exist, or cannot run here (the message says why)."""


@dataclass(frozen=True)
class Entry:
    name: str  # the course kernel's name (course/kernels)
    board: str  # the one board it is entered on
    where: str  # where its kernel and launch live (shown on the board)
    run: Callable  # (case, args) -> None: the course's launch on the board's arguments
    compile_ahead: Callable | None = None  # (board spec) -> None, see warm
    gpu_only: bool = False

    def ready(self) -> Entry:
        """This entry, if it can run here (EntryError otherwise)."""
        from ..platform import runtime

        if self.gpu_only and runtime.MODE != "gpu":
            raise EntryError(
                f"{self.name} links CUDA C++: it runs only on a GPU, and this "
                "service runs the simulator"
            )
        return self

    def warm(self) -> None:
        """Compile ahead (the measurer does this when it loads the entry, so the compile
        and link time of flash_mma's head-dim builds is not charged to a test case's
        time limit, as numba's first-launch compile of a submission's small kernel is)."""
        if self.compile_ahead is not None:
            from . import get as get_exercise

            self.compile_ahead(get_exercise(self.board))

    def bind(self, spec):
        """``spec`` whose ``launch(fn, case, args)`` runs this entry (``fn`` is ignored):
        the judge's and measurer's code paths stay those of any submission."""
        if spec.name != self.board:
            raise EntryError(f"{self.name} is entered on the {self.board} board, not {spec.name}")
        return _Bound(spec, self.ready())


class _Bound:
    """A board spec with the entry's launch in place of the board's."""

    def __init__(self, spec, entry: Entry):
        self._spec, self._entry = spec, entry

    def __getattr__(self, name):
        return getattr(self._spec, name)

    def launch(self, kernel, case, args):
        self._entry.run(case, args)

    def measure_on(self, fn, case, args):
        # Tune.measure_on times self.launch: call it unbound so the entry's launch is timed
        return type(self._spec).measure_on(self, fn, case, args)


def _contiguous(a):
    """``a`` itself when C-contiguous, else a contiguous device copy (the judge's guarded
    views are strided; its timed launch passes contiguous arrays, so no copy is timed)."""
    from numba import cuda

    if a.is_c_contiguous():
        return a
    out = cuda.device_array(a.shape, a.dtype)
    _assign(out, a)
    return out


def _assign(dst, src) -> None:
    """dst[:] = src for device arrays of any layout (numba-cuda copies with a kernel)."""
    dst[(slice(None),) * dst.ndim] = src


def _histogram_tuned(case, args) -> None:
    from numba import cuda

    from ..kernels import histogram as H
    from ..platform import runtime

    data, hist = args["data"], args["hist"]
    n, c = data.shape
    if data.is_c_contiguous() and c % 8 == 0:
        words = data  # viewed as uint32 words by the launch
    else:  # channels padded to whole words
        words = cuda.to_device(np.zeros((n, c + (-c % 8)), np.uint8))
        words[:, :c] = data
    out = _contiguous(hist)
    # simulator: one row chunk a column block (every block zeroes and flushes 64 KB of
    # shared counters, which the simulator pays for thread by thread)
    settings = H.TUNED_GPU if runtime.MODE == "gpu" else {"warps": 4, "chunks": 1}
    H.launch("tuned", words, c, hist=out, **settings)
    if out is not hist:
        _assign(hist, out)


def _flash_mma(case, args) -> None:
    from ..kernels import attention_mma as M

    Q, K, V, O = args["Q"], args["K"], args["V"], args["O"]
    d = Q.shape[2]
    if not math.isclose(float(args["scale"]), 1.0 / math.sqrt(d), rel_tol=1e-6):
        raise EntryError(
            "flash_mma scales the scores by 1 / sqrt(d) and the board asked "
            f"for {float(args['scale'])}"
        )
    o = _contiguous(O)
    M.launch(_contiguous(Q), _contiguous(K), _contiguous(V), o)
    if o is not O:
        _assign(O, o)


def _warm_flash(board) -> None:
    from numba import cuda

    from ..kernels import attention_mma as M

    for d in sorted({c.params["d"] for c in board.cases()} & set(M.HEAD_DIMS)):
        q = cuda.to_device(np.ones((1, 16, d), np.float16))
        M.launch(q, q, q, cuda.device_array((1, 16, d), np.float32))
    cuda.synchronize()


ENTRIES = {
    e.name: e
    for e in (
        Entry(
            "histogram_tuned",
            "histogram",
            "course/kernels/histogram_tuned.py, launched by "
            "course.kernels.histogram.launch('tuned') with the benchmark's settings",
            _histogram_tuned,
        ),
        Entry(
            "flash_mma",
            "flash_attention",
            "course/kernels/attention_mma.py (mma.sync, "
            "ldmatrix, cp.async in linked C++), launched by attention_mma.launch",
            _flash_mma,
            compile_ahead=_warm_flash,
            gpu_only=True,
        ),
    )
}


def get(name: str) -> Entry:
    if name not in ENTRIES:
        raise EntryError(
            f"there is no course kernel called {name!r}; the entries are "
            f"{', '.join(sorted(ENTRIES))}"
        )
    return ENTRIES[name]
