"""Mode selection (gpu/sim), size profiles, and the doctor."""

import os
import subprocess
import sys

import pytest

import course
from course.platform import doctor, runtime


def run_py(code, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "COURSE_SIZE")}
    e.update(env)
    return subprocess.run(
        [sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120
    )


def test_no_gpu_selects_simulator_and_sets_the_variable():
    p = run_py(
        "import os, course; print(course.MODE, os.environ['NUMBA_ENABLE_CUDASIM']);"
        "from numba import config; print(config.ENABLE_CUDASIM)"
    )
    assert p.stdout.split() == ["sim", "1", "1"], p.stderr


def test_explicit_variable_is_respected():
    p = run_py(
        "import course; print(course.MODE, course.platform.runtime.MODE_REASON)",
        NUMBA_ENABLE_CUDASIM="1",
    )
    assert p.stdout.startswith("sim") and "set by you" in p.stdout


def test_numba_imported_first_gets_a_clear_warning():
    code = (
        "import os, warnings; os.environ['NUMBA_ENABLE_CUDASIM']='0';"
        "from numba import cuda; os.environ.pop('NUMBA_ENABLE_CUDASIM');"
        "warnings.simplefilter('always'); import course"
    )
    p = run_py(code)
    assert "imported before `import course`" in p.stderr


def test_numba_core_imported_first_is_repaired():
    p = run_py(
        "import numba; import course; from numba import config; "
        "print(course.MODE, config.ENABLE_CUDASIM)"
    )
    assert p.stdout.split() == ["sim", "1"], p.stderr


def test_size_profiles(monkeypatch):
    assert course.MODE == "sim"
    monkeypatch.delenv("COURSE_SIZE", raising=False)
    assert runtime.profile() == "sim" and course.size(lecture=10, sim=1) == 1
    monkeypatch.setenv("COURSE_SIZE", "lecture")
    assert course.size(lecture=10, sim=1) == 10
    monkeypatch.setenv("COURSE_SIZE", "huge")
    with pytest.raises(ValueError, match="COURSE_SIZE"):
        runtime.profile()


def test_banner_and_device_info_say_simulator():
    assert "simulator" in course.banner()
    info = course.device_info()
    assert info["mode"] == "sim" and info["numba_cuda"].startswith("0.30")


def test_doctor_in_simulator_exits_zero():
    p = subprocess.run(
        [sys.executable, "-m", "course", "doctor"], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "simulator" in p.stdout and "numba_cuda" in p.stdout


def test_doctor_names_the_fixes():
    assert doctor.numpy_problem("2.4.6") is None
    assert "numpy<2.5" in doctor.numpy_problem("2.5.0")
    msg = doctor.explain_gpu_error(RuntimeError("libNVVM cannot be found"))
    assert "numba-cuda[cu12]" in msg
    msg = doctor.explain_gpu_error(RuntimeError("CUDA_ERROR_UNSUPPORTED_PTX_VERSION"))
    assert "driver" in msg


def test_doctor_exits_nonzero_on_a_broken_setup(monkeypatch, capsys):
    monkeypatch.setattr(doctor, "numpy_problem", lambda v: "numpy 2.5 breaks numba-cuda")
    assert doctor.main([]) == 1
    assert "numpy 2.5" in capsys.readouterr().out


def test_cli_lists_commands():
    p = subprocess.run([sys.executable, "-m", "course"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "doctor" in p.stdout and "grade" in p.stdout
