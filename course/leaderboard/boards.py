"""The boards: one per tune exercise, plus the CS149 seed boards ``histogram`` and
``flash_attention``.  A board says what a submission must define and how it is judged;
``course/exercises`` holds the specs, so the grader's judge and measurer run them as is."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .. import exercises as _ex
from ..exercises.boards import SEED_BOARDS
from ..exercises.entries import ENTRIES


class UnknownBoard(KeyError):
    pass


@dataclass(frozen=True)
class Reference:
    """A time shown on a board for comparison, never ranked (seeds, the course's bench)."""

    who: str
    ms: float
    note: str


REFERENCES = {
    "histogram": (
        Reference("CS149 leaderboard #1", 0.315, "H100, 2025 (seed work log)"),
        Reference(
            "course bench: histogram_tuned",
            0.2372,
            "H100, python -m course bench histogram, 2026-11-25 (own launch: packed "
            "uint32 words, rows per block; assets/benchmarks)",
        ),
    ),
    "flash_attention": (
        Reference("CS149 leaderboard #1 (Team12)", 13.617, "H100, 2025 (seed work log)"),
        Reference(
            "course bench: flash_mma",
            36.48,
            "H100, python -m course bench attention, 2026-11-23 (linked C++ mma.sync; "
            "assets/benchmarks)",
        ),
        Reference("torch SDPA", 14.32, "H100, same bench run"),
    ),
}


_DESCRIBED: dict = {}  # (board, spec, mode) -> its description (the specs live as long)


@dataclass(frozen=True)
class Board:
    name: str
    spec: Any  # a Tune: tests = its base exercise's cases, time = its measured launch

    @property
    def function(self) -> str:
        m = re.search(r"def\s+(\w+)", self.spec.signature)
        return m.group(1) if m else ""

    def describe(self, mode: str) -> dict:
        """What the board page and ``GET /api/boards`` say about it: worked out once per
        board and mode (its cases and a small case's dtypes do not change between requests)."""
        key = (self.name, id(self.spec), mode)
        if key not in _DESCRIBED:
            _DESCRIBED[key] = self._describe(mode)
        return _DESCRIBED[key]

    def _describe(self, mode: str) -> dict:
        case = self.spec.measured_case(mode)
        base = self.spec.base
        n_tests = len(base.cases())
        return {
            "board": self.name,
            "lesson": self.spec.lesson,
            "signature": self.spec.signature,
            "function": self.function,
            "goal": self.spec.goal,
            "shape": case.name,
            "timed_shape_gpu": self.spec.gpu_case.name,
            "launch": case.launch,
            "dtypes": _dtypes(self.spec),
            "tests": f"{n_tests} public cases of {base.name} (+ the instructor's hidden "
            "cases), then the timed launch, whose outputs are judged too",
            "references": [r.__dict__ for r in REFERENCES.get(self.name, ())],
            "course_kernels": [
                {"name": e.name, "where": e.where, "gpu_only": e.gpu_only}
                for e in ENTRIES.values()
                if e.board == self.name
            ],
            "seed": self.name in SEED_BOARDS,
        }


def _dtypes(spec) -> str:
    """The board's argument dtypes, read off a small case's inputs and outputs."""
    import numpy as np

    try:
        ins = spec.make_inputs(spec.sim_case, np.random.default_rng(0))
        outs = spec.outputs(spec.sim_case)
    except Exception:  # noqa: BLE001 - a description only
        return ""
    parts = [f"{k} {v.dtype}" for k, v in ins.items() if hasattr(v, "dtype")]
    parts += [f"{k} {np.dtype(d)}" for k, (_s, d) in outs.items()]
    return ", ".join(parts)


def all_boards() -> dict[str, Board]:
    tunes = [e for e in _ex.all_exercises().values() if e.kind == "tune"]
    return {
        b.name: b
        for b in [Board(e.name, e) for e in tunes] + [Board(n, s) for n, s in SEED_BOARDS.items()]
    }


def get(name: str) -> Board:
    boards = all_boards()
    if name not in boards:
        raise UnknownBoard(unknown(name, boards))
    return boards[name]


def unknown(name, boards) -> str:
    """The one sentence for a board name that is not one of ``boards``."""
    return f"there is no board called {name!r}; the boards are {', '.join(sorted(boards))}"
