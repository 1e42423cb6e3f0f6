import json

import numpy as np
import pandas as pd
import pytest

from recsys_ltr import split
from recsys_ltr.datasets import ENV_VAR, make_synthetic
from recsys_ltr.eval.__main__ import main
from recsys_ltr.eval.methods import METHODS, get_method
from recsys_ltr.eval.report import format_table, summarize
from recsys_ltr.eval.runner import FoldResult, run_experiment

METRICS = ["ADG", "REC@10", "MAP", "NDCG", "ATOP"]


def test_cli_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["--dataset", "synthetic", "--folds", "2", "--models", "popularity,item-p",
                 "--out", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "synthetic (SYNTHETIC data" in printed
    assert "| popularity |" in printed and "| item-p |" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["dataset"] == "synthetic" and summary["meta"]["folds"] == 2
    rows = pd.read_csv(out / "results.csv")
    assert set(rows["method"]) == {"popularity", "item-p"}
    assert set(rows["fold"]) == {0, 1}
    assert rows["value"].between(0, 1).all()
    # item-p uses the latent structure the generator plants; popularity cannot.
    table = {r["method"]: r for r in summary["summary"]}
    assert table["item-p"]["ADG"] > table["popularity"]["ADG"]
    assert (out / "table.md").read_text().startswith("| method |")


def test_novelty_protocol_holds_out_no_popular_item():
    X = make_synthetic(n_users=300, n_items=200, seed=1).matrix
    res = run_experiment(X, ["popularity"], folds=1, protocol="novelty", exclude_top=20, show_progress=False)
    assert len(res) == 1 and 0 <= res[0].test["ADG"] <= 1


def test_runner_picks_setting_on_validation():
    X = make_synthetic(n_users=300, n_items=200, seed=2).matrix
    (res,) = run_experiment(X, ["item-p"], folds=1, show_progress=False)
    assert res.params["k"] in {p["k"] for p in get_method("item-p").grid("quick")}
    assert res.per_user["ADG"].shape == res.users.shape


def test_bad_arguments():
    X = make_synthetic(n_users=50, n_items=40, seed=3).matrix
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        run_experiment(X, ["nope"], show_progress=False)
    with pytest.raises(ValueError, match="protocol"):
        run_experiment(X, ["popularity"], protocol="other", show_progress=False)
    with pytest.raises(ValueError, match="folds"):
        run_experiment(X, ["popularity"], folds=0, show_progress=False)
    with pytest.raises(SystemExit):
        main(["--protocol", "bogus"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--folds", "0"], "--folds: must be >= 1, got 0"),
        (["--k", "x"], "--k: invalid int value: 'x'"),
        (["--models", "popularity,nope"], "unknown model(s) nope; known: popularity"),
        (["--models", ","], "unknown model(s) (none given)"),
        (["--dataset", "nope"], "unknown data set 'nope'"),
        (["--dataset", "movielens-100k", "--data-dir", "/nonexistent"], "not found (searched /nonexistent"),
        (["--data-dir", "/nonexistent"], "movielens-100k is not in the data directory /nonexistent"),
    ],
)
def test_cli_bad_input_is_a_one_line_usage_error(argv, message, capsys, monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--quiet"])
    assert exc.value.code == 2  # argparse's usage error, not a traceback
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # after the usage: one error line, no traceback
    assert last.startswith("python -m recsys_ltr.eval: error: ") and message in last
    assert "Traceback" not in err


def test_env_data_dir_without_the_default_set_raises(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    with pytest.raises(SystemExit):
        main(["--models", "popularity", "--quiet"])
    assert f"not in the data directory {tmp_path}" in capsys.readouterr().err


def test_runner_folds_are_split_folds(monkeypatch):
    X = make_synthetic(n_users=60, n_items=40, seed=4).matrix
    seen = []
    monkeypatch.setattr("recsys_ltr.eval.runner.tune_and_test",
                        lambda name, tr, va, te, **kw: seen.append((tr, va, te)) or _result(name, -1, 0.0))
    run_experiment(X, ["popularity"], folds=2, seed=7, show_progress=False)
    for got, want in zip(seen, split.folds(X, n_folds=2, seed=7), strict=True):
        for a, b in zip(got, want):
            assert (a != b).nnz == 0


def test_every_method_has_a_grid_per_budget():
    for m in METHODS.values():
        assert m.grid("quick") and m.grid("paper")


def _result(method, fold, adg):
    test = {m: adg for m in METRICS}
    return FoldResult(method, fold, {}, adg, test, {m: 0.01 for m in METRICS},
                      per_user={}, users=np.arange(3))


def test_table_writer_means_stderr_and_bold():
    results = [_result("a", 0, 0.2), _result("a", 1, 0.4), _result("b", 0, 0.1), _result("b", 1, 0.1)]
    summary = summarize(results, METRICS)
    a = summary.set_index("method").loc["a"]
    assert a["ADG"] == pytest.approx(0.3)
    assert a["ADG se"] == pytest.approx(np.std([0.2, 0.4], ddof=1) / np.sqrt(2))
    table = format_table(summary, METRICS, digits=3)
    assert "| a | **0.300 (0.100)**" in table
    assert "| b | 0.100 (0.000)" in table
    one_fold = summarize([_result("c", 0, 0.5)], METRICS)
    assert one_fold.loc[0, "ADG se"] == 0.01  # one fold: the per-user standard error


def test_grid_drops_k_beyond_the_catalogue():
    item_p = get_method("item-p")
    assert all(p["k"] <= 59 for p in item_p.grid("quick", (1000, 60)))
    assert item_p.grid("quick", (1000, 10)) == ({"k": 9},)
    assert get_method("user-p").grid("quick", (30, 1000)) == ({"k": 20},)
    assert get_method("user-p").grid("quick", (15, 1000)) == ({"k": 14},)
    assert get_method("popularity").grid("quick", (5, 5)) == ({},)
