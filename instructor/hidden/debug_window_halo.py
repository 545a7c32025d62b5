"""Hidden cases for ``debug_window_halo``: the same as those of ``window_average_shared``, whose spec it shares."""

import runpy
from pathlib import Path

_BASE = runpy.run_path(str(Path(__file__).with_name("window_average_shared.py")))
POINTS = _BASE.get("POINTS", 1)
cases = _BASE["cases"]
