"""A faster block scheduler for numba's CUDA simulator: installed by ``import course`` in
simulator mode.

The simulator runs a block's threads as Python threads, and ``BlockManager.run`` watches
them in a loop (who waits at ``syncthreads``, who raised, who finished).  That loop never
waits, so it holds the GIL for whole switch intervals while the threads that do the work
queue for it: on this course's kernels it used ~90 % of the time (a 16 x 256 matmul: 4.9 s,
0.49 s with this loop).  :func:`install` replaces the loop with the same one plus
``time.sleep(0)`` each round, which hands the GIL to a thread with work.  Same semantics:
the same checks in the same order; only how often the watcher runs changes.

One addition: when the launch stops early (Stop / Ctrl-C, or a thread's error), every
thread of the block is stopped too (:func:`stop_threads`).  numba leaves them running: a
kernel in an endless loop then spins on after the interrupt and starves the notebook
kernel of the GIL (an interrupt took 41 s to come back in JupyterLab).  While a block
runs, threads take turns at the GIL every :data:`SWITCH_INTERVAL_S` at most (Python's
default, 5 ms).  A shorter turn buys nothing: Stop comes back in ~0.1 s either way (the
watcher yields every round), while 1 ms turns cut a simulated thread's work between two
barriers into pieces and made barrier-heavy kernels 2.5-3.7x slower (flash attention's
256-thread blocks: 32 s -> 12.7 s for one test).

**A block without barriers runs in one thread** (:func:`_run_serial`).  Starting a Python
thread costs ~0.3 ms, more than a vector add's whole body: lesson 01's checks started
12,859 of them (5.2 s of their 8.8 s).  When no code of the kernel (its own, its device
functions', the functions nested in them) names a barrier, a warp intrinsic, shared memory,
a fence or compare-and-swap (:func:`needs_threads`), nothing one simulated thread does can
wait for another, so the block's threads run one after the other in a single
``BlockThread`` whose ``threadIdx`` moves on after each - one of the orders a GPU may run
them in.  Errors, Stop and the check's time limit behave as before (they act on that
thread).  Should a barrier be reached anyway (a name the scan could not see), the launch
stops with a :class:`SerialBarrier` error that says so rather than waiting forever.
"""

from __future__ import annotations

import _thread
import contextlib
import functools
import sys
import threading
import time

import numpy as np

SWITCH_INTERVAL_S = 5e-3  # GIL turns while a block runs, at most (a shorter one set is kept)
_installed = False
_lock = threading.Lock()


# a code object naming any of these may make one simulated thread wait for another
_WAITS = ("sync", "shfl", "shared", "threadfence", "compare_and_swap", "cas", "activemask")
_WAITS += ("lanemask_lt", "cg", "this_grid", "nanosleep")
_needs: dict = {}  # kernel code object -> bool


def needs_threads(fn) -> bool:
    """True when kernel ``fn``'s code may wait for another thread of its block (see above)."""
    code = getattr(fn, "__code__", None)
    hit = _needs.get(code)
    if hit is None:
        from .trace_ops import kernel_codes

        names = {n for c in kernel_codes(fn) for n in c.co_names}
        hit = any(w in n for n in names for w in _WAITS)
        if len(_needs) > 4096:  # a notebook session defines kernels again and again
            _needs.clear()
        _needs[code] = hit
    return hit


_threaded = 0  # > 0: every block keeps a thread per CUDA thread (:func:`threaded`)


@contextlib.contextmanager
def threaded():
    """Inside: every block runs a Python thread per CUDA thread, even one without barriers
    (an untraced race hunt needs interleavings to change results)."""
    global _threaded
    with _lock:
        _threaded += 1
    try:
        yield
    finally:
        with _lock:
            _threaded -= 1


class SerialBarrier(RuntimeError):
    """A barrier reached in a block run in one thread (its kernel named none we could see)."""


def _run(self, grid_point, *args):
    """numba's ``BlockManager.run``, yielding the GIL between rounds."""
    from numba.cuda.simulator import kernel as simkernel
    from numba.cuda.simulator.kernel import BlockThread

    from .memory import poison_shared

    poison_shared(simkernel._get_kernel_context())  # what the last block left is garbage
    if not self._debug and not _threaded and not needs_threads(self._f):
        return _run_serial(self, grid_point, args)
    threads, live, blocked = set(), set(), set()
    unwoken = set()  # released from a barrier while their event's lock was busy: again
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, SWITCH_INTERVAL_S))
    try:
        for block_point in np.ndindex(*self._block_dim):

            def target():
                _in_kernel(lambda: self._f(*args))

            t = BlockThread(target, self, grid_point, block_point, self._debug)
            t.start()
            threads.add(t)
            live.add(t)
        while live:
            time.sleep(0)  # let a working thread have the GIL
            unwoken = {t for t in unwoken if t.is_alive() and not _wake(t, timeout=0.05)}
            for t in live:
                if t.syncthreads_blocked:
                    blocked.add(t)
                elif t.exception:  # abort the block: every thread stops
                    raise t.exception[0].with_traceback(t.exception[1])
            if live == blocked:  # everyone at the barrier: release them
                for t in blocked:
                    t.syncthreads_blocked = False
                    if not _wake(t):
                        unwoken.add(t)
                blocked = set()
            live = {t for t in live if t.is_alive()}
    except BaseException:  # a thread's error, or Stop (KeyboardInterrupt)
        stop_threads(threads)
        raise
    finally:
        sys.setswitchinterval(interval)
    for t in threads:
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def _run_serial(self, grid_point, args) -> None:
    """Run the block's threads one after the other in one ``BlockThread``."""
    from numba.cuda.simulator.kernel import Dim3

    bx, by, _bz = self._block_dim
    points = list(np.ndindex(*self._block_dim))

    done = _thread.allocate_lock()  # released when the block's threads have run
    done.acquire()

    def block():
        t = threading.current_thread()
        for p in points:
            t.threadIdx = Dim3(*p)
            t.thread_id = p[0] + bx * (p[1] + by * p[2])
            self._f(*args)

    def target():
        try:
            _in_kernel(block)
        finally:
            done.release()

    t = _serial_thread()(target, self, grid_point, points[0], False)
    t.start()
    try:  # wait here, not in threading.py: Stop's traceback then shows this short module
        while not done.acquire(timeout=0.05):  # (IPython reads every frame's source)
            if not t.is_alive():  # ended without a word (cannot happen; never wait forever)
                break
    except BaseException:  # Stop (KeyboardInterrupt)
        stop_threads([t])
        raise
    t.join()
    if t.exception:
        raise t.exception[0].with_traceback(t.exception[1])


@functools.cache
def _serial_thread():
    """numba's ``BlockThread``, refusing barriers (they would wait for nobody)."""
    from numba.cuda.simulator.kernel import BlockThread

    class SerialThread(BlockThread):
        def syncthreads(self):
            raise SerialBarrier(
                "a barrier was reached in a kernel whose code names none (call "
                "cuda.syncthreads() by that name, not through another name)"
            )

    return SerialThread


class Stopped(Exception):
    """Raised inside a simulated CUDA thread to end it (its launch already stopped)."""


def stop_threads(threads, patience: float = 1.0, exc=Stopped, once: bool = False) -> None:
    """End ``threads`` (simulated CUDA threads): set their abort flag, wake those waiting at
    a barrier and raise ``exc`` in each that is still inside its kernel, until all have
    ended (``once``: one round); give up after ``patience`` seconds (a thread inside a C
    call ends when the call returns)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # hand the GIL round quickly: each thread needs it
    deadline = time.monotonic() + patience  # once to see the exception
    try:
        while True:
            alive = [t for t in threads if t.is_alive()]
            for t in alive:
                t.abort = True
                t.syncthreads_blocked = False
                _raise_in_kernel(t, exc)
                _wake(t, timeout=0.05)
            if once or not alive or time.monotonic() > deadline:
                return
            time.sleep(0.005)
    finally:
        sys.setswitchinterval(old)


def _wake(t, timeout: float = 1.0) -> bool:
    """Set simulated thread ``t``'s barrier event, waiting at most ``timeout`` for the
    event's lock; False when the lock stayed busy (the event is not set).  A thread that
    :func:`stop_threads`' exception ended inside the event's own ``with`` block (numba's
    ``wait``/``clear``) leaves that lock held for ever, and ``Event.set`` would then wait
    for ever (a CI run hung there); an ended thread needs no waking, and a live one is tried
    again on the stopper's next round.  A barrier's release tries again on the next round
    too: on a loaded machine a thread can hold the lock, between two bytecodes, for longer
    than ``timeout``, and a thread never woken would wait for ever."""
    event = t.syncthreads_event
    cond = event._cond  # threading.Event's own condition and flag (CPython 3.8-3.13)
    if not cond.acquire(timeout=timeout):
        return False
    try:
        event._flag = True
        cond.notify_all()
    finally:
        cond.release()
    return True


def _in_kernel(run) -> None:
    """Call ``run`` (a simulated thread's kernel code) with the current thread marked as
    inside it: :func:`_raise_in_kernel` raises in a thread only while the mark is up.

    The mark comes down under the thread's gate lock, which the stopper holds while it
    raises: a thread the stopper sees marked has not left this function, so it is alive
    and its id is its own (an ended thread's id is reused by the next thread started).
    An exception raised while this thread waits at the gate arrives just after it gets
    the lock and leaves it held: the stopper then never raises in this thread again."""
    t = threading.current_thread()
    gate = t._kernel_gate = _thread.allocate_lock()
    t._in_kernel = True
    try:
        run()
    finally:
        gate.acquire()
        t._in_kernel = False
        gate.release()


def _raise_in_kernel(t, exc) -> None:
    """Raise ``exc`` in simulated thread ``t`` if it is inside its kernel (:func:`_in_kernel`),
    where numba's BlockThread.run catches it; never in its start or exit, never in another
    thread that took its id.  No frame of another thread is read: walking one
    (``sys._current_frames()``, ``f_back``) while that thread runs crashes CPython 3.11."""
    import ctypes

    gate = getattr(t, "_kernel_gate", None)
    if gate is None or not gate.acquire(blocking=False):  # not started, or leaving: next round
        return
    try:
        if t._in_kernel:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(t.ident), ctypes.py_object(exc)
            )
    finally:
        gate.release()


def install() -> None:
    """Swap in the yielding scheduler (idempotent; call only in sim mode)."""
    global _installed
    with _lock:
        if _installed:
            return
        from numba.cuda.simulator import kernel as simkernel

        simkernel.BlockManager.run = _run
        from . import memory

        memory.install()
        _installed = True
