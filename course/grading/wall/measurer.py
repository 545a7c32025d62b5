"""The measurer: the one process that launches a submission's kernel when a class is graded.

It runs no statement of the student's cells.  It gets a kernel *unit* (``unit.py``: source,
options and the constant values it uses, already through the compile gate) and rebuilds
the kernel in a fresh namespace, then answers the judge one request at a time:

- ``load``: rebuild the unit (defining it runs nothing), or take the course's own kernel an
  instructor entered by name (``exercises/entries.py``);
- ``launch``: launch it on the guarded buffers that came with the request and send them
  back (``launch.py``) - a correctness case;
- ``stage``, ``measure``, ``collect``: a tune exercise's measured launch (:class:`Measurement`):
  traced counts in the simulator, CUDA-event times on a GPU (the judge holds the GPU's
  measuring lock for ``measure`` only, ``platform/gpu_lock.py``), every run on restored buffers and
  judged (``exercises/timed.py``): ``stage`` brings the buffers, names the outputs to sample
  and carries the judge's seed (``sample``); ``measure`` replies with the figures;
  ``collect`` sends each run's samples (``sample:NAME``, runs x positions) and the last
  run's arrays whole.  A ``stage`` with ``profile`` set measures one launch for a profiler
  instead of timing it (``counter.py``: this process run under Nsight Compute).

The ceilings GPU figures are divided by are measured by the judge itself, before any worker
starts (``prepare.py``, with :func:`measure_ceilings` below): no student kernel runs there.

Why a separate process at all: a cell's Python can patch anything in the process it runs
in (``course``, numpy, the timing helper).  Here there is nothing of it to run.
"""

from __future__ import annotations

import os
import sys


def measure_ceilings() -> dict:
    """The measured copy bandwidth (GB/s) and FP32 rate (TFLOP/s) of this GPU, now."""
    from ...measure import perf

    copy_gbps, _ = perf.measure_copy_gbps()
    fp32, _ = perf.measure_fp32_tflops()
    return {"copy_gbps": float(copy_gbps), "fp32_tflops": float(fp32)}


def _case(c: dict):
    from ...exercises import Case

    return Case(
        c["name"],
        c["params"],
        tuple(c["grid"]),
        tuple(c["block"]),
        c.get("shared_bytes", 0),
        c.get("repeats", 1),
    )


def measure_launch(spec, fn, staged, sample: dict, steps: dict | None = None):
    """(figures, the last run's arrays, samples, trespass) of a tune exercise's measured
    launch (``staged``: a ``launch.Staged``): every run restored and sampled
    (``exercises/timed.py``); ``sample`` is the request's {"seed", "names", "sim_runs"} and
    "domains" (name -> flat positions the reference judges, from the request's
    ``domain:NAME`` arrays).  ``steps``, when given, gets the seconds of each step
    (``timed.Steps``: the arrays to the device, the compile run, ...)."""
    from ...exercises.timed import Arrays, judged_runs

    sampling = _sampling(sample)
    bufs = Arrays(staged.buffers, staged.shapes, staged.scalars)
    sampling.steps.lap("to device")
    try:
        return judged_runs(spec, fn, staged.case, bufs, sampling, traced=spec.measure_on)
    finally:
        if steps is not None:
            steps.update(sampling.steps)


def _sampling(sample: dict):
    """The ``timed.Sampling`` a request's ``sample`` (with its "domains") asks for."""
    from ...exercises.timed import Sampling

    domains = sample.get("domains") or {}
    return Sampling(sample["seed"], sample["names"], domains, sample.get("sim_runs", 0))


def _staged(req: dict, arrays: dict):
    """The request's case, arrays, shapes and scalars as a ``launch.Staged``."""
    from .launch import Staged

    return Staged(
        _case(req["case"]), arrays, {k: tuple(v) for k, v in req["shapes"].items()}, req["scalars"]
    )


class Measurement:
    """A tune exercise's measured launch in three requests, so that the judge holds the GPU's
    measuring lock for the runs only: ``stage`` takes the request and its arrays and puts
    them on the device (before the lock), ``measure`` runs them and replies with the
    figures, ``collect`` (after the lock) brings back the last run's arrays, checks the
    tails and pristine copies, and sends them with every run's samples."""

    def __init__(self):
        self.ready: tuple | None = None  # (spec, staged, sampling, device arrays)
        self.done: tuple | None = None  # (device arrays, samples) of the runs
        self.profile = False

    def stage(self, req: dict, arrays: dict, fn) -> None:
        from ...exercises.timed import Arrays

        self.ready = self.done = None
        if fn is None:
            raise ValueError("a measurement was staged before its kernel was loaded")
        domains = {
            k[len("domain:") :]: arrays.pop(k) for k in list(arrays) if k.startswith("domain:")
        }
        sampling = _sampling(dict(req["sample"], domains=domains))
        staged = _staged(req, arrays)
        bufs = Arrays(staged.buffers, staged.shapes, staged.scalars)  # to the device now
        self.profile = bool(req.get("profile"))  # one launch for a profiler (``counter.py``)
        self.ready = (_spec(req["exercise"], fn), staged, sampling, bufs)

    def measure(self, fn) -> dict:
        from ...exercises.timed import Steps, judged_runs

        ready, self.ready = self.ready, None
        if ready is None:
            return {"op": "measured", "error": "a measurement was asked for before its inputs"}
        spec, staged, sampling, bufs = ready
        sampling.steps = Steps()  # the runs' steps only: the judge times the staging
        figures, _, samples, _ = judged_runs(
            spec,
            fn,
            staged.case,
            bufs,
            sampling,
            traced=spec.measure_on,
            copies=False,
            profile=self.profile,
        )
        self.done = (bufs, samples)
        return {"op": "measured", "figures": figures, "steps": dict(sampling.steps), "error": None}

    def collect(self) -> tuple[dict, dict]:
        """The reply's header and arrays: the last run's arrays and the samples, or the
        error that the runs wrote outside their arrays."""
        done, self.done = self.done, None
        if done is None:
            return {"op": "collected", "error": "nothing was measured"}, {}
        bufs, samples = done
        whole, trespass = bufs.collect()
        if trespass:
            return {"op": "collected", "error": trespass}, {}
        return {"op": "collected", "error": None}, {
            **whole,
            **{f"sample:{k}": v for k, v in samples.items()},
        }


_REPLY = {
    "load": "loaded",
    "launch": "launched",
    "stage": "staged",
    "measure": "measured",
    "collect": "collected",
}


def _spec(name: str, fn):
    """The exercise or board ``name``; for a course entry (``exercises/entries.py``: the
    course's own kernel and host launch, no student code), the board with its launch."""
    from course import exercises
    from course.exercises.entries import Entry

    spec = exercises.get(name)
    return fn.bind(spec) if isinstance(fn, Entry) else spec


def _warm_up() -> tuple[float, float]:
    """(seconds spent making this process's CUDA context and compiling the course's helper
    kernels (``timed.warm_up``), of which the context's), before the judge asks for
    anything - and so before it takes the measuring lock.  A failure here is left for the
    measurement to report."""
    import time

    t = time.perf_counter()
    context = 0.0
    try:
        from numba import cuda

        from course.exercises.timed import warm_up

        cuda.current_context()
        context = time.perf_counter() - t
        warm_up()
    except Exception:  # noqa: BLE001, S110 - the measured launch says what is wrong
        pass
    return time.perf_counter() - t, context


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    import time

    t0 = time.perf_counter()
    from .wire import Channel

    chan = Channel(int(argv[0]), int(argv[1]))
    import course  # chooses gpu/sim before numba loads
    from course.exercises import entries

    from ..source.unit import UnitError, rebuild
    from .launch import run_launch

    took = time.perf_counter() - t0
    warm, context = _warm_up() if course.MODE == "gpu" else (0.0, 0.0)
    hello = {"op": "hello", "mode": course.MODE, "took": took + warm, "warm": warm}
    chan.send(dict(hello, context=context))
    fn, measurement = None, Measurement()
    while True:
        req, arrays = chan.recv()
        op = req.get("op")
        try:
            if op == "load":
                try:
                    if "entry" in req:  # the course's own kernel, by name
                        fn = entries.get(req["entry"]).ready()
                        fn.warm()
                    else:
                        fn = rebuild(req["unit"])
                    chan.send({"op": "loaded", "error": None})
                except (UnitError, entries.EntryError) as exc:
                    chan.send({"op": "loaded", "error": str(exc)})
            elif op == "launch":
                returned, error, timed_out = run_launch(
                    _spec(req["exercise"], fn),
                    fn,
                    _staged(req, arrays),
                    req["time_limit"],
                    req["race_hunt"],
                )
                chan.send({"op": "launched", "error": error, "timed_out": timed_out}, returned)
            elif op == "stage":
                measurement.stage(req, arrays, fn)
                chan.send({"op": "staged", "error": None})
            elif op == "measure":
                chan.send(measurement.measure(fn))
            elif op == "collect":
                chan.send(*measurement.collect())
            else:  # "bye"
                break
        except Exception as exc:  # noqa: BLE001 - the judge reports it
            chan.send(
                {"op": _REPLY.get(str(op), op), "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            )
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
