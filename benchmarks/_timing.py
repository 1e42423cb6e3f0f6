"""The timing helpers of the benchmark scripts: medians of whole calls (wall and CPU) and the peak
resident memory of a phase."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def timed(fn, runs=1, warmup=False):
    """``(wall, cpu, result)``: the median wall and process-CPU seconds of ``runs`` calls of ``fn``
    (after one untimed call with ``warmup``: compilation, caches) and the last call's result."""
    result = fn() if warmup else None
    walls, cpus = [], []
    for _ in range(runs):
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return float(np.median(walls)), float(np.median(cpus)), result


def high_water_kib() -> int:
    """This process's peak resident memory (KiB) since the last :func:`reset_peak`, ``VmHWM``: not
    ``ru_maxrss``, which a forked child starts at its parent's resident size (so it hid the fits' peaks)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise OSError("no VmHWM in /proc/self/status (the benchmark measures memory on Linux)")


def reset_peak() -> int:
    """Restart the high-water mark at the current resident size (Linux); that size, in KiB."""
    Path("/proc/self/clear_refs").write_text("5")
    return high_water_kib()
