"""Races, uninitialized shared reads and partial syncthreads in one traced launch.

Reads a :class:`course.sim.trace.Trace` (``records``, ``arrays``, ``threads``, ``grid``,
``block``, ``line``) as :mod:`course.sim.trace_analysis` does; runs no kernel.

Definitions
- *Barrier epoch*: the number of ``syncthreads`` the thread has passed.  Two accesses of
  different threads of one block to the same address, at least one a write and not both
  atomic, race if they are in the same epoch (and, inside one warp, not separated by a
  ``syncwarp``).  Global memory: accesses from different blocks always race (no ordering
  between blocks exists within a launch).
- *Uninitialized*: a shared-memory read of an address that no thread of the block wrote
  before it (earlier epoch, or earlier in the same thread).
- *Partial syncthreads*: threads of one block that passed different numbers of barriers, or
  met at a barrier from different source lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .trace_analysis import ATOMIC, READ, WRITE

_KINDS = ("reads", "writes", "atomically updates")


@dataclass
class Problem:
    """One finding: kind is 'race', 'uninitialized' or 'syncthreads' (or 'warp')."""

    kind: str
    message: str
    array: str = ""
    threads: tuple = ()  # ((block, thread), (block, thread)) for races
    lines: tuple = ()  # source lines involved

    def __str__(self):
        return self.message


# ---------------------------------------------------------------------------------------
# problem finding: races, uninitialized shared reads, partial syncthreads


def _who(tr, blk, tid) -> str:
    """'thread 5 of block 2' (tuples only for the dimensions the launch uses)."""
    bx, by, bz = tr.block
    t = (tid % bx, tid // bx % by, tid // (bx * by))
    ts = str(t[0]) if by == bz == 1 else str(t if bz > 1 else t[:2])
    bs = str(blk[0]) if tr.grid[1:] == (1, 1) else str(blk if tr.grid[2] > 1 else blk[:2])
    return f"thread {ts} of block {bs}"


def _elem(tr, aid, off) -> str:
    """'x[3, 4]': the element of array ``aid`` at byte offset ``off``."""
    a = tr.arrays[aid]
    idx = (
        np.unravel_index(off // a.itemsize, a.shape)
        if off // a.itemsize < np.prod(a.shape)
        else (off // a.itemsize,)
    )
    return f"{a.name}[{', '.join(str(int(i)) for i in idx)}]"


def _conflict(x, y) -> bool:
    """x, y: (block, tid, kind, epoch, wepoch, site, seq); True if they race."""
    if x[0] == y[0] and x[1] == y[1]:
        return False
    if (x[2] == READ and y[2] == READ) or (x[2] == ATOMIC and y[2] == ATOMIC):
        return False
    if x[0] == y[0]:
        if x[3] != y[3]:
            return False
        if x[1] // 32 == y[1] // 32 and x[4] != y[4]:
            return False
    return True


def find_problems(tr) -> list:
    """Races, uninitialized shared reads, partial syncthreads, warp notes: list[Problem]."""
    locs = {}
    for blk, tid, aid, off, kind, ep, wep, sid, _k, seq in tr.records:
        key = (aid, blk if tr.arrays[aid].space == "shared" else None, off)
        locs.setdefault(key, set()).add((blk, tid, kind, ep, wep, sid, seq))
    problems, seen_race, seen_uninit = [], {}, {}
    for (aid, blk, off), accs in locs.items():
        shared = blk is not None
        if shared:
            _uninit(tr, aid, off, accs, seen_uninit)
        plain = [a for a in accs if a[2] != ATOMIC]
        if not plain or all(a[2] == READ for a in accs):
            continue
        if len({(a[0], a[1]) for a in accs}) < 2:
            continue
        hit = next(((p, o) for p in plain for o in accs if _conflict(p, o)), None)
        if hit is None:
            continue
        p, o = hit
        key = (aid, frozenset((p[5], o[5])), frozenset((p[2], o[2])))
        if key in seen_race:
            seen_race[key][1] += 1
            continue
        space = "shared" if shared else "global"
        when = (
            f"between the same two syncthreads (barrier epoch {p[3]})"
            if p[0] == o[0]
            else "from different blocks (blocks are not ordered within a launch)"
        )
        msg = (
            f"race on {space} {_elem(tr, aid, off)} {when}: {_who(tr, p[0], p[1])} "
            f"{_KINDS[p[2]]} it at {tr.line(p[5])}; {_who(tr, o[0], o[1])} {_KINDS[o[2]]} "
            f"it at {tr.line(o[5])}"
        )
        prob = Problem(
            "race",
            msg,
            tr.arrays[aid].name,
            ((p[0], p[1]), (o[0], o[1])),
            (tr.line(p[5]), tr.line(o[5])),
        )
        seen_race[key] = [prob, 1]
    for prob, n in seen_race.values():
        if n > 1:
            prob.message += f" (the same two lines race at {n - 1} more place(s))"
        problems.append(prob)
    for prob, n in seen_uninit.values():
        if n > 1:
            prob.message += f" ({n} such reads)"
        problems.append(prob)
    problems += _barrier_problems(tr)
    problems += [Problem("warp", n) for n in tr.warp_notes]
    return problems


def _uninit(tr, aid, off, accs, seen):
    """Record in ``seen`` the reads of one shared element that no earlier write covers."""
    writes = [a for a in accs if a[2] != READ]
    for r in accs:
        if r[2] == WRITE:
            continue
        ok = any(
            w[3] < r[3]
            or (w[1] == r[1] and w[6] < r[6])
            or (w[3] == r[3] and w[1] != r[1] and w[2] == WRITE)
            for w in writes
        )
        if ok:
            continue
        key = (aid, r[5])
        if key in seen:
            seen[key][1] += 1
            continue
        msg = (
            f"uninitialized shared read: {_who(tr, r[0], r[1])} {_KINDS[r[2]]} "
            f"{_elem(tr, aid, off)} at {tr.line(r[5])}, but no thread of its block wrote "
            "that element before (shared memory starts with garbage)"
        )
        seen[key] = [
            Problem("uninitialized", msg, tr.arrays[aid].name, ((r[0], r[1]),), (tr.line(r[5]),)),
            1,
        ]


def _barrier_problems(tr) -> list:
    """Partial or divergent syncthreads (the first block that has one)."""
    nt = int(np.prod(tr.block))
    out = []
    blocks = {}
    for (blk, tid), st in tr.threads.items():
        blocks.setdefault(blk, {})[tid] = st["barriers"]
    for blk, bars in blocks.items():
        counts = [len(bars.get(t, ())) for t in range(nt)]
        most = max(counts)
        if most and min(counts) < most:
            short = [t for t in range(nt) if counts[t] < most]
            full = next(t for t in range(nt) if counts[t] == most)
            sid = bars[full][counts[short[0]]]
            out.append(
                Problem(
                    "syncthreads",
                    (
                        f"partial syncthreads in block {blk}: {len(short)} of {nt} threads (e.g. "
                        f"{_who(tr, blk, short[0])}) never reached the syncthreads() at {tr.line(sid)} "
                        "- every thread of a block must reach each syncthreads (no early return, no "
                        "syncthreads inside a branch only some threads take)"
                    ),
                    lines=(tr.line(sid),),
                )
            )
            break
        for i in range(most):
            sites = {b[i] for b in bars.values() if len(b) > i}
            if len(sites) > 1:
                out.append(
                    Problem(
                        "syncthreads",
                        (
                            f"divergent syncthreads in block {blk}: threads met at barrier {i + 1} from "
                            f"different lines ({'; '.join(tr.line(s) for s in sorted(sites))})"
                        ),
                        lines=tuple(tr.line(s) for s in sorted(sites)),
                    )
                )
                break
        if out:
            break
    return out
