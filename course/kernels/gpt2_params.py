"""Lesson 11 - GPT-2 as numbers: the configuration, the parameters and their initialization,
a checkpoint reader, the FLOP count and a float64 numpy forward (host code only; the kernels
and the model on the GPU are in :mod:`course.kernels.gpt2`, which re-exports these names)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

HOST_ONLY = True               # no kernels here: nothing to show verbatim or compile


@dataclass(frozen=True)
class Config:
    vocab_size: int = 50257
    n_positions: int = 1024
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12


TINY = Config(vocab_size=97, n_positions=16, n_embd=64, n_layer=2, n_head=2)   # the notebook's
MICRO = Config(vocab_size=37, n_positions=9, n_embd=32, n_layer=1, n_head=2)   # tests, bench


def param_shapes(config: Config) -> dict:
    """name -> shape of every parameter, in the checkpoints' order and names."""
    C, V, P = config.n_embd, config.vocab_size, config.n_positions
    shapes = {"wte.weight": (V, C), "wpe.weight": (P, C)}
    for i in range(config.n_layer):
        h = f"h.{i}."
        shapes.update({h + "ln_1.weight": (C,), h + "ln_1.bias": (C,),
                       h + "attn.c_attn.weight": (C, 3 * C), h + "attn.c_attn.bias": (3 * C,),
                       h + "attn.c_proj.weight": (C, C), h + "attn.c_proj.bias": (C,),
                       h + "ln_2.weight": (C,), h + "ln_2.bias": (C,),
                       h + "mlp.c_fc.weight": (C, 4 * C), h + "mlp.c_fc.bias": (4 * C,),
                       h + "mlp.c_proj.weight": (4 * C, C), h + "mlp.c_proj.bias": (C,)})
    shapes.update({"ln_f.weight": (C,), "ln_f.bias": (C,)})
    return shapes


def init_params(config: Config, seed: int = 0) -> dict:
    """GPT-2's initialization: weights N(0, 0.02), the residual projections (attn.c_proj,
    mlp.c_proj) N(0, 0.02 / sqrt(2 * n_layer)), biases 0, layernorm gains 1."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in param_shapes(config).items():
        if name.endswith(".bias"):
            out[name] = np.zeros(shape, np.float32)
        elif ".ln_" in name or name.startswith("ln_f"):
            out[name] = np.ones(shape, np.float32)
        else:
            std = 0.02 / math.sqrt(2 * config.n_layer) if name.endswith("c_proj.weight") \
                else 0.02
            out[name] = rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
    return out


def jitter(params: dict, seed: int = 0, scale: float = 0.1) -> dict:
    """A copy with the biases moved off 0 and the layernorm gains off 1 (by N(0, scale)):
    at GPT-2's initialization a kernel that ignored them would still pass a check."""
    rng = np.random.default_rng(seed)
    return {k: v + rng.normal(0, scale, v.shape).astype(np.float32)
            if k.endswith(".bias") or ".ln_" in k or k.startswith("ln_f") else v
            for k, v in params.items()}


def load_params(path) -> dict:
    """The parameters of a GPT-2 safetensors checkpoint (Hugging Face's ``model.safetensors``
    of ``gpt2``) as float32: names without the ``transformer.`` prefix; the attention masks
    and ``lm_head`` (tied to ``wte``) dropped."""
    dtypes = {"F32": np.float32, "F16": np.float16}
    with open(path, "rb") as f:
        head_len = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(head_len))
        out = {}
        for name, info in header.items():
            key = name.removeprefix("transformer.")
            if name == "__metadata__" or key.endswith((".attn.bias", ".attn.masked_bias")) \
                    or key.startswith("lm_head"):
                continue
            if info["dtype"] not in dtypes:
                raise ValueError(f"{name}: dtype {info['dtype']} is not supported (F32, F16)")
            start, end = info["data_offsets"]
            f.seek(8 + head_len + start)
            raw = np.frombuffer(f.read(end - start), dtype=dtypes[info["dtype"]])
            out[key] = raw.reshape(info["shape"]).astype(np.float32)
    return out


def config_of(params: dict) -> Config:
    """The Config of a parameter dict (head count: GPT-2's head dim of 64)."""
    V, C = params["wte.weight"].shape
    layers = sum(1 for k in params if k.endswith(".ln_1.weight"))
    return Config(vocab_size=V, n_positions=params["wpe.weight"].shape[0], n_embd=C,
                  n_layer=layers, n_head=max(1, C // 64))


def flops(config: Config, B: int, T: int) -> dict:
    """FLOPs of one forward pass (2 per multiply-add): the matmuls, and attention's Q K^T
    and P V over the causal half the flash kernel computes (T (T + 1) / 2 pairs a head)."""
    C, L, V, BT = config.n_embd, config.n_layer, config.vocab_size, B * T
    matmul = L * 2 * BT * C * (3 * C + C + 4 * C + 4 * C) + 2 * BT * C * V
    attention = L * 2 * 2 * B * (T * (T + 1) // 2) * C
    return {"matmul": matmul, "attention": attention}


def reference(tokens, params, config: Config) -> np.ndarray:
    """The same forward in float64 numpy: what the notebook compares the kernels with."""
    p = {k: v.astype(np.float64) for k, v in params.items()}
    B, T = tokens.shape
    C, NH = config.n_embd, config.n_head
    hs = C // NH

    def ln(x, w, b):
        m = x.mean(-1, keepdims=True)
        return (x - m) / np.sqrt(((x - m) ** 2).mean(-1, keepdims=True) + 1e-5) * w + b

    x = p["wte.weight"][tokens] + p["wpe.weight"][:T]
    mask = np.tril(np.ones((T, T), bool))
    for i in range(config.n_layer):
        h = lambda n: p[f"h.{i}.{n}"]                         # noqa: E731, B023
        a = ln(x, h("ln_1.weight"), h("ln_1.bias")) @ h("attn.c_attn.weight") + \
            h("attn.c_attn.bias")
        q, k, v = (a[..., j * C:(j + 1) * C].reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
                   for j in range(3))
        s = np.where(mask, q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs), -np.inf)
        w = np.exp(s - s.max(-1, keepdims=True))
        y = ((w / w.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        x = x + y @ h("attn.c_proj.weight") + h("attn.c_proj.bias")
        m = ln(x, h("ln_2.weight"), h("ln_2.bias")) @ h("mlp.c_fc.weight") + h("mlp.c_fc.bias")
        m = 0.5 * m * (1 + np.tanh(math.sqrt(2 / math.pi) * (m + 0.044715 * m ** 3)))
        x = x + m @ h("mlp.c_proj.weight") + h("mlp.c_proj.bias")
    return ln(x, p["ln_f.weight"], p["ln_f.bias"]) @ p["wte.weight"].T


def token_array(tokens, shape: tuple | None = None, vocab: int | None = None) -> np.ndarray:
    """``tokens`` as a numpy array, checked: integers, shape (B, T) (``shape`` when given),
    ids in [0, ``vocab``) when given (int32 then, ready for the device)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.dtype.kind not in "iu":
        raise ValueError(f"tokens must be an integer array of shape (B, T), got "
                         f"{tokens.dtype} {tokens.shape}")
    if shape is not None and tokens.shape != shape:
        raise ValueError(f"tokens are {tokens.shape}; this model was built for {shape}")
    if vocab is None:
        return tokens
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab):
        raise ValueError(f"token ids must be in [0, {vocab})")
    return np.ascontiguousarray(tokens, dtype=np.int32)


TILED = ("v5", "v6")           # lesson 04's SGEMMs tiled per shape (epilogues always fused)


def check_options(params: dict, config: Config, T: int, matmul: str, attention: str,
                  fuse: bool | None, graph: bool) -> None:
    """One clear sentence for a ``gpt2.Model`` that cannot be built as asked."""
    if T > config.n_positions:
        raise ValueError(f"T = {T} is longer than the context ({config.n_positions})")
    if matmul not in ("v6", "v5", "v4", "v1_naive") or attention not in ("flash", "naive"):
        raise ValueError('matmul must be "v6", "v5", "v4" or "v1_naive"; attention "flash" or '
                         '"naive"')
    if fuse and matmul == "v1_naive":
        raise ValueError('fuse=True needs matmul "v4", "v5" or "v6": v1 has no epilogue')
    if fuse is False and matmul in TILED:
        raise ValueError(f'matmul "{matmul}" always fuses its epilogues; fuse=False needs "v4"')
    if graph and (matmul not in TILED or attention != "flash"):
        raise ValueError('graph=True needs matmul "v5" or "v6" and attention "flash"')
    missing = set(param_shapes(config)) - set(params)
    if missing:
        raise ValueError(f"parameters missing: {sorted(missing)[:4]} ...")
