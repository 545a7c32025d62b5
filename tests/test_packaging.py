"""The two ways to install agree, and the README's test command is what CI runs."""

import re

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

from conftest import REPO


def pins(lines):
    out = {}
    for line in lines:
        line = line.split("#")[0].strip().strip('"').strip("'").lstrip("- ").strip()
        m = re.match(r"^([A-Za-z0-9_.-]+)(\[[^\]]+\])?\s*([<>=!].*)$", line)
        if m:
            out[m.group(1).lower()] = m.group(3).replace(" ", "")
    return out


def test_environment_yml_has_the_same_pins_as_pyproject():
    py = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    env = pins((REPO / "environment.yml").read_text().splitlines())
    for name, spec in pins(py).items():
        assert env.get(name) == spec, (
            f"{name}: pyproject {spec!r} vs environment.yml {env.get(name)!r}"
        )


def test_ci_runs_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", readme, re.S)
    commands = [line.strip() for b in blocks for line in b.splitlines() if "pytest" in line]
    assert commands, "README has no test command"
    assert any(c in ci for c in commands), f"CI does not run the README's test command {commands}"


def test_numpy_is_pinned_below_2_5():
    py = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("numpy") and "<2.5" in d for d in py)
    assert any(d.startswith("numba-cuda[cu12]") for d in py)


def test_a_course_folder_in_the_working_directory_does_not_shadow_the_package(tmp_path):
    """An nbgrader course folder called `course` beside a notebook: `import course` (and
    `python -m course`) must still find this package, not that folder."""
    import subprocess
    import sys

    (tmp_path / "course" / "source").mkdir(parents=True)
    r = subprocess.run(
        [sys.executable, "-c", "import course; print(course.MODE)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.strip() in ("sim", "gpu"), r.stdout + r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "course", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and "doctor" in r.stdout, r.stdout + r.stderr
