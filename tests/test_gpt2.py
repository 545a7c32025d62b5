"""Lesson 11: course.kernels.gpt2 (the contract) - parameter names and shapes, every kernel
against numpy at odd sizes, a micro GPT-2 against a float64 forward written here (not the
module's), load_params on a safetensors file, bad input, the per-kernel timeline."""

import json
import math

import numpy as np
import pytest
from numba import cuda

from course.kernels import gpt2 as G
from course.measure.timeline import Timeline

RNG = np.random.default_rng(110)
MICRO = G.MICRO


def test_contract_names_shapes_and_initialization():
    assert G.Config() == G.Config(
        vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12
    )
    shapes = G.param_shapes(G.Config())
    assert shapes["wte.weight"] == (50257, 768) and shapes["wpe.weight"] == (1024, 768)
    assert shapes["h.11.attn.c_attn.weight"] == (768, 2304)
    assert shapes["h.0.mlp.c_proj.weight"] == (3072, 768) and shapes["ln_f.bias"] == (768,)
    assert len(shapes) == 2 + 12 * 12 + 2
    assert sum(math.prod(s) for s in shapes.values()) == 124_439_808  # GPT-2 124M
    p = G.init_params(G.Config(n_layer=4, vocab_size=300, n_embd=128, n_head=2), seed=3)
    assert {k: v.shape for k, v in p.items()} == G.param_shapes(
        G.Config(n_layer=4, vocab_size=300, n_embd=128, n_head=2)
    )
    assert all(v.dtype == np.float32 for v in p.values())
    assert abs(p["wte.weight"].std() - 0.02) < 0.002
    assert abs(p["h.1.mlp.c_proj.weight"].std() - 0.02 / math.sqrt(8)) < 0.001
    assert not p["h.0.attn.c_attn.bias"].any() and (p["ln_f.weight"] == 1).all()


def _ln(x, w, b):
    m = x.mean(-1, keepdims=True)
    return (x - m) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b


LN_ODD = 2 * G.LN_TPB + 13  # three elements a thread, the last one partly padding


def _layernorm(kernel, R, C, mean=0.3):
    """``kernel`` (a layernorm build for rows of C) on R random rows: (its output, float64)."""
    x = RNG.normal(mean, 1.2, (R, C)).astype(np.float32)
    w, b = RNG.uniform(0.5, 1.5, C).astype(np.float32), RNG.normal(0, 1, C).astype(np.float32)
    out = cuda.device_array((R, C), np.float32)
    kernel[R, G.LN_TPB](out, cuda.to_device(x), cuda.to_device(w), cuda.to_device(b))
    return out.copy_to_host(), _ln(x.astype(np.float64), w, b)


def test_each_kernel_against_numpy_at_odd_sizes():
    R, C, N = 7, LN_ODD, 70
    for kernel, rows, cols in [(G.layernorm_kernel(C), R, C), (G.layernorm_forward_kernel, 3, 768)]:
        got, want = _layernorm(kernel, rows, cols)  # an odd row; the module's own build
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5), cols

    y = RNG.normal(0, 2, (3, N)).astype(np.float32)
    bias = RNG.normal(0, 1, N).astype(np.float32)
    for gelu in (False, True):
        d = cuda.to_device(y)
        G.bias_gelu_kernel[(-(-N // G.TPB), 3), G.TPB](d, cuda.to_device(bias), gelu)
        v = y.astype(np.float64) + bias
        if gelu:
            v = 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
        assert np.allclose(d.copy_to_host(), v, rtol=1e-5, atol=1e-6), gelu

    B, T, NH, hs = 2, 5, 3, 7
    qkv = RNG.normal(0, 1, (B * T, 3 * NH * hs)).astype(np.float32)
    q, k, v = (cuda.device_array((B * NH, T, hs), np.float32) for _ in range(3))
    G.permute_kernel[(T, B * NH), hs](q, k, v, cuda.to_device(qkv), NH)
    split = qkv.reshape(B, T, 3, NH, hs).transpose(2, 0, 3, 1, 4).reshape(3, B * NH, T, hs)
    for got, want in zip((q, k, v), split):
        assert np.array_equal(got.copy_to_host(), want)
    back = cuda.device_array((B * T, NH * hs), np.float32)
    G.unpermute_kernel[(T, B * NH), hs](back, q, NH)
    assert np.array_equal(back.copy_to_host(), qkv[:, : NH * hs])

    tok = RNG.integers(0, 11, (2, 3))
    wte, wpe = (
        RNG.normal(0, 1, (11, C)).astype(np.float32),
        RNG.normal(0, 1, (3, C)).astype(np.float32),
    )
    emb = cuda.device_array((6, C), np.float32)
    G.encoder_forward_kernel[(-(-C // G.TPB), 6), G.TPB](
        emb, cuda.to_device(tok.astype(np.int32)), cuda.to_device(wte), cuda.to_device(wpe)
    )
    assert np.array_equal(emb.copy_to_host(), (wte[tok] + wpe[None]).reshape(6, C))
    x = RNG.normal(0.3, 1.2, (R, C)).astype(np.float32)
    s = cuda.to_device(x)
    G.residual_forward_kernel[(-(-C // G.TPB), R), G.TPB](s, s, cuda.to_device(x * 2))
    assert np.array_equal(s.copy_to_host(), x * 3)


def _gelu64(v):
    return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))


LN_MUTANTS = {
    "padding counted in the variance": (
        "            if t + i * LN_TPB < LN_C:\n",
        "            if True:\n",
    ),
    "one element a thread": ("    LN_PER = -(-LN_C // LN_TPB)", "    LN_PER = 1"),
    "mean over the padded row": (
        "    mean = row_sum(buf, t) / float32(LN_C)",
        "    mean = row_sum(buf, t) / float32(LN_PER * LN_TPB)",
    ),
}


@pytest.mark.parametrize("mutant", LN_MUTANTS)
def test_layernorm_in_registers_mutants_miss(mutant):
    """make_layernorm at a row length that is not a multiple of LN_TPB: each mutant of how a
    thread's share of the row is held and counted must miss float64."""
    import inspect
    import textwrap

    old, new = LN_MUTANTS[mutant]
    src = textwrap.dedent(inspect.getsource(G.make_layernorm))
    assert src.count(old) == 1, old
    scope = dict(vars(G))
    exec(compile(src.replace(old, new), f"<{mutant}>", "exec"), scope)
    # a mean well off 0, so padding counted as data shows
    got, want = _layernorm(scope["make_layernorm"](LN_ODD), 3, LN_ODD, mean=3.0)
    assert not np.allclose(got, want, rtol=1e-3, atol=1e-3), mutant


def test_matmul_v4_with_each_fused_epilogue_at_odd_sizes():
    """Lesson 04's v4 with its STORE swapped: bias, bias + GELU, bias + residual (x +=)."""
    from course.kernels import matmul_tuned as mt

    M, K, N = 19, 13, 21  # edges inside a 16 x 16 tile both ways
    A = RNG.normal(0, 1, (M, K)).astype(np.float32)
    W = RNG.normal(0, 1, (K, N)).astype(np.float32)
    bias = RNG.normal(0, 1, N).astype(np.float32)
    x = RNG.normal(0, 1, (M, N)).astype(np.float32)
    y = A.astype(np.float64) @ W + bias
    want = {G.store_bias: y, G.store_bias_gelu: _gelu64(y), G.store_bias_residual: x + y}
    for store, expected in want.items():
        out = cuda.to_device(x)
        mt.launch(
            "v4",
            cuda.to_device(A),
            cuda.to_device(W),
            (out, cuda.to_device(bias)),
            tile=G.SIM_TILE,
            store=store,
        )
        assert np.allclose(out.copy_to_host(), expected, rtol=1e-5, atol=1e-5), store
    with pytest.raises(ValueError, match="only v4"):
        mt.kernel("v3_tuned", mt.TUNED_DEFAULT, 1, G.store_bias)


@pytest.mark.parametrize("version", ["matmul_v5", "matmul_v6"])
def test_matmul_v5_v6_with_each_fused_epilogue_and_split_k_at_odd_sizes(version):
    """v5 and v6 with GPT-2's epilogues, whole and split in K: slice 0 stores through the
    epilogue (adding the bias), the other slices add their sums (``add_part``)."""
    import importlib

    mod = importlib.import_module(f"course.kernels.{version}")

    M, K, N = 19, 13, 21  # edges inside a 16 x 16 tile both ways
    A = RNG.normal(0, 1, (M, K)).astype(np.float32)
    W = RNG.normal(0, 1, (K, N)).astype(np.float32)
    bias = RNG.normal(0, 1, N).astype(np.float32)
    x = RNG.normal(0, 1, (M, N)).astype(np.float32)
    y = A.astype(np.float64) @ W + bias
    cases = [
        (G.store_bias, None, 1, False, y),
        (G.store_bias_gelu, None, 1, False, _gelu64(y)),
        (G.store_bias_residual, G.add_part, 1, False, x + y),
        (G.store_bias_residual, G.add_part, 3, False, x + y),
        (G.store_bias_residual, G.add_part, 2, True, y),
    ]  # qkv split: zeroed first
    for store, add, split, zero, expected in cases:
        out = cuda.to_device(x)
        mod.launch(
            cuda.to_device(A),
            cuda.to_device(W),
            (out, cuda.to_device(bias)),
            G.SIM_TILE,
            1,
            split,
            store=store,
            add=add,
            zero=zero,
            steps=4,
        )
        assert np.allclose(out.copy_to_host(), expected, rtol=1e-5, atol=1e-5), (store, split)

    # mutant: later slices that add the bias again (store for every slice)
    out = cuda.to_device(x)
    mod.launch(
        cuda.to_device(A),
        cuda.to_device(W),
        (out, cuda.to_device(bias)),
        G.SIM_TILE,
        1,
        3,
        store=G.store_bias_residual,
        add=G.store_bias_residual,
        steps=4,
    )
    assert not np.allclose(out.copy_to_host(), x + y, rtol=1e-5, atol=1e-5)


def test_v5_build_where_there_is_no_cp_async(monkeypatch):
    """A GPU older than compute capability 8.0 (a T4) has no cp.async: the model's default
    is then v5, whose logits match float64 too; v6 itself refuses with a sentence."""
    params = G.jitter(G.init_params(MICRO, seed=7), seed=8, scale=0.2)
    tokens = RNG.integers(0, MICRO.vocab_size, (1, 5))
    want = G.reference(tokens, params, MICRO)
    monkeypatch.setattr(G.v6, "supported", lambda: False)
    tl = Timeline()
    model = G.Model(params, MICRO, 1, 5)
    assert model.matmul_variant == "v5"
    got = model(model.tokens(tokens), run=tl.run).copy_to_host().reshape(want.shape)
    assert np.abs(got - want).max() / np.abs(want).max() < 2e-6
    names = {r["kernel"] for r in tl.table() if r["kernel"].startswith("matmul")}
    assert names == {
        "matmul_v5 + bias (fused, split-K)",
        "matmul_v5 + bias + GELU (fused)",
        "matmul_v5 + bias + residual (fused)",
        "matmul_v5",
    }
    one = cuda.to_device(np.ones((4, 4), np.float32))
    with pytest.raises(RuntimeError, match="compute capability 8.0 or newer"):
        G.v6.launch(one, one, cuda.device_array((4, 4), np.float32), G.SIM_TILE, 1, steps=4)
    with pytest.raises(ValueError, match="graph=True needs"):
        G.Model(params, MICRO, 1, 5, matmul="v4", graph=True)


def _forward64(tokens, p, cfg):
    """GPT-2's forward in float64, written apart from the module's (einsum, explicit heads)."""
    p = {k: v.astype(np.float64) for k, v in p.items()}
    Bn, Tn = tokens.shape
    C, H = cfg.n_embd, cfg.n_head
    d = C // H
    x = p["wte.weight"][tokens] + p["wpe.weight"][np.arange(Tn)][None]
    causal = np.triu(np.full((Tn, Tn), -np.inf), 1)
    for i in range(cfg.n_layer):
        g = lambda n: p[f"h.{i}.{n}"]  # noqa: E731, B023
        a = np.einsum(
            "btc,cf->btf", _ln(x, g("ln_1.weight"), g("ln_1.bias")), g("attn.c_attn.weight")
        ) + g("attn.c_attn.bias")
        q, k, v = (a[..., j * C : (j + 1) * C].reshape(Bn, Tn, H, d) for j in range(3))
        s = np.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d) + causal
        e = np.exp(s - s.max(-1, keepdims=True))
        att = np.einsum("bhqk,bkhd->bqhd", e / e.sum(-1, keepdims=True), v).reshape(Bn, Tn, C)
        x = x + att @ g("attn.c_proj.weight") + g("attn.c_proj.bias")
        u = _ln(x, g("ln_2.weight"), g("ln_2.bias")) @ g("mlp.c_fc.weight") + g("mlp.c_fc.bias")
        u = u * 0.5 * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u**3)))
        x = x + u @ g("mlp.c_proj.weight") + g("mlp.c_proj.bias")
    return np.einsum("btc,vc->btv", _ln(x, p["ln_f.weight"], p["ln_f.bias"]), p["wte.weight"])


def test_micro_gpt2_matches_an_independent_float64_forward():
    params = G.jitter(G.init_params(MICRO, seed=5), seed=6, scale=0.2)
    tokens = RNG.integers(0, MICRO.vocab_size, (1, 9))
    want = _forward64(tokens, params, MICRO)
    tl = Timeline()
    model = G.Model(params, MICRO, 1, 9)
    got = model(model.tokens(tokens), run=tl.run).copy_to_host().reshape(want.shape)
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < 2e-6, err
    # v6 copies the tied wte^T in 16-byte runs: padded from 37 to 40 columns, logits are not
    assert model.p["wte.T"].shape == (MICRO.n_embd, 40) and model.logits.shape == (9, 37)
    assert np.allclose(G.reference(tokens, params, MICRO), want, rtol=1e-12, atol=1e-12)
    rows = {r["kernel"]: r for r in tl.table()}
    L = MICRO.n_layer
    assert rows["layernorm_forward_kernel"]["launches"] == 2 * L + 1
    # v6 in the simulator: split-K in two where the epilogue adds (qkv's bias, the residual)
    assert {k: r["launches"] for k, r in rows.items() if k.startswith("matmul")} == {
        "matmul_v6 + bias (fused, split-K)": L,
        "matmul_v6 + bias + GELU (fused)": L,
        "matmul_v6 + bias + residual (fused)": 2 * L,
        "matmul_v6": 1,
    }
    assert "residual_forward_kernel" not in rows and not any("bias_gelu" in k for k in rows)
    assert abs(sum(r["percent"] for r in rows.values()) - 100) < 1e-6
    assert tl.simulated and "simulated ms" in tl.markdown()


@cuda.jit
def gelu_kernel(out, x):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = G.gelu_tanh(x[i])


def test_flash_reads_q_k_v_in_place_where_the_head_size_allows():
    """Head size 32 (a size flash_fwd_tuned is built for): no permute / unpermute launches,
    the flash kernel reads qkv and writes y directly, and the logits still match float64;
    MICRO's head size 16 would need padding, so it keeps the permute passes."""
    cfg = G.Config(vocab_size=37, n_positions=9, n_embd=64, n_layer=1, n_head=2)
    params = G.jitter(G.init_params(cfg, seed=9), seed=10, scale=0.2)
    tokens = RNG.integers(0, cfg.vocab_size, (3, 7))  # B 3, 2 heads: a swap would show
    want = _forward64(tokens, params, cfg)
    tl = Timeline()
    model = G.Model(params, cfg, 3, 7)
    got = model(model.tokens(tokens), run=tl.run).copy_to_host().reshape(want.shape)
    assert np.abs(got - want).max() / np.abs(want).max() < 2e-6
    rows = {r["kernel"]: r["launches"] for r in tl.table()}
    assert rows[G.IN_PLACE] == cfg.n_layer and model.q is None
    # GELU's exponent is bounded: a very negative input gives ~0, not an overflow
    x = np.array([-400.0, -30.0, -10.05, -3.0, 0.0, 2.5, 40.0], np.float32)
    out = cuda.device_array(x.shape, np.float32)
    gelu_kernel[1, x.size](out, cuda.to_device(x))
    x64 = x.astype(np.float64)
    exact = 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64**3)))
    assert np.abs(out.copy_to_host() - exact).max() < 1e-6 * 40
    assert not any("permute" in k for k in rows), rows
    micro = G.Model(G.init_params(MICRO, seed=1), MICRO, 1, 5)
    assert not micro.in_place and micro.q.shape == (2, 5, 16)


def test_the_unfused_and_naive_builds_agree_with_the_optimized_one(monkeypatch):
    params = G.jitter(G.init_params(MICRO, seed=7), seed=8)
    tokens = RNG.integers(0, MICRO.vocab_size, (1, 5))
    fast = G.forward(tokens, params, MICRO)
    slow = G.forward(tokens, params, MICRO, matmul="v1_naive", attention="naive")
    assert fast.shape == (1, 5, MICRO.vocab_size)
    assert np.abs(fast - slow).max() < 1e-5 * np.abs(fast).max()
    # the v4 builds with the three-kernel attention: flash is the costliest kernel to
    # simulate, and ``fast`` already has it; what differs here is the matmuls' epilogues
    tl = Timeline()
    model = G.Model(params, MICRO, 1, 5, matmul="v4", fuse=False, attention="naive")
    unfused = model(model.tokens(tokens), run=tl.run).copy_to_host().reshape(fast.shape)
    assert np.abs(fast - unfused).max() < 1e-5 * np.abs(fast).max()
    rows = {r["kernel"]: r["launches"] for r in tl.table()}
    assert rows["residual_forward_kernel"] == 2 * MICRO.n_layer
    assert rows["matmul_v4 (lesson 04)"] == 4 * MICRO.n_layer + 1
    fused_v4 = G.forward(tokens, params, MICRO, matmul="v4", attention="naive")
    assert np.abs(fast - fused_v4).max() < 1e-5 * np.abs(fast).max()
    with pytest.raises(ValueError, match="v1 has no epilogue"):
        G.Model(params, MICRO, 1, 5, matmul="v1_naive", fuse=True)
    with pytest.raises(ValueError, match="always fuses"):
        G.Model(params, MICRO, 1, 5, fuse=False)

    # mutant: the residual epilogue overwrites x instead of adding to it
    @cuda.jit(device=True, inline=True)
    def overwrite(out, row, col, value):
        out[0][row, col] = value + out[1][col]

    monkeypatch.setattr(G, "store_bias_residual", overwrite)
    wrong = G.forward(tokens, params, MICRO, matmul="v4", attention="naive")
    assert np.abs(wrong - fast).max() > 1e-2 * np.abs(fast).max()


def test_bad_input_gets_one_clear_sentence():
    params = G.init_params(MICRO)
    with pytest.raises(ValueError, match="shape"):
        G.forward(np.zeros(5, int), params, MICRO)
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 37\)"):
        G.forward(np.full((1, 3), 37), params, MICRO)
    with pytest.raises(ValueError, match="longer than the context"):
        G.Model(params, MICRO, 1, 10)
    with pytest.raises(ValueError, match="parameters missing"):
        G.Model({k: v for k, v in params.items() if k != "ln_f.bias"}, MICRO, 1, 3)
    with pytest.raises(ValueError, match="matmul must be"):
        G.Model(params, MICRO, 1, 3, matmul="cublas")


def test_load_params_reads_a_gpt2_safetensors_file(tmp_path):
    """Hugging Face's layout: 'transformer.' prefixes, attention masks and lm_head to drop,
    float16 or float32 tensors."""
    params = G.init_params(MICRO, seed=9)
    tensors = {
        ("transformer." + k): v.astype(np.float16 if "wpe" in k else np.float32)
        for k, v in params.items()
    }
    tensors["transformer.h.0.attn.bias"] = np.ones((1, 1, 9, 9), np.float32)
    tensors["lm_head.weight"] = params["wte.weight"]
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for k, v in tensors.items():
        raw = np.ascontiguousarray(v).tobytes()
        header[k] = {
            "dtype": {"float32": "F32", "float16": "F16"}[str(v.dtype)],
            "shape": list(v.shape),
            "data_offsets": [off, off + len(raw)],
        }
        blobs.append(raw)
        off += len(raw)
    head = json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(len(head).to_bytes(8, "little") + head + b"".join(blobs))
    got = G.load_params(path)
    assert set(got) == set(params)
    assert np.array_equal(got["h.0.mlp.c_fc.weight"], params["h.0.mlp.c_fc.weight"])
    assert np.allclose(got["wpe.weight"], params["wpe.weight"], atol=1e-3)
    assert G.config_of(got) == G.Config(
        vocab_size=37, n_positions=9, n_embd=32, n_layer=1, n_head=1
    )


@pytest.mark.e2e  # the bench command end to end
def test_bench_runs_in_the_simulator(tmp_path):
    """``python -m course bench gpt2``: both builds' rows and per-kernel tables (marked
    simulated); the PyTorch row needs a GPU."""
    from course.bench import run

    md = run(["gpt2"], tmp_path)[0].read_text()
    for text in (
        "GPT-2 forward, optimized",
        "GPT-2 forward, naive",
        "per-kernel time",
        "matmul_v1_naive (lesson 04)",
        "flash attention (lesson 08)",
        "attention: scores, softmax, P @ V (naive)",
        "simulated ms",
    ):
        assert text in md, text
