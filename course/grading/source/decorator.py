"""A unit's ``@cuda.jit`` decorator, read as data (``unit.py``): which name is numba's
``jit`` (any alias: ``@cu.jit``), its literal options by allowlist with their values
checked, and its signature string, which :mod:`signature` parses - never ``eval``.  The
decorator itself is never run: ``unit.rebuild`` replaces it and passes the options."""

from __future__ import annotations

import ast
import types

from ...exercises.bounded import clip, listed
from .signature import SignatureError
from .signature import parse as parse_signature

JIT_OPTIONS = {
    "device",
    "fastmath",
    "debug",
    "lineinfo",
    "inline",
    "opt",
    "max_registers",
    "boundscheck",
    "cache",
}
SIM_OPTIONS = {"device", "fastmath", "debug", "inline", "opt"}  # what the simulator's jit takes


class UnitError(Exception):
    """The function cannot travel as a kernel unit; the message says why (one sentence,
    bounded: it may quote a name or a default value of the student's)."""

    def __init__(self, message: str = ""):
        super().__init__(clip(message))


# ---------------------------------------------------------------------------------------
# extracting: student process side (reads only)


def jit_options(fdef: ast.FunctionDef, fn, names: dict) -> tuple[dict, str | None]:
    """The literal options of the ``@cuda.jit(...)`` decorator (and its signature); for a
    function jitted by a call (``kernel = cuda.jit(f)``), the dispatcher's own options.
    ``names``: the function's globals, to see which name is ``numba.cuda.jit`` (``cu.jit``,
    ``kjit = cuda.jit``, ``from numba.cuda import jit as cjit``)."""
    is_device = bool(
        getattr(fn, "_device", False) or getattr(fn, "targetoptions", {}).get("device", False)
    )
    dec = jit_decorator(fdef, lambda dotted: resolves_to_jit(dotted, names))
    if dec is None:
        return ({"device": True} if is_device else {}), None
    options, sig = {}, None
    if isinstance(dec, ast.Call):
        args = [ast.literal_eval(a) for a in dec.args]  # literals: jit_decorator checked
        kws = {k.arg: ast.literal_eval(k.value) for k in dec.keywords}
        unknown = set(kws) - JIT_OPTIONS
        if unknown or None in kws:
            raise UnitError(
                f"@cuda.jit option(s) {listed(sorted(map(str, unknown)), show=str)} on "
                f"`{fdef.name}` are not allowed in a checked kernel"
            )
        if len(args) > 1 or (args and not isinstance(args[0], str)):
            raise UnitError(f"@cuda.jit on `{fdef.name}` takes at most one signature string")
        sig = args[0] if args else None
        options = {k: v for k, v in kws.items() if k != "cache"}
        check_options(options, sig, fdef.name)
    if bool(options.get("device", False)) != is_device:
        raise UnitError(f"`{fdef.name}` was not made by the @cuda.jit its source shows")
    return options, sig


def jit_decorator(fdef: ast.FunctionDef, is_jit) -> ast.expr | None:
    """The one rule for a unit's decorator, which :func:`jit_options` (the student's
    process) and ``unit.rebuild`` (every process that compiles or runs a unit) both apply:
    none (``kernel = cuda.jit(f)``), or exactly one that is a dotted name (``@cuda.jit``,
    ``@numba.cuda.jit``, ``@cu.jit``, ``@kjit``) or a call of one with literal arguments
    only (``@cjit(fastmath=True)``), where ``is_jit(dotted)`` says the name is numba's
    ``cuda.jit``.  Returns the decorator (None when there is none); UnitError otherwise.
    The decorator is never run: ``rebuild`` replaces it and passes the options as data."""
    if not fdef.decorator_list:
        return None
    dec = fdef.decorator_list[0]
    name = dotted(dec.func if isinstance(dec, ast.Call) else dec)
    if len(fdef.decorator_list) != 1 or name is None or not is_jit(name):
        raise UnitError(f"`{fdef.name}` must have exactly one decorator, @cuda.jit")
    if isinstance(dec, ast.Call):
        try:
            for node in [*dec.args, *(k.value for k in dec.keywords)]:
                ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise UnitError(f"the options of @cuda.jit on `{fdef.name}` must be literals") from None
        if any(k.arg is None for k in dec.keywords):  # **options
            raise UnitError(f"the options of @cuda.jit on `{fdef.name}` must be literals")
    return dec


def dotted(node) -> list[str] | None:
    """``["numba", "cuda", "jit"]`` for the expression ``numba.cuda.jit``; None for any
    expression that is not a plain dotted name (a call, a subscript, a lambda, ``_x``)."""
    parts = []
    while isinstance(node, ast.Attribute) and not node.attr.startswith("_"):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def resolves_to_jit(name: list[str], names: dict) -> bool:
    """Whether the dotted ``name``, looked up in ``names`` through modules only (never by
    running anything), is numba's ``cuda.jit``."""
    from numba import cuda

    value = names.get(name[0])
    for attr in name[1:]:
        if not isinstance(value, types.ModuleType):
            return False
        value = getattr(value, attr, None)
    return value is not None and value is cuda.jit


def check_options(options: dict, sig, name: str) -> None:
    """UnitError unless every option has a value the course passes on (and the signature
    is one :mod:`signature` reads)."""
    flags = ("device", "fastmath", "debug", "lineinfo", "opt", "boundscheck")
    for k, v in options.items():
        ok = (
            isinstance(v, bool)
            if k in flags
            else v in (True, False, "always", "never")
            if k == "inline"
            else isinstance(v, int) and not isinstance(v, bool) and 0 < v <= 255
            if k == "max_registers"
            else False
        )
        if not ok:
            raise UnitError(
                f"@cuda.jit option {k}={v!r} on `{name}` is not a value the course accepts"
            )
    if options.get("boundscheck"):
        raise UnitError(
            f"`{name}` asks for boundscheck=True; numba-cuda cannot check bounds "
            "on a GPU: remove it (the course's guard bands catch writes out of "
            "bounds)"
        )
    if sig is not None:
        try:
            parse_signature(sig)
        except SignatureError as exc:
            raise UnitError(f"@cuda.jit on `{name}`: {exc}") from None
