"""Answer key of ``predict_gpt2`` (lesson 11): GPT-2 124M's FLOPs by kind and launch counts."""


def answers(ex):
    B, T, C, L, V = ex.B, ex.T, 768, 12, 50257
    rows = B * T
    matmul = L * 2 * rows * (C * 3 * C + C * C + C * 4 * C + 4 * C * C) + 2 * rows * C * V
    attention = L * 2 * 2 * B * (T * (T + 1) // 2) * C
    return {
        "matmul_gflop": matmul / 1e9,
        "attention_gflop": attention / 1e9,
        "matmul_percent": 100 * matmul / (matmul + attention),
        "layernorm_launches": 2 * L + 1,
        "residual_launches": 2 * L,
    }
