"""A fast stand-in for the leaderboard's judge, for the service's load and restart tests
(the real judge takes seconds a submission in the simulator; these tests are about the
queue, the store and the HTTP layer).  Every call is logged so a test can prove that each
submission was measured exactly once."""

import os
import time
import zlib


def judge(board, payload, on_stage=None, isolation=None, case_time_limit=None):
    if on_stage:
        on_stage("timing")
    if "# stop the service" in payload["source"]:  # judging that kills the service
        time.sleep(0.5)  # (once its POST has been answered)
        os.kill(os.getpid(), 9)
    time.sleep(float(os.environ.get("FAKE_JUDGE_SLEEP", "0.005")))
    with open(os.environ["FAKE_JUDGE_LOG"], "a") as f:
        f.write(payload["source"].splitlines()[0] + "\n")
    ms = 1 + zlib.crc32(payload["source"].encode()) % 1000 / 100
    return {
        "status": "done",
        "passed": True,
        "message": "fake",
        "mean_ms": ms,
        "std_ms": 0.01,
        "best_ms": ms - 0.01,
        "median_ms": ms,
        "runs": 30,
        "device": "fake GPU",
        "mode": "gpu",
        "cases": [{"name": "c", "passed": True}],
    }


def task(board, payload, private=()):  # the Dask queue's task signature
    result = judge(board, payload)
    result["message"] = f"fake; private {sorted(private)}"  # what the service sent along
    return result
