"""What a submission shows: the whole unit that was judged, as text.

A unit (``course/grading/source/unit.py``) carries more than its kernel's source: the device
functions it calls (units of their own, to any depth) and the values of the global names it
reads.  ``GET /api/submissions/{id}`` and the submission's page show all of it:
``unit_sources`` (every function's source, the kernel's first, by name; a device function
called from another as ``caller.name``) and ``constants`` (every other global as text, by
the same naming).  A file is stored whole beside the unit made from it (``fromfile.py``:
nothing in the file runs, so the unit is all that is judged); a row stored before that
has no unit and shows its file.
"""

from __future__ import annotations


def unit_view(unit) -> tuple[dict, dict]:
    """(unit_sources, constants) of a stored unit; ({}, {}) for none or a course kernel."""
    sources: dict = {}
    consts: dict = {}
    if not isinstance(unit, dict) or "source" not in unit:
        return sources, consts

    def walk(u: dict, prefix: str, depth: int) -> None:
        sources.setdefault(prefix or str(u.get("name")), str(u.get("source", "")))
        for name, desc in sorted((u.get("globals") or {}).items()):
            key = f"{prefix}.{name}" if prefix else name
            if (
                isinstance(desc, list)
                and len(desc) == 2
                and desc[0] == "device"
                and isinstance(desc[1], dict)
                and depth < 16
            ):
                walk(desc[1], key, depth + 1)
            else:
                consts[key] = text(desc)

    walk(unit, "", 0)
    return sources, consts


def text(desc) -> str:
    """One global's stored description as Python-like text."""
    if not isinstance(desc, list) or not desc:
        return repr(desc)
    kind, *rest = desc
    if kind == "const":
        return repr(rest[0])
    if kind == "scalar":
        return f"numpy.dtype({rest[0]!r}).type({rest[1]!r})"
    if kind == "complex":
        return repr(complex(*rest))
    if kind == "tuple":  # nested tuples and numpy numbers in them, as Python writes them
        from ..grading.source.decorator import UnitError
        from ..grading.source.values import Budget, value

        try:
            return repr(value(desc, Budget()))
        except UnitError:
            return repr(desc)
    if kind == "dtype":
        return f"numpy.dtype({rest[0]!r})"
    if kind == "array":
        return f"numpy.array({rest[2]!r}, dtype={rest[0]!r}).reshape({tuple(rest[1])!r})"
    if kind == "module":
        return f"the module {rest[0]}"
    if kind == "attr":
        return f"{rest[0]}.{rest[1]}"
    if kind == "numba_type":
        return f"numba.{rest[0]}"
    return repr(desc)
