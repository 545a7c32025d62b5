"""A submitted file's kernel unit, read without running the file.

A file sent to ``POST /api/submissions`` without a unit (``python -m course submit``, or any
HTTP client) used to run in the grading sandbox to find its kernel, and the kernel judged
was whatever the file made: a file could show one ``add_fast`` and ``exec`` another whose
text it planted in ``linecache``.  Now the file is read as data, its unit made by
``course.grading.source.unit.extract`` (as ``course.submit`` does), stored, judged and shown.

The file may hold, at its top level, only statements that run nothing:

- a docstring; ``import`` / ``from ... import`` of ``numba``, ``numba.cuda``, ``math``,
  ``cmath``, ``numpy`` and ``numba.core.types`` (never ``*``);
- ``def``s whose decorators read ``@cuda.jit`` (any alias, literal options: the decorator
  is never run, its options are data) and whose defaults are literals;
- constants: ``NAME = expression`` of numbers, strings and tuples, arithmetic on them
  (bounded), names bound above, attributes of those modules (``np.float32``), and calls of
  a numpy number type or ``np.dtype`` on such values (``np.float32(0.5)``).  Whatever the
  expression, the number it makes must be one the service stores as plain JSON and a
  kernel can use: a bool, an integer within 64 bits, a finite float (numpy's float16 to
  float64 too), or a tuple of these; a dtype must be a number dtype of at most 64 bits.
  ``np.longdouble(2)``, ``np.complex64(1.5)``, ``np.timedelta64(1)``, ``math.inf`` or a
  dtype named by more than 8 characters are refused with their line;
- an ``if __name__ == "__main__":`` block, which is skipped (it never runs here).

Anything else - ``exec``, other imports, calls, assignments into objects, classes, loops -
is refused with ``422`` and a sentence naming its line, before anything is stored.
"""

from __future__ import annotations

import ast
import copy
import itertools
import json
import linecache
import math
import operator
import types
import warnings

import numpy as np

MODULES = ("numba", "numba.cuda", "math", "cmath", "numpy", "numba.core.types", "numba.core")
BIGGEST = 1 << 64  # a constant's magnitude
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
_files = itertools.count()


class FileError(Exception):
    """The file cannot be read as a kernel without running it; one sentence."""


class Jitted:
    """What ``@cuda.jit`` would have made of a ``def``, without running the decorator:
    enough for ``extract`` (its Python function, whether it is a device function)."""

    def __init__(self, py: types.FunctionType, device: bool):
        self.py_func, self.__name__ = py, py.__name__
        self.targetoptions = {"device": device}

    def __getitem__(self, launch):  # a kernel or device function, as extract tells them
        raise TypeError("a submitted file's kernel is never launched here")


def unit_of_file(source: str, function: str, extra_names=()) -> dict:
    """The unit of ``function`` in the file ``source``; FileError (a sentence) if the file
    does anything at its top level but import, define and name constants, or the unit
    cannot be made (``UnitError``'s sentence)."""
    from ..grading.source.decorator import UnitError
    from ..grading.source.unit import extract
    from ..grading.source.values import MAX_ELEMENTS

    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise FileError(f"the source does not compile: {exc.msg} (line {exc.lineno})") from None
    except (ValueError, RecursionError, MemoryError) as exc:  # NUL bytes, deep nesting
        raise FileError(
            f"the source cannot be read as Python ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None
    filename = f"<submitted file {next(_files)}>"
    ns: dict = {"__builtins__": {}, "__name__": "submitted"}
    budget = [MAX_ELEMENTS]  # numbers in the file's tuples, each reach counted
    try:
        for node in tree.body:
            try:
                _statement(node, ns, filename, budget)
            except RecursionError:
                raise _refuse(node, "is nested too deeply to read") from None
        fn = ns.get(function)
        if not isinstance(fn, Jitted):
            if isinstance(fn, types.FunctionType):
                raise FileError(f"`{function}` is not decorated with @cuda.jit")
            raise FileError(f"the source defines no function `{function}` at its top level")
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        try:
            unit = extract(fn, extra_names)
        except UnitError as exc:
            raise FileError(str(exc)) from None
        except RecursionError:
            raise FileError("the source is nested too deeply to read") from None
        try:  # what is stored is plain JSON, whatever the file named
            json.dumps(unit, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            raise FileError(
                f"the kernel's unit holds a value the service cannot store ({str(exc)[:200]})"
            ) from None
        return unit
    finally:
        linecache.cache.pop(filename, None)


def _refuse(node, why: str) -> FileError:
    text = _text(node) if not isinstance(node, ast.Module) else ""
    return FileError(
        f"line {getattr(node, 'lineno', '?')} (`{text}`) {why}; a submitted file may hold "
        "only imports of numba, math and numpy, constants and @cuda.jit functions - "
        "nothing else in it runs"
    )


def _module(name: str, node):
    import importlib

    if name not in MODULES:
        raise _refuse(node, f"imports {name}")
    return importlib.import_module(name)


def _statement(node, ns: dict, filename: str, budget: list) -> None:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return  # a docstring
    if isinstance(node, ast.Import):
        for a in node.names:
            mod = _module(a.name, node)
            if a.asname:
                ns[a.asname] = mod
            else:
                top = a.name.split(".")[0]
                ns[top] = _module(top, node)
        return
    if isinstance(node, ast.ImportFrom):
        if node.module == "__future__":
            return
        mod = _module(node.module or "", node) if node.level == 0 else None
        if mod is None:
            raise _refuse(node, "imports relative to a package")
        for a in node.names:
            if a.name == "*" or a.name.startswith("_") or not hasattr(mod, a.name):
                raise _refuse(node, f"imports `{a.name}`, which is not a public name there")
            value = getattr(mod, a.name)
            if isinstance(value, types.ModuleType) and value.__name__ not in MODULES:
                raise _refuse(node, f"imports the module {value.__name__}")
            ns[a.asname or a.name] = value
        return
    if isinstance(node, ast.FunctionDef):
        _define(node, ns, filename)
        return
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = _const(node.value, ns, node)
        _storable(value, node, budget)
        for t in targets:
            _bind(t, value, ns, node)
        return
    if (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and ast.unparse(node.test) in ("__name__ == '__main__'", "'__main__' == __name__")
    ):
        return  # never runs here
    raise _refuse(node, "runs code at the top level")


def _bind(target, value, ns: dict, node) -> None:
    if isinstance(target, ast.Name):
        if target.id.startswith("__"):
            raise _refuse(node, f"assigns `{target.id}`")
        ns[target.id] = value
    elif isinstance(target, ast.Tuple) and isinstance(value, tuple):
        if len(target.elts) != len(value):
            raise _refuse(node, "unpacks a tuple of another length")
        for t, v in zip(target.elts, value):
            _bind(t, v, ns, node)
    else:
        raise _refuse(node, "assigns into something other than a name")


KEEPS_LINES = "<the reader's identity>"  # not an identifier: a file cannot bind it
_identity = lambda f: f  # noqa: E731 - the def's stand-in decorator: keeps line numbers


def _define(node: ast.FunctionDef, ns: dict, filename: str) -> None:
    """Define the function with its decorators replaced by an identity (they never run)
    and its annotations dropped; its defaults must be literals."""
    if len(node.decorator_list) > 1 or not all(_is_jit(d, ns) for d in node.decorator_list):
        raise _refuse(node, "has a decorator other than @cuda.jit with literal options")
    for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
        try:
            ast.literal_eval(d)
        except (ValueError, TypeError, SyntaxError, RecursionError):
            raise _refuse(node, "has a default value that is not a literal") from None
    device = False
    for d in node.decorator_list:
        for k in d.keywords if isinstance(d, ast.Call) else ():
            if k.arg == "device":
                try:
                    device = ast.literal_eval(k.value) is True
                except ValueError:
                    raise _refuse(node, "has @cuda.jit options that are not literals") from None
    fdef = copy.copy(node)
    # the decorator becomes an identity no statement of a file can bind (no identifier)
    fdef.decorator_list = [
        ast.copy_location(ast.Name(KEEPS_LINES, ast.Load()), d) for d in node.decorator_list
    ]
    fdef.returns = None
    for a in ast.walk(fdef.args):
        if isinstance(a, ast.arg):
            a.annotation = None
    module = ast.fix_missing_locations(ast.Module([fdef], []))
    local: dict = {KEEPS_LINES: _identity}
    with warnings.catch_warnings():  # a submission's SyntaxWarning is not the service's log
        warnings.simplefilter("ignore")
        code = compile(module, filename, "exec")
    exec(code, ns, local)  # noqa: S102 - a def: runs nothing
    py = local[node.name]
    ns[node.name] = Jitted(py, device) if node.decorator_list else py


def _is_jit(dec, ns: dict) -> bool:
    """Whether a decorator is numba's ``cuda.jit`` under a name bound above (``@cuda.jit``,
    ``@cu.jit``, ``@numba.cuda.jit``), bare or called with literals - looked up, not run."""
    from numba import cuda

    node = dec.func if isinstance(dec, ast.Call) else dec
    parts = []
    while isinstance(node, ast.Attribute) and not node.attr.startswith("_"):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return False
    value = ns.get(node.id)
    for attr in reversed(parts):
        if not isinstance(value, types.ModuleType):
            return False
        value = getattr(value, attr, None)
    if value is not cuda.jit:
        return False
    if isinstance(dec, ast.Call):
        if any(k.arg is None for k in dec.keywords):
            return False
        try:
            for a in [*dec.args, *(k.value for k in dec.keywords)]:
                ast.literal_eval(a)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return False
    return True


CALLS, MAX_CALLS = "<calls made>", 4096  # np.float32(..), np.dtype(..) calls in one file
MAX_NAME = 8  # characters of a dtype's name given as a string ("float32", "<f8")


def _const(node, ns: dict, stmt):
    """A constant's value, computed by the service from the expression (bounded)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, complex, str)):
        return node.value
    if isinstance(node, ast.Tuple):
        if len(node.elts) > 64:
            raise _refuse(stmt, "holds a tuple of more than 64 values")
        return tuple(_const(e, ns, stmt) for e in node.elts)
    if isinstance(node, ast.Name):
        if node.id not in ns or node.id.startswith("_"):
            raise _refuse(stmt, f"uses `{node.id}` before it is bound")
        return ns[node.id]
    if isinstance(node, ast.Attribute) and not node.attr.startswith("_"):
        base = _const(node.value, ns, stmt)
        if not isinstance(base, types.ModuleType) or not hasattr(base, node.attr):
            raise _refuse(stmt, f"reads `.{node.attr}` of something other than a module")
        value = getattr(base, node.attr)
        if isinstance(value, types.ModuleType) and value.__name__ not in MODULES:
            raise _refuse(stmt, f"names the module {value.__name__}")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _number(_UNARY[type(node.op)], [_const(node.operand, ns, stmt)], stmt)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _const(node.left, ns, stmt), _const(node.right, ns, stmt)
        return _number(_OPS[type(node.op)], [a, b], stmt)
    if isinstance(node, ast.Call) and not node.keywords and len(node.args) == 1:
        fn, arg = _const(node.func, ns, stmt), _const(node.args[0], ns, stmt)
        is_number_type = isinstance(fn, type) and issubclass(fn, np.number)
        calls = ns.setdefault(CALLS, [0])  # calls computed for the whole file, bounded
        calls[0] += 1
        if calls[0] > MAX_CALLS:
            raise _refuse(stmt, f"makes more than {MAX_CALLS} numbers or dtypes by calls")
        if isinstance(arg, str) and (len(arg) > MAX_NAME or not arg.isascii()):
            raise _refuse(stmt, f"names a type by a string longer than {MAX_NAME} characters")
        if (is_number_type or fn is np.dtype) and isinstance(arg, (int, float, str, type)):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("error")  # an overflowing cast is refused
                    return fn(arg)
            except (TypeError, ValueError, ArithmeticError, RuntimeWarning) as exc:
                raise _refuse(stmt, f"makes no number ({exc})") from None
    raise _refuse(stmt, "computes a value the service does not compute for you")


def _storable(value, stmt, budget: list) -> None:
    """Refused (FileError naming the line) unless every number in ``value`` is one the
    service stores as plain JSON and a kernel can use; names (modules, types, functions)
    are left to ``extract``, which takes only what a kernel may use.  Tuples are walked
    within the file's ``budget`` ([numbers left]: each tuple counted every time it is
    reached, so ``B = (A, A, ...)`` costs what it holds, and past the limit it is refused
    unwalked) and at most ``values.MAX_NESTING`` deep."""
    from ..grading.source.values import MAX_ELEMENTS, MAX_NESTING

    todo = [(value, 0)]
    while todo:
        v, depth = todo.pop()
        if isinstance(v, tuple):
            budget[0] -= len(v)
            if budget[0] < 0 or depth >= MAX_NESTING:
                raise FileError(
                    f"line {stmt.lineno} (`{_text(stmt)}`) makes tuples of more than "
                    f"{MAX_ELEMENTS:,} numbers in all, or nested more than {MAX_NESTING} deep "
                    "(a tuple counted each time it is used): pass larger tables as arrays"
                )
            todo += [(x, depth + 1) for x in v]
            continue
        what = _unstorable(v)
        if what:
            raise FileError(
                f"line {stmt.lineno} (`{_text(stmt)}`) makes {what}: a constant must be a "
                "bool, an integer within 64 bits, a finite float (numpy's float16 to float64 "
                "too), a string, a number dtype or a tuple of these (write anything else, "
                "such as math.inf, in the kernel's body)"
            )


def _unstorable(value) -> str | None:
    """What makes one value unfit to be a constant (None when it is fit)."""
    if isinstance(value, (bool, np.bool_, str)):
        return None
    if isinstance(value, np.dtype):
        if value.kind not in "biuf" or value.itemsize > 8 or value.fields is not None:
            return f"the dtype {value}"
        return None
    if not isinstance(value, (int, float, complex, np.generic)):
        return None
    kind = np.dtype(type(value)).kind if isinstance(value, np.generic) else ""
    if isinstance(value, (complex, np.complexfloating)):
        return f"a complex number ({type(value).__name__})"
    if isinstance(value, np.generic) and (kind not in "iuf" or value.itemsize > 8):
        return f"a {type(value).__name__}"
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return f"the non-finite float {value}"
    if isinstance(value, (int, np.integer)) and not -(1 << 63) <= int(value) < 1 << 64:
        return "an integer past 64 bits"
    return None


def _text(node) -> str:
    """The first line of a statement, for a message (bounded, whatever the node)."""
    try:
        return ast.unparse(node).splitlines()[0][:80]
    except (RecursionError, ValueError, IndexError, MemoryError):
        return "..."


def _number(op, args: list, stmt):
    numbers = (int, float, np.integer, np.floating)
    if not all(isinstance(a, numbers) and not isinstance(a, bool) for a in args):
        raise _refuse(stmt, "does arithmetic on something other than numbers")
    if op is operator.pow and (abs(args[1]) > 64 or abs(args[0]) > BIGGEST):
        raise _refuse(stmt, "raises to a power past what a constant may be")
    if op in (operator.lshift, operator.rshift) and not 0 <= args[1] <= 64:
        raise _refuse(stmt, "shifts by more than 64 bits")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # numpy's overflow is refused, not printed
            value = op(*args)
    except (ArithmeticError, ValueError, TypeError, RuntimeWarning) as exc:
        raise _refuse(stmt, f"cannot be computed ({exc})") from None
    if isinstance(value, complex) or abs(value) > BIGGEST:
        raise _refuse(stmt, "computes a constant larger than 2**64")
    return value
