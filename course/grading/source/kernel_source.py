"""A unit's source read as data (``unit.py``): the one ``def`` it must be, its default values,
and the names its body reads, checked against the kernel API (``allowed.py``).  Parsing
only: nothing here runs the source."""

from __future__ import annotations

import ast

from .allowed import BUILTINS, NotAllowed, check_attr, check_body
from .decorator import UnitError

MAX_SOURCE = 64 << 10  # characters of one function's source


def parse(source: str, name: str) -> ast.FunctionDef:
    """The one ``def`` in ``source``; UnitError if there is anything else."""
    if len(source) > MAX_SOURCE:
        raise UnitError(f"`{name}` is {len(source):,} characters long (limit {MAX_SOURCE:,})")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise UnitError(f"the source of `{name}` does not parse: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError):  # nested past the parser's limits
        raise UnitError(f"the source of `{name}` is nested too deeply to read") from None
    if (
        len(tree.body) != 1
        or not isinstance(tree.body[0], ast.FunctionDef)
        or tree.body[0].name != name
    ):
        raise UnitError(f"the source of `{name}` must be exactly one `def {name}(...)`")
    fdef = tree.body[0]
    for d in fdef.args.defaults + [d for d in fdef.args.kw_defaults if d is not None]:
        try:
            value = ast.literal_eval(d)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            raise UnitError(
                f"`{name}` has a default value that is not a literal (`{ast.unparse(d)}`)"
            ) from None
        if value is None:
            raise UnitError(
                f"`{name}` has an argument that defaults to None; numba decides "
                "comparisons with None before the kernel runs (the simulator "
                "does not): give a number"
            )
    return fdef


def check_defaults(fdef: ast.FunctionDef, device: bool) -> None:
    """UnitError unless the defaults are what a GPU compiles: a kernel has none (numba
    compiles it for exactly the arguments a launch passes), a device function's are
    numbers or booleans (literals: :func:`parse` checked)."""
    defaults = fdef.args.defaults + [d for d in fdef.args.kw_defaults if d is not None]
    if defaults and not device:
        raise UnitError(
            f"`{fdef.name}` gives an argument a default value, but a kernel cannot take "
            "default arguments (numba compiles it for exactly the arguments a launch "
            "passes): remove the default and pass every argument"
        )
    for d in defaults:
        value = ast.literal_eval(d)
        if not isinstance(value, (int, float, complex)):  # bool is an int
            raise UnitError(
                f"`{fdef.name}` has a default value that is not a number "
                f"(`{ast.unparse(d)[:60]}`): a device function's defaults must be numbers"
            )


def check_names(fdef: ast.FunctionDef, unit: dict) -> None:
    """UnitError unless the body uses only the kernel API (``allowed.py``): the same
    program for the compiler, the measurer and the simulator."""
    modules: dict[str, tuple[str, list]] = {
        n: (d[1], [])
        for n, d in unit["globals"].items()
        if isinstance(d, list) and d[:1] == ["module"] and len(d) == 2
    }
    modules.update(
        {
            n: (d[1], [d[2]])
            for n, d in unit["globals"].items()
            if isinstance(d, list) and d[:1] == ["attr"] and len(d) == 3
        }
    )
    unknown = free_names(fdef) - set(unit["globals"]) - set(BUILTINS)
    if unknown:
        raise UnitError(
            f"`{unit['name']}` uses `{sorted(unknown)[0]}`, which is neither a "
            "value it carries nor something a GPU kernel can call"
        )
    try:
        check_body(fdef, modules)
        for d in unit["globals"].values():
            if isinstance(d, list) and d[:1] == ["attr"] and len(d) == 3:
                check_attr(d[1], d[2], unit["name"])
    except NotAllowed as exc:
        raise UnitError(str(exc)) from None


def free_names(fdef: ast.FunctionDef, py=None) -> set:
    """Names the body reads that it does not assign (globals, closure cells, builtins);
    the decorator is not part of the body (a unit keeps its options as data)."""
    nodes = [n for part in (*fdef.body, fdef.args) for n in ast.walk(part)]
    loads = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    local = {a.arg for a in nodes if isinstance(a, ast.arg)}  # nested defs' too
    local |= {
        n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))
    }
    if py is not None:
        local |= set(py.__code__.co_varnames) | set(py.__code__.co_cellvars)
    return loads - local
