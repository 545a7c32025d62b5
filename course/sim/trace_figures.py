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
- ``threads``: the threads the launch ran (grid x block), what a fair share divides by.
- ``requests`` / ``packed``: warp memory requests issued, and the fewest that would carry
  the same lanes' accesses in whole warps (:func:`warp_requests`): a divergent branch that
  idles lanes of many warps raises the first only.  Padding with useless full-warp
  accesses lowers the ratio only by adding to the busiest thread's accesses.
- ``issued``: the bytecode instructions the launch's kernel code ran, every thread together
  (:mod:`course.sim.trace_ops`): arithmetic the memory counts cannot see.
- ``shared_requests``, ``sectors``: warp requests to shared memory, and the global 32-byte
  sectors of ``moved``: what a GPU's own counters count too (``grading/judging/gpu_count.py``
  compares them, per element, with the GPU's run of the same kernel).
- :func:`problem`: the first race, uninitialized shared read or partial syncthreads in the
  traces.  A figure from such a launch means nothing: the simulator runs one thread at a
  time, which can make a racy kernel right by luck.

Definitions of a warp request, a sector and a wavefront: :mod:`course.sim.trace_analysis`.
"""

from __future__ import annotations

from .trace_analysis import ATOMIC, BANKS, READ, SECTOR, WORD, bank_counts, sectors, words

FAILS = ("race", "uninitialized", "syncthreads")  # problems that void a figure


def counts(traces) -> dict:
    """{"moved", "read", "replays", "atomics", "busiest", "threads", "requests", "packed",
    "issued", "shared_requests", "sectors"} of ``traces`` (course.sim.trace)."""
    moved = read = replays = atomics = busiest = threads = issued = shared = 0
    for tr in traces:
        issued += sum(getattr(tr, "ops", ()))
        busiest = max([busiest] + [len(st["log"]) for st in tr.threads.values()])
        threads += _size(tr.grid) * _size(tr.block)
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
            else:
                shared += 1
                if kind == ATOMIC:
                    replays += atomic_replays(offs, a.itemsize)
        replays += sum(c["replays"] for c in bank_counts(tr).values())
    requests, packed = warp_requests(traces)
    return {
        "moved": moved,
        "read": read,
        "replays": replays,
        "atomics": atomics,
        "busiest": busiest,
        "threads": threads,
        "requests": requests,
        "packed": packed,
        "issued": issued,
        "shared_requests": shared,
        "sectors": moved // SECTOR,
    }


def _size(dims) -> int:
    n = 1
    for d in dims if isinstance(dims, tuple | list) else (dims,):
        n *= int(d)
    return n


def warp_requests(traces) -> tuple[int, int]:
    """(warp memory requests issued, the fewest that carry the same lanes' accesses).

    Every memory instruction (global or shared, load, store or atomic) a warp issues is
    one request, whatever number of its 32 lanes take part; lanes of one block that run
    the k-th execution of one source line on one array need only ceil(lanes / 32)
    requests when the active threads are packed into whole warps (Harris' sequential
    addressing: ``if tid < s``), but one per warp they are spread over (a divergent
    branch: ``if tid % (2 * s) == 0``).  requests / packed is 1 for a kernel whose
    branches keep warps whole, and grows with every warp that runs a few lanes."""
    issued = packed = 0
    for tr in traces:
        lanes: dict = {}
        warps: dict = {}
        for blk, tid, aid, _off, kind, _e, _w, sid, k, _s in tr.records:
            key = (blk, aid, sid, k, kind)
            lanes.setdefault(key, set()).add(tid)
            warps.setdefault(key, set()).add(tid // 32)
        issued += sum(len(w) for w in warps.values())
        packed += sum(-(-len(t) // 32) for t in lanes.values())
    return issued, packed


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
