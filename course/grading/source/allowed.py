"""What a kernel's body may name: the same program for the compiler and the simulator.

A unit (``unit.py``) is compiled by numba-cuda's real compiler (``gate.py``) and, on a laptop,
run as Python by numba's simulator.  The two see different ``numba.cuda`` modules: an
attribute such as ``cuda.ldca`` is a function for the compiler and ``None`` in the simulator,
and numba removes ``if X is None:`` branches it can decide before typing.  A body that asked
``if cuda.ldca is None:`` would be typed on one branch and run on the other - untyped Python
in the process that measures it.  So, before anything compiles or runs:

- every attribute chain on a module (``cuda.atomic.add``, ``np.float32``, ``math.exp``) must
  be one of :data:`CUDA` (names that exist, and are not ``None``, in both ``numba.cuda``s),
  or a public name of ``math``/``cmath``/``numpy`` (the same module in both);
- ``numba.X`` may be ``numba.cuda`` or a numba type name;
- no name or attribute starts with ``_`` (no ``__class__``, ``__globals__``, ``_private``);
- no ``None`` and no ``is`` comparison: numba decides ``x == None`` and ``x is None``
  before typing with ``None`` replaced by its type (so ``np.dtype('f8') == None`` is False
  to the compiler and True to Python) and removes the branch it did not take; without
  ``None`` the branches it decides are decided the same way as Python decides them (the
  same values, the same operators), so every branch the simulator can run was typed;
- builtins are limited to :data:`BUILTINS` (what numba compiles for a GPU), and the rebuilt
  kernel's namespace holds only those: no ``open``, ``__import__``, ``eval``.

Each refusal is one sentence that names the construct.
"""

from __future__ import annotations

import ast
import builtins
from typing import Any

from .signature import NUMBA_NAMES

_DIM3 = {"x": None, "y": None, "z": None}
CUDA = {  # numba.cuda's kernel API (attribute -> its attributes, None for a leaf)
    "threadIdx": _DIM3,
    "blockIdx": _DIM3,
    "blockDim": _DIM3,
    "gridDim": _DIM3,
    "laneid": None,
    "warpsize": None,
    "grid": None,
    "gridsize": None,
    "syncthreads": None,
    "syncthreads_count": None,
    "syncthreads_and": None,
    "syncthreads_or": None,
    "syncwarp": None,
    "threadfence": None,
    "threadfence_block": None,
    "threadfence_system": None,
    "shared": {"array": None},
    "local": {"array": None},
    "const": {"array_like": None},
    "atomic": {
        n: None
        for n in (
            "add",
            "sub",
            "max",
            "min",
            "nanmax",
            "nanmin",
            "and_",
            "or_",
            "xor",
            "exch",
            "inc",
            "dec",
            "compare_and_swap",
            "cas",
        )
    },
    "shfl_sync": None,
    "shfl_up_sync": None,
    "shfl_down_sync": None,
    "shfl_xor_sync": None,
    "all_sync": None,
    "any_sync": None,
    "eq_sync": None,
    "ballot_sync": None,
    "match_any_sync": None,
    "match_all_sync": None,
    "activemask": None,
    "lanemask_lt": None,
    "popc": None,
    "brev": None,
    "clz": None,
    "ffs": None,
    "fma": None,
    "cbrt": None,
    "selp": None,
}
NUMBA_TYPES = NUMBA_NAMES + ("void",)
BUILTINS = (
    "abs",
    "bool",
    "complex",
    "divmod",
    "enumerate",
    "float",
    "int",
    "len",
    "max",
    "min",
    "pow",
    "print",
    "range",
    "round",
    "zip",
    "True",
    "False",
    "None",
)


class NotAllowed(Exception):
    """The body uses something no checked kernel may use; the message says what."""


def safe_builtins() -> dict:
    """The builtins a rebuilt kernel's namespace holds."""
    return {n: getattr(builtins, n) for n in BUILTINS if hasattr(builtins, n)}


def check_body(fdef: ast.FunctionDef, modules: dict) -> None:
    """NotAllowed unless ``fdef``'s body names only what the module docstring allows.
    ``modules``: global name -> (module name, attributes already taken from it): ``cuda``
    is ``("numba.cuda", [])``, ``atomic`` from ``from numba.cuda import atomic`` is
    ``("numba.cuda", ["atomic"])``."""
    name = fdef.name
    nodes = [n for stmt in fdef.body for n in ast.walk(stmt)]
    nodes += [n for a in fdef.args.defaults for n in ast.walk(a)]
    for node in nodes:
        if isinstance(node, ast.Name) and node.id.startswith("_"):
            raise NotAllowed(
                f"`{name}` uses the name `{node.id}`; a checked kernel may not "
                "use names that start with `_`"
            )
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise NotAllowed(
                f"`{name}` reads `.{node.attr}`; a checked kernel may not use "
                "attributes that start with `_`"
            )
        if isinstance(node, ast.Compare) and any(
            isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops
        ):
            raise NotAllowed(
                f"`{name}` compares with `is` (`{ast.unparse(node)[:60]}`); "
                "a kernel compares numbers with `==`"
            )
        if isinstance(node, ast.Constant) and node.value is None:
            raise NotAllowed(
                f"`{name}` uses None; numba decides comparisons with None before "
                "the kernel runs (the simulator does not), so a checked kernel "
                "uses numbers and arrays only"
            )
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            raise NotAllowed(
                f"`{name}` declares `global`/`nonlocal`; a kernel writes only to its arrays"
            )
    roots = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
    for node in nodes:
        if (
            isinstance(node, ast.Name)
            and node.id in modules
            and not modules[node.id][1]
            and id(node) not in roots
        ):
            raise NotAllowed(
                f"`{name}` uses the module `{node.id}` as a value; a kernel may "
                f"only call and read what it holds (`{node.id}.something`)"
            )
    for chain in _chains(nodes):
        root, *attrs = chain
        if root in modules:
            module, taken = modules[root]
            check_chain(module, [*taken, *attrs], name, ".".join(chain))


def check_chain(module: str, attrs: list, owner: str, text: str) -> None:
    """NotAllowed unless ``module.attrs...`` is something a kernel may use."""
    if module == "numba":
        if not attrs:
            return
        if attrs[0] == "cuda":
            return check_chain("numba.cuda", attrs[1:], owner, text)
        if attrs[0] in NUMBA_TYPES and attrs[0] != "void" and len(attrs) == 1:
            return
        if attrs[0] == "types":
            return check_chain("numba.core.types", attrs[1:], owner, text)
        raise NotAllowed(
            f"`{owner}` uses `{text}`; from numba a kernel may use numba.cuda "
            "and the number types (numba.float32, ...)"
        )
    if module == "numba.core.types":  # from numba import types: types.float32
        if len(attrs) > 1 or (attrs and (attrs[0] not in NUMBA_TYPES or attrs[0] == "void")):
            raise NotAllowed(
                f"`{owner}` uses `{text}`; from numba.types a kernel may use "
                "the number types (types.float32, ...)"
            )
        return
    if module == "numba.cuda":
        table: Any = CUDA
        for k, a in enumerate(attrs):
            if not isinstance(table, dict) or a not in table:
                used = ".".join(attrs[: k + 1])
                raise NotAllowed(
                    f"`{owner}` uses `cuda.{used}`, which is not part of the "
                    "kernel API the course checks (threadIdx, blockIdx, "
                    "blockDim, gridDim, grid, syncthreads, shared.array, "
                    "local.array, atomic.*, shfl_*_sync, ...)"
                )
            table = table[a]
        return
    # math, cmath, numpy: one public name that is not a module (np.float32, math.exp; not
    # np.f2py.os, np.ctypeslib, np.lib.*)
    if len(attrs) > 1 or any(a.startswith("_") for a in attrs):
        raise NotAllowed(
            f"`{owner}` uses `{text}`; from {module} a kernel may use its "
            "functions, types and constants by one public name"
        )
    if attrs:
        import importlib
        import types

        if isinstance(getattr(importlib.import_module(module), attrs[0], None), types.ModuleType):
            raise NotAllowed(
                f"`{owner}` uses `{text}`, a module: a kernel may use {module}'s "
                "functions, types and constants, not its submodules"
            )


def check_attr(module: str, attr: str, owner: str) -> None:
    """A global taken from a module by name (``from numba.cuda import syncthreads``)."""
    check_chain(module, [attr], owner, f"{module}.{attr}")


def _chains(nodes) -> list[list[str]]:
    """Every maximal ``name.attr.attr`` chain in ``nodes`` (outermost Attribute only)."""
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
    out: list[list[str]] = []
    for n in nodes:
        if isinstance(n, ast.Attribute) and id(n) not in inner:
            parts: list[str] = []
            cur: ast.expr = n
            while isinstance(cur, ast.Attribute):
                parts.append(cur.attr)
                cur = cur.value
            if isinstance(cur, ast.Name):
                out.append([cur.id, *reversed(parts)])
    return out
