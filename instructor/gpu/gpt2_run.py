"""What #49's GPT-2 scripts (gpt2_parts.py, gpt2_where.py, layernorm_rows.py) share: a result
file kept after every step, and GPT-2 at the bench's seeds (``course.bench.gpt2``).

Imported by those scripts after ``course.platform.runtime`` (which picks the simulator where
there is no GPU); run as ``python instructor/gpu/NAME.py``, this folder is on the path.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def keeper(name: str, width: int = 1500):
    """(res, keep): ``res`` starts with the device's name; ``keep(key, value)`` stores a
    result, prints it (``width`` characters) and writes OUT_DIR/``name`` (OUT_DIR: the first
    argument, default "."), so a run cut short keeps what it measured."""
    from course.platform import runtime

    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"device": runtime.device_info().get("name")}

    def keep(key, value):
        res[key] = value
        print(key, json.dumps(value)[:width], flush=True)
        (out / name).write_text(json.dumps(res, indent=1))

    return res, keep


def bench_gpt2(smoke: bool):
    """(cfg, B, T, params, tokens): GPT-2 124M at B 4, T 1024 with the bench's weights and
    tokens (seeds 11, 12; tokens 11); in the simulator (``smoke``) the TINY model at 1 x 9."""
    import numpy as np

    from course.kernels import gpt2 as G

    cfg, B, T = (G.TINY, 1, 9) if smoke else (G.Config(), 4, 1024)
    params = G.jitter(G.init_params(cfg, seed=11), seed=12)
    tokens = np.random.default_rng(11).integers(0, cfg.vocab_size, (B, T))
    return cfg, B, T, params, tokens
