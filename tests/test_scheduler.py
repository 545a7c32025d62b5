"""The simulator's block scheduler: a block without barriers runs in one thread, in order;
a block that names one keeps a thread per CUDA thread; a barrier it could not see stops the
launch with a sentence instead of a hang."""

import threading

import numba
import numpy as np
import pytest
from conftest import rejects
from numba import cuda

import course
from course.sim import scheduler

pytestmark = pytest.mark.skipif(course.MODE != "sim", reason="the simulator's scheduler")


@cuda.jit
def _where(out):
    b = cuda.blockIdx.x + cuda.gridDim.x * cuda.blockIdx.y
    t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
    i = b * cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z + t
    out[i, 0] = cuda.threadIdx.x
    out[i, 1] = cuda.threadIdx.y
    out[i, 2] = cuda.threadIdx.z
    out[i, 3] = cuda.blockIdx.x
    out[i, 4] = cuda.blockIdx.y
    out[i, 5] = cuda.laneid


@cuda.jit
def _with_barrier(x):
    i = cuda.threadIdx.x
    v = x[(i + 1) % x.size]
    cuda.syncthreads()
    x[i] = v


@cuda.jit
def _aliased_barrier(x):  # (numba's compiler would refuse getattr; the simulator runs it)
    x[cuda.threadIdx.x] = 1.0
    getattr(cuda, "sync" + "threads")()


def _threads_started(run) -> int:
    started = []
    orig = threading.Thread.start

    def start(self):
        started.append(self)
        return orig(self)

    threading.Thread.start = start
    try:
        run()
    finally:
        threading.Thread.start = orig
    return len(started)


def test_a_block_without_barriers_runs_in_one_thread_with_every_index_right():
    grid, block = (3, 2), (5, 3, 2)
    n = 6 * 30
    out = np.full((n, 6), -1, np.int64)
    started = _threads_started(lambda: _where[grid, block](out))
    assert started == 6  # one thread per block, not 180
    want = []
    for by in range(2):
        for bx in range(3):
            for z in range(2):
                for y in range(3):
                    for x in range(5):
                        want.append((x, y, z, bx, by, (x + 5 * (y + 3 * z)) % 32))
    assert out.tolist() == [list(w) for w in want]
    assert not scheduler.needs_threads(_where.py_func)


def test_a_block_with_a_barrier_keeps_a_thread_for_each_cuda_thread():
    x = np.arange(7, dtype=np.float64) + 0.5
    started = _threads_started(lambda: _with_barrier[1, 7](x))
    assert started == 7
    assert x.tolist() == [v + 0.5 for v in [1, 2, 3, 4, 5, 6, 0]]
    assert scheduler.needs_threads(_with_barrier.py_func)


def test_an_error_names_the_thread_that_raised():
    @cuda.jit
    def past_end(x):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        x[i] = 1.0  # no guard: thread 3 of block 1 is past the end

    with pytest.raises(IndexError, match=r"tid=\[3, 0, 0\] ctaid=\[1, 0, 0\]"):
        past_end[2, 4](np.zeros(7))


def test_a_barrier_the_scan_could_not_see_stops_with_a_sentence():
    assert not scheduler.needs_threads(_aliased_barrier.py_func)
    with pytest.raises(RuntimeError, match="barrier was reached"):
        _aliased_barrier[1, 4](np.zeros(4))


@cuda.jit
def _running_total(x, out):  # reads its local array before writing it (wrong on a GPU)
    acc = cuda.local.array(4, numba.float64)
    t = cuda.threadIdx.x
    if t == 0:
        acc[1] = 0.0
    acc[1] += x[t]
    if t == cuda.blockDim.x - 1:
        out[0] = acc[1]


@cuda.jit
def _left_by_the_last_block(out):  # block 1 reads what block 0 left in shared memory
    s = cuda.shared.array(4, numba.float32)
    if cuda.blockIdx.x == 0:
        s[cuda.threadIdx.x] = 7.0
    else:
        out[cuda.threadIdx.x] = s[cuda.threadIdx.x]
    cuda.syncthreads()


def test_local_arrays_start_as_poison_and_carry_nothing_from_thread_to_thread():
    """Red team, #45: threads run one after another, and numpy hands a freed local array's
    memory to the next thread's ``np.empty``: a running total passed through uninitialised
    local memory added up correctly.  Local arrays now start as poison."""
    out = np.zeros(1)
    _running_total[1, 8](np.arange(8.0), out)
    assert np.isnan(out[0])
    assert rejects("reduce_sequential", _reduce_through_local_memory)


def test_shared_arrays_start_each_block_as_poison():
    out = np.zeros(4, np.float32)
    _left_by_the_last_block[2, 4](out)
    assert np.isnan(out).all()


@cuda.jit
def _reduce_through_local_memory(g_idata, g_odata):
    acc = cuda.local.array(37, numba.float64)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    if t == 0:
        acc[5] = 0.0
    if i < g_idata.shape[0]:
        acc[5] += g_idata[i]
    if t == cuda.blockDim.x - 1:
        g_odata[cuda.blockIdx.x] = acc[5]


def test_an_untraced_race_hunt_runs_every_block_with_a_thread_per_cuda_thread():
    out = np.full((12, 6), -1, np.int64)
    with scheduler.threaded():
        started = _threads_started(lambda: _where[(2, 1), (6, 1, 1)](out))
    assert started == 12
    assert _threads_started(lambda: _where[(2, 1), (6, 1, 1)](out)) == 2


def test_a_stop_raises_only_inside_a_kernel_and_reads_no_other_threads_frames(monkeypatch):
    """stop_threads raises in a thread while it runs its kernel, never after it has left it
    (its id may belong to another thread by then), and walks no frame of another thread
    (``sys._current_frames`` + ``f_back`` on a running thread crashes CPython 3.11: an
    xdist worker died of it)."""
    import sys
    import time

    def no_frames():
        raise AssertionError("stop_threads read another thread's frames")

    monkeypatch.setattr(sys, "_current_frames", no_frames)
    got: dict = {}

    def endless():
        while True:
            time.sleep(0.001)

    def inside():
        try:
            scheduler._in_kernel(endless)
        except scheduler.Stopped:
            got["inside"] = "stopped"

    def left():
        scheduler._in_kernel(lambda: None)
        try:
            end = time.monotonic() + 0.6
            while time.monotonic() < end:
                time.sleep(0.001)
            got["left"] = "finished"
        except scheduler.Stopped:
            got["left"] = "stopped after its kernel"

    class Simulated(threading.Thread):  # what stop_threads touches of numba's BlockThread
        abort = syncthreads_blocked = False
        syncthreads_event = threading.Event()

    threads = [Simulated(target=f, daemon=True) for f in (inside, left)]
    for t in threads:
        t.start()
    time.sleep(0.1)
    scheduler.stop_threads(threads, patience=0.3)
    for t in threads:
        t.join(5)
    assert got == {"inside": "stopped", "left": "finished"}, got


def test_a_stop_never_waits_on_a_barrier_lock_a_dead_thread_left_held():
    """A thread ended by the stopper's exception inside its barrier event's own lock leaves
    it held for ever; ``Event.set`` then blocked the stopper for good (a CI run hung in
    test_window).  The stopper now gives up on that lock and returns within its patience."""
    import time

    class Simulated(threading.Thread):  # alive, its event's lock held by nobody who lives
        abort = syncthreads_blocked = False

    t = Simulated(target=time.sleep, args=(1.0,), daemon=True)
    t.syncthreads_event = threading.Event()
    t.syncthreads_event._cond.acquire()  # as an ended thread left it
    t.start()
    done = threading.Event()
    stopper = threading.Thread(
        target=lambda: (scheduler.stop_threads([t], patience=0.2), done.set()), daemon=True
    )
    stopper.start()
    assert done.wait(5), "stop_threads waited on a lock nobody will release"
    free = threading.Event()
    scheduler._wake(type("T", (), {"syncthreads_event": free})())
    assert free.is_set()  # an unheld event is set as before


def test_a_barrier_whose_wake_finds_the_lock_busy_tries_again(monkeypatch):
    """On a loaded machine a thread can hold its barrier event's lock past the wake's
    timeout (a CI run hung there): the release must try again, never leave it waiting."""
    real, missed = scheduler._wake, []

    def busy_once(t, timeout=1.0):
        if timeout == 1.0 and not missed:  # the first release of the launch finds it busy
            missed.append(t)
            return False
        return real(t, timeout)

    monkeypatch.setattr(scheduler, "_wake", busy_once)
    x = np.arange(64, dtype=np.float32)
    d = cuda.to_device(x)
    done = threading.Event()
    launch = threading.Thread(target=lambda: (_with_barrier[1, 64](d), done.set()), daemon=True)
    launch.start()
    assert done.wait(30), "a thread whose barrier wake missed was never woken"
    assert missed and np.array_equal(d.copy_to_host(), np.roll(x, -1))
