"""Big arrays between the judge and a sandbox as sealed memory files (wall/shared.py, wire.py):
they arrive whole and unchangeable, and the judge's end refuses every other descriptor a
sandbox could send in their place - each attack below is one a submission could try."""

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
    judge = wire.Channel(a, a, deadline=time.monotonic() + 20)
    child = wire.Channel(b, b)
    return judge, child


def _close(*chans):
    for c in chans:
        os.close(c.rfd)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_big_array_crosses_as_a_sealed_file_and_a_small_one_in_the_stream():
    judge, child = _pair()
    y = np.random.default_rng(1).random(N).astype(np.float32)
    small = np.arange(7, dtype=np.int64)
    child.send({"op": "collected"}, {"y": y, "small": small})
    head, got = judge.recv({"y": (np.float32, (N,)), "small": (np.int64, (7,))})
    assert head["shared"] == ["y"]
    assert np.array_equal(got["y"], y) and np.array_equal(got["small"], small)
    got["y"][0] = -1  # the judge's copy is its own (copy-on-write) ...
    # ... and requests go the other way the same way: the child maps, reads and may write
    judge.send({"op": "stage"}, {"x": y})
    head, req = child.recv()
    assert head["shared"] == ["x"] and np.array_equal(req["x"], y)
    req["x"][:] = 0
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
def test_the_judge_refuses_a_descriptor_that_is_not_a_sealed_file_of_the_size(
    kind, monkeypatch, tmp_path
):
    make = {"unsealed": _unsealed, "resized": _resized, "file": _a_file(tmp_path), "pipe": _a_pipe}
    judge, child = _pair()
    monkeypatch.setattr(shared, "sealed", make[kind])
    before = _open_fds()
    child.send({"op": "collected"}, {"y": np.ones(N, np.float32)})
    with pytest.raises(wire.WireError, match="came in"):
        judge.recv({"y": (np.float32, (N,))})
    assert _open_fds() <= before  # nothing it sent stays open on the judge's end
    _close(judge, child)


def _attach(monkeypatch, extra: int):
    """The child's end attaches ``extra`` more descriptors (or, -1: none) to a shared blob."""

    def write_with(self, data, fd):
        fds = [] if extra < 0 else [fd] + [os.dup(fd) for _ in range(extra)]
        sock = socket.socket(fileno=self.wfd)
        try:
            rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
            n = sock.sendmsg([data], rights)
        finally:
            sock.detach()
            for f in fds[1:]:
                os.close(f)
        self._write(data[n:])

    monkeypatch.setattr(wire.Channel, "_write_with", write_with)


@pytest.mark.parametrize(
    "extra, said", [(1, "descriptors for no array"), (-1, "without its memory file")]
)
def test_one_descriptor_per_shared_array_no_more_no_less(extra, said, monkeypatch):
    judge, child = _pair()
    _attach(monkeypatch, extra)
    before = _open_fds()
    child.send({"op": "collected"}, {"y": np.ones(N, np.float32)})
    with pytest.raises(wire.WireError, match=said):
        judge.recv({"y": (np.float32, (N,))})
    assert _open_fds() <= before
    _close(judge, child)


def test_a_flood_of_descriptors_is_refused_and_closed(monkeypatch):
    judge, child = _pair()
    _attach(monkeypatch, shared.MAX_FDS + 5)
    before = _open_fds()
    child.send({"op": "collected"}, {"y": np.ones(N, np.float32)})
    with pytest.raises(wire.WireError, match="more descriptors"):
        judge.recv({"y": (np.float32, (N,))})
    assert _open_fds() <= before
    _close(judge, child)


def test_a_descriptor_with_no_shared_array_and_sharing_on_a_pipe_are_refused(monkeypatch):
    judge, child = _pair()
    sock = socket.socket(fileno=child.wfd)
    fd = shared.sealed(np.ones(4, np.float32))
    head = b'{"op": "x", "arrays": []}'
    sock.sendmsg(
        [wire._LEN.pack(len(head)) + head],
        [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))],
    )
    sock.detach()
    os.close(fd)
    with pytest.raises(wire.WireError, match="descriptors for no array"):
        judge.recv({})
    _close(judge, child)
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    judge, child = wire.Channel(r2, w1, deadline=time.monotonic() + 20), wire.Channel(r1, w2)
    child.shares = True  # a child that claims to share over pipes
    monkeypatch.setattr(wire.Channel, "_write_with", lambda self, data, fd: self._write(data))
    child.send({"op": "x"}, {"y": np.ones(N, np.float32)})
    with pytest.raises(wire.WireError, match="shares on a pipe"):
        judge.recv({"y": (np.float32, (N,))})
    for f in (r1, w1, r2, w2):
        os.close(f)


def test_an_unexpected_shape_is_refused_before_anything_is_mapped(monkeypatch):
    judge, child = _pair()
    mapped = []
    monkeypatch.setattr(shared, "mapped", lambda *a: mapped.append(a))
    child.send({"op": "collected"}, {"y": np.ones(N + 1, np.float32)})
    with pytest.raises(wire.WireError, match="asked for"):
        judge.recv({"y": (np.float32, (N,))})
    assert mapped == []
    _close(judge, child)


def test_many_messages_leave_no_descriptor_behind():
    judge, child = _pair()
    before = _open_fds()
    for _ in range(50):
        child.send({"op": "collected"}, {"y": np.ones(N, np.float32)})
        judge.recv({"y": (np.float32, (N,))})
    assert _open_fds() <= before
    _close(judge, child)
