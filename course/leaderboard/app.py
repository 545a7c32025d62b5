"""The leaderboard's HTTP service (Starlette; served by uvicorn in ``cli.py``).

JSON API (the contract in ``shared/DESIGN.md``):

- ``GET  /api/boards``                  every board: signature, shape, dtypes, tests
- ``GET  /api/boards/{board}``          its ranked rows (each student's fastest) + references
- ``POST /api/submissions``             ``Authorization: Bearer TOKEN``, JSON ``{"board",
  "source", "function"}`` (+ ``"unit"`` from ``course.submit``) -> ``202 {"id"}``; with
  the instructor's token, ``{"board", "course_kernel"}`` enters one of the course's own
  kernels (``exercises/entries.py``): a row of kind "course", shown as ``course:NAME``
- ``GET  /api/submissions/{id}``        its status and result (your own, or any with the
  instructor's token); ``"source"``, and the whole judged unit as text: ``"unit_sources"``
  (every function's source: the kernel and its device functions) and ``"constants"``
  (every other global it carried; ``shown.py``)

Every bad request gets a 4xx and one sentence in ``{"error": ...}``: 400 malformed,
401 no, unknown or non-ASCII token, 403 someone else's submission, 404 unknown board or
submission, 408 a body that took over ``limits.BODY_S`` or trickled, 413 too large or past the
student's storage quota, 422 not a kernel the service can take (syntax error, no such
``@cuda.jit`` function, malformed unit, a ``"source"`` that is not the unit's: the unit is
what is judged, so the source shown is always the unit's; a file that runs anything at its
top level, ``fromfile.py``), 429 too many submissions (every read
attempt counts) or one already being read, or past
the student's judge time in the window (``Retry-After`` says when to retry;
``allowance.py``) or more than the client's share of bodies in flight; 503 while
``limits.BODIES_IN_FLIGHT`` bytes are being read.  Connection-level limits (header
deadline, shedding, per-client cap): ``limits.py`` and ``connections.py``.
HTML pages (``pages.py``): ``/boards``, ``/boards/{board}``, ``/signin``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from . import allowance
from . import boards as boards_mod
from .limits import Refused, client_keys, read_body
from .reading import READ_S, READERS, Readers, shape
from .shown import unit_view
from .store import COURSE_PREFIX, same_token

log = logging.getLogger("course.leaderboard")


@dataclass
class Settings:
    rate: int = 6  # submissions per student ...
    per_s: float = 60.0  # ... per this many seconds
    max_waiting: int = 4  # queued or running at once, per student
    judge_s: float = allowance.JUDGE_S  # seconds judged per student ...
    judge_window_s: float = allowance.JUDGE_WINDOW_S  # ... in any window this long
    quota_bytes: int = allowance.QUOTA_BYTES  # sources and units kept per student
    admin_token: str | None = None  # COURSE_LEADERBOARD_ADMIN_TOKEN
    readers: int = READERS  # processes that read submissions (reading.py) ...
    read_s: float = READ_S  # ... each submission within this many seconds
    mode: str = "sim"
    boards: dict = field(default_factory=dict)


def error(status: int, message: str, headers=None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def who(request: Request, settings: Settings, store, required: bool = True):
    """(student name or None, is the instructor) from the bearer token or the page cookie."""
    token = bearer(request)
    if token and not token.isascii():
        raise Refused(
            401,
            "the token has characters a leaderboard token never has (tokens "
            "are ASCII letters, digits, - and _): use the one your instructor "
            "gave you",
        )
    if token and same_token(token, settings.admin_token):
        return "instructor", True
    student = store.student_for(token) if token else None
    if student is None and required:
        raise Refused(
            401,
            "no token was given"
            if not token
            else "this token is not known to the leaderboard: use the one your "
            "instructor gave you (COURSE_LEADERBOARD_TOKEN)",
        )
    return student, False


def bearer(request: Request) -> str:
    """The token a request carries: its bearer header, else the page's cookie."""
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return request.cookies.get("leaderboard_token", "")


async def read_json(request: Request) -> dict:
    body = await read_body(request, keys=client_keys(request, bearer(request)))
    try:
        data = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError):
        raise Refused(400, "the body is not JSON") from None
    except RecursionError:
        raise Refused(400, "the body's JSON nests too deeply") from None
    if not isinstance(data, dict):
        raise Refused(400, 'the body must be a JSON object {"board", "source", "function"}')
    return data


def asked(data: dict) -> tuple[Any, Any, Any]:
    """(source, function, unit) as sent, their types and sizes checked (Refused else);
    nothing parsed: ``reading.py`` reads them, after the rate and quota checks."""
    source, function, unit = data.get("source"), data.get("function"), data.get("unit")
    if unit is not None:
        if not isinstance(unit, dict):
            raise Refused(422, "the kernel unit cannot be used: it is not a JSON object")
        if source is None:
            source = unit.get("source")
    shape(source, function)
    return source, function, data.get("unit")


def sized(source: str, unit) -> int:
    """Bytes the submission adds to the database; 422 with a sentence if the unit is not
    plain JSON (a file's unit is checked in ``fromfile``; this is the last word)."""
    try:
        json.dumps(unit, allow_nan=False)
        return allowance.size(source, unit)
    except (TypeError, ValueError, RecursionError, OverflowError) as exc:
        raise Refused(
            422, f"the kernel unit holds a value the leaderboard cannot store ({str(exc)[:200]})"
        ) from None


def stored(store, row: tuple, kind: str) -> int:
    """The new submission's id; any failure of the database is a 503 with a sentence
    (and one line in the instructor's log), never a traceback to the client."""
    sized(row[3], row[4])  # the instructor's entries are not sized for a quota
    try:
        return store.add(*row, kind=kind)
    except Exception as exc:  # noqa: BLE001 - the database's failure, said in a sentence
        log.error("storing a submission failed: %s: %s", type(exc).__name__, str(exc)[:300])
        raise Refused(
            503,
            f"the leaderboard could not store this submission ({type(exc).__name__}); "
            "try again in a minute, and tell your instructor if it persists",
            {"Retry-After": "60"},
        ) from None


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
        raise Refused(
            422,
            f"{entry.name} links CUDA C++: it runs only on a GPU, and this "
            "service runs the simulator",
        )
    source = f"# the course's own kernel {entry.name}: {entry.where}\n"
    return board, COURSE_PREFIX + entry.name, entry.name, source, {"course_kernel": entry.name}


def public(sub: dict, store, with_source: bool) -> dict:
    out = {
        k: sub.get(k)
        for k in (
            "id",
            "board",
            "student",
            "function",
            "status",
            "passed",
            "message",
            "mean_ms",
            "std_ms",
            "best_ms",
            "median_ms",
            "runs",
            "device",
            "mode",
            "created",
            "started",
            "finished",
            "cases",
            "versions",
        )
    }
    out["rank"] = store.rank_of(sub)
    if with_source:
        out["source"] = sub["source"]
        out["unit_sources"], out["constants"] = unit_view(sub.get("unit"))
    return out


def create_app(store, queue, settings: Settings, isolation=None) -> Starlette:
    """The ASGI app over ``store`` (store.Store) and ``queue`` (queue.LocalQueue/DaskQueue);
    ``isolation``: the grading sandbox its submission readers run in (``reading.py``)."""
    from . import pages

    async def list_boards(request):
        return JSONResponse([b.describe(settings.mode) for b in settings.boards.values()])

    async def board_rows(request):
        name = request.path_params["board"]
        if name not in settings.boards:
            raise Refused(404, boards_mod.unknown(name, settings.boards))
        rows = [
            {
                k: r[k]
                for k in (
                    "rank",
                    "student",
                    "kind",
                    "mean_ms",
                    "std_ms",
                    "best_ms",
                    "runs",
                    "device",
                    "finished",
                    "id",
                )
            }
            for r in store.ranked(name)
        ]
        return JSONResponse({"board": settings.boards[name].describe(settings.mode), "rows": rows})

    async def submit(request):
        """Who, what shape, then rate, queue, judge time and storage - all from the request
        alone - and only then the submission read (``reading.py``: off the event loop)."""
        student, admin = who(request, settings, store)
        data = await read_json(request)
        kind = "student"
        if "course_kernel" in data:
            board, student, function, source, unit = check_entry(data, settings, admin)
            kind = "course"
        else:
            board = data.get("board")
            source, function, unit = asked(data)
            if not isinstance(board, str) or board not in settings.boards:
                raise Refused(404, boards_mod.unknown(board, settings.boards))
        if not admin:  # the checks and the reservation: one step of the event loop
            least = len(source.encode("utf-8", "surrogatepass")) if source else 0
            allowance.check_submission(store, reads, student, settings, least, time.time())
        done, read = False, None
        try:
            if kind == "student":  # read now, off the event loop (reading.py)
                spec = settings.boards[board].spec
                read = asyncio.ensure_future(
                    readers.read(
                        {
                            "source": source,
                            "function": function,
                            "unit": unit,
                            "extra_names": list(getattr(spec, "launch_names", ())),
                        }
                    )
                )
                source, unit = await asyncio.shield(read)  # a client gone: the read goes on
                if not admin:
                    size = sized(source, unit)
                    allowance.check_storage(store, student, size, settings.quota_bytes)
            sid = stored(store, (student, board, function, source, unit), kind)
            done = True
        finally:  # every attempt counts against the rate, stored or not
            if not admin:
                reads.end_after(read, student, done)
        queue.notify()
        return JSONResponse(
            {"id": sid, "status": "queued", "url": f"/api/submissions/{sid}"}, status_code=202
        )

    async def submission(request):
        student, admin = who(request, settings, store)
        text = request.path_params["sid"]
        if not (text.isascii() and text.isdigit() and len(text) <= 18):
            raise Refused(
                404,
                f"there is no submission {text[:40]!r}: a submission's id is "
                "the whole number its POST answered",
            )
        sid = int(text)
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
        return error(
            exc.status_code,
            msg.get(exc.status_code, str(exc.detail)),
            getattr(exc, "headers", None),
        )

    async def failed(request, exc: Exception):  # a bug of ours: say so (uvicorn logs it)
        return error(
            500,
            f"the leaderboard failed on this request ({type(exc).__name__}); "
            "the instructor's log has the details",
        )

    readers = Readers(settings.readers, settings.read_s, isolation)
    reads = allowance.Reads()  # per student: one read in flight, attempts counted

    routes = [
        Route("/api/boards", list_boards),
        Route("/api/boards/{board}", board_rows),
        Route("/api/submissions", submit, methods=["POST"]),
        Route("/api/submissions/{sid}", submission),
        Route("/api/health", health),
        *pages.routes(store, settings, who),
    ]
    handlers: dict[Any, Any] = {Refused: refused, HTTPException: http_error, Exception: failed}

    @contextlib.asynccontextmanager
    async def lifespan(app):  # the readers' imports take seconds: before the first request
        await asyncio.to_thread(readers.warm)
        try:
            yield
        finally:
            readers.close()

    return Starlette(routes=routes, exception_handlers=handlers, lifespan=lifespan)


def settings_from_env(mode: str, **kw) -> Settings:
    return Settings(
        admin_token=os.environ.get("COURSE_LEADERBOARD_ADMIN_TOKEN") or None,
        mode=mode,
        boards=boards_mod.all_boards(),
        **kw,
    )
