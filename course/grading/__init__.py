"""Checks and grading: everything between a student's kernel and a verdict.

In the order a check runs: ``unit`` (a kernel as data; ``decorator``, ``signature`` and
``allowed`` read its ``@cuda.jit``, its signature and its body), ``gate`` (it must compile
for a real GPU), ``judge`` (inputs, references, verdicts), ``launch`` (guarded buffers on
the device), ``cases`` (the case engine both faces stand on), ``check`` (``course.check``),
``report`` (what it shows), ``progress``.  Grading a class: ``prepare`` and ``intake`` (read
once, before any student code), ``session`` (the judge's side), ``worker`` (the student's
cells), ``measurer`` (only the kernel), ``isolate`` (the sandbox), ``batch``/``executors``
(``python -m course grade``), ``scoring``, ``feedback``, ``lms``/``gradescope`` (exports),
``release``/``distribute``/``notebook`` (student copies), ``hidden`` (hidden cases and
answer keys), ``solutions`` (``checktimes``), ``wire`` (pipes).
"""

from .check import check
from .progress import progress

__all__ = ["check", "progress"]
