"""FRML (dissertation ch. 3): the Riemannian step against a dense reference, the score kernels,
retrieval metrics, the estimator on a planted task (sec. 2.4.1), reproducibility and bad input."""

import numpy as np
import pytest
import scipy.sparse as sp
from _helpers import rewrite_header
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.metrics import average_precision_score, roc_auc_score

from recsys_ltr._io import write_estimator_file
from recsys_ltr._validation import check_sparse
from recsys_ltr.metric_learning._riemann import symmetric_gradient_update
from recsys_ltr.metric_learning.frml import (
    FRML,
    _neg_sq_distance,
    _row_differences,
    _step,
    label_relevance,
)
from recsys_ltr.metrics import retrieval_metrics
from recsys_ltr.warp import Minibatch, opt_est

pytestmark = pytest.mark.kernels

# ----------------------------------------------------------------------------- dense references


def dense_retraction(L, G):
    """R_W(P_TW(G)) for W = L Lᵀ, written from Lemmas 3.4-3.5 with d x d matrices."""
    d = L.shape[0]
    L_pinv = np.linalg.pinv(L)
    W, W_pinv = L @ L.T, L_pinv.T @ L_pinv
    P = L @ L_pinv
    Q = np.eye(d) - P
    sym = (G + G.T) / 2
    xi_s = P @ sym @ P
    xi_p = Q @ sym @ P + P @ sym @ Q
    Y = W + xi_s / 2 + xi_p - xi_s @ W_pinv @ xi_s / 8 - xi_p @ W_pinv @ xi_s / 2
    return Y @ W_pinv @ Y.T


def tangent_projection(L, G):
    P = L @ np.linalg.pinv(L)
    sym = (G + G.T) / 2
    return P @ sym @ P + (np.eye(L.shape[0]) - P) @ sym @ P + P @ sym @ (np.eye(L.shape[0]) - P)


def psd_rank_projection(A, m):
    """Orthogonal projection of a symmetric matrix on S+_{d,m}: keep the top m eigenvalues."""
    vals, vecs = np.linalg.eigh((A + A.T) / 2)
    top = np.argsort(vals)[::-1][:m]
    return (vecs[:, top] * np.maximum(vals[top], 0)) @ vecs[:, top].T


def random_step(rng, d, r, scale):
    V = rng.standard_normal((d, r))
    c = scale * rng.standard_normal(r)
    return V * c, V


def planted(n, seed, d_inf=4, noise_dims=32, n_classes=3):
    """Informative block + correlated Gaussian noise (Eq. 2.11, Σ ~ unit-scale Wishart), z-scored."""
    rng = np.random.default_rng(seed)
    y = rng.integers(n_classes, size=n)
    informative = 1.5 * rng.standard_normal((n_classes, d_inf))[y] + rng.standard_normal((n, d_inf))
    A = rng.standard_normal((noise_dims, noise_dims))
    noise = rng.multivariate_normal(np.zeros(noise_dims), A @ A.T, size=n)
    X = np.hstack((informative, noise))
    return (X - X.mean(axis=0)) / X.std(axis=0), y


@pytest.fixture(scope="module")
def task():
    X, y = planted(400, seed=0)
    return X[:250], y[:250], X[250:], y[250:]


@pytest.fixture(scope="module")
def fitted(task):
    Xtr, ytr, _, _ = task
    return FRML(n_components=4, learning_rate=0.5, max_iter=1500, random_state=0, num_threads=1).fit(Xtr, ytr)


# ----------------------------------------------------------------------------- Alg. 3.3


@settings(max_examples=40, deadline=None)
@given(
    d=st.integers(2, 24),
    m_frac=st.floats(0.05, 1.0),
    r=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_factored_update_equals_dense_retraction(d, m_frac, r, seed):
    m = max(1, int(round(m_frac * d)))
    rng = np.random.default_rng(seed)
    L = np.linalg.qr(rng.standard_normal((d, m)))[0] * rng.uniform(0.5, 2.0, size=m)  # well conditioned
    U, V = random_step(rng, d, r, scale=0.05)
    M = symmetric_gradient_update(L, U, V)
    assert M.shape == (d, m)
    np.testing.assert_allclose(M @ M.T, dense_retraction(L, U @ V.T), rtol=0, atol=1e-10)


def test_factored_update_hand_case():
    # d = m = 1: W = 4, G = g; the tangent space is everything (ξ_p = 0, ξ_s = g) and
    # R_W(g) = (W + g/2 - g²/(8W))² / W.
    L = np.array([[2.0]])
    g = -0.3
    M = symmetric_gradient_update(L, np.array([[g]]), np.array([[1.0]]))
    assert (M @ M.T)[0, 0] == pytest.approx((4 + g / 2 - g * g / 32) ** 2 / 4, abs=1e-14)


def test_dense_reference_is_a_second_order_retraction():
    """Checks the reference itself: centred, R_W(tξ) = W + tξ + O(t²), and within O(t³) of the
    orthogonal projection of W + tξ on S+_{d,m} (another second-order retraction)."""
    rng = np.random.default_rng(3)
    d, m = 7, 3
    L = rng.standard_normal((d, m))
    W = L @ L.T
    xi = tangent_projection(L, rng.standard_normal((d, d)))
    np.testing.assert_allclose(dense_retraction(L, np.zeros((d, d))), W, atol=1e-12)
    first, second = [], []
    for t in (1e-1, 5e-2, 2.5e-2):
        R = dense_retraction(L, t * xi)
        first.append(np.linalg.norm(R - W - t * xi))
        second.append(np.linalg.norm(R - psd_rank_projection(W + t * xi, m)))
        assert np.linalg.matrix_rank(R, tol=1e-8) == m
    assert 3.0 < first[0] / first[1] < 5.0 and 3.0 < first[1] / first[2] < 5.0  # O(t²)
    assert second[0] / second[1] > 6.0 and second[1] / second[2] > 6.0  # O(t³)


def test_update_of_rank_deficient_factor_raises():
    L = np.ones((4, 2))
    with pytest.raises(FloatingPointError, match="rank deficient"):
        symmetric_gradient_update(L, np.ones((4, 1)), np.ones((4, 1)))


def test_alg34_step_matches_dense_gradient_step():
    """One minibatch step = R_W(P_TW(-η ∇)) with ∇ the mean of Eq. (3.24) over the slots."""
    rng = np.random.default_rng(5)
    n, d, m, eta, lam = 12, 6, 3, 0.05, 0.1
    Xd = rng.standard_normal((n, d))
    L = rng.standard_normal((d, m))
    batch = Minibatch(
        queries=np.array([0, 3, 7]),
        positives=np.array([1, 4, 2]),
        negatives=np.array([5, -1, 9]),
        weights=np.array([0.7, 0.0, 0.25]),
        draws=np.array([1, 4, 2]),
    )
    grad = np.zeros((d, d))
    for q, p, neg, w in zip(batch.queries, batch.positives, batch.negatives, batch.weights):
        vp = Xd[q] - Xd[p]
        grad += lam * np.outer(vp, vp)
        if neg >= 0:
            vn = Xd[q] - Xd[neg]
            grad += w * (np.outer(vp, vp) - np.outer(vn, vn))
    grad /= 3
    M = _step(L, batch, check_sparse(Xd, allow_empty=True, nonnegative=False), eta, lam)
    np.testing.assert_allclose(M @ M.T, dense_retraction(L, -eta * grad), atol=1e-12)


# ----------------------------------------------------------------------------- kernels


def test_score_and_difference_kernels_match_dense():
    rng = np.random.default_rng(1)
    Xd = sp.random(15, 9, density=0.4, random_state=2, format="csr").toarray()
    Xd[3] = Xd[4]  # identical rows: zero distance
    X = check_sparse(Xd, allow_empty=True, nonnegative=False)
    L = rng.standard_normal((9, 4))
    state = (X.indptr, X.indices, X.data, L)
    for q in range(15):
        for x in range(15):
            expected = -np.sum(((Xd[q] - Xd[x]) @ L) ** 2)
            assert _neg_sq_distance(state, q, x) == pytest.approx(expected, abs=1e-12)
    a, b = np.array([0, 3, 14]), np.array([5, 4, 14])
    np.testing.assert_allclose(_row_differences(X.indptr, X.indices, X.data, a, b, 9), (Xd[a] - Xd[b]).T)


# ----------------------------------------------------------------------------- retrieval metrics


def test_retrieval_metrics_match_sklearn():
    rng = np.random.default_rng(2)
    Zq, Zdb = rng.standard_normal((20, 3)), rng.standard_normal((30, 3))
    dense = rng.random((20, 30)) < 0.2
    dense[0] = False  # a query without relevant point is left out
    R = sp.csr_matrix(dense)
    out = retrieval_metrics(Zq, Zdb, R, ks=(1, 10))
    D = ((Zq[:, None, :] - Zdb[None, :, :]) ** 2).sum(axis=2)
    Rd = R.toarray().astype(bool)
    rows = [i for i in range(20) if Rd[i].any()]
    top = np.argsort(D, axis=1)
    assert out["n_queries"] == len(rows)
    assert out["MAP"] == pytest.approx(np.mean([average_precision_score(Rd[i], -D[i]) for i in rows]))
    assert out["AUC"] == pytest.approx(np.mean([roc_auc_score(Rd[i], -D[i]) for i in rows]))
    assert out["P@1"] == pytest.approx(np.mean([Rd[i, top[i, 0]] for i in rows]))
    assert out["P@10"] == pytest.approx(np.mean([Rd[i, top[i, :10]].mean() for i in rows]))


def test_retrieval_metrics_exclude_self_and_labels():
    Z = np.array([[0.0], [0.1], [5.0], [5.2]])
    R = label_relevance(np.array([0, 0, 1, 1]))
    assert R.toarray().diagonal().sum() == 0
    out = retrieval_metrics(Z, Z, R, ks=(1,), exclude_self=True)
    assert out["MAP"] == 1.0 and out["P@1"] == 1.0 and out["AUC"] == 1.0
    # a relevance matrix that lists each query as its own answer: the self entry is ignored, not a
    # relevant point outside the ranking (MAP 1.5 and P@1 2.0 before)
    with_self = sp.csr_matrix(R.toarray() + np.eye(4))
    assert retrieval_metrics(Z, Z, with_self, ks=(1,), exclude_self=True) == out


# ----------------------------------------------------------------------------- estimator


def test_planted_task_suppresses_noise(task, fitted):
    Xtr, ytr, Xte, yte = task
    R = label_relevance(yte, ytr)
    euclid = retrieval_metrics(Xte, Xtr, R)
    learned = retrieval_metrics(fitted.transform(Xte), fitted.embedding_, R)
    assert learned["MAP"] > euclid["MAP"] + 0.25
    assert learned["P@10"] > euclid["P@10"] + 0.15
    # the informative block (4 of 36 coordinates, 11% of the trace under Euclidean) gains weight
    W = fitted.get_mahalanobis_matrix()
    assert np.trace(W[:4, :4]) > 0.33 * np.trace(W)
    assert fitted.score(Xte, yte) == pytest.approx(learned["MAP"])


def test_metric_stays_psd_of_rank_m(task):
    Xtr, ytr, _, _ = task
    m = 3
    for max_iter in (0, 1, 30, 400):
        f = FRML(n_components=m, learning_rate=0.5, max_iter=max_iter, random_state=1, num_threads=1).fit(Xtr, ytr)
        vals = np.linalg.eigvalsh(f.get_mahalanobis_matrix())[::-1]
        assert vals[-1] > -1e-10 * vals[0]
        assert vals[m - 1] > 1e-6 * vals[0]  # rank exactly m
        assert np.all(np.abs(vals[m:]) < 1e-10 * vals[0])


def test_metric_learn_conventions(task, fitted):
    Xtr, _, Xte, _ = task
    L = fitted.components_
    assert L.shape == (4, Xtr.shape[1])
    np.testing.assert_allclose(fitted.transform(Xte), Xte @ L.T)
    np.testing.assert_allclose(fitted.embedding_, fitted.transform(Xtr))
    W = fitted.get_mahalanobis_matrix()
    pairs = np.stack((Xte[:5], Xtr[:5]), axis=1)
    diff = Xte[:5] - Xtr[:5]
    np.testing.assert_allclose(fitted.pair_distance(pairs) ** 2, np.einsum("id,de,ie->i", diff, W, diff))
    assert fitted.n_iter_ == 1500 and fitted.fit_time_ > 0


def test_kneighbors_match_brute_force(task, fitted):
    Xtr, _, Xte, _ = task
    Ztr, Zte = fitted.transform(Xtr), fitted.transform(Xte)
    dist, ind = fitted.kneighbors(Xte, 7)
    D = np.sqrt(((Zte[:, None] - Ztr[None]) ** 2).sum(axis=2))
    np.testing.assert_array_equal(ind, np.argsort(D, axis=1, kind="stable")[:, :7])
    np.testing.assert_allclose(dist, np.sort(D, axis=1)[:, :7], atol=1e-9)
    ind_self = fitted.kneighbors(n_neighbors=3, return_distance=False)
    assert not np.any(ind_self == np.arange(len(Xtr))[:, None])
    D_self = np.sqrt(((Ztr[:, None] - Ztr[None]) ** 2).sum(axis=2)) + np.diag(np.full(len(Xtr), np.inf))
    np.testing.assert_array_equal(ind_self, np.argsort(D_self, axis=1, kind="stable")[:, :3])


def test_reproducible_and_thread_independent(task):
    Xtr, ytr, _, _ = task
    kw = dict(n_components=3, learning_rate=0.5, max_iter=200, batch_size=40)
    a = FRML(random_state=7, num_threads=1, **kw).fit(Xtr, ytr).components_
    b = FRML(random_state=7, num_threads=2, **kw).fit(Xtr, ytr).components_
    c = FRML(random_state=8, num_threads=1, **kw).fit(Xtr, ytr).components_
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_blas_runs_on_one_thread_during_sgd_and_is_restored(task, monkeypatch):
    from threadpoolctl import threadpool_info

    import recsys_ltr.metric_learning.frml as frml_module

    Xtr, ytr, _, _ = task
    blas = lambda: [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]  # noqa: E731
    before, seen = blas(), []
    step = frml_module._step
    monkeypatch.setattr(frml_module, "_step", lambda *a: (seen.append(blas()), step(*a))[1])
    FRML(n_components=3, max_iter=3, random_state=0).fit(Xtr, ytr)
    assert seen and all(threads == [1] * len(before) for threads in seen)
    assert blas() == before


def test_supervision_forms_agree(task):
    Xtr, ytr, _, _ = task
    kw = dict(n_components=3, max_iter=100, random_state=0, num_threads=1)
    by_labels = FRML(**kw).fit(Xtr, ytr).components_
    R = label_relevance(ytr)
    np.testing.assert_array_equal(FRML(**kw).fit(Xtr, relevance=R).components_, by_labels)
    np.testing.assert_array_equal(FRML(**kw).fit(sp.csr_matrix(Xtr), relevance=R).components_, by_labels)
    # adjacency is symmetrised: one direction of each edge gives the same relevance
    np.testing.assert_array_equal(FRML(**kw).fit(Xtr, adjacency=sp.triu(R)).components_, by_labels)


def test_asymmetric_relevance_and_explicit_irrelevant():
    X, _ = planted(60, seed=4)
    n = len(X)
    R = sp.csr_matrix((np.ones(n), (np.arange(n), (np.arange(n) + 1) % n)), shape=(n, n))  # q -> q+1 only
    irr = sp.csr_matrix((np.ones(n), (np.arange(n), (np.arange(n) + 7) % n)), shape=(n, n))
    f = FRML(n_components=2, max_iter=50, random_state=0, num_threads=1).fit(X, relevance=R, irrelevant=irr)
    assert np.all(np.isfinite(f.components_))
    with pytest.raises(ValueError, match="share"):
        FRML(max_iter=5).fit(X, relevance=R, irrelevant=R)


def test_frml_auc_draws_once_and_other_losses(task):
    Xtr, ytr, _, _ = task
    auc = FRML(n_components=3, beta=1, max_iter=40, batch_size=5, random_state=0, num_threads=1).fit(Xtr, ytr)
    assert auc.n_draws_ == 40 * 5  # β = 1: exactly one negative draw per slot
    pak = FRML(n_components=3, loss="pak", k=5, kappa=0.1, max_iter=40, random_state=0).fit(Xtr, ytr)
    theta = opt_est(np.linspace(0, 1, 251) ** 0.5, 5, 250)  # an estimator table for β = 5
    est = FRML(n_components=3, loss=theta, beta=5, max_iter=40, random_state=0).fit(Xtr, ytr)
    assert np.all(np.isfinite(pak.components_)) and np.all(np.isfinite(est.components_))


def test_early_stopping_keeps_best(task):
    Xtr, ytr, _, _ = task
    f = FRML(
        n_components=3, learning_rate=0.5, max_iter=3000, early_stopping=True, eval_every=100,
        n_iter_no_change=3, random_state=0, num_threads=1,
    ).fit(Xtr, ytr)  # fmt: skip
    scores = f.validation_scores_
    assert len(scores) >= 1
    assert f.n_iter_ == 100 * (int(np.argmax(scores)) + 1)
    assert f.embedding_.shape[0] == len(Xtr)  # the database is every training point


def test_sklearn_clone_and_params():
    f = FRML(n_components=5, kappa=0.1, regularization=0.2)
    g = clone(f).set_params(learning_rate=0.3)
    assert g.get_params()["kappa"] == 0.1 and g.learning_rate == 0.3 and f.learning_rate == 0.5
    assert not hasattr(g, "components_")


@pytest.mark.parametrize(
    "params, fit_kwargs, error, match",
    [
        ({}, {"y": None}, ValueError, "exactly one of y, relevance, adjacency"),
        ({}, {"relevance": sp.eye(20)}, ValueError, "exactly one of y, relevance, adjacency"),
        ({}, {"y": None, "relevance": sp.eye(20)}, ValueError, "no relevant pair"),
        ({}, {"y": np.zeros(3)}, ValueError, "labels but X has"),
        ({}, {"y": None, "relevance": sp.eye(3)}, ValueError, r"must be \(20, 20\)"),
        ({"n_components": 50}, {}, ValueError, "n_components must be <="),
        ({"regularization": -1.0}, {}, ValueError, r"regularization must be a finite number in \[0.0"),
        ({"learning_rate": 0.0}, {}, ValueError, r"learning_rate must be a finite number in \(0.0"),
        ({"loss": "hinge"}, {}, ValueError, "loss must be one of"),
        ({"k": 3}, {}, ValueError, "k is only used"),
        ({"beta": 2, "kappa": 0.5}, {}, ValueError, "at most one"),
        ({"init": np.ones((2, 2))}, {}, ValueError, "init must have shape"),
        ({"init": "zeros"}, {}, ValueError, "init must be"),
        ({"batch_size": 0}, {}, ValueError, "batch_size"),
        ({"early_stopping": True, "validation_fraction": 1.5}, {}, ValueError, "validation_fraction"),
    ],
)
def test_bad_parameters(params, fit_kwargs, error, match):
    X, y = planted(20, seed=0, noise_dims=4)
    kwargs = {"y": y, **fit_kwargs}
    with pytest.raises(error, match=match):
        FRML(max_iter=2, **params).fit(X, **kwargs)


def test_bad_data(fitted):
    X, y = planted(20, seed=0, noise_dims=4)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        FRML(max_iter=2).fit(bad, y)
    with pytest.raises(ValueError, match="Expected 2D array"):
        FRML(max_iter=2).fit(X[0], y)
    with pytest.raises(ValueError, match="0 sample"):
        FRML(max_iter=2).fit(np.zeros((0, 3)), np.zeros(0))
    with pytest.raises(ValueError, match="no relevant pair"):
        FRML(max_iter=2).fit(X, np.arange(20))  # every class a singleton: no relevant pair
    with pytest.raises(AttributeError, match="not fitted"):
        FRML().transform(X)
    with pytest.raises(ValueError, match="features"):
        fitted.transform(X)
    with pytest.raises(ValueError, match="n_neighbors must be <="):
        fitted.kneighbors(n_neighbors=fitted.embedding_.shape[0])
    with pytest.raises(ValueError, match="pairs must have shape"):
        fitted.pair_distance(np.zeros((3, 36)))


def test_save_load_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 6))
    y = np.arange(40) % 3
    model = FRML(n_components=2, max_iter=20, random_state=0, num_threads=1).fit(X, y)
    model.save(tmp_path / "frml")
    back = FRML.load(tmp_path / "frml.npz")
    assert back.get_params() == model.get_params()
    np.testing.assert_array_equal(back.transform(X), model.transform(X))
    np.testing.assert_array_equal(back.kneighbors(X[:5], 3)[1], model.kneighbors(X[:5], 3)[1])
    assert back.score(X[:10], y[:10]) == model.score(X[:10], y[:10])
    unlabelled = FRML(n_components=2, max_iter=5, random_state=0).fit(X, relevance=label_relevance(y))
    unlabelled.save(tmp_path / "u")
    assert FRML.load(tmp_path / "u.npz").train_labels_ is None
    with pytest.raises(ValueError, match="must be numeric to be saved"):
        FRML(n_components=2, max_iter=5, random_state=0).fit(X, np.array(list("abc" * 14))[:40]).save(tmp_path / "s")
    write_estimator_file(tmp_path / "bad", "FRML", {}, {"components_": np.ones((2, 6)), "embedding_": np.ones((40, 3))})
    with pytest.raises(ValueError, match="does not fit components_"):
        FRML.load(tmp_path / "bad.npz")


def test_load_validates_parameters(tmp_path):
    X = np.random.default_rng(1).standard_normal((30, 5))
    FRML(n_components=2, max_iter=5, random_state=0).fit(X, np.arange(30) % 3).save(tmp_path / "m")
    bad = rewrite_header(tmp_path / "m.npz", tmp_path / "bad.npz", '"n_components": 2', '"n_components": 9')
    with pytest.raises(ValueError, match="n_components must be <= 5"):
        FRML.load(bad)


def test_default_step_backtracks_instead_of_diverging(monkeypatch):
    """scikit-learn's sparse check data (40 x 3, 80% zeros, 4 classes): at the default step the
    factor lost rank after a few hundred steps with some LAPACK builds (FloatingPointError); a step
    that would do that is retried with the step halved, and the fit ends finite with the smaller step
    recorded (planted: the first two tries of a step are refused, whatever the build)."""
    rng = np.random.RandomState(0)
    X = rng.uniform(size=(40, 3))
    X[X < 0.8] = 0
    y = (4 * rng.uniform(size=40)).astype(int)
    model = FRML(max_iter=1000, random_state=0, num_threads=1).fit(sp.csr_matrix(X), y)
    assert np.all(np.isfinite(model.components_)) and np.linalg.matrix_rank(model.components_) == 3
    import recsys_ltr.metric_learning.frml as frml_module

    refused = iter([False, False])
    full_rank = frml_module._full_rank
    monkeypatch.setattr(frml_module, "_full_rank", lambda L: next(refused, True) and full_rank(L))
    model = FRML(max_iter=1000, random_state=0, num_threads=1).fit(sp.csr_matrix(X), y)
    assert np.all(np.isfinite(model.components_)) and model.learning_rate_ <= model.learning_rate / 4  # kept halved
