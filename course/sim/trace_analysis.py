"""What course.sim.trace counts from the recorded accesses of one launch.

``course.sim.trace`` records; this module reads a :class:`course.sim.trace.Trace` (its ``records``,
``arrays``, ``sites``, ``threads``, ``grid``, ``block``) and never runs a kernel.  Finding
races, uninitialized shared reads and partial syncthreads is :mod:`course.sim.trace_problems`;
what a tune exercise's figure counts is :mod:`course.sim.trace_figures`.

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

A record is ``(block, tid, array id, byte offset, kind, epoch, warp epoch, site, k, seq)``
with kind one of :data:`READ`, :data:`WRITE`, :data:`ATOMIC`.
"""

from __future__ import annotations

import linecache

READ, WRITE, ATOMIC = 0, 1, 2
SECTOR, LINE, WORD, BANKS = 32, 128, 4, 32  # bytes, bytes, bytes, banks


def site_line(sites, sid) -> str:
    """'line 5 of kernel: `source`' (line counted from the def, like course.check)."""
    path, lineno, func, first = sites[sid]
    text = linecache.getline(path, lineno).strip()
    return f"line {lineno - first + 1} of {func}: `{text}`"


# ---------------------------------------------------------------------------------------
# warp requests: coalescing and bank conflicts


def requests(tr, space, by_kind: bool = False) -> dict:
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


def words(byte_offsets, itemsize: int) -> set:
    """The 4-byte shared-memory words one warp request touches."""
    return {w for o in set(byte_offsets) for w in range(o // WORD, (o + itemsize - 1) // WORD + 1)}


def wavefronts(byte_offsets, itemsize: int) -> int:
    """Shared-memory wavefronts of one warp request: the most distinct 4-byte words that
    fall in one bank (1 = no conflict; n = an n-way conflict)."""
    per_bank = {}
    for w in words(byte_offsets, itemsize):
        per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
    return max(per_bank.values())


def ideal_wavefronts(byte_offsets, itemsize: int) -> int:
    """Wavefronts the request needs without any conflict: ceil(words / 32)."""
    return -(-len(words(byte_offsets, itemsize)) // BANKS)


def request_counts(tr) -> dict:
    """Loads and stores apart, all arrays of a space together (what a profiler reports):
    {"global": {"ld"|"st": dict(requests, sectors, lines)},
     "shared": {"ld"|"st": dict(requests, wavefronts, ideal)}}."""
    out = {"global": {}, "shared": {}}
    for space, counts in out.items():
        for (aid, *_rest, kind), offs in requests(tr, space, by_kind=True).items():
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
                c["ideal"] += ideal_wavefronts(offs, a.itemsize)
    return out


def coalescing_counts(tr) -> dict:
    """{array name: dict(requests, lanes, sectors, min_sectors, lines, bytes)} (global)."""
    out = {}
    for (aid, *_), offs in requests(tr, "global").items():
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
    for (aid, *_), offs in requests(tr, "shared").items():
        a = tr.arrays[aid]
        ways = wavefronts(offs, a.itemsize)
        ideal = ideal_wavefronts(offs, a.itemsize)
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
