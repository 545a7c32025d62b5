"""Checks and grading: everything between a student's kernel and a verdict, in four rooms.

Each room is a subpackage; a room imports from the rooms above it in this list and from
the three modules beside this file, never from a room below (``tests/test_layout.py``
holds it).  Each room's docstring says what it does and what may cross into it.

- ``hidden``, ``phases``, ``messages`` (beside this file): where the instructor's hidden
  cases and keys live, the per-phase clock of a grading run, numba's reasons as the
  course's sentences - used by every room.
- ``source/``: a submitted kernel as data - its unit (source text, constants, device
  functions), its ``@cuda.jit`` line, its signature, the allowlist of its body.  Reads
  text, bounded; runs nothing.
- ``wall/``: the processes that read, compile or run what a submission controls - the
  sandbox (``isolate``, ``tree``, ``cgroup``), the children and their pipes (``child``,
  ``wire``, ``zygote``, ``forks``), the ``worker`` (the student's cells), the ``gate``
  (numba's compiler), the ``measurer`` (the kernel, timed), guarded launches
  (``launch``) and the GPU's measuring lock.
- ``judging/``: the judge's side - inputs, float64 references and verdicts (``judge``,
  ``cases``, ``preps``, ``sampled``, ``starter``), one submission judged through the wall
  (``session``, ``measurer_calls``), ``course.check`` in a notebook (``check``,
  ``report``, ``progress``).
- ``classroom/``: a class - ``python -m course grade`` (``batch``, ``prepare``,
  ``executors``, ``classrun``, Dask's workers in ``dask_workers``), reading notebooks (``notebook``, ``intake``,
  ``steps``), points and exports (``scoring``, ``feedback``, ``lms``, ``gradescope``),
  student copies (``release``, ``distribute``, ``student``), ``checktimes``
  (``solutions``).
"""

from .judging.check import check
from .judging.progress import progress

__all__ = ["check", "progress"]
