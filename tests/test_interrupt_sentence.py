"""Stop during a bare simulator launch in a notebook (IPython) ends in one course sentence -
what was running, that it stopped, that the kernel is still usable - not a traceback
through numba's simulator; the next cell runs."""

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

import course

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(course.MODE == "gpu", reason="a GPU kernel cannot be stopped"),
]

SCRIPT = textwrap.dedent("""
    import contextlib, io, json, threading, _thread
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()

    def run(code, interrupt_after=None):
        if interrupt_after:
            threading.Timer(interrupt_after, _thread.interrupt_main).start()
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            r = shell.run_cell(code)
        return {"out": out.getvalue(), "error": type(r.error_in_exec).__name__}

    said = [run(SETUP)]
    said.append(run("never_ends[(1, 1), (2, 2)](A, A, C)", interrupt_after=1.5))
    said.append(run("import time\\nx = 1\\ntime.sleep(30)", interrupt_after=0.5))
    said.append(run("print(len(threading.enumerate()), A.sum())"))
    said.append(run("raise ValueError('not mine')"))
    print("JSON" + json.dumps(said))
""")

SETUP = """
import threading
import course, numpy as np
from numba import cuda

@cuda.jit
def never_ends(A, B, C):
    while A[0, 0] == A[0, 0]:
        C[0, 0] = B[0, 0]

A = np.ones((5, 11), np.float32); C = np.zeros_like(A)
"""


@pytest.mark.e2e  # Stop in a real Jupyter kernel
def test_a_stopped_cell_ends_in_one_course_sentence():
    code = f"SETUP = {SETUP!r}\n" + SCRIPT
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=100
    )
    line = next(l for l in done.stdout.splitlines() if l.startswith("JSON"))
    setup, launch, sleep, after, other = json.loads(line[4:])
    assert setup["error"] == "NoneType", setup
    said = launch["out"].strip()
    assert launch["error"] == "KeyboardInterrupt", launch
    assert said.startswith(
        "Stopped: the simulator's launch of never_ends, grid (1, 1, 1) x "
        "block (2, 2, 1) was interrupted and has stopped"
    ), said
    assert "still usable" in said and len(said.splitlines()) == 1, said
    assert "Traceback" not in said and "numba" not in said and "threading" not in said
    slept = sleep["out"].strip()
    assert slept.startswith("Stopped: line 3 of the cell was interrupted"), slept
    assert len(slept.splitlines()) == 1
    assert after["error"] == "NoneType" and "55.0" in after["out"], after  # still usable
    assert "ValueError" in other["out"] and "Traceback" in other["out"]  # others: as before


def test_an_interrupted_check_says_the_kernel_is_still_usable():
    from course.exercises import get
    from course.grading.judging.report import CheckResult

    r = CheckResult("vector_add", False, "sim", 1, spec=get("vector_add"), interrupted=True)
    text = repr(r)
    assert text.startswith("[INTERRUPTED] vector_add: interrupted after 0 of"), text
    assert "kernel is still usable" in text.splitlines()[0], text
