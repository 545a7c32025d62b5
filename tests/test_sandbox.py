"""A grader no cell can reach: attacks on the sandbox, the batch and the trusted measurement.

One `python -m course grade` run (the real sandbox, the real measurer; simulator) of a
class in which some students attack: a forged tune figure, kernels the GPU compiler
rejects, a kernel that skips work at the measured size, /proc/<grader>/root, killing the
other workers, a process left running, litter in /tmp, a forged ceiling cache, and a
submission tree with symlinks, a FIFO, name collisions and a 12 MB cell.  Innocent
students beside them must keep their rows; nothing may stay running or on disk.

Then each class of reach, as a cell in a real sandboxed worker (``Child`` and
``isolate.make`` directly, no grading run): files outside the tree (the checkout's root, an
output folder made after the sandbox, /tmp, home), the grader's environment, Unix sockets,
the GPU measuring lock, writing outside the scratch, and a process left behind.
"""

import copy
import csv
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO

from course.grading.classroom import notebook as nbk

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("grade-sandbox")]  # one run, one worker

BASE = REPO / "tests" / "fixtures" / "submissions" / "correct" / "01_vector_add.ipynb"
ADD_PASS = "@cuda.jit\ndef add(n, x, y):\n    pass\n"
SLOW_TUNE = (
    "@cuda.jit\ndef add_fast(n, x, y):\n    threads = cuda.gridsize(1)\n"
    "    chunk = (n + threads - 1) // threads\n    start = cuda.grid(1) * chunk\n"
    "    for k in range(start, min(start + chunk, n)):\n        y[k] = x[k] + y[k]\n"
)
GOOD_TUNE = (
    "@cuda.jit\ndef add_fast(n, x, y):\n"
    "    for k in range(cuda.grid(1), n, cuda.gridsize(1)):\n        y[k] = x[k] + y[k]\n"
)
MARK = "course-sandbox-attack-7f3a"


def _grid_stride(body: str) -> str:
    return (
        "@cuda.jit\ndef add(n, x, y):\n    for i in range(cuda.grid(1), n, "
        f"cuda.gridsize(1)):\n{body}"
    )


ATTACKS = {
    # the tune cell patches the measurement of its own process (issue: forged tune figure)
    "forge_tune": {
        "tune_vector_add": SLOW_TUNE
        + """
import course.exercises.tune as t
t.Tune.measure_on = lambda self, fn, case, args: {"used": 1, "moved": 1, "read_used": 1,
    "replays": 0, "atomics": 0, "ms": 1e-6, "median_ms": 1e-6, "max_ms": 1e-6}
t.Tune.judge_figures = lambda self, *a, **k: __import__("course.grading.judging.report",
    fromlist=["x"]).CaseResult("tune target", "")
"""
    },
    # bodies the simulator runs and a GPU compiler rejects
    "dict_body": {
        "vector_add": _grid_stride(
            "        d = {'x': x[i], 'y': y[i]}\n        y[i] = d['x'] + d['y']\n"
        )
    },
    "list_body": {
        "vector_add": _grid_stride("        l = [x[i], y[i]]\n        y[i] = l[0] + l[1]\n")
    },
    "slice_body": {"vector_add": _grid_stride("        y[i:i+1] = x[i:i+1] + y[i:i+1]\n")},
    # correct at every case's size, idle at the measured one (n = 4096 in the simulator)
    "skip_measured": {
        "tune_vector_add": GOOD_TUNE.replace(
            "    for k", "    if n == 4096:\n        return\n    for k"
        )
    },
    # /proc/<pid>/root of every process it can see: append to the hidden cases, rewrite
    # other students' notebooks (the fixture writes their real paths in)
    "proc_root": {
        "vector_add": ADD_PASS
        + f"""
import os, glob
hits = []
for root in glob.glob('/proc/[0-9]*/root'):
    for target in glob.glob(root + 'ATTACK_HIDDEN' + '/*.py') + \\
            glob.glob(root + 'ATTACK_SUBS' + '/*/*.ipynb'):
        try:
            with open(target, 'a') as f:
                f.write('# {MARK}')
            hits.append(target)
        except OSError:
            pass
"""
    },
    # a process in its own session that kills every process it can see, then outlives the run
    "killer": {
        "vector_add": ADD_PASS
        + f"""
import subprocess, sys
subprocess.Popen([sys.executable, '-c', 'import os, signal, time\\n'
    'time.sleep(1.5)\\n'
    'for p in os.listdir("/proc"):\\n'
    '    if p.isdigit() and int(p) != os.getpid():\\n'
    '        try: os.kill(int(p), signal.SIGKILL)\\n'
    '        except OSError: pass\\n'
    'time.sleep(600)  # {MARK}'], start_new_session=True)
"""
    },
    # litter /tmp and the home folder's ceiling cache; fill the disk
    "litter": {
        "vector_add": ADD_PASS
        + f"""
import os, pathlib, pwd
home = pathlib.Path(pwd.getpwuid(os.getuid()).pw_dir)
for path, text in ((pathlib.Path('/tmp/{MARK}'), 'x'),
                   (home / '.cache' / 'course' / 'ceilings.json', '{MARK}')):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError:
        pass
try:
    with open('big', 'wb') as f:
        for _ in range(1024):
            f.write(b'0' * (1 << 20))
except OSError:
    pass
"""
    },
    # a correct kernel with a 12 MB comment (the notebook limit is 16 MB)
    "huge_cell": {
        "vector_add": "# " + "x" * (12 << 20) + "\n" + _grid_stride("        y[i] = x[i] + y[i]\n")
    },
}
INNOCENT = ["victim1", "victim2", "victim3"]
HARMFUL = ("killer", "litter", "proc_root")  # run only inside a sandbox


def _notebook(sources: dict, keep=()) -> dict:
    """Lesson 01 with ``sources`` in their exercise cells; the other exercise cells are
    dropped unless named in ``keep`` (they would only make the run longer)."""
    nb = json.loads(BASE.read_text())
    cells = []
    for raw, cell in zip(nb["cells"], nbk.cells(copy.deepcopy(nb))):
        tag = cell.exercise_tag
        if tag in sources:
            raw["source"] = sources[tag].splitlines(keepends=True)
        if tag is None or tag in sources or tag in keep:
            cells.append(raw)
    nb["cells"] = cells
    return nb


CORRECT = ("vector_add", "matrix_add")  # what the innocent students' rows are read for


def _pids_with(marker: str) -> list[str]:
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and marker in Path(f"/proc/{p}/cmdline").read_text(errors="ignore"):
                out.append(p)
        except OSError:
            pass
    return out


@pytest.fixture(scope="session")  # once per worker, even if xdist interleaves modules
def run(tmp_path_factory):
    from course.grading.wall import isolate

    root = tmp_path_factory.mktemp("sandbox")
    subs, hidden = root / "submissions", root / "hidden"
    shutil.copytree(REPO / "instructor" / "hidden", hidden)
    (root / "probe").mkdir()
    attacks = ATTACKS
    if isolate.make([], root / "probe")[0] is None:
        # no sandbox on this machine: an attack on the machine itself would really hit it
        # (the killer would end this test run); its tests skip through ``sandboxed``
        attacks = {k: v for k, v in ATTACKS.items() if k not in HARMFUL}
    for student, sources in attacks.items():
        sources = {
            k: v.replace("ATTACK_HIDDEN", str(hidden)).replace("ATTACK_SUBS", str(subs))
            for k, v in sources.items()
        }
        (subs / student).mkdir(parents=True)
        (subs / student / "01_vector_add.ipynb").write_text(json.dumps(_notebook(sources)))
    for v in INNOCENT:
        (subs / v).mkdir(parents=True)
        (subs / v / "01_vector_add.ipynb").write_text(json.dumps(_notebook({}, CORRECT)))
    # the submission tree's own attacks
    tree = {
        "link_to_key": lambda p: p.symlink_to(REPO / "notebooks" / "01_vector_add.ipynb"),
        "link_to_zero": lambda p: p.symlink_to("/dev/zero"),
        "fifo": lambda p: os.mkfifo(p),
    }
    for student, make in tree.items():
        (subs / student).mkdir()
        make(subs / student / "01_vector_add.ipynb")
    for student in ("alice", "bob"):  # a browser's re-download name in both folders
        (subs / student).mkdir()
        (subs / student / "01_vector_add (1).ipynb").write_text(json.dumps(_notebook({}, CORRECT)))
    (subs / "mallory").mkdir()  # names another student in its file name
    (subs / "mallory" / "victim1_01_vector_add.ipynb").write_text(
        json.dumps(_notebook({"vector_add": ADD_PASS}))
    )
    for student in ("carol", "carol."):
        (subs / student).mkdir()
        (subs / student / "01_vector_add.ipynb").write_text(json.dumps(_notebook({})))
    before = {
        p: p.read_bytes() for p in subs.rglob("*.ipynb") if p.is_file() and not p.is_symlink()
    }
    hidden_before = {p.name: p.read_text() for p in hidden.glob("*.py")}
    out, fb = root / "out" / "grades.csv", root / "feedback"
    tmp = root / "tmp"  # the run's own temp folder: what is left there is its own
    tmp.mkdir()
    env = dict(os.environ, COURSE_HIDDEN_DIR=str(hidden), TMPDIR=str(tmp))
    t0 = time.perf_counter()
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "course",
            "grade",
            str(subs),
            "--out",
            str(out),
            "--feedback",
            str(fb),
            "--timeout",
            "90",
            "--case-time-limit",
            "10",
            "--jobs",
            "2",
            "--seed",
            "4242",
        ],
        cwd=REPO,
        env=env,
        text=True,
        capture_output=True,
        timeout=900,
    )
    took = time.perf_counter() - t0
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    time.sleep(2)  # a process that tried to outlive the run has had its chance
    with open(out, newline="") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    return {
        "rows": rows,
        "stdout": r.stdout,
        "feedback": sorted(p.name for p in fb.iterdir()),
        "subs": subs,
        "before": before,
        "tmp": tmp,
        "hidden": hidden,
        "hidden_before": hidden_before,
        "took": took,
    }


def sandboxed(run):
    if "worker sandbox: NONE" in run["stdout"]:
        pytest.skip("this system allows no sandbox: " + run["stdout"].splitlines()[0])


def test_a_forged_tune_figure_earns_nothing(run):
    row = run["rows"]["forge_tune"]
    assert row["tune_vector_add"] == "0", row
    assert "measured 0.125, target >= 0.95" in row["reasons"], row["reasons"]


@pytest.mark.parametrize("student", ["dict_body", "list_body", "slice_body"])
def test_kernels_a_gpu_rejects_fail_at_the_gate(run, student):
    row = run["rows"][student]
    assert row["vector_add"] == "0", row
    assert "does not compile for a GPU" in row["reasons"], row["reasons"]


def test_skipping_work_at_the_measured_size_gets_no_figure(run):
    row = run["rows"]["skip_measured"]
    assert row["tune_vector_add"] == "0", row
    assert "no figure: " in row["reasons"], row["reasons"]


def test_proc_root_reaches_neither_hidden_cases_nor_other_notebooks(run):
    sandboxed(run)
    assert run["rows"]["proc_root"]["vector_add"] == "0"
    for p, data in run["before"].items():
        assert p.read_bytes() == data, f"{p} was changed during grading"
    for name, text in run["hidden_before"].items():
        assert (run["hidden"] / name).read_text() == text, f"hidden {name} was changed"


def test_the_killer_hurts_nobody_and_does_not_outlive_the_run(run):
    sandboxed(run)
    for v in INNOCENT:
        row = run["rows"][v]
        assert (
            row["status"] == "graded" and row["vector_add"] == "1" and row["matrix_add"] == "1"
        ), row
    assert not _pids_with(MARK), "a student's process outlived the grading run"


def test_nothing_is_left_on_disk(run):
    sandboxed(run)
    assert not Path(f"/tmp/{MARK}").exists()
    cache = Path.home() / ".cache" / "course" / "ceilings.json"
    assert not cache.exists() or MARK not in cache.read_text()
    assert [p.name for p in run["tmp"].iterdir()] == []  # the GPU lock lives elsewhere


def test_a_huge_cell_is_named_not_crashed(run):
    row = run["rows"]["huge_cell"]
    assert row["vector_add"] == "0" and "cell too large (12.0 MB; limit 1 MB)" in row["reasons"], (
        row
    )


@pytest.mark.parametrize(
    "student, why",
    [
        ("link_to_key", "is a link, not a file"),
        ("link_to_zero", "is a link, not a file"),
        ("fifo", "not a regular file"),
    ],
)
def test_links_and_pipes_are_rows_not_points(run, student, why):
    row = run["rows"][student]
    assert row["total"] == "0" and row["status"] == "rejected" and why in row["reasons"], row


def test_rows_are_keyed_by_the_students_folder(run):
    rows = run["rows"]
    assert rows["alice"]["vector_add"] == "1" and rows["bob"]["vector_add"] == "1"
    assert rows["mallory"]["vector_add"] == "0"
    assert rows["victim1"]["vector_add"] == "1", "mallory's file replaced victim1's score"
    assert {"carol", "carol."} <= set(rows)
    assert {"carol.md", "carol-2.md"} <= set(run["feedback"])
    assert "belongs to another student" in run["stdout"]


def test_every_submission_has_a_row(run):
    expected = (
        set(ATTACKS)
        | set(INNOCENT)
        | {"link_to_key", "link_to_zero", "fifo", "alice", "bob", "mallory", "carol", "carol."}
    )
    assert set(run["rows"]) == expected


# ---------------------------------------------------------------------------------------
# each class of reach, as a cell in a real sandboxed worker (seconds, not a grading run)

TAG = f"course-sandbox-reach-{os.getpid()}"
PLANTED_ENV = {
    "AWS_SECRET_ACCESS_KEY": "aws-" + TAG,
    "JUPYTERHUB_API_TOKEN": "hub-" + TAG,
    "COURSE_LEADERBOARD_ADMIN_TOKEN": "admin-" + TAG,
}


def _listen(path: Path):
    import socket

    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.listen(8)
    return s


def _connects(path: Path) -> bool:
    import socket

    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
            return True
        except OSError:
            return False


class Cells:
    """A sandboxed worker (the grader's Child) that runs cells and hands back `result`."""

    def __init__(self, isolation, run_dir: Path):
        import tempfile

        from course.grading.wall.child import Child

        tmp = Path(tempfile.mkdtemp(dir=run_dir)) / "worker"
        self.child = Child(
            "course.grading.wall.worker", tmp, time.monotonic() + 120, 4096, 120, isolation
        )
        self.child.greeted()
        self.step = 0

    def __call__(self, source: str):
        self.step += 1
        reply, _ = self.child.ask(
            {"op": "run", "step": self.step, "label": "cell", "source": source}, "ran", self.step
        )
        assert reply["error"] is None, reply["error"]
        reply, _ = self.child.ask(
            {"op": "value", "step": self.step, "name": "result"}, "value", self.step
        )
        return reply.get("value")


@pytest.fixture(scope="module")
def reach(tmp_path_factory):
    """Secrets, sockets and a lock where the instructor might keep them; a sandbox made
    (hiding a folder inside data/ and two output folders that do not exist yet); then a
    worker started in it with cloud and service tokens in the grader's environment."""
    from course.grading.wall import isolate
    from course.platform import gpu_lock

    root = tmp_path_factory.mktemp("reach")  # in /tmp
    later = [REPO / f".{TAG}-out", root / "out-later"]
    inside = REPO / "data" / f".{TAG}"  # inside a folder the sandbox mounts
    secrets = {
        "repo root": REPO / f".{TAG}-secret",
        "tmp": root / "secret",
        "home": Path.home() / f".{TAG}-secret",
        "covered in data": inside / "secret",
        **{f"output made later {i}": d / "grades.csv" for i, d in enumerate(later)},
    }
    inside.mkdir()
    run_dir = root / "run"
    run_dir.mkdir()
    socks, saved = [], {k: os.environ.get(k) for k in PLANTED_ENV}
    try:
        iso, said = isolate.make([inside, *later], run_dir)
        if iso is None:
            pytest.skip(said)
        for d in later:  # the outputs appear after the sandbox
            d.mkdir()
        for p in secrets.values():
            p.write_text(TAG)
        paths = {"repo root": REPO / f".{TAG}.sock", "tmp": root / "s.sock"}
        socks = [_listen(p) for p in paths.values()]
        with gpu_lock.device_lock():
            lock = gpu_lock.lock_path()
        os.environ.update(PLANTED_ENV)
        cells = Cells(iso, run_dir)
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        yield {
            "cells": cells,
            "secrets": secrets,
            "sockets": paths,
            "lock": lock,
            "iso": iso,
            "said": said,
        }
        cells.child.stop()
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        for s in socks:
            s.close()
        for p in [*secrets.values(), REPO / f".{TAG}.sock"]:
            p.unlink(missing_ok=True)
        for d in [inside, *later]:
            shutil.rmtree(d, ignore_errors=True)


@pytest.mark.timeout(120)
def test_files_outside_the_tree_are_not_there(reach):
    secrets = reach["secrets"]
    assert all(p.read_text() == TAG for p in secrets.values())  # the grader reads them
    got = reach["cells"](f"""
import os
def read(p):
    try:
        return open(p).read()
    except OSError as e:
        return type(e).__name__
result = {{k: read(p) for k, p in { ({k: str(p) for k, p in secrets.items()})!r}.items()}}
result['public'] = sorted(os.listdir({str(REPO / "data")!r}))
result['root'] = sorted(os.listdir({str(REPO)!r}))
""")
    public = got.pop("public")
    assert "faces" in public and f".{TAG}" in public  # data/ is there, its cover too
    assert not ({"instructor", "tests", "README.md"} & set(got.pop("root")))
    assert got == {k: "FileNotFoundError" for k in secrets}, got


@pytest.mark.timeout(120)
def test_the_graders_environment_does_not_get_in(reach):
    env = reach["cells"]("import os\nresult = dict(os.environ)")
    assert not set(PLANTED_ENV) & set(env), env
    assert not any(TAG in v for v in env.values())
    from course.grading.wall.child import PASSED, PASSED_PREFIXES, child_env

    allowed = set(child_env(Path("/x"))) | set(PASSED)
    assert all(k in allowed or k.startswith(PASSED_PREFIXES) or k == "LC_CTYPE" for k in env), env


def test_the_environment_is_an_allowlist_even_without_a_sandbox(monkeypatch, tmp_path):
    from course.grading.wall.child import child_env

    for k, v in PLANTED_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("COURSE_SIZE", "sim")
    monkeypatch.setenv("NUMBA_CUDA_NVRTC_EXTRA_SEARCH_PATHS", "/opt/nvrtc")
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    env = child_env(tmp_path, {"NUMBA_ENABLE_CUDASIM": "0"})
    assert not set(PLANTED_ENV) & set(env)
    assert env["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"  # one work queue a context, whatever set
    assert env["COURSE_SIZE"] == "sim" and env["NUMBA_ENABLE_CUDASIM"] == "0"
    assert env["NUMBA_CUDA_NVRTC_EXTRA_SEARCH_PATHS"] == "/opt/nvrtc"
    assert env["HOME"] == env["TMPDIR"] == str(tmp_path)


@pytest.mark.timeout(120)
def test_unix_sockets_outside_do_not_connect(reach):
    paths = reach["sockets"]
    assert all(_connects(p) for p in paths.values())  # they listen, for the grader
    got = reach["cells"](f"""
import socket
def connect(p):
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(p)
            return 'connected'
        except OSError as e:
            return type(e).__name__
result = {{k: connect(p) for k, p in { ({k: str(p) for k, p in paths.items()})!r}.items()}}
""")
    assert got == {k: "FileNotFoundError" for k in paths}, got


@pytest.mark.timeout(120)
def test_the_gpu_measuring_lock_is_out_of_reach(reach):
    lock = reach["lock"]
    assert lock.exists() and stat.S_IMODE(lock.parent.stat().st_mode) == 0o700
    got = reach["cells"](
        f"import os\nresult = [os.path.lexists({str(lock)!r}), "
        f"os.path.lexists({str(lock.parent)!r})]"
    )
    assert got == [False, False]


@pytest.mark.timeout(120)
def test_nothing_but_the_scratch_is_writable(reach):
    targets = [
        REPO / "course" / TAG,
        REPO / "data" / TAG,
        REPO / TAG,
        Path(sys.prefix) / TAG,
        Path(sys.base_prefix) / TAG,
        Path("/") / TAG,
        Path("/etc") / TAG,
        Path("/usr") / TAG,
        Path("/dev") / TAG,
    ]
    got = reach["cells"](f"""
import os
def write(p):
    try:
        with open(p, 'w') as f:
            f.write('x')
        return 'written'
    except OSError as e:
        return type(e).__name__
result = {{p: write(p) for p in {[str(t) for t in targets]!r}}}
result['scratch'] = [write(os.path.join(d, {TAG!r})) for d in
                     (os.environ['TMPDIR'], os.environ['HOME'], '/tmp', '/dev/shm')]
ro = []
for line in open('/proc/self/mountinfo'):
    f = line.split()
    if 'ro' not in f[5].split(',') and f[4] not in ('/tmp', '/dev/shm', '/proc'):
        ro.append(f[4])
result['writable mounts'] = ro
swappiness = open('/proc/sys/vm/swappiness').read()   # the host's kernel setting, unchanged
try:
    with open('/proc/sys/vm/swappiness', 'w') as f:
        f.write(swappiness)
    result['sysctl'] = 'written'
except OSError as e:
    result['sysctl'] = type(e).__name__
""")
    assert got.pop("scratch") == ["written"] * 4
    assert got.pop("writable mounts") == []
    assert got.pop("sysctl") != "written"  # read-only, though the sandbox may be root
    # inside, /tmp is the sandbox's own scratch tmpfs: a checkout under /tmp is covered by it
    assert all(v != "written" for t, v in got.items() if not t.startswith("/tmp/")), got
    assert not any(t.exists() for t in targets)  # nor anything on the host's disk
    assert not (reach["iso"].run_dir / "scratch" / TAG).exists()


@pytest.mark.timeout(120)
def gpu_like(monkeypatch):
    """Sandboxes that may start processes, as a GPU's do (a simulator's may not:
    ``tree.SPAWN``): what they start must still end with them."""
    from course.grading.wall import isolate

    plan = isolate.Isolation.tree_plan
    monkeypatch.setattr(
        isolate.Isolation,
        "tree_plan",
        lambda self, env=None: {**plan(self, env), "processes": True},
    )


def test_no_process_outlives_its_sandbox(reach, monkeypatch):
    from course.grading.wall import isolate

    gpu_like(monkeypatch)
    marker = f"{TAG}-left-behind"
    iso, _ = isolate.make([], reach["iso"].run_dir.parent / "run")
    cells = Cells(iso, reach["iso"].run_dir)
    try:
        cells(f"""
import subprocess, sys
subprocess.Popen([sys.executable, '-c', 'import os, time\\nif os.fork() == 0:\\n'
                  '    os.setsid()\\n    time.sleep(600)\\ntime.sleep(600)  # {marker}'],
                 start_new_session=True)
import time
time.sleep(0.5)
result = 1
""")
        assert len(_pids_with(marker)) == 2  # running, seen from outside
    finally:
        cells.child.stop()
    t0 = time.monotonic()
    while _pids_with(marker) and time.monotonic() - t0 < 10:
        time.sleep(0.1)
    assert not _pids_with(marker), "a process outlived its sandbox"


def test_the_tree_binds_no_home_root_or_checkout(tmp_path):
    from course.grading.wall import isolate
    from course.platform import resources

    hide = [REPO / "data" / "faces", tmp_path]  # inside a mounted folder / outside all
    ops = isolate.plan(hide, tmp_path / "run")
    binds = [p for kind, p, _ in ops if kind == "bind"]
    for p in binds:
        for kept in (Path("/"), Path.home().resolve(), REPO, tmp_path):
            assert p != kept and not isolate._inside(kept, p), (p, kept)
    assert resources.PACKAGE in binds and Path(sys.base_prefix).resolve() in binds
    assert [p for kind, p, _ in ops if kind == "cover"] == [(REPO / "data" / "faces").resolve()]
    with pytest.raises(isolate.PrivateBound, match="every sandbox reads that folder"):
        isolate.plan([REPO / "data"], tmp_path / "run")  # a folder it binds: refused
    assert not any(str(p).startswith(("/home", "/run", "/var")) for p in binds)
    assert not any(
        p == Path("/etc")
        or (isolate._inside(p, Path("/etc")) and p.name in ("shadow", "passwd", "ssh"))
        for p in binds
    )


def test_the_lock_waits_until_its_deadline_and_no_longer(monkeypatch, tmp_path):
    import fcntl

    from course.platform import gpu_lock

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    path = gpu_lock.lock_path()
    assert path.parent == tmp_path / "course-locks"
    with gpu_lock.device_lock():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    fd = os.open(path, os.O_RDWR)  # another measurement holds it
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        t0 = time.monotonic()
        with pytest.raises(gpu_lock.LockTimeout, match="the GPU stayed busy"):
            with gpu_lock.device_lock(deadline=t0 + 0.3):
                pytest.fail("took a held lock")
        assert 0.3 <= time.monotonic() - t0 < 2
    finally:
        os.close(fd)
    with gpu_lock.device_lock(deadline=time.monotonic() + 0.3):  # free again: taken
        pass
    os.chmod(path.parent, 0o777)  # a folder others may write: closed
    gpu_lock.lock_path()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
