"""GF-CF (Shen et al. 2021): the two filters against a dense brute force, the SVD's subspace against
numpy's, fold-in, similar items, files and bad input."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr.models import GFCF, Recommender


def feedback(seed, m=30, n=25, p=0.25):
    rng = np.random.default_rng(seed)
    D = (rng.random((m, n)) < p).astype(float)
    D[0, :] = 0.0  # an empty user
    D[:, 1] = 0.0  # an item nobody has
    D[1, 1] = 1.0 if seed % 2 else 0.0
    D[2, 0] = D[3, 2] = 1.0
    return sp.csr_matrix(D)


def dense_filter(X, model, alpha):
    """``R^T R + alpha D^-1/2 V^T V D^1/2`` from dense arrays of the training ``X`` and the model's ``V``."""
    D = X.toarray()
    du, di = D.sum(axis=1), D.sum(axis=0)
    iu = np.divide(1, np.sqrt(du), out=np.zeros_like(du), where=du > 0)
    ii = np.divide(1, np.sqrt(di), out=np.zeros_like(di), where=di > 0)
    R = iu[:, None] * D * ii[None, :]
    V = model.components_
    return R.T @ R + alpha * (ii[:, None] * (V.T @ V) * np.sqrt(di)[None, :])


def dense_scores(X, model, alpha):
    return X.toarray() @ dense_filter(X, model, alpha)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 8), st.sampled_from([0.0, 0.3, 2.0]))
def test_scores_are_the_two_filters(seed, k, alpha):
    X = feedback(seed)
    model = GFCF(factors=k, alpha=alpha, random_state=seed, num_threads=1).fit(X)
    users = np.arange(X.shape[0])
    np.testing.assert_allclose(model.score(users), dense_scores(X, model, alpha), atol=1e-10)
    np.testing.assert_allclose(model.components_ @ model.components_.T, np.eye(k), atol=1e-8)  # orthonormal rows


def test_the_low_pass_subspace_is_the_leading_singular_one():
    rng = np.random.default_rng(0)
    X = sp.csr_matrix((rng.random((120, 60)) < np.linspace(0.05, 0.6, 60)[None, :]).astype(float))
    model = GFCF(factors=5, iterations=30, random_state=0).fit(X)
    D = X.toarray()
    du, di = D.sum(axis=1), D.sum(axis=0)
    R = D / np.sqrt(np.maximum(du, 1))[:, None] / np.sqrt(np.maximum(di, 1))[None, :]
    _, s, Vt = np.linalg.svd(R)
    np.testing.assert_allclose(model.singular_values_, s[:5], rtol=1e-6)
    np.testing.assert_allclose(model.components_.T @ model.components_, Vt[:5].T @ Vt[:5], atol=1e-5)


def test_new_users_similar_items_and_files(tmp_path):
    X = feedback(1)
    model = GFCF(factors=4, random_state=0).fit(X)
    rows = X[[4, 7]]
    ids, _ = model.recommend(np.array([100, 101]), user_items=rows, N=5, recalculate_user=True)  # new users fold in
    np.testing.assert_array_equal(ids, model.recommend(np.array([4, 7]), N=5)[0])
    full = dense_filter(X, model, 0.3)
    sim, _ = model.similar_items(3, N=4)
    expected = [i for i in np.argsort(-full[3], kind="stable") if i != 3][:4]
    assert sim.tolist() == expected
    loaded = Recommender.load(model.save(tmp_path / "gfcf"))
    np.testing.assert_array_equal(loaded.score(np.arange(10)), model.score(np.arange(10)))


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(factors=0), ValueError, "factors"),
        (dict(factors=26), ValueError, "exceeds min"),
        (dict(alpha=-0.1), ValueError, "alpha"),
        (dict(iterations=-1), ValueError, "iterations"),
        (dict(random_state="x"), TypeError, "random_state"),
    ],
)
def test_bad_parameters(params, error, match):
    with pytest.raises(error, match=match):
        GFCF(**params).fit(feedback(0))
