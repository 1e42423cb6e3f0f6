"""Progress of long loops: the one rule for every fit, evaluation and job (implicit's and LightFM's habit).

``show_progress`` is ``True``, ``False`` or ``None`` everywhere; ``None`` (the default) shows a bar only
when standard error is a terminal, so logs and CI stay quiet.  Every bar of the package is made by
:func:`progress`, and every message printed beside the bars by :func:`progress_write`.
"""

from __future__ import annotations

import sys

import numpy as np
from tqdm.auto import tqdm

__all__ = ["progress", "progress_enabled", "progress_write"]


def progress_enabled(show_progress) -> bool:
    """Whether to show a progress bar: ``None`` means on when standard error is a terminal,
    ``True``/``False`` as given; anything else is a ``TypeError``."""
    if show_progress is None:
        return sys.stderr.isatty()
    if not isinstance(show_progress, (bool, np.bool_)):
        raise TypeError(f"show_progress must be True, False or None (on in a terminal), got {show_progress!r}")
    return bool(show_progress)


def progress(show_progress, **kwargs) -> tqdm:
    """A tqdm bar (a context manager) shown according to :func:`progress_enabled`."""
    return tqdm(disable=not progress_enabled(show_progress), **kwargs)


def progress_write(message: str) -> None:
    """Print ``message`` on standard error above any progress bar, not through it."""
    tqdm.write(message, file=sys.stderr)
