"""A unit's ``@cuda.jit`` decorator, read as data (``unit.py``): which name is numba's
``jit`` (any alias: ``@cu.jit``), its literal options by allowlist with their values
checked, and its signature string, which :mod:`signature` parses - never ``eval``.  The
decorator itself is never run: ``unit.rebuild`` replaces it and passes the options."""

from __future__ import annotations

import ast
import types

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
    """The function cannot travel as a kernel unit; the message says why (one sentence)."""


# ---------------------------------------------------------------------------------------
# extracting: student process side (reads only)


def jit_options(fdef: ast.FunctionDef, fn, names: dict) -> tuple[dict, str | None]:
    """The literal options of the ``@cuda.jit(...)`` decorator (and its signature); for a
    function jitted by a call (``kernel = cuda.jit(f)``), the dispatcher's own options.
    ``names``: the function's globals, to see which name is ``numba.cuda`` (``cu.jit``)."""
    is_device = bool(
        getattr(fn, "_device", False) or getattr(fn, "targetoptions", {}).get("device", False)
    )
    if not fdef.decorator_list:
        return ({"device": True} if is_device else {}), None
    jits = [
        d for d in fdef.decorator_list if _is_jit(d.func if isinstance(d, ast.Call) else d, names)
    ]
    if len(jits) != len(fdef.decorator_list) or len(jits) != 1:
        raise UnitError(f"`{fdef.name}` must have exactly one decorator, @cuda.jit")
    options, sig = {}, None
    dec = jits[0]
    if isinstance(dec, ast.Call):
        try:
            args = [ast.literal_eval(a) for a in dec.args]
            kws = {k.arg: ast.literal_eval(k.value) for k in dec.keywords}
        except ValueError:
            raise UnitError(f"the options of @cuda.jit on `{fdef.name}` must be literals") from None
        unknown = set(kws) - JIT_OPTIONS
        if unknown or None in kws:
            raise UnitError(
                f"@cuda.jit option(s) {', '.join(sorted(map(str, unknown)))} on "
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


def _is_jit(node, names: dict) -> bool:
    """Whether the decorator expression names ``numba.cuda.jit`` (under any alias),
    resolved by looking names up, never by running anything."""
    from numba import cuda

    value = _resolve(node, names)
    return value is not None and value is cuda.jit


def names_jit(dec) -> bool:
    """Whether a decorator in a unit's source reads as ``@<alias>.jit`` or ``@jit``, with
    or without literal options (it is replaced, never run: the options are data)."""
    node = dec.func if isinstance(dec, ast.Call) else dec
    while isinstance(node, ast.Attribute) and node.attr == "jit":
        node = node.value
        return isinstance(node, (ast.Name, ast.Attribute))
    return isinstance(node, ast.Name) and node.id == "jit"


def _resolve(node, names: dict):
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.Attribute) and not node.attr.startswith("_"):
        base = _resolve(node.value, names)
        if isinstance(base, types.ModuleType):
            return getattr(base, node.attr, None)
    return None


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
