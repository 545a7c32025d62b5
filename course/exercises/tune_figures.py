"""A tune exercise's figure: what is counted (simulator) or timed (GPU), and when it is believed.

In the simulator the figure is counted from one traced launch on freshly poisoned buffers
(:func:`traced_figures`, in the process that runs the kernel; the counts are
:mod:`course.sim.trace_figures`'s), over the launch's own arrays by position and over every
load, store and atomic, never by the names a kernel gives its parameters.  The judge
(:func:`sim_value`) divides by what it knows from the case alone (:func:`needed_bytes`):

- ``efficiency`` = the bytes the problem needs (every input read once, every output written
  once) / the bytes the kernel's memory transactions moved (sectors x 32): a useless read or
  write can only lower it;
- ``bytes_per_flop`` = every global byte the kernel read (any array, loads and atomics) /
  the FLOPs the problem needs;
- ``replays``, ``atomics_per_element``, ``bytes_per_element``: counts, all arrays together;
- ``issued`` = the instructions the kernel's code ran (``course.sim.trace_ops``) / the
  units of work the case needs (:func:`work_units`): useless arithmetic raises it;
- ``busiest``: the memory accesses of the busiest thread;
- ``imbalance`` = ``busiest`` / a thread's fair share (:func:`fair_share`: the accesses the
  case needs, spread over the threads the launch runs); one warp doing the whole grid's
  work measures 4 or more;
- ``divergence`` = warp memory requests / the requests the same active lanes need packed
  into whole warps (:func:`course.sim.trace_figures.warp_requests`): 1 when branches keep
  warps whole (``if tid < s``), above 1 when they leave lanes idle in many warps
  (``if tid % (2 * s) == 0``, Harris' reduction #0).

Every target comes with bounds on how the work is spread (:func:`sim_bounds`): a kernel
that leaves the work to one thread or one warp (``imbalance``) or idles lanes of many warps
(``divergence``) can reach any count of memory traffic while running slower than the given
kernel.  A count a kernel can bring to 0 by doing the work slowly may come with one more
(``Tune.sim_also``): no bank conflict is easy with no shared memory at all (a transpose
that writes uncoalesced: ``efficiency``).

A counted figure is not believed (no figure, no point) when the launch read less global
memory than its inputs hold (an access the tracer did not see), or had a race, an
uninitialized shared read or a partial syncthreads (a racy kernel can be right in the
simulator by luck).  On a GPU the figure is the fastest judged run, as a fraction of the
measured copy bandwidth or FP32 rate; past the measured ceiling it is not believed
(:func:`past_ceiling`).
"""

from __future__ import annotations

import math

import numpy as np

SIM_METRICS = {  # name -> (what it is, "<=" or ">=")
    "bytes_per_element": ("global bytes moved (32-byte sectors) per element", "<="),
    "efficiency": ("global memory efficiency (bytes the problem needs / bytes moved)", ">="),
    "replays": ("shared-memory replays (extra wavefronts from bank conflicts)", "<="),
    "atomics_per_element": ("global atomic operations per input element", "<="),
    "bytes_per_flop": ("global bytes read per FLOP", "<="),
    "busiest": ("memory accesses of the busiest thread", "<="),
    "imbalance": ("the busiest thread's memory accesses / a fair share", "<="),
    "divergence": ("warp memory requests / whole-warp requests", "<="),
    "issued": ("kernel instructions run per unit of work the case needs", "<="),
}
# Every simulator target also bounds how the work is spread (``Tune.spread``,
# ``Tune.divergence``): a count of memory traffic alone cannot tell a kernel that leaves the
# work to one warp or one thread, or runs a few lanes of every warp, from a fast one.
SPREAD = 2.0  # the busiest thread does at most twice a fair share of the accesses
DIVERGENCE = 1.05  # at most 5 % more warp requests than the same lanes packed into warps
GPU_METRICS = {
    "copy_fraction": "fraction of the measured copy bandwidth",
    "fp32_fraction": "fraction of the measured FP32 rate",
}
# A figure up to this much above a measured ceiling is still believed: a read-mostly kernel
# (a reduction, a histogram) streams a few per cent faster than the copy kernel the copy
# ceiling comes from (no read/write turnaround on the memory bus; its last inputs may still
# sit in L2 after the untimed restore), and the clock may boost a little between the
# ceilings' measurement and the run.  10 % covers those; skipping work gains far more.
CEILING_MARGIN = 1.10
# The H100's (and H200's) dense FP16 tensor-core peak with FP32 accumulation, 989 TFLOP/s
# (NVIDIA's data sheet, SXM): no GPU the course compiles for (sm_75, sm_90) does more, so
# it bounds a tensor-core board where no tensor rate was measured.
TENSOR_TFLOPS = 990.0
NOISY = 0.25  # median this much above the fastest run: something else used the GPU


class NoFigure(RuntimeError):
    """The traced launch cannot give a figure (a race, ...): the measurement fails."""


# -- the simulator: counted where the kernel runs ---------------------------------------


def traced_figures(spec, fn, case, args) -> dict:
    """The counts of one traced launch of ``fn`` on the device arrays ``args``."""
    from numba import cuda

    from ..sim import trace, trace_figures

    with trace.recording(ops=True) as traces:  # instructions too: ``issued``
        spec.launch(fn, case, args)
    cuda.synchronize()
    if why := trace_figures.problem(traces):
        raise NoFigure(f"no figure: {why}")
    return trace_figures.counts(traces)


# -- the simulator: judged from the case ------------------------------------------------


def needed_bytes(spec, case) -> tuple[int, int]:
    """(bytes of every input array, bytes of every output and in-out array) of ``case``:
    what the problem needs read once and written once (the sizes, not the values)."""
    return _needed(spec, case)[:2]


def needed_accesses(spec, case) -> int:
    """Element accesses ``case`` needs: every input element read once, every output (and
    in-out) element written once."""
    return _needed(spec, case)[2]


def fair_share(spec, case, threads: int) -> int:
    """The memory accesses one thread needs when ``threads`` share ``case``'s work evenly:
    its share of the elements the case reads and writes, of the operands its FLOPs read (2
    per FMA), and what the fast algorithm adds per thread (``Tune.balanced``: a tree's
    levels, a tile staged through shared memory)."""
    _n, _b, flops = spec.work(case)
    extra = spec.balanced(case, threads) if spec.balanced else 0
    threads = max(1, int(threads))
    return max(1, -(-needed_accesses(spec, case) // threads) + -(-flops // threads) + extra)


def work_units(spec, case, threads: int) -> int:
    """The work ``case`` needs, in units of one memory access or FLOP operand: every
    element read or written once, 2 operands per FMA, and what the fast algorithm adds per
    thread (``Tune.balanced``) over the launch's threads - :func:`fair_share` times the
    threads, what ``issued`` divides the instructions a kernel ran by."""
    _n, _b, flops = spec.work(case)
    extra = spec.balanced(case, threads) * int(threads) if spec.balanced else 0
    return max(1, needed_accesses(spec, case) + flops + extra)


def _needed(spec, case) -> tuple[int, int, int]:
    key = (spec.name, case.name, repr(case.params))
    if key not in _NEEDED:
        inputs = spec.make_inputs(case, np.random.default_rng(0))
        arrays = {k: v for k, v in inputs.items() if isinstance(v, np.ndarray) and v.ndim > 0}
        outs = spec.outputs(case).values()
        written = sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in outs)
        written += sum(arrays[n].nbytes for n in spec.inout if n in arrays)
        elements = sum(math.prod(shape) for shape, _d in outs)
        elements += sum(a.size for a in arrays.values())
        elements += sum(arrays[n].size for n in spec.inout if n in arrays)
        _NEEDED[key] = (
            int(sum(a.nbytes for a in arrays.values())),
            int(written),
            int(elements),
        )
    return _NEEDED[key]


_NEEDED: dict = {}


def sim_value(spec, f: dict) -> tuple:
    """(value, what, op, target, why not believable or None) of the counts ``f``."""
    what, op = SIM_METRICS[spec.sim_metric]
    n, _b, flops = spec.work(spec.sim_case)
    need_read, need_written = needed_bytes(spec, spec.sim_case)
    moved, read = finite(f["moved"]), finite(f["read"])
    if read < need_read:  # before any division: a launch that moved nothing has no figure
        why = (
            f"no figure: the traced launch read {read:g} bytes of global memory, less than "
            f"its inputs hold ({need_read} bytes) - every input must be read, through its "
            "array (an access the tracer cannot see is not counted)"
        )
        return 0.0, what, op, spec.sim_target, why
    v = _sim_metric(spec.sim_metric, f, n, flops, need_read + need_written, moved, read)
    why = None
    return v, what, op, spec.sim_target, why


def sim_bounds(spec) -> tuple:
    """((metric, limit), ...) the simulator target needs too: ``spec.sim_also``, then how
    the work is spread (``imbalance`` and ``divergence``)."""
    return (
        tuple(spec.sim_also)
        + (("imbalance", spec.spread), ("divergence", spec.divergence))
        + ((("issued", spec.issue_limit),) if spec.issue_limit else ())
    )


def sim_also(spec, f: dict) -> str | None:
    """The first of :func:`sim_bounds` that the counts ``f`` miss, as a sentence."""
    n, _b, flops = spec.work(spec.sim_case)
    need = sum(needed_bytes(spec, spec.sim_case))
    for metric, limit in sim_bounds(spec):
        what, op = SIM_METRICS[metric]
        detail = ""
        if metric == "imbalance":
            fair = fair_share(spec, spec.sim_case, finite(f["threads"]))
            v = finite(f["busiest"]) / fair
            detail = (
                f"; {f['busiest']:g} accesses, fair share {fair:g} over {f['threads']:g} threads"
            )
        elif metric == "divergence":
            v = finite(f["requests"]) / max(1.0, finite(f["packed"]))
        elif metric == "issued":
            units = work_units(spec, spec.sim_case, finite(f["threads"]))
            v = finite(f["issued"]) / units
            detail = f"; {f['issued']:g} instructions for {units:g} units of work"
        else:
            v = _sim_metric(metric, f, n, flops, need, finite(f["moved"]), finite(f["read"]))
        if not (v <= limit if op == "<=" else v >= limit):
            return (
                f"but {what}: measured {v:.4g}{detail}, limit {op} {limit:g} (the target counts "
                "only when the work is still done the fast way)"
            )
    return None


def _sim_metric(metric, f, n, flops, need, moved, read) -> float:
    return finite(
        {
            "bytes_per_element": lambda: moved / n,
            "efficiency": lambda: need / moved,
            "replays": lambda: finite(f["replays"]),
            "atomics_per_element": lambda: finite(f["atomics"]) / n,
            "bytes_per_flop": lambda: read / flops,
            "busiest": lambda: finite(f["busiest"]),
        }[metric]()
    )


# -- a GPU: timed, and believed only below the measured ceilings ------------------------


def gpu_value(spec, f: dict, ceil: dict) -> tuple:
    """(value, what, ">=", target) of the fastest judged run ``f["ms"]`` as a fraction of
    the card's ceiling (a board's figure; a tune exercise's target is a speed-up over its
    given kernel, ``tune_cards.py``)."""
    ms = finite(f["ms"])
    v = gpu_fraction(spec, ms, ceil)
    return v, f"{GPU_METRICS[spec.gpu_metric]} ({ms:.4g} ms)", ">=", spec.gpu_target


def gpu_fraction(spec, ms: float, ceil: dict) -> float:
    """A launch of ``ms`` at the GPU case as a fraction of the copy bandwidth or FP32 rate."""
    _n, nbytes, flops = spec.work(spec.gpu_case)
    if spec.gpu_metric == "copy_fraction":
        return nbytes / (ms * 1e-3) / 1e9 / float(ceil["copy_gbps"])
    return flops / (ms * 1e-3) / 1e12 / float(ceil["fp32_tflops"])


def past_ceiling(spec, ms: float, ceil: dict) -> str | None:
    """Why the figure cannot be true (above what this GPU can do), or None."""
    _n, nbytes, flops = spec.work(spec.gpu_case)
    limits = []
    if nbytes:
        limits.append(
            (nbytes / (ms * 1e-3) / 1e9, float(ceil["copy_gbps"]), "copy bandwidth", "GB/s")
        )
    if flops and spec.peak == "tensor":
        limits.append(
            (
                flops / (ms * 1e-3) / 1e12,
                float(ceil.get("tensor_tflops") or TENSOR_TFLOPS),
                "dense FP16 tensor-core rate",
                "TFLOP/s",
            )
        )
    elif flops:
        limits.append(
            (
                flops / (ms * 1e-3) / 1e12 / spec.flop_excess,
                float(ceil["fp32_tflops"]),
                "FP32 rate",
                "TFLOP/s",
            )
        )
    for rate, limit, what, unit in limits:
        if rate > CEILING_MARGIN * limit:
            return (
                f"no figure: {ms:.4g} ms is {rate / limit:.1f}x the {what} this GPU "
                f"can do ({rate:.4g} vs {limit:.4g} {unit}): not believable; the "
                "timed launches cannot have done the work"
            )
    return None


def noise_note(f: dict) -> str:
    """Say so when the runs spread like a shared GPU's (the figure is the fastest run)."""
    try:
        spread = float(f["median_ms"]) / float(f["ms"]) - 1
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return ""
    if spread <= NOISY:
        return ""
    return (
        f" (the runs spread: median {spread:.0%} above the fastest, which is the figure; "
        "another program was using this GPU - check again when it is quiet)"
    )


def finite(v) -> float:
    v = float(v)
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"not a finite, non-negative figure: {v}")
    return v
