"""numba's words as the course's sentences: what went wrong and what to do.

The compile gate (``gate.py``) reports numba's reason in one sentence (:func:`why_not`:
the reason, the construct, a hint from :data:`HINTS`, the kernel's line, every piece of the
student's text in it bounded); a few of numba's reasons say nothing a student can act on.
:func:`course_sentence` rewrites those (today: a kernel that takes a different number of
arguments than the exercise launches it with, which numba calls a "Signature mismatch")
and leaves every other message as it was.
"""

from __future__ import annotations

import inspect
import re

from ..exercises.bounded import clip

_MISMATCH = re.compile(
    r"Signature mismatch: (\d+) argument types? given, but function "
    r"takes (\d+) arguments?"
)


def course_sentence(error: str, fn, spec) -> str:
    """``error`` (a check's "not checked" reason) in the course's words where numba's words
    say nothing to act on; ``error`` itself otherwise."""
    m = _MISMATCH.search(error or "")
    if not m:
        return error
    given, takes = int(m.group(1)), int(m.group(2))
    names = _parameters(fn)
    yours = f" ({', '.join(names)})" if names and len(names) == takes else ""
    return (
        f"your kernel takes {takes} argument{'s' * (takes != 1)}{yours}, but the "
        f"exercise launches it with {given}: define it as `{spec.signature}`"
    )


def _parameters(fn) -> list[str]:
    """The parameter names of a kernel (its Python function), or [] when unknown."""
    py = getattr(fn, "py_func", fn)
    try:
        return list(inspect.signature(py).parameters)
    except (TypeError, ValueError):
        return []


HINTS = (  # what the compiler's words usually mean for a student's kernel
    (
        ("array_allocate", "_ol_array_allocate", "array_empty"),
        "arithmetic on whole arrays or slices allocates a new array, which a kernel cannot: "
        "work element by element",
    ),
    (
        ("NRT required", "DictType", "ListType", "unicode_type", "reflected list"),
        "a kernel cannot make Python objects (dict, list, str): only numbers, arrays and "
        "cuda.local/cuda.shared arrays",
    ),
    (
        (
            "function zeros",
            "function empty",
            "function ones",
            "function full",
            "function arange",
            "function array>",
            "function copy",
        ),
        "a kernel cannot allocate numpy arrays: for a small array of each thread's own use "
        "cuda.local.array(SIZE, numba.float32) with a constant SIZE (cuda.shared.array for one "
        "the block shares); make a big array on the host and pass it in",
    ),
    (
        ("Signature mismatch",),
        "the kernel must take exactly the arguments the exercise launches it with (its "
        "signature is in the exercise's text); a kernel cannot take default arguments: "
        "pass every argument",
    ),
)


def why_not(exc: BaseException, unit: dict) -> str:
    """numba's error as one sentence: its reason, the construct it could not type, a hint,
    and the kernel's line where numba names one."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    skip = (
        "Failed in ",
        "During:",
        "File ",
        "^",
        "Enable logging",
        "This error may",
        "For more information",
        "- Resolution",
        "raise ",
        "next(",
        "Rewrite ",
        ">>>",
    )
    reason = next((l for l in lines if not l.startswith(skip)), type(exc).__name__)
    construct = next((l[3:].strip() for l in lines if l.startswith(">>>")), "")
    hint = next((h for words, h in HINTS if any(w in text for w in words)), "")
    where = ""
    m = re.search(r'File "<kernel [^>]*>", line (\d+)', text)
    loc = getattr(getattr(exc, "loc", None), "line", None)
    if m or isinstance(loc, int):
        n = int(m.group(1)) if m else loc
        src = unit["source"].splitlines()
        i = n - unit["firstline"]
        code = clip(src[i].strip(), 200) if 0 <= i < len(src) else ""
        where = f" (line {n}" + (f": `{code}`" if code else "") + ")"
    return (
        f"{type(exc).__name__}: {reason[:300]}"
        + (f" {construct[:200]}" if construct else "")
        + where
        + (f" - {hint}" if hint else "")
    )


def launch_mismatch(declared, launched) -> str | None:
    """Why a launch with ``launched`` types cannot call a kernel compiled for ``declared``
    (numba converts numbers, never arrays), or None."""
    from numba.core import types as nbtypes

    if len(declared) != len(launched):
        return f"it declares {len(declared)} arguments, the launch passes {len(launched)}"
    for k, (d, got) in enumerate(zip(declared, launched), 1):
        if isinstance(d, nbtypes.Array) != isinstance(got, nbtypes.Array):
            return f"argument {k} is declared {d} but launched with {got}"
        if isinstance(d, nbtypes.Array) and (
            d.dtype != got.dtype
            or d.ndim != got.ndim
            or (d.layout != "A" and d.layout != got.layout)
        ):
            hint = (
                "; the checks pass views with guard bands, which are not contiguous: "
                "declare it with ':' only"
                if d.dtype == got.dtype and d.ndim == got.ndim
                else ""
            )
            return f"argument {k} is declared {d} but launched with {got}{hint}"
    return None
