"""What the machine did while a benchmark ran: every 2 s the share of CPU time busy (all
cores, from /proc/stat) and its user / system / interrupt parts, memory in use, and each
GPU's utilisation (nvidia-smi), as CSV.

    python instructor/gpu/sampler.py OUT.csv &   # stop it with kill when the run ends
"""

import subprocess
import sys
import time


def cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    return sum(v), idle, v[0] + v[1], v[2], v[5] + v[6]


def mem_used_gib():
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            info[k] = int(v.split()[0])
    return (info["MemTotal"] - info["MemAvailable"]) / 2**20, info["MemTotal"] / 2**20


def gpus():
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=utilization.gpu,memory.used",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout
        return [line.replace(" ", "") for line in out.strip().splitlines()]
    except (OSError, subprocess.SubprocessError):
        return []


def main(path):
    t0 = time.time()
    last = cpu_times()
    with open(path, "w") as f:
        f.write(
            "t_s,cpu_busy_pct,user_pct,system_pct,irq_pct,mem_used_gib,mem_total_gib,gpus(util%,MiB)\n"
        )
        while True:
            time.sleep(2)
            now = cpu_times()
            d = [a - b for a, b in zip(now, last)]
            last = now
            used, tot = mem_used_gib()
            pct = [100 * x / d[0] if d[0] else 0 for x in d[2:]]
            busy = 100 * (1 - d[1] / d[0]) if d[0] else 0
            parts = ",".join(f"{x:.0f}" for x in pct)
            f.write(
                f"{time.time() - t0:.0f},{busy:.0f},{parts},{used:.1f},{tot:.0f},{' '.join(gpus())}\n"
            )
            f.flush()


if __name__ == "__main__":
    main(sys.argv[1])
