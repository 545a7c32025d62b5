"""Build step: a wheel carries the checkout's notebooks, faces, hidden cases and profiles.

Everything else is in pyproject.toml.  ``course/platform/resources.py`` lists what is carried
(``CARRIED``) and finds it again at run time, in the checkout or under ``course/_files``.
An editable install (``pip install -e .``) needs none of this: it reads the checkout.
"""
import importlib.util
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

HERE = Path(__file__).resolve().parent


def _resources():
    spec = importlib.util.spec_from_file_location("_course_resources",
                                                  HERE / "course" / "platform" / "resources.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class BuildWithCourseFiles(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / "course" / "_files"
        for src, rel in _resources().carried_files(HERE):
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
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
