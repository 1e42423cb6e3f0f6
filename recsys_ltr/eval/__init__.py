"""Benchmark runs: the dissertation's experimental protocol (``python -m recsys_ltr.eval``)."""

from recsys_ltr.eval.results import FoldResult
from recsys_ltr.eval.runner import run_experiment
from recsys_ltr.eval.tuning import tune_and_test

__all__ = ["FoldResult", "run_experiment", "tune_and_test"]
