"""Lesson 12 - Thrust's algorithms with numba: generic kernels made from device functions.

Follows the last part of CSE P 524 Lecture 9 (UW, "GPUs, CUDA, Thrust"): host and device
vectors, ``sequence`` / ``fill`` / ``transform`` / ``replace``, functors, ``saxpy_slow`` vs
``saxpy_fast``, the norm as one ``transform_reduce``, fancy iterators and execution policies.

A *functor* is a numba device function (``@cuda.jit(device=True)``).  An *algorithm* is a
kernel factory: it writes one kernel around the functor, numba compiles it once per functor
and argument types, and the result is cached - what Thrust's C++ templates do at compile
time.  Fancy iterators are device functions of the index as well (``counting``,
``constant``, ``transform_iterator``, ``zip``), so ``reduce(plus, transform_iterator(x,
squared), 0.0)`` is one pass over ``x`` with no temporary array.

Contract (``course.kernels.algorithms``)::

    transform(op, *inputs, out=None)            # one or two inputs (arrays or iterators)
    reduce(op, x, init)                         # init combined once; result has init's type
    transform_reduce(unary, binary, x, init)
    sequence(n, start=0, step=1, dtype=np.int64)
    fill(x, value);  replace(x, old, new)       # in place, returns x

numpy arrays in -> numpy arrays out (copied to the GPU and back); device arrays in -> device
arrays out.  Like ``thrust::reduce``, a reduction assumes ``op`` associative and commutative
(the combining order is the GPU's) and ``init`` is combined exactly once.  Every algorithm
takes ``policy="gpu" | "cpu" | "parallel"``: the same functor compiled by ``numba.njit`` for
one CPU core or, with ``parallel=True`` (the OpenMP policy), for all of them.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda
from numba.np.numpy_support import from_dtype

from ..platform import runtime
from .algorithms_iterators import (  # noqa: F401
    Iterator,
    as_iter,
    constant,
    counting,
    cpu_reduce,
    cpu_transform,
    functor,
    is_device,
    multiply_pair,
    reader,
    transform_iterator,
    zip_iterator,
)

NOT_SHOWN = {"maximum", "minimum", "multiply", "negate", "square_root"}   # functors like plus and square
PTX_SIGNATURES = {"sequence_kernel": "void(int64[::1], int64, int64)",
                  "fill_kernel": "void(float32[::1], float32)",
                  "replace_kernel": "void(int32[::1], int32, int32)"}
TPB = 256 if runtime.MODE == "gpu" else 64   # threads per block of every algorithm (the
#                                              simulator runs each thread as a CPU thread)
BLOCKS_PER_SM = 8              # a grid-stride grid: enough blocks to fill the GPU, no more
POLICIES = ("gpu", "cpu", "parallel")


# ---------------------------------------------------------------------------------------
# functors: device functions (Thrust's plus<T>, multiplies<T>, negate<T>, maximum<T>, ...)

@cuda.jit(device=True)
def plus(a, b):
    return a + b


@cuda.jit(device=True)
def squared(x):
    return x * x


@cuda.jit(device=True)
def square_root(x):
    return math.sqrt(x)


@cuda.jit(device=True)
def multiply(a, b):
    return a * b


@cuda.jit(device=True)
def negate(x):
    return -x


@cuda.jit(device=True)
def maximum(a, b):
    return a if a > b else b


@cuda.jit(device=True)
def minimum(a, b):
    return a if a < b else b


@functools.cache
def saxpy_functor(a):
    """Thrust's ``saxpy_functor``: a functor that carries a value (here baked into the
    compiled code: one compile per distinct ``a``, so the functor is cached per ``a`` - a
    new one each call would compile each call)."""
    a = np.float32(a)

    @cuda.jit(device=True)
    def saxpy_op(x, y):
        return a * x + y
    return saxpy_op


# ---------------------------------------------------------------------------------------
# the generic kernels, one per (functors, iterator structure), compiled per dtype by numba

@functools.cache
def transform_kernel(node_a: tuple, node_b, op, slot_b: int):
    ra = reader(node_a, "gpu", 0)
    if node_b is None:
        @cuda.jit
        def transform_1(data, out):
            i = cuda.grid(1)
            while i < out.shape[0]:
                out[i] = op(ra(i, data))
                i += cuda.gridsize(1)
        return transform_1
    rb = reader(node_b, "gpu", slot_b)

    @cuda.jit
    def transform_2(data, out):
        i = cuda.grid(1)
        while i < out.shape[0]:
            out[i] = op(ra(i, data), rb(i, data))
            i += cuda.gridsize(1)
    return transform_2


@functools.cache
def _reduce_kernel(node: tuple, op, dtype: str):
    """Each thread folds its grid-stride elements, four independent reads a step (the memory
    system serves them together: one read at a time leaves the GPU waiting on latency); the
    block folds the threads' values in shared memory (a flag marks a thread that had none:
    nothing stands in for an identity); thread 0 writes the block's value, or, in the
    finishing launch (``last`` = 1), ``op(init, value)``."""
    read, acc_t = reader(node, "gpu", 0), from_dtype(np.dtype(dtype))

    @cuda.jit
    def reduce_blocks(data, n, partial, init, last):
        vals = cuda.shared.array(TPB, acc_t)
        have = cuda.shared.array(TPB, np.int32)
        t = cuda.threadIdx.x
        i, g = cuda.grid(1), cuda.gridsize(1)
        acc = acc_t(0)
        mine = 0
        if i < n:                                   # the thread's first element starts it
            acc = acc_t(read(i, data))
            mine = 1
            i += g
        while i + 3 * g < n:                        # four reads in flight
            a = acc_t(op(acc_t(read(i, data)), acc_t(read(i + g, data))))
            b = acc_t(op(acc_t(read(i + 2 * g, data)), acc_t(read(i + 3 * g, data))))
            acc = acc_t(op(acc, acc_t(op(a, b))))
            i += 4 * g
        while i < n:                                # the tail: fewer than four left
            acc = acc_t(op(acc, acc_t(read(i, data))))
            i += g
        vals[t] = acc
        have[t] = mine
        cuda.syncthreads()
        s = TPB // 2
        while s > 0:
            if t < s and have[t + s]:
                if have[t]:
                    vals[t] = op(vals[t], vals[t + s])
                else:
                    vals[t] = vals[t + s]
                    have[t] = 1
            cuda.syncthreads()
            s //= 2
        if t == 0:
            partial[cuda.blockIdx.x] = op(init, vals[0]) if last else vals[0]
    return reduce_blocks


def _grid(n: int) -> int:
    """Blocks for n elements: no more than fill the GPU (each thread of a grid-stride loop
    then takes several elements: on the H100 as fast as one element a thread, and a
    reduction needs few blocks), never more than the data needs, so every block has work;
    4 in the simulator, where each block is CPU threads."""
    return max(1, min(_most_blocks(), -(-n // TPB)))


@functools.cache
def _most_blocks() -> int:
    if runtime.MODE == "sim":
        return 4
    return BLOCKS_PER_SM * cuda.get_current_device().MULTIPROCESSOR_COUNT


@functools.cache
def _scratch(blocks: int, dtype: str):
    """The per-block partial results of a reduction, allocated once per size and dtype:
    launches on one stream run in order, so the next call may reuse them."""
    return cuda.device_array(blocks, np.dtype(dtype))


# ---------------------------------------------------------------------------------------
# the algorithms

def _on_device(items) -> bool:
    return any(is_device(x) for x in items)


def _device_leaves(leaves):
    return tuple(cuda.to_device(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x
                 for x in leaves)


def _host_leaves(leaves):
    return tuple((x if hasattr(x, "copy_to_host") else cuda.as_cuda_array(x)).copy_to_host()
                 if is_device(x) else x for x in leaves)


def _length(its, out) -> int:
    sizes = {len(x) for it in its for x in it.leaves
             if isinstance(x, np.ndarray) or is_device(x)}
    if out is not None:
        sizes.add(len(out))
    if not sizes:
        raise ValueError("no array gives the length: pass out= (counting and constant "
                         "iterators are endless)")
    return min(sizes)


def _check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, not {policy!r}")


def transform(op, *inputs, out=None, policy: str = "gpu"):
    """out[i] = op(a[i]) or op(a[i], b[i]) (thrust::transform)."""
    _check_policy(policy)
    if len(inputs) not in (1, 2):
        raise ValueError("transform takes one or two inputs")
    its = [as_iter(x) for x in inputs]
    n = _length(its, out)
    device = _on_device([x for it in its for x in it.leaves] + [out])
    if out is None:
        probe = [x for it in its for x in it.leaves if hasattr(x, "dtype")]
        dtype = np.result_type(*[x.dtype for x in probe]) if probe else np.int64
        out = cuda.device_array(n, dtype) if device else np.empty(n, dtype)
    leaves = sum((it.leaves for it in its), ())
    slot_b = len(its[0].leaves)
    nb = its[1].node if len(its) == 2 else None
    if policy != "gpu":
        host_out = out.copy_to_host() if is_device(out) else out
        cpu_transform(its[0].node, nb, op, slot_b, policy == "parallel")(
            _host_leaves(leaves), host_out[:n])
        if is_device(out):
            out.copy_to_device(host_out)
        return out
    d_out = out if is_device(out) else cuda.to_device(out)
    transform_kernel(its[0].node, nb, op, slot_b)[_grid(n), TPB](
        _device_leaves(leaves), d_out if len(d_out) == n else d_out[:n])
    if is_device(out):
        return out
    d_out.copy_to_host(out)
    return out


def reduce(op, x, init, policy: str = "gpu", out=None):
    """init (+) x[0] (+) x[1] (+) ... with (+) = ``op``; the result has ``init``'s type
    (``0`` sums in int64, ``np.float32(0)`` in float32), as in thrust::reduce, which returns
    it to the host (the call waits for the GPU).  ``out``: a one-element device array of
    that type to write the result into instead - nothing waits, as with CUB's DeviceReduce
    or CuPy and PyTorch reductions, whose results stay on the GPU; ``out`` is returned."""
    _check_policy(policy)
    it = as_iter(x)
    n = _length([it], None)
    dtype = np.asarray(init).dtype
    if policy != "gpu":
        chunks = 64 if policy == "parallel" else 1
        value = dtype.type(cpu_reduce(it.node, op, policy == "parallel")(
            _host_leaves(it.leaves), n, dtype.type(init), np.empty(chunks, dtype),
            np.zeros(chunks, np.int64)))
        return value if out is None else _store(out, value)
    if n == 0:
        return dtype.type(init) if out is None else _store(out, dtype.type(init))
    if out is not None and (not is_device(out) or len(out) != 1 or out.dtype != dtype):
        raise ValueError(f"out must be a one-element device array of {dtype} (init's type)")
    blocks = _grid(n)
    partial = _scratch(blocks, dtype.str)
    final = out if out is not None else cuda.device_array(1, dtype)
    init = dtype.type(init)
    _reduce_kernel(it.node, op, dtype.str)[blocks, TPB](_device_leaves(it.leaves), n,
                                                        partial, init, 0)
    _reduce_kernel(("array",), op, dtype.str)[1, TPB]((partial,), blocks, final, init, 1)
    return final if out is not None else final.copy_to_host()[0]


def _store(out, value):
    if is_device(out):
        cuda.as_cuda_array(out).copy_to_device(np.array([value]))
    else:
        out[0] = value
    return out


def transform_reduce(unary, binary, x, init, policy: str = "gpu", out=None):
    """init (+) unary(x[0]) (+) unary(x[1]) ...: one pass, no temporary (a transform
    iterator read by reduce); ``out`` as in :func:`reduce`."""
    return reduce(binary, transform_iterator(x, unary), init, policy=policy, out=out)


def sequence(n: int, start=0, step=1, dtype=np.int64):
    """start, start + step, ... (n values of ``dtype``), made on the GPU, numpy out."""
    if n < 0:
        raise ValueError(f"n must be >= 0 (got {n})")
    out = cuda.device_array(n, np.dtype(dtype))
    if n:
        sequence_kernel[_grid(n), TPB](out, np.dtype(dtype).type(start),
                                        np.dtype(dtype).type(step))
    return out.copy_to_host()


@cuda.jit
def sequence_kernel(out, start, step):
    i = cuda.grid(1)
    while i < out.shape[0]:
        out[i] = start + step * i
        i += cuda.gridsize(1)


@cuda.jit
def fill_kernel(x, value):
    i = cuda.grid(1)
    while i < x.shape[0]:
        x[i] = value
        i += cuda.gridsize(1)


@cuda.jit
def replace_kernel(x, old, new):
    i = cuda.grid(1)
    while i < x.shape[0]:
        if x[i] == old:
            x[i] = new
        i += cuda.gridsize(1)


def _in_place(kernel, x, *args):
    d = x if is_device(x) else cuda.to_device(x)
    if len(x):
        kernel[_grid(len(x)), TPB](d, *[x.dtype.type(a) for a in args])
    if not is_device(x):
        d.copy_to_host(x)
    return x


def fill(x, value):
    """x[:] = value, in place (thrust::fill); returns x."""
    return _in_place(fill_kernel, x, value)


def replace(x, old, new):
    """Every x[i] == old becomes new, in place (thrust::replace); returns x."""
    return _in_place(replace_kernel, x, old, new)


# ---------------------------------------------------------------------------------------
# the lecture's examples: saxpy two ways, the norm

def saxpy_fast(a, x, y):
    """y <- a * x + y in one transform: reads x and y, writes y (12 bytes an element)."""
    return transform(saxpy_functor(a), x, y, out=y)


def saxpy_slow(a, x, y, temp=None):
    """The same through a temporary: fill, multiply, add (28 bytes an element); ``temp``: a
    device array like ``x`` to reuse (made here when not given)."""
    temp = fill(cuda.device_array_like(x) if temp is None else temp, np.float32(a))  # 4 B
    transform(multiply, temp, x, out=temp)                      # temp <- temp * x 12 B
    return transform(plus, temp, y, out=y)                      # y <- temp + y    12 B


def norm(x, policy: str = "gpu", out=None):
    """sqrt(sum x[i]^2) as one transform_reduce (float32 in, float32 sum); ``out`` (a
    one-element float32 device array): the norm stays on the GPU, nothing waits."""
    if out is None:
        return np.sqrt(transform_reduce(squared, plus, x, np.float32(0), policy=policy))
    transform_reduce(squared, plus, x, np.float32(0), policy=policy, out=out)
    return transform(square_root, out, out=out, policy=policy)


def reference_norm(x) -> float:
    return float(np.sqrt(np.sum(np.asarray(x, dtype=np.float64) ** 2)))
