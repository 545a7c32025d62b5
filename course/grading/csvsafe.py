"""Every CSV the course writes goes through :func:`writer`: a cell a spreadsheet would read
as a formula is written as text.

A student names the submission file (``=HYPERLINK(...)_01_vector_add.ipynb``), the folder,
and much of the text of a reason; an instructor opens the grades in a spreadsheet.  A cell
that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula to
Excel, LibreOffice and Google Sheets (OWASP "CSV injection"; a line feed and the full-width
forms of the four signs too, to be safe), so such a cell gets a leading apostrophe, which
every one of them shows as text.  A number (``-1``, ``+2.5``) is left as
it is.

The grades CSV's ``reasons`` field is bounded as a whole too (:func:`reasons_field`): one
row stays a few kilobytes that Python's ``csv`` module and a spreadsheet read, whatever a
submission made its messages say.
"""

from __future__ import annotations

import csv
import re

FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
MAX_REASONS = 8 << 10  # characters of a row's reasons field
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def cell(value) -> str:
    """``value`` as a CSV cell that no spreadsheet runs as a formula."""
    text = value if isinstance(value, str) else str(value)
    if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


class SafeWriter:
    """``csv.writer`` whose every cell passes through :func:`cell`."""

    def __init__(self, f, **kwargs):
        self._w = csv.writer(f, **kwargs)

    def writerow(self, row) -> None:
        self._w.writerow([cell(v) for v in row])

    def writerows(self, rows) -> None:
        for row in rows:
            self.writerow(row)


def writer(f, **kwargs) -> SafeWriter:
    """The CSV writer every CSV of the course is written with (``csv.writer``'s arguments)."""
    return SafeWriter(f, **kwargs)


def reasons_field(reasons: list, limit: int = MAX_REASONS) -> str:
    """A row's reasons joined by `` | ``, at most ``limit`` characters: past it the field
    ends with a sentence that says how many reasons were cut and where they all are."""
    joined = " | ".join(str(r) for r in reasons)
    if len(joined) <= limit:
        return joined
    room = limit - 200  # the sentence that says so
    kept: list[str] = []
    used, whole = 0, 0
    for r in map(str, reasons):
        if used + len(r) > room:
            if room - used > 200:  # a long reason's start still names its exercise
                kept.append(r[: room - used] + "...")
            break
        kept.append(r)
        used, whole = used + len(r) + 3, whole + 1
    note = (
        f"(reasons cut at {limit:,} characters: {len(reasons) - whole} of {len(reasons)} "
        "cut or shortened; the feedback file has each exercise's reason)"
    )
    return " | ".join([*kept, note])
