"""Stop in a notebook ends in one course sentence, not a traceback through numba.

JupyterLab's Stop button (Ctrl-C in a console) raises ``KeyboardInterrupt`` wherever the
cell's Python happens to be: in a simulator launch that is deep inside numba's simulator
and its threads, and the 30 lines IPython would print say nothing a student can use.  With
:func:`install` (``import course`` calls it inside IPython) the cell ends instead with one
sentence: what was running (the kernel and its launch, when it was a simulator launch, or
the line of the cell), that it stopped, and that the notebook's kernel is still usable.
A ``course.check`` that is stopped reports itself (``[INTERRUPTED]``) and never gets here.

Only ``KeyboardInterrupt`` is handled, only in an IPython shell, and only where no other
custom exception handler is installed; everything else shows as IPython shows it.
"""

from __future__ import annotations

import sys
import traceback

USABLE = "The notebook's kernel is still usable (your variables are kept): run the cell again when ready."


def _launch(tb) -> str:
    """'kernel never_ends, grid (1, 1) x block (2, 2)' of the outermost simulator launch
    in ``tb`` (numba's FakeCUDAKernel), or ''."""
    for frame, _line in traceback.walk_tb(tb):
        path = frame.f_code.co_filename.replace("\\", "/")
        if "/cuda/simulator/" not in path:
            continue
        kernel = frame.f_locals.get("self")
        fn = getattr(kernel, "fn", None)
        dims = [getattr(kernel, k, None) for k in ("grid_dim", "block_dim")]
        if fn is not None and all(dims):
            grid, block = (tuple(d or ()) for d in dims)
            name = getattr(fn, "__name__", "a kernel")
            return f"the simulator's launch of {name}, grid {grid} x block {block}"
    return ""


def _cell_line(tb) -> str:
    """'line 3 of the cell' (the last frame of the notebook's own code), or ''."""
    line = ""
    for frame, lineno in traceback.walk_tb(tb):
        path = frame.f_code.co_filename
        if path.startswith("<ipython-input") or "/ipykernel_" in path:  # a cell's code
            line = f"line {lineno} of the cell"
    return line


def sentence(tb) -> str:
    """The one sentence a stopped cell ends with."""
    what = _launch(tb) or _cell_line(tb) or "the cell"
    gpu = ""
    from . import runtime

    if runtime.MODE == "gpu":
        gpu = " (a kernel already queued on the GPU still runs to its end)"
    return f"Stopped: {what} was interrupted and has stopped{gpu}; arrays it was writing may hold partial results. {USABLE}"


def _handler(shell, etype, value, tb, tb_offset=None):
    stb = [sentence(tb)]
    shell._showtraceback(etype, value, stb)  # the error output: this line only
    return stb


def install() -> bool:
    """Show a stopped cell as one sentence in this IPython shell (True when installed)."""
    ipython = sys.modules.get("IPython")  # a notebook has it loaded; a script never pays
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or getattr(shell, "custom_exceptions", ()) not in ((), (KeyboardInterrupt,)):
        return False  # not a notebook, or someone else's handler: leave it
    shell.set_custom_exc((KeyboardInterrupt,), _handler)
    return True
