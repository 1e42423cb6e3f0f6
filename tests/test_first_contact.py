"""What a new user meets first: the main job's outputs and messages, its help, its charts, and
progress bars on long fits (on when asked, or in a terminal; silent otherwise)."""

import logging
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from recsys_ltr import datasets
from recsys_ltr.datasets import ENV_VAR, make_synthetic
from recsys_ltr.eval.__main__ import build_parser, main, parse_methods
from recsys_ltr.eval.methods import METHODS
from recsys_ltr.eval.report import error_caption, metric_figure


# ----------------------------------------------------------------------------- the main job
def test_results_go_to_runs_by_default_and_one_fold_says_what_the_error_is(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["--dataset", "synthetic", "--folds", "1", "--models", "POPULARITY,Item-P", "--quiet"]) == 0
    out, err = capsys.readouterr()
    run = tmp_path / "runs" / "synthetic"
    assert "results go to runs/synthetic/" in err.splitlines()[0]
    assert (run / "standard" / "table.md").is_file() and list((run / "cache").glob("*.json"))
    caption = "mean (standard error over the test users of the single fold)"
    assert caption in out and "over 1 fold" not in out
    assert (
        (run / "standard" / "table.md")
        .read_text()
        .startswith("synthetic, standard protocol, 1 fold(s), quick budget: " + caption)
    )
    assert error_caption(3) == "standard error over 3 folds"


def test_without_data_the_first_line_says_what_is_missing_where_and_how_to_get_it(tmp_path, monkeypatch, capsys):
    home, work = tmp_path / "home", tmp_path / "a" / "work"
    work.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.chdir(work)
    assert main(["--models", "popularity", "--folds", "1", "--quiet"]) == 0
    out, err = capsys.readouterr()
    first = err.splitlines()[0]
    missing = home / ".cache" / "recsys_ltr" / "movielens-100k"
    assert first.startswith(f"NOTE: movielens-100k was not found (u.data, u.item, u.genre missing in {missing}; ")
    for part in ("$RECSYS_LTR_DATA is not set", "../shared/datasets does not exist", "SYNTHETIC",
                 "datasets.download('movielens-100k')", "--data-dir", "datasets/README.md"):  # fmt: skip
        assert part in first
    assert (out + err).count("NOTE:") == 1  # the note once, first on standard error
    assert "synthetic (SYNTHETIC data" in out[: out.index("| affinity | method |")]
    assert (work / "runs" / "synthetic" / "standard" / "summary.json").is_file()


def test_model_names_are_case_insensitive_with_hints(capsys):
    parser = build_parser()
    assert parse_methods(parser, "ease, ITEM-P,febri-slim,item-p") == ["EASE", "item-p", "FEBRi-SLIM"]
    assert parse_methods(parser, "ALL") == list(METHODS)
    with pytest.raises(SystemExit):
        parse_methods(parser, "itemp,xyzzy")
    err = capsys.readouterr().err
    assert "unknown model(s) itemp,xyzzy (itemp: did you mean item-p?)" in err


@pytest.mark.parametrize("columns", ["60", "100"])
def test_help_is_readable(columns, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", columns)
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "``" not in text
    assert not [line for line in text.splitlines() if re.search(r"\w-$", line)], "a word broken at a hyphen"
    words = set(re.findall(r"[\w.-]+", text))
    assert set(METHODS) <= words and set(datasets.list_datasets()) <= words and "synthetic" in words
    lines = text.splitlines()
    for label in ("standard protocol:", "novelty protocol:", "both protocols:"):
        i = next(i for i, line in enumerate(lines) if line.strip() == label)
        assert lines[i + 1].strip().startswith("python -m recsys_ltr.eval --dataset ")
    assert "--protocol novelty" in text and "--protocol both" in text


# ----------------------------------------------------------------------------- charts
@pytest.mark.parametrize("n_methods", [2, 20])
def test_chart_starts_at_zero_names_the_highlight_and_keeps_the_title(n_methods):
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(n_methods)
    means = 0.2 + 0.05 * rng.random(n_methods)
    summary = pd.DataFrame(
        {"method": [f"method-{i}" for i in range(n_methods)], "ADG": means, "ADG se": 0.002 * np.ones(n_methods)}
    )
    title = "ADG\nmovielens-1m-implicit, novelty protocol, 3 fold(s), paper budget"
    fig = metric_figure(summary, "ADG", title, error_caption(3))
    try:
        ax = fig.axes[0]
        assert ax.get_ylim()[0] == 0.0
        legend = fig.legends[0]
        assert [t.get_text() for t in legend.get_texts()] == ["best mean", "other methods"]
        assert "standard error over 3 folds" in legend.get_title().get_text()
        bars = ax.patches
        best = int(np.argmax(means))
        assert bars[best].get_facecolor() == legend.legend_handles[0].get_facecolor()
        renderer = fig.canvas.get_renderer()
        for artist in (ax.title, legend):
            box = artist.get_window_extent(renderer)
            assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1
    finally:
        plt.close(fig)


# ----------------------------------------------------------------------------- progress bars
@pytest.fixture(scope="module")
def feedback():
    return make_synthetic(n_users=120, n_items=80, factor_scale=3.0, random_state=1).matrix


def _learners(feedback):
    from recsys_ltr.ltr import LGMML, RPCMTL, ListMLE, ListNet
    from recsys_ltr.metric_learning import FRML, GMML, MLR, RMLR
    from recsys_ltr.models import ALS, BPR, KUNN, SLIM, ItemKNN, RP3beta, UserKNN
    from recsys_ltr.neighbors import ContentAffinity

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5))
    y = np.repeat([0, 1, 2], 20)
    qid = np.repeat(np.arange(6), 10)
    grades = np.tile([2, 1, 0, 0, 0, 1, 0, 0, 0, 0], 6)
    dense = rng.random((80, 6))
    return [
        ("cosine item affinity", lambda p: ItemKNN(k=10, show_progress=p).fit(feedback)),
        ("cosine user affinity", lambda p: UserKNN(k=10, show_progress=p).fit(feedback)),
        ("kunn item affinity", lambda p: KUNN(k=10, show_progress=p).fit(feedback)),
        ("SLIM", lambda p: SLIM(k=10, show_progress=p).fit(feedback)),
        ("RP3β", lambda p: RP3beta(k=10, show_progress=p).fit(feedback)),
        ("", lambda p: ALS(factors=4, iterations=2, num_threads=1, show_progress=p).fit(feedback)),
        ("", lambda p: BPR(factors=4, iterations=2, num_threads=1, show_progress=p).fit(feedback)),
        ("FRML", lambda p: FRML(n_components=2, max_iter=20, random_state=0, show_progress=p).fit(X, y)),
        ("GMML", lambda p: GMML(random_state=0, show_progress=p).fit(X, y)),
        ("MLR", lambda p: MLR(num_threads=1, show_progress=p).fit(X, y)),
        ("RMLR", lambda p: RMLR(num_threads=1, show_progress=p).fit(X, y)),
        (
            "L-GMML",
            lambda p: LGMML(n_metrics=2, queries_per_metric=2, iterations=2, show_progress=p).fit(X, grades, qid),
        ),
        ("ListMLE", lambda p: ListMLE(iterations=2, random_state=0, show_progress=p).fit(X, grades, qid)),
        ("ListNet", lambda p: ListNet(iterations=2, random_state=0, show_progress=p).fit(X, grades, qid)),
        ("RPCMTL", lambda p: RPCMTL(n_clusters=2, iterations=2, random_state=0, show_progress=p).fit(X, grades, qid)),
        ("content affinity", lambda p: ContentAffinity(k=5, show_progress=p).fit(dense)),
    ]


def test_every_long_fit_shows_a_bar_when_asked_and_is_silent_by_default(feedback, capsys):
    assert not sys.stderr.isatty()  # pytest captures: None means off here
    for name, fit in _learners(feedback):
        fit(None)
        assert capsys.readouterr().err == "", name
        fit(True)
        err = capsys.readouterr().err
        assert err and name in err, (name, err[-200:])
        with pytest.raises(TypeError, match="show_progress must be True, False or None"):
            fit("yes")


def test_none_means_on_in_a_terminal(feedback, monkeypatch, capsys):
    from recsys_ltr.models import ItemKNN

    class Terminal:
        def __init__(self, stream):
            self.stream = stream

        def isatty(self):
            return True

        def __getattr__(self, name):
            return getattr(self.stream, name)

    monkeypatch.setattr(sys, "stderr", Terminal(sys.stderr))
    assert ItemKNN(k=5)._progress() is True
    assert ItemKNN(k=5, show_progress=False)._progress() is False


def test_long_fits_log_their_start_and_end_at_info(feedback, caplog):
    """Outside a terminal there is no bar: ALS, BPR, EASE (both solvers), SLIM and GF-CF say when a
    fit starts (size, setting) and ends (seconds) on their module's logger, not per iteration."""
    from recsys_ltr.models import ALS, BPR, BSPM, EASE, GFCF, SLIM, ChebyCF, ItemKNN

    fits = {
        "recsys_ltr.models.factorization": [ALS(factors=4, iterations=3, num_threads=1), BPR(factors=4, iterations=3)],
        "recsys_ltr.models.ease": [EASE(solver="dense"), EASE(solver="sparse", k=10)],
        "recsys_ltr.models.slim": [SLIM(k=10)],
        "recsys_ltr.models.graph_filter": [GFCF(factors=4), BSPM(factors=4), ChebyCF(order=2, factors=4)],
    }
    for module, models in fits.items():
        for model in models:
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="recsys_ltr"):
                model.fit(feedback)
            lines = [r.getMessage() for r in caplog.records if r.name == module]
            name = type(model).__name__
            assert len(lines) == 2, lines
            assert lines[0].startswith(f"{name} fit: 120 users x 80 items, {feedback.nnz} positives; ")
            assert re.fullmatch(rf"{name} fit: done in \d+\.\d\d s( \((dense|sparse) solve\))?", lines[1]), lines[1]
            if name == "EASE":
                assert lines[1].endswith(f"({model.solver} solve)")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="recsys_ltr"):
        ItemKNN(k=5).fit(feedback)  # a fast fit stays quiet
    assert not caplog.records


def test_progress_does_not_change_results(feedback):
    from recsys_ltr.ltr import LGMML
    from recsys_ltr.models import SLIM, ItemKNN

    for make in (lambda p: ItemKNN(k=10, show_progress=p), lambda p: SLIM(k=10, show_progress=p)):
        a, b = make(False).fit(feedback), make(True).fit(feedback)
        assert (a.item_affinity_.matrix != b.item_affinity_.matrix).nnz == 0
    rng = np.random.default_rng(3)
    X, qid = rng.normal(size=(60, 4)), np.repeat(np.arange(6), 10)
    grades = np.tile([1, 0, 0, 2, 0, 0, 0, 1, 0, 0], 6)
    fits = [
        LGMML(n_metrics=2, queries_per_metric=3, iterations=3, random_state=0, show_progress=p).fit(X, grades, qid)
        for p in (False, True)
    ]
    assert np.array_equal(fits[0].phi_, fits[1].phi_) and fits[0].warp_stats_ == fits[1].warp_stats_


def test_the_run_bar_replaces_the_fits_bars(monkeypatch):
    """Inside ``python -m recsys_ltr.eval`` the models fit quietly; the run's bar counts units."""
    import dataclasses

    from recsys_ltr.eval import runner

    seen = []
    method = METHODS["item-p"]

    def spy(**params):
        model = method.factory(**params)
        seen.append(model)
        return model

    monkeypatch.setitem(METHODS, "item-p", dataclasses.replace(method, factory=spy))
    X = sp.csr_matrix(make_synthetic(n_users=100, n_items=60, density=0.2, random_state=2).matrix)
    runner.run_experiment(X, ["item-p"], folds=1, show_progress=False)
    fitted = [m for m in seen if hasattr(m, "user_items_")]
    assert fitted and all(m.show_progress is False for m in fitted)


# ----------------------------------------------------------------------------- first compile
@pytest.mark.parametrize("silenced", [False, True])
def test_a_one_line_notice_appears_once_and_only_while_kernels_compile(tmp_path, silenced):
    from recsys_ltr._compile_notice import MESSAGE

    script = (
        "import numpy as np\n"
        "from recsys_ltr._topk import sort_ascending, sort_best_first\n"
        "sort_ascending(np.array([3, 1, 2]))\n"
        "sort_best_first(np.array([1, 0]), np.array([0.5, 1.0]), np.zeros(2))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "RECSYS_LTR_COMPILE_NOTICE": "10"[silenced]}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    first, second = (r.stderr.count(MESSAGE) for r in runs)
    assert (first, second) == ((0, 0) if silenced else (1, 0))  # cold cache: once; warm cache: never


def test_the_tours_kernels_compile_once_serially_not_again_for_a_literal_zero(tmp_path):
    # a counter starting at a literal 0 makes numba compile the helper it reaches twice (for
    # Literal[int](0), then int64): 0.1-0.3 s each on first use (recsys_ltr._topk.ZERO); and calls
    # this small run serially, without the parallel versions' parfor compile (recsys_ltr._parallel)
    script = (
        "import numpy as np, scipy.sparse as sp\n"
        "from numba.core import event\n"
        "seen = []\n"
        "class Listener(event.Listener):\n"
        "    def on_start(self, ev): pass\n"
        "    def on_end(self, ev):\n"
        "        d = ev.data['dispatcher']; f = d.py_func; p = d.targetoptions.get('parallel')\n"
        "        if f.__module__.startswith('recsys_ltr'): seen.append(f'{f.__qualname__}{ev.data[\"args\"]} {p}')\n"
        "event.register('numba:compile', Listener())\n"
        "from recsys_ltr import split\n"
        "from recsys_ltr.datasets import make_synthetic\n"
        "from recsys_ltr.metrics import evaluate\n"
        "from recsys_ltr.models import ItemKNN\n"
        "X = sp.csr_matrix(make_synthetic(n_users=80, n_items=50, density=0.2, random_state=0).matrix)\n"
        "train, _, test = split.holdout(X, val=0.0, test=0.2, random_state=0)\n"
        "model = ItemKNN(k=5).fit(train)\n"
        "model.recommend(np.arange(80), train, N=3)\n"
        "evaluate(model, train, test, k=3)\n"
        "print('\\n'.join(seen))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "RECSYS_LTR_COMPILE_NOTICE": "0"}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    compiled = run.stdout.splitlines()
    assert any(line.startswith("heap_offer") for line in compiled)  # the helpers did compile
    assert not [line for line in compiled if "Literal[int]" in line]
    assert any(line.startswith("_knn_kernel_serial") for line in compiled)
    assert not [line for line in compiled if line.endswith(" True")]  # no parallel=True kernel


@pytest.mark.parametrize("preset", [None, "ACTIVE"])
def test_openmp_threads_sleep_between_parallel_loops_unless_the_user_chose(preset):
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    if preset:
        env["OMP_WAIT_POLICY"] = preset
    script = "import os, recsys_ltr; print(os.environ['OMP_WAIT_POLICY'])"
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == (preset or "PASSIVE")
