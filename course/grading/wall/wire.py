"""Messages between the grader and its worker: a JSON header, then numpy arrays.

Each message is ``<8-byte length><JSON header>`` followed by one ``<8-byte length><.npy>``
blob per name in ``header["arrays"]``.  Arrays travel in numpy's ``.npy`` format with
``allow_pickle=False`` and headers as JSON: the grader never unpickles anything the worker
wrote (unpickling runs code).  Anything malformed, oversized or late raises
:class:`WireError`, which the grader treats as tampering or a timeout.

The judge's side is *bounded*: it reads only what its request allows (``expect``: the array
names it may get back, each with its dtype and shape).  A reply that names another array, or
whose ``.npy`` header announces another dtype or shape, or whose blob is longer than that
array, is refused after reading the blob's small ``.npy`` header and before reading (or
allocating) its data; so a reply costs the judge at most what it asked for.
"""

from __future__ import annotations

import io
import json
import math
import os
import select
import struct
import time

import numpy as np

MAX_HEADER = 1 << 20  # bytes of JSON in one header
MAX_ARRAY = 4 << 30  # bytes in one array blob (a request to a child)
MAX_NPY_HEADER = 4096  # bytes of one .npy header in a reply (numpy writes ~128)
_LEN = struct.Struct("<Q")
_NPY_MAGIC = b"\x93NUMPY"


class WireError(Exception):
    """A message that is malformed, too big, cut short, or did not come in time."""

    def __init__(self, message: str, timed_out: bool = False, closed: bool = False):
        super().__init__(message)
        self.timed_out, self.closed = timed_out, closed


def widen(fd: int, size: int = 1 << 20) -> None:
    """Make the pipe behind ``fd`` hold ``size`` bytes (Linux; 64 KiB by default), so that a
    case's arrays cross it in a few large reads rather than thousands of small ones; where
    the system refuses, the pipe stays as it was."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ImportError):
        pass


def allowed(arrays: dict) -> dict:
    """``expect`` for a reply that sends back exactly these arrays (name -> (dtype, shape))."""
    return {k: (np.dtype(a.dtype), tuple(a.shape)) for k, a in arrays.items()}


class Channel:
    """One end of a pair of pipes: ``send`` writes to ``wfd``, ``recv`` reads ``rfd``.

    With ``deadline`` (a ``time.monotonic()`` value) reads and writes give up at that time;
    the grader sets one, the worker waits as long as it takes.  The grader's end (the one
    with a deadline) takes no arrays unless ``recv`` is told which (``expect``).
    """

    def __init__(self, rfd: int, wfd: int, deadline: float | None = None):
        self.rfd, self.wfd, self.deadline = rfd, wfd, deadline
        self.max_header = MAX_HEADER  # bytes of JSON this end reads in one header
        if deadline is not None:
            os.set_blocking(rfd, False)
            os.set_blocking(wfd, False)

    # -- sending --------------------------------------------------------------------------
    def send(self, header: dict, arrays: dict | None = None) -> None:
        """Write one message.  An array's data goes to the pipe straight from its memory
        (no copy while the GIL is held: a grader judging 16 submissions at once moves
        gigabytes a minute); only the small headers are assembled first."""
        arrays = arrays or {}
        head = json.dumps({**header, "arrays": list(arrays)}, default=json_default).encode()
        small = [_LEN.pack(len(head)), head]
        for a in arrays.values():
            a = np.ascontiguousarray(a)
            if a.dtype.hasobject:
                raise ValueError("object arrays cannot be sent")
            npy = io.BytesIO()
            np.lib.format.write_array_header_1_0(npy, np.lib.format.header_data_from_array_1_0(a))
            small += [_LEN.pack(npy.tell() + a.nbytes), npy.getvalue()]
            if a.nbytes:
                self._write(b"".join(small))
                small = []
                self._write(a.reshape(-1).view(np.uint8).data)
        if small:
            self._write(b"".join(small))

    def _write(self, data) -> None:
        view = memoryview(data)
        while view:
            self._wait(write=True)
            try:
                n = os.write(self.wfd, view)
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError) as exc:
                raise WireError(f"the other side closed the pipe ({exc})", closed=True) from None
            view = view[n:]

    # -- receiving ------------------------------------------------------------------------
    def recv(self, expect: dict | None = None) -> tuple[dict, dict]:
        """(header, arrays by name); WireError if anything is off.

        ``expect``: name -> (dtype, shape) of the arrays this message may carry (a shape's
        entry may be a ``range`` of allowed sizes); any other name, dtype, shape or length is
        refused before its data is read.  None: no arrays on the grader's end (one with a
        deadline); anything up to MAX_ARRAY a blob on a child's end (requests come from the
        grader)."""
        if expect is None and self.deadline is not None:
            expect = {}
        size = self._length(self.max_header, "header")
        try:
            header = json.loads(self._read(size))
        except (ValueError, RecursionError):
            raise WireError("a message header is not JSON") from None
        if not isinstance(header, dict) or not isinstance(header.get("arrays", []), list):
            raise WireError("a message header is not a JSON object with a list of arrays")
        names = header.get("arrays", [])
        most = len(expect) if expect is not None else 64
        if len(names) > most:
            raise WireError(f"a message announces {len(names)} arrays (at most {most} asked for)")
        arrays = {}
        for name in names:
            if not isinstance(name, str) or name in arrays:
                raise WireError("a message names an array twice or not by a string")
            if expect is None:
                arrays[name] = self._array_any(name)
            elif name not in expect:
                raise WireError(f"a reply sent an array {name[:40]!r} it was not asked for")
            else:
                arrays[name] = self._array(name, *expect[name])
        return header, arrays

    def _array_any(self, name: str) -> np.ndarray:
        """One blob of a request's array (a child's end: requests come from the grader),
        read in place; the array is a view of it."""
        blob = np.empty(self._length(MAX_ARRAY, f"array {name!r}"), np.uint8)
        self._read_into(blob.data)
        head = io.BytesIO(blob[: 10 + MAX_NPY_HEADER].tobytes())
        shape, fortran, dtype = _npy_header(head, name)
        start = head.tell()
        if dtype.hasobject or start + dtype.itemsize * math.prod(shape) != blob.size:
            raise WireError(f"array {name!r} is not a valid .npy blob")
        return blob[start:].view(dtype).reshape(shape, order="F" if fortran else "C")

    def _array(self, name: str, dtype, shape) -> np.ndarray:
        """One blob of an expected array: its .npy header read and checked, then exactly its
        data (never more than the expected array's bytes)."""
        dtype = np.dtype(dtype)
        most = MAX_NPY_HEADER + dtype.itemsize * math.prod(
            (s.stop - 1 if isinstance(s, range) else s) for s in shape
        )
        n = self._length(most, f"array {name!r}")
        prefix = self._read(min(n, 10))
        if (
            len(prefix) < 10
            or prefix[:6] != _NPY_MAGIC
            or prefix[6:8] not in (b"\x01\x00", b"\x02\x00")
        ):
            raise WireError(f"array {name!r} is not a valid .npy blob")
        if prefix[6] == 1:
            hlen, more = struct.unpack("<H", prefix[8:10])[0], b""
        else:
            more = self._read(2)
            hlen = struct.unpack("<I", prefix[8:10] + more)[0]
        start = len(prefix) + len(more)
        if hlen > MAX_NPY_HEADER or start + hlen > n:
            raise WireError(f"array {name!r} has a .npy header of {hlen} bytes")
        head = io.BytesIO(prefix + more + self._read(hlen))
        got_shape, fortran, got_dtype = _npy_header(head, name)
        if got_dtype != dtype or fortran or not _fits(got_shape, shape):
            raise WireError(
                f"array {name!r} came back as {got_dtype} {tuple(got_shape)}, "
                f"not the {dtype} {_shape_text(shape)} that was asked for"
            )
        size = dtype.itemsize * math.prod(got_shape)
        if n != start + hlen + size:
            raise WireError(f"array {name!r} announces {n} bytes for {size} bytes of data")
        data = np.empty(size, np.uint8)  # read in place: no zero fill, no copy after
        self._read_into(data.data)
        return data.view(dtype).reshape(got_shape)

    def _length(self, limit: int, what: str) -> int:
        (n,) = _LEN.unpack(self._read(_LEN.size))
        if n > limit:
            raise WireError(f"the {what} announces {n} bytes (limit {limit})")
        return n

    def _read(self, n: int) -> bytes:
        buf = bytearray(n)
        self._read_into(memoryview(buf))
        return bytes(buf)

    def _read_into(self, view: memoryview) -> None:
        while view:
            self._wait(write=False)
            try:
                got = os.readv(self.rfd, [view[: 1 << 20]])
            except BlockingIOError:
                continue
            if not got:
                raise WireError("the other side closed the pipe", closed=True)
            view = view[got:]

    def _wait(self, write: bool) -> None:
        if self.deadline is None:
            return
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WireError("no answer in time", timed_out=True)
        fd = self.wfd if write else self.rfd
        r, w, _ = select.select([] if write else [fd], [fd] if write else [], [], left)
        if not (r or w):
            raise WireError("no answer in time", timed_out=True)


def _npy_header(head: io.BytesIO, name: str) -> tuple:
    """(shape, fortran order, dtype) from the .npy header at ``head`` (at most
    MAX_NPY_HEADER bytes of it read); WireError if it is not one."""
    fmt = np.lib.format
    try:
        read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}[
            fmt.read_magic(head)
        ]
        return read(head, max_header_size=MAX_NPY_HEADER)
    except (ValueError, OSError, EOFError, SyntaxError, TypeError, KeyError):
        raise WireError(f"array {name!r} is not a valid .npy blob") from None


def _fits(shape, allowed_shape) -> bool:
    return len(shape) == len(allowed_shape) and all(
        (s in a) if isinstance(a, range) else s == a for s, a in zip(shape, allowed_shape)
    )


def _shape_text(shape) -> str:
    return (
        "("
        + ", ".join(f"{a.start}..{a.stop - 1}" if isinstance(a, range) else str(a) for a in shape)
        + ")"
    )


def json_default(x):
    """JSON for numpy scalars, numpy arrays and sets in headers and answers."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (set, frozenset)):
        return list(x)
    raise TypeError(f"cannot send {type(x).__name__} in a header")
