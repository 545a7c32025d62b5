"""``python -m course leaderboard serve | tokens | export``.

    python -m course leaderboard tokens --db class.db --roster roster.csv --out tokens.csv
    COURSE_LEADERBOARD_ADMIN_TOKEN=... python -m course leaderboard serve --db class.db \\
        --roster roster.csv --host 0.0.0.0 --port 8000 [--scheduler tcp://host:8786]
    python -m course leaderboard export --db class.db --out submissions.csv
"""

from __future__ import annotations

import argparse
import csv
import importlib
import os
import sys
from pathlib import Path

from . import allowance, connections, limits
from .store import Store


def _roster(path: Path | None):
    if path is None:
        return None
    from ..grading.classroom.lms import RosterError, read_roster

    try:
        return read_roster(path)
    except RosterError as exc:
        raise SystemExit(f"error: {exc}") from None


def tokens(opts) -> int:
    roster = _roster(opts.roster)
    if opts.out.exists():
        print(
            f"error: {opts.out} exists; tokens are written once (choose another --out)",
            file=sys.stderr,
        )
        return 2
    store = Store(opts.db)
    new, kept = store.issue_tokens(sorted(roster))
    fd = os.open(opts.out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # tokens: owner only
    with open(fd, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "token"])
        w.writerows(new)
    print(
        f"{len(new)} new token(s) written to {opts.out} (only their hashes are in "
        f"{opts.db}); {len(kept)} student(s) already had one"
    )
    return 0


def export(opts) -> int:
    store = Store(opts.db)
    if opts.out:
        with open(opts.out, "w", newline="") as f:
            n = store.export_csv(f)
        print(f"{n} submission(s) written to {opts.out}")
    else:
        store.export_csv(sys.stdout)
    return 0


def _judge(spec: str | None):
    if not spec:
        return None
    module, _, func = spec.partition(":")
    return getattr(importlib.import_module(module), func)


def _exit_with(pid: int) -> None:
    """Stop this service when process ``pid`` is gone (a test's server never outlives it)."""
    import os
    import threading
    import time

    def watch():
        while True:
            time.sleep(1)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(0)
            except PermissionError:
                pass

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def serve(opts) -> int:
    import uvicorn

    if os.environ.get("COURSE_LEADERBOARD_EXIT_WITH", "").isdigit():
        _exit_with(int(os.environ["COURSE_LEADERBOARD_EXIT_WITH"]))
    files = limits.raise_open_files()
    backlog = limits.backlog(files)
    try:  # the port first: nothing starts on a taken one
        if opts.uds:
            sock = limits.bind_unix(str(opts.uds), backlog)
        else:
            sock = limits.bind(opts.host, opts.port, backlog)
    except limits.BindError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    from ..grading.wall.isolate import command_line_folders
    from ..platform import runtime
    from . import queue as queues
    from . import runner
    from .app import create_app, settings_from_env

    most = limits.max_connections(opts.max_connections, files)
    store = Store(opts.db)
    roster = _roster(opts.roster)
    if roster is not None:
        store.restrict_to(set(roster))
    isolation = None
    private = command_line_folders(opts)  # the database's, the roster's...: no sandbox's
    if opts.isolation != "none":
        isolation, lost = runner.sandbox(private)
        print(lost)
        if isolation is None and not opts.scheduler:  # fail closed: no submission unsandboxed
            print("error: the service did not start (no sandbox on this machine: above)")
            return 2
    judge = _judge(opts.judge)
    q: queues.DaskQueue | queues.LocalQueue
    if opts.scheduler:
        q = queues.DaskQueue(store, opts.scheduler, task=judge, private=private)
        where = f"Dask scheduler {opts.scheduler} (tasks need GPU=1)"
    else:
        q = queues.LocalQueue(
            store, judge=judge, isolation=isolation, case_time_limit=opts.case_time_limit
        )
        where = "this machine, one submission at a time"
    settings = settings_from_env(
        runtime.MODE,
        rate=opts.rate,
        per_s=opts.per,
        judge_s=opts.judge_seconds,
        judge_window_s=opts.judge_window,
        quota_bytes=int(opts.quota_mb * 1e6),
    )
    trusted = frozenset(opts.trusted_proxy or ())
    app = limits.PerClient(
        create_app(store, q, settings, isolation),
        opts.max_per_client,
        trusted,
        identify=_identify(store, settings),
        anonymous=max(opts.max_per_client, most // 8),
    )

    def said(requeued, gave_up):  # before the queue starts: its first work may kill it
        print(
            f"leaderboard: {opts.db}, mode {runtime.MODE} ({runtime.device_name()}), "
            f"queue on {where}; {requeued} unfinished submission(s) queued again"
            + (f", {gave_up} that stopped the service twice marked error" if gave_up else "")
            + (
                ""
                if settings.admin_token
                else "; no COURSE_LEADERBOARD_ADMIN_TOKEN: no instructor access"
            ),
            flush=True,
        )

    q.start(said)
    print(
        f"limits: headers within {limits.HEADER_S:g} s, bodies within "
        f"{limits.BODY_S:g} s at {limits.MIN_RATE >> 10} KiB/s, "
        f"{limits.CLIENT_SHARE >> 20} MiB of bodies per client, "
        f"{opts.max_per_client} connections per client address and requests per token"
        + (
            f" (behind {', '.join(sorted(trusted)) or 'the Unix socket'}: requests per "
            f"forwarded address, {max(opts.max_per_client, most // 8)} without a token "
            f"in all, the proxy's address at most "
            f"{int(most * connections.PROXY_SHARE)} connections)"
            if trusted or opts.uds
            else ""
        )
        + ", "
        f"{most} in all ({files} open files); per student {opts.judge_seconds:g} s of "
        f"judging per {opts.judge_window:g} s, {opts.quota_mb:g} MB kept",
        flush=True,
    )
    if opts.uds:
        print(f"serving on unix:{opts.uds} (mode 660: its owner and group only)", flush=True)
    else:
        print(f"serving on http://{opts.host}:{opts.port}/boards", flush=True)
    proxies = trusted | {""} if opts.uds else trusted  # a Unix socket's peer: ""
    config = uvicorn.Config(
        app,
        root_path=opts.root_path,
        log_level="warning",
        ws="none",
        http=connections.protocol(opts.max_per_client, limits.HEADER_S, most, proxies),
        proxy_headers=False,  # X-Forwarded-*: limits.PerClient, from a trusted peer only
        limit_concurrency=most + backlog,  # a backstop: ours answers past most first
        timeout_keep_alive=limits.KEEP_ALIVE_S,
        timeout_graceful_shutdown=limits.SHUTDOWN_S,
        backlog=backlog,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        q.stop()
    return 0


def _identify(store, settings):
    """A request's client by its token (``limits.PerClient``): the student, "instructor",
    or None for no token or one the leaderboard does not know."""
    from starlette.requests import Request

    from .app import bearer
    from .store import same_token

    def identify(scope) -> str | None:
        try:
            token = bearer(Request(scope))
            if not token or not token.isascii() or len(token) > 256:
                return None
            if same_token(token, settings.admin_token):
                return limits.INSTRUCTOR
            return store.student_for(token)
        except Exception:  # noqa: BLE001 - an unreadable token is no token
            return None

    return identify


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m course leaderboard", description="The class leaderboard service."
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="run the service (HTTP API + pages)")
    s.add_argument("--db", type=Path, required=True, help="SQLite file (made if missing)")
    s.add_argument("--roster", type=Path, help="only these students may submit")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--scheduler", help="tcp://... of a Dask scheduler with GPU workers")
    s.add_argument("--rate", type=int, default=6, help="submissions per student per --per s")
    s.add_argument("--per", type=float, default=60.0)
    s.add_argument(
        "--judge-seconds",
        type=float,
        default=allowance.JUDGE_S,
        metavar="S",
        help="seconds of judging per student in any --judge-window (default "
        "%(default)g); past it a new submission is refused (429)",
    )
    s.add_argument(
        "--judge-window",
        type=float,
        default=allowance.JUDGE_WINDOW_S,
        metavar="S",
        help="the sliding window of --judge-seconds (default %(default)g s)",
    )
    s.add_argument(
        "--quota-mb",
        type=float,
        default=allowance.QUOTA_BYTES / 1e6,
        metavar="MB",
        help="sources and units kept per student (default "
        "%(default).1f MB); past it a submission gets 413",
    )
    s.add_argument(
        "--root-path",
        default="",
        help="the prefix behind a proxy (JupyterHub service: /services/leaderboard)",
    )
    s.add_argument(
        "--isolation",
        choices=["auto", "none"],
        default="auto",
        help="the grading sandbox for files run to find a kernel (default auto)",
    )
    s.add_argument(
        "--case-time-limit",
        type=float,
        help="seconds per test case (default 10 on a GPU, 60 in the simulator)",
    )
    s.add_argument(
        "--max-per-client",
        type=int,
        default=limits.PER_CLIENT,
        metavar="N",
        help="open connections per client address (default %(default)s; behind "
        "a proxy every client has the proxy's address)",
    )
    s.add_argument(
        "--trusted-proxy",
        action="append",
        metavar="ADDR",
        help="the address of a proxy in front of the service (JupyterHub's: "
        "127.0.0.1); its X-Forwarded-For names the client, and --max-per-client "
        "caps requests per forwarded address instead of its connections; repeat "
        "for several (default: none, X-Forwarded-For is ignored)",
    )
    s.add_argument(
        "--uds",
        type=Path,
        metavar="PATH",
        help="serve on a Unix socket at PATH (mode 660) instead of --host/--port: on a "
        "single-host JupyterHub only the proxy (in the service's group) reaches it, while "
        "every student's server shares the proxy's 127.0.0.1; its X-Forwarded-For names "
        "the client",
    )
    s.add_argument(
        "--max-connections",
        type=int,
        default=limits.MAX_CONNECTIONS,
        metavar="N",
        help="open connections in all (default %(default)s, within the open-file limit)",
    )
    s.add_argument("--judge", help=argparse.SUPPRESS)  # MODULE:FUNC, tests only
    t = sub.add_parser("tokens", help="make a token for each roster student (CSV, once)")
    t.add_argument("--db", type=Path, required=True)
    t.add_argument("--roster", type=Path, required=True)
    t.add_argument("--out", type=Path, required=True)
    e = sub.add_parser("export", help="every submission as CSV")
    e.add_argument("--db", type=Path, required=True)
    e.add_argument("--out", type=Path)
    opts = ap.parse_args(argv)
    return {"serve": serve, "tokens": tokens, "export": export}[opts.cmd](opts)
