"""Messages between the grader and its worker: a JSON header, then numpy arrays.

Each message is ``<8-byte length><JSON header>`` followed by one ``<8-byte length><.npy>``
blob per name in ``header["arrays"]``.  Arrays travel in numpy's ``.npy`` format with
``allow_pickle=False`` and headers as JSON: the grader never unpickles anything the worker
wrote (unpickling runs code).  Anything malformed, oversized or late raises
:class:`WireError`, which the grader treats as tampering or a timeout.
"""
from __future__ import annotations

import io
import json
import os
import select
import struct
import time

import numpy as np

MAX_HEADER = 1 << 20          # bytes of JSON in one header
MAX_ARRAY = 4 << 30           # bytes in one array blob
_LEN = struct.Struct("<Q")


class WireError(Exception):
    """A message that is malformed, too big, cut short, or did not come in time."""

    def __init__(self, message: str, timed_out: bool = False, closed: bool = False):
        super().__init__(message)
        self.timed_out, self.closed = timed_out, closed


class Channel:
    """One end of a pair of pipes: ``send`` writes to ``wfd``, ``recv`` reads ``rfd``.

    With ``deadline`` (a ``time.monotonic()`` value) reads and writes give up at that time;
    the grader sets one, the worker waits as long as it takes.
    """

    def __init__(self, rfd: int, wfd: int, deadline: float | None = None):
        self.rfd, self.wfd, self.deadline = rfd, wfd, deadline
        if deadline is not None:
            os.set_blocking(rfd, False)
            os.set_blocking(wfd, False)

    # -- sending --------------------------------------------------------------------------
    def send(self, header: dict, arrays: dict | None = None) -> None:
        arrays = arrays or {}
        head = json.dumps({**header, "arrays": list(arrays)}, default=_plain).encode()
        parts = [_LEN.pack(len(head)), head]
        for a in arrays.values():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(a), allow_pickle=False)
            blob = buf.getvalue()
            parts += [_LEN.pack(len(blob)), blob]
        self._write(b"".join(parts))

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            self._wait(write=True)
            try:
                n = os.write(self.wfd, view)
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError) as exc:
                raise WireError(f"the other side closed the pipe ({exc})", closed=True) \
                    from None
            view = view[n:]

    # -- receiving ------------------------------------------------------------------------
    def recv(self) -> tuple[dict, dict]:
        """(header, arrays by name); WireError if anything is off."""
        size = self._length(MAX_HEADER, "header")
        try:
            header = json.loads(self._read(size))
        except ValueError:
            raise WireError("a message header is not JSON") from None
        if not isinstance(header, dict) or not isinstance(header.get("arrays", []), list):
            raise WireError("a message header is not a JSON object with a list of arrays")
        arrays = {}
        for name in header.get("arrays", []):
            if not isinstance(name, str) or name in arrays:
                raise WireError("a message names an array twice or not by a string")
            blob = self._read(self._length(MAX_ARRAY, f"array {name!r}"))
            try:
                arrays[name] = np.lib.format.read_array(io.BytesIO(blob), allow_pickle=False)
            except (ValueError, OSError, EOFError):
                raise WireError(f"array {name!r} is not a valid .npy blob") from None
        return header, arrays

    def _length(self, limit: int, what: str) -> int:
        (n,) = _LEN.unpack(self._read(_LEN.size))
        if n > limit:
            raise WireError(f"the {what} announces {n} bytes (limit {limit})")
        return n

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            self._wait(write=False)
            try:
                chunk = os.read(self.rfd, min(left, 1 << 20))
            except BlockingIOError:
                continue
            if not chunk:
                raise WireError("the other side closed the pipe", closed=True)
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

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


def _plain(x):
    """JSON for numpy scalars, numpy arrays and sets in headers and answers."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (set, frozenset)):
        return list(x)
    raise TypeError(f"cannot send {type(x).__name__} in a header")
