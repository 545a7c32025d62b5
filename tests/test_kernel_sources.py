"""Every kernel a notebook shows is the same text as in course/kernels (one source of truth),
and every kernel in course/kernels is shown in its notebook (or listed in NOT_SHOWN)."""

import ast
import importlib
import inspect
import json
import pkgutil
import textwrap

import pytest
from conftest import REPO

import course.kernels
from course import lessons

MODULES = [m.name for m in pkgutil.iter_modules(course.kernels.__path__)]


def kernels_of(mod):
    """name -> dispatcher for every @cuda.jit function defined in ``mod``."""
    out = {}
    for name, obj in vars(mod).items():
        py = getattr(obj, "py_func", None)
        if py is not None and getattr(py, "__module__", None) == mod.__name__:
            out[name] = obj
    return out


def notebook_code(stem):
    nb = json.loads((REPO / "notebooks" / f"{stem}.ipynb").read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def normalize(src):
    return "\n".join(line.rstrip() for line in textwrap.dedent(src).strip().splitlines())


@pytest.mark.parametrize("modname", MODULES)
def test_module_kernels_appear_verbatim_in_notebook(modname):
    mod = importlib.import_module(f"course.kernels.{modname}")
    stems = [les.notebook for les in lessons.LESSONS if modname in les.kernels]
    assert stems, f"course/lessons.py must name course.kernels.{modname} in its lessons"
    cells = [normalize(c) for stem in stems for c in notebook_code(stem)]
    hidden = set(getattr(mod, "NOT_SHOWN", ()))
    kernels = kernels_of(mod)
    if getattr(mod, "HOST_ONLY", False):  # e.g. gpt2_params: parameters, float64 reference
        assert not kernels, f"course.kernels.{modname} says HOST_ONLY but defines {sorted(kernels)}"
        return
    assert kernels, f"no kernels found in course.kernels.{modname}"
    for name, k in kernels.items():
        if name in hidden:
            continue
        src = normalize(inspect.getsource(k.py_func))
        assert any(src in c for c in cells), (
            f"kernel {name} of course/kernels/{modname}.py is not shown verbatim in "
            f"notebooks {stems}: copy it unchanged into a cell, or list it in NOT_SHOWN"
        )


def _jit_defs(source):
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            decos = [ast.unparse(d) for d in node.decorator_list]
            if any("cuda.jit" in d for d in decos):
                out.append(node)
    return out


NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_every_notebook_kernel_is_a_tested_module_kernel(stem):
    """A kernel in a notebook cell is either an exercise (solution region) or a module kernel."""
    known = {}
    for modname in MODULES:
        mod = importlib.import_module(f"course.kernels.{modname}")
        for name, k in kernels_of(mod).items():
            known[name] = normalize(inspect.getsource(k.py_func))
    for cell in notebook_code(stem):
        if "### BEGIN SOLUTION" in cell or "# EXERCISE" in cell:
            continue
        for node in _jit_defs(cell):
            seg = normalize(ast.get_source_segment(cell, node) or "")
            assert node.name in known, (
                f"{stem}: kernel {node.name} is defined in a cell but in no course/kernels "
                "module, so no test runs it"
            )
            assert seg in known[node.name], (
                f"{stem}: kernel {node.name} differs from its course/kernels version"
            )
