"""Big arrays from the judge to a sandbox as sealed memory files (wall/shared.py, wire.py):
they arrive whole and unchangeable, replies stay in the stream, and the judge's end takes no
descriptor from a sandbox - each attack below is one a submission could try."""

import array
import os
import socket
import time

import numpy as np
import pytest

from course.grading.wall import shared, wire

pytestmark = pytest.mark.skipif(not shared.POSSIBLE, reason="needs memfd_create (Linux)")
N = (shared.MIN_BYTES // 4) + 13  # float32: just over the size that leaves the stream


def _pair():
    a, b = (s.detach() for s in socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM))
    for fd in (a, b):
        wire.widen(fd)  # as child.py does: a 1 MiB reply fits before it is read
    judge = wire.Channel(a, a, deadline=time.monotonic() + 20)
    child = wire.Channel(b, b)
    return judge, child


def _close(*chans):
    for c in chans:
        os.close(c.rfd)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_request_shares_its_big_arrays_and_the_reply_comes_in_the_stream():
    judge, child = _pair()
    x = np.random.default_rng(1).random(N).astype(np.float32)
    small = np.arange(7, dtype=np.int64)
    judge.send({"op": "stage"}, {"x": x, "small": small})
    head, req = child.recv()
    assert head["shared"] == ["x"] and np.array_equal(req["x"], x)
    assert np.array_equal(req["small"], small)
    req["x"][:] = 0  # the sandbox's copy is its own (copy-on-write): the file is unchanged
    child.send({"op": "collected"}, {"y": x})  # a big reply: in the stream, no descriptor
    head, got = judge.recv({"y": (np.float32, (N,))})
    assert "shared" not in head and np.array_equal(got["y"], x)
    _close(judge, child)


def test_pipes_keep_every_array_in_the_stream():
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    judge, child = wire.Channel(r2, w1, deadline=time.monotonic() + 20), wire.Channel(r1, w2)
    assert not judge.shares and not child.shares
    y = np.ones(1 << 12, np.float32)  # 16 KiB: fits the pipe, sent before it is read
    child.send({"op": "x"}, {"y": y})
    head, got = judge.recv({"y": (np.float32, y.shape)})
    assert "shared" not in head and np.array_equal(got["y"], y)
    for fd in (r1, w1, r2, w2):
        os.close(fd)


def test_what_a_sealed_file_refuses_its_own_maker():
    fd = shared.sealed(np.arange(N, dtype=np.float32))
    try:
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"\0" * 4, 0)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 4)
        with pytest.raises(PermissionError):
            os.ftruncate(fd, 8 * N)
        import mmap

        with pytest.raises(PermissionError):
            mmap.mmap(fd, 4 * N, flags=mmap.MAP_SHARED, prot=mmap.PROT_WRITE)
    finally:
        os.close(fd)


def _unsealed(a):
    fd = os.memfd_create("x", os.MFD_ALLOW_SEALING)
    os.write(fd, np.ascontiguousarray(a).tobytes())
    return fd


def _resized(a):
    fd = os.memfd_create("x", os.MFD_ALLOW_SEALING)
    os.write(fd, np.ascontiguousarray(a).tobytes() + b"\0" * 4096)
    import fcntl

    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, shared.SEALS)
    return fd


def _a_file(tmp):
    def make(a):
        p = tmp / "planted.bin"
        p.write_bytes(np.ascontiguousarray(a).tobytes())
        return os.open(p, os.O_RDONLY)

    return make


def _a_pipe(a):
    r, w = os.pipe()
    os.close(w)
    return r


@pytest.mark.parametrize("kind", ["unsealed", "resized", "file", "pipe"])
def test_a_sandbox_maps_only_a_sealed_file_of_the_size(kind, monkeypatch, tmp_path):
    make = {"unsealed": _unsealed, "resized": _resized, "file": _a_file(tmp_path), "pipe": _a_pipe}
    judge, child = _pair()
    monkeypatch.setattr(shared, "sealed", make[kind])
    before = _open_fds()
    judge.send({"op": "stage"}, {"x": np.ones(N, np.float32)})
    with pytest.raises(wire.WireError, match="came in"):
        child.recv()
    assert _open_fds() <= before
    _close(judge, child)


def _reply_with(chan, fds: list, head: bytes = b'{"op": "collected", "arrays": []}') -> None:
    """A reply as a sandbox could craft it: ``head`` with descriptors attached."""
    sock = socket.socket(fileno=chan.wfd)
    try:
        rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        sock.sendmsg([wire._LEN.pack(len(head)) + head], rights)
    finally:
        sock.detach()


@pytest.mark.parametrize("kind", ["sealed", "unsealed", "pipe", "flood"])
def test_the_judge_takes_no_descriptor_from_a_sandbox(kind, tmp_path):
    judge, child = _pair()
    before = _open_fds()
    x = np.ones(N, np.float32)
    fds = {
        "sealed": lambda: [shared.sealed(x)],
        "unsealed": lambda: [_unsealed(x)],
        "pipe": lambda: [_a_pipe(x)],
        "flood": lambda: [shared.sealed(x) for _ in range(shared.MAX_FDS + 5)],
    }[kind]()
    _reply_with(child, fds)
    for fd in fds:
        os.close(fd)  # the sandbox's own copies; what crossed is the judge's to close
    with pytest.raises(wire.WireError, match="descriptors"):
        judge.recv({})
    assert _open_fds() <= before  # every descriptor that crossed was closed
    _close(judge, child)


def test_a_reply_that_says_it_shares_is_refused_before_any_array_is_read():
    judge, child = _pair()
    fd = shared.sealed(np.ones(N, np.float32))
    head = b'{"op": "collected", "arrays": ["y"], "shared": ["y"]}'
    _reply_with(child, [fd], head)
    os.close(fd)
    before = _open_fds()
    with pytest.raises(wire.WireError, match="may not share memory"):
        judge.recv({"y": (np.float32, (N,))})
    assert _open_fds() <= before
    _close(judge, child)


def test_a_shared_array_without_its_file_or_with_two_is_refused(monkeypatch):
    for extra, said in ((-1, "without its memory file"), (1, "descriptors for no array")):
        judge, child = _pair()

        def write_with(self, data, fd, extra=extra):
            fds = [] if extra < 0 else [fd] + [os.dup(fd) for _ in range(extra)]
            sock = socket.socket(fileno=self.wfd)
            try:
                rights = (
                    [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
                )
                n = sock.sendmsg([data], rights)
            finally:
                sock.detach()
                for f in fds[1:]:
                    os.close(f)
            self._write(data[n:])

        monkeypatch.setattr(wire.Channel, "_write_with", write_with)
        judge.send({"op": "stage"}, {"x": np.ones(N, np.float32)})
        with pytest.raises(wire.WireError, match=said):
            child.recv()
        _close(judge, child)


def test_many_messages_leave_no_descriptor_behind():
    judge, child = _pair()
    before = _open_fds()
    for _ in range(50):
        judge.send({"op": "stage"}, {"x": np.ones(N, np.float32)})
        child.recv()
        child.send({"op": "staged"})
        judge.recv({})
    assert _open_fds() <= before
    _close(judge, child)


@pytest.mark.timeout(300)
def test_a_notebook_graded_with_every_array_shared_scores_as_before(monkeypatch, tmp_path):
    """The whole grader, sandboxes and all, with every request array over 64 bytes sent as
    a sealed file (on a GPU only the big ones are): the right notebook gets every point."""
    import csv

    from conftest import REPO

    from course.grading.classroom import batch

    made = []
    real = shared.sealed
    monkeypatch.setattr(shared, "MIN_BYTES", 64)
    monkeypatch.setattr(shared, "sealed", lambda a: made.append(a.nbytes) or real(a))
    out = tmp_path / "g.csv"
    sub = REPO / "tests" / "fixtures" / "submissions" / "correct"
    assert batch.main([str(sub), "--out", str(out), "--seed", "5", "--jobs", "1"]) == 0
    row = next(csv.DictReader(out.open()))
    assert row["total"] == row["max"] == "6", row
    assert len(made) > 10  # the cases' and the measured launch's inputs went shared
