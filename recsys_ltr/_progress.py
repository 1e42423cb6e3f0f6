"""The ``show_progress`` convention of the estimators: ``True``, ``False`` or ``None`` (a bar only
when standard error is a terminal, like implicit's and tqdm's own ``disable=None``)."""

from __future__ import annotations

import sys

import numpy as np
from tqdm.auto import tqdm

__all__ = ["progress_bar", "progress_enabled"]


def progress_enabled(show_progress) -> bool:
    """Whether to draw a bar: ``show_progress`` itself, or for ``None`` whether stderr is a terminal.

    Raises ``TypeError`` for anything but a bool or ``None``.
    """
    if show_progress is None:
        try:
            return sys.stderr is not None and sys.stderr.isatty()
        except (AttributeError, ValueError):  # a replaced or closed stream
            return False
    if isinstance(show_progress, (bool, np.bool_)):
        return bool(show_progress)
    raise TypeError(f"show_progress must be True, False or None (on when stderr is a terminal), got {show_progress!r}")


def progress_bar(show_progress, **kwargs) -> tqdm:
    """A ``tqdm`` bar (``kwargs`` passed on), disabled unless :func:`progress_enabled`."""
    return tqdm(disable=not progress_enabled(show_progress), **kwargs)
