"""Small tables for notebooks and reports: the lecture's numbers beside today's device."""

from __future__ import annotations

import html


class Table:
    """Rows of cells with a header; shows as HTML in a notebook, as markdown elsewhere."""

    def __init__(
        self, columns: list[str], rows: list[list] | None = None, title: str = "", note: str = ""
    ):
        self.columns, self.rows, self.title, self.note = (
            list(columns),
            list(rows or []),
            title,
            note,
        )

    def add(self, *cells) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"row has {len(cells)} cells, table has {len(self.columns)} columns")
        self.rows.append(list(cells))

    def markdown(self) -> str:
        lines = [f"**{self.title}**", ""] if self.title else []
        lines += ["| " + " | ".join(self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in self.rows]
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines)

    __repr__ = markdown

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(fmt(c))}</td>" for c in r) + "</tr>"
            for r in self.rows
        )
        cap = (
            f"<caption style='caption-side:top'><b>{html.escape(self.title)}</b></caption>"
            if self.title
            else ""
        )
        note = (
            f"<div style='font-size:85%;color:#555'>{html.escape(self.note)}</div>"
            if self.note
            else ""
        )
        return (
            f"<table class='course-table'>{cap}<tr>{head}</tr>{body}</table>{note}"
            "<style>.course-table td {text-align:right} .course-table td:first-child "
            "{text-align:left}</style>"
        )


def fmt(x) -> str:
    """Numbers with 3-4 significant digits; everything else as text; None as '-'."""
    if x is None:
        return "-"
    if isinstance(x, float):
        if x != x:
            return "-"
        return f"{x:.4g}" if abs(x) >= 1e-3 or x == 0 else f"{x:.2e}"
    return str(x)


def speedup_table(
    measured_ms: dict,
    nbytes: float,
    lecture: dict | None = None,
    title: str = "",
    mode_note: str = "",
) -> Table:
    """Time, GB/s, step and cumulative speed-up per variant, with lecture columns beside.

    ``measured_ms``: variant -> ms (in order); ``lecture``: variant -> {device: ms}.
    """
    lecture = lecture or {}
    devices = sorted({d for v in lecture.values() for d in v})
    cols = ["variant", "time (ms)", "GB/s", "step speed-up", "cumulative"]
    cols += [f"{d} (ms)" for d in devices]
    t = Table(cols, title=title, note=mode_note)
    first = prev = None
    for name, ms in measured_ms.items():
        first = first or ms
        step = prev / ms if prev else None
        t.add(
            name,
            ms,
            nbytes / (ms * 1e-3) / 1e9,
            step,
            first / ms,
            *[lecture.get(name, {}).get(d) for d in devices],
        )
        prev = ms
    return t
