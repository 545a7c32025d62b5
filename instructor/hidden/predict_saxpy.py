"""Answer key of ``predict_saxpy`` (lesson 12): bytes moved by saxpy_slow and saxpy_fast."""


def answers(ex):
    slow = 4 + 3 * 4 + 3 * 4  # fill: write temp; temp * x: 2 reads + 1 write; + y: same
    fast = 3 * 4  # read x, read y, write y
    return {
        "slow_bytes_per_element": slow,
        "fast_bytes_per_element": fast,
        "slow_over_fast": slow / fast,
        "fast_mb": fast * ex.N / 1e6,
    }
