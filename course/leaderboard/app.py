"""The leaderboard's HTTP service (Starlette; served by uvicorn in ``cli.py``).

JSON API (the contract in ``shared/DESIGN.md``):

- ``GET  /api/boards``                  every board: signature, shape, dtypes, tests
- ``GET  /api/boards/{board}``          its ranked rows (each student's fastest) + references
- ``POST /api/submissions``             ``Authorization: Bearer TOKEN``, JSON ``{"board",
  "source", "function"}`` (+ ``"unit"`` from ``course.submit``) -> ``202 {"id"}``; with
  the instructor's token, ``{"board", "course_kernel"}`` enters one of the course's own
  kernels (``exercises/entries.py``), ranked as ``course:NAME``
- ``GET  /api/submissions/{id}``        its status and result (your own, or any with the
  instructor's token); ``"source"`` included

Every bad request gets a 4xx and one sentence in ``{"error": ...}``: 400 malformed,
401 no or unknown token, 403 someone else's submission, 404 unknown board or submission,
413 too large, 422 not a kernel the service can take (syntax error, no such ``@cuda.jit``
function, malformed unit), 429 too many submissions (``Retry-After`` says when to retry).
HTML pages (``pages.py``): ``/boards``, ``/boards/{board}``, ``/signin``.
"""
from __future__ import annotations

import ast
import hmac
import json
import os
import time
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from . import boards as boards_mod
from .store import COURSE_PREFIX

MAX_SOURCE = 64 << 10        # characters of a submitted file
MAX_BODY = 1 << 20           # bytes of a request (the source plus its unit)


@dataclass
class Settings:
    rate: int = 6                     # submissions per student ...
    per_s: float = 60.0               # ... per this many seconds
    max_waiting: int = 4              # queued or running at once, per student
    admin_token: str | None = None    # COURSE_LEADERBOARD_ADMIN_TOKEN
    mode: str = "sim"
    boards: dict = field(default_factory=dict)


class Refused(Exception):
    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def error(status: int, message: str, headers=None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def who(request: Request, settings: Settings, store, required: bool = True):
    """(student name or None, is the instructor) from the bearer token or the page cookie."""
    auth = request.headers.get("authorization", "")
    token = auth[7:].strip() if auth.lower().startswith("bearer ") else \
        request.cookies.get("leaderboard_token", "")
    if token and settings.admin_token and hmac.compare_digest(token, settings.admin_token):
        return "instructor", True
    student = store.student_for(token) if token else None
    if student is None and required:
        raise Refused(401, "no token was given" if not token else
                      "this token is not known to the leaderboard: use the one your "
                      "instructor gave you (COURSE_LEADERBOARD_TOKEN)")
    return student, False


async def read_json(request: Request) -> dict:
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > MAX_BODY:
        raise Refused(413, f"the request is {int(length):,} bytes; the limit is {MAX_BODY:,}")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise Refused(413, f"the request is over the limit of {MAX_BODY:,} bytes")
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError):
        raise Refused(400, "the body is not JSON") from None
    if not isinstance(data, dict):
        raise Refused(400, 'the body must be a JSON object {"board", "source", "function"}')
    return data


def check_submission(data: dict, settings: Settings) -> tuple[str, str, str, dict | None]:
    """(board, source, function, unit) of a well-formed submission, else Refused."""
    board, source, function = data.get("board"), data.get("source"), data.get("function")
    if not isinstance(board, str) or board not in settings.boards:
        raise Refused(404, boards_mod.unknown(board, settings.boards))
    if not isinstance(source, str) or not isinstance(function, str) or not source.strip():
        raise Refused(400, '"source" (the file\'s text) and "function" (the kernel\'s name) '
                           "must be strings")
    if len(source) > MAX_SOURCE:
        raise Refused(413, f"the source is {len(source):,} characters; the limit is "
                           f"{MAX_SOURCE:,}")
    if not function.isidentifier():
        raise Refused(422, f"{function!r} is not a Python function name")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise Refused(422, f"the source does not compile: {exc.msg} (line {exc.lineno})") \
            from None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    if not defs:
        raise Refused(422, f"the source defines no function `{function}` at its top level")
    if not any("jit" in ast.unparse(d) for d in defs[-1].decorator_list):
        raise Refused(422, f"`{function}` is not decorated with @cuda.jit")
    unit = data.get("unit")
    if unit is not None:
        from ..grading.unit import UnitError, parse, validate

        try:
            validate(unit)
            parse(unit["source"], unit["name"])
        except (UnitError, KeyError, TypeError) as exc:
            raise Refused(422, f"the kernel unit cannot be used: {exc}") from None
        if unit["name"] != function:
            raise Refused(422, "the unit's function is not the one named in \"function\"")
    return board, source, function, unit


def check_entry(data: dict, settings: Settings, admin: bool) -> tuple:
    """(board, student, function, source, unit) of the instructor entering one of the
    course's own kernels (``{"board", "course_kernel"}``), else Refused."""
    from ..exercises.entries import EntryError, get

    if not admin:
        raise Refused(403, "only the instructor's token may enter the course's own kernels")
    board, name = data.get("board"), data.get("course_kernel")
    if not isinstance(board, str) or board not in settings.boards:
        raise Refused(404, boards_mod.unknown(board, settings.boards))
    try:
        entry = get(name if isinstance(name, str) else repr(name))
    except EntryError as exc:
        raise Refused(422, str(exc)) from None
    if entry.board != board:
        raise Refused(422, f"{entry.name} is entered on the {entry.board} board, not {board}")
    if entry.gpu_only and settings.mode != "gpu":
        raise Refused(422, f"{entry.name} links CUDA C++: it runs only on a GPU, and this "
                           "service runs the simulator")
    source = f"# the course's own kernel {entry.name}: {entry.where}\n"
    return board, COURSE_PREFIX + entry.name, entry.name, source, {"course_kernel": entry.name}


def public(sub: dict, store, with_source: bool) -> dict:
    out = {k: sub.get(k) for k in ("id", "board", "student", "function", "status", "passed",
                                   "message", "mean_ms", "std_ms", "best_ms", "median_ms",
                                   "runs", "device", "mode", "created", "started",
                                   "finished", "cases", "versions")}
    out["rank"] = store.rank_of(sub)
    if with_source:
        out["source"] = sub["source"]
    return out


def create_app(store, queue, settings: Settings) -> Starlette:
    """The ASGI app over ``store`` (store.Store) and ``queue`` (queue.LocalQueue/DaskQueue)."""
    from . import pages

    async def list_boards(request):
        return JSONResponse([b.describe(settings.mode) for b in settings.boards.values()])

    async def board_rows(request):
        name = request.path_params["board"]
        if name not in settings.boards:
            raise Refused(404, boards_mod.unknown(name, settings.boards))
        rows = [{k: r[k] for k in ("rank", "student", "mean_ms", "std_ms", "best_ms", "runs",
                                   "device", "finished", "id")} for r in store.ranked(name)]
        return JSONResponse({"board": settings.boards[name].describe(settings.mode),
                             "rows": rows})

    async def submit(request):
        student, admin = who(request, settings, store)
        data = await read_json(request)
        if "course_kernel" in data:
            board, student, function, source, unit = check_entry(data, settings, admin)
        else:
            board, source, function, unit = check_submission(data, settings)
        if not admin:
            recent = store.submitted_since(student, time.time() - settings.per_s)
            if recent >= settings.rate:
                raise Refused(429, f"too many submissions: {settings.rate} per "
                                   f"{settings.per_s:.0f} s; try again in a minute",
                              {"Retry-After": str(int(settings.per_s))})
            if store.waiting(student) >= settings.max_waiting:
                raise Refused(429, f"you already have {settings.max_waiting} submissions "
                                   "waiting; try again when one is done",
                              {"Retry-After": "30"})
        sid = store.add(student, board, function, source, unit)
        queue.notify()
        return JSONResponse({"id": sid, "status": "queued",
                             "url": f"/api/submissions/{sid}"}, status_code=202)

    async def submission(request):
        student, admin = who(request, settings, store)
        try:
            sid = int(request.path_params["sid"])
        except ValueError:
            raise Refused(404, "no such submission") from None
        sub = store.get(sid)
        if sub is None:
            raise Refused(404, f"there is no submission {sid}")
        if not admin and sub["student"] != student:
            raise Refused(403, "this submission is someone else's")
        return JSONResponse(public(sub, store, with_source=True))

    async def health(request):
        return JSONResponse({"ok": True, "mode": settings.mode, "counts": store.counts()})

    async def refused(request, exc: Refused):
        return error(exc.status, exc.message, exc.headers)

    async def http_error(request, exc: HTTPException):
        msg = {404: "there is no such page", 405: "that method is not allowed here"}
        return error(exc.status_code, msg.get(exc.status_code, str(exc.detail)))

    routes = [Route("/api/boards", list_boards), Route("/api/boards/{board}", board_rows),
              Route("/api/submissions", submit, methods=["POST"]),
              Route("/api/submissions/{sid}", submission),
              Route("/api/health", health), *pages.routes(store, settings, who)]
    return Starlette(routes=routes, exception_handlers={Refused: refused,
                                                        HTTPException: http_error})


def settings_from_env(mode: str, **kw) -> Settings:
    return Settings(admin_token=os.environ.get("COURSE_LEADERBOARD_ADMIN_TOKEN") or None,
                    mode=mode, boards=boards_mod.all_boards(), **kw)
