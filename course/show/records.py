"""A slider panel's grid as a real GPU ran it: what a panel shows in simulator mode.

The simulator runs a kernel as Python threads on the CPU: its wall time says nothing of a
GPU (in lesson 01, 64 threads per block *looks* slower than 32).  So a panel's whole grid
of settings - every variant at every valid point - is recorded once on a GPU with
``python -m course bench sliders`` and committed under ``assets/sliders/`` (one JSON file
per panel, device and date in its name and inside).  In simulator mode the panel reads the
record and shows the GPU's time and bandwidth or FLOP/s for the chosen setting, marked with
the device and the date: its sliders are the record's (the GPU's settings, which the
simulator could not launch in a reasonable time), and nothing is timed; what the simulator
can say of a setting comes from a small launch of the same shape (``simcounts.py``).  On a
GPU the live measurement stays and the record is drawn beside it as a reference.

A record (JSON)::

    {"panel": "04_matmul/v3", "title": "...", "device": "NVIDIA H100 80GB HBM3",
     "date": "2026-11-26", "command": "python -m course bench sliders 04_matmul/v3",
     "ceilings": {"copy_gbps": 3000.0, "fp32_tflops": 50.0},
     "x": "S", "sliders": {"S": [4, 8], "L": [16, 32], "V": [2, 4]},
     "value": {"S": 4, "L": 16, "V": 2},     # the panel's default on the GPU
     "rate": "GFLOP/s",            # or "GB/s", or null
     "points": [{"params": {"S": 4, "L": 16, "V": 2},
                 "results": {"v3": {"median_ms": 1.2, "min_ms": 1.1, "max_ms": 1.3,
                                    "n": 20, "rate": 5400.0}}}, ...]}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..platform import resources

FOLDER = ("assets", "sliders")


def folder() -> Path:
    """Where the committed records are (the checkout's, or the installed package's)."""
    return resources.path(*FOLDER)


def slug(text: str) -> str:
    """A file-name-safe form: '04_matmul/v3' -> '04_matmul-v3'."""
    return re.sub(r"[^a-z0-9_.]+", "-", text.lower()).strip("-")


@dataclass
class Record:
    """One panel's recorded grid on one device."""

    panel: str
    device: str
    date: str
    points: list
    x: str = ""
    sliders: dict = field(default_factory=dict)
    value: dict = field(default_factory=dict)  # the panel's default on the GPU
    rate: str | None = None
    ceilings: dict = field(default_factory=dict)
    command: str = ""
    title: str = ""

    @classmethod
    def from_dict(cls, d: dict) -> Record:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @property
    def label(self) -> str:
        """'recorded on NVIDIA H100 80GB HBM3, 2026-11-26'."""
        return f"recorded on {self.device}, {self.date}"

    def at(self, params: dict) -> dict | None:
        """{variant: row} recorded at ``params`` (None when the grid has no such point)."""
        for p in self.points:
            if all(p["params"].get(k) == v for k, v in params.items()):
                return p["results"]
        return None

    def save(self, where: Path | None = None) -> Path:
        """Write ``<panel>-<device>-<date>.json`` under ``where`` (assets/sliders)."""
        where = Path(where) if where else folder()
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{slug(self.panel)}--{slug(self.device)}-{self.date}.json"
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path


def load(panel: str, where: Path | None = None) -> Record | None:
    """The newest record of ``panel`` (by date in the file), or None when there is none."""
    where = Path(where) if where else folder()
    found = []
    for path in sorted(where.glob(f"{slug(panel)}--*.json")) if where.is_dir() else []:
        try:
            rec = Record.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if rec.panel == panel and not rec.device.startswith("simulator"):
            found.append(rec)  # a dry run's times are a CPU's: never shown
    return max(found, key=lambda r: r.date) if found else None
