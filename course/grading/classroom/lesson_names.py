"""How every command names a lesson: ``01``, ``1``, ``vector_add``, ``01_vector_add`` or
``01_vector_add.ipynb`` all mean lesson 01; anything else is refused with the nearest name.

``python -m course notebooks --restore``, ``grade --lesson`` and ``release --notebooks`` use
:func:`lesson_named`, so a name one command accepts is accepted by all of them.  Standard
library only.
"""

from __future__ import annotations

import difflib
from pathlib import Path


class UnknownLesson(ValueError):
    """A lesson name that matches no notebook (the message suggests the nearest)."""


def lesson_named(name: str, stems: list[str], given: str = "") -> str:
    """The lesson stem (``01_vector_add``) that ``name`` means among ``stems``: the file name
    (``01_vector_add.ipynb``), the stem, the number (``01``, ``1``) or the title
    (``vector_add``).  Every command that takes a lesson names it this way; an unknown name
    raises :class:`UnknownLesson` with the nearest one ("did you mean ...?").  ``given``
    names the option in the message (``--lesson``)."""
    stem = str(name).strip().removesuffix(".ipynb")
    for s in stems:
        number, _, title = s.partition("_")
        if stem in (s, title) or (stem.isdigit() and number.isdigit() and int(stem) == int(number)):
            return s
    near = difflib.get_close_matches(
        stem, list(stems) + [s.partition("_")[2] for s in stems], n=1, cutoff=0.5
    )
    near = [s for s in stems if near and near[0] in (s, s.partition("_")[2])]
    hint = f" (did you mean {near[0]}?)" if near else ""
    where = f" given with {given}" if given else ""
    raise UnknownLesson(
        f"unknown lesson {name!r}{where}{hint}; the lessons are "
        f"{', '.join(stems)} (a number such as 01, or a name such as "
        f"{stems[min(1, len(stems) - 1)] if stems else '01_vector_add'})"
    )


def find_lesson(name: str, sources: list[Path], given: str = "") -> Path:
    """The notebook of lesson ``name`` among ``sources`` (see :func:`lesson_named`)."""
    by_stem = {s.stem: s for s in sources}
    return by_stem[lesson_named(name, list(by_stem), given)]
