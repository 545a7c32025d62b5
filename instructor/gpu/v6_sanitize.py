"""#49: matmul_v6's and flash attention's cp.async pipelines under compute-sanitizer
(racecheck), with mutants.

    source .whl/prelude.sh && compute-sanitizer --tool racecheck \
        python instructor/gpu/v6_sanitize.py            # v6, flash in place: no hazard
    ... python instructor/gpu/v6_sanitize.py --mutant   # v6 waits one group too few: hazards
    ... python instructor/gpu/v6_sanitize.py --flash-mutant   # flash never waits: hazards

The simulator runs v6's copies as plain assignments, so it cannot see a missing wait; this
is the GPU's check of the waits and barriers.  Small odd sizes (the sanitizer is slow), every
result compared with float64; the mutant waits for one group less than the kernel needs
(``wait_group(STAGES - 1)``), so a tile may be read before its copies land and racecheck must
report shared-memory hazards.  Prints one line per launch and "RESULT ok|WRONG".
"""

from __future__ import annotations

import sys

import numpy as np


def main() -> int:
    from course.platform import runtime  # first: it picks the simulator where there is no GPU

    print(f"device {runtime.device_info().get('name')}", flush=True)
    from numba import cuda

    from course.kernels import matmul_v6 as v6

    if "--flash-mutant" in sys.argv:
        return flash(True)
    mutant = "--mutant" in sys.argv
    if mutant:  # one group fewer waited for: the stage in use may still be arriving
        v6.waiter = (lambda real: lambda n: real(n + 1 if n else 0))(v6.waiter)
        v6.kernel.cache_clear()
    rng = np.random.default_rng(49)
    cases = [  # (M, K, N), tile, per SM, split, stages
        ((200, 300, 260), (64, 128, 16, 8, 8), 4, 1, 3),
        ((131, 97, 130), (64, 128, 16, 8, 8), 4, 2, 2),  # N % 4: 4-byte copies of B; split-K
    ][: 1 if mutant else 2]
    bad = 0
    for (m, k, n), tile, per_sm, split, stages in cases:
        A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        dC = cuda.device_array((m, n), np.float32)
        v6.launch(cuda.to_device(A), cuda.to_device(B), dC, tile, per_sm, split, steps=16,
                  stages=stages)
        ref = A.astype(np.float64) @ B
        err = float(np.abs(dC.copy_to_host() - ref).max() / np.abs(ref).max())
        bad += err > 1e-5
        print(f"{(m, k, n)} {tile} {per_sm}/SM split {split} stages {stages}: rel. error "
              f"{err:.1e}", flush=True)
    if not mutant:
        bad += flash(False)
    print("RESULT", "WRONG" if bad else "ok", flush=True)
    return 0


def flash(mutant: bool) -> int:
    """flash_in_place at head sizes 64 and 32 (K, V copied ahead by cp.async) on GPT-2's qkv
    layout, T 200 (4 key tiles), against float64; the mutant never waits for its copies.
    Returns how many were wrong."""
    from numba import cuda

    from course.kernels import attention as attn
    from course.kernels import attention_common as ac
    from course.kernels import attention_tuned as at

    if mutant:
        @cuda.jit(device=True, inline=True)
        def no_wait():
            pass

        at.waiter = lambda n: no_wait
    rng = np.random.default_rng(50)
    bad = 0
    for hs in (64,) if mutant else (64, 32):
        at._TUNED.pop(hs, None)
        B, T, heads = 2, 200, 2
        C = heads * hs
        qkv = rng.uniform(-1, 1, (B * T, 3 * C)).astype(np.float32)
        y = cuda.device_array((B * T, C), np.float32)
        attn.flash_in_place(cuda.to_device(qkv), y, heads, T)
        per_head = [qkv[:, i * C:(i + 1) * C].reshape(B, T, heads, hs).transpose(0, 2, 1, 3)
                    for i in range(3)]
        want = ac.reference(*per_head, causal=True).transpose(0, 2, 1, 3).reshape(B * T, C)
        err = float(np.abs(y.copy_to_host() - want).max() / np.abs(want).max())
        bad += err > 1e-5
        print(f"flash in place B {B} T {T} heads {heads} x {hs}: rel. error {err:.1e}",
              flush=True)
    if mutant:
        print("RESULT", "WRONG" if bad else "ok", flush=True)
    return bad


if __name__ == "__main__":
    raise SystemExit(main())
