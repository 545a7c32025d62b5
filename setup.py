"""Build step: a wheel carries the STUDENT distribution - student copies of the notebooks,
the faces, the figures and the profiles; no solution, no hidden case, no answer key.

Everything else is in pyproject.toml.  ``course/platform/resources.py`` lists what is carried
(``CARRIED``) and finds it again at run time, in the checkout or under ``course/_files``.
Each notebook goes in as its student copy (``course/grading/classroom/student.py``: solution regions
replaced by ``# YOUR CODE HERE``, outputs cleared), made here from the instructor notebook;
``instructor/`` (hidden cases, answer keys) is never carried.  The build environment has no
numpy or numba, so student.py and notebook.py (standard library only) are loaded by path.
An editable install (``pip install -e .``) needs none of this: it reads the checkout.
"""

import ast
import importlib.util
import json
import shutil
import sys
import types
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

HERE = Path(__file__).resolve().parent
GRADING = HERE / "course" / "grading" / "classroom"


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _resources():
    return _load("_course_resources", HERE / "course" / "platform" / "resources.py")


def _student():
    """course/grading/classroom/student.py without importing ``course`` (whose __init__ needs numba):
    a stand-in package whose path is course/grading, so its ``from . import notebook`` works."""
    pkg = types.ModuleType("_course_build")
    pkg.__path__ = [str(GRADING)]
    sys.modules["_course_build"] = pkg
    _load("_course_build.notebook", GRADING / "notebook.py")
    return _load("_course_build.student", GRADING / "student.py")


def _points(name):
    """``POINTS = <number>`` of an exercise's hidden file when it is a literal (nbgrader's
    metadata in the student copy); 1 otherwise.  The file is read, never run."""
    p = HERE / "instructor" / "hidden" / f"{name}.py"
    try:
        for node in ast.parse(p.read_text()).body:
            if isinstance(node, ast.Assign) and any(
                getattr(t, "id", "") == "POINTS" for t in node.targets
            ):
                return float(ast.literal_eval(node.value))
    except (OSError, SyntaxError, ValueError):
        pass
    return 1.0


class BuildWithCourseFiles(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "course" / "_files"
        student = _student()
        for src, rel in _resources().carried_files(HERE):
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if src.suffix == ".ipynb":  # never the instructor notebook itself
                nb = json.loads(src.read_text(encoding="utf-8"))
                copy = student.student_notebook(nb, src.stem, points=_points)
                dest.write_text(
                    json.dumps(copy, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
                )
            else:
                shutil.copyfile(src, dest)


class EditableFromAnyFolder(editable_wheel):
    """``pip install -e .`` puts the checkout itself on ``sys.path`` (a static .pth file,
    setuptools' "compat" mode) instead of an import hook.  With the hook, a folder named
    ``course`` in the working directory (an nbgrader course folder, say) shadowed the
    package: Python took it for a namespace package before asking the hook.  On the path,
    the real package (it has an ``__init__.py``) wins over any such folder."""

    def finalize_options(self):
        super().finalize_options()
        self.mode = self.mode or "compat"


setup(cmdclass={"build_py": BuildWithCourseFiles, "editable_wheel": EditableFromAnyFolder})
