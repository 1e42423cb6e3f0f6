"""The fuzz suite: hostile input at every public entry point must end in a clear ``TypeError`` /
``ValueError`` naming the problem, or, for a valid input, in the answer its canonical form gets.

Strategies, oracles and the batch runner are in ``tests/_fuzz.py`` (shared with
``benchmarks/fuzz_campaign.py``, which runs the same generators at scale).  Inputs that used to
corrupt memory (malformed CSC/COO/BSR/LIL/DIA/DOK matrices, hand-built ``KnnIndex`` arrays, a
too-small ``WarpSampler`` state, damaged indices in model files) run in a subprocess, which must
exit cleanly: a signal or an abort fails the test.  Examples are derandomised (fixed seeds, no
example database) so CI is deterministic.
"""

import os
import subprocess
import sys
import textwrap

import _fuzz
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: fewer examples under NUMBA_BOUNDSCHECK=1 (CI's bounds-check rerun): every kernel is recompiled
BOUNDSCHECK = os.environ.get("NUMBA_BOUNDSCHECK") == "1"


def fuzz(examples):
    return settings(
        max_examples=max(2, examples // 4) if BOUNDSCHECK else examples,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


def check(family, entry, case, directory=None):
    outcome = _fuzz.run_record({"family": family, "entry": entry, "case": case}, directory)
    assert outcome.category in _fuzz.GOOD, f"{family} / {entry}: {outcome.category}: {outcome.detail}\ncase: {case}"


SPARSE = sorted(_fuzz.cached("sparse_entries", _fuzz.sparse_entries))


# ----------------------------------------------------------------------------- in-process families
@pytest.mark.kernels
@pytest.mark.parametrize("entry", SPARSE)
@fuzz(8)
@given(data=st.data())
def test_hostile_matrices(entry, data):
    check("sparse", entry, data.draw(_fuzz.families()["sparse"][0](entry, crash=False)))


@pytest.mark.kernels
@fuzz(150)
@given(entry=st.sampled_from(sorted(_fuzz.cached("id_entries", _fuzz.id_entries))), case=_fuzz.id_cases())
def test_hostile_ids(entry, case):
    check("ids", entry, case)


@pytest.mark.kernels
@fuzz(250)
@given(case=_fuzz.param_cases())
def test_hostile_parameters(case):
    check("params", case["target"], case)


@pytest.mark.kernels
@fuzz(60)
@given(case=_fuzz.file_cases(crash=False))
def test_hostile_model_files(tmp_path_factory, case):
    check("files", case["model"], case, str(tmp_path_factory.getbasetemp()))


@pytest.mark.kernels
@fuzz(120)
@given(data=st.data())
def test_hostile_arrays(data):
    """Labels, scores, qids, features, score blocks, classes, ids and weights given as lists, ints,
    strings, complex, NaN/inf, negative, 2-D, ragged or one element short."""
    entry = data.draw(st.sampled_from(sorted(_fuzz.cached("array_targets", _fuzz.array_targets))))
    check("arrays", entry, data.draw(_fuzz.array_cases(entry)))


@fuzz(80)
@given(case=_fuzz.letor_cases())
def test_hostile_letor_files(tmp_path_factory, case):
    check("letor", "read_svmlight_ltr", case, str(tmp_path_factory.getbasetemp()))


@fuzz(15)
@given(case=_fuzz.cli_cases())
def test_hostile_command_lines(tmp_path_factory, case):
    check("cli", "python -m recsys_ltr.eval", case, str(tmp_path_factory.getbasetemp()))


@pytest.mark.kernels
@fuzz(30)
@given(case=_fuzz.febr_cases())
def test_hostile_stacked_febr_configurations(case):
    """Bases lists (empty, one, a tuple, one object twice, fitted on X or on another matrix, a FEBR),
    holdout fractions / folds / 0, candidates and label_exclude_top extremes, users with 1-2
    positives, scorers and LightGBM settings."""
    check("febr", case["kind"], case)


@pytest.mark.kernels
@fuzz(20)
@given(entry=st.sampled_from(_fuzz.EXECUTOR_ENTRIES), case=_fuzz.executor_cases())
def test_hostile_executor_arguments(entry, case):
    check("executors", entry, case)


@pytest.mark.kernels
@pytest.mark.parametrize("entry", _fuzz.VALUE_ENTRIES)
@fuzz(25)
@given(data=st.data())
def test_hostile_values_give_finite_answers_or_name_the_problem(entry, data):
    """Cut dates in years 1435-9999 of data in ns / us / s / days, DataFrame column roles, counts and
    parameters of the weighting helpers up to 1e308, GF-CF / BSPM settings up to 1e308: a clear
    error naming the part, column or parameter, or finite answers equal to a brute force."""
    check("values", entry, data.draw(_fuzz.value_cases(entry)))


@fuzz(25)
@given(case=_fuzz.cache_cases())
def test_damaged_evaluation_cache_files_are_recomputed(tmp_path_factory, case):
    check("cache", "UnitCache.load", case, str(tmp_path_factory.getbasetemp()))


# ----------------------------------------------------------------------------- crash-prone, in a subprocess
def _draw(strategy, n):
    """``n`` derandomised examples of ``strategy`` (drawn here, run in the worker)."""
    out = []

    @fuzz(n)
    @given(strategy)
    def collect(case):
        out.append(case)

    collect()
    return out


@pytest.mark.kernels
def test_crash_prone_inputs_in_a_subprocess(tmp_path):
    """Malformed non-CSR matrices into every matrix entry point, hand-built KnnIndex arrays, too-small
    or non-finite WarpSampler states and damaged indices in model files: one worker process runs
    them all; a crash (signal, abort) or hang is reported for the case that caused it."""
    families = _fuzz.families()
    records = [
        {"family": "sparse", "entry": entry, "case": case}
        for entry in SPARSE
        for case in _draw(families["sparse"][0](entry, crash=True), 3)
    ]
    records += [{"family": "knn_index", "entry": "KnnIndex", "case": c} for c in _draw(_fuzz.knn_index_cases(), 40)]
    records += [{"family": "warp", "entry": "WarpSampler.state", "case": c} for c in _draw(_fuzz.warp_cases(), 30)]
    records += [{"family": "files", "entry": c["model"], "case": c} for c in _draw(_fuzz.file_cases(crash=True), 30)]
    outcomes = _fuzz.run_batch_subprocess(records, str(tmp_path))
    bad = [(o, r) for o, r in zip(outcomes, records) if o.category not in _fuzz.GOOD]
    assert not bad, f"{len(bad)} of {len(records)} cases failed, first: {bad[0]}"


def test_batch_runner_reports_crashes_and_hangs(tmp_path):
    records = [
        {"family": "knn_index", "entry": "KnnIndex", "case": {"defect": "none", "val": 0}},
        {"family": "selftest", "entry": "abort", "case": {}},
        {"family": "knn_index", "entry": "KnnIndex", "case": {"defect": "index_high", "val": 3}},
    ]
    outcomes = _fuzz.run_batch_subprocess(records, str(tmp_path))
    assert [o.category for o in outcomes] == ["right", "crash", "clear"]
    hang = _fuzz.run_batch_subprocess([{"family": "selftest", "entry": "hang", "case": {}}], str(tmp_path), timeout=15)
    assert hang[0].category == "timeout"


# ----------------------------------------------------------------------------- the crashes, one process each
def run_script(code):
    """Run ``code`` in a fresh interpreter; returns the completed process (never raises)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([_fuzz.ROOT, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)


@pytest.fixture
def clean_error():
    """Run a script that must end in an uncaught ``exception`` (exit code 1), never in a signal."""

    def run(code, exception="ValueError", match=""):
        proc = run_script(code)
        assert proc.returncode == 1, f"exit code {proc.returncode} (negative: killed by a signal)\n{proc.stderr}"
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith(f"{exception}:") or f".{exception}:" in last, proc.stderr
        assert match in last, last

    return run


CSC_ROW_60 = """
    import numpy as np, scipy.sparse as sp
    X = sp.csc_matrix((np.ones(3), np.array([0, 60, 2]), np.array([0, 1, 2, 3] + [3] * 37)), shape=(60, 40))
"""


@pytest.mark.kernels
@pytest.mark.parametrize(
    "call",
    [
        "from recsys_ltr._validation import check_feedback; check_feedback(X)",
        "from recsys_ltr.models import ItemKNN; ItemKNN(k=2).fit(X)",
        "from recsys_ltr import split; split.holdout(X)",
        "from recsys_ltr.metric_learning import FRML; FRML(max_iter=2).fit(X, y=np.arange(60) % 2)",
    ],
)
def test_csc_row_index_out_of_range_is_a_value_error(clean_error, call):
    clean_error(CSC_ROW_60 + "    " + call, match="row index out of range")


@pytest.mark.kernels
@pytest.mark.parametrize("index", [10**6, -3])
def test_hand_built_affinity_is_refused_on_construction(clean_error, index):
    clean_error(
        f"""
        import numpy as np, scipy.sparse as sp
        from recsys_ltr.models import ContentItemKNN
        from recsys_ltr.neighbors import Affinity
        M = sp.csr_matrix((np.ones(2), np.array([{index}, 1]), np.array([0, 1, 2, 2])), shape=(3, 3))
        ContentItemKNN(affinity=Affinity(M, 2), k=1).fit(np.eye(3))
        """,
        match="out of range",
    )


def test_from_sparse_column_out_of_range_and_decreasing_indptr(clean_error):
    prefix = """
        import numpy as np, scipy.sparse as sp
        from recsys_ltr import Interactions
        X = sp.csr_matrix(np.eye(3))
    """
    clean_error(prefix + "    X.indices[0] = 3; Interactions.from_sparse(X)", match="column index out of range")
    clean_error(prefix + "    X.indptr = X.indptr[::-1].copy(); Interactions.from_sparse(X)", match="indptr")


@pytest.mark.kernels
def test_too_small_sampler_state_and_hand_built_knn_index(clean_error):
    clean_error(
        """
        import numpy as np, scipy.sparse as sp
        from recsys_ltr.warp import DOT_ROWS, WarpSampler, dot_score, dot_update
        s = WarpSampler(sp.csr_matrix(np.eye(5)), random_state=0)
        s.sgd((np.ones((2, 3)), np.ones((5, 3))), dot_score, dot_update, 10, 0.1, rows=DOT_ROWS)
        """,
        match="model_state[0] has 2 rows",
    )
    clean_error(
        """
        import numpy as np, scipy.sparse as sp
        from recsys_ltr.neighbors import KnnIndex, knn_query
        index = KnnIndex(np.array([0, 1, 2]), np.array([0, 10**6]), np.ones(3), np.ones(2), 3, 2)
        """,
        match="row index out of range",
    )


@pytest.mark.kernels
def test_rows_touching_every_candidate():
    """Dense rows make the kernels' branch-free appends write their extra slot (an out-of-bounds
    write that only NUMBA_BOUNDSCHECK=1 shows when the slot is missing)."""
    from recsys_ltr.febr import AffinityFEBR
    from recsys_ltr.neighbors import cosine_knn

    ones = np.ones((3, 3))
    np.testing.assert_allclose(cosine_knn(ones, 2).toarray(), 1 - np.eye(3))
    X = np.vstack([ones, [1.0, 0.0, 0.0]])  # the last user leaves items to sample as negatives
    febr = AffinityFEBR(**_fuzz.PAPER, k=2, side="both", max_iter=10, eval_every=10, random_state=0, num_threads=1)
    scores = febr.fit(X).score([0, 1])
    assert scores.shape == (2, 3) and np.all(np.isfinite(scores))


# ----------------------------------------------------------------------------- regressions of what the suite found
def test_shape_of_integral_type_only():
    from recsys_ltr._validation import check_feedback

    X = sp.csr_matrix(np.eye(3))
    X._shape = (3.5, 3.0)  # was truncated to (3, 3)
    with pytest.raises(TypeError, match="dimensions must be integers"):
        check_feedback(X)
    X._shape = (-1, 3)
    with pytest.raises(ValueError, match="negative dimension"):
        check_feedback(X)


def test_dok_and_lil_stored_keys_and_values_are_checked():
    from recsys_ltr._validation import check_sparse

    D = sp.dok_matrix((3, 3))
    D._dict[(0, 1.5)] = 1.0  # was read as (0, 1)
    with pytest.raises(ValueError, match="integer pairs"):
        check_sparse(D)
    for M in (sp.dok_matrix((3, 3)), sp.lil_matrix((3, 3))):
        if M.format == "dok":
            M._dict[(0, 0)] = "1"  # was read as 1.0
        else:
            M.rows[0], M.data[0] = [0], ["1"]
        with pytest.raises(TypeError, match="must be numeric"):
            check_sparse(M)


def test_coo_data_longer_than_its_coordinates():
    from recsys_ltr._validation import check_sparse

    X = sp.coo_array(np.eye(3))
    X.data = np.ones(5)  # was read as its first 3 values
    with pytest.raises(ValueError, match="3 coordinates but data has shape"):
        check_sparse(X)


@pytest.mark.parametrize("X", [[[1.0, 2.0], [3.0]], [[1.0], [2.0, 3.0]]])
def test_ragged_nested_lists_name_the_argument(X):
    from recsys_ltr._validation import check_dense, check_feedback

    with pytest.raises(ValueError, match="X must be a 2-D matrix, got rows of different lengths"):
        check_feedback(X)
    with pytest.raises(ValueError, match="F must be a 2-D array, got rows of different lengths"):
        check_dense(X, "F")


@pytest.mark.parametrize(
    "ids, error, match",
    [
        (2**70, ValueError, r"out of range \[0, 5\): \[1180591620717411303424\]"),  # was "must be integers"
        (np.uint64(2**64 - 1), ValueError, r"\[18446744073709551615\]"),  # was reported as -1
        ([[0, 1], [2]], ValueError, "nested sequences"),  # was numpy's message
        ([1, 2**64], ValueError, "out of range"),
        ([True, False], TypeError, "integers"),
    ],
)
def test_check_ids_reports_ids_as_given(ids, error, match):
    from recsys_ltr._validation import check_ids

    with pytest.raises(error, match=match):
        check_ids(ids, 5)


@pytest.mark.kernels
def test_recommend_checks_userid_before_its_shape():
    with pytest.raises(ValueError, match="userid must be a scalar or a 1-D array"):
        _fuzz.fitted("ItemKNN").recommend([[0], [1, 2]])


def test_counts_beyond_int64_are_refused():
    from recsys_ltr._validation import check_positive_int
    from recsys_ltr.models import EASE
    from recsys_ltr.query_metrics import ndcg_at_k

    with pytest.raises(ValueError, match="iterations must be <= 9223372036854775807"):
        check_positive_int(2**63, "iterations")
    with pytest.raises(ValueError, match="k must be <= "):  # was OverflowError inside numba
        ndcg_at_k([1, 0], [0.5, 0.1], [0, 0], k=2**80)
    # num_threads reached threadpoolctl unclamped (ctypes ArgumentError)
    EASE(regularization=1.0, num_threads=2**40).fit(_fuzz.base_matrix())


@pytest.mark.kernels
@pytest.mark.parametrize(
    "call, name",
    [
        (lambda m: m.recommend(0, recalculate_user="no"), "recalculate_user"),
        (lambda m: m.recommend(0, filter_already_liked_items=0), "filter_already_liked_items"),
        (lambda m: m.similar_items(0, recalculate_item="yes"), "recalculate_item"),
    ],
)
def test_flags_are_bools_not_truthy_values(call, name):
    with pytest.raises(TypeError, match=f"{name} must be True or False"):
        call(_fuzz.fitted("UserKNN"))


def test_flags_of_functions_are_bools():
    from recsys_ltr import Interactions
    from recsys_ltr.metrics import evaluate, retrieval_metrics
    from recsys_ltr.neighbors import cosine_knn, slim_affinity
    from recsys_ltr.warp import WarpSampler, nml_loss

    X = _fuzz.base_matrix()
    for call, name in [
        (lambda: evaluate(_fuzz._ranking_scores, X, _fuzz._test_matrix(), k=3, show_progress="no"), "show_progress"),
        (lambda: retrieval_metrics(np.eye(2), np.eye(2), sp.eye(2), ks=(1,), exclude_self=1), "exclude_self"),
        (lambda: cosine_knn(X, 2, show_progress="no"), "show_progress"),
        (lambda: slim_affinity(X, show_progress=1.0), "show_progress"),
        (lambda: WarpSampler(X, exclude_self="no"), "exclude_self"),
        (lambda: nml_loss("reciprocal", 5, normalize="yes"), "normalize"),
        (lambda: Interactions.from_arrays([1, 2], [3, 4], drop_empty=1), "drop_empty"),
    ]:
        with pytest.raises(TypeError, match=f"{name} must be True"):
            call()


def test_slim_affinity_checks_its_penalties():
    from recsys_ltr.neighbors import slim_affinity

    for bad, error in [(float("nan"), ValueError), ("", TypeError), (True, TypeError), (-(2**80), ValueError)]:
        with pytest.raises(error, match="l1"):
            slim_affinity(_fuzz.base_matrix(), l1=bad)


def test_frml_loss_array_and_febr_holdout_name_the_parameter():
    from recsys_ltr.febr import AffinityFEBR
    from recsys_ltr.metric_learning import FRML

    X, y = _fuzz._labels_data()
    with pytest.raises(ValueError, match="loss must be 1-D"):  # was "estimator must be 1-D"
        FRML(loss=0, max_iter=2).fit(X, y=y)
    with pytest.raises(TypeError, match="holdout must be a real number, got False"):  # False == 0 was accepted
        AffinityFEBR(**{**_fuzz.PAPER, "holdout": False}).fit(_fuzz.base_matrix())


def test_content_affinity_refuses_complex_and_sparse_checked_first():
    from recsys_ltr.neighbors import ContentAffinity
    from recsys_ltr.neighbors.slim import slim_weights

    with pytest.raises(TypeError, match="complex"):  # the imaginary part was dropped
        ContentAffinity(k=1).fit([[1 + 1j, 0], [0, 1]])
    N = sp.coo_matrix(np.eye(6))
    N._shape = (-1, 6)
    with pytest.raises(ValueError, match="neighbors has a negative dimension"):
        slim_weights(_fuzz.base_matrix(), neighbors=N)


def test_rank_test_items_names_its_own_arguments():
    from recsys_ltr.metrics import rank_test_items

    with pytest.raises(ValueError, match="train_rows contains negative values"):
        rank_test_items(np.zeros((2, 2)), -sp.eye(2), sp.csr_matrix((2, 2)))


def test_knn_index_checks_raw_arrays_before_scipy():
    from recsys_ltr.neighbors import KnnIndex

    with pytest.raises(ValueError, match="KnnIndex.indices must be a 1-D integer array"):  # was truncated to ints
        KnnIndex(np.array([0, 1, 2]), np.array([0.5, 1.5]), np.ones(3), np.ones(2), 3, 2)
    with pytest.raises(ValueError, match="indptr must start at 0"):  # was scipy's message
        KnnIndex(np.array([1, 1, 2]), np.array([0, 1]), np.ones(3), np.ones(2), 3, 2)


def test_letor_rows_without_qid_and_huge_qids(tmp_path):
    from recsys_ltr.datasets.letor import read_svmlight_ltr

    path = tmp_path / "q.txt"
    path.write_text("1 qid:1 1:0.5\n2 3:1\n")  # sklearn returned 2 rows but 1 qid
    with pytest.raises(ValueError, match="every row needs a qid: field, but only 1 of 2 have one"):
        read_svmlight_ltr(path, 3)
    path.write_text("1 qid:99999999999999999999999 1:1\n")  # was OverflowError
    with pytest.raises(ValueError, match="not a readable SVMlight/LETOR file"):
        read_svmlight_ltr(path, 3)


@pytest.mark.kernels
def test_declared_but_unexpected_member_is_never_read(tmp_path):
    case = {"model": "EASE", "mutation": "declared_bomb", "pos": 0.0, "val": 0}
    outcome = _fuzz.file_case_outcome(case, str(tmp_path))  # 64 MB member, 64 KB file: must fail before reading
    assert outcome.category == "clear", outcome.detail


def test_cli_integers_beyond_int64_are_usage_errors(tmp_path):
    outcome = _fuzz.cli_case_outcome({"args": ["--folds", str(2**80)], "flag": "--folds"}, str(tmp_path))
    assert outcome.category == "clear", outcome.detail


def test_complex_relevance_labels_are_refused():
    from recsys_ltr.ltr import LGMML
    from recsys_ltr.query_metrics import ndcg_at_k

    X, y, qid = _fuzz._ltr_data()
    with pytest.raises(TypeError, match="y must be real numbers"):  # the imaginary part was dropped
        LGMML(n_metrics=2, queries_per_metric=2, iterations=1, random_state=0).fit(X, np.asarray(y) + 1j, qid)
    with pytest.raises(TypeError, match="y must be real numbers"):
        ndcg_at_k(np.asarray(y) + 0j, X[:, 0], qid)


def test_ndcg_of_huge_labels_matches_the_loop():
    """Gains 2**l - 1 scaled by 2**-max: a label of 2**62 is finite, and equal to the loop's answer."""
    from recsys_ltr.query_metrics import ndcg_at_k

    y, s, qid = np.array([2**62, 3, 0, 1]), np.array([0.1, 0.9, 0.5, 0.2]), np.zeros(4, dtype=int)
    np.testing.assert_allclose(ndcg_at_k(y, s, qid, k=3), _fuzz._ndcg_brute(y, s, qid, 3), rtol=1e-12)


def test_weights_and_ids_messages_name_what_they_hold():
    from recsys_ltr import Interactions

    with pytest.raises(TypeError, match="weights must be 1-D numbers, got an element"):  # was "hashable ids"
        Interactions.from_arrays([1, 2], [3, 4], [[1.0], 2.0])
    with pytest.raises(ValueError, match="X: 1 .* negative weight"):  # names the argument
        Interactions.from_sparse(sp.csr_matrix(np.array([[1.0, -1.0]])))


def test_ids_are_integers_only():
    from recsys_ltr._validation import check_ids

    with pytest.raises(TypeError, match="must be integers"):  # integral floats were accepted
        check_ids((9, np.float32(1.0), 2**64), 10)
    for floats in (3.0, [1.0, 2.0], np.array([0.0])):
        with pytest.raises(TypeError, match="must be integers"):
            check_ids(floats, 10)
    with pytest.raises(ValueError, match="out of range"):
        check_ids((9, 2**64), 10)
    with pytest.raises(TypeError, match="must be integers"):
        check_ids(np.array([1, 0.5, 2**64], dtype=object), 10)


def test_retrieval_metrics_checks_its_embeddings():
    from recsys_ltr.metrics import retrieval_metrics

    with pytest.raises(ValueError, match="Zq contains NaN or infinite"):  # was NaN metrics
        retrieval_metrics(np.array([[np.nan, 0.0]]), np.eye(2), sp.csr_matrix(np.eye(2)[:1]))


def test_als_divergence_is_a_floating_point_error():
    from recsys_ltr.models import ALS

    with pytest.raises(FloatingPointError, match="ALS diverged"):  # was implicit's ModelFitError
        ALS(factors=2, iterations=1, alpha=1e308, random_state=0, num_threads=1).fit(_fuzz.base_matrix())


def test_gmml_file_with_a_non_square_metric(tmp_path):
    case = {"model": "GMML", "mutation": "state_shape", "pos": 2.2250738585072014e-308, "val": 4149}
    outcome = _fuzz.file_case_outcome(case, str(tmp_path))  # a 2 x 3 components_ was loaded
    assert outcome.category == "clear", outcome.detail


def _stacked(**params):
    from recsys_ltr.febr import FEBR
    from recsys_ltr.models import ItemKNN, Popularity

    common = dict(max_iter=200, eval_every=100, random_state=0, num_threads=1, validation_users=20)
    return FEBR(bases=[ItemKNN(k=3, num_threads=1), Popularity()], **{**common, **params})


def _stack_data():
    return sp.csr_matrix((np.random.default_rng(0).random((60, 25)) < 0.25).astype(float))


def test_stacked_febr_folds_beyond_every_users_positives_are_refused():
    with pytest.raises(ValueError, match=r"holdout=4611686018427387904 folds, but no user has more than \d+ positives"):
        _stacked(holdout=2**62).fit(_stack_data())  # was 2**62 fits of the bases (a hang)


def test_stacked_febr_head_of_more_candidates_than_items():
    X = _stack_data()  # candidates=2**62 allocated (users, bases, 2**62) ("array is too big")
    np.testing.assert_array_equal(
        _stacked(candidates=2**62).fit(X).score([0, 1]), _stacked(candidates=25).fit(X).score([0, 1])
    )


@pytest.mark.parametrize(
    "params, match",
    [
        ({"learning_rate": "x"}, r"LightGBM refused lambdamart_params=\{'learning_rate': 'x'\}"),  # was LightGBMError
        ({"num_leaves": -1}, "LightGBM refused lambdamart_params"),
        ({"num_iterations": 0}, r"lambdamart_params\['num_iterations'\] must be >= 1"),
        ({"num_trees": "5"}, r"lambdamart_params\['num_trees'\] must be an integer"),
    ],
)
def test_lambdamart_settings_lightgbm_refuses_are_value_errors(params, match):
    pytest.importorskip("lightgbm")
    with pytest.raises((TypeError, ValueError), match=match):
        _stacked(scorer="lambdamart", lambdamart_params=params).fit(_stack_data())


# ----------------------------------------------------------------------------- the other items, one test each
def test_sampler_rows_are_required_and_an_infinite_state_is_divergence():
    from recsys_ltr.warp import DOT_ROWS, WarpSampler, dot_score, dot_update

    s = WarpSampler(sp.csr_matrix(np.eye(5)), random_state=0)
    with pytest.raises(TypeError, match="rows"):  # rows= is a check, not an opt-in
        s.sgd((np.ones((5, 3)), np.ones((5, 3))), dot_score, dot_update, 10, 0.1)
    U = np.ones((5, 3))
    U[0, 0] = np.inf  # ran on with 0 violators
    with pytest.raises(FloatingPointError, match="diverged"):
        s.sgd((U, np.ones((5, 3))), dot_score, dot_update, 10, 0.1, rows=DOT_ROWS)


@pytest.mark.kernels
@pytest.mark.parametrize("name", ["ItemKNN", "UserKNN", "RP3beta", "KUNN", "EASE"])
def test_weights_of_1e308_give_finite_scores_or_a_clear_error(name):
    X = _fuzz.base_matrix() * 1e308  # gave inf similarities and scores
    model = _fuzz.model_factories()[name]()
    if model.uses_weights:  # read as weights: refused above 1e100, finite up to it
        with pytest.raises(ValueError, match=r"weights must lie in \[1e-100, 1e\+100\]"):
            model.fit(X)
        X = _fuzz.base_matrix() * 1e100
    assert np.all(np.isfinite(model.fit(X).score(np.arange(7))))


def test_als_names_the_confidence_that_overflows_float32():
    from recsys_ltr.models import ALS

    with pytest.raises(FloatingPointError, match=r"largest confidence alpha \* weight is 2e\+21"):
        ALS(alpha=20.0).fit(_fuzz.base_matrix() * 1e20)


def test_seeds_beyond_64_bits_and_numeric_strings_are_refused():
    from recsys_ltr._validation import check_random_state
    from recsys_ltr.ltr import LGMML
    from recsys_ltr.warp import WarpSampler

    with pytest.raises(ValueError, match="random_state must be <= 18446744073709551615"):  # was seed 0's stream
        check_random_state(2**80)
    with pytest.raises(TypeError, match="margin must be a real number, got '1'"):
        WarpSampler(_fuzz.base_matrix(), margin="1")
    with pytest.raises(TypeError, match="margin must be a real number, got '1'"):
        LGMML(margin="1").fit(*_fuzz._ltr_data())


def test_saved_random_state_is_checked_on_load(tmp_path):
    from recsys_ltr.models import ALS

    model = ALS(factors=2, iterations=1, random_state=0, num_threads=1).fit(_fuzz.base_matrix())
    model.params_ = {**model.params_, "random_state": [1, 2]}  # failed only on refit
    path = model.save(tmp_path / "als.npz")
    with pytest.raises(ValueError, match="invalid parameters: random_state must be None, an int"):
        ALS.load(path)


def test_gmml_on_data_of_1e200_is_a_value_error():
    from recsys_ltr.metric_learning import GMML

    X, y = _fuzz._labels_data()
    with pytest.raises(ValueError, match="scatter matrices overflow"):  # was LinAlgError
        GMML().fit(np.asarray(X) * 1e200, y)


def test_metric_learners_refuse_strings_sparse_first_and_3d():
    from recsys_ltr.metric_learning import FRML, GMML

    X, y = _fuzz._labels_data()
    with pytest.raises(TypeError, match="X must be numeric, got strings"):  # scikit-learn parsed "0.5" as 0.5
        GMML().fit(np.asarray(X).astype(str), y)
    with pytest.raises(TypeError, match="GMML takes a dense X, got a sparse matrix"):  # was "Complex data"
        GMML().fit(sp.csr_matrix(np.asarray(X) + 0j), y)
    with pytest.raises(ValueError, match="X must be a 2-D array"):
        FRML(max_iter=2).fit(np.asarray(X)[:, :, None], y=y)


def test_nonfinite_letor_features_are_refused(tmp_path):
    from recsys_ltr.datasets.letor import read_svmlight_ltr

    path = tmp_path / "q.txt"
    path.write_text("1 qid:1 1:nan 2:1\n0 qid:1 1:inf 2:0\n")
    with pytest.raises(ValueError, match="row 1 has a NaN or infinite feature value"):
        read_svmlight_ltr(path, 2)


def test_damaged_data_files_and_huge_ids_in_presplit_files(tmp_path):
    import gzip

    from test_datasets import _write

    from recsys_ltr.datasets import load_presplit
    from recsys_ltr.datasets._registry import read_bytes

    path = tmp_path / "x.txt.gz"
    path.write_bytes(gzip.compress(b"0 1\n" * 100)[:-10])
    with pytest.raises(ValueError, match="corrupt or truncated gzip file"):  # was EOFError
        read_bytes(path)
    _write(tmp_path, "gowalla", {"train.txt": b"0 1\n12345678901234567890123 0\n", "valid.txt": b"", "test.txt": b""})
    with pytest.raises(ValueError, match="integers below 2\\*\\*63"):  # was OverflowError
        load_presplit("gowalla", data_dir=tmp_path, verify=False)


def test_two_dimensional_ids_name_the_argument():
    from recsys_ltr import Interactions

    with pytest.raises(TypeError, match="users must be 1-D hashable ids"):  # was pandas' "unhashable type: 'list'"
        Interactions.from_arrays([[0, 1], [2]], [3, 4])
    with pytest.raises(ValueError, match="users must be 1-D"):
        Interactions.from_arrays(np.zeros((2, 2)), [3, 4])


def test_lambdamart_labels_beyond_lightgbm_gains_are_named():
    pytest.importorskip("lightgbm")
    from recsys_ltr.ltr import LambdaMART

    X, y, qid = _fuzz._ltr_data()
    y = np.asarray(y).copy()
    y[3] = 2**62  # was LightGBM's "Label should be non-negative (met -2147483648)" (an int32 cast)
    with pytest.raises(ValueError, match=r"integer relevance labels in \[0, 30\].*got labels up to 4.61169e\+18"):
        LambdaMART(n_estimators=2).fit(X, y, qid)


def test_negative_affinities_are_a_documented_acceptance():
    """An affinity's neighbourhood is its row order, not the sign: negative values are kept as given."""
    from recsys_ltr.neighbors import Affinity

    M = sp.csr_matrix(np.array([[0.0, -1.0, -2.0], [-0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    A = Affinity(M, 2)
    np.testing.assert_array_equal(A.matrix.toarray(), M.toarray())


# ----------------------------------------------------------------------------- round 3: the new entry points
def test_lambdamart_divergence_is_a_floating_point_error():
    pytest.importorskip("lightgbm")
    from recsys_ltr.ltr import LambdaMART

    X, y, qid = _fuzz._ltr_data()  # LightGBM dumps infinite leaves as bare inf: was json's JSONDecodeError
    with pytest.raises(FloatingPointError, match="LambdaMART diverged"):
        LambdaMART(n_estimators=3, min_child_samples=2, learning_rate=1e308).fit(X, y, qid)
    with pytest.raises(FloatingPointError, match="LambdaMART diverged"):
        _fuzz._stacked_febr(
            scorer="lambdamart", lambdamart_params={**_fuzz.LAMBDAMART_FAST, "learning_rate": 1e308}
        ).fit(_fuzz.base_matrix())


@pytest.mark.parametrize("damage", ["directory", "forged_users_huge", "forged_users_float"])
def test_cache_files_that_are_directories_or_forged_with_bad_ids_are_recomputed(tmp_path, damage):
    """Were IsADirectoryError and OverflowError out of UnitCache.load, and float user ids (0.5) read
    as integers (user 0) from a forged file."""
    outcome = _fuzz.cache_case_outcome({"damage": damage, "val": 0}, str(tmp_path))
    assert outcome.category == "right", outcome.detail


def test_recommend_all_names_its_users_argument():
    from recsys_ltr.executors import recommend_all, recommend_users

    model = _fuzz.fitted("ItemKNN")
    for call in (recommend_all, recommend_users):
        with pytest.raises(ValueError, match=r"users out of range \[0, 7\): \[8\]"):  # was "userid"
            call(model, users=[8])


def test_rpcmtl_takes_numpy_integer_parameters():
    from recsys_ltr.ltr import RPCMTL

    X, y, qid = _fuzz._ltr_data()
    params = dict(max_iter=5, kappa1=1, kappa2=2, iterations=2, random_state=0)
    got = RPCMTL(n_clusters=np.uint64(3), **params).fit(X, y, qid).predict(X, qid)  # was IndexError
    np.testing.assert_array_equal(got, RPCMTL(n_clusters=3, **params).fit(X, y, qid).predict(X, qid))


def test_rank_blend_checks_its_weights_and_members():
    from recsys_ltr.ltr import ListMLE, RankBlend

    X, y, qid = _fuzz._ltr_data()
    with pytest.raises(TypeError, match="weights must be a sequence"):  # was "'int' object is not iterable"
        RankBlend([ListMLE(iterations=1)], weights=3).fit(X, y, qid)
    with pytest.raises(TypeError, match="estimators must be rankers"):  # was scikit-learn's "Cannot clone object"
        RankBlend([ListMLE(iterations=1), 1]).fit(X, y, qid)


def test_mlr_k_message_shows_numpy_integers_as_integers():
    from recsys_ltr.metric_learning import MLR

    X, y = _fuzz._labels_data()
    with pytest.raises(ValueError, match=r"got k=3 with loss='map'"):  # was k=np.uint64(3)
        MLR(k=np.uint64(3)).fit(X, y=y)


@pytest.mark.kernels
@pytest.mark.parametrize("mutation", ["swapped_arrays", "digest_edit", "digest_missing", "huge_shape"])
@pytest.mark.parametrize("model", ["FEBR", "GFCF", "EASEsparse", "ListMLE", "RMLR"])
def test_swapped_arrays_and_edited_digests_are_refused(tmp_path, model, mutation):
    outcome = _fuzz.file_case_outcome({"model": model, "mutation": mutation, "pos": 0.3, "val": 5}, str(tmp_path))
    assert outcome.category in ("clear", "right"), outcome.detail


def test_lgmml_affinity_float32_content_weight_is_the_float():
    from recsys_ltr.ltr import LGMMLAffinity  # noqa: F401  (the fuzz suite's small configuration)

    F, X = _fuzz._labels_data()[0][:6], _fuzz.base_matrix()
    got = _fuzz._lgmml_affinity(content_weight=np.float32(0.5)).fit(F, X).affinity_.matrix  # was a float32 product
    want = _fuzz._lgmml_affinity(content_weight=0.5).fit(F, X).affinity_.matrix
    assert _fuzz.equal(got, want)


def test_a_model_file_with_an_edited_valid_parameter_is_refused(tmp_path):
    case = {"model": "GFCF", "mutation": "params_huge", "pos": 0.1, "val": 3}
    outcome = _fuzz.file_case_outcome(case, str(tmp_path))  # alpha 0.3 -> 1e308 loaded, scores of 1e307
    assert outcome.category == "clear", outcome.detail


def test_lgmml_affinity_refuses_explicit_zeros_in_its_feedback():
    X = sp.coo_matrix(([1.0, 0.0], ([0, 1], [0, 3])), shape=(7, 6))  # the stored zero made item 3 warm
    with pytest.raises(ValueError, match="X stores 1 explicit zero"):
        _fuzz._lgmml_affinity().fit(_fuzz._labels_data()[0][:6], X)
    R = sp.coo_matrix(([1.0, 0.0], ([1, 4], [2, 4])), shape=(6, 6))  # the stored zero made item 4 warm
    with pytest.raises(ValueError, match="relevance stores 1 explicit zero"):
        _fuzz._lgmml_affinity().fit(_fuzz._labels_data()[0][:6], relevance=R)
