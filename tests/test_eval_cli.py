import json
import logging
import os
import re
import subprocess
import sys
import weakref
from functools import partial

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy import stats

from recsys_ltr import Interactions, datasets, split
from recsys_ltr.datasets import ENV_VAR, make_synthetic
from recsys_ltr.eval import cache, runner, tuning
from recsys_ltr.eval.__main__ import main
from recsys_ltr.eval.cache import UnitCache
from recsys_ltr.eval.methods import METHODS, Method, get_method
from recsys_ltr.eval.report import format_table, paired_tests, pooled, summarize, write_outputs
from recsys_ltr.eval.results import Experiment, FoldResult, Skipped, selection_metric
from recsys_ltr.eval.runner import run_experiment
from recsys_ltr.eval.tuning import tune
from recsys_ltr.febr import dissertation as febr_dissertation
from recsys_ltr.febr import model as febr_model
from recsys_ltr.metrics import evaluate
from recsys_ltr.models import EASE

METRICS = ["ADG", "REC@10", "MAP", "NDCG", "ATOP"]


@pytest.fixture(scope="module")
def small():
    return make_synthetic(n_users=200, n_items=120, factor_scale=3.0, random_state=5).matrix


# ----------------------------------------------------------------------------- CLI
def test_cli_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        ["--dataset", "synthetic", "--folds", "2", "--models", "popularity,item-p", "--out", str(out), "--quiet"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "synthetic (SYNTHETIC data" in printed
    assert "| n/a | popularity |" in printed and "| cosine | item-p |" in printed
    run = out / "standard"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["meta"]["dataset"] == "synthetic" and summary["meta"]["folds"] == 2
    assert summary["meta"]["computed_units"] == 4
    rows = pd.read_csv(run / "results.csv")
    assert set(rows["method"]) == {"popularity", "item-p"}
    assert set(rows["fold"]) == {0, 1}
    assert rows["value"].between(0, 1).all()
    # item-p uses the latent structure the generator plants; popularity cannot.
    table = {r["method"]: r for r in summary["summary"]}
    assert table["item-p"]["ADG"] > table["popularity"]["ADG"]
    assert summary["wilcoxon"]["ADG"]["best"] == "item-p" and summary["wilcoxon"]["ADG"]["p_value"] < 0.05
    assert set(summary["params"]["item-p"]) == {"0", "1"}  # chosen setting per fold
    tuning = pd.read_csv(run / "tuning.csv")
    assert tuning.groupby(["method", "fold"])["chosen"].sum().eq(1).all()
    assert "| affinity | method | ADG |" in (run / "table.md").read_text()
    for m in ("ADG", "REC_at_10", "MAP", "NDCG", "ATOP"):
        assert (run / f"{m}.png").read_bytes()[:4] == b"\x89PNG"
    assert len(list((out / "cache").glob("*.json"))) == 4


def test_cli_both_protocols_and_no_cache(tmp_path):
    out = tmp_path / "run"
    argv = [
        "--dataset",
        "synthetic",
        "--folds",
        "1",
        "--models",
        "popularity",
        "--protocol",
        "both",
        "--exclude-top",
        "20",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(argv) == 0
    for protocol in ("standard", "novelty"):
        meta = json.loads((out / protocol / "summary.json").read_text())["meta"]
        assert meta["protocol"] == protocol and meta["computed_units"] == 1
    assert main(argv) == 0
    assert json.loads((out / "novelty" / "summary.json").read_text())["meta"]["computed_units"] == 0
    assert main([*argv, "--no-cache"]) == 0
    assert json.loads((out / "novelty" / "summary.json").read_text())["meta"]["computed_units"] == 1


def test_novelty_protocol_holds_out_no_popular_item(small):
    exp = run_experiment(small, ["popularity"], folds=1, protocol="novelty", exclude_top=20, show_progress=False)
    assert [r.method for r in exp.results] == ["popularity", "popularity (top-20 last)"]
    assert all(0 <= r.test["ADG"] <= 1 for r in exp.results)
    _, _, test = next(split.folds(small, 1, exclude_top=20))
    assert not np.isin(test.indices, split.top_items(small, 20)).any()


def test_runner_picks_setting_on_validation(small):
    (res,) = run_experiment(small, ["item-p"], folds=1, show_progress=False).results
    trials = {t["params"]["k"]: t["validation"] for t in res.trials}
    assert set(trials) == set(get_method("item-p").main_values("quick", small.shape))
    assert res.params["k"] == max(trials, key=trials.get)
    assert res.per_user["ADG"].shape == res.users.shape and set(res.per_user) == set(METRICS)


def test_febr_gets_the_validation_matrix(small, monkeypatch):
    seen = []
    original = febr_dissertation.evaluate_trusted

    def spy(score, X, validation, *args, **kwargs):
        seen.append(validation.nnz)
        return original(score, X, validation, *args, **kwargs)

    monkeypatch.setattr(febr_dissertation, "evaluate_trusted", spy)
    (res,) = run_experiment(small, ["FEBRi-cos"], folds=1, show_progress=False).results
    _, val, _ = next(split.folds(small, 1))
    assert seen and set(seen) == {val.nnz}  # early stopping evaluated on the fold's validation positives
    assert res.params["k"] in (50, 100) and res.params["regularization"] in (1e-3, 1e-2)


def test_bad_arguments(small):
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        run_experiment(small, ["nope"], show_progress=False)
    with pytest.raises(ValueError, match="protocol"):
        run_experiment(small, ["popularity"], protocol="other", show_progress=False)
    with pytest.raises(ValueError, match="folds"):
        run_experiment(small, ["popularity"], folds=0, show_progress=False)
    with pytest.raises(ValueError, match="jobs"):
        run_experiment(small, ["popularity"], jobs=0, show_progress=False)
    with pytest.raises(SystemExit):
        main(["--protocol", "bogus"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--folds", "0"], "--folds: must be >= 1, got 0"),
        (["--jobs", "0"], "--jobs: must be >= 1, got 0"),
        (["--k", "x"], "--k: invalid int value: 'x'"),
        (["--protocol", "bogus"], "argument --protocol: invalid choice: 'bogus'"),
        (["--log-level", "loud"], "argument --log-level: invalid choice: 'LOUD'"),
        (["--models", "popularity,nope"], "unknown model(s) nope; known: item-p"),
        (["--models", ","], "unknown model(s) (none given)"),
        (["--dataset", "nope"], "unknown data set 'nope'; known: citeulike-a, gowalla"),
        (["--dataset", "movielens-100"], "unknown data set 'movielens-100' (did you mean movielens-100k or "),
        (["--dataset", "gowala", "--protocol", "fixed"], "unknown data set 'gowala' (did you mean gowalla?)"),
        (
            ["--dataset", "movielens-100k", "--data-dir", "EMPTY"],
            "data set movielens-100k not found: u.data, u.item, u.genre missing in EMPTY/movielens-100k; ",
        ),
        (["--dataset", "lastfm-2k", "--data-dir", "EMPTY"], "pass --data-dir <dir> or set $RECSYS_LTR_DATA=<dir>"),
        (["--dataset", "movielens-100k", "--data-dir", "/nonexistent"], "--data-dir /nonexistent does not exist"),
        (["--data-dir", "EMPTY"], "movielens-100k is not in the data directory EMPTY (--data-dir)"),
        (
            ["--dataset", "synthetic", "--protocol", "temporal"],
            "--protocol temporal needs the time of each interaction and synthetic has none; data sets with "
            "timestamps: movielens-100k",
        ),
        (["--dataset", "synthetic", "--k", "501"], "--k 501 is larger than the catalogue (500 items)"),
        (["--dataset", "synthetic", "--protocol", "novelty", "--exclude-top", "500"], "--exclude-top 500 leaves no"),
        (["--dataset", "synthetic", "--out", __file__], f"--out {__file__} names a file"),
    ],
)
def test_cli_bad_input_is_one_line_and_a_hint(argv, message, capsys, monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no download cache to find the sets in
    argv = [str(tmp_path) if a == "EMPTY" else a for a in argv]
    message = message.replace("EMPTY", str(tmp_path))
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--quiet"])
    assert exc.value.code == 2  # a usage error, not a traceback
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2, lines  # the error and the hint: argparse's full usage only with --help
    assert lines[0].startswith("python -m recsys_ltr.eval: error: ") and message in lines[0], lines[0]
    assert lines[1] == "(python -m recsys_ltr.eval --help lists every option, the data sets and the models)"


def test_env_data_dir_without_the_default_set_raises(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(SystemExit):
        main(["--models", "popularity", "--quiet"])
    assert f"not in the data directory {tmp_path} ($RECSYS_LTR_DATA)" in capsys.readouterr().err


def test_a_data_directory_env_that_does_not_exist_is_one_line(tmp_path, monkeypatch, capsys):
    missing = tmp_path / "nowhere"
    monkeypatch.setenv(ENV_VAR, str(missing))
    for argv in (["--models", "popularity"], ["--dataset", "lastfm-2k", "--models", "popularity"]):
        with pytest.raises(SystemExit) as exc:
            main([*argv, "--quiet"])
        assert exc.value.code == 2
        assert capsys.readouterr().err.splitlines() == [
            f"python -m recsys_ltr.eval: error: $RECSYS_LTR_DATA={missing} does not exist: point it at the directory "
            "holding the data sets' folders, or unset it"
        ]
    assert (
        main(
            [
                "--dataset",
                "synthetic",
                "--folds",
                "1",
                "--models",
                "popularity",
                "--out",
                str(tmp_path / "r"),
                "--quiet",
            ]
        )
        == 0
    )


def test_runner_folds_are_split_folds(monkeypatch):
    X = make_synthetic(n_users=60, n_items=40, random_state=4).matrix
    seen = []

    def fake(name, fold, tr, va, te, **kw):
        seen.append((tr, va, te))
        return _result(name, fold, 0.0)

    monkeypatch.setattr(runner, "run_unit", fake)
    run_experiment(X, ["popularity"], folds=2, random_state=7, show_progress=False)
    for got, want in zip(seen, split.folds(X, n_folds=2, random_state=7), strict=True):
        for a, b in zip(got, want):
            assert (a != b).nnz == 0


# ----------------------------------------------------------------------------- cache and jobs
def _counting(monkeypatch):
    calls = []
    original = runner.run_unit

    def counted(name, fold, *args, **kwargs):
        calls.append((name, fold))
        return original(name, fold, *args, **kwargs)

    monkeypatch.setattr(runner, "run_unit", counted)
    return calls


def test_cache_resume_recomputes_only_missing_units(small, tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    kw = dict(folds=2, cache_dir=tmp_path, dataset="small", show_progress=False)
    first = run_experiment(small, ["popularity", "item-p"], **kw)
    assert len(calls) == 4 and len(first.computed) == 4
    cache = UnitCache(tmp_path, **_settings(small))
    files = {u: cache.path(*u) for u in [("popularity", 0), ("popularity", 1), ("item-p", 0), ("item-p", 1)]}
    assert all(p.exists() for p in files.values())
    mtimes = {u: p.stat().st_mtime_ns for u, p in files.items()}
    files["item-p", 1].unlink()
    calls.clear()
    second = run_experiment(small, ["popularity", "item-p"], **kw)
    assert calls == [("item-p", 1)] and second.computed == [("item-p", 1)]
    assert all(files[u].stat().st_mtime_ns == mtimes[u] for u in mtimes if u != ("item-p", 1))
    for a, b in zip(first.results, second.results, strict=True):
        assert (a.method, a.fold, a.params, a.test) == (b.method, b.fold, b.params, b.test)
        np.testing.assert_array_equal(a.per_user["ADG"], b.per_user["ADG"])
        np.testing.assert_array_equal(a.users, b.users)
    calls.clear()
    run_experiment(small, ["popularity", "item-p"], **kw, read_cache=False)
    assert len(calls) == 4


def test_interrupted_run_resumes(small, tmp_path, monkeypatch):
    original = runner.run_unit
    done = []

    def interrupted(name, fold, *args, **kwargs):
        if len(done) == 2:
            raise KeyboardInterrupt
        done.append((name, fold))
        return original(name, fold, *args, **kwargs)

    monkeypatch.setattr(runner, "run_unit", interrupted)
    kw = dict(folds=2, cache_dir=tmp_path, dataset="small", show_progress=False)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(small, ["popularity", "item-p"], **kw)
    assert len(list(tmp_path.glob("*.json"))) == 2 and not list(tmp_path.glob(".tmp-*"))
    monkeypatch.setattr(runner, "run_unit", original)
    resumed = run_experiment(small, ["popularity", "item-p"], **kw)
    assert sorted(resumed.computed) == sorted({("popularity", 1), ("item-p", 1)})


def test_cache_key_and_unreadable_files(small, tmp_path, capsys):
    cache = UnitCache(tmp_path, **_settings(small))
    other = UnitCache(tmp_path, **{**_settings(small), "budget": "paper"})
    assert cache.path("popularity", 0) != other.path("popularity", 0)
    assert cache.path("popularity", 0) != cache.path("popularity", 1)
    exp = run_experiment(small, ["popularity"], folds=1, cache_dir=tmp_path, dataset="small", show_progress=False)
    path = cache.path("popularity", 0)
    users = exp.results[0].users
    assert cache.load("popularity", 0, users).test == exp.results[0].test
    assert other.load("popularity", 0, users) is None
    assert cache.load("popularity", 0, users[1:]) is None  # another fold's users
    path.write_text("{not json")
    assert cache.load("popularity", 0, users) is None
    assert "ignoring cache file" in capsys.readouterr().err
    again = run_experiment(small, ["popularity"], folds=1, cache_dir=tmp_path, dataset="small", show_progress=False)
    assert again.computed == [("popularity", 0)] and cache.load("popularity", 0, users) is not None


def _tampered(payload, how):
    result = payload["result"]
    if how == "mean":
        result["test"]["ADG"] = 123.0
    elif how == "per_user":
        result["per_user"]["ADG"] = result["per_user"]["ADG"][:2]
    elif how == "resigned_mean":  # edited and its digest recomputed: the consistency checks still hold
        result["test"]["ADG"] = 123.0
        payload["sha256"] = cache._digest(payload["key"], result)
    elif how == "resigned_users":
        result["users"], result["per_user"] = result["users"][:2], {m: v[:2] for m, v in result["per_user"].items()}
        result["test"] = {m: float(np.mean(v)) for m, v in result["per_user"].items()}
        payload["sha256"] = cache._digest(payload["key"], result)
    return payload


@pytest.mark.parametrize("how", ["mean", "per_user", "resigned_mean", "resigned_users"])
def test_edited_cache_entries_are_recomputed_not_reported(small, tmp_path, capsys, how):
    kw = dict(folds=1, cache_dir=tmp_path, dataset="small", show_progress=False)
    first = run_experiment(small, ["popularity"], **kw)
    path = UnitCache(tmp_path, **_settings(small)).path("popularity", 0)
    path.write_text(json.dumps(_tampered(json.loads(path.read_text()), how)))
    again = run_experiment(small, ["popularity"], **kw)
    assert again.computed == [("popularity", 0)] and again.results[0].test == first.results[0].test
    assert "ignoring cache file" in capsys.readouterr().err


def test_a_consistent_forgery_is_read_as_documented(small, tmp_path):
    """The digest guards integrity, not authenticity (README): a forger who edits the per-user values,
    the means and the digest together is believed.  Pinned so that the docs stay true."""
    kw = dict(folds=1, cache_dir=tmp_path, dataset="small", show_progress=False)
    run_experiment(small, ["popularity"], **kw)
    path = UnitCache(tmp_path, **_settings(small)).path("popularity", 0)
    payload = json.loads(path.read_text())
    result = payload["result"]
    result["per_user"] = {m: [1.0] * len(v) for m, v in result["per_user"].items()}
    result["test"] = dict.fromkeys(result["per_user"], 1.0)
    payload["sha256"] = cache._digest(payload["key"], result)
    path.write_text(json.dumps(payload))
    again = run_experiment(small, ["popularity"], **kw)
    assert again.computed == [] and again.results[0].test["ADG"] == 1.0


def test_cache_is_tied_to_the_code(small, tmp_path, monkeypatch):
    kw = dict(folds=1, cache_dir=tmp_path, dataset="small", show_progress=False)
    run_experiment(small, ["popularity"], **kw)
    assert run_experiment(small, ["popularity"], **kw).computed == []
    monkeypatch.setattr(runner, "code_fingerprint", lambda: "another version")
    assert run_experiment(small, ["popularity"], **kw).computed == [("popularity", 0)]


def _settings(X):
    return dict(
        dataset="small",
        data=cache.data_fingerprint(X),
        protocol="standard",
        budget="quick",
        seed=0,
        val=0.1,
        test=0.2,
        exclude_top=None,
        k=10,
        code=cache.code_fingerprint(),
    )


def test_parallel_jobs_give_the_same_results(small):
    one = run_experiment(small, ["popularity", "item-p"], folds=2, show_progress=False)
    two = run_experiment(small, ["popularity", "item-p"], folds=2, jobs=2, show_progress=False)
    assert [(r.method, r.fold, r.params, r.test) for r in one.results] == [
        (r.method, r.fold, r.params, r.test) for r in two.results
    ]


# ----------------------------------------------------------------------------- tuning and skipping
class _Fake:
    """Scores validation items ``s`` and others ``U(0, 1)`` noise: validation ADG grows with ``s``,
    a known function of the setting (optimum k=50 at the default lam, then lam=0.1)."""

    QUALITY = {10: 0.3, 50: 0.9, 100: 0.6}
    LAM = {1.0: 1.0, 0.1: 1.1, 10.0: 0.5}
    fits = []

    def __init__(self, k=10, lam=1.0):
        self.k, self.lam = k, lam

    def fit(self, X, validation):
        _Fake.fits.append((self.k, self.lam))
        self.V = validation.toarray()
        self.noise = np.random.default_rng(0).random(X.shape)
        return self

    def with_k(self, k):
        clone = _Fake(k, self.lam)
        clone.V, clone.noise = self.V, self.noise
        return clone

    def score(self, ids):
        s = self.QUALITY[self.k] * self.LAM[self.lam]
        return s * self.V[ids] + (1 - self.V[ids]) * self.noise[ids]


def test_two_level_tuning_finds_the_known_optimum(small, monkeypatch):
    monkeypatch.setitem(
        METHODS,
        "fake",
        Method(
            "fake",
            _Fake,
            "k",
            {"quick": (10, 50, 100)},
            {"quick": ({"lam": 1.0}, {"lam": 0.1}, {"lam": 10.0})},
            uses_validation=True,
            threaded=False,
        ),
    )
    _Fake.fits = []
    train, val, _ = next(split.folds(small, 1))
    params, model, trials = tune("fake", train, val)
    assert params == {"k": 50, "lam": 0.1} and (model.k, model.lam) == (50, 0.1)
    assert [(t["level"], t["params"]) for t in trials] == [
        (1, {"lam": 1.0, "k": 10}),
        (1, {"lam": 1.0, "k": 50}),
        (1, {"lam": 1.0, "k": 100}),
        (2, {"lam": 0.1, "k": 50}),
        (2, {"lam": 10.0, "k": 50}),
    ]
    adg = [t["validation"] for t in trials]
    assert adg[1] > adg[2] > adg[0] and adg[3] > adg[1] > adg[4]
    # level 1 fitted once at the largest k (with_k), level 2 once per non-default setting
    assert _Fake.fits == [(100, 1.0), (50, 0.1), (50, 10.0)]


class _Counted(_Fake):
    """A :class:`_Fake` that records how many fitted models are alive when it is fitted."""

    alive = weakref.WeakSet()
    seen = []

    def fit(self, X, validation):
        _Counted.seen.append(len(_Counted.alive))
        _Counted.alive.add(self)
        return super().fit(X, validation)


@pytest.mark.parametrize("keep_best", [True, False])
def test_tuning_without_keep_best_holds_one_model_and_refits_the_chosen(small, monkeypatch, keep_best):
    grid = {"quick": (1.0, 0.1, 10.0)}  # the second is best: kept (or refitted) while the third is tried
    monkeypatch.setitem(
        METHODS,
        "counted",
        Method("counted", _Counted, "lam", grid, uses_validation=True, threaded=False, keep_best=keep_best),
    )
    _Fake.fits, _Counted.seen = [], []
    train, val, _ = next(split.folds(small, 1))
    params, model, trials = tune("counted", train, val)
    assert params == {"lam": 0.1} and model.lam == 0.1 and len(trials) == 3
    if keep_best:
        assert _Fake.fits == [(10, 1.0), (10, 0.1), (10, 10.0)] and _Counted.seen == [0, 1, 1]
    else:
        assert _Fake.fits == [(10, 1.0), (10, 0.1), (10, 10.0), (10, 0.1)] and _Counted.seen == [0, 0, 0, 0]


def test_skipped_methods_are_reported_not_fatal(small, monkeypatch, capsys):
    def missing(**params):
        raise ImportError("No module named 'lightfm'")

    class TooLarge(_Fake):
        def fit(self, X, validation=None):
            raise ValueError("EASE needs n_items <= 10")

    monkeypatch.setitem(METHODS, "missing", Method("missing", missing, threaded=False))
    monkeypatch.setitem(METHODS, "large", Method("large", TooLarge, threaded=False, skip_on=(ValueError,)))
    monkeypatch.setitem(METHODS, "broken", Method("broken", TooLarge, threaded=False))
    exp = run_experiment(small, ["popularity", "missing", "large"], folds=2, show_progress=False)
    assert [r.method for r in exp.results] == ["popularity", "popularity"]
    assert [(s.method, s.fold) for s in exp.skipped] == [("missing", 0), ("large", 0), ("missing", 1), ("large", 1)]
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "skipped missing: ImportError: No module named 'lightfm'",
        "skipped large: ValueError: EASE needs n_items <= 10",
    ]  # once per method
    summary = summarize(exp.results, METRICS, exp.skipped)
    table = format_table(summary, METRICS)
    assert "| n/a | missing | skipped | – | – | – | – |" in table
    assert "- large: skipped: ValueError: EASE needs n_items <= 10" in table
    with pytest.raises(ValueError, match="EASE needs"):  # not a skippable error for this method
        run_experiment(small, ["broken"], folds=1, show_progress=False)


# ----------------------------------------------------------------------------- grids
def test_every_method_has_grids_per_budget():
    for m in METHODS.values():
        for budget in ("quick", "paper"):
            assert m.main_settings(budget) and m.secondary_settings(budget, m.main_settings(budget)[0])
            secondary = m.secondary.get(budget, ())
            assert len(secondary) == len({json.dumps(s, sort_keys=True) for s in secondary})
    assert get_method("item-p").main_values("paper") == (10, 20, 50, 100, 200, 500, 1000)
    assert get_method("BPR").main_values("paper") == (5, 10, 20, 50, 100, 200)
    assert get_method("FEBRi-SLIM").defaults("paper")["max_iter"] == 2_000_000
    assert {s["regularization"] for s in get_method("FEBRu-KUNN").secondary["paper"]} == {1e-4, 1e-3, 1e-2, 1e-1}
    assert {s["l1"] for s in get_method("SLIM").secondary["paper"]} == {10.0, 1.0, 0.1}
    # the dissertation's a in {1, 0.1, 0.01, 0.001} is implicit's alpha = 1 + a (models.ALS)
    assert {round(s["alpha"] - 1, 12) for s in get_method("ALS").secondary["paper"]} == {1.0, 0.1, 0.01, 0.001}
    assert {s["regularization"] for s in get_method("ALS").secondary["quick"]} == {1.0, 10.0, 100.0}


def test_grid_drops_k_beyond_the_catalogue():
    item_p = get_method("item-p")
    assert all(p["k"] <= 59 for p in item_p.main_settings("quick", (1000, 60)))
    assert item_p.main_settings("quick", (1000, 10)) == ({"k": 9},)
    assert get_method("user-p").main_settings("quick", (30, 1000)) == ({"k": 20},)
    assert get_method("user-p").main_settings("quick", (15, 1000)) == ({"k": 14},)
    assert get_method("FEBRiu-cos").main_values("quick", (40, 1000)) == (39,)
    assert get_method("popularity").main_settings("quick", (5, 5)) == ({},)
    assert get_method("ALS").main_values("quick", (5, 5)) == (20, 50, 100)  # not a neighbourhood size


def test_stacking_judges_its_validation_by_the_protocols_selection_metric():
    """FEBR-stack's constructor arguments: its tuned bases, and the protocol's selection metric as FEBR's
    own validation metric: ADG under the holdout protocols (not ``FEBR()``'s default, NDCG@20), the
    fixed protocol's REC@k."""
    done = {"KUNN": _result("KUNN", 0, 0.2), "item-p": _result("item-p", 0, 0.3)}  # settings {"k": 10}
    stack = get_method("FEBR-stack")
    standard = tuning.stack_context(stack, done, None, None, selection_metric("standard", 10))
    assert standard["validation_metric"] == "ADG" and [n for n, _ in standard["bases"]] == ["KUNN", "item-p"]
    fixed = tuning.stack_context(stack, done, None, None, selection_metric("fixed", 20))
    assert fixed == {**standard, "validation_metric": "REC@20"}
    model = tuning.build(stack, {}, 0, 1, fixed)
    assert model.validation_metric == "REC@20" and tuning.stack_context(get_method("EASE"), done) == {}


# ----------------------------------------------------------------------------- table writer
def _result(method, fold, adg, per_user=None, users=None):
    test = dict.fromkeys(METRICS, adg)
    per_user = {m: np.asarray(per_user if per_user is not None else [adg] * 3, dtype=float) for m in METRICS}
    return FoldResult(
        method,
        fold,
        {"k": 10},
        adg,
        test,
        dict.fromkeys(METRICS, 0.01),
        per_user=per_user,
        users=np.arange(3) if users is None else np.asarray(users),
    )


def test_table_writer_means_stderr_and_bold():
    results = [_result("a", 0, 0.2), _result("a", 1, 0.4), _result("b", 0, 0.1), _result("b", 1, 0.1)]
    summary = summarize(results, METRICS)
    a = summary.set_index("method").loc["a"]
    assert a["ADG"] == pytest.approx(0.3)
    assert a["ADG se"] == pytest.approx(np.std([0.2, 0.4], ddof=1) / np.sqrt(2))
    table = format_table(summary, METRICS, digits=3)
    assert table.splitlines() == [
        "| affinity | method | ADG | REC@10 | MAP | NDCG | ATOP |",
        "|---|---|---:|---:|---:|---:|---:|",
        "| n/a | a | " + " | ".join(["**0.300 (0.100)**"] * 5) + " |",
        "| n/a | b | " + " | ".join(["0.100 (0.000)"] * 5) + " |",
    ]
    one_fold = summarize([_result("c", 0, 0.5)], METRICS)
    assert one_fold.loc[0, "ADG se"] == 0.01  # one fold: the per-user standard error


def _two_methods():
    rng = np.random.default_rng(0)
    a0, a1 = rng.random(30) + 0.2, rng.random(25) + 0.2
    b0, b1 = rng.random(30), rng.random(25)
    return [
        _result("item-p", 0, a0.mean(), a0, np.arange(30)),
        _result("item-p", 1, a1.mean(), a1, np.arange(5, 30)),
        _result("KUNN", 0, b0.mean(), b0, np.arange(30)),
        # KUNN lacks user 5 in fold 1: the pairs are the (fold, user) keys both have
        _result("KUNN", 1, b1[1:].mean(), b1[1:], np.arange(6, 30)),
    ], (a0, a1, b0, b1)


def test_wilcoxon_pools_users_over_folds_and_matches_scipy():
    results, (a0, a1, b0, b1) = _two_methods()
    summary = summarize(results, METRICS)
    tests = paired_tests(results, summary, METRICS)
    expected = stats.wilcoxon(np.concatenate([a0, a1[1:]]), np.concatenate([b0, b1[1:]])).pvalue
    assert tests["ADG"] == {"best": "item-p", "runner_up": "KUNN", "p_value": pytest.approx(expected), "n_pairs": 54}
    assert expected < 0.05
    assert pooled(results, "KUNN", "ADG")[(1, 6)] == b1[1]
    table = format_table(summary, METRICS, tests)
    lines = table.splitlines()
    assert lines[2].startswith("| cosine | item-p | **") and lines[2].count("**†") == 5
    assert lines[3].startswith("| KUNN | KUNN | ") and "**" not in lines[3]
    assert lines[4] == "| | Wilcoxon p (best vs runner-up) | " + " | ".join([f"{expected:.2g}"] * 5) + " |"
    # no marker when the difference is not significant
    same = [_result("x", 0, 0.5, [0.1, 0.9, 0.5]), _result("y", 0, 0.4, [0.2, 0.8, 0.2])]
    s2 = summarize(same, METRICS)
    t2 = paired_tests(same, s2, METRICS)
    assert t2["ADG"]["p_value"] == pytest.approx(stats.wilcoxon([0.1, 0.9, 0.5], [0.2, 0.8, 0.2]).pvalue)
    assert "†" not in format_table(s2, METRICS, t2).splitlines()[2]


def test_write_outputs_files(tmp_path):
    results, _ = _two_methods()
    skipped = [Skipped("EASE", 0, "ValueError: too many items")]
    summary = summarize(results, METRICS, skipped)
    tests = paired_tests(results, summary, METRICS)
    table = format_table(summary, METRICS, tests)
    meta = {"dataset": "toy", "protocol": "standard", "folds": 2, "budget": "quick"}
    paths = write_outputs(tmp_path, Experiment(results, skipped, []), summary, tests, table, meta, METRICS)
    assert {p.name for p in paths} >= {
        "table.md",
        "summary.csv",
        "summary.json",
        "results.csv",
        "tuning.csv",
        "wilcoxon.csv",
        "ADG.png",
        "REC_at_10.png",
    }
    csv = pd.read_csv(tmp_path / "summary.csv")
    assert list(csv["method"]) == ["item-p", "KUNN", "EASE"]
    assert csv.loc[0, "ADG"] == pytest.approx(summary.loc[0, "ADG"]) and np.isnan(csv.loc[2, "ADG"])
    payload = json.loads((tmp_path / "summary.json").read_text())
    assert payload["wilcoxon"]["ADG"]["p_value"] == pytest.approx(tests["ADG"]["p_value"])
    assert payload["skipped"] == [{"method": "EASE", "fold": 0, "reason": "ValueError: too many items"}]
    assert payload["summary"][2]["ADG"] is None and payload["params"]["KUNN"] == {"0": {"k": 10}, "1": {"k": 10}}
    assert table in (tmp_path / "table.md").read_text()
    w = pd.read_csv(tmp_path / "wilcoxon.csv")
    assert list(w["metric"]) == METRICS and (w["best"] == "item-p").all()
    long = pd.read_csv(tmp_path / "results.csv")
    assert len(long) == 4 * len(METRICS)


def test_fold_result_json_round_trip():
    r = _result("a", 1, 0.25, [0.1, np.nan, 0.4])
    r.trials = [{"level": 1, "params": {"k": 10}, "validation": 0.2, "fit_seconds": 0.5}]
    back = FoldResult.from_json(json.loads(json.dumps(r.to_json())))
    assert (back.method, back.fold, back.params, back.test, back.trials) == (
        r.method,
        r.fold,
        r.params,
        r.test,
        r.trials,
    )
    np.testing.assert_array_equal(back.per_user["ADG"], r.per_user["ADG"])
    assert back.users.dtype == np.int64


class _Interrupt(Exception):
    pass


def test_interrupted_tuning_resumes_at_the_next_setting(small, tmp_path, monkeypatch):
    monkeypatch.setitem(
        METHODS,
        "fake",
        Method(
            "fake",
            _Fake,
            "k",
            {"quick": (10, 50, 100)},
            {"quick": ({"lam": 1.0}, {"lam": 0.1}, {"lam": 10.0})},
            uses_validation=True,
            threaded=False,
        ),
    )
    train, val, test = next(split.folds(small, 1))
    _Fake.fits = []
    whole = tuning.tune_and_test("fake", train, val, test)
    log = UnitCache(tmp_path, **_settings(small)).trial_log("fake", 0)
    append = log.append

    def interrupted(trial):  # the fifth setting is interrupted before it is logged
        if len(log.trials) == 4:
            raise _Interrupt
        append(trial)

    monkeypatch.setattr(log, "append", interrupted)
    _Fake.fits = []
    with pytest.raises(_Interrupt):
        tuning.tune_and_test("fake", train, val, test, log=log)
    assert _Fake.fits == [(100, 1.0), (50, 0.1), (50, 10.0)] and len(log.trials) == 4
    monkeypatch.setattr(log, "append", append)
    _Fake.fits = []
    resumed = tuning.tune_and_test("fake", train, val, test, log=log)
    # only the unlogged setting is fitted, then the chosen one (logged, so without a model) again
    assert _Fake.fits == [(50, 10.0), (50, 0.1)]
    assert (resumed.params, resumed.test, resumed.validation) == (whole.params, whole.test, whole.validation)
    assert [t["params"] for t in resumed.trials] == [t["params"] for t in whole.trials]
    assert [t["validation"] for t in resumed.trials] == [t["validation"] for t in whole.trials]
    assert len(log.load()) == 5
    assert cache.TrialLog(log.path, {**log.key, "fold": 1}).load() == []  # another unit's key
    assert cache.TrialLog(log.path, log.key, resume=False).load() == []


def test_trial_log_is_dropped_when_the_unit_is_cached(small, tmp_path, capsys):
    kw = dict(folds=1, cache_dir=tmp_path, dataset="small", show_progress=False)
    cache = UnitCache(tmp_path, **_settings(small))
    log = cache.trial_log("item-p", 0)
    log.path.write_text("{broken")
    exp = run_experiment(small, ["item-p"], **kw)
    assert "ignoring unreadable trial log" in capsys.readouterr().err
    assert not log.path.exists() and cache.load("item-p", 0, exp.results[0].users).test == exp.results[0].test
    assert [p.name for p in tmp_path.iterdir()] == [cache.path("item-p", 0).name]


def test_stacking_method_gets_its_bases_tuned_on_the_fold(small, tmp_path, monkeypatch):
    tiny = Method(
        "FEBR-tiny",
        lambda **p: __import__("recsys_ltr").febr.FEBR(candidates=20, max_iter=2000, eval_every=1000, **p),
        uses_validation=True,
        seeded=True,
        stack_on=("item-p", "user-p", "nope-skipped"),
    )
    monkeypatch.setitem(METHODS, "FEBR-tiny", tiny)
    monkeypatch.setitem(
        METHODS, "nope-skipped", Method("nope-skipped", lambda **p: 1 / 0, skip_on=(ZeroDivisionError,))
    )
    seen = []
    original = febr_model.FEBR.fit

    def spy(self, X, y=None, **kw):
        seen.append((tuple((n, b.get_params()["k"]) for n, b in self.bases), self.label_exclude_top))
        return original(self, X, y, **kw)

    monkeypatch.setattr(febr_model.FEBR, "fit", spy)
    kw = dict(folds=1, protocol="novelty", exclude_top=10, cache_dir=tmp_path, dataset="small", show_progress=False)
    exp = run_experiment(small, ["FEBR-tiny"], **kw)
    chosen = {r.method: r.params for r in exp.results}
    # the bases were added and ran first; under the novelty protocol they have a second row, FEBR does not
    assert list(chosen) == ["item-p", "item-p (top-10 last)", "user-p", "user-p (top-10 last)", "FEBR-tiny"]
    assert seen and set(seen) == {((("item-p", chosen["item-p"]["k"]), ("user-p", chosen["user-p"]["k"])), 10)}
    assert [s.method for s in exp.skipped] == ["nope-skipped"]
    again = run_experiment(small, ["FEBR-tiny"], **kw)
    # cached with its bases (a skipped unit is not cached: it is retried)
    assert again.computed == [("nope-skipped", 0)] and again.results[-1].test == exp.results[-1].test


def test_the_ease_row_and_febrs_ease_base_solve_as_febr_does():
    """One EASE in the table: the row and FEBR-stack's base are both EASE() at its dense cutoff."""
    stacked = tuning.build(get_method("FEBR-stack"), {}, context={"bases": [["EASE", {"regularization": 5.0}]]})
    ((name, base),) = stacked.bases
    row = tuning.build(get_method("EASE"), {"regularization": 5.0})
    assert (
        name == "EASE"
        and base.get_params() == row.get_params()
        and row.dense_max_items == EASE().dense_max_items == 4096
    )


# ----------------------------------------------------------------------------- fixed split, novelty rows
def _parts(X):
    return split.holdout(X, val=0.1, test=0.2, random_state=3)


def test_fixed_protocol_tunes_on_valid_recall_and_refits_on_train_plus_valid(small):
    train, valid, test = parts = _parts(small)
    (res,) = run_experiment(small, ["item-p"], protocol="fixed", parts=parts, k=20, show_progress=False).results
    assert res.select == "REC@20" and list(res.per_user) == ["REC@20", "NDCG@20", "ADG", "MAP", "ATOP"]
    for t in res.trials:  # every setting scored by Recall@20 of its fit on train, on valid
        model = get_method("item-p").build(**t["params"]).fit(train)
        assert t["validation"] == pytest.approx(evaluate(model, train, valid, metrics=("REC@20",))["REC@20"])
    assert res.validation == max(t["validation"] for t in res.trials)
    union = (train + valid).tocsr()
    refit = get_method("item-p").build(**res.params).fit(union)
    expected = evaluate(refit, union, test, metrics=("REC@20", "NDCG@20", "ADG"))
    for m in ("REC@20", "NDCG@20", "ADG"):
        assert res.test[m] == pytest.approx(expected[m], rel=1e-12)
    np.testing.assert_array_equal(res.users, np.flatnonzero(np.diff(test.indptr)))


def test_fixed_protocol_checks_its_parts(small):
    train, valid, test = _parts(small)
    run = partial(run_experiment, small, ["popularity"], show_progress=False)
    with pytest.raises(ValueError, match="needs parts"):
        run(protocol="fixed")
    with pytest.raises(ValueError, match="disjoint and hold exactly"):
        run(protocol="fixed", parts=(train + test, valid, test))
    with pytest.raises(ValueError, match="disjoint and hold exactly"):
        run(protocol="fixed", parts=(train, valid, valid))
    with pytest.raises(ValueError, match="shape"):
        run(protocol="fixed", parts=(train[:, :-1], valid, test))
    with pytest.raises(ValueError, match="belong to protocol='fixed'"):
        run(parts=(train, valid, test))


def test_novelty_rows_rank_the_excluded_top_items_last(small):
    exp = run_experiment(small, ["item-p"], folds=1, protocol="novelty", exclude_top=15, show_progress=False)
    plain, last = exp.results
    assert (plain.method, last.method) == ("item-p", "item-p (top-15 last)") and last.params == plain.params
    train, val, test = next(split.folds(small, 1, exclude_top=15))
    model = get_method("item-p").build(**plain.params).fit(train)
    top = split.top_items(small, 15)

    def pushed(users):
        scores = model.score(users)
        scores[:, top] = -np.inf
        return scores

    expected = evaluate(pushed, train, test, exclude=val)
    assert last.test["ADG"] == pytest.approx(expected["ADG"], rel=1e-12)
    assert last.test["ADG"] != plain.test["ADG"]
    # a top item is never a test item here, so ranking them last can only lift the test items
    assert np.all(last.per_user["ADG"] >= plain.per_user["ADG"] - 1e-12)


def test_top_items_are_the_most_popular_lowest_id_first():
    X = sp.csr_matrix(np.array([[1, 1, 0, 1], [0, 1, 1, 1], [0, 0, 1, 0]], dtype=float))
    np.testing.assert_array_equal(split.top_items(X, 3), [1, 2, 3])


def test_cli_fixed_protocol(tmp_path, monkeypatch, capsys):
    data = make_synthetic(n_users=200, n_items=120, factor_scale=3.0, random_state=5)
    parts = dict(zip(("train", "valid", "test"), _parts(data.matrix)))
    monkeypatch.setattr(datasets, "load_presplit", lambda name, data_dir=None: (data, parts))
    monkeypatch.setattr(datasets, "missing_files", lambda name, data_dir=None: [])  # CI has no gowalla
    out = tmp_path / "run"
    assert (
        main(
            [
                "--dataset",
                "gowalla",
                "--protocol",
                "fixed",
                "--models",
                "popularity,item-p",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    summary = json.loads((out / "fixed" / "summary.json").read_text())
    assert summary["meta"]["folds"] == 1 and summary["meta"]["k"] == 20 and summary["meta"]["select"] == "REC@20"
    assert "| method | REC@20 | NDCG@20 | ADG |" in (out / "fixed" / "table.md").read_text()
    with pytest.raises(SystemExit):
        main(["--dataset", "gowalla", "--protocol", "fixed", "--folds", "3", "--out", str(out), "--quiet"])
    assert "the fixed protocol has one split" in capsys.readouterr().err


# ----------------------------------------------------------------------------- what runs, what is shown
def _first_base(bases, validation_metric="ADG", num_threads=0):
    """A stand-in stacking method: its first base as it is (fast, and equal to that base's row)."""
    return bases[0][1]


def test_header_names_the_added_bases_and_the_table_marks_them(tmp_path, monkeypatch, capsys):
    fake = Method("stack-fake", _first_base, stack_on=("item-p", "user-p"))
    monkeypatch.setitem(METHODS, "stack-fake", fake)
    out = tmp_path / "run"
    argv = ["--dataset", "synthetic", "--folds", "1", "--models", "popularity,stack-fake", "--out", str(out)]
    assert main([*argv, "--quiet", "--log-level", "WARNING"]) == 0
    printed, err = capsys.readouterr()
    header = err.splitlines()[:3]
    assert header[0].startswith("synthetic: 1000 users x 500 items, ") and "standard protocol, 1 fold(s)" in header[0]
    assert header[1] == "runs 4 method(s): popularity, stack-fake; added item-p, user-p: bases of stack-fake"
    assert header[2].startswith("serial executor: 1 unit(s) at once")
    rows = {line.split(" | ")[1]: line for line in printed.splitlines() if line.startswith("| ")}
    assert set(rows) >= {"popularity", "stack-fake", "item-p°", "user-p°"}
    # stack-fake is item-p as tuned on the fold: the two rows are equal, and only the one asked for is the best
    assert "**" in rows["stack-fake"] and "**" not in rows["item-p°"] and "**" not in rows["user-p°"]
    plain = [cell.replace("**", "").replace("†", "") for cell in rows["stack-fake"].split(" | ")[2:]]
    assert plain == rows["item-p°"].split(" | ")[2:]
    assert "°: not asked for (--models): run as a base of stack-fake; not in the contest for the best" in printed
    summary = json.loads((out / "standard" / "summary.json").read_text())
    assert summary["meta"]["added"] == {"item-p": ["stack-fake"], "user-p": ["stack-fake"]}
    assert summary["wilcoxon"]["ADG"]["best"] == "stack-fake"
    assert {summary["wilcoxon"][m]["runner_up"] for m in summary["wilcoxon"]} == {"popularity"}


def _timed_synthetic():
    """The synthetic set with a time per positive that follows the planted factors loosely."""
    data = make_synthetic(n_users=200, n_items=120, factor_scale=3.0, random_state=5)
    rng = np.random.default_rng(0)
    return Interactions(data.matrix, timestamps=rng.integers(0, 10_000, data.nnz))


def test_temporal_protocol_tunes_on_the_earlier_part_and_refits_before_the_test_part(small):
    data = _timed_synthetic()
    parts = split.last_fraction(data, val=0.1, test=0.2)
    (res,) = run_experiment(data.matrix, ["item-p"], protocol="temporal", parts=parts, show_progress=False).results
    train, valid, test = parts
    assert res.select == "ADG" and list(res.per_user) == METRICS  # the holdout protocols' table and selection
    for t in res.trials:
        model = get_method("item-p").build(**t["params"]).fit(train)
        assert t["validation"] == pytest.approx(evaluate(model, train, valid, metrics=("ADG",))["ADG"])
    union = (train + valid).tocsr()
    refit = get_method("item-p").build(**res.params).fit(union)
    expected = evaluate(refit, union, test, metrics=("ADG", "REC@10"))
    assert res.test["ADG"] == pytest.approx(expected["ADG"], rel=1e-12)
    with pytest.raises(ValueError, match=r"protocol='temporal' needs parts=\(train, valid, test\), a time-ordered"):
        run_experiment(data.matrix, ["popularity"], protocol="temporal", show_progress=False)


def test_cli_temporal_protocol(tmp_path, monkeypatch, capsys):
    data = _timed_synthetic()
    monkeypatch.setattr(datasets, "load", lambda name, data_dir=None: data)
    monkeypatch.setattr(datasets, "missing_files", lambda name, data_dir=None: [])
    out = tmp_path / "run"
    argv = ["--dataset", "movielens-100k", "--protocol", "temporal", "--models", "popularity,item-p", "--out", str(out)]
    assert main([*argv, "--quiet"]) == 0
    summary = json.loads((out / "temporal" / "summary.json").read_text())
    meta = summary["meta"]
    assert (meta["protocol"], meta["folds"], meta["k"], meta["select"]) == ("temporal", 1, 10, "ADG")
    assert meta["split"] == "split.last_fraction(val=0.1, test=0.2, random_state=0)"
    results = pd.read_csv(out / "temporal" / "results.csv")
    assert set(results["method"]) == {"popularity", "item-p"} and set(results["fold"]) == {0}
    assert "| affinity | method | ADG | REC@10 |" in (out / "temporal" / "table.md").read_text()
    assert "movielens-100k, temporal protocol, mean (standard error over the test users of the single fold)" in (
        capsys.readouterr().out
    )
    with pytest.raises(SystemExit):
        main([*argv, "--folds", "3", "--quiet"])
    assert "--folds 3: the temporal protocol has one split" in capsys.readouterr().err


def test_outside_a_terminal_the_run_logs_a_line_per_unit(tmp_path):
    """stderr to a file (CI, nohup): the header, then one log line per finished unit (and the run's
    own); ``--log-level INFO`` adds a line per stage."""
    log = tmp_path / "stderr.txt"
    command = [sys.executable, "-m", "recsys_ltr.eval", "--dataset", "synthetic", "--folds", "2"]
    command += ["--models", "popularity,item-p", "--out", str(tmp_path / "run")]
    env = {**os.environ, "RECSYS_LTR_COMPILE_NOTICE": "0"}
    with open(log, "w") as stderr:
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, timeout=600)
    assert run.returncode == 0
    lines = log.read_text().splitlines()
    units = [line for line in lines if re.search(r"INFO recsys_ltr\.eval\.runner: \[\d/4\] ", line)]
    assert len(units) == 4, lines
    for fold in (0, 1):
        for method in ("popularity", "item-p"):
            assert any(f"{method} fold {fold} finished in " in line and "validation ADG 0." in line for line in units)
    assert any(re.search(r"item-p fold 0 finished in \d+\.\d s: k=\d+, validation ADG", line) for line in units)
    logged = [line for line in lines if " INFO " in line]
    assert all("recsys_ltr.eval.runner:" in line for line in logged) and len(logged) == len(units) + 1, logged
    assert "| affinity | method |" in run.stdout
    with open(log, "w") as stderr:  # --log-level INFO: every stage too
        info = [*command, "--log-level", "info", "--no-cache"]
        subprocess.run(info, stdout=subprocess.PIPE, stderr=stderr, env=env, timeout=600)
    lines = log.read_text().splitlines()
    for stage in ("item-p fold 1: tuning on validation ADG", "item-p fold 1: tuned in ", "item-p fold 1: tested on "):
        assert any(stage in line for line in lines), stage
    # --log-level WARNING: the header only
    with open(log, "w") as stderr:
        subprocess.run(
            [*command, "--log-level", "warning"], stdout=subprocess.PIPE, stderr=stderr, env=env, timeout=600
        )
    assert not [line for line in log.read_text().splitlines() if " INFO " in line]


def test_the_run_leaves_the_logging_configuration_as_it_found_it(tmp_path):
    root = logging.getLogger()
    before = (list(root.handlers), root.level, logging.getLogger("recsys_ltr").level)
    argv = ["--dataset", "synthetic", "--folds", "1", "--models", "popularity", "--out", str(tmp_path), "--quiet"]
    assert main([*argv, "--log-level", "DEBUG"]) == 0
    assert (list(root.handlers), root.level, logging.getLogger("recsys_ltr").level) == before


def test_an_exported_model_without_a_row_gets_one_at_its_defaults():
    """The command line finds the exported recommenders itself: every one has a row (or a reason in
    NO_ROW), and one whose tuned row is missing gets a row at its defaults."""
    from _helpers import exported_recommenders

    from recsys_ltr.eval.methods import NO_ROW, _rows_at_defaults
    from recsys_ltr.models import Popularity

    built = {getattr(m.factory, "func", m.factory).__name__ for m in METHODS.values()}
    assert exported_recommenders() - {"LightFMWARP"} <= built | set(NO_ROW)
    without = {name: m for name, m in METHODS.items() if name != "popularity"}
    (row,) = _rows_at_defaults(without).values()
    assert row.name == "Popularity" and isinstance(row.build(), Popularity) and not row.seeded
    assert _rows_at_defaults(METHODS) == {}
