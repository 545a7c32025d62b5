"""Lesson 12 - Thrust's fancy iterators as device functions of the index.

An iterator here is a small tree: an array, ``counting(start)``, ``constant(value)``,
``transform_iterator(it, op)`` or ``zip_iterator(a, b)``.  ``reader`` compiles a tree into
one device function ``read(i, data)`` (``data``: the tuple of the tree's arrays and scalars,
passed to the kernel as one argument), so an algorithm's kernel reads element ``i`` of any
iterator the same way it reads an array - and a transform iterator applies its functor as
the element is read, with no temporary array.  The same tree compiles for the CPU through
``numba.njit``, and the loops at the end of this file run it there: the execution policies
of ``algorithms.py`` (``policy="cpu"``: one core; ``"parallel"``: all of them).
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda, njit, prange


@cuda.jit(device=True)
def multiply_pair(t):
    return t[0] * t[1]


# ---------------------------------------------------------------------------------------
# fancy iterators: a node tree; its leaves' data travel to the kernel as one tuple

def is_device(x) -> bool:
    """A GPU array: numba's (or the simulator's) device array, or any object with the CUDA
    array interface (CuPy, PyTorch)."""
    return hasattr(x, "copy_to_host") or hasattr(x, "__cuda_array_interface__")


class Iterator:
    """A sequence whose element ``i`` a device function computes: no array behind it."""

    def __init__(self, node: tuple, leaves: tuple):
        self.node, self.leaves = node, leaves    # node: structure; leaves: arrays/scalars


def as_iter(x) -> Iterator:
    if isinstance(x, Iterator):
        return x
    if isinstance(x, np.ndarray) or is_device(x):
        if x.ndim != 1:
            raise ValueError(f"the algorithms take 1-D arrays (got shape {x.shape})")
        return Iterator(("array",), (x,))
    raise TypeError(f"expected an array or an iterator, got {type(x).__name__}")


def counting(start=0) -> Iterator:
    """start, start + 1, start + 2, ... (thrust::counting_iterator)."""
    return Iterator(("counting",), (start,))


def constant(value) -> Iterator:
    """value, value, value, ... (thrust::constant_iterator)."""
    return Iterator(("constant",), (value,))


def transform_iterator(x, op) -> Iterator:
    """op(x[0]), op(x[1]), ... computed when read (thrust::transform_iterator)."""
    it = as_iter(x)
    return Iterator(("transform", it.node, op), it.leaves)


def zip_iterator(a, b) -> Iterator:
    """(a[i], b[i]) tuples (thrust::zip_iterator): a functor reads them as t[0], t[1]."""
    ia, ib = as_iter(a), as_iter(b)
    return Iterator(("zip", ia.node, ib.node, len(ia.leaves)), ia.leaves + ib.leaves)


def functor(op, target: str):
    return op if target == "gpu" else _cpu_functor(op)


@functools.cache
def _cpu_functor(op):
    return njit(op.py_func)           # the same Python function, compiled for the CPU


@functools.cache
def reader(node: tuple, target: str, slot: int = 0):
    """A compiled ``read(i, data)`` for the iterator ``node`` whose leaves start at
    ``data[slot]``; cached per node (the functors are part of it) and target."""
    jit = cuda.jit(device=True) if target == "gpu" else njit
    kind, k = node[0], slot
    if kind == "array":
        def read(i, data):
            return data[k][i]
    elif kind == "counting":
        def read(i, data):
            return data[k] + i
    elif kind == "constant":
        def read(i, data):
            return data[k]
    elif kind == "transform":
        inner, op = reader(node[1], target, slot), functor(node[2], target)

        def read(i, data):
            return op(inner(i, data))
    elif kind == "zip":
        ra, rb = reader(node[1], target, slot), reader(node[2], target, slot + node[3])

        def read(i, data):
            return (ra(i, data), rb(i, data))
    else:
        raise ValueError(f"unknown iterator {kind!r}")
    return jit(read)


# ---------------------------------------------------------------------------------------
# the CPU policies: the same functors through numba.njit (serial or parallel=True)

@functools.cache
def cpu_transform(node_a, node_b, op, slot_b, parallel):
    ra, f = reader(node_a, "cpu", 0), functor(op, "cpu")
    if node_b is None:
        @njit(parallel=parallel)
        def run_1(data, out):
            for i in prange(out.shape[0]):
                out[i] = f(ra(i, data))
        return run_1
    rb = reader(node_b, "cpu", slot_b)

    @njit(parallel=parallel)
    def run_2(data, out):
        for i in prange(out.shape[0]):
            out[i] = f(ra(i, data), rb(i, data))
    return run_2


@functools.cache
def cpu_reduce(node, op, parallel):
    read, f = reader(node, "cpu", 0), functor(op, "cpu")

    @njit(parallel=parallel)
    def run(data, n, init, part, used):
        chunks = part.shape[0]
        per = (n + chunks - 1) // chunks
        for c in prange(chunks):
            lo, hi = c * per, min(n, (c + 1) * per)
            if lo < hi:
                acc = read(lo, data)
                for i in range(lo + 1, hi):
                    acc = f(acc, read(i, data))
                part[c] = acc
                used[c] = 1
        out = init
        for c in range(chunks):
            if used[c]:
                out = f(out, part[c])
        return out
    return run
