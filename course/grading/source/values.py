"""A kernel unit's global values as data, both ways, in work bounded by their size.

:func:`describe` (the student's side, ``unit.extract``) turns one global value into a
JSON-able list ``[kind, ...]``; :func:`value` (every side that reads a unit: the judge's
``unit.validate`` and ``unit.constants``, ``unit.rebuild`` in the gate and the measurer)
turns it back.  What a kernel's global may be is what numba-cuda compiles as a constant:

- ``const``: a bool, an integer within 64 bits (int64 or uint64: numba types no wider), a
  float (``"nan"``, ``"inf"``, ``"-inf"`` as text: JSON has no such numbers);
- ``scalar``: a numpy number (``np.float32(0.5)``: its dtype and value; a complex one as
  ``[real, imag]``); ``complex``: a Python complex;
- ``tuple``: numbers, numpy numbers and tuples of these, nested (``((1, 0), (0, 1))``);
- ``dtype`` (a number dtype), ``array`` (a small numeric numpy array), ``module``, ``attr``
  (``np.float32``, ``math.exp``), ``numba_type`` (``numba.float32``).

Both walks share one :class:`Budget` per unit: tuples at most :data:`MAX_NESTING` deep and at
most :data:`MAX_ELEMENTS` numbers in all, a tuple counted every time it is reached (64 copies
of a tuple of 64 copies of ... is 64**k numbers, and is refused after the first 4,096, not
walked).  Anything else is a :class:`UnitError` with one sentence: never another exception.
"""

from __future__ import annotations

import importlib
import math
import types
import warnings

import numpy as np

from .decorator import UnitError

MODULES = {
    "numba.cuda": "cuda",
    "math": "math",
    "cmath": "cmath",
    "numpy": "np",
    "numba": "numba",
    "numba.core.types": "types",
}
MAX_ARRAY = 1 << 16  # elements of a global constant array
MAX_NESTING = 8  # tuples within tuples
MAX_ELEMENTS = 4096  # numbers in a unit's tuples, each tuple counted every time it is reached
INT_RANGE = (-(1 << 63), 1 << 64)  # what numba types an integer constant as (int64, uint64)
_KINDS = "biufc"  # number dtypes: bool, signed, unsigned, float, complex
_NONFINITE = ("nan", "inf", "-inf")


class Budget:
    """What one unit's values may still cost: numbers in tuples (each reach counted)."""

    def __init__(self, elements: int = MAX_ELEMENTS):
        self.left = elements

    def take(self, n: int, owner: str) -> None:
        self.left -= n
        if self.left < 0:
            raise UnitError(
                f"`{owner}`'s constants hold more than {MAX_ELEMENTS:,} numbers in tuples "
                "(a tuple counted each time it is used); pass larger tables as arrays"
            )


def module(name: str):
    return importlib.import_module(name)


# ---------------------------------------------------------------------------------------
# describing: the student's side


def describe(name: str, value, owner: str, budget: Budget):
    """One global value (not a device function: ``unit.extract`` takes those) as data;
    UnitError with one sentence if a kernel cannot use it."""
    if isinstance(value, types.ModuleType):
        if value.__name__ in MODULES:
            return ["module", value.__name__]
        raise UnitError(
            f"`{owner}` uses the module `{name}` ({value.__name__}); a kernel "
            f"may use only {', '.join(MODULES)}"
        )
    if isinstance(value, (bool, int, float, np.bool_, np.number, tuple)):
        return _number(value, name, owner, budget, 0)
    if isinstance(value, complex):
        return ["complex", value.real, value.imag]
    if isinstance(value, np.dtype):
        if value.kind not in _KINDS or value.fields is not None or value.subdtype is not None:
            raise UnitError(f"`{name}` is the dtype {value}; a kernel may use number dtypes")
        return ["dtype", dtype(value.str).str]
    if isinstance(value, np.ndarray):
        if value.size > MAX_ARRAY or value.dtype.kind not in "biuf":
            raise UnitError(
                f"`{name}` is a {value.dtype} array of {value.size:,} elements; "
                f"a kernel's global arrays must be numbers, at most "
                f"{MAX_ARRAY:,} elements"
            )
        return ["array", value.dtype.str, list(value.shape), value.ravel().tolist()]
    if (
        isinstance(value, type)
        and issubclass(value, np.generic)
        and getattr(np, type_name := value.__name__, None) is value
    ):
        return ["attr", "numpy", type_name]
    for mod_name in MODULES:
        attr = getattr(value, "__name__", None)
        if isinstance(attr, str) and getattr(module(mod_name), attr, None) is value:
            return ["attr", mod_name, attr]
    from numba.core import types as nbtypes

    from .allowed import NUMBA_TYPES

    if (
        isinstance(value, nbtypes.Type)
        and str(value) in NUMBA_TYPES
        and str(value) != "void"
        and getattr(nbtypes, str(value), None) == value
    ):
        return ["numba_type", str(value)]
    raise UnitError(
        f"`{owner}` uses `{name}`, a {type(value).__name__}: a GPU kernel can "
        "only use numbers, tuples of numbers, small numpy arrays, numba/numpy "
        "types, device functions and the modules cuda, math and numpy"
    )


def _number(value, name: str, owner: str, budget: Budget, nesting: int):
    """A number, numpy number or (nested) tuple of them as data; a tuple's items are
    plain JSON numbers where they can be, else descriptions of their own."""
    if isinstance(value, tuple):
        if nesting >= MAX_NESTING:
            raise UnitError(
                f"`{name}` nests tuples more than {MAX_NESTING} deep; the course allows "
                f"{MAX_NESTING}"
            )
        budget.take(len(value), owner)
        return ["tuple", [_item(v, name, owner, budget, nesting + 1) for v in value]]
    if isinstance(value, (np.number, np.bool_)):
        dt = np.dtype(type(value))
        if dt.kind not in _KINDS or dt.itemsize > (16 if dt.kind == "c" else 8):
            raise UnitError(f"`{name}` is a {type(value).__name__}; a kernel uses number types")
        item = value.item()
        if isinstance(item, complex):
            return ["scalar", dt.str, [_plain(item.real), _plain(item.imag)]]
        return ["scalar", dt.str, _plain(item)]
    if isinstance(value, bool) or isinstance(value, float):
        return ["const", _plain(value)]
    if isinstance(value, int):
        if not INT_RANGE[0] <= value < INT_RANGE[1]:
            raise UnitError(
                f"`{name}` is an integer past 64 bits ({str(value)[:30]}...); numba "
                "types an integer constant as int64 or uint64"
            )
        return ["const", value]
    raise UnitError(
        f"`{name}` holds a {type(value).__name__} in a tuple: a kernel's tuples hold "
        "numbers, numpy numbers and tuples of these"
    )


def _item(v, name, owner, budget, nesting):
    desc = _number(v, name, owner, budget, nesting)
    if desc[0] == "const" and not isinstance(desc[1], str):
        return desc[1]  # a plain number stays a plain number (the older form of a tuple)
    return desc


def _plain(v):
    return v if not isinstance(v, float) or math.isfinite(v) else repr(v)


# ---------------------------------------------------------------------------------------
# reading back: every side that reads a unit


def value(desc, budget: Budget, owner: str = "the kernel"):
    """The value ``desc`` describes (not a device function: ``unit.rebuild`` takes those);
    UnitError with one sentence for anything :func:`describe` does not make."""
    if not isinstance(desc, list) or not desc or not isinstance(desc[0], str):
        raise UnitError("a kernel unit's global is malformed")
    kind, *rest = desc
    try:
        if kind in ("const", "scalar", "tuple"):
            return _read_number(desc, budget, owner, 0)
        if kind == "module" and len(rest) == 1 and rest[0] in MODULES:
            return module(rest[0])
        if kind == "complex" and len(rest) == 2:
            return complex(_float(rest[0]), _float(rest[1]))
        if kind == "array" and len(rest) == 3:
            return _array(*rest)
        if (
            kind == "attr"
            and len(rest) == 2
            and rest[0] in MODULES
            and isinstance(rest[1], str)
            and rest[1].isidentifier()
            and not rest[1].startswith("_")
        ):
            got = getattr(module(rest[0]), rest[1])
            if isinstance(got, types.ModuleType):
                raise UnitError("a kernel unit's global is a module taken by name")
            return got
        if kind == "dtype" and len(rest) == 1:
            return dtype(rest[0])
        if kind == "numba_type" and len(rest) == 1:
            from numba.core import types as nbtypes

            from .allowed import NUMBA_TYPES

            if rest[0] in NUMBA_TYPES and rest[0] != "void":
                return getattr(nbtypes, rest[0])
    except (IndexError, TypeError, ValueError, AttributeError, ArithmeticError, Warning) as exc:
        raise UnitError(f"a kernel unit's global is malformed ({str(exc)[:100]})") from None
    raise UnitError(f"a kernel unit's global of kind {kind[:20]!r} is not allowed")


def _read_number(desc, budget: Budget, owner: str, nesting: int):
    if not isinstance(desc, list) or not desc:
        raise UnitError("a kernel unit's tuple holds something that is not a number")
    kind, *rest = desc
    if kind == "tuple" and len(rest) == 1 and isinstance(rest[0], list):
        if nesting >= MAX_NESTING:
            raise UnitError(f"a kernel unit nests tuples more than {MAX_NESTING} deep")
        budget.take(len(rest[0]), owner)
        return tuple(
            _read_number(v, budget, owner, nesting + 1) if isinstance(v, list) else _plain_in(v)
            for v in rest[0]
        )
    if kind == "const" and len(rest) == 1:
        return (
            float(rest[0])
            if isinstance(rest[0], str) and rest[0] in _NONFINITE
            else (_plain_in(rest[0]))
        )
    if kind == "scalar" and len(rest) == 2:
        dt = dtype(rest[0])
        v = rest[1]
        if dt.kind == "c" and isinstance(v, list) and len(v) == 2:
            return dt.type(complex(_float(v[0]), _float(v[1])))
        with warnings.catch_warnings():  # 1e308 as a float16: refused, not made inf
            warnings.simplefilter("error")
            return dt.type(_float(v) if isinstance(v, str) else _plain_in(v))
    raise UnitError("a kernel unit's tuple holds something that is not a number")


def _plain_in(v):
    """A plain number of a unit as it is, else UnitError."""
    if isinstance(v, bool) or isinstance(v, float):
        return v
    if isinstance(v, int) and INT_RANGE[0] <= v < INT_RANGE[1]:
        return v
    raise UnitError("a kernel unit's number is not a bool, a 64-bit integer or a float")


def _float(v) -> float:
    if isinstance(v, str) and v in _NONFINITE:
        return float(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    raise UnitError("a kernel unit's float is not a number")


def dtype(text) -> np.dtype:
    """The number dtype ``text`` names (``"<f4"``); UnitError for anything else."""
    if not isinstance(text, str) or len(text) > 8:
        raise UnitError("a kernel unit's dtype is not a number type")
    dt = np.dtype(text)
    if (
        dt.kind not in _KINDS
        or dt.itemsize > (16 if dt.kind == "c" else 8)
        or dt.fields is not None
        or dt.subdtype is not None
    ):
        raise UnitError("a kernel unit's dtype is not a number type")
    return dt


def _array(dtype_text, shape, data) -> np.ndarray:
    dt = dtype(dtype_text)
    if (
        dt.kind == "c"
        or not isinstance(shape, list)
        or len(shape) > 8
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
        or math.prod(shape) > MAX_ARRAY
        or not isinstance(data, list)
        or len(data) != math.prod(shape)
        or not all(type(x) in (int, float, bool) for x in data)
    ):
        raise UnitError("a kernel unit's array is too large, malformed or not numeric")
    return np.asarray(data, dtype=dt).reshape(shape)
