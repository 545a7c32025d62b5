"""The work a simulated launch issues: the bytecode instructions its kernel code runs.

The tracer (``course.sim.trace``) sees every memory access but not arithmetic: a vector add
that runs a long chain of useless FLOPs per element on perfectly coalesced memory moves the
same bytes as the fast one, while a GPU would time it slow.  The simulator runs a kernel as
Python, one thread per CUDA thread, so the instructions it issues can be counted: every
bytecode instruction executed in the kernel's own code and in the device functions it calls
(``sys.settrace`` with opcode events, in the simulator's threads only), per CUDA thread.
Array accesses, atomics and intrinsics count as the few instructions that call them (what
runs inside the simulator does not count); a loop counts once per iteration, a long
expression once per operation - as a GPU issues them.

A bytecode instruction is not a GPU instruction, but the two grow together: the course's
kernels issue 2 to 12 per unit of work (an element read or written, a FLOP's operands, a
tree level), and a chain of useless arithmetic multiplies it (``tune_figures.py`` bounds it).
"""

from __future__ import annotations

import contextlib
import threading
import types


def kernel_codes(fn) -> set:
    """The code objects of kernel ``fn`` (a simulator kernel or its Python function), of the
    device functions its globals name (transitively) and of the functions nested in them."""
    codes: set = set()
    todo = [getattr(fn, "py_func", fn)]
    seen: set = set()
    while todo:
        f = todo.pop()
        f = getattr(f, "py_func", getattr(f, "fn", f))
        code = getattr(f, "__code__", None)
        if not isinstance(code, types.CodeType) or id(code) in seen:
            continue
        seen.add(id(code))
        stack = [code]
        while stack:
            c = stack.pop()
            codes.add(c)
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
            glb = getattr(f, "__globals__", {})
            for name in c.co_names:
                obj = glb.get(name)
                if getattr(obj, "_device", False):  # a device function (simulator kernel)
                    todo.append(obj)
    return codes


@contextlib.contextmanager
def counting(fn):
    """Count the instructions kernel ``fn``'s code runs in threads started inside the
    ``with`` block (the simulator starts one per CUDA thread); yields a dict
    ``(block x, y, z, thread id) -> [instructions]`` filled as the threads run."""
    codes = kernel_codes(fn)
    counts: dict = {}
    lock = threading.Lock()

    def on_call(frame, event, _arg):
        if frame.f_code not in codes:
            return None
        t = threading.current_thread()  # one thread may run a whole block (scheduler.py)
        b = getattr(t, "blockIdx", None)
        key = (t, None) if b is None else (b.x, b.y, b.z, t.thread_id)
        cell = counts.get(key)
        if cell is None:
            with lock:
                cell = counts.setdefault(key, [0])
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False

        def on_opcode(_frame, ev, _a):
            if ev == "opcode":
                cell[0] += 1
            return on_opcode

        return on_opcode

    before = threading.gettrace() if hasattr(threading, "gettrace") else None
    threading.settrace(on_call)
    try:
        yield counts
    finally:
        threading.settrace(before)


def per_thread(counts: dict) -> list:
    """The instruction counts of the threads that ran kernel code."""
    return [c[0] for c in counts.values()]
