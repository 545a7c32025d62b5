"""The leaderboard's HTML pages: Jinja2 templates (``templates/``), plain HTML and CSS, an
inline SVG chart, no build step.

``/boards`` lists the boards; ``/boards/{board}`` ranks every student's fastest passing
submission (rank, student, time ± spread, best, submission time, device), shows the seeds'
and the course's reference times, draws the board's best time over the term, and - once
signed in with a token at ``/signin`` (a cookie: HttpOnly, SameSite=Strict, Path the
service's root path, Secure over https) - your own submissions, each linking to
``/submissions/{id}``: its source and the whole judged unit (device functions, constants).
Links carry the ASGI root path, so the pages work behind JupyterHub's proxy.

The routes gather plain values; the templates lay them out.  The templates autoescape:
every value they show (a student's name, a message, a source) is text, never markup.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs

import jinja2
from starlette.responses import RedirectResponse
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from .client import ms_text
from .limits import read_body
from .shown import unit_view
from .store import same_token

TEMPLATES = Path(__file__).with_name("templates")


def _when(t) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


def _ms(v) -> str:
    return "-" if v is None else f"{ms_text(v)} ms"


def environment() -> jinja2.Environment:
    """The pages' templates: autoescaped, an unknown name an error (not an empty string),
    and the filters ``ms`` ("1.23 ms" or "-"), ``ms_text`` and ``when`` (local time)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(ms=_ms, ms_text=ms_text, when=_when)
    return env


templates = Jinja2Templates(env=environment())


@dataclass(frozen=True)
class Chart:
    """An SVG step line of a board's best time (``lo``..``hi`` ms) from the ``first`` to the
    ``last`` finish time (seconds since the epoch); ``path`` is the line's SVG path."""

    path: str
    lo: float
    hi: float
    first: float
    last: float
    width: int
    height: int
    pad: int


def chart(points: list[tuple[float, float]], width: int = 640, height: int = 180) -> Chart | None:
    """The curve of (finish time, best ms so far) points; None before the first."""
    if not points:
        return None
    t0, t1 = points[0][0], max(points[-1][0], points[0][0] + 1)
    hi, lo = max(p[1] for p in points), min(p[1] for p in points)
    span = (hi - lo) or hi or 1.0
    pad = 30

    def xy(t, v):
        return (
            pad + (t - t0) / (t1 - t0) * (width - 2 * pad),
            height - pad - (v - lo) / span * (height - 2 * pad),
        )

    d, last = [], None
    for t, v in points:
        x, y = xy(t, v)
        d.append(f"M{x:.1f},{y:.1f}" if last is None else f"H{x:.1f}V{y:.1f}")
        last = (x, y)
    d.append(f"H{width - pad}")
    return Chart(" ".join(d), lo, hi, t0, points[-1][0], width, height, pad)


def _root(request) -> str:
    return request.scope.get("root_path", "").rstrip("/")


def _page(
    request, template: str, title: str, signed_in: str | None = None, status: int = 200, **context
):
    """``template`` rendered with the title, the root path and who is signed in."""
    return templates.TemplateResponse(
        request,
        template,
        dict(context, title=title, root=_root(request), signed_in=signed_in),
        status_code=status,
    )


def _cookie(request) -> dict:
    """The sign-in cookie's scope: only this service's path (behind JupyterHub the origin
    also serves every student's own server), never to scripts or other sites, and only
    over https when the request came that way."""
    return {
        "path": _root(request) or "/",
        "httponly": True,
        "samesite": "strict",
        "secure": request.url.scheme == "https",
    }


def routes(store, settings, who) -> list:
    def signed_in(request):
        try:
            return who(request, settings, store, required=False)[0]
        except Exception:  # noqa: BLE001 - a bad cookie is no sign-in
            return None

    async def index(request):
        return RedirectResponse(f"{_root(request)}/boards", status_code=307)

    async def all_boards(request):
        boards = []
        for b in settings.boards.values():
            d = b.describe(settings.mode)
            ranked = store.ranked(b.name)
            boards.append(
                {
                    "name": b.name,
                    "signature": d["signature"],
                    "timed_shape_gpu": d["timed_shape_gpu"],
                    "students": sum(r["kind"] != "course" for r in ranked),
                    "best": ranked[0]["mean_ms"] if ranked else None,
                }
            )
        return _page(
            request,
            "boards.html",
            "Leaderboards",
            signed_in(request),
            boards=boards,
            mode=settings.mode,
        )

    async def one_board(request):
        name, me = request.path_params["board"], signed_in(request)
        if name not in settings.boards:
            return _page(
                request,
                "no_board.html",
                "No such board",
                me,
                status=404,
                name=name,
                known=sorted(settings.boards),
            )
        return _page(
            request,
            "board.html",
            f"Board: {name}",
            me,
            d=settings.boards[name].describe(settings.mode),
            ranked=store.ranked(name),
            chart=chart(store.best_over_time(name)),
            history=store.history(me, name) if me else [],
        )

    async def one_submission(request):
        text = request.path_params["sid"]
        try:
            me, admin = who(request, settings, store, required=False)
        except Exception:  # noqa: BLE001 - a bad cookie is no sign-in
            me, admin = None, False
        sub = (
            store.get(int(text)) if text.isascii() and text.isdigit() and len(text) <= 18 else None
        )
        if sub is None or not (admin or (me and sub["student"] == me)):
            return _page(request, "no_submission.html", "No such submission", me, status=404)
        sources, consts = unit_view(sub.get("unit"))
        return _page(
            request,
            "submission.html",
            f"Submission {sub['id']}",
            me,
            sub=sub,
            sources=sources,
            consts=consts,
        )

    async def signin(request):
        unknown = False
        if request.method == "POST":
            form = parse_qs((await read_body(request, 4096)).decode(errors="replace"))
            token = (form.get("token") or [""])[0].strip()
            ok = token.isascii() and (
                store.student_for(token) or same_token(token, settings.admin_token)
            )
            if ok:
                resp = RedirectResponse(f"{_root(request)}/boards", status_code=303)
                resp.set_cookie("leaderboard_token", token, max_age=120 * 86400, **_cookie(request))
                return resp
            unknown = True
        return _page(request, "signin.html", "Sign in", unknown=unknown)

    async def signout(request):
        resp = RedirectResponse(f"{_root(request)}/boards", status_code=303)
        resp.delete_cookie("leaderboard_token", **_cookie(request))
        return resp

    return [
        Route("/", index),
        Route("/boards", all_boards),
        Route("/boards/{board}", one_board),
        Route("/submissions/{sid}", one_submission),
        Route("/signin", signin, methods=["GET", "POST"]),
        Route("/signout", signout),
    ]
