"""What one student may take of the leaderboard, and what it shows and keeps, against a real
``leaderboard serve`` on loopback (this module's ``judge`` stands in for the real one; every
server stops by itself): a fair queue and a judge-time window per student, a storage quota,
the sign-in cookie's scope, the whole judged unit shown, non-ASCII tokens refused with a
sentence, and the token file and database kept to their owner (0600)."""

import http.client
import json
import os
import re
import signal
import sqlite3
import stat
import time
from pathlib import Path

import pytest
from test_leaderboard import ADMIN, GOOD, Server, _tokens, call, wait_done

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("leaderboard"), pytest.mark.timeout(180)]
SLOW_S = 2.0


def judge(board, payload, on_stage=None, isolation=None, case_time_limit=None):
    """A stand-in judge: sleeps ``# sleep S`` seconds when the source starts so."""
    m = re.match(r"# sleep ([0-9.]+)", payload["source"])
    time.sleep(float(m.group(1)) if m else 0.01)
    return {
        "status": "done",
        "passed": True,
        "message": "stand-in",
        "mean_ms": 1.0,
        "std_ms": 0.0,
        "best_ms": 1.0,
        "median_ms": 1.0,
        "runs": 3,
        "device": "stand-in",
        "mode": "gpu",
        "cases": [],
    }


def _server(tmp, *extra):
    return Server(
        tmp,
        "--judge",
        "test_leaderboard_limits2:judge",
        "--isolation",
        "none",
        "--rate",
        "1000",
        *extra,
    )


def _post(srv, tok, source, **more):
    return call(
        "POST",
        srv.url + "/api/submissions",
        tok,
        dict({"board": "tune_vector_add", "source": source, "function": "add_fast"}, **more),
    )


def _raw(port, request: bytes) -> tuple[int, dict, bytes]:
    """(status, headers, body) of one request sent as these bytes."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    conn.connect()
    conn.sock.sendall(request)
    r = http.client.HTTPResponse(conn.sock, method=request.split(b" ")[0].decode())
    r.begin()
    body = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


# ---------------------------------------------------------------------------------------
# the queue is fair; judge time per student is capped in a sliding window


def test_a_slow_students_queue_delays_another_by_at_most_one_judging(tmp_path):
    tok = _tokens(tmp_path, 2)
    srv = _server(tmp_path, "--judge-seconds", str(1.5 * SLOW_S))
    try:
        slow = [_post(srv, tok["s00"], f"# sleep {SLOW_S} #{k}\n" + GOOD) for k in range(4)]
        assert all(code == 202 for code, _ in slow), slow
        t0 = time.monotonic()
        while (
            call("GET", f"{srv.url}/api/submissions/{slow[0][1]['id']}", tok["s00"])[1]["status"]
            == "queued"
        ):
            assert time.monotonic() - t0 < 20
            time.sleep(0.05)
        t0 = time.monotonic()
        code, d = _post(srv, tok["s01"], "# quick\n" + GOOD)
        assert code == 202, d
        fast = wait_done(srv.url, tok["s01"], d["id"], limit=30)
        took = time.monotonic() - t0
        second = call("GET", f"{srv.url}/api/submissions/{slow[1][1]['id']}", tok["s00"])[1]
        # judged right after the one slow judging under way, before the slow student's next
        assert second["started"] is None or fast["started"] <= second["started"], (fast, second)
        assert took < 2 * SLOW_S, took  # first come, first served: over 3 x SLOW_S
        wait_done(srv.url, tok["s00"], slow[1][1]["id"], limit=30)  # 2 x SLOW_S judged
        code, d = _post(srv, tok["s00"], "# one more\n" + GOOD)
        assert code == 429 and "judged for" in d["error"] and "try again in" in d["error"], d
        code, d = _post(srv, tok["s01"], "# quick again\n" + GOOD)  # the others still can
        assert code == 202, d
    finally:
        srv.kill(signal.SIGTERM)
    db = sqlite3.connect(tmp_path / "lb.db")
    order = [
        r[0]
        for r in db.execute(
            "SELECT student FROM submissions WHERE started IS NOT NULL ORDER BY started"
        )
    ]
    assert order[:3] == ["s00", "s01", "s00"], order


def test_the_retry_after_of_the_judge_window_is_when_enough_has_left_it():
    from course.leaderboard.allowance import used, wait_s

    now = 10_000.0
    spans = [(now - 3000, now - 2900), (now - 100, None)]  # 100 s, and 100 s running
    assert used(spans, now - 3600, now) == pytest.approx(200)
    assert wait_s(spans, 250, 3600, now) == 0
    assert wait_s(spans, 150, 3600, now) == pytest.approx(650, abs=0.01)  # 50 s out of it
    assert wait_s(spans, 50, 3600, now) == pytest.approx(3550, abs=0.01)


# ---------------------------------------------------------------------------------------
# storage per student


def test_a_student_past_the_storage_quota_gets_413_and_a_sentence(tmp_path):
    tok = _tokens(tmp_path, 2)
    srv = _server(tmp_path, "--quota-mb", "0.01")  # 10,000 bytes
    pad = "#" + "x" * 4000 + "\n"
    try:
        for k in range(2):
            code, d = _post(srv, tok["s00"], f"# {k}\n" + pad + GOOD)
            assert code == 202, d
        code, d = _post(srv, tok["s00"], "# 2\n" + pad + GOOD)
        assert code == 413 and "0.01 MB per student" in d["error"], d
        code, d = _post(srv, tok["s01"], "# 0\n" + pad + GOOD)  # the others still can
        assert code == 202, d
    finally:
        srv.kill(signal.SIGTERM)
    readme = (Path(__file__).resolve().parents[1] / "instructor" / "README.md").read_text()
    assert "--quota-mb" in readme and "--judge-seconds" in readme


# ---------------------------------------------------------------------------------------
# the sign-in cookie stays with the service


def _signin(port, token: str, path: str, extra: bytes = b"") -> str:
    form = f"token={token}".encode()
    code, headers, _ = _raw(
        port,
        b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/x-www-form-urlencoded\r\n"
        + extra
        + b"Content-Length: "
        + str(len(form)).encode()
        + b"\r\n"
        b"Connection: close\r\n\r\n" + form,
    )
    assert code == 303, code
    return headers["set-cookie"]


def test_the_signin_cookie_is_scoped_to_the_service(tmp_path):
    tok = _tokens(tmp_path, 1)["s00"]
    srv = _server(tmp_path, "--root-path", "/services/leaderboard", "--trusted-proxy", "127.0.0.1")
    try:
        cookie = _signin(srv.port, tok, "/signin")  # uvicorn puts the root path first
        parts = [p.strip().lower() for p in cookie.split(";")]
        assert "path=/services/leaderboard" in parts and "httponly" in parts, cookie
        assert "samesite=strict" in parts and "secure" not in parts, cookie
        cookie = _signin(
            srv.port, tok, "/signin", b"X-Forwarded-Proto: https\r\n"
        )  # the trusted proxy's https (from any other peer it is ignored)
        assert "secure" in [p.strip().lower() for p in cookie.split(";")], cookie
        code, headers, _ = _raw(
            srv.port, b"GET /signout HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert "path=/services/leaderboard" in headers["set-cookie"].lower(), headers
    finally:
        srv.kill(signal.SIGTERM)


# ---------------------------------------------------------------------------------------
# the whole judged unit is shown

UNIT_CELL = """from numba import cuda
SCALE = 3.0
OFFSETS = (1, 2)

@cuda.jit(device=True)
def twice(v):
    # <b>not bold</b> & kept as text
    return v * SCALE

@cuda.jit
def add_fast(n, x, y):
    for k in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[k] = twice(x[k]) + y[k] + OFFSETS[0]
"""


def test_the_submission_shows_every_device_function_and_constant(tmp_path):
    from course.grading.source.unit import extract, run_cell

    ns = {}
    run_cell(UNIT_CELL, "<cell unit>", ns)
    unit = extract(ns["add_fast"])
    tok = _tokens(tmp_path, 1)["s00"]
    srv = _server(tmp_path)
    try:
        code, d = call(
            "POST",
            srv.url + "/api/submissions",
            tok,
            {"board": "tune_vector_add", "function": "add_fast", "unit": unit},
        )
        assert code == 202, d
        shown = wait_done(srv.url, tok, d["id"])
        assert shown["unit_sources"]["add_fast"] == unit["source"]
        assert "return v * SCALE" in shown["unit_sources"]["twice"], shown["unit_sources"]
        assert shown["constants"]["OFFSETS"] == "(1, 2)", shown["constants"]
        assert shown["constants"]["twice.SCALE"] == "3.0", shown["constants"]
        code, _, page = _raw(
            srv.port,
            f"GET /submissions/{d['id']} HTTP/1.1\r\nHost: x\r\n"
            f"Cookie: leaderboard_token={tok}\r\nConnection: close\r\n\r\n".encode(),
        )
        page = page.decode()
        assert code == 200 and "return v * SCALE" in page and "twice.SCALE" in page
        assert "&lt;b&gt;not bold&lt;/b&gt; &amp; kept" in page and "<b>not bold" not in page
        code, _, page = _raw(
            srv.port,
            f"GET /submissions/{d['id']} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(),
        )  # not signed in
        assert code == 404 and "SCALE" not in page.decode()
    finally:
        srv.kill(signal.SIGTERM)


# ---------------------------------------------------------------------------------------
# a token of bytes no token has


def test_a_non_ascii_token_gets_401_and_a_sentence_and_no_traceback(tmp_path):
    _tokens(tmp_path, 1)
    srv = _server(tmp_path)
    body = json.dumps({"board": "tune_vector_add", "source": GOOD, "function": "add_fast"}).encode()
    try:
        for head in (
            b"Authorization: Bearer \xff\xfe",
            b"Cookie: leaderboard_token=\xff\xfe",
            b"Authorization: Bearer " + ADMIN.encode() + b"\xff",
        ):
            for req in (
                b"GET /api/submissions/1 HTTP/1.1\r\n",
                b"POST /api/submissions HTTP/1.1\r\nContent-Length: "
                + str(len(body)).encode()
                + b"\r\n",
            ):
                code, _, text = _raw(
                    srv.port, req + b"Host: x\r\n" + head + b"\r\nConnection: close\r\n\r\n" + body
                )
                assert code == 401, (head, code, text)
                assert "token" in json.loads(text)["error"], text
        code, _, text = _raw(
            srv.port,
            b"GET /boards HTTP/1.1\r\nHost: x\r\nCookie: "
            b"leaderboard_token=\xff\xfe\r\nConnection: close\r\n\r\n",
        )
        assert code == 200 and b"sign in" in text
    finally:
        srv.kill(signal.SIGTERM)
    log = Path(srv.log.name).read_text()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]


# ---------------------------------------------------------------------------------------
# the token file and the database: their owner's only


def test_tokens_and_database_are_written_0600_and_the_folder_is_left_alone(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    old = os.umask(0o022)
    try:
        _tokens(folder, 2)
        srv = _server(folder)
        try:
            assert _post(srv, _tokens_of(folder)["s00"], GOOD)[0] == 202
        finally:
            srv.kill(signal.SIGTERM)
    finally:
        os.umask(old)

    def mode(p):
        return stat.S_IMODE(p.stat().st_mode)

    assert mode(folder / "tokens.csv") == 0o600
    for name in ("lb.db", "lb.db-wal", "lb.db-shm"):
        if (folder / name).exists():
            assert mode(folder / name) == 0o600, name
    assert mode(folder) == 0o755
    loose = tmp_path / "old.db"  # a database made before: narrowed
    sqlite3.connect(loose).close()
    os.chmod(loose, 0o644)
    from course.leaderboard.store import Store

    Store(loose).close()
    assert mode(loose) == 0o600


def _tokens_of(folder: Path) -> dict:
    import csv

    with open(folder / "tokens.csv", newline="") as f:
        return {row["student"]: row["token"] for row in csv.DictReader(f)}
