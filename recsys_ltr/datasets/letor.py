"""Learning-to-rank data in SVMlight/LETOR format: ``<label> qid:<q> <j>:<v> ... # comment``.

Two registered sets (see each folder's README in the data directory):

* ``"letor-mq2008"`` (LETOR 4.0 MQ2008, 46 features, labels 0-2): the query-disjoint parts
  ``S1..S5`` are read and fold ``f`` is assembled as the official ``readme.txt`` states,
  train = ``S_f + S_{f+1} + S_{f+2}``, vali = ``S_{f+3}``, test = ``S_{f+4}`` (indices mod 5,
  concatenated in that order: byte-identical to the published ``FoldN/train.txt``).
* ``"lightgbm-lambdarank-sample"`` (LightGBM's example, 300 features, labels 0-4): rows carry no
  ``qid``; ``rank.train.query`` / ``rank.test.query`` give the sizes of consecutive query groups.
  It has one fold and the splits ``train`` and ``test`` only.

Files are located and checksummed by :mod:`recsys_ltr.datasets._registry`.

Orderings.  The listwise learners of :mod:`recsys_ltr.ltr` (ListMLE, RPC-MTL) learn from orderings;
they derive them from these graded labels (decreasing label, equal labels in random order).  Wu et
al. (TKDE 2016) trained RPC-MTL on LETOR 4.0's MQ2008-list (full permutations of each query's
documents, the listwise setting), which is not available offline: results on the graded MQ2008
are not directly comparable with that paper's figures.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
from sklearn.datasets import load_svmlight_file

from ._registry import dataset_path

__all__ = ["load_letor", "read_svmlight_ltr"]

_MQ2008_FEATURES = 46
_LGBM_FEATURES = 300
_N_PARTS = 5


def read_svmlight_ltr(path, n_features: int, query_file=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read one SVMlight/LETOR file as ``(X, y, qid)``.

    Feature ids are 1-based as in LETOR (``zero_based=False``, never guessed per file).
    ``X`` is dense float64 ``(n_rows, n_features)``, ``y`` int64 graded labels, ``qid`` int64.
    Query ids come from the ``qid:`` fields or, when ``query_file`` is given, from a LightGBM
    ``.query`` file (one group size per line; group ``g`` gets qid ``g``).
    """
    path = Path(path)
    try:
        if query_file is None:
            X, y, qid = load_svmlight_file(
                str(path), n_features=n_features, query_id=True, dtype=np.float64, zero_based=False
            )
        else:
            X, y = load_svmlight_file(str(path), n_features=n_features, dtype=np.float64, zero_based=False)
            sizes = np.loadtxt(query_file, dtype=np.int64, ndmin=1)
    except FileNotFoundError:
        raise
    except (EOFError, OSError, zlib.error, UnicodeDecodeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{path} is not a readable SVMlight/LETOR file ({type(exc).__name__}: {exc})") from None
    if query_file is not None:
        if np.any(sizes <= 0) or sizes.sum() != X.shape[0]:
            raise ValueError(
                f"{query_file}: group sizes must be positive and sum to the {X.shape[0]} rows of "
                f"{path.name}, got sum {int(sizes.sum())}"
            )
        qid = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    if X.shape[0] == 0:
        raise ValueError(f"{path} holds no rows")
    if np.shape(qid)[0] != X.shape[0]:  # sklearn's parser skips a missing qid: field silently
        raise ValueError(f"{path}: every row needs a qid: field, but only {np.shape(qid)[0]} of {X.shape[0]} have one")
    if not np.all(np.isfinite(X.data)):
        bad = int(np.flatnonzero(~np.isfinite(X.toarray()).all(axis=1))[0])
        raise ValueError(f"{path}: row {bad + 1} has a NaN or infinite feature value")
    if np.any(y != np.round(y)) or np.any(y < 0):
        raise ValueError(f"{path}: labels must be non-negative integers")
    return X.toarray(), y.astype(np.int64), np.asarray(qid, dtype=np.int64)


def _concat(parts):
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))


def load_letor(name: str = "letor-mq2008", fold: int = 1, data_dir=None, verify: bool = True) -> dict:
    """Load a learning-to-rank data set as ``{split: (X, y, qid)}``.

    Parameters
    ----------
    name : {"letor-mq2008", "lightgbm-lambdarank-sample"}
    fold : int
        1-5 for MQ2008 (see the module docstring); must be 1 for the LightGBM sample.
    data_dir : path or None
        Data directory (default: the registry's resolution, see ``resolve_data_dir``).
    verify : bool
        Check each file's sha256 against the registry.

    Returns
    -------
    dict
        ``{"train": ..., "vali": ..., "test": ...}`` for MQ2008, ``{"train": ..., "test": ...}``
        for the LightGBM sample; each value is ``(X, y, qid)`` with ``X`` dense float64,
        ``y`` int64 labels and ``qid`` int64 query ids (a query's rows are contiguous).

    Examples
    --------
    >>> from recsys_ltr.datasets import load_letor
    >>> parts = load_letor("letor-mq2008", fold=1)  # doctest: +SKIP
    >>> X, y, qid = parts["train"]  # doctest: +SKIP
    """
    if isinstance(fold, bool) or not isinstance(fold, (int, np.integer)):
        raise TypeError(f"fold must be an integer, got {fold!r}")
    if name == "letor-mq2008":
        if not 1 <= fold <= _N_PARTS:
            raise ValueError(f"fold must be in 1..{_N_PARTS} for {name}, got {fold}")
        parts = {}

        def part(i):
            k = (fold - 1 + i) % _N_PARTS + 1
            if k not in parts:
                path = dataset_path(name, f"S{k}.txt", data_dir=data_dir, verify=verify)
                parts[k] = read_svmlight_ltr(path, _MQ2008_FEATURES)
            return parts[k]

        return {"train": _concat([part(0), part(1), part(2)]), "vali": part(3), "test": part(4)}
    if name == "lightgbm-lambdarank-sample":
        if fold != 1:
            raise ValueError(f"{name} has a single fold (fold=1), got {fold}")
        out = {}
        for split in ("train", "test"):
            data = dataset_path(name, f"rank.{split}", data_dir=data_dir, verify=verify)
            query = dataset_path(name, f"rank.{split}.query", data_dir=data_dir, verify=verify)
            out[split] = read_svmlight_ltr(data, _LGBM_FEATURES, query_file=query)
        return out
    raise ValueError(
        f"unknown learning-to-rank data set {name!r}; expected 'letor-mq2008' or 'lightgbm-lambdarank-sample'"
    )
