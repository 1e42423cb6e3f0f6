"""Progress of long loops: the one rule for every fit, evaluation and job (implicit's and LightFM's habit).

``show_progress`` is ``True``, ``False`` or ``None`` everywhere; ``None`` (the default) shows a bar only
when standard error is a terminal, so logs and CI stay quiet.  Every bar of the package is made by
:func:`progress`, and every message printed beside the bars by :func:`progress_write`.  A long fit
names its stages with :func:`report_stage`: in the bar's postfix, and as one ``INFO`` line of the
module's logger (``logging.getLogger(__name__)``; the package configures no handler, so a run outside
a terminal shows its stages once the application configures logging).
"""

from __future__ import annotations

import sys

import numpy as np
from tqdm.auto import tqdm

__all__ = ["progress", "progress_enabled", "progress_write", "report_stage"]


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
    bar = tqdm(disable=not progress_enabled(show_progress), **kwargs)
    bar.desc = kwargs.get("desc") or ""  # a disabled bar keeps no description; report_stage reads it
    return bar


def progress_write(message: str) -> None:
    """Print ``message`` on standard error above any progress bar, not through it."""
    tqdm.write(message, file=sys.stderr)


def report_stage(bar: tqdm, logger, message: str) -> None:
    """Name the stage a long loop is in: ``bar``'s postfix, and one ``INFO`` line of ``logger``."""
    bar.set_postfix_str(message)
    logger.info("%s: %s", bar.desc or "fit", message)
