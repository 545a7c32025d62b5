"""*Predict* questions about whole programs: covariance and attention FLOPs, a histogram's
atomics, saxpy's bytes and GPT-2's forward (lessons 07 to 12; registered in ``predict.py``).
"""

from __future__ import annotations

from .questions import Predict, Question

# ---------------------------------------------------------------------------------------
# lesson 07: covariance work and CGMA


class PredictCGMA(Predict):
    M, PIXELS = 202_599, 2_475

    def questions(self):
        m, n = self.M, self.PIXELS
        return [
            Question(
                "flops",
                f"FLOPs of the full covariance D^T D (m = {m:,}, n = {n:,})",
                "n^2 entries, each m multiply-adds of 2 FLOPs",
            ),
            Question(
                "symmetric_flops",
                "FLOPs when only the entries with x >= y are computed",
                "n (n + 1) / 2 entries, each 2 m FLOPs",
            ),
            Question(
                "naive_cgma",
                "FLOPs per global load of the naive kernel (2 loads, 1 multiply-add per term)",
                "FLOPs of one term / loads of one term",
                rtol=0.01,
            ),
            Question(
                "tiled_cgma_8",
                "FLOPs per global load with chunk_size = 8 tiles",
                "a block loads 2 c^2 floats per chunk and does 2 c^3 FLOPs on them",
                rtol=0.01,
            ),
            Question(
                "tiled_cgma_32", "... with chunk_size = 32", "the same ratio with c = 32", rtol=0.01
            ),
        ]


# ---------------------------------------------------------------------------------------
# lesson 08: attention FLOPs and bytes


class PredictAttention(Predict):
    SHAPE = (4, 64, 8192, 128)  # the CS149 leaderboard shape (B, H, N, d)

    def questions(self):
        b, h, n, d = self.SHAPE
        return [
            Question(
                "flops",
                f"FLOPs of attention, (B, H, N, d) = ({b}, {h}, {n}, {d})",
                "two products (Q K^T and P V) of 2 N^2 d FLOPs per head",
            ),
            Question(
                "causal_flops",
                "... with a causal mask, counting only the (query, key) pairs inside the mask",
                "query i sees keys 0..i: N (N + 1) / 2 pairs per head, 4 d FLOPs each",
            ),
            Question(
                "score_bytes",
                "bytes of the float32 score matrices S of all heads",
                "one N x N matrix per head, 4 bytes an entry",
            ),
            Question(
                "flash_bytes",
                "bytes flash attention must move (float16 Q, K, V, O "
                "once, plus a float32 log-sum-exp per row)",
                "four B H N d arrays of 2-byte floats, plus 4 bytes per row of each head",
            ),
        ]


# ---------------------------------------------------------------------------------------
# lesson 09: global atomics of a histogram


class PredictHistogram(Predict):
    LENGTH, CHANNELS, CPB, RPB = 1 << 20, 512, 4, 64

    def questions(self):
        length, ch, cpb, rpb = self.LENGTH, self.CHANNELS, self.CPB, self.RPB
        return [
            Question(
                "global_atomics",
                f"global atomic adds of the one-atomic-per-byte kernel "
                f"on {length:,} rows x {ch} channels",
                "one per input byte",
            ),
            Question(
                "blocks",
                f"blocks of the privatized kernel ({cpb} channels x {rpb} rows per block)",
                "ceil(channels / 4) x ceil(rows / 64)",
            ),
            Question(
                "max_flush_atomics",
                "at most how many global atomic adds its blocks "
                "make when they add their shared bins to hist",
                "each block adds at most 256 bins for each of its channels",
            ),
            Question(
                "worst_bank_ways",
                "bank-conflict ways of 32 lanes that all add to the "
                "same shared bin (a constant channel)",
                "the hardware serializes atomics on one word, but one word in one bank "
                "is not a bank conflict: count wavefronts as for a broadcast",
            ),
        ]


# ---------------------------------------------------------------------------------------
# lesson 12: bytes of saxpy two ways (the UW lecture's saxpy_slow and saxpy_fast)


class PredictSaxpy(Predict):
    N = 1 << 26

    def questions(self):
        return [
            Question(
                "slow_bytes_per_element",
                "bytes per element saxpy_slow moves: fill temp "
                "with a, temp = temp * x, y = temp + y (float32)",
                "count each pass's reads and writes of 4-byte floats: fill writes one, "
                "each transform reads two and writes one",
            ),
            Question(
                "fast_bytes_per_element",
                "bytes per element saxpy_fast moves: one transform y = a * x + y",
                "it reads x and y and writes y once",
            ),
            Question(
                "slow_over_fast",
                "how many times longer saxpy_slow takes on a bandwidth-bound GPU",
                "the ratio of the bytes moved",
                rtol=0.02,
            ),
            Question(
                "fast_mb",
                "megabytes (10^6 bytes) saxpy_fast moves for n = 2^26",
                "bytes per element x n / 1e6",
                rtol=0.01,
            ),
        ]


# ---------------------------------------------------------------------------------------
# lesson 11: where GPT-2's forward pass spends its work (the CS 483 report's table)


class PredictGPT2(Predict):
    B, T = 4, 1024  # GPT-2 124M: 12 layers, 12 heads, d_model 768, vocabulary 50257

    def questions(self):
        return [
            Question(
                "matmul_gflop",
                f"GFLOP (10^9, 2 per multiply-add) of all the matmuls of "
                f"one forward at B = {self.B}, T = {self.T}: per layer qkv (768 -> 2304), "
                "attention projection (768 -> 768), MLP up (768 -> 3072) and down "
                "(3072 -> 768), then the logits (768 -> 50257)",
                "2 x (B*T) x in x out for each; 12 layers; one logits matmul",
                rtol=0.01,
            ),
            Question(
                "attention_gflop",
                "GFLOP of causal attention (Q K^T and P V over the "
                "T (T + 1) / 2 query-key pairs of each head, all layers)",
                "2 x 2 x B x T(T+1)/2 x d_model per layer",
                rtol=0.01,
            ),
            Question(
                "matmul_percent",
                "the matmuls' share of the forward's FLOPs, in %",
                "matmul / (matmul + attention) x 100",
                rtol=0.005,
            ),
            Question(
                "layernorm_launches",
                "layernorm launches in one forward",
                "two a layer, and the final one",
            ),
            Question(
                "residual_launches",
                "residual-add kernel launches in one forward of the "
                "unfused build (the report's table; fused, the adds ride in the matmuls)",
                "one after each of a layer's two sublayers",
            ),
        ]
