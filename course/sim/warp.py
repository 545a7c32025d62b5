"""Warp intrinsics for numba's CUDA simulator (which has none): installed by ``import course``
in simulator mode.

numba-cuda's simulator runs every CUDA thread as a Python thread and swaps the kernel's
``cuda`` global for a ``FakeCUDAModule`` during a launch.  :func:`install` adds to that fake
module what a real GPU has and the simulator lacks::

    cuda.shfl_sync(mask, value, src_lane)     cuda.ballot_sync(mask, predicate) -> int32
    cuda.shfl_up_sync(mask, value, delta)     cuda.all_sync / any_sync / eq_sync -> bool
    cuda.shfl_down_sync(mask, value, delta)   cuda.match_any_sync / match_all_sync
    cuda.shfl_xor_sync(mask, value, lane_mask)
    cuda.syncwarp(mask=0xffffffff)            cuda.activemask() / lanemask_lt() -> uint32

Semantics (CUDA's, for warps of 32): a warp is 32 consecutive *linear* thread ids of a block
(``tid = x + bdx*(y + bdy*z)``; lane = tid % 32).  Every ``*_sync`` call is a rendezvous of
the lanes named in ``mask``: each waits until all of them (minus lanes that have already
exited) made a warp call with that mask, then all get their results.  The caller must be in
``mask``.  Shuffles follow the PTX ``shfl.sync`` rules with width 32: the lane argument is
taken mod 32; ``shfl_up``/``shfl_down`` lanes outside 0..31 return the caller's own value;
reading a lane that is not taking part (not in the mask, or exited) is undefined in CUDA -
here it returns the caller's own value and is recorded in :data:`NOTES`.  There is no
``width`` argument (numba-cuda has none on the GPU either).  ``activemask()`` returns the
lanes of the warp that have not exited (the simulator has no divergence, so this is what a
converged warp reports).  ``ballot_sync`` returns int32 like numba-cuda on a GPU (all 32
lanes -> -1); ``cuda.popc``/``ffs``/``clz``/``brev`` are patched to treat negative numbers
as 32/64-bit patterns like the GPU does (:mod:`course.sim.warp_bits`).

Errors a GPU would hide or hang on are raised with a clear message (:class:`WarpError`): the
caller not in its mask; lanes of one rendezvous calling different intrinsic families
(e.g. shuffle vs ballot); and a deadlock - lanes waiting in a warp call for lanes that sit in
``syncthreads()`` or in a warp call with another mask.

``install()`` is idempotent; it only touches the simulator's classes (nothing on a GPU).
Tools (``course.sim.trace``) can observe every completed rendezvous with :func:`add_listener`.
The rendezvous itself (warp state, results, deadlock detection) is ``warp_rendezvous.py``;
this module is the intrinsics a kernel calls and their installation.
"""

from __future__ import annotations

import threading

import numpy as np

from . import warp_bits as simwarp_bits
from .warp_rendezvous import (  # noqa: F401 - NOTES, WarpError and the listeners are public
    FULL,
    NOTES,
    WARP,
    BlockWarps,
    WarpError,
    add_listener,
    caller,
    collective,
    lane_exited,
    remove_listener,
)

_installed = False
_install_lock = threading.Lock()


# ---------------------------------------------------------------------------------------
# the methods added to FakeCUDAModule


def shfl_sync(self, mask, value, src_lane):
    return collective("shfl", "shfl_sync", mask, ("idx", value, src_lane))


def shfl_up_sync(self, mask, value, delta):
    return collective("shfl", "shfl_up_sync", mask, ("up", value, delta))


def shfl_down_sync(self, mask, value, delta):
    return collective("shfl", "shfl_down_sync", mask, ("down", value, delta))


def shfl_xor_sync(self, mask, value, lane_mask):
    return collective("shfl", "shfl_xor_sync", mask, ("xor", value, lane_mask))


def ballot_sync(self, mask, predicate):
    return collective("vote", "ballot_sync", mask, ("ballot", bool(predicate)))


def all_sync(self, mask, predicate):
    return collective("vote", "all_sync", mask, ("all", bool(predicate)))


def any_sync(self, mask, predicate):
    return collective("vote", "any_sync", mask, ("any", bool(predicate)))


def eq_sync(self, mask, predicate):
    return collective("vote", "eq_sync", mask, ("eq", bool(predicate)))


def match_any_sync(self, mask, value):
    return collective("match", "match_any_sync", mask, ("any", value))


def match_all_sync(self, mask, value):
    return collective("match", "match_all_sync", mask, ("all", value))


def syncwarp(self, mask=FULL):
    collective("sync", "syncwarp", mask, None)


def activemask(self):
    t, bw = caller()
    warp = bw.warps[t.thread_id // WARP]
    with warp.cond:
        return np.uint32(FULL & ~warp.exited)


def lanemask_lt(self):
    t, _bw = caller()
    return np.uint32((1 << (t.thread_id % WARP)) - 1)


_METHODS = {
    f.__name__: f
    for f in (
        shfl_sync,
        shfl_up_sync,
        shfl_down_sync,
        shfl_xor_sync,
        ballot_sync,
        all_sync,
        any_sync,
        eq_sync,
        match_any_sync,
        match_all_sync,
        syncwarp,
        activemask,
        lanemask_lt,
    )
}
_METHODS.update(simwarp_bits.METHODS)  # popc, ffs, clz, brev


def install() -> None:
    """Add the warp intrinsics to numba's simulator (idempotent; call only in sim mode)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        from numba.cuda.simulator import kernel as simkernel
        from numba.cuda.simulator import kernelapi

        fake = kernelapi.FakeCUDAModule
        if getattr(fake, "_course_simwarp", False):
            _installed = True
            return
        for name, fn in _METHODS.items():
            setattr(fake, name, fn)
        if not hasattr(fake, "laneid"):
            fake.laneid = property(lambda self: threading.current_thread().thread_id % WARP)
        if not hasattr(fake, "warpsize"):
            fake.warpsize = property(lambda self: WARP)

        manager, thread = simkernel.BlockManager, simkernel.BlockThread
        orig_manager_init, orig_thread_init = manager.__init__, thread.__init__
        orig_run = thread.run

        def manager_init(self, f, grid_dim, block_dim, debug):
            orig_manager_init(self, f, grid_dim, block_dim, debug)
            self._simwarp = BlockWarps(block_dim)

        def thread_init(self, f, mgr, blockIdx, threadIdx, debug):
            orig_thread_init(self, f, mgr, blockIdx, threadIdx, debug)
            self._simwarp_exited = False
            bw = getattr(mgr, "_simwarp", None)
            if bw is not None:
                warp = bw.warps[self.thread_id // WARP]
                with warp.cond:
                    warp.threads[self.thread_id % WARP] = self

        def run(self):
            try:
                try:
                    orig_run(self)
                finally:
                    lane_exited(self)
            except Exception as exc:  # noqa: BLE001 - an asynchronous exception (e.g. the
                # time limit of course.check) that landed outside the simulator's handler
                if self.exception is None:
                    self.exception = (exc, exc.__traceback__)

        manager.__init__ = manager_init
        thread.__init__ = thread_init
        thread.run = run
        fake._course_simwarp = True
        _installed = True
