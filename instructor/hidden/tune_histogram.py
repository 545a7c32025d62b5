"""Hidden cases for ``tune_histogram``: the same as those of ``histogram_shared``, whose spec it shares."""

import runpy
from pathlib import Path

_BASE = runpy.run_path(str(Path(__file__).with_name("histogram_shared.py")))
POINTS = _BASE.get("POINTS", 1)
cases = _BASE["cases"]
