"""Explicit kernel signatures, read by the course instead of by Python's ``eval``.

``@cuda.jit("void(int64, float32[:], float32[:, ::1])")`` is a string that numba-cuda turns
into types with ``eval``: whatever Python the string holds would run in the process that
compiles it.  The course therefore never hands such a string to numba.  :func:`parse` reads
the part of numba's type grammar a kernel needs and builds the types itself:

    signature := [return_type] "(" [argument {"," argument}] ")"
    argument  := scalar [ "[" dims "]" ]
    dims      := dim {"," dim}              (one per dimension)
    dim       := ":" | "::1"                ("::1" on the last dimension: C order,
                                             on the first: Fortran order)
    scalar    := int8 ... uint64, intp, uintp, float16, float32, float64, complex64,
                 complex128, boolean (and numba's short names i4, f8, b1, ...)

Anything else (a call, an attribute, a name that is not a type) is a :class:`SignatureError`
with one sentence, before any compiler sees it.
"""

from __future__ import annotations

import re

MAX_LENGTH = 1000  # characters of one signature string

# numba's number types by their own names (``numba.float32``); a kernel may also name them
NUMBA_NAMES = (
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "intp",
    "uintp",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "boolean",
)
SCALARS = NUMBA_NAMES + (  # ... and the numpy spellings a signature string may use
    "bool_",
    "byte",
    "i1",
    "i2",
    "i4",
    "i8",
    "u1",
    "u2",
    "u4",
    "u8",
    "f2",
    "f4",
    "f8",
    "c8",
    "c16",
    "b1",
)
RETURNS = ("void", "none") + SCALARS

_TOKEN = re.compile(
    r"\s*(?:(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<colons>::1|:)|"
    r"(?P<punct>[()\[\],]))"
)


class SignatureError(ValueError):
    """The signature string is not one the course reads; the message says why."""


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise SignatureError(
                f"the signature {text!r} has {text[pos:].strip()[:20]!r} "
                "where a type, a bracket or a comma should be"
            )
        out.append(m.group(m.lastgroup or 0))
        pos = m.end()
    return out


def parse(text: str):
    """The numba ``Signature`` that ``text`` spells; SignatureError if it is not one of
    the forms above."""
    from numba.core import types

    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        raise SignatureError(f"a signature must be a string of at most {MAX_LENGTH} characters")
    toks = _tokens(text)
    ret = None
    if toks and toks[0] != "(":
        ret = toks.pop(0)
        if ret not in RETURNS:
            raise SignatureError(
                f"`{ret}` is not a return type a kernel or device function "
                f"can have (void or a number type)"
            )
    if not toks or toks[0] != "(" or toks[-1] != ")":
        raise SignatureError(f"the signature {text!r} must look like 'void(int64, float32[:])'")
    args, i, body = [], 1, toks[:-1]
    while i < len(body):
        name = body[i]
        if name not in SCALARS:
            raise SignatureError(
                f"`{name}` in the signature is not a number type ({', '.join(SCALARS[:15])}, ...)"
            )
        typ = getattr(types, name)
        i += 1
        if i < len(body) and body[i] == "[":
            close = body.index("]", i) if "]" in body[i:] else -1
            if close < 0:
                raise SignatureError(f"a `[` in the signature {text!r} is never closed")
            typ = _array(typ, body[i + 1 : close], text)
            i = close + 1
        args.append(typ)
        if i < len(body):
            if body[i] != ",":
                raise SignatureError(
                    f"the signature {text!r} needs a comma after argument {len(args)}"
                )
            i += 1
    if ret in (None, "void", "none"):
        return types.void(*args)
    return getattr(types, ret)(*args)


def _array(dtype, dims: list[str], text: str):
    from numba.core import types

    parts = [d for d in dims if d != ","]
    if (
        not parts
        or parts != [d for k, d in enumerate(dims) if k % 2 == 0]
        or any(d not in (":", "::1") for d in parts)
        or len(parts) > 8
    ):
        raise SignatureError(
            f"the array dimensions in {text!r} must be ':' or '::1', separated by commas"
        )
    ndim = len(parts)
    contiguous = [k for k, d in enumerate(parts) if d == "::1"]
    if not contiguous:
        layout = "A"
    elif contiguous == [ndim - 1]:
        layout = "C"
    elif contiguous == [0]:
        layout = "F"
    else:
        raise SignatureError(f"'::1' in {text!r} may mark only the first or the last dimension")
    return types.Array(dtype, ndim, layout)  # type: ignore[call-overload]
