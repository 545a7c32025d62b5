"""Submitting to the class leaderboard: ``course.submit`` and ``python -m course submit``.

From a notebook::

    result = course.submit("tune_vector_add", add_fast)     # server and token from
    result                                                  # COURSE_LEADERBOARD_URL / _TOKEN

What travels is the kernel as data - its source, ``@cuda.jit`` options and the constants it
uses (``course/grading/source/unit.py``), never a pickled object - plus the source text.  The call
waits, printing one progress line (queued -> testing -> timing -> done), and returns a
:class:`Submission` that shows the result the way the CS149 board did: tests passed, the
mean ± spread over the timed runs, the best run, and the rank on the board.

From a shell, a file goes as it is (the service runs it in its sandbox to find the kernel)::

    python -m course submit tune_vector_add my_add.py [--function add_fast]

(``--function`` is needed only where the file defines several ``@cuda.jit`` kernels and
none has the name the board expects), and the instructor enters the course's own fastest
kernels, launched their own way (``course/exercises/entries.py``)::

    python -m course submit histogram --course-kernel histogram_tuned
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


def ms_text(v: float) -> str:
    """A time in ms to 4 significant digits, never in exponent form (22,140 not 2.214e+04)."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


FINAL = ("done", "rejected", "error")


class SubmitError(Exception):
    """The service refused the submission or could not be reached (the message says why)."""


@dataclass
class Submission:
    """A submission's result as the service reports it (``GET /api/submissions/{id}``)."""

    id: int
    board: str
    status: str = "queued"
    passed: bool | None = None
    message: str = ""
    mean_ms: float | None = None
    std_ms: float | None = None
    best_ms: float | None = None
    runs: int | None = None
    rank: int | None = None
    device: str | None = None
    cases: list = field(default_factory=list)

    @classmethod
    def from_json(cls, d: dict) -> Submission:
        keys = cls.__dataclass_fields__
        return cls(**{k: d[k] for k in keys if k in d and d[k] is not None})

    def lines(self) -> list[str]:
        tests = self.cases or []
        ok = sum(bool(c.get("passed")) for c in tests)
        out = [
            f"submission {self.id} to {self.board}: {self.status}"
            + (f" ({self.device})" if self.device else "")
        ]
        if tests:
            out.append(f"[{'x' if ok == len(tests) else ' '}] tests passed: {ok} of {len(tests)}")
        if self.mean_ms is not None:
            best = ms_text(self.best_ms) if self.best_ms is not None else "?"
            out.append(
                f"[x] benchmark: {ms_text(self.mean_ms)} ± {self.std_ms or 0:.2g} ms "
                f"(best {best} ms, {self.runs} runs)"
            )
            out.append(f"rank {self.rank} on {self.board}" if self.rank else "not ranked")
        if self.message:
            out.append(self.message)
        return out

    def __repr__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(repr(self)) + "</pre>"


def _request(method: str, url: str, token: str | None, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            why = json.loads(exc.read()).get("error", "")
        except ValueError:
            why = ""
        raise SubmitError(f"the leaderboard answered {exc.code}: {why or exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise SubmitError(f"cannot reach the leaderboard at {url}: {exc}") from None


PYTHON_WORDS = {"server": "pass server=...", "token": "pass token=..."}
SHELL_WORDS = {"server": "give --server URL", "token": "give --token TOKEN"}


def _where(server, token, words=PYTHON_WORDS) -> tuple[str, str]:
    server = (server or os.environ.get("COURSE_LEADERBOARD_URL") or "").rstrip("/")
    token = (token or os.environ.get("COURSE_LEADERBOARD_TOKEN") or "").strip()
    if not server:
        raise SubmitError(
            f"no leaderboard given: {words['server']} or set "
            "COURSE_LEADERBOARD_URL (your instructor has the address)"
        )
    if not token:
        raise SubmitError(
            f"no token given: {words['token']} or set "
            "COURSE_LEADERBOARD_TOKEN (your instructor gave you one)"
        )
    return server, token


def kernel_in(board: str, source: str, file="the file") -> str:
    """The kernel to submit from a file: the one named as the board expects, else the
    file's only ``@cuda.jit`` kernel (device functions do not count); SubmitError with a
    sentence otherwise."""
    import ast

    from .boards import UnknownBoard, get

    try:
        expected = get(board).function
    except UnknownBoard as exc:
        raise SubmitError(str(exc.args[0])) from None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        raise SubmitError(f"{file} is not Python: {getattr(exc, 'msg', exc)}") from None
    kernels = [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and any(_is_kernel(d) for d in n.decorator_list)
    ]
    if expected in kernels:
        return expected
    if len(set(kernels)) == 1:
        return kernels[0]
    which = (
        f"{len(set(kernels))} @cuda.jit kernels ({', '.join(sorted(set(kernels)))})"
        if kernels
        else "no @cuda.jit kernel"
    )
    raise SubmitError(
        f"{file} defines {which} and none is called `{expected}` (the name "
        f"the {board} board expects): give --function NAME"
    )


def _is_kernel(decorator) -> bool:
    """``@cuda.jit``, ``@cuda.jit(...)`` without ``device=True``, any alias of ``jit``."""
    import ast

    call = decorator if isinstance(decorator, ast.Call) else None
    target = call.func if call else decorator
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    if name != "jit":
        return False
    return not (
        call
        and any(
            k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in call.keywords
        )
    )


def send(
    board: str,
    source: str | None,
    function: str | None,
    unit: dict | None = None,
    *,
    server=None,
    token=None,
    wait: bool = True,
    timeout: float = 900,
    poll_s: float = 1.0,
    out=None,
    course_kernel: str | None = None,
    words=PYTHON_WORDS,
) -> Submission:
    """POST one submission and (``wait``) follow it to its result with a progress line.
    ``course_kernel`` (instructor's token): enter the course's own kernel of that name
    instead of a source (``course/exercises/entries.py``)."""
    server, token = _where(server, token, words)
    body: dict[str, object]
    if course_kernel is not None:
        body = {"board": board, "course_kernel": course_kernel}
    else:
        body = {"board": board, "source": source, "function": function}
    if unit is not None:
        body["unit"] = unit
    sid = _request("POST", f"{server}/api/submissions", token, body)["id"]
    if not wait:
        return Submission(sid, board)
    return follow(sid, board, server=server, token=token, timeout=timeout, poll_s=poll_s, out=out)


def follow(
    sid: int,
    board: str,
    *,
    server: str,
    token: str,
    timeout: float = 900,
    poll_s: float = 1.0,
    out=None,
) -> Submission:
    """Wait for submission ``sid`` to end, writing one progress line to ``out``
    (queued -> testing -> timing -> done); its result, or SubmitError after ``timeout``."""
    out = out or sys.stdout
    seen, t0 = ["queued"], time.monotonic()
    out.write(f"submission {sid} to {board}: queued")
    out.flush()
    while time.monotonic() - t0 < timeout:
        d = _request("GET", f"{server}/api/submissions/{sid}", token)
        if d["status"] != seen[-1]:
            seen.append(d["status"])
            out.write(f" -> {d['status']}")
            out.flush()
        if d["status"] in FINAL:
            out.write(f" ({time.monotonic() - t0:.0f} s)\n")
            return Submission.from_json(d)
        time.sleep(poll_s)
    out.write("\n")
    raise SubmitError(
        f"submission {sid} was not done after {timeout:.0f} s; it stays "
        f"queued: look it up later at {server}/api/submissions/{sid}"
    )


def submit(
    board: str, kernel, server: str | None = None, token: str | None = None, **kw
) -> Submission:
    """Send ``kernel`` (a ``@cuda.jit`` function defined in a cell or a file) to ``board``
    and wait for its result.  Raises :class:`SubmitError` with one sentence when the
    kernel cannot travel or the service refuses it."""
    from ..grading.source.unit import UnitError, extract
    from .boards import UnknownBoard, get

    try:
        spec = get(board).spec
    except UnknownBoard as exc:
        raise SubmitError(str(exc.args[0])) from None
    try:
        unit = extract(kernel, spec.launch_names)
    except UnitError as exc:
        raise SubmitError(f"this kernel cannot be submitted: {exc}") from None
    return send(board, unit["source"], unit["name"], unit, server=server, token=token, **kw)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m course submit", description="Submit a kernel file to the class leaderboard."
    )
    ap.add_argument("board", help="e.g. tune_vector_add, histogram, flash_attention")
    ap.add_argument(
        "file", type=Path, nargs="?", help="a .py file that defines the @cuda.jit kernel"
    )
    ap.add_argument(
        "--function",
        help="the kernel's name in the file (default: the "
        "name the board expects, or the file's only @cuda.jit kernel)",
    )
    ap.add_argument(
        "--course-kernel",
        metavar="NAME",
        help="instead of a file: enter the course's own kernel NAME (instructor's "
        "token; histogram_tuned on histogram, flash_mma on flash_attention)",
    )
    ap.add_argument("--server", help="default: $COURSE_LEADERBOARD_URL")
    ap.add_argument("--token", help="default: $COURSE_LEADERBOARD_TOKEN")
    ap.add_argument("--no-wait", action="store_true", help="print the id and return")
    opts = ap.parse_args(argv)
    if (opts.course_kernel is None) == (opts.file is None):
        ap.error("give a FILE (a .py file with the kernel), or --course-kernel NAME")
    try:
        source = opts.file.read_text() if opts.file is not None else None
        function = opts.function or (
            kernel_in(opts.board, source, opts.file) if source is not None else None
        )
        sub = send(
            opts.board,
            source,
            function,
            server=opts.server,
            token=opts.token,
            wait=not opts.no_wait,
            course_kernel=opts.course_kernel,
            words=SHELL_WORDS,
        )
    except (OSError, SubmitError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(sub if not opts.no_wait else f"submission {sub.id} queued")
    return 0 if opts.no_wait or sub.status == "done" else 1
