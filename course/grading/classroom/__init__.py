"""A class: grading many notebooks, points and exports, student copies.

``python -m course grade``: ``batch`` (one CSV row and one feedback file per student,
always), ``prepare`` (what is read once, before any student's code), ``executors`` and
``classrun`` (job slots on this machine, or Dask workers on several GPUs: the cluster and
what each worker does in ``dask_workers``), ``graded`` and
``csvsafe`` (rows), ``verdicts`` (which failures are the submission's, which the course's).
Notebooks are read by ``notebook``, ``intake`` and ``steps``; points by ``scoring``;
``feedback``, ``lms`` and ``gradescope`` export them.  ``release``, ``distribute``,
``student``, ``lesson_names`` and ``preflight`` write and check the student copies;
``solutions`` is ``checktimes``.

What may cross into this room: the judge's verdicts and figures (``judging``) and the
instructor's own files.  A submission's content reaches it only as data a reader of
``classroom`` or ``source`` bounded, and every cell of it runs behind the wall.
"""
