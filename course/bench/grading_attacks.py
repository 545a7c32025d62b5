"""The attackers of ``bench grading`` (``grading.py``): each is an honest student whose one
exercise cell is replaced by an attack on the grader; every one must earn 0 for it.

The kinds: a kernel that memoizes across runs, does less work at the measured size only,
runs code through its signature, prunes a branch the simulator takes, and - on a card where
a count decides (issue #47) - runs the lesson's fix only where the simulator counts it,
with the given code on the GPU as it was, through shared atomics, or with no tile at all.
"""

MARK = "/tmp/course-bench-grading-pwned"
# Attacks that only differ from an honest kernel at the GPU's measured size: in the simulator
# (small sizes) they are honest kernels, and their points there prove nothing either way.
GPU_SIZE_ONLY = frozenset(
    {
        "attack_skip_at_size",
        "attack_sim_only_fix",
        "attack_small_only_fix",
        "attack_conflicts_in_atomics",
        "attack_no_tile_on_gpu",
        "attack_reduction_in_atomics",
    }
)

# a transpose whose simulator path is the lesson's padded tile; an attack adds its GPU path
SIM_TILE = """TILE_T = 32


@cuda.jit
def transpose_fast(A, B):
    bx, by = cuda.blockIdx.x * TILE_T, cuda.blockIdx.y * TILE_T
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    if (A.shape[0] << 60) >> 60 == A.shape[0]:   # the simulator: the padded tile
        tile = cuda.shared.array((32, 33), np.float32)
        for k in range(0, TILE_T, cuda.blockDim.y):
            r, c = by + ty + k, bx + tx
            if r < A.shape[0] and c < A.shape[1]:
                tile[ty + k, tx] = A[r, c]
        cuda.syncthreads()
        for k in range(0, TILE_T, cuda.blockDim.y):
            r, c = bx + ty + k, by + tx
            if r < B.shape[0] and c < B.shape[1]:
                B[r, c] = tile[tx, ty + k]
"""

ATTACKS = {  # student -> (lesson, exercise, the cell's new source)
    "attack_memo_matmul": (
        "04_matmul",
        "tune_matmul",
        """@cuda.jit
def matmul_fast(A, B, C):
    row, col = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        if C[row, col] == C[row, col]:      # already a number, not the NaN poison: skip
            return
        acc = 0.0
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc
""",
    ),
    "attack_skip_at_size": (
        "01_vector_add",
        "tune_vector_add",
        """@cuda.jit
def add_fast(n, x, y):
    step = 2 if n >= 1 << 24 else 1          # half the work at the measured size only
    for i in range(cuda.grid(1) * step, n, cuda.gridsize(1) * step):
        y[i] = x[i] + y[i]
""",
    ),
    "attack_signature_eval": (
        "01_vector_add",
        "tune_vector_add",
        f"""@cuda.jit("__import__('os').system('touch {MARK}') or void(int64, float32[:], float32[:])")
def add_fast(n, x, y):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] + y[i]
""",
    ),
    # a counted card's count from the simulator alone (issue #47): the fix only where the
    # simulator runs (Python integers never wrap there), or only at its small launch
    "attack_sim_only_fix": (
        "10_profiling",
        "tune_transpose",
        """TILE_T = 32


@cuda.jit
def transpose_fast(A, B):
    tile = cuda.shared.array(32 * 33, np.float32)
    w = 32
    if (A.shape[0] << 60) >> 60 == A.shape[0]:   # true in the simulator only
        w = 33
    bx, by = cuda.blockIdx.x * TILE_T, cuda.blockIdx.y * TILE_T
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for k in range(0, TILE_T, cuda.blockDim.y):
        r, c = by + ty + k, bx + tx
        if r < A.shape[0] and c < A.shape[1]:
            tile[(ty + k) * w + tx] = A[r, c]
    cuda.syncthreads()
    for k in range(0, TILE_T, cuda.blockDim.y):
        r, c = bx + ty + k, by + tx
        if r < B.shape[0] and c < B.shape[1]:
            B[r, c] = tile[tx * w + ty + k]
""",
    ),
    "attack_small_only_fix": (
        "02_reduction",
        "tune_reduction",
        """@cuda.jit
def reduce_fast(g_idata, g_odata):
    sdata = cuda.shared.array(0, dtype=g_idata.dtype)
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    sdata[tid] = 0
    if i < g_idata.size:
        sdata[tid] = g_idata[i]
    cuda.syncthreads()
    if g_idata.size <= 4096:                   # the simulator's launch: the fix
        s = cuda.blockDim.x // 2
        while s > 0:
            if tid < s:
                sdata[tid] += sdata[tid + s]
            cuda.syncthreads()
            s >>= 1
    else:                                      # the GPU's: the given interleaved tree
        s = 1
        while s < cuda.blockDim.x:
            index = 2 * s * tid
            if index < cuda.blockDim.x:
                sdata[index] += sdata[index + s]
            cuda.syncthreads()
            s *= 2
    if tid == 0:
        g_odata[cuda.blockIdx.x] = sdata[0]
""",
    ),
    # the red team's next round: on the GPU, the given conflicts through shared atomics
    # (counted apart from loads and stores), or no shared memory at all (strided reads)
    "attack_conflicts_in_atomics": (
        "10_profiling",
        "tune_transpose",
        SIM_TILE
        + """    else:                                        # a GPU: the given tile, read by exchanges
        grid = cuda.shared.array(1024, np.int32)
        Ai, Bi = A.view(np.int32), B.view(np.int32)
        for k in range(0, TILE_T, cuda.blockDim.y):
            r, c = by + ty + k, bx + tx
            if r < A.shape[0] and c < A.shape[1]:
                grid[(ty + k) * 32 + tx] = Ai[r, c]
        cuda.syncthreads()
        for k in range(0, TILE_T, cuda.blockDim.y):
            r, c = bx + ty + k, by + tx
            if r < B.shape[0] and c < B.shape[1]:
                Bi[r, c] = cuda.atomic.exch(grid, tx * 32 + ty + k, 0)
""",
    ),
    "attack_no_tile_on_gpu": (
        "10_profiling",
        "tune_transpose",
        SIM_TILE
        + """    else:                                        # a GPU: strided reads, no shared memory
        for k in range(0, TILE_T, cuda.blockDim.y):
            r, c = bx + ty + k, by + tx
            if r < B.shape[0] and c < B.shape[1]:
                B[r, c] = A[c, r]
""",
    ),
    "attack_reduction_in_atomics": (
        "02_reduction",
        "tune_reduction",
        """@cuda.jit
def reduce_fast(g_idata, g_odata):
    tid = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + tid
    if (g_idata.size << 60) >> 60 == g_idata.size:   # the simulator: the lesson's tree
        sdata = cuda.shared.array(0, dtype=g_idata.dtype)
        sdata[tid] = 0
        if i < g_idata.size:
            sdata[tid] = g_idata[i]
        cuda.syncthreads()
        s = cuda.blockDim.x // 2
        while s > 0:
            if tid < s:
                sdata[tid] += sdata[tid + s]
            cuda.syncthreads()
            s >>= 1
        if tid == 0:
            g_odata[cuda.blockIdx.x] = sdata[0]
    else:                                   # a GPU: the given tree, by atomic exchanges
        sbits = cuda.shared.array(0, dtype=np.int32)
        loc = cuda.local.array(2, g_idata.dtype)
        bits = loc.view(np.int32)
        loc[0] = 0
        if i < g_idata.size:
            loc[0] = g_idata[i]
        sbits[tid] = bits[0]
        cuda.syncthreads()
        s = 1
        while s < cuda.blockDim.x:
            index = 2 * s * tid
            if index < cuda.blockDim.x:
                bits[0] = cuda.atomic.exch(sbits, index, 0)
                bits[1] = cuda.atomic.exch(sbits, index + s, 0)
                loc[0] = loc[0] + loc[1]
                cuda.atomic.exch(sbits, index, bits[0])
            cuda.syncthreads()
            s *= 2
        if tid == 0:
            bits[0] = sbits[0]
            g_odata[cuda.blockIdx.x] = loc[0]
""",
    ),
    "attack_pruned_branch": (
        "01_vector_add",
        "tune_vector_add",
        """@cuda.jit
def add_fast(n, x, y):
    if cuda.ldca is None:                     # None in the simulator, real when compiled
        return
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        y[i] = x[i] + y[i]
""",
    ),
}
