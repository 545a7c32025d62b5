"""The lint, format and type gate (``.ci/lint``, called by ``.ci/run``): a planted error of
each kind fails it, and the same files made right pass it."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO

BIN = Path(sys.executable).parent
CLEAN = '''"""A module."""


def area(w: int, h: int) -> int:
    return w * h
'''
LINT = CLEAN.replace('"""A module."""\n', '"""A module."""\n\nimport os\n')  # F401
FORMAT = CLEAN.replace("return w * h", "return w*h")
TYPES = CLEAN.replace("return w * h", 'return f"{w}x{h}"')


def _lint(tmp_path, source: str) -> subprocess.CompletedProcess:
    """``.ci/lint`` on a small project that has the course's own configuration."""
    proj = tmp_path / "proj"
    shutil.rmtree(proj, ignore_errors=True)
    (proj / ".ci").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "lint", proj / ".ci" / "lint")
    shutil.copy(REPO / "pyproject.toml", proj / "pyproject.toml")
    for pkg in ("grading", "leaderboard"):
        (proj / "course" / pkg).mkdir(parents=True)
        (proj / "course" / pkg / "__init__.py").write_text('"""Package."""\n')
    (proj / "course" / "__init__.py").write_text('"""Package."""\n')
    (proj / "course" / "grading" / "planted.py").write_text(source)
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "mypy-cache"))
    return subprocess.run(
        ["bash", ".ci/lint", str(BIN)],
        cwd=proj,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


def test_ci_run_calls_the_readme_commands_then_the_lint_gate():
    run = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, re.S)
    test_cmd = next(b for b in blocks if "pytest" in b)
    assert test_cmd in run  # verbatim
    tier = re.search(
        r"`(\.venv/bin/python -m pytest -n 2 -m \"browser or notebook or e2e\")`", readme
    )
    assert tier and tier.group(1) in run  # the end-to-end tier too
    assert ".ci/lint .venv/bin || rc=1" in run
    assert run.index(test_cmd) < run.index(tier.group(1)) < run.index(".ci/lint")


def test_the_gate_passes_clean_code_and_fails_each_planted_error(tmp_path):
    ok = _lint(tmp_path, CLEAN)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for source, words in (
        (LINT, "F401"),
        (FORMAT, "would be reformatted"),
        (TYPES, "Incompatible return value"),
    ):
        r = _lint(tmp_path, source)
        assert r.returncode == 1 and words in r.stdout + r.stderr, (words, r.stdout, r.stderr)


def test_pre_commit_runs_the_same_tools():
    text = (REPO / ".pre-commit-config.yaml").read_text()
    for entry in (".venv/bin/ruff check", ".venv/bin/ruff format", ".venv/bin/mypy"):
        assert entry in text
