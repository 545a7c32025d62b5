"""#49: matmul_v6's cp.async pipeline under compute-sanitizer (racecheck), with a mutant.

    source .whl/prelude.sh && compute-sanitizer --tool racecheck \
        python instructor/gpu/v6_sanitize.py            # the course's v6: no hazard
    ... python instructor/gpu/v6_sanitize.py --mutant   # waits one group too few: hazards

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
    print("RESULT", "WRONG" if bad else "ok", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
