"""The simulator as a microscope: record every memory access of a kernel, then count.

Simulator mode only (``course.MODE == "sim"``)::

    t = course.sim.trace.run(kernel, grid, block, *args)   # launches kernel[grid, block](*args)
    print(t.summary())          # one paragraph: accesses, coalescing, conflicts, problems
    t.coalescing()              # Table per global array: requests, 32-B sectors, 128-B lines
    t.bank_conflicts()          # Table per shared array: requests, wavefronts, replays
    t.races()                   # list[Problem]: data races (both threads + source lines)
    t.problems()                # races + uninitialized shared reads + partial syncthreads
    t.counts("x")               # per-thread (reads, writes) of one array: (blocks, threads)

The drawing of a trace (read/write count grid, access map coloured by warp) is display, one
floor up: ``course.show.figures.trace.trace_figure(t, "x")``.  This module imports nothing
from there.

    with course.sim.trace.recording() as traces:   # trace launches made by other code
        host_function(x)                           # -> traces: list[Trace]

Arguments are passed as to a normal launch (numpy arrays are written back; ``cuda.to_device``
arrays work too); ``shared_bytes=`` sets dynamic shared memory.  Each access of an array
argument or of a ``cuda.shared.array`` is recorded with (block, thread, warp, array, index,
read/write/atomic, barrier epoch, source line), also through arrays derived from them (slices,
``.T``, ``.reshape()``, ``.flat``, ...: mapped to the addresses they touch); a way in that
cannot be mapped (a copy, ``np.asarray(x)``, ``x.sum()``) stops the kernel with a
:class:`TraceBypass` that names the array (:mod:`course.sim.trace_arrays`).

The counting lives in :mod:`course.sim.trace_analysis` (definitions of a warp request,
coalescing, bank conflicts), the problem finding in :mod:`course.sim.trace_problems` (barrier
epochs, races, uninitialized reads, partial syncthreads) and what a tune exercise's figure
counts in :mod:`course.sim.trace_figures`.

Checked against the hardware (``python -m course validate``, report in assets/profiles/):
for 14 of the lessons' kernels on an H100, the traced sectors per global request and the
shared-memory wavefronts and bank conflicts per launch equal Nsight Compute's counts.  The
hardware's *per-request* shared figures can be lower: it also counts an instruction that a
warp executes with every lane predicated off as a request (with no wavefront); the tracer
sees only the accesses lanes make.  Not modelled at all: caches (L1/L2 hits, DRAM bytes),
the compiler's instruction width (a 64/128-bit load is one request on the GPU), timing,
occupancy and stalls - ``course.profile`` shows those on a GPU only.

Limits: blocks run one after another and the order between blocks is not simulated (only
reported as global races); warps are not executed in lock step (so "requests" are rebuilt, see
course.sim.trace_analysis, and a warp-synchronous race without ``syncwarp`` is reported, as it
should be); memory fences, ``volatile`` and caches (L1/L2 hits) are not modelled; accesses
through ``cuda.local``/``cuda.const`` arrays and through raw pointers are not recorded; a
launch of a few thousand threads takes a few seconds.
"""

from __future__ import annotations

import contextlib
import linecache
import sys
import threading

import numpy as np

from ..platform import runtime
from . import trace_analysis, trace_ops, trace_problems
from .trace_analysis import ATOMIC, READ
from .trace_arrays import TraceBypass, Traced
from .trace_problems import Problem

__all__ = ["run", "recording", "Trace", "Problem", "TraceBypass"]


class _Array:
    """What the tracer knows about one array (argument or shared)."""

    def __init__(self, aid, name, space, base, itemsize):
        # itemsize: of the array the kernel indexes (dynamic shared memory is a typed view
        # of a byte buffer); shape: of the allocation, in those items
        self.id, self.name, self.space, self.itemsize = aid, name, space, itemsize
        self.shape = base.shape if base.dtype.itemsize == itemsize else (base.nbytes // itemsize,)


class _Recorder:
    def __init__(self, block_dim):
        self.block_dim = block_dim
        self.arrays: list[_Array] = []
        self.by_key = {}
        self.sites = {}  # (file, line) -> site id
        self.site_list = []
        self.logs = []  # per-thread state
        self.states: dict = {}  # (block x, y, z, thread id) -> its state in logs
        self.lock = threading.Lock()

    # -- per-thread state, created on first use -------------------------------------------
    def state(self):
        t = threading.current_thread()  # one thread may run a whole block (scheduler.py)
        b = t.blockIdx
        key = (b.x, b.y, b.z, t.thread_id)
        st = self.states.get(key)
        if st is None:
            st = {
                "block": (b.x, b.y, b.z),
                "tid": t.thread_id,
                "log": [],
                "epoch": 0,
                "wepoch": 0,
                "count": {},
                "barriers": [],
            }
            with self.lock:
                self.states[key] = st
                self.logs.append(st)
        return st

    def site(self, frame):
        key = (frame.f_code.co_filename, frame.f_lineno)
        sid = self.sites.get(key)
        if sid is None:
            with self.lock:
                sid = self.sites.setdefault(key, len(self.site_list))
                if sid == len(self.site_list):
                    self.site_list.append(
                        (key[0], key[1], frame.f_code.co_name, frame.f_code.co_firstlineno)
                    )
        return sid

    def array(self, key, name, space, base, itemsize):
        info = self.by_key.get(key)
        if info is None:
            with self.lock:
                info = self.by_key.get(key)
                if info is None:
                    info = _Array(len(self.arrays), name, space, base, itemsize)
                    self.arrays.append(info)
                    self.by_key[key] = info
        return info

    # -- one access -----------------------------------------------------------------------
    def access(self, info, off, kind, frame):
        """One access of ``info``'s array at byte offset ``off`` (trace_arrays.Traced)."""
        st = self.state()
        sid = self.site(frame)
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
    saved = {
        (shared_cls, "array"): shared_cls.array,
        (thread_cls, "syncthreads"): thread_cls.syncthreads,
    }
    if hasattr(module_cls, "syncwarp"):
        saved[(module_cls, "syncwarp")] = module_cls.syncwarp
    orig_shared, orig_sync = shared_cls.array, thread_cls.syncthreads
    orig_syncwarp = saved.get((module_cls, "syncwarp"))

    def shared_array(self, shape, dtype, alignment=None):
        frame = sys._getframe(1)
        if shape == 0:
            arr = orig_shared(self, shape, dtype, alignment)
        else:  # the simulator keys allocations by its caller's line: key by the kernel's
            if isinstance(dtype, types.Type):
                dtype = numpy_support.as_dtype(dtype)
            arr = self._allocations.get((frame.f_code.co_filename, frame.f_lineno))
            if arr is None:
                arr = np.empty(shape, dtype)
                self._allocations[(frame.f_code.co_filename, frame.f_lineno)] = arr
        key = ("dynamic",) if shape == 0 else ("shared", frame.f_code.co_filename, frame.f_lineno)
        text = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
        name = text.split("=")[0].strip() if "=" in text else f"shared@{frame.f_lineno}"
        base = self._dynshared if shape == 0 else arr
        info = rec.array(
            key, "dynamic shared" if shape == 0 else name, "shared", base, arr.dtype.itemsize
        )
        return Traced(arr, info, rec, base.__array_interface__["data"][0])

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
            if isinstance(array, Traced):
                index = rest[0] if name not in ("compare_and_swap",) else (0,) * array.ndim
                if array.offset(index) is None:
                    raise TraceBypass(array.bypass(f"an atomic at the index {index!r}"))
                result = orig(self, array._a, *rest)
                array.record(index, ATOMIC, sys._getframe(1))
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


def _traced_launch(kernel, grid, block, shared_bytes, args, launch, ops=False) -> Trace:
    """Wrap the array arguments, call ``launch(wrapped_args)`` with recording on."""
    from numba.cuda.errors import normalize_kernel_dimensions

    from . import warp as simwarp

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
        info = rec.array(("arg", i), name, "global", base, arr.dtype.itemsize)
        wrapped.append(Traced(arr, info, rec, base.__array_interface__["data"][0]))
    notes_before = len(simwarp.NOTES)
    counter = trace_ops.counting(kernel) if ops else contextlib.nullcontext({})
    with _patched(rec), counter as ops:
        launch(wrapped)
    name = getattr(kernel, "__name__", "kernel")
    t = Trace(rec, tuple(grid_dim), tuple(block_dim), name, simwarp.NOTES[notes_before:])
    t.ops = trace_ops.per_thread(ops)  # instructions each thread's kernel code ran (ops=True)
    return t


def _require_sim():
    if runtime.MODE != "sim":
        raise RuntimeError(
            "course.sim.trace runs kernels in the simulator only; this session "
            "uses a real GPU (set NUMBA_ENABLE_CUDASIM=1 before import course)"
        )


def run(kernel, grid, block, *args, shared_bytes: int = 0, ops: bool = False) -> Trace:
    """Launch ``kernel[grid, block](*args)`` in the simulator, recording every access of its
    array arguments and shared arrays (``ops``: and counting its instructions, ``.ops``);
    return a :class:`Trace`."""
    _require_sim()
    return _traced_launch(
        kernel,
        grid,
        block,
        shared_bytes,
        args,
        lambda wrapped: kernel[grid, block, 0, shared_bytes](*wrapped),
        ops,
    )


@contextlib.contextmanager
def recording(ops: bool = False):
    """Trace every kernel launched inside the ``with`` block (however it is launched)::

    with course.sim.trace.recording() as traces:
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
        traces.append(
            _traced_launch(
                self,
                self.grid_dim,
                self.block_dim,
                self.dynshared_size,
                args,
                lambda wrapped: orig_call(self, *wrapped),
                ops,
            )
        )
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
        return trace_analysis.site_line(self.sites, sid)

    # -- counts (definitions in course.sim.trace_analysis) --------------------------------------
    def coalescing_counts(self) -> dict:
        """{array name: dict(requests, lanes, sectors, min_sectors, lines, bytes)} (global)."""
        return trace_analysis.coalescing_counts(self)

    def coalescing(self):
        """Table: per global array, sectors per request vs the minimum, efficiency %."""
        return trace_analysis.coalescing_table(self)

    def bank_counts(self) -> dict:
        """{shared array: dict(requests, wavefronts, ideal, replays, max_ways)}."""
        return trace_analysis.bank_counts(self)

    def bank_conflicts(self):
        """Table: per shared array, wavefronts per request and replays (conflicts)."""
        return trace_analysis.bank_table(self)

    # -- races and other problems -----------------------------------------------------------
    def races(self) -> list:
        """Data races: list of :class:`Problem` (one per array and pair of source lines)."""
        return [p for p in self.problems() if p.kind == "race"]

    def problems(self) -> list:
        """Races, uninitialized shared reads, partial syncthreads, warp-intrinsic misuse."""
        if self._problems is None:
            self._problems = trace_problems.find_problems(self)
        return self._problems

    # -- per-thread counts, summary, picture --------------------------------------------------
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
        return trace_analysis.summary(self)

    __repr__ = summary
