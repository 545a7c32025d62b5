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
import math
import textwrap
import types
from typing import Any

import numpy as np

from .allowed import BUILTINS, NUMBA_TYPES, safe_builtins
from .decorator import (
    JIT_OPTIONS,
    SIM_OPTIONS,
    UnitError,
    check_options,
    jit_decorator,
    jit_options,
    resolves_to_jit,
)
from .kernel_source import check_defaults, check_names, free_names, parse
from .signature import parse as parse_signature

MODULES = {
    "numba.cuda": "cuda",
    "math": "math",
    "cmath": "cmath",
    "numpy": "np",
    "numba": "numba",
    "numba.core.types": "types",
}
MAX_ARRAY = 1 << 16  # elements of a global constant array
MAX_DEPTH = 8  # device functions calling device functions
MAX_UNITS = 64  # functions in one unit's tree (kernel + device calls)


def extract(fn, extra_names=(), _depth: int = 0, _memo: dict | None = None) -> dict:
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
        unit["globals"][name] = _describe(name, value, py.__name__, _depth, memo)
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


def _describe(name: str, value, owner: str, depth: int, memo: dict):
    """One global value as data: (kind, ...) lists that :func:`_value` turns back."""
    if isinstance(value, types.ModuleType):
        if value.__name__ in MODULES:
            return ["module", value.__name__]
        raise UnitError(
            f"`{owner}` uses the module `{name}` ({value.__name__}); a kernel "
            f"may use only {', '.join(MODULES)}"
        )
    if isinstance(value, (bool, int, float, np.bool_, np.number)) and not isinstance(
        value, np.datetime64
    ):
        if isinstance(value, (np.number, np.bool_)):
            return ["scalar", np.dtype(type(value)).str, _plain(value.item())]
        return [
            "const",
            value if not isinstance(value, float) or math.isfinite(value) else repr(value),
        ]
    if isinstance(value, complex):
        return ["complex", value.real, value.imag]
    if (
        isinstance(value, tuple)
        and len(value) <= 64
        and all(isinstance(v, (bool, int, float)) for v in value)
    ):
        return ["tuple", list(value)]
    if isinstance(value, np.dtype):
        if value.kind not in "biufc" or value.fields is not None:
            raise UnitError(f"`{name}` is the dtype {value}; a kernel may use number dtypes")
        return ["dtype", value.str]
    if isinstance(value, np.ndarray):
        if value.size > MAX_ARRAY or value.dtype.kind not in "biuf":
            raise UnitError(
                f"`{name}` is a {value.dtype} array of {value.size:,} elements; "
                f"a kernel's global arrays must be numbers, at most "
                f"{MAX_ARRAY:,} elements"
            )
        return ["array", value.dtype.str, list(value.shape), value.ravel().tolist()]
    if hasattr(value, "py_func") and hasattr(value, "__getitem__"):
        return ["device", extract(value, _depth=depth + 1, _memo=memo)]
    if (
        isinstance(value, type)
        and issubclass(value, np.generic)
        and getattr(np, type_name := value.__name__, None) is value
    ):
        return ["attr", "numpy", type_name]
    for mod_name in MODULES:
        mod = _module(mod_name)
        attr = getattr(value, "__name__", None)
        if isinstance(attr, str) and getattr(mod, attr, None) is value:
            return ["attr", mod_name, attr]
    try:
        from numba.core import types as nbtypes

        if (
            isinstance(value, nbtypes.Type)
            and str(value) in NUMBA_TYPES
            and str(value) != "void"
            and getattr(nbtypes, str(value), None) == value
        ):
            return ["numba_type", str(value)]
    except ImportError:  # pragma: no cover - numba is a dependency
        pass
    raise UnitError(
        f"`{owner}` uses `{name}`, a {type(value).__name__}: a GPU kernel can "
        "only use numbers, tuples of numbers, small numpy arrays, numba/numpy "
        "types, device functions and the modules cuda, math and numpy"
    )


def _plain(v):
    return v if not isinstance(v, float) or math.isfinite(v) else repr(v)


def _module(name: str):
    import importlib

    return importlib.import_module(name)


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


def rebuild(unit: dict, _depth: int = 0, lazy: bool = False):
    """The ``@cuda.jit`` function a unit describes, defined in a fresh namespace.
    ``lazy``: the kernel's signature is not handed to ``cuda.jit`` (which would compile at
    once, for the GPU of this process): the compile gate compiles it for its targets."""
    from numba import config, cuda

    validate(unit, _depth)
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
        ns[name] = _value(desc, _depth)
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
            return resolves_to_jit(name, {name[0]: _value(desc, depth)})
        return False

    return is_jit


def validate(unit, depth: int = 0) -> None:
    """UnitError unless ``unit`` has the shape :func:`extract` makes (data from a worker)."""
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
    if not isinstance(unit["firstline"], int) or not 0 < unit["firstline"] < 1_000_000:
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


def constants(unit: dict) -> dict:
    """The unit's global numbers, tuples and arrays (what an exercise's launch may read,
    e.g. tile sizes or a weights array), turned back into values without rebuilding
    anything."""
    validate(unit)
    return {
        name: _value(desc, 0)
        for name, desc in unit["globals"].items()
        if isinstance(desc, list) and desc[:1] in (["const"], ["scalar"], ["tuple"], ["array"])
    }


def _value(desc, depth: int):
    if not isinstance(desc, list) or not desc:
        raise UnitError("a kernel unit's global is malformed")
    kind, *rest = desc
    try:
        if kind == "module" and rest[0] in MODULES:
            return _module(rest[0])
        if kind == "const" and isinstance(rest[0], (bool, int, float, str)):
            return float(rest[0]) if isinstance(rest[0], str) else rest[0]
        if kind == "scalar":
            if np.dtype(rest[0]).kind not in "biufc":
                raise UnitError("a kernel unit's scalar is not a number")
            return np.dtype(rest[0]).type(
                rest[1] if not isinstance(rest[1], str) else float(rest[1])
            )
        if kind == "complex":
            return complex(float(rest[0]), float(rest[1]))
        if kind == "tuple":
            return tuple(v for v in rest[0] if isinstance(v, (bool, int, float)))
        if kind == "array":
            dtype, shape, data = np.dtype(rest[0]), tuple(int(s) for s in rest[1]), rest[2]
            if (
                dtype.kind not in "biuf"
                or len(shape) > 8
                or any(s < 0 for s in shape)
                or math.prod(shape) > MAX_ARRAY
                or not isinstance(data, list)
                or len(data) != math.prod(shape)
            ):
                raise UnitError("a kernel unit's array is too large, malformed or not numeric")
            return np.asarray(data, dtype=dtype).reshape(shape)
        if kind == "device":
            return rebuild(rest[0], depth + 1)
        if (
            kind == "attr"
            and rest[0] in MODULES
            and isinstance(rest[1], str)
            and not rest[1].startswith("_")
        ):
            value = getattr(_module(rest[0]), rest[1])
            if isinstance(value, types.ModuleType):
                raise UnitError("a kernel unit's global is a module taken by name")
            return value
        if kind == "dtype" and isinstance(rest[0], str):
            dt = np.dtype(rest[0])
            if dt.kind not in "biufc" or dt.fields is not None:
                raise UnitError("a kernel unit's dtype is not a number type")
            return dt
        if kind == "numba_type" and rest[0] in NUMBA_TYPES and rest[0] != "void":
            from numba.core import types as nbtypes

            return getattr(nbtypes, rest[0])
    except (IndexError, TypeError, ValueError, AttributeError) as exc:
        raise UnitError(f"a kernel unit's global is malformed ({exc})") from None
    raise UnitError(f"a kernel unit's global of kind {str(kind)[:20]!r} is not allowed")
