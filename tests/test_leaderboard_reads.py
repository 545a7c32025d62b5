"""One student's reads against a real ``leaderboard serve`` on loopback (this module's
``judge`` stands in for the real one and, with ``SLOW_READ_S`` set, makes a read of a
source holding ``# slow read`` take that long; every server stops by itself): submissions
sent at the same moment pass the rate one at a time, a student has one read in flight at
most while another student's is read, and refused reads count against the rate."""

import os
import threading
import time

import pytest
from test_leaderboard import GOOD, Server, _tokens, call
from test_leaderboard_limits2 import judge  # noqa: F401 - the server's stand-in judge

from course.leaderboard import reading

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("leaderboard"), pytest.mark.timeout(180)]
SLOW = "# slow read\n" + GOOD

if os.environ.get("SLOW_READ_S"):  # in the server only (Server(env=...))
    _read = reading.Readers._read

    def _slow_read(self, request: dict) -> dict:
        if "# slow read" in str(request.get("source")):
            time.sleep(float(os.environ["SLOW_READ_S"]))
        return _read(self, request)

    reading.Readers._read = _slow_read  # type: ignore[method-assign]


def _server(tmp, *extra, env=None):
    stand_in = ("--judge", "test_leaderboard_reads:judge", "--isolation", "none")
    return Server(tmp, *stand_in, *extra, env=env)


def _post(srv, tok, source=GOOD):
    body = {"board": "tune_vector_add", "source": source, "function": "add_fast"}
    return call("POST", srv.url + "/api/submissions", tok, body)


def _at_once(n: int, send) -> list:
    """``send(i)`` from ``n`` threads released together; their answers."""
    answers: list = [None] * n
    go = threading.Barrier(n)

    def one(i):
        go.wait(30)
        answers[i] = send(i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return answers


def test_thirty_posts_at_once_pass_the_rate_one_at_a_time(tmp_path):
    # rate 4 = the per-student waiting limit: with a slow judge (a loaded machine) a rate
    # above it would meet "4 submissions waiting" first, and those refusals are not stored
    toks = list(_tokens(tmp_path, 2).values())
    srv = _server(tmp_path, "--rate", "4")
    try:
        answers = _at_once(30, lambda i: _post(srv, toks[0]))
        codes = [a[0] for a in answers]
        assert set(codes) <= {202, 429}, answers
        assert 1 <= codes.count(202) <= 4, codes  # before: 30 x 202
        assert all("error" in a[1] for a in answers if a[0] == 429)
        for _ in range(4):  # sent one after another: the rate, then 429
            _post(srv, toks[0])
        code, body = _post(srv, toks[0])
        assert code == 429 and "too many submissions" in body["error"], body
        assert _post(srv, toks[1])[0] == 202  # another student is not held back
    finally:
        srv.kill()


def test_one_read_in_flight_per_student_and_another_students_read_goes_on(tmp_path):
    toks = list(_tokens(tmp_path, 2).values())
    srv = _server(tmp_path, "--rate", "6", env={"SLOW_READ_S": "4"})
    try:
        answers: dict = {}
        slow = threading.Thread(target=lambda: answers.update(slow=_post(srv, toks[0], SLOW)))
        slow.start()
        time.sleep(1.0)  # the slow read is under way
        t0 = time.monotonic()
        code, body = _post(srv, toks[0])
        assert code == 429 and "being read" in body["error"], body  # before: 202
        assert time.monotonic() - t0 < 2.0  # at once, not after the slow read
        t0 = time.monotonic()
        assert _post(srv, toks[1])[0] == 202  # bob is read meanwhile
        assert time.monotonic() - t0 < 2.0
        slow.join(60)
        assert answers["slow"][0] == 202, answers
        assert _post(srv, toks[0])[0] == 202  # the read done, the next one is taken
    finally:
        srv.kill()


def test_refused_reads_count_against_the_rate(tmp_path):
    toks = list(_tokens(tmp_path, 1).values())
    srv = _server(tmp_path, "--rate", "3")
    try:
        for _ in range(3):  # read and refused: nothing stored, each counted
            assert _post(srv, toks[0], GOOD + "\nimport os\n")[0] == 422
        code, body = _post(srv, toks[0])
        assert code == 429 and "too many submissions" in body["error"], body  # before: 202
    finally:
        srv.kill()
