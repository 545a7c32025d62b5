"""Hidden cases for ``debug_layernorm_sync``: the same as those of ``layernorm_warp``, whose
spec it shares."""

import runpy
from pathlib import Path

_BASE = runpy.run_path(str(Path(__file__).with_name("layernorm_warp.py")))
POINTS = _BASE.get("POINTS", 1)
cases = _BASE["cases"]
