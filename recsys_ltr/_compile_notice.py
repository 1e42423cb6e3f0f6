"""One line on standard error when a kernel of this package compiles for the first time.

numba compiles a kernel on its first call and caches the machine code on disk (``cache=True``,
next to the module or under ``$NUMBA_CACHE_DIR``); only a cache miss fires numba's
``"numba:compile"`` event, so the notice appears in a fresh environment, once per process, and
never once the cache is warm.  Set ``RECSYS_LTR_COMPILE_NOTICE=0`` to silence it.
"""

from __future__ import annotations

import os

from numba.core import event

from ._progress import progress_write

_PACKAGE = __name__.rpartition(".")[0] + "."
MESSAGE = (
    "recsys_ltr: compiling numba kernels on first use (cached for later runs; a first run can take a minute longer)"
)


class _FirstCompileNotice(event.Listener):
    """Prints :data:`MESSAGE` at the first compilation of one of this package's kernels."""

    def __init__(self):
        self.shown = False

    def on_start(self, ev):
        func = getattr(ev.data["dispatcher"], "py_func", None)
        if self.shown or func is None or not func.__module__.startswith(_PACKAGE):
            return
        self.shown = True
        if os.environ.get("RECSYS_LTR_COMPILE_NOTICE", "1") != "0":
            progress_write(MESSAGE)

    def on_end(self, ev):
        pass


event.register("numba:compile", _FirstCompileNotice())
