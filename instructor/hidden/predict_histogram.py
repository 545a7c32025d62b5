"""Answer key of ``predict_histogram`` (lesson 09): atomics of a naive and a privatized
histogram."""

from math import ceil


def answers(ex):
    blocks = ceil(ex.CHANNELS / ex.CPB) * ceil(ex.LENGTH / ex.RPB)
    return {
        "global_atomics": ex.LENGTH * ex.CHANNELS,
        "blocks": blocks,
        "max_flush_atomics": blocks * ex.CPB * 256,
        "worst_bank_ways": 1,
    }
