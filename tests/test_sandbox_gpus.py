"""A sandbox reaches only the GPUs its maker sees (``wall/gpus.py``): a Dask worker's cell
that clears ``CUDA_VISIBLE_DEVICES`` must not find another worker's GPU.  The driver's
listing and ``/dev`` are faked here; the real ones are checked on a 2-GPU machine by
``instructor/gpu/gpu_nodes.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from course.grading.wall import gpus, isolate

A0, A1 = "00000000:18:00.0", "00000000:2A:00.0"  # nvidia-smi's spelling (8-digit domain)


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A fake two-GPU machine: the driver's listing and /dev, minors 0 and 3."""
    proc, dev = tmp_path / "proc", tmp_path / "dev"
    for bus, minor in (("0000:18:00.0", 0), ("0000:2a:00.0", 3)):
        (proc / bus).mkdir(parents=True)
        (proc / bus / "information").write_text(
            f"Model: \t NVIDIA H200\nGPU UUID: \t GPU-x\nBus Location: \t {bus}\n"
            f"Device Minor: \t {minor}\nGPU Excluded:\t No\n"
        )
    dev.mkdir()
    for name in ("nvidia0", "nvidia3", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        (dev / name).write_text("")
    (dev / "nvidia-caps").mkdir()
    monkeypatch.setattr(gpus, "PROC", proc)
    monkeypatch.setattr(gpus, "DEV", dev)
    return dev


def test_pci_addresses_compare_across_spellings():
    assert gpus.address(A1) == gpus.address("0000:2a:00.0") == (0, 0x2A, 0, 0)
    with pytest.raises(ValueError):
        gpus.address("GPU-1234")


def test_the_selected_gpu_gets_its_own_node_and_the_shared_ones(machine):
    sel = gpus.select([(A1, "GPU-b")])
    assert sel.restricted and sel.nodes == ("nvidia3",) and sel.of == 2
    names = [p.name for p in gpus.nodes(sel)]
    assert "nvidia3" in names and "nvidia0" not in names
    assert {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps"} <= set(names)
    assert "nvidia3 of 2" in sel.describe()


def test_both_gpus_in_cudas_order(machine):
    sel = gpus.select([(A1, "GPU-b"), (A0, "GPU-a")])
    assert sel.nodes == ("nvidia3", "nvidia0") and sel.uuids == ("GPU-b", "GPU-a")
    env = gpus.sandbox_env({"CUDA_VISIBLE_DEVICES": "1,0", "PATH": "/bin"}, sel)
    assert env == {"CUDA_VISIBLE_DEVICES": "GPU-b,GPU-a", "PATH": "/bin"}


@pytest.mark.parametrize(
    "devices, why",
    [
        ([("00000000:99:00.0", "GPU-c")], "no device node found"),  # an address not listed
        ([("not an address", "GPU-c")], "no device node found"),
    ],
)
def test_anything_unmatched_binds_every_node(machine, devices, why):
    sel = gpus.select(devices)
    assert not sel.restricted and why in sel.why
    names = [p.name for p in gpus.nodes(sel)]
    assert {"nvidia0", "nvidia3"} <= set(names)
    assert gpus.sandbox_env({"CUDA_VISIBLE_DEVICES": "1"}, sel) == {"CUDA_VISIBLE_DEVICES": "1"}


def test_a_listed_gpu_without_its_node_binds_every_node(machine):
    (machine / "nvidia3").unlink()
    assert not gpus.select([(A1, "GPU-b")]).restricted


def test_mig_slices_bind_every_node(machine, monkeypatch):
    monkeypatch.setattr(gpus, "cuda_devices", lambda: pytest.fail("CUDA asked"))
    gpus._visible.cache_clear()
    sel = gpus._visible("MIG-4f5e")
    assert not sel.restricted and "MIG" in sel.why


def test_the_sandbox_tree_binds_only_the_selected_gpu(machine, tmp_path):
    sel = gpus.select([(A1, "GPU-b")])
    binds = {p for kind, p, _ in isolate.plan([], tmp_path / "run", sel) if kind == "bind"}
    assert machine / "nvidia3" in binds and machine / "nvidiactl" in binds
    assert machine / "nvidia0" not in binds
    every = {p for kind, p, _ in isolate.plan([], tmp_path / "run", gpus.Selection(why="x"))}
    assert machine / "nvidia0" in every


def test_the_sandbox_names_its_gpu_by_uuid(machine, tmp_path, monkeypatch):
    sel = gpus.select([(A1, "GPU-b")])
    monkeypatch.setattr(isolate, "visible", lambda: sel)
    iso = isolate.Isolation(["unshare"], [], tmp_path / "run")
    plan = iso.tree_plan({"CUDA_VISIBLE_DEVICES": "1", "HOME": "/tmp"})
    assert plan["env"]["CUDA_VISIBLE_DEVICES"] == "GPU-b"
    binds = [p for kind, p, _ in plan["early"] + plan["late"] if kind == "bind"]
    assert str(machine / "nvidia0") not in binds and str(machine / "nvidia3") in binds
    assert "the GPU node(s) nvidia3 of 2" in iso.describe()


def test_uuid_spelling():
    raw = bytes(range(16))
    assert gpus.uuid_text(raw) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"


def test_no_driver_here_binds_what_there_is(monkeypatch):
    """On this machine (the simulator's): no GPU node, nothing bound, and it says so."""
    gpus._visible.cache_clear()
    sel = gpus.visible()
    if any(gpus.ONE_GPU.match(p.name) for p in Path("/dev").glob("nvidia*")):
        pytest.skip("this machine has GPU nodes")
    assert sel.describe() == "no GPU node"


def test_a_grader_shown_no_gpu_binds_none(machine):
    """CUDA_VISIBLE_DEVICES="": a cell that cleared it must not find the machine's GPUs."""
    sel = gpus.select([])
    assert sel.restricted and sel.nodes == () and "none of the 2" in sel.describe()
    names = {p.name for p in gpus.nodes(sel)}
    assert "nvidia0" not in names and "nvidia3" not in names and "nvidiactl" in names
    assert gpus.sandbox_env({"CUDA_VISIBLE_DEVICES": ""}, sel)["CUDA_VISIBLE_DEVICES"] == ""


class FakeCuda:
    """libcuda's few calls ``gpus.cuda_devices`` makes, for ``devices`` (bus, 16 bytes)."""

    def __init__(self, init: int, devices):
        self.init, self.devices = init, devices

    def cuInit(self, flags):
        return self.init

    def cuDeviceGetCount(self, count):
        count._obj.value = len(self.devices)
        return 0

    def cuDeviceGet(self, dev, i):
        dev._obj.value = i
        return 0

    def cuDeviceGetPCIBusId(self, buf, size, dev):
        buf.value = self.devices[dev.value][0].encode()
        return 0

    def cuDeviceGetUuid_v2(self, raw, dev):
        raw[:] = self.devices[dev.value][1]
        return 0


def test_cuda_lists_its_devices_by_address_and_uuid(monkeypatch):
    from course.platform import runtime

    two = [(A1, bytes(range(16))), (A0, bytes(16))]
    monkeypatch.setattr(runtime, "_libcuda", lambda: FakeCuda(0, two))
    assert gpus.cuda_devices() == [
        (A1, "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"),
        (A0, "GPU-00000000-0000-0000-0000-000000000000"),
    ]
    monkeypatch.setattr(runtime, "_libcuda", lambda: FakeCuda(gpus.NO_DEVICE, two))
    assert gpus.cuda_devices() == []  # CUDA_VISIBLE_DEVICES="": no GPU, none bound
    monkeypatch.setattr(runtime, "_libcuda", lambda: FakeCuda(3, two))
    assert gpus.cuda_devices() is None  # the driver cannot say: every node, as before
