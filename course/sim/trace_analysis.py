"""What course.sim.trace computes from the recorded accesses of one launch: counts and problems.

``course.sim.trace`` records; this module reads a :class:`course.sim.trace.Trace` (its ``records``,
``arrays``, ``sites``, ``threads``, ``grid``, ``block``) and never runs a kernel.

Definitions
- *Warp request*: the simulator runs threads one after another, not in lock step, so the
  tracer rebuilds what a warp would issue together: the k-th execution of a given source
  line on a given array by each lane of a warp (same block) forms one request.  Lanes that
  skip the line (divergence) are simply absent from it; ``lanes`` counts those present.
- *Coalescing* (global memory): per request, the distinct 32-byte sectors and 128-byte lines
  touched, addresses counted from the start of the allocation (assumed 256-byte aligned, as
  cudaMalloc does).  Minimum = ceil(distinct bytes / 32).  Efficiency = distinct bytes /
  (sectors x 32).  Atomics are counted separately, not in these numbers.
- *Bank conflicts* (shared memory): 32 banks of 4-byte words, word w in bank w % 32; a request
  needs as many wavefronts as the largest number of *distinct* words in one bank (lanes
  reading the same word are a broadcast, not a conflict); replays = wavefronts - ideal, with
  ideal = ceil(distinct words / 32).  Addresses count from the start of each shared array.
- *Barrier epoch*: the number of ``syncthreads`` the thread has passed.  Two accesses of
  different threads of one block to the same address, at least one a write and not both
  atomic, race if they are in the same epoch (and, inside one warp, not separated by a
  ``syncwarp``).  Global memory: accesses from different blocks always race (no ordering
  between blocks exists within a launch).
- *Uninitialized*: a shared-memory read of an address that no thread of the block wrote
  before it (earlier epoch, or earlier in the same thread).
- *Partial syncthreads*: threads of one block that passed different numbers of barriers, or
  met at a barrier from different source lines.

A record is ``(block, tid, array id, byte offset, kind, epoch, warp epoch, site, k, seq)``
with kind one of :data:`READ`, :data:`WRITE`, :data:`ATOMIC`.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass

import numpy as np

READ, WRITE, ATOMIC = 0, 1, 2
_KINDS = ("reads", "writes", "atomically updates")
SECTOR, LINE, WORD, BANKS = 32, 128, 4, 32  # bytes, bytes, bytes, banks


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


def site_line(sites, sid) -> str:
    """'line 5 of kernel: `source`' (line counted from the def, like course.check)."""
    path, lineno, func, first = sites[sid]
    text = linecache.getline(path, lineno).strip()
    return f"line {lineno - first + 1} of {func}: `{text}`"


# ---------------------------------------------------------------------------------------
# warp requests: coalescing and bank conflicts


def _requests(tr, space, by_kind: bool = False) -> dict:
    """{(array, block, warp, site, k[, kind]): [offset, ...]} for one memory space (no
    atomics); ``by_kind`` keeps loads and stores apart, as a profiler counts them."""
    ids = {a.id for a in tr.arrays if a.space == space}
    out = {}
    for blk, tid, aid, off, kind, _e, _w, sid, k, _s in tr.records:
        if aid in ids and kind != ATOMIC:
            key = (aid, blk, tid // 32, sid, k) + ((kind,) if by_kind else ())
            out.setdefault(key, []).append(off)
    return out


def sectors(byte_offsets) -> int:
    """32-byte sectors one warp request touches (its lanes' byte offsets, 4-byte items)."""
    return len({o // SECTOR for o in set(byte_offsets)})


def _words(byte_offsets, itemsize: int) -> set:
    """The 4-byte shared-memory words one warp request touches."""
    return {w for o in set(byte_offsets) for w in range(o // WORD, (o + itemsize - 1) // WORD + 1)}


def wavefronts(byte_offsets, itemsize: int) -> int:
    """Shared-memory wavefronts of one warp request: the most distinct 4-byte words that
    fall in one bank (1 = no conflict; n = an n-way conflict)."""
    per_bank = {}
    for w in _words(byte_offsets, itemsize):
        per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
    return max(per_bank.values())


def _ideal(byte_offsets, itemsize: int) -> int:
    """Wavefronts the request needs without any conflict: ceil(words / 32)."""
    return -(-len(_words(byte_offsets, itemsize)) // BANKS)


def request_counts(tr) -> dict:
    """Loads and stores apart, all arrays of a space together (what a profiler reports):
    {"global": {"ld"|"st": dict(requests, sectors, lines)},
     "shared": {"ld"|"st": dict(requests, wavefronts, ideal)}}."""
    out = {"global": {}, "shared": {}}
    for space, counts in out.items():
        for (aid, *_rest, kind), offs in _requests(tr, space, by_kind=True).items():
            a = tr.arrays[aid]
            c = counts.setdefault(
                "ld" if kind == READ else "st",
                dict(requests=0, sectors=0, lines=0, wavefronts=0, ideal=0),
            )
            c["requests"] += 1
            if space == "global":
                c["sectors"] += sectors(offs)
                c["lines"] += len({o // LINE for o in set(offs)})
            else:
                c["wavefronts"] += wavefronts(offs, a.itemsize)
                c["ideal"] += _ideal(offs, a.itemsize)
    return out


def coalescing_counts(tr) -> dict:
    """{array name: dict(requests, lanes, sectors, min_sectors, lines, bytes)} (global)."""
    out = {}
    for (aid, *_), offs in _requests(tr, "global").items():
        a = tr.arrays[aid]
        c = out.setdefault(
            a.name, dict(requests=0, lanes=0, sectors=0, min_sectors=0, lines=0, bytes=0)
        )
        uniq = set(offs)
        c["requests"] += 1
        c["lanes"] += len(offs)
        c["sectors"] += sectors(uniq)
        c["lines"] += len({o // LINE for o in uniq})
        c["bytes"] += len(uniq) * a.itemsize
        c["min_sectors"] += -(-len(uniq) * a.itemsize // SECTOR)
    return out


def coalescing_table(tr):
    """Table: per global array, sectors per request vs the minimum, efficiency %."""
    from ..measure.tables import Table

    t = Table(
        [
            "array",
            "requests",
            "lanes/request",
            "sectors/request",
            "minimum",
            "lines/request",
            "efficiency %",
        ],
        title=f"global memory of {tr.kernel_name}",
        note="request = the k-th access of one source line by the lanes of a warp; "
        "sector = 32 B, line = 128 B; efficiency = bytes used / bytes moved",
    )
    for name, c in coalescing_counts(tr).items():
        r = c["requests"]
        t.add(
            name,
            r,
            c["lanes"] / r,
            c["sectors"] / r,
            c["min_sectors"] / r,
            c["lines"] / r,
            100.0 * c["bytes"] / (SECTOR * c["sectors"]),
        )
    return t


def bank_counts(tr) -> dict:
    """{shared array: dict(requests, wavefronts, ideal, replays, max_ways)}."""
    out = {}
    for (aid, *_), offs in _requests(tr, "shared").items():
        a = tr.arrays[aid]
        ways = wavefronts(offs, a.itemsize)
        ideal = _ideal(offs, a.itemsize)
        c = out.setdefault(a.name, dict(requests=0, wavefronts=0, ideal=0, replays=0, max_ways=1))
        c["requests"] += 1
        c["wavefronts"] += ways
        c["ideal"] += ideal
        c["replays"] += ways - ideal
        c["max_ways"] = max(c["max_ways"], ways)
    return out


def bank_table(tr):
    """Table: per shared array, wavefronts per request and replays (conflicts)."""
    from ..measure.tables import Table

    t = Table(
        ["array", "requests", "wavefronts/request", "ideal", "replays", "worst"],
        title=f"shared memory of {tr.kernel_name}",
        note="32 banks x 4 B; lanes reading one word = broadcast (no conflict); "
        "worst = largest n-way conflict of any request",
    )
    for name, c in bank_counts(tr).items():
        r = c["requests"]
        t.add(name, r, c["wavefronts"] / r, c["ideal"] / r, c["replays"], f"{c['max_ways']}-way")
    return t


def summary(tr) -> str:
    """A few lines: accesses, coalescing, bank conflicts, problems found."""
    lines = [
        f"{tr.kernel_name}: grid {tr.grid} x block {tr.block} = "
        f"{tr.nthreads} threads, {len(tr.records)} recorded accesses"
    ]
    for name, c in coalescing_counts(tr).items():
        lines.append(
            f"  global {name}: {c['requests']} warp requests, "
            f"{c['sectors'] / c['requests']:.2f} sectors/request "
            f"(minimum {c['min_sectors'] / c['requests']:.2f}), "
            f"efficiency {100 * c['bytes'] / (SECTOR * c['sectors']):.0f}%"
        )
    for name, c in bank_counts(tr).items():
        lines.append(
            f"  shared {name}: {c['requests']} warp requests, "
            f"{c['replays']} bank-conflict replays (worst {c['max_ways']}-way)"
        )
    probs = tr.problems()
    kinds = {}
    for p in probs:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    lines.append(
        "  problems: "
        + (", ".join(f"{n} {k}" for k, n in kinds.items()) if probs else "none found")
    )
    lines += [f"    - {p}" for p in probs[:5]]
    return "\n".join(lines)


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
