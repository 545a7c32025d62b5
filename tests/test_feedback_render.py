"""The feedback's HTML (``feedback.to_html``, mistune): the look of the markdown feedback
(headings, the cases' table, lists, the status blockquote, code, bold), and a student's
text - a name, an error message, a note - that stays text: no HTML of theirs, no link, no
image, no heading or list of their own."""

from html.parser import HTMLParser

from course.grading.classroom import feedback
from course.grading.classroom.batch import Graded

# the tags a feedback page is made of, and its only attribute
TAGS = {
    "html",
    "head",
    "meta",
    "style",
    "body",
    "h1",
    "h2",
    "p",
    "strong",
    "em",
    "code",
    "br",
    "blockquote",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "ul",
    "li",
    "hr",
}
HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "[x](javascript:alert(1))",
    "![y](javascript:alert(2))",
    "<javascript:alert(3)>",
    "<http://evil.example/>",
    "<a@evil.example>",
    '<a href="javascript:alert(4)">z</a>',
    "<script>alert(5)</script>",
]
# markdown()'s shape: title, score line (a hard break), status, an exercise, its cases, its
# reasons, the footer
LOOK = (
    "# Feedback for ann: 01_vector_add",
    "",
    "**Score: 1.5 / 3**  ",
    "Submission `ann.ipynb`, graded 2026-11-26 (input seed 3).",
    "",
    "> Grading status: **timeout**",
    "",
    "## vector_add: 1.5 / 3",
    "",
    "| case | launch | result | details |",
    "|---|---|---|---|",
    "| small | `(1, 32)` | pass | ok |",
    "| odd *(hidden)* | `(4, 256)` | **fail** | got a \\| b, expected `c` |",
    "",
    "- vector_add: one case failed",
    "- vector_add: slow",
    "",
    "---",
    "Replay it.",
    "",
)


class _Page(HTMLParser):
    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.texts = [], [], []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.texts.append(data)


def test_the_look_of_the_feedback():
    md = "\n".join(LOOK)
    page = feedback.to_html(md)
    assert page.startswith("<!doctype html>") and page.endswith("</body></html>\n")
    assert "<h1>Feedback for ann: 01_vector_add</h1>" in page
    assert "<h2>vector_add: 1.5 / 3</h2>" in page
    assert "<strong>Score: 1.5 / 3</strong><br />" in page
    assert "<blockquote>\n<p>Grading status: <strong>timeout</strong></p>\n</blockquote>" in page
    parsed = _Page(page)
    assert parsed.tags.count("tr") == 3 and parsed.tags.count("th") == 4
    assert parsed.tags.count("td") == 8 and parsed.tags.count("hr") == 1
    assert "<td>odd <em>(hidden)</em></td>" in page and "<td><code>(4, 256)</code></td>" in page
    assert "<td>got a | b, expected <code>c</code></td>" in page  # \| is a | in a cell
    assert "<ul>\n<li>vector_add: one case failed</li>\n<li>vector_add: slow</li>\n</ul>" in page
    assert "td,th{border:1px solid #ccc" in page  # the same style


def test_a_students_text_cannot_add_html_or_a_link():
    text = " ".join(HOSTILE)
    g = Graded(
        "eve " + text,
        "eve " + text + ".ipynb",
        "01_vector_add",
        "sim",
        points={"vector_add": 0.0},
        max_points={"vector_add": 1.0},
        reasons=["vector_add: 0 points: " + text, "elsewhere: " + text],
        notes=[text, "[r]: javascript:alert(6)"],
    )
    page = feedback.to_html(feedback.markdown(g))
    parsed = _Page(page)
    assert set(parsed.tags) <= TAGS, set(parsed.tags) - TAGS  # no a, img, script
    assert parsed.attrs == [("charset", "utf-8")], parsed.attrs  # no href, no onerror
    shown = "\n".join(parsed.texts)
    for h in HOSTILE:  # each one as text
        assert shown.count(h) >= 4, (h, shown)
    assert "[r]: javascript:alert(6)" in shown  # not a reference


def test_a_reason_or_a_note_is_one_line_of_text():
    """A note or a reason is a list item's text: its own ``#``, ``>``, ``1.`` or fence does
    not make a heading, a quote, a list or code in the page."""
    forged = [
        "# Feedback for bob",
        "## vector_add: 1 / 1",
        "> Grading status: graded",
        "1. first",
        "```",
        "- - -",
        "---",
        "* * *",
        "___",
    ]
    g = Graded(
        "ann",
        "ann.ipynb",
        "01_vector_add",
        "sim",
        points={"vector_add": 0.0},
        max_points={"vector_add": 1.0},
        reasons=["vector_add: boom"] + forged,
        notes=forged,
    )
    page = feedback.to_html(feedback.markdown(g))
    parsed = _Page(page)
    assert parsed.tags.count("h1") == 1 and parsed.tags.count("h2") == 2, page
    assert "blockquote" not in parsed.tags and "ol" not in parsed.tags, page
    assert "pre" not in parsed.tags and parsed.tags.count("ul") == 2, page
    items = [t for t in parsed.texts if t.strip()]
    assert parsed.tags.count("hr") == 1 and parsed.tags[-3:] == ["hr", "p", "code"]  # footer
    for f in forged:
        assert items.count(f) == 2, (f, items)
