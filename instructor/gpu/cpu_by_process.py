"""Where a grading run's CPU goes, by kind of process (#45): every 0.5 s each process's user
and system time (/proc/PID/stat), kept per process at its last reading (a process that
ends loses at most half a second), summed at the end by kind - the grader, a Dask worker
(the judge), a zygote, a sandbox forked from one (by the zygote's kind), a kernel thread
(by name) - beside the whole machine's user / system / interrupt time in the same window.

    python instructor/gpu/cpu_by_process.py OUT.json &   # SIGTERM writes OUT.json
"""

import json
import os
import re
import signal
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
seen: dict = {}  # pid -> [label, user ticks, system ticks]
labels: dict = {}  # pid -> label (cmdline read once)


def machine():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return {"user": v[0] + v[1], "system": v[2], "irq": v[5] + v[6], "idle": v[3] + v[4]}


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def label(pid, comm, ppid):
    cmd = cmdline(pid)
    if not cmd:
        return "kernel: " + re.sub(r"[/:]?\d+(:\d+)?$|\d+", "", comm).rstrip("/-_:")
    if "wall.zygote" in cmd:
        kind = cmd.split()[-1]
        return f"sandbox forked ({kind})" if "wall.zygote" in cmdline(ppid) else f"zygote ({kind})"
    if "spawn_main" in cmd or "multiprocessing" in cmd:
        return "dask worker (judge)"
    if "course grade" in cmd:
        return "grader"
    if "bench grading" in cmd:
        return "bench"
    if "sampler.py" in cmd or "cpu_by_process" in cmd:
        return "sampling"
    return "other: " + comm


def read_all():
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1 : text.rindex(")")]
        rest = text[text.rindex(")") + 2 :].split()
        ppid, utime, stime = int(rest[1]), int(rest[11]), int(rest[12])
        pid = int(d)
        key = (pid, int(rest[19]))  # pid and start time: a reused pid is a new process
        if key not in labels:
            labels[key] = label(pid, comm, ppid)
        seen[key] = [labels[key], utime, stime]


def main(path):
    read_all()
    start = {k: (v[1], v[2]) for k, v in seen.items()}
    m0, t0 = machine(), time.time()
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    while not stop:
        time.sleep(0.5)
        read_all()
    m1 = machine()
    groups: dict = {}
    for key, (lab, u, s) in seen.items():
        u0, s0 = start.get(key, (0, 0))
        g = groups.setdefault(lab, {"user_s": 0.0, "system_s": 0.0, "processes": 0})
        g["user_s"] += (u - u0) / TICK
        g["system_s"] += (s - s0) / TICK
        g["processes"] += 1 if (u - u0) + (s - s0) > 0 else 0
    out = {
        "seconds": round(time.time() - t0, 1),
        "machine_cpu_s": {k: round((m1[k] - m0[k]) / TICK, 1) for k in m0},
        "by_kind": {
            k: {kk: round(vv, 1) if isinstance(vv, float) else vv for kk, vv in v.items()}
            for k, v in sorted(
                groups.items(), key=lambda kv: -(kv[1]["user_s"] + kv[1]["system_s"])
            )
            if v["user_s"] + v["system_s"] > 0.05
        },
    }
    with open(path, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
