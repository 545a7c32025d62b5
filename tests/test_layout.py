"""The package's shape: subpackages by concept on floors, arrows only downward, no circles.

A module may import from its own subpackage and from the floors below it, never from above
(``course/__init__.py`` says what each floor holds).  Imports inside functions count too:
a lazy import is still an arrow.  The check reads the source (``ast``); it imports nothing.
"""
import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "course"
# bottom to top; "course" is the package root (the mode switch every layer may ask for)
FLOORS = ["platform", "measure", "sim", "course", "hardware", "kernels", "exercises",
          "grading", "leaderboard", "show", "bench", "__main__"]
FORBIDDEN = {("show", "grading"), ("show", "leaderboard")}   # display: not grading or service
MAX_ROOT_MODULES = 8


def _modules() -> dict:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        if "_files" in p.parts:
            continue
        rel = p.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _imports(name: str, path: Path, modules: dict) -> set:
    pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                found.add(full if full in modules else base)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m in modules and m != name}


def _floor(module: str) -> str:
    parts = module.split(".")
    return "course" if len(parts) == 1 else parts[1]


def graph() -> dict:
    modules = _modules()
    return {m: _imports(m, p, modules) for m, p in modules.items()}


def test_every_module_sits_on_a_floor():
    assert {_floor(m) for m in graph()} <= set(FLOORS)


def test_arrows_run_downward():
    up = []
    for m, deps in graph().items():
        for d in deps:
            a, b = _floor(m), _floor(d)
            if a == b:
                continue
            if FLOORS.index(b) > FLOORS.index(a) or (a, b) in FORBIDDEN:
                up.append(f"{m} -> {d}")
    assert not up, "imports that run up a floor:\n" + "\n".join(sorted(up))


def test_no_import_circles():
    g = graph()
    seen, stack, circles = set(), [], []

    def visit(m):
        if m in stack:
            circles.append(stack[stack.index(m):] + [m])
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
    assert len(root) <= MAX_ROOT_MODULES and set(root) == {"__init__.py", "__main__.py"}, root


def test_the_check_can_fail(tmp_path, monkeypatch):
    """Its mutant: an upward import and a circle, planted in a copy of two modules."""
    g = graph()
    g["course.platform.runtime"] = g["course.platform.runtime"] | {"course.grading.check"}
    up = [(m, d) for m, ds in g.items() for d in ds
          if FLOORS.index(_floor(d)) > FLOORS.index(_floor(m))]
    assert ("course.platform.runtime", "course.grading.check") in up
