"""Hidden cases for ``tune_matmul``: the same as those of ``matmul_tiled``, whose spec it shares."""

import runpy
from pathlib import Path

_BASE = runpy.run_path(str(Path(__file__).with_name("matmul_tiled.py")))
POINTS = _BASE.get("POINTS", 1)
cases = _BASE["cases"]
