"""Memory budgets: the one owner of how much a dense block may hold and of how much memory there is.

Work on users x items data runs in blocks of rows whose dense arrays stay under a budget
(:func:`rows_per_block`); the budgets are fixed sizes, so results never depend on the memory free
at run time.  :func:`available_bytes` is read only to say, in a ``MemoryError``, how much there was.
"""

from __future__ import annotations

__all__ = [
    "BLOCK_BYTES",
    "CACHE_BYTES",
    "MATRIX_BYTES",
    "TASK_BYTES",
    "available_bytes",
    "readable_bytes",
    "rows_per_block",
]

#: One dense working block held at once: scores, distances or pair vectors of a block of rows (32 MiB).
BLOCK_BYTES = 2**25
#: One task's or one evaluation batch's dense block of scores (256 MiB): executors and ``evaluate``.
TASK_BYTES = 2**28
#: Data cached for a whole fit (512 MiB): the tail scores of each of FEBR's validation samples.
CACHE_BYTES = 2**29
#: One dense matrix a fit may build (1 GiB): SLIM's Gram matrix, FEBR's bitset of the feedback.
MATRIX_BYTES = 2**30


def rows_per_block(row_bytes: int, budget: int | None = None) -> int:
    """Rows of ``row_bytes`` bytes each that fit in ``budget`` (default :data:`BLOCK_BYTES`), at least 1."""
    budget = BLOCK_BYTES if budget is None else budget
    return max(1, int(budget) // max(1, int(row_bytes)))


def available_bytes() -> int | None:
    """Bytes that can be allocated now: ``MemAvailable`` of ``/proc/meminfo``, lowered to the room
    left under a cgroup (v2) memory limit; ``None`` where neither is readable (not Linux)."""
    room = []
    try:
        with open("/proc/meminfo") as f:
            room += [int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")]
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f_max, open("/sys/fs/cgroup/memory.current") as f_cur:
            limit = f_max.read().strip()
            if limit != "max":
                room.append(int(limit) - int(f_cur.read()))
    except (OSError, ValueError):
        pass
    return min(room) if room else None


def readable_bytes(n_bytes) -> str:
    """``n_bytes`` for a message: ``"2.49 GB"``, ``"80 kB"``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.3g} {unit}"
    return f"{n_bytes:.0f} bytes"
