"""Seeded stand-ins for the data sets, installed in place of the package's loaders when a
benchmark script runs in CI (``tests/test_benchmarks.py``; ``sitecustomize.py`` beside this file
installs them in every Python process started with ``RECSYS_LTR_STANDIN_DATA=1`` and this folder on
``PYTHONPATH``, the scripts' own subprocesses included).

Each stand-in is of the kind the real loader returns -- an :class:`~recsys_ltr.Interactions` with
counts, timestamps and item tags; a published three-way split; a learning-to-rank split of queries
-- and large enough for the models' defaults (GF-CF's 256 and BSPM's 448 factors; ChebyCF's 512, EASE's
sparse solve above 4,096 items for ``gowalla``), small enough that a script's whole path runs in seconds.
"""

import numpy as np
import scipy.sparse as sp


def standin(name=None, data_dir=None, verify=True):
    """Power-law popularity, log-normal activity (:func:`~recsys_ltr.datasets.make_synthetic`):
    ``gowalla`` 600 users x 5,000 items, any other name 500 x 600; counts, times and 200 tags."""
    from recsys_ltr import Interactions
    from recsys_ltr.datasets import make_synthetic

    n_items = 5000 if name == "gowalla" else 600
    rng = np.random.default_rng(0)
    n_users = 600 if name == "gowalla" else 500
    X = make_synthetic(n_users=n_users, n_items=n_items, density=0.03, random_state=0).matrix
    counts = sp.csr_matrix((rng.integers(1, 60, X.nnz).astype(float), X.indices, X.indptr), shape=X.shape)
    tags = (sp.random(n_items, 200, density=0.08, random_state=0, format="csr") + sp.eye(n_items, 200)).tocsr()
    tags.data[:] = 1.0
    return Interactions(counts, item_features=tags, timestamps=rng.integers(0, 10**6, X.nnz))


def standin_presplit(name=None, data_dir=None, verify=True):
    from recsys_ltr import split

    data = standin(name)
    train, valid, test = split.holdout(data.matrix, val=0.1, test=0.2, random_state=0)
    return data, {"train": train, "valid": valid, "test": test}


def standin_letor(name="letor-mq2008", fold=1, data_dir=None, verify=True) -> dict:
    rng = np.random.default_rng(fold)

    def part(n_queries):
        qid = np.repeat(np.arange(n_queries), 8)
        X = rng.random((qid.size, 46))
        y = (X[:, 0] + 0.3 * rng.random(qid.size) > 0.9).astype(np.int64) + (X[:, 1] > 0.8)
        return X, y, qid

    return {"train": part(30), "vali": part(10), "test": part(10)}


def install() -> None:
    """The stand-ins in place of ``recsys_ltr.datasets.load``, ``load_presplit`` and ``load_letor``."""
    import recsys_ltr.datasets
    import recsys_ltr.datasets.letor

    recsys_ltr.datasets.load = standin
    recsys_ltr.datasets.load_presplit = standin_presplit
    recsys_ltr.datasets.load_letor = recsys_ltr.datasets.letor.load_letor = standin_letor
