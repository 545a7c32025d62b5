"""The red team's attacks on the leaderboard service (issue 38, "The service"), each against
a real ``leaderboard serve`` on loopback with a stand-in judge, bounded in seconds:

1. one student's stalled bodies cannot hold the in-flight body budget (a share per client,
   a minimum upload rate): another student is answered at once;
2. half-sent connections from many addresses cannot hold every connection (the oldest idle
   ones are shed near the cap, the header deadline shortens under load); behind a trusted
   proxy the per-client cap is per forwarded address, and ``X-Forwarded-For`` from anyone
   else is ignored;
3. a file that shows one kernel and ``exec``s another is refused before anything runs; an
   honest file's unit is what is stored, judged and shown; a constant the service cannot
   store is 422 with its line (round 3: it was 500);
4. round 3: requests from the trusted proxy's own address naming made-up forwarded
   addresses are capped per token and share one pool without a token; the proxy's address
   holds at most 3/4 of the connections; ``--uds`` serves where only its group reaches."""

import json
import signal
import socket
import threading
import time
from pathlib import Path

import pytest
from test_leaderboard import GOOD, _tokens, call, wait_done
from test_leaderboard_limits2 import _server

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("leaderboard"), pytest.mark.timeout(120)]
MIB = 1 << 20


def _open(port, source="127.0.0.1", send=b"", timeout=10.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    if send:
        s.sendall(send)
    return s


def _reply(s: socket.socket, within: float) -> bytes:
    """What the server sent on ``s`` until it closed it; fails if still open after ``within``."""
    s.settimeout(within)
    got = b""
    try:
        while chunk := s.recv(65536):
            got += chunk
    except (ConnectionResetError, BrokenPipeError):
        pass
    except TimeoutError:
        raise AssertionError(f"still open after {within} s; got {got[:300]!r}") from None
    finally:
        s.close()
    return got


def _post_raw(port, tok, source="127.0.0.1", extra=b"", body=None) -> bytes:
    body = (
        body
        or json.dumps({"board": "tune_vector_add", "source": GOOD, "function": "add_fast"}).encode()
    )
    s = _open(
        port,
        source,
        b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + tok.encode()
        + b"\r\n"
        + extra
        + b"Content-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\nConnection: close\r\n\r\n"
        + body,
    )
    return _reply(s, within=3)


def _status(reply: bytes) -> int:
    return int(reply.split(b" ", 2)[1]) if reply.startswith(b"HTTP/1.1 ") else 0


def _log_clean(srv) -> None:
    log = Path(srv.log.name).read_text()
    assert "Traceback" not in log, log[-2000:]


# ---------------------------------------------------------------------------------------
# 1. bodies


def test_one_students_stalled_bodies_leave_the_budget_to_everyone_else(tmp_path):
    """mallory sends 1 MiB - 1 of 16 bodies and stalls (the red team's bodyhog, at 16
    rather than 64 connections): past her 8 MiB share she gets 429 at once, bob - from
    the same address - is answered 202 at once while she holds it, her stalled bodies get
    408 after 2 s, and a body trickling at 2 KiB/s gets 408 for its rate."""
    toks = _tokens(tmp_path, 3)
    mallory, bob = toks["s00"], toks["s01"]
    srv = _server(tmp_path)
    try:
        head = (
            b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            + mallory.encode()
            + b"\r\nContent-Type: application/json\r\nContent-Length: "
            + str(MIB).encode()
            + b"\r\n\r\n"
        )
        slow = head.replace(str(MIB).encode(), b"100000").replace(
            mallory.encode(), toks["s02"].encode()
        )
        trickle = _open(srv.port, send=slow)
        stop = threading.Event()

        def drip():
            while not stop.wait(0.5):
                try:
                    trickle.send(b" " * 1024)
                except OSError:
                    return

        threading.Thread(target=drip, daemon=True).start()
        t0 = time.monotonic()
        hogs = []
        for _ in range(16):
            s = _open(srv.port, send=head)
            try:
                s.sendall(b" " * (MIB - 1))
            except OSError:  # refused and closed while sending
                pass
            hogs.append(s)
        took = time.monotonic() - t0
        assert took < 1.5, took  # so the checks below happen while she holds her share
        got = _post_raw(srv.port, bob)
        assert _status(got) == 202, got  # same address, another student: answered
        assert time.monotonic() - t0 < 2.0
        replies = [_reply(s, within=4) for s in hogs]
        over = [r for r in replies if _status(r) == 429]
        cut = [r for r in replies if _status(r) == 408]
        assert len(over) >= 8 and b"more than 8 MiB at once" in over[0], replies[0][:300]
        assert len(over) + len(cut) == 16 and cut, [r[:60] for r in replies]
        assert b"stopped arriving for 2 s" in cut[0], cut[0]
        got = _reply(trickle, within=6)
        stop.set()
        assert _status(got) == 408 and b"slower than 64 KiB/s" in got, got
        assert time.monotonic() - t0 < 8
    finally:
        srv.kill(signal.SIGTERM)
    _log_clean(srv)


# ---------------------------------------------------------------------------------------
# 2. connections


def test_half_sent_connections_from_many_addresses_are_shed_and_bob_gets_in(tmp_path):
    """The red team's slowloris (2,108 connections against 2,048), scaled to
    --max-connections 100: 10 addresses keep 12 half-sent connections each open, reopening
    each as soon as it is closed.  Near the
    cap the oldest idle ones are shed, so bob (another address, no waiting) is answered
    202 every time within a second."""
    tok = _tokens(tmp_path, 1)["s00"]
    srv = _server(tmp_path, "--max-connections", "100", "--max-per-client", "1000")
    stop = threading.Event()
    closed = [0]

    def hold(ip):
        while not stop.is_set():
            try:
                s = _open(srv.port, ip, b"GET /api/boards HTTP/1.1\r\nHost: x\r\nX-a: ")
                s.settimeout(8)
                s.recv(4096)  # until the server closes it
                closed[0] += 1
                s.close()
            except OSError:
                time.sleep(0.05)

    threads = [
        threading.Thread(target=hold, args=(f"127.0.1.{i}",), daemon=True)
        for i in range(1, 11)
        for _ in range(12)
    ]
    try:
        for t in threads:
            t.start()
        time.sleep(1.0)
        for _ in range(4):
            t0 = time.monotonic()
            got = _post_raw(srv.port, tok, "127.0.0.200")
            assert _status(got) == 202 and time.monotonic() - t0 < 1.0, got[:300]
            time.sleep(0.5)
        assert closed[0] >= 50, closed  # shed, not left to their 5 s deadline
    finally:
        stop.set()
        srv.kill(signal.SIGTERM)
    _log_clean(srv)


def test_under_load_the_header_deadline_is_shorter(tmp_path):
    """With over half of --max-connections open, a half-sent request gets 408 after 1 s
    (not 5: below half, test_service_limits' slow clients get 5 s)."""
    srv = _server(tmp_path, "--max-connections", "100", "--max-per-client", "1000")
    half = b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-a: "
    try:
        idle = [_open(srv.port, f"127.0.2.{i % 10}", half) for i in range(60)]
        time.sleep(0.3)
        t0 = time.monotonic()
        busy = _open(srv.port, "127.0.0.4", half)
        got = _reply(busy, within=3)
        assert _status(got) == 408 and b"within 1 s" in got, got
        assert 0.8 < time.monotonic() - t0 < 2.0
        for s in idle:
            s.close()
    finally:
        srv.kill(signal.SIGTERM)
    _log_clean(srv)


def _in_flight(port, tok, xff: bytes):
    """A POST whose headers are complete and whose body never comes (in the app, STALL_S)."""
    return _open(
        port,
        send=b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
        + tok.encode()
        + b"\r\nX-Forwarded-For: "
        + xff
        + b"\r\nContent-Length: 100\r\n\r\n",
    )


def test_behind_a_trusted_proxy_the_cap_is_per_forwarded_address(tmp_path):
    """--trusted-proxy 127.0.0.1 (the hub's proxy), --max-per-client 4: one student (one
    forwarded address) holding 4 requests gets 429 for a 5th, and the proxy's own 8+
    connections are not capped per address; another forwarded address is answered 202."""
    toks = _tokens(tmp_path, 2)
    srv = _server(tmp_path, "--max-per-client", "4", "--trusted-proxy", "127.0.0.1")
    try:
        held = [_in_flight(srv.port, toks["s00"], b"10.0.0.1") for _ in range(4)]
        time.sleep(0.3)
        more = [_in_flight(srv.port, toks["s00"], b"10.0.0.1") for _ in range(4)]
        for s in more:
            got = _reply(s, within=1.5)
            assert _status(got) == 429 and b"4 requests open" in got, got
        got = _post_raw(srv.port, toks["s01"], extra=b"X-Forwarded-For: 10.0.0.2\r\n")
        assert _status(got) == 202, got
        for s in held:
            assert _status(_reply(s, within=4)) == 408
    finally:
        srv.kill(signal.SIGTERM)
    _log_clean(srv)


def test_without_a_trusted_proxy_x_forwarded_for_is_ignored(tmp_path):
    """No --trusted-proxy: 4 connections from 127.0.0.1 fill its cap of 4, and a 5th that
    claims to forward for 10.0.0.2 is still 127.0.0.1's: 429 as it opens; a sign-in that
    claims to come through https gets no Secure cookie (uvicorn would believe loopback)."""
    from test_leaderboard_limits2 import _signin

    toks = _tokens(tmp_path, 2)
    srv = _server(tmp_path, "--max-per-client", "4")
    try:
        cookie = _signin(srv.port, toks["s00"], "/signin", b"X-Forwarded-Proto: https\r\n")
        assert "secure" not in [p.strip().lower() for p in cookie.split(";")], cookie
        held = [_in_flight(srv.port, toks["s00"], b"10.0.0.1") for _ in range(4)]
        time.sleep(0.3)
        got = _post_raw(srv.port, toks["s01"], extra=b"X-Forwarded-For: 10.0.0.2\r\n")
        assert _status(got) == 429 and b"4 connections open" in got, got
        for s in held:
            s.close()
    finally:
        srv.kill(signal.SIGTERM)
    _log_clean(srv)


# ---------------------------------------------------------------------------------------
# 3. the source shown is the source judged

SWAP = """from numba import cuda


@cuda.jit
def add_fast(n, x, y):
    for k in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[k] = x[k]


import base64 as _b, zlib as _z, linecache as _lc
_SRC = _z.decompress(_b.b64decode("eJxzSC5NSdTLyizhSklNU0hMSYlPSywu0cjT"))
_lc.cache["<judged>"] = (len(_SRC), None, _SRC.splitlines(True), "<judged>")
exec(compile(_SRC, "<judged>", "exec"), globals())
"""

HONEST = '''"""My kernel."""
import math

import numpy as np
from numba import cuda as cu

SCALE = np.float32(2.0) * 1
OFFSETS = (1, 2)


@cu.jit(device=True, inline=True)
def twice(v):
    return v * SCALE


@cu.jit("void(int64, float32[:], float32[:])", fastmath=True)
def add_fast(n: int, x, y) -> None:
    for k in range(cu.grid(1), n, cu.gridsize(1)):
        y[k] = x[k] + y[k] + twice(0.0) * OFFSETS[0] * math.floor(0.5)


if __name__ == "__main__":
    import os

    os.system("never run")
'''


_USES_C = GOOD.replace("+ y[k]", "+ y[k] * C") + "\nimport numpy as np\nC = {}\n"

REFUSED = [
    (SWAP, "line 10 (`import base64"),
    (SWAP.replace("import base64 as _b, zlib as _z, linecache as _lc\n", ""), "line 10 (`_SRC"),
    (GOOD + "exec('y = 1')\n", "runs code at the top level"),
    (GOOD + "import os\n", "imports os"),
    (GOOD + "from numba import *\n", "imports `*`"),
    (GOOD + "X = (lambda: 1)()\n", "does not compute"),
    (GOOD + "X = 10 ** 10 ** 10\n", "past what a constant may be"),
    (GOOD + "X = " + "-" * 5000 + "1\n", "cannot be read as Python"),
    (GOOD + "import numpy as np\nX = np.float32(1e39)\n", "overflow"),
    (GOOD + "import numpy as np\nX = np.random\n", "names the module numpy.random"),
    (GOOD + "class A:\n    pass\n", "runs code at the top level"),
    (GOOD + "cuda.x = 1\n", "assigns into something other than a name"),
    (GOOD.replace("@cuda.jit", "@cuda.jit(print('x'))"), "other than @cuda.jit"),
    (GOOD.replace("(n, x, y)", "(n, x, y=print())"), "not a literal"),
    (GOOD.replace("y[k] = x[k]", "y[k] = LIMIT"), "`LIMIT`, which is not defined"),
    # round 3: constants the service made but could not store (JSON) answered 500
    (_USES_C.format("np.longdouble(2)"), "line 9 (`C = np.longdouble(2)`) makes a longdouble"),
    (_USES_C.format("np.longdouble('1e4000')"), "makes a longdouble"),
    (_USES_C.format("np.complex64(1.5)"), "makes a complex number (complex64)"),
    (_USES_C.format("np.timedelta64(5)"), "makes a timedelta64"),
    (_USES_C.format("(1, np.float64('nan'))"), "makes the non-finite float nan"),
    (_USES_C.format("np.dtype(np.clongdouble)"), "makes the dtype complex256"),
]


def test_a_file_that_runs_code_is_refused_before_anything_runs(tmp_path):
    """Each: 422 with a sentence naming what runs, nothing stored, the judge never called."""
    tok = _tokens(tmp_path, 1)["s00"]
    srv = _server(tmp_path, "--rate", "1000")
    try:
        for source, says in REFUSED:
            body = {"board": "tune_vector_add", "source": source, "function": "add_fast"}
            code, d = call("POST", srv.url + "/api/submissions", tok, body)
            assert code == 422 and says in d["error"], (says, d)
        assert call("GET", srv.url + "/api/health")[1]["counts"] == {}
    finally:
        srv.kill(signal.SIGTERM)
    _log_clean(srv)


def test_an_honest_files_unit_is_what_is_stored_judged_and_shown(tmp_path):
    """Imports, constants (tuple, numpy scalar, arithmetic), a device function, a signature
    and an alias of numba.cuda: the unit is made from the file without running it, and the
    submission shows that unit - the kernel, its device function and every constant."""
    from course.leaderboard.fromfile import unit_of_file

    tok = _tokens(tmp_path, 1)["s00"]
    srv = _server(tmp_path)
    try:
        body = {"board": "tune_vector_add", "source": HONEST, "function": "add_fast"}
        code, d = call("POST", srv.url + "/api/submissions", tok, body)
        assert code == 202, d
        shown = wait_done(srv.url, tok, d["id"])
        unit = unit_of_file(HONEST, "add_fast")
        assert shown["source"] == HONEST and shown["status"] == "done", shown
        assert shown["unit_sources"]["add_fast"] == unit["source"]
        assert unit["source"].startswith('@cu.jit("void(int64') and "twice(0.0)" in unit["source"]
        assert shown["unit_sources"]["twice"].startswith("@cu.jit(device=True, inline=True)")
        assert shown["constants"]["OFFSETS"] == "(1, 2)"
        assert shown["constants"]["twice.SCALE"] == "numpy.dtype('<f4').type(2.0)"
        assert unit["options"] == {"fastmath": True} and unit["firstline"] == 16
    finally:
        srv.kill(signal.SIGTERM)
    _log_clean(srv)


def test_a_unit_the_service_cannot_store_or_a_failing_database_is_a_sentence():
    """The last word behind fromfile's check: a unit that is not plain JSON is 422, and a
    database that fails while storing is 503 with a sentence and Retry-After - never a
    500 with a traceback (the red team's np.longdouble constant reached json.dumps)."""
    import sqlite3

    import numpy as np

    from course.leaderboard.app import sized, stored
    from course.leaderboard.limits import Refused

    for bad in ({"globals": {"C": np.longdouble(2)}}, {"x": 1j}, {"x": float("nan")}):
        with pytest.raises(Refused) as got:
            sized("src", bad)
        assert got.value.status == 422 and "cannot store" in got.value.message, bad
    assert sized("src", {"globals": {"C": ["scalar", "<f4", 1.5]}}) > 3

    class Broken:
        def add(self, *row, kind):
            raise sqlite3.OperationalError("database is locked")

    with pytest.raises(Refused) as got:
        stored(Broken(), ("bob", "tune_vector_add", "f", "src", {"name": "f"}), "student")
    assert got.value.status == 503 and "(OperationalError)" in got.value.message
    assert got.value.headers == {"Retry-After": "60"}
    with pytest.raises(Refused) as got:  # the instructor's entries are sized here too
        stored(Broken(), ("bob", "tune_vector_add", "f", "src", {"c": np.complex64(1)}), "course")
    assert got.value.status == 422


# ---------------------------------------------------------------------------------------
# 4. round 3: the trusted proxy's own address (on a single-host hub, every student's)


def test_forged_forwarded_addresses_from_the_proxys_address_buy_no_new_share(tmp_path):
    """The red team's xff.py: --trusted-proxy 127.0.0.1 --max-per-client 2, mallory holds
    requests each naming a new made-up X-Forwarded-For: her token's cap of 2 holds
    whatever address she names (429), bob (another token, another made-up address) is
    answered 202 while she holds hers."""
    toks = _tokens(tmp_path, 2)
    srv = _server(tmp_path, "--max-per-client", "2", "--trusted-proxy", "127.0.0.1")
    try:
        held = [_in_flight(srv.port, toks["s00"], f"10.9.{i}.{i}".encode()) for i in range(2)]
        time.sleep(0.3)
        more = [_in_flight(srv.port, toks["s00"], f"10.8.{i}.{i}".encode()) for i in range(3)]
        for s in more:
            got = _reply(s, within=1.5)
            assert _status(got) == 429 and b"you already have 2 requests open" in got, got
        got = _post_raw(srv.port, toks["s01"], extra=b"X-Forwarded-For: 10.7.0.1\r\n")
        assert _status(got) == 202, got
        for s in held:
            assert _status(_reply(s, within=4)) == 408
    finally:
        srv.kill(signal.SIGTERM)
    _log_clean(srv)


def test_the_proxys_address_holds_at_most_three_quarters_of_the_connections(tmp_path):
    """--max-connections 100: 75 half-sent connections from the trusted proxy's address
    are let in, the 76th gets 429 as it opens (it was uncapped), and another address still
    gets in: a student posing as the proxy cannot hold every connection."""
    tok = _tokens(tmp_path, 1)["s00"]
    srv = _server(tmp_path, "--max-connections", "100", "--trusted-proxy", "127.0.0.1")
    half = b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-a: "
    try:
        held = [_open(srv.port, "127.0.0.1", half) for _ in range(75)]
        time.sleep(0.2)
        got = _reply(_open(srv.port, "127.0.0.1", half), within=1.5)
        assert _status(got) == 429, got
        assert b"the proxy's address already has 75 connections open" in got, got
        assert _status(_post_raw(srv.port, tok, "127.0.0.9")) == 202
        for s in held:
            s.close()
    finally:
        srv.kill(signal.SIGTERM)
    _log_clean(srv)


def _asgi(mw, scope: dict) -> tuple:
    """Start one request through ``mw`` (limits.PerClient); (task, its messages)."""
    import asyncio

    sent: list = []

    async def send(msg):
        sent.append(msg)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    return asyncio.ensure_future(mw(scope, receive, send)), sent


def test_per_client_keys_tokens_forwarded_addresses_and_the_anonymous_pool():
    """limits.PerClient in process, against an app that holds every request: a known
    token is capped whatever address it names; without a token, requests through the
    proxy share one pool (made-up addresses do not widen it) and each forwarded address
    its own cap; a direct peer is capped per address and its X-Forwarded-For is ignored;
    a Unix socket's peer is the proxy."""
    import asyncio

    from course.leaderboard.limits import PerClient

    async def main():
        gate, seen = asyncio.Event(), []

        async def app(scope, receive, send):
            seen.append(scope["client"][0])
            await gate.wait()

        ids = {b"good": "bob", b"mal": "mallory"}

        def identify(scope):
            auth = dict(scope["headers"]).get(b"authorization", b"")
            return ids.get(auth.removeprefix(b"Bearer "))

        mw = PerClient(app, 2, frozenset({"127.0.0.1"}), identify=identify, anonymous=3)

        def start(peer, xff=None, token=None):
            headers = [(b"x-forwarded-for", xff.encode())] if xff else []
            headers += [(b"authorization", b"Bearer " + token)] if token else []
            client = None if peer is None else (peer, 1)
            return _asgi(mw, {"type": "http", "client": client, "headers": headers})

        async def refused(*a, **k) -> str:
            task, sent = start(*a, **k)
            await asyncio.sleep(0)
            await asyncio.wait_for(task, 2)  # answered at once, never reaching the app
            assert sent[0]["status"] == 429, sent
            return json.loads(sent[1]["body"])["error"]

        held = [start("127.0.0.1", f"10.9.0.{i}", b"mal")[0] for i in range(2)]
        await asyncio.sleep(0)
        assert "you already have 2" in await refused("127.0.0.1", "10.9.9.9", b"mal")
        assert "you already have 2" in await refused("10.1.1.1", None, b"mal")  # directly too
        held += [start("127.0.0.1", f"10.5.0.{i}")[0] for i in range(3)]  # no token
        await asyncio.sleep(0)
        assert "without a token have 3" in await refused("127.0.0.1", "10.5.9.9")
        assert "without a token have 3" in await refused(None, "10.5.9.8")  # --uds: the proxy
        held.append(start("127.0.0.1", "10.9.9.9", b"good")[0])  # bob: his own share
        held += [start("10.2.2.2", "1.2.3.4")[0] for _ in range(2)]  # direct: XFF ignored
        await asyncio.sleep(0)
        assert "this address already has 2" in await refused("10.2.2.2", "5.6.7.8")
        assert seen.count("10.2.2.2") == 2 and "1.2.3.4" not in seen and "10.9.0.1" in seen
        gate.set()
        await asyncio.gather(*held)
        assert not mw.open  # every count given back
        start("127.0.0.1", "10.5.9.9")[0].cancel()

    asyncio.run(main())


def test_serve_on_a_unix_socket_only_its_group_reaches(tmp_path):
    """--uds PATH: the socket is mode 660 and answers HTTP with the proxy's X-Forwarded-For.
    limits.bind_unix refuses a path another service answers on and a file that is not a
    socket, and replaces a stale socket file (its service was killed)."""
    import os
    import stat
    import subprocess
    import sys

    from conftest import REPO

    from course.leaderboard.limits import BindError, bind_unix

    path = tmp_path / "lb.sock"
    cmd = [sys.executable, "-m", "course", "leaderboard", "serve", "--isolation", "none"]
    cmd += ["--db", str(tmp_path / "lb.db"), "--uds", str(path)]
    env = dict(os.environ, COURSE_LEADERBOARD_EXIT_WITH=str(os.getpid()))
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, start_new_session=True)
    try:
        for _ in range(300):
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(str(path))
                break
            except OSError:
                s.close()
                time.sleep(0.1)
        s.sendall(
            b"GET /api/health HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: 10.0.0.1\r\n"
            b"Connection: close\r\n\r\n"  # else it waits out the keep-alive (5 s)
        )
        assert _status(_reply(s, within=15)) == 200
        assert stat.S_IMODE(path.stat().st_mode) == 0o660
        with pytest.raises(BindError, match="another program is serving"):
            bind_unix(str(path))
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert path.exists()  # killed: its socket file is left, stale ...
    bind_unix(str(path)).close()  # ... and replaced
    (tmp_path / "file").write_text("x")
    with pytest.raises(BindError, match="a file that is not a socket"):
        bind_unix(str(tmp_path / "file"))
    assert (tmp_path / "file").read_text() == "x"
