"""Stop works: interrupting a real Jupyter kernel (jupyter_client, as JupyterLab's Stop does)
while a check's kernel, or a bare simulator launch, never ends gives control back within
2 s; the check says "interrupted" and runs no further case; the next check runs normally."""

import time

import pytest

import course

manager = pytest.importorskip("jupyter_client.manager")

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.skipif(course.MODE == "gpu", reason="a GPU kernel cannot be stopped"),
]

BACK_S = 2.0  # control back within this after the interrupt
TOTAL_S = 60.0  # the whole session, kernel start included

SETUP = """
import threading
import course, numpy as np
from numba import cuda
from numba.cuda.simulator.kernel import BlockThread

@cuda.jit
def matrix_add_fixed(A, B, C):
    i, j = cuda.grid(2)
    if j < C.shape[0] and i < C.shape[1]:
        C[j, i] = A[j, i] + B[j, i]

@cuda.jit
def never_ends(A, B, C):
    i, j = cuda.grid(2)
    while A[0, 0] == A[0, 0]:          # the inputs hold no NaN: this loop never ends
        C[0, 0] = B[0, 0]

def simulated_threads():
    return sum(isinstance(t, BlockThread) and t.is_alive() for t in threading.enumerate())
"""


class Kernel:
    """A Jupyter kernel driven as a notebook front end drives it."""

    def __init__(self):
        self.km, self.kc = manager.start_new_kernel(kernel_name="python3")

    def run(self, code: str, interrupt_after: float | None = None, timeout: float = 60.0):
        """(text output, seconds from the interrupt to the kernel being idle, error name)."""
        msg_id = self.kc.execute(code)
        start, interrupted, out, error = time.monotonic(), None, [], None
        while True:
            now = time.monotonic()
            if (
                interrupt_after is not None
                and interrupted is None
                and now - start > interrupt_after
            ):
                interrupted = time.monotonic()
                self.km.interrupt_kernel()
            assert now - start < timeout, f"no answer within {timeout} s: {''.join(out)}"
            try:
                msg = self.kc.get_iopub_msg(timeout=0.02)
            except Exception:  # noqa: BLE001 - queue.Empty: nothing yet
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind == "execute_result":
                out.append(content["data"].get("text/plain", ""))
            elif kind == "error":
                error = content["ename"]
            elif kind == "status" and content["execution_state"] == "idle":
                back = time.monotonic() - interrupted if interrupted else None
                return "".join(out), back, error

    def close(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def kernel():
    k = Kernel()
    k.started = time.monotonic()
    out, _, error = k.run(SETUP)
    assert error is None, out
    yield k
    k.close()


CHECK = "print(repr(course.check('debug_matrix_layout', {}, record=False)))"


def test_stop_ends_a_check_and_the_next_check_runs(kernel):
    out, _, error = kernel.run(CHECK.format("matrix_add_fixed"))  # the gate is warm now
    assert error is None and out.startswith("[PASS]"), out

    out, back, error = kernel.run(CHECK.format("never_ends"), interrupt_after=2.0)
    print(f"check interrupted: control back after {back:.2f} s")
    assert error is None, out  # the check reports; it does not raise
    assert back < BACK_S, f"control came back {back:.2f} s after the interrupt"
    assert out.startswith("[INTERRUPTED]") and "interrupted after 0 of" in out, out
    assert "FAIL" not in out and "time limit" not in out and "seed" not in out, out

    out, _, _ = kernel.run("print(simulated_threads())")
    assert out.strip() == "0", f"{out} simulated threads still running"
    out, _, error = kernel.run(CHECK.format("matrix_add_fixed"))
    assert error is None and out.startswith("[PASS]"), out


def test_stop_ends_a_bare_launch(kernel):
    launch = (
        "A = np.ones((5, 11), np.float32); C = np.zeros_like(A)\n"
        "never_ends[(1, 1), (2, 2)](A, A, C)"
    )
    out, back, error = kernel.run(launch, interrupt_after=2.0)
    print(f"bare launch interrupted: control back after {back:.2f} s")
    assert error == "KeyboardInterrupt", (error, out)
    assert back < BACK_S, f"control came back {back:.2f} s after the interrupt"

    out, _, _ = kernel.run("print(simulated_threads())")
    assert out.strip() == "0", f"{out} simulated threads still running"
    out, _, error = kernel.run(CHECK.format("matrix_add_fixed"))
    assert error is None and out.startswith("[PASS]"), out
    assert time.monotonic() - kernel.started < TOTAL_S


def test_an_interrupt_in_process_stops_the_check_and_its_threads(monkeypatch):
    """The same without Jupyter (``_thread.interrupt_main`` is what Ctrl-C does): the first
    case passes, the interrupt lands in the second, and no case after it runs."""
    import _thread
    import threading

    from numba import cuda
    from numba.cuda.simulator.kernel import BlockThread

    calls = []

    @cuda.jit
    def hangs_on_the_second_case(A, B, C):
        i, j = cuda.grid(2)
        if j < C.shape[0] and i < C.shape[1]:
            C[j, i] = A[j, i] + B[j, i]
        while C.shape[0] == 1 and A[0, 0] == A[0, 0]:  # case 2 is 1 x 1: never ends
            C[0, 0] = B[0, 0]

    from course.grading.wall import launch as launch_mod

    real = launch_mod.run_launch

    def counting(*args, **kw):
        calls.append(args[2].case.name)
        if len(calls) == 2:
            threading.Timer(1.0, _thread.interrupt_main).start()
        return real(*args, **kw)

    import importlib

    run_cases = importlib.import_module("course.grading.judging.cases").run_cases
    # launch=counting, the later keywords as they are
    monkeypatch.setattr(run_cases, "__defaults__", (counting, *run_cases.__defaults__[1:]))
    start = time.monotonic()
    r = course.check("debug_matrix_layout", hangs_on_the_second_case, record=False)
    took = time.monotonic() - start
    assert r.interrupted and not r.passed and len(calls) == 2, (calls, repr(r))
    assert [c.passed for c in r.cases] == [True], repr(r)  # the case that finished
    text, html = repr(r), r._repr_html_()
    assert text.startswith("[INTERRUPTED]") and "after 1 of" in text, text
    assert "data-interrupted='true'" in html and f"seed={r.seed}" in text
    assert took < 30, took
    assert not [t for t in threading.enumerate() if isinstance(t, BlockThread) and t.is_alive()]
