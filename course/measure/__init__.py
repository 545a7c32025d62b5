"""Measuring: one timing helper, the device's ceilings, and tables of the numbers.

``timing.benchmark`` (CUDA events on a GPU, wall time marked as simulated otherwise);
``perf`` (measured copy bandwidth and FP32 rate, floors, whether CuPy or PyTorch is there);
``peers`` (the CuPy and PyTorch work the course's kernels are timed against); ``pairs``
(float pairs as 8-byte words); ``tables`` (plain and HTML tables).
"""
