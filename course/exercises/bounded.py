"""Text a submission controls, bounded where a message is made.

A student's answer, names and values reach the judge's own sentences (a case's message, a
reason in the grades CSV, the feedback page).  Each such piece is bounded here, where the
sentence is made: a value is quoted in at most :data:`MAX_SHOWN` characters, a list of them
names the first few and says how many more there are, and a whole message is cut at
:data:`MAX_MESSAGE` characters with a sentence saying so.  Working out the text is bounded
too: nothing here walks more of a value than it shows.
"""

from __future__ import annotations

import reprlib

MAX_SHOWN = 80  # characters of one value a message quotes
MAX_LISTED = 3  # values a message names before "and N more"
MAX_MESSAGE = 2000  # characters of one message (a case's, a kernel unit's)

_REPR = reprlib.Repr()
_REPR.maxstring = MAX_SHOWN
_REPR.maxother = MAX_SHOWN
_REPR.maxlong = 40
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = 4
_REPR.maxlevel = 2


def clip(text, limit: int = MAX_MESSAGE) -> str:
    """``text`` itself when it has at most ``limit`` characters; else its start and how
    much was cut."""
    text = text if isinstance(text, str) else str(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters cut)"


def shown(value, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` in at most about ``limit`` characters (a long string, a big dict or
    a deep list is shown by its start), for quoting a value a submission made."""
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still named
        text = f"<{type(value).__name__} too large to show>"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def listed(values, most: int = MAX_LISTED, show=shown) -> str:
    """The first ``most`` of ``values``, each :func:`shown`, then "and N more": a message
    that names a submission's values stays short however many it has."""
    values = values if isinstance(values, (list, tuple)) else list(values)
    head = ", ".join(show(v) for v in values[:most])
    rest = len(values) - most
    return f"{head} and {rest:,} more" if rest > 0 else head
