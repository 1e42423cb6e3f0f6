"""Every benchmark script runs in CI: its whole path -- imports, models, measurements, report -- on
seeded stand-ins of the data sets (``tests/standin``), each script in its own process with small
settings (:data:`SMOKE`).  A removed or renamed name a script uses (``bench_ease.py`` imported an
EASE helper for months after it was gone) fails here, not on the day somebody reruns a table.  A
script that needs a peer of the ``bench`` extra that is not installed is skipped, naming it."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("*.py") if not p.name.startswith("_"))

#: Each script's small settings (every script is listed: a new one must say how it runs small).
SMOKE = {
    "als_counts.py": [],
    "bench_anchor_models.py": ["--runs", "1", "--skip-quality"],
    "bench_ease.py": ["--runs", "1", "--lapack-n", "64", "--gowalla-lams", "100", "--skip-peer"],
    "bench_eval.py": ["--runs", "1", "--ref-users", "20"],
    "bench_febr.py": ["--datasets", "movielens-1m-implicit", "--repeats", "1",  # LightFM: the bench extra's
                      "--methods", "FEBR-stack", "FEBR", "ALS", "ALS()", "tuned:ALS", "tuned:EASE"],
    "bench_frml.py": ["--tasks", "wine", "--runs", "1", "--no-peers"],
    "bench_ltr.py": ["--folds", "1"],
    "bench_mlr.py": ["--datasets", "iris", "--dims", "32", "--splits", "1", "--digits-splits", "1", "--no-peers"],
    "bench_neighbors.py": ["--runs", "1", "--skip-quality"],
    "bench_regression.py": ["--baseline", "HEAD", "--runs", "1", "--calls", "1", "--only", "knn-fit"],
    "bench_scale.py": ["--only", "synthetic", "--target-nnz", "3000", "--eval-users", "20", "--workers", "1",
                       "--febr-on", "", "--overhead-tasks", "4", "--k", "10"],
    "bench_throughput.py": ["--runs", "1"],
    "bench_warp.py": ["--repeats", "1"],
    "bench_weighting.py": ["--folds", "1"],
    "cold_start.py": ["--datasets", "lastfm-2k", "--runs", "1", "--items", "160", "--max-tags", "150", "--k", "5"],
    "defaults_als_bpr.py": ["--datasets", "movielens-100k"],
    "febr_defaults.py": ["--datasets", "movielens-100k", "--seeds", "0"],
    "febr_tail_choice.py": ["movielens-100k", "--protocols", "standard", "--methods", "FEBR-stack"],
    "febr_wins.py": [],
    "fuzz_campaign.py": ["--cases", "10", "--families", "values,cache", "--boundscheck", "2", "--jobs", "1", "--batch", "50"],
    "gowalla_graph_filters.py": [],
    "gowalla_febr.py": ["--threads", "1"],
    "gowalla_split_shift.py": ["--users", "30", "--models", "GF-CF,user-p", "--febr"],
    "ray_cluster_throughput.py": ["--users", "2000", "--serve-users", "300", "--eval-users", "50",
                                  "--object-store-gb", "0.1", "--models", "ItemKNN", "FEBR"],
    "scale_table.py": ["--sizes", "100k", "--users", "400", "--models", "ALS", "ItemKNN", "--out", "{tmp}/scale"],
    "tastes_linear_stack.py": ["--users", "600", "--items", "300", "--ranks", "8,16", "--components", "4",
                               "--val-users", "50", "--eval-users", "50"],
    "tastes_catalogue.py": ["--users", "300", "--items", "120", "--models", "FEBR,ItemKNN,planted,inferred", "--eval-users", "50"],
    "updates.py": ["--models", "ALS,ItemKNN,EASE"],
    "ann_topn.py": ["--runs", "1", "--nprobe", "4"],
    "in_practice_costs.py": ["--sizes", "small", "--models", "Popularity", "--repeats", "1", "--out", "{tmp}/costs"],
}  # fmt: skip
#: Modules of optional extras (pyproject.toml: the ``bench`` extra's peers, ``ray``): a script
#: needing one that is absent is skipped (the README's test command installs ``test`` alone).
OPTIONAL = ("lightfm", "sparse_dot_topn", "lightgbm", "ray")


def test_every_script_has_its_small_settings():
    assert sorted(SMOKE) == SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_script_runs_small(script, tmp_path):
    git = shutil.which("git")
    if script == "bench_regression.py" and (
        not git or subprocess.run([git, "-C", str(ROOT), "rev-parse", "HEAD"]).returncode
    ):
        pytest.skip("bench_regression.py times this checkout against a git worktree: not a git checkout")
    env = dict(os.environ, RECSYS_LTR_STANDIN_DATA="1", NUMBA_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "standin"), str(ROOT), env.get("PYTHONPATH", "")])
    args = [a.format(tmp=tmp_path) for a in SMOKE[script]]
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env,
    )  # fmt: skip
    missing = re.findall(r"No module named '(\w+)", done.stderr)
    if done.returncode and missing and missing[-1] in OPTIONAL:
        pytest.skip(f"{script} needs {missing[-1]}, of an optional extra")
    assert done.returncode == 0, done.stderr[-4000:]


def test_a_stopped_scale_row_keeps_the_phases_it_finished():
    """``scale_table.py``: a model stopped by its budget after the fit shows the fit's figures, then
    why it stopped; its exponents are those of the costs measured at two sizes or more."""
    code = """if True:
        import json, sys
        sys.path.insert(0, "benchmarks")
        import scale_table as t
        fit = {"fit_wall": 20.0, "fit_cpu": 30.0, "fit_peak_gb": 1.5}
        full = {**fit, "recommend_wall": 1.0, "recommend_cpu": 2.0, "evaluate_wall": 1.0, "evaluate_cpu": 2.0,
                "save_s": 0.1, "load_s": 0.2, "file_mb": 5.0, "ADG": 0.2, "REC@20": 0.3}
        small = {"size": "100k", "model": "ALS", "positives": 1000, **full}
        stopped = {"size": "1m", "model": "ALS", "positives": 10000, **fit, "failed": "over the budget"}
        print(json.dumps([t.cells(stopped), t.growth([small, stopped])]))
    """
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    row, exponents = json.loads(done.stdout.splitlines()[-1])
    assert row[2:5] == ["20 / 30", "1.50", "over the budget"] and row[5:] == [""] * 5
    assert exponents["ALS"].keys() == {"fit_cpu", "fit_peak_gb"} and abs(exponents["ALS"]["fit_cpu"] - 0.0) < 1e-9
