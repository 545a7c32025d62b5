"""How a run grades: one frozen :class:`GradeSettings`, built once and read by every stage.

``python -m course grade`` builds it from its command line once its sandbox is made and its
ceilings measured (``prepare.before_workers``); the leaderboard's runner builds one per
submission (``leaderboard/runner.py``).  From there it travels unchanged: ``batch.grade_one``
-> ``session`` (the judge, its measurers and compile gate) -> ``scoring``.  A Dask worker
grades with a copy that holds its own machine's sandbox and ceilings (:meth:`here`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..wall.launch import TIME_LIMIT_S


@dataclass(frozen=True)
class GradeSettings:
    """Everything grading one submission depends on besides the submission itself."""

    seed: int  # the input seed, the same for every student
    mode: str  # "sim" (numba's simulator) or "gpu"
    timeout: float = 600.0  # seconds per submission, all exercises together
    memory_mb: int = 0  # address-space limit of each process, MiB (0: none)
    case_time_limit: float | None = None  # seconds per case (None: course.check's)
    lesson: str | None = None  # --lesson: the lesson of every submission
    all_or_nothing: bool = False  # every exercise scores only if every case passes
    isolation: Any = None  # the sandbox (``isolate.Isolation``); None: none
    isolation_choice: str = "none"  # "auto": a Dask worker builds its own sandbox
    ceilings: dict | None = None  # GPU: copy GB/s and FP32 TFLOP/s, measured once
    warm: bool = True  # sandboxes forked from zygotes (``forks.py``); False: ``--cold``
    shared_inputs: bool = False  # cases' inputs and references made once a run (``preps.py``)
    starters: frozenset | None = None  # tune exercises whose given kernels a run times (None: all)
    private: tuple = ()  # every path the command line names: no sandbox sees it, wherever

    @property
    def limit(self) -> float:
        """Seconds one case may run."""
        return self.case_time_limit or TIME_LIMIT_S[self.mode]

    def here(self, isolation, ceilings) -> GradeSettings:
        """These settings with this machine's sandbox and GPU ceilings (a Dask worker's)."""
        return replace(self, isolation=isolation, ceilings=ceilings)

    @classmethod
    def from_args(cls, opts, mode: str, isolation, ceilings, starters=None) -> GradeSettings:
        """From ``grade``'s command line (``batch.main``), with the defaults that depend on
        the mode: a random seed, and 16384 MiB per process in the simulator (none on a GPU,
        whose driver maps a lot)."""
        import secrets

        from ..wall.isolate import command_line_folders

        memory = opts.memory_mb if opts.memory_mb is not None else (0 if mode == "gpu" else 16384)
        return cls(
            seed=secrets.randbits(31) if opts.seed is None else opts.seed,
            mode=mode,
            timeout=opts.timeout,
            memory_mb=memory,
            case_time_limit=opts.case_time_limit,
            lesson=opts.lesson,
            all_or_nothing=opts.all_or_nothing,
            isolation=isolation,
            isolation_choice=opts.isolation_choice,
            ceilings=ceilings,
            warm=not getattr(opts, "cold", False),
            shared_inputs=True,  # one seed for the class: every judge reads the same inputs
            starters=frozenset(starters) if starters is not None else None,
            private=tuple(str(p) for p in command_line_folders(opts)),
        )
