"""Kernel durations of a process's launches, in launch order, as Nsight Compute measures them.

Shared by the kernel-time scripts (deepgemm_kernel_times.py, seed_kernel_times.py): an event-timed
call carries the launch latency on both sides (2-4 us, 15-25% of a call at M = 128; docs/perf.md,
stop 21), the profiler's gpu__time_duration does not. Caches are flushed before every kernel (as
the benches' L2 flush does) and clocks are left as they run.
"""

import csv
import subprocess

UNIT_NS = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}


def ncu_launches(command, timeout=600):
    """Runs `command` (a list) under ncu; returns ([(kernel name, grid, block, ns), ...] in launch
    order, the process's own output)."""
    cmd = ["ncu", "--clock-control", "none", "--cache-control", "all", "--metrics", "gpu__time_duration.sum", "--csv"] + command
    text = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout
    rows = list(csv.reader(line for line in text.splitlines() if line.startswith('"')))
    if not rows:
        raise RuntimeError(f"no ncu records: {' '.join(cmd)}")
    header = rows[0]
    out = []
    for r in rows[1:]:
        rec = dict(zip(header, r))
        if rec.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(rec["Metric Value"].replace(",", "")) * UNIT_NS.get(rec["Metric Unit"], 1)
        out.append((rec["Kernel Name"], rec.get("Grid Size", ""), rec.get("Block Size", ""), ns))
    return out, text
