"""Hidden cases for ``debug_softmax_rescale``: the same as those of ``online_softmax``, whose spec it shares."""

import runpy
from pathlib import Path

_BASE = runpy.run_path(str(Path(__file__).with_name("online_softmax.py")))
POINTS = _BASE.get("POINTS", 1)
cases = _BASE["cases"]
