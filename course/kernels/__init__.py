"""One module per lesson: the kernels its notebook shows, with host wrappers.

Each module exposes
- the ``@cuda.jit`` kernels, exactly as the notebook shows them (a test compares the text),
- ``VARIANTS``: name -> host function taking numpy arrays and returning numpy results,
  launch settings as keyword arguments (the contract the benchmarks and tests use),
- ``reference``: the float64 numpy answer,
- ``PTX_SIGNATURES``: kernel name -> numba signature, so CI can compile every kernel for
  a real GPU target (the simulator accepts code that a GPU compiler rejects).
"""
