"""Inside a new mount namespace: build the sandbox's fresh file tree and enter it.

``python -I -S tree.py PLAN -- COMMAND...`` is what ``isolate.Isolation.wrap`` runs as the
first process of the sandbox's namespaces (root in its user namespace, before any student
code).  First it sets every ``max_*`` limit of its user namespace to 0 (no namespace,
inotify or fanotify instance made in it again: :func:`no_more_namespaces`).  PLAN (JSON,
made by the grader: ``isolate.plan``) says which host paths to bind
read-only at the same place, which folders to cover with an empty tmpfs, which symlinks and
empty folders to make; this script mounts a tmpfs on the run folder as the new root, builds
the tree there, makes every mount of it read-only, adds the writable scratch (``/tmp``, the
scratch folder) and ``/dev/shm``, the namespace's own ``/proc`` (its ``sys``, ``irq``,
``bus``, ``fs`` and ``sysrq-trigger`` read-only: as root's own uid a process could write
the host's kernel settings through them, capabilities or not), then ``pivot_root`` into it
and detaches the host's tree, installs a system call filter (:func:`deny_calls`: no
keyrings, inotify, fanotify, epoll, io_uring or async I/O, nothing of another ABI, and in a
simulator's sandbox no new process), masks a few ``/proc`` files, then execs COMMAND
(``setpriv`` dropping every capability, then the worker) with exactly the plan's
environment.  A zygote's fork does the same in-process (``zygote._first``).

It imports nothing of the course and runs as one process with plain system calls: a
sandbox starts in tens of milliseconds, not the hundreds a shell script of ``mount``
commands takes.
"""

import ctypes
import json
import os
import platform
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 1024, 2048, 4096, 16384
MS_RELATIME, MS_STRICTATIME, MNT_DETACH = 1 << 21, 1 << 24, 2
LOCKED = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}
# /proc entries that write to the host's kernel, read-only as a container runtime keeps them
PROC_READONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
# /proc files a container runtime masks: root's key names (the sandbox is root's uid),
# other processes' pages and the kernel's memory and timers - /dev/null over each
PROC_MASKED = (
    "keys",
    "key-users",
    "kcore",
    "kpageflags",
    "kpagecount",
    "kpagecgroup",
    "timer_list",
    "sched_debug",
    "slabinfo",
    "vmallocinfo",
    "pagetypeinfo",
)
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}

libc = ctypes.CDLL(None, use_errno=True)


def _c(s):
    return None if s is None else os.fsencode(s)


def _check(rc, what):
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def mount(src, dst, fstype, flags, data=None):
    _check(
        libc.mount(_c(src), _c(dst), _c(fstype), ctypes.c_ulong(flags), _c(data)),
        f"mount {src} on {dst}",
    )


def readonly(folder, itself):
    """Every mount below ``folder`` (and ``folder`` if ``itself``) read-only, keeping the
    flags a user namespace locks."""
    with open("/proc/self/mountinfo") as f:
        lines = f.read().splitlines()
    for line in lines:
        fields = line.split()
        point = fields[4].encode().decode("unicode_escape")  # \040 for a space
        if (itself and point == folder) or point.startswith(folder + "/"):
            flags = sum(LOCKED.get(o, 0) for o in fields[5].split(","))
            mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def build(new, ops):
    for kind, p, target in ops:
        at = new + p
        if kind == "bind" and os.path.isdir(p):
            os.makedirs(at, exist_ok=True)
            mount(p, at, None, MS_BIND | MS_REC)
        elif kind == "bind":
            os.makedirs(os.path.dirname(at), exist_ok=True)
            if not os.path.lexists(at):
                open(at, "a").close()
            mount(p, at, None, MS_BIND)
        elif kind == "cover":
            mount("course-hidden", at, "tmpfs", 0, "size=64k,mode=0755")
        elif kind == "link":
            os.makedirs(os.path.dirname(at), exist_ok=True)
            os.symlink(target, at)
        else:
            os.makedirs(at, exist_ok=True)


def pivot_into(new):
    os.chdir(new)
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(f"pivot_root: unknown system call number on {platform.machine()}")
    _check(libc.syscall(ctypes.c_long(number), b".", b"."), "pivot_root")
    _check(libc.umount2(b".", MNT_DETACH), "umount the host's tree")  # gone for good
    os.chdir("/")


def main(argv):
    plan, cmd = json.loads(argv[1]), argv[3:]
    enter(plan)
    allow = [c for c in plan.get("allow", ()) if c in PROFILER]
    deny_calls(allow, plan.get("processes", True) is not False)  # kept through exec
    os.execvpe(cmd[0], cmd, plan["env"])


# system calls no sandbox makes: the kernel's keyrings, inotify, fanotify and epoll watches
# are counted and kept per uid, not per namespace, and a sandbox runs as the grader's own
# uid - through them a cell could read the grader's keys, leave a key for the next student,
# or use up the uid's inotify instances, fanotify groups or epoll watches for every process
# of it on the host (a Dask worker or the leaderboard could then watch no new connection).
# io_uring is refused as container runtimes refuse it: a second way into the kernel that
# a filter of system calls does not see; io_setup, since its events (fs.aio-max-nr) are
# the whole system's, root's processes' too.  Nothing a sandbox runs needs them (Python's
# subprocess waits with poll; CUDA, numba and NVVM checked on an H200) but Nsight Compute:
# its host and the library it injects into the profiled process wait with epoll
# (boost.asio), and fail or hang without it (instructor/gpu/ncu_filter.py, an H200,
# 2026-11-29).  The counter's sandbox (``counter.py``) alone keeps epoll: :data:`PROFILER`.
DENIED = {
    "x86_64": {
        "io_setup": 206,
        "epoll_create": 213,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "inotify_init": 253,
        "epoll_create1": 291,
        "inotify_init1": 294,
        "fanotify_init": 300,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
    },
    "aarch64": {
        "io_setup": 0,
        "epoll_create1": 20,
        "inotify_init1": 26,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "fanotify_init": 262,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
    },
}
PROFILER = ("epoll_create", "epoll_create1")  # what a sandbox running ``ncu`` keeps
# A process keeps what it maps, and a mapped file stays open with no descriptor: a red team
# (round 7) filled fs.file-max from 38 processes of 65,530 one-page maps each, and 27 of 40
# honest students crashed.  One process may hold vm.max_map_count maps; so a simulator
# sandbox (where nothing of the course starts a process) makes threads, never a process:
# (clone, clone3, fork-like calls) refused there.  A GPU one still may: a cell's count in the
# simulator starts one (sim/counting.py), and the counter's ncu starts its target.
# A thread must share its process's file table too (CLONE_FILES; round 8 held 1.09 million
# files from one process, a private table of 256 in each of 4,096 threads), and unshare is
# refused (a thread's unshare(CLONE_FILES) copies the table).
SPAWN = {"x86_64": (56, 435, (57, 58, 272)), "aarch64": (220, 435, (97,))}
CLONE_THREAD, CLONE_FILES = 0x00010000, 0x00000400
THREAD = CLONE_THREAD | CLONE_FILES
RET_ENOSYS = 0x00050026
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# what else the kernel counts per uid, across namespaces: a sandbox may queue few signals,
# make no POSIX message queue and lock no memory (SHM_LOCK is counted per uid), so it
# cannot use up the uid's share for the host; and what it counts for the whole system:
# open files (fs.file-max, which only CAP_SYS_ADMIN may pass - a red team's cell filled it
# from 200 processes and other students' sandboxes failed): at most NOFILE a process, and
# its cgroup's tasks (``cgroup.PIDS_MAX``, ``GPU_PIDS_MAX``) times that a sandbox
PER_UID_LIMITS = ((11, 256), (12, 0), (8, 0))  # RLIMIT_SIGPENDING, _MSGQUEUE, _MEMLOCK
RLIMIT_NOFILE = 7
NOFILE = {"sim": 256, "gpu": 1024}  # the simulator's sandboxes: 4,096 tasks, mostly threads


def simulated(env) -> bool:
    """Whether a sandbox whose environment is ``env`` runs numba's CUDA simulator."""
    return env.get("NUMBA_ENABLE_CUDASIM", "") == "1"


def rlimits(env: dict, cpu_s: int, memory_mb: int) -> list[tuple[int, int]]:
    """A sandboxed process's rlimits (soft and hard alike: no raising): no core file, its
    CPU seconds, 64 MB a file, :data:`PER_UID_LIMITS`, :data:`NOFILE` for its mode, and
    ``memory_mb`` of address space where given (a cold child's ``child._limits``, a fork's
    ``zygote._limits``)."""
    import resource

    wanted = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, cpu_s),
        (resource.RLIMIT_FSIZE, 64 << 20),
        *PER_UID_LIMITS,
        (RLIMIT_NOFILE, NOFILE["sim" if simulated(env) else "gpu"]),
    ]
    if memory_mb:
        wanted.append((resource.RLIMIT_AS, memory_mb << 20))
    return wanted


X32_BIT = 0x40000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
RET_ALLOW, RET_EPERM = 0x7FFF0000, 0x00050001


class _Insn(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint),
    ]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def seccomp_program(machine, allow=(), processes=True):
    """The filter, as (code, jt, jf, k): another ABI's calls (i386's int 0x80, x32) and
    :data:`DENIED`'s but those named in ``allow`` fail with EPERM; with ``processes``
    False a new process, or a thread with a file table of its own, too (:data:`SPAWN`;
    clone3 says ENOSYS, so that the C library makes its threads with clone); every other
    call is allowed.  None for a
    machine it does not know."""
    if machine not in DENIED:
        return None
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JGE|K, RET|K
    nrs = sorted(nr for name, nr in DENIED[machine].items() if name not in allow)
    clone, clone3, forks = SPAWN[machine]
    nrs += [] if processes else list(forks)
    spawn = (
        []
        if processes
        else [
            (jeq, 0, 1, clone3),
            (ret, 0, 0, RET_ENOSYS),
            (jeq, 0, 3, clone),  # not clone: allowed; clone: a thread of this table or nothing
            (ld, 0, 0, 16),  # the low half of its flags (args[0])
            (0x54, 0, 0, THREAD),  # BPF_ALU|AND|K
            (jeq, 0, 1, THREAD),
        ]
    )
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, AUDIT_ARCH[machine]), (ret, 0, 0, RET_EPERM)]
    prog += [(ld, 0, 0, 0), (jge, 0, 1, X32_BIT), (ret, 0, 0, RET_EPERM)]
    prog += [(jeq, len(nrs) - i + len(spawn), 0, nr) for i, nr in enumerate(nrs)]
    return prog + spawn + [(ret, 0, 0, RET_ALLOW), (ret, 0, 0, RET_EPERM)]


def deny_calls(allow=(), processes=True):
    """Install :func:`seccomp_program` on this process (its children and ``exec`` keep it);
    a machine it does not know keeps every call (``isolate.make``'s probe then says so)."""
    prog = seccomp_program(platform.machine(), allow, processes)
    if prog is None:
        return
    insns = (_Insn * len(prog))(*[_Insn(*i) for i in prog])
    fprog = _Prog(len(prog), insns)
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def no_more_namespaces():
    """In the sandbox's own user namespace (root there, its capabilities not yet dropped):
    no process of the sandbox may make a namespace of any kind again (nor an inotify or
    fanotify instance: every ``max_*`` limit of the namespace is 0).  A process without
    capabilities may still make a user namespace of its own, and in it regain every
    capability: mount the host's cgroups and rewrite its own limits, freeze other
    processes (a red team did).  These limits belong to the user namespace written in;
    the host's own are never touched (a sandbox without a user namespace skips this, and
    ``isolate.make`` refuses it where it could nest one)."""
    folder = "/proc/sys/user"
    for name in sorted(os.listdir(folder)):
        if name.startswith("max_"):  # namespaces; inotify, fanotify (refused by the filter too)
            with open(os.path.join(folder, name), "w") as f:
                f.write("0")


def enter(plan):
    """Build the plan's tree on a tmpfs, ``pivot_root`` into it and go to the scratch
    folder: in a mount namespace of its own, whose ``/proc`` is the PID namespace's."""
    if plan.get("user_namespace"):
        no_more_namespaces()
    new, scratch, tmp = plan["root"], plan["scratch"], "/tmp"
    under_tmp = scratch.startswith(tmp + "/")
    mount("course-root", new, "tmpfs", 0, "size=1m,mode=0755")
    build(new, plan["early"])
    for p in (tmp, "/proc", "/dev/shm") + (() if under_tmp else (scratch,)):
        os.makedirs(new + p, exist_ok=True)
    readonly(new, True)
    safe = MS_NOSUID | MS_NODEV  # no device node or set-uid file where it may write
    mount("course-scratch", new + tmp, "tmpfs", safe, f"size={plan['scratch_mb']}m,mode=1777")
    if under_tmp:
        os.makedirs(new + scratch, mode=0o1777)
        os.chmod(new + scratch, 0o1777)
    else:
        mount(new + tmp, new + scratch, None, MS_BIND)
    if plan["late"]:  # what lies under /tmp: bound onto the scratch tmpfs
        build(new, plan["late"])
        readonly(new + tmp, False)
    mount("course-shm", new + "/dev/shm", "tmpfs", safe, f"size={plan['shm_mb']}m,mode=1777")
    mount("/proc", new + "/proc", None, MS_BIND | MS_REC)  # unshare's own, fresh /proc
    for name in PROC_READONLY:  # the host's knobs: root's own uid may write them by mode
        at = f"{new}/proc/{name}"
        if os.path.lexists(at):
            mount(at, at, None, MS_BIND | MS_REC)
            readonly(at, True)
    for name in PROC_MASKED:
        at = f"{new}/proc/{name}"
        if os.path.isfile(at):
            mount(new + "/dev/null", at, None, MS_BIND)
    pivot_into(new)
    os.chdir(scratch)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Exception as exc:  # noqa: BLE001 - one line for make()'s message
        print(f"sandbox: {exc}", file=sys.stderr)
        sys.exit(1)
