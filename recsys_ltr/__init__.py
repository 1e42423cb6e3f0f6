"""recsys_ltr: top-N recommendation from implicit feedback by learning to rank."""

import os

# OpenMP threads that spin after a parallel loop steal the cores of the BLAS threads that run next
# and of other processes (beside another CPU-bound job: stacked FEBR's fit 9% and a LightGBM ranker 2x
# faster when they sleep).  Read by OpenMP runtimes loaded from now on (numba's, LightGBM's,
# implicit's); a value the user set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from recsys_ltr import _compile_notice  # noqa: F401  (a one-line notice while kernels first compile)
from recsys_ltr.interactions import Interactions, UnknownIdError

__version__ = "0.1.0"
__all__ = ["Interactions", "UnknownIdError", "__version__"]
