"""LETOR loader (recsys_ltr.datasets.letor) and per-query metrics (recsys_ltr.query_metrics)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recsys_ltr.datasets import letor
from recsys_ltr.query_metrics import average_precision, ndcg_at_k, query_groups, ranking_report

pytestmark = pytest.mark.kernels


# ----------------------------------------------------------------------------- metrics
def _ref_per_query(y, s, qid, fn):
    out = []
    for q in sorted(set(qid.tolist())):
        idx = [i for i in range(len(y)) if qid[i] == q]
        ranked = sorted(idx, key=lambda i: -s[i])  # Python's sort is stable: ties keep row order
        out.append(fn([y[i] for i in ranked]))
    return np.array(out, dtype=float)


def _ref_ndcg(labels, k):
    def dcg(ls):
        return sum((2.0**l - 1) / math.log2(i + 2) for i, l in enumerate(ls[:k]))

    ideal = dcg(sorted(labels, reverse=True))
    return float("nan") if ideal == 0 else dcg(labels) / ideal


def _ref_ap(labels):
    rel = [l > 0 for l in labels]
    if not any(rel):
        return float("nan")
    return float(np.mean([sum(rel[: i + 1]) / (i + 1) for i, r in enumerate(rel) if r]))


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 3), st.integers(0, 4)), min_size=1, max_size=40),
    k=st.integers(1, 12),
)
def test_metrics_match_reference(data, k):
    y, s, qid = (np.array(c) for c in zip(*data))
    s = s.astype(float)  # small integer scores: plenty of ties
    np.testing.assert_allclose(
        ndcg_at_k(y, s, qid, k), _ref_per_query(y, s, qid, lambda l: _ref_ndcg(l, k)), rtol=1e-12
    )
    np.testing.assert_allclose(average_precision(y, s, qid), _ref_per_query(y, s, qid, _ref_ap), rtol=1e-12)


def test_hand_computed_query():
    y, s, q = np.array([2, 0, 1]), np.array([0.1, 0.9, 0.5]), np.zeros(3, dtype=int)
    # ranking: label 0, 1, 2 -> DCG = 1/log2(3) + 3/log2(4); IDCG = 3 + 1/log2(3)
    expected = (1 / math.log2(3) + 1.5) / (3 + 1 / math.log2(3))
    assert ndcg_at_k(y, s, q, 3)[0] == pytest.approx(expected)
    assert ndcg_at_k(y, s, q, 1)[0] == 0.0
    assert ndcg_at_k(y, s, q, None)[0] == pytest.approx(expected)
    assert average_precision(y, s, q)[0] == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_queries_without_relevant_documents_are_excluded():
    y = np.array([1, 0, 0, 0, 2, 1])
    qid = np.array([5, 5, 7, 7, 9, 9])
    s = np.array([0.0, 1.0, 0.3, 0.2, 1.0, 0.0])
    assert np.isnan(ndcg_at_k(y, s, qid, 10)[1]) and np.isnan(average_precision(y, s, qid)[1])
    rep = ranking_report(y, s, qid, ks=(1,))
    assert rep["n_queries"] == 2 and rep["n_excluded"] == 1
    assert rep["NDCG@1"] == pytest.approx(0.5) and rep["MAP"] == pytest.approx((0.5 + 1.0) / 2)
    with pytest.raises(ValueError, match="no query has a relevant"):
        ranking_report(np.zeros(3), s[:3], qid[:3])


def test_query_groups_non_contiguous():
    order, offsets, uq = query_groups(np.array([3, 1, 3, 2, 1]))
    assert uq.tolist() == [1, 2, 3]
    assert [order[offsets[j] : offsets[j + 1]].tolist() for j in range(3)] == [[1, 4], [3], [0, 2]]


def test_metric_bad_inputs():
    y, s, q = np.array([1, 0]), np.array([0.1, 0.2]), np.array([0, 0])
    with pytest.raises(ValueError, match="shape mismatch"):
        ndcg_at_k(y, s[:1], q)
    with pytest.raises(ValueError, match="NaN"):
        ndcg_at_k(y, np.array([np.nan, 0.0]), q)
    with pytest.raises(ValueError, match="non-negative"):
        average_precision(np.array([-1, 0]), s, q)
    with pytest.raises(ValueError, match="k must be >= 1"):
        ndcg_at_k(y, s, q, 0)
    with pytest.raises(TypeError, match="integers"):
        ndcg_at_k(y, s, np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="empty"):
        ndcg_at_k(y[:0], s[:0], q[:0])
    for bad in (s + 1j, np.array(["0.1", "0.2"]), np.array([0.1, None])):  # never cast silently
        with pytest.raises(TypeError, match="scores must be real numbers"):
            ndcg_at_k(y, bad, q)
    for bad in (y + 0j, np.array(["1", "0"])):
        with pytest.raises(TypeError, match="y must be real numbers"):
            average_precision(bad, s, q)


# ----------------------------------------------------------------------------- loader, synthetic files
def _write_part(path, qids, start_label=0):
    lines = []
    for j, q in enumerate(qids):
        lines.append(f"{(start_label + j) % 3} qid:{q} 1:{q}.5 3:{j} #docid = GX{q}-{j}\n")
    path.write_text("".join(lines))


@pytest.fixture
def fake_registry(tmp_path, monkeypatch):
    for k in range(1, 6):
        _write_part(tmp_path / f"S{k}.txt", [100 * k, 100 * k, 100 * k + 1])
    (tmp_path / "rank.train").write_text("1 1:0.5 300:2\n0 2:1\n3 1:1\n")
    (tmp_path / "rank.train.query").write_text("2\n1\n")
    (tmp_path / "rank.test").write_text("4 5:1\n")
    (tmp_path / "rank.test.query").write_text("1\n")
    monkeypatch.setattr(letor, "dataset_path", lambda name, filename, data_dir=None, verify=True: tmp_path / filename)
    return tmp_path


@pytest.mark.parametrize("fold", [1, 2, 3, 4, 5])
def test_mq2008_fold_composition(fake_registry, fold):
    data = letor.load_letor("letor-mq2008", fold=fold)
    part = lambda i: (fold - 1 + i) % 5 + 1  # noqa: E731
    X, y, qid = data["train"]
    assert X.shape == (9, 46) and X.dtype == np.float64 and y.dtype == np.int64
    assert qid.tolist() == [100 * part(i) + o for i in range(3) for o in (0, 0, 1)]
    assert np.unique(data["vali"][2]).tolist() == [100 * part(3), 100 * part(3) + 1]
    assert np.unique(data["test"][2]).tolist() == [100 * part(4), 100 * part(4) + 1]
    assert X[0, 0] == 100 * part(0) + 0.5 and X[1, 2] == 1.0 and y[:3].tolist() == [0, 1, 2]


def test_lightgbm_sample_groups(fake_registry):
    data = letor.load_letor("lightgbm-lambdarank-sample")
    X, y, qid = data["train"]
    assert X.shape == (3, 300) and X[0, 299] == 2.0
    assert qid.tolist() == [0, 0, 1] and y.tolist() == [1, 0, 3]
    assert set(data) == {"train", "test"} and data["test"][1].tolist() == [4]


def test_loader_bad_inputs(fake_registry):
    with pytest.raises(ValueError, match="fold must be in 1..5"):
        letor.load_letor("letor-mq2008", fold=6)
    with pytest.raises(TypeError, match="fold must be an integer"):
        letor.load_letor("letor-mq2008", fold="1")
    with pytest.raises(ValueError, match="single fold"):
        letor.load_letor("lightgbm-lambdarank-sample", fold=2)
    with pytest.raises(ValueError, match="unknown learning-to-rank"):
        letor.load_letor("mslr-web10k")
    (fake_registry / "rank.train.query").write_text("2\n2\n")
    with pytest.raises(ValueError, match="sum to the 3 rows"):
        letor.load_letor("lightgbm-lambdarank-sample")
    (fake_registry / "bad.txt").write_text("1.5 qid:1 1:0\n")
    with pytest.raises(ValueError, match="non-negative integers"):
        letor.read_svmlight_ltr(fake_registry / "bad.txt", 46)


# ----------------------------------------------------------------------------- loader, real data
def _load_or_skip(name, fold=1):
    try:
        return letor.load_letor(name, fold=fold)
    except FileNotFoundError as exc:  # data directory without this data set
        pytest.skip(f"{name} not available: {exc}")


@pytest.mark.realdata
def test_real_mq2008_matches_readme():
    expected_train = {1: 9630, 2: 9404, 3: 8643, 4: 8514, 5: 9442}
    for fold, n_train in expected_train.items():
        data = _load_or_skip("letor-mq2008", fold)
        assert data["train"][0].shape == (n_train, 46)
        sizes = sum(d[0].shape[0] for d in data.values())
        assert sizes == 15211
        all_qid = np.concatenate([d[2] for d in data.values()])
        assert np.unique(all_qid).size == 784  # query-disjoint parts
    _X, y, qid = _load_or_skip("letor-mq2008", 1)["train"]
    assert np.unique(qid).size == 471 and set(np.unique(y)) == {0, 1, 2}


@pytest.mark.realdata
def test_real_lightgbm_sample_matches_readme():
    data = _load_or_skip("lightgbm-lambdarank-sample")
    X, y, qid = data["train"]
    assert X.shape == (3005, 300) and np.unique(qid).size == 201
    assert np.bincount(y).tolist() == [645, 1211, 858, 222, 69]
    assert data["test"][0].shape == (768, 300) and np.unique(data["test"][2]).size == 50
