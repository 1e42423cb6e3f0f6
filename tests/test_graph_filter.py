"""GF-CF (Shen et al. 2021): the two filters against a dense brute force, the SVD's subspace against
numpy's, fold-in, similar items, files and bad input.  BSPM (Choi et al. 2023): against a dense
re-enactment of the authors' ``getUsersRating`` (torchdiffeq's fixed-grid Euler and 3/8-rule RK4
steps), GF-CF as BSPM without sharpening.  ChebyCF (Kim et al. 2025): its coefficients against
numpy's Chebyshev interpolation, its scores against the interpolant applied through a dense
eigendecomposition, the linear plateau as GF-CF's linear filter."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr.models import BSPM, GFCF, ChebyCF, Recommender
from recsys_ltr.models.graph_filter import GRAPH_BYTES


def feedback(seed, m=30, n=25, p=0.25):
    rng = np.random.default_rng(seed)
    D = (rng.random((m, n)) < p).astype(float)
    D[0, :] = 0.0  # an empty user
    D[:, 1] = 0.0  # an item nobody has
    D[1, 1] = 1.0 if seed % 2 else 0.0
    D[2, 0] = D[3, 2] = 1.0
    return sp.csr_matrix(D)


def assert_scores_close(actual, expected):
    """Scores through ``P`` (stored in float32: a relative 6e-8 per entry) equal to a float64
    reference up to that rounding, on the scale of the largest score (sums cancel)."""
    np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6 * max(np.abs(expected).max(), 1e-12))


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
    assert_scores_close(model.score(users), dense_scores(X, model, alpha))
    np.testing.assert_allclose(model.components_ @ model.components_.T, np.eye(k), atol=1e-8)  # orthonormal rows


@pytest.mark.kernels
@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.05, 0.25, 0.6]))
def test_the_graph_is_formed_within_its_budget_and_scores_as_the_two_products(seed, p):
    X = feedback(seed, p=p)
    entries = (X.T @ X).nnz  # the item pairs some user shares, each item with itself
    from recsys_ltr.models.graph_filter import _graph_row_entries

    T = X.T.tocsr()
    counts = _graph_row_entries(T.indptr, T.indices, X.indptr, X.indices, 3)
    np.testing.assert_array_equal(counts, np.diff((X.T @ X).tocsr().indptr))
    formed = GFCF(factors=3, random_state=0, max_graph_bytes=8 * entries).fit(X)
    two = GFCF(factors=3, random_state=0, max_graph_bytes=8 * entries - 1).fit(X)
    assert formed.graph_.nnz == entries and two.graph_ is None and formed.graph_.dtype == np.float32
    exact = (formed.normalized_.T @ formed.normalized_).toarray()  # float64; P is its float32 rounding
    np.testing.assert_allclose(formed.graph_.toarray(), exact, rtol=2.0**-24, atol=0)
    users = np.arange(X.shape[0])
    assert_scores_close(formed.score(users), two.score(users))
    assert_scores_close(formed.score(users), dense_scores(X, formed, 0.3))
    bspm = [BSPM(factors=3, random_state=0, max_graph_bytes=b).fit(X) for b in (8 * entries, 0)]
    assert_scores_close(bspm[0].score(users), bspm[1].score(users))


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
        (dict(max_graph_bytes=-1), ValueError, "max_graph_bytes"),
        (dict(max_graph_bytes=1.5), TypeError, "max_graph_bytes"),
    ],
)
def test_bad_parameters(params, error, match):
    with pytest.raises(error, match=match):
        GFCF(**params).fit(feedback(0))


def fixed_grid(f, y, T, K, method):
    """The points at ``t_1 .. t_K`` of ``dy/dt = f(y)`` on ``linspace(0, T, K + 1)``: torchdiffeq's
    ``euler`` and ``rk4`` (its 3/8 rule, ``rk4_alt_step_func``)."""
    dt, points = T / K, []
    for _ in range(K):
        if method == "euler":
            y = y + dt * f(y)
        else:
            k1 = f(y)
            k2 = f(y + dt * k1 / 3)
            k3 = f(y + dt * (k2 - k1 / 3))
            k4 = f(y + dt * (k1 - k2 + k3))
            y = y + (k1 + 3 * (k2 + k3) + k4) * dt / 8
        points.append(y)
    return points


def bspm_reference(X, model, p, rows=None):
    """The authors' ``getUsersRating`` of ``rows`` (default: ``X``'s) on dense arrays (their
    branches, with ``idl`` Euler over ``T_idl = 1``, one step)."""
    D = X.toarray()
    du, di = D.sum(axis=1), D.sum(axis=0)
    iu = np.divide(1, np.sqrt(du), out=np.zeros_like(du), where=du > 0)
    ii = np.divide(1, np.sqrt(di), out=np.zeros_like(di), where=di > 0)
    R = iu[:, None] * D * ii[None, :]
    P, V = R.T @ R, model.components_
    low = ii[:, None] * (V.T @ V) * np.sqrt(di)[None, :]
    x = D if rows is None else rows
    idl = fixed_grid(lambda r: r @ low - r, x, 1.0, 1, "euler")
    blurred = fixed_grid(lambda r: r @ P - r, x, p["blur_time"], p["blur_steps"], "euler")
    off = p["sharpen_steps"] == 0
    if not off:
        y0 = p["beta"] * idl[-1] + blurred[-1] if p["final_sharpening"] else blurred[-1]
        sharpened = fixed_grid(lambda r: -(r @ P), y0, p["sharpen_time"], p["sharpen_steps"], p["solver"])
    if p["point_combination"]:
        U2 = np.mean(blurred + ([] if off else sharpened), axis=0)
    else:
        U2 = blurred[-1] if off else sharpened[-1]
    return U2 if p["final_sharpening"] and not off else U2 + p["beta"] * idl[-1]


@pytest.mark.kernels
@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from([0.0, 0.2, 1.0]),
    st.sampled_from([0.5, 1.0, 1.7]),
    st.integers(1, 3),
    st.sampled_from([0.0, 1.2, 2.5]),
    st.integers(0, 3),
    st.sampled_from(["rk4", "euler"]),
    st.booleans(),
    st.booleans(),
)
def test_bspm_is_the_authors_blurring_and_sharpening(seed, beta, tb, kb, ts, ks, solver, final, combine):
    X = feedback(seed)
    p = dict(
        beta=beta,
        blur_time=tb,
        blur_steps=kb,
        sharpen_time=ts,
        sharpen_steps=ks,
        solver=solver,
        final_sharpening=final,
        point_combination=combine,
    )
    model = BSPM(factors=4, random_state=seed, num_threads=1, **p).fit(X)
    users = np.arange(X.shape[0])
    assert_scores_close(model.score(users), bspm_reference(X, model, p))


def test_bspm_without_sharpening_is_gfcf_and_sharpening_changes_the_ranking():
    X = feedback(3)
    users = np.arange(X.shape[0])
    gfcf = GFCF(factors=5, alpha=0.2, random_state=0).fit(X).score(users)
    np.testing.assert_allclose(BSPM(factors=5, sharpen_steps=0).fit(X).score(users), gfcf, atol=1e-12)
    sharp = BSPM(factors=5).fit(X).score(users)
    assert not np.array_equal(np.argsort(-sharp, axis=1), np.argsort(-gfcf, axis=1))


def test_bspm_new_users_similar_items_and_files(tmp_path):
    X = feedback(1)
    model = BSPM(factors=4, sharpen_steps=2, point_combination=True).fit(X)
    rows = X[[4, 7]]
    ids, _ = model.recommend(np.array([100, 101]), user_items=rows, N=5, recalculate_user=True)
    np.testing.assert_array_equal(ids, model.recommend(np.array([4, 7]), N=5)[0])
    row = bspm_reference(X, model, model.get_params(), rows=np.eye(X.shape[1])[[3]])[0]
    expected = [i for i in np.argsort(-row, kind="stable") if i != 3][:4]
    assert model.similar_items(3, N=4)[0].tolist() == expected
    loaded = Recommender.load(model.save(tmp_path / "bspm"))
    assert isinstance(loaded, BSPM) and loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(loaded.score(np.arange(10)), model.score(np.arange(10)))


@pytest.mark.parametrize(
    "params, error, match",
    [
        (dict(factors=26), ValueError, "exceeds min"),
        (dict(beta=-0.1), ValueError, "beta"),
        (dict(blur_time=0.0), ValueError, "blur_time"),
        (dict(blur_steps=0), ValueError, "blur_steps"),
        (dict(sharpen_time=-1.0), ValueError, "sharpen_time"),
        (dict(sharpen_steps=-1), ValueError, "sharpen_steps"),
        (dict(solver="dopri5"), ValueError, "solver must be one of"),
        (dict(final_sharpening=1), TypeError, "final_sharpening must be a bool"),
        (dict(point_combination="yes"), TypeError, "point_combination must be a bool"),
    ],
)
def test_bspm_bad_parameters(params, error, match):
    with pytest.raises(error, match=match):
        BSPM(**{"factors": 4, **params}).fit(feedback(0))


# ---------------------------------------------------------------- finite in, finite out (n1201/graph/BSPM)
@pytest.mark.parametrize(
    "model, name",
    [
        (BSPM(factors=4, beta=1e308), "beta=1e\\+308"),
        (BSPM(factors=4, sharpen_time=1e300), "sharpen_time=1e\\+300"),
        (BSPM(factors=4, sharpen_time=1e300, solver="euler"), "sharpen_time=1e\\+300"),
        (BSPM(factors=4, blur_time=1e300), "blur_time=1e\\+300"),
        (GFCF(factors=4, alpha=1e308), "alpha=1e\\+308"),
        (ChebyCF(factors=4, alpha=1e308), "alpha=1e\\+308"),
        (ChebyCF(factors=4, beta=1e3), "beta=1000.0"),
    ],
)
def test_settings_that_would_overflow_are_refused_before_the_fit(model, name, monkeypatch):
    def no_svd(*args, **kwargs):
        raise AssertionError("the SVD ran: the bound was not decided before the computation")

    monkeypatch.setattr("recsys_ltr.models.graph_filter.leading_right_singular", no_svd)
    with pytest.raises(ValueError, match=f"scores could reach e\\^.*beyond float64's range: {name} grows them"):
        model.fit(feedback(0))


@settings(max_examples=40, deadline=None)
@given(
    st.floats(0.0, 1e6),
    st.floats(0.0, 800.0),
    st.integers(1, 4),
    st.floats(0.1, 50.0),
    st.sampled_from(["rk4", "euler"]),
    st.booleans(),
)
def test_accepted_settings_score_finite(beta, ts, ks, tb, solver, final):
    p = dict(beta=beta, sharpen_time=ts, sharpen_steps=ks, blur_time=tb, solver=solver, final_sharpening=final)
    try:
        model = BSPM(factors=4, num_threads=1, **p).fit(feedback(2))
    except ValueError as exc:
        assert "beyond float64's range" in str(exc)
        return
    assert np.all(np.isfinite(model.score(np.arange(30))))


def test_the_bound_admits_every_setting_of_the_papers():
    X = feedback(4)
    for p in [dict(), dict(sharpen_time=300.0), dict(beta=1e6), dict(blur_steps=10, blur_time=5.0)]:
        assert np.all(np.isfinite(BSPM(factors=4, **p).fit(X).score(np.arange(30))))


def _with_normalized(header, arrays):
    for part in ("data", "indices", "indptr"):
        arrays[f"normalized_.{part}"] = arrays[f"user_items_.{part}"] * (1e99 if part == "data" else 1)
    header["state"]["normalized_"] = header["state"]["user_items_"]


@pytest.mark.parametrize(
    "edit, match",
    [  # rehashed files (n1201/files3/BSPM/rehashed): loaded and scored NaN before
        (lambda h, a: h["params"].update(beta=1e308), "beta=1e\\+308 grows them"),
        (lambda h, a: h["params"].update(sharpen_time=1e300), "sharpen_time=1e\\+300 grows them"),
        (lambda h, a: a.update(components_=a["components_"] * 1e160), "at most 1e\\+100"),
        (_with_normalized, "expected names among"),  # R is derived from user_items_, never read from a file
    ],
)
def test_files_that_would_score_non_finite_are_refused(tmp_path, edit, match):
    import json

    from _helpers import resave

    path = BSPM(factors=4).fit(feedback(1)).save(tmp_path / "bspm")
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    header = json.loads(str(arrays["header"]))
    edit(header, arrays)
    arrays["header"] = np.array(json.dumps(header))
    with pytest.raises(ValueError, match=match):
        Recommender.load(resave(tmp_path / "edited.npz", **arrays))


def test_a_file_within_the_bound_scores_finite(tmp_path):
    from _helpers import resave

    path = BSPM(factors=4).fit(feedback(1)).save(tmp_path / "bspm")
    with np.load(path, allow_pickle=False) as f:
        arrays = {k: f[k] for k in f.files}
    arrays["components_"] = arrays["components_"] * 1e99  # within the state's 1e100 bound
    loaded = Recommender.load(resave(tmp_path / "edited.npz", **arrays))
    assert np.all(np.isfinite(loaded.score(np.arange(30))))


def test_a_graph_past_its_budget_is_said_with_the_bytes_it_would_take(caplog):
    """When ``P`` is not formed, a warning names the bytes it would take and the parameter to raise."""
    import logging

    X = feedback(0)
    entries = (X.T @ X).nnz
    with caplog.at_level(logging.WARNING, logger="recsys_ltr.models.graph_filter"):
        GFCF(factors=3, random_state=0, max_graph_bytes=8 * entries).fit(X)
        assert not caplog.records
        GFCF(factors=3, random_state=0, max_graph_bytes=8 * entries - 1).fit(X)
    (record,) = caplog.records
    assert record.levelname == "WARNING" and f"({entries} entries)" in record.getMessage()
    assert "raise max_graph_bytes" in record.getMessage()


# ---------------------------------------------------------------- ChebyCF (Kim et al. 2025)
def plateau(phi):
    return lambda x: 0.5 - 0.5 * np.sign(x) * np.abs(x) ** phi


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 16), st.sampled_from([0.3, 1.0, 1.5, 4.0]))
def test_chebycf_coefficients_interpolate_the_plateau_at_the_chebyshev_nodes(order, phi):
    from numpy.polynomial import chebyshev as C

    from recsys_ltr.models.graph_filter import chebyshev_coefficients

    c = chebyshev_coefficients(order, phi)
    np.testing.assert_allclose(c, C.chebinterpolate(plateau(phi), order), atol=1e-14)
    nodes = C.chebpts1(order + 1)  # the roots of T_{K+1}
    np.testing.assert_allclose(C.chebval(nodes, c), plateau(phi)(nodes), atol=1e-12)


def chebycf_filter(X, model, p):
    """``D^-b (h_K(I - 2P) + alpha V^T V) D^b`` on dense arrays, ``h_K`` numpy's Chebyshev
    interpolant of the plateau applied through the eigendecomposition of ``I - 2P``."""
    from numpy.polynomial import chebyshev as C

    D = X.toarray()
    du, di = D.sum(axis=1), D.sum(axis=0)
    iu = np.divide(1, np.sqrt(du), out=np.zeros_like(du), where=du > 0)
    ii = np.divide(1, np.sqrt(di), out=np.zeros_like(di), where=di > 0)
    R = iu[:, None] * D * ii[None, :]
    lam, U = np.linalg.eigh(np.eye(D.shape[1]) - 2.0 * R.T @ R)
    H = (U * C.chebval(lam, C.chebinterpolate(plateau(p["flatness"]), p["order"]))) @ U.T
    V = model.components_
    pre = np.divide(1.0, di ** p["beta"], out=np.zeros_like(di), where=di > 0)
    post = np.where(di > 0, di ** p["beta"], 0.0)
    return pre[:, None] * (H + p["alpha"] * V.T @ V) * post[None, :]


@pytest.mark.kernels
@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(0, 6),
    st.sampled_from([0.5, 1.0, 1.5, 3.0]),
    st.sampled_from([0.0, 0.2, 1.0]),
    st.sampled_from([0.0, 0.4, 1.0]),
    st.booleans(),
)
def test_chebycf_is_the_chebyshev_interpolant_of_its_spectral_filter(seed, order, phi, alpha, beta, formed):
    X = feedback(seed)
    p = dict(order=order, flatness=phi, alpha=alpha, beta=beta)
    graph = GRAPH_BYTES if formed else 0
    model = ChebyCF(factors=4, random_state=seed, num_threads=1, max_graph_bytes=graph, **p).fit(X)
    assert_scores_close(model.score(np.arange(X.shape[0])), X.toarray() @ chebycf_filter(X, model, p))


def test_chebycf_at_flatness_one_is_the_linear_filter_and_flatter_changes_the_ranking():
    X = feedback(5)
    users = np.arange(X.shape[0])
    linear = GFCF(factors=4, alpha=0.0).fit(X).score(users)
    for order in (1, 2, 5):  # h(x) = (1 - x) / 2 is a polynomial of degree 1: every order interpolates it exactly
        scores = ChebyCF(order=order, flatness=1.0, factors=4, alpha=0.0, beta=0.0).fit(X).score(users)
        assert_scores_close(scores, linear)
    flat = ChebyCF(flatness=3.0, factors=4, alpha=0.0, beta=0.0).fit(X).score(users)
    assert not np.array_equal(np.argsort(-flat, axis=1), np.argsort(-linear, axis=1))


def test_chebycf_degree_normalisation_is_invariant_to_the_degrees_scale():
    """The row is divided by ``d^beta`` and the scores multiplied by it: scaling every degree by a
    constant changes nothing, so a large ``beta`` over equal degrees scores as ``beta = 0``."""
    X = sp.csr_matrix(np.kron(np.eye(3), np.ones((4, 3))))  # every item has degree 4
    users = np.arange(X.shape[0])
    plain = ChebyCF(factors=2, beta=0.0).fit(X).score(users)
    np.testing.assert_allclose(ChebyCF(factors=2, beta=300.0).fit(X).score(users), plain, atol=1e-12)


@pytest.mark.parametrize(
    "params, match",
    [
        (dict(order=-1), "order"),
        (dict(flatness=0.0), "flatness"),
        (dict(flatness=float("nan")), "flatness"),
        (dict(alpha=-0.1), "alpha"),
        (dict(beta=-1.0), "beta"),
        (dict(factors=31), "factors=31 exceeds"),
    ],
)
def test_chebycf_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        ChebyCF(**{"factors": 4, **params}).fit(feedback(0))


def test_chebycf_new_users_similar_items_and_files(tmp_path):
    X = feedback(6)
    model = ChebyCF(factors=4, random_state=0).fit(X)
    rows = X[[4, 7]]
    ids, _ = model.recommend(np.array([100, 101]), user_items=rows, N=5, recalculate_user=True)  # new users fold in
    np.testing.assert_array_equal(ids, model.recommend(np.array([4, 7]), N=5)[0])
    full = chebycf_filter(X, model, dict(order=8, flatness=1.5, alpha=0.2, beta=0.4))
    sim, _ = model.similar_items(3, N=4)
    assert sim.tolist() == [i for i in np.argsort(-full[3], kind="stable") if i != 3][:4]
    loaded = Recommender.load(model.save(tmp_path / "chebycf"))
    assert isinstance(loaded, ChebyCF) and loaded.get_params() == model.get_params()
    np.testing.assert_array_equal(loaded.score(np.arange(10)), model.score(np.arange(10)))
