"""Progress bars of long fits: one rule for every estimator (implicit's and LightFM's habit)."""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["progress", "progress_enabled"]


def progress_enabled(show_progress) -> bool:
    """Whether to show a progress bar: ``None`` means on when standard error is a terminal (so
    logs and CI stay quiet), ``True``/``False`` as given; anything else is a ``TypeError``."""
    if show_progress is None:
        return sys.stderr.isatty()
    if not isinstance(show_progress, (bool, np.bool_)):
        raise TypeError(f"show_progress must be True, False or None (on in a terminal), got {show_progress!r}")
    return bool(show_progress)


def progress(show_progress, **kwargs):
    """A tqdm bar (a context manager) shown according to :func:`progress_enabled`."""
    from tqdm.auto import tqdm

    return tqdm(disable=not progress_enabled(show_progress), **kwargs)
