"""Measuring: one timing helper, the device's ceilings, and tables of the numbers.

Floor 1 (may import ``platform``).  ``timing.benchmark`` (CUDA events on a GPU, wall time
marked as simulated otherwise); ``perf`` (measured copy bandwidth and FP32 rate, floors,
peers such as CuPy and PyTorch); ``pairs`` (float pairs as 8-byte words); ``tables``
(plain and HTML tables).
"""
