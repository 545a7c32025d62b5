"""*Tune* exercises: make a correct but slow kernel reach a measured target.

The student copy gives a kernel that already passes every correctness case; the check then
measures the kernel at the exercise's size and compares the figure with a target stated in
the spec:

- in the simulator, a figure the tracer counts (``course.sim.trace``) over every array of the
  launch, by position: global bytes moved per element, memory efficiency (bytes the problem
  needs / bytes moved), shared-memory replays (bank conflicts), global atomics per element,
  global bytes read per FLOP (``tune_figures.py`` defines each);
- on a GPU, the fastest of 30 timed launches (CUDA events, after warm-ups) against the
  given kernel's, timed the same way in the same run on the same card: a speed-up, which
  carries across cards where a fraction of one card's bandwidth does not (``tune_cards.py``;
  each exercise's docstring below says why its speed-up is the right figure).

Correctness comes first: a kernel that fails a case is not measured.  When a class is
graded the measurement runs in the measurer (``course/grading/wall/measurer.py``), a process that
runs the rebuilt kernel and nothing else of the student's, with this GPU's measuring lock
held; the grader judges every run's outputs and applies the target (``judge_figures``) with
ceilings it measured itself.

Why no timed run can skip work (the threat model; the loop is ``timed.py``)
-----------------------------------------------------------------------------
A figure is believed only if every launch it could come from did the whole job.  A kernel
that skips work must find the answer somewhere instead of computing it, or leave outputs
wrong; each place is closed:

- *its outputs*: before every run (warm-ups and the probe included) every output is poisoned
  anew and every in-out array and input restored, by device-to-device copies from pristine
  copies made once, enqueued before the start event (so they are not timed).  A kernel that
  "returns at once when C already holds numbers" always finds NaN, so it computes every
  time; one that wrote a cache into an input finds the input restored.
- *doing part of the job*: after every run, values at positions drawn only then, from a seed
  the judge chose and keeps (the kernel never sees it, and the positions do not exist
  anywhere on the device while it runs), go back to the judge, which compares them with its
  float64 reference under the case's tolerance: about 4,096 of each output per run (all of
  it when smaller), so leaving even 1 % of an output wrong is caught with probability
  1 - 0.99^4096 per run; any wrong run means no figure.  The last run's arrays come back
  whole and are judged like a case's (every element, inputs unchanged).
- *memory beside its arguments*: a kernel can keep state between runs only by writing past
  its arrays.  Each array runs in its own buffer with a tail band that is never restored,
  and the pristine copies are compared with what the judge sent: after the runs both must be
  unchanged, or there is no figure.  What lies farther away is not checked; copying a
  result kept there still takes time, and the ceiling rule below bounds what it can gain.
- *a figure past the hardware*: on a GPU a figure above the measured copy bandwidth, FP32
  rate or tensor-core peak (``CEILING_MARGIN``) fails as not believable: no point, no rank.

In the simulator the figure is counted, not timed: one traced launch on freshly poisoned
buffers, its outputs judged whole.  It cannot be gamed by work the problem does not need:
every figure divides by what the case alone fixes (the bytes its inputs and outputs hold,
its FLOPs), so useless reads or writes only worsen it; it counts loads, stores and atomics
of every array the launch passed, whatever the kernel names them; a launch that read less
than its inputs hold, or raced, gives no figure (``tune_figures.py``).  A count of memory
traffic cannot tell fast from slow, so every target also bounds how the work is spread:
the busiest thread's accesses (at most ``spread`` times a fair share of the case's work)
and the warps' idle lanes (warp requests at most ``divergence`` times those of whole
warps): one thread or one warp doing everything, or a divergent tree, misses them.  Nor can
a count of memory traffic see arithmetic: every target also bounds the instructions the
kernel's code runs per unit of work (``issued``, ``issue_limit``: about 4x the solution's),
so a chain of useless FLOPs fails in the simulator as a GPU would time it slow.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..platform import runtime
from . import Case, Exercise
from .outcome import TIMED, CaseResult
from .tune_cards import counted as counted_card
from .tune_cards import speedup_value, target_sentence, with_count
from .tune_figures import (
    DIVERGENCE,
    GPU_METRICS,
    SIM_METRICS,
    SPREAD,
    finite,
    gpu_value,
    noise_note,
    past_ceiling,
    sim_also,
    sim_bounds,
    sim_value,
    traced_figures,
)


@dataclass
class Tune(Exercise):
    """A tune exercise: ``base``'s cases for correctness, then one measured launch."""

    base: Exercise = None
    sim_metric: str = "efficiency"
    sim_target: float = 0.0
    gpu_metric: str = "copy_fraction"
    gpu_target: float = 0.0  # a board's figure (tune exercises: ``speedup``)
    speedup: float = 0.0  # GPU target: the given kernel's time / this kernel's, at least
    starter_floor: float = 0.0  # the given kernel counts at least this fraction of a ceiling
    issue_limit: float = 0.0  # simulator: instructions run per unit of work, at most
    sim_case: Case = None  # the measured launch in the simulator (small)
    gpu_case: Case = None  # ... and on a GPU (lecture size)
    work: object = None  # case -> (elements, bytes moved, FLOPs) of that launch
    peak: str = "fp32"  # the FLOP ceiling: "fp32", or "tensor" (tensor-core boards)
    flop_excess: float = 1.0  # counted FLOPs / FLOPs an honest kernel must do, at most
    sim_also: tuple = ()  # ((metric, limit), ...): simulator bounds the target needs too
    spread: float = SPREAD  # busiest thread's accesses / a fair share, at most
    divergence: float = DIVERGENCE  # warp requests / requests of whole warps, at most
    balanced: object = None  # (case, threads) -> accesses per thread the fast way adds

    def __getattr__(self, name):  # cases, make_inputs, outputs, reference, launch, ...
        if name.startswith("__") or name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    def cases(self):
        return self.base.cases()

    @property
    def launch_names(self):
        return self.base.launch_names

    def make_inputs(self, case, rng):
        return self.base.make_inputs(case, rng)

    def outputs(self, case):
        return self.base.outputs(case)

    def reference(self, case, inputs):
        return self.base.reference(case, inputs)

    def launch(self, kernel, case, args):
        return self.base.launch(kernel, case, args)

    def tolerance(self, case, name):
        return self.base.tolerance(case, name)

    def prepare(self, case, args):
        return self.base.prepare(case, args)

    @property
    def target_text(self) -> str:
        what, op = SIM_METRICS[self.sim_metric]
        also = "".join(
            f" and {SIM_METRICS[m][0]} {SIM_METRICS[m][1]} {v:g}" for m, v in sim_bounds(self)
        )
        gpu = (
            target_sentence(self)
            if self.speedup
            else f"{GPU_METRICS[self.gpu_metric]} >= {self.gpu_target:.1%}"
        )
        return f"simulator: {what} {op} {self.sim_target:g}{also}; GPU: {gpu}"

    # -- measuring (where the kernel runs) ----------------------------------------------
    def measured_case(self, mode: str | None = None) -> Case:
        """The launch the figure comes from: small in the simulator, lecture size on a GPU."""
        return self.sim_case if (mode or runtime.MODE) == "sim" else self.gpu_case

    def measure_on(self, fn, case, args) -> dict:
        """Traced counts of one launch of ``fn`` on the device arrays ``args`` (the
        simulator's figure).  GPU times come from ``timed.judged_runs``, which restores and
        judges every run; the measurer calls it."""
        return traced_figures(self, fn, case, args)

    # -- judging (the grader's side) ----------------------------------------------------
    def judge_figures(
        self, figures: dict, mode: str | None = None, ceilings: dict | None = None, counted=None
    ) -> CaseResult:
        """Apply the target to the figures; a CaseResult that states measured vs target.

        ``ceilings``: the copy bandwidth and FP32 rate GPU figures are divided by, the
        device's name and (``"starter"``) the given kernel's figures, timed by the judge
        (``course/grading/judging/starter.py``).  ``counted``: the simulator's verdict on
        the same kernel, which decides on a card that hides the lesson (``tune_cards``)."""
        mode = mode or runtime.MODE
        res = CaseResult(f"{TIMED} ({'simulator' if mode == 'sim' else 'GPU'})", "", timed=True)
        try:
            also, note = None, ""
            if mode == "sim":
                value, what, op, target, past = sim_value(self, figures)
                also = None if past else sim_also(self, figures)
            else:
                if ceilings is None:
                    from ..measure.perf import measured_ceilings

                    ceilings = measured_ceilings()
                past = past_ceiling(self, finite(figures["ms"]), ceilings)
                if past:  # before the starter: a figure past the hardware is no figure
                    value, what, op, target = 0.0, "", ">=", 0.0
                elif self.speedup:
                    value, what, op, target, note = speedup_value(self, figures, ceilings)
                else:
                    value, what, op, target = gpu_value(self, figures, ceilings)
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            res.fail(f"the measurement came back incomplete ({exc}); run the check again")
            return res
        if past:
            res.fail(past)
            res.figures = {}  # not believable: no figure to grade or rank
            return res
        ok = value <= target if op == "<=" else value >= target
        also = also if ok else None
        text = (
            f"{what}: measured {value:.4g}, target {op} {target:g}"
            + (f", {also}" if also else "" if ok else " - correct, but not there yet")
            + noise_note(figures)
            + note
        )
        ok = ok and not also
        if mode != "sim" and self.speedup and counted_card(self, ceilings.get("device")):
            ok, text = with_count(self, ok, text, counted)
        if ok:
            res.message = text
        else:
            res.fail(text)
        return res


# ---------------------------------------------------------------------------------------
# the tune exercises: a write spec for correctness + a measured launch and its targets


def _tunes():
    from . import faces, histogram, matmul, reduction, vector_add

    def spec(mod, name):
        return next(e for e in mod.EXERCISES if e.name == name)

    def tune(name, lesson, signature, goal, base, **kw):
        return Tune(
            name,
            lesson,
            signature,
            goal,
            inout=base.inout,
            hints=base.hints,
            kind="tune",
            base=base,
            **kw,
        )

    big = 1 << 26
    return [
        tune(
            "tune_vector_add",
            "01_vector_add",
            "@cuda.jit def add_fast(n, x, y)",
            "make the given (correct) add reach the target: y[i] = x[i] + y[i], any grid",
            vector_add.LECTURE_ADD,
            sim_metric="efficiency",
            sim_target=0.95,  # coalesced: 1.0; the given chunked kernel: 0.125
            speedup=1.5,
            starter_floor=0.1,
            issue_limit=18,
            sim_case=Case("n = 4096, 2 blocks of 64", {"n": 4096}, (2,), (64,)),
            gpu_case=Case("n = 2^26, 1056 blocks of 256", {"n": big}, (1056,), (256,)),
            work=lambda c: (c.params["n"], 12 * c.params["n"], 0),
        ),
        tune(
            "tune_reduction",
            "02_reduction",
            "@cuda.jit def reduce_fast(g_idata, g_odata)",
            "make the given (correct) block sums free of shared-memory bank conflicts",
            spec(reduction, "reduce_sequential"),
            sim_metric="replays",
            sim_target=0,
            # a tree: 3 shared accesses (2 reads, 1 write) per level, log2(threads) levels
            balanced=lambda c, _t: 3 * (c.block[0].bit_length() - 1),
            speedup=1.12,
            starter_floor=0.06,
            issue_limit=40,
            sim_case=Case(
                "n = 1024 float32, 16 blocks of 64",
                {"n": 1024, "dtype": "float32", "tpb": 64},
                (16,),
                (64,),
                shared_bytes=256,
            ),
            gpu_case=Case(
                "n = 2^26 float32, blocks of 256",
                {"n": big, "dtype": "float32", "tpb": 256},
                (big // 256,),
                (256,),
                shared_bytes=1024,
            ),
            work=lambda c: (c.params["n"], 4 * c.params["n"] * (1 + 1 / c.block[0]), 0),
        ),
        tune(
            "tune_matmul",
            "04_matmul",
            "@cuda.jit def matmul_fast(A, B, C)",
            "make the given (correct) matmul read A and B from global memory TILE times less often",
            spec(matmul, "matmul_tiled"),
            sim_metric="bytes_per_flop",
            sim_target=0.3,
            gpu_metric="fp32_fraction",
            speedup=1.8,
            starter_floor=0.012,
            issue_limit=48,
            sim_case=Case("M = K = N = 32", {"M": 32, "K": 32, "N": 32}, (2, 2), (16, 16)),
            gpu_case=Case(
                "M = K = N = 2048", {"M": 2048, "K": 2048, "N": 2048}, (128, 128), (16, 16)
            ),
            work=lambda c: (
                c.params["M"] * c.params["N"],
                0,
                2 * c.params["M"] * c.params["K"] * c.params["N"],
            ),
        ),
        tune(
            "tune_centering",
            "06_centering_coalescing",
            "@cuda.jit def center_fast(D, mean)",
            "make the given (correct) centering kernel coalesced",
            spec(faces, "center_coalesced"),
            sim_metric="efficiency",
            sim_target=0.6,  # coalesced: 0.68 (mean[j] is read again for every row)
            speedup=1.5,
            starter_floor=0.05,
            issue_limit=80,
            sim_case=Case("m x n = 32 x 64, 16 blocks of 128", {"m": 32, "n": 64}, (16,), (128,)),
            gpu_case=Case(
                "m x n = 20,011 x 2,475",
                {"m": 20_011, "n": 2_475},
                (-(-20_011 * 2_475 // 256),),
                (256,),
            ),
            work=lambda c: (
                c.params["m"] * c.params["n"],
                8 * c.params["m"] * c.params["n"] + 4 * c.params["n"],
                0,
            ),
        ),
        tune(
            "tune_covariance",
            "07_covariance_pca",
            "@cuda.jit def covariance_fast(data, cov, num_entries, num_features)",
            "make the given (correct) covariance read data from global memory chunk_size "
            "times less often",
            spec(faces, "covariance_tiled"),
            sim_metric="bytes_per_flop",
            sim_target=0.3,
            gpu_metric="fp32_fraction",
            speedup=1.2,
            starter_floor=0.012,
            issue_limit=64,
            sim_case=Case(
                "m = 16, n = 32, chunk_size = 16",
                {"m": 16, "n": 32},
                (2, 2),
                (16, 16),
                shared_bytes=2 * 16 * 16 * 4,
            ),
            gpu_case=Case(
                "m = 20,000, n = 2,048, chunk_size = 16",
                {"m": 20_000, "n": 2048},
                (128, 128),
                (16, 16),
                shared_bytes=2 * 16 * 16 * 4,
            ),
            flop_excess=2.0,  # a symmetric kernel computes half of cov
            work=lambda c: (c.params["n"] ** 2, 0, 2 * c.params["m"] * c.params["n"] ** 2),
        ),
        tune(
            "tune_histogram",
            "09_histogram",
            "@cuda.jit def histogram_fast(data, hist)",
            "make the given (correct) histogram use few global atomics on skewed data",
            histogram.HistogramTiles("histogram_tiles", "09_histogram", "", ""),
            sim_metric="atomics_per_element",
            sim_target=0.25,
            # privatized: every bin zeroed, read and flushed once in shared memory
            balanced=lambda c, t: -(-3 * 256 * c.params["channels"] // t),
            # a privatized histogram flushes only its non-empty bins (a data-dependent branch)
            divergence=1.25,
            speedup=1.6,
            starter_floor=0.008,
            issue_limit=72,
            sim_case=Case(
                "length x channels = 256 x 8, skewed",
                {"length": 256, "channels": 8, "dist": "skewed"},
                ("-", "-"),
                (64,),
            ),
            gpu_case=Case(
                "length x channels = 2^18 x 512, skewed",
                {"length": 1 << 18, "channels": 512, "dist": "skewed"},
                ("-", "-"),
                (256,),
            ),
            work=lambda c: (
                c.params["length"] * c.params["channels"],
                c.params["length"] * c.params["channels"],
                0,
            ),
        ),
    ]


EXERCISES = _tunes()
