"""The lesson index (course/lessons.py) names every notebook, exercise, bench and figure
module once, agrees with what each folder holds, and the discovery reads it."""

import ast
import collections
import importlib

import pytest
from conftest import REPO

import course.exercises
from course import lessons

COURSE = REPO / "course"


def _defines(path, name: str) -> bool:
    """True when the module at ``path`` assigns ``name`` at its top level (read, not run)."""
    tree = ast.parse(path.read_text())
    return any(
        isinstance(n, ast.Assign) and any(getattr(t, "id", None) == name for t in n.targets)
        for n in tree.body
    )


def _bench_scan() -> list:
    """The old discovery: bench modules with ``TITLE = `` and ``def run(report...)``."""
    out = []
    for p in (COURSE / "bench").glob("*.py"):
        text = p.read_text()
        if "\nTITLE = " in text and "\ndef run(report" in text:
            out.append(p.stem)
    return sorted(out)


def test_every_notebook_is_a_lesson_once():
    notebooks = sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))
    named = [les.notebook for les in lessons.LESSONS]
    assert sorted(named) == notebooks and len(set(named)) == len(named), named


def test_every_exercise_is_named_once_in_its_lesson_and_module():
    named = collections.Counter(n for les in lessons.LESSONS for n in les.exercises)
    assert [n for n, c in named.items() if c > 1] == []
    found = course.exercises.all_exercises()
    assert set(found) == set(named), set(found) ^ set(named)
    for name, ex in found.items():
        les = lessons.lesson_of_exercise(name)
        assert ex.lesson == les.notebook, f"{name}: Exercise.lesson {ex.lesson}, index {les}"
        module = les.exercises[name]
        mod = importlib.import_module(f"course.exercises.{module}")
        assert any(e.name == name for e in mod.EXERCISES), f"{name} is not in {module}.py"


def test_answer_keys_are_the_predict_exercises():
    found = course.exercises.all_exercises()
    for les in lessons.LESSONS:
        predict = {n for n in les.exercises if found[n].kind == "predict"}
        assert set(les.keys) == predict, les.notebook
        assert set(les.hidden) == set(les.exercises) - predict


def test_exercise_modules_are_those_that_define_exercises():
    scanned = sorted(
        p.stem for p in (COURSE / "exercises").glob("*.py") if _defines(p, "EXERCISES")
    )
    assert lessons.exercise_modules() == scanned


def test_bench_modules_are_those_with_a_title_and_run():
    from course import bench

    assert bench.lessons() == lessons.bench_modules() == _bench_scan()


def test_figure_modules_are_those_that_define_figures():
    scanned = sorted(
        p.stem for p in (COURSE / "show" / "figures").glob("*.py") if _defines(p, "FIGURES")
    )
    assert lessons.figure_modules() == scanned


def test_kernel_modules_belong_to_the_lessons_that_name_them():
    by_module = collections.defaultdict(list)
    for les in lessons.LESSONS:
        for k in les.kernels:
            assert (COURSE / "kernels" / f"{k}.py").exists(), f"{les.notebook}: {k}"
            by_module[k].append(les.notebook)
    scanned = {p.stem for p in (COURSE / "kernels").glob("*.py") if p.stem != "__init__"}
    assert set(by_module) == scanned, set(by_module) ^ scanned


def test_lessons_are_found_by_stem_number_or_title():
    assert lessons.lesson("04_matmul") is lessons.lesson("04") is lessons.lesson("matmul")
    with pytest.raises(KeyError, match="00_start_here"):
        lessons.lesson("matmult")


def test_a_missing_index_entry_is_caught(monkeypatch):
    """Mutant: an index that forgets one exercise module and one lesson fails the checks."""
    short = tuple(les for les in lessons.LESSONS if les.notebook != "03_window_average")
    monkeypatch.setattr(lessons, "LESSONS", short)
    with pytest.raises(AssertionError):
        test_every_notebook_is_a_lesson_once()
    with pytest.raises(AssertionError):
        test_exercise_modules_are_those_that_define_exercises()
    assert "window_constant" not in course.exercises.all_exercises()  # read through it
