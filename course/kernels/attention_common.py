"""Lesson 08 - what every attention kernel shares: tile sizes, the mask, input checks,
the float64 reference and the FLOP and byte counts.

``attention.py`` (the lesson's kernels and the host side), ``attention_tuned.py`` (the
instruction-counted flash kernel) and ``attention_wmma.py`` (tensor cores) all import from
here, and nothing here imports them: no import circle.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from ..platform import runtime

TILE = 16          # naive version: 16 x 16 tiles of the two matrix products (lesson 04)
SOFTMAX_TPB = 128 if runtime.MODE == "gpu" else 32  # naive softmax: threads per row (block)
Br = 64            # flash: query rows per block
Bc = 64            # flash: key/value rows per shared-memory tile
D_MAX = 128        # largest head dimension the register/shared arrays hold
D_PAD = D_MAX + 1  # flash: padded shared row length (no bank conflicts across rows)
P_PAD = Bc + 1     # flash: padded row length of the probability tile sP
FLASH_THREADS = 256                       # flash: threads per block (GPU sweep: 256 > 128)
ROW_LANES = 16                            # threads sharing a row (half a warp)
ROW_GROUPS = FLASH_THREADS // ROW_LANES   # 16 row groups
RPT = Br // ROW_GROUPS                    # query rows per thread (4)
SPT = Bc // ROW_LANES                     # score columns per thread (4)
OPT = D_MAX // ROW_LANES                  # output columns per thread (8)
SQ_AT, SKV_AT, SP_AT = 0, Br * D_PAD, (Br + Bc) * D_PAD   # offsets into the shared buffer
FLASH_SHARED = 4 * ((Br + Bc) * D_PAD + Br * P_PAD)       # bytes of dynamic shared memory
ROW_THREADS = 128  # fused_row_per_thread: threads per block
NEG_INF = float32(-np.inf)
LOG2E = 1.4426950408889634   # exp(x) = exp2(x * log2(e)): scores kept in log2 units


@cuda.jit(device=True, inline=True)
def visible(i, j, n, causal, window):
    # May query i look at key j?  (padding keys j >= n never; causal: j <= i; window: i - j <= W)
    return j < n and (not causal or j <= i) and (window < 0 or i - j <= window)



def validate(Q, K, V):
    """Check shapes/dtypes; return contiguous (batch*heads, N, d) arrays and (B, H, N, d)."""
    Q, K, V = (np.ascontiguousarray(a) for a in (Q, K, V))
    if Q.ndim != 4 or Q.shape != K.shape or Q.shape != V.shape:
        raise ValueError(f"Q, K, V must all be (batch, heads, N, d); got {Q.shape}, "
                         f"{K.shape}, {V.shape}")
    if Q.dtype not in (np.float32, np.float16) or not Q.dtype == K.dtype == V.dtype:
        raise ValueError(f"Q, K, V must all be float32 or all float16; got {Q.dtype}, "
                         f"{K.dtype}, {V.dtype}")
    b, h, n, d = Q.shape
    if min(Q.shape) < 1 or d > D_MAX:
        raise ValueError(f"need every dimension >= 1 and head dim d <= {D_MAX}; got {Q.shape}")
    return [a.reshape(b * h, n, d) for a in (Q, K, V)], Q.shape


def mask(n: int, causal: bool = False, window=None) -> np.ndarray:
    """(N, N) bool: True where query i may see key j."""
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    ok = np.ones((n, n), dtype=bool)
    if causal or window is not None:
        ok &= j <= i
    if window is not None:
        ok &= i - j <= window
    return ok


def reference(Q, K, V, causal: bool = False, window=None) -> np.ndarray:
    """softmax(Q K^T / sqrt(d), masked) V in float64; rows that see no key give 0."""
    Q, K, V = (np.asarray(a, dtype=np.float64) for a in (Q, K, V))
    S = Q @ np.swapaxes(K, -1, -2) / math.sqrt(Q.shape[-1])
    ok = mask(Q.shape[-2], causal, window)
    S = np.where(ok, S, -np.inf)
    m = S.max(axis=-1, keepdims=True)
    P = np.where(ok, np.exp(S - np.where(np.isfinite(m), m, 0.0)), 0.0)
    l = P.sum(axis=-1, keepdims=True)
    return (P / np.where(l > 0, l, 1.0)) @ V


def device_inputs(shape, dtype, seed: int = 0):
    """Random Q, K, V of ``shape`` (b, h, n, d) as (b * h, n, d) device arrays of ``dtype``
    (standard normal) and a float32 device O: ``(q, k, v, o)``, what the benchmark times."""
    rng = np.random.default_rng(seed)
    b, h, n, d = shape
    q, k, v = (cuda.to_device(rng.standard_normal((b * h, n, d)).astype(dtype)) for _ in range(3))
    return q, k, v, cuda.device_array((b * h, n, d), dtype=np.float32)


def rel_error(got, expected) -> float:
    """||got - expected|| / ||expected|| (Frobenius norms, float64)."""
    got = np.asarray(got, dtype=np.float64)
    return float(np.linalg.norm(got - expected) / max(np.linalg.norm(expected), 1e-300))


def pairs(n: int, causal: bool = False, window=None) -> int:
    """(query, key) pairs inside the mask: N^2; N (N + 1) / 2 causal; with a window W
    (key i - W .. i), sum over queries of min(i, W) + 1."""
    if window is not None:
        w = min(int(window), n - 1)
        return w * (w + 1) // 2 + (n - w) * (w + 1)
    return n * (n + 1) // 2 if causal else n * n


def flops(b: int, h: int, n: int, d: int, causal: bool = False, window=None) -> float:
    """4 d FLOPs (a multiply and an add in Q K^T and in P V) per (query, key) pair inside
    the mask, for B H heads: only the work that counts, never the masked-out pairs."""
    return 4.0 * b * h * pairs(n, causal, window) * d


def traffic_bytes(b: int, h: int, n: int, d: int, itemsize: int = 4) -> dict:
    """Global-memory bytes each version must move at least (each array read/written once).

    three kernels: read Q, K; write S; read S, write P (in place); read P, V; write O.
    flash: read Q, K, V once and write O once (plus one float32 log-sum-exp per row).
    """
    qkvo = b * h * n * d * itemsize
    scores = b * h * n * n * 4
    return {"three_kernels": 4 * qkvo + 4 * scores, "flash": 4 * qkvo + b * h * n * 4,
            "score_matrix": scores}


_OPTED_IN = set()


def allow_big_shared(kernel, args, nbytes: int) -> None:
    """Let ``kernel`` (compiled for ``args``) use ``nbytes`` > 48 KB of dynamic shared memory.

    numba-cuda has no public API for the opt-in, so this sets the driver attribute
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES on the compiled kernel's handle.
    """
    if runtime.MODE != "gpu" or nbytes <= 48 * 1024:
        return
    sig = tuple(kernel.typeof_pyval(a) for a in args)
    if (id(kernel), sig, nbytes) in _OPTED_IN:
        return
    from cuda.bindings import driver as cu

    fn = kernel.compile(sig)._codelibrary.get_cufunc()
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    err = cu.cuKernelSetAttribute(attr, nbytes, fn.handle, fn.device.id)[0]
    if err != cu.CUresult.CUDA_SUCCESS:          # older drivers: a plain CUfunction handle
        err = cu.cuFuncSetAttribute(fn.handle, attr, nbytes)[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"could not allow {nbytes} B of shared memory: {err}")
    _OPTED_IN.add((id(kernel), sig, nbytes))


# ---------------------------------------------------------------------------------------
# the tensor-core versions (attention_wmma, attention_mma): GPU only, float16 in

if runtime.MODE == "gpu":
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def address_of(typingctx, arr):
        """The data pointer of an array (shared, local or global), for linked C++ functions."""
        def codegen(context, builder, signature, args):
            return context.make_array(signature.args[0])(context, builder, args[0]).data
        return types.CPointer(arr.dtype)(arr), codegen


def half_word_args(Q, K, V, O, causal: bool, window):
    """A tensor-core kernel's arguments: float16 device arrays Q, K, V (batch*heads, N, d) as
    flat float32 views (a word holds two halves), O, the scale, the mask flag, window (-1)."""
    bh, n, d = Q.shape
    window = -1 if window is None else int(window)
    words = [X.reshape(bh * n * d).view(np.float32) for X in (Q, K, V)]
    return (*words, O, float32(1.0 / math.sqrt(d)), bool(causal or window >= 0), window)


def on_tensor_cores(name: str, launch, head_dims, Q, K, V, causal: bool, window):
    """Host side of a tensor-core version: check the inputs (float16, d in ``head_dims``),
    copy them to the GPU, ``launch(q, k, v, o, causal=, window=)``, return O as float16."""
    if runtime.MODE != "gpu":
        raise RuntimeError(f"{name} links CUDA C++ (tensor cores): it needs a real GPU; "
                           "the simulator cannot run it")
    (q, k, v), shape = validate(Q, K, V)
    if q.dtype != np.float16 or shape[3] not in head_dims:
        raise ValueError(f"{name} needs float16 inputs and d in {tuple(head_dims)}; got "
                         f"{q.dtype}, d = {shape[3]}")
    if window is not None and int(window) < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    d_o = cuda.device_array(q.shape, dtype=np.float32)
    launch(cuda.to_device(q), cuda.to_device(k), cuda.to_device(v), d_o,
           causal=causal, window=window)
    return d_o.copy_to_host().reshape(shape).astype(np.float16)
