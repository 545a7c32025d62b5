"""A submitted kernel as data: read, bounded, never run.

A kernel crosses every boundary of the grader as its *unit* (``unit``): the source text of
the kernel and of the device functions it calls, and the constants it reads, each a plain
value (``values``).  ``decorator`` reads its ``@cuda.jit`` line, ``signature`` the
exercise's signature (parsed by the course, never by ``eval``), ``allowed`` the allowlist
its body must keep to, ``kernel_source`` the text of a function defined in a notebook.

What may cross into this room: text and plain values, each with a size limit.  Nothing here
imports numba's compiler, starts a process or touches a GPU; the rooms above (the wall, the
judge, the class) use it to read what a submission sent.
"""
