"""The β-WSS engine: distributions (Monte Carlo, chi-square with fixed seeds), weights,
reproducibility, validation.  All tests share one tiny "table" model so the kernels compile once."""

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import chisquare

from recsys_ltr.warp import (
    DOT_ROWS,
    WarpSampler,
    dot_score,
    dot_update,
    expected_truncated_loss,
    nml_loss,
    ns_distribution,
    opt_est,
    warp_estimator,
)

pytestmark = pytest.mark.kernels


@numba.njit(cache=True)
def table_score(state, q, i):
    return state[0][q, i]


@numba.njit(cache=True)
def table_count(state, q, pos, neg, w, lr):
    """Records every update: pair counts of positives and negatives, total weight."""
    state[1][q, pos] += 1.0
    state[2][q, neg] += 1.0
    state[3][0] += w
    state[0][q, neg] -= lr  # a real (if silly) model step, so that reproducibility is meaningful


#: the table model indexes every state array by query (scores[q, i])
ROWS = {0: "query"}


def table_state(scores):
    scores = np.array(scores, dtype=np.float64)
    return (scores, np.zeros_like(scores), np.zeros_like(scores), np.zeros(1))


def assert_chisquare(observed, expected, p_min=1e-3):
    """Chi-square goodness of fit; cells expecting fewer than 5 draws are pooled into one."""
    observed, expected = np.asarray(observed, float).ravel(), np.asarray(expected, float).ravel()
    assert observed[expected == 0].sum() == 0, "draws outside the support"
    expected = expected * observed.sum() / expected.sum()
    small = expected < 5
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    obs, exp = obs[exp > 0], exp[exp > 0]
    if obs.size > 1:
        res = chisquare(obs, exp)
        assert res.pvalue > p_min, res


def random_relevance(n_q=12, n_items=20, seed=0, empty_rows=(3,)):
    rng = np.random.default_rng(seed)
    R = (rng.random((n_q, n_items)) < 0.25).astype(float)
    R[:, 0] = 1.0  # every row non-empty ...
    R[list(empty_rows)] = 0.0  # ... except these
    return sp.csr_matrix(R)


def one_query_problem(n_irr, n_v):
    """Query 0, positive item 0 with score 0; items 1..n_v violate (score 0 > 0 - 1), the rest
    score -5."""
    R = sp.csr_matrix(([1.0], ([0], [0])), shape=(1, n_irr + 1))
    scores = np.full((1, n_irr + 1), -5.0)
    scores[0, : n_v + 1] = 0.0
    return R, table_state(scores)


@pytest.mark.parametrize("n_v, beta", [(0, 6), (1, 30), (4, 10), (12, 40), (40, 40)])
@pytest.mark.parametrize("positive_draws", ["reject", "count"])
def test_ns_distribution_and_mean_weight(n_v, beta, positive_draws):
    n_irr = 40
    R, state = one_query_problem(n_irr, n_v)
    s = WarpSampler(R, beta=beta, loss="reciprocal", positive_draws=positive_draws, random_state=n_v)
    pool = s.n_irr[0]
    assert pool == (n_irr if positive_draws == "reject" else n_irr + 1)
    b = s.minibatch(state, table_score, 20_000, require_violation=False, rows=ROWS)
    found = b.negatives >= 0
    assert np.all(b.draws <= beta) and np.all((b.negatives[found] >= 1) & (b.negatives[found] <= n_v))
    n_s = np.where(found, b.draws, beta + 1)
    assert_chisquare(np.bincount(n_s, minlength=beta + 2)[1:], ns_distribution(n_v, beta, pool))
    # E[L̂^(β)(n_s)] = L̃^(β)(n_v) (Def. 3.6 / Eq. 3.11), within 4 standard errors
    L = nml_loss("reciprocal", pool)
    expected = expected_truncated_loss(warp_estimator(L, pool), beta, pool)[n_v]
    se = b.weights.std() / np.sqrt(b.weights.size) + 1e-12
    assert abs(b.weights.mean() - expected) <= 4 * se
    np.testing.assert_array_equal(b.weights[found], L[pool // b.draws[found]])


def test_estimator_table_weights():
    n_irr, beta = 30, 8
    R, state = one_query_problem(n_irr, 3)
    theta = opt_est(nml_loss("pak", n_irr, k=5), beta, n_irr)
    s = WarpSampler(R, beta=beta, estimator=theta, random_state=1)
    b = s.minibatch(state, table_score, 20_000, require_violation=False, rows=ROWS)
    found = b.negatives >= 0
    np.testing.assert_array_equal(b.weights[found], theta[b.draws[found] - 1])
    expected = expected_truncated_loss(theta, beta, n_irr)[3]
    assert abs(b.weights.mean() - expected) <= 4 * b.weights.std() / np.sqrt(b.weights.size)


@pytest.mark.parametrize(
    "mode",
    [dict(), dict(exclude_self=True), dict(positive_draws="count"), dict(exclude_self=True, positive_draws="count")],
)
def test_uniform_queries_positives_negatives_complement(mode):
    R = random_relevance()
    n_q, n_items = R.shape
    state = table_state(np.zeros(R.shape))  # every draw violates: the first negative is taken
    s = WarpSampler(R, random_state=7, **mode)
    assert 3 not in s.queries and s.queries.size == n_q - 1
    stats = s.sgd(state, table_score, table_count, 60_000, 0.0, rows=ROWS)
    assert stats.samples == 60_000 and stats.violators == 60_000
    pos, neg = state[1], state[2]
    dense = R.toarray() > 0
    eligible = np.zeros(n_q, bool)
    eligible[s.queries] = True
    # queries uniform, positives uniform within the row
    assert_chisquare(pos.sum(1)[eligible], np.ones(eligible.sum()))
    assert_chisquare(pos[eligible], dense[eligible] / dense[eligible].sum(1, keepdims=True))
    # negatives uniform over the irrelevant set (never a positive, never the query itself)
    irr = ~dense
    if mode.get("exclude_self"):
        irr[np.arange(n_q), np.arange(n_q)] = False
    assert_chisquare(neg[eligible], (irr / irr.sum(1, keepdims=True))[eligible])
    if mode.get("positive_draws") == "count":  # drawn positives are counted as draws
        assert stats.draws > stats.samples
        pool = n_items - mode.get("exclude_self", False)
        p_hit = (irr.sum(1) / pool)[eligible].mean()
        assert stats.samples / stats.draws == pytest.approx(p_hit, rel=0.03)
    else:
        assert stats.draws == stats.samples


def test_explicit_irrelevant_sets():
    rng = np.random.default_rng(3)
    lab = rng.integers(-1, 3, size=(10, 25))  # 1, 2: relevant, 0: irrelevant, -1: not a candidate
    lab[:, 0], lab[:, 1] = 1, 0
    lab[4, lab[4] == 0] = -1  # query 4 has no irrelevant document: never drawn
    R, Q = sp.csr_matrix((lab > 0).astype(float)), sp.csr_matrix((lab == 0).astype(float))
    state = table_state(np.zeros(lab.shape))
    s = WarpSampler(R, Q, loss="lgmml", normalize=False, random_state=0)
    assert 4 not in s.queries
    np.testing.assert_array_equal(s.n_irr, (lab == 0).sum(1))
    s.sgd(state, table_score, table_count, 40_000, 0.0, rows=ROWS)
    neg = state[2][s.queries]
    irr = (lab == 0)[s.queries]
    assert_chisquare(neg, irr / irr.sum(1, keepdims=True))
    # every first draw violates, so n_s = 1 and each update weighs L[N_q] (un-normalised lgmml)
    L = nml_loss("lgmml", int(s.n_irr[s.queries].max()), normalize=False)
    per_query = state[1].sum(1)
    assert state[3][0] == pytest.approx(float(per_query @ L[s.n_irr]))


def test_beta_resolution():
    R = random_relevance()
    n_irr = R.shape[1] - np.diff(R.indptr)
    np.testing.assert_array_equal(WarpSampler(R, beta=5).beta_q, np.minimum(5, n_irr))
    np.testing.assert_array_equal(WarpSampler(R, gamma=4).beta_q, n_irr // 4)  # Theorem 3.8
    np.testing.assert_array_equal(WarpSampler(R, kappa=0.25).beta_q, np.ceil(0.25 * n_irr))
    np.testing.assert_array_equal(WarpSampler(R).beta_q, n_irr)
    one = sp.csr_matrix(np.eye(1, 31))  # N_irr = 30: 0.1 * 30 must give 3, not 4
    assert WarpSampler(one, kappa=0.1).beta_q[0] == 3
    s = WarpSampler(R, gamma=15)  # queries with N_q < 15 get beta 0 and are never drawn
    assert np.all(s.beta_q[s.queries] >= 1) and s.queries.size < R.shape[0] - 1


def test_min_beta_gives_alg_4_2_at_least_one_draw():
    """``min_beta=1`` with gamma: beta_q = max(1, floor(N_q / gamma)), every query drawable."""
    R = random_relevance()
    n_irr = R.shape[1] - np.diff(R.indptr)
    s = WarpSampler(R, gamma=15, min_beta=1, random_state=0)
    np.testing.assert_array_equal(s.beta_q, np.minimum(np.maximum(1, n_irr // 15), n_irr))
    np.testing.assert_array_equal(s.queries, np.flatnonzero((np.diff(R.indptr) > 0) & (n_irr > 0)))
    np.testing.assert_array_equal(WarpSampler(R, gamma=4, min_beta=0).beta_q, n_irr // 4)  # default
    np.testing.assert_array_equal(WarpSampler(R, beta=2, min_beta=5).beta_q, np.minimum(5, n_irr))
    state = table_state(np.zeros(R.shape))  # no margin met: every first draw violates
    stats = s.sgd(state, table_score, table_count, 300, 0.0, rows=ROWS)
    assert stats.violators == stats.draws == 300
    with pytest.raises(ValueError, match="min_beta"):
        WarpSampler(R, gamma=2, min_beta=-1)


def test_gamma_weights_equal_rank_gamma_estimator():
    """Theorem 3.8 through the engine: gamma-truncated sampling never weights n_s > N/γ."""
    n_irr, gamma = 40, 6
    R, state = one_query_problem(n_irr, 2)
    s = WarpSampler(R, gamma=gamma, random_state=2)
    b = s.minibatch(state, table_score, 5000, require_violation=False, rows=ROWS)
    assert b.draws.max() <= n_irr // gamma
    assert np.all(np.floor(n_irr / b.draws[b.negatives >= 0]) >= gamma)


def test_reproducible_one_thread_and_minibatch_thread_independent():
    R = random_relevance(seed=1)
    rng = np.random.default_rng(0)
    scores = rng.normal(size=R.shape)

    def run(seed):
        state = table_state(scores)
        WarpSampler(R, beta=5, random_state=seed, num_threads=1).sgd(
            state, table_score, table_count, 5000, 0.1, rows=ROWS
        )
        return state

    a, b, c = run(11), run(11), run(12)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[1], c[1])

    batches = []
    for threads in (1, 2):
        s = WarpSampler(R, beta=5, random_state=3, num_threads=threads)
        batches.append([s.minibatch(table_state(scores), table_score, 64, rows=ROWS) for _ in range(2)])
    for b1, b2 in zip(*batches):
        for x, y in zip(b1, b2):
            np.testing.assert_array_equal(x, y)
    assert not np.array_equal(batches[0][0].queries, batches[0][1].queries)  # streams advance


def test_minibatch_require_violation_and_max_tries():
    R = random_relevance()
    s = WarpSampler(R, beta=3, random_state=0)
    b = s.minibatch(table_state(np.zeros(R.shape)), table_score, 50, rows=ROWS)
    assert np.all(b.negatives >= 0) and np.all(b.draws == 1)
    hopeless = np.where(R.toarray() > 0, 10.0, 0.0)  # no violators anywhere
    b = s.minibatch(table_state(hopeless), table_score, 20, max_tries=4, rows=ROWS)
    assert np.all(b.negatives == -1) and np.all(b.weights == 0)
    np.testing.assert_array_equal(b.draws, 4 * s.beta_q[b.queries])  # last try's query
    assert np.all(R[b.queries, b.positives] == 1)


def test_dot_product_model_learns_and_reproduces():
    """The reference dot-product model: planted groups; held-out AUC rises from chance."""
    rng = np.random.default_rng(0)
    n_u, n_i = 120, 90
    same = (np.arange(n_u)[:, None] % 3) == (np.arange(n_i)[None, :] % 3)
    liked = same & (rng.random((n_u, n_i)) < 0.5)
    train = liked & (rng.random((n_u, n_i)) < 0.7)
    train[np.arange(n_u), np.arange(n_u) % n_i] = True
    test = liked & ~train

    def fit(seed, n_samples):
        init = np.random.default_rng(seed)
        U, V = 0.1 * init.standard_normal((n_u, 8)), 0.1 * init.standard_normal((n_i, 8))
        s = WarpSampler(sp.csr_matrix(train.astype(float)), beta=20, random_state=seed)
        s.sgd((U, V), dot_score, dot_update, n_samples, 0.05, rows=DOT_ROWS)
        return U, V

    def auc(U, V):
        S = U @ V.T
        vals = [np.mean(S[u, test[u]][:, None] > S[u, ~liked[u]][None, :]) for u in range(n_u) if test[u].any()]
        return np.mean(vals)

    U0, V0 = fit(1, 0)
    U1, V1 = fit(1, 60_000)
    assert auc(U0, V0) < 0.65 and auc(U1, V1) > 0.8
    U2, V2 = fit(1, 60_000)
    np.testing.assert_array_equal(U1, U2)
    np.testing.assert_array_equal(V1, V2)


def _bad(**kw):
    R = random_relevance()
    args = dict(relevant=R)
    args.update(kw)
    return lambda: WarpSampler(**args)


@pytest.mark.parametrize(
    "make, exc",
    [
        (_bad(beta=0), ValueError),
        (_bad(kappa=0.0), ValueError),
        (_bad(kappa=1.5), ValueError),
        (_bad(gamma=0), ValueError),
        (_bad(beta=3, gamma=2), ValueError),
        (_bad(beta=2.5), TypeError),
        (_bad(relevant=sp.csr_matrix((4, 5))), ValueError),  # no relevant item at all
        (_bad(relevant=sp.csr_matrix(np.ones((3, 4)))), ValueError),  # no irrelevant item
        (_bad(positive_draws="skip"), ValueError),
        (_bad(loss="ndcg"), ValueError),
        (_bad(loss=np.ones(5)), ValueError),  # shorter than max N_q + 1
        (_bad(loss=np.full(50, np.nan)), ValueError),
        (_bad(loss="pak"), ValueError),  # k missing
        (_bad(beta=5, estimator=np.ones(3)), ValueError),  # shorter than beta
        (_bad(estimator=np.ones(30), loss="uniform"), ValueError),
        (_bad(margin=-1.0), ValueError),
        (_bad(irrelevant=sp.csr_matrix((3, 3))), ValueError),  # shape mismatch
        (_bad(irrelevant=random_relevance()), ValueError),  # overlaps relevant
        (_bad(relevant=random_relevance(n_q=30, n_items=20), exclude_self=True), ValueError),
        (_bad(random_state="seed"), TypeError),
        (_bad(num_threads=-1), ValueError),
        (_bad(compile_mode="jit"), ValueError),
    ],
)
def test_bad_construction(make, exc):
    with pytest.raises(exc):
        make()


@pytest.mark.parametrize("bad_index", [99, -1])
def test_out_of_range_indices(bad_index):
    bad = random_relevance().copy()
    bad.indices[0] = bad_index
    with pytest.raises(ValueError, match="malformed"):
        WarpSampler(bad)


def test_unsorted_and_duplicate_indices_are_canonicalised():
    R = random_relevance()
    shuffled = R.copy()
    row = slice(shuffled.indptr[0], shuffled.indptr[1])
    shuffled.indices[row] = shuffled.indices[row][::-1].copy()
    shuffled.has_sorted_indices = False
    a = WarpSampler(R, random_state=0).minibatch(table_state(np.zeros(R.shape)), table_score, 8, rows=ROWS)
    b = WarpSampler(shuffled, random_state=0).minibatch(table_state(np.zeros(R.shape)), table_score, 8, rows=ROWS)
    np.testing.assert_array_equal(a.positives, b.positives)


def test_bad_calls():
    R = random_relevance()
    s = WarpSampler(R, random_state=0)
    state = table_state(np.zeros(R.shape))
    with pytest.raises(TypeError, match="score_fn"):
        s.sgd(state, lambda st, q, i: 0.0, table_count, 10, 0.1, rows=ROWS)
    with pytest.raises(TypeError, match="update_fn"):
        s.sgd(state, table_score, None, 10, 0.1, rows=ROWS)
    with pytest.raises(TypeError, match="tuple"):
        s.sgd([state[0]], table_score, table_count, 10, 0.1, rows=ROWS)
    with pytest.raises(ValueError):
        s.sgd(state, table_score, table_count, -1, 0.1, rows=ROWS)
    with pytest.raises(ValueError):
        s.sgd(state, table_score, table_count, 10, np.nan, rows=ROWS)
    with pytest.raises(ValueError):
        s.minibatch(state, table_score, 0, rows=ROWS)
    with pytest.raises(ValueError):
        s.minibatch(state, table_score, 5, max_tries=0, rows=ROWS)


def test_inline_mode_matches_pointer_mode():
    R = random_relevance(seed=2)
    scores = np.random.default_rng(1).normal(size=R.shape)
    states = []
    for mode in ("pointer", "inline"):
        state = table_state(scores)
        WarpSampler(R, beta=4, random_state=5, compile_mode=mode).sgd(
            state, table_score, table_count, 3000, 0.1, rows=ROWS
        )
        states.append(state)
    for x, y in zip(*states):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("nan_at", ["positive", "negative"])
def test_nan_scores_raise_instead_of_silently_skipping(nan_at):
    R = random_relevance()
    scores = np.zeros(R.shape)
    if nan_at == "positive":
        scores[R.toarray() > 0] = np.nan
    else:
        scores[R.toarray() == 0] = np.nan
    s = WarpSampler(R, beta=3, random_state=0)
    with pytest.raises(FloatingPointError, match="NaN"):
        s.sgd(table_state(scores), table_score, table_count, 50, 0.1, rows=ROWS)
    with pytest.raises(FloatingPointError, match="NaN"):
        s.minibatch(table_state(scores), table_score, 4, rows=ROWS)


def test_rows_check_guards_the_model_state():
    R = random_relevance()
    s = WarpSampler(R, beta=5, random_state=0)
    small = (np.zeros((R.shape[0] - 1, 4)), np.zeros((R.shape[1], 4)))
    with pytest.raises(ValueError, match=r"model_state\[0\] has 11 rows but the sampler has 12 querys|query"):
        s.sgd(small, dot_score, dot_update, 10, 0.1, rows=DOT_ROWS)
    with pytest.raises(ValueError, match=r"model_state\[1\]"):
        s.minibatch((np.zeros((R.shape[0], 4)), np.zeros((3, 4))), dot_score, 4, rows=DOT_ROWS)
    ok = (np.zeros((R.shape[0], 4)), np.zeros((R.shape[1], 4)))
    assert s.sgd(ok, dot_score, dot_update, 10, 0.1, rows=DOT_ROWS).samples == 10
