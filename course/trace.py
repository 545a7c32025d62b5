"""The simulator as a microscope: record every memory access of a kernel, then count.

Simulator mode only (``course.MODE == "sim"``)::

    t = course.trace.run(kernel, grid, block, *args)   # launches kernel[grid, block](*args)
    print(t.summary())          # one paragraph: accesses, coalescing, conflicts, problems
    t.coalescing()              # Table per global array: requests, 32-B sectors, 128-B lines
    t.bank_conflicts()          # Table per shared array: requests, wavefronts, replays
    t.races()                   # list[Problem]: data races (both threads + source lines)
    t.problems()                # races + uninitialized shared reads + partial syncthreads
    t.counts("x")               # per-thread (reads, writes) of one array: (blocks, threads)
    fig = t.plot("x")           # read/write count grid + access map coloured by warp

    with course.trace.recording() as traces:     # trace launches made by other code
        host_function(x)                         # -> traces: list[Trace]

Arguments are passed as to a normal launch (numpy arrays are written back; ``cuda.to_device``
arrays work too); ``shared_bytes=`` sets dynamic shared memory.  Each access of an array
argument or of a ``cuda.shared.array`` is recorded with (block, thread, warp, array, index,
read/write/atomic, barrier epoch, source line).

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

Limits: blocks run one after another and the order between blocks is not simulated (only
reported as global races); warps are not executed in lock step (so "requests" are rebuilt as
above, and a warp-synchronous race without ``syncwarp`` is reported, as it should be);
memory fences, ``volatile`` and caches (L1/L2 hits) are not modelled; accesses through
``cuda.local``/``cuda.const`` arrays and through raw pointers are not recorded; a launch of
a few thousand threads takes a few seconds.
"""
from __future__ import annotations

import contextlib
import linecache
import sys
import threading
from dataclasses import dataclass

import numpy as np

from . import runtime

READ, WRITE, ATOMIC = 0, 1, 2
_KINDS = ("reads", "writes", "atomically updates")
SECTOR, LINE, WORD, BANKS = 32, 128, 4, 32


@dataclass
class Problem:
    """One finding: kind is 'race', 'uninitialized' or 'syncthreads' (or 'warp')."""
    kind: str
    message: str
    array: str = ""
    threads: tuple = ()       # ((block, thread), (block, thread)) for races
    lines: tuple = ()         # source lines involved

    def __str__(self):
        return self.message


class _Array:
    """What the tracer knows about one array (argument or shared)."""

    def __init__(self, aid, name, space, base, itemsize):
        self.id, self.name, self.space, self.itemsize = aid, name, space, itemsize
        self.base_ptr = base.__array_interface__["data"][0]
        self.shape = base.shape


class _Traced:
    """Stands in for an array inside the traced kernel and records each element access."""

    __slots__ = ("_a", "_info", "_rec")

    def __init__(self, arr, info, recorder):
        self._a, self._info, self._rec = arr, info, recorder

    def __getitem__(self, idx):
        val = self._a[idx]
        if isinstance(val, np.ndarray):
            return _Traced(val, self._info, self._rec)
        self._rec.access(self, idx, READ, sys._getframe(1))
        return val

    def __setitem__(self, idx, val):
        self._a[idx] = val
        self._rec.access(self, idx, WRITE, sys._getframe(1))

    def __len__(self):
        return len(self._a)

    def __getattr__(self, name):                 # shape, size, ndim, dtype, T, ...
        return getattr(self._a, name)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._a, dtype=dtype)


class _Recorder:
    def __init__(self, block_dim):
        self.block_dim = block_dim
        self.arrays: list[_Array] = []
        self.by_key = {}
        self.sites = {}                          # (file, line) -> site id
        self.site_list = []
        self.logs = []                           # per-thread state
        self.lock = threading.Lock()

    # -- per-thread state, created on first use -------------------------------------------
    def state(self):
        t = threading.current_thread()
        st = getattr(t, "_trace_state", None)
        if st is None:
            b = t.blockIdx
            st = {"block": (b.x, b.y, b.z), "tid": t.thread_id, "log": [], "epoch": 0,
                  "wepoch": 0, "count": {}, "barriers": []}
            t._trace_state = st
            with self.lock:
                self.logs.append(st)
        return st

    def site(self, frame):
        key = (frame.f_code.co_filename, frame.f_lineno)
        sid = self.sites.get(key)
        if sid is None:
            with self.lock:
                sid = self.sites.setdefault(key, len(self.site_list))
                if sid == len(self.site_list):
                    self.site_list.append((key[0], key[1], frame.f_code.co_name,
                                           frame.f_code.co_firstlineno))
        return sid

    def array(self, key, name, space, base):
        info = self.by_key.get(key)
        if info is None:
            with self.lock:
                info = self.by_key.get(key)
                if info is None:
                    info = _Array(len(self.arrays), name, space, base, base.dtype.itemsize)
                    self.arrays.append(info)
                    self.by_key[key] = info
        return info

    # -- one access -----------------------------------------------------------------------
    def access(self, traced, idx, kind, frame):
        a, info = traced._a, traced._info
        st = self.state()
        sid = self.site(frame)
        if not isinstance(idx, tuple):
            idx = (idx,)
        off = a.__array_interface__["data"][0] - info.base_ptr
        for i, s, n in zip(idx, a.strides, a.shape):
            i = int(i)
            off += (i + n if i < 0 else i) * s
        ck = (sid, info.id)
        k = st["count"].get(ck, 0)
        st["count"][ck] = k + 1
        log = st["log"]
        log.append((info.id, off, kind, st["epoch"], st["wepoch"], sid, k, len(log)))


@contextlib.contextmanager
def _patched(rec: _Recorder):
    """Swap the simulator's shared arrays, atomics and barriers for recording ones."""
    from numba.cuda import types
    from numba.cuda.np import numpy_support
    from numba.cuda.simulator import kernel as simkernel
    from numba.cuda.simulator import kernelapi

    shared_cls, atomic_cls = kernelapi.FakeCUDAShared, kernelapi.FakeCUDAAtomic
    thread_cls, module_cls = simkernel.BlockThread, kernelapi.FakeCUDAModule
    saved = {(shared_cls, "array"): shared_cls.array,
             (thread_cls, "syncthreads"): thread_cls.syncthreads}
    if hasattr(module_cls, "syncwarp"):
        saved[(module_cls, "syncwarp")] = module_cls.syncwarp
    orig_shared, orig_sync = shared_cls.array, thread_cls.syncthreads
    orig_syncwarp = saved.get((module_cls, "syncwarp"))

    def shared_array(self, shape, dtype, alignment=None):
        frame = sys._getframe(1)
        if shape == 0:
            arr = orig_shared(self, shape, dtype, alignment)
        else:   # the simulator keys allocations by its caller's line: key by the kernel's
            if isinstance(dtype, types.Type):
                dtype = numpy_support.as_dtype(dtype)
            arr = self._allocations.get((frame.f_code.co_filename, frame.f_lineno))
            if arr is None:
                arr = np.empty(shape, dtype)
                self._allocations[(frame.f_code.co_filename, frame.f_lineno)] = arr
        key = ("dynamic",) if shape == 0 else ("shared", frame.f_code.co_filename,
                                               frame.f_lineno)
        text = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        name = text.split("=")[0].strip() if "=" in text else f"shared@{frame.f_lineno}"
        base = self._dynshared if shape == 0 else arr
        info = rec.array(key, "dynamic shared" if shape == 0 else name, "shared", base)
        return _Traced(arr, info, rec)

    def syncthreads(self):
        st = rec.state()
        st["barriers"].append(rec.site(sys._getframe(2)))
        orig_sync(self)
        st["epoch"] += 1

    def syncwarp(self, mask=0xFFFFFFFF):
        orig_syncwarp(self, mask)
        rec.state()["wepoch"] += 1

    def atomic_wrapper(name):
        orig = getattr(atomic_cls, name)

        def fn(self, array, *rest):
            if isinstance(array, _Traced):
                index = rest[0] if name not in ("compare_and_swap",) else (0,) * array.ndim
                result = orig(self, array._a, *rest)
                rec.access(array, index, ATOMIC, sys._getframe(1))
                return result
            return orig(self, array, *rest)
        return fn

    for name in [n for n in vars(atomic_cls) if not n.startswith("_")]:
        saved[(atomic_cls, name)] = getattr(atomic_cls, name)
        setattr(atomic_cls, name, atomic_wrapper(name))
    shared_cls.array = shared_array
    thread_cls.syncthreads = syncthreads
    if orig_syncwarp is not None:
        module_cls.syncwarp = syncwarp
    try:
        yield
    finally:
        for (cls, name), value in saved.items():
            setattr(cls, name, value)


def _unwrap(arg):
    """numpy array behind a host or simulated device array (or None)."""
    if isinstance(arg, np.ndarray) and arg.ndim > 0:
        return arg
    inner = getattr(arg, "_ary", None)
    return inner if isinstance(inner, np.ndarray) else None


def _traced_launch(kernel, grid, block, shared_bytes, args, launch) -> "Trace":
    """Wrap the array arguments, call ``launch(wrapped_args)`` with recording on."""
    from numba.cuda.errors import normalize_kernel_dimensions

    from . import simwarp

    simwarp.install()
    grid_dim, block_dim = normalize_kernel_dimensions(grid, block)
    rec = _Recorder(block_dim)
    params = list(getattr(kernel, "py_func", kernel).__code__.co_varnames)
    wrapped = []
    for i, arg in enumerate(args):
        arr = _unwrap(arg)
        if arr is None:
            wrapped.append(arg)
            continue
        base = arr
        while isinstance(base.base, np.ndarray):
            base = base.base
        name = params[i] if i < len(params) else f"arg{i}"
        wrapped.append(_Traced(arr, rec.array(("arg", i), name, "global", base), rec))
    notes_before = len(simwarp.NOTES)
    with _patched(rec):
        launch(wrapped)
    return Trace(rec, tuple(grid_dim), tuple(block_dim), getattr(kernel, "__name__", "kernel"),
                 simwarp.NOTES[notes_before:])


def _require_sim():
    if runtime.MODE != "sim":
        raise RuntimeError("course.trace runs kernels in the simulator only; this session "
                           "uses a real GPU (set NUMBA_ENABLE_CUDASIM=1 before import course)")


def run(kernel, grid, block, *args, shared_bytes: int = 0) -> "Trace":
    """Launch ``kernel[grid, block](*args)`` in the simulator, recording every access of its
    array arguments and shared arrays; return a :class:`Trace`."""
    _require_sim()
    return _traced_launch(kernel, grid, block, shared_bytes, args,
                          lambda wrapped: kernel[grid, block, 0, shared_bytes](*wrapped))


@contextlib.contextmanager
def recording():
    """Trace every kernel launched inside the ``with`` block (however it is launched)::

        with course.trace.recording() as traces:
            my_host_function(x)          # launches kernels the usual way
        for t in traces: print(t.summary())
    """
    _require_sim()
    from numba.cuda.simulator import kernel as simkernel

    cls = simkernel.FakeCUDAKernel
    orig_call = cls.__call__
    traces = []

    def call(self, *args):
        if self._device or simkernel._get_kernel_context() is not None:
            return orig_call(self, *args)
        traces.append(_traced_launch(self, self.grid_dim, self.block_dim, self.dynshared_size,
                                     args, lambda wrapped: orig_call(self, *wrapped)))
        return None

    cls.__call__ = call
    try:
        yield traces
    finally:
        cls.__call__ = orig_call


class Trace:
    """The recorded accesses of one launch and the counts derived from them."""

    def __init__(self, rec, grid, block, name, warp_notes=()):
        self.grid, self.block, self.kernel_name = grid, block, name
        self.arrays = rec.arrays
        self.sites = rec.site_list
        self.threads = {(st["block"], st["tid"]): st for st in rec.logs}
        self.nthreads = int(np.prod(grid) * np.prod(block))
        self.warp_notes = list(warp_notes)
        rows = [(st["block"], st["tid"]) + r for st in rec.logs for r in st["log"]]
        # (block, tid, array id, byte offset, kind, epoch, warp epoch, site, k, seq in thread)
        self.records = rows
        self._problems = None

    # -- helpers --------------------------------------------------------------------------
    def _array(self, name):
        for a in self.arrays:
            if a.name == name:
                return a
        raise KeyError(f"no traced array {name!r}; arrays: {[a.name for a in self.arrays]}")

    def line(self, sid) -> str:
        """'line 5 of kernel: `source`' (line counted from the def, like course.check)."""
        path, lineno, func, first = self.sites[sid]
        text = linecache.getline(path, lineno).strip()
        return f"line {lineno - first + 1} of {func}: `{text}`"

    def _requests(self, space):
        """{(array, block, warp, site, k): [(lane, offset, kind)]} for one memory space."""
        ids = {a.id for a in self.arrays if a.space == space}
        out = {}
        for blk, tid, aid, off, kind, _e, _w, sid, k, _s in self.records:
            if aid in ids and kind != ATOMIC:
                out.setdefault((aid, blk, tid // 32, sid, k), []).append(off)
        return out

    # -- coalescing -----------------------------------------------------------------------
    def coalescing_counts(self) -> dict:
        """{array name: dict(requests, lanes, sectors, min_sectors, lines, bytes)} (global)."""
        out = {}
        for (aid, *_), offs in self._requests("global").items():
            a = self.arrays[aid]
            c = out.setdefault(a.name, dict(requests=0, lanes=0, sectors=0, min_sectors=0,
                                             lines=0, bytes=0))
            uniq = set(offs)
            c["requests"] += 1
            c["lanes"] += len(offs)
            c["sectors"] += len({o // SECTOR for o in uniq})
            c["lines"] += len({o // LINE for o in uniq})
            c["bytes"] += len(uniq) * a.itemsize
            c["min_sectors"] += -(-len(uniq) * a.itemsize // SECTOR)
        return out

    def coalescing(self):
        """Table: per global array, sectors per request vs the minimum, efficiency %."""
        from .tables import Table

        t = Table(["array", "requests", "lanes/request", "sectors/request", "minimum",
                   "lines/request", "efficiency %"], title=f"global memory of {self.kernel_name}",
                  note="request = the k-th access of one source line by the lanes of a warp; "
                       "sector = 32 B, line = 128 B; efficiency = bytes used / bytes moved")
        for name, c in self.coalescing_counts().items():
            r = c["requests"]
            t.add(name, r, c["lanes"] / r, c["sectors"] / r, c["min_sectors"] / r, c["lines"] / r,
                  100.0 * c["bytes"] / (SECTOR * c["sectors"]))
        return t

    # -- shared-memory bank conflicts -------------------------------------------------------
    def bank_counts(self) -> dict:
        """{shared array: dict(requests, wavefronts, ideal, replays, max_ways)}."""
        out = {}
        for (aid, *_), offs in self._requests("shared").items():
            a = self.arrays[aid]
            words = set()
            for o in set(offs):
                words.update(range(o // WORD, (o + a.itemsize - 1) // WORD + 1))
            per_bank = {}
            for w in words:
                per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
            ways = max(per_bank.values())
            ideal = -(-len(words) // BANKS)
            c = out.setdefault(a.name, dict(requests=0, wavefronts=0, ideal=0, replays=0,
                                             max_ways=1))
            c["requests"] += 1
            c["wavefronts"] += ways
            c["ideal"] += ideal
            c["replays"] += ways - ideal
            c["max_ways"] = max(c["max_ways"], ways)
        return out

    def bank_conflicts(self):
        """Table: per shared array, wavefronts per request and replays (conflicts)."""
        from .tables import Table

        t = Table(["array", "requests", "wavefronts/request", "ideal", "replays", "worst"],
                  title=f"shared memory of {self.kernel_name}",
                  note="32 banks x 4 B; lanes reading one word = broadcast (no conflict); "
                       "worst = largest n-way conflict of any request")
        for name, c in self.bank_counts().items():
            r = c["requests"]
            t.add(name, r, c["wavefronts"] / r, c["ideal"] / r, c["replays"],
                  f"{c['max_ways']}-way")
        return t

    # -- races and other problems -----------------------------------------------------------
    def races(self) -> list:
        """Data races: list of :class:`Problem` (one per array and pair of source lines)."""
        return [p for p in self.problems() if p.kind == "race"]

    def problems(self) -> list:
        """Races, uninitialized shared reads, partial syncthreads, warp-intrinsic misuse."""
        if self._problems is None:
            self._problems = _find_problems(self)
        return self._problems

    # -- per-thread counts and summary -------------------------------------------------------
    def counts(self, array: str) -> tuple[np.ndarray, np.ndarray]:
        """(reads, writes) per thread of ``array`` (atomics count as writes), shaped
        (grid blocks, threads per block) with threads in linear order."""
        aid = self._array(array).id
        nb, nt = int(np.prod(self.grid)), int(np.prod(self.block))
        reads, writes = np.zeros((nb, nt), int), np.zeros((nb, nt), int)
        gx, gy, _gz = self.grid
        for blk, tid, a, _o, kind, *_ in self.records:
            if a == aid:
                b = blk[0] + gx * (blk[1] + gy * blk[2])
                (reads if kind == READ else writes)[b, tid] += 1
        return reads, writes

    def summary(self) -> str:
        """A few lines: accesses, coalescing, bank conflicts, problems found."""
        lines = [f"{self.kernel_name}: grid {self.grid} x block {self.block} = "
                 f"{self.nthreads} threads, {len(self.records)} recorded accesses"]
        for name, c in self.coalescing_counts().items():
            lines.append(f"  global {name}: {c['requests']} warp requests, "
                         f"{c['sectors'] / c['requests']:.2f} sectors/request "
                         f"(minimum {c['min_sectors'] / c['requests']:.2f}), "
                         f"efficiency {100 * c['bytes'] / (SECTOR * c['sectors']):.0f}%")
        for name, c in self.bank_counts().items():
            lines.append(f"  shared {name}: {c['requests']} warp requests, "
                         f"{c['replays']} bank-conflict replays (worst {c['max_ways']}-way)")
        probs = self.problems()
        kinds = {}
        for p in probs:
            kinds[p.kind] = kinds.get(p.kind, 0) + 1
        lines.append("  problems: " + (", ".join(f"{n} {k}" for k, n in kinds.items())
                                       if probs else "none found"))
        lines += [f"    - {p}" for p in probs[:5]]
        return "\n".join(lines)

    __repr__ = summary

    def plot(self, array: str | None = None, *, max_threads: int = 1024):
        """Figure: per-thread read/write counts of ``array`` and an access map (which warp
        touched which element).  Returns the matplotlib figure (show with course.plots.show)."""
        from .figures.trace import trace_figure

        return trace_figure(self, array, max_threads=max_threads)


# ---------------------------------------------------------------------------------------
# problem finding

def _who(tr, blk, tid) -> str:
    bx, by, bz = tr.block
    t = (tid % bx, tid // bx % by, tid // (bx * by))
    ts = str(t[0]) if by == bz == 1 else str(t if bz > 1 else t[:2])
    bs = str(blk[0]) if tr.grid[1:] == (1, 1) else str(blk if tr.grid[2] > 1 else blk[:2])
    return f"thread {ts} of block {bs}"


def _elem(tr, aid, off) -> str:
    a = tr.arrays[aid]
    idx = np.unravel_index(off // a.itemsize, a.shape) if off // a.itemsize < np.prod(a.shape) \
        else (off // a.itemsize,)
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


def _find_problems(tr) -> list:
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
        when = (f"between the same two syncthreads (barrier epoch {p[3]})" if p[0] == o[0]
                else "from different blocks (blocks are not ordered within a launch)")
        msg = (f"race on {space} {_elem(tr, aid, off)} {when}: {_who(tr, p[0], p[1])} "
               f"{_KINDS[p[2]]} it at {tr.line(p[5])}; {_who(tr, o[0], o[1])} {_KINDS[o[2]]} "
               f"it at {tr.line(o[5])}")
        prob = Problem("race", msg, tr.arrays[aid].name, ((p[0], p[1]), (o[0], o[1])),
                       (tr.line(p[5]), tr.line(o[5])))
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
    writes = [a for a in accs if a[2] != READ]
    for r in accs:
        if r[2] == WRITE:
            continue
        ok = any(w[3] < r[3] or (w[1] == r[1] and w[6] < r[6]) or
                 (w[3] == r[3] and w[1] != r[1] and w[2] == WRITE) for w in writes)
        if ok:
            continue
        key = (aid, r[5])
        if key in seen:
            seen[key][1] += 1
            continue
        msg = (f"uninitialized shared read: {_who(tr, r[0], r[1])} {_KINDS[r[2]]} "
               f"{_elem(tr, aid, off)} at {tr.line(r[5])}, but no thread of its block wrote "
               "that element before (shared memory starts with garbage)")
        seen[key] = [Problem("uninitialized", msg, tr.arrays[aid].name,
                             ((r[0], r[1]),), (tr.line(r[5]),)), 1]


def _barrier_problems(tr) -> list:
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
            out.append(Problem("syncthreads", (
                f"partial syncthreads in block {blk}: {len(short)} of {nt} threads (e.g. "
                f"{_who(tr, blk, short[0])}) never reached the syncthreads() at {tr.line(sid)} "
                "- every thread of a block must reach each syncthreads (no early return, no "
                "syncthreads inside a branch only some threads take)"), lines=(tr.line(sid),)))
            break
        for i in range(most):
            sites = {b[i] for b in bars.values() if len(b) > i}
            if len(sites) > 1:
                out.append(Problem("syncthreads", (
                    f"divergent syncthreads in block {blk}: threads met at barrier {i + 1} from "
                    f"different lines ({'; '.join(tr.line(s) for s in sorted(sites))})"),
                    lines=tuple(tr.line(s) for s in sorted(sites))))
                break
        if out:
            break
    return out
