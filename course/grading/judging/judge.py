"""The trusted half of a check: make a case's inputs, and judge what came back.

A check has two halves, and this split is what keeps grades honest:

- **this module** makes the inputs (fresh random values, never zeros), computes the float64
  reference, wraps every array in a buffer with a guard band, and afterwards compares what
  came back with the reference (guard bands untouched, inputs unchanged, outputs within the
  stated tolerance);
- ``launch.py`` only *launches* the student's kernel on those buffers and hands them back.

In a notebook both halves run in your own process (``course.check``).  When a class is
graded, this half runs in the grader's process and the launch half in a separate process
that runs the student's cells (see ``session.py``): the expected outputs, the seed and the
hidden cases never enter the process that runs student code, so nothing a cell does there
can change a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

GUARD = 1024  # guard elements after a 1-D array (a few blocks' worth)
GUARD_2D = 32  # guard rows and columns around a 2-D array
INT_POISON = -777_777_777
GUARD_FLOAT = 31337.25  # guard-band sentinel for floats (finite: arithmetic changes it)


@dataclass
class Prepared:
    """One case, ready to launch: the host inputs, the reference, the guarded buffers."""

    host: dict  # argument name -> numpy array or scalar (unguarded)
    expected: dict  # output/inout name -> float64 (or exact) reference
    out_specs: dict  # pure output name -> (shape, dtype)
    shapes: dict = field(default_factory=dict)  # array name -> its shape inside the buffer
    guard: bool = True  # False: plain contiguous arrays (a timed launch)

    def buffers(self, fresh: bool = True) -> dict:
        """Fresh host buffers for one launch: outputs poisoned and, unless ``guard`` is off,
        a guard band around every array.  ``fresh=False``, for buffers that are only sent
        (a timed launch's, to its measurer): an input without a guard band is the prepared
        array itself, read-only - not a copy the size of a GPU's inputs per student."""
        bufs = {}
        for name, value in self.host.items():
            if isinstance(value, np.ndarray) and not fresh and not self.guard:
                bufs[name] = value.view()
                bufs[name].flags.writeable = False
            elif isinstance(value, np.ndarray):
                bufs[name] = guarded(value.shape, value.dtype, fill=value, band=self.guard)
        for name, (shape, dtype) in self.out_specs.items():
            bufs[name] = guarded(shape, np.dtype(dtype), band=self.guard)
        return bufs

    def buffer_shapes(self) -> dict:
        """name -> (dtype, shape) of the buffers :meth:`buffers` makes, none of them made."""
        out = {}
        for name, value in self.host.items():
            if isinstance(value, np.ndarray):
                out[name] = (value.dtype, guarded_shape(value.shape, self.guard))
        for name, (shape, dtype) in self.out_specs.items():
            out[name] = (np.dtype(dtype), guarded_shape(shape, self.guard))
        return out

    def scalars(self) -> dict:
        """The non-array arguments (sizes, constants)."""
        return {k: v for k, v in self.host.items() if not isinstance(v, np.ndarray)}

    def staged(self, case):
        """``case`` staged for one launch (``launch.Staged``): fresh buffers, outputs
        poisoned anew; no reference goes with them."""
        from ..wall.launch import Staged

        return Staged(case, self.buffers(), self.shapes, self.scalars())


def prepare(spec, case, rng, guard: bool = True) -> Prepared:
    """Inputs, reference and output shapes of one case (raises if the spec is broken).

    ``guard=False`` is for a tune exercise's timed launch: its arrays are plain and
    contiguous, as a program would pass them (a view into a guarded 2-D buffer is strided,
    and numba compiles slower index arithmetic for it); its outputs are still judged."""
    host = spec.make_inputs(case, rng)
    expected = spec.reference(case, {k: _copy(v) for k, v in host.items()})
    out_specs = spec.outputs(case)
    shapes = {k: v.shape for k, v in host.items() if isinstance(v, np.ndarray)}
    shapes.update({k: tuple(s) for k, (s, _d) in out_specs.items()})
    return Prepared(host, expected, out_specs, shapes, guard)


def judge(spec, case, prep: Prepared, returned: dict, rep: int = 0) -> str | None:
    """None when the buffers that came back are right; else the first problem, one sentence.

    ``returned`` maps every buffer name to the full guarded buffer after the launch.
    """
    for name, (dtype, shape) in prep.buffer_shapes().items():
        got = returned.get(name)
        if not isinstance(got, np.ndarray) or got.shape != shape or got.dtype != dtype:
            return f"{name} did not come back from the launch as it was sent"
    for name in list(prep.out_specs) + [n for n in spec.inout if n in prep.host]:
        shape = prep.shapes[name]
        got_full = returned[name]
        msg = _guard_message(name, got_full, shape)
        if msg:
            return msg
        got = got_full[_region(shape)]
        if (
            name in spec.inout
            and np.array_equal(got, prep.host[name])
            and not np.array_equal(got, prep.expected[name])
        ):
            return (
                f"{name} came back unchanged: the kernel never wrote it "
                "(is its body still `pass`, or does no thread reach the store?)"
            )
        msg = compare(name, got, prep.expected[name], spec.tolerance(case, name))
        if msg:
            return msg + (
                f" (on repeat run {rep + 1} of {case.repeats}: the kernel gives "
                "different results on identical inputs - a race?)"
                if rep
                else ""
            )
    for name, value in prep.host.items():
        if isinstance(value, np.ndarray) and name not in spec.inout:
            now = returned[name]
            msg = _guard_message(name, now, value.shape) or _changed_input_message(
                name, value, now[_region(value.shape)]
            )
            if msg:
                return msg
    return None


def _copy(v):
    return v.copy() if isinstance(v, np.ndarray) else v


def _region(shape):
    return tuple(slice(0, s) for s in shape)


def poison(dtype):
    """What unwritten outputs hold: NaN for floats, a sentinel for integers."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return np.nan
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return INT_POISON if info.min <= INT_POISON else info.max
    return 0


def guard_value(dtype):
    """The finite sentinel of guard bands (NaN would survive `y = x + y`, a sentinel not)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":  # float16 is coarse at 31337: use a small sentinel there
        return np.asarray(GUARD_FLOAT if dtype.itemsize > 2 else 7.375, dtype=dtype)[()]
    return poison(dtype)


def guarded_shape(shape, band: bool = True) -> tuple:
    """The shape of :func:`guarded`'s buffer for an array of ``shape``."""
    if not band:
        return tuple(shape)
    if len(shape) == 1:
        return (shape[0] + GUARD,)
    return tuple(s + GUARD_2D for s in shape)


def guarded(shape, dtype, fill=None, band: bool = True) -> np.ndarray:
    """A host buffer: data (``fill``, or the poison) plus a sentinel guard band after
    (1-D) or around (2-D+) it (none when ``band`` is off)."""
    buf = np.full(guarded_shape(shape, band), guard_value(dtype), dtype=dtype)
    buf[_region(shape)] = poison(dtype) if fill is None else fill
    return buf


def _guard_message(name, full, shape) -> str | None:
    if full.ndim == 1:  # the band is the tail: no mask the size of the buffer
        touched = full[shape[0] :] != guard_value(full.dtype)
        if not touched.any():
            return None
        return _trespass_message(name, shape, shape[0] + int(np.argmax(touched)))
    return _guard_by_mask(name, full, shape)


def _guard_by_mask(name, full, shape) -> str | None:
    """The out-of-bounds check as defined: every element outside ``shape``'s region."""
    mask = np.ones(full.shape, dtype=bool)
    mask[_region(shape)] = False
    touched = full[mask] != guard_value(full.dtype)
    if not touched.any():
        return None
    idx = np.argwhere(mask)[np.argmax(touched)]
    where = int(idx[0]) if len(idx) == 1 else tuple(int(i) for i in idx)
    return _trespass_message(name, shape, where)


def _trespass_message(name, shape, where) -> str:
    return (
        f"wrote out of bounds: {name} has shape {tuple(shape)}, but the kernel wrote "
        f"{name}[{where}] (past the end) - is a bounds check (`if i < n`) missing?"
    )


CHUNK = 1 << 20  # elements judged at a time: a 2^26-element output needs no 512 MB temporaries


def compare(name: str, got: np.ndarray, expected, tol) -> str | None:
    """None if ``got`` matches ``expected`` within ``tol``; otherwise one readable sentence.
    Large arrays are judged a slab of rows at a time (the same verdict, bounded memory)."""
    expected = np.asarray(expected)
    if got.shape != expected.shape:
        return f"{name} has shape {got.shape}, expected {expected.shape}"
    if got.ndim == 0 or got.size <= CHUNK:
        slabs: list = [Ellipsis]
    else:
        step = max(1, CHUNK // max(1, got[0].size))
        slabs = [slice(i, i + step) for i in range(0, got.shape[0], step)]
    nwrong, first = 0, None
    for slab in slabs:
        wrong = _wrong(got[slab], expected[slab], tol)
        count = int(np.count_nonzero(wrong))
        if count and first is None:
            local = tuple(int(i) for i in np.argwhere(wrong)[0])
            first = local if slab is Ellipsis else (local[0] + slab.start, *local[1:])
        nwrong += count
    if first is None:
        return None
    where = first[0] if len(first) == 1 else first
    if _unwritten(got[first], expected[first]):
        unwritten = sum(int(np.count_nonzero(_unwritten(got[s], expected[s]))) for s in slabs)
        return (
            f"{name}[{where}] was never written (still holds the poison value); "
            f"{unwritten} of {got.size} elements unwritten"
        )
    return (
        f"{name}: {nwrong} of {got.size} elements wrong; first at index "
        f"{where}: got {number_text(got[first])}, expected {number_text(expected[first])}"
    )


def _wrong(got, expected, tol):
    if tol.exact:
        wrong = got != expected
    else:
        with np.errstate(invalid="ignore"):
            wrong = ~(
                np.abs(got.astype(np.float64) - expected) <= tol.atol + tol.rtol * np.abs(expected)
            )
    if expected.dtype.kind == "f":
        wrong &= ~np.isnan(expected)  # NaN in a reference: an element not judged
    return wrong


def _unwritten(got, expected):
    """Where ``got`` still holds the poison (NaN; an integer sentinel the reference lacks)."""
    p = poison(got.dtype)
    if isinstance(p, float) and np.isnan(p):
        return np.isnan(got)
    return (got == p) & (expected != p)


def _changed_input_message(name, before, after) -> str | None:
    kind, size = before.dtype.kind, before.dtype.itemsize
    if (
        before.shape == after.shape
        and before.dtype == after.dtype
        and kind in "biufc"
        and size in (1, 2, 4, 8)
        and np.array_equal(before.view(f"u{size}"), after.view(f"u{size}"))
    ):
        return None  # bit for bit the same (one pass, no temporaries): unchanged
    return _changed_by_value(name, before, after)


def _changed_by_value(name, before, after) -> str | None:
    """The unchanged-input check as defined: every element equal, NaN where NaN was."""
    changed = before != after
    if before.dtype.kind == "f":
        changed &= ~(np.isnan(before) & np.isnan(after))
    if not changed.any():
        return None
    first = tuple(int(i) for i in np.argwhere(changed)[0])
    where = first[0] if len(first) == 1 else first
    return (
        f"the input {name} was modified: {name}[{where}] was {number_text(before[first])}, "
        f"now {number_text(after[first])} - inputs must come back unchanged"
    )


def number_text(x) -> str:
    return f"{x:.7g}" if isinstance(x, (float, np.floating)) else str(x)
