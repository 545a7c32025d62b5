"""Answer key of ``predict_profile`` (lesson 10), read from the committed H100 profiles by
the code that shows them: a new capture changes the key and the questions together."""

import json

from course.exercises.profiling import DEVICE, PARTS, PROFILES, _row, committed


def answers(ex):
    flash = _row("attention-flash_tiled", "flash_fwd")
    tuned = _row("histogram-tuned", "histogram_tuned")
    three = committed("attention-three_kernels").rows
    mean = _row("faces-mean_split", "mean_split")
    calls = json.loads((PROFILES / f"{DEVICE}-breakdown.json").read_text())["calls"]
    part = max(PARTS, key=lambda k: calls["faces-mean_split"][k])
    return {
        "flash_limiter": flash["occupancy_limiter"],
        "histogram_tuned_limiter": tuned["occupancy_limiter"],
        "most_store_conflicts": max(three, key=lambda r: r["shared_st_conflicts"] or 0)["kernel"],
        "mean_sol": "memory" if mean["sol_memory_pct"] >= mean["sol_compute_pct"] else "compute",
        "mean_top_stall": mean["top_stalls"][0][0],
        "mean_call_part": PARTS[part],
    }
