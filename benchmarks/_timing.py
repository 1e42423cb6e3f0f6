"""The one timing helper of the benchmark scripts: medians of whole calls, wall and CPU."""

from __future__ import annotations

import time

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
