"""Every name a notebook takes from the course exists where the notebook looks for it.

A module split moves names; a notebook that still reads ``bench.SHAPES`` from the old
module fails only when that cell runs (lesson 04's did, in the browser test). This reads
each notebook's code cells and resolves every ``from course.x import y`` and every
``alias.attr`` of a course module, importing only the course's own modules."""

import ast
import importlib
import json

import pytest
from conftest import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def _code(nb) -> str:
    cells = json.loads(nb.read_text())["cells"]
    lines = []
    for c in cells:
        if c["cell_type"] == "code":
            src = "".join(c["source"])
            lines += [ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def _module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def missing_names(code: str) -> list[str]:
    """``module.name`` for each name the code takes from a course module that is not there."""
    tree = ast.parse(code)
    aliases, bad = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("course") and a.asname:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("course"):
            mod = _module(node.module)
            for a in node.names:
                sub = _module(f"{node.module}.{a.name}")
                if sub is not None:
                    aliases[a.asname or a.name] = sub.__name__
                elif mod is None or not hasattr(mod, a.name):
                    bad.append(f"{node.module}.{a.name}")
    rebound = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }  # `data = ...` after `import data`
    rebound |= {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}  # def k(data): ...
    aliases = {k: v for k, v in aliases.items() if k not in rebound}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            name = aliases.get(node.value.id)
            mod = _module(name) if name else None
            if (
                mod is not None
                and not hasattr(mod, node.attr)
                and _module(f"{name}.{node.attr}") is None
            ):
                bad.append(f"{name}.{node.attr}")
    return sorted(set(bad))


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_course_name_a_notebook_uses_exists(nb):
    assert missing_names(_code(nb)) == []


def test_a_moved_name_is_found():
    """Its mutant: a name read from a module that does not hold it."""
    code = (
        "from course.bench import matmul as bench_mm\nbench_mm.NO_SUCH_NAME\n"
        "from course.kernels.matmul import no_such_function\n"
    )
    assert missing_names(code) == [
        "course.bench.matmul.NO_SUCH_NAME",
        "course.kernels.matmul.no_such_function",
    ]
