"""``executors.run_dask`` keeps at most ``window(workers)`` submissions in flight: their
bytes are read when submitted, not all up front, so the client's memory is bounded by the
cluster's size, not the class's.  One in-process LocalCluster of two workers."""

import time
from types import SimpleNamespace

import pytest

pytest.importorskip("distributed")


def _slow(item, seconds):
    time.sleep(seconds)
    return item["rel"]


@pytest.mark.timeout(120)
def test_dask_submits_in_a_bounded_window(monkeypatch):
    from distributed import LocalCluster

    from course.grading.classroom import executors

    held, most = set(), [0]

    def payload(sub):
        held.add(sub.rel)
        most[0] = max(most[0], len(held))
        return {"rel": sub.rel}

    def on_row(rel):
        held.discard(rel)

    monkeypatch.setattr(executors, "payload", payload)
    monkeypatch.setattr(executors, "hidden_problem", lambda expected: None)
    files = [SimpleNamespace(rel=f"s{i}.ipynb") for i in range(20)]
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        rows = executors.run_dask(
            files, _slow, (0.05,), on_row, None, scheduler=cluster, workers=2, log=lambda s: None
        )
    assert sorted(rows) == sorted(f.rel for f in files)  # every one graded, once
    assert 2 <= most[0] <= executors.window(2) == 4  # the window filled, and held
