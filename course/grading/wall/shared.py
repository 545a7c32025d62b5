"""Large arrays from the grader to a sandbox as sealed memory files, not through a pipe.

A pipe costs the CPU twice per byte and a system call per mebibyte: lesson 01's measured
launch sent 512 MB to every student's measurer.  Where a channel is one Unix socket
(``wire.Channel``; Linux), an array of :data:`MIN_BYTES` or more in a request travels as a
memory file (``memfd_create``) holding exactly its bytes: the grader writes it once and
**seals** it (no write, no shrinking, no growing, no more seals: nobody can change it
again, the grader included), then passes the descriptor with the message; the sandbox maps
it copy-on-write (:func:`mapped`) and closes the descriptor.  A sandbox cannot change what
the grader sent, nor what another sandbox was sent.

Only requests share: replies come back in the stream (a sandbox may not write files past
64 MB, ``RLIMIT_FSIZE``), and the grader's end takes no descriptor from a sandbox
(``wire.Channel.recv``) - nothing a submission made is ever mapped by a trusted process.
"""

from __future__ import annotations

import fcntl
import math
import mmap
import os
import stat

import numpy as np

MIN_BYTES = 256 << 10  # an array this big travels as a memory file (smaller: in the stream)
MAX_FDS = 16  # descriptors one read may bring; more are refused (and the extra closed)
SEALS = (
    getattr(fcntl, "F_SEAL_SHRINK", 2)
    | getattr(fcntl, "F_SEAL_GROW", 4)
    | getattr(fcntl, "F_SEAL_WRITE", 8)
    | getattr(fcntl, "F_SEAL_SEAL", 1)
)
POSSIBLE = hasattr(os, "memfd_create") and hasattr(fcntl, "F_ADD_SEALS")


class NotShared(Exception):
    """A descriptor that is not the sealed memory file of the expected size."""


def sealed(a: np.ndarray) -> int:
    """A new memory file holding ``a``'s bytes (C order), sealed; its descriptor."""
    data = np.ascontiguousarray(a).reshape(-1).view(np.uint8).data
    fd = os.memfd_create("course-array", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, len(data))
        done = 0
        while done < len(data):
            done += os.pwrite(fd, data[done : done + (1 << 30)], done)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def mapped(fd: int, dtype, shape: tuple, strict: bool = True) -> np.ndarray:
    """The array in memory file ``fd`` (closed here, whatever happens), mapped copy-on-write:
    writable here, the file unchanged.  ``strict``: only a memory file sealed against every
    change, of exactly ``dtype`` x ``shape``'s size; else :class:`NotShared`."""
    dtype = np.dtype(dtype)
    size = dtype.itemsize * math.prod(shape)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size != size:
            raise NotShared(f"not a memory file of {size} bytes")
        if strict and (fcntl.fcntl(fd, fcntl.F_GET_SEALS) & SEALS) != SEALS:
            raise NotShared("a memory file that was not sealed")
        if size == 0:
            return np.empty(shape, dtype)
        mem = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    except OSError as exc:
        raise NotShared(f"a descriptor that cannot be mapped ({exc.strerror})") from None
    finally:
        os.close(fd)
    return np.frombuffer(mem, dtype=dtype).reshape(shape)


def close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
    fds.clear()
