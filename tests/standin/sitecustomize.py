"""Installs the data-set stand-ins of ``_standin.py`` in this process when ``RECSYS_LTR_STANDIN_DATA=1``
(Python imports ``sitecustomize`` at start-up from ``PYTHONPATH``)."""

import os

if os.environ.get("RECSYS_LTR_STANDIN_DATA") == "1":
    import _standin

    _standin.install()
