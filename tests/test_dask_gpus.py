"""``grade --executor dask`` on a machine of several GPUs (``dask_workers.py``): each worker
on one GPU and on that GPU's share of the cores, every worker made ready before the first
submission, and ``bench grading --gpus``'s comparison of the rates."""

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("distributed")

from course.grading.classroom import dask_workers, executors  # noqa: E402


def test_workers_take_turns_over_the_gpus_each_on_its_share_of_the_cores():
    w = dask_workers.layout(5, 2, ["0", "1"], list(range(8)))
    assert [x["device"] for x in w] == ["0", "1", "0", "1", "0"]
    assert w[0]["cores"] == [0, 1, 2, 3] and w[1]["cores"] == [4, 5, 6, 7]
    assert w[4]["cores"] == w[0]["cores"]


def test_one_gpu_of_two_gets_half_the_machine_not_all_of_it():
    w = dask_workers.layout(3, 1, ["0", "1"], list(range(8)))
    assert [x["device"] for x in w] == ["0", "0", "0"]
    assert all(x["cores"] == [0, 1, 2, 3] for x in w)


def test_named_devices_more_gpus_than_there_are_and_the_simulator():
    assert [x["device"] for x in dask_workers.layout(2, 2, ["2", "3"], [0, 1])] == ["2", "3"]
    assert [x["device"] for x in dask_workers.layout(3, 5, ["0", "1"], [0, 1])] == ["0", "1", "0"]
    assert dask_workers.layout(2, 0, [], [0, 1]) == [{"device": None, "cores": [0, 1]}] * 2
    # an odd number of cores: no core left out, the shares differ by one at most
    shares = [w["cores"] for w in dask_workers.layout(2, 2, ["0", "1"], list(range(15)))]
    assert sorted(shares[0] + shares[1]) == list(range(15)) and len(shares[1]) == 8
    # fewer cores than GPUs: a GPU without a share of its own runs on every core
    assert dask_workers.layout(2, 2, ["0", "1"], [0]) == [
        {"device": "0", "cores": [0]},
        {"device": "1", "cores": [0]},
    ]


def test_the_gpus_are_the_ones_named_and_never_more_than_the_driver_sees(monkeypatch):
    from course.platform import runtime

    monkeypatch.setattr(runtime, "MODE", "gpu")
    monkeypatch.setattr(runtime, "gpu_count", lambda: 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aa, 3 ,7")
    assert dask_workers.devices() == ["GPU-aa", "3"]  # the driver sees 2: the 7 is not one
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert dask_workers.devices() == ["0", "1"]
    monkeypatch.setattr(runtime, "MODE", "sim")
    assert dask_workers.devices() == []


def test_pin_reads_only_the_cores_the_cluster_named(monkeypatch):
    monkeypatch.setenv(dask_workers.CPUS_ENV, "0,x,1")
    assert dask_workers.cores_asked() == [0, 1]
    monkeypatch.delenv(dask_workers.CPUS_ENV)
    assert dask_workers.cores_asked() == []


def _where():
    return os.environ.get("CUDA_VISIBLE_DEVICES"), sorted(os.sched_getaffinity(0))


@pytest.mark.timeout(180)
def test_a_cluster_on_two_gpus_sets_each_workers_gpu_and_cores(monkeypatch):
    """The real cluster (two worker processes) on a machine that says it has two GPUs:
    after ``ready`` each worker sees its own GPU and runs on its own core."""
    from distributed import Client

    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs 2 cores")
    monkeypatch.setattr(dask_workers, "devices", lambda: ["0", "1"])
    said = []
    opts = SimpleNamespace(isolation_choice="none", mode="sim", starters=None, seed=1)
    with dask_workers.local_cluster(2, None, said.append) as cluster, Client(cluster) as client:
        client.wait_for_workers(2, timeout=120)
        executors.warm_workers(client, (dask_workers.ready, ({}, opts)), said.append)
        seen = sorted(client.run(_where).values())
    half = len(cores) // 2
    assert seen == [("0", cores[:half]), ("1", cores[half : 2 * half])], seen
    assert any("on 2 GPU(s)" in s for s in said) and any(
        "2 of 2 worker(s) ready" in s for s in said
    )


def _no_sandbox(*args):
    raise dask_workers.SandboxMissing("the Dask worker on here cannot build the grading sandbox")


def _breaks(*args):
    raise ValueError("no GPU figures")


def _ok(*args):
    return {"device": None, "cores": 1, "seconds": 0.0}


def _breaks_on(address):
    from distributed import get_worker

    if get_worker().address == address:
        raise ValueError("no GPU figures")
    return _ok()


def _cluster():
    from distributed import LocalCluster

    return LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None)


@pytest.mark.timeout(120)
def test_a_worker_that_cannot_sandbox_stops_the_run_before_any_submission():
    from distributed import Client

    with _cluster() as cluster, Client(cluster) as client:
        said = []
        with pytest.raises(
            SystemExit, match="cannot build the grading sandbox.*nothing was graded"
        ):
            executors.warm_workers(client, (_no_sandbox, ()), said.append)
        with pytest.raises(SystemExit, match="no Dask worker got ready"):
            executors.warm_workers(client, (_breaks, ()), said.append)
        assert sum("could not get ready (ValueError" in s for s in said) == 2
        executors.warm_workers(client, (_ok, ()), said.append)
        assert "2 of 2 worker(s) ready" in said[-1]


@pytest.mark.timeout(120)
def test_a_worker_that_is_not_ready_is_retired_and_grades_nothing():
    from distributed import Client

    with _cluster() as cluster, Client(cluster) as client:
        said = []
        bad = sorted(client.nthreads())[0]
        executors.warm_workers(client, (_breaks_on, (bad,)), said.append)
        assert any("1 worker(s) retired" in s for s in said), said
        deadline = time.time() + 30
        while bad in client.nthreads() and time.time() < deadline:
            time.sleep(0.2)
        assert bad not in client.nthreads() and len(client.nthreads()) == 1


EVENTS: list = []  # what the in-process workers did, in order (module-level: not copied)


def _record_ready():
    EVENTS.append("ready")
    return _ok()


def _record_grade(item):
    EVENTS.append("graded")
    return item["rel"]


@pytest.mark.timeout(120)
def test_every_worker_is_ready_before_the_first_submission(monkeypatch):
    """``run_dask`` runs ``ready`` on every worker before it submits anything."""
    EVENTS.clear()
    monkeypatch.setattr(executors, "payload", lambda sub: {"rel": sub.rel})
    monkeypatch.setattr(executors, "hidden_problem", lambda expected: None)
    files = [SimpleNamespace(rel=f"s{i}.ipynb") for i in range(4)]
    with _cluster() as cluster:
        rows = executors.run_dask(
            files,
            _record_grade,
            (),
            lambda rel: None,
            None,
            scheduler=cluster,
            workers=2,
            log=lambda s: None,
            ready=(_record_ready, ()),
        )
    assert sorted(rows) == sorted(f.rel for f in files)
    assert EVENTS[:2] == ["ready", "ready"] and EVENTS.count("ready") == 2
    assert EVENTS.count("graded") == 4


def test_the_rates_are_compared_with_the_fewest_gpus_whatever_ran_first():
    from course.bench.grading import gpu_table

    def run(gpus, per_minute, after):
        return {
            "gpus": gpus,
            "jobs": 8 * gpus,
            "graded": 100,
            "students": 100,
            "seconds": 6000 / per_minute,
            "startup_s": 10.0,
            "per_minute": per_minute,
            "per_minute_after_startup": after,
        }

    text = gpu_table([run(2, 90.0, 100.0), run(1, 50.0, 52.0)])
    two, one = text.splitlines()[2:]
    assert "| 2 | 16 |" in two and "1.80x" in two and "1.92x" in two
    assert "| 1 | 8 |" in one and one.count("1.00x") == 2
    assert "x 1 GPU(s)" in text.splitlines()[0]


def test_grade_refuses_gpus_without_dask_or_below_one(tmp_path):
    from course.grading.classroom import preflight

    for executor, gpus, scheduler in (
        ("local", 2, None),
        ("dask", 0, None),
        ("dask", 2, "tcp://x:1"),
    ):
        opts = SimpleNamespace(
            gpus=gpus, executor=executor, scheduler=scheduler, submissions=[tmp_path]
        )
        assert "--gpus" in preflight.arguments(opts)


@pytest.mark.slow
@pytest.mark.e2e  # two Dask clusters grading a class of two through the bench's command line
def test_bench_grading_compares_one_and_two_gpus(tmp_path):
    t = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "course", "bench", "grading", "--students", "2"]
        + ["--lessons", "01_vector_add", "--no-attackers", "--jobs", "1"]
        + ["--executor", "dask", "--gpus", "2,1", "--out", str(tmp_path), "--timeout", "240"],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    md = next(tmp_path.glob("grading-*.md")).read_text()
    assert "## The same class on more GPUs" in md
    assert md.count("2 of 2 submissions graded on") == 2, md[:3000]
    assert "| 1 | 1 | 2/2 |" in md and "| 2 | 2 | 2/2 |" in md
    assert len(list(tmp_path.glob("grading-*.gpus*.log"))) == 2
    assert time.perf_counter() - t < 400
