"""The wall: every process that reads, compiles or runs what a submission controls.

Three children stand behind it, each started from an empty environment in a fresh mount
tree (``isolate``, ``tree``, checked on this machine by ``probe``; limits from ``cgroup``)
that holds only the Python installation, the course package and its own scratch: the ``worker`` runs the student's
cells and sends back what they defined, the ``gate`` compiles a kernel's unit with
numba-cuda's compiler, the ``measurer`` rebuilds the gated kernel and launches it on
guarded buffers (``launch``) under the GPU's measuring lock (``platform/gpu_lock``).  ``child``
starts and ends them, ``wire`` carries their requests and replies as bounded data, and
``zygote``/``forks`` keep a warm, clean process per job slot that forks a fresh sandbox for
each submission.

What may cross into the wall: a request the judge wrote (a unit, inputs the judge chose,
sizes), never a secret, a hidden case's reference, a seed, another student's file or an
output of the grader.  What comes out: data, read by the judge only up to what its request
allows (``wire``).  ``launch`` is also used in-process by ``course.check`` in a notebook,
where a student can only fool themselves.
"""
