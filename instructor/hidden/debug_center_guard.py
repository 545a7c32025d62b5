"""Hidden cases for ``debug_center_guard``: the same as those of ``center_coalesced``, whose spec it shares."""

import runpy
from pathlib import Path

_BASE = runpy.run_path(str(Path(__file__).with_name("center_coalesced.py")))
POINTS = _BASE.get("POINTS", 1)
cases = _BASE["cases"]
