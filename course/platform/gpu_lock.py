"""This machine's GPU locks: timed launches of different submissions (and the ceilings)
never overlap on one GPU, and neither do two Nsight Compute sessions (``"profiler"``: a
second one reads no counters; ``course.profile`` and a counted check's GPU count take it).
Correctness launches take none.

The lock file lies in a folder only this user can enter (mode 0700: ``$XDG_RUNTIME_DIR``
where the session has one, else ``~/.cache/course/locks``), never in a shared ``/tmp``: no
other user can take it, and no sandboxed worker or measurer can even see it (their file
tree holds neither folder, ``grading/wall/isolate.py``).  Every wait has a deadline: a judge that cannot
get the GPU before the submission's time is up raises :class:`LockTimeout` instead of
waiting for ever.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from pathlib import Path

POLL_S = 0.02  # how often a waiting judge tries the lock again


class LockTimeout(Exception):
    """The GPU stayed busy (another measurement held its lock) past the deadline."""


def lock_dir() -> Path:
    """The folder of this user's lock files, made (0700) if missing; refused if another user
    owns it or others may write in it."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
        folder = Path(runtime) / "course-locks"
    else:
        folder = Path.home() / ".cache" / "course" / "locks"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = folder.stat()
    if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.chmod(folder, 0o700)  # ours but too open: close it; not ours: refuse
        st = folder.stat()
        if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise PermissionError(
                f"the lock folder {folder} belongs to another user or is "
                "writable by others; remove it"
            )
    return folder


def lock_path(purpose: str = "") -> Path:
    """The lock file of the first GPU this process sees (``CUDA_VISIBLE_DEVICES``);
    ``purpose``: another lock of that GPU (``"ceilings"``: its run's one measurement;
    ``"profiler"``: its Nsight Compute sessions)."""
    dev = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
    dev = "".join(c for c in dev if c.isalnum() or c in "-_") or "0"  # a UUID or an index
    return lock_dir() / f"gpu-{dev}{'.' + purpose if purpose else ''}.lock"


@contextlib.contextmanager
def device_lock(enabled: bool = True, deadline: float | None = None, purpose: str = ""):
    """Hold this machine's GPU measuring lock (``purpose``: another lock of the GPU,
    :func:`lock_path`); with ``deadline`` (a ``time.monotonic()`` value) give up then with
    :class:`LockTimeout`.  ``enabled=False``: a no-op (the simulator times nothing)."""
    if not enabled:
        yield
        return
    import fcntl

    path = lock_path(purpose)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    start = time.monotonic()
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                left = float("inf") if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    raise LockTimeout(
                        f"the GPU stayed busy: its measuring lock ({path}) was "
                        f"held by another measurement for "
                        f"{time.monotonic() - start:.0f} s"
                    ) from None
                time.sleep(min(POLL_S, left))
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
