"""Hidden cases for ``debug_matrix_layout``: the same as those of ``matrix_add``, whose spec it shares."""

import runpy
from pathlib import Path

_BASE = runpy.run_path(str(Path(__file__).with_name("matrix_add.py")))
POINTS = _BASE.get("POINTS", 1)
cases = _BASE["cases"]
