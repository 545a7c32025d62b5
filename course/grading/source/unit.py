"""A kernel as data: the only form in which student code reaches a verdict.

A *unit* is a JSON-able dict that holds a kernel's (or device function's) source text, its
``@cuda.jit`` options, and the values of the global names its body uses: numbers, small
numpy arrays, numba/numpy type names, functions of ``math``/``numpy``/``cuda``, the modules
themselves, and other device functions (as units of their own).  Nothing else: a kernel
that uses a ``dict``, an object or a module of yours is told so before anything runs.

Why this is what the grader measures, and not the function object a cell made:

- :func:`extract` reads the function a cell defined (source, globals) without calling it;
- :func:`rebuild` turns the data back into a kernel in a fresh namespace that holds only
  those values.  The source is parsed first and must be one ``def`` whose decorators,
  default values and annotations are dropped or literal, so defining it runs no code;
- the compile gate (``gate.py``) compiles it with numba-cuda's real CUDA compiler, so its
  body is typed code a GPU accepts: it cannot import, open files or patch Python.

So the process that rebuilds and launches a unit (``measurer.py``) runs no other statement
of the student's cells: a patched ``course`` module, a replaced ``Tune.measure_figures``
or a monkeypatched numpy in the student's process does not travel.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import inspect
import json
import textwrap
import types
from typing import Any

from . import values
from .allowed import BUILTINS, safe_builtins
from .decorator import (
    JIT_OPTIONS,
    SIM_OPTIONS,
    UnitError,
    check_options,
    jit_decorator,
    jit_options,
    resolves_to_jit,
)
from .kernel_source import MAX_SOURCE, check_defaults, check_names, free_names, parse
from .signature import parse as parse_signature
from .values import MAX_ARRAY, MODULES, Budget

__all__ = ["MAX_ARRAY", "MODULES", "UnitError", "extract", "rebuild", "validate", "constants"]
MAX_DEPTH = 8  # device functions calling device functions
MAX_UNITS = 64  # functions in one unit's tree (kernel + device calls)


def extract(
    fn, extra_names=(), _depth: int = 0, _memo: dict | None = None, _budget: Budget | None = None
) -> dict:
    """The unit of a ``@cuda.jit`` function (kernel or device function).

    ``extra_names``: module-level names the exercise's launch reads (e.g. tile sizes),
    taken along when the student defined them.
    """
    py = getattr(fn, "py_func", None)
    if not isinstance(py, types.FunctionType):
        raise UnitError(f"{getattr(fn, '__name__', fn)!r} is not a @cuda.jit function")
    if _depth > MAX_DEPTH:
        raise UnitError("device functions nest deeper than the course allows")
    memo = {} if _memo is None else _memo  # each device function read once
    budget = Budget() if _budget is None else _budget  # numbers in the whole tree's tuples
    if id(py) in memo:
        return memo[id(py)]
    try:
        source = textwrap.dedent(inspect.getsource(py))
    except (OSError, TypeError) as exc:
        raise UnitError(
            f"the source of `{py.__name__}` cannot be read ({exc}); define it in a cell or a file"
        ) from None
    fdef = parse(source, py.__name__)
    closure = dict(zip(py.__code__.co_freevars, (c.cell_contents for c in (py.__closure__ or ()))))
    options, sig = jit_options(fdef, fn, {**py.__globals__, **closure})
    check_defaults(fdef, bool(options.get("device", False)))
    unit: dict[str, Any] = {
        "name": py.__name__,
        "source": source,
        "options": options,
        "signature": sig,
        "firstline": int(py.__code__.co_firstlineno),
        "globals": {},
    }
    for name in sorted(free_names(fdef, py) | set(extra_names)):
        if name in closure:
            value = closure[name]
        elif name in py.__globals__:
            value = py.__globals__[name]
        elif hasattr(builtins, name):
            if name not in BUILTINS:
                raise UnitError(
                    f"`{py.__name__}` uses `{name}`, which a GPU kernel cannot "
                    f"call (it may use {', '.join(BUILTINS[:-3])})"
                )
            continue
        elif name in extra_names:
            continue
        else:
            raise UnitError(f"`{py.__name__}` uses the name `{name}`, which is not defined")
        if hasattr(value, "py_func") and hasattr(value, "__getitem__"):
            desc = ["device", extract(value, _depth=_depth + 1, _memo=memo, _budget=budget)]
        else:
            desc = values.describe(name, value, py.__name__, budget)
        unit["globals"][name] = desc
    check_names(fdef, unit)
    memo[id(py)] = unit
    if _memo is None and _size(unit, MAX_UNITS) > MAX_UNITS:
        raise UnitError(
            f"`{py.__name__}` calls device functions more than {MAX_UNITS} times "
            f"over (counting each call path); the course allows {MAX_UNITS}"
        )
    return unit


def _size(unit: dict, limit: int) -> int:
    """Functions in a unit's tree, a device function counted once per path to it; the
    count stops once past ``limit`` (paths multiply: a tree of shared device functions can
    have astronomically many)."""
    n = 1
    for d in unit["globals"].values():
        if isinstance(d, list) and d[:1] == ["device"]:
            n += _size(d[1], limit - n)
            if n > limit:
                break
    return n


def run_cell(source: str, filename: str, ns: dict) -> None:
    """``exec`` a cell's text so that the functions it defines keep a readable source (as
    IPython does for notebook cells): :func:`extract` needs it."""
    import linecache

    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)  # noqa: S102 - the caller's own cell


def key(unit: dict, *extra) -> str:
    """A stable hash of a unit (and e.g. argument types): the compile gate's cache key."""
    return hashlib.sha256(json.dumps([unit, *extra], sort_keys=True).encode()).hexdigest()


# ---------------------------------------------------------------------------------------
# rebuilding: measuring process side (runs no student statement)


def rebuild(unit: dict, _depth: int = 0, lazy: bool = False, _budget: Budget | None = None):
    """The ``@cuda.jit`` function a unit describes, defined in a fresh namespace.
    ``lazy``: the kernel's signature is not handed to ``cuda.jit`` (which would compile at
    once, for the GPU of this process): the compile gate compiles it for its targets."""
    from numba import config, cuda

    if _budget is None:  # the whole tree, checked once
        validate(unit, _depth)
    budget = Budget() if _budget is None else _budget
    fdef = parse(unit["source"], unit["name"])
    jit_decorator(fdef, _names_jit(unit, _depth))  # the rule extract applied
    check_defaults(fdef, bool(unit["options"].get("device", False)))
    check_names(fdef, unit)
    # the options come from the unit, never from running the source's decorator; an
    # identity decorator in its place keeps the function's first line where it was
    fdef.decorator_list = [
        ast.copy_location(ast.Name("_unit_keeps_lines", ast.Load()), d) for d in fdef.decorator_list
    ]
    fdef.returns = None
    for a in ast.walk(fdef.args):
        if isinstance(a, ast.arg):
            a.annotation = None
    ns = {
        "__builtins__": safe_builtins(),
        "__name__": f"course_unit_{unit['name']}",
        "_unit_keeps_lines": lambda f: f,
    }
    for name, desc in unit["globals"].items():
        if isinstance(desc, list) and desc[:1] == ["device"] and len(desc) == 2:
            ns[name] = rebuild(desc[1], _depth + 1, _budget=budget)
        else:
            ns[name] = values.value(desc, budget, unit["name"])
    module = ast.Module([fdef], [])
    ast.increment_lineno(module, unit["firstline"] - 1)  # the cell's line numbers
    filename = f"<kernel {unit['name']}>"
    exec(compile(ast.fix_missing_locations(module), filename, "exec"), ns)  # noqa: S102
    fn = ns[unit["name"]]  # defining it ran nothing: no decorator, no default code
    import linecache

    lines = ["\n"] * (unit["firstline"] - 1) + unit["source"].splitlines(True)
    linecache.cache[filename] = (len(unit["source"]), None, lines, filename)
    jit_args = [parse_signature(unit["signature"])] if unit["signature"] and not lazy else []
    options = unit["options"]
    if config.ENABLE_CUDASIM:  # type: ignore[attr-defined]  # numba sets it at import
        options = {k: v for k, v in options.items() if k in SIM_OPTIONS}
    return cuda.jit(*jit_args, **options)(fn)


def _names_jit(unit: dict, depth: int):
    """``jit_decorator``'s look-up on this side: a unit carries the names its body reads,
    not its decorator's, so a name it carries must be numba's ``cuda.jit`` (``@cuda.jit``
    where the body uses ``cuda``), a builtin is refused (``@print``), and any other name is
    the one :func:`extract` looked up in the student's namespace (``@kjit``)."""

    def is_jit(name: list[str]) -> bool:
        desc = unit["globals"].get(name[0])
        if desc is None:
            return not hasattr(builtins, name[0])
        if isinstance(desc, list) and desc[:1] in (["module"], ["attr"]):
            return resolves_to_jit(name, {name[0]: values.value(desc, Budget())})
        return False

    return is_jit


def validate(unit, depth: int = 0, _budget: Budget | None = None, _units: list | None = None):
    """UnitError unless ``unit`` has the shape :func:`extract` makes (data from a worker),
    every global (device functions too, each counted every time it is reached) included:
    work bounded by the unit's size and the limits (``values.py``), and no other error."""
    if not isinstance(unit, dict) or set(unit) != {
        "name",
        "source",
        "options",
        "signature",
        "firstline",
        "globals",
    }:
        raise UnitError(
            "a kernel unit must have name, source, options, signature, firstline, globals"
        )
    if type(unit["firstline"]) is not int or not 0 < unit["firstline"] < 1_000_000:
        raise UnitError("a kernel unit's first line is not a line number")
    if not (
        isinstance(unit["name"], str)
        and unit["name"].isidentifier()
        and isinstance(unit["source"], str)
        and isinstance(unit["options"], dict)
        and isinstance(unit["globals"], dict)
        and (unit["signature"] is None or isinstance(unit["signature"], str))
    ):
        raise UnitError("a kernel unit's fields have the wrong types")
    if set(unit["options"]) - (JIT_OPTIONS - {"cache"}):
        raise UnitError("a kernel unit asks for @cuda.jit options that are not allowed")
    check_options(unit["options"], unit["signature"], unit["name"])
    if depth > MAX_DEPTH:
        raise UnitError("device functions nest deeper than the course allows")
    if not all(
        isinstance(k, str) and k.isidentifier() and not k.startswith("_") for k in unit["globals"]
    ):
        raise UnitError(
            "a kernel unit's global names must be identifiers that do not start with `_`"
        )
    if len(unit["source"]) > MAX_SOURCE:
        raise UnitError(f"`{unit['name']}` is {len(unit['source']):,} characters long")
    units = [0] if _units is None else _units
    units[0] += 1
    if units[0] > MAX_UNITS:
        raise UnitError(f"a kernel unit holds more than {MAX_UNITS} functions")
    budget = Budget() if _budget is None else _budget
    for desc in unit["globals"].values():
        if isinstance(desc, list) and desc[:1] == ["device"] and len(desc) == 2:
            validate(desc[1], depth + 1, budget, units)
        else:
            values.value(desc, budget, unit["name"])


def constants(unit: dict) -> dict:
    """The unit's global numbers, tuples and arrays (what an exercise's launch may read,
    e.g. tile sizes or a weights array), turned back into values without rebuilding
    anything."""
    validate(unit)
    budget = Budget()
    return {
        name: values.value(desc, budget)
        for name, desc in unit["globals"].items()
        if isinstance(desc, list) and desc[:1] in (["const"], ["scalar"], ["tuple"], ["array"])
    }


def not_a_kernel(fn, spec) -> str | None:
    """Why ``fn`` cannot be checked as the exercise's kernel, or None."""
    if fn is None:
        return f"no kernel given: pass the function defined as {spec.signature}"
    if not (hasattr(fn, "py_func") and hasattr(fn, "__getitem__")):
        return (
            f"{getattr(fn, '__name__', fn)!r} is not a CUDA kernel: decorate it with "
            f"@cuda.jit (expected {spec.signature})"
        )
    return None
