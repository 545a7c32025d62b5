"""The rendezvous behind the simulator's warp intrinsics (``warp.py``): per-block warp state,
lanes meeting on a mask, their results, and the deadlocks a GPU would hang on.

numba's simulator runs each CUDA thread as a Python thread; a warp call here makes the
calling thread wait on its warp's condition until every lane of the mask has arrived (or
exited), then computes every lane's result at once - shuffles, votes, matches, syncwarp -
and wakes them.  :func:`add_listener` lets tools (``course.sim.trace``) see each completed
rendezvous.  Errors a GPU would hide or hang on become :class:`WarpError`.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

FULL = 0xFFFFFFFF
WARP = 32
POLL_S = 0.1  # how often a waiting lane checks abort/deadlock (normal wake-up is immediate)

NOTES: list[str] = []  # undefined-behaviour notes (bounded), newest last
_MAX_NOTES = 100
_listeners: list = []


class WarpError(RuntimeError):
    """A warp intrinsic was used in a way CUDA leaves undefined (or that deadlocks)."""


def add_listener(fn) -> None:
    """Call ``fn(event)`` after every completed rendezvous.  ``event`` is a dict: block
    (x, y, z), warp (index in the block), kind ('shfl', 'vote', 'match', 'sync'), name
    (the intrinsic), mask, lanes (bit set of the lanes that took part), sites {lane: (file,
    line)}.  Runs in the last arriving thread while the warp is locked: keep it short."""
    if fn not in _listeners:
        _listeners.append(fn)


def remove_listener(fn) -> None:
    if fn in _listeners:
        _listeners.remove(fn)


def _note(msg: str) -> None:
    if len(NOTES) >= _MAX_NOTES:
        del NOTES[0]
    NOTES.append(msg)


# ---------------------------------------------------------------------------------------
# per-block state


class _Round:
    __slots__ = ("mask", "arrivals", "done", "results", "error", "frames")

    def __init__(self, mask):
        self.mask = mask
        self.arrivals = {}  # lane -> (family, name, payload)
        self.frames = {}  # lane -> calling frame (for messages)
        self.done = False
        self.results = {}
        self.error = None


class _Warp:
    __slots__ = ("index", "cond", "rounds", "exited", "threads", "waiting")

    def __init__(self, index, present):
        self.index = index
        self.cond = threading.Condition()
        self.rounds = {}  # mask -> open _Round
        self.exited = FULL & ~present  # lanes past the end of the block never run
        self.threads = {}  # lane -> BlockThread
        self.waiting = {}  # lane -> _Round it waits in


class BlockWarps:
    """The warps of one simulated block (its ``BlockManager`` holds it as ``_simwarp``)."""

    def __init__(self, block_dim):
        n = int(np.prod(block_dim))
        self.nthreads = n
        self.warps = []
        for w in range((n + WARP - 1) // WARP):
            count = min(WARP, n - w * WARP)
            self.warps.append(_Warp(w, (1 << count) - 1))


def _lanes(bits: int) -> str:
    """'0-15, 20' for a bit set."""
    out, run = [], None
    for lane in range(WARP + 1):
        on = lane < WARP and bits >> lane & 1
        if on and run is None:
            run = lane
        elif not on and run is not None:
            out.append(str(run) if run == lane - 1 else f"{run}-{lane - 1}")
            run = None
    return ", ".join(out) or "none"


def _where(frame) -> str:
    if frame is None:
        return "?"
    return f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"


# ---------------------------------------------------------------------------------------
# the rendezvous


def caller():
    """(the calling simulator thread, its block's :class:`BlockWarps`); WarpError outside a
    simulated kernel."""
    t = threading.current_thread()
    bw = getattr(getattr(t, "_manager", None), "_simwarp", None)
    if bw is None:
        raise WarpError("warp intrinsics can only be called inside a simulated CUDA kernel")
    return t, bw


def collective(family: str, name: str, mask, payload):
    """One lane's part in a ``*_sync`` call: wait for the mask's lanes, return this lane's
    result.  Called by the intrinsic itself (the kernel's frame is two levels up)."""
    t, bw = caller()
    if t.abort:
        raise RuntimeError("abort flag set on warp intrinsic call")
    tid = t.thread_id
    lane, warp = tid % WARP, bw.warps[tid // WARP]
    mask = int(mask) & FULL
    if not mask >> lane & 1:
        raise WarpError(
            f"{name}(mask={mask:#010x}) called by lane {lane} (thread {tid}), which "
            "is not in the mask: in CUDA every calling lane must be in its mask"
        )
    frame = sys._getframe(2)
    with warp.cond:
        rnd = warp.rounds.get(mask)
        if rnd is None:
            rnd = warp.rounds[mask] = _Round(mask)
        rnd.arrivals[lane] = (family, name, payload)
        rnd.frames[lane] = frame
        if not _try_finish(t, warp, rnd):
            warp.waiting[lane] = rnd
            suspicious = 0
            try:
                while not rnd.done:
                    warp.cond.wait(POLL_S)
                    if rnd.done:
                        break
                    if t.abort:
                        raise RuntimeError("abort flag set while waiting in a warp intrinsic")
                    suspicious = suspicious + 1 if _deadlocked(warp) else 0
                    if suspicious >= 2:
                        raise WarpError(_deadlock_message(t, warp, rnd, name))
            finally:
                warp.waiting.pop(lane, None)
        if rnd.error:
            raise WarpError(rnd.error)
        return rnd.results.pop(lane)


def lane_exited(t) -> None:
    """Mark ``t``'s lane exited: rounds that only waited for it complete."""
    t._simwarp_exited = True
    bw = getattr(t._manager, "_simwarp", None)
    if bw is not None:
        warp = bw.warps[t.thread_id // WARP]
        with warp.cond:
            warp.exited |= 1 << (t.thread_id % WARP)
            for rnd in list(warp.rounds.values()):
                _try_finish(t, warp, rnd)
            warp.cond.notify_all()


def _try_finish(t, warp, rnd) -> bool:
    """Complete ``rnd`` if every needed lane arrived (caller holds warp.cond)."""
    if rnd.done:
        return True
    arrived = 0
    for lane in rnd.arrivals:
        arrived |= 1 << lane
    if arrived != rnd.mask & ~warp.exited:
        return False
    _finish(t, warp, rnd, arrived)
    return True


def _finish(t, warp, rnd, arrived):
    families = {a[0] for a in rnd.arrivals.values()}
    if len(families) > 1:
        calls = "; ".join(
            f"lane {lane}: {a[1]} at {_where(rnd.frames[lane])}"
            for lane, a in sorted(rnd.arrivals.items())
        )
        rnd.error = (
            f"lanes of warp {warp.index} met with mask {rnd.mask:#010x} in different "
            f"warp intrinsics ({calls}): all lanes of a *_sync call must make the same "
            "call"
        )
    else:
        compute = _COMPUTE[families.pop()]
        try:
            compute(warp, rnd, arrived)
        except Exception as exc:  # noqa: BLE001 - reported to every lane of the round
            rnd.error = f"{type(exc).__name__} in a warp intrinsic: {exc}"
    rnd.done = True
    if warp.rounds.get(rnd.mask) is rnd:
        del warp.rounds[rnd.mask]
    warp.cond.notify_all()
    if _listeners and not rnd.error:
        block = tuple(t.blockIdx)
        name = next(iter(rnd.arrivals.values()))[1]
        event = {
            "block": block,
            "warp": warp.index,
            "kind": next(iter(rnd.arrivals.values()))[0],
            "name": name,
            "mask": rnd.mask,
            "lanes": arrived,
            "sites": {lane: (f.f_code.co_filename, f.f_lineno) for lane, f in rnd.frames.items()},
        }
        for fn in list(_listeners):
            fn(event)


def _shfl_results(warp, rnd, arrived):
    for lane, (_f, name, (mode, value, b)) in rnd.arrivals.items():
        b5 = int(b) & 31
        if mode == "idx":
            src, ok = b5, True
        elif mode == "up":
            src = lane - b5
            ok = src >= 0
        elif mode == "down":
            src = lane + b5
            ok = src < WARP
        else:  # xor
            src, ok = lane ^ b5, True
        if not ok:
            rnd.results[lane] = value
        elif src in rnd.arrivals:
            rnd.results[lane] = rnd.arrivals[src][2][1]
        else:
            rnd.results[lane] = value
            why = "has exited" if warp.exited >> src & 1 else "is not in the mask"
            _note(
                f"{name}: lane {lane} of warp {warp.index} read lane {src}, which {why} "
                f"(undefined in CUDA; the simulator returned the caller's own value) "
                f"at {_where(rnd.frames[lane])}"
            )


def _vote_results(warp, rnd, arrived):
    ballot = 0
    for lane, (_f, _n, (_mode, pred)) in rnd.arrivals.items():
        if pred:
            ballot |= 1 << lane
    for lane, (_f, _n, (mode, _pred)) in rnd.arrivals.items():
        if mode == "ballot":
            rnd.results[lane] = np.uint32(ballot).view(np.int32)
        elif mode == "all":
            rnd.results[lane] = ballot == arrived
        elif mode == "any":
            rnd.results[lane] = ballot != 0
        else:  # eq
            rnd.results[lane] = ballot in (0, arrived)


def _match_results(warp, rnd, arrived):
    values = {lane: a[2][1] for lane, a in rnd.arrivals.items()}
    for lane, (_f, _n, (mode, value)) in rnd.arrivals.items():
        same = 0
        for other, v in values.items():
            if v == value:
                same |= 1 << other
        if mode == "any":
            rnd.results[lane] = np.uint32(same).view(np.int32)
        else:
            ok = same == arrived
            rnd.results[lane] = (np.uint32(arrived if ok else 0).view(np.int32), ok)


def _sync_results(warp, rnd, arrived):
    for lane in rnd.arrivals:
        rnd.results[lane] = None


_COMPUTE = {
    "shfl": _shfl_results,
    "vote": _vote_results,
    "match": _match_results,
    "sync": _sync_results,
}


def _stuck(warp, lane) -> bool:
    th = warp.threads.get(lane)
    if th is None:  # not started yet: it will come
        return False
    if getattr(th, "_simwarp_exited", False):
        return False
    if th.syncthreads_blocked:
        return True
    rnd = warp.waiting.get(lane)
    return rnd is not None and not rnd.done


def _deadlocked(warp) -> bool:
    """True when no missing lane of any open round can still arrive (caller holds the lock)."""
    if not warp.rounds:
        return False
    for rnd in warp.rounds.values():
        need = rnd.mask & ~warp.exited
        for lane in range(WARP):
            if need >> lane & 1 and lane not in rnd.arrivals and not _stuck(warp, lane):
                return False
    return True


def _deadlock_message(t, warp, rnd, name) -> str:
    need = rnd.mask & ~warp.exited
    missing = [lane for lane in range(WARP) if need >> lane & 1 and lane not in rnd.arrivals]
    arrived = sum(1 << lane for lane in rnd.arrivals)
    where = []
    sync = sum(
        1 << lane
        for lane in missing
        if warp.threads.get(lane) is not None and warp.threads[lane].syncthreads_blocked
    )
    if sync:
        where.append(f"lanes {_lanes(sync)} are in syncthreads()")
    for other in warp.rounds.values():
        if other is rnd:
            continue
        bits = sum(1 << lane for lane in missing if lane in other.arrivals)
        if bits:
            lane0 = next(lane for lane in missing if lane in other.arrivals)
            where.append(
                f"lanes {_lanes(bits)} wait in {other.arrivals[lane0][1]}"
                f"(mask={other.mask:#010x}) at {_where(other.frames[lane0])}"
            )
    lane = t.thread_id % WARP
    return (
        f"deadlock in warp {warp.index} of block {tuple(t.blockIdx)}: lanes "
        f"{_lanes(arrived)} wait in {name}(mask={rnd.mask:#010x}) at "
        f"{_where(rnd.frames[lane])}, but {'; '.join(where) or 'the others never come'}. "
        "Every lane named in the mask that has not exited must reach the same warp call."
    )
