"""What ``isolate.make`` (and ``forks.py``, for each zygote) runs inside a fresh sandbox
before any submission, to find out whether the wall holds on this machine: a sandbox that
fails any check is not used (the grader says why, once, at the start).

It checks, as a cell would try them: a file and a listening Unix socket outside the tree
are not there; a variable planted in the grader's environment did not get in; every mount
but the scratch, ``/dev/shm`` and ``/proc`` is read-only; the scratch takes a file; no
other process is visible; the course package is there; the kernel's keyrings, inotify and epoll
(kept per uid, across namespaces) are refused (``tree.deny_calls``); and, last, no user
namespace can be made in it (``tree.no_more_namespaces``: in one a process regains every
capability).  argv: the secret file, the socket, the course package, the scratch.
"""

PLANTED = "COURSE_SANDBOX_PROBE_PLANTED"
NONE_MESSAGE = (  # where no sandbox holds: nothing is graded
    "worker sandbox: NONE ({why}). Without it student code would run as you: it could "
    "read and write your files, the hidden cases included, and signal your processes. "
    "Nothing is graded so: grade inside a container (instructor/README.md), or pass "
    "--isolation none to accept that."
)
PROBE = r"""
import os, socket, sys
secret, sock, course, scratch = sys.argv[1:5]
bad = []
if os.path.lexists(secret):
    bad.append("a file outside the tree is there")
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sock)
    bad.append("a Unix socket outside the tree connects")
except OSError:
    pass
if any(k.startswith("COURSE_SANDBOX_PROBE") for k in os.environ):
    bad.append("the grader's environment got in")
for line in open("/proc/self/mountinfo"):
    f = line.split()
    point, opts = f[4], f[5].split(",")
    rw = point in ("/tmp", "/dev/shm", scratch, "/proc")   # not /proc/sys: read-only
    if "ro" not in opts and not rw:
        bad.append(point + " is writable")
with open(os.path.join(scratch, "ok"), "w") as f:
    f.write("ok")
if sum(p.isdigit() for p in os.listdir("/proc")) >= 5:
    bad.append("other processes are visible")
if not os.path.isdir(course):
    bad.append("the course package is missing")
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
calls = {"x86_64": (250, 294, 291), "aarch64": (219, 26, 20)}.get(platform.machine())
if calls is None:
    bad.append("no system call filter for " + platform.machine())
elif libc.syscall(calls[0], 0, -4, 0) >= 0:   # keyctl(GET_KEYRING_ID, the user's keyring)
    bad.append("the keyrings of its uid are reachable")
elif libc.syscall(calls[1], 0) >= 0:   # inotify_init1: instances its uid shares with the host
    bad.append("inotify instances can be made")
elif libc.syscall(calls[2], 0) >= 0:   # epoll_create1: watches its uid shares with the host
    bad.append("epoll instances can be made")
if libc.unshare(0x10000000) == 0:   # last: it changes this process
    bad.append("a user namespace can be made in it (and every capability regained there)")
print("; ".join(bad))
sys.exit(1 if bad else 0)
"""
