"""Hidden cases for ``debug_grid_stride``: the same as those of ``vector_add``, whose spec it shares."""

import runpy
from pathlib import Path

_BASE = runpy.run_path(str(Path(__file__).with_name("vector_add.py")))
POINTS = _BASE.get("POINTS", 1)
cases = _BASE["cases"]
