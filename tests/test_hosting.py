"""Where the course runs: a MIG slice, Colab, JupyterHub (course.platform.hosting, runtime.banner)."""

import json
import subprocess
import sys
import types

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

from conftest import REPO

from course.grading.classroom import distribute
from course.platform import hosting, runtime


@pytest.mark.parametrize(
    "name, want",
    [
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "1g.10gb"),
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "3g.20gb"),
        ("NVIDIA H100 80GB HBM3 MIG 1g.20gb+me", "1g.20gb+me"),
        ("NVIDIA H100 80GB HBM3", ""),
        ("", ""),
    ],
)
def test_mig_profile_is_read_from_the_device_name(name, want):
    assert hosting.mig_profile(name) == want


@pytest.fixture
def a_gpu(monkeypatch):
    """Pretend the probe found a GPU of some size (nothing here touches numba)."""

    def set_gpu(name, gib, sms=132):
        monkeypatch.setattr(runtime, "MODE", "gpu")
        monkeypatch.setattr(runtime, "GPU_MEMORY_GIB", gib)
        monkeypatch.setattr(
            runtime,
            "device_info",
            lambda: {
                "name": name,
                "compute_capability": (9, 0),
                "sm_count": sms,
                "memory_gib": round(gib, 1),
            },
        )

    monkeypatch.delenv("COURSE_SIZE", raising=False)
    return set_gpu


def test_a_small_mig_slice_gets_the_small_sizes_and_says_why(a_gpu):
    a_gpu("NVIDIA A100-SXM4-40GB MIG 1g.5gb", 4.75, sms=14)
    assert runtime.profile() == "sim"
    assert runtime.size(lecture=1 << 26, sim=2048) == 2048
    line = runtime.banner()
    assert "a MIG slice 1g.5gb" in line and "14 SMs" in line and "4.8 GiB" in line
    assert "sizes: sim" in line and f"need {hosting.LECTURE_NEEDS_GIB:g} GiB" in line


def test_a_large_enough_slice_keeps_the_lecture_sizes(a_gpu):
    a_gpu("NVIDIA H100 80GB HBM3 MIG 3g.40gb", 39.5, sms=60)
    assert runtime.profile() == "lecture"
    line = runtime.banner()
    assert "MIG slice 3g.40gb" in line and "60 SMs" in line and "sizes: lecture" in line
    assert "need" not in line


def test_course_size_overrides_the_memory_rule(a_gpu, monkeypatch):
    a_gpu("NVIDIA H100 80GB HBM3 MIG 1g.10gb", 1.0)
    monkeypatch.setenv("COURSE_SIZE", "lecture")
    assert runtime.profile() == "lecture"
    assert "need" not in runtime.banner()


def test_whole_gpu_and_unknown_memory_keep_the_lecture_sizes(a_gpu):
    a_gpu("NVIDIA H100 80GB HBM3", 79.1)
    assert runtime.profile() == "lecture" and "MIG" not in runtime.banner()
    a_gpu("Some GPU", 0.0)  # the probe could not read the memory
    assert runtime.profile() == "lecture"


def test_the_banner_names_colab_and_jupyterhub(monkeypatch):
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    monkeypatch.delenv("JUPYTERHUB_API_URL", raising=False)
    assert hosting.place() == "" and "on Google Colab" not in runtime.banner()
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    assert "simulator on JupyterHub" in runtime.banner()
    monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    assert hosting.on_colab() and "on Google Colab" in runtime.banner()


def test_doctor_reports_the_host_and_the_slice():
    out = subprocess.run(
        [sys.executable, "-m", "course", "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "JUPYTERHUB_USER": "alice"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "host                 JupyterHub" in out.stdout


# -- the Colab install cell ------------------------------------------------------------------


def _run_cell(monkeypatch, colab: bool):
    calls, widgets = [], []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append((cmd, kw)))
    if colab:
        google = types.ModuleType("google")
        mod = types.ModuleType("google.colab")
        mod.output = types.SimpleNamespace(enable_custom_widget_manager=lambda: widgets.append(1))
        google.colab = mod
        monkeypatch.setitem(sys.modules, "google", google)
        monkeypatch.setitem(sys.modules, "google.colab", mod)
    exec(compile(hosting.COLAB_CELL, "colab-cell", "exec"), {})
    return calls, widgets


def test_colab_cell_does_nothing_outside_colab(monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    assert _run_cell(monkeypatch, colab=False) == ([], [])


def test_colab_cell_installs_this_project_with_its_pins_and_turns_on_widgets(monkeypatch):
    calls, widgets = _run_cell(monkeypatch, colab=True)
    assert widgets == [1] and len(calls) == 1
    cmd, kw = calls[0]
    assert cmd[:4] == [sys.executable, "-m", "pip", "install"] and kw.get("check") is True
    req = cmd[-1]
    name = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]
    assert req == f"{name} @ git+https://github.com/{hosting.REPOSITORY}@{hosting.BRANCH}"
    # the pins Colab needs come with the project: numba-cuda with its CUDA 12 NVVM, numpy < 2.5
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("numba-cuda[cu12]") for d in deps)
    assert any(d.startswith("ipywidgets>=8") for d in deps)


def test_readme_has_an_open_in_colab_link_per_notebook():
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    table = hosting.colab_table(notebooks)
    assert table in (REPO / "README.md").read_text(), (
        "README's Colab table is stale: paste the output of `python -m course colab`"
    )


def test_colab_write_points_a_fork_at_the_fork(tmp_path):
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": ["import course\n"],
                "metadata": {},
                "outputs": [],
                "execution_count": None,
                "id": "a",
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    p = tmp_path / "x.ipynb"
    p.write_text(json.dumps(nb))
    assert distribute.set_colab_cell(p, hosting.colab_cell("me/fork", "dev"))
    assert not distribute.set_colab_cell(p, hosting.colab_cell("me/fork", "dev"))  # idempotent
    cells = json.loads(p.read_text())["cells"]
    assert "me/fork@dev" in "".join(cells[0]["source"]) and cells[1]["source"] == [
        "import course\n"
    ]
    assert distribute.set_colab_cell(p, hosting.COLAB_CELL)  # replaced
    assert len(json.loads(p.read_text())["cells"]) == 2
