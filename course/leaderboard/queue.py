"""Who drains the queue: one local thread (one GPU), or Dask workers (one per GPU).

The database is the queue: a submission is ``queued`` in SQLite before the HTTP answer, and
a dispatcher claims queued rows one at a time in the store's fair order (round-robin across
students, ``Store.queued``; ``Store.claim`` changes a row only if it is still queued, so
nothing runs twice).  Locally, the claimed submission is judged in this
process's thread (``runner.judge_submission``: gate, tests, timed launch, in child
processes).  With ``--scheduler tcp://...`` it goes to the Dask cluster as a task that needs
the resource ``GPU=1``: start one worker per GPU with ``--resources GPU=1`` (and
``CUDA_VISIBLE_DEVICES`` set) and several GPUs on several machines drain one queue, each
timing one submission at a time.  Either way, a restart puts unfinished work back in the
queue (``Store.requeue_unfinished``) and it runs again - once: a submission that was being
judged when the service stopped twice ends ``error`` and is not queued again.
"""

from __future__ import annotations

import threading
import traceback
from pathlib import Path

from . import runner


class _Dispatcher:
    """A background thread that takes queued submissions from the store; ``notify`` wakes
    it at once, otherwise it looks again every ``poll_s``."""

    def __init__(self, store, poll_s: float):
        self.store, self.poll_s = store, poll_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=type(self).__name__, daemon=True)

    def start(self, said=None) -> tuple[int, int]:
        """Put unfinished work back in the queue (but not work that has stopped the
        service twice: that ends ``error``), call ``said(put back, given up)``, then
        start; (put back, given up)."""
        n = self.store.requeue_unfinished()
        if said is not None:
            said(*n)
        self._thread.start()
        return n

    def notify(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 5) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout)

    def _idle(self) -> None:
        self._wake.wait(self.poll_s)
        self._wake.clear()

    def _loop(self) -> None:
        raise NotImplementedError


class LocalQueue(_Dispatcher):
    """Judge queued submissions one after the other in a background thread."""

    def __init__(
        self,
        store,
        judge=None,
        isolation=None,
        poll_s: float = 0.5,
        case_time_limit: float | None = None,
    ):
        super().__init__(store, poll_s)
        self.isolation, self.limit = isolation, case_time_limit
        self.judge = judge or runner.judge_submission

    def _loop(self) -> None:
        while not self._stop.is_set():
            ids = self.store.queued(limit=1)  # asked again after each: the fair order
            if not ids:  # changes as students are served
                self._idle()
                continue
            sub = self.store.claim(ids[0])
            if sub is not None:
                self._run(sub)

    def _run(self, sub: dict) -> None:
        sid = sub["id"]
        try:
            result = self.judge(
                sub["board"],
                _payload(sub),
                on_stage=lambda st: self.store.set_status(sid, st),
                isolation=self.isolation,
                case_time_limit=self.limit,
            )
        except Exception as exc:  # noqa: BLE001 - the queue must go on
            traceback.print_exc()
            result = {
                "status": "error",
                "passed": None,
                "message": f"the leaderboard failed to judge this ({exc})",
            }
        self.store.finish(sid, result.pop("status"), result)


def _payload(sub: dict) -> dict:
    unit = sub.get("unit")
    if sub.get("kind") == "course" and isinstance(unit, dict) and set(unit) == {"course_kernel"}:
        return {"course_kernel": unit["course_kernel"]}  # entered by the instructor
    return {"source": sub["source"], "function": sub["function"], "unit": unit}


def judge_on_worker(board: str, payload: dict, private: tuple = ()) -> dict:
    """A Dask task: judge one submission on the worker's GPU, in that worker's sandbox,
    which hides the service's ``private`` folders too (those of them this machine has)."""
    if "isolation" not in _WORKER:
        from ..grading.classroom.dask_workers import worker_folders

        hide = [Path(p) for p in private] + worker_folders()
        _WORKER["isolation"], _WORKER["said"] = runner.sandbox(hide)
        print(_WORKER["said"])
    if _WORKER["isolation"] is None:  # fail closed: no submission judged unsandboxed
        from ..grading.classroom.dask_workers import no_sandbox_message

        return {"status": "error", "passed": False, "message": no_sandbox_message(_WORKER["said"])}
    return runner.judge_submission(board, payload, isolation=_WORKER["isolation"])


_WORKER: dict = {}


class DaskQueue(_Dispatcher):
    """Send queued submissions to a Dask cluster; each task holds one ``GPU`` resource."""

    def __init__(
        self,
        store,
        scheduler: str,
        task=None,
        in_flight: int = 64,
        poll_s: float = 0.5,
        private: list | None = None,
    ):
        from distributed import Client

        super().__init__(store, poll_s)
        self.in_flight = in_flight
        self.private = tuple(str(p) for p in private or ())  # the service's folders
        self.client = Client(scheduler, set_as_default=False)
        self.task = task or judge_on_worker
        self._running: dict = {}
        self._lock = threading.Lock()

    def stop(self, timeout: float = 5) -> None:
        super().stop(timeout)
        self.client.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            room = self.in_flight - len(self._running)
            for sid in self.store.queued(limit=max(room, 0)):
                sub = self.store.claim(sid)
                if sub is None:
                    continue
                fut = self.client.submit(
                    self.task,
                    sub["board"],
                    _payload(sub),
                    self.private,
                    resources={"GPU": 1},
                    pure=False,
                    key=f"leaderboard-{sid}-{sub['attempts']}",
                )
                with self._lock:
                    self._running[fut.key] = sid
                fut.add_done_callback(self._done)
            self._idle()

    def _done(self, fut) -> None:
        with self._lock:
            sid = self._running.pop(fut.key, None)
        if sid is None:
            return
        try:
            result = fut.result()
        except Exception as exc:  # noqa: BLE001 - a worker died: the row says so
            result = {
                "status": "error",
                "passed": None,
                "message": f"the GPU worker failed ({type(exc).__name__}: {exc})",
            }
        self.store.finish(sid, result.pop("status"), result)
        self._wake.set()
