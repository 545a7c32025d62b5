"""The leaderboard service's own limits, against a real ``leaderboard serve`` on loopback
(a fast stand-in judge; SQLite in a temp folder; every server stops by itself): slow and
half-sent requests, connections per client address and in all, malformed requests of every
kind (4xx and a sentence, never 500), the source shown is the source judged, a submission
that stops the service twice, and the command line's failures (exit code and sentence)."""

import csv
import http.client
import json
import os
import re
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO
from test_leaderboard import ADMIN, GOOD, Server, _tokens, call, wait_done

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("leaderboard"), pytest.mark.timeout(300)]
HEADER_S = 5.0  # course.leaderboard.limits.HEADER_S


def _server(tmp, *extra, env=None):
    return Server(
        tmp,
        "--judge",
        "leaderboard_fake:judge",
        "--isolation",
        "none",
        "--rate",
        "1000",
        *extra,
        env=dict(
            {"FAKE_JUDGE_LOG": str(tmp / "measured.txt"), "FAKE_JUDGE_SLEEP": "0.005"},
            **(env or {}),
        ),
    )


def _open(port, source="127.0.0.1", send=b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    if send:
        s.sendall(send)
    return s


def _answered_within(port, limit=1.0) -> float:
    """Seconds a well-behaved client (its own address) waits for /api/health."""
    t0 = time.monotonic()
    conn = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=limit, source_address=("127.0.0.1", 0)
    )
    conn.request("GET", "/api/health")
    r = conn.getresponse()
    assert r.status == 200, r.status
    r.read()
    conn.close()
    took = time.monotonic() - t0
    assert took < limit, took
    return took


def _closed(s: socket.socket, within: float) -> bytes:
    """What the server sent before closing ``s``; fails if still open after ``within``."""
    s.settimeout(within)
    got = b""
    try:
        while chunk := s.recv(4096):
            got += chunk
    except ConnectionResetError:
        pass
    except TimeoutError:
        raise AssertionError(f"still open after {within} s; got {got!r}") from None
    finally:
        s.close()
    return got


# ---------------------------------------------------------------------------------------
# slow and half-sent requests, connections per client and in all


def test_slow_clients_are_cut_off_and_a_good_client_is_answered(tmp_path):
    """With 8 connections per address: the 9th from one address is told 429 and closed at
    once; 120 half-sent requests from 60 other addresses (and one trickling a byte a
    second) are closed with a 408 sentence HEADER_S after they opened; an idle connection,
    and a kept-alive one after its answer, are closed silently; a body that stops arriving
    gets 408; all the while a well-behaved client is answered within a second."""
    srv = _server(tmp_path, "--max-per-client", "8")
    half = b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Slow: "
    try:
        body = _open(
            srv.port,
            "127.0.0.3",
            b"POST /api/submissions HTTP/1.1\r\nHost: x\r\n"
            b"Authorization: Bearer " + ADMIN.encode() + b"\r\nContent-Length: "
            b'1000\r\n\r\n{"board": ',
        )
        mine = [_open(srv.port, "127.0.0.2", half) for _ in range(8)]
        extra = _open(srv.port, "127.0.0.2")
        t0 = time.monotonic()
        got = _closed(extra, within=1.0)
        assert b" 429 " in got.split(b"\r\n")[0] and b"8 connections open" in got, got
        assert time.monotonic() - t0 < 1.0
        crowd = [_open(srv.port, f"127.0.0.{10 + i // 2}", half) for i in range(120)]
        idle = _open(srv.port, "127.0.0.4")
        kept = http.client.HTTPConnection(
            "127.0.0.1", srv.port, timeout=10, source_address=("127.0.0.6", 0)
        )
        kept.request("GET", "/api/health")
        assert kept.getresponse().read().startswith(b'{"ok":true')  # then it stays idle
        trickle = _open(srv.port, "127.0.0.5")
        t_open = time.monotonic()
        stop = threading.Event()

        def drip():
            for b in half:
                if stop.wait(0.8):
                    return
                try:
                    trickle.send(bytes([b]))
                except OSError:
                    return

        threading.Thread(target=drip, daemon=True).start()
        waits = []
        while time.monotonic() - t_open < HEADER_S - 1:
            waits.append(_answered_within(srv.port))
            time.sleep(0.3)
        assert len(waits) >= 5, waits
        for s in mine + crowd:
            got = _closed(s, within=HEADER_S + 3 - (time.monotonic() - t_open))
            assert b" 408 " in got and b"did not arrive within 5 s" in got, got
        assert _closed(idle, within=3) == b""  # idle: closed, no words
        assert _closed(kept.sock, within=3) == b""  # idle kept-alive: too
        got = _closed(trickle, within=2)  # a byte a second: no more
        stop.set()
        assert b" 408 " in got and time.monotonic() - t_open < HEADER_S + 3
        _answered_within(srv.port)
        got = _closed(body, within=1)  # cut long ago: it stopped for STALL_S
        assert b" 408 " in got and b"body stopped arriving for 2 s" in got, got
    finally:
        srv.kill(signal.SIGTERM)
    assert "Traceback" not in Path(srv.log.name).read_text()


def test_connections_past_the_open_file_limit_are_refused_not_fatal(tmp_path, monkeypatch):
    """At 400 open files the service keeps 256 for itself and serves 144 connections.  200
    half-sent requests from 50 addresses: past 126 (an eighth below) the oldest idle ones are
    shed at once, so a client is answered at once, not after they time out; 170 requests
    whose headers are complete (not idle: never shed) fill it, 9 more (a sixteenth) are
    let in on probation, and past that a connection gets 503 and a sentence at once.  Nothing fails for
    want of a file."""

    def low_files():
        resource.setrlimit(resource.RLIMIT_NOFILE, (400, 400))

    popen = subprocess.Popen
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: popen(*a, preexec_fn=low_files, **k))
    srv = _server(tmp_path)
    monkeypatch.setattr(subprocess, "Popen", popen)
    try:
        assert "144 in all (400 open files)" in Path(srv.log.name).read_text()
        slow = [_open(srv.port, f"127.0.1.{i // 4}", b"GET / HTTP/1.1\r\n") for i in range(130)]
        time.sleep(0.5)  # idle now, not just unread
        slow += [
            _open(srv.port, f"127.0.1.{i // 4}", b"GET / HTTP/1.1\r\n") for i in range(130, 200)
        ]
        time.sleep(0.5)
        _answered_within(srv.port)  # no waiting for the slow ones' deadline
        shed = sum(_open_or_closed(s) for s in slow)
        assert 200 - 126 <= shed < 200, shed  # the oldest went, the newest are still there
        for s in slow:
            s.close()
        time.sleep(0.5)
        head = (
            b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + ADMIN.encode()
            + b"\r\nContent-Length: 100\r\n\r\n"
        )
        busy = [_open(srv.port, f"127.0.2.{i // 4}", head) for i in range(170)]
        refused = 0
        for s in busy:  # in the app, a body that never comes: 408 at STALL_S; or refused
            got = _closed(s, within=4)
            if b" 503 " in got:
                assert b"connections open, its limit" in got, got
                refused += 1
            else:
                assert b" 408 " in got and b"stopped arriving" in got, got
        _answered_within(srv.port)
        assert 170 - 144 - 9 <= refused <= 170 - 144, refused  # 9 on probation: 144 // 16
        assert srv.proc.poll() is None
    finally:
        srv.kill(signal.SIGTERM)
    log = Path(srv.log.name).read_text()
    assert "Too many open files" not in log and "Traceback" not in log, log[-2000:]


def _open_or_closed(s: socket.socket) -> bool:
    """Whether the server has closed ``s`` (without waiting)."""
    s.setblocking(False)
    try:
        return s.recv(4096, socket.MSG_PEEK) == b"" or True
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


# ---------------------------------------------------------------------------------------
# every malformed request: a 4xx and a sentence

WRONG = [
    None,
    0,
    -1,
    1.5,
    10**30,
    1e308,
    True,
    [],
    [1, "x"],
    {},
    {"a": 1},
    "",
    " ",
    "ünïcødé ✓ \u2028",
    "\ud800",
    "x" * 70000,
]


def _fuzz_requests(tok):
    """(method, path, headers, body bytes) of a bounded set of malformed requests."""
    ok = {"board": "tune_vector_add", "source": GOOD, "function": "add_fast"}
    auth = {"Authorization": f"Bearer {tok}"}
    out = []
    for field in ("board", "source", "function", "unit", "course_kernel"):
        for v in WRONG:
            out.append(
                ("POST", "/api/submissions", auth, json.dumps(dict(ok, **{field: v})).encode())
            )
    for body in (
        b"",
        b"{not json",
        b"[1, 2]",
        b"3",
        b'"x"',
        b"null",
        b"1" * 5000,
        b"[" * 100000,
        b'{"board": 1e999}',
        b"\xff\xfe\x00",
        "ü".encode("latin-1"),
        json.dumps(dict(ok, source=GOOD + "\x00")).encode(),
        json.dumps(dict(ok, source="(" * 300 + ")" * 300)).encode(),
        json.dumps(dict(ok, source="@" + "a." * 50000 + "jit\ndef add_fast(): pass\n")).encode(),
        json.dumps(
            dict(
                ok,
                unit={
                    "name": "add_fast",
                    "source": GOOD,
                    "options": {},
                    "signature": None,
                    "firstline": 1,
                    "globals": {"x": ["weird", 1]},
                },
            )
        ).encode(),
        json.dumps(dict(ok, unit=[1])).encode(),
        json.dumps({"board": "histogram", "course_kernel": {"a": 1}}).encode(),
    ):
        out.append(("POST", "/api/submissions", auth, body))
    for h in (
        {},
        {"Authorization": tok},
        {"Authorization": "Bearer"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer " + "x" * 8000},
        {"Cookie": "leaderboard_token=" + "y" * 3000},
        {"Cookie": "=;;=\x7f"},
        dict(auth, **{"Content-Type": "text/plain"}),
        dict(auth, **{"Content-Length": "abc"}),
    ):
        out.append(("POST", "/api/submissions", h, json.dumps(ok).encode()))
    for sid in (
        "abc",
        "-1",
        str(10**30),
        "0",
        "1.5",
        "%00",
        "%E2%9C%93",
        "1e3",
        "9" * 19,
        "+1",
        "%201",
        "%D9%A1",
        "1_0",
        "x" * 3000,
    ):
        out.append(("GET", f"/api/submissions/{sid}", auth, None))
    for path in (
        "/api/boards",
        "/api/boards/nope",
        "/api/boards/%00",
        "/api/submissions",
        "/api/submissions/1",
        "/api/health",
        "/boards",
        "/boards/nope",
        "/boards/%E2%9C%93",
        "/signin",
        "/signout",
        "/",
        "/nope",
        "/api",
    ):
        for method in ("PUT", "DELETE", "PATCH", "POST", "GET"):
            out.append((method, path, auth, b"{}"))
    out.append(
        (
            "POST",
            "/signin",
            {"Content-Type": "application/x-www-form-urlencoded"},
            b"token=" + b"z" * 5000,
        )
    )
    out.append(("POST", "/signin", {}, b"token=%ff%fe&&&=="))
    return out


def _raw(port, data: bytes) -> bytes:
    s = _open(port, send=data)
    return _closed(s, within=HEADER_S + 3)


def test_every_malformed_request_gets_a_4xx_and_a_sentence(tmp_path):
    tok = _tokens(tmp_path, 1)["s00"]
    srv = _server(tmp_path)
    t0, seen = time.monotonic(), []
    try:
        for method, path, headers, body in _fuzz_requests(tok):
            conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)
            conn.putrequest(method, path, skip_accept_encoding=True)
            for k, v in headers.items():
                conn.putheader(k, v.encode("latin-1", "replace") if isinstance(v, str) else v)
            if body is not None and "Content-Length" not in headers:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            r = conn.getresponse()
            text = r.read()
            conn.close()
            seen.append(r.status)
            assert r.status < 500, (method, path, headers, (body or b"")[:200], r.status, text)
            if r.status >= 400:
                assert text.strip(), (method, path)
                if r.headers.get("content-type", "").startswith("application/json"):
                    msg = json.loads(text)["error"]
                    assert isinstance(msg, str) and len(msg) > 10, msg
        for data in (
            b"GET /api/health HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
            b"POST /api/submissions HTTP/1.1\r\nHost: x\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"\x16\x03\x01\x02\x00",
            b"GET /\x00 HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nno colon\r\n\r\n",
            b"POST /signin HTTP/1.1\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n",
            b"GET /api/submissions/1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a"
            b"\r\nAuthorization: Bearer " + tok.encode() + b"\r\n\r\n",
        ):
            got = _raw(srv.port, data)
            status = int(got.split(b" ", 2)[1]) if got.startswith(b"HTTP/") else 0
            assert got == b"" or 400 <= status < 500, (data, got)
        assert time.monotonic() - t0 < 120
        assert len(seen) > 180 and {400, 401, 404, 405, 413, 422} <= set(seen), set(seen)
    finally:
        srv.kill(signal.SIGTERM)
    log = Path(srv.log.name).read_text()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]


def test_an_unknown_board_page_is_404_and_lists_the_boards(tmp_path):
    srv = _server(tmp_path)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("GET", "/boards/nope")
        r = conn.getresponse()
        page = r.read().decode()
        assert r.status == 404 and "There is no board called <code>nope</code>" in page
        assert "tune_vector_add</a>" in page and "histogram</a>" in page
    finally:
        srv.kill(signal.SIGTERM)


# ---------------------------------------------------------------------------------------
# the source shown is the source judged


def test_the_source_shown_is_the_units_source(tmp_path):
    """A POST's ``source`` that differs from its unit's (which is what is judged) is 422;
    without ``source`` the unit's is stored and shown."""
    from course.exercises import get
    from course.grading.classroom.solutions import defined
    from course.grading.source.unit import extract

    tok = _tokens(tmp_path, 1)["s00"]
    unit = extract(defined("tune_vector_add")[0], get("tune_vector_add").launch_names)
    srv = _server(tmp_path)
    try:
        url = srv.url + "/api/submissions"
        body = {"board": "tune_vector_add", "source": GOOD, "function": unit["name"], "unit": unit}
        code, d = call("POST", url, tok, body)
        assert code == 422 and "unit's source" in d["error"], d
        del body["source"]
        code, d = call("POST", url, tok, body)
        assert code == 202, d
        shown = wait_done(srv.url, tok, d["id"])
        assert shown["source"] == unit["source"] and shown["function"] == unit["name"]
        code, d = call("POST", url, tok, dict(body, source=unit["source"]))
        assert code == 202, d
    finally:
        srv.kill(signal.SIGTERM)


# ---------------------------------------------------------------------------------------
# a submission that stops the service twice


def test_a_submission_that_stops_the_service_twice_ends_error(tmp_path):
    tok = _tokens(tmp_path, 2)
    srv = _server(tmp_path)
    crash = {
        "board": "tune_vector_add",
        "source": "# stop the service\n" + GOOD,
        "function": "add_fast",
    }
    code, d = call("POST", srv.url + "/api/submissions", tok["s00"], crash)
    assert code == 202
    bad = d["id"]
    srv.proc.wait(30)  # judging it killed the service
    srv.log.close()
    db = sqlite3.connect(tmp_path / "lb.db")

    def row():
        return db.execute(
            "SELECT status, attempts, message FROM submissions WHERE id = ?", (bad,)
        ).fetchone()

    assert row()[:2] == ("timing", 1)
    good = db.execute(
        "INSERT INTO submissions (student, board, function, source, created) "
        "VALUES ('s01', 'tune_vector_add', 'add_fast', ?, ?)",
        ("# fine\n" + GOOD, time.time()),
    ).lastrowid
    db.commit()
    env = dict(
        os.environ,
        COURSE_LEADERBOARD_EXIT_WITH=str(os.getpid()),
        FAKE_JUDGE_LOG=str(tmp_path / "measured.txt"),
        PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO)]),
    )
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "leaderboard",
            "serve",
            "--db",
            str(tmp_path / "lb.db"),
            "--port",
            str(srv.port),
            *srv.extra,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == -signal.SIGKILL, again.stdout + again.stderr
    assert "1 unfinished submission(s) queued again" in again.stdout
    assert row()[:2] == ("timing", 2)
    srv.start()  # the third start: given up on
    try:
        d = wait_done(srv.url, ADMIN, bad, limit=10)
        assert d["status"] == "error" and d["message"] == (
            "judging this submission stopped the service twice; it is not queued again"
        )
        assert wait_done(srv.url, ADMIN, good, limit=30)["status"] == "done"
        assert "1 that stopped the service twice marked error" in Path(srv.log.name).read_text()
    finally:
        srv.kill(signal.SIGTERM)
    srv.start()  # and never again
    try:
        assert call("GET", f"{srv.url}/api/submissions/{bad}", ADMIN)[1]["status"] == "error"
        assert srv.proc.poll() is None
    finally:
        srv.kill(signal.SIGTERM)


def test_a_database_from_before_attempts_gets_the_column(tmp_path):
    from course.leaderboard.store import Store

    db = sqlite3.connect(tmp_path / "old.db")
    db.executescript("""CREATE TABLE submissions (id INTEGER PRIMARY KEY AUTOINCREMENT,
      student TEXT NOT NULL, board TEXT NOT NULL, function TEXT NOT NULL, source TEXT NOT
      NULL, unit TEXT, status TEXT NOT NULL DEFAULT 'queued', passed INTEGER, message TEXT,
      mean_ms REAL, std_ms REAL, best_ms REAL, median_ms REAL, runs INTEGER, figures TEXT,
      cases TEXT, device TEXT, versions TEXT, mode TEXT, created REAL NOT NULL,
      started REAL, finished REAL);
      INSERT INTO submissions (student, board, function, source, status, created)
      VALUES ('a', 'b', 'f', 's', 'testing', 1.0);""")
    db.close()
    store = Store(tmp_path / "old.db")
    assert store.get(1)["attempts"] == 0 and store.requeue_unfinished() == (1, 0)
    assert store.claim(1)["attempts"] == 1


# ---------------------------------------------------------------------------------------
# the command line fails loudly


def _run(*args, env=None, timeout=60):
    base = {k: v for k, v in os.environ.items() if not k.startswith("COURSE_LEADERBOARD")}
    return subprocess.run(
        [sys.executable, "-m", "course", *args],
        cwd=REPO,
        text=True,
        capture_output=True,
        timeout=timeout,
        env=dict(base, **(env or {})),
    )


def test_serve_on_a_taken_port_says_so_before_serving(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        r = _run(
            "leaderboard",
            "serve",
            "--db",
            str(tmp_path / "lb.db"),
            "--port",
            str(port),
            "--isolation",
            "none",
            env={"COURSE_LEADERBOARD_EXIT_WITH": str(os.getpid())},
        )
    finally:
        taken.close()
    assert r.returncode == 2 and "serving on" not in r.stdout, r.stdout + r.stderr
    assert f"cannot serve on port {port} of 127.0.0.1: it is already in use" in r.stderr
    assert "--port" in r.stderr and not (tmp_path / "lb.db").exists()


def test_export_writes_iso_8601_times(tmp_path):
    from course.leaderboard.store import Store

    store = Store(tmp_path / "lb.db")
    sid = store.add("ann", "tune_matmul", "f", "src", None)
    store.claim(sid)
    store.finish(sid, "done", {"passed": True, "mean_ms": 1.0})
    store._x("UPDATE submissions SET created = 1795703405.25")  # 2026-11-26T14:30:05Z
    r = _run(
        "leaderboard", "export", "--db", str(tmp_path / "lb.db"), "--out", str(tmp_path / "all.csv")
    )
    assert r.returncode == 0, r.stderr
    row = next(csv.DictReader(open(tmp_path / "all.csv")))
    assert row["created"] == "2026-11-26T14:30:05Z"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", row["finished"]), row


TWO = GOOD + "\n@cuda.jit\ndef other(n, x, y):\n    pass\n"
HELPER = (
    "from numba import cuda\n\n@cuda.jit(device=True)\ndef twice(v):\n"
    "    return 2 * v\n\n@cuda.jit\ndef mine(n, x, y):\n    i = cuda.grid(1)\n    if i < n:\n"
    "        y[i] = x[i] + y[i]\n"
)


def test_submit_names_command_line_words_and_finds_the_kernel(tmp_path):
    f = tmp_path / "k.py"
    f.write_text(HELPER)
    r = _run("submit", "tune_vector_add", str(f))
    assert r.returncode == 2 and "give --server URL or set COURSE_LEADERBOARD_URL" in r.stderr
    r = _run("submit", "tune_vector_add", str(f), "--server", "http://127.0.0.1:9")
    assert (
        r.returncode == 2
        and "give --token TOKEN or set COURSE_LEADERBOARD_TOKEN" in r.stderr
        and "token=" not in r.stderr
    ), r.stderr
    (tmp_path / "two.py").write_text(TWO.replace("add_fast", "first"))
    r = _run("submit", "tune_vector_add", str(tmp_path / "two.py"), "--server", "x", "--token", "y")
    assert (
        r.returncode == 2
        and "defines 2 @cuda.jit kernels (first, other) and none is called `add_fast`" in r.stderr
        and "give --function NAME" in r.stderr
    ), r.stderr

    tok = _tokens(tmp_path, 1)["s00"]
    srv = _server(tmp_path)
    try:
        got = {}
        for name, text in (("helper", HELPER), ("two", TWO)):  # the only kernel; the
            (tmp_path / f"{name}.py").write_text(text)  # board's name among two
            r = _run(
                "submit",
                "tune_vector_add",
                str(tmp_path / f"{name}.py"),
                "--no-wait",
                "--server",
                srv.url,
                "--token",
                tok,
            )
            assert r.returncode == 0, r.stderr
            sid = int(r.stdout.split()[1])
            got[name] = call("GET", f"{srv.url}/api/submissions/{sid}", tok)[1]["function"]
        assert got == {"helper": "mine", "two": "add_fast"}
    finally:
        srv.kill(signal.SIGTERM)
