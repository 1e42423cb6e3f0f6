"""Loaders turning the registered real data sets into :class:`recsys_ltr.Interactions`.

=========================  ==========================================================  =================  ==========
name                       positives                                                   item content       timestamps
=========================  ==========================================================  =================  ==========
``movielens-100k``         ``u.data`` ratings ``>= 4``                                 19 genre flags     yes
``movielens-1m-implicit``  train + valid + test merged (ratings ``>= 3``, pre-binarized)  --                 --
``lastfm-2k``              ``user_artists.dat``: any positive listening count          artist tag counts  --
``citeulike-a``            ``users.dat`` libraries                                     article tags       --
``msweb``                  ``anonymous-msweb.data`` (the training part) Vroot visits   --                 --
``gowalla``                train + valid + test merged (pre-binarized check-ins)       --                 --
=========================  ==========================================================  =================  ==========

External ids are the files' own ids (ints); users and items without a positive are dropped.
The sets of :data:`TIMESTAMPED` keep the time of each positive (``Interactions.timestamps``):
movielens-100k the Unix seconds of ``u.data`` (int64), so that the time-ordered splits of
:mod:`recsys_ltr.split` apply.  The others' files carry no time of the interactions they load
(lastfm-2k dates its tag assignments, not its listening counts; the pre-split sets ship no times).
:func:`load_presplit` gives the published train/valid/test of the pre-split sets.
Files are located and checksummed by :mod:`recsys_ltr.datasets._registry`.
"""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pandas as pd
import scipy.sparse as sp

from .._validation import check_feedback
from ..interactions import Interactions
from ._registry import dataset_info, dataset_path, is_present, open_text, read_bytes
from ._registry import list_datasets as _registered

__all__ = ["PRESPLIT", "TIMESTAMPED", "available", "list_datasets", "load", "load_presplit"]

_PRESPLIT = ("train", "valid", "test")
#: The data sets that ship a published train / valid / test split (:func:`load_presplit`).
PRESPLIT = ("gowalla", "movielens-1m-implicit")
#: The data sets whose :func:`load` keeps a timestamp per positive (``Interactions.timestamps``).
TIMESTAMPED = ("movielens-100k",)


def list_datasets(include_ltr: bool = False) -> list[str]:
    """Registered data set names: those :func:`load` reads (plus the learning-to-rank sets
    read by ``load_letor`` when ``include_ltr``).

    Examples
    --------
    >>> from recsys_ltr import datasets
    >>> datasets.list_datasets()
    ['citeulike-a', 'gowalla', 'lastfm-2k', 'movielens-100k', 'movielens-1m-implicit', 'msweb']
    """
    return sorted(_registered() if include_ltr else _LOADERS)


def available(data_dir=None, include_ltr: bool = False) -> list[str]:
    """The registered data sets whose files are present in the data directory.

    Examples
    --------
    >>> from recsys_ltr import datasets
    >>> set(datasets.available()) <= set(datasets.list_datasets())
    True
    """
    return [name for name in list_datasets(include_ltr) if is_present(name, data_dir)]


def load(name: str, data_dir=None, verify: bool = True) -> Interactions:
    """Load a registered interaction data set (see the module docstring for what it holds).

    Parameters
    ----------
    name : str
        One of :func:`list_datasets`.
    data_dir : path or None
        See :func:`recsys_ltr.datasets.resolve_data_dir`.
    verify : bool
        Check every file's sha256 against the registry.

    Examples
    --------
    >>> from recsys_ltr import datasets
    >>> data = datasets.load("movielens-100k")  # doctest: +SKIP
    >>> data  # doctest: +SKIP
    Interactions(942 users x 1447 items, 55375 positives, 19 item features, timestamps)
    >>> data.matrix.shape, data.item_ids[:3]  # doctest: +SKIP
    ((942, 1447), array([1, 2, 3]))
    """
    if name not in _LOADERS:
        dataset_info(name)  # unknown name -> ValueError listing the registered ones
        raise ValueError(f"{name!r} is a learning-to-rank set: use recsys_ltr.datasets.load_letor")
    return _reading(name, _LOADERS[name], data_dir, verify)


def _reading(name, loader, *args):
    """Run ``loader``; a damaged file (corrupt gzip, undecodable or malformed text) is a ValueError."""
    try:
        return loader(*args)
    except (EOFError, zlib.error, gzip.BadGzipFile, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise ValueError(
            f"data set {name!r}: a file is corrupt or malformed ({type(exc).__name__}: {exc}); "
            "load with verify=True to find which"
        ) from None


def load_presplit(name: str, data_dir=None, verify: bool = True) -> tuple[Interactions, dict]:
    """The published train / valid / test split of ``movielens-1m-implicit`` or ``gowalla``.

    Returns
    -------
    data : Interactions
        All parts merged (what :func:`load` returns).
    parts : dict
        ``{"train", "valid", "test"}`` -> canonical CSR matrices of ``data.shape`` on ``data``'s
        id maps; they are disjoint and sum to ``data.matrix``.

    Examples
    --------
    >>> from recsys_ltr import datasets
    >>> data, parts = datasets.load_presplit("gowalla")  # doctest: +SKIP
    >>> data.shape, sorted(parts)  # doctest: +SKIP
    ((29858, 40981), ['test', 'train', 'valid'])
    """
    if name not in PRESPLIT:
        raise ValueError(f"{name!r} ships no published split; pre-split sets: {', '.join(PRESPLIT)}")
    pairs = {part: _reading(name, _read_user_lines, name, f"{part}.txt", data_dir, verify) for part in _PRESPLIT}
    data = Interactions.from_arrays(*(np.concatenate(x) for x in zip(*pairs.values())))
    parts = {}
    for part, (users, items) in pairs.items():
        rows, cols = data.user_index(users), data.item_index(items)
        X = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=data.shape)
        parts[part] = check_feedback(X, f"{name} {part}", allow_empty=True)
    return data, parts


# ---------------------------------------------------------------------- parsers
def _adjacency(data: bytes, first_is_count: bool, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Parse lines of whitespace-separated ints, ``head id id ...``, into ``(row, id)`` pairs.

    ``head`` is the row id itself, or (``first_is_count``) the number of ids on the line,
    the row then being the 0-based line number.  Vectorised over all tokens.
    """
    if not data.strip():
        raise ValueError(f"{where}: the file holds no data")
    buf = np.frombuffer(data, dtype=np.uint8)
    space = (buf == 32) | (buf == 9) | (buf == 10) | (buf == 13)
    starts = np.flatnonzero(~space & np.concatenate(([True], space[:-1])))
    line = np.searchsorted(np.flatnonzero(buf == 10), starts)  # 0-based line of each token
    try:
        tokens = np.array(data.split(), dtype=np.int64)
    except (ValueError, OverflowError):
        raise ValueError(f"{where}: expected whitespace-separated integers below 2**63") from None
    head = np.concatenate(([True], line[1:] != line[:-1]))
    body = ~head
    if first_is_count:
        n_ids = np.bincount(line[body], minlength=line.max() + 1)[line[head]]
        if not np.array_equal(n_ids, tokens[head]):
            bad = int(line[head][np.flatnonzero(n_ids != tokens[head])[0]])
            raise ValueError(f"{where}: line {bad + 1} announces a different number of ids than it holds")
        return line[body], tokens[body]
    row = tokens[head][np.cumsum(head) - 1]
    return row[body], tokens[body]


def _read_user_lines(name, filename, data_dir, verify):
    path = dataset_path(name, filename, data_dir, verify)
    return _adjacency(read_bytes(path), first_is_count=False, where=str(path))


def _tsv(name, filename, data_dir, verify, **kwargs) -> pd.DataFrame:
    with open_text(dataset_path(name, filename, data_dir, verify), kwargs.pop("encoding", "utf-8")) as f:
        return pd.read_csv(f, sep="\t", **kwargs)


# ---------------------------------------------------------------------- loaders
def _movielens_100k(data_dir, verify) -> Interactions:
    ratings = _tsv(
        "movielens-100k", "u.data", data_dir, verify, header=None, names=["user", "item", "rating", "timestamp"]
    )
    data = Interactions.from_dataframe(ratings, weight_col="rating", threshold=4, rule=">=", timestamp_col="timestamp")
    with open_text(dataset_path("movielens-100k", "u.genre", data_dir, verify), "latin-1") as f:
        genres = pd.read_csv(f, sep="|", header=None, names=["genre", "index"]).dropna()
    with open_text(dataset_path("movielens-100k", "u.item", data_dir, verify), "latin-1") as f:
        movies = pd.read_csv(f, sep="|", header=None)
    flags = movies.iloc[:, 5:].to_numpy(dtype=np.float64)
    if flags.shape[1] != len(genres):
        raise ValueError(f"u.item has {flags.shape[1]} genre columns, u.genre lists {len(genres)} genres")
    return data.with_item_features(flags, item_ids=movies[0].to_numpy(), feature_names=genres["genre"].to_numpy())


def _pre_split_merged(name):
    def loader(data_dir, verify) -> Interactions:
        pairs = [_read_user_lines(name, f"{part}.txt", data_dir, verify) for part in _PRESPLIT]
        return Interactions.from_arrays(*(np.concatenate(x) for x in zip(*pairs)))

    return loader


def _lastfm_2k(data_dir, verify) -> Interactions:
    name = "lastfm-2k"
    listens = _tsv(name, "user_artists.dat", data_dir, verify)
    data = Interactions.from_dataframe(listens, user_col="userID", item_col="artistID", weight_col="weight")
    tags = _tsv(name, "tags.dat", data_dir, verify, encoding="latin-1")
    tagged = _tsv(name, "user_taggedartists.dat", data_dir, verify)
    artists, a_codes = np.unique(tagged["artistID"].to_numpy(), return_inverse=True)
    t_codes = pd.Index(tags["tagID"]).get_indexer(tagged["tagID"])
    if np.any(t_codes < 0):
        raise ValueError("user_taggedartists.dat uses tag ids missing from tags.dat")
    counts = sp.coo_matrix((np.ones(t_codes.size), (a_codes, t_codes)), shape=(artists.size, len(tags)))
    return data.with_item_features(counts, item_ids=artists, feature_names=tags["tagValue"].to_numpy())


def _citeulike_a(data_dir, verify) -> Interactions:
    name = "citeulike-a"

    def read(filename):
        path = dataset_path(name, filename, data_dir, verify)
        return _adjacency(read_bytes(path), first_is_count=True, where=str(path))

    data = Interactions.from_arrays(*read("users.dat"))
    items, tag_ids = read("item-tag.dat")
    with open_text(dataset_path(name, "tags.dat", data_dir, verify)) as f:
        tag_names = np.array(f.read().splitlines(), dtype=object)
    if tag_ids.size and tag_ids.max() >= tag_names.size:
        raise ValueError("item-tag.dat uses tag ids beyond the lines of tags.dat")
    n_rows = int(items.max()) + 1 if items.size else 0
    tags = sp.coo_matrix((np.ones(items.size), (items, tag_ids)), shape=(n_rows, tag_names.size))
    return data.with_item_features(tags, item_ids=np.arange(n_rows), feature_names=tag_names)


def _msweb(data_dir, verify) -> Interactions:
    # DST format: "A,<vroot>,..." attributes, then "C,"<case>",<case>" followed by its "V,<vroot>,1"
    path = dataset_path("msweb", "anonymous-msweb.data", data_dir, verify)
    with open_text(path, "latin-1") as f:
        lines = pd.read_csv(f, header=None, names=range(6), dtype=str, keep_default_na=False)
    kind = lines[0].to_numpy()
    cases = np.flatnonzero(kind == "C")
    votes = np.flatnonzero(kind == "V")
    owner = np.searchsorted(cases, votes) - 1
    if votes.size == 0 or owner.min() < 0:
        raise ValueError(f"{path}: expected case lines (C) each followed by its vote lines (V)")
    users = lines[2].to_numpy()[cases].astype(np.int64)[owner]
    items = lines[1].to_numpy()[votes].astype(np.int64)
    return Interactions.from_arrays(users, items)


_LOADERS = {
    "movielens-100k": _movielens_100k,
    "movielens-1m-implicit": _pre_split_merged("movielens-1m-implicit"),
    "lastfm-2k": _lastfm_2k,
    "citeulike-a": _citeulike_a,
    "msweb": _msweb,
    "gowalla": _pre_split_merged("gowalla"),
}
