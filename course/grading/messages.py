"""numba's words as the course's sentences: what went wrong and what to do.

The compile gate (``gate.py``) reports numba's reason in one sentence; a few of numba's
reasons say nothing a student can act on.  :func:`course_sentence` rewrites those (today:
a kernel that takes a different number of arguments than the exercise launches it with,
which numba calls a "Signature mismatch") and leaves every other message as it was.
"""

from __future__ import annotations

import inspect
import re

_MISMATCH = re.compile(
    r"Signature mismatch: (\d+) argument types? given, but function "
    r"takes (\d+) arguments?"
)


def course_sentence(error: str, fn, spec) -> str:
    """``error`` (a check's "not checked" reason) in the course's words where numba's words
    say nothing to act on; ``error`` itself otherwise."""
    m = _MISMATCH.search(error or "")
    if not m:
        return error
    given, takes = int(m.group(1)), int(m.group(2))
    names = _parameters(fn)
    yours = f" ({', '.join(names)})" if names and len(names) == takes else ""
    return (
        f"your kernel takes {takes} argument{'s' * (takes != 1)}{yours}, but the "
        f"exercise launches it with {given}: define it as `{spec.signature}`"
    )


def _parameters(fn) -> list[str]:
    """The parameter names of a kernel (its Python function), or [] when unknown."""
    py = getattr(fn, "py_func", fn)
    try:
        return list(inspect.signature(py).parameters)
    except (TypeError, ValueError):
        return []
