"""Real data sets (registry, checksums, loaders) and the synthetic generators (``make_synthetic``:
latent factors; ``make_tastes``: clustered tastes at pipeline scale, O(positives)).

>>> from recsys_ltr import datasets
>>> datasets.available()  # registered sets present in the data directory  # doctest: +SKIP
['lastfm-2k', 'movielens-100k']
>>> data = datasets.load("movielens-100k")  # doctest: +SKIP
>>> data  # doctest: +SKIP
Interactions(942 users x 1447 items, 55375 positives, 19 item features, timestamps)
>>> datasets.make_synthetic(random_state=0)  # no files needed
Interactions(1000 users x 500 items, 9843 positives)

See ``datasets/README.md`` at the top of the repository for where each set comes from, its
terms of use, and where to put the files (``$RECSYS_LTR_DATA``).
"""

from ._registry import (
    ENV_VAR,
    ChecksumError,
    cache_dir,
    dataset_info,
    dataset_path,
    download,
    missing_files,
    resolve_data_dir,
    search_dirs,
)
from .letor import load_letor
from .loaders import PRESPLIT, TIMESTAMPED, available, list_datasets, load, load_presplit
from .synthetic import make_synthetic
from .tastes import make_tastes

__all__ = [
    "ENV_VAR",
    "PRESPLIT",
    "TIMESTAMPED",
    "ChecksumError",
    "available",
    "cache_dir",
    "dataset_info",
    "dataset_path",
    "download",
    "list_datasets",
    "load",
    "load_letor",
    "load_presplit",
    "make_synthetic",
    "make_tastes",
    "missing_files",
    "resolve_data_dir",
    "search_dirs",
]
