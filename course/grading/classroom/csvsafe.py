"""Every CSV the course writes goes through :func:`writer`: a cell a spreadsheet would read
as a formula is written as text.

A student names the submission file (``=HYPERLINK(...)_01_vector_add.ipynb``), the folder,
and much of the text of a reason; an instructor opens the grades in a spreadsheet.  A cell
that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is a formula to
Excel, LibreOffice and Google Sheets (OWASP "CSV injection"; a line feed and the full-width
forms of the four signs too, to be safe), so such a cell gets a leading apostrophe, which
every one of them shows as text.  A number (``-1``, ``+2.5``) is left as it is.

A spreadsheet may also split a line at another separator than ours (``;`` in much of
Europe, a tab, ``|``): then ``x;=2+5*7`` is two cells, the second a formula, although the
comma CSV holds it as one unquoted cell.  So the same sign that follows any separator a
spreadsheet may use (``,`` ``;`` tab ``|`` or a line break), after optional spaces and
quotes, gets an apostrophe before it too (``x;'=2+5*7``), unless what follows up to the
next separator is a number.

The grades CSV's ``reasons`` field is bounded as a whole too (:func:`reasons_field`): one
row stays a few kilobytes that Python's ``csv`` module and a spreadsheet read, whatever a
submission made its messages say.
"""

from __future__ import annotations

import csv
import re

FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")
SIGNS = "=+\\-@\uff1d\uff0b\uff0d\uff20"  # a formula's first character (regex class)
SEPARATORS = ",;\t|\r\n"  # where a spreadsheet may split a line into cells
MAX_REASONS = 8 << 10  # characters of a row's reasons field
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
# a sign after a separator (spaces and quotes between), and the text up to the next one
_INNER = re.compile(f"(?<=[{SEPARATORS}])([ \"']*)([{SIGNS}])([^{SEPARATORS}]*)")


def _inner(m: re.Match) -> str:
    pad, sign, rest = m.groups()
    if NUMBER.fullmatch(sign + rest.rstrip(" \"'")):
        return m.group(0)  # x;-1 is a number in any spreadsheet
    return f"{pad}'{sign}{rest}"


def cell(value) -> str:
    """``value`` as a CSV cell that no spreadsheet runs as a formula, whatever separator
    it splits the line at."""
    text = value if isinstance(value, str) else str(value)
    if not NUMBER.fullmatch(text.strip(" \"'")):
        text = _INNER.sub(_inner, text)
        if text.lstrip(" \"'").startswith(FORMULA_START):
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
