"""A faster block scheduler for numba's CUDA simulator: installed by ``import course`` in
simulator mode.

The simulator runs a block's threads as Python threads, and ``BlockManager.run`` watches
them in a loop (who waits at ``syncthreads``, who raised, who finished).  That loop never
waits, so it holds the GIL for whole switch intervals while the threads that do the work
queue for it: on this course's kernels it used ~90 % of the time (a 16 x 256 matmul: 4.9 s,
0.49 s with this loop).  :func:`install` replaces the loop with the same one plus
``time.sleep(0)`` each round, which hands the GIL to a thread with work.  Same semantics:
the same checks in the same order; only how often the watcher runs changes.
"""
from __future__ import annotations

import threading
import time

import numpy as np

_installed = False
_lock = threading.Lock()


def _run(self, grid_point, *args):
    """numba's ``BlockManager.run``, yielding the GIL between rounds."""
    from numba.cuda.simulator.kernel import BlockThread

    threads, live, blocked = set(), set(), set()
    for block_point in np.ndindex(*self._block_dim):
        def target():
            self._f(*args)
        t = BlockThread(target, self, grid_point, block_point, self._debug)
        t.start()
        threads.add(t)
        live.add(t)
    while live:
        time.sleep(0)                       # let a working thread have the GIL
        for t in live:
            if t.syncthreads_blocked:
                blocked.add(t)
            elif t.exception:               # abort the block: every thread stops
                for other in threads:
                    other.abort = True
                    other.syncthreads_blocked = False
                    other.syncthreads_event.set()
                raise t.exception[0].with_traceback(t.exception[1])
        if live == blocked:                 # everyone at the barrier: release them
            for t in blocked:
                t.syncthreads_blocked = False
                t.syncthreads_event.set()
            blocked = set()
        live = {t for t in live if t.is_alive()}
    for t in threads:
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def install() -> None:
    """Swap in the yielding scheduler (idempotent; call only in sim mode)."""
    global _installed
    with _lock:
        if _installed:
            return
        from numba.cuda.simulator import kernel as simkernel

        simkernel.BlockManager.run = _run
        _installed = True
