"""Exercise specs: what ``course.check(name, kernel)`` runs a student's kernel against.

The hidden cases and predict answer keys are grading's (``course/grading/hidden.py``),
passed in: nothing here reads them.

An exercise says, for each *case* (an input size and a launch configuration):
- which host inputs to make (fresh random values, never zeros),
- which outputs the kernel writes (the checker poisons them and adds a guard band),
- which inputs it may also write (``inout``) and which must come back unchanged,
- how to launch the kernel, and the float64 reference with its tolerance.

The checking itself (poison, guard bands, time limit, messages) is the same for every
exercise and lives in ``course/grading``.  Each module that the lesson index
(``course/lessons.py``) names defines ``EXERCISES = [...]``; :func:`get` finds an exercise
by name.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field

import numpy as np

from .. import lessons
from ..platform import runtime


@dataclass
class Case:
    """One input size + launch configuration of an exercise."""

    name: str  # what the report shows, e.g. "n = 33 (tpb + 1)"
    params: dict  # sizes the spec needs, e.g. {"n": 33}
    grid: tuple  # blocks per grid, e.g. (2,) or (3, 2)
    block: tuple  # threads per block, e.g. (32,) or (4, 3)
    shared_bytes: int = 0  # dynamic shared memory per block (bytes)
    repeats: int = 1  # > 1: run again with fresh poison, to expose races
    hidden: bool = False  # only run by the grader

    @property
    def launch(self) -> str:
        dims = lambda t: t[0] if len(t) == 1 else tuple(t)  # noqa: E731
        extra = f", 0, {self.shared_bytes}" if self.shared_bytes else ""
        return f"[{dims(self.grid)}, {dims(self.block)}{extra}]"


@dataclass
class Tolerance:
    """|got - expected| <= atol + rtol * |expected| elementwise; exact when both are 0."""

    rtol: float = 0.0
    atol: float = 0.0
    why: str = ""

    @property
    def exact(self) -> bool:
        return self.rtol == 0 and self.atol == 0

    def __str__(self) -> str:
        if self.exact:
            return "exact (integers)"
        s = f"|got - expected| <= {self.atol:g} + {self.rtol:g} * |expected|"
        return f"{s} ({self.why})" if self.why else s


FLOAT32_ELEMENTWISE = Tolerance(
    rtol=1e-6, atol=1e-6, why="one float32 operation per element vs a float64 reference"
)
EXACT = Tolerance()


KINDS = ("write", "debug", "predict", "tune")


@dataclass
class Exercise:
    """Base class: subclasses fill in cases, inputs, reference and launch.

    ``kind`` says what the student does: ``write`` a kernel from a spec and a stub; ``debug``
    a given kernel with a planted bug (the check fails on it as given; the notebook cell's
    ``### GIVEN:`` lines are the bug the student copy shows); ``predict`` numbers or choices
    before running anything (``course.check`` then takes the answer dict, not a kernel: see
    ``predict.py``); ``tune`` a correct but slow kernel until a measured figure reaches the
    spec's target (``tune.py``; the lesson index lists each lesson's exercises).
    """

    name: str
    lesson: str  # notebook stem, e.g. "01_vector_add"
    signature: str  # e.g. "@cuda.jit def add(n, x, y)"
    goal: str  # one sentence: what the kernel must do
    inout: tuple = ()  # inputs the kernel writes in place
    hints: dict = field(default_factory=dict)  # failure kind -> hint text
    kind: str = "write"  # one of KINDS (contract: Exercise.kind)
    # module-level names of the student's that ``launch`` reads (tile sizes, ...): they
    # travel with the kernel's unit (course/grading/source/unit.py) when the student defines them
    launch_names = ()
    # what judging one submission may take when more than the defaults (0: the defaults of
    # the leaderboard's runner and of the sandbox): seconds in all, the sandbox's memory
    time_budget_s = 0.0
    memory_mb = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"exercise {self.name!r}: kind {self.kind!r} is not one of {KINDS}")

    # -- to override -------------------------------------------------------------------
    def cases(self) -> list[Case]:
        raise NotImplementedError

    def make_inputs(self, case: Case, rng: np.random.Generator) -> dict:
        """Host arrays (and scalars) by argument name."""
        raise NotImplementedError

    def outputs(self, case: Case) -> dict:
        """Pure outputs: name -> (shape, dtype).  The checker poisons them."""
        return {}

    def reference(self, case: Case, inputs: dict) -> dict:
        """Expected final values of every output and inout array (float64 or exact ints)."""
        raise NotImplementedError

    def launch(self, kernel, case: Case, args: dict) -> None:
        """Launch ``kernel`` on the device arrays in ``args`` (same names as the inputs)."""
        raise NotImplementedError

    def tolerance(self, case: Case, name: str) -> Tolerance:
        return FLOAT32_ELEMENTWISE

    def prepare(self, case: Case, args: dict) -> None:
        """Called before each launch, after outputs are poisoned (e.g. zero a histogram)."""


# ---------------------------------------------------------------------------------------
# helpers shared by exercise modules


def sim() -> bool:
    """True when the check runs in the simulator (use small sizes)."""
    return runtime.MODE != "gpu"


def random_floats(rng, shape, dtype=np.float32, low=-1.0, high=1.0):
    """Uniform random values in [low, high) that are never exactly zero."""
    a = rng.uniform(low, high, size=shape)
    a[a == 0] = 0.5
    return a.astype(dtype)


def blocks_for(n: int, tpb: int) -> int:
    """ceil(n / tpb): enough blocks of tpb threads to give every element a thread."""
    return max(1, math.ceil(n / tpb))


def prime_near(n: int) -> int:
    """The smallest prime >= n (for sizes that are multiples of nothing)."""

    def is_prime(k):
        return k > 1 and all(k % d for d in range(2, int(k**0.5) + 1))

    while not is_prime(n):
        n += 1
    return n


# ---------------------------------------------------------------------------------------
# registry


def _modules():
    """The modules that define ``EXERCISES``, as the lesson index names them."""
    return lessons.exercise_modules()


def all_exercises() -> dict[str, Exercise]:
    """Every exercise of every lesson, by name."""
    found: dict[str, Exercise] = {}
    for mod_name in _modules():
        mod = importlib.import_module(f"{__name__}.{mod_name}")
        for ex in getattr(mod, "EXERCISES", []):
            if ex.name in found:
                raise RuntimeError(f"exercise {ex.name!r} is defined twice")
            found[ex.name] = ex
    return found


def get(name: str) -> Exercise:
    """The exercise called ``name``; KeyError saying which name was meant otherwise."""
    exercises = all_exercises()
    if name not in exercises:
        # the leaderboard's two seed boards (found by name, like the lesson modules)
        seeds = importlib.import_module(f"{__name__}.boards").SEED_BOARDS
        if name in seeds:
            return seeds[name]
        raise KeyError(unknown_name(name, [*exercises, *seeds]))
    return exercises[name]


def unknown_name(name, names) -> str:
    """'no exercise called ...' with the closest of ``names`` ("did you mean"), or where to
    look when none is close."""
    import difflib

    if not isinstance(name, str):
        return (
            f'the exercise is named by a string, like course.check("vector_add", add); '
            f"got {type(name).__name__} {name!r}"
        )
    key = name.strip().lower()
    close = difflib.get_close_matches(key, list(names), n=3, cutoff=0.6)
    close += [n for n in sorted(names) if key and key in n and n not in close][: 3 - len(close)]
    if close:
        also = f" (also close: {', '.join(repr(c) for c in close[1:])})" if close[1:] else ""
        return f"no exercise called {name!r}: did you mean {close[0]!r}?{also}"
    return (
        f"no exercise called {name!r}: each notebook's check cells name its exercises; "
        "course.exercises.all_exercises() lists them all"
    )
