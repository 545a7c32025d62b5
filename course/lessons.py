"""The lesson index: for each lesson, its notebook and every module and file that serves it.

One place names what the package's conventions used to find by scanning folders:

- ``kernels``: modules of ``course/kernels`` whose kernels the notebook shows;
- ``exercises``: each exercise's name (``course.check``'s first argument) and the module
  of ``course/exercises`` that defines it in ``EXERCISES`` (most predict and tune
  exercises live in ``predict.py`` and ``tune.py``);
- ``bench``: the module of ``course/bench`` with ``TITLE`` and ``run(report)`` that
  ``python -m course bench`` runs (several lessons may share one);
- ``figures``: modules of ``course/show/figures`` whose ``FIGURES`` draw the lesson's
  pictures in ``assets/``;
- ``hidden``: the exercises graded with hidden cases, one file each in the instructor's
  ``instructor/hidden/<exercise>.py`` (a predict exercise's file holds its answer key).

``course.exercises.all_exercises``, ``course.show.figures.registry`` and
``course.bench.lessons`` read their modules from here; ``tests/test_lessons.py`` checks that
the index names every notebook and every exercise once, and what each folder holds.
Module names are relative to their folder (``"matmul"`` is ``course/kernels/matmul.py``
under ``kernels``): this module imports nothing of the course.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Lesson:
    """What serves one lesson (module names relative to their folder)."""

    notebook: str  # notebooks/<notebook>.ipynb
    kernels: tuple = ()  # course/kernels/<name>.py
    exercises: dict = field(default_factory=dict)  # exercise -> course/exercises/<module>.py
    bench: str | None = None  # course/bench/<bench>.py
    figures: tuple = ()  # course/show/figures/<name>.py
    keys: tuple = ()  # predict exercises: answer keys, no cases

    @property
    def number(self) -> str:
        return self.notebook.partition("_")[0]

    @property
    def title(self) -> str:
        return self.notebook.partition("_")[2]

    @property
    def hidden(self) -> tuple:
        """Exercises graded with hidden cases: every one but the predict exercises (``keys``),
        whose instructor file holds the answer key instead."""
        return tuple(name for name in self.exercises if name not in self.keys)


def _ex(module: str, *names: str, predict=(), tune=()) -> dict:
    out = {n: module for n in names}
    out.update({n: "predict" for n in predict})
    out.update({n: "tune" for n in tune})
    return out


LESSONS = (
    Lesson("00_start_here", kernels=("start_here",)),
    Lesson(
        "01_vector_add",
        kernels=("vector_add",),
        exercises=_ex(
            "vector_add",
            "vector_add",
            "matrix_add",
            "debug_grid_stride",
            "debug_matrix_layout",
            predict=("predict_launch",),
            tune=("tune_vector_add",),
        ),
        bench="vector_add",
        figures=("vector_add",),
        keys=("predict_launch",),
    ),
    Lesson(
        "02_reduction",
        kernels=("reduction", "reduction_single_pass", "reduction_beyond"),
        exercises=_ex(
            "reduction",
            "reduce_sequential",
            "reduce_first_add",
            "reduce_grid_stride",
            "debug_reduce_sync",
            predict=("predict_bank_ways",),
            tune=("tune_reduction",),
        ),
        bench="reduction",
        figures=("reduction",),
        keys=("predict_bank_ways",),
    ),
    Lesson(
        "03_window_average",
        kernels=("window",),
        exercises=_ex("window", "window_average_shared", "debug_window_halo", "window_constant"),
        bench="window",
        figures=("window",),
    ),
    Lesson(
        "04_matmul",
        kernels=("matmul", "matmul_tuned", "matmul_shapes", "matmul_v5", "matmul_v6"),
        exercises=_ex(
            "matmul",
            "matmul_tiled",
            "matmul_epilogue",
            "debug_matmul_sync",
            "matmul_split_k",
            predict=("predict_occupancy", "predict_intensity"),
            tune=("tune_matmul",),
        ),
        bench="matmul",
        figures=("matmul",),
        keys=("predict_occupancy", "predict_intensity"),
    ),
    Lesson(
        "05_mean_face",
        kernels=("faces",),
        exercises={
            **_ex("faces", "mean_face", predict=("predict_floor",)),
            "sum_of_squares": "reduction",
        },
        bench="faces",
        figures=("faces",),
        keys=("predict_floor",),
    ),
    Lesson(
        "06_centering_coalescing",
        kernels=("faces",),
        exercises=_ex(
            "faces",
            "center_coalesced",
            "debug_center_guard",
            predict=("predict_sectors",),
            tune=("tune_centering",),
        ),
        bench="faces",
        figures=("faces",),
        keys=("predict_sectors",),
    ),
    Lesson(
        "07_covariance_pca",
        kernels=("covariance",),
        exercises=_ex(
            "faces",
            "covariance_tiled",
            "debug_covariance_sync",
            predict=("predict_cgma",),
            tune=("tune_covariance",),
        ),
        bench="faces",
        figures=("faces",),
        keys=("predict_cgma",),
    ),
    Lesson(
        "08_flash_attention",
        kernels=(
            "attention",
            "attention_common",
            "attention_standard",
            "attention_tuned",
            "attention_wmma",
            "attention_mma",
        ),
        exercises=_ex(
            "attention",
            "online_softmax",
            "flash_attention_forward",
            "debug_softmax_rescale",
            predict=("predict_attention",),
        ),
        bench="attention",
        figures=("attention",),
        keys=("predict_attention",),
    ),
    Lesson(
        "09_histogram",
        kernels=("histogram", "histogram_tuned"),
        exercises=_ex(
            "histogram",
            "histogram_shared",
            "debug_histogram_sign",
            predict=("predict_histogram",),
            tune=("tune_histogram",),
        ),
        bench="histogram",
        figures=("histogram",),
        keys=("predict_histogram",),
    ),
    Lesson(
        "10_profiling",
        kernels=("profiling",),
        exercises=_ex("profiling", "predict_profile", "predict_access", "tune_transpose"),
        keys=("predict_profile", "predict_access"),
    ),
    Lesson(
        "11_gpt2",
        kernels=("gpt2", "gpt2_params", "gpt2_passes", "graph"),
        exercises=_ex("gpt2", "layernorm_warp", "debug_layernorm_sync", predict=("predict_gpt2",)),
        bench="gpt2",
        keys=("predict_gpt2",),
    ),
    Lesson(
        "12_thrust_algorithms",
        kernels=("algorithms", "algorithms_iterators"),
        exercises=_ex(
            "algorithms", "count_positive", "debug_max_identity", predict=("predict_saxpy",)
        ),
        bench="algorithms",
        keys=("predict_saxpy",),
    ),
)

# what serves the whole course rather than one lesson
COURSE_BENCH = ("grading", "leaderboard")  # grading a class; the class leaderboard
COURSE_FIGURES = ("trace",)  # the tracer's demo (course.sim.trace)


def lesson(name: str) -> Lesson:
    """The lesson whose notebook stem, number or title is ``name`` (``04_matmul``, ``04``,
    ``matmul``); KeyError naming the lessons otherwise."""
    for les in LESSONS:
        if name in (les.notebook, les.number, les.title):
            return les
    raise KeyError(
        f"no lesson {name!r}; the lessons are {', '.join(les.notebook for les in LESSONS)}"
    )


def _union(values) -> list:
    return sorted({v for vs in values for v in vs})


def exercise_modules() -> list:
    """Modules of ``course/exercises`` that define ``EXERCISES``, sorted."""
    return _union(les.exercises.values() for les in LESSONS)


def bench_modules() -> list:
    """Modules of ``course/bench`` that ``python -m course bench`` runs, sorted."""
    return _union([[les.bench] for les in LESSONS if les.bench] + [COURSE_BENCH])


def figure_modules() -> list:
    """Modules of ``course/show/figures`` that define ``FIGURES``, sorted."""
    return _union([les.figures for les in LESSONS] + [COURSE_FIGURES])


def lesson_of_exercise(name: str) -> Lesson:
    """The lesson that names exercise ``name``; KeyError otherwise."""
    for les in LESSONS:
        if name in les.exercises:
            return les
    raise KeyError(f"no lesson names the exercise {name!r} (course/lessons.py)")


def hidden_exercises() -> frozenset:
    """Every exercise graded with hidden cases, over all lessons."""
    return frozenset(name for les in LESSONS for name in les.hidden)
