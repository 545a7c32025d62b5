"""The class leaderboard as a real service: ``python -m course leaderboard serve`` on the
loopback interface, a real SQLite file in a temp folder, real submissions judged in the
simulator (compile gate, tests, the sandboxed worker), then load, restart, Dask and the
board page in Chromium.  Every server is stopped by the fixture that started it."""

import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from browser_helpers import free_port
from conftest import REPO

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("leaderboard"), pytest.mark.timeout(600)]
ADMIN = "instructor-secret-token-1"
GOOD = (
    "from numba import cuda\n\n@cuda.jit\ndef add_fast(n, x, y):\n"
    "    for k in range(cuda.grid(1), n, cuda.gridsize(1)):\n        y[k] = x[k] + y[k]\n"
)


def _roster(path: Path, n: int) -> Path:
    path.write_text("submission,id\n" + "".join(f"s{i:02d},{i}\n" for i in range(n)))
    return path


def _tokens(tmp: Path, n: int) -> dict:
    out = tmp / "tokens.csv"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "leaderboard",
            "tokens",
            "--db",
            str(tmp / "lb.db"),
            "--roster",
            str(_roster(tmp / "roster.csv", n)),
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    with open(out, newline="") as f:
        return {row["student"]: row["token"] for row in csv.DictReader(f)}


class Server:
    def __init__(self, tmp: Path, *extra, env=None):
        self.tmp, self.extra, self.env = tmp, extra, env or {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.start()

    def start(self):
        env = dict(
            os.environ,
            COURSE_LEADERBOARD_ADMIN_TOKEN=ADMIN,
            COURSE_LEADERBOARD_EXIT_WITH=str(os.getpid()),  # never outlives the tests
            PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO)]),
            **self.env,
        )
        self.log = open(self.tmp / f"serve-{time.time_ns()}.log", "w")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "course",
                "leaderboard",
                "serve",
                "--db",
                str(self.tmp / "lb.db"),
                "--port",
                str(self.port),
                *self.extra,
            ],
            cwd=REPO,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for _ in range(200):
            try:
                if call("GET", self.url + "/api/health")[0] == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError("the server did not start: " + Path(self.log.name).read_text())

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        self.proc.wait(10)
        self.log.close()


def call(method, url, token=None, body=None, raw=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def wait_done(url, token, sid, limit=120):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        code, d = call("GET", f"{url}/api/submissions/{sid}", token)
        if d["status"] in ("done", "rejected", "error"):
            return d
        time.sleep(0.2)
    raise AssertionError(f"submission {sid} not finished: {d}")


# ---------------------------------------------------------------------------------------
# the real judge (simulator): one server, a handful of submissions

FORGE = (
    GOOD
    + """
import course.exercises.tune as t
t.Tune.measure_on = lambda self, fn, case, args: {"used": 1, "moved": 1, "read_used": 1,
    "replays": 0, "atomics": 0, "ms": 1e-6, "mean_ms": 1e-6, "std_ms": 0.0, "runs": 30}
"""
)
HANG = (
    "from numba import cuda\n\n@cuda.jit\ndef add_fast(n, x, y):\n"
    "    i = cuda.grid(1)\n    while i < n:\n        y[i] = x[i] + y[i]\n"
)


def _solution_file(exercise: str, header: str) -> str:
    """The instructor notebook's solution of ``exercise`` as a file (### lines dropped)."""
    import inspect

    from course.grading.classroom.solutions import defined

    src = inspect.getsource(defined(exercise)[0].py_func)
    return header + "\n".join(l for l in src.splitlines() if not l.lstrip().startswith("###"))


DICT = GOOD.replace(
    "        y[k] = x[k] + y[k]\n", "        d = {'x': x[k]}\n        y[k] = d['x'] + y[k]\n"
)


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves modules
def real(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("leaderboard")
    tokens = _tokens(tmp, 3)
    srv = Server(tmp, "--case-time-limit", "8")  # 2x a busy CI's slowest case
    try:
        posts, results = _post_all(srv, tokens)
    except BaseException:
        srv.kill()
        raise
    yield {"srv": srv, "tokens": tokens, "results": results, "tmp": tmp, "ids": posts}
    srv.kill(signal.SIGTERM)


def _post_all(srv, tokens):
    posts = {}
    for name, src, board, fn in (
        ("good", GOOD, "tune_vector_add", "add_fast"),
        ("hang", HANG, "tune_vector_add", "add_fast"),
        ("dict", DICT, "tune_vector_add", "add_fast"),
        (
            "matmul",
            _solution_file("tune_matmul", "from numba import cuda, float32\nTILE = 16\n\n"),
            "tune_matmul",
            "matmul_fast",
        ),
    ):
        who = tokens["s02" if name == "matmul" else "s00"]  # 4 may wait per student
        code, d = call(
            "POST",
            srv.url + "/api/submissions",
            who,
            {"board": board, "source": src, "function": fn},
        )
        assert code == 202, d
        posts[name] = d["id"]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "submit",
            "histogram",
            "--course-kernel",
            "histogram_tuned",
            "--no-wait",
            "--server",
            srv.url,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, COURSE_LEADERBOARD_TOKEN=ADMIN),
    )
    assert r.returncode == 0, r.stderr
    posts["entry"] = int(r.stdout.split()[1])  # "submission N queued"
    return posts, {k: wait_done(srv.url, ADMIN, sid) for k, sid in posts.items()}


def test_a_correct_file_passes_its_tests_and_is_marked_not_timed(real):
    d = real["results"]["good"]
    assert d["status"] == "done" and d["passed"] is True, d
    assert d["mean_ms"] is None and d["rank"] is None and "not timed" in d["message"]
    assert len(d["cases"]) >= 6 and all(c["passed"] for c in d["cases"])
    assert d["source"] == GOOD and d["device"] == "simulator"


def test_blocks_of_256_threads_run_in_the_sandbox(real):
    """The simulator runs a thread per CUDA thread: the sandbox's task limit must allow a
    16 x 16 block (it once stopped at 256 tasks: "can't start new thread")."""
    d = real["results"]["matmul"]
    assert d["status"] == "done" and d["passed"] is True, d["message"]


def test_a_forged_timer_in_the_file_is_refused_before_anything_runs(real):
    """A file is read as data (leaderboard/fromfile.py): its import of the course is 422."""
    code, d = call(
        "POST",
        real["srv"].url + "/api/submissions",
        real["tokens"]["s01"],
        {"board": "tune_vector_add", "source": FORGE, "function": "add_fast"},
    )
    assert code == 422 and "imports course.exercises.tune" in d["error"], d


def test_a_hanging_kernel_is_rejected_at_the_time_limit(real):
    d = real["results"]["hang"]
    assert d["status"] == "rejected" and d["passed"] is False
    assert "time limit" in d["message"], d["message"]


def test_a_kernel_no_gpu_compiles_is_rejected_by_the_gate(real):
    d = real["results"]["dict"]
    assert d["status"] == "rejected" and "does not compile for a GPU" in d["message"], d


def test_course_submit_sends_the_unit_and_prints_progress(real, capsys):
    from numba import cuda

    import course

    @cuda.jit
    def add_fast(n, x, y):
        for k in range(cuda.grid(1), n, cuda.gridsize(1)):
            y[k] = x[k] + y[k]

    r = course.submit(
        "tune_vector_add", add_fast, server=real["srv"].url, token=real["tokens"]["s01"], poll_s=0.2
    )
    assert r.status == "done" and r.passed and "tests passed" in repr(r)
    assert "queued ->" in capsys.readouterr().out
    from course.leaderboard.client import SubmitError

    with pytest.raises(SubmitError, match="no board"):
        course.submit("no_such_board", add_fast, server=real["srv"].url, token="x")
    with pytest.raises(SubmitError, match="401"):
        course.submit("tune_vector_add", add_fast, server=real["srv"].url, token="wrong")


def test_bad_requests_get_a_4xx_and_one_sentence(real):
    url, tok = real["srv"].url + "/api/submissions", real["tokens"]["s02"]
    ok = {"board": "tune_vector_add", "source": GOOD, "function": "add_fast"}
    cases = [
        (None, ok, 401),
        ("nope", ok, 401),
        (tok, dict(ok, board="nope"), 404),
        (tok, dict(ok, source=GOOD + "#" * 70000), 413),
        (tok, dict(ok, source="def add_fast(:\n"), 422),
        (tok, dict(ok, function="other"), 422),
        (tok, dict(ok, source=GOOD.replace("@cuda.jit\n", "")), 422),
        (tok, dict(ok, unit={"name": "add_fast"}), 422),
        (tok, [1, 2], 400),
    ]
    for token, body, want in cases:
        code, d = call("POST", url, token, body)
        assert code == want and isinstance(d["error"], str) and d["error"], (body, code, d)
    code, d = call("POST", url, tok, raw=b"{not json")
    assert code == 400
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", real["srv"].port, timeout=10)
    conn.putrequest("POST", "/api/submissions")  # says 2 MB, sends nothing
    conn.putheader("Authorization", f"Bearer {tok}")
    conn.putheader("Content-Length", str(2 << 20))
    conn.endheaders()
    r = conn.getresponse()
    assert r.status == 413 and "limit" in json.loads(r.read())["error"]
    conn.close()


def test_the_instructor_enters_the_course_kernel_and_it_is_judged_like_a_submission(real):
    d = real["results"]["entry"]
    assert d["status"] == "done" and d["passed"] is True, d
    assert d["student"] == "course:histogram_tuned" and d["function"] == "histogram_tuned"
    assert len(d["cases"]) >= 6 and all(c["passed"] for c in d["cases"])
    assert "not timed" in d["message"] and d["source"].startswith("# the course's own kernel")


def test_only_the_instructor_enters_course_kernels_and_only_where_they_fit(real):
    url, tok = real["srv"].url + "/api/submissions", real["tokens"]["s01"]
    entry = {"board": "histogram", "course_kernel": "histogram_tuned"}
    for token, body, want, says in [
        (tok, entry, 403, "instructor"),
        (ADMIN, dict(entry, course_kernel="nope"), 422, "no course kernel"),
        (ADMIN, dict(entry, course_kernel=["x"]), 422, "no course kernel"),
        (ADMIN, dict(entry, board="flash_attention"), 422, "histogram board"),
        (ADMIN, dict(entry, board="nope"), 404, "no board"),
        (ADMIN, {"board": "flash_attention", "course_kernel": "flash_mma"}, 422, "GPU"),
        (
            tok,
            {
                "board": "histogram",
                "source": GOOD,
                "function": "add_fast",  # a unit
                "unit": {"course_kernel": "histogram_tuned"},
            },
            422,
            "unit",
        ),
    ]:  # posing
        code, d = call("POST", url, token, body)
        assert code == want and says in d["error"], (body, code, d)
    r = subprocess.run(
        [sys.executable, "-m", "course", "submit", "histogram"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "--course-kernel" in r.stderr


def test_students_see_only_their_own_sources(real):
    url, sid = real["srv"].url, real["ids"]["good"]
    assert call("GET", f"{url}/api/submissions/{sid}", real["tokens"]["s01"])[0] == 403
    assert call("GET", f"{url}/api/submissions/{sid}")[0] == 401
    code, d = call("GET", f"{url}/api/submissions/{sid}", ADMIN)
    assert code == 200 and d["source"] == GOOD
    assert call("GET", f"{url}/api/submissions/999999", ADMIN)[0] == 404


def test_boards_state_shape_signature_and_tests(real):
    code, boards = call("GET", real["srv"].url + "/api/boards")
    by = {b["board"]: b for b in boards}
    assert {"tune_vector_add", "tune_matmul", "histogram", "flash_attention"} <= set(by)
    assert by["histogram"]["timed_shape_gpu"].startswith("length x channels = 1,048,576 x 512")
    assert "4 x 64 x 8192 x 128" in by["flash_attention"]["timed_shape_gpu"]
    assert "Q float16" in by["flash_attention"]["dtypes"]
    assert by["flash_attention"]["references"][0]["ms"] == 13.617
    assert call("GET", real["srv"].url + "/api/boards/nope")[0] == 404


# ---------------------------------------------------------------------------------------
# load, restart: the queue and the store under a fast judge


def _fake_server(tmp, log, sleep="0.005", rate="4", *extra):
    return Server(
        tmp,
        "--judge",
        "leaderboard_fake:judge",
        "--rate",
        rate,
        "--isolation",
        "none",
        *extra,
        env={"FAKE_JUDGE_LOG": str(log), "FAKE_JUDGE_SLEEP": sleep},
    )


def test_200_concurrent_submissions_from_50_students(tmp_path):
    tokens, log = _tokens(tmp_path, 50), tmp_path / "measured.txt"
    srv = _fake_server(tmp_path, log, "0.005", "4", "--max-per-client", "256")  # 50 students
    #                                                      on one address, as behind a NAT
    try:
        jobs = [(s, k) for s in sorted(tokens) for k in range(4)]
        got, lock = {}, threading.Lock()

        def post(student, k):
            src = f"# {student} {k}\n" + GOOD
            code, d = call(
                "POST",
                srv.url + "/api/submissions",
                tokens[student],
                {"board": "tune_vector_add", "source": src, "function": "add_fast"},
            )
            with lock:
                got[(student, k)] = (code, d)

        def posts(student):  # one read in flight per student: each student's four in turn
            for k in range(4):
                post(student, k)

        threads = [threading.Thread(target=posts, args=(s,)) for s in sorted(tokens)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(got) == len(jobs) and all(code == 202 for code, _ in got.values()), [
            v for v in got.values() if v[0] != 202
        ][:3]
        code, d = call(
            "POST",
            srv.url + "/api/submissions",
            tokens["s00"],
            {"board": "tune_vector_add", "source": GOOD, "function": "add_fast"},
        )
        assert code == 429 and "too many" in d["error"]  # the rate limit holds
        ids = [d["id"] for _, d in got.values()]
        assert len(set(ids)) == 200
        for (student, _k), (_c, d) in got.items():
            r = wait_done(srv.url, tokens[student], d["id"], limit=120)
            assert r["status"] == "done" and r["rank"] >= 1
        measured = log.read_text().splitlines()
        assert len(measured) == 200 and len(set(measured)) == 200  # each measured once
        code, board = call("GET", srv.url + "/api/boards/tune_vector_add")
        assert [r["rank"] for r in board["rows"]] == list(range(1, 51))  # one row a student
        times = [r["mean_ms"] for r in board["rows"]]
        assert times == sorted(times)
    finally:
        srv.kill(signal.SIGTERM)


def test_a_killed_server_loses_no_queued_submission(tmp_path):
    tokens, log = _tokens(tmp_path, 6), tmp_path / "measured.txt"
    srv = _fake_server(tmp_path, log, sleep="0.25", rate="10")
    ids = []
    for i in range(12):
        s = f"s{i % 6:02d}"
        code, d = call(
            "POST",
            srv.url + "/api/submissions",
            tokens[s],
            {"board": "tune_vector_add", "source": f"# {i}\n" + GOOD, "function": "add_fast"},
        )
        assert code == 202, d
        ids.append((s, d["id"]))
    time.sleep(0.8)
    srv.kill()  # SIGKILL mid-queue
    left = (
        sqlite3.connect(tmp_path / "lb.db")
        .execute("SELECT COUNT(*) FROM submissions WHERE status != 'done'")
        .fetchone()[0]
    )
    assert left > 0
    srv.start()
    try:
        for s, sid in ids:
            assert wait_done(srv.url, tokens[s], sid, limit=60)["status"] == "done"
        assert len(set(log.read_text().splitlines())) == 12
    finally:
        srv.kill(signal.SIGTERM)


def test_dask_gpu_workers_drain_one_queue(tmp_path, monkeypatch):
    import leaderboard_fake
    from distributed import LocalCluster

    from course.leaderboard.queue import DaskQueue
    from course.leaderboard.store import Store

    monkeypatch.setenv("FAKE_JUDGE_LOG", str(tmp_path / "measured.txt"))
    monkeypatch.setenv("FAKE_JUDGE_SLEEP", "0.05")
    store = Store(tmp_path / "lb.db")
    store.issue_tokens(["a", "b"])
    ids = [
        store.add("ab"[i % 2], "tune_vector_add", "add_fast", f"# {i}\n" + GOOD, None)
        for i in range(10)
    ]
    with LocalCluster(
        n_workers=2,
        threads_per_worker=2,
        processes=False,
        resources={"GPU": 1},
        dashboard_address=None,
    ) as cluster:
        q = DaskQueue(
            store,
            cluster.scheduler_address,
            task=leaderboard_fake.task,
            poll_s=0.05,
            private=[tmp_path / "service"],
        )
        q.start()
        try:
            t0 = time.monotonic()
            while any(store.get(i)["status"] != "done" for i in ids):
                assert time.monotonic() - t0 < 60, store.counts()
                time.sleep(0.1)
        finally:
            q.stop()
    assert len((tmp_path / "measured.txt").read_text().splitlines()) == 10
    sent = f"private {[str(tmp_path / 'service')]}"  # every task had the service's folders
    assert all(sent in store.get(i)["message"] for i in ids), store.get(ids[0])["message"]
    assert [r["student"] for r in store.ranked("tune_vector_add")] and store.rank_of(
        store.get(ids[0])
    ) in (1, 2)


# ---------------------------------------------------------------------------------------
# tokens, export, ranking


def test_tokens_are_written_once_and_only_hashes_are_stored(tmp_path):
    tokens = _tokens(tmp_path, 3)
    db = (tmp_path / "lb.db").read_bytes()
    assert len(tokens) == 3 and not any(t.encode() in db for t in tokens.values())
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "leaderboard",
            "tokens",
            "--db",
            str(tmp_path / "lb.db"),
            "--roster",
            str(tmp_path / "roster.csv"),
            "--out",
            str(tmp_path / "tokens.csv"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert again.returncode == 2 and "written once" in again.stderr


def test_ranking_export_and_a_roster_that_drops_a_student(tmp_path):
    from course.leaderboard.store import Store

    store = Store(tmp_path / "lb.db")
    (ta, _), (tb, _) = [(t, s) for s, t in store.issue_tokens(["ann", "ben"])[0]]

    def done(student, ms):
        sid = store.add(student, "tune_matmul", "f", "src", None)
        store.claim(sid)
        store.finish(sid, "done", {"passed": True, "mean_ms": ms, "std_ms": 0.1})
        return sid

    done("ann", 3.0), done("ben", 2.0)
    a2 = done("ann", 1.5)
    rows = store.ranked("tune_matmul")
    assert [(r["student"], r["rank"]) for r in rows] == [("ann", 1), ("ben", 2)]
    assert store.rank_of(store.get(a2)) == 1
    assert [v for _, v in store.best_over_time("tune_matmul")] == [3.0, 2.0, 1.5]
    out = tmp_path / "all.csv"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "leaderboard",
            "export",
            "--db",
            str(tmp_path / "lb.db"),
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and len(list(csv.DictReader(open(out)))) == 3
    store.restrict_to({"ben"})
    assert store.student_for(ta) is None and store.student_for(tb) == "ben"


# ---------------------------------------------------------------------------------------
# the page, in Chromium


@pytest.mark.browser
def test_the_board_page_in_chromium(tmp_path):
    from test_browser import _browser_or_skip

    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    tokens, log = _tokens(tmp_path, 4), tmp_path / "measured.txt"
    srv = _fake_server(tmp_path, log)
    try:
        for i, s in enumerate(sorted(tokens)):
            code, d = call(
                "POST",
                srv.url + "/api/submissions",
                tokens[s],
                {"board": "tune_vector_add", "source": f"# {i}\n" + GOOD, "function": "add_fast"},
            )
            wait_done(srv.url, tokens[s], d["id"])
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium, headless=True, args=["--no-sandbox"]
            )
            page = browser.new_page()
            page.goto(srv.url + "/boards")
            page.click("text=tune_vector_add")
            assert page.locator("table tr").count() >= 5  # header + 4 students
            assert page.locator("svg path").count() == 1  # best time over the term
            page.goto(srv.url + "/signin")
            page.fill("input[name=token]", tokens["s02"])
            page.click("button[type=submit]")
            page.goto(srv.url + "/boards/tune_vector_add")
            assert "Your submissions" in page.content() and "s02" in page.content()
            shots = REPO / "assets" / "screenshots"
            if os.environ.get("COURSE_SCREENSHOTS"):
                page.screenshot(path=str(shots / "leaderboard-board.png"), full_page=True)
            browser.close()
    finally:
        srv.kill(signal.SIGTERM)


def test_a_test_server_stops_by_itself_when_its_parent_is_gone(tmp_path):
    """COURSE_LEADERBOARD_EXIT_WITH: a server started by a process that dies does not stay."""
    port = free_port()
    parent = subprocess.run(
        [
            sys.executable,
            "-c",
            f"""
import os, subprocess, sys, time
env = dict(os.environ, COURSE_LEADERBOARD_EXIT_WITH=str(os.getpid()))
p = subprocess.Popen([sys.executable, "-m", "course", "leaderboard", "serve", "--db",
                      {str(tmp_path / "lb.db")!r}, "--port", "{port}", "--isolation", "none"],
                     env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
print(p.pid, flush=True)
time.sleep(4)
""",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    pid = int(parent.stdout.split()[0])
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # a zombie (exited, not reaped) counts as gone
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return
        except OSError:
            return
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError("the server outlived its parent")


def test_a_submission_out_of_time_is_told_so_and_a_slow_board_gets_more(monkeypatch):
    """Past its deadline a submission is 'not judged: it ran past the time limit', not 'your
    kernel broke the measurer'; the attention seed board (a naive kernel takes ~20 s a
    launch at its shape on an H100) gives a submission 900 s instead of the default."""
    from course.exercises import get
    from course.grading.classroom.solutions import defined
    from course.grading.judging import session
    from course.grading.judging.settings import GradeSettings
    from course.grading.source.unit import extract
    from course.leaderboard import runner

    spec = get("tune_vector_add")
    unit = extract(defined("tune_vector_add")[0], spec.launch_names)
    error, cases = session.judge_unit(
        spec, unit, GradeSettings(seed=1, mode="sim", timeout=0.2, memory_mb=16384)
    )
    assert "not judged" in error and "ran past the time limit" in error, error  # the gate's
    assert cases == [] and "broke" not in error  # compile counts in the deadline too

    seen = {}

    def fake(spec, unit, settings, **k):
        seen[spec.name] = settings.timeout
        return "stop here", []

    monkeypatch.setattr(session, "judge_unit", fake)
    for board in ("flash_attention", "tune_vector_add"):
        runner.judge_submission(board, {"unit": unit, "source": "", "function": "f"})
    assert seen == {"flash_attention": 900.0, "tune_vector_add": runner.TIMEOUT_S}
    # and a sandbox big enough for its 2.7 GB of buffers (they cross the pipe both ways)
    from course.grading.judging.measurer_calls import sandbox_mb

    assert sandbox_mb(["flash_attention", None]) == 32768
    assert sandbox_mb(["tune_vector_add"]) is None


def test_bench_leaderboard_rehearses_a_class_gpu_box(tmp_path):
    """``python -m course bench leaderboard``: serves, enters the course's kernels, sends one
    unit alone then several at once; in the simulator nothing is timed, but everything comes
    back, and the database it keeps has no source and no token hash."""
    r = subprocess.run(
        [sys.executable, "-m", "course", "bench", "leaderboard", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads(next(tmp_path.glob("leaderboard-*.json")).read_text())
    entry = report["data"]["entries"]["histogram_tuned"]
    assert entry["status"] == "done" and entry["passed"] is True, entry
    assert "flash_mma" not in report["data"]["entries"]
    assert any("flash_mma on flash_attention: not entered" in n for n in report["notes"])
    q = report["data"]["queue"]
    assert q["queued"] == 3 and q["done"] == 3 and q["alone"]["status"] == "done"
    db = sqlite3.connect(next(tmp_path.glob("leaderboard-*.db")))
    rows = db.execute("SELECT student, source, unit FROM submissions").fetchall()
    assert len(rows) == 5 and db.execute("SELECT COUNT(*) FROM tokens").fetchone()[0] == 0
    assert all(
        src == "" and unit is None for who, src, unit in rows if who != "course:histogram_tuned"
    )


@pytest.mark.parametrize(
    "db, board, shows, shot",
    [
        ("leaderboard/h100-2026-11-25-run1.db", "histogram", ["2.566", "0.315"], "histogram"),
        (
            "leaderboard/h100-2026-11-25-run2.db",
            "flash_attention",
            ["22,140", "13.62"],
            "flash_attention",
        ),
        (
            "benchmarks/leaderboard-nvidia-h100-80gb-hbm3-2026-11-25.db",
            "histogram",
            ["course:histogram_tuned", "0.2382", "0.315", "launched their own way"],
            "histogram-course",
        ),
        (
            "benchmarks/leaderboard-nvidia-h100-80gb-hbm3-2026-11-25.db",
            "flash_attention",
            ["course:flash_mma", "36.97", "13.62"],
            "flash_attention-course",
        ),
    ],
)
def test_h100_boards_render_in_chromium(tmp_path, db, board, shows, shot):
    """The boards of real serve runs on an H100 (the databases as the service wrote them, the
    submitted sources and token hashes removed: two runs in assets/leaderboard, and the one
    ``python -m course bench leaderboard`` keeps beside its report) as a browser shows them;
    with $COURSE_SCREENSHOTS set, the README's screenshots are made here."""
    import shutil

    from test_browser import _browser_or_skip

    chromium = _browser_or_skip()
    from playwright.sync_api import sync_playwright

    shutil.copy(REPO / "assets" / db, tmp_path / "lb.db")
    srv = Server(tmp_path)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium, headless=True, args=["--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1100, "height": 800})
            page.goto(f"{srv.url}/boards/{board}")
            text = page.inner_text("body")
            assert "NVIDIA H100 80GB HBM3" in text, text[:2000]
            for s in shows:
                assert s in text, (s, text[:2000])
            if os.environ.get("COURSE_SCREENSHOTS"):
                page.screenshot(
                    path=str(
                        Path(os.environ["COURSE_SCREENSHOTS"]) / f"leaderboard-h100-{shot}.png"
                    ),
                    full_page=True,
                )
            browser.close()
    finally:
        srv.kill(signal.SIGTERM)
