"""The judge's end of a pipe reads only what its request allows (course/grading/wall/wire.py).

A reply that announces an array it was not asked for, another dtype or shape, or more bytes
than the array it was asked for is refused after the small .npy header and before any of
its data is read or allocated: a worker announcing 3 GB costs the judge nothing.
"""

import io
import json
import os
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from course.grading.wall.wire import Channel, WireError, allowed

LEN = struct.Struct("<Q")
EXPECT = {"y": (np.dtype(np.float32), (4096,))}


def _npy_header(dtype: str, shape: tuple, fortran: bool = False) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": dtype, "fortran_order": fortran, "shape": shape}
    )
    return buf.getvalue()


def _reply(names, blobs, data=b"") -> bytes:
    head = json.dumps({"op": "measured", "arrays": names}).encode()
    out = LEN.pack(len(head)) + head
    for announced, npy in blobs:
        out += LEN.pack(announced) + npy
    return out + data


def _judge_end(payload: bytes, expect, deadline_s: float = 5.0):
    """(header, arrays) or the WireError of reading ``payload`` on the judge's end; the
    writer keeps the pipe open (a reader waiting for data would wait for the deadline)."""
    r, w = os.pipe()
    rr, ww = os.pipe()

    def write():
        os.write(w, payload)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    chan = Channel(r, ww, time.monotonic() + deadline_s)
    try:
        return chan.recv(expect)
    except WireError as exc:
        return exc
    finally:
        t.join()
        for fd in (r, w, rr, ww):
            os.close(fd)


def test_an_honest_reply_round_trips():
    r, w = os.pipe()
    y = np.arange(4096, dtype=np.float32)
    Channel(r, w).send({"op": "launched"}, {"y": y})
    chan = Channel(r, w, time.monotonic() + 5)
    header, arrays = chan.recv(allowed({"y": y}))
    assert header["op"] == "launched" and np.array_equal(arrays["y"], y)
    arrays["y"][0] = 1.0  # the judge may work on what it got
    os.close(r)
    os.close(w)


@pytest.mark.parametrize(
    "what, blob, words",
    [
        ("another shape", (_npy_header("<f4", (4097,)), 4097 * 4), "(4097,)"),
        ("another dtype", (_npy_header("<f8", (2048,)), 2048 * 8), "float64"),
        ("fortran order", (_npy_header("<f4", (4096,), True), 4096 * 4), "not the float32"),
        ("a 3 GB array", (_npy_header("<f4", (750_000_000,)), 3_000_000_000), "bytes"),
    ],
)
def test_a_reply_with_the_right_name_but_another_array_is_refused_before_its_data(
    what, blob, words
):
    npy, nbytes = blob
    t0 = time.monotonic()
    got = _judge_end(_reply(["y"], [(len(npy) + nbytes, npy)]), EXPECT)  # no data follows
    assert isinstance(got, WireError) and not got.timed_out, (what, got)
    assert words in str(got), str(got)
    assert time.monotonic() - t0 < 2  # refused at once, not after waiting for data


def test_a_reply_announcing_more_bytes_than_its_array_or_another_name_is_refused():
    npy = _npy_header("<f4", (4096,))
    assert "announces" in str(_judge_end(_reply(["y"], [(len(npy) + 4096 * 4 + 8, npy)]), EXPECT))
    assert "not asked for" in str(_judge_end(_reply(["z"], [(len(npy) + 4096 * 4, npy)]), EXPECT))
    assert "announces 2 arrays" in str(_judge_end(_reply(["y", "y"], []), EXPECT))
    # the worker's replies carry no arrays: the judge's end expects none by default
    assert "at most 0 asked for" in str(_judge_end(_reply(["y"], [(len(npy) + 16384, npy)]), None))


def test_a_deeply_nested_header_is_a_wire_error_not_a_crash():
    head = b"[" * 200_000 + b"]" * 200_000
    got = _judge_end(LEN.pack(len(head)) + head, {})
    assert isinstance(got, WireError) and "not JSON" in str(got)


PEAK = """
import os, struct, threading, time, json, io
import numpy as np
from course.grading.wall.wire import Channel, WireError
def hwm():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024
LEN = struct.Struct('<Q')
buf = io.BytesIO()
np.lib.format.write_array_header_1_0(buf, {'descr': '<f4', 'fortran_order': False,
                                            'shape': (750_000_000,)})
npy = buf.getvalue()
head = json.dumps({'op': 'measured', 'arrays': ['C']}).encode()
payload = LEN.pack(len(head)) + head + LEN.pack(len(npy) + 3_000_000_000) + npy
r, w = os.pipe()
def peer():                       # announces 3 GB, then streams zeros as long as it can
    try:
        os.write(w, payload)
        zeros = bytes(1 << 20)
        for _ in range(3000):
            os.write(w, zeros)
    except OSError:
        pass
before = hwm()
threading.Thread(target=peer, daemon=True).start()
chan = Channel(r, os.open(os.devnull, os.O_WRONLY), time.monotonic() + 10)
try:
    chan.recv({'C': (np.float32, (2048, 2048))})
    print('READ')
except WireError as exc:
    print('REFUSED', exc)
os.close(r)
print('GROWTH', hwm() - before)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc (Linux)")
def test_a_reply_announcing_3_gb_costs_the_judge_almost_nothing():
    """The leaderboard's service died reading such a reply (6.3 GB for 3 GB announced)."""
    out = subprocess.run(
        [sys.executable, "-c", PEAK],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, NUMBA_ENABLE_CUDASIM="1"),
    )
    lines = dict(l.split(" ", 1) for l in out.stdout.splitlines() if " " in l)
    assert "REFUSED" in lines, out.stdout + out.stderr
    assert int(lines["GROWTH"]) < 50 << 20, lines


@pytest.mark.parametrize(
    "reply,words",
    [
        ({"op": "ran", "error": ["not", "text"], "have": "kernel"}, "error message was not text"),
        ({"op": "ran", "error": None, "have": "passed"}, "did not say whether `add`"),
        ({"op": "ran", "error": None}, "did not say whether `add`"),
    ],
)
def test_a_worker_reply_that_does_not_fit_never_becomes_a_record(reply, words):
    """The worker's ``ran`` reply is checked before it becomes ``session.Ran`` (typed); a
    reply that does not fit is tampering, whatever else it carries."""
    from course.grading.judging.session import Ran
    from course.grading.wall.child import Tampered

    with pytest.raises(Tampered, match=words):
        Ran.read(reply, "add")
    ran = Ran.read({"op": "ran", "error": "boom", "have": "kernel", "unit": {"src": "x"}}, "add")
    assert (ran.error, ran.have, ran.unit) == ("boom", "kernel", {"src": "x"})
    assert Ran.read({"op": "ran", "error": None}, None).have is None  # a setup cell
