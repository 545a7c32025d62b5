"""Lesson 11 - the capstone: GPT-2's forward pass from the course's own kernels.

Follows the CS 483 final report (GPT-2 in CUDA: encoder, layernorm, matmul, permute /
attention / unpermute, softmax, GELU, residual, judged by Nsight Systems' per-kernel table).
The 124M architecture: 12 pre-LayerNorm blocks of 12 heads, d_model 768, context 1024,
vocabulary 50257, GELU in its tanh form, the token embedding tied to the output projection.
float32 throughout, one numba kernel per step:

- ``encoder_forward_kernel``   token + position embedding (lesson 01: a thread an element)
- ``layernorm_forward_kernel`` a block per row, the row held in registers (one read); mean
  and variance by shared-memory trees (lesson 02)
- matmul                       lesson 04's ``matmul_v6`` (tile, blocks per SM, split-K and
                               stages per shape: ``matmul_shapes.V6_TABLE``; ``matmul_v5``
                               where there is no cp.async) or ``matmul_v4``, its store
                               swapped for an epilogue (lesson 04's ``matmul_epilogue``):
                               ``store_bias``, ``store_bias_gelu``, ``store_bias_residual``
                               (x += ...) add bias, GELU, residual while in a register;
                               unfused (``fuse=False``, naive): ``bias_gelu_kernel`` and
                               ``residual_forward_kernel`` as passes of their own
- attention                    lesson 08's causal flash kernel, q, k, v read where the qkv
                               matmul left them, O written heads side by side (head sizes
                               32, 64, 128: ``attention.flash_in_place``); else, and for the
                               naive three kernels, ``permute_kernel`` / ``unpermute_kernel``
- ``residual_forward_kernel``  x + f(x) (lesson 01; it and the permutes in gpt2_passes.py)

Contract (``course.kernels.gpt2``): :class:`Config`, :func:`init_params`, :func:`forward`,
:func:`load_params`.  Parameter names and shapes are those of the usual GPT-2 checkpoints
(``h.{i}.attn.c_attn.weight`` is (768, 2304): Conv1D, ``x @ W``).  No weights are shipped or
downloaded: ``load_params`` reads a safetensors file you already have.
"""
from __future__ import annotations

import functools
import math
import operator

import numpy as np
from numba import config, cuda, float32
from numba.cuda import libdevice

from ..platform import runtime
from . import attention as attn
from . import attention_tuned as at
from . import graph as gr
from . import matmul as mm
from . import matmul_shapes as ms
from . import matmul_tuned as mt
from . import matmul_v5 as v5
from . import matmul_v6 as v6
from .gpt2_params import (  # noqa: F401
    MICRO,
    TILED,
    TINY,
    Config,
    check_options,
    config_of,
    flops,
    init_params,
    jitter,
    load_params,
    param_shapes,
    reference,
    token_array,
)
from .gpt2_passes import permute_kernel, residual_forward_kernel, unpermute_kernel

NOT_SHOWN = {"gelu_tanh", "row_sum"}   # device functions, shown inside the kernels' cell
GPU = runtime.MODE == "gpu"
TPB = 256 if GPU else 32       # threads of the elementwise kernels (along a row)
LN_TPB = 64 if GPU else 16     # layernorm threads per row (a power of two; 64 beat 128
                               # on an H200 with the strided-loop build: 19 vs 22.5 us)
SIM_TILE = (16, 16, 4, 4, 4)   # matmul_v4's, v5's, v6's tile in the simulator: 16 threads
GELU_K = float32(math.sqrt(2.0 / math.pi))
# GELU's exp and division: __expf and __fdividef (a few instructions, a few ulp) on a GPU;
# the simulator has no libdevice, so the exact ones there
fast_exp, fast_div = (math.exp, operator.truediv) if config.ENABLE_CUDASIM else (
    libdevice.fast_expf, libdevice.fast_fdividef)
IN_PLACE = "flash attention (lesson 08, q, k, v read in place)"


# ---------------------------------------------------------------------------------------
# kernels

@cuda.jit
def encoder_forward_kernel(out, tokens, wte, wpe):
    # out (B*T, C): row b*T + t is wte[tokens[b, t]] + wpe[t]; block row = blockIdx.y.
    r = cuda.blockIdx.y
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    T = tokens.shape[1]
    if c < out.shape[1]:
        out[r, c] = wte[tokens[r // T, r % T], c] + wpe[r % T, c]


@cuda.jit(device=True, inline=True)
def row_sum(buf, t):
    # Tree-add buf[0 .. LN_TPB) (shared) into buf[0]; every thread of the block calls it.
    s = LN_TPB // 2
    while s > 0:
        cuda.syncthreads()
        if t < s:
            buf[t] += buf[t + s]
        s //= 2
    cuda.syncthreads()
    return buf[0]


def make_layernorm(LN_C: int):
    """layernorm_forward_kernel for rows of LN_C floats: thread t keeps the LN_PER = LN_C /
    LN_TPB (rounded up) elements t, t + LN_TPB, ... of its row in registers, so the row is
    read from memory once, and the loops over them have a length known when it compiles."""
    LN_PER = -(-LN_C // LN_TPB)

    @cuda.jit
    def layernorm_forward_kernel(out, inp, weight, bias):
        # One block of LN_TPB threads per row, x = my LN_PER elements of it (read once):
        # the mean, then the variance (two tree sums), then (x - mean) / sqrt(var + 1e-5) * w + b.
        row = cuda.blockIdx.x
        t = cuda.threadIdx.x
        buf = cuda.shared.array(LN_TPB, float32)
        x = cuda.local.array(LN_PER, float32)
        acc = float32(0.0)
        for i in range(LN_PER):
            c = t + i * LN_TPB
            x[i] = inp[row, c] if c < LN_C else float32(0.0)
            acc += x[i]
        buf[t] = acc
        mean = row_sum(buf, t) / float32(LN_C)
        acc = float32(0.0)
        for i in range(LN_PER):
            if t + i * LN_TPB < LN_C:
                d = x[i] - mean
                acc += d * d
        cuda.syncthreads()          # everyone has read buf[0] (the mean) before it changes
        buf[t] = acc
        rstd = float32(1.0) / math.sqrt(row_sum(buf, t) / float32(LN_C) + float32(1e-5))
        for i in range(LN_PER):
            c = t + i * LN_TPB
            if c < LN_C:
                out[row, c] = (x[i] - mean) * rstd * weight[c] + bias[c]

    return layernorm_forward_kernel


layernorm_kernel = functools.cache(make_layernorm)        # one build per row length
layernorm_forward_kernel = layernorm_kernel(768)   # GPT-2 124M's rows (the notebook's)


@cuda.jit(device=True, inline=True)
def gelu_tanh(x):
    # GELU's tanh form, 0.5 x (1 + tanh(u)), written as the same x / (1 + exp(-2u)): one
    # fast exp and one fast division, so matmul_v6 keeps its 64 sums in registers through
    # the store (with tanh the compiler rolled the store loop and moved them to memory).
    # exp(80) bounds the exponent: the division stays in range, the result ~x e^-80 ~ 0
    u = GELU_K * (x + float32(0.044715) * x * x * x)
    return fast_div(x, float32(1.0) + fast_exp(min(float32(-2.0) * u, float32(80.0))))


@cuda.jit(device=True, inline=True)
def store_bias(out, row, col, value):
    # matmul_v4's epilogue with out = (C, bias): C = A @ B + bias, added in the store.
    out[0][row, col] = value + out[1][col]


@cuda.jit(device=True, inline=True)
def store_bias_gelu(out, row, col, value):
    # the MLP's first matmul: C = GELU(A @ B + bias).
    out[0][row, col] = gelu_tanh(value + out[1][col])


@cuda.jit(device=True, inline=True)
def store_bias_residual(out, row, col, value):
    # a projection back into the residual stream: x += A @ B + bias.  One thread owns
    # x[row, col], so the atomic adds one term to it, rounded as x + (value + bias) would
    # be; but it needs no answer, so the thread does not wait for x to arrive (a plain
    # x[row, col] += ... would wait on every one of its 64 reads, one after the other).
    cuda.atomic.add(out[0], (row, col), value + out[1][col])


@cuda.jit(device=True, inline=True)
def store_within(C, row, col, value):
    # the logits by v6: wte^T padded to whole runs of four columns (16-byte loads), C not
    if col < C.shape[1]:
        C[row, col] = value


@cuda.jit(device=True, inline=True)
def add_part(out, row, col, value):
    # matmul_v6's split-K: a slice after the first adds its partial sum to out[0] (slice 0
    # adds the bias with it, through store_bias_residual).
    cuda.atomic.add(out[0], (row, col), value)


@cuda.jit
def bias_gelu_kernel(out, bias, gelu):
    # out (M, N) += bias, then GELU when gelu: the matmul's epilogue as its own pass.
    r = cuda.blockIdx.y
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if c < out.shape[1]:
        v = out[r, c] + bias[c]
        out[r, c] = gelu_tanh(v) if gelu else v


_A2 = "float32[:, ::1]"
PTX_SIGNATURES = {
    "encoder_forward_kernel": f"void({_A2}, int32[:, ::1], {_A2}, {_A2})",
    "layernorm_forward_kernel": f"void({_A2}, {_A2}, float32[::1], float32[::1])",
    "bias_gelu_kernel": f"void({_A2}, float32[::1], boolean)",
}


# ---------------------------------------------------------------------------------------
# the forward pass

def _direct(name: str, launch) -> None:
    launch()


class Model:
    """GPT-2 on the GPU for one batch shape: parameters uploaded once (``wte`` also
    transposed, for the tied logits), every activation allocated once: a forward is launches
    only.  ``matmul``: "v6" (lesson 04's SGEMM tiled per shape, ``matmul_shapes.V6_TABLE``;
    the default where cp.async exists), "v5" (the default elsewhere), "v4" (one tile) or
    "v1_naive"; ``attention``: "flash" (lesson 08's causal kernel) or "naive" (three kernels,
    a T x T score matrix per head); ``fuse`` (v4; v5, v6 always fuse): bias, GELU and residual
    in the matmul's store.  ``run(name, launch)`` wraps every launch (a timeline).  ``graph``
    (v5 or v6, and flash): every launch on the model's own stream, and on a GPU the forward
    recorded once as a CUDA graph and replayed by one call (``course/kernels/graph.py``)."""

    def __init__(self, params: dict, config: Config, B: int, T: int, *,
                 matmul: str | None = None, attention: str = "flash", fuse: bool | None = None,
                 graph: bool = False):
        matmul = matmul or ("v6" if v6.supported() else "v5")
        check_options(params, config, T, matmul, attention, fuse, graph)
        self.cfg, self.B, self.T = config, B, T
        self.matmul_variant, self.attention = matmul, attention
        self.fuse = matmul != "v1_naive" if fuse is None else fuse
        self.tile = None if GPU or matmul != "v4" else SIM_TILE    # v4's tile (simulator)
        self.p = {k: cuda.to_device(np.ascontiguousarray(v, dtype=np.float32))
                  for k, v in params.items()}
        C, NH, V, BT = config.n_embd, config.n_head, config.vocab_size, B * T
        wT = np.zeros((C, -(-V // 4) * 4 if matmul in TILED else V), np.float32)
        wT[:, :V] = params["wte.weight"].T          # v5, v6: rows padded to 16-byte runs
        self.p["wte.T"] = cuda.to_device(wT)
        f32, hs = np.float32, C // NH
        self.x, self.ln, self.y = (cuda.device_array((BT, C), f32) for _ in range(3))
        self.qkv, self.h4 = cuda.device_array((BT, 3 * C), f32), cuda.device_array((BT, 4 * C), f32)
        self.in_place = attention == "flash" and hs in at.TUNED_DIMS   # no permute passes
        self.q, self.k, self.v, self.o = (None,) * 4 if self.in_place else (
            cuda.device_array((B * NH, T, hs), f32) for _ in range(4))
        self.logits = cuda.device_array((BT, V), f32)
        self.scratch = cuda.device_array((min(B * NH, 8), T, T), f32) \
            if attention == "naive" else None
        self.stream = cuda.stream() if graph else 0
        self.replayed = gr.Replayed(lambda tok: self.launches(tok, _direct), self.stream,
                                    keep=at.reused_buffers) if graph and GPU else None

    def tiled_setting(self, M: int, K: int, N: int, atomic: bool) -> tuple:
        """(tile, blocks per SM, split-K, steps, stages) of v6 or v5 (stages 0) for one shape:
        the sweeps' tables on a GPU; in the simulator a 16-thread tile, split where it adds."""
        if not GPU:
            return SIM_TILE, 1, 2 if atomic and K >= 8 else 1, 4, 3
        if self.matmul_variant == "v6":
            return ms.choose_v6(M, K, N, atomic=atomic)
        return (*ms.choose(M, K, N, atomic=atomic), 0)

    def tiled(self, out, inp, weight, bias, gelu, residual, run):
        """out (+)= inp @ weight (+ bias, GELU) by v6 or v5, the epilogue in its store; split-K
        where the epilogue can add (bias alone, or the residual add): slice 0 adds the bias
        too, the others only their sums; a plain output is zeroed first."""
        (M, K), N = inp.shape, out.shape[1]            # weight may have padding columns
        atomic = bias is not None and not gelu
        tile, per_sm, split, steps, stages = self.tiled_setting(M, K, N, atomic)
        if bias is None:
            padded = weight.shape[1] != N
            store, add, C, what = store_within if padded else None, None, out, ""
        elif gelu:
            store, add, C, what = store_bias_gelu, None, (out, bias), " + bias + GELU (fused)"
        elif residual or split > 1:
            store, add, C = store_bias_residual, add_part, (out, bias)
            what = " + bias + residual (fused)" if residual else " + bias (fused, split-K)"
        else:
            store, add, C, what = store_bias, None, (out, bias), " + bias (fused)"
        name = self.matmul_variant
        more = {"stages": stages} if name == "v6" else {}
        run(f"matmul_{name}{what}", lambda: (v6 if name == "v6" else v5).launch(
            inp, weight, C, tile, per_sm, split, store=store, add=add,
            zero=split > 1 and not residual, steps=steps, stream=self.stream, **more))

    def matmul(self, out, inp, weight, bias=None, gelu=False, run=_direct):
        """out = inp @ weight (+ bias, GELU): with ``fuse``, v6, v5 or v4 with the epilogue in
        its store; else lesson 04's kernel, then the epilogue pass."""
        if self.matmul_variant in TILED:
            return self.tiled(out, inp, weight, bias, gelu, False, run)
        if self.fuse and bias is not None:
            store, what = (store_bias_gelu, "bias + GELU") if gelu else (store_bias, "bias")
            run(f"matmul_v4 + {what} (fused)", lambda: mt.launch(
                "v4", inp, weight, (out, bias), tile=self.tile, store=store))
            return
        name = "matmul_v4 (lesson 04)" if self.matmul_variant == "v4" else \
            "matmul_v1_naive (lesson 04)"
        run(name, lambda: mm.launch(self.matmul_variant, inp, weight, out, tile=self.tile))
        if bias is not None:
            M, N = out.shape
            run("bias_gelu_kernel" if gelu else "bias_gelu_kernel (bias only)",
                lambda: bias_gelu_kernel[(-(-N // TPB), M), TPB](out, bias, gelu))

    def project(self, x, inp, weight, bias, scratch, cols, run=_direct):
        """x += inp @ weight + bias: fused into v4's store, or a matmul into ``scratch``
        followed by the residual kernel."""
        if self.matmul_variant in TILED:
            self.tiled(x, inp, weight, bias, False, True, run)
        elif self.fuse:
            run("matmul_v4 + bias + residual (fused)", lambda: mt.launch(
                "v4", inp, weight, (x, bias), tile=self.tile, store=store_bias_residual))
        else:
            self.matmul(scratch, inp, weight, bias, run=run)
            self.residual(x, scratch, cols, run)

    def __call__(self, d_tokens, run=_direct):
        """Launch one forward pass on device tokens (int32, B x T); logits in self.logits.
        With ``graph`` on a GPU (and ``run`` left alone): replayed as one CUDA graph."""
        if self.replayed is not None and run is _direct:
            self.replayed(d_tokens)
        else:
            self.launches(d_tokens, run)
        return self.logits

    def launches(self, d_tokens, run=_direct) -> None:
        """Every launch of one forward pass, in order (all on ``self.stream``)."""
        cfg, p, NH, s = self.cfg, self.p, self.cfg.n_head, self.stream
        B, T, C = self.B, self.T, cfg.n_embd
        BT, hs, cols = B * T, C // NH, -(-C // TPB)
        x, ln, y = self.x, self.ln, self.y
        run("encoder_forward_kernel", lambda: encoder_forward_kernel[(cols, BT), TPB, s](
            x, d_tokens, p["wte.weight"], p["wpe.weight"]))
        variant = "flash_tiled_causal" if self.attention == "flash" else "naive_three_kernels"
        label = "flash attention (lesson 08)" if self.attention == "flash" else \
            "attention: scores, softmax, P @ V (naive)"
        for i in range(cfg.n_layer):
            h = f"h.{i}."
            self.layernorm(ln, x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], run)
            self.matmul(self.qkv, ln, p[h + "attn.c_attn.weight"], p[h + "attn.c_attn.bias"],
                        run=run)
            if self.in_place:
                run(IN_PLACE, lambda: attn.flash_in_place(self.qkv, y, NH, T, stream=s))
            else:
                run("permute_kernel", lambda: permute_kernel[(T, B * NH), hs, s](
                    self.q, self.k, self.v, self.qkv, NH))
                run(label, lambda: attn.launch(variant, self.q, self.k, self.v, self.o,
                                               causal=True, scratch=self.scratch, stream=s))
                run("unpermute_kernel", lambda: unpermute_kernel[(T, B * NH), hs, s](
                    y, self.o, NH))
            self.project(x, y, p[h + "attn.c_proj.weight"], p[h + "attn.c_proj.bias"], ln,
                         cols, run)
            self.layernorm(ln, x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], run)
            self.matmul(self.h4, ln, p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"],
                        gelu=True, run=run)
            self.project(x, self.h4, p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"],
                         ln, cols, run)
        self.layernorm(ln, x, p["ln_f.weight"], p["ln_f.bias"], run)
        self.matmul(self.logits, ln, p["wte.T"], run=run)          # tied: logits = ln @ wte^T

    def layernorm(self, out, inp, w, b, run):
        run("layernorm_forward_kernel", lambda: layernorm_kernel(inp.shape[1])[
            inp.shape[0], LN_TPB, self.stream](out, inp, w, b))

    @staticmethod
    def residual(x, f, cols, run):
        run("residual_forward_kernel",
            lambda: residual_forward_kernel[(cols, x.shape[0]), TPB](x, x, f))

    def tokens(self, tokens) -> object:
        """Checked tokens (B x T ints in [0, vocab)) as an int32 device array."""
        return cuda.to_device(token_array(tokens, (self.B, self.T), self.cfg.vocab_size))


def forward(tokens, params, config: Config | None = None, **options):
    """Logits (B, T, vocab) float32 of ``tokens`` (ints, B x T): numpy in, numpy out.
    ``options``: :class:`Model`'s ``matmul``, ``attention``, ``fuse`` and ``graph``."""
    tokens = token_array(tokens)
    config = config or config_of(params)
    model = Model(params, config, *tokens.shape, **options)
    return model(model.tokens(tokens)).copy_to_host().reshape(*tokens.shape, -1)
