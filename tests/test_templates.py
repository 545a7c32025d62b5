"""The leaderboard's pages are Jinja2 templates that autoescape: a hostile board, student,
function, message, source or constant name (``<script>``, quotes, ``{{ }}``) is shown as
the text it is on every page, never as markup, and the templates ship with the package.

The app is driven in-process over ASGI (no server, no judge): a store in a temp folder
filled directly, boards that describe themselves with the hostile text in every field."""

import asyncio
import fnmatch
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from conftest import REPO

pytest.importorskip("jinja2")
pytest.importorskip("starlette")

HOSTILE = "<script>alert(1)</script> \"q\" 'q' {{ 7*7 }} {% raw %} <img src=x onerror=alert(2)>"
# the tags and attributes the pages are made of: anything else came from the data
TAGS = {
    "html",
    "head",
    "meta",
    "title",
    "style",
    "body",
    "nav",
    "a",
    "span",
    "b",
    "h1",
    "h2",
    "h3",
    "p",
    "table",
    "tr",
    "th",
    "td",
    "code",
    "pre",
    "svg",
    "path",
    "text",
    "form",
    "label",
    "input",
    "button",
}
ATTRS = {
    "lang",
    "charset",
    "name",
    "content",
    "href",
    "class",
    "colspan",
    "role",
    "aria-label",
    "width",
    "height",
    "viewbox",
    "d",
    "fill",
    "stroke",
    "stroke-width",
    "x",
    "y",
    "font-size",
    "text-anchor",
    "method",
    "action",
    "type",
    "size",
    "style",
}


class _Board:
    def __init__(self, name):
        self.name, h = name, HOSTILE
        self.d = {
            "board": name,
            "signature": "add(n, x, y)" + h,
            "goal": "Be fast" + h,
            "timed_shape_gpu": "n=1024" + h,
            "dtypes": "x float32" + h,
            "tests": "3 cases" + h,
            "references": [{"who": "peer" + h, "ms": 0.5, "note": "note" + h}],
            "course_kernels": [{"name": "v1" + h, "where": "kernels" + h}],
        }

    def describe(self, mode):
        return self.d


class _Page(HTMLParser):
    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.tags, self.attrs, self.data = set(), set(), []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.attrs |= {k for k, _ in attrs}
        self.data += [v or "" for _, v in attrs]

    handle_startendtag = handle_starttag

    def handle_data(self, data):
        self.data.append(data)


def _request(app, method, path, root="", cookie=None, body=b""):
    """(status, text) of one request to the ASGI ``app``."""
    headers = [(b"host", b"x"), (b"content-length", str(len(body)).encode())]
    if cookie:
        headers.append((b"cookie", f"leaderboard_token={cookie}".encode()))
    if body:
        headers.append((b"content-type", b"application/x-www-form-urlencoded"))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(root + path),
        "root_path": root,
        "raw_path": (root + path).encode(),
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("x", 80),
    }
    sent, got = [], []

    async def receive():
        if not sent:
            sent.append(1)
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)

    async def send(message):
        got.append(message)

    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in got if m["type"] == "http.response.start")
    text = b"".join(m.get("body", b"") for m in got if m["type"] == "http.response.body")
    return status, text.decode()


@pytest.fixture(scope="module")
def hostile_app(tmp_path_factory):
    from course.leaderboard import app as appmod
    from course.leaderboard.store import Store

    store = Store(tmp_path_factory.mktemp("lb") / "lb.db")
    students = ["alice", "course:" + HOSTILE, HOSTILE]
    tokens = dict(store.issue_tokens(students)[0])
    board = "b" + HOSTILE.replace("/", "")  # a path segment: no slash
    settings = appmod.Settings(
        admin_token="admin-token",
        mode="gpu",
        boards={board: _Board(board), "plain": _Board("plain")},
    )

    class Queue:
        def notify(self):
            pass

    unit = {
        "name": "k" + HOSTILE,
        "source": "def k(): pass  # " + HOSTILE,
        "globals": {
            "dev" + HOSTILE: [
                "device",
                {"name": "d", "source": HOSTILE, "globals": {"C" + HOSTILE: ["const", HOSTILE]}},
            ]
        },
    }
    for i, student in enumerate(students):
        sid = store.add(student, board, "f" + HOSTILE, "# " + HOSTILE + "\n", unit)
        store.claim(sid)
        store.finish(
            sid,
            "done",
            {
                "passed": True,
                "message": HOSTILE,
                "mean_ms": 1.0 + i,
                "std_ms": 0.1,
                "best_ms": 0.9,
                "runs": 3,
                "device": "GPU" + HOSTILE,
                "mode": "gpu",
            },
        )
    return appmod.create_app(store, Queue(), settings), tokens[HOSTILE], board


def _pages(app, token, board):
    """(what, status, text) of every page, as the hostile student and signed out."""
    b = quote(board, safe="")
    for root in ("", "/hub/services/lb"):
        for who in (token, None, "admin-token"):
            for path in (
                "/boards",
                f"/boards/{b}",
                "/boards/plain",
                "/boards/x" + quote(HOSTILE.replace("/", ""), safe=""),
                "/submissions/3",
                "/submissions/1",
                "/signin",
            ):
                yield (root, who, path), *_request(app, "GET", path, root, who)
        yield (
            (root, "POST /signin"),
            *_request(app, "POST", "/signin", root, body=b"token=%3Cscript%3E"),
        )


def test_hostile_names_are_text_on_every_page(hostile_app):
    app, token, board = hostile_app
    for (root, *what), status, text in _pages(app, token, board):
        page = _Page(text)
        assert page.tags <= TAGS, (what, page.tags - TAGS)  # no <script>, no <img>
        assert page.attrs <= ATTRS, (what, page.attrs - ATTRS)  # no onerror=
        assert "<script" not in text and "<img" not in text, what
        data = "\n".join(page.data)
        if what[-1] == "/signin" or what[0] == "POST /signin":
            assert status == 200 and "Sign in" in data
            continue
        who, path = what
        mine = path == "/submissions/3" and who == token
        if path.startswith("/submissions/") and not (who == "admin-token" or mine):
            assert status == 404
        elif path.startswith("/boards/x"):
            assert status == 404 and "x" + HOSTILE.replace("/", "") in data, what
        else:
            assert status == 200, (what, text[-300:])
            assert HOSTILE in data, what  # shown as the text it is: {{ 7*7 }} unevaluated
        assert (f"signed in as \n{HOSTILE}\n" in data) == (who == token), what
        assert f'href="{root}/boards"' in text, what


def test_the_hostile_student_sees_every_field_of_their_submission(hostile_app):
    app, token, _board = hostile_app
    status, text = _request(app, "GET", "/submissions/3", cookie=token)
    data = _Page(text).data
    assert status == 200
    for shown in (
        "f" + HOSTILE,
        "# " + HOSTILE + "\n",
        "k" + HOSTILE,
        HOSTILE,
        "dev" + HOSTILE,
        "dev" + HOSTILE + ".C" + HOSTILE,
        repr(HOSTILE),
    ):
        assert shown in data, shown


def test_the_templates_ship_as_package_data():
    """setuptools puts a non-Python file in the wheel only when package-data names it."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = conf["tool"]["setuptools"]["package-data"]["course"]
    folder = REPO / "course" / "leaderboard" / "templates"
    files = [p.relative_to(REPO / "course").as_posix() for p in folder.rglob("*") if p.is_file()]
    assert len(files) >= 7
    assert [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in patterns)] == []
    deps = " ".join(conf["project"]["optional-dependencies"]["leaderboard"])
    assert "jinja2" in deps.lower()


def test_an_unknown_name_in_a_template_is_an_error():
    """StrictUndefined: a misspelt value fails the render instead of showing nothing."""
    import jinja2

    from course.leaderboard.pages import environment

    env = environment()
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ nope }}").render()
    assert env.from_string("{{ x }}").render(x="<b>") == "&lt;b&gt;"
    assert Path(env.loader.searchpath[0]).is_dir()
