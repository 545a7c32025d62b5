"""The judge: inputs, references, verdicts - the side that decides and runs nothing of
a submission's outside the wall.

``judge`` makes each case's inputs and float64 reference and compares outputs with them,
``cases`` is the case engine both faces stand on (the notebook's ``course.check`` and the
grader), ``preps`` shares a grading run's inputs between its judges, ``sampled`` checks
samples of timed runs, ``starter`` times the given kernels the tune targets divide by.
``session`` judges one submission through the wall (the worker, the gate, the measurer:
``measurer_calls``); ``check`` is ``course.check``, ``report`` what a check shows and
``progress`` what a student has passed.  ``settings`` holds a grading run's options.

What may cross into this room: replies from the wall, already bounded by ``wire`` and read
against the judge's own request; units from ``source``.  The hidden cases, the seeds and the
references stay here and never go the other way.
"""
