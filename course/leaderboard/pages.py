"""The leaderboard's HTML pages: plain HTML and CSS, an inline SVG chart, no build step.

``/boards`` lists the boards; ``/boards/{board}`` ranks every student's fastest passing
submission (rank, student, time ± spread, best, submission time, device), shows the seeds'
and the course's reference times, draws the board's best time over the term, and - once
signed in with a token at ``/signin`` (a cookie: HttpOnly, SameSite=Strict, Path the
service's root path, Secure over https) - your own submissions, each linking to
``/submissions/{id}``: its source and the whole judged unit (device functions, constants).
Links carry the ASGI root path, so the pages work behind JupyterHub's proxy.
"""
from __future__ import annotations

import html
import time
from urllib.parse import parse_qs

from starlette.responses import HTMLResponse, RedirectResponse
from starlette.routing import Route

from .client import ms_text
from .limits import read_body
from .shown import unit_view
from .store import COURSE_PREFIX, same_token

CSS = """body{font:15px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:62rem;color:#222}
table{border-collapse:collapse;width:100%;margin:.5rem 0 1.5rem}th,td{padding:.3rem .6rem;
border-bottom:1px solid #ddd;text-align:left}td.n{text-align:right;font-variant-numeric:
tabular-nums}tr.ref td{color:#666;font-style:italic}tr.course td{background:#f3f7ff}
code{background:#f4f4f4;padding:0 .2rem}
.muted{color:#666}nav a{margin-right:1rem}svg{background:#fafafa;border:1px solid #eee}"""


def _page(title: str, body: str, root: str, signed_in: str | None = None,
          status: int = 200) -> HTMLResponse:
    who = (f'signed in as <b>{html.escape(signed_in)}</b> · <a href="{root}/signout">sign '
           f'out</a>' if signed_in else f'<a href="{root}/signin">sign in</a>')
    return HTMLResponse(f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title><style>{CSS}</style></head><body>
<nav><a href="{root}/boards">All boards</a><span class="muted">{who}</span></nav>
<h1>{html.escape(title)}</h1>{body}</body></html>""", status_code=status)


def _cookie(request) -> dict:
    """The sign-in cookie's scope: only this service's path (behind JupyterHub the origin
    also serves every student's own server), never to scripts or other sites, and only
    over https when the request came that way."""
    root = request.scope.get("root_path", "").rstrip("/")
    return {"path": root or "/", "httponly": True, "samesite": "strict",
            "secure": request.url.scheme == "https"}


def _when(t) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


def _ms(v) -> str:
    return "-" if v is None else f"{ms_text(v)} ms"


def chart(points: list[tuple[float, float]], width: int = 640, height: int = 180) -> str:
    """An SVG step line of the board's best time (ms) against the finish time."""
    if not points:
        return '<p class="muted">No timed submission yet: the curve starts with the first.</p>'
    t0, t1 = points[0][0], max(points[-1][0], points[0][0] + 1)
    hi, lo = max(p[1] for p in points), min(p[1] for p in points)
    span = (hi - lo) or hi or 1.0
    pad = 30

    def xy(t, v):
        return (pad + (t - t0) / (t1 - t0) * (width - 2 * pad),
                height - pad - (v - lo) / span * (height - 2 * pad))
    d, last = [], None
    for t, v in points:
        x, y = xy(t, v)
        d.append(f"M{x:.1f},{y:.1f}" if last is None else f"H{x:.1f}V{y:.1f}")
        last = (x, y)
    d.append(f"H{width - pad}")
    return (f'<svg role="img" aria-label="best time over the term" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}"><path d="{" ".join(d)}" '
            f'fill="none" stroke="#2a6fdb" stroke-width="2"/>'
            f'<text x="{pad}" y="16" font-size="12">best {ms_text(lo)} ms (from '
            f'{ms_text(hi)} ms)</text>'
            f'<text x="{pad}" y="{height - 8}" font-size="11">{_when(t0)}</text>'
            f'<text x="{width - pad}" y="{height - 8}" font-size="11" text-anchor="end">'
            f'{_when(points[-1][0])}</text></svg>')


def submission_body(sub: dict) -> str:
    """A submission's page: its verdict, then everything that was judged, escaped."""
    sources, consts = unit_view(sub.get("unit"))
    out = [f'<p>{html.escape(sub["board"])} · <code>{html.escape(sub["function"])}</code> · '
           f'{html.escape(sub["status"])} · {_ms(sub.get("mean_ms"))}</p>'
           f'<p>{html.escape(sub.get("message") or "")}</p>',
           "<h2>Source</h2><pre>" + html.escape(sub["source"]) + "</pre>"]
    if sources:
        out.append("<h2>The judged unit</h2>")
        out += [f"<h3><code>{html.escape(name)}</code></h3><pre>{html.escape(src)}</pre>"
                for name, src in sources.items()]
    if consts:
        out.append("<h2>Constants</h2><table><tr><th>name</th><th>value</th></tr>" + "".join(
            f"<tr><td><code>{html.escape(k)}</code></td><td><code>{html.escape(v)}</code>"
            "</td></tr>" for k, v in consts.items()) + "</table>")
    return "".join(out)


def routes(store, settings, who) -> list:
    def root(request) -> str:
        return request.scope.get("root_path", "").rstrip("/")

    def signed_in(request):
        try:
            return who(request, settings, store, required=False)[0]
        except Exception:  # noqa: BLE001 - a bad cookie is no sign-in
            return None

    async def index(request):
        return RedirectResponse(f"{root(request)}/boards", status_code=307)

    async def all_boards(request):
        r = root(request)
        rows = []
        for b in settings.boards.values():
            d = b.describe(settings.mode)
            ranked = store.ranked(b.name)
            best = _ms(ranked[0]["mean_ms"]) if ranked else "-"
            students = sum(not r["student"].startswith(COURSE_PREFIX) for r in ranked)
            rows.append(f'<tr><td><a href="{r}/boards/{b.name}">{b.name}</a></td>'
                        f'<td><code>{html.escape(d["signature"])}</code></td>'
                        f'<td>{html.escape(d["timed_shape_gpu"])}</td><td class="n">'
                        f'{students}</td><td class="n">{best}</td></tr>')
        mode = ("" if settings.mode == "gpu" else '<p class="muted">This service runs on '
                "the simulator: submissions are tested, not timed, and nobody is ranked.</p>")
        return _page("Leaderboards", mode + "<table><tr><th>board</th><th>your kernel</th>"
                     "<th>timed at</th><th>students</th><th>best</th></tr>" + "".join(rows)
                     + "</table>", r, signed_in(request))

    async def one_board(request):
        r, name = root(request), request.path_params["board"]
        if name not in settings.boards:
            known = ", ".join(f'<a href="{r}/boards/{b}">{b}</a>' for b in sorted(
                settings.boards))
            return _page("No such board", f"<p>There is no board called "
                         f"<code>{html.escape(name)}</code>. The boards are: {known}.</p>",
                         r, signed_in(request), status=404)
        d = settings.boards[name].describe(settings.mode)
        me = signed_in(request)
        body = [f'<p>{html.escape(d["goal"])}</p><p>Define <code>{html.escape(d["signature"])}'
                f'</code>; timed at <b>{html.escape(d["timed_shape_gpu"])}</b> '
                f'({html.escape(d["dtypes"])}). Tests: {html.escape(d["tests"])}.</p>',
                "<h2>Ranking</h2><table><tr><th>rank</th><th>student</th><th>time</th>"
                "<th>best</th><th>submitted</th><th>device</th></tr>"]
        for row in store.ranked(name):
            tr = '<tr class="course">' if row["student"].startswith(COURSE_PREFIX) else "<tr>"
            body.append(f'{tr}<td class="n">'
                        f'{row["rank"]}</td><td>'
                        f'{html.escape(row["student"])}</td><td class="n">'
                        f'{ms_text(row["mean_ms"])} ± {row["std_ms"] or 0:.2g} ms</td>'
                        f'<td class="n">{_ms(row["best_ms"])}</td><td>{_when(row["created"])}'
                        f'</td><td>{html.escape(row["device"] or "")}</td></tr>')
        for ref in d["references"]:
            body.append(f'<tr class="ref"><td>ref</td><td>{html.escape(ref["who"])}</td>'
                        f'<td class="n">{ms_text(ref["ms"])} ms</td><td></td><td colspan="2">'
                        f'{html.escape(ref["note"])}</td></tr>')
        body.append("</table>")
        if d["course_kernels"]:
            body.append('<p class="muted">Rows <code>course:NAME</code> are the course\'s own '
                        "kernels, entered by the instructor and timed here like every "
                        "submission, but launched their own way: " + "; ".join(
                            f'<code>{html.escape(e["name"])}</code> ({html.escape(e["where"])})'
                            for e in d["course_kernels"]) + ".</p>")
        body.append("<h2>Best time over the term</h2>" + chart(store.best_over_time(name)))
        if me:
            body.append("<h2>Your submissions</h2><table><tr><th>id</th><th>status</th>"
                        "<th>time</th><th>submitted</th><th>message</th></tr>")
            for s in store.history(me, name):
                body.append(f'<tr><td class="n"><a href="{r}/submissions/{s["id"]}">'
                            f'{s["id"]}</a></td><td>{s["status"]}</td>'
                            f'<td class="n">{_ms(s["mean_ms"])}</td><td>{_when(s["created"])}'
                            f'</td><td>{html.escape((s["message"] or "")[:300])}</td></tr>')
            body.append("</table>")
        return _page(f"Board: {name}", "".join(body), r, me)

    async def one_submission(request):
        r, text = root(request), request.path_params["sid"]
        try:
            me, admin = who(request, settings, store, required=False)
        except Exception:  # noqa: BLE001 - a bad cookie is no sign-in
            me, admin = None, False
        sub = store.get(int(text)) if text.isascii() and text.isdigit() and \
            len(text) <= 18 else None
        if sub is None or not (admin or (me and sub["student"] == me)):
            return _page("No such submission", "<p>There is no submission of yours with "
                         f"that id{'' if me or admin else ': sign in first'}.</p>", r, me,
                         status=404)
        return _page(f"Submission {sub['id']}", submission_body(sub), r, me)

    async def signin(request):
        r = root(request)
        if request.method == "POST":
            form = parse_qs((await read_body(request, 4096)).decode(errors="replace"))
            token = (form.get("token") or [""])[0].strip()
            ok = token.isascii() and (store.student_for(token) or
                                      same_token(token, settings.admin_token))
            if ok:
                resp = RedirectResponse(f"{r}/boards", status_code=303)
                resp.set_cookie("leaderboard_token", token, max_age=120 * 86400, **_cookie(
                    request))
                return resp
            msg = '<p style="color:#b00">That token is not known here.</p>'
        else:
            msg = ""
        return _page("Sign in", msg + f'<form method="post" action="{r}/signin"><label>Your '
                     'token <input name="token" type="password" size="40"></label> '
                     '<button type="submit">Sign in</button></form>', r)

    async def signout(request):
        resp = RedirectResponse(f"{root(request)}/boards", status_code=303)
        resp.delete_cookie("leaderboard_token", **_cookie(request))
        return resp

    return [Route("/", index), Route("/boards", all_boards),
            Route("/boards/{board}", one_board),
            Route("/submissions/{sid}", one_submission),
            Route("/signin", signin, methods=["GET", "POST"]), Route("/signout", signout)]
