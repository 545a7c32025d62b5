"""The service reads submissions off its event loop, after every cheap check (a real
``leaderboard serve`` on loopback with a stand-in judge; every server stops by itself):
``/api/health`` answers within 200 ms while many worst-case submissions are read, a student
past the rate limit gets 429 before anything is read, a reader past its deadline is killed
(503) and the next submission gets a fresh one, and a reader holds no leaderboard secret."""

import asyncio
import gzip
import json
import os
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from test_leaderboard import GOOD, Server, _tokens, call

from course.leaderboard import reading
from course.leaderboard.limits import Refused

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("leaderboard"), pytest.mark.timeout(240)]
HEALTH_S = 0.2


def _worst(i: int) -> str:
    """A file that costs its reader the most the limits allow: 64 K characters of
    statements that make tuples within the budget, arithmetic at the edges, a DAG."""
    head = "from numba import cuda\nimport numpy as np\n"
    lines = [f"A{i}_0 = (" + ", ".join(["2**63 - 1"] * 60) + ")"]
    k = 1
    while sum(map(len, lines)) < 60_000:
        lines.append(f"A{i}_{k} = (" + ", ".join([f"A{i}_{k - 1}"] * 2) + ")")
        k += 1
    return head + "\n".join(lines) + "\n" + GOOD


def _server(tmp: Path, *extra):
    return Server(tmp, "--judge", "test_leaderboard_limits2:judge", "--isolation", "none", *extra)


def _post(srv, tok, source, board="tune_vector_add"):
    return call(
        "POST",
        srv.url + "/api/submissions",
        tok,
        {"board": board, "source": source, "function": "add_fast"},
    )


def test_health_answers_while_submissions_are_read_and_the_rate_comes_first(tmp_path):
    toks = list(_tokens(tmp_path, 8).values())
    srv = _server(tmp_path, "--rate", "2")
    try:
        assert _post(srv, toks[0], GOOD)[0] == 202  # the readers are up
        lat: list[float] = []
        answers: list[int] = []
        stop = threading.Event()

        def poll():  # until the senders are done and 20 answers are in (the readers may
            # still be reading then: a 202 comes before its file is read), 60 s at most
            end = time.monotonic() + 60
            while (not stop.is_set() or len(lat) < 20) and time.monotonic() < end:
                t0 = time.monotonic()
                code, _ = call("GET", srv.url + "/api/health")
                lat.append(time.monotonic() - t0)
                assert code == 200
                time.sleep(0.02)

        def send(i):  # four students at once, three worst-case files each
            for j in range(3):
                answers.append(_post(srv, toks[1 + i], _worst(4 * j + i))[0])

        poller = threading.Thread(target=poll)
        poller.start()
        senders = [threading.Thread(target=send, args=(i,)) for i in range(4)]
        for s in senders:
            s.start()
        for s in senders:
            s.join(120)
        stop.set()
        poller.join(10)
        assert set(answers) <= {202, 422, 429} and len(answers) == 12, answers
        lat.sort()  # the 95th percentile: on a shared 2-core CI machine the OS, not the
        #             service, may hold a request back now and then (before: 20-85 s)
        assert len(lat) >= 20 and lat[int(0.95 * len(lat))] <= HEALTH_S, lat[-10:]
        assert lat[-1] <= 5 * HEALTH_S, lat[-10:]
        # past the rate: 429 at once, before the file is read (it would be 422)
        assert _post(srv, toks[0], GOOD)[0] == 202
        code, body = _post(srv, toks[0], "def broken(:\n")
        assert code == 429, body
        # a gzip body is not unpacked: no decompression bomb reaches a reader
        req = urllib.request.Request(
            srv.url + "/api/submissions",
            data=gzip.compress(json.dumps({"board": "tune_vector_add"}).encode()),
            headers={"Authorization": f"Bearer {toks[7]}", "Content-Encoding": "gzip"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req, timeout=30)
        assert exc.value.code == 400
        # the readers hold no leaderboard secret
        kids = [
            p
            for p in os.listdir("/proc")
            if p.isdigit() and _parent(p) == srv.proc.pid and "reading" in _cmdline(p)
        ]
        assert kids, "no reader process found"
        for p in kids:
            env = Path(f"/proc/{p}/environ").read_bytes()
            assert b"COURSE_LEADERBOARD" not in env
    finally:
        srv.kill()


def _parent(pid: str) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_a_reader_past_its_deadline_is_killed_and_the_next_read_gets_a_fresh_one():
    readers = reading.Readers(count=1, read_s=1e-4)
    request = {"source": GOOD, "function": "add_fast", "unit": None, "extra_names": []}
    try:
        readers.warm()
        first = readers._free[0]
        with pytest.raises(Refused) as exc:
            asyncio.run(readers.read(request))
        assert exc.value.status == 503 and "in time" in exc.value.message
        assert first is not None and first.proc.poll() is not None  # killed
        readers.read_s = 30
        source, unit = asyncio.run(readers.read(request))
        assert source == GOOD and unit["name"] == "add_fast"
        with pytest.raises(Refused) as exc:  # a refusal from a reader is a course sentence
            asyncio.run(readers.read(dict(request, source=GOOD + "\nimport os\n")))
        assert exc.value.status == 422 and "line" in exc.value.message
    finally:
        readers.close()


def test_a_source_with_direction_controls_is_refused():
    with pytest.raises(Refused) as exc:
        reading.shape(GOOD + "# \u202e }\n", "add_fast")
    assert exc.value.status == 422 and "U+202E" in exc.value.message
    reading.shape(GOOD + "# e\u0301 \u00e9\n", "add_fast")  # combining marks are text
