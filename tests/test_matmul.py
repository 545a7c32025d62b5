"""Lesson 04: matmul v1 -> v3 on odd shapes, counted reads vs the lecture's formulas,
the (L, V, S) constraint, the exercise and its mutants."""

import numpy as np
import pytest
from conftest import rejects
from numba import cuda, float32

import course
from course.exercises.matmul import TILE
from course.kernels import matmul

SHAPES = [(1, 1, 1), (13, 7, 9), (33, 20, 17), (16, 16, 16), (5, 40, 3)]
SETTINGS = {
    "v1_naive": [{"threads": (4, 4)}, {}],
    "v1_5_thread_tile": [{"threads": (4, 4), "V": 2}, {"threads": (4, 2), "V": 3}],
    "v2_register_outer": [{"threads": (4, 4), "V": 2}, {"threads": (2, 4), "V": 4}],
    "v3_shared_tiled": [
        {"L": 16, "V": 2, "S": 4},
        {"L": 8, "V": 2, "S": 2},
        {"L": 12, "V": 3, "S": 4},
    ],
    "v3_tuned": [
        {"tile": (16, 16, 4, 2, 2)},
        {"tile": (16, 8, 4, 2, 2)},
        {"tile": (8, 16, 8, 2, 4), "min_blocks": 1},
    ],
    "v4": [
        {"tile": (16, 16, 4, 4, 4)},
        {"tile": (16, 16, 8, 4, 4), "min_blocks": 1},
        {"tile": (32, 16, 4, 8, 4)},
    ],
}


ALL_VARIANTS = {**matmul.VARIANTS, **matmul.TUNED_VARIANTS}


@pytest.mark.parametrize("variant", sorted(ALL_VARIANTS))
def test_variant_matches_float64_reference_on_odd_shapes(variant):
    rng = np.random.default_rng(7)
    for m, k, n in SHAPES:
        A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        rtol, atol = matmul.tolerance(k)
        for settings in SETTINGS[variant]:
            C = ALL_VARIANTS[variant](A, B, **settings)
            assert C.dtype == np.float32 and C.shape == (m, n)
            np.testing.assert_allclose(
                C,
                matmul.reference(A, B),
                rtol=rtol,
                atol=atol,
                err_msg=f"{variant} {settings} {(m, k, n)}",
            )


def test_bad_input_raises():
    with pytest.raises(ValueError):
        matmul.VARIANTS["v1_naive"](np.ones((3, 4), np.float32), np.ones((3, 4), np.float32))
    with pytest.raises(ValueError):
        matmul.VARIANTS["v3_shared_tiled"](np.ones((4, 4)), np.ones((4, 4)), L=16, V=3, S=4)


@pytest.mark.parametrize(
    "variant,settings",
    [
        ("v1_naive", {}),
        ("v1_5_thread_tile", {"V": 2}),
        ("v2_register_outer", {"V": 2}),
        ("v3_shared_tiled", {"L": 16, "V": 2, "S": 4}),
    ],
)
def test_counted_reads_equal_lecture_formulas(variant, settings):
    n = 32
    counted = matmul.count_reads(variant, n, threads=(4, 4), **settings)
    expected = matmul.formulas(n, settings.get("V", 2), settings.get("L", 16))[variant]
    assert counted["correct"]
    assert counted["global"] == expected["global"]
    if "shared" in expected:
        assert counted["shared"] == expected["shared"]


def test_v3_constraint():
    assert matmul.v3_invalid(128, 8, 8) is None
    assert "divide" in matmul.v3_invalid(64, 3, 8)
    assert "1024" in matmul.v3_invalid(128, 2, 8)
    assert "evenly" in matmul.v3_invalid(64, 4, 2)
    assert "shared" in matmul.v3_invalid(256, 16, 32)
    assert "registers" in matmul.v3_invalid(256, 16, 8)
    assert matmul.v3_tuned_invalid(*matmul.TUNED_DEFAULT) is None
    assert matmul.v3_tuned_invalid(128, 64, 8, 8, 4) is None
    assert "divide" in matmul.v3_tuned_invalid(128, 128, 8, 3, 8)
    assert "BK" in matmul.v3_tuned_invalid(128, 128, 12, 8, 8)
    with pytest.raises(ValueError):
        matmul.TUNED_VARIANTS["v3_tuned"](
            np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), tile=(16, 16, 3, 2, 2)
        )
    assert matmul.v4_invalid(*matmul.V4_DEFAULT) is None
    # the shared-memory estimate uses the kernel's own sA padding (v4: 4 floats a row)
    assert matmul.v3_tuned_invalid(*matmul.V4_DEFAULT, pad=4) is None
    assert "shared" in matmul.v3_tuned_invalid(*matmul.V4_DEFAULT, pad=3000)
    assert "multiples of 4" in matmul.v4_invalid(128, 128, 8, 8, 6)
    with pytest.raises(ValueError, match="invalid v4 tile"):
        matmul.TUNED_VARIANTS["v4"](
            np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), tile=(16, 16, 4, 2, 2)
        )


# ---------------------------------------------------------------------------------------
# exercise: reference solution and mutants (all use the spec's TILE)


@cuda.jit
def solution(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def missing_syncthreads(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def wrong_tile_guard(A, B, C):
    # guards B's column with M instead of N
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < M else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def no_zero_fill_past_edge(A, B, C):
    # skips the load past the edge, leaving the previous tile's values in shared memory
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        if row < M and k0 + tx < K:
            sA[ty, tx] = A[row, k0 + tx]
        if k0 + ty < K and col < N:
            sB[ty, tx] = B[k0 + ty, col]
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def k_loop_drops_partial_tile(A, B, C):
    # iterates K // TILE tiles: the last, partial tile of K is never added
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for t in range(K // TILE):
        k0 = t * TILE
        sA[ty, tx] = A[row, k0 + tx] if row < M else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if col < N else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def missing_store_guard(A, B, C):
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[k, tx]
        cuda.syncthreads()
    C[row, col] = acc


@cuda.jit
def transposed_tile_read(A, B, C):
    # uses sB[tx, k] instead of sB[k, tx]: computes A @ B with B's tiles transposed
    sA = cuda.shared.array((TILE, TILE), float32)
    sB = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0.0)
    for k0 in range(0, K, TILE):
        sA[ty, tx] = A[row, k0 + tx] if row < M and k0 + tx < K else float32(0.0)
        sB[ty, tx] = B[k0 + ty, col] if k0 + ty < K and col < N else float32(0.0)
        cuda.syncthreads()
        for k in range(TILE):
            acc += sA[ty, k] * sB[tx, k]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


def test_solution_passes():
    result = course.check("matmul_tiled", solution, record=False)
    assert result.passed, repr(result)


@pytest.mark.parametrize(
    "mutant",
    [
        missing_syncthreads,
        wrong_tile_guard,
        no_zero_fill_past_edge,
        k_loop_drops_partial_tile,
        missing_store_guard,
        transposed_tile_read,
    ],
    ids=lambda k: k.__name__,
)
def test_mutant_is_rejected(mutant):
    assert rejects("matmul_tiled", mutant)


@pytest.mark.gpu
def test_lecture_size_on_gpu():
    rng = np.random.default_rng(2)
    for m, k, n in [(1024, 1024, 1024), (1000, 1003, 517)]:
        A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        rtol, atol = matmul.tolerance(k)
        for name, fn in ALL_VARIANTS.items():
            np.testing.assert_allclose(
                fn(A, B), matmul.reference(A, B), rtol=rtol, atol=atol, err_msg=name
            )


# ---------------------------------------------------------------------------------------
# v5: 16-byte global loads, split-K, k steps written out; the per-shape table

V5_CASES = [
    ((13, 21, 9), (16, 16, 4, 4, 4), 1, 4),
    ((13, 21, 9), (16, 16, 4, 4, 4), 3, 2),
    ((33, 40, 20), (16, 16, 8, 4, 4), 2, 8),
    ((17, 12, 16), (32, 16, 4, 8, 4), 1, 1),
    ((16, 16, 16), (16, 16, 4, 4, 4), 5, 4),  # more slices than K tiles
    ((19, 24, 24), (16, 16, 8, 4, 4), 1, 8),
]  # 16-byte loads on whole tiles


def _v5_errors(make=None):
    from course.kernels import matmul_v5 as v5

    rng = np.random.default_rng(11)
    errs = []
    for (m, k, n), tile, split, steps in V5_CASES:
        A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        if make is None:
            C = v5.host(A, B, tile, 1, split, steps=steps)
        else:  # a mutant build, launched as v5.launch does
            d_C = cuda.to_device(np.zeros((m, n), np.float32))
            kern = make(*tile, 1, STORE=v5.add_c, STEPS=steps)
            kern[
                ((n + tile[1] - 1) // tile[1], (m + tile[0] - 1) // tile[0], split),
                (tile[1] // tile[4], tile[0] // tile[3]),
            ](cuda.to_device(A), cuda.to_device(B), d_C)
            C = d_C.copy_to_host()
        assert C.dtype == np.float32 and C.shape == (m, n)
        errs.append(np.abs(C - matmul.reference(A, B)).max())
    return errs


def test_v5_matches_float64_at_odd_sizes_splits_and_steps():
    rtol, atol = matmul.tolerance(40)
    assert max(_v5_errors()) < atol


def _v5_mutant(old: str, new: str):
    """make_v5 with one line of its source changed (a mutant the float64 check must catch)."""
    import inspect
    import textwrap

    from course.kernels import matmul_v5 as v5

    src = textwrap.dedent(inspect.getsource(v5.make_v5))
    assert old in src, old
    scope = dict(vars(v5))
    exec(compile(src.replace(old, new, 1), "<mutant>", "exec"), scope)
    return scope["make_v5"]


@pytest.mark.parametrize(
    "old,new",
    [
        ("t1 = min(ntiles, t0 + per)", "t1 = min(ntiles, t0 + per - 1)"),  # a slice drops a tile
        (
            "sA[abase + uint64(j * PA + f * RA)]",
            "sA[abase + uint64(j + f * RA)]",
        ),  # A not transposed
        ("per = (ntiles + cuda.gridDim.z - 1) // cuda.gridDim.z", "per = ntiles // cuda.gridDim.z"),
    ],
)  # floor: the tail is lost
def test_v5_mutants_are_caught(old, new):
    errors = _v5_errors(_v5_mutant(old, new))  # NaN: it read shared memory never written
    assert any(not np.isfinite(e) or e > 1e-3 for e in errors), errors


def test_v5_settings_are_checked():
    from course.kernels import matmul_v5 as v5

    assert v5.v5_invalid(*v5.V5_DEFAULT) is None
    assert "multiples of 4" in v5.v5_invalid(128, 128, 6, 8, 8)
    assert "1024" in v5.v5_invalid(256, 256, 8, 4, 4)
    assert "whole rows" in v5.v5_invalid(96, 128, 16, 8, 8)
    assert "48 KiB" in v5.v5_invalid(128, 128, 32, 8, 8)
    one = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="invalid v5 tile"):
        v5.host(one, one, (16, 16, 6, 4, 4))
    with pytest.raises(ValueError, match="split"):
        v5.host(one, one, (16, 16, 4, 4, 4), 1, 0)
    with pytest.raises(ValueError, match="steps"):
        v5.host(one, one, (16, 16, 4, 4, 4), 1, 1, steps=8)


def test_waves_and_the_per_shape_table():
    from course.kernels import matmul_shapes as S
    from course.kernels import matmul_v5 as v5

    # 4096 x 768 in 128 x 128 tiles at 2 per SM: 192 blocks in 264 places, 0.73 of a wave
    w = S.waves(4096, 768, 128, 128, 2)
    assert (w["blocks"], w["places"]) == (192, 264) and abs(w["fill"] - 192 / 264) < 1e-12
    assert S.waves(4096, 768, 128, 128, 2, split=4)["fill"] == pytest.approx(768 / 792)
    for settings in S.TABLE.values():
        for tile, _per_sm, _split, steps in settings:
            assert v5.v5_invalid(*tile) is None and steps in v5.STEPS and tile[2] % steps == 0
        assert settings[1][2] == 1  # the second: no split-K (a plain epilogue)
    assert S.choose(4096, 3072, 768, atomic=False)[2] == 1
    tile, per_sm, split, steps = S.choose(1000, 512, 700)  # not in the table: fullest waves
    assert v5.v5_invalid(*tile) is None and split >= 1


def test_bench_without_names_runs_every_lesson_and_no_command(monkeypatch, tmp_path):
    """``python -m course bench`` with no names: every module with TITLE and run(report),
    never profile_capture, validation, notebook_memory or cli (commands of their own)."""
    import types

    import course.bench as bench

    names = bench.lessons()
    assert {"matmul", "gpt2", "attention", "vector_add"} <= set(names)
    assert not {"profile_capture", "validation", "notebook_memory", "cli"} & set(names)
    ran = []

    def fake(name):
        lesson = name.rsplit(".", 1)[-1]
        return types.SimpleNamespace(TITLE=lesson, run=lambda report: ran.append(lesson))

    monkeypatch.setattr(bench.importlib, "import_module", fake)
    monkeypatch.setattr(bench.Report, "save", lambda self, outdir=None: [tmp_path / "x.md"])
    bench.run([], tmp_path)
    assert ran == [n for n in names if n not in bench.ONLY_BY_NAME]


@pytest.mark.e2e  # the bench command end to end
def test_bench_matmul_runs_in_the_simulator_with_the_shapes_section(tmp_path):
    """``python -m course bench matmul``: the lecture's rows, then v4, v5 and v6 at the GPT-2
    shapes' stand-in (CPU times in the simulator; cuBLAS and Triton need a GPU)."""
    from course.bench import run

    md = run(["matmul"], tmp_path)[0].read_text()
    for text in (
        "v4 (tile=",
        "every GPT-2 shape",
        "v5 at odd stand-in",
        "v6 at odd stand-in",
        "split 2",
        "stages 3",
        "v6 waves (fill)",
    ):
        assert text in md, text


# ---------------------------------------------------------------------------------------
# v6: v5's tile and inner loop, tiles copied by cp.async into shared stages

V6_CASES = [  # (M, K, N), tile, split, steps, stages
    ((13, 21, 9), (16, 16, 4, 4, 4), 1, 4, 3),  # N not a multiple of 4: 4-byte copies of B
    ((13, 21, 9), (16, 16, 4, 4, 4), 3, 2, 2),
    ((33, 40, 20), (16, 16, 8, 4, 4), 2, 8, 4),
    ((17, 12, 16), (32, 16, 4, 8, 4), 1, 1, 3),
    ((16, 16, 16), (16, 16, 4, 4, 4), 5, 4, 3),  # more slices than K tiles
    ((19, 24, 24), (16, 16, 8, 4, 4), 1, 8, 5),  # more stages than K tiles
    ((35, 44, 36), (32, 32, 8, 8, 8), 1, 4, 3),  # whole tiles: the copies without tests
]


def _v6_errors(make=None):
    from course.kernels import matmul_v6 as v6

    rng = np.random.default_rng(13)
    errs = []
    for (m, k, n), tile, split, steps, stages in V6_CASES:
        A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        if make is None:
            C = v6.host(A, B, tile, 1, split, steps=steps, stages=stages)
        else:  # a mutant build, launched as v6.launch does
            d_C = cuda.to_device(np.zeros((m, n), np.float32))
            kern = make(*tile, 1, stages, n % 4 == 0, STORE=v6.add_c, STEPS=steps)
            kern[
                ((n + tile[1] - 1) // tile[1], (m + tile[0] - 1) // tile[0], split),
                (tile[1] // tile[4], tile[0] // tile[3]),
                0,
                kern.shared_bytes,
            ](cuda.to_device(A), cuda.to_device(B), d_C)
            C = d_C.copy_to_host()
        assert C.dtype == np.float32 and C.shape == (m, n)
        errs.append(np.abs(C - matmul.reference(A, B)).max())
    return errs


def test_v6_matches_float64_at_odd_sizes_splits_steps_and_stages():
    rtol, atol = matmul.tolerance(44)
    assert max(_v6_errors()) < atol


def _v6_mutant(maker: str, old: str, new: str):
    """A v6 maker with one line of its source changed (the float64 check must catch it)."""
    import inspect
    import textwrap

    from course.kernels import matmul_v6 as v6

    src = textwrap.dedent(inspect.getsource(getattr(v6, maker)))
    assert old in src, old
    scope = dict(vars(v6))
    exec(compile(src.replace(old, new, 1), "<mutant>", "exec"), scope)
    if maker == "make_v6":
        return scope["make_v6"]
    mutant_fetch = scope["make_fetch"]

    def make(*args, **kw):  # make_v6 with the mutant fetch
        scope6 = dict(vars(v6), make_fetch=mutant_fetch)
        exec(compile(textwrap.dedent(inspect.getsource(v6.make_v6)), "<v6>", "exec"), scope6)
        return scope6["make_v6"](*args, **kw)

    return make


@pytest.mark.parametrize(
    "maker,old,new",
    [
        ("make_v6", "rd = rd + 1 if rd + 1 < STAGES else 0", "rd = rd"),  # reads one stage
        ("make_v6", "nxt = t + STAGES - 1", "nxt = t + STAGES - 2"),  # a tile skipped
        ("make_v6", "t0 + s < t1, s, row0", "t0 + s < t1, 0, row0"),  # first tiles one stage
        (
            "make_fetch",
            "base + ak * PA + ar + f * RA, A, ea + f * RA * K, True",
            "base + ar * PA + ak + f * RA, A, ea + f * RA * K, True",
        ),  # A not transposed
        ("make_fetch", "ok = row0 + ar + f * RA < M and ko + ak < K", "ok = True"),  # no edges
        ("make_fetch", "ea = int64(row0 + ar) * K + ko + ak", "ea = int64(row0 + ar) * K + ak"),
    ],
)
def test_v6_mutants_are_caught(maker, old, new):
    try:
        errors = _v6_errors(_v6_mutant(maker, old, new))
    except IndexError:  # read past A or B: caught too
        return
    assert any(not np.isfinite(e) or e > 1e-3 for e in errors), errors


def test_v6_settings_and_table_are_checked():
    from course.kernels import matmul_shapes as S
    from course.kernels import matmul_v6 as v6

    assert v6.v6_invalid(*v6.V6_DEFAULT) is None
    assert "multiples of 4" in v6.v6_invalid(128, 128, 6, 8, 8)
    assert "1024" in v6.v6_invalid(256, 256, 8, 4, 4)
    assert "whole rows" in v6.v6_invalid(96, 128, 16, 8, 8)
    assert "stages must be" in v6.v6_invalid(64, 128, 16, 8, 8, 1)
    assert "227 KiB" in v6.v6_invalid(128, 128, 64, 8, 8, 4)
    one = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="invalid v6 tile"):
        v6.host(one, one, (16, 16, 6, 4, 4))
    with pytest.raises(ValueError, match="stages"):
        v6.host(one, one, (16, 16, 4, 4, 4), 1, 1, steps=4, stages=1)
    with pytest.raises(ValueError, match="split"):
        v6.host(one, one, (16, 16, 4, 4, 4), 1, 0, steps=4)
    # every table setting is a valid v6 launch, at most 227 KiB of shared memory an SM
    for (_m, K, _n), settings in S.V6_TABLE.items():
        for tile, per_sm, split, steps, stages in settings:
            assert v6.v6_invalid(*tile, stages) is None and tile[2] % steps == 0
            assert per_sm * 4 * stages * tile[2] * (tile[0] + 4 + tile[1]) <= 227 * 1024
            assert split == 1 or K // split >= 256
    assert S.choose_v6(4096, 768, 768) == S.V6_TABLE[(4096, 768, 768)][0]
    tile, per_sm, split, steps, stages = S.choose_v6(1000, 3000, 500, atomic=False)
    assert split == 1 and v6.v6_invalid(*tile, stages) is None
