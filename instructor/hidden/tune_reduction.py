"""Hidden cases for ``tune_reduction``: the same as those of ``reduce_sequential``, whose spec it shares."""

import runpy
from pathlib import Path

_BASE = runpy.run_path(str(Path(__file__).with_name("reduce_sequential.py")))
POINTS = _BASE.get("POINTS", 1)
cases = _BASE["cases"]
