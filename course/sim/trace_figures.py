"""What a tune exercise's simulator figure is made of: counts over the traces of one launch.

Counted over the launch's own arrays - every global array it passed, by position, whatever
the kernel calls its parameters - and over every way a kernel touches memory: loads, stores
and atomics.  Nothing here depends on a name a student chose, so renaming a parameter, or
reaching an element through an atomic instead of a load, changes no count.

- ``moved``: bytes the global memory transactions moved: 32-byte sectors x 32 of every warp
  request (loads, stores and atomics alike).  A useless read or write adds to it.
- ``read``: global bytes read: the distinct bytes of every warp request that loads (an
  atomic loads its element too), summed over requests: a value read again by a later
  request counts again.
- ``replays``: shared-memory replays (:mod:`course.sim.trace_analysis`'s bank conflicts) plus
  the serialization of shared atomics: an atomic is never a broadcast, so lanes updating
  words of one bank (the same word included) take one wavefront each.
- ``atomics``: global atomic operations.
- ``busiest``: the memory accesses (global and shared) of the busiest thread: a kernel that
  leaves the work to one thread, one element after another, has nothing to conflict or
  race with, and this shows it (padding the other threads cannot lower it).
- :func:`problem`: the first race, uninitialized shared read or partial syncthreads in the
  traces.  A figure from such a launch means nothing: the simulator runs one thread at a
  time, which can make a racy kernel right by luck.

Definitions of a warp request, a sector and a wavefront: :mod:`course.sim.trace_analysis`.
"""

from __future__ import annotations

from .trace_analysis import ATOMIC, BANKS, READ, SECTOR, WORD, bank_counts, sectors, words

FAILS = ("race", "uninitialized", "syncthreads")  # problems that void a figure


def counts(traces) -> dict:
    """{"moved", "read", "replays", "atomics", "busiest"} of ``traces`` (course.sim.trace)."""
    moved = read = replays = atomics = busiest = 0
    for tr in traces:
        busiest = max([busiest] + [len(st["log"]) for st in tr.threads.values()])
        groups: dict = {}
        for blk, tid, aid, off, kind, _e, _w, sid, k, _s in tr.records:
            groups.setdefault((aid, blk, tid // 32, sid, k, kind), []).append(off)
        for (aid, *_rest, kind), offs in groups.items():
            a = tr.arrays[aid]
            if a.space == "global":
                moved += SECTOR * sectors(offs)
                if kind in (READ, ATOMIC):
                    read += len(set(offs)) * a.itemsize
                if kind == ATOMIC:
                    atomics += len(offs)
            elif kind == ATOMIC:
                replays += atomic_replays(offs, a.itemsize)
        replays += sum(c["replays"] for c in bank_counts(tr).values())
    return {
        "moved": moved,
        "read": read,
        "replays": replays,
        "atomics": atomics,
        "busiest": busiest,
    }


def atomic_replays(byte_offsets, itemsize: int) -> int:
    """Extra wavefronts of one warp's shared-memory atomic request: every lane's update is
    its own access (no broadcast), so the busiest bank takes one wavefront per lane."""
    per_bank: dict = {}
    for o in byte_offsets:  # one entry per lane, repeats kept
        for w in range(o // WORD, (o + itemsize - 1) // WORD + 1):
            per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
    ideal = -(-len(words(byte_offsets, itemsize)) // BANKS)
    return max(per_bank.values()) - ideal


def problem(traces) -> str | None:
    """The first problem (of :data:`FAILS`) in ``traces``, as a sentence, or None."""
    for tr in traces:
        for p in tr.problems():
            if p.kind in FAILS:
                return f"{p.kind} found by course.sim.trace: {p.message}"
    return None
