"""The package's shape, held here and nowhere else: subpackages by concept on floors, arrows
only downward, no circles, public names only across modules.

``FLOORS`` below is the one list of the floors (docstrings describe their module, never a
floor number).  A module may import from its own subpackage and from the floors below it,
never from above.  What counts as an arrow:

- ``import``/``from ... import`` anywhere in the module: a lazy import is still an arrow;
- a string import: ``importlib.import_module("course.x")`` (or ``f"{__name__}.x"``), and any
  other string in the code that names a module of the package, such as the lazy
  ``__getattr__`` map of ``course/__init__.py`` (the notebook's face: it sits at the top);
- importing a package that encloses the module (``import course`` inside
  ``course.grading.wall.worker``) is no arrow: Python ran that package before the module.

No module, and no code cell of a notebook, may take a ``_private`` name from another module
of the package (``from x import _y``, or ``x._y`` where ``x`` is a module of the package).
No module of the package is over ``MAX_LINES`` (400) lines.
The checks read the source (``ast``); they import nothing.
"""

import ast
import functools
import json
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = REPO / "course"
# bottom to top; "lessons" is the lesson index (data, imports nothing of the course);
# "course" is the package root: the mode switch it runs first imports only platform and
# sim, and its lazy names (course.check, course.submit, ...) reach every floor
FLOORS = [
    "lessons",
    "platform",
    "measure",
    "sim",
    "hardware",
    "kernels",
    "exercises",
    "grading",
    "leaderboard",
    "show",
    "bench",
    "course",
    "__main__",
]
# grading's rooms, bottom to top ("" : the modules beside its __init__; "__init__": the
# package itself, course.check's face, which reaches into judging)
GRADING_ROOMS = ["", "source", "wall", "judging", "classroom", "__init__"]
FORBIDDEN = {("show", "grading"), ("show", "leaderboard")}  # display: not grading or service
MAX_ROOT_MODULES = 8
MAX_LINES = 400  # a module longer than this is split where a concept ends


@functools.cache
def _module_paths() -> tuple:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        if "_files" in p.parts:
            continue
        rel = p.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return tuple(out.items())


def _modules() -> dict:
    """Every module of the package: dotted name -> path."""
    return dict(_module_paths())


def _package_of(name: str, path: Path | None) -> str:
    return name if path is not None and path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _base(node: ast.ImportFrom, pkg: str) -> str:
    base = node.module or ""
    if node.level:
        parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
        base = ".".join(parts + ([base] if base else []))
    return base


def _string(node, name: str, pkg: str):
    """The module path a string expression spells, when it is one we can read."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # f"{__name__}.boards", f"{__package__}.x"
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(v.value)
            elif isinstance(v.value, ast.Name) and v.value.id in ("__name__", "__package__"):
                out.append(name if v.value.id == "__name__" else pkg)
            else:
                return None
        return "".join(out)
    return None


def _docstrings(tree) -> set:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def imports_of(name: str, source: str, modules, path: Path | None = None) -> set:
    """The modules of the package that ``name`` (whose text is ``source``) imports, by
    statement or by string."""
    pkg = _package_of(name, path)
    tree = ast.parse(source)
    found = set()
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _base(node, pkg)
            for a in node.names:
                full = f"{base}.{a.name}"
                found.add(full if full in modules else base)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, (ast.Constant, ast.JoinedStr)) and id(node) not in docs:
            s = _string(node, name, pkg)
            if s and s.startswith("."):  # import_module(".x", __package__)
                s = f"{pkg}{s}"
            if s in modules:
                found.add(s)
    enclosing = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in modules and m != name and m not in enclosing}


def _private(s: str) -> bool:
    return s.startswith("_") and not s.startswith("__")


def _own_nodes(body):
    """The nodes of a scope, not descending into the functions, lambdas and classes in it."""
    todo = list(body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def _bindings(scope, name: str, pkg: str, modules) -> dict:
    """What each name bound in ``scope`` holds: a module of the package, or None (anything
    else: a parameter, an assignment, a function)."""
    out = {}
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        a = scope.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None:
                out[arg.arg] = None
    body = scope.body if isinstance(scope.body, list) else [scope.body]
    for node in _own_nodes(body):
        if isinstance(node, ast.Import):
            for a in node.names:
                head = a.name.split(".")[0]
                out[a.asname or head] = a.name if a.asname else head
        elif isinstance(node, ast.ImportFrom):
            base = _base(node, pkg)
            for a in node.names:
                full = f"{base}.{a.name}"
                out[a.asname or a.name] = full if full in modules else None
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out[node.id] = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or (
            isinstance(node, ast.ExceptHandler) and node.name
        ):
            out[node.name] = None
    return out


def private_imports(name: str, source: str, modules, path: Path | None = None) -> list:
    """``_private`` names that ``name`` takes from other modules of the package: by
    ``from m import _x`` or by ``m._x`` where ``m`` names a module of the package in that
    scope (a parameter or local of the same name is not the module)."""
    pkg = _package_of(name, path) if name.startswith("course") else ""
    bad = []

    def walk(scope, outer):
        scopes = [_bindings(scope, name, pkg, modules), *outer]
        body = scope.body if isinstance(scope.body, list) else [scope.body]
        for node in _own_nodes(body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                for d in getattr(node, "decorator_list", []) + node.args.defaults:
                    check(d, scopes)
                walk(node, scopes)
            elif isinstance(node, ast.ClassDef):
                walk(node, scopes)
            elif isinstance(node, ast.ImportFrom):
                base = _base(node, pkg)
                bad.extend(
                    f"{name}: from {base} import {a.name}"
                    for a in node.names
                    if _private(a.name) and base in modules and base != name
                )
            elif isinstance(node, ast.Attribute):
                check_attribute(node, scopes)

    def check(node, scopes):
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute):
                check_attribute(n, scopes)

    def check_attribute(node, scopes):
        if not _private(node.attr):
            return
        chain, v = [], node.value
        while isinstance(v, ast.Attribute):
            chain.append(v.attr)
            v = v.value
        if not isinstance(v, ast.Name):
            return
        held = next((sc[v.id] for sc in scopes if v.id in sc), None)
        if held is None:
            return
        owner = ".".join([held, *reversed(chain)])
        if owner in modules and owner != name:
            bad.append(f"{name}: {owner}.{node.attr}")

    walk(ast.parse(source), [])
    return bad


def notebook_code(path: Path) -> str:
    """The code cells of a notebook as one Python text (IPython's ``%``/``!`` lines left out)."""
    cells = json.loads(path.read_text())["cells"]
    lines = []
    for c in cells:
        if c["cell_type"] == "code":
            src = "".join(c["source"])
            lines += [ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def _floor(module: str) -> str:
    parts = module.split(".")
    return "course" if len(parts) == 1 else parts[1]


@functools.cache
def _graph() -> tuple:
    modules = _modules()
    return tuple(
        (m, frozenset(imports_of(m, p.read_text(), modules, p))) for m, p in modules.items()
    )


def graph() -> dict:
    """module -> the modules of the package it imports (a fresh dict: callers may plant)."""
    return {m: set(d) for m, d in _graph()}


def upward(g: dict) -> list:
    up = []
    for m, deps in g.items():
        for d in deps:
            a, b = _floor(m), _floor(d)
            if a == b:
                continue
            if FLOORS.index(b) > FLOORS.index(a) or (a, b) in FORBIDDEN:
                up.append(f"{m} -> {d}")
    return sorted(up)


def _room(module: str) -> str | None:
    """The room of course.grading ``module`` is in (None: not a module of grading)."""
    parts = module.split(".")
    if parts[:2] != ["course", "grading"]:
        return None
    if len(parts) == 2:
        return "__init__"
    return parts[2] if parts[2] in GRADING_ROOMS else ""


def upward_in_grading(g: dict) -> list:
    """Arrows between grading's rooms that run up (see GRADING_ROOMS)."""
    up = []
    for m, deps in g.items():
        a = _room(m)
        for d in deps:
            b = _room(d)
            if a is None or b is None or a == b:
                continue
            if GRADING_ROOMS.index(b) > GRADING_ROOMS.index(a):
                up.append(f"{m} -> {d}")
    return sorted(up)


def test_grading_is_rooms_with_arrows_downward():
    """course/grading is a few rooms (each a subpackage with its docstring) and three
    modules beside them; a room imports only from the rooms below it."""
    rooms = {p.name for p in (PACKAGE / "grading").iterdir() if (p / "__init__.py").exists()}
    assert rooms == set(GRADING_ROOMS) - {"", "__init__"}, rooms
    beside = {p.stem for p in (PACKAGE / "grading").glob("*.py")} - {"__init__"}
    assert len(beside) <= 4, beside
    for r in rooms:
        doc = ast.get_docstring(ast.parse((PACKAGE / "grading" / r / "__init__.py").read_text()))
        assert doc and "cross" in doc, f"{r}/__init__.py must say what may cross into it"
    up = upward_in_grading(graph())
    assert not up, "imports that run up a room of grading:\n" + "\n".join(up)


def test_an_upward_arrow_between_rooms_is_found():
    """Its mutant: the wall's gate importing the class's batch is found."""
    g = graph()
    g["course.grading.wall.gate"] = g["course.grading.wall.gate"] | {
        "course.grading.classroom.batch"
    }
    assert "course.grading.wall.gate -> course.grading.classroom.batch" in upward_in_grading(g)
    g = graph()
    g["course.grading.hidden"] = g["course.grading.hidden"] | {"course.grading.source.unit"}
    assert upward_in_grading(g) == ["course.grading.hidden -> course.grading.source.unit"]


def test_every_module_sits_on_a_floor():
    assert {_floor(m) for m in graph()} <= set(FLOORS)


def test_arrows_run_downward():
    up = upward(graph())
    assert not up, "imports that run up a floor:\n" + "\n".join(up)


def test_no_import_circles():
    g = graph()
    seen, stack, circles = set(), [], []

    def visit(m):
        if m in stack:
            circles.append(stack[stack.index(m) :] + [m])
            return
        if m in seen:
            return
        seen.add(m)
        stack.append(m)
        for d in sorted(g[m]):
            visit(d)
        stack.pop()

    for m in sorted(g):
        visit(m)
    assert not circles, "\n".join(" -> ".join(c) for c in circles[:5])


def test_few_modules_at_the_root():
    root = [p.name for p in PACKAGE.glob("*.py")]
    assert len(root) <= MAX_ROOT_MODULES, root
    assert set(root) == {"__init__.py", "__main__.py", "lessons.py"}, root


def too_long(texts: dict, limit: int = MAX_LINES) -> list:
    """``path (N lines)`` for each module text of ``texts`` (path -> text) over ``limit``."""
    return sorted(
        f"{path} ({n} lines)"
        for path, text in texts.items()
        if (n := len(text.splitlines())) > limit
    )


def test_no_module_is_over_400_lines():
    texts = {str(p.relative_to(REPO)): p.read_text() for p in _modules().values()}
    long = too_long(texts)
    assert not long, f"modules over {MAX_LINES} lines (split each where a concept ends):\n" + (
        "\n".join(long)
    )


def test_a_401_line_module_fails_the_length_rule():
    """Its mutant: a planted 401-line module fails, one of 400 lines passes."""
    at_limit = "x = 1\n" * MAX_LINES
    over = at_limit + "y = 2\n"
    assert too_long({"course/show/mutant.py": over}) == ["course/show/mutant.py (401 lines)"]
    assert too_long({"course/show/mutant.py": at_limit}) == []


def test_no_private_name_crosses_a_module():
    modules = _modules()
    bad = [b for m, p in modules.items() for b in private_imports(m, p.read_text(), modules, p)]
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        bad += private_imports(f"notebooks/{nb.name}", notebook_code(nb), modules)
    assert not bad, "private names used outside their module:\n" + "\n".join(sorted(bad))


def test_the_check_can_fail():
    """Its mutant: an upward import planted in the graph is found."""
    g = graph()
    g["course.platform.runtime"] = g["course.platform.runtime"] | {"course.grading.judging.check"}
    assert "course.platform.runtime -> course.grading.judging.check" in upward(g)


MUTANT_STRING_IMPORTS = [
    'import importlib\n\ndef f():\n    return importlib.import_module("course.grading.judging.check")\n',
    '_LAZY = {"check": ("course.grading", "check")}\n',
    'import importlib\nm = importlib.import_module(".check", "course.grading")\n',
]


@pytest.mark.parametrize("source", MUTANT_STRING_IMPORTS)
def test_an_upward_string_import_fails(source, tmp_path):
    """Mutants: a module of ``platform`` written to a tmp dir that reaches ``grading`` by a
    string; its docstring naming ``course.grading`` is no import."""
    path = tmp_path / "mutant.py"
    path.write_text('"""Mentions course.grading.judging.check in prose."""\n' + source)
    modules = _modules()
    g = graph()
    g["course.platform.mutant"] = imports_of(
        "course.platform.mutant", path.read_text(), modules, path
    )
    assert any(u.startswith("course.platform.mutant -> course.grading") for u in upward(g))


def test_a_docstring_or_enclosing_package_is_no_import(tmp_path):
    path = tmp_path / "quiet.py"
    path.write_text('"""Uses course.grading.judging.check."""\nimport course\n')
    assert imports_of("course.platform.quiet", path.read_text(), _modules(), path) == set()


MUTANT_PRIVATE = [
    ("course.show.mutant", "from course.bench.matmul import _secret\n"),
    ("course.show.mutant", "from ..sim import warp\nwarp._secret()\n"),
    ("course.show.mutant", "import course.bench.matmul as bench\nbench._secret(3)\n"),
    ("course.show.mutant", "import course.sim.warp\ncourse.sim.warp._secret\n"),
    ("notebooks/mutant.ipynb", "from course.bench import matmul as bench\nbench._inputs(3)\n"),
    ("course.show.mutant", "def f():\n    import course.sim.trace as trace\n    trace._x()\n"),
]


@pytest.mark.parametrize("name,source", MUTANT_PRIVATE)
def test_a_private_name_across_modules_fails(name, source, tmp_path):
    """Mutants: a module (written to a tmp dir) or a notebook cell that takes a private name
    from another module; a name private to the module itself, or a dunder, is allowed."""
    path = tmp_path / "mutant.py"
    path.write_text(source)
    assert private_imports(name, path.read_text(), _modules(), path)
    own = "from course.bench import matmul\n_x = 1\nprint(_x, matmul.__name__)\n"
    assert not private_imports(name, own, _modules(), path)


def test_a_parameter_named_like_a_module_is_not_the_module():
    src = (
        "from course.sim import trace\n\ndef f(trace):\n    return trace._array('x')\n\n"
        "def g():\n    trace = object()\n    return trace._y\n"
    )
    assert not private_imports("course.show.mutant", src, _modules())
    assert private_imports("course.show.mutant", src + "trace._z\n", _modules()) == [
        "course.show.mutant: course.sim.trace._z"
    ]


def test_a_notebook_cell_is_read(tmp_path):
    nb = tmp_path / "n.ipynb"
    nb.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "markdown", "source": ["bench._inputs"]},
                    {
                        "cell_type": "code",
                        "source": [
                            "%matplotlib inline\n",
                            "from course.bench import ",
                            "matmul as bench\n",
                            "bench._inputs(3)\n",
                        ],
                    },
                ]
            }
        )
    )
    assert private_imports("notebooks/n.ipynb", notebook_code(nb), _modules()) == [
        "notebooks/n.ipynb: course.bench.matmul._inputs"
    ]
