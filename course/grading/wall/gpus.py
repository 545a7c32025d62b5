"""Which GPUs a sandbox can reach: only those its maker sees, not every GPU on the machine.

The NVIDIA driver gives each GPU a device node ``/dev/nvidiaN`` (``N`` its minor number)
beside the nodes every CUDA process needs (``nvidiactl``, ``nvidia-uvm``, ...).
``CUDA_VISIBLE_DEVICES`` is only a variable: a cell can clear it in a process of its own,
and with every node bound it would then reach every GPU, among them the one another Dask
worker is timing a student on.  So a sandbox gets the shared nodes and the nodes of the
GPUs its maker sees; the others do not exist in its tree.

The driver names each GPU by its PCI address, and ``/proc/driver/nvidia/gpus/<address>/
information`` gives that GPU's minor number; CUDA gives each device it shows its address
and UUID (``cuDeviceGetPCIBusId``, ``cuDeviceGetUuid``; no context made).  Inside the
sandbox ``CUDA_VISIBLE_DEVICES`` names the same GPUs by UUID, so the choice holds however
the driver numbers the GPUs whose nodes it can open.  Where any step fails (no driver, MIG
slices, an address with no minor), every node is bound as before, and the sandbox's
description says so.
"""

from __future__ import annotations

import ctypes
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc/driver/nvidia/gpus")
DEV = Path("/dev")
ONE_GPU = re.compile(r"nvidia\d+$")  # a GPU's own node; the rest are shared
NO_DEVICE = 100  # CUDA_ERROR_NO_DEVICE


@dataclass(frozen=True)
class Selection:
    """The GPUs a sandbox gets: their nodes' names (``nvidia1``), their UUIDs in CUDA's
    order, and how many GPU nodes the machine has; ``why``: where every node is bound."""

    nodes: tuple[str, ...] = ()
    uuids: tuple[str, ...] = ()
    of: int = 0
    why: str = ""

    @property
    def restricted(self) -> bool:
        return not self.why

    def describe(self) -> str:
        if not self.of:
            return "no GPU node"
        if not self.restricted:
            return f"every GPU node ({self.why})"
        if not self.nodes:
            return f"none of the {self.of} GPU nodes (its grader sees no GPU)"
        return f"the GPU node(s) {', '.join(self.nodes)} of {self.of}"


def address(bus_id: str) -> tuple[int, int, int, int]:
    """'00000000:18:00.0' or '0000:18:00.0' -> (domain, bus, device, function)."""
    m = re.fullmatch(r"\s*([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-7])\s*", bus_id)
    if m is None:
        raise ValueError(f"not a PCI address: {bus_id!r}")
    return tuple(int(g, 16) for g in m.groups())  # type: ignore[return-value]


def minors(proc: Path) -> dict[tuple[int, int, int, int], int]:
    """Each GPU's PCI address -> its device minor number, as the driver lists them."""
    out = {}
    for folder in sorted(proc.glob("*")) if proc.is_dir() else []:
        try:
            text = (folder / "information").read_text()
            m = re.search(r"^Device Minor:\s*(\d+)", text, re.M)
            if m is not None:
                out[address(folder.name)] = int(m.group(1))
        except (OSError, ValueError):
            continue
    return out


def gpu_nodes(dev: Path) -> int:
    """How many GPUs' own nodes (``nvidiaN``) ``dev`` holds."""
    return sum(1 for p in dev.glob("nvidia*") if ONE_GPU.match(p.name))


def select(
    devices: list[tuple[str, str]], proc: Path | None = None, dev: Path | None = None
) -> Selection:
    """The selection for CUDA's ``devices`` ((PCI address, UUID) in its order)."""
    proc, dev = proc or PROC, dev or DEV
    of = gpu_nodes(dev)
    if not devices:  # CUDA shows the grader no GPU (CUDA_VISIBLE_DEVICES=""): none
        return Selection(of=of)
    known = minors(proc)
    nodes = []
    for bus_id, _ in devices:
        try:
            minor = known.get(address(bus_id))
        except ValueError:
            minor = None
        if minor is None or not (dev / f"nvidia{minor}").exists():
            return Selection(of=of, why=f"no device node found for the GPU at {bus_id}")
        nodes.append(f"nvidia{minor}")
    return Selection(tuple(nodes), tuple(u for _, u in devices), of)


def nodes(selection: Selection, dev: Path | None = None) -> list[Path]:
    """The ``/dev`` entries to bind: the shared NVIDIA nodes, and the selected GPUs' own
    (every one where nothing is selected)."""
    out = []
    for p in sorted((dev or DEV).glob("nvidia*")):
        if not ONE_GPU.match(p.name) or not selection.restricted or p.name in selection.nodes:
            out.append(p)
    return out


def uuid_text(raw: bytes) -> str:
    """CUDA's 16 bytes -> 'GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def cuda_devices() -> list[tuple[str, str]] | None:
    """(PCI address, UUID) of each device CUDA shows this process, or None where the driver
    cannot say."""
    from ...platform import runtime

    lib = runtime.libcuda()
    if lib is None:
        return None
    count, out = ctypes.c_int(0), []
    try:
        started = lib.cuInit(0)
        if started == NO_DEVICE:  # what cuInit says where CUDA_VISIBLE_DEVICES hides all
            return []
        if started != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return None
        get_uuid = getattr(lib, "cuDeviceGetUuid_v2", None) or lib.cuDeviceGetUuid
        for i in range(count.value):
            dev, bus, raw = ctypes.c_int(0), ctypes.create_string_buffer(64), (ctypes.c_char * 16)()
            if (
                lib.cuDeviceGet(ctypes.byref(dev), i) != 0
                or lib.cuDeviceGetPCIBusId(bus, 64, dev) != 0
                or get_uuid(raw, dev) != 0
            ):
                return None
            out.append((bus.value.decode(), uuid_text(bytes(raw))))
    except (AttributeError, OSError, UnicodeDecodeError):
        return None
    return out


@functools.lru_cache(maxsize=4)
def _visible(named: str | None) -> Selection:
    of = gpu_nodes(DEV)
    if of == 0:
        return Selection(why="this machine has no GPU node")
    if named and any(d.strip().upper().startswith("MIG") for d in named.split(",")):
        return Selection(of=of, why="MIG slices are named")
    devices = cuda_devices()
    if devices is None:
        return Selection(of=of, why="the driver could not list its GPUs")
    return select(devices)


def visible() -> Selection:
    """The selection for this process's ``CUDA_VISIBLE_DEVICES`` (worked out once)."""
    return _visible(os.environ.get("CUDA_VISIBLE_DEVICES"))


def sandbox_env(env: dict, selection: Selection) -> dict:
    """``env`` with ``CUDA_VISIBLE_DEVICES`` naming the selected GPUs by UUID."""
    if not selection.restricted:
        return env
    return {**env, "CUDA_VISIBLE_DEVICES": ",".join(selection.uuids)}
