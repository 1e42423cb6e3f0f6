"""Brute-force references shared by the neighbourhood tests (written for clarity, not speed), a
model-file editor shared by the save/load tests, and a small maker of every exported recommender
shared by the suites that run each model (:func:`small_models`)."""

import importlib.util
import json
import os
import signal

import numpy as np
import scipy.sparse as sp

import recsys_ltr.eval.methods
from recsys_ltr._io import _digest, _header_digest
from recsys_ltr.febr import FEBR, AffinityFEBR
from recsys_ltr.models import (
    ALS,
    BPR,
    BSPM,
    EASE,
    GFCF,
    KUNN,
    SLIM,
    ChebyCF,
    ContentItemKNN,
    ItemKNN,
    LightFMWARP,
    Popularity,
    RP3beta,
    UserKNN,
)
from recsys_ltr.neighbors import ContentAffinity


def random_feedback(rng, n_users, n_items, density=0.25, duplicate=True):
    """Binary users x items matrix with an empty user, an empty item and (optionally) a
    duplicated item column and user row, which force exact similarity ties."""
    D = (rng.random((n_users, n_items)) < density).astype(float)
    D[0, :] = 0
    D[:, -1] = 0
    if duplicate and n_items > 3:
        D[:, 2] = D[:, 1]
    if duplicate and n_users > 3:
        D[2, :] = D[1, :]
    if D.sum() == 0:
        D[1, 0] = 1
    return D


def brute_similarity(D, weights=None, scales=None):
    """sim(a, b) = sum_f D_af D_bf w_f / (||a|| ||b||) between rows of a dense binary matrix,
    summed feature by feature in increasing order (like the kernel), diagonal kept.  ``scales``
    ``(q, s)`` replaces ``1 / ||a||`` by ``q_a`` and ``1 / ||b||`` by ``s_b``."""
    n, d = D.shape
    w = np.ones(d) if weights is None else weights
    inv = np.array([1 / np.sqrt(c) if c > 0 else 0.0 for c in D.sum(axis=1)])
    q, s = (inv, inv) if scales is None else scales
    S = np.zeros((n, n))
    for a in range(n):
        for b in range(n):
            acc = 0.0
            for f in range(d):
                if D[a, f] and D[b, f]:
                    acc += w[f]
            S[a, b] = acc * (q[a] * s[b])
    return S


def brute_top_n(scores, popularity, N, excluded):
    """The N best items not in ``excluded``: by score, then popularity, then smaller id."""
    order = sorted((i for i in range(len(scores)) if i not in excluded), key=lambda i: (-scores[i], -popularity[i], i))
    return order[:N]


def assert_recommend_like_brute_force(ids, scores, dense, liked_rows, popularity, N, extra, restrict):
    """``recommend``'s ``(ids, scores)`` against :func:`brute_top_n` of the ``dense`` score rows: the
    same ids in order, bitwise-equal scores, ``-inf`` padding.  Row ``r`` leaves out the items of
    ``liked_rows[r]`` (``None``: nothing liked) and, by ``restrict``, ``extra`` ("filter") or every
    item but ``extra`` ("items")."""
    n_items = dense.shape[1]
    for r in range(dense.shape[0]):
        out = set() if liked_rows is None else set(liked_rows[r].indices)
        out |= (
            set(extra) if restrict == "filter" else set(range(n_items)) - set(extra) if restrict == "items" else set()
        )
        want = brute_top_n(dense[r], popularity, N, out)
        got = [i for i in ids[r] if i >= 0]
        assert got == want
        np.testing.assert_array_equal(scores[r, : len(got)], dense[r, want])
        assert np.all(scores[r, len(got) :] == -np.inf)


def brute_knn(S, k):
    """KNN(i): the <= k others with the largest positive S_ij, ties by smaller id."""
    out = []
    for i in range(S.shape[0]):
        cand = [j for j in range(S.shape[0]) if j != i and S[i, j] > 0]
        cand.sort(key=lambda j: (-S[i, j], j))
        out.append(cand[:k])
    return out


def knn_matrix(knn, n):
    """The n x n 0/1 CSR matrix whose row i marks the ids listed in ``knn[i]``."""
    rows = [i for i, cols in enumerate(knn) for _ in cols]
    cols = [j for c in knn for j in c]
    return sp.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(n, n))


def ktrunc_literal(A, knn):
    """Algorithm 4.1 literally: keep A[i, j] iff j is in KNN(i) (``knn`` lists)."""
    A = np.asarray(A)
    out = np.zeros_like(A)
    for i, cols in enumerate(knn):
        for j in cols:
            out[i, j] = A[i, j]
    return out


def rows_of(S):
    S = sp.csr_matrix(S)
    return [S.indices[S.indptr[i] : S.indptr[i + 1]].tolist() for i in range(S.shape[0])]


def kunn_item_affinity_literal(D):
    """Eq. (4.5): A_ij = i^T W_U j / (||i|| ||j||), W_U = diag(1/sqrt(c(u)))."""
    n_users, n_items = D.shape
    c_user = D.sum(axis=1)
    A = np.zeros((n_items, n_items))
    for i in range(n_items):
        for j in range(n_items):
            norm = np.sqrt(D[:, i].sum()) * np.sqrt(D[:, j].sum())
            if norm > 0:
                A[i, j] = sum(D[u, i] * D[u, j] / np.sqrt(c_user[u]) for u in range(n_users) if c_user[u]) / norm
    return A


def cosine_literal(M):
    """cos between rows of a dense binary matrix (0 for empty rows)."""
    norm = np.sqrt(M.sum(axis=1))
    C = M @ M.T
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nan_to_num(C / np.outer(norm, norm))


def assert_same_evaluation(a, b):
    """Two :class:`~recsys_ltr.metrics.EvaluationResult` agree bit for bit (users, per-user values, means)."""
    assert list(a) == list(b)
    np.testing.assert_array_equal(a.users, b.users)
    for name in a:
        assert np.array_equal(a.per_user[name], b.per_user[name]), name
        assert a[name] == b[name]


class KillOnce:
    """Score function whose first call kills its own process (a worker dying mid-task); the marker
    file records that it happened."""

    def __init__(self, model, marker):
        self.model, self.marker = model, str(marker)

    def __call__(self, users):
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        return self.model.score(users)


def synthetic_split(n_users, n_items, seed):
    """A seeded synthetic feedback matrix and its first per-user holdout split: ``(X, train, val, test)``."""
    from recsys_ltr import split
    from recsys_ltr.datasets import make_synthetic

    X = make_synthetic(n_users=n_users, n_items=n_items, factor_scale=3.0, random_state=seed).matrix
    return (X, *next(split.folds(X, n_folds=1, random_state=0)))


def rewrite_header(src, dst, old, new):
    """Copy the saved model file ``src`` to ``dst`` with ``old`` replaced by ``new`` in its JSON header."""
    with np.load(src) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["header"] = np.array(str(arrays["header"]).replace(old, new))
    np.savez(dst, **arrays)
    return dst


def resave(dst, **arrays):
    """``np.savez`` of a model file's members after an edit, with the header's digests recomputed:
    the edit is then what the loader's own checks must catch (a tool that rewrites files
    consistently, or a forgery: the digests detect corruption, they do not authenticate)."""
    try:
        header = json.loads(str(arrays["header"]))
    except (KeyError, ValueError):  # no header or a broken one: nothing to recompute
        header = None
    if isinstance(header, dict) and isinstance(header.get("digests"), dict):
        header["digests"] = {k: _digest(np.asarray(v)) for k, v in arrays.items() if k != "header"}
        if "header_digest" in header:
            header["header_digest"] = _header_digest(header)
        arrays = {**arrays, "header": np.array(json.dumps(header))}
    np.savez(dst, **arrays)
    return dst


def exported_recommenders() -> set[str]:
    """Class names of every recommender the package exports (:mod:`recsys_ltr.models`,
    :mod:`recsys_ltr.febr`); LightFMWARP only when its optional extra is installed."""
    names = set(recsys_ltr.eval.methods.exported_recommenders())
    return names if importlib.util.find_spec("lightfm") else names - {"LightFMWARP"}


def small_models(n_items, variants=False) -> dict:
    """``{name: make}``: a small, seeded, single-threaded maker of every exported recommender, named
    by its class (a content model's item features over ``n_items`` items); with ``variants`` also
    settings worth a test of their own (EASE's sparse solver, FEBR's fractional holdout).  A new
    model is added here, and every suite that runs each model finds it."""
    one = dict(num_threads=1)

    def stacked(**params):
        bases = [ItemKNN(k=2, **one), Popularity(**one)]
        return FEBR(bases=bases, candidates=5, max_iter=200, eval_every=100, random_state=0, **one, **params)

    def content():
        features = np.random.default_rng(1).random((n_items, 4))
        return ContentItemKNN(affinity=ContentAffinity(k=3).fit(features), k=3, **one)

    models = {
        "Popularity": lambda: Popularity(**one),
        "ItemKNN": lambda: ItemKNN(k=3, **one),
        "UserKNN": lambda: UserKNN(k=3, **one),
        "KUNN": lambda: KUNN(k=3, **one),
        "SLIM": lambda: SLIM(k=3, **one),
        "RP3beta": lambda: RP3beta(k=3, **one),
        "EASE": lambda: EASE(regularization=2.0, **one),
        "GFCF": lambda: GFCF(factors=3, **one),
        "BSPM": lambda: BSPM(factors=3, **one),
        "ChebyCF": lambda: ChebyCF(order=3, factors=3, **one),
        "ALS": lambda: ALS(factors=3, iterations=2, random_state=0, **one),
        "BPR": lambda: BPR(factors=3, iterations=2, random_state=0, **one),
        "ContentItemKNN": content,
        "AffinityFEBR": lambda: AffinityFEBR(
            affinity="cosine", holdout=0.0, validation_fraction=0.0, k=3, max_iter=60, eval_every=60, random_state=0,
            **one,
        ),
        "FEBR": lambda: stacked(holdout=3),  # the fuzz campaign's case: few positives, a 3-fold label holdout
    }  # fmt: skip
    if importlib.util.find_spec("lightfm"):
        models["LightFMWARP"] = lambda: LightFMWARP(factors=3, iterations=2, random_state=0, **one)
    if variants:
        models["EASE-sparse"] = lambda: EASE(regularization=2.0, solver="sparse", k=3, **one)
        models["FEBR-0.5"] = lambda: stacked(holdout=0.5)
    return models
