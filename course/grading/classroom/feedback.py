"""Per-student feedback files from ``python -m course grade``: ``<student>.md`` and ``.html``.

They show scores, every case with its result and message, and why points were lost.  They
never show the hidden cases' code (only each case's name and the checker's message), nor
the grader's logs.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import mistune

from ...exercises.bounded import MAX_MESSAGE, clip
from .scoring import rule


def markdown(g) -> str:
    """The feedback of one graded student (a :class:`course.grading.classroom.batch.Graded`)."""
    mode = {"gpu": "on a GPU", "sim": "in the CUDA simulator"}.get(g.mode, "")
    out = [
        f"# Feedback for {_line(g.student)}: {_line(g.lesson or 'unknown lesson')}",
        "",
        f"**Score: {g.total:g} / {g.possible:g}**  ",
        f"Submission `{_code(g.submission)}`, graded {time.strftime('%Y-%m-%d')} {mode} "
        f"(input seed {g.seed}).",
        "",
    ]
    if g.status != "graded":
        out += [f"> Grading status: **{g.status}**", ""]
    for name in g.max_points:
        out += [f"## {name}: {g.points.get(name, 0):g} / {g.max_points[name]:g}", ""]
        e = g.results.get(name)
        cases = (e or {}).get("cases", [])
        if cases:
            ok = sum(c["passed"] for c in cases)
            hidden = sum(c["hidden"] for c in cases)
            out += [
                f"{ok} of {len(cases)} cases passed: {g.points.get(name, 0):g}/"
                f"{g.max_points[name]:g} \u2014 {rule(name, g.whole.get(name, False))} "
                f"({hidden} of the cases are hidden cases that your notebook's check "
                "does not run).",
                "",
                "| case | launch | result | details |",
                "|---|---|---|---|",
            ]
            for c in cases:
                name_ = c["name"] + (" *(hidden)*" if c["hidden"] else "")
                out.append(
                    f"| {_cell(name_)} | `{c['launch']}` | "
                    f"{'pass' if c['passed'] else '**fail**'} | {_cell(c['message'])} |"
                )
            out.append("")
        for r in g.reasons:
            if r.startswith(name):
                out += [f"- {_line(r)}"]
        out.append("")
    other = [r for r in g.reasons if not any(r.startswith(n) for n in g.max_points)]
    if other or g.notes:
        out += ["## Notes", ""] + [f"- {_line(r)}" for r in other + g.notes] + [""]
    out += [
        "---",
        'Replay a case in your notebook: `course.check("<exercise>", your_kernel, '
        f"seed={g.seed})` (the public cases only).",
        "",
    ]
    return "\n".join(out)


def _cell(text: str) -> str:
    return _line(text).replace("|", "\\|")


def _line(text) -> str:
    """Text that came from a student's cell (error messages, names) as one line of
    markdown text: its own newlines would otherwise start headings, scores and tables of
    their own in the feedback, and its ``<`` raw HTML (``<script>``, ``<img onerror>``) or
    an autolink, its ``[`` a link or an image, in whatever renders the ``.md`` file: each is
    escaped with a backslash (as is a backslash), so the text reads as it was, as in the
    HTML copy.  At most ``bounded.MAX_MESSAGE`` characters: a page stays readable
    whatever a submission made a message say."""
    one = clip(" ".join(str(text).split()), MAX_MESSAGE)
    return one.replace("\\", "\\\\").replace("<", "\\<").replace("[", "\\[")


def _code(text) -> str:
    """Text of a student's inside a code span (raw HTML is not HTML there): one line, no
    backtick of its own."""
    return clip(" ".join(str(text).split()), MAX_MESSAGE).replace("`", "'")


# What a student's text may not become in the page: a link or an image (``[x](url)``,
# ``![x](url)``, ``<url>``, ``<a@b>``).  It stays the text it is in the .md file.
_NO_INLINE = ("link", "link_close", "auto_link", "auto_email")


def _renderer() -> mistune.Markdown:
    """mistune (nbconvert's own markdown library) for :func:`markdown`'s output: tables,
    headings, lists, a blockquote, code and emphasis; raw HTML escaped, no links.  A list
    item holds paragraphs only: a reason or a note is a line of text, not a heading, a
    quote, a list, code or a link reference of its own."""
    md = mistune.create_markdown(escape=True, plugins=["table"])
    md.inline.rules[:] = [r for r in md.inline.rules if r not in _NO_INLINE]
    md.block.list_rules[:] = ["blank_line"]
    return md


_TO_HTML = _renderer()
_STYLE = (
    "body{font-family:sans-serif;max-width:60em;margin:2em auto}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}"
)


# a list item whose text is all ``-``, ``*`` or ``_`` (``- ---``) reads as a rule, not an item
_RULE_ITEM = re.compile(r"- +([-*_])(?: *\1){2,} *")


def to_html(md: str) -> str:
    """:func:`markdown`'s output as a page of its own (a student's text in it stays text)."""
    md = "\n".join(
        "- \\" + line[2:].lstrip() if _RULE_ITEM.fullmatch(line) else line
        for line in md.split("\n")
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><style>{_STYLE}</style>"
        f"</head><body>\n{_TO_HTML(md)}</body></html>\n"
    )


def write_all(rows, folder: Path) -> list[str]:
    """``<student>.md`` and ``<student>.html`` for every row, one pair per student even
    where two names would make one file; the summary's lines about such names."""
    from .intake import file_names

    folder.mkdir(parents=True, exist_ok=True)
    names, summary = file_names([g.student for g in rows])
    for g in rows:
        md = markdown(g)
        (folder / f"{names[g.student]}.md").write_text(md, encoding="utf-8")
        (folder / f"{names[g.student]}.html").write_text(to_html(md), encoding="utf-8")
    return summary
